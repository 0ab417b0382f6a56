"""Diagnosands (ds.kng.diagnose): bias, SD, RMSE, MAE and coverage with their Monte Carlo SEs.

The store is synthetic with known laws: in every cell the error ``e = estimate − θ*`` of a
private mechanism is ``N(b_j, s²)`` with a per-coefficient bias ``b_j`` added to the estimate
and ``s = sd(n, ε)``; the non-private estimate is ``θ* + se·Z`` (``se = σ/√n``, the store's
standard errors), unbiased with 95 % coverage.  So bias, SD, RMSE = √(b² + s²), MAE = E|N(b, s²)|
and coverage P(|e| ≤ 1.96·se) are known in closed form, and diagnose() must recover each of
them within 4 of its own stated Monte Carlo SEs at fixed seeds — and must not recover a wrong
value (negative control).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import xarray as xr
from scipy import stats

import kngflow.analysis  # noqa: F401  (registers ds.kng)
from kngflow.analysis.diagnosands import diagnose
from kngflow.analysis.report import write_report
from synthetic import SyntheticMechanism as SM
from synthetic import synthetic_dataset, write_store

N = [100, 1000]
EPS = [0.5, 1.0]
R = 400
D = 3
Z = float(stats.norm.ppf(0.975))
#: per-coefficient bias added to each mechanism's estimate
BIAS = {"ref": np.zeros(D), "noisy": np.zeros(D), "biased": np.array([0.1, -0.05, 0.04])}
SD = {"noisy": lambda n, e: 0.3 / e, "biased": lambda n, e: 0.05 / e}
PARTIAL = 300  # "biased" has only this many replicates finished


def _mechanisms():
    return [
        SM("ref", "nonprivate", private=False),
        SM("noisy", "made_up_a", SD["noisy"], base="truth", private=True),
        SM("biased", "made_up_b", SD["biased"], base="truth", private=True),
    ]


def _done(label, n, eps, r):
    return label != "biased" or r < PARTIAL


def _truth(label: str, n: int, eps: float) -> dict[str, np.ndarray]:
    """Exact diagnosands per coefficient for the cell (label, n, eps)."""
    se = 1.0 / math.sqrt(n)  # sigma = 1
    b = BIAS[label]
    s = se if label == "ref" else SD[label](n, eps)
    mae = s * math.sqrt(2 / math.pi) * np.exp(-(b**2) / (2 * s * s)) + b * (1 - 2 * stats.norm.cdf(-b / s))
    cov = stats.norm.cdf((Z * se - b) / s) - stats.norm.cdf((-Z * se - b) / s)
    return {"bias": b, "sd": np.full(D, s), "rmse": np.sqrt(b**2 + s**2), "mae": mae, "coverage": cov}


@pytest.fixture(scope="module")
def raw():
    ds = synthetic_dataset(_mechanisms(), n=N, epsilon=EPS, replicates=R, d=D, seed=20240611, done=_done)
    shift = xr.DataArray(np.stack([BIAS[m] for m in ds["mechanism"].values]), dims=("mechanism", "coef"),
                         coords={"mechanism": ds["mechanism"]})
    ds["estimate"] = ds["estimate"] + shift
    # unfinished cells hold garbage, not NaN: only done == 1 may count
    ds["estimate"] = ds["estimate"].where(ds["done"] == 1, 1e6)
    return ds


@pytest.fixture(scope="module")
def store_path(raw, tmp_path_factory):
    path = tmp_path_factory.mktemp("diag") / "diag.zarr"
    write_store(raw, path, replicate_chunk=100)
    return path


@pytest.fixture(scope="module")
def store(store_path):
    return xr.open_zarr(store_path, consolidated=False)


@pytest.fixture(scope="module")
def diag(store):
    out = store.kng.diagnose()
    assert out["bias"].chunks is not None and out["rmse_se"].chunks is not None  # lazy on a dask store
    return out.compute()


def _zscores(diag, name, truth_of=_truth):
    """(estimate − truth) / stated MCSE over every cell and coefficient."""
    zs = []
    for m in diag["mechanism"].values:
        for n in N:
            for e in EPS:
                cell = diag.sel(mechanism=m, n=n, epsilon=e)
                truth = truth_of(str(m), n, e)[name]
                se = cell[f"{name}_se"].values
                if name == "coverage":  # at 0/R or R/R the binomial SE is 0: the Wilson interval speaks
                    half = (cell["coverage_hi"].values - cell["coverage_lo"].values) / (2 * Z)
                    se = np.where(se > 0, se, half)
                zs.append((cell[name].values - truth) / se)
    return np.concatenate(zs)


@pytest.mark.parametrize("name", ["bias", "sd", "rmse", "mae", "coverage"])
def test_diagnosands_recover_known_values_within_their_mcse(diag, name):
    z = _zscores(diag, name)
    assert np.isfinite(z).all()
    assert np.abs(z).max() < 4, (name, z)
    # and the stated MCSEs are not inflated: the z-scores spread like N(0, 1)
    assert 0.5 < np.sqrt(np.mean(z**2)) < 1.6, (name, z)


def test_negative_control_a_wrong_truth_is_not_recovered(diag):
    """The same check rejects a wrong bias (zero for the biased mechanism) and a wrong SD (30 % off)."""
    def zero_bias(label, n, e):
        t = _truth(label, n, e)
        return {**t, "bias": np.zeros(D)}

    def wrong_sd(label, n, e):
        t = _truth(label, n, e)
        return {**t, "sd": 1.3 * t["sd"]}

    z = _zscores(diag.sel(mechanism=["biased"]), "bias", zero_bias)
    assert np.abs(z).min() > 4  # every cell flags the bias
    z = _zscores(diag, "sd", wrong_sd)
    assert np.abs(z).min() > 4
    # and the unbiased mechanisms stay unflagged against their true (zero) bias
    assert np.abs(_zscores(diag.sel(mechanism=["ref", "noisy"]), "bias")).max() < 4


def test_only_finished_replicates_count(diag):
    assert (diag["n_done"].sel(mechanism="biased") == PARTIAL).all()
    assert (diag["n_valid"].sel(mechanism="biased") == PARTIAL).all()
    assert (diag["n_done"].sel(mechanism=["ref", "noisy"]) == R).all()
    # the 1e6 garbage in unfinished cells would dominate every statistic
    assert float(abs(diag["bias"]).max()) < 1 and float(diag["rmse"].max()) < 1
    # dims and coordinates
    assert diag["bias"].dims == ("mechanism", "n", "epsilon", "coef")
    assert diag["n_done"].dims == ("mechanism", "n", "epsilon")
    np.testing.assert_allclose(diag["theta_star"].values, np.linspace(-1, 1, D))


def test_closed_form_mcse_matches_formulas_and_bootstrap(raw, diag, store):
    # bias SE is SD/√k, RMSE² ≈ bias² + SD²·(k−1)/k, coverage SE binomial
    k = diag["n_valid"]
    np.testing.assert_allclose(diag["bias_se"], diag["sd"] / np.sqrt(k))
    np.testing.assert_allclose(diag["rmse"] ** 2, diag["bias"] ** 2 + diag["sd"] ** 2 * (k - 1) / k, rtol=1e-10)
    p = diag["coverage"]
    np.testing.assert_allclose(diag["coverage_se"], np.sqrt(p * (1 - p) / k))
    assert ((diag["coverage_lo"] <= p) & (p <= diag["coverage_hi"])).all()
    assert ((diag["coverage_lo"] >= 0) & (diag["coverage_hi"] <= 1)).all()
    # the closed forms agree with the bootstrap (fixed seed)
    boot = store.kng.diagnose(mcse="bootstrap", n_boot=300, seed=3).compute()
    assert boot.attrs["mcse"] == "bootstrap"
    for name in ("bias", "sd", "rmse", "mae"):
        ratio = (boot[f"{name}_se"] / diag[f"{name}_se"]).values.ravel()
        assert 0.9 < np.median(ratio) < 1.1, (name, np.median(ratio))
        assert ratio.min() > 0.7 and ratio.max() < 1.4, (name, ratio.min(), ratio.max())
    xr.testing.assert_allclose(boot["bias"], diag["bias"])  # the point estimates do not change


def test_in_memory_dataset_gives_the_same_numbers(raw, diag):
    eager = diagnose(raw)
    assert eager["bias"].chunks is None
    xr.testing.assert_allclose(eager.reset_coords(drop=True), diag.reset_coords(drop=True))


def test_coverage_needs_standard_errors(raw):
    no_se = raw.drop_vars("ols_stderr")
    no_se.attrs["reference_stderr"] = ""
    out = diagnose(no_se)
    assert "coverage" not in out and "bias" in out and out.attrs["stderr"] == ""
    with pytest.raises(ValueError, match="no variable 'nope'"):
        diagnose(raw, stderr="nope")
    with pytest.raises(ValueError, match="mcse="):
        diagnose(raw, mcse="jackknife")


@pytest.mark.parametrize("missing", ["estimate", "theta_star"])
def test_store_without_a_needed_variable_gives_a_clear_error(raw, missing):
    with pytest.raises(ValueError, match=f"the store has no variable '{missing}'"):
        raw.drop_vars(missing).kng.diagnose()


def test_report_shows_per_coefficient_bias_and_rmse(store_path, tmp_path):
    md = write_report(store_path, tmp_path / "out")
    section = md.split("## Bias and RMSE per coefficient")[1].split("\n## ")[0]
    assert "### biased (made_up_b, ε-DP)" in section and "### ref (nonprivate)" in section
    biased = section.split("### biased")[1].split("###")[0]
    rows = [r for r in biased.splitlines() if r.startswith("| ")][1:]
    # largest n for each of the two ε, one row per coefficient; every biased coefficient flagged
    assert len(rows) == 2 * D
    assert all(r.startswith(("| 1/2 | 10^3 |", "| 1 | 10^3 |")) for r in rows)
    assert sum("‡" in r for r in rows) >= 2 * D - 1
    assert "bias ± MCSE" in biased and "RMSE ± MCSE" in biased and "±" in rows[0]
    ref = section.split("### ref")[1].split("###")[0]
    ref_rows = [r for r in ref.splitlines() if r.startswith("| any |")]
    assert len(ref_rows) == D  # a non-private mechanism ignores ε: one block, ε "any"
    assert not any("‡" in r for r in ref_rows)


def test_report_without_estimate_says_why(raw, tmp_path):
    ds = raw.drop_vars("estimate")
    write_store(ds, tmp_path / "noest.zarr")
    md = write_report(tmp_path / "noest.zarr", tmp_path / "out")
    assert "## Bias and RMSE per coefficient\n\nNot computed: the store has no estimate variable." in md

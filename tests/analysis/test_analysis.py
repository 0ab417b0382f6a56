"""Tests of kngflow.analysis: the ds.kng accessor, Monte Carlo summaries, slope fits, coverage, figures.

Every store here is synthetic with exactly the contract schema (docs/contracts.md), written with
``to_zarr`` to tmp_path and reopened with ``xr.open_zarr`` (kngflow.analysis.synthetic), with fixed
seeds and error laws known in closed form.
"""

from __future__ import annotations

import json
import math
import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr

import kngflow.analysis  # noqa: F401  (registers ds.kng)
from kngflow.analysis import figures, summaries
from synthetic import SyntheticMechanism as SM
from synthetic import synthetic_dataset, write_store

Z975 = 1.959963984540054
N_GRID = [10**2, 10**3, 10**4, 10**5, 10**6, 10**7]


def _forbid_compute(*args, **kwargs):
    raise AssertionError("something was computed while building a lazy result")


@pytest.fixture(scope="module")
def slope_store(tmp_path_factory):
    """Non-private (slope −1/2), KNG (C n^-1/2 + K n^-1), exponential (K n^-1/2), a slope −1 control.

    n = 10^2..10^7, 100 replicates, d = 12 as in KNG §4.3; n = 10^7 unfinished except 40
    non-private replicates (a partial store).
    """
    mechs = [
        SM("NonPrivate", "nonprivate"),
        SM("KNG", "kng", lambda n, e: 0.3 / np.sqrt(n) + 5.0 / n),
        SM("ExpMech", "exponential", lambda n, e: 2.0 / np.sqrt(n)),
        SM("Fast", "objective", lambda n, e: 20.0 / n, base="truth"),
    ]
    ds = synthetic_dataset(
        mechs,
        n=N_GRID,
        replicates=100,
        d=12,
        seed=1,
        done=lambda label, n, e, r: n < 10**7 or (label == "NonPrivate" and r < 40),
    )
    path = tmp_path_factory.mktemp("stores") / "slopes.zarr"
    return ds, write_store(ds, path, replicate_chunk=50)


# ---------------------------------------------------------------------------
# accessor, kinds, reference
# ---------------------------------------------------------------------------
def test_accessor_registered_and_kinds_from_spec(slope_store):
    _, ds = slope_store
    assert ds.kng.kinds == {"NonPrivate": "nonprivate", "KNG": "kng", "ExpMech": "exponential", "Fast": "objective"}
    assert ds.kng.reference == "NonPrivate"
    assert ds.kng.labels_of_kind("kng") == ["KNG"]


@pytest.mark.parametrize(
    "spec",
    [
        '[mechanisms.np]\nkind = "nonprivate"\n[mechanisms.k]\nkind = "kng"\n',
        '[study]\nname = "x"\n[[study.mechanisms]]\nlabel = "np"\nkind = "nonprivate"\n'
        '[[study.mechanisms]]\nlabel = "k"\nkind = "kng"\nnorm = "linf"\n',
    ],
)
def test_kinds_from_other_spec_layouts(spec):
    ds = xr.Dataset(coords={"mechanism": ["k", "np"]}, attrs={"spec": spec})
    assert summaries.kinds_by_label(ds) == {"k": "kng", "np": "nonprivate"}
    assert summaries.reference_label(ds) == "np"


def test_reference_argument_and_missing_reference(slope_store):
    raw, _ = slope_store
    no_spec = raw.copy()
    no_spec.attrs = {}
    assert no_spec.kng.reference is None
    with pytest.raises(ValueError, match="reference"):
        no_spec.kng.ratio()
    with pytest.raises(ValueError, match="reference"):
        no_spec.kng.coverage()
    assert "ratio_to_reference" not in no_spec.kng.summary()
    r = no_spec.kng.ratio(reference="NonPrivate")["ratio"].sel(mechanism="NonPrivate", n=100)
    np.testing.assert_allclose(r, 1.0)
    with pytest.raises(ValueError, match="not a mechanism label"):
        no_spec.kng.ratio(reference="nope")


# ---------------------------------------------------------------------------
# summaries: lazy, correct, quiet on empty groups
# ---------------------------------------------------------------------------
def test_summaries_are_lazy(slope_store):
    _, ds = slope_store
    with dask.config.set(scheduler=_forbid_compute):
        s = ds.kng.summary()
        cov = ds.kng.coverage(how="per_coef")
        rat = ds.kng.ratio()
    for obj in (s, cov, rat):
        for name, var in obj.data_vars.items():
            assert isinstance(var.data, da.Array), name
    # only reduced results come back: no replicate dimension anywhere
    assert "replicate" not in s.dims and "replicate" not in cov.dims
    assert set(s["mean_error"].dims) == {"mechanism", "n", "epsilon"}


def test_summary_matches_numpy(slope_store):
    raw, ds = slope_store
    s = ds.kng.summary().compute()
    err = np.where(raw["done"].values == 1, raw["error"].values, np.nan)
    i, j = 1, 2  # KNG at n = 10^4
    e = err[i, j, 0]
    e = e[np.isfinite(e)]
    c = s.isel(mechanism=i, n=j, epsilon=0)
    k = e.size
    assert int(c["n_done"]) == int(c["n_valid"]) == k == 100
    np.testing.assert_allclose(c["mean_error"], e.mean(), rtol=1e-12)
    np.testing.assert_allclose(c["median_error"], np.median(e), rtol=1e-12)
    np.testing.assert_allclose(c["sd_error"], e.std(ddof=1), rtol=1e-10)
    np.testing.assert_allclose(c["mean_error_se"], e.std(ddof=1) / math.sqrt(k), rtol=1e-10)
    np.testing.assert_allclose(c["mean_log10_error"], np.log10(e).mean(), rtol=1e-12)
    np.testing.assert_allclose(c["mean_log10_error_se"], np.log10(e).std(ddof=1) / math.sqrt(k), rtol=1e-10)
    np.testing.assert_allclose(c["log10_mean_error"], math.log10(e.mean()), rtol=1e-12)
    delta = e.std(ddof=1) / (math.sqrt(k) * e.mean() * math.log(10))
    np.testing.assert_allclose(c["log10_mean_error_se"], delta, rtol=1e-10)
    # the delta-method SE is in the paper's range for 100 replicates of a chi-like error (≈ 0.01–0.03)
    assert 0.005 < float(c["log10_mean_error_se"]) < 0.03


def test_partial_groups_are_nan_and_quiet(slope_store):
    _, ds = slope_store
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = ds.kng.summary().compute()
        cov = ds.kng.coverage(how="per_coef").compute()
        fits = ds.kng.slopes()
    big = s.sel(n=10**7, epsilon=1.0)
    assert big["n_done"].sel(mechanism="NonPrivate") == 40
    assert big["n_done"].sel(mechanism="KNG") == 0
    for name in ("mean_error", "median_error", "log10_mean_error", "log10_mean_error_se", "ratio_to_reference"):
        assert np.isnan(big[name].sel(mechanism="KNG")), name
        assert np.isfinite(big[name].sel(mechanism="NonPrivate")), name
    assert np.isnan(cov["coverage"].sel(mechanism="KNG", n=10**7)).all()
    assert int(fits["n_points"].sel(mechanism="NonPrivate", epsilon=1.0)) == 6
    assert int(fits["n_points"].sel(mechanism="KNG", epsilon=1.0)) == 5


def test_all_unfinished_store_gives_nan_everywhere(tmp_path):
    raw = synthetic_dataset([SM("np", "nonprivate"), SM("k", "kng", lambda n, e: 1 / n)], n=[100, 1000], replicates=8, d=2, done=lambda *a: False)
    ds = write_store(raw, tmp_path / "empty.zarr")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = ds.kng.summary().compute()
        fits = ds.kng.slopes()
        cov = ds.kng.coverage().compute()
    assert (s["n_done"] == 0).all()
    assert s["mean_error"].isnull().all() and s["median_error"].isnull().all()
    assert fits["slope"].isnull().all() and (fits["n_points"] == 0).all()
    assert cov["coverage"].isnull().all()
    assert ds.kng.describe_completeness().startswith("0 of 32 cells finished")


# ---------------------------------------------------------------------------
# slopes
# ---------------------------------------------------------------------------
def test_slope_recovers_minus_half_and_negative_control_fails(slope_store):
    _, ds = slope_store
    fits = ds.kng.slopes().sel(epsilon=1.0)
    np_fit = fits.sel(mechanism="NonPrivate")
    slope, se = float(np_fit["slope"]), float(np_fit["slope_se"])
    # 4 SE: a false failure is rarer than 1 in 10^4; and the SE is small enough for ± 0.03
    assert abs(slope + 0.5) <= 4 * se
    assert 4 * se < 0.03
    assert abs(slope + 0.5) <= 0.03
    exp_fit = fits.sel(mechanism="ExpMech")
    assert abs(float(exp_fit["slope"]) + 0.5) <= 4 * float(exp_fit["slope_se"])
    # negative control: error ∝ 1/n must fail the −0.5 ± 0.03 check (and the SE-based one)
    ctrl = fits.sel(mechanism="Fast")
    assert abs(float(ctrl["slope"]) + 0.5) > 0.03
    assert abs(float(ctrl["slope"]) + 0.5) > 4 * float(ctrl["slope_se"])
    assert abs(float(ctrl["slope"]) + 1.0) <= 4 * float(ctrl["slope_se"])


def test_slope_goodness_of_fit_flags_curved_series(slope_store):
    _, ds = slope_store
    fits = ds.kng.slopes().sel(epsilon=1.0)
    straight, curved = fits.sel(mechanism="NonPrivate"), fits.sel(mechanism="KNG")
    # a straight line in log-log: χ²/dof ≈ 1; p < 1e-5 for a true line is rarer than 1 in 10^4
    assert float(straight["p_fit"]) > 1e-5 and not bool(straight["curved"])
    assert float(straight["slope_se_inflated"]) == float(straight["slope_se"])
    # negative control: C/√n + K/n over n = 10^2..10^6 is not a line, and its SE is inflated
    assert float(curved["p_fit"]) < 1e-3 and bool(curved["curved"]) and float(curved["chi2_dof"]) > 5
    ratio = float(curved["slope_se_inflated"]) / float(curved["slope_se"])
    assert ratio == pytest.approx(math.sqrt(float(curved["chi2_dof"])))


def test_slope_fit_statistics_closed_form():
    x = np.array([2.0, 3.0, 4.0, 5.0])
    se = np.full(4, 0.1)
    y = -0.5 * x + np.array([0.1, -0.1, -0.1, 0.1])
    fit = summaries._wls_line(x, y, se, absolute_sigma=True)
    resid = y - (fit["intercept"] + fit["slope"] * x)
    assert fit["chi2"] == pytest.approx(np.sum((resid / se) ** 2))
    assert fit["chi2_dof"] == pytest.approx(fit["chi2"] / 2)
    assert fit["p_fit"] == pytest.approx(math.exp(-fit["chi2"] / 2))  # χ² with 2 dof: sf = exp(−x/2)
    two = summaries._wls_line(x[:2], y[:2], se[:2], absolute_sigma=True)
    assert math.isnan(two["p_fit"]) and two["curved"] == 0.0


def test_wilson_interval_known_values():
    lo, hi = summaries.wilson_interval(0.0, 10, Z975)
    assert lo == pytest.approx(0.0, abs=1e-15) and hi == pytest.approx(Z975**2 / (10 + Z975**2))
    lo, hi = summaries.wilson_interval(1.0, 50, Z975)
    assert hi == pytest.approx(1.0) and 0.92 < lo < 0.93  # never the zero-width "1.000 ± 0.000"
    lo, hi = summaries.wilson_interval(np.array([0.5]), np.array([0]), 1.0)
    assert np.isnan(lo).all() and np.isnan(hi).all()


def test_median_se_matches_the_spread_of_medians():
    """McKean–Schrader SE ≈ the SD of sample medians (normal data: √(π/2)·σ/√k); the mean's SE does not."""
    rng = np.random.default_rng(11)
    a = rng.standard_normal((4000, 101))
    target = np.median(a, axis=1).std()
    se = summaries._median_se_last(a).mean()
    assert abs(se / target - 1) < 0.08
    wrong = (a.std(axis=1, ddof=1) / np.sqrt(101)).mean()  # negative control: the SE of the mean
    assert abs(wrong / target - 1) > 0.08
    a[:, 60:] = np.nan  # NaN (unfinished replicates) are ignored
    assert abs(summaries._median_se_last(a).mean() / np.nanmedian(a, axis=1).std() - 1) < 0.08
    assert np.isnan(summaries._median_se_last(np.array([1.0, np.nan, np.nan])))


def test_slope_n_min_restricts_the_fit(slope_store):
    _, ds = slope_store
    full = ds.kng.slopes().sel(mechanism="KNG", epsilon=1.0)
    tail = ds.kng.slopes(n_min=10**4).sel(mechanism="KNG", epsilon=1.0)
    assert int(full["n_points"]) == 5 and int(tail["n_points"]) == 3
    assert float(tail["n_min_used"]) == 10**4 and float(tail["n_max_used"]) == 10**6
    # KNG = C n^-1/2 + K n^-1 is steeper than −1/2 over the whole range, ≈ −1/2 asymptotically
    assert float(full["slope"]) < -0.5 - 4 * float(full["slope_se"])
    assert abs(float(tail["slope"]) + 0.5) <= 4 * float(tail["slope_se"])


def test_slope_wls_matches_closed_form():
    """Exact line through points with unequal SEs, and a hand-checked 3-point fit."""
    x = np.array([2.0, 3.0, 4.0])
    se = np.array([0.1, 0.2, 0.1])
    fit = summaries._wls_line(x, 1.0 - 0.5 * x, se, absolute_sigma=True)
    assert fit["slope"] == pytest.approx(-0.5) and fit["intercept"] == pytest.approx(1.0)
    w = 1 / se**2
    sxx = np.sum(w * (x - np.sum(w * x) / np.sum(w)) ** 2)
    assert fit["slope_se"] == pytest.approx(1 / math.sqrt(sxx))
    y = np.array([0.0, -0.4, -1.0])
    scaled = summaries._wls_line(x, y, se, absolute_sigma=False)
    known = summaries._wls_line(x, y, se, absolute_sigma=True)
    assert scaled["slope_se"] == pytest.approx(known["slope_se"] * math.sqrt(known["chi2"] / 1))


# ---------------------------------------------------------------------------
# ratios
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ratio_store(tmp_path_factory):
    raw = synthetic_dataset([SM("np", "nonprivate"), SM("double", "kng"), SM("noisy", "exponential", lambda n, e: 1 / np.sqrt(n))], n=[100, 10_000], replicates=60, d=4, seed=3)
    theta = raw["theta_star"].values
    npest = raw["estimate"].sel(mechanism="np").values
    est = raw["estimate"].values.copy()
    est[1] = theta + 2.0 * (npest - theta)
    raw["estimate"].values[:] = est
    raw["error"].values[:] = np.sqrt(((est - theta) ** 2).sum(-1))
    # the reference misses replicates 0..9 at n = 100: the ratio is paired on the other 50
    raw["done"].loc[dict(mechanism="np", n=100, replicate=slice(0, 9))] = 0
    raw["error"].loc[dict(mechanism="np", n=100, replicate=slice(0, 9))] = np.nan
    return raw, write_store(raw, tmp_path_factory.mktemp("stores") / "ratio.zarr", replicate_chunk=20)


def test_ratio_to_nonprivate(ratio_store):
    raw, ds = ratio_store
    rat = ds.kng.ratio().compute().sel(epsilon=1.0)
    np.testing.assert_allclose(rat["ratio"].sel(mechanism="double"), 2.0, rtol=1e-12)
    np.testing.assert_allclose(rat["ratio_se"].sel(mechanism="double"), 0.0, atol=1e-6)
    np.testing.assert_allclose(rat["ratio"].sel(mechanism="np"), 1.0)
    assert rat["n_paired"].sel(mechanism="noisy", n=100) == 50
    assert rat["n_paired"].sel(mechanism="noisy", n=10_000) == 60
    # paired ratio equals the ratio of means over the jointly finished replicates
    e = raw["error"].sel(epsilon=1.0, n=100)
    a, b = e.sel(mechanism="noisy").values[10:], e.sel(mechanism="np").values[10:]
    np.testing.assert_allclose(rat["ratio"].sel(mechanism="noisy", n=100), a.mean() / b.mean(), rtol=1e-12)
    r = a.mean() / b.mean()
    var = (a.var(ddof=1) - 2 * r * np.cov(a, b)[0, 1] + r**2 * b.var(ddof=1)) / (a.size * b.mean() ** 2)
    np.testing.assert_allclose(rat["ratio_se"].sel(mechanism="noisy", n=100), math.sqrt(var), rtol=1e-9)
    # summary carries the same ratio, and reference= switches the denominator
    s = ds.kng.summary().compute()
    np.testing.assert_allclose(s["ratio_to_reference"], ds.kng.ratio()["ratio"].compute())
    flipped = ds.kng.ratio(reference="double")["ratio"].sel(mechanism="np", epsilon=1.0).compute()
    np.testing.assert_allclose(flipped, 0.5, rtol=1e-12)


# ---------------------------------------------------------------------------
# coverage (Awan–Slavković Algorithm 4)
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def coverage_store(tmp_path_factory):
    """Estimates placed at known multiples of the OLS SE from the non-private estimate."""
    R, d = 400, 3
    labels = ["np", "inside", "outside", "half", "coef0_out", "gauss"]
    raw = synthetic_dataset([SM(lab, "nonprivate" if lab == "np" else "objective_ext") for lab in labels], n=[1000, 100_000], epsilon=[0.5, 2.0], replicates=R, d=d, seed=7)
    se = raw["ols_stderr"].values  # (n, replicate, coef)
    npest = raw["estimate"].sel(mechanism="np").values  # (n, eps, replicate, coef)
    rng = np.random.default_rng(11)
    sign = np.where(rng.random(npest.shape) < 0.5, -1.0, 1.0)
    se_b = se[:, None]
    alternate = np.where((np.arange(R) % 2 == 0)[None, None, :, None], 0.5, 3.0)
    offsets = {
        "inside": 0.5 * se_b * sign,
        "outside": 3.0 * se_b * sign,
        "half": alternate * se_b * sign,
        "coef0_out": np.where(np.arange(d) == 0, 3.0, 0.5) * se_b * sign,
        "gauss": se_b * rng.standard_normal(npest.shape),
    }
    est = raw["estimate"].values.copy()
    for lab, off in offsets.items():
        est[labels.index(lab)] = npest + off
    # an unfinished replicate of "inside" must not count
    raw["estimate"].values[:] = est
    raw["done"].loc[dict(mechanism="inside", replicate=slice(0, 99))] = 0
    raw["estimate"].loc[dict(mechanism="inside", replicate=slice(0, 99))] = np.nan
    return raw, write_store(raw, tmp_path_factory.mktemp("stores") / "coverage.zarr", replicate_chunk=100)


def test_coverage_known_values(coverage_store):
    raw, ds = coverage_store
    R = raw.sizes["replicate"]
    allc = ds.kng.coverage(how="all").compute()
    per = ds.kng.coverage(how="per_coef").compute()
    mean = ds.kng.coverage(how="mean").compute()
    assert allc.attrs["z"] == pytest.approx(Z975)
    np.testing.assert_array_equal(allc["coverage"].sel(mechanism="np"), 1.0)
    np.testing.assert_array_equal(allc["coverage"].sel(mechanism="inside"), 1.0)
    np.testing.assert_array_equal(allc["n_valid"].sel(mechanism="inside"), R - 100)
    np.testing.assert_array_equal(allc["coverage"].sel(mechanism="outside"), 0.0)
    np.testing.assert_array_equal(allc["coverage"].sel(mechanism="half"), 0.5)
    np.testing.assert_allclose(allc["coverage_se"].sel(mechanism="half"), math.sqrt(0.25 * R / (R - 1) / R))
    np.testing.assert_array_equal(allc["coverage"].sel(mechanism="coef0_out"), 0.0)
    np.testing.assert_array_equal(per["coverage"].sel(mechanism="coef0_out").transpose(..., "coef")[..., 0], 0.0)
    np.testing.assert_array_equal(per["coverage"].sel(mechanism="coef0_out").transpose(..., "coef")[..., 1:], 1.0)
    np.testing.assert_allclose(mean["coverage"].sel(mechanism="coef0_out"), 2 / 3)
    # Algorithm 4 uses the slopes only: dropping coef 0 gives full coverage
    np.testing.assert_array_equal(ds.kng.coverage(how="all", coefs=slice(1, None))["coverage"].sel(mechanism="coef0_out"), 1.0)
    np.testing.assert_array_equal(ds.kng.coverage(how="all", coefs=[1, 2])["coverage"].sel(mechanism="coef0_out"), 1.0)
    # a 99.9% interval (z ≈ 3.29) contains the 3·SE offsets
    np.testing.assert_array_equal(ds.kng.coverage(level=0.999)["coverage"].sel(mechanism="outside"), 1.0)
    with pytest.raises(ValueError, match="how"):
        ds.kng.coverage(how="some")


def test_coverage_gaussian_offsets_match_theory(coverage_store):
    raw, ds = coverage_store
    R, d = raw.sizes["replicate"], raw.sizes["coef"]
    per = ds.kng.coverage(how="per_coef")["coverage"].sel(mechanism="gauss").compute()
    allc = ds.kng.coverage(how="all")["coverage"].sel(mechanism="gauss").compute()
    p_all = 0.95**d
    assert np.all(np.abs(per - 0.95) <= 4 * math.sqrt(0.95 * 0.05 / R))
    assert np.all(np.abs(allc - p_all) <= 4 * math.sqrt(p_all * (1 - p_all) / R))
    # the non-private CI covers theta* 95% of the time (the solid line of A–S Figure 3)
    ref = ds.kng.reference_coverage(how="per_coef")["coverage"].compute()
    assert np.all(np.abs(ref - 0.95) <= 4 * math.sqrt(0.95 * 0.05 / R))


# ---------------------------------------------------------------------------
# completeness
# ---------------------------------------------------------------------------
def test_completeness_reports_what_is_missing(slope_store):
    _, ds = slope_store
    info = ds.kng.completeness()
    assert info["total"] == 4 * 6 * 100 and info["finished"] == 4 * 5 * 100 + 40
    text = ds.kng.describe_completeness()
    assert text.startswith("2040 of 2400 cells finished")
    assert "missing: n=10^7 (NonPrivate 40/100, KNG 0/100, ExpMech 0/100, Fast 0/100 replicates)" in text
    assert "10^6" not in text


def test_completeness_uniform_gap_is_one_phrase(tmp_path):
    raw = synthetic_dataset([SM("np", "nonprivate"), SM("k", "kng", lambda n, e: 1 / n)], n=[100, 10**7], epsilon=[0.5, 1.0], replicates=10, d=2, done=lambda lab, n, e, r: n == 100 or (e == 1.0 and r < 3))
    ds = write_store(raw, tmp_path / "p.zarr")
    text = ds.kng.describe_completeness()
    assert text.startswith("46 of 80 cells finished")
    assert "missing: n=10^7, ε=1/2 (0/10 replicates); n=10^7, ε=1 (3/10 replicates)" in text


# ---------------------------------------------------------------------------
# figures
# ---------------------------------------------------------------------------
def _labelled_lines(ax):
    return [ln for ln in ax.get_lines() if not ln.get_label().startswith("_")]


def test_figure_error_vs_n(slope_store):
    _, ds = slope_store
    fig = figures.figure_error_vs_n(ds, epsilon=1.0)
    (ax,) = fig.axes
    labels = ["NonPrivate", "KNG", "ExpMech", "Fast"]
    lines = _labelled_lines(ax)
    assert [ln.get_label() for ln in lines] == labels
    assert all(ln.get_marker() not in (None, "None", "") for ln in lines)
    assert [t.get_text() for t in ax.get_legend().get_texts()][:4] == labels
    # log10-transformed values on linear axes, labelled as such (the paper's "base 10 log of both axes")
    assert ax.get_xscale() == "linear" and ax.get_yscale() == "linear"
    assert ax.get_xlabel() == "log10(n)"
    assert ax.get_ylabel() == "log10(average ℓ2 distance to truth)"
    s = ds.kng.summary().compute().sel(epsilon=1.0)
    for ln in lines:
        np.testing.assert_allclose(ln.get_xdata(), np.log10(N_GRID))
        np.testing.assert_allclose(ln.get_ydata(), s["log10_mean_error"].sel(mechanism=ln.get_label()).values)
    assert np.isnan(lines[1].get_ydata()[-1])  # KNG at 10^7 unfinished: a gap, not a zero
    assert "ε = 1" in ax.get_title()
    # NonPrivate at 10^7 has 40 of 100 replicates: an open marker there, and a legend key for it
    partial = [ln for ln in ax.get_lines() if ln.get_label() == "_partial"]
    assert len(partial) == 1 and partial[0].get_xdata().tolist() == [7.0]
    assert partial[0].get_markerfacecolor() in ("white", (1.0, 1.0, 1.0, 1.0))
    assert ax.get_legend().get_texts()[-1].get_text() == "open: partial (< 100 replicates)"
    sub = figures.figure_error_vs_n(ds, epsilon=1.0, mechanisms=["KNG", "NonPrivate"], errorbars=False)
    assert [ln.get_label() for ln in _labelled_lines(sub.axes[0])] == ["KNG", "NonPrivate"]


@pytest.fixture(scope="module")
def eps_store(tmp_path_factory):
    mechs = [
        SM("MLE", "nonprivate"),
        SM("l1", "objective_ext", lambda n, e: 5 * 0.5 / (e * np.sqrt(n))),
        SM("linf", "objective_ext", lambda n, e: 2 * 0.5 / (e * np.sqrt(n))),
    ]
    raw = synthetic_dataset(mechs, n=[10**4, 10**6], epsilon=[1 / 16, 1 / 8, 1 / 4, 1 / 2, 1, 2, 4], replicates=40, d=5, seed=5)
    return raw, write_store(raw, tmp_path_factory.mktemp("stores") / "eps.zarr", replicate_chunk=40)


def test_figure_error_vs_epsilon(eps_store):
    raw, ds = eps_store
    fig = figures.figure_error_vs_epsilon(ds, n=10**4)
    (ax,) = fig.axes
    lines = _labelled_lines(ax)
    assert [ln.get_label() for ln in lines[:3]] == ["MLE", "l1", "linf"]
    zero = lines[3]
    assert zero.get_label().startswith("‖θ*‖₂")
    np.testing.assert_allclose(zero.get_ydata(), np.linalg.norm(raw["theta_star"].values))
    assert ax.get_xscale() == "log" and ax.xaxis.get_transform().base == 2
    assert ax.get_yscale() == "linear"
    assert "ε" in ax.get_xlabel() and ax.get_ylabel() == "median ℓ2 distance to truth"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1/16", "1/8", "1/4", "1/2", "1", "2", "4"]
    s = ds.kng.summary().compute().sel(n=10**4)
    np.testing.assert_allclose(lines[1].get_xdata(), ds["epsilon"].values)
    np.testing.assert_allclose(lines[1].get_ydata(), s["median_error"].sel(mechanism="l1").values)
    assert np.all(np.diff(lines[1].get_ydata()) < 0)  # more privacy budget, less error
    assert len(ax.containers) == 3  # ±1 SE bars (of the median) for every mechanism
    fig = figures.figure_error_vs_epsilon(ds, n=10**6, statistic="mean", logy=True)
    assert fig.axes[0].get_yscale() == "log" and fig.axes[0].get_ylabel() == "mean ℓ2 distance to truth"
    with pytest.raises(ValueError, match="n=... is required"):
        figures.figure_error_vs_epsilon(ds)
    # a store whose theta_star is not the truth (a fixed data set) says what the distance is to
    ref = ds.assign_attrs(reference="the non-private estimate")
    assert figures.figure_error_vs_epsilon(ref, n=10**4).axes[0].get_ylabel() == (
        "median ℓ2 distance to the non-private estimate")
    assert figures.figure_error_vs_n(ref, epsilon=1.0).axes[0].get_ylabel() == (
        "log10(average ℓ2 distance to the non-private estimate)")
    with pytest.raises(ValueError, match="epsilon=... is required"):
        figures.figure_error_vs_n(ds)


def test_figure_coverage_vs_epsilon(eps_store):
    _, ds = eps_store
    fig = figures.figure_coverage_vs_epsilon(ds, n=10**4)
    (ax,) = fig.axes
    lines = _labelled_lines(ax)
    assert [ln.get_label() for ln in lines] == ["l1", "linf", "nominal 0.95", "non-private CI covers θ*"]
    nominal = lines[2]
    np.testing.assert_allclose(nominal.get_ydata(), 0.95)
    assert nominal.get_linestyle() == "--"
    assert ax.get_xscale() == "log" and ax.xaxis.get_transform().base == 2
    assert ax.get_ylim() == pytest.approx((-0.03, 1.03))
    assert "95% CI" in ax.get_ylabel()
    cov = ds.kng.coverage(how="mean").compute().sel(n=10**4)
    np.testing.assert_allclose(lines[0].get_ydata(), cov["coverage"].sel(mechanism="l1").values)
    # ℓ∞ noise is smaller than ℓ1 noise: its coverage is at least as high at every ε
    assert np.all(lines[1].get_ydata() >= lines[0].get_ydata())
    allfig = figures.figure_coverage_vs_epsilon(ds, n=10**6, how="all")
    assert "all coefficients" in allfig.axes[0].get_ylabel()


def test_figure_facets_one_panel_per_value(eps_store):
    _, ds = eps_store
    fig = figures.figure_facets(ds, figures.figure_error_vs_epsilon)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == ["n = $10^{4}$", "n = $10^{6}$"]
    assert all(ax.get_legend() is None for ax in panels)
    (legend,) = fig.legends  # one legend for the figure
    assert [t.get_text() for t in legend.get_texts()][:3] == ["MLE", "l1", "linf"]
    per_eps = figures.figure_facets(ds, figures.figure_error_vs_n)
    assert len([ax for ax in per_eps.axes if ax.get_visible()]) == 7
    cov = figures.figure_facets(ds, figures.figure_coverage_vs_epsilon, how="all")
    assert "all coefficients" in cov.axes[0].get_ylabel() and cov.axes[1].get_ylabel() == ""
    with pytest.raises(ValueError, match="figure="):
        figures.figure_facets(ds, print)


def test_accessor_plot_shortcuts(eps_store):
    _, ds = eps_store
    fig = ds.kng.plot_error_vs_n(epsilon=1.0)
    assert fig.axes[0].get_xlabel() == "log10(n)"
    assert ds.kng.plot_coverage_vs_epsilon(n=10**4).axes[0].get_yscale() == "linear"


# ---------------------------------------------------------------------------
# ε-DP and (ε, δ)-DP in one study
# ---------------------------------------------------------------------------
def _delta_store(deltas: dict | None):
    mechs = [SM("np", "nonprivate"), SM("out", "output", lambda n, e: 1.0 / (n * e)),
             SM("sgd", "dpsgd", lambda n, e: 1.0 / (n * e))]
    ds = synthetic_dataset(mechs, n=[100, 1000], replicates=5, d=2, seed=2,
                           epsilon=[0.5, 1.0])
    if deltas is not None:
        ds.attrs["delta"] = json.dumps(deltas)
    return ds


def test_report_marks_epsilon_delta_mechanisms_when_mixed():
    from kngflow.analysis.report import report_markdown

    ds = _delta_store({"np": 0.0, "out": 0.0, "sgd": 1e-5})
    assert summaries.mechanism_deltas(ds) == {"np": 0.0, "out": 0.0, "sgd": 1e-5}
    md = report_markdown(ds)
    assert "mixes ε-DP and (ε, δ)-DP mechanisms" in md
    assert "sgd (dpsgd, (ε, δ=1e-05)-DP)" in md and "out (output, ε-DP)" in md
    rows = [ln for ln in md.splitlines() if ln.startswith("| sgd")]
    assert rows and all(ln.startswith("| sgd (ε, δ=1e-05) |") for ln in rows)  # every sgd row is marked
    assert figures._styles(ds)["sgd"]["legend"] == "sgd (ε, δ=1e-05)"


@pytest.mark.parametrize("deltas", [None, {"np": 0.0, "out": 0.0, "sgd": 0.0}])
def test_report_without_epsilon_delta_mechanisms_says_nothing_of_delta(deltas):
    """Stores written before δ was recorded (no attribute) read as ε-DP only."""
    from kngflow.analysis.report import report_markdown

    ds = _delta_store(deltas)
    assert set(summaries.mechanism_deltas(ds).values()) == {0.0}
    md = report_markdown(ds)
    assert "mixes" not in md and "δ=" not in md
    assert any(ln.startswith("| sgd |") for ln in md.splitlines())

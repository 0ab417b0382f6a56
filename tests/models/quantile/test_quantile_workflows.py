"""The quantile workflows through the real CLI: a reduced Figure 2 study is run, checked
and reported; every shipped quantile workflow validates; bad problem options exit 2."""

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from testkit import kngflow_cli, study_run
from kngflow.kernels import SAMPLER_CODES
from kngflow.sweep import load_spec

WORKFLOWS = Path(__file__).resolve().parents[3] / "workflows"
QUANTILE_WORKFLOWS = ["kng_quantile", "kng_quantile_large", "kng_quantile_tau", "kng_quantile_tau01", "kng_median"]


@pytest.mark.parametrize("name", QUANTILE_WORKFLOWS)
def test_workflows_validate(name):
    spec = load_spec(WORKFLOWS / f"{name}.toml")
    assert spec.name == name
    prob = spec.problem()
    assert set(spec.build_mechanisms()) == {"nonprivate", "kng", "exponential"}
    for n in spec.n:
        prob.check_n(n)


def test_figure2_spec_is_the_papers():
    spec = load_spec(WORKFLOWS / "kng_quantile.toml")
    prob = spec.problem()
    assert prob.name == "quantreg" and prob.tau == 0.5
    np.testing.assert_array_equal(prob.theta_star, [0.0, -1.0])
    assert list(spec.n) == [10, 100, 1_000, 10_000, 100_000]
    assert list(spec.epsilon) == [1.0] and len(spec.replicates) == 100
    mechs = spec.build_mechanisms()
    assert mechs["kng"].norm == "linf" and mechs["kng"].bound == 1.0 and mechs["kng"].steps == 1000


def small_figure2(tmp_path) -> Path:
    text = (WORKFLOWS / "kng_quantile.toml").read_text()
    text = text.replace("n = [10, 100, 1_000, 10_000, 100_000]", "n = [10, 300]")
    text = text.replace("replicates = 100", "replicates = 4")
    path = tmp_path / "fig2.toml"
    path.write_text(text)
    return path


@pytest.mark.slow
def test_figure2_end_to_end_through_the_cli(tmp_path, study_cluster):
    spec = small_figure2(tmp_path)
    store = tmp_path / "fig2.zarr"
    proc = study_run(study_cluster, spec, store)
    assert proc.returncode == 0, proc.stderr
    ds = xr.open_zarr(store)
    assert ds.attrs["problem"] == "quantreg" and "max|Y|" in ds.attrs["caveats"]
    assert int(ds["done"].sum()) == ds["done"].size == 3 * 2 * 4
    assert np.all(np.isfinite(ds["error"].values))
    np.testing.assert_array_equal(ds["theta_star"].values, [0.0, -1.0])
    sampler = ds["sampler"]
    assert np.all(sampler.sel(mechanism="nonprivate").values == SAMPLER_CODES["none"])
    assert np.all(sampler.sel(mechanism="kng").values == SAMPLER_CODES["surrogate_map"])
    assert np.all(sampler.sel(mechanism="exponential").values == SAMPLER_CODES["gibbs"])
    assert np.all(ds["steps"].sel(mechanism="kng").values == 1000 + 50)  # steps from [sampler], then 50 proposals
    assert np.all(ds["steps"].sel(mechanism="exponential").values == 10)  # gibbs_sweeps
    assert np.all(ds["scale"].values > 0)
    # KNG and the exponential mechanism stay in Theta (||theta||_1 <= 1 in scaled units)
    est = ds["estimate"].sel(mechanism=["kng", "exponential"]) / ds["scale"]
    assert float(np.abs(est).sum("coef").max()) <= 1.0 + 1e-9
    # the error of the non-private fit falls with n
    err = ds["error"].sel(mechanism="nonprivate").mean("replicate").squeeze()
    assert float(err.sel(n=300)) < float(err.sel(n=10))

    out = tmp_path / "report"
    proc = kngflow_cli("report", store, "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert (out / "error_vs_n.png").stat().st_size > 1000
    report = (out / "report.md").read_text()
    assert "kng_quantile" in report and "quantreg" in report

    # resuming a finished store computes nothing and changes nothing
    before = ds["estimate"].values.copy()
    proc = study_run(study_cluster, spec, store)
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_array_equal(xr.open_zarr(store)["estimate"].values, before)


@pytest.mark.parametrize(
    "old, new, field",
    [
        ("tau = 0.5", "tau = 1.5", "tau"),
        ("theta_star = [0.0, -1.0]", "theta_star = []", "theta_star"),
        ('protocol = "paper"', 'protocol = "public_bound"', "y_bound"),
        ('norm = "linf"', 'norm = "l7"', "norm"),
    ],
)
def test_bad_problem_option_exits_2(tmp_path, old, new, field):
    text = small_figure2(tmp_path).read_text()
    assert old in text
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace(old, new, 1))
    store = tmp_path / "bad.zarr"
    proc = kngflow_cli("run", bad, "--store", store, "--workers", 1, "--no-dashboard", process=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and field in proc.stderr and "Traceback" not in proc.stderr
    assert not store.exists()

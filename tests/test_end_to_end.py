"""End to end on real output: a reduced KNG Figure 1 study through the CLI, then the report.

Runs ``kngflow run`` (local Dask cluster, two workers) on the paper's linear-regression
study restricted to n <= 10^4, then ``kngflow report``, and checks the paper's claims on
the store: the non-private error falls like n^-1/2 (slope -0.5 +- 0.03), the exponential
mechanism stays well above the non-private error, and KNG approaches it as n grows.
"""

import subprocess
import sys

import numpy as np
import pytest
import xarray as xr

import kngflow.analysis  # noqa: F401  (registers ds.kng)

SPEC = """
name = "kng_linear_small"
seed = 7
[problem]
name = "linear"
d = 12
protocol = "paper"
[grid]
n = [100, 1_000, 10_000]
epsilon = [1.0]
replicates = 100
[sampler]
steps = 2_000
[[mechanisms]]
label = "nonprivate"
kind = "nonprivate"
[[mechanisms]]
label = "kng"
kind = "kng"
norm = "linf"
[[mechanisms]]
label = "exponential"
kind = "exponential"
[[mechanisms]]
label = "objective"
kind = "objective"
"""


def kngflow(*args, **kw):
    return subprocess.run([sys.executable, "-m", "kngflow.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=600, **kw)


@pytest.fixture(scope="module")
def figure1_store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fig1")
    spec = tmp / "fig1.toml"
    spec.write_text(SPEC)
    store = tmp / "fig1.zarr"
    proc = kngflow("run", spec, "--store", store, "--workers", 2)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return store


def test_figure1_claims_on_real_store(figure1_store):
    ds = xr.open_zarr(figure1_store)
    assert int(ds["done"].sum()) == ds["done"].size
    slopes = ds.kng.slopes().sel(epsilon=1.0)
    assert abs(float(slopes["slope"].sel(mechanism="nonprivate")) + 0.5) < 0.03
    ratio = ds.kng.ratio()["ratio"].sel(epsilon=1.0).compute()
    assert np.all(ratio.sel(mechanism="exponential").values > 1.5)
    # At n = 100 every private error is capped by the l1 ball; from n = 10^3 on, KNG's
    # excess error shrinks (O(1/n)) while the exponential mechanism's ratio does not.
    kng = ratio.sel(mechanism="kng").values
    exp = ratio.sel(mechanism="exponential").values
    assert kng[-1] < kng[-2] and exp[-1] > exp[-2] and kng[-1] < exp[-1]
    samplers = ds["sampler"].sel(mechanism="kng").compute()
    assert set(np.unique(samplers.values)) <= {1, 2}  # exact or Gibbs, recorded per release
    assert "WITHOUT privacy" in ds.attrs["caveats"]


def test_report_and_status_on_real_store(figure1_store, tmp_path):
    proc = kngflow("report", figure1_store, "--out", tmp_path / "report")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = (tmp_path / "report" / "report.md").read_text()
    assert "kng" in text and "exponential" in text and "slope" in text.lower()
    assert list((tmp_path / "report").glob("*.png"))
    status = kngflow("status", figure1_store)
    assert status.returncode == 0 and "1200" in status.stdout

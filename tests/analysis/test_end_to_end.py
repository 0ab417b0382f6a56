"""End to end on real output: the README's main job (KNG Figure 1), then the report.

Runs ``kngflow run workflows/kng_linear.toml`` exactly as the README does (local Dask
cluster, two workers; n = 10^2 ... 10^7, 100 replicates, four mechanisms), then
``kngflow report`` and ``kngflow status``, and checks the paper's claims on the store:
the non-private error falls like n^-1/2 (slope -0.5 +- 0.03), KNG's error ratio to the
non-private estimator falls towards 1 as n grows, and the exponential mechanism's ratio
stays well above 1 at the largest n.
"""

from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from testkit import kngflow_cli
from test_report_html import _probe, check_printed, needs_chromium, needs_poppler

import kngflow.analysis  # noqa: F401  (registers ds.kng)

SPEC = Path(__file__).resolve().parents[2] / "workflows" / "kng_linear.toml"


@pytest.fixture(scope="module")
def figure1_store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fig1")
    store = tmp / "kng_linear.zarr"
    proc = kngflow_cli("run", SPEC, "--store", store, "--workers", 2, "--no-dashboard", timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return store


@pytest.mark.slow
def test_figure1_claims_on_real_store(figure1_store):
    ds = xr.open_zarr(figure1_store)
    assert int(ds["done"].sum()) == ds["done"].size
    slopes = ds.kng.slopes().sel(epsilon=1.0)
    assert abs(float(slopes["slope"].sel(mechanism="nonprivate")) + 0.5) < 0.03
    ratio = ds.kng.ratio()["ratio"].sel(epsilon=1.0).compute()
    kng = ratio.sel(mechanism="kng").values
    exp = ratio.sel(mechanism="exponential").values
    assert np.all(exp > 1.5)
    # At n = 100 every private error is capped by the l1 ball; from n = 10^3 on KNG's
    # excess error shrinks (it is O(1/n)) and KNG is nearly free at n = 10^7, while the
    # exponential mechanism keeps a constant-factor cost.
    assert np.all(np.diff(kng[1:]) < 0) and kng[-1] < 1.1
    assert exp[-1] > 5 and exp[-1] > 4 * kng[-1]
    tail = ds.kng.slopes(n_min=10**5).sel(epsilon=1.0)["slope"]
    assert float(tail.sel(mechanism="kng")) < -0.55  # faster than n^-1/2 while the O(1/n) term fades
    samplers = ds["sampler"].sel(mechanism="kng").compute()
    assert set(np.unique(samplers.values)) <= {1, 2}  # exact or Gibbs, recorded per release
    assert "WITHOUT privacy" in ds.attrs["caveats"]


@pytest.mark.slow
def test_report_and_status_on_real_store(figure1_store, tmp_path):
    proc = kngflow_cli("report", figure1_store, "--out", tmp_path / "report")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = (tmp_path / "report" / "report.md").read_text()
    assert "kng" in text and "exponential" in text and "slope" in text.lower()
    # the private mechanisms' ratios to the non-private error at every n, with MC SEs, in one
    # table (the problem's KNG-and-exponential comparison is two of its columns, not a second table)
    section = text.split("## Private mechanisms: mean-error ratio to")[1].split("##")[0]
    # a label that is its kind is printed once ("kng", not "kng (kng)")
    header = next(r for r in section.splitlines() if r.startswith("| n |"))
    assert "| kng |" in header and "| exponential |" in header and "kng (kng)" not in section
    assert 'comparison "KNG and exponential mechanism" is the' in section
    for k in range(2, 8):
        row = [r for r in section.splitlines() if r.startswith(f"| 10^{k} |")]
        assert len(row) == 1 and row[0].count("±") >= 2, section
    assert "log10 mean error ± MC SE" in text
    assert list((tmp_path / "report").glob("*.png"))
    assert "Small sample" not in text  # 100 replicates
    status = kngflow_cli("status", figure1_store)
    assert status.returncode == 0 and "2400 done, 0 failed, 2400 total" in status.stdout


@pytest.mark.slow
@needs_chromium
@needs_poppler
def test_figure1_html_report_fits_the_page_and_prints(figure1_store, tmp_path):
    """The full Figure 1 study's report.html: at 1280 and 800 px no horizontal overflow, no
    console error, nothing fetched; printed to PDF, every shown table's header and last row
    and every figure are there."""
    proc = kngflow_cli("report", figure1_store, "--out", tmp_path / "report", "--html")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    page = tmp_path / "report" / "report.html"
    for width in (1280, 800):
        probe, console = _probe(page, tmp_path, width)
        assert probe["errors"] == [] and console == [] and probe["fetched"] == [], (probe, console)
        assert probe["width"][0] <= probe["width"][1] and probe["hidden_columns"] == [], (width, probe)
    assert "Small sample" not in check_printed(page, tmp_path)

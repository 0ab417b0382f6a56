"""Acceptance: a PCA study with ``d`` as a grid axis runs, reports and decides CSS 2013's
sample-complexity claim from its store (``workflows/pca_dimension.toml``, reduced).

The reduced study (d = 8, 16, 32; 12 replicates) runs with the real ``kngflow run`` on the
embedded local cluster, then ``kngflow report`` evaluates the shipped claims file.  The law
itself (energy loss ~ d^a / n^b: a = 1 for PPCA, a = 3 for MOD-SULQ) is then checked with
the claims at level 0.9999 (a false failure rarer than 1 in 10^4 under the claims'
Bonferroni z-intervals; fixed seeds make the run deterministic), and a negative control
claims PPCA's slope in MOD-SULQ's band, which must disagree.
"""

from __future__ import annotations

import pytest
import xarray as xr
from testkit import WORKFLOWS, kngflow_cli, reduced_workflow, study_run

from kngflow.analysis.claims import evaluate_claims, load_claims, parse_claims

LAW = """level = 0.9999
[[claims]]
id = "ppca-d"
type = "slope"
along = "d"
source = "CSS 2013"
statement = "PPCA ~ d^1"
statistic = "mean_error"
mechanism = "exponential"
n = [100_000, 300_000]
min = 0.2
max = 1.8

[[claims]]
id = "modsulq-d"
type = "slope"
along = "d"
source = "CSS 2013"
statement = "MOD-SULQ ~ d^3"
statistic = "mean_error"
mechanism = "mod_sulq"
n = [100_000, 300_000]
min = 2.2
max = 3.8

[[claims]]
id = "negative-control"
type = "slope"
along = "d"
source = "none: PPCA claimed to grow like MOD-SULQ"
statement = "PPCA ~ d^3 (false)"
statistic = "mean_error"
mechanism = "exponential"
n = [100_000, 300_000]
min = 2.2
max = 3.8
"""


@pytest.mark.slow
def test_pca_dimension_study_runs_reports_and_decides_the_claim(tmp_path, study_cluster):
    spec = reduced_workflow(tmp_path, "pca_dimension", [("replicates = 30", "replicates = 12"),
                                                        ("d = [8, 16, 32, 64]", "d = [8, 16, 32]")])
    store = tmp_path / "study.zarr"
    run = study_run(study_cluster, spec, store)
    assert run.returncode == 0, run.stdout + run.stderr
    ds = xr.open_zarr(store)
    assert ds["done"].dims[0] == "d" and int(ds["done"].sum()) == ds["done"].size == 3 * 2 * 3 * 12

    out = tmp_path / "report"
    rep = kngflow_cli("report", store, "--out", out, "--claims", WORKFLOWS / "pca_dimension.claims.toml")
    assert rep.returncode == 0, rep.stderr
    md = (out / "report.md").read_text()
    assert "## Along the problem axes (d)" in md and "## d = 32" in md and (out / "d=8" / "error_vs_n.png").exists()
    assert "exponential-slope-in-d" in md

    study, claims = load_claims(WORKFLOWS / "pca_dimension.claims.toml")
    shipped = {v.id: v.verdict for v in evaluate_claims(ds, claims, study=study)}
    assert "disagrees" not in shipped.values(), shipped

    _, law = parse_claims(LAW)
    verdicts = {v.id: v for v in evaluate_claims(ds, law)}
    assert verdicts["ppca-d"].verdict == "agrees", verdicts["ppca-d"].summary
    assert verdicts["modsulq-d"].verdict == "agrees", verdicts["modsulq-d"].summary
    assert verdicts["negative-control"].verdict == "disagrees", verdicts["negative-control"].summary

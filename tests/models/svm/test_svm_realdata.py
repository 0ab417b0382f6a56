"""The SVM on a real data set (kngflow.models.svm.realdata: the 1996 ANES vote, statsmodels' copy).

The preprocessing (public code ranges, rows in the unit ball, the public split), the reference
minimiser's optimality and held-out rate, the problem's declarations and its family (the SVM's
kinds by short name: the mechanisms and their audits are the SVM model's, tests/models/svm/test_svm.py),
and the shipped spec, reduced, through ``kngflow run`` and ``kngflow report`` with the claims.
"""

from __future__ import annotations

import numpy as np
import pytest

from kngflow.api import get_mechanism, get_problem
from kngflow.models.svm import realdata
from kngflow.models.svm.realdata import ANES_RANGES, N_HELD_OUT, N_TRAIN, AnesSVMProblem, anes96_split

PROBLEM = "kngflow.models.svm.realdata:AnesSVMProblem"


def test_records_are_in_the_unit_ball_by_public_bounds():
    from statsmodels.datasets import anes96

    df = anes96.load_pandas().data
    X, y = realdata.anes96_records()
    assert X.shape == (944, len(ANES_RANGES) + 1) and not X.flags.writeable
    assert np.all(np.einsum("ij,ij->i", X, X) <= 1.0 + 1e-12)
    np.testing.assert_allclose(X[:, 0], 1.0 / 3.0)
    lo, hi = ANES_RANGES["PID"]
    j = 1 + list(ANES_RANGES).index("PID")
    np.testing.assert_allclose(X[:, j] * 3.0, 2.0 * (df["PID"].to_numpy() - lo) / (hi - lo) - 1.0, atol=1e-12)
    np.testing.assert_array_equal(y, np.where(df["vote"].to_numpy() > 0.5, 1.0, -1.0))
    Xtr, ytr, Xte, yte = anes96_split()
    assert Xtr.shape[0] == N_TRAIN and Xte.shape[0] == N_HELD_OUT
    # the split is a partition of the rows, fixed by the public seed
    both = np.vstack([np.column_stack([Xtr, ytr]), np.column_stack([Xte, yte])])
    assert sorted(map(tuple, both)) == sorted(map(tuple, np.column_stack([X, y])))


def test_problem_reference_and_declarations():
    p = get_problem(PROBLEM)
    assert isinstance(p, AnesSVMProblem) and p.d == 9 and p.real_data
    data = p.simulate(N_TRAIN, np.random.default_rng(0))
    assert data is not None and data.X.shape == (N_TRAIN, 9)
    with pytest.raises(ValueError, match="708"):
        p.simulate(100, np.random.default_rng(0))
    w = p.theta_star
    # optimality: the gradient of n J vanishes at the reference
    g = get_problem("svm", d=9).gradient(data, w) + N_TRAIN * p.reg * w
    assert np.linalg.norm(g) < 1e-8 * N_TRAIN
    rate = p.error(w)
    assert 0.05 < rate < 0.2  # party identification and placements separate the vote well
    assert p.excess_risk(w) == 0.0 and p.excess_risk(np.zeros(9)) > 0
    assert p.error_label == "misclassification on the 236 held-out rows"
    assert p.reference_lines == [(0.5, "random direction (data-free)"), (rate, "non-private minimiser")]
    assert AnesSVMProblem(metric="excess_risk").error(np.zeros(9)) == pytest.approx(p.excess_risk(np.zeros(9)))
    with pytest.raises(ValueError, match="metric"):
        AnesSVMProblem(metric="accuracy")


@pytest.mark.parametrize("kind", ["output", "objective", "kng"])
def test_svm_kinds_apply_by_family(kind):
    """The problem lends the SVM model's kinds (family = "svm"): each releases a vector of 9
    whose held-out rate at eps = 8 is within 0.1 of the non-private one (fixed seed)."""
    p = get_problem(PROBLEM)
    data = p.simulate(N_TRAIN, np.random.default_rng(0))
    m = get_mechanism(PROBLEM, kind, hardened=False)
    r = m.release(data, 8.0, np.random.default_rng(5))
    assert r.estimate.shape == (9,)
    assert p.error(r.estimate) < p.error(p.theta_star) + 0.1


@pytest.mark.slow
def test_study_runs_through_the_cli(tmp_path, study_cluster):
    """The shipped spec, reduced (two epsilons, 2 replicates, five mechanisms), runs through
    ``kngflow run`` on the one-worker test cluster; ``kngflow report`` labels the error as the
    problem declares, draws its reference lines and gives the claims' verdicts."""
    from testkit import WORKFLOWS, kngflow_cli, reduced_workflow, study_run

    text = reduced_workflow(tmp_path, "svm_anes", [
        ("epsilon = [0.1, 0.25, 0.5, 1.0, 2.0, 4.0]", "epsilon = [1.0, 4.0]"),
        ("replicates = 50", "replicates = 2")]).read_text()
    keep = {"nonprivate", "output", "objective", "objective_larger", "kng"}
    blocks = text.split("[[mechanisms]]")
    text = blocks[0] + "".join("[[mechanisms]]" + b for b in blocks[1:] if b.split('"')[1] in keep)
    spec = tmp_path / "svm_anes.toml"
    spec.write_text(text)
    store = tmp_path / "s.zarr"
    run = study_run(study_cluster, spec, store)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "20/20 cells done, 0 failed" in run.stdout
    out = tmp_path / "report"
    report = kngflow_cli("report", store, "--out", out, "--claims", WORKFLOWS / "svm_anes.claims.toml")
    assert report.returncode == 0, report.stdout + report.stderr
    md = (out / "report.md").read_text()
    assert "Error: misclassification on the 236 held-out rows." in md
    assert "random direction (data-free) = 0.5" in md
    assert "The other error measure: excess regularised risk" in md
    assert "anes-objective-beats-output" in md and "anes-kng-beats-output" in md

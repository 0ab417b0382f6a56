"""What the stored error measures comes from the problem's declarations, not from the release's kind.

``Problem.error_label``, ``Problem.reference_lines`` and ``Problem.coefficient_summaries`` reach
the store's attributes, and the figures and the report read them there (or, for an older store,
from the problem the spec names); a problem that declares nothing keeps the coefficient-vector
defaults (ℓ2 distance to the truth, the zero estimate's ‖θ*‖₂).  The subspace problems'
random-subspace lines match a Monte Carlo mean of Haar subspaces (fixed seed, 6 SE), and the
negative control, an energy line off by a tenth, is rejected by the same check.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import kngflow.analysis  # noqa: F401  (registers ds.kng)
from kngflow.analysis import declared, figures
from kngflow.analysis.report import write_report
from kngflow.api import get_problem
from kngflow.models.pca.problem import DigitsPCAProblem, PCAProblem
from kngflow.models.svm.problem import SVMProblem
from synthetic import SyntheticMechanism as SM
from synthetic import synthetic_dataset, write_store


def _haar_errors(problem, reps=4000, seed=3):
    rng = np.random.default_rng(seed)
    out = np.empty(reps)
    for r in range(reps):
        V = np.linalg.qr(rng.standard_normal((problem.d_data, problem.k)))[0]
        out[r] = problem.error(V.ravel())
    return out


@pytest.mark.parametrize("problem", [PCAProblem(d=10, k=2, spikes=[3.0, 2.0], error_measure="energy_loss"),
                                     DigitsPCAProblem(k=2, error_measure="energy_loss")])
def test_energy_line_is_the_random_subspace_mean(problem):
    """E(1 - q) of a Haar subspace is 1 - k tr(M) / (d tr(U'MU)): within 6 SE of 4000 draws
    (two-sided false-failure rate 2e-9); the line moved by a tenth of its gap to 1 is rejected."""
    (value, label), = problem.reference_lines
    assert "random subspace" in label
    e = _haar_errors(problem)
    se = e.std(ddof=1) / np.sqrt(e.size)
    assert abs(e.mean() - value) < 6 * se
    control = value + 0.1 * (1.0 - value)
    assert abs(e.mean() - control) > 6 * se


def test_projection_line_is_the_random_subspace_rms():
    """sqrt(2k(1 - k/d)) is the root mean square of ||VV' - UU'||_F over Haar subspaces:
    within 6 SE (delta method on the mean square) of 4000 draws; the mean lies below it (Jensen)."""
    problem = PCAProblem(d=10, k=2, spikes=[3.0, 2.0])
    (value, label), = problem.reference_lines
    e2 = _haar_errors(problem) ** 2
    se = e2.std(ddof=1) / np.sqrt(e2.size)
    assert abs(e2.mean() - value**2) < 6 * se and abs(e2.mean() - 1.1 * value**2) > 6 * se
    assert np.sqrt(e2).mean() <= value
    assert "projection distance" in problem.error_label and not problem.coefficient_summaries


def test_declarations_of_the_models():
    """Coefficient problems keep the defaults; the SVM declares its rates; PCA no coefficient tables."""
    lin = get_problem("linear")
    assert lin.error_label == "ℓ2 distance to truth" and lin.coefficient_summaries
    (value, label), = lin.reference_lines
    assert value == pytest.approx(np.linalg.norm(lin.theta_star)) and "zero estimate" in label
    svm = SVMProblem(d=3, flip=0.2)
    assert svm.error_label == "held-out misclassification rate"
    assert [v for v, _ in svm.reference_lines] == [0.5, 0.2]
    risk = SVMProblem(d=3, metric="excess_risk")
    (value, _), = risk.reference_lines
    assert value == pytest.approx(risk.excess_risk(np.zeros(3))) and value > 0


@pytest.fixture(scope="module")
def labelled_store(tmp_path_factory):
    mechs = [SM("ref", "acme:Ref", private=False), SM("noisy", "acme:Noisy", lambda n, e: 0.3 / (e * np.sqrt(n)))]
    raw = synthetic_dataset(mechs, n=[100, 1000], epsilon=[0.5, 1.0], replicates=20, d=4, seed=2,
                            problem="acme.subspaces:Problem")
    raw.attrs.update(error_label="projection distance to the subspace",
                     reference_lines=json.dumps([[1.5, "random subspace"], [0.25, "another line"]]),
                     coefficient_summaries=json.dumps(False))
    path = tmp_path_factory.mktemp("labels") / "sub.zarr"
    return path, write_store(raw, path)


def test_figures_and_report_follow_the_store_declarations(labelled_store, tmp_path):
    path, ds = labelled_store
    assert declared.error_label(ds) == "projection distance to the subspace"
    assert declared.reference_lines(ds) == [(1.5, "random subspace"), (0.25, "another line")]
    assert declared.coefficient_summaries(ds) is False
    ax = figures.figure_error_vs_epsilon(ds, n=100).axes[0]
    assert ax.get_ylabel() == "median projection distance to the subspace"
    drawn = {ln.get_label(): ln.get_ydata()[0] for ln in ax.get_lines()}
    assert drawn["random subspace"] == 1.5 and drawn["another line"] == 0.25
    assert "‖θ*‖₂ (zero estimate)" not in drawn
    ax = figures.figure_error_vs_n(ds, epsilon=1.0).axes[0]
    assert ax.get_ylabel() == "log10(average projection distance to the subspace)"
    # a long declared label is broken into lines of at most 56 characters
    long = ds.assign_attrs(error_label="projection distance ‖VVᵀ − UUᵀ‖_F to the population subspace")
    label = figures.figure_error_vs_n(long, epsilon=1.0).axes[0].get_ylabel()
    assert "\n" in label and max(map(len, label.split("\n"))) <= 56
    assert label.replace("\n", " ") == "log10(average projection distance ‖VVᵀ − UUᵀ‖_F to the population subspace)"
    md = write_report(path, tmp_path / "rep", html=True)
    assert "Error: projection distance to the subspace." in md
    assert "random subspace = 1.5" in md
    assert "coefficient_summaries = False" in md and "| coef |" not in md


def test_stores_without_declarations_keep_the_defaults(labelled_store):
    """An older store (no attributes, a problem not importable here): ℓ2 and the zero estimate."""
    ds = labelled_store[1].copy()
    for key in ("error_label", "reference_lines", "coefficient_summaries"):
        ds.attrs.pop(key)
    assert declared.error_label(ds) == "ℓ2 distance to truth"
    (value, label), = declared.reference_lines(ds)
    assert value == pytest.approx(float(np.linalg.norm(ds["theta_star"].values))) and "zero estimate" in label
    assert declared.coefficient_summaries(ds) is True

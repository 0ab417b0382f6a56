"""Awan & Slavković's studies as shipped workflows: the specs are the papers', and reduced
versions run through the real CLI (local cluster, zarr store, report with its figures).

Reduced logistic study (n = 10^4, 12 replicates, eps = 1/16 and 1/4): the median error of
extended objective perturbation orders ℓ∞ < ℓ1 at both eps (ratios about 3 and 2 at full
scale, so 12 replicates leave a wide margin)."""

import json

import numpy as np
import pytest

import kngflow.analysis  # noqa: F401  (registers ds.kng)

from testkit import WORKFLOWS, reduced_workflow, run_and_report
from kngflow.models.logistic.problem import PAPER_BETA
from kngflow.sweep import load_spec

FIG2_EPS = [2.0**k for k in range(-6, 2)]


def test_knorm_logistic_is_figure_2():
    spec = load_spec(WORKFLOWS / "knorm_logistic.toml")
    prob = spec.problem()
    assert prob.name == "logistic" and prob.d == 7
    np.testing.assert_array_equal(prob.theta_star, PAPER_BETA)
    assert list(spec.n) == [10_000, 100_000] and len(spec.replicates) == 100
    assert list(spec.epsilon) == FIG2_EPS
    mechs = spec.build_mechanisms()
    paper = {"L1": ("l1", 0.5), "L2": ("l2", 0.5), "Linf": ("linf", 0.5), "Linf_q085": ("linf", 0.85)}
    for label, (norm, q) in paper.items():
        assert mechs[label].kind == "objective_ext" and (mechs[label].norm, mechs[label].q) == (norm, q)


def test_knorm_linear_coverage_is_figure_3():
    spec = load_spec(WORKFLOWS / "knorm_linear_coverage.toml")
    prob = spec.problem()
    assert prob.name == "linear" and prob.d == 6 and prob.protocol == "public_bound"
    np.testing.assert_allclose(prob.theta_star, [0.0, -1.5, -0.75, 0.0, 0.75, 1.5])
    assert list(spec.n) == [10_000, 1_000_000] and len(spec.replicates) == 200
    assert list(spec.epsilon) == [2.0**k for k in range(-4, 3)]
    mechs = spec.build_mechanisms()
    assert {mechs[m].norm for m in ("L1", "Linf", "K_T")} == {"l1", "linf", "kt"}
    assert all(mechs[m].kind == "ss" for m in ("L1", "Linf", "K_T"))


@pytest.mark.slow
def test_knorm_logistic_reduced_end_to_end(tmp_path, study_cluster):
    spec = reduced_workflow(tmp_path, "knorm_logistic", [
        ("n = [10_000, 100_000]", "n = [10_000]"),
        ("epsilon = [0.015625, 0.03125, 0.0625, 0.125, 0.25, 0.5, 1.0, 2.0]", "epsilon = [0.0625, 0.25]"),
        ("replicates = 100", "replicates = 12"),
        ('[[mechanisms]]\nlabel = "kng_linf"\nkind = "kng"\nnorm = "linf"\n', ""),
        ("[sampler]\nsteps = 1_000\n", ""),
    ])
    ds, out = run_and_report(tmp_path, spec, study_cluster)
    med = ds["error"].median("replicate").sel(n=10_000)
    for eps in (0.0625, 0.25):
        assert float(med.sel(mechanism="Linf", epsilon=eps)) < float(med.sel(mechanism="L1", epsilon=eps))
    assert (out / "error_vs_epsilon.png").stat().st_size > 10_000
    assert "| Linf_q085 |" in (out / "report.md").read_text()


@pytest.mark.slow
def test_knorm_linear_coverage_reduced_end_to_end(tmp_path, study_cluster):
    spec = reduced_workflow(tmp_path, "knorm_linear_coverage", [
        ("n = [10_000, 1_000_000]", "n = [10_000]"),
        ("epsilon = [0.0625, 0.125, 0.25, 0.5, 1.0, 2.0, 4.0]", "epsilon = [0.5, 4.0]"),
        ("replicates = 200", "replicates = 10"),
    ])
    ds, out = run_and_report(tmp_path, spec, study_cluster)
    cov = ds.kng.coverage(how="mean", coefs=slice(1, None))["coverage"].sel(n=10_000)
    assert float(cov.sel(mechanism="Linf", epsilon=4.0)) > float(cov.sel(mechanism="Linf", epsilon=0.5))
    assert (out / "coverage_vs_epsilon.png").stat().st_size > 10_000
    assert "Coverage of the non-private 95% CI" in (out / "report.md").read_text()


def test_erm_baselines_spec():
    spec = load_spec(WORKFLOWS / "erm_baselines.toml")
    assert spec.problem().name == "logistic"
    mechs = spec.build_mechanisms()
    assert {m.kind for m in mechs.values()} == {"nonprivate", "kng", "objective_ext", "objective", "output",
                                                 "objective_chaudhuri", "noisy_gd", "dpsgd"}
    deltas = {label: getattr(m, "delta", 0.0) for label, m in mechs.items()}
    assert deltas == {**{label: 0.0 for label in mechs}, "noisy_gd_gauss": 1e-5, "dpsgd": 1e-5}
    assert mechs["kng"].steps == 1000 and mechs["noisy_gd_gamma"].iterations == 100


@pytest.mark.slow
def test_erm_baselines_reduced_end_to_end(tmp_path, study_cluster):
    """Every baseline runs in the engine; the store records delta and the report marks
    the (epsilon, delta)-DP rows."""
    spec = reduced_workflow(tmp_path, "erm_baselines", [
        ("n = [1_000, 3_000, 10_000, 30_000]", "n = [2_000]"),
        ("epsilon = [0.25, 0.5, 1.0, 2.0]", "epsilon = [1.0]"),
        ("replicates = 50", "replicates = 3"),
        ("steps = 1_000", "steps = 50"),
    ])
    ds, out = run_and_report(tmp_path, spec, study_cluster)
    assert np.all(np.isfinite(ds["error"].values))
    assert json.loads(ds.attrs["delta"])["dpsgd"] == 1e-5
    text = (out / "report.md").read_text()
    assert "mixes ε-DP and (ε, δ)-DP" in text and "| dpsgd (ε, δ=1e-05) |" in text

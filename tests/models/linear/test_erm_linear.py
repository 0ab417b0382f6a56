"""Private-ERM baselines for linear regression (kngflow.models.linear.erm): the
constrained ridge solver, the noise laws, the audits (2ε caught), the spec and the study."""

import json
import math

import numpy as np
import pytest
from scipy import stats

from testkit import WORKFLOWS, reduced_workflow, run_and_report
from kngflow.audit import statistic_audit
from kngflow.api import allowed_options, get_mechanism
from kngflow.models.linear.erm import DEFAULT_RADIUS, constrained_ridge, lipschitz
from kngflow.api import get_problem
from kngflow.models.linear.problem import ols, stats_from_arrays
from kngflow.sweep import load_spec


def _stats(rng, n=200, d=3, y_bound=1.0):
    X = rng.uniform(-1, 1, (n, d))
    y = np.clip(X @ rng.normal(0, 1, d) + rng.normal(0, 0.3, n), -y_bound, y_bound)
    return stats_from_arrays(X, y, y_bound=y_bound)


@pytest.mark.parametrize("radius", [0.05, 0.3, 1.0, 100.0])
def test_constrained_ridge_satisfies_kkt(radius):
    """Interior: grad J = 0; boundary: ||theta|| = radius and grad J = -mu theta, mu > 0."""
    rng = np.random.default_rng(1)
    for _ in range(20):
        st = _stats(rng, n=int(rng.integers(5, 300)), d=int(rng.integers(1, 6)))
        reg = float(10.0 ** rng.uniform(-4, 0))
        theta, boundary = constrained_ridge(st.G, st.c, st.n, reg, radius)
        g = 2.0 * (st.G @ theta - st.c) / st.n + reg * theta
        assert np.linalg.norm(theta) <= radius * (1 + 1e-12)
        if not boundary:
            assert np.linalg.norm(g) <= 1e-10 * (1 + np.linalg.norm(st.c) / st.n)
        else:
            assert np.linalg.norm(theta) == pytest.approx(radius, rel=1e-10)
            mu = -float(g @ theta) / radius**2
            assert mu > 0
            np.testing.assert_allclose(g, -mu * theta, atol=1e-9 * max(1.0, np.linalg.norm(g)))


def test_constrained_ridge_is_ols_for_tiny_reg_and_a_large_ball():
    st = _stats(np.random.default_rng(2), n=500, d=4)
    theta, boundary = constrained_ridge(st.G, st.c, st.n, 1e-12, 1e6)
    assert not boundary
    np.testing.assert_allclose(theta, ols(st) / st.scale, rtol=1e-7, atol=1e-9)


def test_options_and_bad_input():
    assert set(allowed_options("linear", "output")) == {"reg", "radius", "tol", "hardened"}
    assert {"reg", "iterations", "radius", "noise", "delta"} <= set(allowed_options("linear", "noisy_gd"))
    assert "batch_size" not in allowed_options("linear", "noisy_gd")
    for kind, opts, name in [("output", {"radius": 0.0}, "radius"), ("output", {"reg": -1.0}, "reg"),
                             ("noisy_gd", {"radius": -2.0}, "radius"), ("noisy_gd", {"delta": 1.5}, "delta")]:
        with pytest.raises(ValueError, match=name):
            get_mechanism("linear", kind, hardened=False, **opts)
    assert get_mechanism("linear", "noisy_gd", hardened=False).radius == DEFAULT_RADIUS
    with pytest.raises(TypeError, match="LinearStats"):
        get_mechanism("linear", "output", hardened=False).release(np.zeros((3, 3)), 1.0, np.random.default_rng(0))


def test_output_noise_is_gamma_around_the_minimiser_and_scaled_back():
    """(release / scale - minimiser) has norm ~ Gamma(d, s), s = min(2L(1+tol)/(n reg), 2R)/eps
    (KS, p > 1e-5); control: the law at 2s is rejected."""
    rng = np.random.default_rng(3)
    st = _stats(rng, n=5000, d=3, y_bound=2.0)
    mech = get_mechanism("linear", "output", hardened=False, reg=0.5)
    d, eps = 3, 1.0
    s = min(2 * lipschitz(d, 1.0) * (1 + 1e-9) / (st.n * 0.5), 2.0) / eps
    assert mech.noise_scale(st.n, d, eps) == pytest.approx(s, rel=1e-14)
    theta = constrained_ridge(st.G, st.c, st.n, 0.5, 1.0)[0]
    z = np.array([mech.release(st, eps, rng).estimate / st.scale - theta for _ in range(3000)])
    r = np.linalg.norm(z, axis=1)
    assert stats.kstest(r, stats.gamma(d, scale=s).cdf).pvalue > 1e-5
    assert stats.kstest(r, stats.gamma(d, scale=2 * s).cdf).pvalue < 1e-5


def test_noisy_gd_without_noise_reaches_the_constrained_minimiser():
    """At eps = 1e12 the noise vanishes: projected GD with eta = 1/(2d + reg) converges to
    argmin_C J (times scale)."""
    st = _stats(np.random.default_rng(4), n=1000, d=3, y_bound=2.0)
    for radius in (0.1, 1.0):
        mech = get_mechanism("linear", "noisy_gd", hardened=False, noise="gamma", iterations=3000, radius=radius, reg=0.1)
        est = mech.release(st, 1e12, np.random.default_rng(0)).estimate
        np.testing.assert_allclose(est / st.scale, constrained_ridge(st.G, st.c, st.n, 0.1, radius)[0], atol=1e-8)


AUDIT_PROBLEM = dict(d=2, protocol="public_bound", y_bound=1.0)


@pytest.mark.parametrize("kind, opts, at_eps", [
    ("output", {}, 1.0),                                       # the cap 2R is attained
    ("noisy_gd", {"noise": "gamma", "iterations": 1}, None),
    ("noisy_gd", {"noise": "gaussian", "iterations": 1}, None),
    ("noisy_gd", {"noise": "gamma", "iterations": 20}, None),
])
@pytest.mark.slow
def test_exact_audit_passes_at_eps_and_catches_2_eps(kind, opts, at_eps):
    problem = get_problem("linear", **AUDIT_PROBLEM)
    mech = get_mechanism("linear", kind, hardened=False, **opts)
    # output perturbation's statistic is a minimiser, not a sum: every pair is solved, so
    # 8 drawn records (they already hold a pair at opposite ends of the ball)
    kw = {"max_records": 8} if kind == "output" else {}
    ok = statistic_audit(mech, problem, 1.0, **kw)
    assert ok.passed, ok.summary()
    if at_eps is not None:
        assert ok.bound == pytest.approx(at_eps, abs=1e-6)
    bad = statistic_audit(mech, problem, 1.0, run_epsilon=2.0, **kw)
    assert not bad.passed and bad.bound > 1.0, bad.summary()


def test_releases_on_degenerate_data_and_at_extreme_eps():
    """Every data set in the domain releases: all records equal (singular G), eps tiny or huge."""
    X = np.ones((50, 3))
    st = stats_from_arrays(X, np.ones(50), y_bound=1.0)
    for kind, opts in [("output", {}), ("noisy_gd", {"noise": "gamma"}), ("noisy_gd", {})]:
        mech = get_mechanism("linear", kind, hardened=False, **opts)
        for eps in (1e-6, 1.0, 1e6):
            est = mech.release(st, eps, np.random.default_rng(0)).estimate
            assert est.shape == (3,) and np.all(np.isfinite(est)), (kind, opts, eps)


def test_mean_gradient_matches_records():
    rng = np.random.default_rng(6)
    X = rng.uniform(-1, 1, (40, 3))
    y = rng.uniform(-1, 1, 40)
    st = stats_from_arrays(X, y, y_bound=1.0)
    mech = get_mechanism("linear", "noisy_gd", hardened=False)
    theta = rng.normal(0, 0.3, (5, 3))
    want = np.array([np.mean(-2 * (y - X @ t)[:, None] * X, axis=0) for t in theta])
    np.testing.assert_allclose(mech.mean_gradient(st, theta), want, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(mech.mean_gradient(st, theta[0]), want[0], rtol=1e-12, atol=1e-14)
    assert math.isclose(mech.lipschitz(3), 2 * math.sqrt(3) * (1 + math.sqrt(3)))


WORKFLOW = WORKFLOWS / "erm_linear.toml"


def test_erm_linear_spec():
    spec = load_spec(WORKFLOW)
    prob = spec.problem()
    assert prob.name == "linear" and prob.d == 6 and prob.protocol == "public_bound"
    mechs = spec.build_mechanisms()
    assert {m.kind for m in mechs.values()} == {"nonprivate", "kng", "objective", "ss", "output", "noisy_gd"}
    assert {label: getattr(m, "delta", 0.0) for label, m in mechs.items() if getattr(m, "delta", 0.0)} == {
        "noisy_gd_gauss": 1e-5}


@pytest.mark.slow
def test_erm_linear_reduced_end_to_end(tmp_path, study_cluster):
    """The workflow through the real CLI (2 workers, zarr store, report): every cell done,
    delta recorded, the (ε, δ) row marked; at n = 10^5 the noisy-GD baselines beat output
    perturbation, whose L = 2 sqrt(d)(1 + sqrt(d)) makes it the noisiest."""
    spec = reduced_workflow(tmp_path, "erm_linear", [
        ("n = [1_000, 10_000, 100_000, 1_000_000]", "n = [100_000]"),
        ("epsilon = [0.25, 0.5, 1.0, 2.0]", "epsilon = [1.0]"), ("replicates = 50", "replicates = 5")])
    ds, out = run_and_report(tmp_path, spec, study_cluster)
    assert json.loads(ds.attrs["delta"])["noisy_gd_gauss"] == 1e-5
    med = ds["error"].median("replicate").sel(n=100_000, epsilon=1.0)
    assert float(med.sel(mechanism="noisy_gd_gauss")) < float(med.sel(mechanism="output"))
    assert float(med.sel(mechanism="noisy_gd_gamma")) < float(med.sel(mechanism="output"))
    assert "| noisy_gd_gauss (ε, δ=1e-05) |" in (out / "report.md").read_text()

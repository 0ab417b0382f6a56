"""Linear-regression mechanisms: validation, sampler policy, objective perturbation."""

import numpy as np
import pytest
from scipy import stats as sps

from kngflow.api import MECHANISMS, get_mechanism
from kngflow.kernels.optimize import project_l1_ball, quadratic_l1_ball
from kngflow.api import get_problem
from kngflow.models.linear.problem import LinearStats

ALL_KINDS = sorted(MECHANISMS["linear"])


@pytest.fixture(scope="module")
def small():
    return get_problem("linear", d=12).simulate(100, np.random.default_rng(0))


@pytest.fixture(scope="module")
def large():
    return get_problem("linear", d=12).simulate(10**5, np.random.default_rng(1))


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_release_shape_info_and_bounds(kind, small, large):
    mech = get_mechanism("linear", kind, hardened=False)
    for stats in (small, large):
        rel = mech.release(stats, 1.0, np.random.default_rng(3))
        assert rel.estimate.shape == (12,) and rel.estimate.dtype == np.float64
        assert set(rel.info) == {"sampler", "acceptance", "steps"}
        assert rel.info["sampler"] in {"none", "exact", "gibbs", "metropolis"}
        if kind == "noisy_gd":  # projected onto the l2 ball of radius 1
            assert np.linalg.norm(rel.estimate / stats.scale) <= 1.0 + 1e-9
        elif kind not in ("nonprivate", "ss", "output"):  # ss: eq. (5), output: noise, unconstrained
            assert np.abs(rel.estimate / stats.scale).sum() <= 1.0 + 1e-9
        again = mech.release(stats, 1.0, np.random.default_rng(3))
        assert np.array_equal(rel.estimate, again.estimate)


def test_sampler_policy(small, large):
    kng = get_mechanism("linear", "kng", hardened=False)
    assert kng.release(large, 1.0, np.random.default_rng(0)).info["sampler"] == "exact"
    assert kng.release(small, 1.0, np.random.default_rng(0)).info["sampler"] == "gibbs"
    l2 = get_mechanism("linear", "kng", hardened=False, norm="l2", steps=200)
    assert l2.release(small, 1.0, np.random.default_rng(0)).info["sampler"] == "metropolis"
    met = get_mechanism("linear", "exponential", hardened=False, sampler="metropolis", steps=100)
    info = met.release(large, 1.0, np.random.default_rng(0)).info
    assert info["sampler"] == "metropolis" and info["steps"] == 100 and 0 < info["acceptance"] < 1
    with pytest.raises(RuntimeError, match="exact sampler exhausted max_tries=1"):
        get_mechanism("linear", "kng", hardened=False, sampler="exact", max_tries=1).release(small, 1.0, np.random.default_rng(0))


def test_utility_ordering_at_large_n(large):
    """At n = 1e5 (d = 12) KNG and objective perturbation add noise of the order of the
    statistical error (their excess is O(1/n)); the exponential mechanism's is O(n^-1/2) and
    several times larger."""
    problem = get_problem("linear", d=12)
    errs = {}
    for kind in ("nonprivate", "kng", "exponential", "objective"):
        mech = get_mechanism("linear", kind, hardened=False)
        errs[kind] = np.mean(
            [problem.error(mech.release(large, 1.0, np.random.default_rng(s)).estimate) for s in range(20)]
        )
    assert errs["nonprivate"] < errs["kng"] < 3 * errs["nonprivate"]
    assert errs["nonprivate"] < errs["objective"] < 3 * errs["nonprivate"]
    assert errs["exponential"] > 3 * errs["kng"]


@pytest.mark.parametrize(
    "kind, kwargs, exc, match",
    [
        ("kng", {"norm": "l3"}, ValueError, "norm must be one of 'l1', 'l2', 'linf'"),
        ("kng", {"bound": 0.0}, ValueError, "bound must be finite and > 0"),
        ("kng", {"bound": -1.0}, ValueError, "bound must be finite and > 0"),
        ("kng", {"sampler": "hmc"}, ValueError, "sampler must be one of"),
        ("kng", {"steps": 1}, ValueError, "steps must be an integer >= 2"),
        ("kng", {"steps": 2.5}, TypeError, "steps must be an integer"),
        ("exponential", {"bound": float("inf")}, ValueError, "bound must be finite"),
        ("objective_ext", {"q": 0.0}, ValueError, r"q must lie in the open interval \(0, 1\)"),
        ("objective_ext", {"q": float("nan")}, ValueError, r"q must lie in the open interval \(0, 1\)"),
        ("objective_ext", {"q": "0.5"}, TypeError, r"q must be a real number in \(0, 1\)"),
        ("objective_ext", {"q": 1.0}, ValueError, r"q must lie in the open interval \(0, 1\)"),
        ("objective_ext", {"q": 1.5}, ValueError, r"q must lie in the open interval \(0, 1\)"),
        ("objective_ext", {"norm": "l0"}, ValueError, "norm must be one of"),
        ("objective", {"q": 0.5}, TypeError, r"unknown option\(s\) \['q'\]"),
        ("kng", {"epsilon": 1.0}, TypeError, "allowed options"),
    ],
)
def test_option_validation(kind, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        get_mechanism("linear", kind, hardened=False, **kwargs)


def test_lookup_errors():
    with pytest.raises(ValueError, match="mechanism kind must be one of"):
        get_mechanism("linear", "laplace", hardened=False)
    with pytest.raises(ValueError, match="problem must be one of"):
        get_mechanism("poisson", "kng", hardened=False)


@pytest.mark.parametrize("eps, exc", [(0.0, ValueError), (-1.0, ValueError), (np.nan, ValueError),
                                      (np.inf, ValueError), ("1", TypeError), (True, TypeError)])
def test_epsilon_validation(eps, exc, small):
    for kind in ALL_KINDS:
        with pytest.raises(exc, match="epsilon must be"):
            get_mechanism("linear", kind, hardened=False).release(small, eps, np.random.default_rng(0))


def test_release_input_validation(small):
    mech = get_mechanism("linear", "kng", hardened=False)
    with pytest.raises(TypeError, match="rng must be a numpy.random.Generator"):
        mech.release(small, 1.0, 0)
    with pytest.raises(TypeError, match="stats must be a kngflow.models.linear.problem.LinearStats"):
        mech.release((small.G, small.c), 1.0, np.random.default_rng(0))
    bad = LinearStats(small.G[:3, :3], small.c, small.yy, small.scale, small.n)
    with pytest.raises(ValueError, match=r"stats.c must have shape \(d,\)"):
        mech.release(bad, 1.0, np.random.default_rng(0))
    bad = LinearStats(small.G, small.c, small.yy, small.scale, 5)
    with pytest.raises(ValueError, match="stats.n must be at least d=12"):
        mech.release(bad, 1.0, np.random.default_rng(0))


def test_objective_gamma_is_positive_and_matches_kng_paper():
    ext = get_mechanism("linear", "objective_ext", hardened=False, q=0.5)
    assert ext.gamma(12, 1.0) == pytest.approx(24 / (np.exp(0.5) - 1))
    for q in (0.05, 0.5, 0.95):
        assert get_mechanism("linear", "objective_ext", hardened=False, q=q).gamma(12, 1.0) > 0
    obj = get_mechanism("linear", "objective", hardened=False)
    assert obj.norm == "linf" and obj.q == 0.5 and obj.sensitivity(12) == 8.0
    # reg, the ERM convention (gamma = n reg on the summed loss), is a floor on the rule's gamma
    rule = ext.gamma(12, 1.0, 1000)
    assert get_mechanism("linear", "objective_ext", hardened=False, q=0.5, reg=1.0).gamma(12, 1.0, 1000) == 1000.0 > rule
    assert get_mechanism("linear", "objective", hardened=False, reg=1e-9).gamma(12, 1.0, 1000) == obj.gamma(12, 1.0) == rule


def test_quadratic_l1_ball_is_optimal():
    rng = np.random.default_rng(0)
    for _ in range(50):
        d = int(rng.integers(1, 8))
        A = rng.standard_normal((d, d))
        H = A @ A.T + 0.1 * np.eye(d)
        h = rng.standard_normal(d) * 5
        x = np.empty(d)
        quadratic_l1_ball(H, h, 1.0, 1e-14, 200_000, x)
        assert np.abs(x).sum() <= 1.0 + 1e-12
        # fixed point of the projected-gradient map <=> optimal
        y = np.empty(d)
        project_l1_ball(x - 0.1 / np.linalg.eigvalsh(H)[-1] * (H @ x - h), 1.0, y)
        np.testing.assert_allclose(x, y, atol=1e-9)
        # no random feasible point does better
        f = lambda z: 0.5 * z @ H @ z - h @ z  # noqa: E731
        for z in rng.standard_normal((200, d)):
            z /= max(1.0, np.abs(z).sum())
            assert f(x) <= f(z) + 1e-9


def test_objective_noise_scale_recovered_from_releases():
    """Interior releases invert to V = 2c - H theta: ||V||_inf ~ Gamma(d, Delta/(eps q)) (Prop. 4.3).

    Negative control: the same KS against the scale a mechanism without the q split would use.
    """
    stats = get_problem("linear", d=2).simulate(10**5, np.random.default_rng(4))
    for q in (0.5, 0.85):
        mech = get_mechanism("linear", "objective_ext", hardened=False, norm="linf", q=q)
        eps = 1.0
        H = 2 * stats.G + mech.gamma(2, eps) * np.eye(2)
        V = []
        for s in range(3000):
            theta = mech.release(stats, eps, np.random.default_rng(s)).estimate / stats.scale
            assert np.abs(theta).sum() < 1.0
            V.append(2 * stats.c - H @ theta)
        radius = np.abs(np.array(V)).max(1)
        scale = mech.sensitivity(2) / (eps * q)
        assert sps.kstest(radius, sps.gamma(2, scale=scale).cdf).pvalue > 1e-5
        assert sps.kstest(radius, sps.gamma(2, scale=mech.sensitivity(2) / eps).cdf).pvalue < 1e-5


def _singular_stats():
    from kngflow.models.linear.problem import stats_from_arrays

    return stats_from_arrays(np.ones((15, 2)), np.zeros(15), y_bound=1.0)


SINGULAR_CASES = [("nonprivate", {}), ("exponential", {}), ("objective", {})]
SINGULAR_CASES += [("kng", {"norm": norm}) for norm in ("l1", "l2", "linf")]
SINGULAR_CASES += [("objective_ext", {"norm": norm, "q": q}) for norm in ("l1", "l2", "linf") for q in (0.25, 0.75)]


@pytest.mark.parametrize("kind, opts", SINGULAR_CASES)
def test_singular_gram_releases(kind, opts):
    """All rows x = (1, 1): X'X is singular; every mechanism releases (no inverse needed)."""
    stats = _singular_stats()
    mech = get_mechanism("linear", kind, hardened=False, steps=500, **opts) if kind in ("kng", "exponential") else get_mechanism("linear", kind, hardened=False, **opts
    )
    for eps in (1.0, 1e3):
        rel = mech.release(stats, eps, np.random.default_rng(0))
        assert np.all(np.isfinite(rel.estimate))
        if kind != "nonprivate":
            assert np.abs(rel.estimate).sum() <= 1.0 + 1e-9
            assert rel.info["sampler"] in ("gibbs", "metropolis", "exact")


def test_singular_gram_nonprivate_is_minimum_norm_and_stderr_nan():
    from kngflow.models.linear.problem import ols, ols_stderr, stats_from_arrays

    X = np.ones((15, 2))
    y = np.linspace(-1, 1, 15) ** 2
    stats = stats_from_arrays(X, y, y_bound=1.0)
    theta = ols(stats)
    np.testing.assert_allclose(theta, np.linalg.pinv(X) @ y, atol=1e-12)
    assert theta[0] == pytest.approx(theta[1])  # minimum norm: no component along (1, -1)
    assert np.all(np.isnan(ols_stderr(stats)))
    with pytest.raises(RuntimeError, match="exact sampler needs an invertible"):
        get_mechanism("linear", "kng", hardened=False, sampler="exact").release(stats, 1.0, np.random.default_rng(0))


def test_release_record_is_the_estimate_only(small):
    rel = get_mechanism("linear", "kng", hardened=False).release(small, 1.0, np.random.default_rng(0))
    assert list(rel.record()) == ["estimate"] and rel.record()["estimate"] is rel.estimate
    assert rel.diagnostics() == rel.info and rel.diagnostics() is not rel.info
    assert "NON-PRIVATE" in type(rel).__doc__


def test_objective_gamma_large_epsilon_is_finite():
    ext = get_mechanism("linear", "objective_ext", hardened=False, q=0.5)
    assert ext.gamma(2, 1400.0) == pytest.approx(4 * np.exp(-700.0), rel=1e-12)
    assert ext.gamma(2, 1e20) == 0.0

"""Linear-regression data protocol and streaming sufficient statistics."""

import numpy as np
import pytest

from kngflow.api import get_problem
from kngflow.models.linear.problem import (
    LinearProblem,
    gradient_sensitivity,
    loss_sensitivity,
    ols_stderr,
    paper_theta_star,
    stats_from_arrays,
)


def materialise(problem, n, seed):
    """The same data set as ``problem.simulate(n, default_rng(seed))``, as full arrays."""
    rng_x, rng_e = np.random.default_rng(seed).spawn(2)
    X = np.ones((n, problem.d))
    X[:, 1:] = 2.0 * rng_x.random((n, problem.d - 1)) - 1.0
    y = X @ problem.theta_star + rng_e.standard_normal(n)
    return X, y


def test_paper_theta_star():
    ts = paper_theta_star(12)
    assert ts.shape == (12,)
    assert ts[0] == 0 and ts[1] == -1 and ts[-1] == pytest.approx(1 - 2 / 11)
    assert np.allclose(np.diff(ts[1:]), 2 / 11)


def test_streaming_equals_materialised():
    problem = get_problem("linear", d=12)
    n = 10**5
    stats = problem.simulate(n, np.random.default_rng(7))
    X, y = materialise(problem, n, 7)
    R = np.max(np.abs(y))
    assert stats.n == n
    assert stats.scale == R
    np.testing.assert_allclose(stats.G, X.T @ X, rtol=1e-10)
    np.testing.assert_allclose(stats.c, X.T @ (y / R), rtol=1e-10)
    assert stats.yy == pytest.approx(np.sum((y / R) ** 2), rel=1e-10)


@pytest.mark.parametrize("chunk", [1000, 4096, 12345, 65536, 100_000])
def test_simulate_bit_identical_across_chunks(chunk):
    problem = LinearProblem(d=12)
    ref = problem.simulate(100_000, np.random.default_rng(3))
    got = problem.simulate(100_000, np.random.default_rng(3), chunk_rows=chunk)
    for a, b in zip(ref, got):
        assert np.array_equal(a, b)


def test_stats_from_arrays_bit_identical_and_bounded():
    problem = LinearProblem(d=4)
    X, y = materialise(problem, 70_001, 11)
    ref = stats_from_arrays(X, y)
    for chunk in (1, 999, 65536, 70_001):
        if chunk == 1:
            got = stats_from_arrays(X[:5000], y[:5000], chunk_rows=1)
            ref_small = stats_from_arrays(X[:5000], y[:5000])
            assert all(np.array_equal(a, b) for a, b in zip(ref_small, got))
            continue
        got = stats_from_arrays(X, y, chunk_rows=chunk)
        assert all(np.array_equal(a, b) for a, b in zip(ref, got))
    sim = problem.simulate(70_001, np.random.default_rng(11))
    np.testing.assert_allclose(ref.G, sim.G, rtol=1e-12)
    np.testing.assert_allclose(ref.c, sim.c, rtol=1e-12)
    pub = stats_from_arrays(X, y, y_bound=20.0)
    assert pub.scale == 20.0
    np.testing.assert_allclose(pub.c, X.T @ y / 20.0, rtol=1e-10)


def test_public_bound_protocol_clips():
    problem = get_problem("linear", d=3, protocol="public_bound", y_bound=1.5)
    stats = problem.simulate(5000, np.random.default_rng(0))
    X, y = materialise(problem, 5000, 0)
    yc = np.clip(y, -1.5, 1.5)
    assert stats.scale == 1.5
    np.testing.assert_allclose(stats.c, X.T @ yc / 1.5, rtol=1e-10)
    assert "public" in problem.caveats
    assert "WITHOUT privacy" in get_problem("linear").caveats


def test_ols_stderr_matches_textbook():
    problem = LinearProblem(d=3, theta_star=np.array([0.5, -1.0, 2.0]))
    X, y = materialise(problem, 2000, 5)
    stats = stats_from_arrays(X, y)
    beta = np.linalg.lstsq(X, y, rcond=None)[0]
    resid = y - X @ beta
    s2 = resid @ resid / (2000 - 3)
    se = np.sqrt(s2 * np.diag(np.linalg.inv(X.T @ X)))
    np.testing.assert_allclose(ols_stderr(stats), se, rtol=1e-8)
    summary = problem.data_summary(stats)
    assert summary["scale"] == np.max(np.abs(y))


def test_sensitivities():
    assert gradient_sensitivity("linf", 12, 1.0) == 8.0
    assert gradient_sensitivity("l1", 12, 1.0) == 96.0
    assert gradient_sensitivity("l2", 4, 0.5) == pytest.approx(12.0)
    assert loss_sensitivity(1.0) == 4.0
    with pytest.raises(ValueError, match="norm must be one of"):
        gradient_sensitivity("l3", 2, 1.0)


def test_sensitivity_is_attained_bound():
    """Brute force: no adjacent pair of records beats Delta_inf = 4(1+B) (and it is nearly hit)."""
    rng = np.random.default_rng(0)
    d, B = 3, 1.0
    best = 0.0
    for _ in range(20000):
        x1, x2 = rng.choice([-1.0, 1.0], size=(2, d))
        y1, y2 = rng.choice([-1.0, 1.0], size=2)
        theta = rng.standard_normal(d)
        theta *= B / np.abs(theta).sum()
        g = -2 * (y1 - x1 @ theta) * x1 + 2 * (y2 - x2 @ theta) * x2
        best = max(best, np.abs(g).max())
    assert best <= gradient_sensitivity("linf", d, B) + 1e-12
    assert best > 0.9 * gradient_sensitivity("linf", d, B)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"d": 0}, "d must be a positive integer"),
        ({"protocol": "secret"}, "protocol must be one of"),
        ({"protocol": "public_bound"}, "y_bound must be finite"),
        ({"d": 3, "theta_star": [1.0, 2.0]}, "theta_star must have shape"),
    ],
)
def test_problem_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        get_problem("linear", **kwargs)


def test_problem_lookup_errors():
    with pytest.raises(ValueError, match="problem must be one of"):
        get_problem("poisson")
    with pytest.raises(TypeError, match="allowed options"):
        get_problem("linear", dim=3)
    problem = get_problem("linear", d=12)
    with pytest.raises(ValueError, match="n must be at least d=12"):
        problem.check_n(5)
    with pytest.raises(ValueError, match="n must be at least d=12"):
        problem.simulate(11, np.random.default_rng(0))
    with pytest.raises(TypeError, match="rng must be"):
        problem.simulate(100, 42)


def test_user_data_validation():
    X = np.ones((10, 2))
    y = np.zeros(10)
    with pytest.raises(ValueError, match=r"X must have every entry finite and in \[-1, 1\]"):
        stats_from_arrays(X * 2, y)
    with pytest.raises(ValueError, match="y must lie in"):
        stats_from_arrays(X, y + 3, y_bound=2.0)
    with pytest.raises(ValueError, match="X must be a 2-D array"):
        stats_from_arrays(np.ones(10), y)
    with pytest.raises(ValueError, match="y must be a 1-D array of length n=10"):
        stats_from_arrays(X, np.zeros(9))
    with pytest.raises(ValueError, match="n must be at least d"):
        stats_from_arrays(np.ones((1, 2)), np.zeros(1))
    with pytest.raises(ValueError, match="y_bound must be finite and > 0"):
        stats_from_arrays(X, y, y_bound=-1.0)

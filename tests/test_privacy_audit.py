"""Privacy audits: exact density ratios on adjacent data sets (d = 2).

The normalised log densities of a mechanism on two adjacent data sets are computed on a
fine grid over Theta = {||theta||_1 <= 1}; epsilon-DP requires
max_theta |log f_D(theta) - log f_D'(theta)| <= epsilon.  The adversarial neighbours below
were found by searching data sets built from corner records, where the gradient (or loss)
difference reaches its sensitivity bound.  A mechanism run at 2 epsilon must be caught.
"""

import numpy as np
import pytest

from kngflow.mechanisms import get_mechanism
from kngflow.problems.linear import stats_from_arrays

GRID = np.linspace(-1, 1, 801)
THETA = np.stack(np.meshgrid(GRID, GRID, indexing="ij"), -1).reshape(-1, 2)
THETA = THETA[np.abs(THETA).sum(1) <= 1.0]
SLACK = 5e-3  # grid quadrature error of the log normalising constants


def stats(records):
    X = np.array([[1.0, x] for x, _ in records])
    y = np.array([y for _, y in records])
    return stats_from_arrays(X, y, y_bound=1.0)


def max_log_ratio(mech, eps, D1, D2):
    l1 = mech.log_density(stats(D1), eps, THETA)
    l2 = mech.log_density(stats(D2), eps, THETA)
    l1 -= np.logaddexp.reduce(l1)
    l2 -= np.logaddexp.reduce(l2)
    return float(np.max(np.abs(l1 - l2)))


ADVERSARIAL = {
    "kng": ((-1.0, -1.0), (1.0, -1.0), [(-1.0, 0.0)] * 6 + [(1.0, 1.0)] * 8),
    "exponential": ((-1.0, -1.0), (-1.0, 1.0), [(-1.0, 1.0)] * 8 + [(0.0, 1.0)] * 8),
}


@pytest.mark.parametrize("kind", ["kng", "exponential"])
def test_density_ratio_within_epsilon_and_2eps_caught(kind):
    r1, r2, rest = ADVERSARIAL[kind]
    mech = get_mechanism("linear", kind, bound=1.0)
    eps = 1.0
    assert max_log_ratio(mech, eps, [r1] + rest, [r2] + rest) <= eps + SLACK
    # Negative control: the same mechanism at 2 epsilon violates epsilon-DP on this pair.
    assert max_log_ratio(mech, 2 * eps, [r1] + rest, [r2] + rest) > eps + SLACK


@pytest.mark.parametrize("kind", ["kng", "exponential"])
def test_density_ratio_random_neighbours(kind):
    rng = np.random.default_rng(0)
    mech = get_mechanism("linear", kind, bound=1.0)
    for _ in range(30):
        n = int(rng.integers(2, 8))
        rest = [(float(x), float(y)) for x, y in rng.uniform(-1, 1, (n - 1, 2))]
        r1, r2 = (tuple(map(float, r)) for r in rng.choice([-1.0, 1.0], (2, 2)))
        assert max_log_ratio(mech, 0.5, [r1] + rest, [r2] + rest) <= 0.5 + SLACK


def test_kng_without_factor_two_is_the_2eps_mechanism():
    """Dropping the factor 2 of Theorem 3.1 (eps/Delta) is exactly KNG at 2 eps: caught above."""
    mech = get_mechanism("linear", "kng")
    s = stats(ADVERSARIAL["kng"][2] + [ADVERSARIAL["kng"][0]])
    eps_over_delta = 1.0 / mech.sensitivity(2)
    lhs = mech.log_density(s, 2.0, THETA)
    rhs = -eps_over_delta * np.abs(THETA @ s.G - s.c).max(1) * 2
    np.testing.assert_allclose(lhs, rhs)

"""Hardened quantile-regression KNG keeps its surrogate-map sampler.

The walk moves on a dyadic lattice (exact positions), the map proposals' triangular
solves are certified a posteriori (kngflow.kernels.certified.chol_solve_certificate), and a
state whose rounding exceeds the grid's bound is not released (the walk's state is).
Checked: the certificate against exact rational arithmetic (and an error planted in the
solution), the hardened law against the unhardened one (KS, with a 2-epsilon control),
grid points, the guarantee, and the fallback.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats as sps

from kngflow.api import get_mechanism, get_problem
from kngflow.kernels.certified import chol_solve_certificate, inverse_norm_bound

PROBLEM = get_problem("quantreg")


def test_the_triangular_solve_certificate_bounds_the_true_error_and_sees_a_planted_one():
    rng = np.random.default_rng(3)
    A = rng.uniform(-1, 1, (3, 3))
    L = np.linalg.cholesky(A @ A.T + 3 * np.eye(3))
    u = rng.normal(size=3) * 40
    x = np.linalg.solve(L.T, np.linalg.solve(L, u))
    # exact (L L')^-1 u in rationals
    M = [[sum(Fraction(float(L[i, k])) * Fraction(float(L[j, k])) for k in range(3)) for j in range(3)] for i in range(3)]
    b = [Fraction(float(v)) for v in u]
    for c in range(3):  # Gauss-Jordan
        for r in range(3):
            if r != c:
                f = M[r][c] / M[c][c]
                M[r] = [a - f * e for a, e in zip(M[r], M[c])]
                b[r] -= f * b[c]
    exact = [b[i] / M[i][i] for i in range(3)]
    true = math.sqrt(sum(float((Fraction(float(x[i])) - exact[i]) ** 2) for i in range(3)))
    bound = chol_solve_certificate(L, x, u, inverse_norm_bound(L, np.linalg.inv(L)))
    assert true <= bound < 1e-12, (true, bound)
    wrong = x.copy()
    wrong[1] += 1e-9
    assert chol_solve_certificate(L, wrong, u, inverse_norm_bound(L, np.linalg.inv(L))) > 1e-10


def test_hardened_quantreg_kng_runs_the_surrogate_map_on_the_grid_with_its_guarantee():
    data = PROBLEM.simulate(20_000, np.random.default_rng(1))
    mech = get_mechanism("quantreg", "kng")
    assert mech.hardened
    h = mech.hardening(data, 1.0)
    eps2, delta2 = mech.hardened_guarantee(data, 1.0)
    assert eps2 == 1.0 and 1e-8 < delta2 < 1e-6
    for seed in range(10):
        rel = mech.release(data, 1.0, np.random.default_rng(seed))
        assert rel.info["sampler"] == "surrogate_map"
        assert np.array_equal(rel.estimate / h.grid, np.round(rel.estimate / h.grid))


def test_a_state_whose_rounding_exceeds_the_bound_is_not_released_the_walks_state_is():
    data = PROBLEM.simulate(2_000, np.random.default_rng(2))
    mech = get_mechanism("quantreg", "kng", steps=40)
    strict = mech.hardening(data, 1.0)._replace(eta=0.0)
    mech.hardening = lambda data, epsilon: strict  # a bound no map or base state meets
    samplers = {mech.release_surrogate_hardened(data, 1.0, np.random.default_rng(s))[1]["sampler"]
                for s in range(5)}
    assert samplers == {"metropolis"}
    # control: with the real bound the map's states are released
    plain = get_mechanism("quantreg", "kng", steps=40)
    assert {plain.release_surrogate_hardened(data, 1.0, np.random.default_rng(s))[1]["sampler"]
            for s in range(5)} == {"surrogate_map"}


@pytest.mark.slow
def test_the_hardened_law_matches_the_unhardened_law_and_a_2eps_control_fails():
    """Two-sample KS per coordinate on 800 releases each: p = 0.27 at these seeds, the
    control 2e-8 (threshold 2.5e-5; 8e-7 with 600 releases)."""
    data = PROBLEM.simulate(1_000, np.random.default_rng(5))
    draws = 800
    plain = get_mechanism("quantreg", "kng", hardened=False, steps=200)
    hard = get_mechanism("quantreg", "kng", steps=200)

    def sample(mech, eps, offset):
        return np.array([mech.release(data, eps, np.random.default_rng([offset, s])).estimate for s in range(draws)])

    reference = sample(plain, 1.0, 0)
    same = sample(hard, 1.0, 1)
    p = min(sps.ks_2samp(reference[:, j], same[:, j]).pvalue for j in range(2))
    assert p > 1e-4 / 4, p
    control = sample(hard, 2.0, 2)
    assert min(sps.ks_2samp(reference[:, j], control[:, j]).pvalue for j in range(2)) < 1e-4 / 4

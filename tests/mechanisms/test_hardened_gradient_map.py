"""Hardened KNG on a smooth loss (logistic regression) keeps a map sampler: the frozen map.

The hardened release proposes through the gradient map frozen at the loss's minimiser
(the surrogate-map chain with the loss as its own surrogate), accepted on the exact KNG
density; its final state is certified in double-double (a map state's two triangular
solves, kngflow.kernels.certified.chol_solve_dd; a base-measure draw's low part,
kngflow.kernels.map_proposals._draw_base_dd) and snapped on a grid that follows the
release's public spread.  Checked: both certificates against exact rational arithmetic
(with an error planted), grid points and the guarantee, the fallback, and the law against
the unhardened gradient map (KS, with a 2-epsilon control).  The law at n = 10, 20, 50
against the grid density: tests/models/linear/test_map_small_n.py.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats as sps

from kngflow.api import get_mechanism, get_problem
from kngflow.kernels.certified import chol_solve_dd, inverse_norm_bound
from kngflow.kernels.map_proposals import _draw_base, _draw_base_dd

PROBLEM = get_problem("logistic")
U = 2.0**-53


def exact_chol_solve(L, u):
    """``(L L')^-1 u`` in rationals."""
    d = len(u)
    M = [[sum(Fraction(float(L[i, k])) * Fraction(float(L[j, k])) for k in range(d)) for j in range(d)] for i in range(d)]
    b = [Fraction(float(v)) for v in u]
    for c in range(d):  # Gauss-Jordan
        for r in range(d):
            if r != c:
                f = M[r][c] / M[c][c]
                M[r] = [a - f * e for a, e in zip(M[r], M[c])]
                b[r] -= f * b[c]
    return [b[i] / M[i][i] for i in range(d)]


def solve_dd(L, u):
    Linv = np.linalg.inv(L)
    hi, lo = np.empty(len(u)), np.empty(len(u))
    bound = chol_solve_dd(L, np.ascontiguousarray(L.T), Linv, np.ascontiguousarray(Linv.T),
                          inverse_norm_bound(L, Linv), u, hi, lo, 2)
    return hi, lo, bound


def test_the_double_double_triangular_solve_is_certified_against_exact_arithmetic():
    rng = np.random.default_rng(3)
    A = rng.uniform(-1, 1, (4, 4))
    L = np.linalg.cholesky(1e4 * (A @ A.T) + 30 * np.eye(4))
    u = rng.normal(size=4) * 40
    hi, lo, bound = solve_dd(L, u)
    exact = exact_chol_solve(L, u)
    true = math.sqrt(sum(float((Fraction(float(hi[i])) + Fraction(float(lo[i])) - exact[i]) ** 2) for i in range(4)))
    assert true <= bound < 1e-28, (true, bound)
    plain = np.linalg.solve(L.T, np.linalg.solve(L, u))  # a double solve errs by far more
    assert max(abs(float(Fraction(float(plain[i])) - exact[i])) for i in range(4)) > 1e3 * bound


def test_a_planted_error_in_the_right_hand_side_shows_in_the_certified_solution():
    rng = np.random.default_rng(4)
    L = np.linalg.cholesky(np.diag([4.0, 9.0, 16.0]) + 0.5)
    u = rng.normal(size=3)
    hi, lo, bound = solve_dd(L, u)
    wrong = u.copy()
    wrong[0] += 1e-15
    exact = exact_chol_solve(L, wrong)  # the solution of the perturbed system is not within the bound
    assert math.sqrt(sum(float((Fraction(float(hi[i])) + Fraction(float(lo[i])) - exact[i]) ** 2)
                         for i in range(3))) > 1e3 * bound


def test_a_base_draw_in_double_double_is_the_plain_draw_plus_its_exact_low_part():
    center = np.array([0.25, -3.0, 1e-3])
    B = 10.0
    for seed in range(50):
        plain, hi, lo = np.empty(3), np.empty(3), np.empty(3)
        _draw_base(np.random.default_rng(seed), center, B, 0.0, plain)
        rng = np.random.default_rng(seed)
        _draw_base_dd(rng, center, B, 0.0, hi, lo)
        assert np.array_equal(plain, hi)  # the same random numbers, the same plain draw
        check = np.random.default_rng(seed)  # the exact draw from the same exponentials and signs
        e = [Fraction(float(check.standard_exponential())) for _ in range(4)]
        total = sum(e)
        for i in range(3):
            sign = 1 if check.random() < 0.5 else -1
            exact = Fraction(float(center[i])) + sign * Fraction(B) * e[i] / total
            err = abs(float(Fraction(float(hi[i])) + Fraction(float(lo[i])) - exact))
            assert err <= 48 * U * U * (abs(center[i]) + B), (seed, i, err)
            if seed == 0 and i == 1:  # control: the plain draw alone is farther off than the bound
                assert abs(float(Fraction(float(hi[i])) - exact)) > 48 * U * U * (abs(center[i]) + B)


def test_hardened_logistic_kng_runs_the_frozen_map_on_a_grid_that_follows_the_spread():
    data = PROBLEM.simulate(20_000, np.random.default_rng(1))
    mech = get_mechanism("logistic", "kng")
    assert mech.hardened
    h = mech.hardening(data, 1.0)
    spread = 1.0 / (mech.rate(data, 1.0) * data.n * data.d / 4.0)
    assert spread / 32 < h.grid <= spread / 16 and h.site == "sampler"
    assert h.eta == math.ldexp(h.grid, -44)
    eps2, delta2 = mech.hardened_guarantee(data, 1.0)
    assert eps2 == 1.0 and 0 < delta2 < 1e-11
    for seed in range(5):
        rel = mech.release(data, 1.0, np.random.default_rng(seed))
        assert rel.info["sampler"] == "frozen_map"
        assert np.array_equal(rel.estimate / h.grid, np.round(rel.estimate / h.grid))
    # the unhardened default is still the gradient map
    assert get_mechanism("logistic", "kng", hardened=False).release(
        data, 1.0, np.random.default_rng(0)).info["sampler"] == "gradient_map"


def test_a_state_whose_certificate_exceeds_the_bound_is_not_released_the_lattice_walk_is():
    data = PROBLEM.simulate(200, np.random.default_rng(2))
    mech = get_mechanism("logistic", "kng", steps=40)
    strict = mech.hardening(data, 1.0)._replace(eta=-1.0)
    mech.hardening = lambda data, epsilon: strict  # a bound no state meets
    samplers = {mech.release(data, 1.0, np.random.default_rng(s)).info["sampler"] for s in range(4)}
    assert samplers == {"metropolis"}
    plain = get_mechanism("logistic", "kng", steps=40)  # control: with the real bound the map's states are released
    assert {plain.release(data, 1.0, np.random.default_rng(s)).info["sampler"] for s in range(4)} == {"frozen_map"}


@pytest.mark.slow
def test_the_hardened_law_matches_the_unhardened_gradient_map_and_a_2eps_control_fails():
    """Two-sample KS per coordinate (m = 7) on 300 releases each: p = 0.013 at these seeds,
    the control 1e-14 (threshold 1e-4 / 7)."""
    data = PROBLEM.simulate(2_000, np.random.default_rng(5))
    draws = 300
    plain = get_mechanism("logistic", "kng", hardened=False)
    hard = get_mechanism("logistic", "kng")

    def sample(mech, eps, offset):
        return np.array([mech.release(data, eps, np.random.default_rng([offset, s])).estimate for s in range(draws)])

    reference = sample(plain, 1.0, 0)
    same = sample(hard, 1.0, 1)
    d = data.d
    p = min(sps.ks_2samp(reference[:, j], same[:, j]).pvalue for j in range(d))
    assert p > 1e-4 / d, p
    control = sample(hard, 2.0, 2)
    assert min(sps.ks_2samp(reference[:, j], control[:, j]).pvalue for j in range(d)) < 1e-4 / d

"""Hardened linear-regression KNG and exponential mechanism: the exact sampler, certified.

A hardened release keeps the unhardened default sampler (exact draws), refines the
accepted draw's solve ``G theta = c + u`` in double-double and certifies its error
(kngflow.kernels.dd); the grid follows the release's public spread.  Checked here:
the certificate is a true bound (against exact rational arithmetic) and sharp enough
to reject a plain float64 solve at large n; the hardened law matches the unhardened
exact law (KS, with a 2-epsilon control); releases are exact grid points; the fallback
chain's positions are exact lattice points (Gibbs: tests/mechanisms/test_hardened_gibbs.py); the grid adds at most 1/1024 of the noise
variance at every n of the shipped studies; a spec's study-level ``hardened`` switch.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats as sps

from kngflow.api import get_mechanism, get_problem
from kngflow.kernels.certified import certified_solve, inverse_norm_bound
from kngflow.models.linear.certified import ETA_BITS, certified_factors, two_sum_arrays
from kngflow.models.linear.sampler import KIND_KNG_LINF, metropolis_chains
from kngflow.sweep.spec import SpecError, parse_spec

PROBLEM = get_problem("linear")
#: per-coordinate KS threshold: 4 comparisons x 12 coordinates, overall false failure < 1e-4
KS_P = 1e-4 / 48


@pytest.fixture(scope="module")
def data_1e4():
    return PROBLEM.simulate(10_000, np.random.default_rng(11))


def _exact_solution(G, v):
    """``G^{-1} v`` in exact rational arithmetic (Gauss-Jordan on Fractions)."""
    d = len(v)
    A = [[Fraction(float(G[i, k])) for k in range(d)] + [Fraction(v[i])] for i in range(d)]
    for col in range(d):
        piv = max(range(col, d), key=lambda r: abs(A[r][col]))
        A[col], A[piv] = A[piv], A[col]
        for r in range(d):
            if r != col and A[r][col] != 0:
                f = A[r][col] / A[col][col]
                A[r] = [a - f * b for a, b in zip(A[r], A[col])]
    return [A[i][d] / A[i][i] for i in range(d)]


def test_the_certificate_bounds_the_true_error_and_rejects_a_plain_float_solve():
    rng = np.random.default_rng(5)
    d = 4
    X = rng.uniform(-1, 1, (200, d))
    G = X.T @ X
    c = rng.uniform(-50, 50, d)
    u = rng.laplace(size=d)
    vh, vl = two_sum_arrays(c, u)
    Ginv = np.linalg.inv(G)
    inv_norm = inverse_norm_bound(G, Ginv)
    exact = _exact_solution(G, [Fraction(float(a)) + Fraction(float(b)) for a, b in zip(vh, vl)])
    plain = Ginv @ vh

    def error(hi, lo):
        return math.sqrt(sum(float((Fraction(float(h)) + Fraction(float(l)) - e) ** 2) for h, l, e in zip(hi, lo, exact)))

    hi, lo = plain.copy(), np.zeros(d)
    bound = certified_solve(G, Ginv, inv_norm, vh, vl, hi, lo, 0.0, 3, 1.0)
    true = error(hi, lo)
    assert true <= bound < 1e-28, (true, bound)
    # the plain float64 solve, certified without refinement: a true bound too, and a large one
    hi0, lo0 = plain.copy(), np.zeros(d)
    bound0 = certified_solve(G, Ginv, inv_norm, vh, vl, hi0, lo0, 0.0, 0, 1.0)
    assert error(hi0, lo0) <= bound0 and bound0 > 1e-18
    # negative control: an error planted in the refined solution is seen by the certificate
    lo[0] += 1e-20
    assert certified_solve(G, Ginv, inv_norm, vh, vl, hi, lo, 0.0, 0, 1.0) > 5e-21


def test_at_n_1e7_a_plain_float_solve_fails_the_grids_rounding_bound_and_the_refined_one_passes():
    data = PROBLEM.simulate(10_000_000, np.random.default_rng(7))
    mech = get_mechanism("linear", "kng")
    h = mech.hardening(data, 1.0)
    assert h.eta == math.ldexp(h.grid, -ETA_BITS)
    G, Ginv, inv_norm, _, _ = certified_factors(data.G)
    u = np.random.default_rng(1).laplace(size=data.d) * 16
    vh, vl = two_sum_arrays(np.asarray(data.c), u)
    results = []
    for iters in (0, 3):
        hi, lo = Ginv @ vh, np.zeros(data.d)
        results.append(certified_solve(G, Ginv, inv_norm, vh, vl, hi, lo, 0.0, iters, float(data.scale)))
    assert results[0] > h.eta > 1e6 * results[1], (results, h.eta)


@pytest.mark.parametrize("kind", ["kng", "exponential"])
def test_hardened_releases_use_the_exact_sampler_and_are_exact_grid_points(data_1e4, kind):
    mech = get_mechanism("linear", kind)
    assert mech.hardened
    h = mech.hardening(data_1e4, 1.0)
    for seed in range(20):
        rel = mech.release(data_1e4, 1.0, np.random.default_rng(seed))
        assert rel.info["sampler"] == "exact"
        cells = rel.estimate / h.grid
        assert np.array_equal(cells, np.round(cells)) and np.all(np.abs(rel.estimate) <= h.bound)
    if kind == "kng":  # the same draws as the unhardened release, moved by less than one cell
        plain = get_mechanism("linear", kind, hardened=False).release(data_1e4, 1.0, np.random.default_rng(3))
        hard = mech.release(data_1e4, 1.0, np.random.default_rng(3))
        assert np.max(np.abs(plain.estimate - hard.estimate)) < h.grid


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["kng", "exponential"])
def test_the_hardened_law_matches_the_unhardened_exact_law_and_a_2eps_control_fails(data_1e4, kind):
    draws = 2500
    plain = get_mechanism("linear", kind, hardened=False)
    hard = get_mechanism("linear", kind)

    def sample(mech, eps, offset):
        return np.array([mech.release(data_1e4, eps, np.random.default_rng([offset, s])).estimate
                         for s in range(draws)])

    reference = sample(plain, 1.0, 0)
    same = sample(hard, 1.0, 1)
    p = min(sps.ks_2samp(reference[:, j], same[:, j]).pvalue for j in range(data_1e4.d))
    assert p > KS_P, p
    control = sample(hard, 2.0, 2)
    p2 = min(sps.ks_2samp(reference[:, j], control[:, j]).pvalue for j in range(data_1e4.d))
    assert p2 < KS_P, p2


def test_the_fallback_chain_moves_on_an_exact_lattice_and_a_hardened_release_without_exact_draws_uses_it():
    data = PROBLEM.simulate(100, np.random.default_rng(2))
    lattice = 2.0**-46
    out, acc = np.empty((3, data.d)), np.empty(3)
    metropolis_chains(np.random.default_rng(1), data.G, data.c, 0.1, 1.0, KIND_KNG_LINF, 200, out, acc, lattice)
    cells = out / lattice
    assert np.array_equal(cells, np.round(cells)) and np.all(acc > 0)
    # negative control: without the lattice the positions are not lattice points
    metropolis_chains(np.random.default_rng(1), data.G, data.c, 0.1, 1.0, KIND_KNG_LINF, 200, out, acc)
    assert not np.array_equal(out / lattice, np.round(out / lattice))
    # without exact draws a hardened release runs the lattice chain the norm has: Gibbs (ℓ∞), Metropolis (ℓ2)
    for norm, chain in (("linf", "gibbs"), ("l2", "metropolis")):
        mech = get_mechanism("linear", "kng", norm=norm, max_tries=1, steps=200, gibbs_sweeps=50)
        rel = mech.release(data, 1.0, np.random.default_rng(0))
        h = mech.hardening(data, 1.0)
        assert rel.info["sampler"] in ("exact", chain)
        assert np.array_equal(rel.estimate / h.grid, np.round(rel.estimate / h.grid))


@pytest.mark.parametrize("kind", ["kng", "exponential"])
@pytest.mark.parametrize("n", [100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000])
def test_the_grid_follows_the_spread_so_snapping_adds_at_most_a_thousandth_of_the_variance(kind, n):
    mech = get_mechanism("linear", kind)
    stats = PROBLEM.simulate(max(n, 12), np.random.default_rng(0)) if n <= 10_000 else None
    d, scale = 12, (float(stats.scale) if stats is not None else 4.0)
    spread = mech.spread(n, d, 1.0) * scale

    class Public:  # what hardening() reads: n, d, scale (public facts of the data)
        pass

    public = Public()
    public.n, public.d, public.scale = n, d, scale
    h = mech.hardening(public, 1.0)
    assert h.grid <= spread / 16 or h.grid == math.ldexp(2.0 ** math.floor(math.log2(scale)), -12)
    assert h.grid**2 / 4 <= spread**2 / 1024
    eps2, delta2 = mech.hardened_guarantee(public, 1.0)
    assert eps2 == 1.0 and delta2 < (1e-10 if kind == "kng" else 1e-7)


def test_a_study_level_hardened_switch_hardens_every_mechanism_and_a_bad_value_names_the_field():
    text = """
    name = "h"
    seed = 1
    hardened = true
    [problem]
    name = "linear"
    [grid]
    n = [100]
    epsilon = [1.0]
    replicates = 1
    [[mechanisms]]
    label = "np"
    kind = "nonprivate"
    [[mechanisms]]
    label = "kng"
    kind = "kng"
    [[mechanisms]]
    label = "kng_plain"
    kind = "kng"
    hardened = false
    """
    spec = parse_spec(text)
    built = spec.build_mechanisms()
    assert built["kng"].hardened and not built["kng_plain"].hardened and not built["np"].hardened
    unswitched = parse_spec(text.replace("hardened = true\n", ""))
    assert not unswitched.build_mechanisms()["kng"].hardened and spec.hash != unswitched.hash
    with pytest.raises(SpecError, match="hardened: must be true or false"):
        parse_spec(text.replace("hardened = true", 'hardened = "yes"'))


@pytest.mark.parametrize("n", [100, 100_000])
def test_hardened_objective_perturbation_is_certified_on_a_face_and_inside_the_ball(n):
    """n = 100: the minimiser usually lies on a face of the ℓ1 ball (the KKT system of the
    face is certified); n = 1e5: inside.  The same noise as the unhardened release, moved
    by less than one cell."""
    data = PROBLEM.simulate(n, np.random.default_rng(n))
    plain = get_mechanism("linear", "objective", hardened=False)
    hard = get_mechanism("linear", "objective")
    h = hard.hardening(data, 1.0)
    faces = 0
    for seed in range(30):
        p = plain.release(data, 1.0, np.random.default_rng(seed)).estimate
        q = hard.release(data, 1.0, np.random.default_rng(seed)).estimate
        assert np.max(np.abs(p - q)) < h.grid and np.array_equal(q / h.grid, np.round(q / h.grid))
        faces += np.abs(p / data.scale).sum() >= 1.0 - 1e-9
    assert (faces > 10) if n == 100 else faces == 0


def test_the_kkt_certificate_refuses_a_wrong_face():
    from kngflow.kernels.certified_qp import certify_quadratic_l1_ball
    from kngflow.kernels.optimize import quadratic_l1_ball

    data = PROBLEM.simulate(100, np.random.default_rng(4))
    G2 = 2.0 * data.G
    gamma = 40.0
    v = 2.0 * data.c - np.random.default_rng(0).laplace(size=data.d) * 30
    theta = np.empty(data.d)
    quadratic_l1_ball(G2 + gamma * np.eye(data.d), v, 1.0, 0.0, 100_000, theta)
    assert np.abs(theta).sum() >= 1 - 1e-9 and np.count_nonzero(theta) < data.d  # on a face
    hi, lo = np.empty(data.d), np.empty(data.d)
    assert certify_quadratic_l1_ball(G2, gamma, v, np.zeros(data.d), theta, 1.0, 3, hi, lo) < 1e-25
    # negative controls: a coordinate of the support dropped, or a wrong sign, is not certified
    wrong = theta.copy()
    wrong[np.flatnonzero(wrong)[0]] = 0.0
    assert certify_quadratic_l1_ball(G2, gamma, v, np.zeros(data.d), wrong, 1.0, 3, hi, lo) == np.inf
    flipped = theta.copy()
    k = np.flatnonzero(flipped)[-1]
    flipped[k] = -flipped[k]
    assert certify_quadratic_l1_ball(G2, gamma, v, np.zeros(data.d), flipped, 1.0, 3, hi, lo) == np.inf

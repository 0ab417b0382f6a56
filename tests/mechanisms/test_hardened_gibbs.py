"""Hardened coordinate Gibbs: chains on a dyadic lattice, each coordinate drawn from the
target's conditional restricted to the lattice points of its chord.

Checked here: the lattice conditional is exactly the restriction (chi-square against the
restricted pmf on a coarse lattice, where the rejection step matters; negative controls:
the continuous draw rounded without the rejection step, and twice the rate); the lattice
chain's law matches the exact sampler's (KS, 2-epsilon control); its positions are exact
lattice points; hardened releases run Gibbs where the unhardened ones do (linear
regression at small n, the quantile-regression exponential mechanism) and are exact grid
points.  Each statistical check's threshold keeps the family's false failures below 1e-4.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import pytest
from scipy import stats as sps

from kngflow.api import get_mechanism, get_problem
from kngflow.mechanisms.hardening import dyadic_lattice
from kngflow.kernels.metropolis import new_tuner
from kngflow.models.linear.sampler import KIND_EXP, KIND_KNG_L1, KIND_KNG_LINF, _gibbs_start, _gibbs_sweeps
from kngflow.models.quantreg.gibbs import TARGET_KNG, _qr_conditional, _qr_exp_conditional, _qr_exp_lattice

#: chi-square checks in this file (each of the 5 conditionals: the law and its controls)
P_MIN = 1e-4 / 5
DRAWS = 20_000
LATTICE = 1.0  # coarse: a S lattice / 2 near 1, so the rejection step changes the law
K = 2  # lattice points -2, -1, ..., 2
#: the conditionals' rates: every expected count above 190, the rounded control's
#: noncentrality above 180 (so it fails with probability above 1 - 1e-8)
RATES = {KIND_KNG_LINF: 0.6, KIND_KNG_L1: 0.3, KIND_EXP: 0.2}


def _chi2_p(draws, pmf):
    counts = np.array([np.sum(draws == k) for k in range(-K, K + 1)])
    assert counts.sum() == draws.size, "a draw off the lattice or outside the chord"
    return sps.chisquare(counts, pmf * draws.size).pvalue


def _linear_case():
    rng = np.random.default_rng(4)
    A = rng.normal(size=(3, 3))
    G = A @ A.T + np.eye(3)
    r0 = rng.normal(size=3)
    return G, r0


def _linear_energy(kind, G, r0, j, t):
    if kind == KIND_EXP:
        return G[j, j] * t * t + 2.0 * r0[j] * t
    v = np.abs(r0 + t * G[j])
    return v.sum() if kind == KIND_KNG_L1 else v.max()


@numba.njit
def _first_coordinates(rng, G, c, a, B, kind, lattice, out):
    """The chains of :func:`gibbs_chains` (its state), one sweep each, from njit (one call
    for every chain): the first coordinate of each."""
    d = c.shape[0]
    cap = 2 * d + 2
    state = (np.empty(d), new_tuner(d), G, c, a, B, kind, lattice, np.empty(d), np.empty(d), np.empty(cap),
             np.empty(cap), np.empty(cap), np.empty(cap), np.empty(d), np.zeros(1))
    for k in range(out.shape[0]):
        _gibbs_start(rng, None, None, state, k)
        _gibbs_sweeps(rng, None, None, state, 1)
        out[k] = state[0][0]


def _first_updates(G, r0, a, bound, kind, lattice):
    """The first coordinate after one sweep of DRAWS chains from 0: i.i.d. draws from its
    conditional given the others at 0 (residual ``r0 = -c``, chord ``[-bound, bound]``)."""
    out = np.empty(DRAWS)
    _first_coordinates(np.random.default_rng([int(a * 1000), kind, int(lattice)]), G, -r0, a, bound, kind, lattice,
                       out)
    return out


@pytest.mark.parametrize("kind", [KIND_KNG_LINF, KIND_KNG_L1, KIND_EXP])
@pytest.mark.slow
def test_the_linear_lattice_conditional_is_the_restriction_to_the_lattice(kind):
    G, r0 = _linear_case()
    j, a = 0, RATES[kind]
    ks = np.arange(-K, K + 1)
    pmf = np.exp(-a * np.array([_linear_energy(kind, G, r0, j, k * LATTICE) for k in ks]))
    pmf /= pmf.sum()
    lat = _first_updates(G, r0, a, K * LATTICE, kind, LATTICE)
    assert _chi2_p(lat / LATTICE, pmf) > P_MIN
    # control 1: the continuous conditional on the cells' union, rounded, without the rejection step
    rounded = np.clip(np.floor(_first_updates(G, r0, a, (K + 0.5) * LATTICE, kind, 0.0) / LATTICE + 0.5), -K, K)
    assert _chi2_p(rounded, pmf) < P_MIN
    # control 2: twice the rate
    assert _chi2_p(_first_updates(G, r0, 2 * a, K * LATTICE, kind, LATTICE) / LATTICE, pmf) < P_MIN


def _quantreg_case():
    rng = np.random.default_rng(6)
    n = 7
    X = np.column_stack([np.ones(n), rng.uniform(-1, 1, n)])
    b = rng.uniform(-1.5, 1.5, n)  # residuals without coordinate j: breaks b_i / x_ij, off the lattice
    return X, b


def _qr_scratch(n, d):
    return (np.empty(d), np.empty(n + 1), np.empty(n, dtype=np.int64), np.empty(n + 2), np.empty(n + 1),
            np.empty(n, dtype=np.int64), np.empty(n + 1, dtype=np.int64))


def test_the_quantreg_lattice_conditionals_are_the_restrictions_to_the_lattice():
    X, b = _quantreg_case()
    n, d = X.shape
    j, tau = 1, 0.3
    ks = np.arange(-K, K + 1)
    t = ks * LATTICE
    r = b[None, :] - X[None, :, j] * t[:, None]
    loss = np.sum(r * (tau - (r <= 0)), axis=1)
    grad = np.einsum("ik,ti->tk", X, (r <= 0) - tau)
    g, keys, idx, T, logm, order, count = _qr_scratch(n, d)
    vals = np.empty(n)
    rng = np.random.default_rng(3)

    def exp_draws(a, lattice_on):
        out = np.empty(DRAWS)
        for s in range(DRAWS):
            if lattice_on:
                out[s] = _qr_exp_lattice(rng, X, b, j, float(K), LATTICE, tau, a, 0.0, 4.0, keys, vals, T, logm,
                                         order, count)[0] / LATTICE
            else:  # control: the continuous draw rounded, without the rejection step
                x = _qr_exp_conditional(rng, X, b, j, (K + 0.5) * LATTICE, tau, a, 0.0, 4.0, keys, vals, T, logm,
                                        order, count)[0]
                out[s] = np.clip(np.floor(x / LATTICE + 0.5), -K, K)
        return out

    a = 0.9
    pmf = np.exp(-a * (loss - loss.min()))
    pmf /= pmf.sum()
    assert _chi2_p(exp_draws(a, True), pmf) > P_MIN
    assert _chi2_p(exp_draws(a, False), pmf) < P_MIN
    assert _chi2_p(exp_draws(2 * a, True), pmf) < P_MIN

    def kng_draws(a, lattice_on):
        L = K * LATTICE if lattice_on else (K + 0.5) * LATTICE
        out = np.array([_qr_conditional(rng, X, b, j, L, tau, a, TARGET_KNG, 2, g, keys, idx, T, logm, order, count,
                                        LATTICE if lattice_on else 0.0) for _ in range(DRAWS)])
        return out / LATTICE if lattice_on else np.clip(np.floor(out / LATTICE + 0.5), -K, K)

    a = 1.5
    energy = np.abs(grad).max(axis=1)
    pmf = np.exp(-a * (energy - energy.min()))
    pmf /= pmf.sum()
    assert _chi2_p(kng_draws(a, True), pmf) > P_MIN
    assert _chi2_p(kng_draws(a, False), pmf) < P_MIN  # control: the continuous conditional, rounded


@pytest.mark.slow
@pytest.mark.parametrize("d", [2, 12])
@pytest.mark.parametrize("kind", ["kng", "exponential"])
def test_the_lattice_chain_matches_the_exact_sampler_and_a_2eps_control_fails(kind, d):
    """2000 chains of 200 sweeps (four times a release's default): at these seeds the law's
    p-values read 0.03 or more, the controls' 4e-9 or less (the exponential mechanism at d = 2,
    whose laws at ε and 2ε are closest; with 1000 chains it reads 4e-6, too weak a control)."""
    stats = get_problem("linear", d=d).simulate(1000, np.random.default_rng(1000 + 1000 + d))
    mech = get_mechanism("linear", kind, hardened=False, bound=1.0)
    lattice = dyadic_lattice(1.0)
    draws, sweeps = 2000, 200
    exact, _ = mech.draw_exact(stats, 1.0, np.random.default_rng(1), draws, max_tries=10**6)
    chain, _ = mech.draw_gibbs(stats, 1.0, np.random.default_rng(2), draws, sweeps=sweeps, lattice=lattice)
    assert np.array_equal(chain / lattice, np.round(chain / lattice))
    assert np.all(np.abs(chain).sum(1) <= 1.0)
    threshold = 1e-4 / (8 * d)  # 4 cases x (law, control), d coordinates each
    p = min(sps.ks_2samp(exact[:, i], chain[:, i]).pvalue for i in range(d))
    assert p > threshold, p
    wrong, _ = mech.draw_gibbs(stats, 2.0, np.random.default_rng(3), draws, sweeps=sweeps, lattice=lattice)
    p2 = min(sps.ks_2samp(exact[:, i], wrong[:, i]).pvalue for i in range(d))
    assert p2 < threshold, p2


@pytest.mark.parametrize("norm", ["linf", "l1"])
def test_lattice_positions_are_exact_and_without_the_lattice_they_are_not(norm):
    stats = get_problem("linear").simulate(100, np.random.default_rng(2))
    mech = get_mechanism("linear", "kng", hardened=False, norm=norm)
    lattice = dyadic_lattice(1.0)
    on, _ = mech.draw_gibbs(stats, 1.0, np.random.default_rng(0), 3, sweeps=20, lattice=lattice)
    assert np.array_equal(on / lattice, np.round(on / lattice)) and np.all(np.abs(on).sum(1) <= 1.0)
    off, _ = mech.draw_gibbs(stats, 1.0, np.random.default_rng(0), 3, sweeps=20)
    assert not np.array_equal(off / lattice, np.round(off / lattice))


@pytest.mark.parametrize("kind, options", [("kng", {}), ("kng", {"norm": "l1"}), ("exponential", {}),
                                           ("kng", {"sampler": "gibbs"})])
def test_hardened_linear_releases_at_small_n_run_gibbs_on_the_lattice(kind, options):
    stats = get_problem("linear").simulate(40, np.random.default_rng(2))  # the exact tries run out
    mech = get_mechanism("linear", kind, gibbs_sweeps=50, **options)
    plain = get_mechanism("linear", kind, hardened=False, gibbs_sweeps=50, **options)
    h = mech.hardening(stats, 1.0)
    for seed in range(3):
        rel = mech.release(stats, 1.0, np.random.default_rng(seed))
        assert rel.info["sampler"] == plain.release(stats, 1.0, np.random.default_rng(seed)).info["sampler"] == "gibbs"
        cells = rel.estimate / h.grid
        assert np.array_equal(cells, np.round(cells)) and np.all(np.abs(rel.estimate) <= h.bound)


@pytest.mark.slow
def test_hardened_quantreg_exponential_runs_gibbs_and_its_law_matches_the_unhardened_one():
    data = get_problem("quantreg").simulate(200, np.random.default_rng(3))
    hard = get_mechanism("quantreg", "exponential", gibbs_sweeps=20)
    plain = get_mechanism("quantreg", "exponential", hardened=False, gibbs_sweeps=20)
    h = hard.hardening(data, 1.0)
    assert h.site == "sampler" and h.eta == math.ldexp(h.grid, -44)
    assert hard.hardened_guarantee(data, 1.0) == (1.0, pytest.approx((1 + math.e) * 2 * data.d * 2.0**-44))
    draws = 1000  # KS p = 0.47 at these seeds, the control's 1e-10 (1e-7 with 750 releases)

    def sample(mech, eps, offset):
        rels = [mech.release(data, eps, np.random.default_rng([offset, s])) for s in range(draws)]
        assert all(r.info["sampler"] == "gibbs" for r in rels)
        return np.array([r.estimate for r in rels])

    reference = sample(plain, 1.0, 0)
    same = sample(hard, 1.0, 1)
    cells = same / h.grid
    assert np.array_equal(cells, np.round(cells))
    threshold = 1e-4 / (2 * data.d)
    assert min(sps.ks_2samp(reference[:, i], same[:, i]).pvalue for i in range(data.d)) > threshold
    control = sample(hard, 2.0, 2)
    assert min(sps.ks_2samp(reference[:, i], control[:, i]).pvalue for i in range(data.d)) < threshold

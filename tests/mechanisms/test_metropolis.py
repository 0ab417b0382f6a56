"""The shared adaptive random-walk Metropolis kernel (:mod:`kngflow.kernels.metropolis`).

Pieces against plain-Python references (same draws from twin generators), then the law
of chains built on the kernel for 1-D Gaussian targets by Kolmogorov–Smirnov tests with
fixed seeds, with a negative control (the same draws against a wrongly scaled law) that
must fail the same check.  Thresholds: a correct sampler fails each of the five
statistical checks with probability below ``P_REJECT = 1e-5`` (below 1e-4 together; the
seeds are fixed anyway); the negative controls' KS distances are 0.1 or more, whose
statistic ``sqrt(N) D >= 6`` falls below the threshold (``~ 2.5``) with probability below 1e-10.
"""

import math

import numpy as np
import pytest
from scipy import stats

from kngflow._jit import jit
from kngflow.kernels import generic
from kngflow.models.linear import sampler as linear
from kngflow.models.quantreg.gibbs import TARGET_EXP
from kngflow.models.quantreg.metropolis import qr_metropolis_chains
from kngflow.kernels.metropolis import (
    GENERIC,
    LINEAR,
    PRECOND,
    TARGET_ACCEPTANCE,
    Adaptation,
    accept,
    acceptance_rate,
    adapt_scales,
    base_measure,
    end_sweep,
    new_tuner,
    propose_coordinate,
    record,
    reset_tuner,
    settle,
    start_chain,
)

P_REJECT = 1e-5
CHAINS = 4000


def ref_adapt(sig, nacc, batch, rate, target, lo, hi):
    """Plain-Python reference of :func:`adapt_scales`."""
    out = []
    for s, n in zip(sig, nacc):
        s = s * math.exp(rate * (n / batch - target))
        out.append(min(max(s, lo), hi))
    return np.array(out)


def test_schedules():
    assert GENERIC == Adaptation(every=20, batch=20, rate=2.0, target=0.44, lo=1e-12, hi=2.0)
    assert PRECOND == Adaptation(every=20, batch=10, rate=2.0, target=0.44, lo=1e-12, hi=2.0)
    assert LINEAR == Adaptation(every=25, batch=25, rate=1.0, target=0.44, lo=0.0, hi=2.0)
    # the names the samplers' modules export keep their values
    assert generic.BATCH == 20 and generic.TARGET_ACCEPTANCE == TARGET_ACCEPTANCE == 0.44
    # one compiled signature serves every schedule
    assert {type(v) for v in GENERIC} == {int, float}
    assert [type(v) for v in GENERIC] == [type(v) for v in LINEAR] == [type(v) for v in PRECOND]


@pytest.mark.parametrize("adapt", [GENERIC, PRECOND, LINEAR], ids=["generic", "precond", "linear"])
def test_adapt_scales_matches_reference(adapt):
    rng = np.random.default_rng(3)
    for radius in (0.5, 3.0, 1e-9):
        sig = rng.uniform(1e-13, 2.0 * radius, 40)
        sig[:3] = (1e-13, 2.0 * radius, 1.99 * radius)  # the clips bind
        nacc = rng.integers(0, adapt.batch + 1, 40).astype(float)
        nacc[:3] = (0.0, adapt.batch, adapt.batch)
        expect = ref_adapt(sig, nacc, adapt.batch, adapt.rate, adapt.target, adapt.lo, adapt.hi * radius)
        got = sig.copy()
        counts = nacc.copy()
        adapt_scales(got, counts, adapt.batch, adapt.rate, adapt.target, adapt.lo, adapt.hi * radius)
        np.testing.assert_allclose(got, expect, rtol=1e-14, atol=0.0)
        assert np.all(counts == 0.0)
        assert np.all((got >= adapt.lo) & (got <= adapt.hi * radius))


def test_adapt_direction():
    """Too many acceptances widen a scale, too few shrink it, the target keeps it."""
    sig = np.ones(3)
    nacc = np.array([20.0, 0.0, 0.44 * 25])
    adapt_scales(sig, nacc, 25, 1.0, 0.44, 0.0, 10.0)
    assert sig[0] > 1.0 > sig[1]
    assert sig[2] == 1.0


@pytest.mark.parametrize("adapt", [GENERIC, LINEAR], ids=["generic", "linear"])
def test_end_sweep_schedule(adapt):
    steps = 4 * adapt.every + 3
    burn = steps // 2
    tuner = new_tuner(2)
    reset_tuner(tuner, 0.5)
    adapted = []
    for s in range(steps):
        for k in range(2):
            record(tuner, k, k == 0, s < burn)  # direction 0 always accepts, 1 never
        if end_sweep(tuner, adapt, s, burn, 1.0):
            adapted.append(s)
    assert adapted == [s for s in range(burn) if (s + 1) % adapt.every == 0]
    nb = len(adapted)
    expect = ref_adapt([0.5, 0.5], [adapt.every, 0.0], adapt.batch, adapt.rate, adapt.target, adapt.lo, adapt.hi)
    for _ in range(nb - 1):
        expect = ref_adapt(expect, [adapt.every, 0.0], adapt.batch, adapt.rate, adapt.target, adapt.lo, adapt.hi)
    np.testing.assert_allclose(tuner[0], expect, rtol=1e-13)
    # after the burn-in: direction 0 accepted all, direction 1 none of its proposals
    assert tuner[2][1] == 2 * (steps - burn) and tuner[2][0] == steps - burn
    assert acceptance_rate(tuner) == 0.5
    reset_tuner(tuner, 0.25)
    assert np.isnan(acceptance_rate(tuner))
    assert np.all(tuner[0] == 0.25) and np.all(tuner[1] == 0.0)


def test_accept_draws():
    """One uniform only when de > 0; accepts iff U < exp(-de); NaN and +inf rejected."""
    rng = np.random.default_rng(11)
    twin = np.random.default_rng(11)
    for de in (-3.0, 0.0, -0.0, 0.1, 0.7, 2.5, 40.0, np.inf, np.nan, -np.inf):
        got = accept(rng, de)
        if de <= 0.0:
            assert got
        else:
            u = twin.random()
            assert got == (u < math.exp(-de))
            if not math.isfinite(de) and de > 0 or math.isnan(de):
                assert not got
    assert rng.random() == twin.random()


def test_accept_frequency():
    rng = np.random.default_rng(12)
    n = 20000
    hits = sum(accept(rng, 0.5) for _ in range(n))
    assert stats.binomtest(hits, n, math.exp(-0.5)).pvalue > P_REJECT


@pytest.mark.parametrize("gauss", [False, True])
def test_propose_coordinate(gauss):
    rng = np.random.default_rng(21)
    twin = np.random.default_rng(21)
    B = 1.0
    inv2s2 = 0.5 / 0.7**2 if gauss else 0.0
    center = np.array([0.2, -0.1])
    for _ in range(200):
        theta = center + twin.uniform(-0.4, 0.4, 2)
        rng.uniform(-0.4, 0.4, 2)
        l1 = float(np.abs(theta - center).sum())
        before = theta.copy()
        tj, delta, dbase, l1n, inside = propose_coordinate(rng, theta, 1, 0.6, center[1], l1, B, gauss, inv2s2)
        z = twin.standard_normal()
        tn = before[1] + 0.6 * z
        assert tj == before[1] and delta == 0.6 * z
        if gauss:
            assert inside and l1n == 0.0
            assert dbase == pytest.approx(((tn - center[1]) ** 2 - (tj - center[1]) ** 2) * inv2s2, rel=1e-14)
        else:
            assert dbase == 0.0
            assert l1n == pytest.approx(l1 - abs(tj - center[1]) + abs(tn - center[1]), rel=1e-14, abs=1e-15)
            assert inside == (l1n <= B)
        assert theta[0] == before[0]
        assert theta[1] == (tn if inside else before[1])
        tuner = new_tuner(2)
        reset_tuner(tuner, 1.0)
        settle(tuner, theta, 1, tj, False, True)  # a rejection restores the coordinate
        assert np.array_equal(theta, before)
        assert tuner[1][1] == 0.0


def test_base_measure_and_start():
    assert base_measure(3.0, 0.0) == (False, 3.0, 0.0)
    assert base_measure(3.0, 0.5) == (True, 2.0, 2.0)
    theta = np.zeros(2)
    tuner = new_tuner(2)
    tuner[1][:] = 5.0
    start_chain(theta, np.array([1.0, 2.0]), tuner, 0.75)
    assert theta.tolist() == [1.0, 2.0] and tuner[0].tolist() == [0.75, 0.75] and tuner[1].tolist() == [0.0, 0.0]


# ------------------------------------------------------------------------ laws by KS


@jit
def _half_square(theta, args):
    return 0.5 * theta[0] * theta[0]


def ks_pair(draws, mean, sd, wrong=1.5):
    """KS p-values of ``draws`` against ``N(mean, sd^2)`` and against the wrong ``N(mean, (wrong sd)^2)``."""
    return (stats.kstest(draws, "norm", args=(mean, sd)).pvalue,
            stats.kstest(draws, "norm", args=(mean, wrong * sd)).pvalue)


@pytest.mark.parametrize("base_scale", [0.0, 2.0], ids=["uniform", "gaussian"])
def test_generic_gaussian_law(base_scale):
    """Generic kernel (schedule GENERIC), energy theta^2 / 2: N(0, 1) on a wide ℓ1 ball
    (mass outside 2e-23), or N(0, 1 / (1 + 1/4)) with the Gaussian base N(0, 2^2)."""
    energy = generic.loss_energy(_half_square)
    rng = np.random.default_rng(2024)
    out = np.empty((CHAINS, 1))
    acc = np.empty(CHAINS)
    generic.metropolis_chains(energy, rng, ((), 1.0, 0, np.empty(1)), np.zeros(1), 10.0, base_scale, 200, out, acc)
    sd = 1.0 if base_scale == 0.0 else math.sqrt(1.0 / 1.25)
    good, bad = ks_pair(out[:, 0], 0.0, sd)
    assert good > P_REJECT
    assert bad < P_REJECT  # negative control: a wrong scale fails the same check
    assert 0.25 < np.mean(acc) < 0.65  # tuned toward 0.44


def test_linear_gaussian_law():
    """Linear kernel (schedule LINEAR), exponential mechanism with d = 1:
    exp(-a (G t^2 - 2 c t)) = N(c / G, 1 / (2 a G)) on [-B, B], here N(0.5, 1) with B = 10."""
    rng = np.random.default_rng(7)
    out = np.empty((CHAINS, 1))
    acc = np.empty(CHAINS)
    linear.metropolis_chains(rng, np.ones((1, 1)), np.array([0.5]), 0.5, 10.0, linear.KIND_EXP, 200, out, acc)
    good, bad = ks_pair(out[:, 0], 0.5, 1.0)
    assert good > P_REJECT
    assert bad < P_REJECT
    assert 0.25 < np.mean(acc) < 0.65


def test_quantile_1d_exponential_law():
    """Banded kernel (schedule GENERIC), 1-D median's exponential mechanism on n points at
    +-1 (half each): a l(t) = a n on [-1, 1] is flat, so the law is uniform on [-1, 1]."""
    n = 40
    X = np.ones((n, 1))
    y = np.where(np.arange(n) % 2 == 0, -1.0, 1.0)
    rng = np.random.default_rng(5)
    out = np.empty((CHAINS, 1))
    acc = np.empty(CHAINS)
    qr_metropolis_chains(rng, X, y, 0.5, 0.3, np.zeros(1), 1.0, 0.0, TARGET_EXP, 0, 200, out, acc)
    assert stats.kstest(out[:, 0], "uniform", args=(-1.0, 2.0)).pvalue > P_REJECT
    assert stats.kstest(out[:, 0], "uniform", args=(-1.5, 3.0)).pvalue < P_REJECT  # wrong scale

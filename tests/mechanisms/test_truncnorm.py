"""Tests for kngflow.kernels.truncnorm: exact truncated normal draws in numba."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from kngflow._jit import jit
from kngflow.kernels.truncnorm import SCHEME_NAMES, scheme, standard_truncnorm, truncnorm, truncnorm_fill

ALPHA = 1e-5
INF = math.inf

# name: (mu, sigma, lo, hi, shift of mu for the negative control, expected scheme)
REGIMES = {
    "whole_line": (1.0, 3.0, -INF, INF, 0.3, "normal"),
    "wide": (0.5, 2.0, -3.0, 6.0, 0.3, "normal"),
    "short_around_0": (0.0, 1.0, -0.2, 0.3, 3.0, "uniform_around_0"),
    "one_sided_0.1sd": (0.0, 1.0, 0.1, INF, 0.3, "half_normal"),
    "one_sided_5sd": (0.0, 1.0, 5.0, INF, -0.5, "exponential"),
    "one_sided_30sd": (0.0, 1.0, 30.0, INF, -3.0, "exponential"),
    "left_tail_40sd": (0.0, 1.0, -INF, -40.0, 4.0, "exponential"),
    "far_interval_10_10.5": (0.0, 1.0, 10.0, 10.5, -1.0, "exponential"),
    "short_tail_interval": (0.0, 1.0, 3.0, 3.1, -20.0, "uniform_tail"),
    "narrow": (1.0, 2.0, 0.3, 0.31, 400.0, "uniform_tail"),
    "negative_side": (2.0, 1.0, -3.0, -0.5, -1.5, "exponential"),
}


def _draws(seed, mu, sigma, lo, hi, n=20000):
    out = np.empty(n)
    truncnorm_fill(np.random.default_rng(seed), float(mu), float(sigma), float(lo), float(hi), out)
    return out


def _ks_pvalue(x, mu, sigma, lo, hi):
    law = stats.truncnorm((lo - mu) / sigma, (hi - mu) / sigma, loc=mu, scale=sigma)
    return stats.kstest(x, law.cdf).pvalue


@pytest.mark.parametrize("name", list(REGIMES))
def test_ks_against_scipy(name):
    mu, sigma, lo, hi, shift, want = REGIMES[name]
    assert SCHEME_NAMES[scheme((lo - mu) / sigma, (hi - mu) / sigma)] == want
    seed = 1000 + list(REGIMES).index(name)
    x = _draws(seed, mu, sigma, lo, hi)
    assert x.min() >= lo and x.max() <= hi
    assert _ks_pvalue(x, mu, sigma, lo, hi) > ALPHA
    # negative control: draws with a shifted mean fail the same test
    y = _draws(seed + 500, mu + shift, sigma, lo, hi)
    assert _ks_pvalue(y, mu, sigma, lo, hi) < ALPHA


@pytest.mark.parametrize("name", list(REGIMES))
def test_kernel_equals_py_func(name):
    mu, sigma, lo, hi, _, _ = REGIMES[name]
    rng_a, rng_b = np.random.default_rng(3), np.random.default_rng(3)
    a = [truncnorm(rng_a, mu, sigma, lo, hi) for _ in range(200)]
    b = [truncnorm.py_func(rng_b, mu, sigma, lo, hi) for _ in range(200)]
    assert a == b
    assert rng_a.random() == rng_b.random()
    # the batch helper is successive calls
    np.testing.assert_array_equal(_draws(3, mu, sigma, lo, hi, n=200), a)


def test_callable_from_jit():
    @jit(cache=False)
    def mean_of_draws(rng, n):
        s = 0.0
        for _ in range(n):
            s += truncnorm(rng, 0.0, 1.0, 2.0, math.inf) + standard_truncnorm(rng, -1.0, 1.0)
        return s / n

    v = mean_of_draws(np.random.default_rng(0), 20000)
    # E[Z | Z > 2] = φ(2)/Q(2) ≈ 2.3732, E[Z | |Z| < 1] = 0
    want = stats.norm.pdf(2) / stats.norm.sf(2)
    assert abs(v - want) < 0.02
    assert v == mean_of_draws.py_func(np.random.default_rng(0), 20000)


def test_extreme_and_narrow_intervals_stay_inside():
    rng = np.random.default_rng(4)
    cases = [
        (0.0, 1.0, 1e4, INF),
        (0.0, 1.0, -INF, -1e6),
        (0.0, 1.0, 10.0, 10.0 + 1e-12),
        (0.0, 1.0, -1e-300, 1e-300),
        (3.0, 1e-8, 2.0, 2.5),  # 1e8 sd below the interval
        (0.0, 1e300, 1e-10, 1.0000000000000002e-10),  # standardised interval collapses
        (0.0, 1e-300, 1e10, 2e10),  # standardised bounds overflow to +inf
    ]
    for mu, sigma, lo, hi in cases:
        x = np.array([truncnorm(rng, mu, sigma, lo, hi) for _ in range(50)])
        assert np.all((x >= lo) & (x <= hi)), (mu, sigma, lo, hi)
    # far one-sided tail: the excess over a is ≈ Exp(rate a)
    x = _draws(5, 0.0, 1.0, 1e4, INF, n=2000)
    assert abs((x - 1e4).mean() * 1e4 - 1.0) < 0.15


def test_validation():
    rng = np.random.default_rng(0)
    for args in [(0.0, 0.0, 0.0, 1.0), (0.0, -1.0, 0.0, 1.0), (0.0, 1.0, 1.0, 1.0),
                 (0.0, 1.0, 2.0, 1.0), (0.0, 1.0, math.nan, 1.0), (math.nan, 1.0, 0.0, 1.0),
                 (0.0, math.inf, 0.0, 1.0)]:
        with pytest.raises(ValueError, match="sigma > 0 and lo < hi"):
            truncnorm(rng, *args)


@pytest.mark.parametrize("a, width", [(1e8, 1e-5), (1e9, 1e-6), (3e9, 5e-6), (1e12, 1e-3)])
def test_scheme_far_out_picks_exponential(a, width):
    """Far in the tail (a ≳ 1e8) the uniform proposal accepts w.p. ≈ exp(−a·width) ≈ e^−1000
    here; the exponential proposal accepts w.p. ≈ 1 − exp(−λ·width).  The old coefficient
    λa − λ²/2 cancelled catastrophically and chose the uniform: an exponential-mechanism
    Gibbs kernel at ε ≥ 1e20 hung."""
    b = a + width
    assert b > a
    lam = a + 2.0 / (a + math.hypot(a, 2.0))
    assert width > math.exp(0.5 * (lam - a) ** 2) / lam  # Robert's criterion: exponential
    assert SCHEME_NAMES[scheme(a, b)] == "exponential"
    assert SCHEME_NAMES[scheme(-b, -a)] == "exponential"
    x = truncnorm(np.random.default_rng(0), 0.0, 1.0, a, b)
    assert a <= x <= b

r"""Exact posterior computations for the Beta–Bernoulli model (no privacy here; the mechanisms call these).

* :func:`beta_summary`: mean and equal-tailed interval of a Beta law.
* :func:`noise_aware_weights` / :func:`noise_aware_summary`: the posterior given a
  Laplace-noised count, an exact finite mixture of Beta laws (Bernstein & Sheldon 2018's
  noise-aware posterior, in closed form for this model).
* :func:`gibbs_noise_aware`: the same posterior by Bernstein & Sheldon's Gibbs sampler over
  the latent count (the general method; a check of the mixture).
* :func:`truncated_beta`: exact draws of a Beta law restricted to an interval.

The noise-aware posterior
-------------------------
The release is ``s~ = s + L``, ``L ~ Laplace(0, c)`` (density ``exp(-|l| / c) / (2c)``), with
``s | theta ~ Binomial(n, theta)`` and ``theta ~ Beta(a, b)``.  The joint law of
``(theta, s, s~)`` is ``Beta(theta; a, b) Binom(s; n, theta) Lap(s~ - s; c)``; summing ``s`` out,

    p(theta | s~)  ∝  Beta(theta; a, b) sum_{s=0}^{n} Binom(s; n, theta) Lap(s~ - s; c)
                   =  sum_s w_s Beta(theta; a + s, b + n - s),

    w_s  ∝  Lap(s~ - s; c) BetaBinom(s; n, a, b),
    BetaBinom(s; n, a, b) = C(n, s) B(a + s, b + n - s) / B(a, b),

because ``Beta(theta; a, b) Binom(s; n, theta) = BetaBinom(s; n, a, b) Beta(theta; a + s, b + n - s)``.
So the posterior is a mixture of the conjugate posteriors of every possible true count,
weighted by the posterior of the count.  Its mean is ``sum_s w_s (a + s) / (a + b + n)`` and
its CDF ``sum_s w_s I_theta(a + s, b + n - s)`` (``I`` the regularised incomplete beta
function), which is monotone: a quantile is one root-finding on ``[0, 1]``.

Truncation (large ``n``).  The sum runs over the window ``W = {s : |s - s~| <= K c}`` of
integers in ``[0, n]``, ``K`` doubled (from :data:`WINDOW_SCALES`) until the bound on the
neglected mass is below :data:`TRUNCATION` times the kept mass.  The bound: outside ``W``
every term has ``Lap(s~ - s; c) <= Lap(0; c) exp(-j / c)`` at distance ``j > K c`` and
``BetaBinom(s) <= M``, the beta-binomial's largest probability (at its mode, computed exactly;
the law is unimodal for ``a, b > 0`` up to its two ends, whose values are included), and at
most two integers lie at each distance, so the neglected unnormalised mass is at most

    2 M Lap(0; c) sum_{j > K c} exp(-j / c) <= 2 M Lap(0; c) exp(-K) / (1 - exp(-1 / c)).

Dividing by the kept unnormalised mass bounds the total variation between the truncated and
the exact posterior (:func:`noise_aware_weights` returns the bound); once ``W`` is all of
``[0, n]`` nothing is neglected.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import betainc, betaln, gammaln

__all__ = ["beta_summary", "noise_aware_weights", "noise_aware_summary", "mixture_cdf", "mixture_quantile",
           "truncated_beta", "tangent_rejection", "log_beta_binomial", "gibbs_noise_aware", "WINDOW_SCALES", "TRUNCATION"]

#: the first half-width of the window, in Laplace scales (doubled while the bound is too large)
WINDOW_SCALES = 40.0
#: the largest neglected mass (relative to the kept) of the truncated mixture
TRUNCATION = 1e-12


def beta_summary(alpha: float, beta: float, level: float) -> tuple[float, float, float]:
    """``(mean, lower, upper)`` of ``Beta(alpha, beta)``: the mean and the ``(1 -+ level) / 2`` quantiles."""
    from scipy.stats import beta as beta_law

    q = (1.0 - level) / 2.0
    lo, hi = beta_law.ppf([q, 1.0 - q], alpha, beta)
    return alpha / (alpha + beta), float(lo), float(hi)


def log_beta_binomial(s: np.ndarray, n: int, a: float, b: float) -> np.ndarray:
    """``log BetaBinom(s; n, a, b) = log C(n, s) + log B(a + s, b + n - s) - log B(a, b)``."""
    s = np.asarray(s, dtype=np.float64)
    return (gammaln(n + 1.0) - gammaln(s + 1.0) - gammaln(n - s + 1.0) + betaln(a + s, b + n - s) - betaln(a, b))


def _beta_binomial_max(n: int, a: float, b: float) -> float:
    """``log max_s BetaBinom(s; n, a, b)``: the law is unimodal between its ends; the candidates
    are both ends and the integers around the mode of the continuous ratio."""
    cand = {0, n}
    # the ratio p(s+1)/p(s) = (n-s)(a+s) / ((s+1)(b+n-s-1)) falls with s where the law is
    # unimodal: bisect for its crossing of 1 (the ends cover the U-shaped and monotone laws)
    lo, hi = 0, n
    while hi - lo > 1:  # find the last s with p(s+1) >= p(s), if the law rises then falls
        mid = (lo + hi) // 2
        if (n - mid) * (a + mid) >= (mid + 1) * (b + n - mid - 1):
            lo = mid
        else:
            hi = mid
    cand.update({lo, hi})
    return float(np.max(log_beta_binomial(np.array(sorted(cand)), n, a, b)))


def noise_aware_weights(s_noisy: float, n: int, a: float, b: float, scale: float):
    """``(s, w, bound)``: the counts of the window, their posterior weights (summing to 1), and
    the bound on the neglected mass relative to the kept (0 once the window is ``[0, n]``).

    ``s_noisy`` is the Laplace-noised count (not clamped), ``scale`` the Laplace scale ``c``.
    """
    K = WINDOW_SCALES
    log_max_bb = _beta_binomial_max(n, a, b)
    while True:
        lo = max(0, math.ceil(s_noisy - K * scale))
        hi = min(n, math.floor(s_noisy + K * scale))
        if lo > hi:  # no count within K c of s~ (tiny c, or s~ far outside [0, n]): keep the nearest one
            lo = hi = int(min(max(round(s_noisy), 0), n))
        s = np.arange(lo, hi + 1, dtype=np.float64)
        logw = -np.abs(s_noisy - s) / scale + log_beta_binomial(s, n, a, b)
        top = float(logw.max())
        kept = float(np.sum(np.exp(logw - top)))
        if lo == 0 and hi == n:
            bound = 0.0
        else:
            # neglected <= 2 M exp(-K) / (1 - exp(-1/c)) (module docstring), on the same log scale as logw
            log_neg = math.log(2.0) + log_max_bb - K - math.log(-math.expm1(-1.0 / scale))
            bound = math.exp(min(log_neg - top - math.log(kept), 700.0))
        if bound <= TRUNCATION:
            w = np.exp(logw - top)
            return s, w / w.sum(), bound
        K *= 2.0


def mixture_cdf(theta: float, alpha: np.ndarray, beta: np.ndarray, w: np.ndarray) -> float:
    """``sum_s w_s I_theta(alpha_s, beta_s)``: the CDF of a mixture of Beta laws."""
    return float(np.dot(w, betainc(alpha, beta, theta)))


def mixture_quantile(q: float, alpha: np.ndarray, beta: np.ndarray, w: np.ndarray) -> float:
    """The ``q``-quantile of ``sum_s w_s Beta(alpha_s, beta_s)`` (Brent's method on the CDF)."""
    from scipy.optimize import brentq  # here: importing scipy.optimize costs every worker
    from scipy.stats import beta as beta_law

    # the mixture's quantile lies between the components' quantiles
    keep = w > 1e-300
    qs = beta_law.ppf(q, alpha[keep], beta[keep])
    lo, hi = float(np.min(qs)), float(np.max(qs))
    if hi - lo <= 1e-15:
        return lo
    f = lambda t: mixture_cdf(t, alpha, beta, w) - q  # noqa: E731
    f_lo, f_hi = f(lo), f(hi)
    if f_lo >= 0.0:  # rounding at a bracket end (one component carries all but ~1e-16 of the weight)
        return lo
    if f_hi <= 0.0:
        return hi
    return float(brentq(f, lo, hi, xtol=1e-14, rtol=1e-13))


def noise_aware_summary(s_noisy: float, n: int, a: float, b: float, scale: float,
                        level: float) -> tuple[float, float, float, int, float]:
    """``(mean, lower, upper, terms, bound)`` of the noise-aware posterior ``p(theta | s~)``
    (module docstring): the mean, the equal-tailed interval at ``level``, the number of
    mixture components kept and the truncation bound."""
    s, w, bound = noise_aware_weights(s_noisy, n, a, b, scale)
    alpha, beta = a + s, b + n - s
    mean = float(np.dot(w, alpha)) / (a + b + n)
    q = (1.0 - level) / 2.0
    return mean, mixture_quantile(q, alpha, beta, w), mixture_quantile(1.0 - q, alpha, beta, w), int(s.size), bound


def _log_beta_density(theta, alpha, beta):
    return (alpha - 1.0) * math.log(theta) + (beta - 1.0) * math.log1p(-theta)


def truncated_beta(rng: np.random.Generator, alpha: float, beta: float, lo: float, hi: float) -> tuple[float, int]:
    """One exact draw of ``Beta(alpha, beta)`` restricted to ``[lo, hi]`` (``0 < lo < hi < 1``), and its tries.

    Inverse CDF: ``u`` uniform between the CDF's values at the ends, ``theta = F^-1(u)``; on
    the side of the median, so that the ends' probabilities are not lost to cancellation
    (the survival function ``S`` and ``S^-1`` when ``F(lo) > 1/2``).  When the law's mass in
    ``[lo, hi]`` underflows on both sides (the law piles up far beyond an end) the draw is
    exact rejection instead: for ``alpha, beta >= 1`` the log density is concave, so its
    tangent at the end nearest the mass bounds it on ``[lo, hi]``; propose from the
    truncated exponential law of that tangent and accept with probability
    ``exp(log f - tangent) <= 1``.
    """
    from scipy.stats import beta as beta_law

    u = rng.uniform()
    Fl = float(beta_law.cdf(lo, alpha, beta))
    if Fl < 0.5:
        Fu = float(beta_law.cdf(hi, alpha, beta))
        if Fu - Fl > 1e-280 and Fu > 1e-250:
            return float(np.clip(beta_law.ppf(Fl + u * (Fu - Fl), alpha, beta), lo, hi)), 1
    else:
        Sl, Su = float(beta_law.sf(lo, alpha, beta)), float(beta_law.sf(hi, alpha, beta))
        if Sl - Su > 1e-280 and Sl > 1e-250:
            return float(np.clip(beta_law.isf(Su + u * (Sl - Su), alpha, beta), lo, hi)), 1
    if alpha < 1.0 or beta < 1.0:
        raise ValueError(f"truncated_beta: the mass of Beta({alpha:g}, {beta:g}) in [{lo:g}, {hi:g}] underflows "
                         "and the tangent envelope needs alpha, beta >= 1")
    # the mass lies beyond the end nearest the mode (alpha, beta >= 1: the mode is (alpha-1)/(alpha+beta-2))
    mode = (alpha - 1.0) / (alpha + beta - 2.0) if alpha + beta > 2.0 else 0.5
    return tangent_rejection(rng, alpha, beta, lo, hi, hi if mode >= hi else lo)


def tangent_rejection(rng: np.random.Generator, alpha: float, beta: float, lo: float, hi: float,
                      end: float) -> tuple[float, int]:
    """One exact draw of ``Beta(alpha, beta)`` (``alpha, beta >= 1``) restricted to ``[lo, hi]``, by
    rejection from the exponential law of the log density's tangent at ``end`` (``lo`` or ``hi``).

    The log density ``(alpha - 1) log x + (beta - 1) log(1 - x)`` is concave, so it lies below
    its tangent ``f(end) + g (x - end)``: the proposal (that tangent's exponential law truncated
    to ``[lo, hi]``, drawn by inverse CDF) dominates the target up to a constant, and
    accepting with probability ``exp(log f(x) - tangent(x)) <= 1`` gives the target exactly.
    Efficient where the mass piles up at ``end``.  Returns the draw and its proposals.
    """
    g = (alpha - 1.0) / end - (beta - 1.0) / (1.0 - end)  # slope of log f at the end
    f_end = _log_beta_density(end, alpha, beta)
    width = hi - lo
    tries = 0
    while True:
        tries += 1
        v = rng.uniform()
        if abs(g) * width < 1e-12:
            x = lo + v * width
        elif g > 0:  # rising towards hi: hi - x is exponential of rate g, truncated to the width
            x = hi + math.log1p(v * math.expm1(-g * width)) / g
        else:  # falling from lo: x - lo is exponential of rate -g, truncated
            x = lo + math.log1p(v * math.expm1(g * width)) / g
        x = min(max(x, lo), hi)
        if math.log(rng.uniform()) <= _log_beta_density(x, alpha, beta) - (f_end + g * (x - end)):
            return x, tries


def gibbs_noise_aware(rng: np.random.Generator, s_noisy: float, n: int, a: float, b: float, scale: float,
                      draws: int, burn_in: int, chains: int = 4) -> np.ndarray:
    """Draws of ``p(theta | s~)`` by Bernstein & Sheldon's Gibbs sampler over the latent count.

    The joint law of ``(theta, s)`` given ``s~`` is ``∝ Beta(theta; a, b) Binom(s; n, theta)
    Lap(s~ - s; c)``, whose two conditionals are exact draws:

    * ``theta | s ~ Beta(a + s, b + n - s)`` (conjugacy);
    * ``s | theta, s~ ∝ Binom(s; n, theta) exp(-|s~ - s| / c)`` on ``{0, ..., n}``, drawn by
      inverse CDF over the smallest interval of counts holding both ``n theta ± 40`` binomial
      standard deviations and ``s~ ± 40 c``.  Beyond it both factors fall away from the
      interval (each is unimodal, its mode inside), and the one whose window ends there is
      below ``e^-40`` of its value at its own centre, so the counts left out carry at most
      ``c e^-40`` of the mass at the interval's end.

    ``chains`` independent chains start from ``theta`` drawn from the prior (data
    independent), run ``burn_in`` sweeps, then ``draws / chains`` sweeps each kept.
    Returns the ``draws`` values of ``theta``.  It targets the exact mixture of
    :func:`noise_aware_summary` (the tests check the two agree); it is the general method,
    which the mixture replaces where, as here, the sum over ``s`` is short.
    """
    per = -(-draws // chains)
    log_choose = None
    out = np.empty(per * chains)
    k = 0
    for _ in range(chains):
        theta = rng.beta(a, b)
        for sweep in range(burn_in + per):
            theta = min(max(theta, 1e-300), 1.0 - 1e-16)  # a Beta draw may round to 0 or 1
            sd = math.sqrt(n * theta * (1.0 - theta))
            lo = max(0, min(math.floor(n * theta - 40.0 * sd - 1), math.floor(s_noisy - 40.0 * scale)))
            hi = min(n, max(math.ceil(n * theta + 40.0 * sd + 1), math.ceil(s_noisy + 40.0 * scale)))
            if lo > hi:
                lo, hi = 0, n
            s = np.arange(lo, hi + 1, dtype=np.float64)
            if log_choose is None or log_choose[0] != (lo, hi):
                log_choose = ((lo, hi), gammaln(n + 1.0) - gammaln(s + 1.0) - gammaln(n - s + 1.0))
            logp = (log_choose[1] + s * math.log(theta) + (n - s) * math.log1p(-theta)
                    - np.abs(s_noisy - s) / scale)
            p = np.exp(logp - logp.max())
            c = np.cumsum(p)
            si = float(s[min(int(np.searchsorted(c, rng.uniform() * c[-1], side="right")), s.size - 1)])
            theta = rng.beta(a + si, b + n - si)
            if sweep >= burn_in:
                out[k] = theta
                k += 1
    return out[:draws]

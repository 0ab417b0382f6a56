r"""Power of the black-box audit: the smallest privacy loss it would have flagged.

The audit flags when, for one of its ``k`` chosen events ``E`` (in its orientation),
``log((lo(K_num) - δ) / hi(K_den)) > ε``, where ``K_num``, ``K_den`` are the counts of
``E`` among the fresh releases on the two data sets and ``lo``, ``hi`` one-sided
Clopper–Pearson bounds at level ``alpha / (2 k)``.  The counts are binomial, so for
event probabilities ``(p_num, p_den)`` the probability of a flag by that event is a sum
over ``K_den`` (:func:`flag_probability`): exact, no simulation.

**The statement.**  A mechanism whose privacy loss on the audited pair is ``L`` and is
realised on the event (``p_num = e^L p_den``) is flagged by that event with a
probability that grows with ``L``.  The masses of the event are the fitted law: the
event's proportions measured on the releases (the pilot's, when the draws are planned;
the fresh draws', when the verdict is stated).  Two versions of "the same event at loss
``L``" are computed, one keeping the numerator's mass (``p_den = p_num e^-L``), one the
denominator's (``p_num = p_den e^L``, where that is at most 1), and the smaller power of
the two is used;
:func:`loss_at_power` is the smallest ``L`` flagged with probability at least ``power``
by at least one of the events.  The statement is about this audit — its pair, events
and draws — not about losses reached elsewhere.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import stats as sps

__all__ = ["flag_probability", "event_power", "loss_at_power", "draws_for_loss"]

#: Power of the statements (probability of a flag).
POWER = 0.9
#: Largest loss searched for a statement (beyond it: "none below").
LOSS_MAX = 30.0


def flag_probability(p_num: float, p_den: float, n_num: int, n_den: int, level: float, epsilon: float,
                     delta: float = 0.0) -> float:
    """``P(log((lo(K_num) - delta) / hi(K_den)) > epsilon)`` for ``K ~ Bin(n, p)`` on each side,
    ``lo``/``hi`` one-sided Clopper–Pearson bounds at ``level``."""
    p_num, p_den = float(np.clip(p_num, 0.0, 1.0)), float(np.clip(p_den, 0.0, 1.0))
    if p_num <= 0.0 or n_num <= 0 or n_den <= 0:
        return 0.0
    w, kmin = _denominator(p_den, int(n_num), int(n_den), float(level), float(epsilon), float(delta))
    if not w.size:
        return 0.0
    return float(np.sum(w * sps.binom.sf(kmin - 1, n_num, p_num)))


@functools.lru_cache(maxsize=64)
def _denominator(p_den: float, n_num: int, n_den: int, level: float, epsilon: float, delta: float):
    """The part of :func:`flag_probability` that does not depend on ``p_num``: the weights
    ``P(K_den = k)`` over the central ``1 - 2e-10`` of ``Bin(n_den, p_den)`` where a flag is
    possible, and for each such ``k`` the smallest ``K_num`` that flags.  Kept, because the
    searches of :func:`loss_at_power` and :func:`draws_for_loss` ask for the same
    denominator again and again (the beta and binomial quantiles are most of their cost)."""
    lo_k, hi_k = (0, 0) if p_den == 0 else (int(sps.binom.ppf(1e-10, n_den, p_den)),
                                            int(sps.binom.isf(1e-10, n_den, p_den)) + 1)
    k = np.arange(max(lo_k, 0), min(hi_k, n_den) + 1)
    w = sps.binom.pmf(k, n_den, p_den)
    hi = np.where(k < n_den, sps.beta.ppf(1 - level, k + 1, np.maximum(n_den - k, 1e-12)), 1.0)
    v = delta + math.exp(epsilon) * hi  # the lower bound on p_num must exceed v
    ok = v < 1.0
    if not ok.any():
        return np.empty(0), np.empty(0)
    # lo(k) > v  <=>  P(Bin(n_num, v) >= k) < level: the smallest such k
    w, kmin = w[ok], sps.binom.isf(level, n_num, v[ok]) + 1
    w.setflags(write=False)  # shared by every call with these arguments
    kmin.setflags(write=False)
    return w, kmin


def event_power(p_num: float, p_den: float, loss: float, n: int, level: float, epsilon: float,
                delta: float = 0.0) -> float:
    """Probability that an event of masses ``(p_num, p_den)``, moved to the log ratio ``loss``
    (numerator's or denominator's mass kept, the smaller power; the denominator's only
    where ``p_den e^loss <= 1``), gives a flag on ``n`` fresh draws per side."""
    keep_num = flag_probability(p_num, p_num * math.exp(-loss), n, n, level, epsilon, delta)
    if p_den * math.exp(loss) > 1.0:  # no event of that mass has that ratio
        return keep_num
    return min(keep_num, flag_probability(p_den * math.exp(loss), p_den, n, n, level, epsilon, delta))


def _smallest_loss(masses, n, level, epsilon, delta, power):
    def flagged(loss):
        return any(event_power(a, b, loss, n, level, epsilon, delta) >= power for a, b in masses)

    if not masses or not flagged(LOSS_MAX):
        return math.inf
    lo, hi = float(epsilon), LOSS_MAX
    if flagged(lo):
        return lo
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if flagged(mid) else (mid, hi)
        if hi - lo < 1e-3:
            break
    return hi


def loss_at_power(masses: list[tuple[float, float]], n: int, level: float, epsilon: float, delta: float = 0.0,
                  power: float = POWER) -> float:
    """The smallest loss (to 1e-3, at least ``epsilon``) that one of the events of
    ``masses`` (``(p_num, p_den)`` each) flags with probability ``>= power`` on ``n`` fresh
    draws per side; inf when none does below :data:`LOSS_MAX`."""
    return _smallest_loss(masses, n, level, epsilon, delta, power)


def draws_for_loss(masses: list[tuple[float, float]], loss: float, level: float, epsilon: float, delta: float = 0.0,
                   power: float = POWER, start: int = 1000, budget: int = 10**7) -> int:
    """The fewest draws per side (doubling, then bisection, to 1 %) with which a loss of
    ``loss`` on one of the events is flagged with probability ``>= power``; ``budget`` when
    even that many do not suffice."""

    def enough(n):
        return any(event_power(a, b, loss, n, level, epsilon, delta) >= power for a, b in masses)

    n = max(int(start), 1)
    while not enough(n):
        if n >= budget:
            return int(budget)
        n = min(2 * n, int(budget))
    lo = n // 2
    if lo < start or not lo:
        return n
    while n - lo > max(1, n // 100):
        mid = (lo + n) // 2
        lo, n = (lo, mid) if enough(mid) else (mid, n)
    return n

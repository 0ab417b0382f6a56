"""Numba samplers for the 1-D quantile: exact draws and the generic kernel's gradient and loss.

Notation: check loss ``rho_tau(r) = r (tau - 1{r <= 0})``; two targets, each with rate
``a`` (``eps / (2 Delta)``, derived in :mod:`kngflow.models.quantile.problem`): KNG
``exp(-a |#{y_i <= theta} - tau n|)`` and the exponential mechanism ``exp(-a l_n(theta))``.

On the ``n + 1`` intervals between the order statistics inside ``[lower, upper]``
(:func:`quantile_segments`), ``#{y_i <= theta} = k`` is constant, so KNG is piecewise
constant (``log w_k - a |k - tau n|``: Smith's PrivateQuantile) and the exponential
mechanism is piecewise exponential (``l_n`` is linear with slope ``k - tau n``).
Interval masses are computed in log space (ties give empty intervals, ``log 0 = -inf``;
no underflow at ``n = 10^7`` or tiny ``eps``), normalised by their maximum and drawn by
inversion: exact i.i.d. draws.  :func:`quantile_gradient` (``O(log n)``) and
:func:`quantile_loss` (``O(n)``) serve the generic Metropolis kernel
(:mod:`kngflow.kernels.generic`), ``args = (y, tau)``.
"""

from __future__ import annotations

import math

import numpy as np

from kngflow._jit import jit
from kngflow.kernels.piecewise import TARGET_EXP, TARGET_KNG, draw_seg, log_seg_mass

__all__ = ["TARGET_KNG", "TARGET_EXP", "quantile_segments", "quantile_draws", "quantile_gradient", "quantile_loss"]


@jit
def quantile_segments(ys, tau, a, lower, upper, target, logw):
    """Log masses of the ``n + 1`` intervals between order statistics; returns their max.

    ``ys`` is sorted, inside ``[lower, upper]``.  Interval ``k`` is
    ``[t_k, t_{k+1}]`` with ``t_0 = lower``, ``t_k = ys[k-1]``, ``t_{n+1} = upper``.
    KNG: ``log w_k - a |k - tau n|``.  Exponential mechanism:
    ``-a l(t_k) + log ∫_0^{w_k} exp(-a (k - tau n) s) ds`` with ``l(t_0) = 0`` and
    ``l(t_{k+1}) = l(t_k) + (k - tau n) w_k`` (compensated summation, so the relative
    error stays at machine precision for ``n = 10^7``).
    """
    n = ys.shape[0]
    tn = tau * n
    loss = 0.0
    comp = 0.0
    mx = -np.inf
    lo = lower
    for k in range(n + 1):
        hi = ys[k] if k < n else upper
        w = hi - lo
        slope = k - tn
        if target == TARGET_KNG:
            v = (math.log(w) if w > 0.0 else -np.inf) - a * abs(slope)
        else:
            v = -a * loss + log_seg_mass(a * slope, w)
            # Kahan: loss += slope * w
            inc = slope * w - comp
            tot = loss + inc
            comp = (tot - loss) - inc
            loss = tot
        logw[k] = v
        if v > mx:
            mx = v
        lo = hi
    return mx


@jit
def quantile_draws(rng, ys, tau, a, lower, upper, target, work, out):
    """Fill ``out`` with exact i.i.d. draws; ``work`` is (n + 1,) scratch.

    Builds the normalised cumulative masses once, then each draw picks an interval by
    binary search and a point inside it (uniform for KNG, truncated exponential for the
    exponential mechanism).
    """
    n = ys.shape[0]
    mx = quantile_segments(ys, tau, a, lower, upper, target, work)
    tot = 0.0
    for k in range(n + 1):
        tot += math.exp(work[k] - mx)
        work[k] = tot
    for m in range(out.shape[0]):
        u = rng.random() * tot
        k = np.searchsorted(work, u, side="right")
        if k > n:
            k = n
        while k > 0 and work[k] == work[k - 1]:
            k -= 1  # never land on an empty interval (ties)
        lo = lower if k == 0 else ys[k - 1]
        hi = upper if k == n else ys[k]
        if target == TARGET_KNG:
            x = lo + rng.random() * (hi - lo)
        else:
            x = lo + draw_seg(rng, a * (k - tau * n), hi - lo)
        out[m] = min(max(x, lo), hi)



@jit
def quantile_gradient(theta, args, g):
    """1-D: ``g[0] = #{y_i <= theta} - tau n`` by binary search on sorted ``y``; ``args = (y, tau)``."""
    y, tau = args
    g[0] = np.searchsorted(y, theta[0], side="right") - tau * y.shape[0]


@jit
def quantile_loss(theta, args):
    """1-D check loss ``sum_i rho_tau(y_i - theta)`` in ``O(n)``; ``args = (y, tau)``."""
    y, tau = args
    s = 0.0
    t = theta[0]
    for i in range(y.shape[0]):
        f = y[i] - t
        s += f * (tau - 1.0) if f <= 0.0 else f * tau
    return s

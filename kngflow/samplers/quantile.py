"""Numba samplers for quantiles (1-D) and quantile regression.

Notation: check loss ``rho_tau(r) = r (tau - 1{r <= 0})``, residuals ``r_i = y_i - x_i'theta``,
gradient of ``l_n(theta) = sum_i rho_tau(r_i)`` (almost everywhere)

    g(theta) = sum_i x_i (1{r_i <= 0} - tau).

Two targets, each with rate ``a`` (``eps / (2 Delta)``, derived in
:mod:`kngflow.problems.quantile`):

* KNG: ``exp(-a ||g(theta)||_K)``;
* exponential mechanism: ``exp(-a l_n(theta))``.

1-D quantile (``x_i = 1``, :func:`quantile_segments`): on the ``n + 1`` intervals between
the order statistics inside ``[lower, upper]``, ``#{y_i <= theta} = k`` is constant, so
KNG is piecewise constant (``log w_k - a |k - tau n|``: Smith's PrivateQuantile) and the
exponential mechanism is piecewise exponential (``l_n`` is linear with slope
``k - tau n``).  Interval masses are computed in log space (ties give empty intervals,
``log 0 = -inf``; no underflow at ``n = 10^7`` or tiny ``eps``), normalised by their
maximum and drawn by inversion: exact i.i.d. draws.

Quantile regression, exact coordinate Gibbs (:func:`qr_gibbs_chains`): along coordinate
``j`` with the others fixed, ``r_i(t) = b_i - x_ij t`` changes sign at ``t_i = b_i/x_ij``,
so ``g`` is piecewise constant in ``t`` with at most ``n`` breaks (KNG conditional:
piecewise constant) and ``l_n`` is piecewise linear with slope ``g_j`` (exponential
mechanism: piecewise exponential).  The breaks are sorted by a distribution sort
(:func:`bucket_argsort`, expected ``O(n)``, worst case ``O(n log n)``); one pass
updates ``g`` by ``sign(x_ij) x_i`` at each break (``O(n d)``).

Gradients and losses for the generic Metropolis kernel (:mod:`kngflow.samplers.generic`):
:func:`qr_gradient`, :func:`qr_loss` (``O(n d)`` per evaluation, ``args = (X, y, tau)``)
and the 1-D :func:`quantile_gradient` (``O(log n)``), :func:`quantile_loss` (``O(n)``).
"""

from __future__ import annotations

import math

import numpy as np

from .._jit import jit
from .generic import knorm
from .linear import _draw_seg, _log_seg_mass

__all__ = [
    "TARGET_KNG",
    "TARGET_EXP",
    "quantile_segments",
    "quantile_draws",
    "qr_gibbs_chains",
    "bucket_argsort",
    "qr_gradient",
    "qr_loss",
    "quantile_gradient",
    "quantile_loss",
]

TARGET_KNG = 0
TARGET_EXP = 1


# ------------------------------------------------------------------------- 1-D quantile


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
            v = -a * loss + _log_seg_mass(a * slope, w)
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
            x = lo + _draw_seg(rng, a * (k - tau * n), hi - lo)
        out[m] = min(max(x, lo), hi)


# ------------------------------------------------------------------ quantile regression


@jit
def qr_gradient(theta, args, g):
    """``g = sum_i x_i (1{y_i <= x_i'theta} - tau)`` in ``O(n d)``; ``args = (X, y, tau)``."""
    X, y, tau = args
    n, d = X.shape
    for j in range(d):
        g[j] = 0.0
    for i in range(n):
        f = y[i]
        for j in range(d):
            f -= X[i, j] * theta[j]
        w = (1.0 - tau) if f <= 0.0 else -tau
        for j in range(d):
            g[j] += w * X[i, j]


@jit
def qr_loss(theta, args):
    """``sum_i rho_tau(y_i - x_i'theta)`` in ``O(n d)``; ``args = (X, y, tau)``."""
    X, y, tau = args
    n, d = X.shape
    s = 0.0
    for i in range(n):
        f = y[i]
        for j in range(d):
            f -= X[i, j] * theta[j]
        s += f * (tau - 1.0) if f <= 0.0 else f * tau
    return s


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


#: buckets larger than this are sorted by np.argsort instead of insertion sort
_BUCKET_MAX = 32


@jit
def bucket_argsort(keys, m, order, count):
    """``order[:m]`` = a stable argsort of ``keys[:m]`` in expected ``O(m)``.

    Distribution sort into ``m`` equal-width buckets over ``[min, max]`` (one counting
    pass, one placing pass), then insertion sort inside each bucket; a bucket holding
    more than :data:`_BUCKET_MAX` keys (clustered or tied keys) is sorted by
    ``np.argsort``, so the worst case stays ``O(m log m)``.  ``count`` is (m + 1,) scratch.
    """
    if m == 0:
        return
    lo = keys[0]
    hi = keys[0]
    for q in range(1, m):
        v = keys[q]
        if v < lo:
            lo = v
        elif v > hi:
            hi = v
    if not hi > lo:
        for q in range(m):
            order[q] = q
        return
    scale = m / (hi - lo)
    for q in range(m + 1):
        count[q] = 0
    for q in range(m):
        c = int((keys[q] - lo) * scale)
        count[min(c, m - 1) + 1] += 1
    for c in range(m):
        count[c + 1] += count[c]
    for q in range(m):
        c = min(int((keys[q] - lo) * scale), m - 1)
        order[count[c]] = q
        count[c] += 1
    start = 0
    for c in range(m):  # count[c] is now the end of bucket c
        end = count[c]
        if end - start > _BUCKET_MAX:
            sub = order[start:end].copy()
            perm = np.argsort(keys[sub], kind="mergesort")
            for r in range(end - start):
                order[start + r] = sub[perm[r]]
        else:
            for r in range(start + 1, end):
                o = order[r]
                v = keys[o]
                s = r - 1
                while s >= start and keys[order[s]] > v:
                    order[s + 1] = order[s]
                    s -= 1
                order[s + 1] = o
        start = end


@jit
def _qr_conditional(rng, X, b, j, L, tau, a, target, code, g, keys, idx, T, logm, order, count):
    """Draw ``t`` on ``[-L, L]`` from the coordinate-``j`` conditional (see module doc).

    ``b`` holds the residuals without coordinate ``j``.  Returns the draw.
    """
    n, d = X.shape
    for k in range(d):
        g[k] = 0.0
    m = 0
    for i in range(n):
        xij = X[i, j]
        # indicator 1{b_i - x_ij t <= 0} at t = -L
        ind = 1.0 if b[i] + xij * L <= 0.0 else 0.0
        for k in range(d):
            g[k] += X[i, k] * (ind - tau)
        if xij != 0.0:
            t = b[i] / xij
            if -L < t < L:
                keys[m] = t
                idx[m] = i
                m += 1
    bucket_argsort(keys, m, order, count)
    T[0] = -L
    for q in range(m):
        T[q + 1] = keys[order[q]]
    T[m + 1] = L
    # pass over the m + 1 segments
    loss = 0.0
    mx = -np.inf
    for q in range(m + 1):
        w = T[q + 1] - T[q]
        if target == TARGET_KNG:
            v = (math.log(w) if w > 0.0 else -np.inf) - a * knorm(g, code)
        else:
            v = -a * loss + _log_seg_mass(a * g[j], w)
            loss += g[j] * w
            keys[q] = g[j]  # slope of the segment (keys are no longer needed)
        logm[q] = v
        if v > mx:
            mx = v
        if q < m:
            i = idx[order[q]]
            sgn = 1.0 if X[i, j] > 0.0 else -1.0
            for k in range(d):
                g[k] += sgn * X[i, k]
    tot = 0.0
    for q in range(m + 1):
        tot += math.exp(logm[q] - mx)
        logm[q] = tot
    u = rng.random() * tot
    q = np.searchsorted(logm[: m + 1], u, side="right")
    if q > m:
        q = m
    while q > 0 and logm[q] == logm[q - 1]:
        q -= 1
    w = T[q + 1] - T[q]
    if target == TARGET_KNG:
        t = T[q] + rng.random() * w
    else:
        t = T[q] + _draw_seg(rng, a * keys[q], w)
    return min(max(t, T[q]), T[q + 1])


@jit
def qr_gibbs_chains(rng, X, y, tau, a, B, target, code, sweeps, out):
    """Exact coordinate-Gibbs chains on ``{||theta||_1 <= B}`` (uniform base), start 0.

    ``target`` is :data:`TARGET_KNG` (norm ``code``) or :data:`TARGET_EXP`; ``sweeps``
    full sweeps per chain; final states go to the rows of ``out``.
    """
    n, d = X.shape
    theta = np.empty(d)
    r = np.empty(n)
    b = np.empty(n)
    g = np.empty(d)
    keys = np.empty(n + 1)
    idx = np.empty(n, dtype=np.int64)
    order = np.empty(n, dtype=np.int64)
    count = np.empty(n + 1, dtype=np.int64)
    T = np.empty(n + 2)
    logm = np.empty(n + 1)
    for ch in range(out.shape[0]):
        for k in range(d):
            theta[k] = 0.0
        for i in range(n):
            r[i] = y[i]
        l1 = 0.0
        for _ in range(sweeps):
            for j in range(d):
                tj = theta[j]
                L = B - (l1 - abs(tj))
                if L < 0.0:
                    L = 0.0
                for i in range(n):
                    b[i] = r[i] + X[i, j] * tj
                t = 0.0
                if L > 0.0:
                    t = _qr_conditional(rng, X, b, j, L, tau, a, target, code, g, keys, idx, T, logm, order, count)
                theta[j] = t
                l1 += abs(t) - abs(tj)
                for i in range(n):
                    r[i] = b[i] - X[i, j] * t
        for k in range(d):
            out[ch, k] = theta[k]

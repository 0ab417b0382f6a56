"""Exact coordinate Gibbs for quantile regression (:func:`qr_gibbs_chains`).

Two targets, each with rate ``a`` (``eps / (2 Delta)``, derived in
:mod:`kngflow.models.quantile.problem`): KNG, ``exp(-a ||g(theta)||_K)`` with ``g`` the
check loss's gradient (:mod:`kngflow.models.quantreg.gradients`), and the exponential
mechanism, ``exp(-a l_n(theta))``.  The 1-D quantile (``x_i = 1``) has its exact sampler in
:mod:`kngflow.models.quantile.sampler`.

Along coordinate ``j`` with the others fixed, ``r_i(t) = b_i - x_ij t`` changes sign at
``t_i = b_i/x_ij``, so ``g`` is piecewise constant in ``t`` with at most ``n`` breaks (KNG
conditional: piecewise constant) and ``l_n`` is piecewise linear with slope ``g_j``
(exponential mechanism: piecewise exponential).  The breaks are sorted by a distribution
sort (:func:`bucket_argsort`, expected ``O(n)``, worst case ``O(n log n)``); one pass
updates ``g`` by ``sign(x_ij) x_i`` at each break (``O(n d)``).  The exponential
mechanism's conditional is log-concave, so only the breaks in a window around the mode
are sorted, with exact tangent envelopes and rejection outside
(:func:`_qr_exp_conditional`).
"""

from __future__ import annotations

import math

import numpy as np

from kngflow._jit import jit
from kngflow.kernels.generic import norm_by_code
from kngflow.kernels.metropolis import new_tuner, run_chains
from kngflow.kernels.piecewise import TARGET_EXP, TARGET_KNG, draw_seg, l1_chord, lattice_accept, log_seg_mass

__all__ = ["TARGET_KNG", "TARGET_EXP", "bucket_argsort", "qr_gibbs_chains"]

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
def _qr_conditional(rng, X, b, j, L, tau, a, target, code, g, keys, idx, T, logm, order, count, lattice=0.0):
    """Draw ``t`` on ``[-L, L]`` from the coordinate-``j`` conditional (see module doc).

    ``b`` holds the residuals without coordinate ``j``.  Returns the draw.  With
    ``lattice > 0`` (KNG's target; ``L`` a multiple of it) the draw is a lattice point
    with probability ∝ the density there: a segment's mass is its number of lattice points
    times its density, and the point is uniform among them.
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
            if lattice > 0.0:
                w = _lattice_count(T, q, m, lattice)
            v = (math.log(w) if w > 0.0 else -np.inf) - a * norm_by_code(g, code)
        else:
            v = -a * loss + log_seg_mass(a * g[j], w)
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
    if target == TARGET_KNG and lattice > 0.0:
        return (math.ceil(T[q] / lattice) + math.floor(rng.random() * _lattice_count(T, q, m, lattice))) * lattice
    if target == TARGET_KNG:
        t = T[q] + rng.random() * w
    else:
        t = T[q] + draw_seg(rng, a * keys[q], w)
    return min(max(t, T[q]), T[q + 1])


@jit
def _lattice_count(T, q, m, lattice):
    """Lattice points of segment ``q`` of the breaks ``T[0..m+1]``: ``[T_q, T_q+1)``, the last closed."""
    last = math.floor(T[m + 1] / lattice) if q == m else math.ceil(T[q + 1] / lattice) - 1.0
    return max(last - math.ceil(T[q] / lattice) + 1.0, 0.0)


#: a window edge is "far" when the exponential conditional's log density there is this
#: much below its maximum (the next window of that coordinate is sized from it)
_WINDOW_LOGDROP = 30.0


@jit
def _qr_exp_loss(X, b, j, tau, t):
    """``sum_i rho_tau(b_i - x_ij t)``: the loss along coordinate ``j`` at ``t`` (``O(n)``)."""
    s = 0.0
    for i in range(b.shape[0]):
        r = b[i] - X[i, j] * t
        s += r * (tau - 1.0) if r <= 0.0 else r * tau
    return s


@jit
def _qr_exp_conditional(rng, X, b, j, L, tau, a, t0, h, keys, vals, T, logm, order, count):
    """Exact draw from the exponential mechanism's coordinate-``j`` conditional on ``[-L, L]``.

    ``t -> l(t) = sum_i rho_tau(b_i - x_ij t)`` is convex and piecewise linear (its slope
    rises by ``|x_ij|`` at each break ``b_i / x_ij``), so the conditional
    ``∝ exp(-a l(t))`` is log-concave.  Only the breaks inside the window
    ``[wl, wr] = [t0 - h, t0 + h] ∩ [-L, L]`` are sorted; on the window the density is
    drawn exactly (piecewise exponential).  Outside it, the tangent of ``l`` at the window
    edge lies below ``l`` (convexity), so ``exp(-a tangent)`` is an envelope with a closed-
    form mass.  A draw picks the window or a tail by mass; a tail proposal is accepted with
    probability ``exp(-a (l(t) - tangent(t)))`` (one ``O(n)`` loss), else the whole draw
    is repeated: rejection sampling from the window-plus-envelope density, which equals the
    target on the window, so the result is an exact draw whatever ``h``.  ``b`` holds the
    residuals without coordinate ``j``.  Returns ``(t, h_next)``: the next window half-width
    for this coordinate, so that the log density drops by :data:`_WINDOW_LOGDROP` inside
    it (four times ``h`` when the window edge was not yet that low).
    """
    n = b.shape[0]
    t0 = min(max(t0, -L), L)
    while True:  # attempts; each is an exact rejection sampler, widened after a rejection
        wl = max(t0 - h, -L)
        wr = min(t0 + h, L)
        # one pass: loss and slope at wl, the breaks inside (wl, wr)
        loss_l = 0.0
        slope_l = 0.0
        m = 0
        for i in range(n):
            xij = X[i, j]
            bi = b[i]
            r = bi - xij * wl
            if r <= 0.0:
                loss_l += r * (tau - 1.0)
                slope_l += xij * (1.0 - tau)
            else:
                loss_l += r * tau
                slope_l -= xij * tau
            if xij != 0.0:
                t = bi / xij
                if wl < t < wr:
                    keys[m] = t
                    vals[m] = abs(xij)
                    m += 1
        bucket_argsort(keys, m, order, count)
        T[0] = wl
        for q in range(m):
            T[q + 1] = keys[order[q]]
        T[m + 1] = wr
        # the window's segments (losses relative to l(wl)), then the two tails' envelopes
        rel = 0.0
        slope = slope_l
        mx = -np.inf
        lmin = 0.0
        for q in range(m + 1):
            w = T[q + 1] - T[q]
            v = -a * rel + log_seg_mass(a * slope, w)
            keys[q] = slope  # the segment's slope (the sorted keys live on in T)
            logm[q] = v
            if v > mx:
                mx = v
            rel += slope * w
            lmin = min(lmin, rel)
            if q < m:
                slope += vals[order[q]]
        rel_r = rel  # l(wr) - l(wl)
        slope_r = slope
        # tails: left on [-L, wl] with the tangent at wl, right on [wr, L] with the tangent at wr
        left = -np.inf
        if wl > -L:
            left = -a * (-slope_l * (wl + L)) + log_seg_mass(a * slope_l, wl + L)
        right = -np.inf
        if wr < L:
            right = -a * rel_r + log_seg_mass(a * slope_r, L - wr)
        mx = max(mx, max(left, right))
        tot = 0.0
        for q in range(m + 1):
            tot += math.exp(logm[q] - mx)
            logm[q] = tot
        w_left = math.exp(left - mx)
        w_right = math.exp(right - mx)
        total = tot + w_left + w_right
        u = rng.random() * total
        if u < tot:
            q = np.searchsorted(logm[: m + 1], u, side="right")
            if q > m:
                q = m
            while q > 0 and logm[q] == logm[q - 1]:
                q -= 1
            t = T[q] + draw_seg(rng, a * keys[q], T[q + 1] - T[q])
            t = min(max(t, T[q]), T[q + 1])
            break
        if u < tot + w_left:  # left tail: l(t) >= l(wl) + slope_l (t - wl)
            t = -L + draw_seg(rng, a * slope_l, wl + L)
            t = min(max(t, -L), wl)
            gap = _qr_exp_loss(X, b, j, tau, t) - (loss_l + slope_l * (t - wl))
        else:  # right tail: l(t) >= l(wr) + slope_r (t - wr)
            t = wr + draw_seg(rng, a * slope_r, L - wr)
            t = min(max(t, wr), L)
            gap = _qr_exp_loss(X, b, j, tau, t) - (loss_l + rel_r + slope_r * (t - wr))
        if rng.random() < math.exp(-a * max(gap, 0.0)):
            break
        h *= 4.0  # rejected: a wider window (exact whatever the sequence of windows)
    # the next window: where a (l - min l) reaches the drop on each side of the draw
    drop = _WINDOW_LOGDROP / a
    if (wl > -L and a * (0.0 - lmin) < _WINDOW_LOGDROP) or (wr < L and a * (rel_r - lmin) < _WINDOW_LOGDROP):
        return t, 4.0 * h
    lo = wl
    hi = wr
    rel = 0.0
    for q in range(m + 2):  # the breaks nearest to t where the drop is reached
        if q > 0:
            rel += keys[q - 1] * (T[q] - T[q - 1])
        if rel - lmin >= drop:
            if T[q] <= t:
                lo = T[q]
            else:
                hi = T[q]
                break
    return t, max(1.5 * max(t - lo, hi - t), 1e-12)


@jit
def _qr_exp_lattice(rng, X, b, j, K, lattice, tau, a, t0, h, keys, vals, T, logm, order, count):
    """Draw ``k lattice`` (``|k| <= K``) with probability ∝ the exponential conditional there.

    Rejection from the continuous conditional on ``[-(K + 1/2) lattice, (K + 1/2) lattice]``
    (:func:`_qr_exp_conditional`): its draw ``t`` is rounded to the nearest lattice point
    ``x`` and accepted with probability ``exp(-a (l(x) - l(t)) - M)``, where
    ``M = a S lattice / 2`` with ``S = max(tau, 1 - tau) sum_i |x_ij|`` bounding the loss's
    slope, so ``M >= a |l(x) - l(t)|``; the accepted ``x`` has probability
    ``∝ lattice exp(-a l(x) - M)``, the restriction of the conditional to the lattice,
    exactly (``M`` is about ``2^-47`` of the conditional's log-density range).  Returns
    ``(x, h_next)`` as :func:`_qr_exp_conditional` does.
    """
    half = 0.5 * lattice
    L = (2.0 * K + 1.0) * half  # exact: 2K + 1 < 2^53
    while True:
        t, h_next = _qr_exp_conditional(rng, X, b, j, L, tau, a, t0, h, keys, vals, T, logm, order, count)
        x = min(max(math.floor(t * (1.0 / lattice) + 0.5), -K), K) * lattice  # 1 / lattice: exact
        step = x - t
        diff = 0.0  # l(x) - l(t), record by record (one slope unless a break lies between)
        slope = 0.0
        for i in range(b.shape[0]):
            xij = X[i, j]
            slope += abs(xij)
            rx = b[i] - xij * x
            rt = b[i] - xij * t
            if (rx <= 0.0) == (rt <= 0.0):
                diff -= (tau - 1.0 if rx <= 0.0 else tau) * xij * step
            else:
                diff += (rx * (tau - 1.0) if rx <= 0.0 else rx * tau) - (rt * (tau - 1.0) if rt <= 0.0 else rt * tau)
        if lattice_accept(rng, a * diff + a * max(tau, 1.0 - tau) * slope * half * (1.0 + 2.0**-20)):
            return x, h_next


def qr_gibbs_chains(rng, X, y, tau, a, B, target, code, sweeps, out, lattice=0.0):
    """Exact coordinate-Gibbs chains on ``{||theta||_1 <= B}`` (uniform base), start 0.

    ``target`` is :data:`TARGET_KNG` (norm ``code``) or :data:`TARGET_EXP`; ``sweeps``
    full sweeps per chain; final states go to the rows of ``out`` (the chain loop
    :func:`~kngflow.kernels.metropolis.run_chains`).  The exponential
    target's conditionals are drawn on a window (:func:`_qr_exp_conditional`; the first
    of each chain spans ``Theta``, later ones are sized from the previous draw of that
    coordinate): exact whatever the window, but sorting only its breaks.  With
    ``lattice > 0`` (a power of two; hardened releases) the chains live on that lattice:
    each coordinate is drawn from the conditional restricted to the lattice points of its
    chord (:func:`_qr_conditional`, :func:`_qr_exp_lattice`), so every position is an
    exact sum and the chain targets the density restricted to the lattice.
    """
    n, d = X.shape
    state = (np.empty(d), new_tuner(d), X, y, float(tau), float(a), float(B), int(target), int(code),
             float(lattice),
             np.empty(n), np.empty(n), np.empty(d), np.empty(n + 1), np.empty(n, dtype=np.int64),
             np.empty(n, dtype=np.int64), np.empty(n + 1, dtype=np.int64), np.empty(n + 2), np.empty(n + 1),
             np.empty(n if target == TARGET_EXP else 0), np.empty(d), np.zeros(1))
    run_chains(_gibbs_start, _gibbs_sweeps, rng, None, None, state, int(sweeps), out, np.empty(out.shape[0]))


@jit
def _gibbs_start(rng, f, g, state, ch):
    """A chain of :func:`qr_gibbs_chains` starts at 0 (residuals ``y``), each window ``2 B`` wide."""
    theta, y, B, r, h, x = state[0], state[3], state[6], state[10], state[20], state[21]
    for k in range(theta.shape[0]):
        theta[k] = 0.0
        h[k] = 2.0 * B
    for i in range(y.shape[0]):
        r[i] = y[i]
    x[0] = 0.0


@jit
def _residuals_without(X, r, j, tj, b):
    """``b = r + X[:, j] tj``: the residuals ``r`` with coordinate ``j`` (now ``tj``) set to 0."""
    for i in range(X.shape[0]):
        b[i] = r[i] + X[i, j] * tj


@jit
def _gibbs_sweeps(rng, f, g_, state, sweeps):
    """The sweeps of a chain of :func:`qr_gibbs_chains` (from the ℓ1 norm ``x[0]``)."""
    (theta, tuner, X, y, tau, a, B, target, code, lattice, r, b, g, keys, idx, order, count, T, logm, vals, h,
     x) = state
    n, d = X.shape
    l1 = x[0]
    top = math.floor(B / lattice) if lattice > 0.0 else 0.0  # the lattice index of B
    for _ in range(sweeps):
        for j in range(d):
            tj = theta[j]
            L = l1_chord(B, l1, tj)
            _residuals_without(X, r, j, tj, b)
            t = 0.0
            if lattice > 0.0:
                K = top - (l1 - abs(tj)) / lattice  # the chord's last lattice index: exact on the lattice
                if K > 0.0 and target == TARGET_EXP:
                    t, h[j] = _qr_exp_lattice(rng, X, b, j, K, lattice, tau, a, tj, h[j], keys, vals, T, logm, order,
                                              count)
                elif K > 0.0:
                    t = _qr_conditional(rng, X, b, j, K * lattice, tau, a, target, code, g, keys, idx, T, logm, order,
                                        count, lattice)
            elif L > 0.0 and target == TARGET_EXP:
                t, h[j] = _qr_exp_conditional(rng, X, b, j, L, tau, a, tj, h[j], keys, vals, T, logm, order, count)
            elif L > 0.0:
                t = _qr_conditional(rng, X, b, j, L, tau, a, target, code, g, keys, idx, T, logm, order, count)
            theta[j] = t
            l1 += abs(t) - abs(tj)
            for i in range(n):
                r[i] = b[i] - X[i, j] * t



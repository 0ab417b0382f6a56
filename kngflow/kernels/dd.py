r"""Double-double arithmetic for certified solves: error-free transformations and a refined linear solve.

A hardened release (:mod:`kngflow.mechanisms.hardening`) is as private as the release of
exact arithmetic when its rounding is below a public bound ``η``.  For a release that
solves a linear system with the data (``G θ = c + u`` for linear-regression KNG and the
exponential mechanism), a plain float64 solve errs by about ``cond(G) u |θ|`` with
``u = 2^-53``: more than a grid that follows the statistics' spread at large ``n`` allows.
Here the solution is carried as an unevaluated sum ``hi + lo`` of two doubles
(double-double), refined with residuals computed by error-free transformations, and its
error certified a posteriori:

* :func:`two_sum` (Knuth) and :func:`two_prod` (Dekker, with Veltkamp's split) return
  ``s + e = a + b`` and ``p + e = a b`` exactly (barring overflow);
* :func:`residual_dd` computes ``r = v - G θ`` for ``θ = hi + lo`` and ``v = vh + vl`` with
  every product of ``G_ik hi_k`` exact and the sums in double-double, and a bound on its
  own error (:func:`residual_dd`'s docstring);
* :func:`refine_solve` runs mixed-precision iterative refinement
  ``θ <- θ + M r`` with ``M ≈ G^{-1}`` (the correction in plain float64 is enough: it only
  has to shrink the error, which the certificate measures);
* :func:`inverse_norm_bound` bounds ``||G^{-1}||_2`` from the computed ``M``: with
  ``R = I - M G`` and ``α >= ||R||_F`` (rounding of the product included),
  ``||G^{-1}||_2 <= ||M||_F / (1 - α)`` when ``α < 1`` (``G^{-1} = (M G)^{-1} M``);
* :func:`solve_certificate`: ``||θ - G^{-1} v||_2 <= ||G^{-1}||_2 (||r||_2 + e)``;
  :func:`certified_solve` refines, certifies and scales in one call.

Everything is compiled once (``cache=True``) with one signature per function.
"""

from __future__ import annotations

import math

import numpy as np

from kngflow._jit import jit

__all__ = ["UNIT", "two_sum", "two_prod", "dd_add", "residual_dd", "refine_solve", "inverse_norm_bound",
           "solve_certificate", "certified_solve", "scale_dd", "affine_dd", "gram_residual_norm",
           "certify_quadratic_l1_ball", "chol_solve_certificate", "chol_solve_dd", "dd_mul", "dd_add_dd", "dd_div",
           "exp_dd", "EXP_DD_REL"]

#: unit roundoff of float64
UNIT = 2.0**-53
_SPLIT = 134217729.0  # 2^27 + 1


@jit
def two_sum(a, b):
    """``(s, e)`` with ``s = fl(a + b)`` and ``s + e = a + b`` exactly (Knuth)."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


@jit
def _split(a):
    c = _SPLIT * a
    hi = c - (c - a)
    return hi, a - hi


@jit
def two_prod(a, b):
    """``(p, e)`` with ``p = fl(a b)`` and ``p + e = a b`` exactly (Dekker; |a b| < 2^996)."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


@jit
def dd_add(h, l, x):
    """``(h, l) + x`` in double-double; returns the renormalised pair."""
    s, e = two_sum(h, x)
    e += l
    return two_sum(s, e)


@jit
def residual_dd(G, vh, vl, hi, lo, rh, rl):
    """``r = v - G (hi + lo)`` into ``rh + rl``; returns a bound on ``||r_computed - r_exact||_2``.

    Each ``G_ik hi_k`` is split exactly by :func:`two_prod`; ``G_ik lo_k`` is rounded once
    (error at most ``u |G_ik lo_k|``).  The ``3 d + 2`` double-double additions of a row err
    by at most ``2 u^2`` of the running magnitude each, which is at most
    ``S_i = |v_i| + sum_k |G_ik| (|hi_k| + |lo_k|)``: the bound per row is
    ``u sum_k |G_ik lo_k| + 8 (d + 2) u^2 S_i`` (a factor two of safety on each term),
    summed in quadrature.
    """
    d = vh.shape[0]
    err2 = 0.0
    for i in range(d):
        h, l = vh[i], vl[i]
        size = abs(vh[i]) + abs(vl[i])
        small = 0.0
        for k in range(d):
            p, e = two_prod(G[i, k], hi[k])
            h, l = dd_add(h, l, -p)
            h, l = dd_add(h, l, -e)
            q = G[i, k] * lo[k]
            h, l = dd_add(h, l, -q)
            size += abs(G[i, k]) * (abs(hi[k]) + abs(lo[k]))
            small += abs(q)
        rh[i] = h
        rl[i] = l
        ei = 2.0 * UNIT * small + 8.0 * (d + 2) * UNIT * UNIT * size
        err2 += ei * ei
    return math.sqrt(err2)


@jit
def refine_solve(G, M, vh, vl, hi, lo, iters):
    """Refine ``hi + lo`` towards ``G^{-1} (vh + vl)`` by ``iters`` steps ``θ <- θ + M r``
    (residual :func:`residual_dd`, correction added in double-double)."""
    d = vh.shape[0]
    rh = np.empty(d)
    rl = np.empty(d)
    for _ in range(iters):
        residual_dd(G, vh, vl, hi, lo, rh, rl)
        for i in range(d):
            t = 0.0
            for k in range(d):
                t += M[i, k] * (rh[k] + rl[k])
            h, l = dd_add(hi[i], lo[i], t)
            hi[i] = h
            lo[i] = l


@jit
def inverse_norm_bound(G, M):
    """An upper bound on ``||G^{-1}||_2`` from an approximate inverse ``M`` (inf when none is certified).

    ``R = I - M G`` is computed in float64; each entry of the product errs by at most
    ``γ_d (|M||G|)_ij`` and the subtraction from ``I`` by ``u`` of its result, so
    ``α = ||R_computed||_F + (γ_d + u)(|| |M||G| ||_F + sqrt(d))`` bounds ``||I - M G||_F``,
    and ``||G^{-1}||_2 <= ||M||_F / (1 - α)`` for ``α < 1``.
    """
    d = G.shape[0]
    gamma = d * UNIT / (1.0 - d * UNIT)
    r2 = 0.0
    a2 = 0.0
    m2 = 0.0
    for i in range(d):
        for j in range(d):
            s = 0.0
            sa = 0.0
            for k in range(d):
                s += M[i, k] * G[k, j]
                sa += abs(M[i, k]) * abs(G[k, j])
            rij = (1.0 if i == j else 0.0) - s
            r2 += rij * rij
            a2 += sa * sa
            m2 += M[i, j] * M[i, j]
    alpha = math.sqrt(r2) + (gamma + UNIT) * (math.sqrt(a2) + math.sqrt(d))
    alpha *= 1.0 + 4.0 * d * UNIT  # the norms' own rounding
    if not alpha < 1.0:
        return np.inf
    return math.sqrt(m2) * (1.0 + 4.0 * d * UNIT) / (1.0 - alpha)


@jit
def solve_certificate(G, inv_norm, vh, vl, hi, lo, verr):
    """A bound on ``||(hi + lo) - G^{-1} v||_2`` for a right-hand side ``v`` within ``verr``
    (ℓ2) of ``vh + vl``, given ``inv_norm >= ||G^{-1}||_2`` (:func:`inverse_norm_bound`)."""
    d = vh.shape[0]
    rh = np.empty(d)
    rl = np.empty(d)
    err = residual_dd(G, vh, vl, hi, lo, rh, rl)
    r2 = 0.0
    for i in range(d):
        t = abs(rh[i]) + abs(rl[i])
        r2 += t * t
    return inv_norm * (math.sqrt(r2) * (1.0 + 4.0 * d * UNIT) + err + verr)


@jit
def certified_solve(G, M, inv_norm, vh, vl, hi, lo, verr, iters, s):
    """Refine ``hi + lo`` towards ``G^{-1} v`` (:func:`refine_solve`), certify it
    (:func:`solve_certificate`) and scale it by ``s`` (:func:`scale_dd`), in one call;
    returns the bound on ``||s (hi + lo) - s G^{-1} v||_∞`` (``|s|`` times the certificate
    plus the scaling's rounding)."""
    refine_solve(G, M, vh, vl, hi, lo, iters)
    cert = solve_certificate(G, inv_norm, vh, vl, hi, lo, verr)
    return cert * abs(s) * (1.0 + 2.0 * UNIT) + scale_dd(hi, lo, s)


@jit
def affine_dd(c, L, z, s, vh, vl):
    """``v = c + s L z`` (``L`` lower triangular) in double-double into ``vh + vl``; returns a
    bound on its error in ℓ2: each ``L_ik z_k = p + e`` is exact, ``s p`` exact, ``s e``
    rounded once (``u |s e|``), and the ``3 i + 3`` double-double additions of row ``i``
    err by ``2 u^2`` of at most ``|c_i| + |s| sum_k |L_ik z_k|`` each."""
    d = c.shape[0]
    err2 = 0.0
    for i in range(d):
        h, l = c[i], 0.0
        size = abs(c[i])
        small = 0.0
        for k in range(i + 1):
            p, e = two_prod(L[i, k], z[k])
            q, f = two_prod(s, p)
            h, l = dd_add(h, l, q)
            h, l = dd_add(h, l, f)
            g = s * e
            h, l = dd_add(h, l, g)
            size += abs(s) * (abs(p) + abs(e))
            small += abs(g)
        vh[i] = h
        vl[i] = l
        ei = 2.0 * UNIT * small + 8.0 * (d + 2) * UNIT * UNIT * size
        err2 += ei * ei
    return math.sqrt(err2)


@jit
def gram_residual_norm(L, G):
    """An upper bound on ``||L L^T - G||_F`` (``L`` lower triangular): each entry summed in
    double-double from exact products, with the bound of :func:`residual_dd` on its rounding."""
    d = G.shape[0]
    t2 = 0.0
    for i in range(d):
        for j in range(d):
            h, l = -G[i, j], 0.0
            size = abs(G[i, j])
            for k in range(min(i, j) + 1):
                p, e = two_prod(L[i, k], L[j, k])
                h, l = dd_add(h, l, p)
                h, l = dd_add(h, l, e)
                size += abs(p) + abs(e)
            t = abs(h) + abs(l) + 8.0 * (d + 2) * UNIT * UNIT * size
            t2 += t * t
    return math.sqrt(t2) * (1.0 + 4.0 * d * UNIT)


@jit
def scale_dd(hi, lo, s):
    """``(hi + lo) s`` in double-double, in place; returns a bound on its rounding in ∞-norm
    (``G_ik lo_k``-like terms: ``2 u |lo s|`` plus ``4 u^2 |hi s|``)."""
    err = 0.0
    for i in range(hi.shape[0]):
        p, e = two_prod(hi[i], s)
        q = lo[i] * s
        h, l = two_sum(p, e + q)
        err = max(err, 2.0 * UNIT * abs(q) + 4.0 * UNIT * UNIT * abs(p) + UNIT * abs(e + q))
        hi[i] = h
        lo[i] = l
    return err


@jit
def _kkt_residual(G2, shift, S, sg, boundary, vh, vl, B, xh, xl, rh, rl):
    """``r = w - K x`` of the system :func:`certify_quadratic_l1_ball` solves, in
    double-double with every product exact; returns the bound of :func:`residual_dd`."""
    m = S.shape[0]
    d2 = m + (1 if boundary else 0)
    err2 = 0.0
    for a in range(d2):
        if a < m:
            i = S[a]
            h, l = vh[i], vl[i]
            size = abs(vh[i]) + abs(vl[i])
            for b in range(m):
                p, e = two_prod(G2[i, S[b]], xh[b])
                h, l = dd_add(h, l, -p)
                h, l = dd_add(h, l, -e)
                q, f = two_prod(G2[i, S[b]], xl[b])
                h, l = dd_add(h, l, -q)
                h, l = dd_add(h, l, -f)
                size += abs(G2[i, S[b]]) * (abs(xh[b]) + abs(xl[b]))
            p, e = two_prod(shift, xh[a])
            h, l = dd_add(h, l, -p)
            h, l = dd_add(h, l, -e)
            q, f = two_prod(shift, xl[a])
            h, l = dd_add(h, l, -q)
            h, l = dd_add(h, l, -f)
            size += abs(shift) * (abs(xh[a]) + abs(xl[a]))
            if boundary:  # + lambda s_a (s_a = ±1: exact)
                h, l = dd_add(h, l, -sg[a] * xh[m])
                h, l = dd_add(h, l, -sg[a] * xl[m])
                size += abs(xh[m]) + abs(xl[m])
        else:  # B - s'x
            h, l = B, 0.0
            size = abs(B)
            for b in range(m):
                h, l = dd_add(h, l, -sg[b] * xh[b])
                h, l = dd_add(h, l, -sg[b] * xl[b])
                size += abs(xh[b]) + abs(xl[b])
        rh[a] = h
        rl[a] = l
        ei = 8.0 * (4 * d2 + 8) * UNIT * UNIT * size
        err2 += ei * ei
    return math.sqrt(err2)


@jit
def certify_quadratic_l1_ball(G2, shift, vh, vl, theta0, B, iters, hi, lo):
    """Refine and certify the minimiser of ``θ'(G2 + shift I)θ / 2 - v'θ`` on ``||θ||_1 <= B``
    from an approximate minimiser ``theta0`` (exact zeros off its support on the boundary
    of the ball); returns a bound
    on ``||(hi + lo) - θ*||_2`` for the exact minimiser ``θ*``, or inf when none is certified.

    With ``S`` the support of ``theta0`` and ``s`` its signs, ``θ*`` solves, when the
    constraint is active, the KKT system ``H_SS θ_S + λ s = v_S``, ``s'θ_S = B`` (else
    ``H θ = v``), where ``H = G2 + shift I`` is never rounded (every residual product is
    exact, :func:`two_prod`).  The system is solved in double-double by refinement and its
    solution ``x`` certified (:func:`inverse_norm_bound` of the float matrix ``K̃``, whose
    diagonal differs from ``K``'s by at most ``u |K̃_aa|``: ``||K^{-1}|| <= β / (1 - β u
    max|K̃_aa|)``).  The exact solution is the constrained minimiser (KKT conditions suffice
    for a convex problem) when the certified intervals keep their signs: ``s_a θ_a > c``,
    ``λ > c``, and for ``j`` off ``S``, ``|(H θ - v)_j|`` plus its error stays below
    ``λ - c``; in the interior, ``||θ||_1 + sqrt(d) c < B``.  ``hi + lo`` is ``θ`` with
    exact zeros off ``S``.
    """
    d = vh.shape[0]
    m = 0
    l1 = 0.0
    for i in range(d):
        if theta0[i] != 0.0:
            m += 1
            l1 += abs(theta0[i])
    boundary = l1 >= B * (1.0 - 1e-9)
    if not boundary:  # the interior: the unconstrained minimiser, every coordinate
        m = d
    S = np.empty(m, dtype=np.int64)
    k = 0
    for i in range(d):
        if theta0[i] != 0.0 or not boundary:
            S[k] = i
            k += 1
    if boundary and m == 0:
        return np.inf
    sg = np.empty(m)
    for a in range(m):
        sg[a] = 1.0 if theta0[S[a]] > 0 else -1.0
    d2 = m + (1 if boundary else 0)
    K = np.zeros((d2, d2))
    for a in range(m):
        for b in range(m):
            K[a, b] = G2[S[a], S[b]]
        K[a, a] += shift
        if boundary:
            K[a, m] = sg[a]
            K[m, a] = sg[a]
    M = np.linalg.inv(K)
    xh = np.zeros(d2)
    xl = np.zeros(d2)
    for a in range(m):
        xh[a] = theta0[S[a]]
    if boundary:  # lambda from the first row
        t = vh[S[0]] - shift * theta0[S[0]]
        for b in range(m):
            t -= G2[S[0], S[b]] * theta0[S[b]]
        xh[m] = t * sg[0]
    rh = np.empty(d2)
    rl = np.empty(d2)
    for _ in range(iters):
        _kkt_residual(G2, shift, S, sg, boundary, vh, vl, B, xh, xl, rh, rl)
        for a in range(d2):
            t = 0.0
            for b in range(d2):
                t += M[a, b] * (rh[b] + rl[b])
            h, l = dd_add(xh[a], xl[a], t)
            xh[a] = h
            xl[a] = l
    err = _kkt_residual(G2, shift, S, sg, boundary, vh, vl, B, xh, xl, rh, rl)
    r2 = 0.0
    for a in range(d2):
        t = abs(rh[a]) + abs(rl[a])
        r2 += t * t
    beta = inverse_norm_bound(K, M)
    kmax = 0.0
    for a in range(d2):
        kmax = max(kmax, abs(K[a, a]))
    shrink = 1.0 - beta * 2.0 * UNIT * kmax
    if not shrink > 0.0:
        return np.inf
    cert = beta / shrink * (math.sqrt(r2) * (1.0 + 4.0 * d2 * UNIT) + err)
    cert *= 1.0 + 8.0 * UNIT
    # the exact solution must satisfy the KKT conditions of the constrained problem
    if boundary:
        for a in range(m):
            if not sg[a] * (xh[a] + xl[a]) > 2.0 * cert:
                return np.inf
        lam = xh[m] + xl[m]
        if not lam > 2.0 * cert:
            return np.inf
        on = np.zeros(d, dtype=np.bool_)
        for a in range(m):
            on[S[a]] = True
        for j in range(d):
            if on[j]:
                continue
            g = -vh[j] - vl[j]
            size = abs(vh[j]) + abs(vl[j])
            row2 = 0.0
            for b in range(m):
                g += G2[j, S[b]] * (xh[b] + xl[b])
                size += abs(G2[j, S[b]]) * (abs(xh[b]) + abs(xl[b]))
                row2 += G2[j, S[b]] ** 2
            slack = abs(g) + 4.0 * (m + 2) * UNIT * size + math.sqrt(row2) * cert
            if not slack < lam - 2.0 * cert:
                return np.inf
    else:
        total = 0.0
        for a in range(m):
            total += abs(xh[a]) + abs(xl[a])
        if not total * (1.0 + 4.0 * d * UNIT) + math.sqrt(d) * cert < B:
            return np.inf
    for i in range(d):
        hi[i] = 0.0
        lo[i] = 0.0
    for a in range(m):
        hi[S[a]] = xh[a]
        lo[S[a]] = xl[a]
    return cert


@jit
def chol_solve_certificate(L, x, u, inv_norm_L):
    """A bound on ``||x - (L L')^{-1} u||_2`` for a computed ``x`` (``L`` lower triangular):
    the residual ``u - L (L' x)`` in double-double (exact products; each stage's rounding
    bounded as in :func:`residual_dd`) times ``||(L L')^{-1}||_2 <= inv_norm_L^2``."""
    d = u.shape[0]
    yh = np.empty(d)
    yl = np.empty(d)
    err1 = 0.0
    for i in range(d):  # y = L' x
        h, l = 0.0, 0.0
        size = 0.0
        for k in range(i, d):
            p, e = two_prod(L[k, i], x[k])
            h, l = dd_add(h, l, p)
            h, l = dd_add(h, l, e)
            size += abs(p) + abs(e)
        yh[i] = h
        yl[i] = l
        err1 = max(err1, 8.0 * (d + 2) * UNIT * UNIT * size)
    r2 = 0.0
    err2 = 0.0
    lnorm = 0.0
    for i in range(d):  # r = u - L y
        h, l = u[i], 0.0
        size = abs(u[i])
        row = 0.0
        for k in range(i + 1):
            p, e = two_prod(L[i, k], yh[k])
            h, l = dd_add(h, l, -p)
            h, l = dd_add(h, l, -e)
            q = L[i, k] * yl[k]
            h, l = dd_add(h, l, -q)
            size += abs(L[i, k]) * (abs(yh[k]) + abs(yl[k]))
            row += abs(L[i, k])
        t = abs(h) + abs(l)
        r2 += t * t
        ei = 8.0 * (2 * d + 4) * UNIT * UNIT * size + 2.0 * UNIT * size
        err2 += ei * ei
        lnorm = max(lnorm, row)
    resid = math.sqrt(r2) * (1.0 + 4.0 * d * UNIT) + math.sqrt(err2) + lnorm * math.sqrt(d) * err1
    return inv_norm_L * inv_norm_L * resid


@jit
def chol_solve_dd(L, LT, Linv, LinvT, inv_norm_L, u, hi, lo, iters):
    """``x = (L L')^{-1} u`` (``L`` lower triangular, ``LT`` its transpose, ``Linv`` and
    ``LinvT`` approximate inverses of both, ``inv_norm_L >= ||L^{-1}||_2``) in double-double
    into ``hi + lo``; returns a bound on ``||(hi + lo) - (L L')^{-1} u||_2``.

    Two triangular stages, each refined (:func:`refine_solve`) and certified
    (:func:`solve_certificate`): ``y = L^{-1} u`` within ``e_1``, then ``x = L'^{-1} y``
    with ``e_1`` as the right-hand side's error (``||L'^{-1}||_2 = ||L^{-1}||_2``)."""
    d = u.shape[0]
    zero = np.zeros(d)
    yh = np.empty(d)
    yl = np.zeros(d)
    for i in range(d):
        t = 0.0
        for k in range(d):
            t += Linv[i, k] * u[k]
        yh[i] = t
    refine_solve(L, Linv, u, zero, yh, yl, iters)
    e1 = solve_certificate(L, inv_norm_L, u, zero, yh, yl, 0.0)
    for i in range(d):
        t = 0.0
        for k in range(d):
            t += LinvT[i, k] * yh[k]
        hi[i] = t
        lo[i] = 0.0
    refine_solve(LT, LinvT, yh, yl, hi, lo, iters)
    return solve_certificate(LT, inv_norm_L, yh, yl, hi, lo, e1)


@jit
def dd_mul(ah, al, bh, bl):
    """``(ah + al)(bh + bl)`` in double-double (relative error at most ``4 u^2``)."""
    p, e = two_prod(ah, bh)
    e += ah * bl + al * bh
    return two_sum(p, e)


@jit
def dd_add_dd(ah, al, bh, bl):
    """``(ah + al) + (bh + bl)`` in double-double (error at most ``4 u^2`` of ``|a| + |b|``)."""
    s, e = two_sum(ah, bh)
    e += al + bl
    return two_sum(s, e)


@jit
def dd_div(ah, al, bh, bl):
    """``(ah + al) / (bh + bl)`` in double-double (relative error at most ``8 u^2``)."""
    q1 = ah / bh
    p, e = two_prod(q1, bh)
    r = (((ah - p) - e) + al) - q1 * bl
    return two_sum(q1, r / bh)


def _inverse_factorials(order: int):
    """``1/k!`` for ``k = 0..order`` as double-double pairs (exact rationals, rounded twice)."""
    from fractions import Fraction

    hi, lo = np.empty(order + 1), np.empty(order + 1)
    f = Fraction(1)
    for k in range(order + 1):
        if k:
            f /= k
        hi[k] = float(f)
        lo[k] = float(f - Fraction(hi[k]))
    return hi, lo


#: ``log 2`` as a double-double (``|log 2 - (hi + lo)| < 2^-107``)
_LN2_HI = 0.6931471805599453
_LN2_LO = 2.3190468138462996e-17
_EXP_ORDER = 14
_IF_HI, _IF_LO = _inverse_factorials(_EXP_ORDER)
#: a bound on the relative error of :func:`exp_dd` (derived there; measured below 2^-100)
EXP_DD_REL = 2.0**-90


@jit
def exp_dd(xh, xl):
    """``exp(xh + xl)`` in double-double for ``xh + xl <= 0``, within a relative
    :data:`EXP_DD_REL` (plus ``2^-1074`` absolute where the result is subnormal).

    ``x = k log 2 + r`` with ``k = round(x / log 2)``: ``k log 2`` from exact products with
    the double-double ``log 2`` (within ``1100 * 2^-107``, a relative ``2^-96`` of the result);
    ``exp(r / 16)`` (``|r / 16| <= 0.022``) by its Taylor polynomial of order 14 (remainder
    below ``10^-37``) in Horner form, 14 double-double products and sums, each within
    ``8 u^2`` relative (the partial sums lie in [0.97, 1.03]): ``2^-96``; four squarings
    double the relative error each and add ``4 u^2``: ``16 (2^-96 + 2^-96) + 2^-100 < 2^-90``;
    the product with ``2^k`` is exact."""
    if xh < -745.0:
        return 0.0, 0.0
    k = math.floor(xh / _LN2_HI + 0.5)
    p, e = two_prod(k, _LN2_HI)
    q, f = two_prod(k, _LN2_LO)
    rh, rl = two_sum(xh, -p)
    rl += ((xl - e) - q) - f
    rh, rl = two_sum(rh, rl)
    sh = rh * 0.0625
    sl = rl * 0.0625
    ph, pl = _IF_HI[_EXP_ORDER], _IF_LO[_EXP_ORDER]
    for j in range(_EXP_ORDER - 1, -1, -1):
        ph, pl = dd_mul(ph, pl, sh, sl)
        ph, pl = dd_add_dd(ph, pl, _IF_HI[j], _IF_LO[j])
    for _ in range(4):
        ph, pl = dd_mul(ph, pl, ph, pl)
    kk = int(k)
    return math.ldexp(ph, kk), math.ldexp(pl, kk)

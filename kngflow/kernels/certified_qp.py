"""A certified minimiser of a convex quadratic over the ℓ1 ball (:func:`certify_quadratic_l1_ball`):
the KKT system of the face the float64 solution lies on, solved and checked in double-double
(:mod:`kngflow.kernels.dd`), for the hardened objective perturbation of linear regression.
"""

from __future__ import annotations

import math

import numpy as np

from kngflow._jit import jit
from kngflow.kernels.certified import inverse_norm_bound
from kngflow.kernels.dd import UNIT, dd_add, two_prod

__all__ = ["certify_quadratic_l1_ball"]


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

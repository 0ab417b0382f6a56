r"""Certified linear solves in double-double: a refined solve and an a-posteriori bound on its error.

A hardened release (:mod:`kngflow.mechanisms.hardening`) is as private as the release of
exact arithmetic when its rounding is below a public bound ``η``.  For a release that
solves a linear system with the data (``G θ = c + u`` for linear-regression KNG and the
exponential mechanism), a plain float64 solve errs by about ``cond(G) u |θ|`` with
``u = 2^-53``: more than a grid that follows the statistics' spread at large ``n`` allows.
Here the solution is carried as an unevaluated sum ``hi + lo`` of two doubles
(double-double), refined with residuals computed by error-free transformations, and its
error certified a posteriori:

* the error-free transformations of :mod:`kngflow.kernels.dd` (``two_sum``, ``two_prod``);
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
  :func:`certified_solve` refines, certifies and scales in one call;
* :func:`gram_residual_norm` (``||L L^T - G||_F`` of a Cholesky factor) and
  :func:`chol_solve_certificate` / :func:`chol_solve_dd`, the same for a solve through a
  Cholesky factor.

Everything is compiled once (``cache=True``) with one signature per function.
"""

from __future__ import annotations

import math

import numpy as np

from kngflow._jit import jit
from kngflow.kernels.dd import UNIT, dd_add, scale_dd, two_prod

__all__ = ["residual_dd", "refine_solve", "inverse_norm_bound", "solve_certificate", "certified_solve",
           "gram_residual_norm", "chol_solve_certificate", "chol_solve_dd"]


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

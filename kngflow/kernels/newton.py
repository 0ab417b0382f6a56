"""Newton's method for ``grad L(theta) = u`` with ``L`` smooth and strictly convex, on a
Cholesky factor of the Hessian.

The gradient map (:mod:`kngflow.kernels.gradient_map`) solves this equation once per
proposal, and the surrogate map (:mod:`kngflow.kernels.surrogate_map`) once per call for
its surrogate's minimiser (``u = 0``).  The solve takes the problem's jitted
``gradient(theta, args, g)`` and ``hessian(theta, args, H)`` as arguments, so it runs
inside kernels that receive them as first-class functions (:func:`~kngflow._jit.first_class`).

Newton's method: the step ``-H^-1 r``, ``r = grad L(theta) - u``, through a Cholesky factor
of ``H``; the Hessian is kept between iterations (a chord step, one gradient per
iteration) while the residual's ℓ2 norm contracts at least fourfold, and recomputed
otherwise; a step that does not decrease ``||r||_2`` (Armijo, on the merit function
``||r||^2 / 2``, for which the Newton step is a descent direction) is first retried with a
fresh Hessian, then halved.  Converged when a step is below ``XTOL (1 + ||theta||_inf)``
in ℓ∞ (``XTOL = 1e-10``: far below the target's spread at every ``n``), or when the
residual can no longer be decreased and the step is below ``1e-7 (1 + ||theta||_inf)``
(rounding of the summed gradient).  The root is unique (strict convexity), so a
converged solve does not depend on its start (but whether it converges may).  The Hessian at the root gives
``log det H`` and the next solve's first factor.


:func:`cholesky_logdet` factors a symmetric ``H`` and returns ``log det H`` (``nan`` where
``H`` is not numerically positive definite): the gradient map's acceptance ratio holds
``det H`` at the proposal, and the factor is the next Newton step's.
"""

from __future__ import annotations

import math

from kngflow._jit import jit

__all__ = ["cholesky_logdet", "forward_solve", "XTOL", "MAX_ITER"]

#: Newton's step tolerance, relative to ``1 + ||theta||_inf``
XTOL = 1e-10
#: Newton iterations per solve before it counts as failed
MAX_ITER = 60
#: Armijo constant of the backtracking on ``||r||_2``
_ARMIJO = 1e-4


@jit
def cholesky_logdet(H, L):
    """Lower Cholesky factor of the symmetric ``H`` into ``L``; returns ``log det H``, or
    ``nan`` when ``H`` is not (numerically) positive definite or not finite."""
    d = H.shape[0]
    logdet = 0.0
    for j in range(d):
        s = H[j, j]
        for k in range(j):
            s -= L[j, k] * L[j, k]
        if not (s > 0.0 and math.isfinite(s)):
            return math.nan
        ljj = math.sqrt(s)
        L[j, j] = ljj
        logdet += 2.0 * math.log(ljj)
        for i in range(j + 1, d):
            t = H[i, j]
            for k in range(j):
                t -= L[i, k] * L[j, k]
            L[i, j] = t / ljj
        for i in range(j):
            L[i, j] = 0.0
    return logdet


@jit
def forward_solve(L, b, out):
    """``out = L^-1 b`` (``L`` lower triangular), by forward substitution."""
    for i in range(b.shape[0]):
        s = b[i]
        for k in range(i):
            s -= L[i, k] * out[k]
        out[i] = s / L[i, i]


@jit
def _chol_solve(L, r, out):
    """``out = -(L L')^-1 r``."""
    d = r.shape[0]
    forward_solve(L, r, out)
    for i in range(d - 1, -1, -1):
        s = out[i]
        for k in range(i + 1, d):
            s -= L[k, i] * out[k]
        out[i] = s / L[i, i]
    for i in range(d):
        out[i] = -out[i]


@jit
def _residual(g, u, r):
    """``r = g - u``; returns ``||r||_2`` (``inf`` if not finite)."""
    s = 0.0
    for i in range(g.shape[0]):
        r[i] = g[i] - u[i]
        s += r[i] * r[i]
    return math.sqrt(s) if math.isfinite(s) else math.inf


@jit
def _inf_norm(x):
    s = 0.0
    for i in range(x.shape[0]):
        s = max(s, abs(x[i]))
    return s


@jit
def _solve(gradient, hessian, args, u, x, L, H, g, r, step, xn, rn_vec, max_iter, center, reach):
    """Solve ``gradient(x) = u`` in place from ``x``, ``L`` the Cholesky factor of the Hessian
    at ``x``.  On success returns ``log det H`` at the root (``x``), with ``L`` its factor;
    on failure returns ``nan`` (``x`` and ``L`` are then scratch).  The solve fails as soon
    as an iterate is farther than ``reach`` from ``center`` in ℓ1 (``inf``: never)."""
    d = x.shape[0]
    gradient(x, args, g)
    rn = _residual(g, u, r)
    if not math.isfinite(rn):
        return math.nan
    fresh = True  # L is the Hessian at x
    converged = False
    for _ in range(max_iter):
        if rn == 0.0:
            converged = True
            break
        _chol_solve(L, r, step)
        size = _inf_norm(step)
        scale = 1.0 + _inf_norm(x)
        if not math.isfinite(size):
            return math.nan
        if size <= XTOL * scale:
            for i in range(d):
                x[i] += step[i]
            converged = True
            break
        t = 1.0
        moved = False
        while True:
            for i in range(d):
                xn[i] = x[i] + t * step[i]
            gradient(xn, args, g)
            rn_new = _residual(g, u, rn_vec)
            if rn_new <= (1.0 - _ARMIJO * t) * rn:
                moved = True
                break
            if not fresh:  # a chord step from a stale Hessian: refresh it and retry
                hessian(x, args, H)
                if math.isnan(cholesky_logdet(H, L)):
                    return math.nan
                fresh = True
                _chol_solve(L, r, step)
                size = _inf_norm(step)
                if not math.isfinite(size):
                    return math.nan
                if size <= XTOL * scale:
                    for i in range(d):
                        x[i] += step[i]
                    moved = False
                    break
                t = 1.0
                continue
            t *= 0.5
            if t < 1e-10:
                break
        if not moved:
            if size <= 1e-7 * scale:  # converged on the refreshed step, or the residual
                converged = True  # is at the rounding of the summed gradient
                break
            return math.nan
        contracted = rn_new <= 0.25 * rn
        far = 0.0
        for i in range(d):
            x[i] = xn[i]
            r[i] = rn_vec[i]
            far += abs(x[i] - center[i])
        if far > reach:
            return math.nan
        rn = rn_new
        if contracted:
            fresh = False  # keep the factor: a chord step next
        else:
            hessian(x, args, H)
            if math.isnan(cholesky_logdet(H, L)):
                return math.nan
            fresh = True
    if not converged:
        return math.nan
    for i in range(d):
        if not math.isfinite(x[i]):
            return math.nan
    hessian(x, args, H)
    return cholesky_logdet(H, L)

"""Small jitted convex solvers used by the mechanisms (no randomness)."""

from __future__ import annotations

import math

import numpy as np

from kngflow._jit import jit

__all__ = ["project_l1_ball", "quadratic_l1_ball"]


@jit
def project_l1_ball(v, B, out):
    """Euclidean projection of ``v`` onto ``{||x||_1 <= B}`` (Duchi et al., 2008)."""
    d = v.shape[0]
    s = 0.0
    for i in range(d):
        s += abs(v[i])
    if s <= B:
        for i in range(d):
            out[i] = v[i]
        return
    u = np.sort(np.abs(v))[::-1]
    css = 0.0
    tau = 0.0
    for k in range(d):
        css += u[k]
        t = (css - B) / (k + 1)
        if u[k] - t > 0.0:
            tau = t
    for i in range(d):
        a = abs(v[i]) - tau
        out[i] = math.copysign(a, v[i]) if a > 0.0 else 0.0


@jit
def quadratic_l1_ball(H, h, B, tol, max_iter, out):
    """Minimise ``x'H x / 2 - h'x`` over ``{||x||_1 <= B}`` for positive-semidefinite ``H``.

    Accelerated projected gradient (FISTA with adaptive restart) with step
    ``1 / lambda_max(H)``, started at the unconstrained minimiser's projection when
    ``H`` is well conditioned (condition number <= 1e8) and at 0 otherwise (a singular
    ``H`` has no unique unconstrained minimiser).  Stops when an iteration moves less
    than ``tol * max(1, ||x||)``; returns the number of iterations.
    """
    d = h.shape[0]
    evals = np.linalg.eigvalsh(H)
    lmax = evals[-1]
    step = 1.0 / lmax if lmax > 0.0 else 1.0  # H = 0: a linear objective, any step works
    x = np.empty(d)
    if evals[0] > 1e-8 * lmax:
        project_l1_ball(np.linalg.solve(H, h), B, x)
    else:
        x[:] = 0.0
    y = x.copy()
    xn = np.empty(d)
    g = np.empty(d)
    tk = 1.0
    it = 0
    for it in range(1, max_iter + 1):
        for i in range(d):
            s = -h[i]
            for k in range(d):
                s += H[i, k] * y[k]
            g[i] = y[i] - step * s
        project_l1_ball(g, B, xn)
        tn = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * tk * tk))
        move = 0.0
        nx = 0.0
        restart = 0.0
        for i in range(d):
            move += (xn[i] - x[i]) ** 2
            nx += xn[i] * xn[i]
            restart += (y[i] - xn[i]) * (xn[i] - x[i])
        if restart > 0.0:
            tn = 1.0
            for i in range(d):
                y[i] = xn[i]
        else:
            for i in range(d):
                y[i] = xn[i] + (tk - 1.0) / tn * (xn[i] - x[i])
        for i in range(d):
            x[i] = xn[i]
        tk = tn
        if math.sqrt(move) <= tol * max(1.0, math.sqrt(nx)):
            break
    for i in range(d):
        out[i] = x[i]
    return it

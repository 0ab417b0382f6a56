"""The Huber hinge, its derivatives and sums over a data set, the hinge's subgradient, the
regularised minimiser, and the constants the mechanisms are calibrated with.

With the margin ``z = y x'w`` the Huber hinge of smoothing ``h`` in ``(0, 1)`` is
``l_h(z) = 0`` (``z > 1 + h``), ``(1 + h - z)^2 / (4 h)`` (``|1 - z| <= h``), ``1 - z``
(``z < 1 - h``) (:mod:`kngflow.models.svm.problem`); ``-1 <= l_h' <= 0`` and
``0 <= l_h'' <= 1 / (2 h)``.  The sums here are in the sum scale
``sum_i l_h(y_i x_i'w) + (ridge / 2) ||w||^2``, ``ridge = n reg``.

Constants (derived here, data independent)
------------------------------------------
With ``R_K = sup{||x||_K : ||x||_D <= r}`` over the record domain (:mod:`kngflow.problems.domains`):

* One record's gradient ``l_h'(z) y x`` has ℓ2 norm at most ``|l_h'| ||x||_2 <= R_2``:
  ``L = R_2`` (:func:`lipschitz`; 1 = :data:`LIPSCHITZ` for the unit ball, as CMS 2011 assume).
* One record's Hessian ``l_h''(z) x x'`` has eigenvalues in ``[0, ||x||^2 / (2 h)]``, so
  ``c = R_2^2 / (2 h)`` (:func:`curvature`; ``1 / (2 h)`` for the unit ball) bounds them:
  Awan & Slavković's ``lambda`` (CMS's ``c`` is that of the rescaled records
  ``x / R_2``, ``1 / (2 h)``).  ``J`` is ``(c + reg)``-smooth.
* Gradient sensitivity in a norm ``K``: two records' gradient terms differ by
  ``||l_h'(z) y x - l_h'(z') y' x'||_K <= sup ||x||_K + sup ||x'||_K = 2 R_K``
  (:func:`gradient_sensitivity`) at every ``w``: for the unit ball ``Delta_2 = 2``,
  ``Delta_inf = 2``, ``Delta_1 = 2 sqrt(d)``.  The bound is attained, so it is the
  supremum: at ``w = 0`` every margin is ``0 < 1 - h`` when ``h < 1``, ``l_h' = -1``, and
  ``x, y = 1`` against ``x' = -x, y' = 1`` moves the gradient by ``2 x``, with ``x`` the
  point of the ball attaining ``R_K`` (``e_1`` for ℓ2 and ℓ∞ on the unit ball;
  ``(1, ..., 1)/sqrt(d)`` gives ``2 sqrt(d)`` in ℓ1; the corners of a box).  The ridge term
  ``n reg w`` is the same on adjacent data sets (``n`` is public), so it adds nothing.
* The same bound holds for the hinge's subgradient ``-1{z < 1} y x`` (KNG on the hinge).

The loops over records are those of every loss of a linear score
(:mod:`kngflow.problems.linear_terms`), so each sum here performs the operations of its
written-out loop in the same order.
"""

from __future__ import annotations

import numpy as np

from kngflow._jit import jit
from kngflow.kernels.dd import UNIT, dd_add, dd_div, two_sum
from kngflow.models.svm.data import UNIT_BALL
from kngflow.problems.domains import RecordDomain
from kngflow.problems.linear_terms import (add_outer_lower, add_row_dd, largest, mirror_lower, row_dot, row_dot_dd,
                                           start_dd_sum, zero_matrix)

__all__ = ["LIPSCHITZ", "lipschitz", "curvature", "gradient_sensitivity", "covariate_radius", "huber_loss",
           "huber_derivative", "huber_loss_sum", "huber_gradient", "huber_gradient_dd", "huber_hessian",
           "hinge_gradient", "regularised_minimiser"]

#: ``L`` over the unit ball: one record's gradient ``l_h'(z) y x`` has ℓ2 norm at most ``|l_h'| ||x||_2 <= 1``
LIPSCHITZ = 1.0


def curvature(h: float, d: int = 1, domain: RecordDomain = UNIT_BALL) -> float:
    """``c = R_2^2 / (2 h)``: the largest eigenvalue of one record's Hessian ``l_h''(z) x x'``
    (``l_h'' <= 1/(2h)``, ``||x||_2 <= R_2`` over the record ``domain`` in ``R^d``);
    ``1 / (2 h)`` for the unit ball (CMS 2011's ``c``), Awan & Slavković's ``lambda``."""
    if domain == UNIT_BALL:
        return 1.0 / (2.0 * h)
    return domain.squared_l2_reach(d) / (2.0 * h)


def lipschitz(d: int, domain: RecordDomain = UNIT_BALL) -> float:
    """``L = R_2 = sup ||x||_2`` over the record ``domain`` (:data:`LIPSCHITZ` = 1 for the unit ball)."""
    return LIPSCHITZ if domain == UNIT_BALL else domain.reach("l2", d)


def covariate_radius(norm: str, d: int, domain: RecordDomain = UNIT_BALL) -> float:
    """``R_K = sup{||x||_K : x in the domain}``: unit ℓ2 ball 1 (ℓ2, ℓ∞), ``sqrt(d)`` (ℓ1)."""
    if norm not in ("l1", "l2", "linf"):
        raise KeyError(norm)
    return domain.reach(norm, d)


def gradient_sensitivity(norm: str, d: int, domain: RecordDomain = UNIT_BALL) -> float:
    """``Delta_K = 2 R_K``: unit ball 2 (ℓ2, ℓ∞), ``2 sqrt(d)`` (ℓ1); attained (module docstring)."""
    return 2.0 * covariate_radius(norm, d, domain)


@jit
def huber_loss(z, h):
    """``l_h(z)`` (scalar)."""
    if z > 1.0 + h:
        return 0.0
    if z < 1.0 - h:
        return 1.0 - z
    t = 1.0 + h - z
    return t * t / (4.0 * h)


@jit
def huber_derivative(z, h):
    """``(l_h'(z), l_h''(z))`` (scalar; ``l_h''`` taken as 1/(2h) on the closed band ``|1 - z| <= h``)."""
    if z > 1.0 + h:
        return 0.0, 0.0
    if z < 1.0 - h:
        return -1.0, 0.0
    return -(1.0 + h - z) / (2.0 * h), 1.0 / (2.0 * h)


@jit
def huber_loss_sum(theta, args):
    """``sum_i l_h(y_i x_i'theta) + ridge/2 ||theta||^2``; ``args = (X, y, h, ridge)``, ``O(n d)``."""
    X, y, h, ridge = args
    s = 0.0
    for i in range(X.shape[0]):
        s += huber_loss(y[i] * row_dot(X, i, theta), h)
    q = 0.0
    d = X.shape[1]
    for j in range(d):
        q += theta[j] * theta[j]
    return s + 0.5 * ridge * q


@jit
def huber_gradient(theta, args, g):
    """``g = sum_i l_h'(y_i x_i'theta) y_i x_i + ridge theta``; ``args = (X, y, h, ridge)``, ``O(n d)``."""
    X, y, h, ridge = args
    n, d = X.shape
    for j in range(d):
        g[j] = ridge * theta[j]
    for i in range(n):
        w = huber_derivative(y[i] * row_dot(X, i, theta), h)[0] * y[i]
        if w != 0.0:
            for j in range(d):
                g[j] += w * X[i, j]


@jit
def huber_gradient_dd(hi, lo, X, y, h, gh, gl):
    """``g = sum_i l_h'(y_i x_i'w) y_i x_i`` at ``w = hi + lo`` in double-double into ``gh + gl``
    (no ridge); returns a bound on ``max_j |g_computed_j - g_exact_j|``.

    Per record: ``t = x_i'w`` from exact products, within ``δt = 2 u sum_j |x_ij lo_j| +
    8 (m + 2) u^2 sum_j |x_ij| (|hi_j| + |lo_j|)`` (as the logistic gradient's,
    :func:`~kngflow.models.logistic.problem.logistic_gradient_dd`); ``z = y_i t`` exactly
    (``y_i = ±1``).  ``l_h'`` is continuous and ``1/(2h)``-Lipschitz, so the branch taken on
    the computed ``z`` (0, -1, or the band's ``-(1 + h - z) / (2h)``) errs by at most
    ``δt / (2h)`` whichever it is.  In the band ``1 + h`` is formed exactly (two_sum), ``z``
    is subtracted in double-double (within ``16 u^2``: every magnitude there is below 4) and
    the quotient by ``2h`` errs by ``8 u^2`` relative (``|l_h'| <= 1``, below 2 computed), so
    ``|Δl'| <= δt / (2h) + 8 u^2 / h + 16 u^2``.  The products and the running sums are
    accounted as in the logistic gradient.
    """
    n, m = X.shape
    err = start_dd_sum(gh, gl)
    oh, ol = two_sum(1.0, h)
    two_h = 2.0 * h
    for i in range(n):
        th, tl, dt = row_dot_dd(X, i, hi, lo)
        dw = dt / two_h + 8.0 * UNIT * UNIT / h + 16.0 * UNIT * UNIT
        # a = 1 + h - z in double-double (z = y_i t); the branch is read off its sign and a - 2h's
        ah, al = dd_add(oh, ol, -y[i] * th)
        ah, al = dd_add(ah, al, -y[i] * tl)
        if ah < 0.0:  # z > 1 + h, l_h' = 0: nothing to add, but a wrong branch errs by dw
            for j in range(m):
                err[j] += abs(X[i, j]) * dw
            continue
        bh, bl = dd_add(ah, al, -two_h)
        if bh > 0.0:  # z < 1 - h
            wh, wl = -1.0, 0.0
        else:
            wh, wl = dd_div(-ah, -al, two_h, 0.0)
        add_row_dd(gh, gl, err, X, i, y[i] * wh, y[i] * wl, dw)
    return largest(err)


@jit
def huber_hessian(theta, args, H):
    """``H = sum_i l_h''(y_i x_i'theta) x_i x_i' + ridge I`` (the Jacobian of :func:`huber_gradient`
    off the kinks ``y_i x_i'theta = 1 +- h``); ``args = (X, y, h, ridge)``, ``O(n d^2)``."""
    X, y, h, ridge = args
    zero_matrix(H)
    for i in range(X.shape[0]):
        c = huber_derivative(y[i] * row_dot(X, i, theta), h)[1]
        if c != 0.0:
            add_outer_lower(H, X, i, c)
    for a in range(X.shape[1]):
        H[a, a] += ridge
    mirror_lower(H)


@jit
def hinge_gradient(theta, args, g):
    """The hinge's subgradient ``g = -sum_i 1{y_i x_i'theta < 1} y_i x_i + ridge theta``;
    ``args = (X, y, ridge)``, ``O(n d)`` (piecewise constant in ``theta`` but for the ridge)."""
    X, y, ridge = args
    n, d = X.shape
    for j in range(d):
        g[j] = ridge * theta[j]
    for i in range(n):
        if y[i] * row_dot(X, i, theta) < 1.0:
            for j in range(d):
                g[j] -= y[i] * X[i, j]


def regularised_minimiser(X, y, h, ridge, V=None, *, tol_abs=0.0, max_iter=200):
    """``argmin sum_i l_h(y_i x_i'w) + ridge/2 ||w||^2 + V'w`` (``ridge > 0``) by Newton's
    method with backtracking from 0: ``(w, iterations, converged)``.

    The objective is ``ridge``-strongly convex with a Lipschitz gradient; its Hessian is
    piecewise constant (it jumps where a margin crosses ``1 +- h``), so this is a semismooth
    Newton method: the full step solves the piecewise-quadratic model exactly and is taken
    whenever it decreases the objective (Armijo), else halved.  Converged when
    ``||grad||_2 <= tol_abs`` or when the Newton decrement is below the objective's
    rounding (``1e-15 (|F| + 1)``); by strong convexity the iterate is then within
    ``||grad||_2 / ridge`` of the exact minimiser.
    """
    n, d = X.shape
    V = np.zeros(d) if V is None else np.asarray(V, dtype=np.float64)
    args = (X, y, float(h), float(ridge))
    w = np.zeros(d)
    g = np.empty(d)
    H = np.empty((d, d))

    def objective(t):
        return huber_loss_sum(t, args) + float(V @ t)

    f = objective(w)
    for it in range(max_iter + 1):
        huber_gradient(w, args, g)
        grad = g + V
        gn = float(np.linalg.norm(grad))
        if gn <= tol_abs:
            return w, it, True
        if it == max_iter:
            break
        huber_hessian(w, args, H)
        step = np.linalg.solve(H, grad)
        dec = float(grad @ step)
        if 0.5 * dec <= 1e-15 * (abs(f) + 1.0):
            return w, it, True
        t = 1.0
        while True:
            new = w - t * step
            fn = objective(new)
            if fn <= f - 1e-4 * t * dec or (fn <= f and t < 1.0):
                break
            if abs(fn - f) <= 1e-14 * (abs(f) + 1.0):  # at rounding level of F: judge by the gradient
                gg = np.empty(d)
                huber_gradient(new, args, gg)
                if np.linalg.norm(gg + V) < gn:
                    break
            t /= 2.0
            if t < 1e-12:
                return w, it, False
        if np.array_equal(new, w):
            return w, it, False
        w, f = new, fn
    return w, max_iter, False


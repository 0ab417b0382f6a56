"""Jitted building blocks of losses of a linear score ``t_i = x_i'theta`` over the rows of a design.

Models whose loss depends on a record only through ``t_i = x_i'theta`` (logistic
regression, the Huber-hinge SVM, Bayesian logistic regression) share the same loops:

* :func:`row_dot`: ``t_i = sum_j X_ij theta_j``, summed left to right in float64;
* :func:`add_outer_lower` and :func:`mirror_lower`: a Hessian ``H = sum_i w_i x_i x_i'``
  built on its lower triangle (``H_ab += (w_i X_ia) X_ib`` for ``b <= a``: half the products
  of the full matrix) and then copied to the upper triangle, so ``H`` is exactly symmetric;
  :func:`zero_matrix` clears it first;
* double-double gradients ``g = sum_i w_i x_i`` at ``theta = hi + lo`` with a bound on
  their rounding error (:func:`start_dd_sum`, :func:`row_dot_dd`, :func:`add_row_dd`,
  :func:`largest`), as :func:`~kngflow.kernels.certified.residual_dd` does for a quadratic.

The error accounting of the double-double pieces, with ``u = 2^-53`` the unit roundoff:

* ``t_i`` from the exact products ``X_ij hi_j = p + e`` (:func:`~kngflow.kernels.dd.two_prod`)
  and the rounded ``X_ij lo_j``, summed in double-double, is within
  ``δt = 2 u sum_j |X_ij lo_j| + 8 (m + 2) u^2 sum_j |X_ij| (|hi_j| + |lo_j|)``
  (:func:`row_dot_dd` returns it with ``t_i``);
* adding ``w x_ij`` (``w = wh + wl`` in double-double, within ``dw`` of the exact weight) to
  the running sum ``S_j``: ``wh X_ij`` is an exact product, ``wl X_ij`` one rounded product
  (``u |wl X_ij|``, counted twice for its use), and each double-double addition errs by at
  most ``2 u^2 |S|``; the exact weight's error contributes ``|X_ij| dw``
  (:func:`add_row_dd` accumulates the sum of these per coordinate);
* the bound on ``max_j |g_computed_j - g_exact_j|`` is the largest accumulated entry
  (:func:`largest`).

Each function performs exactly the floating-point operations of the loop it names, in the
same order, so a kernel built from them computes what the written-out loop computes.
"""

from __future__ import annotations

import numpy as np

from kngflow._jit import jit
from kngflow.kernels.dd import UNIT, dd_add, two_prod

__all__ = ["row_dot", "zero_matrix", "add_outer_lower", "mirror_lower", "start_dd_sum", "row_dot_dd", "add_row_dd",
           "largest"]


@jit
def row_dot(X, i, theta):
    """``x_i'theta = sum_j X[i, j] theta[j]``, summed in order from 0."""
    t = 0.0
    for j in range(X.shape[1]):
        t += X[i, j] * theta[j]
    return t


@jit
def zero_matrix(H):
    """Every entry of the square ``H`` set to 0."""
    m = H.shape[0]
    for a in range(m):
        for b in range(m):
            H[a, b] = 0.0


@jit
def add_outer_lower(H, X, i, w):
    """``H[a, b] += (w X[i, a]) X[i, b]`` for ``b <= a``: ``w x_i x_i'`` on the lower triangle."""
    m = X.shape[1]
    for a in range(m):
        wa = w * X[i, a]
        for b in range(a + 1):
            H[a, b] += wa * X[i, b]


@jit
def mirror_lower(H):
    """``H[b, a] = H[a, b]`` for ``b < a``: the lower triangle copied to the upper one."""
    m = H.shape[0]
    for a in range(m):
        for b in range(a):
            H[b, a] = H[a, b]


@jit
def start_dd_sum(gh, gl):
    """``gh = gl = 0``; returns the per-coordinate error accumulator (zeros)."""
    m = gh.shape[0]
    err = np.zeros(m)
    for j in range(m):
        gh[j] = 0.0
        gl[j] = 0.0
    return err


@jit
def row_dot_dd(X, i, hi, lo):
    """``(th, tl, δt)``: ``x_i'(hi + lo)`` in double-double and the bound ``δt`` on its error
    (module docstring)."""
    m = X.shape[1]
    th, tl = 0.0, 0.0
    small = 0.0
    size = 0.0
    for j in range(m):
        p, e = two_prod(X[i, j], hi[j])
        th, tl = dd_add(th, tl, p)
        th, tl = dd_add(th, tl, e)
        q = X[i, j] * lo[j]
        th, tl = dd_add(th, tl, q)
        small += abs(q)
        size += abs(X[i, j]) * (abs(hi[j]) + abs(lo[j]))
    dt = 2.0 * UNIT * small + 8.0 * (m + 2) * UNIT * UNIT * size
    return th, tl, dt


@jit
def add_row_dd(gh, gl, err, X, i, wh, wl, dw):
    """``gh + gl += (wh + wl) x_i`` in double-double, with its error bound added to ``err``
    (``dw``: the error of the weight; module docstring)."""
    for j in range(X.shape[1]):
        p, e = two_prod(wh, X[i, j])
        r = wl * X[i, j]
        a, b = dd_add(gh[j], gl[j], p)
        a, b = dd_add(a, b, e + r)
        gh[j] = a
        gl[j] = b
        err[j] += abs(X[i, j]) * dw + 2.0 * UNIT * abs(r) + 2.0 * UNIT * UNIT * (2.0 * abs(a) + abs(p))


@jit
def largest(err):
    """``max(0, max_j err[j])``."""
    out = 0.0
    for j in range(err.shape[0]):
        out = max(out, err[j])
    return out

"""Double-double arithmetic: error-free transformations and unevaluated sums of two doubles.

* :func:`two_sum` (Knuth) and :func:`two_prod` (Dekker, with Veltkamp's split) return
  ``s + e = a + b`` and ``p + e = a b`` exactly (barring overflow);
* :func:`dd_add`, :func:`dd_add_dd`, :func:`dd_mul`, :func:`dd_div`: sums, products and
  quotients of double-double values ``hi + lo``; :func:`exp_dd` the exponential
  (relative error below :data:`EXP_DD_REL`);
* :func:`affine_dd` (``c + s L z``) and :func:`scale_dd` (a double-double value times a
  double) for the releases that are snapped from their double-double value.

The certified solves built on them are in :mod:`kngflow.kernels.certified`, the certified
quadratic program over the ℓ1 ball in :mod:`kngflow.kernels.certified_qp`.  Everything is
compiled once (``cache=True``) with one signature per function.
"""

from __future__ import annotations

import math

import numpy as np

from kngflow._jit import jit

__all__ = ["UNIT", "two_sum", "two_prod", "dd_add", "scale_dd", "affine_dd", "dd_mul", "dd_add_dd", "dd_div",
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

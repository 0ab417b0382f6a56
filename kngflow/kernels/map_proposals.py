"""The two laws the map samplers propose from, and their normalising constants.

A gradient-map or surrogate-map proposal is either a point of the map, ``theta(u)`` with
``u`` exact K-norm noise (:func:`_draw_u`, scale ``1/a``: density
``a^d / (d! vol K) exp(-a ||u||_K)``, :func:`_log_knorm_normaliser`), or a draw of the base
measure (:func:`_draw_base`: uniform on the ℓ1 ball ``||theta - center||_1 <= B``, volume
``(2B)^d / d!``, or ``N(center, base_scale^2 I)``; :func:`_log_base_normaliser`).  The
mixture's density ``s pi_0 + (1 - s) q_map`` (``s`` = :data:`BASE_SHARE`) enters the
acceptance ratio, so both constants are needed in closed form.

:func:`_draw_base_dd` draws the same base-measure point together with the low part of the
exact value, for a hardened release that certifies its rounding
(:meth:`~kngflow.mechanisms.generic.GenericKNG.release_gradient_map_hardened`).
"""

from __future__ import annotations

import math

from kngflow._jit import jit
from kngflow.kernels.dd import dd_add, two_prod, two_sum
from kngflow.noise import draw_l1_into, draw_l2_into, draw_linf_into

__all__ = ["BASE_SHARE"]

#: the share of proposals drawn from the base measure (uniform on ``Theta`` or the Gaussian
#: base) by the surrogate map, and by the gradient map of a KNG whose Hessian varies: they
#: bound the target-to-proposal ratio where the map's proposal has little mass (a target
#: much wider than the map's, a saturating or low-rank gradient)
BASE_SHARE = 0.2


@jit
def _draw_u(rng, code, scale, u):
    if code == 0:
        draw_l1_into(rng, scale, u)
    elif code == 1:
        draw_l2_into(rng, scale, u)
    else:
        draw_linf_into(rng, scale, u)


@jit
def _log_knorm_normaliser(code, d, rate):
    """``log`` of ``rate^d / (d! vol(K))``, the normalising constant of ``exp(-rate ||u||_K)`` on ``R^d``."""
    if code == 0:
        logvol = d * math.log(2.0) - math.lgamma(d + 1.0)
    elif code == 1:
        logvol = 0.5 * d * math.log(math.pi) - math.lgamma(0.5 * d + 1.0)
    else:
        logvol = d * math.log(2.0)
    return d * math.log(rate) - math.lgamma(d + 1.0) - logvol


@jit
def _log_base_normaliser(d, B, base_scale):
    """``log`` of the base measure's density constant: ``N(center, base_scale^2 I)``
    (``base_scale > 0``) or uniform on the ℓ1 ball of radius ``B`` (volume ``(2B)^d / d!``)."""
    if base_scale > 0.0:
        return -0.5 * d * math.log(2.0 * math.pi * base_scale * base_scale)
    return math.lgamma(d + 1.0) - d * math.log(2.0 * B)


@jit
def _draw_base(rng, center, B, base_scale, out):
    """One draw of the base measure: uniform on the ℓ1 ball ``||theta - center||_1 <= B``
    (``base_scale <= 0``; normalised exponential spacings give a uniform point of the
    simplex, then fair signs) or ``N(center, base_scale^2 I)``."""
    d = center.shape[0]
    if base_scale > 0.0:
        for i in range(d):
            out[i] = center[i] + base_scale * rng.standard_normal()
        return
    total = 0.0
    for i in range(d):
        out[i] = rng.standard_exponential()
        total += out[i]
    total += rng.standard_exponential()
    for i in range(d):
        v = B * out[i] / total
        out[i] = center[i] + (v if rng.random() < 0.5 else -v)


@jit
def _draw_base_dd(rng, center, B, base_scale, out, lo):
    """:func:`_draw_base` (the same random numbers and the same ``out``), with ``lo`` the
    low part of the exact draw on the uniform base: ``out + lo`` equals
    ``center ± B E_i / T``, ``T = sum_j E_j`` (the exponentials as drawn, the sum exact),
    within ``(8 d + 24) u^2 (|center_i| + B)`` (``u = 2^-53``).  The sum is carried in
    double-double (within ``2 (d + 1) u^2 T``); the plain quotient ``v`` errs by at most
    ``(d + 3) u v``, so its remainder ``B E_i - v T``, computed from exact products
    (``p - q`` exact by Sterbenz's lemma), is at most ``(d + 3) u v T`` and errs by at most
    ``(4 d + 11) u^2 v T``; the low part ``remainder / T`` then errs by at most
    ``(6 d + 17) u^2 v``, and the centre is added exactly (:func:`two_sum`) with one
    rounding of the low parts' sum.  ``lo`` is 0 for the Gaussian base."""
    d = center.shape[0]
    if base_scale > 0.0:
        _draw_base(rng, center, B, base_scale, out)
        for i in range(d):
            lo[i] = 0.0
        return
    total = 0.0
    th = 0.0
    tl = 0.0
    for i in range(d):
        out[i] = rng.standard_exponential()
        total += out[i]
        th, tl = dd_add(th, tl, out[i])
    e = rng.standard_exponential()
    total += e
    th, tl = dd_add(th, tl, e)
    for i in range(d):
        v = B * out[i] / total
        p, pe = two_prod(B, out[i])
        q, qe = two_prod(v, th)
        rest = ((p - q) + (pe - qe)) - v * tl  # B E_i - v T, p - q exact (Sterbenz)
        vl = rest / (th + tl)
        sign = 1.0 if rng.random() < 0.5 else -1.0
        h, hl = two_sum(center[i], sign * v)
        out[i] = h
        lo[i] = hl + sign * vl

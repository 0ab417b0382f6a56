"""Piecewise-exponential draws: the exact one-dimensional conditionals of the Gibbs samplers.

On a segment ``[0, w]`` the density ``exp(-k x)`` has log mass :func:`log_seg_mass` and is
drawn by inversion (:func:`draw_seg`); a convex piecewise-linear energy is a sequence of
such segments (linear regression's KNG and exponential mechanism, quantiles and quantile
regression).  :data:`TARGET_KNG` and :data:`TARGET_EXP` name the two targets the samplers
share: KNG's ``exp(-a ||grad||_K)`` and the exponential mechanism's ``exp(-a loss)``.
"""

from __future__ import annotations

import math

import numpy as np

from kngflow._jit import jit

__all__ = ["log_seg_mass", "draw_seg", "l1_chord", "lattice_accept", "TARGET_KNG", "TARGET_EXP"]

#: KNG's target ``exp(-a ||gradient||_K)``
TARGET_KNG = 0
#: the exponential mechanism's target ``exp(-a loss)``
TARGET_EXP = 1


@jit
def l1_chord(B, l1, tj):
    """Half-width of the chord of ``{||theta||_1 <= B}`` along a coordinate whose value is ``tj``
    (``l1`` the state's ℓ1 norm): ``B - sum_{k != j} |theta_k|``, 0 when negative (rounding).
    A coordinate-Gibbs conditional lives on ``[-L, L]``."""
    L = B - (l1 - abs(tj))
    if L < 0.0:
        L = 0.0
    return L


@jit
def log_seg_mass(k, w):
    """log of ∫_0^w exp(-k x) dx, stable for any sign of k."""
    if w <= 0.0:
        return -np.inf
    kw = k * w
    if abs(kw) < 1e-300:
        return math.log(w)
    if k > 0.0:
        return math.log(-math.expm1(-kw)) - math.log(k)
    return -kw + math.log(-math.expm1(kw)) - math.log(-k)


@jit
def draw_seg(rng, k, w):
    """Draw x in [0, w] with density ∝ exp(-k x) by inversion (always from the heavy end)."""
    u = rng.random()
    if abs(k * w) < 1e-12:
        return u * w
    if k > 0.0:
        x = -math.log1p(-u * (-math.expm1(-k * w))) / k
    else:
        x = w - math.log1p(-u * (-math.expm1(k * w))) / k
    if x < 0.0:
        x = 0.0
    if x > w:
        x = w
    return x


@jit
def lattice_accept(rng, excess):
    """Accept with probability ``exp(-excess)`` (``excess >= 0`` up to rounding): the rejection
    step of the lattice-restricted Gibbs conditionals, where ``excess`` is near 2^-47 of the
    conditional's log-density range.  ``exp(-e) >= 1 - e``, so a uniform below ``1 - e``
    accepts without the exponential."""
    u = rng.random()
    return u < 1.0 - excess or u < math.exp(-excess)

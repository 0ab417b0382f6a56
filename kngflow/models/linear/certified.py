"""Certified numerics of the hardened linear-regression releases: exact sums (TwoSum), the
Gram matrix's certified inverse bound and Cholesky factor, and the snapping's rounding bound
(:mod:`kngflow.mechanisms.hardening`; used by :mod:`kngflow.models.linear.mechanisms`).
"""

from __future__ import annotations

import functools

import numpy as np

from kngflow.kernels.certified import gram_residual_norm, inverse_norm_bound
from kngflow.mechanisms.hardening import UNIT_ROUNDOFF, Hardening

__all__ = ["ETA_BITS", "NO_FACTOR", "REFINE_STEPS", "TV_PER_TRY", "certified_factors", "snap_rounding", "two_sum_arrays"]

#: a hardened release's rounding bound is 2^-ETA_BITS of its grid (δ′ - δ = (1 + e^ε) 2d 2^-44)
ETA_BITS = 44
#: double-double refinement steps of a hardened exact draw
REFINE_STEPS = 3
#: certified total variation per try of the hardened exponential mechanism's Gaussian
TV_PER_TRY = 2.0**-40
#: the Cholesky factor of a Gram matrix that has none (certified total variation inf)
NO_FACTOR = np.zeros((1, 1))


def two_sum_arrays(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(s, e)`` with ``s + e = a + b`` exactly, elementwise (Knuth's TwoSum)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def certified_factors(G: np.ndarray) -> tuple:
    """``(G, G^{-1}, ||G^{-1}||_2 bound, L, tv)`` of a well-conditioned ``G`` for hardened
    exact draws: the computed inverse, the certified bound on the inverse's norm
    (:func:`~kngflow.kernels.certified.inverse_norm_bound`), the Cholesky factor ``L`` and
    ``tv = 1.5 ||G^{-1}||_2 ||L L^T - G||_F`` (:meth:`Exponential._tv_certified`).  Every
    release on a data set asks this of the same ``G``: cached by its bytes."""
    G = np.ascontiguousarray(G, dtype=np.float64)
    return _certified_factors(G.tobytes(), G.shape)


@functools.lru_cache(maxsize=64)
def _certified_factors(buffer: bytes, shape: tuple) -> tuple:
    G = np.frombuffer(buffer).reshape(shape).copy()
    Ginv = np.linalg.inv(G)
    inv_norm = inverse_norm_bound(G, Ginv)
    try:
        chol = np.linalg.cholesky(G)
        tv = 1.5 * inv_norm * gram_residual_norm(chol, G)
    except np.linalg.LinAlgError:
        chol, tv = NO_FACTOR, np.inf
    for arr in (G, Ginv, chol):
        arr.setflags(write=False)
    return G, Ginv, inv_norm, chol, tv


def snap_rounding(h: Hardening, x: np.ndarray) -> float:
    """The rounding of :func:`~kngflow.mechanisms.hardening.snap` on ``x`` (+ a low part):
    ``u Λ + 2 u^2 |x|`` (its module docstring)."""
    return UNIT_ROUNDOFF * h.grid + 2.0 * UNIT_ROUNDOFF**2 * float(np.max(np.abs(x)))

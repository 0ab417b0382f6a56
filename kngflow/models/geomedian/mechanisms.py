"""Geometric-median mechanisms (KNG paper §4.4); sensitivity in :mod:`kngflow.models.geomedian.problem`.

KNG has no tractable exact sampler here: it runs the generic random-walk Metropolis
kernel (:mod:`kngflow.kernels.generic`), ``O(n d)`` per coordinate update.
"""

from __future__ import annotations

import math

import numpy as np

from kngflow._jit import jit
from kngflow.models.geomedian.problem import GeoMedianData, geomedian_gradient, gradient_sensitivity, weiszfeld
from kngflow.mechanisms.generic import GenericKNG, NonPrivateBase

__all__ = ["NonPrivate", "KNG", "check_geomedian_data"]

#: Weiszfeld's relative step tolerance and iteration cap
TOL, MAX_ITER = 1e-12, 10_000


def check_geomedian_data(data) -> GeoMedianData:
    """Validate :class:`GeoMedianData`: a non-empty finite C-contiguous (n, d) float64 array."""
    if not isinstance(data, GeoMedianData):
        raise TypeError(f"data must be a kngflow.models.geomedian.problem.GeoMedianData, got {type(data).__name__}")
    X = data.X
    if not (isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype == np.float64 and X.flags.c_contiguous):
        raise ValueError("data.X must be a C-contiguous 2-D float64 array")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"data.X must not be empty, got shape {X.shape}")
    return data


class NonPrivate(NonPrivateBase):
    """The sample geometric median (Weiszfeld with the Vardi–Zhang step): the non-private baseline."""

    def check_data(self, data):
        return check_geomedian_data(data)

    def estimate(self, data) -> np.ndarray:
        out = np.empty(data.d)
        weiszfeld(data.X, TOL, MAX_ITER, out)
        return out

    def __repr__(self) -> str:
        return "NonPrivate()"


@jit
def geomedian_hessian(theta, args, H):
    """``H = sum_i (I - v_i v_i') / ||x_i - theta||_2``, ``v_i = (x_i - theta)/||x_i - theta||_2``:
    the Jacobian of :func:`geomedian_gradient` (records at ``theta`` skipped) in ``O(n d^2)``;
    positive definite for ``d >= 2`` unless the records are collinear with ``theta``."""
    X = args[0]
    n, d = X.shape
    for a in range(d):
        for b in range(d):
            H[a, b] = 0.0
    v = np.empty(d)
    for i in range(n):
        s = 0.0
        for j in range(d):
            v[j] = X[i, j] - theta[j]
            s += v[j] * v[j]
        if s > 0.0:
            r = math.sqrt(s)
            w = 1.0 / r
            w3 = w / s
            for a in range(d):
                H[a, a] += w
                for b in range(a + 1):
                    H[a, b] -= v[a] * v[b] * w3
    for a in range(d):
        for b in range(a):
            H[b, a] = H[a, b]


class KNG(GenericKNG):
    """KNG for the geometric median, by random-walk Metropolis.

    Density on ``Theta = {||theta||_1 <= bound}`` (uniform base) or with a Gaussian base::

        f(theta) ∝ exp(-eps/(2 Delta) ||sum_i (x_i - theta)/||x_i - theta||_2||_K),

    ``Delta = 2 c_K`` (2 for ℓ2 and ℓ∞, ``2 sqrt(d)`` for ℓ1).  ε-DP by the exponential
    mechanism: the utility ``-||grad l_n||_K`` has sensitivity ``Delta`` for every
    ``theta``, whatever the data.  The chain starts at 0, data independent.

    ``sampler="gradient_map"`` (opt in; the default stays Metropolis) uses the gradient
    map (:mod:`kngflow.kernels.gradient_map`) with :func:`geomedian_hessian`: the loss is
    smooth and strictly convex off the records for ``d >= 2`` (in one dimension its
    Hessian vanishes and no proposal is ever accepted).
    """

    samplers = ("metropolis", "gradient_map")
    gradient = staticmethod(geomedian_gradient)
    hessian = staticmethod(geomedian_hessian)

    def check_data(self, data):
        return check_geomedian_data(data)

    def kernel_args(self, data):
        return (data.X,)

    def sensitivity(self, data) -> float:
        return gradient_sensitivity(self.norm, data.d)

    def parameter_box(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """A box holding ``Theta`` (for exact audits on a grid)."""
        reach = self.bound if self.base == "uniform" else 8.0 * self.base_scale
        return np.full(d, -reach), np.full(d, reach)

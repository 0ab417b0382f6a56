"""Logistic-regression mechanisms; sensitivities in :mod:`kngflow.problems.logistic`.

KNG has no tractable exact sampler here: it runs the generic random-walk Metropolis
kernel (:mod:`kngflow.samplers.generic`), ``O(n m)`` per coordinate update.
"""

from __future__ import annotations

import numpy as np

from ..problems.logistic import LogisticData, gradient_sensitivity, logistic_gradient, logistic_mle
from .generic import GenericKNG, NonPrivateBase

__all__ = ["NonPrivate", "KNG", "check_logistic_data"]


def check_logistic_data(data) -> LogisticData:
    """Validate :class:`LogisticData`: shapes, ``|x| <= 1``, ``y`` in ``{0, 1}``."""
    if not isinstance(data, LogisticData):
        raise TypeError(f"data must be a kngflow.problems.logistic.LogisticData, got {type(data).__name__}")
    X, y = data.X, data.y
    if not (isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype == np.float64 and X.flags.c_contiguous):
        raise ValueError("data.X must be a C-contiguous 2-D float64 array")
    if X.shape[0] == 0:
        raise ValueError("data must hold at least one record")
    if not (isinstance(y, np.ndarray) and y.shape == (X.shape[0],) and y.dtype == np.float64):
        raise ValueError(f"data.y must be a float64 array of length n={X.shape[0]}")
    if not (np.all(np.abs(X) <= 1.0) and np.all((y == 0.0) | (y == 1.0))):
        raise ValueError("data.X must be finite and in [-1, 1], data.y in {0, 1}")
    return data


class NonPrivate(NonPrivateBase):
    """The maximum-likelihood estimate (Newton's method): the non-private baseline."""

    def check_data(self, data):
        return check_logistic_data(data)

    def estimate(self, data) -> np.ndarray:
        return logistic_mle(data)


class KNG(GenericKNG):
    """KNG for logistic regression, by random-walk Metropolis.

    Density on ``Theta = {||beta||_1 <= bound}`` (uniform base; default bound 10, which
    holds Algorithm 3's ``||beta*||_1 = 4``) or with a Gaussian base::

        f(beta) ∝ exp(-eps/(2 Delta_K) ||sum_i x_i (sigma(x_i' beta) - y_i)||_K),

    ``Delta_K = 2 sup{||x||_K : x in [-1, 1]^m}``.  ε-DP by the exponential mechanism:
    the utility ``-||grad l_n||_K`` has sensitivity ``Delta_K`` for every ``beta``.
    The chain starts at 0, data independent.
    """

    samplers = ("metropolis",)
    gradient = staticmethod(logistic_gradient)

    def __init__(self, *, bound=10.0, **kw):
        super().__init__(bound=bound, **kw)

    def check_data(self, data):
        return check_logistic_data(data)

    def kernel_args(self, data):
        return (data.X, data.y)

    def sensitivity(self, data) -> float:
        return gradient_sensitivity(self.norm, data.d)

    def parameter_box(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """A box holding ``Theta`` (for exact audits on a grid)."""
        reach = self.bound if self.base == "uniform" else 8.0 * self.base_scale
        return np.full(d, -reach), np.full(d, reach)

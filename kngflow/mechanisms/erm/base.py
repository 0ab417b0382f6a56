"""The base of the private-ERM mechanisms (:class:`ERMMechanism`: the loss hooks a model
supplies), the default ridge constant and the Lipschitz bound of a Gaussian release."""

from __future__ import annotations

import numpy as np

from kngflow.mechanisms.base import SAMPLER_DIAGNOSTICS, Mechanism, Release, check_positive


#: Default ridge constant ``reg`` (Λ) (:mod:`kngflow.models.logistic.erm` discusses the choice).
DEFAULT_REG = 0.01


def erm_release(theta, steps, sampler="exact") -> Release:
    return Release(np.asarray(theta, dtype=np.float64), {"sampler": sampler, "acceptance": 1.0, "steps": int(steps)})


#: a Gaussian coordinate beyond this many standard deviations from its centre has
#: probability below 1e-890: the Gaussian density is log-Lipschitz within it (``gaussian_lipschitz``)
GAUSS_REACH = 64.0


def gaussian_lipschitz(d: int, sigma: float) -> float:
    """``L`` of ``N(c, sigma^2 I_d)`` against ∞-norm moves within ``GAUSS_REACH sigma`` of ``c``
    (plus a grid cell): ``|grad log f|_1 = sum_j |x_j - c_j| / sigma^2 <= (GAUSS_REACH + 1) d / sigma``.
    Outside that region (probability below 1e-890 for any ``d <= 10^6``) the bound is not
    claimed; its mass is below any δ reported."""
    return (GAUSS_REACH + 1.0) * d / sigma


class ERMMechanism(Mechanism):
    """Shared options (``reg``) and the loss hooks a model provides: the logistic loss
    (:mod:`kngflow.models.logistic.erm`) and the squared loss on sufficient statistics
    (:mod:`kngflow.models.linear.erm`)."""

    diagnostics = SAMPLER_DIAGNOSTICS

    def __init__(self, reg):
        self.reg = check_positive("reg", reg)

    # ---------------------------------------------------------------- loss hooks (a model provides them)
    def check_data(self, data):
        """The validated data."""
        raise NotImplementedError

    def size(self, data) -> tuple[int, int]:
        """``(n, d)``: records and coefficients."""
        raise NotImplementedError

    def lipschitz(self, d: int) -> float:
        """``L``: a bound on one record's loss gradient ``||grad l(theta; z)||_2`` where it is used."""
        raise NotImplementedError

    def smoothness(self, d: int) -> float:
        """A bound on the largest eigenvalue of ``hess J``."""
        raise NotImplementedError

    def smoothness_of(self, data) -> float:
        """The bound of :meth:`smoothness` for this data set (a loss whose curvature depends on
        a property of the data, such as the Huber hinge's smoothing, overrides it)."""
        return self.smoothness(self.size(data)[1])

    def lipschitz_of(self, data) -> float:
        """The bound of :meth:`lipschitz` for this data set (a loss whose bound depends on a
        public property of the data, such as its declared record domain, overrides it)."""
        return self.lipschitz(self.size(data)[1])

    def mean_gradient(self, data, theta: np.ndarray) -> np.ndarray:
        """``(1/n) sum_i grad l(theta; z_i)`` at ``theta`` (d,), or at each row of ``theta`` (k, d)."""
        raise NotImplementedError

    def finish(self, data, theta: np.ndarray) -> np.ndarray:
        """The estimate in the data's units."""
        raise NotImplementedError

    def default_radius(self) -> float:
        """Radius of the ball ``C`` of projected methods (holds the minimiser)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options().items())
        return f"{type(self).__name__}({opts})"

"""Quantile-regression mechanisms (KNG paper §4.5) on ``Theta = {||theta||_1 <= B}``.

Data are :class:`~kngflow.models.quantreg.problem.QuantRegData` (``x`` in ``[-1, 1]^d``,
``y = Y / scale`` in ``[-1, 1]``); estimates are multiplied by ``scale``.  Sensitivities
are derived in :mod:`kngflow.models.quantreg.problem`.  Samplers: exact coordinate Gibbs
(uniform base; :func:`kngflow.models.quantreg.gibbs.qr_gibbs_chains`; a Gibbs update sorts
its breaks, expected ``O(n)``) and the generic random-walk Metropolis chain (any base)
with its energy evaluated on a band of residuals near zero
(:func:`kngflow.models.quantreg.metropolis.qr_metropolis_chains`: ``O(n d)`` only when the band
is rebuilt, else ``O(band d)``).  The policy runs Gibbs for the exponential mechanism and
Metropolis for KNG (see :class:`KNG`).
"""

from __future__ import annotations

import numpy as np

from kngflow.models.quantreg.problem import QuantRegData, gradient_sensitivity, loss_sensitivity, quantreg_lp
from kngflow.kernels.generic import NORM_CODES
from kngflow.models.quantreg.gibbs import TARGET_EXP, TARGET_KNG, qr_gibbs_chains
from kngflow.models.quantreg.gradients import qr_gradient, qr_loss, qr_smooth_gradient, qr_smooth_hessian, smooth_bandwidth
from kngflow.models.quantreg.metropolis import qr_metropolis_chains
from kngflow.mechanisms.draws import DrawInfo
from kngflow.mechanisms.generic import GenericExponential, GenericKNG, NonPrivateBase

__all__ = ["NonPrivate", "KNG", "Exponential", "check_quantreg_data"]


def check_quantreg_data(data) -> QuantRegData:
    """Validate :class:`QuantRegData`: shapes, finiteness, ``|x| <= 1``, ``|y| <= 1``, ``n >= d``."""
    if not isinstance(data, QuantRegData):
        raise TypeError(f"data must be a kngflow.models.quantreg.problem.QuantRegData, got {type(data).__name__}")
    X, y = data.X, data.y
    if not (isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype == np.float64 and X.flags.c_contiguous):
        raise ValueError("data.X must be a C-contiguous 2-D float64 array")
    if not (isinstance(y, np.ndarray) and y.shape == (X.shape[0],) and y.dtype == np.float64):
        raise ValueError(f"data.y must be a float64 array of length n={X.shape[0]}")
    if X.shape[0] < X.shape[1]:
        raise ValueError(f"data.n must be at least d={X.shape[1]}, got n={X.shape[0]}")
    if not (np.all(np.abs(X) <= 1.0) and np.all(np.abs(y) <= 1.0)):
        raise ValueError("data.X and data.y must be finite and in [-1, 1] (scaled units)")
    if not (np.isfinite(data.scale) and data.scale > 0):
        raise ValueError(f"data.scale must be finite and > 0, got {data.scale!r}")
    return data


class NonPrivate(NonPrivateBase):
    """The exact quantile-regression estimate (linear program, HiGHS): non-private baseline."""

    def check_data(self, data):
        return check_quantreg_data(data)

    def estimate(self, data) -> np.ndarray:
        return quantreg_lp(data) * data.scale


class _QuantReg:
    """Shared: data check, kernel arguments, exact coordinate Gibbs of ``_target``."""

    samplers = ("gibbs", "metropolis")
    lattice_gibbs = True

    def available_samplers(self):
        return self.samplers if self.base == "uniform" else ("metropolis",)

    def check_data(self, data):
        return check_quantreg_data(data)

    def kernel_args(self, data):
        return (data.X, data.y, data.tau)

    def output_scale(self, data) -> float:
        return data.scale

    def parameter_box(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """A box holding ``Theta`` (scaled units; for exact audits on a grid)."""
        reach = self.bound if self.base == "uniform" else 8.0 * self.base_scale
        return np.full(d, -reach), np.full(d, reach)

    def draw_metropolis(self, data, epsilon, rng, size, steps=None, lattice=0.0):
        """The generic Metropolis chain, its energy evaluated on a residual band (see
        :func:`kngflow.models.quantreg.metropolis.qr_metropolis_chains`); same returns as the generic one."""
        a = self.rate(data, epsilon)
        center, B = self.domain(data)
        out = np.empty((size, data.d))
        acc = np.empty(size)
        base_scale = self.base_scale if self.base == "gaussian" else 0.0
        code = NORM_CODES[self.norm]
        qr_metropolis_chains(
            rng, data.X, data.y, data.tau, a, np.asarray(center, float), float(B), base_scale,
            self._target, code, int(steps or self.steps), out, acc, float(lattice),
        )
        return out, DrawInfo.chains("metropolis", acc, steps or self.steps)

    def draw_gibbs(self, data, epsilon, rng, size, sweeps=None, lattice=0.0):
        """Final states of ``size`` exact coordinate-Gibbs chains started at 0 (scaled units) and their
        info (with ``lattice > 0``, on that dyadic lattice: :func:`qr_gibbs_chains`)."""
        if self.base != "uniform":
            raise ValueError("sampler 'gibbs' needs base='uniform'")
        a = self.rate(data, epsilon)
        out = np.empty((size, data.d))
        code = NORM_CODES[self.norm]
        qr_gibbs_chains(
            rng, data.X, data.y, data.tau, a, self.bound, self._target, code, int(sweeps or self.gibbs_sweeps), out,
            float(lattice),
        )
        return out, DrawInfo.constant("gibbs", size, 1.0, sweeps or self.gibbs_sweeps)


class KNG(_QuantReg, GenericKNG):
    """KNG for quantile regression (KNG paper §4.5, equation (2) with the corrected constant).

    Density on ``Theta`` (uniform base; or Gaussian ``N(0, base_scale^2 I)`` with
    ``base="gaussian"``, needed because the density does not decay at infinity)::

        f(theta) ∝ exp(-eps / (2 Delta_K) ||sum_i x_i (1{y_i <= x_i'theta} - tau)||_K),
        Delta_K = 2 max(tau, 1 - tau) C_X.

    ε-DP by the exponential mechanism.  The paper's ``2 (1 - tau) C_X`` equals
    ``Delta_K`` only for ``tau <= 1/2``.
    """

    gradient = staticmethod(qr_gradient)
    _target = TARGET_KNG
    #: The surrogate map first (:meth:`~kngflow.mechanisms.generic.GenericKNG.draw_surrogate_map`):
    #: the paper's random-walk Metropolis chain (``steps`` sweeps from 0), then 50
    #: independence-Metropolis proposals from its end, drawn from a mixture of the base
    #: measure and the gradient map of the logistic-smoothed check loss (bandwidth
    #: :func:`~kngflow.models.quantreg.gradients.smooth_bandwidth`) frozen at its minimiser and
    #: moved by chord steps to the exact gradient's zero, each accepted on the exact density.
    #: The walk alone does not mix at large n: with 1000 steps it matches the exact law up to
    #: n = 10^4, but at n = 10^5 1.2-1.5 % of its releases stay far from the mode (errors
    #: 0.2-0.8 against the LP's 0.006; the unbanded generic kernel sticks on the same seeds).
    #: The proposals take those chains to the mode (0 stuck in 2000 releases at n = 10^5 and
    #: in 200 at 10^6 and 10^7, benchmarks/sampler_check.py); the walk covers targets as
    #: wide as Theta (small n), where the surrogate's proposals alone would not.  The walk
    #: alone stays available (``sampler="metropolis"``) and exact coordinate Gibbs too.
    #: Hardened releases run the same surrogate map, certified
    #: (:meth:`~kngflow.mechanisms.generic.GenericKNG.release_surrogate_hardened`: the walk
    #: on a dyadic lattice, the map's solves certified a posteriori).  Gibbs zig-zags far from the mode
    #: (``||g||_inf`` dominated by one coordinate makes the other's conditional nearly flat).
    samplers = ("surrogate_map", "metropolis", "gibbs")
    surrogate = (qr_smooth_gradient, qr_smooth_hessian)

    def available_samplers(self):
        return self.samplers if self.base == "uniform" else ("surrogate_map", "metropolis")

    def surrogate_args(self, data):
        return (data.X, data.y, data.tau, smooth_bandwidth(data.n))

    def sensitivity(self, data) -> float:
        return gradient_sensitivity(self.norm, data.d, data.tau)


class Exponential(_QuantReg, GenericExponential):
    """Exponential mechanism on the check loss (KNG paper §4.5.1)::

        f(theta) ∝ exp(-eps l_n(theta) / (2 max(tau, 1 - tau)(1 + B))) base(theta),

    ε-DP since ``l_n`` has sensitivity ``max(tau, 1 - tau)(1 + B)`` on ``Theta``.  The
    paper's ``4 max{tau, 1 - tau}(1 + B)`` denominator is valid but twice too large
    (ε/2-DP); see :mod:`kngflow.models.quantreg.problem`.  Uniform base only (the loss
    bound needs ``||theta||_1 <= B``).
    """

    loss = staticmethod(qr_loss)
    _target = TARGET_EXP

    def sensitivity(self, data) -> float:
        return loss_sensitivity(data.tau, self.bound)

"""1-D quantile mechanisms: Smith's PrivateQuantile (KNG) and the exponential mechanism.

Data are :class:`~kngflow.models.quantile.problem.QuantileData` (sorted, inside public bounds
``[lower, upper]``, which are also ``Theta`` with its uniform base measure).  Both
densities are sampled exactly (:func:`kngflow.models.quantile.sampler.quantile_draws`: interval
masses between order statistics in log space); the generic Metropolis kernel stays
available (``sampler="metropolis"``) and is checked against the exact sampler in the tests.
"""

from __future__ import annotations

import numpy as np

from kngflow.models.quantile.problem import (
    QuantileData,
    empirical_quantile,
    gradient_sensitivity,
    loss_sensitivity,
    quantile_data,
)
from kngflow.models.quantile.sampler import TARGET_EXP, TARGET_KNG, quantile_draws, quantile_gradient, quantile_loss
from kngflow.mechanisms.base import check_epsilon, check_rng
from kngflow.mechanisms.draws import DrawInfo
from kngflow.mechanisms.generic import GenericExponential, GenericKNG, NonPrivateBase

__all__ = ["NonPrivate", "KNG", "Exponential", "private_quantile", "check_quantile_data"]


def check_quantile_data(data) -> QuantileData:
    """Validate :class:`QuantileData` (type, non-empty 1-D, finite, inside the bounds)."""
    if not isinstance(data, QuantileData):
        raise TypeError(f"data must be a kngflow.models.quantile.problem.QuantileData, got {type(data).__name__}")
    y = data.y
    if not isinstance(y, np.ndarray) or y.ndim != 1 or y.dtype != np.float64 or y.shape[0] == 0:
        raise ValueError("data.y must be a non-empty 1-D float64 array")
    if not (data.lower <= y[0] and y[-1] <= data.upper):
        raise ValueError(f"data.y must be sorted inside [lower, upper] = [{data.lower}, {data.upper}]")
    return data


class NonPrivate(NonPrivateBase):
    """The empirical ``tau``-quantile ``y_(ceil(tau n))``: the non-private baseline."""

    def check_data(self, data):
        return check_quantile_data(data)

    def estimate(self, data) -> np.ndarray:
        return np.array([empirical_quantile(data)])


class _Quantile1D:
    """Shared: data check, the domain ``[lower, upper]``, exact draws of ``target``."""

    samplers = ("exact", "metropolis")
    _target = TARGET_KNG

    def available_samplers(self):
        return self.samplers if self.base == "uniform" else ("metropolis",)

    def check_data(self, data):
        return check_quantile_data(data)

    def kernel_args(self, data):
        return (data.y, data.tau)

    def centre(self, data) -> np.ndarray:
        """The empirical quantile: the exact draw is an order statistic plus a uniform
        offset, computed from data values (the bit-level audit's centre)."""
        return np.array([empirical_quantile(check_quantile_data(data))])

    def domain(self, data):
        """``Theta = [lower, upper]`` as the ℓ1 ball of radius ``(upper - lower)/2`` about its midpoint."""
        return np.array([0.5 * (data.lower + data.upper)]), 0.5 * (data.upper - data.lower)

    def draw_exact(self, data, epsilon, rng, size):
        """``size`` exact i.i.d. draws, shape (size, 1), and their info (one try each)."""
        if self.base != "uniform":
            raise ValueError("sampler 'exact' needs base='uniform'")
        a = self.rate(data, epsilon)
        out = np.empty(size)
        work = np.empty(data.n + 1)
        quantile_draws(rng, data.y, data.tau, a, data.lower, data.upper, self._target, work, out)
        return out[:, None], DrawInfo.constant("exact", size, 1.0, 1)


class KNG(_Quantile1D, GenericKNG):
    """KNG for the ``tau``-quantile = Smith's (2011) PrivateQuantile.

    Density on ``[lower, upper]``::

        f(theta) ∝ exp(-eps/2 |#{y_i <= theta} - tau n|),

    i.e. ``eps/(2 Delta) |l_n'(theta)|`` with gradient sensitivity ``Delta = 1``
    (derived in :mod:`kngflow.models.quantile.problem`; every norm is ``|.|`` in 1-D).
    ε-DP by the exponential mechanism.  Sampled exactly: piecewise constant between
    order statistics.
    """

    gradient = staticmethod(quantile_gradient)

    def sensitivity(self, data) -> float:
        return gradient_sensitivity()


class Exponential(_Quantile1D, GenericExponential):
    """Exponential mechanism on the check loss, density on ``[lower, upper]``::

        f(theta) ∝ exp(-eps l_n(theta) / (2 max(tau, 1-tau)(upper - lower))),

    ε-DP as ``l_n`` has that sensitivity (:mod:`kngflow.models.quantile.problem`).  Piecewise
    exponential between order statistics: sampled exactly.
    """

    loss = staticmethod(quantile_loss)
    _target = TARGET_EXP

    def sensitivity(self, data) -> float:
        return loss_sensitivity(data.tau, data.lower, data.upper)


def private_quantile(rng, x, tau, epsilon, lower, upper, *, hardened=True) -> float:
    """ε-DP ``tau``-quantile of the array ``x`` inside public bounds (Smith's PrivateQuantile).

    One exact draw from ``f(theta) ∝ exp(-eps/2 |#{x_i <= theta} - tau n|)`` on
    ``[lower, upper]`` (:class:`KNG`).  ``O(n log n)`` (one sort) and ``O(n)`` memory.

    ``hardened`` (default True): the draw is snapped to the public grid
    ``2^(floor(log2 max(|lower|, |upper|)) - 12)`` with a uniform dither and clamped to the
    bounds' box (:mod:`kngflow.mechanisms.hardening`, coupling route): (ε, δ′)-DP with
    ``δ′ = (1 + e^ε) 2 η / Λ``, ``η = 128 u max(|lower|, |upper|)`` the rounding of the
    exact draw's arithmetic (``u = 2^-53``), so ``δ′ <= (1 + e^ε) 2^-32``: 8.6e-10 at ε = 1.  False: the
    float draw itself, whose low bits depend on the data (:mod:`kngflow.audit.bits`).

    Raises TypeError/ValueError naming ``rng``, ``x`` (empty, NaN, outside the bounds),
    ``tau`` (outside (0, 1)), ``epsilon`` or ``lower``/``upper`` (``lower >= upper``).
    """
    rng = check_rng(rng)
    epsilon = check_epsilon(epsilon)
    data = quantile_data(x, tau, lower, upper)
    return float(KNG(sampler="exact", hardened=hardened).release(data, epsilon, rng).estimate[0])

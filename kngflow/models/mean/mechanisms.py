"""Mechanisms for the mean of bounded data (KNG paper §4.1); sensitivities in
:mod:`kngflow.models.mean.problem`.

* :class:`KNG` is the K-norm mechanism ``xbar + W``, ``W ∝ exp(-a ||w||_K)``, drawn exactly
  (:func:`kngflow.noise.knorm_noise`).
* :class:`Exponential` is ``N(xbar, s^2 I)`` truncated to the data ball: exact i.i.d.
  truncated normal coordinates for the ℓ∞ ball, exact coordinate Gibbs (each conditional a
  truncated normal on the chord of the ball) for the ℓ1 and ℓ2 balls.
"""

from __future__ import annotations

import math

import numpy as np

from kngflow._jit import jit
from kngflow.noise import knorm_noise
from kngflow.models.mean.problem import NORMS, MeanData, row_norms, gradient_sensitivity, loss_sensitivity
from kngflow.kernels.truncnorm import truncnorm
from kngflow.mechanisms.base import SAMPLER_DIAGNOSTICS, Mechanism, Release, check_choice, check_epsilon, check_int, check_rng
from kngflow.mechanisms.claims import Density
from kngflow.mechanisms.draws import DrawInfo
from kngflow.mechanisms.generic import NonPrivateBase
from kngflow.mechanisms.map_draws import GRADIENT_MAP_PROPOSALS, gradient_map_draws
from kngflow.mechanisms.hardening import UNIT_ROUNDOFF, Hardening, knorm_lipschitz, lipschitz_hardening
from kngflow.mechanisms.sampled import sampler_hardening

__all__ = ["NonPrivate", "KNG", "Exponential", "check_mean_data"]

_CODES = {"l1": 0, "l2": 1, "linf": 2}


def check_mean_data(data) -> MeanData:
    """Validate :class:`MeanData`: a finite ``xbar`` inside the ball, ``n >= 1``."""
    if not isinstance(data, MeanData):
        raise TypeError(f"data must be a kngflow.models.mean.problem.MeanData, got {type(data).__name__}")
    xbar = data.xbar
    if not (isinstance(xbar, np.ndarray) and xbar.ndim == 1 and xbar.shape[0] >= 1 and xbar.dtype == np.float64):
        raise ValueError("data.xbar must be a non-empty 1-D float64 array")
    if isinstance(data.n, bool) or not isinstance(data.n, (int, np.integer)) or data.n < 1:
        raise ValueError(f"data.n must be an integer >= 1, got {data.n!r}")
    if not np.isfinite(xbar).all() or float(row_norms(xbar, data.data_norm)) > data.radius * (1 + 1e-12):
        raise ValueError(f"data.xbar must be finite and inside the ball ||x||_{data.data_norm} <= {data.radius}")
    return data


class NonPrivate(NonPrivateBase):
    """The sample mean: the non-private baseline."""

    def check_data(self, data):
        return check_mean_data(data)

    def estimate(self, data) -> np.ndarray:
        return data.xbar.copy()

    def __repr__(self) -> str:
        return "NonPrivate()"


@jit
def _centred(theta, args, g):
    """``g = theta - xbar`` (``args = (xbar,)``): KNG's gradient ``2n (theta - xbar)`` over ``2n``."""
    xbar = args[0]
    for j in range(theta.shape[0]):
        g[j] = theta[j] - xbar[j]


@jit
def _identity(theta, args, H):
    """The Jacobian of :func:`_centred`: the identity."""
    d = theta.shape[0]
    for a in range(d):
        for b in range(d):
            H[a, b] = 1.0 if a == b else 0.0


class KNG(Mechanism):
    """KNG for the mean = the K-norm mechanism (Hardt–Talwar), exact.

    Density ``f(theta) ∝ exp(-a ||xbar - theta||_K)`` on ``R^d`` with
    ``a = eps n / (2 r c_K)`` (``location_family=True``, Remark 4.1: the normalising
    constant does not depend on the data) or ``a = eps n / (4 r c_K)`` (the generic KNG
    rate ``eps / (2 Delta)`` times ``2n``, ``Delta = 4 r c_K``).  ε-DP because
    ``||xbar - xbar'||_K <= 2 r c_K / n`` (:mod:`kngflow.models.mean.problem`).

    Keyword-only options: ``norm`` in {"l1", "l2", "linf"}; ``location_family`` (bool);
    ``sampler`` in {"auto", "exact", "gradient_map"} ("auto" = "exact"): "gradient_map" (opt in) runs the generic
    gradient-map sampler (:func:`~kngflow.mechanisms.map_draws.gradient_map_draws`) on the
    gradient ``theta - xbar`` (KNG's over ``2n``) and its constant Hessian: every proposal
    is accepted and the release has the same law as the exact draw (``proposals``
    proposals, the last one released).
    """

    kind = "kng"
    diagnostics = SAMPLER_DIAGNOSTICS

    def __init__(self, *, norm="linf", location_family=True, sampler="exact", proposals=GRADIENT_MAP_PROPOSALS):
        self.norm = check_choice("norm", norm, NORMS)
        if not isinstance(location_family, bool):
            raise TypeError(f"location_family must be true or false, got {location_family!r}")
        self.location_family = location_family
        self.sampler = check_choice("sampler", sampler, ("auto", "exact", "gradient_map"))
        self.proposals = check_int("proposals", proposals, 1)

    def __repr__(self) -> str:
        if self.sampler != "gradient_map":
            return f"KNG(norm={self.norm!r}, location_family={self.location_family})"
        return (f"KNG(norm={self.norm!r}, location_family={self.location_family}, sampler={self.sampler!r}, "
                f"proposals={self.proposals})")

    def draw_gradient_map(self, data, epsilon, rng, size, proposals=None):
        """Final states and info (acceptance rates, proposal counts) of ``size`` gradient-map
        chains (start 0, ``Theta = R^d``)."""
        data = check_mean_data(data)
        out, acc, steps = gradient_map_draws(_centred, _identity, (data.xbar,), self.rate(data, epsilon), self.norm,
                                             (np.zeros(data.d), np.inf), 0.0, check_rng(rng), size,
                                             int(proposals or self.proposals), 1)
        return out, DrawInfo("gradient_map", acc, steps)

    def rate(self, data, epsilon) -> float:
        """``a``: the density is ``exp(-a ||xbar - theta||_K)``."""
        delta = gradient_sensitivity(data.radius, data.data_norm, self.norm, data.d)
        factor = 1.0 if self.location_family else 2.0
        return check_epsilon(epsilon) * 2.0 * data.n / (factor * delta)

    def release(self, data, epsilon, rng) -> Release:
        data = check_mean_data(data)
        if self.sampler == "gradient_map":
            theta, info = self.draw_gradient_map(data, epsilon, rng, 1)
            return Release(theta[0], info.release_info())
        a = self.rate(data, epsilon)
        w = knorm_noise(check_rng(rng), self.norm, data.d, 1.0 / a)
        return Release(data.xbar + w, {"sampler": "exact", "acceptance": 1.0, "steps": 1})

    def hardening(self, data, epsilon) -> Hardening:
        """Lipschitz route (:func:`~kngflow.mechanisms.hardening.lipschitz_hardening`), clamped to
        the data box ``[-r, r]^d``.

        The exact release ``xbar + W`` has density ``exp(-a ||theta - xbar||_K)``, so
        ``L = a ||(1, ..., 1)||_K`` against ∞-norm moves.
        Rounding of one coordinate, for values clipped to ``±2B`` (``B = r``): ``xbar``
        from ``n`` records of size at most ``r`` by numpy's pairwise summation, at most
        ``(log2 n + 130) u r``, and the division by ``n``; ``W`` (a gamma radius times a
        direction, at most 32 operations) and the sums ``xbar + W`` and ``+ V``, each at
        most ``u`` times a value below ``4B``.  Together
        ``eta = (log2 n + 300) u 4B`` (``B`` the radius, up to twice it after rounding to
        the grid), ``u = 2^-53``; ``ε′ - ε`` is about ``4 e d eta / Λ``, below 10^-9 for
        ``n eps <= 10^6``.
        """
        data = check_mean_data(data)
        a = self.rate(data, epsilon)
        eta = (math.log2(max(data.n, 2)) + 300.0) * UNIT_ROUNDOFF * 4.0 * 2.0 * data.radius
        return lipschitz_hardening(knorm_lipschitz(self.norm, data.d, 1.0 / a), data.radius, eta, data.d, epsilon)

    def privacy_claim(self) -> Density:
        """The K-norm density :meth:`log_density` on ``R^d`` (no box: audited in closed form and black-box)."""
        return Density(log_density=self.log_density, parameter_box=self.parameter_box,
                       additive_centre=lambda data: check_mean_data(data).xbar)

    def parameter_box(self, d: int) -> None:
        """None: ``Theta = R^d`` has no box, so there is no grid audit.  The privacy loss is
        ``a ||xbar - xbar'||_K`` in closed form (tests) and audited black-box."""
        return None

    def log_density(self, data, epsilon, theta):
        """Unnormalised log density ``-a ||xbar - theta||_K`` at ``theta`` (..., d)."""
        data = check_mean_data(data)
        theta = np.asarray(theta, dtype=np.float64)
        return -self.rate(data, epsilon) * row_norms(theta - data.xbar, self.norm)


@jit
def _exp_draw(rng, xbar, s, r, code, sweeps, out):
    """``N(xbar, s^2 I)`` truncated to ``{||theta||_code <= r}`` into ``out`` (d,).

    ℓ∞ (code 2): independent exact truncated normals.  ℓ1/ℓ2: ``sweeps`` sweeps of exact
    coordinate Gibbs started at 0; the conditional of coordinate ``j`` is a truncated
    normal on the chord ``|theta_j| <= h`` with ``h = r - sum_{k != j} |theta_k|`` (ℓ1) or
    ``h = sqrt(r^2 - sum_{k != j} theta_k^2)`` (ℓ2).
    """
    d = xbar.shape[0]
    if code == 2:
        for j in range(d):
            out[j] = truncnorm(rng, xbar[j], s, -r, r)
        return
    for j in range(d):
        out[j] = 0.0
    for _ in range(sweeps):
        for j in range(d):
            rest = 0.0
            for k in range(d):
                if k != j:
                    rest += abs(out[k]) if code == 0 else out[k] * out[k]
            h = r - rest if code == 0 else math.sqrt(max(r * r - rest, 0.0))
            if h > 0.0:
                out[j] = truncnorm(rng, xbar[j], s, -h, h)
            else:
                out[j] = 0.0


class Exponential(Mechanism):
    """Exponential mechanism on the sum of squares over ``Theta`` = the data ball.

    Density ``f(theta) ∝ exp(-eps n ||theta - xbar||_2^2 / (2 Delta))`` on
    ``{||theta||_D <= r}``, ``Delta = (2 r c_2)^2`` (:mod:`kngflow.models.mean.problem`): ε-DP by
    the exponential mechanism.  It is ``N(xbar, Delta/(eps n) I)`` truncated to the ball:
    exact for the ℓ∞ ball, exact coordinate Gibbs (``gibbs_sweeps`` sweeps from 0) for
    ℓ1 and ℓ2 balls.

    Keyword-only option: ``gibbs_sweeps`` (int >= 1, default 50).
    """

    kind = "exponential"
    diagnostics = SAMPLER_DIAGNOSTICS

    def __init__(self, *, gibbs_sweeps=50):
        self.gibbs_sweeps = check_int("gibbs_sweeps", gibbs_sweeps, 1)

    def __repr__(self) -> str:
        return f"Exponential(gibbs_sweeps={self.gibbs_sweeps})"

    def sd(self, data, epsilon) -> float:
        """``s = sqrt(Delta / (eps n))``."""
        return math.sqrt(loss_sensitivity(data.radius, data.data_norm, data.d) / (check_epsilon(epsilon) * data.n))

    def release(self, data, epsilon, rng) -> Release:
        data = check_mean_data(data)
        s = self.sd(data, epsilon)
        out = np.empty(data.d)
        code = _CODES[data.data_norm]
        _exp_draw(check_rng(rng), data.xbar, s, data.radius, code, self.gibbs_sweeps, out)
        if code == 2:
            return Release(out, {"sampler": "exact", "acceptance": 1.0, "steps": 1})
        return Release(out, {"sampler": "gibbs", "acceptance": 1.0, "steps": self.gibbs_sweeps})

    def hardening(self, data, epsilon) -> Hardening:
        """Coupling route on the data box ``[-r, r]^d``
        (:func:`~kngflow.mechanisms.sampled.sampler_hardening`: a truncated-normal draw is a
        few operations on values inside the ball)."""
        data = check_mean_data(data)
        return sampler_hardening("exact", 0, data.d, data.radius)

    def privacy_claim(self) -> Density:
        """The law of the release: :meth:`log_density` on the problem's box."""
        return Density(log_density=self.log_density)

    def log_density(self, data, epsilon, theta):
        """Unnormalised log density at ``theta`` (..., d); ``-inf`` outside the ball."""
        data = check_mean_data(data)
        theta = np.asarray(theta, dtype=np.float64)
        inside = row_norms(theta, data.data_norm) <= data.radius
        q = ((theta - data.xbar) ** 2).sum(axis=-1) / (2.0 * self.sd(data, epsilon) ** 2)
        return np.where(inside, -q, -np.inf)


"""Output perturbation (Chaudhuri, Monteleoni & Sarwate 2011; Sarwate's chapter §7.3): the
regularised minimiser plus noise calibrated to its sensitivity ``2 L / (n reg)``."""

from __future__ import annotations

import math

import numpy as np

from kngflow.mechanisms.base import Release, check_epsilon, check_int, check_positive, check_rng
from kngflow.mechanisms.claims import StatisticNoise
from kngflow.mechanisms.hardening import UNIT_ROUNDOFF, Hardening, lipschitz_hardening, snap
from kngflow.noise import knorm_noise
from kngflow.norms import get_norm
from kngflow.mechanisms.erm.base import DEFAULT_REG, ERMMechanism, erm_release


class OutputPerturbation(ERMMechanism):
    """Output perturbation (Chaudhuri, Monteleoni & Sarwate 2011, Algorithm 1; chapter eq. 7.9–7.10).

    Release ``theta^ + Z`` with ``theta^`` the minimiser of ``J`` and ``Z`` "gamma noise",
    density ∝ ``exp(-||z||_2 / s)``, ``s = 2 L (1 + tol) / (n reg eps)``, ``L`` the loss's
    Lipschitz bound for this data set (:meth:`lipschitz_of`; ``sqrt(m)`` for logistic
    regression on the box, ``R_2 = sup ||x||_2`` over a declared record domain)
    (``||Z||_2 ~ Gamma(m, s)``, uniform direction).

    Sensitivity.  For adjacent ``D, D'`` (record ``z`` replaced by ``z'``) write
    ``J' = J + g``, ``g = (l(.; z') - l(.; z)) / n``, ``||grad g|| <= 2L/n``.  Both are
    ``reg``-strongly convex, so with ``a = argmin J``, ``b = argmin J'``:
    ``reg ||a - b||^2 <= (grad J'(a) - grad J'(b))'(a - b) = grad g(a)'(a - b)``, hence
    ``||a - b||_2 <= 2L / (n reg)`` (CMS 2011, Lemma 7 / Cor. 8).  The ℓ2 K-norm
    mechanism with scale sensitivity/ε is ε-DP.  The chapter's scale ``2/(n reg eps)``
    is this with ``L = 1`` (``||x|| <= 1``).

    Solver tolerance.  The proof covers the exact minimiser; a solver's iterate has a
    different, data-dependent law.  Newton stops at ``||grad J|| <= tol L / n``, so the
    iterate is within ``r = tol L / (n reg)`` of the exact minimiser by strong
    convexity, and computed minimisers of adjacent data sets differ by at most
    ``2L/(n reg) + 2r = 2L (1 + tol)/(n reg)``: the scale above covers the iterate itself
    (up to floating-point error in the gradient, ~1e-16 relative).  Newton converges
    quadratically and reaches ``tol = 1e-9`` in a few steps for every data set; should it
    stop early (``max_iter``, floating-point resolution) the bound does not hold — the
    release still happens and that is the one caveat.  ``info["steps"]`` (Newton
    iterations) is a non-private diagnostic.
    """

    kind = "output"

    def __init__(self, *, reg=DEFAULT_REG, tol=1e-9, max_iter=100):
        super().__init__(reg)
        self.tol = check_positive("tol", tol)
        if self.tol > 1e-3:
            raise ValueError(f"tol must be <= 1e-3 (it inflates the sensitivity by 1 + tol), got {tol!r}")
        self.max_iter = check_int("max_iter", max_iter, 1)

    def options(self) -> dict:
        return {"reg": self.reg, "tol": self.tol}

    def sensitivity(self, n: int, d: int, lipschitz: float | None = None) -> float:
        """``2 L (1 + tol) / (n reg)``: ℓ2 sensitivity of the computed minimiser (``L`` =
        ``lipschitz``, default :meth:`lipschitz` of ``d``)."""
        L = self.lipschitz(d) if lipschitz is None else lipschitz
        return 2.0 * L * (1.0 + self.tol) / (n * self.reg)

    def noise_scale(self, n: int, d: int, epsilon: float, lipschitz: float | None = None) -> float:
        return self.sensitivity(n, d, lipschitz) / epsilon

    # ---------------------------------------------------------------- audit seam
    def privacy_claim(self) -> StatisticNoise:
        """Noise on the computed minimiser :meth:`statistic` (:meth:`statistic_noise`)."""
        return StatisticNoise(statistic=self.statistic, noise=self.statistic_noise, additive_centre=self.centre)

    def centre(self, data) -> np.ndarray:
        """The release without its noise, in the data's units: ``finish(minimiser)``."""
        data = self.check_data(data)
        return self.finish(data, self.minimiser(data)[0])

    def statistic(self, data) -> np.ndarray:
        """The released statistic before noise: the computed minimiser."""
        return self.minimiser(self.check_data(data))[0]

    def statistic_noise(self, data, epsilon: float):
        """``(ℓ2 norm, scale)`` of the gamma noise for this data set's (public) size."""
        n, d = self.size(data)
        return get_norm("l2"), self.noise_scale(n, d, epsilon, self.lipschitz_of(data))

    def minimiser(self, data):
        """``(theta^, iterations, converged)`` (deterministic; a model provides it)."""
        raise NotImplementedError

    def release(self, data, epsilon, rng) -> Release:
        data = self.check_data(data)
        epsilon = check_epsilon(epsilon)
        rng = check_rng(rng)
        n, d = self.size(data)
        scale = self.noise_scale(n, d, epsilon, self.lipschitz_of(data))
        if not math.isfinite(scale):  # eps below ~1e-300: a data-independent release is 0-DP
            return erm_release(np.zeros(d), 0, "none")
        theta, it, _ = self.minimiser(data)
        released = theta + knorm_noise(rng, "l2", d, scale)
        if self.hardened:
            released = snap(released, self.hardening(data, epsilon), rng)
        return erm_release(self.finish(data, released), it)

    def hardening(self, data, epsilon) -> Hardening:
        """Lipschitz route on ``theta^ + Z`` before :meth:`finish` (site "statistic": the
        estimate is its post-processing).

        The exact release ``theta* + Z`` (``theta*`` the exact minimiser, sensitivity
        ``2L/(n reg)``, below the calibrated one) is ε-DP; ``Z ∝ exp(-||z||_2 / s)`` gives
        ``L = sqrt(d) / s``.  Clamp ``B = R + 64 (d + 1) s`` (``R`` the ball holding the
        minimiser; a coordinate of ``Z`` exceeds ``64 (d + 1) s`` only when the gamma radius
        exceeds 64 times its mean).  Rounding: the solver stops at ``||grad J|| <= tol L / n``,
        and the gradient, a mean of ``n`` terms of size at most ``L``, is computed within
        ``sqrt(d) n u L``; by ``reg``-strong convexity the computed minimiser is within
        ``(tol L / n + sqrt(d) n u L) / reg`` of ``theta*``; the sums with ``Z`` and the
        dither add ``8 u 2B``.  ``u = 2^-53``.
        """
        data = self.check_data(data)
        n, d = self.size(data)
        L = self.lipschitz_of(data)
        scale = self.noise_scale(n, d, epsilon, L)
        bound = self.default_radius() + 64.0 * (d + 1) * scale
        eta = (self.tol * L / n + math.sqrt(d) * n * UNIT_ROUNDOFF * L) / self.reg + 16.0 * UNIT_ROUNDOFF * bound
        return lipschitz_hardening(math.sqrt(d) / scale, bound, eta, d, epsilon, site="statistic")

"""Objective perturbation for linear regression (Awan & Slavković §6.3; the extended form of
Kifer, Smith & Thakurta 2012 with a K-norm noise): the perturbed ridge objective on the
sufficient statistics, minimised over ``Theta = {||theta||_1 <= B}``.  Sensitivities are
derived in :mod:`kngflow.models.linear.problem`; each class's docstring says why it is ε-DP.
"""

from __future__ import annotations

import math

import numpy as np

from kngflow.kernels.certified_qp import certify_quadratic_l1_ball
from kngflow.kernels.dd import scale_dd
from kngflow.kernels.optimize import quadratic_l1_ball
from kngflow.mechanisms.base import check_choice, check_int, check_positive, check_probability
from kngflow.mechanisms.claims import GradientNoise
from kngflow.mechanisms.hardening import UNIT_ROUNDOFF, Hardening, coupling_hardening, snap
from kngflow.models.linear.certified import ETA_BITS, REFINE_STEPS, snap_rounding, two_sum_arrays
from kngflow.models.linear.mechanisms import NORMS, LinearMechanism
from kngflow.models.linear.problem import gradient, gradient_sensitivity, hessian_bound
from kngflow.noise import knorm_noise

__all__ = ["ObjectivePerturbation", "ExtendedObjectivePerturbation"]

class ExtendedObjectivePerturbation(LinearMechanism):
    """Extended objective perturbation (Awan & Slavković, Algorithm 2) for least squares.

    Draw ``V`` with density ∝ ``exp(-(eps q / Delta_K) ||V||_K)`` and release

        argmin_{||theta||_1 <= B}  l_n(theta) + (gamma/2) theta'theta + V'theta,
        gamma = lambda / (exp(eps (1 - q)) - 1),

    where ``Delta_K = 4(1+B) sup ||x||_K`` bounds the per-record gradient difference
    uniformly over ``Theta`` and ``lambda = 2d`` bounds one record's Hessian ``2xx'``.
    The ``q`` share of the budget pays for the noise, the ``1 - q`` share for the
    Jacobian of the map ``V -> theta`` (hence the regulariser).  The paper prints
    ``gamma = lambda / (exp(eps (q - 1)) - 1)``, which is negative; the proof needs
    ``exp(eps (1-q)) - 1``.  ``q = 1/2`` with ℓ∞ is the KNG paper's §4.3 form
    (``gamma = 2d / (exp(eps/2) - 1)``, noise ∝ ``exp(-eps ||b||_inf / (8 (1+B)))``).
    The option ``reg`` (the ridge every ERM kind names so, ``(1/n) sum (y - x'theta)^2 +
    (reg/2)|theta|^2``) is a floor: ``gamma = max(rule, n reg)``, a larger ridge only
    shrinking the Jacobian's ratio (:meth:`gamma`).
    """

    snaps_itself = True  # hardened releases are snapped from their double-double value

    kind = "objective_ext"

    def __init__(self, *, norm="linf", q=0.5, bound=1.0, reg=None, tol=1e-12, max_iter=100_000):
        self.norm = check_choice("norm", norm, NORMS)
        self.q = check_probability("q", q)
        self.bound = check_positive("bound", bound)
        self.reg = None if reg is None else check_positive("reg", reg)
        self.tol = check_positive("tol", tol)
        self.max_iter = check_int("max_iter", max_iter, 1)

    def options(self) -> dict:
        return {"norm": self.norm, "q": self.q, "bound": self.bound, **self._reg_option()}

    def _reg_option(self) -> dict:
        return {} if self.reg is None else {"reg": self.reg}

    def sensitivity(self, d: int) -> float:
        return gradient_sensitivity(self.norm, d, self.bound)

    def privacy_claim(self) -> GradientNoise:
        """K-norm noise on the gradient (:meth:`noise_law`) and the Jacobian's share (:meth:`log_jacobian`)."""
        return GradientNoise(noise_law=self.noise_law, log_jacobian=self.log_jacobian, bound=self.bound,
                             gradient=gradient)

    def noise_law(self, d: int, epsilon: float) -> tuple[str, float, float]:
        """``(norm, scale, share)`` of the K-norm noise added to the gradient.

        ``V`` has density ∝ ``exp(-||V||_K / scale)``, ``scale = Delta_K / (eps q)``, and
        pays for the ``share = q`` part of the budget: for adjacent data sets the noise
        densities at the same output differ by at most
        ``sup_theta ||grad l_n(D) - grad l_n(D')||_K / scale <= q eps`` (closed form,
        checked by :func:`kngflow.audit.knorm_audit`).
        """
        return self.norm, self.sensitivity(d) / (epsilon * self.q), self.q

    def log_jacobian(self, stats, epsilon: float) -> float:
        """``log det H`` with ``H = 2G + gamma I``: the Jacobian of ``theta -> V = 2c - H theta``
        for interior releases, so their density is ``f_V(2c - H theta) det H``.  Between
        adjacent data sets ``H`` changes by ``2(x'x'^T - x x^T)``, eigenvalues at most
        ``lambda = 2d`` each way, so ``log det`` moves by at most
        ``log(1 + lambda/gamma) = eps (1 - q)``: the other share of the budget."""
        d = stats.d
        return float(np.linalg.slogdet(2.0 * stats.G + self.gamma(d, epsilon, stats.n) * np.eye(d))[1])

    def gamma(self, d: int, epsilon: float, n: int = 0) -> float:
        """The ridge of the minimised objective: :meth:`min_gamma`, or ``n reg`` where the
        option ``reg`` asks for more (the ERM convention ``(1/n) sum_i (y_i - x_i'theta)^2 +
        (reg/2)|theta|^2`` is ``l_n + (n reg / 2)|theta|^2`` on the summed loss).  A ridge
        above the privacy rule's only shrinks the determinant ratio: still ε-DP."""
        rule = self.min_gamma(d, epsilon)
        return rule if self.reg is None else max(rule, n * self.reg)

    def min_gamma(self, d: int, epsilon: float) -> float:
        """``lambda / (exp(eps (1 - q)) - 1)``; as ``lambda e^{-x} / (1 - e^{-x})`` for large
        ``x = eps (1 - q)``, where ``exp`` overflows (the result underflows towards 0)."""
        x = epsilon * (1.0 - self.q)
        if x <= 700.0:
            return hessian_bound(d) / np.expm1(x)
        return hessian_bound(d) * np.exp(-x) / -np.expm1(-x)

    def _solve(self, stats, epsilon, rng):
        """``(theta, V, iters)``: the noise and the float64 constrained minimiser."""
        d = stats.d
        V = knorm_noise(rng, self.norm, d, self.noise_law(d, epsilon)[1])
        H = 2.0 * stats.G + self.gamma(d, epsilon, stats.n) * np.eye(d)
        h = 2.0 * stats.c - V
        theta = np.empty(d)
        iters = quadratic_l1_ball(H, h, self.bound, self.tol, self.max_iter, theta)
        return theta, V, iters

    def _release(self, stats, epsilon, rng):
        theta, _, iters = self._solve(stats, epsilon, rng)
        return theta, {"sampler": "exact", "acceptance": 1.0, "steps": int(iters)}

    def _release_output(self, stats, epsilon, rng):
        """Hardened: the minimiser certified in double-double
        (:func:`~kngflow.kernels.certified_qp.certify_quadratic_l1_ball`: the KKT system of its face of
        the ball, or of the interior, refined and certified), times ``scale`` exactly, and
        snapped here (``site = "sampler"``); a solve that cannot be certified to ``η`` is
        refined once more from a tighter solve, then raises (one line)."""
        if not self.hardened:
            return super()._release_output(stats, epsilon, rng)
        h = self.hardening(stats, epsilon)
        theta, V, iters = self._solve(stats, epsilon, rng)
        G2 = 2.0 * np.ascontiguousarray(stats.G, dtype=np.float64)  # exact
        vh, vl = two_sum_arrays(2.0 * np.asarray(stats.c, dtype=np.float64), -V)
        gamma = self.gamma(stats.d, epsilon, stats.n)
        scale = float(stats.scale)
        hi, lo = np.empty(stats.d), np.empty(stats.d)
        for attempt in range(2):
            cert = certify_quadratic_l1_ball(G2, gamma, vh, vl, theta, self.bound, REFINE_STEPS, hi, lo)
            if math.isfinite(cert):
                err = cert * abs(scale) * (1.0 + 2.0 * UNIT_ROUNDOFF) + scale_dd(hi, lo, scale)
                if err + snap_rounding(h, hi) <= h.eta:
                    return snap(hi, h, rng, lo), {"sampler": "exact", "acceptance": 1.0, "steps": int(iters)}
            if attempt == 0:  # a tighter float solve finds the support the certificate needs
                iters += quadratic_l1_ball(2.0 * stats.G + gamma * np.eye(stats.d), vh, self.bound, 0.0,
                                           self.max_iter, theta)
        raise RuntimeError("hardened release: the solver could not certify its rounding; use hardened=false")

    def spread(self, n: int, d: int, epsilon: float) -> float:
        """``scale / (2 n d + gamma)``: an interior release is ``H^{-1}(2c - V)`` with
        ``H = 2G + gamma I <= (2 n d + gamma) I`` and each coordinate of the K-norm noise
        ``V`` of variance at least ``scale^2`` (:meth:`KNG.spread`)."""
        return self.noise_law(d, epsilon)[1] / (2.0 * n * d + self.gamma(d, epsilon, n))

    def hardening(self, stats, epsilon) -> Hardening:
        """Coupling route on ``{|theta_j| <= B scale}`` with the grid following the spread
        (:meth:`spread`, :func:`~kngflow.mechanisms.hardening.spread_grid`) and
        ``η = Λ 2^-44``: the release is the constrained minimiser, whose law has atoms on
        the faces of the ball, so no density bound; its solve is certified in double-double
        to within ``η`` (:meth:`_release_output`) or the release raises.
        δ′ = δ + (1 + e^ε) 2 d 2^-44."""
        scale = abs(float(stats.scale))
        spread = self.spread(int(stats.n), int(stats.d), epsilon)
        h = coupling_hardening(self.bound * scale, 0.0, stats.d, site="sampler", spread=spread * scale)
        return h._replace(eta=math.ldexp(h.grid, -ETA_BITS))


class ObjectivePerturbation(ExtendedObjectivePerturbation):
    """Objective perturbation as run in the KNG paper §4.3: ℓ∞ noise, ``q = 1/2``."""

    kind = "objective"

    def __init__(self, *, bound=1.0, reg=None, tol=1e-12, max_iter=100_000):
        super().__init__(norm="linf", q=0.5, bound=bound, reg=reg, tol=tol, max_iter=max_iter)

    def options(self) -> dict:
        return {"bound": self.bound, **self._reg_option()}

"""Private-ERM baselines for linear regression (Sarwate's chapter §7.3–7.4), on sufficient statistics.

Output perturbation and noisy projected gradient descent of :mod:`kngflow.mechanisms.erm`,
with the squared loss in place of the logistic one.  They target the minimiser over the
ball ``C = {||theta||_2 <= radius}`` of

    J(theta) = (1/n) sum_i (y_i - x_i'theta)^2 + (reg/2) ||theta||_2^2
             = (theta'G theta - 2 c'theta + yy) / n + (reg/2) ||theta||_2^2,

in the scaled units of :class:`~kngflow.models.linear.problem.LinearStats` (``x`` in
``[-1, 1]^d``, ``y' = y / scale`` in ``[-1, 1]``; estimates are multiplied by ``scale``,
public under the ``public_bound`` protocol).  Only ``(G, c, n)`` are read: no record is
held, so data sets of ``n = 10^7`` cost nothing more than the other linear mechanisms.

Constants (derived here, data independent)
------------------------------------------
One record's gradient is ``grad l(theta; x, y) = -2 (y - x'theta) x``.  On ``C``,
``|x'theta| <= ||x||_2 ||theta||_2 <= sqrt(d) radius`` and ``||x||_2 <= sqrt(d)``, so

    ||grad l(theta; x, y)||_2 <= L = 2 sqrt(d) (1 + sqrt(d) radius)      (theta in C).

Unlike the logistic loss, the squared loss is Lipschitz only on a bounded set: both
mechanisms need the constraint, and ``L`` grows with ``radius``.  ``hess J = 2G/n + reg I``
has eigenvalues in ``[reg, 2d + reg]`` (``G/n`` averages ``x x'``, ``||x||_2^2 <= d``):
``J`` is ``reg``-strongly convex and ``(2d + reg)``-smooth.

The privacy arguments are those of :mod:`kngflow.mechanisms.erm` with this ``L``:
output perturbation's sensitivity ``2L/(n reg)`` holds for the minimiser over ``C`` (with
``a = argmin_C J``, ``b = argmin_C J'``, the optimality conditions ``grad J(a)'(b - a) >= 0``
and ``grad J'(b)'(a - b) >= 0`` and ``reg``-strong convexity of ``J' = J + g`` give
``reg ||a - b||^2 <= grad g(a)'(a - b)``, ``||grad g|| <= 2L/n`` on ``C``); a step of noisy
gradient descent at a public iterate in ``C`` has ℓ2 sensitivity ``2L/n``.

Defaults: ``radius = 1`` in scaled units (the KNG paper's design has ``||theta*||_2 / scale``
about 0.2–0.3), ``reg = 0.01`` as for logistic regression.

DP-SGD and Chaudhuri et al.'s objective perturbation need the records (per-example
gradients, the loss's second derivative per record); the linear problem keeps sufficient
statistics only.  Objective perturbation for linear regression is the KNG paper's
(``objective``, ``objective_ext`` in :mod:`kngflow.models.linear.mechanisms`).
"""

from __future__ import annotations

import math

import numpy as np

from kngflow.mechanisms import erm
from kngflow.mechanisms.base import check_positive
from kngflow.models.linear.mechanisms import check_stats

__all__ = ["OutputPerturbation", "NoisyGD", "DEFAULT_RADIUS", "lipschitz", "constrained_ridge"]

#: Default radius of ``C`` (scaled units).
DEFAULT_RADIUS = 1.0


def lipschitz(d: int, radius: float) -> float:
    """``L = 2 sqrt(d) (1 + sqrt(d) radius)``: one record's gradient norm bound on ``C``."""
    return 2.0 * math.sqrt(d) * (1.0 + math.sqrt(d) * radius)


def constrained_ridge(G: np.ndarray, c: np.ndarray, n: int, reg: float, radius: float) -> tuple[np.ndarray, bool]:
    """The minimiser of ``J`` over ``||theta||_2 <= radius``: ``(theta, on_boundary)``.

    ``A = 2G/n + reg I`` (positive definite), ``b = 2c/n``; the unconstrained minimiser
    ``A^{-1} b`` if it lies in the ball, else ``(A + mu I)^{-1} b`` with ``mu > 0`` solving
    ``||(A + mu I)^{-1} b||_2 = radius`` (the Lagrange condition; the norm decreases in
    ``mu``, and ``mu = ||b|| / radius`` brackets the root), found by Brent's method on
    ``A``'s eigenbasis to floating-point resolution.
    """
    A = 2.0 * np.asarray(G, dtype=np.float64) / n + reg * np.eye(len(c))
    lam, Q = np.linalg.eigh(A)
    lam = np.maximum(lam, reg)  # A >= reg I exactly; rounding cannot make it smaller
    bt = Q.T @ (2.0 * np.asarray(c, dtype=np.float64) / n)
    theta = Q @ (bt / lam)
    if float(np.linalg.norm(theta)) <= radius:
        return theta, False
    hi = float(np.linalg.norm(bt)) / radius
    from scipy.optimize import brentq  # here: importing scipy.optimize costs every worker ~0.5 s
    mu = brentq(lambda m: float(np.linalg.norm(bt / (lam + m))) - radius, 0.0, hi, xtol=1e-300, rtol=4 * np.finfo(float).eps)
    theta = Q @ (bt / (lam + mu))
    norm = float(np.linalg.norm(theta))
    return (theta * (radius / norm) if norm > radius else theta), True


class _SquaredLoss:
    """The squared loss on sufficient statistics: the loss hooks of :class:`erm.ERMMechanism`."""

    def check_data(self, data):
        return check_stats(data)

    def size(self, data) -> tuple[int, int]:
        return int(data.n), int(data.d)

    def lipschitz(self, d: int) -> float:
        return lipschitz(d, self.radius)

    def smoothness(self, d: int) -> float:
        """``2d + reg`` bounds the eigenvalues of ``hess J = 2G/n + reg I``."""
        return 2.0 * d + self.reg

    def mean_gradient(self, data, theta: np.ndarray) -> np.ndarray:
        """``2 (G theta - c) / n`` at ``theta`` (d,) or at each row of ``theta`` (k, d)."""
        G, c = np.asarray(data.G, dtype=np.float64), np.asarray(data.c, dtype=np.float64)
        return 2.0 * (theta @ G - c) / data.n

    def finish(self, data, theta: np.ndarray) -> np.ndarray:
        """Back to the data's units: ``theta * scale``."""
        return theta * data.scale

    def default_radius(self) -> float:
        return DEFAULT_RADIUS


class OutputPerturbation(_SquaredLoss, erm.OutputPerturbation):
    """Output perturbation for ridge regression on ``C`` (see the module docstring).

    Release ``(theta^ + Z) scale`` with ``theta^ = argmin_C J`` (:func:`constrained_ridge`,
    exact up to rounding) and ``Z`` gamma noise of density ∝ ``exp(-||z||_2 / s)``,
    ``s = min(2 L (1 + tol) / (n reg), 2 radius) / eps``, ``L = 2 sqrt(d) (1 + sqrt(d)
    radius)``: ε-DP, the ℓ2 K-norm mechanism on a statistic of ℓ2 sensitivity at most
    ``2L/(n reg)`` (strong convexity) and at most ``2 radius`` (the diameter of ``C``).  ``tol`` (default
    1e-9) is kept from the logistic version, where it covers an iterative solver; here it
    only adds a margin for rounding.  Audit: the closed-form statistic audit, as for
    logistic regression.
    """

    def __init__(self, *, reg=erm.DEFAULT_REG, radius=DEFAULT_RADIUS, tol=1e-9):
        super().__init__(reg=reg, tol=tol)
        self.radius = check_positive("radius", radius)

    def options(self) -> dict:
        return {"reg": self.reg, "radius": self.radius, "tol": self.tol}

    def sensitivity(self, n: int, d: int, lipschitz: float | None = None) -> float:
        """``min(2 L (1 + tol) / (n reg), 2 radius)``: both minimisers lie in ``C``, whose
        diameter caps the strong-convexity bound (the cap binds while ``n reg < L``)."""
        return min(super().sensitivity(n, d, lipschitz), 2.0 * self.radius)

    def minimiser(self, data):
        """``(theta^, 1, True)``: the exact constrained minimiser (deterministic)."""
        theta, _ = constrained_ridge(data.G, data.c, data.n, self.reg, self.radius)
        return theta, 1, True


class NoisyGD(_SquaredLoss, erm.NoisyGD):
    """Noisy projected gradient descent for ridge regression on ``C`` (chapter eq. 7.11–7.12).

    As :class:`kngflow.mechanisms.erm.NoisyGD` — gamma noise (ε-DP, ``s = 2 L T/(n eps)``)
    or Gaussian noise ((ε, δ)-DP, ``sigma = z 2L/n`` with ``z`` from dp_accounting's RDP
    accountant, or the chapter's printed σ) — with the squared loss's
    ``L = 2 sqrt(d) (1 + sqrt(d) radius)``, the step ``eta = 1 / (2d + reg)``, the gradient
    ``2 (G theta - c)/n + reg theta`` from the sufficient statistics, default ``radius = 1``
    (scaled units) and the release multiplied by ``scale``.  The audits (exact per step at
    public iterates, accountant) are the logistic version's.
    """

"""Private-ERM baselines for regularised logistic regression (Sarwate's chapter §7.3–7.4).

The logistic loss's hooks for the shared mechanisms of :mod:`kngflow.mechanisms.erm`
(output perturbation, noisy gradient descent), and the two that need the logistic loss
itself: objective perturbation (Chaudhuri et al.) and DP-SGD.

All four mechanisms target the minimiser of

    J(theta) = (1/n) sum_i l(theta; x_i, y_i) + (reg/2) ||theta||_2^2,
    l(theta; x, y) = log(1 + exp(x'theta)) - y x'theta,

(:mod:`kngflow.models.logistic.problem`; ``reg`` = Λ is a public constant).  Adjacency is
kngflow's: data sets of the same (public) size ``n`` differing in one record.

Constants (derived here, data independent)
------------------------------------------
As a function of ``t = x'theta`` the loss is ``l(t) = log(1 + e^t) - y t`` — the
chapter's ``log(1 + e^{-y~ t})`` with ``y~ = 2y - 1`` — with ``l'(t) = sigma(t) - y`` in
``(-1, 1)`` and ``l''(t) = sigma(t)(1 - sigma(t))`` in ``(0, 1/4]``
(:data:`LOSS_LIPSCHITZ`, :data:`LOSS_CURVATURE`).  Our records have ``x`` in a declared
ball (:mod:`kngflow.models.logistic.problem`), so ``||x||_2 <= R_2 = sup ||x||_2`` over it:
``sqrt(m)`` for the default box ``[-1, 1]^m``, ``r`` for an ℓ1 or ℓ2 ball of radius ``r``.
``theta -> l`` is ``L``-Lipschitz (``||grad l|| = |sigma - y| ||x|| < R_2``) with
``L = R_2`` (:func:`lipschitz`), and ``J`` is ``(R_2^2/4 + reg)``-smooth and
``reg``-strongly convex.  Output perturbation and the gradient methods carry ``L = R_2``
(``sqrt(m)`` for the box); objective perturbation runs Chaudhuri et al.'s
algorithm verbatim on the rescaled records ``x~ = x / R_2`` (``||x~|| <= 1``,
public map) with ``theta~ = R_2 theta`` (``x~'theta~ = x'theta``) and
``reg~ = reg / R_2^2`` (``reg/2 ||theta||^2 = reg~/2 ||theta~||^2``): the same ``J``, so
every mechanism estimates the same regularised MLE.  The mechanisms read the domain from
the data (:class:`~kngflow.models.logistic.problem.LogisticData`'s ``data_norm`` and
``radius``, public); the box's constants are the ``m``-only defaults below.

Default ``reg = 0.01`` (:data:`DEFAULT_REG`).  In Algorithm 3's design (``m = 7``,
``x ~ U[-1, 1]^7``) the per-record Fisher information is about ``0.065 I``, so the
regularised minimiser shrinks the MLE by about ``reg / (reg + 0.065)``, 13%; the
output-perturbation noise has mean norm ``2 m^{3/2} / (n reg eps)``, from about 0.02
(``n = 10^5, eps = 2``) to 24 (``n = 10^4, eps = 1/64``): over the studies' grid
(``n = 10^4..10^5``, ``eps = 1/64..2``) the error moves between noise-dominated and
bias-dominated regimes rather than sitting in one.  Smaller ``reg`` removes the bias
but makes output perturbation useless at ``n eps < 10^4``; larger ``reg`` makes every
mechanism estimate a heavily shrunk coefficient.

The release is ``estimate`` alone; ``info`` (sampler, acceptance, steps) is diagnostics.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import expit

from kngflow.mechanisms import erm
from kngflow.mechanisms.base import Release, check_choice, check_epsilon, check_int, check_positive, check_rng
from kngflow.mechanisms.claims import Density
from kngflow.mechanisms.hardening import Hardening, snap
from kngflow.mechanisms.erm import (DEFAULT_REG, SLACK_RULES, ERMMechanism, erm_release, audit_iterates,
                                    cms_constants, dpsgd_noise_multiplier, gaussian_gd_noise_multiplier,
                                    poisson_sample, printed_gd_sigma)
from kngflow.models.logistic.mechanisms import (certified_minimiser, check_logistic_data, objective_hardening,
                                                perturbed_log_density)
from kngflow.models.logistic.problem import BOX, perturbed_minimiser
from kngflow.problems.domains import RecordDomain
from kngflow.noise import knorm_noise

__all__ = [
    "OutputPerturbation",
    "ObjectivePerturbationChaudhuri",
    "NoisyGD",
    "DPSGD",
    "DEFAULT_REG",
    "LOSS_LIPSCHITZ",
    "LOSS_CURVATURE",
    "lipschitz",
    "squared_lipschitz",
    "regularised_minimiser",
    "chaudhuri_constants",
    "gaussian_gd_noise_multiplier",
    "dpsgd_noise_multiplier",
    "printed_gd_sigma",
    "poisson_sample",
    "audit_iterates",
]

#: ``sup |l'(t)|`` of the scalar logistic loss (not attained).
LOSS_LIPSCHITZ = 1.0
#: ``c = sup l''(t) = 1/4`` (at ``t = 0``).
LOSS_CURVATURE = 0.25


def lipschitz(m: int, domain: RecordDomain = BOX) -> float:
    """``L = R_2 = sup ||x||_2`` over the record ``domain``: the Lipschitz constant of ``l``
    (``sqrt(m)`` over the default box ``[-1, 1]^m``, ``r`` over an ℓ1 or ℓ2 ball)."""
    if domain == BOX:
        return math.sqrt(m)
    return domain.reach("l2", m)


def squared_lipschitz(m: int, domain: RecordDomain = BOX) -> float:
    """``L^2 = R_2^2``: ``m`` for the box (exact), ``r^2`` for an ℓ1 or ℓ2 ball."""
    return domain.squared_l2_reach(m)


def regularised_minimiser(data, reg: float, *, tol: float = 1e-9, max_iter: int = 100):
    """The minimiser of ``J`` (non-private): ``(theta, iterations, converged)``, with
    ``||grad J(theta)||_2 <= tol L / n`` when converged, so ``theta`` is within
    ``tol L / (n reg)`` of the exact minimiser."""
    n, d = data.X.shape
    return perturbed_minimiser(data.X, data.y, n * reg, np.zeros(d), tol * lipschitz(d, data.domain), max_iter)



class _LogisticLoss:
    """The logistic loss's hooks of :class:`kngflow.mechanisms.erm.ERMMechanism`."""

    def check_data(self, data):
        return check_logistic_data(data)

    def size(self, data) -> tuple[int, int]:
        """``(n, d)``: records and coefficients."""
        return data.X.shape

    def lipschitz(self, d: int) -> float:
        """``L``: a bound on one record's loss gradient ``||grad l(theta; z)||_2`` over the box."""
        return lipschitz(d)

    def lipschitz_of(self, data) -> float:
        """``L = R_2`` over the data's declared record domain."""
        return lipschitz(data.X.shape[1], data.domain)

    def smoothness(self, d: int) -> float:
        """A bound on the largest eigenvalue of ``hess J`` over the box: ``m/4 + reg``."""
        return d / 4.0 + self.reg

    def smoothness_of(self, data) -> float:
        """``R_2^2 / 4 + reg`` over the data's declared record domain (``m/4 + reg`` for the box)."""
        return squared_lipschitz(data.X.shape[1], data.domain) / 4.0 + self.reg

    def mean_gradient(self, data, theta: np.ndarray) -> np.ndarray:
        """``(1/n) sum_i grad l(theta; z_i)`` at ``theta`` (d,), or at each row of ``theta`` (k, d)."""
        X, y = data.X, data.y
        if theta.ndim == 1:
            return X.T @ (expit(X @ theta) - y) / X.shape[0]
        return (expit(X @ theta.T) - y[:, None]).T @ X / X.shape[0]

    def finish(self, data, theta: np.ndarray) -> np.ndarray:
        """The estimate in the data's units (identity here)."""
        return theta

    def default_radius(self) -> float:
        """Radius of the ball ``C`` of projected methods: ``sqrt(2 log 2 / reg)`` holds the
        minimiser (``reg/2 ||theta^||^2 <= J(theta^) <= J(0) = log 2``)."""
        return math.sqrt(2.0 * math.log(2.0) / self.reg)


class OutputPerturbation(_LogisticLoss, erm.OutputPerturbation):
    __doc__ = erm.OutputPerturbation.__doc__

    def minimiser(self, data):
        """``(theta^, iterations, converged)`` (deterministic)."""
        return regularised_minimiser(data, self.reg, tol=self.tol, max_iter=self.max_iter)


class NoisyGD(_LogisticLoss, erm.NoisyGD):
    __doc__ = erm.NoisyGD.__doc__


def chaudhuri_constants(epsilon: float, n: int, reg: float, c: float = LOSS_CURVATURE) -> tuple[float, float]:
    """``(eps', Delta)`` of CMS 2011 Algorithm 2 as printed (records ``||x|| <= 1``, ridge
    ``reg``, curvature ``c``, default the logistic loss's 1/4):
    :func:`~kngflow.mechanisms.erm.cms_constants` with ``rule="cms"``."""
    return cms_constants(epsilon, n, reg, c)


class ObjectivePerturbationChaudhuri(_LogisticLoss, ERMMechanism):
    """Objective perturbation, Chaudhuri, Monteleoni & Sarwate 2011, Algorithm 2 (ℓ2 noise).

    On the rescaled records ``x~ = x / R_2`` (``||x~||_2 <= 1``; ``theta~ = R_2 theta``,
    ``reg~ = reg / R_2^2``, see the module docstring; ``R_2 = sqrt(m)`` for the box), with ``c = 1/4``:

    1. ``eps' = eps - log(1 + 2c/(n reg~) + c^2/(n reg~)^2)``;
    2. if ``eps' > 0``: ``Delta = 0``; else ``Delta = c/(n(e^{eps/4} - 1)) - reg~``,
       ``eps' = eps/2``;
    3. ``b`` with density ∝ ``exp(-(eps'/2) ||b||_2)``;
    4. ``theta~ = argmin J~(theta~) + b'theta~ / n + Delta/2 ||theta~||^2``; release
       ``theta = theta~ / R_2``.

    In the original coordinates step 4 minimises ``n J(theta) + n R_2^2 Delta/2 ||theta||^2 +
    V'theta`` with ``V = R_2 b``, ``V ∝ exp(-eps' ||V|| / (2 R_2))``.  When
    ``eps' <= 0``, ``Delta > reg~`` (``eps <= 2 log(1 + c/(n reg~))`` gives
    ``e^{eps/4} - 1 < c/(2 n reg~)``) and the total ridge ``c/(n(e^{eps/4} - 1))`` makes
    the log term exactly ``eps/2``.

    Conditions of CMS Theorem 9, checked: the regulariser ``||.||^2/2`` is 1-strongly
    convex and twice differentiable; ``l`` is convex and twice differentiable in ``t``
    with ``|l'| < 1 = LOSS_LIPSCHITZ`` and ``0 < l'' <= 1/4 = LOSS_CURVATURE`` (derived in
    the module docstring, checked numerically in the tests); ``||x~||_2 <= 1`` follows
    from the declared record domain (``|x_ij| <= 1`` for the box), which
    :func:`check_logistic_data` enforces.  Privacy is that
    of the exact minimiser (the proof is a change of variables ``b(theta~)``); Newton
    stops at ``||grad|| <= tol (n + ||V||)`` (sum scale), within ``tol (n + ||V||) / (n
    (reg + m Delta))`` of it: a data-dependent perturbation not covered by the proof,
    negligible in studies (chapter §7.3.2).  ``info["steps"]`` is a non-private diagnostic.
    """

    kind = "objective_chaudhuri"
    snaps_itself = True  # hardened releases are snapped from their double-double value

    def __init__(self, *, reg=DEFAULT_REG, slack_rule="cms", tol=1e-10, max_iter=100):
        super().__init__(reg)
        self.slack_rule = check_choice("slack_rule", slack_rule, SLACK_RULES)
        self.tol = check_positive("tol", tol)
        self.max_iter = check_int("max_iter", max_iter, 1)

    def options(self) -> dict:
        return {"reg": self.reg, **({} if self.slack_rule == "cms" else {"slack_rule": self.slack_rule})}

    def constants(self, n: int, d: int, epsilon: float, domain: RecordDomain = BOX) -> tuple[float, float]:
        """``(eps', Delta)`` of Algorithm 2 on the rescaled problem (``reg~ = reg / R_2^2``,
        ``reg / m`` for the box), by the ``slack_rule``: ``"cms"`` as printed, ``"larger"``
        taking the slack branch whenever it leaves the noise the larger ``eps'``
        (:func:`~kngflow.mechanisms.erm.cms_constants`; both ε-DP)."""
        return cms_constants(epsilon, n, self.reg / squared_lipschitz(d, domain), LOSS_CURVATURE, self.slack_rule)

    def law(self, data, epsilon: float) -> tuple[float, float]:
        """``(scale, gamma)``: ``V ∝ exp(-||V||_2 / scale)``, ``scale = 2 R_2 / eps'``, and the
        ridge ``gamma = n (reg + R_2^2 Delta)`` of the minimised objective."""
        n, d = data.X.shape
        domain = data.domain
        eps_p, delta_reg = self.constants(n, d, epsilon, domain)
        return 2.0 * lipschitz(d, domain) / eps_p, n * (self.reg + squared_lipschitz(d, domain) * delta_reg)

    # ---------------------------------------------------------------- audit seam
    #: ``log_density`` is exact up to the noise's normaliser (which depends only on the
    #: public n): exact audits compare it pointwise
    density_normalised = True

    def privacy_claim(self) -> Density:
        """The release's exact log density (up to a data-independent constant) on :meth:`parameter_box`."""
        return Density(log_density=self.log_density, parameter_box=self.parameter_box, normalised=True)

    def log_density(self, data, epsilon, theta):
        """Log density of the release at ``theta``: the release minimises ``n J + n R_2^2 Delta/2
        |.|^2 + V'.`` with ``V ∝ exp(-eps' ||V||_2 / (2 R_2))``, a change of variables
        (:func:`~kngflow.models.logistic.mechanisms.perturbed_log_density`)."""
        data = self.check_data(data)
        scale, gamma = self.law(data, check_epsilon(epsilon))
        return perturbed_log_density(data, theta, gamma, scale, "l2")

    def parameter_box(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """A box for exact audits (the release lives on ``R^m``; see objective_ext's)."""
        return np.full(d, -40.0), np.full(d, 40.0)

    def release(self, data, epsilon, rng) -> Release:
        data = self.check_data(data)
        epsilon = check_epsilon(epsilon)
        rng = check_rng(rng)
        n, d = data.X.shape
        scale, gamma = self.law(data, epsilon)  # V = R_2 b, b ∝ exp(-(eps'/2)||b||)
        if not (math.isfinite(scale) and math.isfinite(gamma)):  # eps ~ 1e-300: 0-DP fallback
            return erm_release(np.zeros(d), 0, "none")
        V = knorm_noise(rng, "l2", d, scale)
        if self.hardened:
            h = self.hardening(data, epsilon)
            hi, lo, it = certified_minimiser(data.X, data.y, gamma, V, self.max_iter, h.eta)
            theta = snap(hi, h, rng, lo)
        else:
            theta, it, _ = perturbed_minimiser(data.X, data.y, gamma, V, self.tol * (n + float(np.linalg.norm(V))),
                                               self.max_iter)
        return erm_release(theta, it)

    def hardening(self, data, epsilon) -> Hardening:
        """:func:`~kngflow.models.logistic.mechanisms.objective_hardening` with Algorithm 2's
        ridge ``n (reg + R_2^2 Delta)`` and ℓ2 noise of scale ``2 L / eps'``."""
        data = self.check_data(data)
        n, d = data.X.shape
        scale, gamma = self.law(data, epsilon)
        return objective_hardening(n, d, gamma, scale, "l2", epsilon, data.domain)


class DPSGD(_LogisticLoss, erm.DPSGD):
    """DP-SGD (:class:`kngflow.mechanisms.erm.DPSGD`) for the logistic loss: per-example
    gradients ``x_i (sigma(x_i'theta) - y_i)``, clipped to ``C`` (default ``L = R_2``, ``sqrt(m)``
    for the box, which bounds every one of them: no clipping bias), default
    ``lr = 1 / (R_2^2/4 + reg)``.  At the
    audited iterates of radius :data:`~kngflow.mechanisms.erm.DPSGD_AUDIT_RADIUS`
    ``sigma(-40) ~ 4e-18``: the per-example gradients there are at their limits
    ``x (1{x'theta > 0} - y)``.
    """

    def per_example_gradients(self, data, theta: np.ndarray, idx) -> np.ndarray:
        """``x_i (sigma(x_i'theta) - y_i)`` for the records ``idx`` (rows)."""
        Xb = data.X[idx]
        return Xb * (expit(Xb @ theta) - data.y[idx])[:, None]

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
(:data:`LOSS_LIPSCHITZ`, :data:`LOSS_CURVATURE`).  Our records have ``x`` in
``[-1, 1]^m``, so ``||x||_2 <= sqrt(m)``, not 1: ``theta -> l`` is ``L``-Lipschitz
(``||grad l|| = |sigma - y| ||x|| < sqrt(m)``) with ``L = sqrt(m)``, and ``J`` is
``(m/4 + reg)``-smooth and ``reg``-strongly convex.  Output perturbation and the
gradient methods carry ``L = sqrt(m)``; objective perturbation runs Chaudhuri et al.'s
algorithm verbatim on the rescaled records ``x~ = x / sqrt(m)`` (``||x~|| <= 1``,
public map) with ``theta~ = sqrt(m) theta`` (``x~'theta~ = x'theta``) and
``reg~ = reg / m`` (``reg/2 ||theta||^2 = reg~/2 ||theta~||^2``): the same ``J``, so
every mechanism estimates the same regularised MLE.

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
from numbers import Real

import numpy as np
from scipy.special import expit

from kngflow.mechanisms import erm
from kngflow.mechanisms.base import Release, check_epsilon, check_int, check_positive, check_probability, check_rng
from kngflow.mechanisms.claims import Composed, Density, StatisticNoise
from kngflow.mechanisms.hardening import UNIT_ROUNDOFF, Hardening, lipschitz_hardening, snap
from kngflow.mechanisms.erm import (GAUSS_REACH, DEFAULT_REG, _ERM, gaussian_lipschitz, _release, audit_iterates, dpsgd_accountant_epsilon,
                                    dpsgd_noise_multiplier, gaussian_gd_noise_multiplier, poisson_sample,
                                    printed_gd_sigma)
from kngflow.models.logistic.mechanisms import (certified_minimiser, check_logistic_data, objective_hardening,
                                                perturbed_log_density)
from kngflow.models.logistic.problem import perturbed_minimiser
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
#: Largest ε used to calibrate DP-SGD: a mechanism that is
#: (EPS_CAP, δ)-DP is (ε, δ)-DP for every ε >= EPS_CAP, and the subsampled-Gaussian RDP
#: series stay well conditioned.  At EPS_CAP the noise is already negligible in the studies.
EPS_CAP = 64.0


def lipschitz(m: int) -> float:
    """``L = sqrt(m) = sup ||x||_2`` over ``[-1, 1]^m``: the Lipschitz constant of ``l``."""
    return math.sqrt(m)


def regularised_minimiser(data, reg: float, *, tol: float = 1e-9, max_iter: int = 100):
    """The minimiser of ``J`` (non-private): ``(theta, iterations, converged)``, with
    ``||grad J(theta)||_2 <= tol L / n`` when converged, so ``theta`` is within
    ``tol L / (n reg)`` of the exact minimiser."""
    n, d = data.X.shape
    return perturbed_minimiser(data.X, data.y, n * reg, np.zeros(d), tol * lipschitz(d), max_iter)



class _LogisticLoss:
    """The logistic loss's hooks of :class:`kngflow.mechanisms.erm._ERM`."""

    def check_data(self, data):
        return check_logistic_data(data)

    def size(self, data) -> tuple[int, int]:
        """``(n, d)``: records and coefficients."""
        return data.X.shape

    def lipschitz(self, d: int) -> float:
        """``L``: a bound on one record's loss gradient ``||grad l(theta; z)||_2`` where it is used."""
        return lipschitz(d)

    def smoothness(self, d: int) -> float:
        """A bound on the largest eigenvalue of ``hess J``: ``m/4 + reg``."""
        return d / 4.0 + self.reg

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
    """``(eps', Delta)`` of CMS 2011 Algorithm 2 (records ``||x|| <= 1``, ridge ``reg``):

    ``eps' = eps - log(1 + 2c/(n reg) + c^2/(n reg)^2)``; if ``eps' > 0``, ``Delta = 0``,
    else ``Delta = c / (n (e^{eps/4} - 1)) - reg`` and ``eps' = eps / 2``."""
    a = c / (n * reg)
    eps_p = epsilon - 2.0 * math.log1p(a)  # log(1 + 2a + a^2) = 2 log(1 + a)
    if eps_p > 0.0:
        return eps_p, 0.0
    return epsilon / 2.0, c / (n * math.expm1(epsilon / 4.0)) - reg


class ObjectivePerturbationChaudhuri(_LogisticLoss, _ERM):
    """Objective perturbation, Chaudhuri, Monteleoni & Sarwate 2011, Algorithm 2 (ℓ2 noise).

    On the rescaled records ``x~ = x / sqrt(m)`` (``||x~||_2 <= 1``; ``theta~ = sqrt(m) theta``,
    ``reg~ = reg / m``, see the module docstring), with ``c = 1/4``:

    1. ``eps' = eps - log(1 + 2c/(n reg~) + c^2/(n reg~)^2)``;
    2. if ``eps' > 0``: ``Delta = 0``; else ``Delta = c/(n(e^{eps/4} - 1)) - reg~``,
       ``eps' = eps/2``;
    3. ``b`` with density ∝ ``exp(-(eps'/2) ||b||_2)``;
    4. ``theta~ = argmin J~(theta~) + b'theta~ / n + Delta/2 ||theta~||^2``; release
       ``theta = theta~ / sqrt(m)``.

    In the original coordinates step 4 minimises ``n J(theta) + n m Delta/2 ||theta||^2 +
    V'theta`` with ``V = sqrt(m) b``, ``V ∝ exp(-eps' ||V|| / (2 sqrt(m)))``.  When
    ``eps' <= 0``, ``Delta > reg~`` (``eps <= 2 log(1 + c/(n reg~))`` gives
    ``e^{eps/4} - 1 < c/(2 n reg~)``) and the total ridge ``c/(n(e^{eps/4} - 1))`` makes
    the log term exactly ``eps/2``.

    Conditions of CMS Theorem 9, checked: the regulariser ``||.||^2/2`` is 1-strongly
    convex and twice differentiable; ``l`` is convex and twice differentiable in ``t``
    with ``|l'| < 1 = LOSS_LIPSCHITZ`` and ``0 < l'' <= 1/4 = LOSS_CURVATURE`` (derived in
    the module docstring, checked numerically in the tests); ``||x~||_2 <= 1`` follows
    from ``|x_ij| <= 1``, which :func:`check_logistic_data` enforces.  Privacy is that
    of the exact minimiser (the proof is a change of variables ``b(theta~)``); Newton
    stops at ``||grad|| <= tol (n + ||V||)`` (sum scale), within ``tol (n + ||V||) / (n
    (reg + m Delta))`` of it: a data-dependent perturbation not covered by the proof,
    negligible in studies (chapter §7.3.2).  ``info["steps"]`` is a non-private diagnostic.
    """

    kind = "objective_chaudhuri"

    def __init__(self, *, reg=DEFAULT_REG, tol=1e-10, max_iter=100):
        super().__init__(reg)
        self.tol = check_positive("tol", tol)
        self.max_iter = check_int("max_iter", max_iter, 1)

    def options(self) -> dict:
        return {"reg": self.reg}

    def constants(self, n: int, d: int, epsilon: float) -> tuple[float, float]:
        """``(eps', Delta)`` of Algorithm 2 on the rescaled problem (``reg~ = reg/m``)."""
        return chaudhuri_constants(epsilon, n, self.reg / d)

    # ---------------------------------------------------------------- audit seam
    #: ``log_density`` is exact up to the noise's normaliser (which depends only on the
    #: public n): exact audits compare it pointwise
    density_normalised = True

    def privacy_claim(self) -> Density:
        """The release's exact log density (up to a data-independent constant) on :meth:`parameter_box`."""
        return Density(log_density=self.log_density, parameter_box=self.parameter_box, normalised=True)

    def log_density(self, data, epsilon, theta):
        """Log density of the release at ``theta``: the release minimises ``n J + n m Delta/2
        |.|^2 + V'.`` with ``V ∝ exp(-eps' ||V||_2 / (2 sqrt(m)))``, a change of variables
        (:func:`~kngflow.models.logistic.mechanisms.perturbed_log_density`)."""
        data = self.check_data(data)
        n, d = data.X.shape
        eps_p, delta_reg = self.constants(n, d, check_epsilon(epsilon))
        return perturbed_log_density(data, theta, n * (self.reg + d * delta_reg), 2.0 * lipschitz(d) / eps_p, "l2")

    def parameter_box(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """A box for exact audits (the release lives on ``R^m``; see objective_ext's)."""
        return np.full(d, -40.0), np.full(d, 40.0)

    def release(self, data, epsilon, rng) -> Release:
        data = self.check_data(data)
        epsilon = check_epsilon(epsilon)
        rng = check_rng(rng)
        n, d = data.X.shape
        eps_p, delta_reg = self.constants(n, d, epsilon)
        scale = 2.0 * lipschitz(d) / eps_p  # V = sqrt(m) b, b ∝ exp(-(eps'/2)||b||)
        gamma = n * (self.reg + d * delta_reg)
        if not (math.isfinite(scale) and math.isfinite(gamma)):  # eps ~ 1e-300: 0-DP fallback
            return _release(np.zeros(d), 0, "none")
        V = knorm_noise(rng, "l2", d, scale)
        if self.hardened:
            theta, it = certified_minimiser(data.X, data.y, gamma, V, self.max_iter)
        else:
            theta, it, _ = perturbed_minimiser(data.X, data.y, gamma, V, self.tol * (n + float(np.linalg.norm(V))),
                                               self.max_iter)
        return _release(theta, it)

    def hardening(self, data, epsilon) -> Hardening:
        """:func:`~kngflow.models.logistic.mechanisms.objective_hardening` with Algorithm 2's
        ridge ``n (reg + m Delta)`` and ℓ2 noise of scale ``2 L / eps'``."""
        n, d = self.check_data(data).X.shape
        eps_p, delta_reg = self.constants(n, d, epsilon)
        return objective_hardening(n, d, n * (self.reg + d * delta_reg), 2.0 * lipschitz(d) / eps_p, "l2", epsilon)


# --------------------------------------------------------------------------------------
# accountant calibrations (dp_accounting; cached: same arguments -> same noise multiplier)
# --------------------------------------------------------------------------------------


#: radius of DP-SGD's audited iterates (its iterates are not projected): ``sigma(-40) ~ 4e-18``,
#: so per-example gradients there are at their limits ``x (1{x'theta > 0} - y)``
DPSGD_AUDIT_RADIUS = 40.0



class DPSGD(_LogisticLoss, _ERM):
    """DP-SGD (Abadi et al. 2016; chapter §7.4.1) for ``J`` with Poisson subsampling.

    ``q = sampling_rate`` if given, else ``min(1, batch_size / n)``;
    ``T = min(ceil(epochs / q), max_steps)``; from 0, per
    step: include each record independently with probability ``q``; clip each sampled
    per-example gradient ``x_i (sigma(x_i'theta) - y_i)`` to ℓ2 norm ``clip`` (C; default
    ``L = sqrt(m)``, which bounds every such gradient, so no clipping bias); ``g = (sum of
    clipped + N(0, (z C)^2 I)) / (q n) + reg theta``; ``theta <- theta - lr g`` (default
    ``lr = 1 / (m/4 + reg)``, one over ``J``'s smoothness).  The normaliser ``q n``
    (expected batch size) is public: ``n`` is public under kngflow's adjacency.

    Privacy.  The per-step query (sum of clipped gradients of a Poisson sample) is the
    subsampled Gaussian mechanism with sensitivity C under add-or-remove-one; its T-fold
    adaptive composition is (ε_a, δ_a)-DP with ``z`` calibrated by dp_accounting's RDP
    accountant (:func:`dpsgd_noise_multiplier`, cached).  kngflow's adjacency replaces a
    record (fixed n); replacement is a removal followed by an addition, so group privacy
    (size 2) gives ``(2 ε_a, (1 + e^{ε_a}) δ_a)``.  The mechanism calibrates
    ``ε_a = ε/2``, ``δ_a = δ / (1 + e^{ε/2})``: (ε, δ)-DP under replacement.  (This costs
    noise: the RDP accountant does not support Poisson subsampling under replace-one, and
    the tight PLD accountant with ``REPLACE_ONE`` takes 10–100 s per calibration.)

    (The group-privacy step applies the add-or-remove guarantee to ``D minus the record``:
    the mechanism, with the public ``n`` in ``q`` and the normaliser, is defined on data
    sets of any size.)

    ε above :data:`EPS_CAP` is calibrated at the cap; where the accountant cannot certify
    the target (tiny ε, below the floor of the RDP orders used — under 1e-3 at δ = 1e-5)
    the release is the data-independent 0 (0-DP, ``info["sampler"] = "none"``).

    Audit.  With ``q = 1`` (``sampling_rate = 1``, or ``batch_size >= n``) a step is the
    Gaussian mechanism on the sum of clipped per-example gradients at the public iterate,
    then an affine bijection (``lr``, ``q n`` public): the exact audit
    (:func:`~kngflow.audit.statistic_audit`) reads ``mu = ||S_D - S_D'||_2 / (z C)`` at
    ``theta = 0`` and at points of radius :data:`DPSGD_AUDIT_RADIUS` (the iterates are not
    projected), composes the ``T`` steps exactly (``sqrt(T) mu``) and checks the exact ε at
    δ of that Gaussian mechanism — under replace-one directly, with no group-privacy step.
    With ``q < 1`` the step is a subsampled mixture with no closed form: the accountant
    audit (:func:`~kngflow.audit.accountant_audit`) re-checks dp_accounting's ε for the
    configuration ``(z, q, T)`` at ``δ_a``, doubled by group privacy, against ε.  The
    accountant audit runs for ``q = 1`` as well.
    """

    kind = "dpsgd"

    def __init__(self, *, reg=DEFAULT_REG, batch_size=256, sampling_rate=None, epochs=5.0, max_steps=5000,
                 clip=None, lr=None, delta=1e-5):
        super().__init__(reg)
        self.batch_size = check_int("batch_size", batch_size, 1)
        self.sampling_rate = None
        if sampling_rate is not None:
            if not isinstance(sampling_rate, Real) or isinstance(sampling_rate, bool):
                raise TypeError(f"sampling_rate must be a real number in (0, 1], got {type(sampling_rate).__name__}")
            if not 0.0 < sampling_rate <= 1.0:  # also rejects NaN
                raise ValueError(f"sampling_rate must lie in (0, 1], got {sampling_rate!r}")
            self.sampling_rate = float(sampling_rate)
        self.epochs = check_positive("epochs", epochs)
        self.max_steps = check_int("max_steps", max_steps, 1)
        self.clip = None if clip is None else check_positive("clip", clip)
        self.lr = None if lr is None else check_positive("lr", lr)
        self.delta = check_probability("delta", delta)

    def options(self) -> dict:
        out = {"reg": self.reg, "epochs": self.epochs, "max_steps": self.max_steps, "delta": self.delta}
        if self.sampling_rate is None:
            out["batch_size"] = self.batch_size
        else:
            out["sampling_rate"] = self.sampling_rate
        if self.clip is not None:
            out["clip"] = self.clip
        if self.lr is not None:
            out["lr"] = self.lr
        return out

    def schedule(self, n: int) -> tuple[float, int]:
        """``(q, T)``."""
        q = self.sampling_rate if self.sampling_rate is not None else min(1.0, self.batch_size / n)
        return q, int(min(math.ceil(self.epochs / q), self.max_steps))

    def accountant_target(self, epsilon: float) -> tuple[float, float]:
        """``(ε_a, δ_a)`` under add-or-remove that give (ε, δ) under replacement."""
        e = min(epsilon, EPS_CAP)
        return e / 2.0, self.delta / (1.0 + math.exp(e / 2.0))

    def noise_multiplier(self, n: int, epsilon: float) -> float | None:
        q, T = self.schedule(n)
        ea, da = self.accountant_target(epsilon)
        return dpsgd_noise_multiplier(ea, da, q, T)

    def clip_norm(self, d: int) -> float:
        """``C``: ``clip``, default ``L = sqrt(m)``."""
        return lipschitz(d) if self.clip is None else self.clip

    # ---------------------------------------------------------------- audit seam
    #: the step's statistic is a sum over records (the rest cancels in ``S_D - S_D'``)
    statistic_additive = True
    statistic_description = ("the sum S of clipped per-example gradients at the step's public iterate (q = 1: "
                             "every record); the step releases theta - lr ((S + N(0, (zC)^2 I)) / (q n) + reg theta), "
                             "an affine bijection of S + noise")

    def privacy_claim(self) -> StatisticNoise:
        """Noisy steps at public iterates (:meth:`statistic`, :meth:`statistic_noise`,
        :meth:`statistic_steps`), with the accountant's ε when the noise is Gaussian (δ > 0)."""
        parts = dict(statistic=self.statistic, noise=self.statistic_noise, steps=self.statistic_steps,
                     iterates=self.audit_iterates, additive=self.statistic_additive,
                     description=self.statistic_description, delta=float(self.delta))
        if self.delta > 0:
            return Composed(accountant_epsilon=self.accountant_epsilon, **parts)
        return StatisticNoise(**parts)

    def audit_iterates(self, d: int) -> np.ndarray:
        """``theta_0 = 0`` and points of radius :data:`DPSGD_AUDIT_RADIUS` (:func:`audit_iterates`)."""
        return audit_iterates(d, DPSGD_AUDIT_RADIUS)

    def statistic(self, data) -> np.ndarray:
        """``S(theta) = sum_i clip_C(x_i (sigma(x_i'theta) - y_i))`` at each of :meth:`audit_iterates` (rows)."""
        data = self.check_data(data)
        X, y = data.X, data.y
        theta = self.audit_iterates(X.shape[1])
        r = expit(X @ theta.T) - y[:, None]  # (n, k): per-example gradient x_i r_ik
        norms = np.abs(r) * np.sqrt(np.einsum("ij,ij->i", X, X))[:, None]
        scale = np.minimum(1.0, self.clip_norm(X.shape[1]) / np.maximum(norms, 1e-300))
        return (r * scale).T @ X

    def statistic_noise(self, data, epsilon: float):
        """``("gaussian", z C)`` on the sum (infinite for the data-independent release)."""
        n, d = data.X.shape
        z = self.noise_multiplier(n, epsilon)
        return "gaussian", (math.inf if z is None else z * self.clip_norm(d))

    def statistic_steps(self, n: int) -> int | None:
        """``T`` when ``q = 1``; None for Poisson-subsampled steps (no closed form)."""
        q, T = self.schedule(n)
        return T if q >= 1.0 else None

    def accountant_epsilon(self, n: int, epsilon: float, run_epsilon: float | None = None) -> float:
        """ε under replace-one that dp_accounting's RDP accountant certifies, at ``delta``, for
        the noise multiplier calibrated at ``run_epsilon``: ``2 ε_a`` with ``ε_a`` the
        add-or-remove ε of ``(z, q, T)`` at ``δ_a = δ / (1 + e^{ε/2})`` (group privacy; 0 for
        the data-independent release)."""
        q, T = self.schedule(n)
        z = self.noise_multiplier(n, epsilon if run_epsilon is None else run_epsilon)
        if z is None:
            return 0.0
        return 2.0 * dpsgd_accountant_epsilon(z, q, T, self.accountant_target(epsilon)[1])

    def hardening(self, data, epsilon) -> Hardening:
        """Lipschitz route on each step's noisy sum ``S_b + N(0, (zC)^2 I)`` (site
        "statistic", ``T`` snaps; the iterates and the release are post-processing).

        Given the Poisson batch ``b`` (drawn without looking at the data), the step is
        Gaussian around ``S_b(D)``, so the rounding lemma holds batch by batch with
        :func:`~kngflow.mechanisms.erm.gaussian_lipschitz` ``(d, zC)``, and so for the
        mixture over batches.  Clamp ``B = n C + 64 zC``.  Rounding: ``S_b`` sums at most ``n``
        clipped gradients of norm at most ``C``, within ``n u n C`` in any order of summation;
        the sums with the noise and the dither add ``16 u 2B``.  ``u = 2^-53``.
        """
        n, d = self.check_data(data).X.shape
        z = self.noise_multiplier(n, epsilon)
        C = self.clip_norm(d)
        q, T = self.schedule(n)
        sigma = (z if z is not None else 1.0) * C
        bound = n * C + GAUSS_REACH * sigma
        eta = (float(n) ** 2 * C + 32.0 * bound) * UNIT_ROUNDOFF
        return lipschitz_hardening(gaussian_lipschitz(d, sigma), bound, eta, d, epsilon, snaps=T, site="statistic")

    def release(self, data, epsilon, rng) -> Release:
        data = self.check_data(data)
        epsilon = check_epsilon(epsilon)
        rng = check_rng(rng)
        n, d = data.X.shape
        q, T = self.schedule(n)
        z = self.noise_multiplier(n, epsilon)
        if z is None:
            return _release(np.zeros(d), 0, "none")
        C = self.clip_norm(d)
        lr = self.lr if self.lr is not None else 1.0 / (d / 4.0 + self.reg)
        X, y, reg, norm = data.X, data.y, self.reg, q * n
        h = self.hardening(data, epsilon) if self.hardened else None
        # the dither comes from a stream 2^128 draws ahead, so the batches and the noise are
        # those of the unhardened release (the hardened one is its snapping, step by step)
        dither = np.random.Generator(rng.bit_generator.jumped()) if h is not None else None
        theta = np.zeros(d)
        for _ in range(T):
            idx = poisson_sample(rng, n, q)
            Xb = X[idx]
            G = Xb * (expit(Xb @ theta) - y[idx])[:, None]
            scale = np.minimum(1.0, C / np.maximum(np.sqrt(np.einsum("ij,ij->i", G, G)), 1e-300))
            s = scale @ G + rng.standard_normal(d) * (z * C)
            if h is not None:
                s = snap(s, h, dither)
            theta = theta - lr * (s / norm + reg * theta)
        return _release(theta, T)

"""Mechanisms for the Huber-hinge SVM; the loss and its constants are derived in
:mod:`kngflow.models.svm.problem` (``L = R_2``, ``c = R_2^2/(2h)``, ``Delta_K = 2 R_K`` with
``R_K = sup ||x||_K`` over the data's declared record domain: ``L = 1``, ``c = 1/(2h)``,
``Delta_K = 2 sup{||x||_K : ||x||_2 <= 1}`` for the default unit ball).

Every mechanism targets (or, for KNG, centres on) the minimiser of

    J(w) = (1/n) sum_i l_h(y_i x_i'w) + (reg/2) ||w||_2^2,

with ``reg`` (Λ) a public option (default :data:`DEFAULT_REG`, the problem's default).
Adjacency is kngflow's: data sets of the same public size ``n`` differing in one record.

* :class:`NonPrivate`: the minimiser (semismooth Newton).
* :class:`OutputPerturbation`, :class:`NoisyGD`: the shared ERM family
  (:mod:`kngflow.mechanisms.erm`) on the Huber hinge's hooks.
* :class:`ObjectivePerturbation`: CMS 2011 Algorithm 2 with ``c = 1/(2h)`` and its slack
  term ``Delta``.
* :class:`ExtendedObjectivePerturbation`: Awan & Slavković's Algorithm 2 in any norm, with
  the regulariser's curvature counted.
* :class:`DPSGD`: DP-SGD with Poisson subsampling and the RDP accountant.
* :class:`KNG`: KNG on the gradient of ``n J`` (Huber hinge) by the gradient map.
* :class:`HingeKNG`: KNG on the hinge's subgradient plus the ridge, by the surrogate map
  (the Huber hinge as the smooth surrogate).
"""

from __future__ import annotations

import copy
import math

import numpy as np

from kngflow.mechanisms import erm
from kngflow.mechanisms.base import (SAMPLER_DIAGNOSTICS, Mechanism, Release, check_choice, check_epsilon, check_int,
                                     check_positive, check_probability, check_rng)
from kngflow.mechanisms.claims import Density
from kngflow.mechanisms.erm import (DEFAULT_REG, DPSGD_AUDIT_RADIUS, EPS_CAP, SLACK_RULES, erm_release,
                                    certified_ridge_minimiser, cms_constants)
from kngflow.mechanisms.hardening import Hardening, coupling_hardening, snap, spread_grid
from kngflow.mechanisms.generic import NORMS, GenericKNG, NonPrivateBase
from kngflow.models.svm.problem import (LIPSCHITZ, UNIT_BALL, SVMData, check_svm_data, curvature,
                                        gradient_sensitivity, hinge_gradient, huber_gradient, huber_gradient_dd,
                                        huber_hessian, lipschitz, regularised_minimiser)
from kngflow.problems.domains import RecordDomain
from kngflow.noise import knorm_noise

__all__ = ["NonPrivate", "OutputPerturbation", "NoisyGD", "ObjectivePerturbation", "ExtendedObjectivePerturbation",
           "DPSGD", "KNG", "HingeKNG", "DEFAULT_REG", "SLACK_RULES", "cms_constants", "perturbed_log_density",
           "huber_derivatives", "surrogate_smoothing", "EPS_CAP", "DPSGD_AUDIT_RADIUS", "KNG_PROPOSALS",
           "objective_hardening", "OBJECTIVE_ETA_BITS"]

_ORD = {"l1": 1, "l2": 2, "linf": np.inf}

#: a hardened objective-perturbation release is certified in double-double within
#: 2^-OBJECTIVE_ETA_BITS of its grid (the coupling route's δ′ - δ is (1 + e^ε) 2 d 2^-48)
OBJECTIVE_ETA_BITS = 48
#: a K-norm noise vector's ℓ2 norm exceeds this many times ``(d + 1) sqrt(d)`` noise scales
#: with probability far below any δ (its gamma radius beyond 64 times its mean)
_NOISE_REACH = 64.0


def objective_hardening(n: int, d: int, norm: str, scale: float, ridge: float, reg: float, h: float,
                        domain: RecordDomain = UNIT_BALL) -> Hardening:
    """Coupling route (:mod:`kngflow.mechanisms.hardening`) for the minimiser ``w`` of
    ``sum_i l_h + ridge/2 |w|^2 + V'w``, ``V ∝ exp(-||V||_norm / scale)``, certified in
    double-double (``site = "sampler"``).

    Why not the Lipschitz route of the logistic loss: the release's density is
    ``f_V(V(w)) det H(w)`` and ``H(w) = sum_i l_h'' x_i x_i' + ridge I`` is piecewise constant,
    jumping where a margin crosses ``1 +- h`` (by a factor up to ``(1 + c/ridge)`` per record,
    all ``n`` at once when the records share a margin), so no public ``L`` bounds the density's
    log-Lipschitz constant.  The coupling route needs none: ``P(Y != Ŷ) <= 2 d η / Λ``.

    Grid: the spread proxy ``s = scale / (ridge + n c)`` (``c = R_2^2/(2h)``: the noise's
    per-coordinate scale over the largest eigenvalue of ``H``, a public lower bound on the
    linearised release's standard deviation) gives ``Λ = 2^(floor(log2 s) - 4)``
    (:func:`~kngflow.mechanisms.hardening.spread_grid`), at most ``2^-12`` of the clamp.
    Clamp: ``B = sqrt(2/reg) + 64 (d + 1) sqrt(d) scale / ridge`` (``||w_0||_2 <= sqrt(2 n /
    ridge) <= sqrt(2/reg)`` for the noiseless minimiser since ``l_h(0) = 1``, and
    ``||w - w_0||_2 <= ||V||_2 / ridge`` by strong convexity).  Rounding: ``η = Λ 2^-48``;
    :func:`~kngflow.mechanisms.erm.certified_ridge_minimiser` certifies ``||w - w*||_2 <=
    η / 2`` from the double-double gradient
    (:func:`~kngflow.models.svm.problem.huber_gradient_dd`), and the snapping's own
    rounding (``u Λ + 2 u^2 |w|``) is below the other half.  The guarantee is
    ``(ε, (1 + e^ε) 2 d 2^-48)``: ``7.7e-14 d`` at ε = 1.  A data-independent release
    (``scale`` or ``ridge`` not finite, ε below ~1e-300) is 0 and needs no grid of its own.
    """
    c = curvature(h, d, domain)
    base = math.sqrt(2.0 / reg)
    if not (math.isfinite(scale) and math.isfinite(ridge) and ridge > 0):
        return coupling_hardening(base, 0.0, d, site="sampler")
    bound = base + _NOISE_REACH * (d + 1) * math.sqrt(d) * scale / ridge
    grid, bound = spread_grid(scale / (ridge + n * c), bound)
    return Hardening(grid=grid, bound=bound, eta=math.ldexp(grid, -OBJECTIVE_ETA_BITS), lipschitz=None, size=d,
                     site="sampler")


def huber_derivatives(z: np.ndarray, h: float) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised ``(l_h'(z), l_h''(z))`` (numpy; ``l_h''`` is 1/(2h) on the closed band
    ``|1 - z| <= h``, as :func:`~kngflow.models.svm.problem.huber_derivative`)."""
    band = np.abs(1.0 - z) <= h
    d1 = np.where(z > 1.0 + h, 0.0, np.where(z < 1.0 - h, -1.0, -(1.0 + h - z) / (2.0 * h)))
    return d1, np.where(band, 1.0 / (2.0 * h), 0.0)


def _minimise(data: SVMData, ridge: float, V=None, tol_abs: float = 0.0, max_iter: int = 200):
    return regularised_minimiser(data.X, data.y, data.h, ridge, V, tol_abs=tol_abs, max_iter=max_iter)


class NonPrivate(NonPrivateBase):
    """The minimiser of ``J`` (semismooth Newton, :func:`~kngflow.models.svm.problem.regularised_minimiser`):
    the non-private baseline.  Option ``reg`` (Λ, default 0.01)."""

    def __init__(self, *, reg=DEFAULT_REG):
        self.reg = check_positive("reg", reg)

    def options(self) -> dict:
        return {"reg": self.reg}

    def __repr__(self) -> str:
        return f"NonPrivate(reg={self.reg!r})"

    def check_data(self, data):
        return check_svm_data(data)

    def estimate(self, data) -> np.ndarray:
        return _minimise(data, data.n * self.reg, tol_abs=1e-12 * data.n)[0]


class _HuberLoss:
    """The Huber hinge's hooks of :class:`kngflow.mechanisms.erm.ERMMechanism`."""

    def check_data(self, data):
        return check_svm_data(data)

    def size(self, data) -> tuple[int, int]:
        """``(n, d)``: records and coefficients."""
        return data.X.shape

    def lipschitz(self, d: int) -> float:
        """``L = 1`` over the unit ball: ``||l_h'(z) y x||_2 <= |l_h'| ||x||_2 <= 1``."""
        return LIPSCHITZ

    def lipschitz_of(self, data) -> float:
        """``L = R_2 = sup ||x||_2`` over the data's declared record domain (1 for the unit ball)."""
        return lipschitz(data.d, data.domain)

    def smoothness_of(self, data) -> float:
        """``c + reg = R_2^2/(2h) + reg``: the largest eigenvalue of ``hess J`` (where it exists)."""
        return curvature(data.h, data.d, data.domain) + self.reg

    def mean_gradient(self, data, theta: np.ndarray) -> np.ndarray:
        """``(1/n) sum_i l_h'(y_i x_i'theta) y_i x_i`` at ``theta`` (d,), or at each row of ``theta`` (k, d)."""
        X, y = data.X, data.y
        if theta.ndim == 1:
            d1, _ = huber_derivatives(y * (X @ theta), data.h)
            return X.T @ (d1 * y) / X.shape[0]
        d1, _ = huber_derivatives(y[:, None] * (X @ theta.T), data.h)
        return (d1 * y[:, None]).T @ X / X.shape[0]

    def finish(self, data, theta: np.ndarray) -> np.ndarray:
        """The estimate in the data's units (identity: covariates are used as given)."""
        return theta

    def default_radius(self) -> float:
        """``sqrt(2 / reg)``: ``reg/2 ||w^||^2 <= J(w^) <= J(0) = l_h(0) = 1`` (``h < 1``), so the
        minimiser lies in the ball ``C`` of that radius."""
        return math.sqrt(2.0 / self.reg)


class OutputPerturbation(_HuberLoss, erm.OutputPerturbation):
    """Output perturbation (CMS 2011 Algorithm 1) for the Huber-hinge SVM.

    Release ``w^ + Z``, ``w^ = argmin J``, ``Z`` ∝ ``exp(-||z||_2 / s)``,
    ``s = 2 L (1 + tol) / (n reg eps)`` with ``L = 1`` (``R_2 = sup ||x||_2`` over another
    declared record domain).

    Sensitivity (CMS 2011 Corollary 8, derived in :class:`kngflow.mechanisms.erm.OutputPerturbation`):
    replacing one record changes ``J`` by ``g = (l(.; z') - l(.; z)) / n`` with
    ``||grad g||_2 <= 2 L / n`` (``L = 1``: ``|l_h'| <= 1``, ``||x||_2 <= 1``); ``J`` is
    ``reg``-strongly convex, so the minimisers differ by at most ``2 / (n reg)`` in ℓ2 —
    it needs only a Lipschitz, convex loss, not its second derivative.  The solver stops at
    ``||grad J|| <= tol / n``, within ``tol / (n reg)`` of the exact minimiser: the factor
    ``1 + tol``.  ``info["steps"]`` (Newton iterations) is a non-private diagnostic.
    """

    def minimiser(self, data):
        """``(w^, iterations, converged)`` with ``||grad (n J)||_2 <= tol L`` (deterministic)."""
        return _minimise(data, data.n * self.reg, tol_abs=self.tol * self.lipschitz_of(data),
                         max_iter=max(self.max_iter, 200))


class NoisyGD(_HuberLoss, erm.NoisyGD):
    """Noisy projected gradient descent (Sarwate's chapter, eq. 7.11–7.12) on ``J`` for the Huber hinge.

    From ``w_0 = 0``, ``T = iterations`` steps ``w <- Pi_C(w - eta (grad J(w) + Z_t))``,
    ``C = {||w||_2 <= sqrt(2 / reg)}`` (holds the minimiser: ``J(0) = 1``), step
    ``eta = 1 / (1/(2h) + reg)`` (``J`` is ``(c + reg)``-smooth) unless ``step_size`` is given.

    Sensitivity: ``grad J = (1/n) sum_i l_h'(y_i x_i'w) y_i x_i + reg w`` moves by at most
    ``2 L / n = 2 / n`` in ℓ2 when one record is replaced, at every ``w``, and the bound is
    attained at ``w_0 = 0`` (every margin ``0 < 1 - h``, ``l_h' = -1``: ``x = e_1`` against
    ``-e_1``, same label).  Gamma noise ``Z_t ∝ exp(-||z|| / s)``, ``s = 2 T / (n eps)``:
    each step ``(eps/T)``-DP, ``T`` steps ε-DP by basic composition.  Gaussian noise
    (default): ``sigma = z 2/n`` with ``z`` from dp_accounting's RDP accountant for ``T``
    Gaussian steps at (ε, δ), δ default 1e-5.  The audits and hardening are those of the
    shared family (:class:`kngflow.mechanisms.erm.NoisyGD`), with the constants above.
    """

    def smoothness(self, d: int) -> float:
        raise NotImplementedError("the Huber hinge's smoothness depends on h: NoisyGD sets its step per data set")

    def release(self, data, epsilon, rng) -> Release:
        data = self.check_data(data)
        if self.step_size is not None:
            return super().release(data, epsilon, rng)
        bound = copy.copy(self)  # the default step 1 / (c + reg) for this data set's h, self unchanged
        bound.step_size = 1.0 / self.smoothness_of(data)
        return erm.NoisyGD.release(bound, data, epsilon, rng)


# --------------------------------------------------------------------------------------
# objective perturbation
# --------------------------------------------------------------------------------------


def perturbed_log_density(data: SVMData, theta, ridge: float, scale: float, norm: str) -> np.ndarray:
    """Log density, up to the noise's normaliser, of ``argmin sum_i l_h + ridge/2 |.|^2 + V'.``
    with ``V ∝ exp(-||V||_norm / scale)``, at ``theta`` (..., d).

    ``theta -> V(theta) = -(sum_i l_h'(y_i x_i'theta) y_i x_i + ridge theta)`` is a bijection
    of ``R^d`` (strongly monotone, continuous), Lipschitz, and differentiable off the
    hyperplanes ``y_i x_i'theta = 1 +- h`` (a null set), with Jacobian ``-H(theta)``,
    ``H = sum_i l_h'' x_i x_i' + ridge I``; by the area formula the release has density
    ``f_V(V(theta)) det H(theta)`` almost everywhere: ``-||V(theta)|| / scale + log det H``."""
    d = data.d
    theta = np.asarray(theta, dtype=np.float64)
    flat = theta.reshape(-1, d)
    out = np.empty(flat.shape[0])
    X, y, h = data.X, data.y, data.h
    XX = np.einsum("ia,ib->iab", X, X).reshape(data.n, d * d)  # x_i x_i' as rows
    step = max(1, 2_000_000 // data.n)
    for a in range(0, flat.shape[0], step):
        T = flat[a:a + step]
        d1, d2 = huber_derivatives(y[:, None] * (X @ T.T), h)  # (n, k)
        V = -((d1 * y[:, None]).T @ X + ridge * T)
        H = (d2.T @ XX).reshape(-1, d, d) + ridge * np.eye(d)
        out[a:a + step] = -np.linalg.norm(V, _ORD[norm], axis=1) / scale + np.linalg.slogdet(H)[1]
    return out.reshape(theta.shape[:-1])


class _Objective(Mechanism):
    """Shared release and exact-density claim of the objective-perturbation mechanisms:
    ``argmin sum_i l_h + ridge/2 |w|^2 + V'w`` with ``V ∝ exp(-||V||_norm / scale)``; a
    subclass gives :meth:`law` ``(norm, scale, ridge)``."""

    diagnostics = SAMPLER_DIAGNOSTICS
    snaps_itself = True  # hardened releases are snapped from their double-double value

    def check_data(self, data):
        return check_svm_data(data)

    def law(self, data, epsilon) -> tuple[str, float, float]:
        raise NotImplementedError

    def release(self, data, epsilon, rng) -> Release:
        data = self.check_data(data)
        epsilon = check_epsilon(epsilon)
        rng = check_rng(rng)
        norm, scale, ridge = self.law(data, epsilon)
        if not (math.isfinite(scale) and math.isfinite(ridge)):  # eps ~ 1e-300: the data-independent 0
            return erm_release(np.zeros(data.d), 0, "none")
        V = knorm_noise(rng, norm, data.d, scale)
        tol_abs = self.tol * (data.n + float(np.linalg.norm(V)))
        w, it, _ = _minimise(data, ridge, V, tol_abs=tol_abs, max_iter=self.max_iter)
        if self.hardened:  # the same noise and solve, certified in double-double, then snapped
            h = self.hardening(data, epsilon)
            args = (data.X, data.y, float(data.h), float(ridge))
            H = np.empty((data.d, data.d))

            def hessian(t):
                huber_hessian(t, args, H)
                return H

            hi, lo, extra = certified_ridge_minimiser(
                w, float(ridge), V, h.eta, lambda a, b, gh, gl: huber_gradient_dd(a, b, data.X, data.y, data.h, gh, gl),
                hessian)
            return erm_release(snap(hi, h, rng, lo), it + extra)
        return erm_release(w, it)

    def hardening(self, data, epsilon) -> Hardening:
        """:func:`objective_hardening` with this mechanism's law (coupling route, certified
        double-double minimiser; the guarantee is ``(ε, (1 + e^ε) 2 d 2^-48)``)."""
        data = self.check_data(data)
        norm, scale, ridge = self.law(data, check_epsilon(epsilon))
        return objective_hardening(data.n, data.d, norm, scale, ridge, self.reg, data.h, data.domain)

    #: ``log_density`` is exact up to the noise's normaliser (data independent): exact audits
    #: read the ratio pointwise
    density_normalised = True

    def privacy_claim(self) -> Density:
        """The release's exact log density (up to a data-independent constant) on :meth:`parameter_box`."""
        return Density(log_density=self.log_density, parameter_box=self.parameter_box, normalised=True,
                       additive_centre=self.centre)

    def centre(self, data) -> np.ndarray:
        """The non-private minimiser of ``J`` the release concentrates around (bit-level audit)."""
        data = self.check_data(data)
        return _minimise(data, data.n * self.reg, tol_abs=1e-12 * data.n)[0]

    def log_density(self, data, epsilon, theta):
        """:func:`perturbed_log_density` with this mechanism's law."""
        data = self.check_data(data)
        norm, scale, ridge = self.law(data, check_epsilon(epsilon))
        return perturbed_log_density(data, theta, ridge, scale, norm)

    def parameter_box(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """A box for exact audits: the release lives on ``R^d``; its density is known pointwise,
        so the audit reads the largest log ratio on a grid of ``[-40, 40]^d``, where every
        margin of a unit-ball record is beyond the Huber band for most of the box."""
        return np.full(d, -40.0), np.full(d, 40.0)


class ObjectivePerturbation(_Objective):
    """Objective perturbation, Chaudhuri, Monteleoni & Sarwate 2011, Algorithm 2, for the Huber hinge.

    With ``c = 1/(2h)`` (the bound on ``l_h''``; ``h`` the data's smoothing), on the records
    rescaled to the unit ball, ``x~ = x / R_2`` (``R_2 = sup ||x||_2`` over the data's declared
    domain, 1 for the default unit ball: then ``x~ = x``), ``w~ = R_2 w`` (``x~'w~ = x'w``,
    the same margins) and ``reg~ = reg / R_2^2`` (the same ``J``):

    1. ``eps' = eps - log(1 + 2c/(n reg) + c^2/(n reg)^2)``;
    2. if ``eps' > 0``: ``Delta = 0``; else ``Delta = c/(n(e^{eps/4} - 1)) - reg`` and
       ``eps' = eps/2`` (the slack term: ``reg`` too small for the curvature at this ``n``);
    3. ``b`` with density ∝ ``exp(-(eps'/2) ||b||_2)``;
    4. release ``w = argmin J(w) + b'w~ / n + (Delta/2) ||w~||^2``, i.e. the minimiser of
       ``sum_i l_h + n (reg + R_2^2 Delta)/2 ||w||^2 + V'w`` with ``V = R_2 b``, whose density
       is ∝ ``exp(-(eps'/(2 R_2)) ||V||_2)`` (below, ``R_2 = 1``; the rescaled problem is
       CMS's verbatim).

    Privacy (CMS Theorem 9, with the kink handled here).  ``b(w) = -(sum_i l_h'(y_i x_i'w)
    y_i x_i + n (reg + Delta) w)`` is a bijection of ``R^d`` (the objective is strongly
    convex and ``C^1``), Lipschitz and differentiable off the null set of hyperplanes
    ``y_i x_i'w = 1 +- h``, where ``l_h''`` jumps; the area formula gives the release the
    density ``f_b(b(w)) |det db/dw|`` almost everywhere, and that suffices for ε-DP.  Between
    adjacent data sets (record ``i`` replaced) ``b(w)`` moves by ``||l_h' y x - l_h' y' x'||_2 <= 2``,
    costing ``(eps'/2) 2 = eps'``; the Jacobian ``A = n(reg + Delta) I + sum_j l_h'' x_j x_j'``
    changes by a difference of two rank-one terms with eigenvalues in ``[0, c]`` and
    ``|det A' / det A| <= (1 + c/(n(reg + Delta)))^2``, whose log is ``eps - eps'`` when
    ``Delta = 0`` and ``2 log(e^{eps/4}) = eps/2`` otherwise.  Total: ε.

    CMS's conditions, checked: ``N(w) = ||w||^2/2`` 1-strongly convex and twice
    differentiable; ``l_h`` convex, differentiable, ``|l_h'| <= 1``, ``0 <= l_h'' <= c``
    where it exists; ``||x||_2 <= 1`` (:func:`~kngflow.models.svm.problem.check_svm_data`).
    Their Theorem 9 asks for a twice-differentiable loss; the Huber hinge is one off a null
    set, which is all the change of variables needs (above).

    ``slack_rule="larger"`` takes the slack branch whenever its ``eps' = eps/2`` is the larger
    (:func:`cms_constants`): as printed (``"cms"``, the default) the error is not monotone in
    ε — at ``n = 1000``, d = 5, ε = 1/5 ``eps' = 0.0094`` and the mean misclassification is
    0.46 against 0.29 at ε = 1/10 (``workflows/svm.toml``).

    Solver: semismooth Newton to ``||grad|| <= tol (n + ||b||)``, within that over
    ``n (reg + Delta)`` of the exact minimiser (a data-dependent perturbation the proof does
    not cover, negligible in studies).  ``info["steps"]`` is a non-private diagnostic.

    Hardened (``hardened=True``, :func:`kngflow.api.get_mechanism`'s default): the same noise
    and solve, then the minimiser refined and certified in double-double and snapped from it
    (:func:`objective_hardening`: the coupling route, ``(ε, (1 + e^ε) 2 d 2^-48)``-DP).
    """

    kind = "objective"

    def __init__(self, *, reg=DEFAULT_REG, slack_rule="cms", tol=1e-10, max_iter=200):
        self.reg = check_positive("reg", reg)
        self.slack_rule = check_choice("slack_rule", slack_rule, SLACK_RULES)
        self.tol = check_positive("tol", tol)
        self.max_iter = check_int("max_iter", max_iter, 1)

    def options(self) -> dict:
        return {"reg": self.reg, "slack_rule": self.slack_rule}

    def __repr__(self) -> str:
        return f"ObjectivePerturbation(reg={self.reg!r}, slack_rule={self.slack_rule!r})"

    def constants(self, n: int, h: float, epsilon: float, d: int = 1,
                  domain: RecordDomain = UNIT_BALL) -> tuple[float, float]:
        """``(eps', Delta)`` (:func:`cms_constants` with ``c = 1/(2h)``, ``reg~ = reg / R_2^2``
        and the ``slack_rule``)."""
        if domain == UNIT_BALL:
            return cms_constants(epsilon, n, self.reg, curvature(h), self.slack_rule)
        return cms_constants(epsilon, n, self.reg / domain.squared_l2_reach(d), curvature(h), self.slack_rule)

    def law(self, data, epsilon) -> tuple[str, float, float]:
        """``("l2", 2 R_2/eps', n (reg + R_2^2 Delta))`` (``("l2", 2/eps', n (reg + Delta))`` for the unit ball)."""
        domain = data.domain
        eps_p, slack = self.constants(data.n, data.h, epsilon, data.d, domain)
        if domain == UNIT_BALL:
            return "l2", 2.0 / eps_p, data.n * (self.reg + slack)
        ridge = data.n * (self.reg + domain.squared_l2_reach(data.d) * slack)
        return "l2", 2.0 * lipschitz(data.d, domain) / eps_p, ridge


class ExtendedObjectivePerturbation(_Objective):
    """Extended objective perturbation (Awan & Slavković, Algorithm 2) for the Huber hinge, in any norm.

    Draw ``V`` ∝ ``exp(-(eps q / Delta_K) ||V||_K)`` and release

        w = argmin  sum_i l_h(y_i x_i'w) + (n reg / 2) ||w||^2 + (gamma / 2) ||w||^2 + V'w,
        gamma = max(0, lambda / (exp(eps (1 - q)) - 1) - n reg),   lambda = c = R_2^2/(2h),

    ``Delta_K = 2 R_K``, ``R_K = sup ||x||_K`` over the data's declared record domain (unit
    ball, the default: ``lambda = 1/(2h)``, ``Delta_K`` 2 for ℓ2 and ℓ∞, ``2 sqrt(d)`` for ℓ1), at every
    ``w``.  This is their objective times ``n`` with ``r(w) = n reg/2 ||w||^2`` (the SVM's
    own regulariser): their proof bounds the determinant ratio by ``1 + lambda / mu`` with
    ``mu`` a lower bound on the eigenvalues of ``C = sum_{j != i} hess l + hess r + gamma I``,
    i.e. ``mu = n reg + gamma``, so ``gamma`` need only make ``n reg + gamma`` reach
    ``lambda / (exp(eps (1 - q)) - 1)`` — the counterpart of CMS's slack term; with
    ``gamma = 0`` (large ``n``) the release centres on the minimiser of ``J`` itself.  The
    noise share is ``eps q``, the Jacobian's ``eps (1 - q)``.  ``eps (1 - q)`` is capped at 30
    (a larger ridge only shrinks the ratio).

    Conditions of Algorithm 2, checked for the Huber hinge: convex loss (yes); gradient
    difference bounded in ``K`` uniformly in ``w`` (yes, ``Delta_K`` above, attained at
    ``w = 0``); eigenvalues of one record's Hessian at most ``lambda = 1/(2h)`` (yes, where
    it exists); ``hess l`` continuous on ``Theta`` — **no**: ``l_h''`` jumps from ``1/(2h)``
    to 0 on the hyperplanes ``y x'w = 1 +- h``.  The proof uses continuity only for the
    change of variables ``w -> V(w)``; that map is a Lipschitz bijection differentiable off a
    null set, and the area formula gives the same density almost everywhere, so the
    theorem's conclusion (ε-DP) holds (the exact audit checks it, the control at 2ε is caught).
    With ``Theta = R^d`` the release is the unconstrained minimiser.

    Solver and hardening as :class:`ObjectivePerturbation`.
    """

    kind = "objective_ext"

    def __init__(self, *, norm="linf", q=0.5, reg=DEFAULT_REG, tol=1e-10, max_iter=200):
        self.norm = check_choice("norm", norm, NORMS)
        self.q = check_probability("q", q)
        self.reg = check_positive("reg", reg)
        self.tol = check_positive("tol", tol)
        self.max_iter = check_int("max_iter", max_iter, 1)

    def options(self) -> dict:
        return {"norm": self.norm, "q": self.q, "reg": self.reg}

    def __repr__(self) -> str:
        return f"ExtendedObjectivePerturbation(norm={self.norm!r}, q={self.q!r}, reg={self.reg!r})"

    def noise_scale(self, d: int, epsilon: float, domain: RecordDomain = UNIT_BALL) -> float:
        """``Delta_K / (eps q)``: ``V`` has density ∝ ``exp(-||V||_K / scale)``."""
        return gradient_sensitivity(self.norm, d, domain) / (epsilon * self.q)

    def total_ridge(self, n: int, h: float, epsilon: float, d: int = 1, domain: RecordDomain = UNIT_BALL) -> float:
        """``n reg + gamma = max(n reg, lambda / (exp(eps (1 - q)) - 1))``, ``lambda = R_2^2/(2h)``,
        ``eps (1 - q)`` capped at 30."""
        return max(n * self.reg, curvature(h, d, domain) / math.expm1(min(epsilon * (1.0 - self.q), 30.0)))

    def law(self, data, epsilon) -> tuple[str, float, float]:
        return (self.norm, self.noise_scale(data.d, epsilon, data.domain),
                self.total_ridge(data.n, data.h, epsilon, data.d, data.domain))


# --------------------------------------------------------------------------------------
# DP-SGD
# --------------------------------------------------------------------------------------


class DPSGD(_HuberLoss, erm.DPSGD):
    """DP-SGD (:class:`kngflow.mechanisms.erm.DPSGD`: Poisson subsampling, RDP accountant,
    group privacy for replace-one) for the Huber hinge.

    Per-example gradients ``l_h'(y_i x_i'w) y_i x_i``, of ℓ2 norm at most ``L = R_2`` (1 for
    the unit ball), the default clip ``C`` (no clipping bias); default
    ``lr = 1 / (R_2^2/(2h) + reg)``, one over
    ``J``'s smoothness for this data set's ``h``.  Audit: at ``w = 0`` with ``h < 1`` every
    per-example gradient is ``-y x``, so ``x = e_1`` against ``-e_1`` (same label) attains
    ``2C`` in the statistic audit (``q = 1``).
    """

    def per_example_gradients(self, data, theta: np.ndarray, idx) -> np.ndarray:
        """``l_h'(y_i x_i'theta) y_i x_i`` for the records ``idx`` (rows)."""
        Xb, yb = data.X[idx], data.y[idx]
        d1, _ = huber_derivatives(yb * (Xb @ theta), data.h)
        return Xb * (d1 * yb)[:, None]


# --------------------------------------------------------------------------------------
# KNG
# --------------------------------------------------------------------------------------


class _KNGBase(GenericKNG):
    """Options shared by the two KNGs: ``reg`` (the ridge of ``n J``) and a bounded ``Theta``."""

    def __init__(self, *, reg=DEFAULT_REG, bound=20.0, **kw):
        self.reg = check_positive("reg", reg)
        super().__init__(bound=bound, **kw)

    def options(self) -> dict:
        return {**super().options(), "reg": self.reg}

    def check_data(self, data):
        return check_svm_data(data)

    def sensitivity(self, data) -> float:
        """``Delta_K = 2 R_K`` over the data's declared record domain
        (:func:`~kngflow.models.svm.problem.gradient_sensitivity`)."""
        return gradient_sensitivity(self.norm, data.d, data.domain)

    def parameter_box(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """A box holding ``Theta`` (for exact audits on a grid)."""
        reach = self.bound if self.base == "uniform" else 8.0 * self.base_scale
        return np.full(d, -reach), np.full(d, reach)


#: default proposals of the SVM's gradient-map chains (see :class:`KNG`)
KNG_PROPOSALS = 200


class KNG(_KNGBase):
    """KNG for the Huber-hinge SVM, by the gradient map (default) or random-walk Metropolis.

    Density on ``Theta = {||w||_1 <= bound}`` (uniform base; default bound 20, which holds
    ``theta_star`` of the built-in laws, ℓ1 norm 4-8) or with a Gaussian base::

        f(w) ∝ exp(-eps/(2 Delta_K) ||sum_i l_h'(y_i x_i'w) y_i x_i + n reg w||_K),

    the gradient of ``n J``.  Sensitivity: the ridge term is the same on adjacent data sets
    (``n`` public) and one record's term moves by at most ``Delta_K = 2 sup ||x||_K`` (2 in
    ℓ2 and ℓ∞, ``2 sqrt(d)`` in ℓ1; derived and shown attained in
    :mod:`kngflow.models.svm.problem`), for every ``w``: ε-DP by the exponential mechanism,
    the factor 2 paying for the data-dependent normaliser.

    Sampler (``"gradient_map"``, :mod:`kngflow.kernels.gradient_map`): ``n J`` is
    ``n reg``-strongly convex with a Lipschitz gradient, so ``u = grad (n J)(w)`` is a
    bijection of ``R^d`` with Jacobian ``H(w) = sum_i l_h'' x_i x_i' + n reg I`` off the null
    set of kinks (piecewise constant, positive definite); ``u`` is drawn as exact K-norm
    noise, ``w(u)`` found by Newton's method (semismooth: the gradient is piecewise affine)
    and accepted as an independence-Metropolis proposal with the mixture weight (a fifth
    of the proposals from the base measure).  Where the map finds no proposal inside
    ``Theta``, ``"auto"`` falls back to the Metropolis chain (same target).

    ``proposals`` defaults to :data:`KNG_PROPOSALS` = 200, not the generic 50: every solve
    starts at one state-independent point (the data's minimiser when it lies well inside
    ``Theta``, else the centre), and at small ``n`` the ridge ``n reg`` is tiny, so Newton's
    first steps from there overshoot and most solves fail (73 % of those whose root lies in
    ``{||w||_1 <= 6}`` at ``n = 50``); the chain then accepts about a tenth of its proposals
    and 50 leave a start-up bias (the KS test against the grid density read p = 2e-10 at
    ``n = 50``), 200 do not (p = 0.6).  At large ``n`` the solves converge and nearly every
    proposal is accepted.
    """

    samplers = ("gradient_map", "metropolis")
    gradient = staticmethod(huber_gradient)
    hessian = staticmethod(huber_hessian)

    def __init__(self, *, proposals=KNG_PROPOSALS, **kw):
        super().__init__(proposals=proposals, **kw)

    def kernel_args(self, data):
        return (data.X, data.y, float(data.h), float(data.n * self.reg))


#: the surrogate's smoothing ``h_s = SURROGATE_SMOOTHING n^(-1/3)`` (at most 1/2)
SURROGATE_SMOOTHING = 1.0


def surrogate_smoothing(n: int) -> float:
    """The Huber surrogate's smoothing at sample size ``n`` (public: ``n`` only): ``min(1/2, n^(-1/3))``."""
    return min(0.5, SURROGATE_SMOOTHING * float(n) ** (-1.0 / 3.0))


class HingeKNG(_KNGBase):
    """KNG on the hinge's subgradient plus the ridge, by the surrogate map.

    Density on ``Theta = {||w||_1 <= bound}`` (uniform base) or with a Gaussian base::

        f(w) ∝ exp(-eps/(2 Delta_K) ||-sum_i 1{y_i x_i'w < 1} y_i x_i + n reg w||_K),

    the subgradient of ``sum_i max(0, 1 - y_i x_i'w) + (n reg/2) ||w||^2`` (the choice ``0`` at
    the kink ``y_i x_i'w = 1``, a null set).  One record's term ``-1{.} y x`` has K-norm at most
    ``sup ||x||_K``, so two differ by at most ``Delta_K = 2 sup ||x||_K`` at every ``w`` (the
    same constant as the Huber hinge's; attained at ``w = 0``): ε-DP by the exponential
    mechanism.  The smoothing ``h`` of the data is not used: this is the SVM's own loss.

    The gradient is piecewise constant but for the ridge, so there is no gradient map.  The
    sampler is the quantile-regression scheme (:meth:`~kngflow.mechanisms.generic.GenericKNG.draw_surrogate_map`):
    ``steps`` sweeps of random-walk Metropolis from the data-independent 0, then
    ``proposals`` independence-Metropolis proposals from a mixture of the base measure and
    the gradient map of the Huber hinge with smoothing :func:`surrogate_smoothing` (a smooth,
    strongly convex surrogate, ridge included) frozen at its minimiser and moved by chord
    steps to the exact subgradient's zero, each accepted on the exact density.  Each step
    leaves the target invariant; ``"metropolis"`` runs the walk alone.
    """

    kind = "kng_hinge"
    samplers = ("surrogate_map", "metropolis")
    gradient = staticmethod(hinge_gradient)
    surrogate = (huber_gradient, huber_hessian)

    def __init__(self, *, steps=1000, **kw):
        super().__init__(steps=steps, **kw)

    def available_samplers(self):
        return self.samplers

    def kernel_args(self, data):
        return (data.X, data.y, float(data.n * self.reg))

    def surrogate_args(self, data):
        return (data.X, data.y, surrogate_smoothing(data.n), float(data.n * self.reg))

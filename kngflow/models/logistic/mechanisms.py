"""Logistic-regression mechanisms; sensitivities in :mod:`kngflow.models.logistic.problem`.

KNG runs the gradient-map sampler (:mod:`kngflow.kernels.gradient_map`: exact K-norm
noise on the gradient, Newton's method back to ``beta``, independence Metropolis on
``det H``, a fifth of the proposals drawn from the base measure), ``O(n m^2)`` per proposal; the generic random-walk Metropolis kernel
(:mod:`kngflow.kernels.generic`) along preconditioned directions stays available
(``sampler="metropolis"``), ``O(n m)`` per update.  Extended objective perturbation (Awan & Slavković, Algorithm 2) draws K-norm
noise and solves a strongly convex problem by Newton's method.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import expit

from kngflow._jit import jit
from kngflow.noise import knorm_noise
from kngflow.models.logistic.problem import (
    BOX,
    LogisticData,
    gradient_sensitivity,
    hessian_bound,
    logistic_gradient,
    logistic_gradient_dd,
    logistic_hessian,
    logistic_mle,
    perturbed_minimiser,
)
from kngflow.mechanisms.base import SAMPLER_DIAGNOSTICS, Mechanism, Release, check_choice, check_epsilon, check_int, check_positive, check_probability, check_rng
from kngflow.mechanisms.claims import Density
from kngflow.mechanisms.generic import NORMS, GenericKNG, NonPrivateBase
from kngflow.mechanisms.erm import certified_ridge_minimiser
from kngflow.mechanisms.hardening import Hardening, knorm_lipschitz, lipschitz_hardening, snap
from kngflow.problems.domains import RecordDomain
from kngflow.problems.records import check_record_arrays, require_declared

__all__ = ["NonPrivate", "KNG", "ExtendedObjectivePerturbation", "ObjectivePerturbation", "check_logistic_data",
           "perturbed_log_density", "objective_hardening", "certified_minimiser", "OBJECTIVE_BOUND"]

#: public clamp of hardened objective-perturbation releases for covariates with ``|x_ij| <= 1``
#: (over a record domain of radius ``r``: ``OBJECTIVE_BOUND / r``, coefficients scaling as ``1/x``)
OBJECTIVE_BOUND = 64.0
#: a hardened objective-perturbation release is certified in double-double within
#: 2^-OBJECTIVE_ETA_BITS of its grid
OBJECTIVE_ETA_BITS = 32
#: sup |sigma''| = 1 / (6 sqrt 3), the logistic function's second derivative
_SIGMA2 = 1.0 / (6.0 * math.sqrt(3.0))


def objective_hardening(n: int, m: int, gamma: float, scale: float, norm: str, epsilon: float,
                        domain: RecordDomain = BOX) -> Hardening:
    """Lipschitz route for the minimiser of ``l_n + gamma/2 |theta|^2 + V'theta``,
    ``V ∝ exp(-||V||_K / scale)`` (objective perturbation; :mod:`kngflow.mechanisms.hardening`).

    Its log density is ``-||V(theta)||_K / scale + log det H(theta)`` with
    ``V(theta) = -(grad l_n + gamma theta)`` and ``H = hess l_n + gamma I``
    (:func:`perturbed_log_density`).  Along ``theta + t v`` with ``||v||_∞ = 1``: the first
    term moves at rate at most ``||H v||_K / scale <= ||1||_K (n R_∞ R_1 / 4 + gamma) / scale``
    (a row of ``hess l_n`` sums ``n`` terms ``sigma' |x_ij| |x_i'v| <= R_∞ R_1 / 4``, with
    ``R_K = sup ||x||_K`` over the record ``domain``: ``R_∞ R_1 = m`` for the box); the second
    at rate ``|sum_i sigma''(x_i'theta) (x_i'v) x_i'H^-1 x_i| <= n (1 / (6 sqrt 3)) R_1 (R_2^2 / gamma)``
    (``m^2 / gamma`` for the box).
    ``L`` is their sum.  Clamp :data:`OBJECTIVE_BOUND` over the domain's radius.  Rounding: the release is carried
    in double-double and snapped from it (``site = "sampler"``); :func:`certified_minimiser`
    certifies ``||theta - theta*||_2 <= η / 2`` with ``η = Λ 2^-OBJECTIVE_ETA_BITS``, and the
    snapping's own rounding (``u Λ + 2 u^2 |theta|``) is below the other half.  So
    ``ε′ - ε`` is about ``4 m 2^-32`` whatever ``n`` is, and the grid stays at ``2^-10`` of
    the density's scale ``1/L`` at every ``n`` up to 10^7.
    """
    r1 = domain.reach("l1", m)
    lip = (knorm_lipschitz(norm, m, scale) * (n * (domain.reach("linf", m) * r1) / 4.0 + gamma)
           + _SIGMA2 * n * r1 * domain.squared_l2_reach(m) / gamma)
    return lipschitz_hardening(lip, OBJECTIVE_BOUND / domain.radius, 0.0, m, epsilon, site="sampler",
                               eta_bits=OBJECTIVE_ETA_BITS)


def certified_minimiser(X, y, gamma, V, max_iter, eta) -> tuple[np.ndarray, np.ndarray, int]:
    """The minimiser of ``l_n + gamma/2 |theta|^2 + V'theta`` in double-double with a
    certificate of its rounding: ``(hi, lo, iterations)``.

    Newton's method (:func:`perturbed_minimiser`) runs to floating-point resolution; then
    up to 8 Newton steps refine ``hi + lo`` on the gradient computed in double-double
    (:func:`~kngflow.models.logistic.problem.logistic_gradient_dd`, with its error bound;
    ``gamma theta + V`` added from exact products) until
    ``(||g||_2 + sqrt(m) e) / gamma``, an upper bound on ``||theta - theta*||_2`` by
    ``gamma``-strong convexity, is at most ``eta / 2``.  RuntimeError if it never is (not
    observed: two refinements reach about ``n u^2``).
    """
    n, m = X.shape
    theta, it, _ = perturbed_minimiser(X, y, gamma, V, 0.0, max_iter)
    H = np.empty((m, m))

    def hessian(w):
        logistic_hessian(w, X, H)
        return H + gamma * np.eye(m)

    hi, lo, extra = certified_ridge_minimiser(theta, gamma, V, eta,
                                              lambda h, l, gh, gl: logistic_gradient_dd(h, l, X, y, gh, gl), hessian)
    return hi, lo, it + extra


_ORD = {"l1": 1, "l2": 2, "linf": np.inf}


def check_logistic_data(data) -> LogisticData:
    """Validate :class:`LogisticData`: shapes, rows of ``X`` in the declared record domain
    (default ``|x_ij| <= 1``), ``y`` in ``{0, 1}``."""
    X, y = check_record_arrays(data, LogisticData)
    if data.domain == BOX:
        # min/max allocate nothing (np.abs(X) would copy the data) and propagate NaN
        if not (X.min() >= -1.0 and X.max() <= 1.0 and np.all((y == 0.0) | (y == 1.0))):
            raise ValueError("data.X must be finite and in [-1, 1], data.y in {0, 1}")
        return data
    require_declared(data, X)
    if not np.all((y == 0.0) | (y == 1.0)):
        raise ValueError("data.y must hold only 0 and 1")
    return data


class NonPrivate(NonPrivateBase):
    """The maximum-likelihood estimate (Newton's method): the non-private baseline."""

    def check_data(self, data):
        return check_logistic_data(data)

    def estimate(self, data) -> np.ndarray:
        return logistic_mle(data)


@jit
def _hessian(beta, args, H):
    """``hess l_n(beta)``, the Jacobian of :func:`logistic_gradient`; ``args = (X, y)``."""
    logistic_hessian(beta, args[0], H)


class KNG(GenericKNG):
    """KNG for logistic regression, by the gradient map (default) or random-walk Metropolis
    along preconditioned directions.

    Density on ``Theta = {||beta||_1 <= bound}`` (uniform base; default bound 10, which
    holds Algorithm 3's ``||beta*||_1 = 4``) or with a Gaussian base::

        f(beta) ∝ exp(-eps/(2 Delta_K) ||sum_i x_i (sigma(x_i' beta) - y_i)||_K),

    ``Delta_K = 2 sup{||x||_K : x in the record domain}`` (``2 sup`` over ``[-1, 1]^m`` by
    default; :func:`~kngflow.models.logistic.problem.gradient_sensitivity`, from the data's
    declared domain).  ε-DP by the exponential mechanism:
    the utility ``-||grad l_n||_K`` has sensitivity ``Delta_K`` for every ``beta``.
    The chain starts at 0, data independent.

    Default sampler (``sampler="auto"`` or ``"gradient_map"``): the loss is smooth and
    strictly convex, so ``u = grad l_n(beta)`` has density ∝ ``exp(-eps/(2 Delta_K)
    ||u||_K) / det H(beta(u))``; ``u`` is drawn as exact K-norm noise, ``beta(u)`` found by
    Newton's method (started at one state-independent point, the data's minimiser where it
    lies inside ``Theta``: from a state near the edge of ``Theta`` the solve fails for
    many ``u`` whose root it finds from 0, and a start at the state made the intercept's
    SD 9.7 % too large at n = 20) and used as an independence-Metropolis proposal inside ``Theta``
    (:mod:`kngflow.kernels.gradient_map`).
    A fifth of the proposals are instead uniform draws on ``Theta`` (the base measure), and
    each proposal is accepted on the ratio of ``w = f / q`` with ``q`` the mixture's density:
    far from the data the gradient saturates and ``det H`` is tiny, so the map alone
    proposes there too rarely — on a two-record data set whose law spreads over ``Theta``
    the black-box audit read a loss of 4.9 at ε = 1 without the base draws, 0 with them.
    The first proposal inside ``Theta`` starts the chain, ``proposals`` (default 50)
    proposals in all (20 leave a visible start-up bias at n = 1000, ε = 1/4, where a
    quarter of them are accepted).  At ``n = 10^6``, ``m = 7``, ε = 1 nearly every map
    proposal is accepted and a release costs about as much as extended objective
    perturbation's solve.  Where no proposal falls inside ``Theta`` in ``max_tries``,
    ``"auto"`` falls back to the Metropolis chain, which targets the same law; so does a
    data set whose loss has no minimiser inside ``Theta`` (separated records: the law's
    mass is a ridge running to the edge of ``Theta``, which the map hardly reaches —
    :func:`~kngflow.kernels.gradient_map.gradient_map_chain`).

    Hardened (``hardened=True``): the map frozen at the minimiser proposes (Metropolis on
    a dyadic lattice where there is none inside ``Theta``), the exact density accepts, and the final state is certified in double-double and snapped on a
    grid of at most ``1/16`` of the public spread ``1/(a n lambda)``, ``lambda = R_2^2 / 4``
    (:meth:`~kngflow.mechanisms.generic.GenericKNG.release_gradient_map_hardened`,
    :meth:`hessian_norm_bound`).

    Metropolis (``sampler="metropolis"``, ``precondition=True``): one-at-a-time random-walk Metropolis,
    even sweeps along the normalised columns of ``H^-1``, ``H = sum_i sigma'(x_i' beta)
    x_i x_i'`` the Hessian at the chain's state, odd sweeps along the axes; ``H`` is
    recomputed with the proposal scales every 20 sweeps of the burn-in and both are frozen
    for the second half (:func:`~kngflow.kernels.generic.precond_metropolis_chains`).
    Along the columns of ``H^-1`` the gradient moves in one coordinate at a time, so the
    ℓ∞ norm has no corner where every move is uphill.  Axis moves alone
    (``precondition=False``, the plain :func:`~kngflow.kernels.generic.metropolis_chains`)
    stall in such corners for large ``n`` — every gradient coordinate at the same
    magnitude, the Hessian's off-diagonal terms making each axis move raise the maximum:
    at ``n = 10^5`` (Algorithm 3, ε = 1) 1000 steps end 2.2 from the mode.  The directions
    depend on the data through the chain's states, like the adapted scales, and the chain
    starts at the data-independent 0; the second half is an exact Metropolis chain for the
    density above.
    """

    samplers = ("gradient_map", "metropolis")
    needs_minimiser = True  # separated records: Metropolis (see above)
    gradient = staticmethod(logistic_gradient)
    hessian = staticmethod(_hessian)

    def __init__(self, *, bound=10.0, precondition=True, **kw):
        if not isinstance(precondition, (bool, np.bool_)):
            raise TypeError(f"precondition must be True or False, got {precondition!r}")
        self.precondition = bool(precondition)
        super().__init__(bound=bound, **kw)

    def options(self) -> dict:
        return {**super().options(), "precondition": self.precondition}

    def check_data(self, data):
        return check_logistic_data(data)

    def kernel_args(self, data):
        return (data.X, data.y)

    def sensitivity(self, data) -> float:
        """``Delta_K = 2 R_K`` over the data's declared record domain."""
        return gradient_sensitivity(self.norm, data.d, data.domain)

    def hessian_norm_bound(self, data) -> float:
        """``n R_2^2 / 4``: each record's Hessian ``sigma' x x'`` has eigenvalues at most
        ``||x||_2^2 / 4 <= R_2^2 / 4`` (``m / 4`` for the box;
        :func:`~kngflow.models.logistic.problem.hessian_bound`)."""
        return data.n * hessian_bound(data.d, data.domain)

    def parameter_box(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """A box holding ``Theta`` (for exact audits on a grid)."""
        reach = self.bound if self.base == "uniform" else 8.0 * self.base_scale
        return np.full(d, -reach), np.full(d, reach)


def perturbed_log_density(data, theta, gamma: float, scale: float, norm: str) -> np.ndarray:
    """Log density, up to the noise's normaliser, of ``argmin l_n + gamma/2 |.|^2 + V'.``
    with ``V ∝ exp(-||V||_norm / scale)``, at ``theta`` (..., d): the map
    ``theta -> V(theta) = -(grad l_n(theta) + gamma theta)`` is a bijection of ``R^d``, so
    the density is ``-||V(theta)|| / scale + log det(hess l_n(theta) + gamma I)``."""
    d = data.d
    theta = np.asarray(theta, dtype=np.float64)
    flat = theta.reshape(-1, d)
    out = np.empty(flat.shape[0])
    X, y = data.X, data.y
    XX = (X[:, :, None] * X[:, None, :]).reshape(data.n, d * d)  # x_i x_i' as rows
    step = max(1, 4_000_000 // data.n)
    for a in range(0, flat.shape[0], step):
        T = flat[a:a + step]
        P = expit(X @ T.T)  # (n, k)
        V = -((P - y[:, None]).T @ X + gamma * T)
        H = (P * (1.0 - P)).T.dot(XX).reshape(-1, d, d) + gamma * np.eye(d)  # one product, not a 3-way einsum
        out[a:a + step] = -np.linalg.norm(V, _ORD[norm], axis=1) / scale + np.linalg.slogdet(H)[1]
    return out.reshape(theta.shape[:-1])


class ExtendedObjectivePerturbation(Mechanism):
    """Extended objective perturbation (Awan & Slavković, Algorithm 2) for logistic regression.

    Draw ``V`` with density ∝ ``exp(-(eps q / Delta_K) ||V||_K)`` and release

        theta = argmin_{theta in R^m}  l_n(theta) + (gamma / 2) theta'theta + V'theta,
        gamma = lambda / (exp(eps (1 - q)) - 1),   lambda = R_2^2 / 4,

    (the paper's objective times n, which does not move the argmin; ``r = 0``;
    ``lambda = m / 4`` for the box, ``r^2 / 4`` for an ℓ1 or ℓ2 ball of radius ``r``).
    ``Delta_K = 2 sup ||x||_K`` (over the data's declared record domain) bounds
    ``||grad l(theta; x) - grad l(theta; x')||_K`` for every ``theta`` in ``R^m`` and ``lambda`` every eigenvalue of one record's Hessian
    (:mod:`kngflow.models.logistic.problem`).  Privacy (Kifer et al. 2012; Awan & Slavković
    Theorem 5.1): the map ``theta -> V = -(grad l_n(theta) + gamma theta)`` is a bijection
    of ``R^m`` (the objective is ``gamma``-strongly convex), so ``theta`` has density
    ``f_V(V(theta)) det H(theta)``, ``H = hess l_n + gamma I``.  Between adjacent data sets
    ``V(theta)`` moves by at most ``Delta_K`` (the ``q`` share: ``eps q``) and ``H`` by a
    difference of two rank-one terms with eigenvalues at most ``lambda``, so ``det H``
    changes by a factor at most ``1 + lambda / gamma = exp(eps (1 - q))`` (the other
    share).  The paper prints ``gamma = lambda / (exp(eps (q - 1)) - 1)``, which is
    negative.

    For ``eps (1 - q) > 30`` the regulariser is held at its value there,
    ``gamma = lambda / expm1(30)``: a larger ``gamma`` only shrinks the determinant ratio,
    so the release stays eps-DP, and the Newton system stays well conditioned in float64.
    For the same reason the option ``reg`` (the ridge every ERM kind names so, on the
    ``(1/n)``-scaled objective) is a floor: ``gamma = max(rule, n reg)`` (:meth:`gamma`).

    Inexact minimisation (Sarwate's chapter, §7.3.2): the proof covers the exact
    minimiser.  Newton's method (:func:`~kngflow.models.logistic.problem.perturbed_minimiser`)
    stops when ``||grad||_2 <= tol (n + ||V||_2)`` — ``tol`` relative to the size of the
    summed terms — or at floating-point resolution.  By strong convexity the release is
    then within ``||grad||_2 / gamma`` of the exact minimiser: a data-dependent
    perturbation of that size, negligible in studies but not covered by the proof.
    ``info["steps"]`` (Newton iterations) is a non-private diagnostic.
    """

    kind = "objective_ext"
    diagnostics = SAMPLER_DIAGNOSTICS
    snaps_itself = True  # hardened releases are snapped from their double-double value

    def __init__(self, *, norm="linf", q=0.5, reg=None, tol=1e-10, max_iter=100):
        self.norm = check_choice("norm", norm, NORMS)
        self.q = check_probability("q", q)
        self.reg = None if reg is None else check_positive("reg", reg)
        self.tol = check_positive("tol", tol)
        self.max_iter = check_int("max_iter", max_iter, 1)

    def options(self) -> dict:
        return {"norm": self.norm, "q": self.q, **self._reg_option()}

    def _reg_option(self) -> dict:
        return {} if self.reg is None else {"reg": self.reg}

    def __repr__(self) -> str:
        return f"ExtendedObjectivePerturbation(norm={self.norm!r}, q={self.q!r})"

    def check_data(self, data):
        return check_logistic_data(data)

    def sensitivity(self, d: int, domain: RecordDomain = BOX) -> float:
        """``Delta_K = 2 R_K`` over the record ``domain`` (default the box)."""
        return gradient_sensitivity(self.norm, d, domain)

    def noise_scale(self, d: int, epsilon: float, domain: RecordDomain = BOX) -> float:
        """``Delta_K / (eps q)``: ``V`` has density ∝ ``exp(-||V||_K / scale)``."""
        return self.sensitivity(d, domain) / (epsilon * self.q)

    def gamma(self, d: int, epsilon: float, domain: RecordDomain = BOX, n: int = 0) -> float:
        """The ridge of the minimised objective: :meth:`min_gamma`, or ``n reg`` where the
        option ``reg`` asks for more (the ERM convention ``(1/n) sum_i l + (reg/2)|theta|^2``
        is ``l_n + (n reg / 2)|theta|^2`` on the summed loss).  A ridge above the privacy
        rule's only shrinks the determinant ratio: still ε-DP."""
        rule = self.min_gamma(d, epsilon, domain)
        return rule if self.reg is None else max(rule, n * self.reg)

    def min_gamma(self, d: int, epsilon: float, domain: RecordDomain = BOX) -> float:
        """``lambda / (exp(eps (1 - q)) - 1)``, ``lambda = R_2^2 / 4``, with ``eps (1 - q)`` capped at 30."""
        return hessian_bound(d, domain) / np.expm1(min(epsilon * (1.0 - self.q), 30.0))

    def solve(self, data, V, gamma) -> tuple[np.ndarray, int]:
        """``argmin l_n + gamma/2 |theta|^2 + V'theta`` (:func:`perturbed_minimiser`, from 0)."""
        tol_abs = self.tol * (data.n + float(np.linalg.norm(V)))
        theta, it, _ = perturbed_minimiser(data.X, data.y, gamma, V, tol_abs, self.max_iter)
        return theta, it

    def release(self, data, epsilon, rng) -> Release:
        data = self.check_data(data)
        epsilon = check_epsilon(epsilon)
        rng = check_rng(rng)
        d, domain = data.d, data.domain
        V = knorm_noise(rng, self.norm, d, self.noise_scale(d, epsilon, domain))
        if self.hardened:
            h = self.hardening(data, epsilon)
            hi, lo, it = certified_minimiser(data.X, data.y, self.gamma(d, epsilon, domain, data.n), V, self.max_iter,
                                             h.eta)
            theta = snap(hi, h, rng, lo)
        else:
            theta, it = self.solve(data, V, self.gamma(d, epsilon, domain, data.n))
        return Release(theta, {"sampler": "exact", "acceptance": 1.0, "steps": int(it)})

    def hardening(self, data, epsilon) -> Hardening:
        """:func:`objective_hardening` with this mechanism's ``gamma``, noise scale and norm."""
        data = self.check_data(data)
        (n, m), domain = data.X.shape, data.domain
        return objective_hardening(n, m, self.gamma(m, epsilon, domain, n), self.noise_scale(m, epsilon, domain),
                                   self.norm, epsilon, domain)

    #: ``log_density`` is the log density of the release up to a data-independent constant
    #: (the K-norm normaliser): exact audits compare it pointwise, no grid normalisation.
    density_normalised = True

    def privacy_claim(self) -> Density:
        """The release's exact log density (up to a data-independent constant) on :meth:`parameter_box`;
        the bit-level audit's centre is the MLE."""
        return Density(log_density=self.log_density, parameter_box=self.parameter_box, normalised=True,
                       additive_centre=self.centre)

    def centre(self, data) -> np.ndarray:
        """The non-private MLE the release concentrates around (the bit-level audit's centre)."""
        return logistic_mle(self.check_data(data))

    def log_density(self, data, epsilon, theta):
        """Log density of the release at ``theta`` (..., d) up to the K-norm normaliser
        (see the class docstring): ``-||V(theta)||_K / scale + log det H(theta)``."""
        data = self.check_data(data)
        epsilon = check_epsilon(epsilon)
        return perturbed_log_density(data, theta, self.gamma(data.d, epsilon, data.domain, data.n),
                                     self.noise_scale(data.d, epsilon, data.domain), self.norm)

    def parameter_box(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """A box for exact audits on a grid.  The release lives on all of ``R^m`` and its
        density is known pointwise (``density_normalised``), so the audit's loss is the
        largest log ratio at the grid points; the gradient-difference part approaches its
        supremum as ``|x'theta|`` grows, within ``e^-40`` at the box's edge."""
        return np.full(d, -40.0), np.full(d, 40.0)


class ObjectivePerturbation(ExtendedObjectivePerturbation):
    """Classical objective perturbation (Kifer et al. 2012; Awan & Slavković Algorithm 1).

    ℓ2 noise ``V ∝ exp(-(eps / (2 Delta_2)) ||V||_2)`` — Algorithm 2 at ``q = 1/2`` — and
    the regulariser ``gamma = 2 lambda / eps`` as printed (``gamma_rule="kifer"``), or the
    smaller ``lambda / (exp(eps/2) - 1)`` the paper derives (``"reduced"``, equal to
    :class:`ExtendedObjectivePerturbation` with ``norm="l2"``, ``q=0.5``).  Privacy: the
    noise share is ``eps/2`` as in Algorithm 2; the determinant ratio is at most
    ``1 + lambda / gamma = 1 + eps/2 <= exp(eps/2)`` for the printed rule.  Both rules
    keep ``gamma >= lambda / expm1(30)`` (see the parent class), and ``reg`` raises
    ``gamma`` to ``n reg`` where that is larger, as in the parent class.
    """

    kind = "objective"

    def __init__(self, *, gamma_rule="kifer", reg=None, tol=1e-10, max_iter=100):
        super().__init__(norm="l2", q=0.5, reg=reg, tol=tol, max_iter=max_iter)
        self.gamma_rule = check_choice("gamma_rule", gamma_rule, ("kifer", "reduced"))

    def options(self) -> dict:
        return {"gamma_rule": self.gamma_rule, **self._reg_option()}

    def __repr__(self) -> str:
        return f"ObjectivePerturbation(gamma_rule={self.gamma_rule!r})"

    def min_gamma(self, d: int, epsilon: float, domain: RecordDomain = BOX) -> float:
        """``2 lambda / eps`` (``"kifer"``) or the parent's (``"reduced"``), ``lambda = R_2^2 / 4``."""
        if self.gamma_rule == "reduced":
            return super().min_gamma(d, epsilon, domain)
        lam = hessian_bound(d, domain)
        return max(2.0 * lam / epsilon, lam / np.expm1(30.0))

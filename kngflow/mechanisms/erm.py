"""Private-ERM baselines written once against a loss (Sarwate's chapter §7.3–7.4).

The mechanisms target the minimiser of ``J(theta) = (1/n) sum_i l(theta; z_i) + (reg/2)
||theta||_2^2`` for a loss ``l`` that a model supplies through the hooks of :class:`_ERM`
(``check_data``, ``size``, ``lipschitz``, ``smoothness``, ``mean_gradient``, ``finish``,
``default_radius``; output perturbation also ``minimiser``; ``lipschitz_of`` and
``smoothness_of`` where the bounds depend on public facts of the data, such as its declared
record domain): the logistic loss
(:mod:`kngflow.models.logistic.erm`, where the constants are derived) and the squared
loss on sufficient statistics (:mod:`kngflow.models.linear.erm`).  Adjacency is
kngflow's: data sets of the same (public) size ``n`` differing in one record.  Here:
output perturbation, noisy projected gradient descent, and the privacy accountants
(dp-accounting's RDP accountant) that calibrate the Gaussian variants; DP-SGD on the
loss's per-example gradients (hook ``per_example_gradients``); and the constants of
Chaudhuri, Monteleoni & Sarwate's objective perturbation (:func:`cms_constants`), shared
by every model that runs it (a loss with ``|l'| <= 1``, ``l'' <= c`` on records ``||x|| <= 1``).

The release is ``estimate`` alone; ``info`` (sampler, acceptance, steps) is diagnostics.
"""

from __future__ import annotations

import functools
import itertools
import math
from numbers import Real

import numpy as np

from kngflow.mechanisms.base import (SAMPLER_DIAGNOSTICS, Mechanism, Release, check_choice, check_epsilon, check_int,
                                     check_positive, check_probability, check_rng)
from kngflow.mechanisms.claims import Composed, StatisticNoise
from kngflow.mechanisms.hardening import UNIT_ROUNDOFF, Hardening, lipschitz_hardening, snap
from kngflow.noise import knorm_noise
from kngflow.norms import get_norm

__all__ = [
    "OutputPerturbation",
    "NoisyGD",
    "DPSGD",
    "DEFAULT_REG",
    "EPS_CAP",
    "DPSGD_AUDIT_RADIUS",
    "SLACK_RULES",
    "cms_constants",
    "gd_accountant_epsilon",
    "gaussian_gd_noise_multiplier",
    "dpsgd_accountant_epsilon",
    "dpsgd_noise_multiplier",
    "poisson_sample",
    "printed_gd_sigma",
    "audit_iterates",
    "gaussian_lipschitz",
    "certified_ridge_minimiser",
]

#: Default ridge constant ``reg`` (Λ) (:mod:`kngflow.models.logistic.erm` discusses the choice).
DEFAULT_REG = 0.01


def _release(theta, steps, sampler="exact") -> Release:
    return Release(np.asarray(theta, dtype=np.float64), {"sampler": sampler, "acceptance": 1.0, "steps": int(steps)})



#: a Gaussian coordinate beyond this many standard deviations from its centre has
#: probability below 1e-890: the Gaussian density is log-Lipschitz within it (``gaussian_lipschitz``)
GAUSS_REACH = 64.0


def gaussian_lipschitz(d: int, sigma: float) -> float:
    """``L`` of ``N(c, sigma^2 I_d)`` against ∞-norm moves within ``GAUSS_REACH sigma`` of ``c``
    (plus a grid cell): ``|grad log f|_1 = sum_j |x_j - c_j| / sigma^2 <= (GAUSS_REACH + 1) d / sigma``.
    Outside that region (probability below 1e-890 for any ``d <= 10^6``) the bound is not
    claimed; its mass is below any δ reported."""
    return (GAUSS_REACH + 1.0) * d / sigma


class _ERM(Mechanism):
    """Shared options (``reg``) and the loss hooks a model provides: the logistic loss
    (:mod:`kngflow.models.logistic.erm`) and the squared loss on sufficient statistics
    (:mod:`kngflow.models.linear.erm`)."""

    diagnostics = SAMPLER_DIAGNOSTICS

    def __init__(self, reg):
        self.reg = check_positive("reg", reg)

    # ---------------------------------------------------------------- loss hooks (a model provides them)
    def check_data(self, data):
        """The validated data."""
        raise NotImplementedError

    def size(self, data) -> tuple[int, int]:
        """``(n, d)``: records and coefficients."""
        raise NotImplementedError

    def lipschitz(self, d: int) -> float:
        """``L``: a bound on one record's loss gradient ``||grad l(theta; z)||_2`` where it is used."""
        raise NotImplementedError

    def smoothness(self, d: int) -> float:
        """A bound on the largest eigenvalue of ``hess J``."""
        raise NotImplementedError

    def smoothness_of(self, data) -> float:
        """The bound of :meth:`smoothness` for this data set (a loss whose curvature depends on
        a property of the data, such as the Huber hinge's smoothing, overrides it)."""
        return self.smoothness(self.size(data)[1])

    def lipschitz_of(self, data) -> float:
        """The bound of :meth:`lipschitz` for this data set (a loss whose bound depends on a
        public property of the data, such as its declared record domain, overrides it)."""
        return self.lipschitz(self.size(data)[1])

    def mean_gradient(self, data, theta: np.ndarray) -> np.ndarray:
        """``(1/n) sum_i grad l(theta; z_i)`` at ``theta`` (d,), or at each row of ``theta`` (k, d)."""
        raise NotImplementedError

    def finish(self, data, theta: np.ndarray) -> np.ndarray:
        """The estimate in the data's units."""
        raise NotImplementedError

    def default_radius(self) -> float:
        """Radius of the ball ``C`` of projected methods (holds the minimiser)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options().items())
        return f"{type(self).__name__}({opts})"



class OutputPerturbation(_ERM):
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
            return _release(np.zeros(d), 0, "none")
        theta, it, _ = self.minimiser(data)
        released = theta + knorm_noise(rng, "l2", d, scale)
        if self.hardened:
            released = snap(released, self.hardening(data, epsilon), rng)
        return _release(self.finish(data, released), it)

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



#: RDP orders for the (unsampled) Gaussian, whose RDP ``alpha / (2 z^2)`` is closed form
#: at any order: wide enough that ε down to ~1e-9 is reachable at δ = 1e-5.
_GAUSS_ORDERS = tuple(np.concatenate([np.linspace(1.05, 20.0, 300), np.geomspace(20.5, 1e12, 500)]).tolist())


def _dpa():
    import logging

    import dp_accounting

    # its RDP series log "Negative Renyi divergence ... returning an epsilon of zero" at
    # extreme noise levels, which the calibrations here check and discard themselves
    logging.getLogger("absl").setLevel(logging.ERROR)
    return dp_accounting


def gd_accountant_epsilon(z: float, steps: int, delta: float) -> float:
    """ε (RDP accountant, at ``delta``) of ``steps`` Gaussian mechanisms with noise
    multiplier ``z`` (standard deviation / ℓ2 sensitivity)."""
    dpa = _dpa()
    from dp_accounting.rdp import RdpAccountant

    acc = RdpAccountant(list(_GAUSS_ORDERS))
    acc.compose(dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(float(z)), int(steps)))
    return float(acc.get_epsilon(delta))


@functools.lru_cache(maxsize=256)
def gaussian_gd_noise_multiplier(epsilon: float, delta: float, steps: int) -> float | None:
    """Smallest noise multiplier ``z`` (to relative 1e-9) with ``steps``-fold Gaussian
    composition (ε, δ)-DP by dp_accounting's RDP accountant; None if unreachable."""
    dpa = _dpa()
    from dp_accounting.rdp import RdpAccountant

    try:
        u = dpa.calibrate_dp_mechanism(
            lambda: RdpAccountant(list(_GAUSS_ORDERS)),
            lambda u: dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(math.exp(u)), int(steps)),
            float(epsilon), float(delta),
            bracket_interval=dpa.ExplicitBracketInterval(-40.0, 60.0), tol=1e-9)
    except Exception:  # target outside what the accountant certifies in the bracket
        return None
    return math.exp(u)


#: RDP orders for the subsampled Gaussian: integers only (dp_accounting's exact finite sum;
#: its series for fractional orders is slow and fails to converge at small z).
_SGD_ORDERS = tuple(list(range(2, 33)) + [40, 48, 56, 64, 80, 96, 128, 160, 192, 256, 384, 512, 1024, 2048, 4096, 8192])


def dpsgd_accountant_epsilon(z: float, q: float, steps: int, delta: float) -> float:
    """ε (RDP accountant, integer orders, add-or-remove-one, at ``delta``) of ``steps`` Poisson-subsampled
    (rate ``q``) Gaussian mechanisms with noise multiplier ``z``."""
    dpa = _dpa()
    from dp_accounting.rdp import RdpAccountant

    acc = RdpAccountant(list(_SGD_ORDERS))
    acc.compose(dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(float(q), dpa.GaussianDpEvent(float(z))), int(steps)))
    return float(acc.get_epsilon(delta))


@functools.lru_cache(maxsize=256)
def dpsgd_noise_multiplier(epsilon: float, delta: float, q: float, steps: int) -> float | None:
    """Smallest ``z`` (to relative 1e-5) with ``steps`` Poisson(q)-subsampled Gaussian
    mechanisms (ε, δ)-DP under add-or-remove-one by dp_accounting's RDP accountant
    (orders ``_SGD_ORDERS``); None if unreachable (tiny ε: below the accountant's floor) or if
    the accountant's ε at the root is not within (ε/2, ε]."""
    dpa = _dpa()
    from dp_accounting.rdp import RdpAccountant

    a = np.array(_SGD_ORDERS, dtype=float)
    if epsilon <= float(np.min(np.log1p(-1.0 / a) - (math.log(delta) + np.log(a)) / (a - 1.0))):
        return None  # below the accountant's floor (RDP >= 0 at every order)
    try:
        u = dpa.calibrate_dp_mechanism(
            lambda: RdpAccountant(list(_SGD_ORDERS)),
            lambda u: dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(float(q), dpa.GaussianDpEvent(math.exp(u))),
                                              int(steps)),
            float(epsilon), float(delta),
            bracket_interval=dpa.ExplicitBracketInterval(-8.0, 16.0), tol=1e-5)
    except Exception:
        return None
    z = math.exp(u)
    # dp_accounting returns ε = 0 where its RDP series lose precision (huge z): a root found
    # there is an artefact, not a calibration
    if not 0.5 * epsilon < dpsgd_accountant_epsilon(z, q, steps, delta) <= epsilon * (1.0 + 1e-9):
        return None
    return z


def poisson_sample(rng: np.random.Generator, n: int, q: float) -> np.ndarray:
    """Indices of a Poisson sample of ``range(n)`` (each kept independently with
    probability ``q``), in ``O(nq)``: the gaps between kept indices are i.i.d.
    Geometric(q) on {1, 2, ...}."""
    if q >= 1.0:
        return np.arange(n)
    idx = np.cumsum(rng.geometric(q, size=int(n * q + 8.0 * math.sqrt(n * q) + 16))) - 1
    while idx[-1] < n:  # rare: more kept than drawn gaps cover
        idx = np.concatenate([idx, idx[-1] + np.cumsum(rng.geometric(q, size=idx.size))])
    return idx[: np.searchsorted(idx, n)]


def printed_gd_sigma(epsilon: float, delta: float, steps: int, n: int, L: float) -> float:
    """The chapter's ``sigma = sqrt(2 L^2 T log(1/delta)) / (n eps)`` (after eq. 7.12)."""
    return math.sqrt(2.0 * L * L * steps * math.log(1.0 / delta)) / (n * epsilon)


def audit_iterates(d: int, radius: float) -> np.ndarray:
    """Public iterates at which the gradient methods' steps are audited: ``theta_0 = 0``
    (first) and points of the sphere of radius ``radius``: ``±radius e_j``,
    ``radius (±e_i ± e_j) / sqrt(2)`` and (``d <= 8``) ``radius s / sqrt(d)`` for every sign
    vector ``s``.  The logistic gradient difference of two records ``x (sigma(x'theta) - y) -
    x' (sigma(x''theta) - y')`` is largest where ``x'theta`` and ``x''theta`` are large with
    opposite signs, e.g. along ``e_j`` for two corners that differ in coordinate ``j``."""
    eye = np.eye(d)
    pts = [np.zeros(d), *(radius * eye), *(-radius * eye)]
    for i in range(d):
        for j in range(i + 1, d):
            for si in (-1.0, 1.0):
                for sj in (-1.0, 1.0):
                    pts.append(radius * (si * eye[i] + sj * eye[j]) / math.sqrt(2.0))
    if d <= 8:
        pts += [radius * np.array(s) / math.sqrt(d) for s in itertools.product((-1.0, 1.0), repeat=d)]
    pts = np.array(pts)
    _, first = np.unique(pts, axis=0, return_index=True)
    return pts[np.sort(first)]



def _steps_claim(mech, delta: float) -> StatisticNoise:
    """The claim of a mechanism of noisy steps at public iterates (its ``statistic``,
    ``statistic_noise``, ``statistic_steps``, ``audit_iterates``), with its
    ``accountant_epsilon`` when ``delta > 0`` (Gaussian noise)."""
    parts = dict(statistic=mech.statistic, noise=mech.statistic_noise, steps=mech.statistic_steps,
                 iterates=mech.audit_iterates, additive=mech.statistic_additive,
                 description=mech.statistic_description, delta=float(delta))
    if delta > 0:
        return Composed(accountant_epsilon=mech.accountant_epsilon, **parts)
    return StatisticNoise(**parts)


class NoisyGD(_ERM):
    """Noisy projected gradient descent (chapter eq. 7.11–7.12) on ``J``.

    From ``theta_0 = 0``, for ``t < T = iterations``:
    ``g_t = grad J(theta_t) + Z_t``, ``theta_{t+1} = Pi_C(theta_t - eta g_t)``, with
    ``C = {||theta||_2 <= radius}``; release ``theta_T``.  Defaults: ``radius =
    sqrt(2 log 2 / reg)`` (``reg/2 ||theta^||^2 <= J(theta^) <= J(0) = log 2``: the
    minimiser lies in ``C``), ``eta = 1 / (m/4 + reg)`` (``J`` is ``(m/4 + reg)``-smooth:
    ``l'' <= 1/4``, ``||x||^2 <= m`` on the box; :meth:`smoothness_of` the data set's declared
    domain in general), ``iterations = 100`` (named so that a spec's ``[sampler] steps`` never sets it).

    Sensitivity.  ``grad J = (1/n) sum_i x_i (sigma(x_i'theta) - y_i) + reg theta``;
    replacing one record moves it by at most ``2L/n``, ``L = sqrt(m)`` (box; ``R_2`` over a
    declared record domain, :meth:`lipschitz_of`), at every
    ``theta``; each step is a mechanism of the data given the (public) past iterates, and
    the projection and the release are post-processing.

    ``noise="gamma"``: ``Z_t ∝ exp(-||z|| / s)``, ``s = 2 L T / (n eps)``: each step is
    (ε/T)-DP (ℓ2 K-norm mechanism), T steps ε-DP by basic (adaptive) composition.

    ``noise="gaussian"``: ``Z_t ~ N(0, sigma^2 I)``, (ε, δ)-DP, ``delta`` default 1e-5.
    ``calibration="accountant"`` (default): ``sigma = z 2L/n`` with ``z`` the smallest
    noise multiplier for which dp_accounting's RDP accountant certifies (ε, δ) for
    T-fold composition of the Gaussian mechanism (:func:`gaussian_gd_noise_multiplier`,
    cached).  ``calibration="printed"``: the chapter's ``sigma^2 = 2 L^2 T log(1/δ) /
    (n eps)^2``, as printed.  It is NOT (ε, δ)-DP under the chapter's own adjacency
    (data sets "differ in a single individual", fixed n: sensitivity ``2L/n``): its
    noise multiplier is ``z = sqrt(2 T log(1/δ)) / (2 eps)``.  T Gaussian steps with
    multiplier ``z`` are exactly one Gaussian mechanism with multiplier ``z / sqrt(T)``, whose
    exact (ε, δ) curve is Balle & Wang's (2018) ``δ(ε) = Φ(1/(2s) - ε s) - e^ε Φ(-1/(2s) - ε s)``,
    ``s = sqrt(2 log(1/δ)) / (2 eps)`` (independent of T): at δ = 1e-5 the true ε is 1.08,
    1.43, 1.63, 1.77 times the target at ε = 1/64, 1/4, 1, 2 (equivalently δ(ε) = 1.8e-5,
    3.2e-4, 1.8e-3, 5.8e-3).  It is valid for add-or-remove adjacency, sensitivity ``L/n``
    (``s`` doubles; RDP accountant ε ≈ 0.83 eps at ε = 1).  Kept as a documented baseline;
    its results are not (ε, δ)-DP under kngflow's (replace-one) adjacency.

    Where the accountant cannot certify the target (ε below ~1e-9 at δ = 1e-5, above
    ~1e9) the release is the
    data-independent ``theta_0 = 0`` (0-DP; ``info["sampler"] = "none"``).

    Audit (closed form, :func:`~kngflow.audit.statistic_audit`).  Given the public iterate
    ``theta_t`` a step releases ``theta_t - eta (grad J(theta_t) + Z_t)`` before the
    projection: an affine bijection of ``grad J(theta_t) + Z_t`` (``eta`` public), so its
    privacy loss is exactly that of the statistic ``grad J(theta_t)`` plus the noise, and the
    projection onto ``C`` (and the release of ``theta_T``) is post-processing that cannot add
    to it.  The audit reads the statistic at ``theta_0 = 0`` and at points of ``C``'s
    boundary (:func:`audit_iterates`; later iterates lie in ``C``), for every pair of domain
    records: gamma noise, the step's loss ``||grad J_D - grad J_D'|| / s`` compared with its
    budget ``ε / T`` (``T`` steps compose to ``T x`` that, basic composition — so auditing
    one step covers every ``T``); Gaussian noise, the step's ``mu = ||grad J_D - grad J_D'|| /
    sigma`` composed exactly to ``sqrt(T) mu`` and the exact ε at δ of the Gaussian
    mechanism.  The worst pair found moves the gradient by ``||Δ|| = 2 sqrt(m - 1) / n``, a
    fraction ``sqrt((m - 1) / m)`` of the calibrated ``2L/n`` (0.71 at ``m = 2``; e.g. corners
    ``(-1, -1)`` and ``(-1, 1)``, both labelled 0, at ``theta = (-radius, 0)``: ``Δ = (x - x') / n``),
    so the 2ε-calibrated mechanism is flagged for ``m >= 2``.  For ``m = 1`` the logistic
    gradient moves by at most ``L/n`` at every ``theta``: the calibration is conservative by
    2 and the 2ε-calibrated mechanism is in fact ε-DP (gamma: the audit reads 1.0, a
    pass).  At ``theta_0 = 0`` alone the gradient moves by at most ``L/n`` (``|sigma(0) - y| = 1/2``): the first step
    uses half its budget, which is why the audit checks the step at the iterates the
    calibration covers rather than at ``theta_0`` only — with ``iterations = 1`` the release
    itself is (ε/2)-DP (gamma) and the 2ε-calibrated one-step release is still ε-DP; it is
    the step's calibration (each step (ε/T)-DP at any public iterate in ``C``) that fails.
    The Gaussian variant also gets the accountant audit
    (:func:`~kngflow.audit.accountant_audit`): the RDP accountant's ε for the noise
    multiplier used (the printed calibration fails it).
    """

    kind = "noisy_gd"

    def __init__(self, *, reg=DEFAULT_REG, iterations=100, radius=None, step_size=None, noise="gaussian", delta=None,
                 calibration=None):
        super().__init__(reg)
        self.iterations = check_int("iterations", iterations, 1)
        self.radius = self.default_radius() if radius is None else check_positive("radius", radius)
        self.step_size = None if step_size is None else check_positive("step_size", step_size)
        self.noise = check_choice("noise", noise, ("gamma", "gaussian"))
        if self.noise == "gaussian":
            self.delta = 1e-5 if delta is None else check_probability("delta", delta)
            self.calibration = check_choice("calibration", "accountant" if calibration is None else calibration,
                                            ("printed", "accountant"))
        else:
            if delta is not None:
                raise ValueError("delta applies to noise='gaussian' only (noise='gamma' is pure ε-DP)")
            if calibration is not None:
                raise ValueError("calibration applies to noise='gaussian' only")
            self.calibration = None

    def options(self) -> dict:
        out = {"reg": self.reg, "iterations": self.iterations, "radius": self.radius, "noise": self.noise}
        if self.step_size is not None:
            out["step_size"] = self.step_size
        if self.noise == "gaussian":
            out["delta"] = self.delta
            out["calibration"] = self.calibration
        return out

    def eta(self, d: int) -> float:
        return self.step_size if self.step_size is not None else 1.0 / self.smoothness(d)

    def noise_multiplier(self, epsilon: float) -> float | None:
        """Gaussian noise: ``z = sigma / (2L/n)`` (independent of ``n`` and ``m``); None: unreachable."""
        if self.noise != "gaussian":
            raise ValueError("noise_multiplier applies to noise='gaussian' only")
        if self.calibration == "printed":
            z = math.sqrt(2.0 * self.iterations * math.log(1.0 / self.delta)) / (2.0 * epsilon)
            return z if math.isfinite(z) else None
        return gaussian_gd_noise_multiplier(epsilon, self.delta, self.iterations)

    # ---------------------------------------------------------------- audit seam
    #: the step's statistic is an average over records: the rest of a data set cancels in
    #: ``grad J_D - grad J_D'`` (``n`` enters only through the public scale)
    statistic_additive = True
    statistic_description = ("grad J(theta_t) at the step's public iterate theta_t; the step releases "
                             "theta_t - eta (grad J + Z) before the projection onto C, an affine bijection of "
                             "grad J + Z, and the projection is post-processing")

    def privacy_claim(self) -> StatisticNoise:
        """Noisy steps at public iterates (:meth:`statistic`, :meth:`statistic_noise`,
        :meth:`statistic_steps`), with the accountant's ε when the noise is Gaussian (δ > 0)."""
        return _steps_claim(self, self.delta if self.noise == "gaussian" else 0.0)  # gamma: pure ε-DP, no δ

    def audit_iterates(self, d: int) -> np.ndarray:
        """``theta_0 = 0`` and points of the boundary of ``C`` (:func:`audit_iterates`)."""
        return audit_iterates(d, self.radius)

    def statistic(self, data) -> np.ndarray:
        """``grad J(theta)`` at each of :meth:`audit_iterates` (rows), as the step computes it."""
        data = self.check_data(data)
        theta = self.audit_iterates(self.size(data)[1])
        return self.mean_gradient(data, theta) + self.reg * theta

    def statistic_noise(self, data, epsilon: float):
        """Per step: gamma ``(ℓ2 norm, s)``, ``s = 2 L T / (n eps)``; Gaussian ``("gaussian",
        sigma)``.  An unreachable target (data-independent release) has infinite scale."""
        n, d = self.size(data)
        level = self.noise_level(n, d, epsilon, self.lipschitz_of(data))
        level = math.inf if level is None else level
        return ("gaussian", level) if self.noise == "gaussian" else (get_norm("l2"), level)

    def statistic_steps(self, n: int) -> int:
        """``T = iterations``, composed adaptively (each step at the public past iterate)."""
        return self.iterations

    def accountant_epsilon(self, n: int, epsilon: float, run_epsilon: float | None = None) -> float:
        """ε by dp_accounting's RDP accountant, at ``delta``, of ``T`` Gaussian steps with the
        noise multiplier calibrated at ``run_epsilon`` (0 for the data-independent release)."""
        z = self.noise_multiplier(epsilon if run_epsilon is None else run_epsilon)
        return 0.0 if z is None else gd_accountant_epsilon(z, self.iterations, self.delta)

    def noise_level(self, n: int, d: int, epsilon: float, lipschitz: float | None = None) -> float | None:
        """Gamma: scale ``s`` of ``exp(-||z||/s)``; Gaussian: ``sigma``; None: unreachable
        (``L`` = ``lipschitz``, default :meth:`lipschitz` of ``d``)."""
        L = self.lipschitz(d) if lipschitz is None else lipschitz
        if self.noise == "gamma":
            s = 2.0 * L * self.iterations / (n * epsilon)
            return s if math.isfinite(s) else None
        if self.calibration == "printed":
            s = printed_gd_sigma(epsilon, self.delta, self.iterations, n, L)
            return s if math.isfinite(s) else None
        z = gaussian_gd_noise_multiplier(epsilon, self.delta, self.iterations)
        return None if z is None else z * 2.0 * L / n

    def hardening(self, data, epsilon) -> Hardening:
        """Lipschitz route on each step's noisy gradient ``g_t = grad J(theta_t) + Z_t``
        (site "statistic", ``T`` snaps: the iterates, the projection and the release are
        post-processing of the snapped steps, and ε′ composes them).

        ``|grad J|_j <= G = L + reg R`` on ``C``.  Gamma noise ``exp(-||z||_2 / s)``:
        ``L_V = sqrt(d) / s``, clamp ``B = G + 64 (d + 1) s``.  Gaussian noise:
        :func:`gaussian_lipschitz` (``65 d / sigma``), clamp ``B = G + 64 sigma``.  Rounding:
        the mean of ``n`` gradient terms of size at most ``L``, at most ``n u L`` per
        coordinate, and the sums with ``reg theta``, ``Z_t`` and the dither, at most
        ``16 u 2B``.  ``u = 2^-53``.
        """
        data = self.check_data(data)
        n, d = self.size(data)
        L = self.lipschitz_of(data)
        level = self.noise_level(n, d, epsilon, L)
        G = L + self.reg * self.radius
        if level is None:  # the data-independent release: nothing is snapped, any grid will do
            lip, bound = 1.0, G
        elif self.noise == "gamma":
            lip, bound = math.sqrt(d) / level, G + 64.0 * (d + 1) * level
        else:
            lip, bound = gaussian_lipschitz(d, level), G + GAUSS_REACH * level
        eta = n * UNIT_ROUNDOFF * L + 32.0 * UNIT_ROUNDOFF * bound
        return lipschitz_hardening(lip, bound, eta, d, epsilon, snaps=self.iterations,
                                   site="statistic")

    def release(self, data, epsilon, rng) -> Release:
        data = self.check_data(data)
        epsilon = check_epsilon(epsilon)
        rng = check_rng(rng)
        n, d = self.size(data)
        level = self.noise_level(n, d, epsilon, self.lipschitz_of(data))
        if level is None:
            return _release(np.zeros(d), 0, "none")
        if self.noise == "gamma":
            Z = knorm_noise(rng, "l2", d, level, size=self.iterations)
        else:
            Z = rng.standard_normal((self.iterations, d)) * level
        eta = self.step_size if self.step_size is not None else 1.0 / self.smoothness_of(data)
        reg, R = self.reg, self.radius
        h = self.hardening(data, epsilon) if self.hardened else None
        theta = np.zeros(d)
        for t in range(self.iterations):
            g = self.mean_gradient(data, theta) + reg * theta + Z[t]
            if h is not None:
                g = snap(g, h, rng)
            theta = theta - eta * g
            norm = float(np.linalg.norm(theta))
            if norm > R:
                theta *= R / norm
        return _release(self.finish(data, theta), self.iterations)


# --------------------------------------------------------------------------------------
# hardened objective perturbation: the minimiser certified in double-double
# --------------------------------------------------------------------------------------


def certified_ridge_minimiser(theta, ridge: float, V, eta: float, gradient_dd, hessian,
                              refinements: int = 8) -> tuple[np.ndarray, np.ndarray, int]:
    """The minimiser of ``F(w) = loss(w) + ridge/2 |w|^2 + V'w`` (``ridge``-strongly convex) in
    double-double with a certificate of its rounding: ``(hi, lo, refinements used)``.

    ``theta`` is the float64 minimiser (the unhardened release's solve); up to ``refinements``
    Newton steps refine ``hi + lo`` on the loss's gradient computed in double-double by
    ``gradient_dd(hi, lo, gh, gl)`` (which returns a bound on its error per coordinate;
    ``ridge w + V`` is added from exact products) until ``(||g||_2 (1 + 4 m u) + sqrt(m) e) /
    ridge``, an upper bound on ``||w - w*||_2`` by strong convexity, is at most ``eta / 2``.
    ``hessian(hi)`` is ``F``'s Hessian (or a generalised one) at ``hi``: it only steers the
    refinement, the certificate measures it.  The logistic loss's version is
    :func:`kngflow.models.logistic.mechanisms.certified_minimiser`.  RuntimeError (one line)
    if the certificate is never met.
    """
    from kngflow.kernels.dd import dd_add, two_prod

    m = theta.shape[0]
    hi, lo = np.array(theta, dtype=np.float64), np.zeros(m)
    gh, gl = np.empty(m), np.empty(m)
    u = UNIT_ROUNDOFF
    for extra in range(refinements + 1):
        err = gradient_dd(hi, lo, gh, gl)
        g = np.empty(m)
        for j in range(m):
            p, e = two_prod(ridge, hi[j])
            a, b = dd_add(gh[j], gl[j], p)
            a, b = dd_add(a, b, e + ridge * lo[j])
            a, b = dd_add(a, b, V[j])
            g[j] = a + b
            err += 8.0 * u * u * (abs(gh[j]) + abs(p) + abs(V[j])) + 2.0 * u * abs(ridge * lo[j])  # every j's, summed
        cert = (float(np.linalg.norm(g)) * (1.0 + 4.0 * m * u) + math.sqrt(m) * err) / ridge
        if cert <= 0.5 * eta:
            return hi, lo, extra
        if extra == refinements:
            break
        step = np.linalg.solve(hessian(hi), g)
        for j in range(m):
            hi[j], lo[j] = dd_add(hi[j], lo[j], -step[j])
    raise RuntimeError(f"hardened release: the solver could not certify its rounding below eta = {eta:.3g} "
                       "(an ill-conditioned problem); use hardened=false")


# --------------------------------------------------------------------------------------
# objective perturbation's constants (Chaudhuri, Monteleoni & Sarwate 2011, Algorithm 2)
# --------------------------------------------------------------------------------------


#: the rules :func:`cms_constants` knows for taking the slack branch
SLACK_RULES = ("cms", "larger")


def cms_constants(epsilon: float, n: int, reg: float, c: float, rule: str = "cms") -> tuple[float, float]:
    """``(eps', Delta)`` of CMS 2011 Algorithm 2 (records ``||x|| <= 1``, ridge ``reg``, a loss
    with ``|l'| <= 1`` and curvature ``l'' <= c``):

    ``eps' = eps - log(1 + 2c/(n reg) + c^2/(n reg)^2)``; if ``eps' > 0``, ``Delta = 0``,
    else ``Delta = c / (n (e^{eps/4} - 1)) - reg`` and ``eps' = eps / 2``.

    ``rule="cms"`` is that rule as printed (there ``Delta > reg > 0`` whenever the slack branch
    is taken: ``eps <= 2 log(1 + a)``, ``a = c/(n reg)``, gives ``e^{eps/4} - 1 < a/2``).
    ``rule="larger"`` takes the slack branch also when it gives the larger ``eps'``, i.e.
    whenever ``eps - 2 log(1 + c/(n reg)) < eps/2``: as printed, ``eps'`` just above 0 means
    noise of scale ``2/eps'`` without bound (at ``n = 1000``, ``reg = 0.01``, ``c = 1``,
    ``eps = 0.2``: ``eps' = 0.0094``, scale 213, a noise norm of ``213 d`` on average), where
    the slack branch's ``eps/2 = 0.1`` and a slightly larger ridge serve better (``Delta`` is
    then ``max(0, .)``).  Both branches spend exactly ``eps`` (the other part in the
    Jacobian's ``2 log(1 + c/(n (reg + Delta)))``), and the choice depends on the public
    ``eps, n, reg, c`` only, so either rule is ε-DP."""
    a = c / (n * reg)
    eps_p = epsilon - 2.0 * math.log1p(a)  # log(1 + 2a + a^2) = 2 log(1 + a)
    if eps_p > (0.0 if rule == "cms" else epsilon / 2.0):
        return eps_p, 0.0
    return epsilon / 2.0, max(0.0, c / (n * math.expm1(epsilon / 4.0)) - reg)


# --------------------------------------------------------------------------------------
# DP-SGD
# --------------------------------------------------------------------------------------


#: Largest ε DP-SGD calibrates at: a mechanism that is (EPS_CAP, δ)-DP is (ε, δ)-DP for
#: every ε >= EPS_CAP, and the subsampled-Gaussian RDP series stay well conditioned there.
#: At EPS_CAP the noise is already negligible in the studies.
EPS_CAP = 64.0
#: radius of DP-SGD's audited iterates (its iterates are not projected): for the logistic
#: loss ``sigma(-40) ~ 4e-18``, so per-example gradients there are at their limits; for the
#: Huber hinge every margin of a unit-ball record is beyond the band for most directions
DPSGD_AUDIT_RADIUS = 40.0


class DPSGD(_ERM):
    """DP-SGD (Abadi et al. 2016; chapter §7.4.1) for ``J`` with Poisson subsampling.

    ``q = sampling_rate`` if given, else ``min(1, batch_size / n)``;
    ``T = min(ceil(epochs / q), max_steps)``; from 0, per step: include each record
    independently with probability ``q``; clip each sampled per-example gradient
    (hook :meth:`per_example_gradients`) to ℓ2 norm ``clip`` (C; default the loss's
    Lipschitz bound ``L``, which bounds every such gradient, so no clipping bias);
    ``g = (sum of clipped + N(0, (z C)^2 I)) / (q n) + reg theta``; ``theta <- theta - lr g``
    (default ``lr`` one over ``J``'s smoothness, :meth:`smoothness_of`).  The normaliser
    ``q n`` (expected batch size) is public: ``n`` is public under kngflow's adjacency.

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

    A model supplies the loss hooks of :class:`_ERM` and :meth:`per_example_gradients`.
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

    # ---------------------------------------------------------------- the loss's hook
    def per_example_gradients(self, data, theta: np.ndarray, idx) -> np.ndarray:
        """The gradients ``grad l(theta; z_i)`` of the records ``idx`` (an index array, or
        ``slice(None)`` for every record) as rows."""
        raise NotImplementedError

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

    def clip_norm(self, d: int, lipschitz: float | None = None) -> float:
        """``C``: ``clip``, default ``L`` (``lipschitz``, default :meth:`lipschitz` of ``d``)."""
        if self.clip is not None:
            return self.clip
        return self.lipschitz(d) if lipschitz is None else lipschitz

    # ---------------------------------------------------------------- audit seam
    #: the step's statistic is a sum over records (the rest cancels in ``S_D - S_D'``)
    statistic_additive = True
    statistic_description = ("the sum S of clipped per-example gradients at the step's public iterate (q = 1: "
                             "every record); the step releases theta - lr ((S + N(0, (zC)^2 I)) / (q n) + reg theta), "
                             "an affine bijection of S + noise")

    def privacy_claim(self) -> StatisticNoise:
        """Noisy steps at public iterates (:meth:`statistic`, :meth:`statistic_noise`,
        :meth:`statistic_steps`), with the accountant's ε when the noise is Gaussian (δ > 0)."""
        return _steps_claim(self, self.delta)

    def audit_iterates(self, d: int) -> np.ndarray:
        """``theta_0 = 0`` and points of radius :data:`DPSGD_AUDIT_RADIUS` (:func:`audit_iterates`)."""
        return audit_iterates(d, DPSGD_AUDIT_RADIUS)

    def _clip_sum(self, G: np.ndarray, C: float) -> np.ndarray:
        """``sum_i clip_C(G_i)`` over the rows of ``G``."""
        scale = np.minimum(1.0, C / np.maximum(np.sqrt(np.einsum("ij,ij->i", G, G)), 1e-300))
        return scale @ G

    def statistic(self, data) -> np.ndarray:
        """``S(theta) = sum_i clip_C(grad l(theta; z_i))`` at each of :meth:`audit_iterates` (rows)."""
        data = self.check_data(data)
        d = self.size(data)[1]
        C = self.clip_norm(d, self.lipschitz_of(data))
        return np.array([self._clip_sum(self.per_example_gradients(data, w, slice(None)), C)
                         for w in self.audit_iterates(d)])

    def statistic_noise(self, data, epsilon: float):
        """``("gaussian", z C)`` on the sum (infinite for the data-independent release)."""
        n, d = self.size(data)
        z = self.noise_multiplier(n, epsilon)
        return "gaussian", (math.inf if z is None else z * self.clip_norm(d, self.lipschitz_of(data)))

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
        :func:`gaussian_lipschitz` ``(d, zC)``, and so for the mixture over batches.  Clamp
        ``B = n C + 64 zC``.  Rounding: ``S_b`` sums at most ``n`` clipped gradients of norm
        at most ``C``, within ``n u n C`` in any order of summation; the sums with the noise
        and the dither add ``16 u 2B``.  ``u = 2^-53``.
        """
        data = self.check_data(data)
        n, d = self.size(data)
        z = self.noise_multiplier(n, epsilon)
        C = self.clip_norm(d, self.lipschitz_of(data))
        _, T = self.schedule(n)
        sigma = (z if z is not None else 1.0) * C
        bound = n * C + GAUSS_REACH * sigma
        eta = (float(n) ** 2 * C + 32.0 * bound) * UNIT_ROUNDOFF
        return lipschitz_hardening(gaussian_lipschitz(d, sigma), bound, eta, d, epsilon, snaps=T, site="statistic")

    def release(self, data, epsilon, rng) -> Release:
        data = self.check_data(data)
        epsilon = check_epsilon(epsilon)
        rng = check_rng(rng)
        n, d = self.size(data)
        q, T = self.schedule(n)
        z = self.noise_multiplier(n, epsilon)
        if z is None:
            return _release(np.zeros(d), 0, "none")
        C = self.clip_norm(d, self.lipschitz_of(data))
        lr = self.lr if self.lr is not None else 1.0 / self.smoothness_of(data)
        reg, norm = self.reg, q * n
        h = self.hardening(data, epsilon) if self.hardened else None
        # the dither comes from a stream 2^128 draws ahead, so the batches and the noise are
        # those of the unhardened release (the hardened one is its snapping, step by step)
        dither = np.random.Generator(rng.bit_generator.jumped()) if h is not None else None
        theta = np.zeros(d)
        for _ in range(T):
            idx = poisson_sample(rng, n, q)
            s = self._clip_sum(self.per_example_gradients(data, theta, idx), C) + rng.standard_normal(d) * (z * C)
            if h is not None:
                s = snap(s, h, dither)
            theta = theta - lr * (s / norm + reg * theta)
        return _release(self.finish(data, theta), T)

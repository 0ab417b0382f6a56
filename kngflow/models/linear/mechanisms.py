"""Linear-regression mechanisms on ``Theta = {||theta||_1 <= B}``.

All mechanisms read scaled sufficient statistics (:class:`~kngflow.models.linear.problem.LinearStats`:
``x`` in ``[-1, 1]^d``, ``y' = y / scale`` in ``[-1, 1]``) and return estimates multiplied by
``scale``.  Sensitivities are derived in :mod:`kngflow.models.linear.problem`; each class's
docstring states the density it samples and why it is ε-DP.  Objective perturbation is in
:mod:`kngflow.models.linear.objective`, the hardened releases' certified numerics in
:mod:`kngflow.models.linear.certified`.

Why KNG and the exponential mechanism here do not use the generic path
(:class:`~kngflow.mechanisms.generic.GenericKNG`, which five other models use and which a
new model should copy): the squared loss's gradient ``2 (G theta - c)`` is affine in
``theta``, so both densities have exact samplers on the sufficient statistics alone
(:mod:`kngflow.models.linear.sampler`: a K-norm ball's radius and direction for KNG, a
Gaussian restricted to the ℓ1 ball for the exponential mechanism), at ``O(d^2)`` per draw
whatever ``n``, and their hardened releases certify the affine map in double-double.  The
Gibbs and Metropolis fallbacks (same module) also run on the statistics; from the generic
path this model shares only the gradient-map sampler (``sampler="gradient_map"``).
"""

from __future__ import annotations

import math

import numpy as np

from kngflow._jit import jit
from kngflow.kernels.certified import certified_solve
from kngflow.kernels.dd import affine_dd, scale_dd
from kngflow.mechanisms.base import (SAMPLER_DIAGNOSTICS, Mechanism, Release, check_choice, check_epsilon, check_int,
                                     check_positive, check_rng)
from kngflow.mechanisms.claims import Density
from kngflow.mechanisms.draws import DrawInfo
from kngflow.mechanisms.map_draws import GRADIENT_MAP_PROPOSALS, gradient_map_draws
from kngflow.mechanisms.hardening import Hardening, HardeningError, coupling_hardening, dyadic_lattice, snap
from kngflow.models.linear.certified import (ETA_BITS, NO_FACTOR, REFINE_STEPS, TV_PER_TRY, certified_factors,
                                             snap_rounding, two_sum_arrays)
from kngflow.models.linear.problem import LinearStats, gradient_sensitivity, loss_sensitivity, ols, well_conditioned
from kngflow.models.linear.sampler import KIND_EXP, KNG_KINDS, exp_exact, gibbs_chains, kng_exact, metropolis_chains

__all__ = ["LinearMechanism", "NonPrivate", "KNG", "Exponential", "check_stats"]

#: the norms of the K-norm mechanisms here
NORMS = ("l1", "l2", "linf")
_SAMPLERS = ("auto", "exact", "gibbs", "metropolis", "gradient_map")


@jit
def _residual_gradient(theta, args, g):
    """``g = G theta - c`` (``args = (G, c)``): KNG's gradient ``2 (G theta - c)`` over 2."""
    G, c = args
    d = c.shape[0]
    for i in range(d):
        s = -c[i]
        for k in range(d):
            s += G[i, k] * theta[k]
        g[i] = s


@jit
def _gram(theta, args, H):
    """The Jacobian of :func:`_residual_gradient`: ``G``."""
    G = args[0]
    for i in range(G.shape[0]):
        for k in range(G.shape[1]):
            H[i, k] = G[i, k]


def check_stats(stats) -> LinearStats:
    """Validate sufficient statistics: types, shapes, finiteness, ``n >= d``."""
    if not isinstance(stats, LinearStats):
        raise TypeError(f"stats must be a kngflow.models.linear.problem.LinearStats, got {type(stats).__name__}")
    G, c = np.asarray(stats.G), np.asarray(stats.c)
    if G.ndim != 2 or G.shape[0] != G.shape[1]:
        raise ValueError(f"stats.G must be a square (d, d) matrix, got shape {G.shape}")
    if c.shape != (G.shape[0],):
        raise ValueError(f"stats.c must have shape (d,) = ({G.shape[0]},), got {c.shape}")
    if stats.n < G.shape[0]:
        raise ValueError(f"stats.n must be at least d={G.shape[0]}, got n={stats.n}")
    if not (np.all(np.isfinite(G)) and np.all(np.isfinite(c)) and np.isfinite(stats.scale) and stats.scale > 0):
        raise ValueError("stats must be finite with scale > 0")
    return stats


class LinearMechanism(Mechanism):
    """Base: keyword-only options validated once; ``release`` validates its inputs."""

    kind = ""
    diagnostics = SAMPLER_DIAGNOSTICS

    def release(self, stats: LinearStats, epsilon: float, rng: np.random.Generator) -> Release:
        """Release a private estimate of the regression coefficients (original units)."""
        stats = check_stats(stats)
        epsilon = check_epsilon(epsilon)
        rng = check_rng(rng)
        estimate, info = self._release_output(stats, epsilon, rng)
        return Release(estimate, info)

    def _release_output(self, stats, epsilon, rng):
        """``(estimate in original units, info)``: :meth:`_release`'s scaled estimate times ``scale``."""
        theta, info = self._release(stats, epsilon, rng)
        return np.asarray(theta, dtype=np.float64) * stats.scale, info

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options().items())
        return f"{type(self).__name__}({opts})"

    def options(self) -> dict:
        return {}


class NonPrivate(LinearMechanism):
    """Ordinary least squares (unconstrained; minimum-norm when ``G`` is singular): the
    non-private baseline.  Not differentially private: a privacy audit flags it."""

    kind = "nonprivate"
    private = False

    def _release(self, stats, epsilon, rng):
        return ols(stats), {"sampler": "none", "acceptance": np.nan, "steps": 0}


def _row_by_row(draw, out) -> np.ndarray:
    """Each row's tries of an exact kernel ``draw(rows)`` run on one row of ``out`` at a time
    (the same draws, in the same order, as one run on all rows); -1 from the first row that
    exhausted its tries on (the later rows are not drawn, as in one run)."""
    tries = np.full(out.shape[0], -1, dtype=np.int64)
    for i in range(out.shape[0]):
        tries[i] = draw(out[i:i + 1])
        if tries[i] < 0:
            break
    return tries


class _Sampled(LinearMechanism):
    """Shared sampler policy: exact draws, then exact Gibbs, then Metropolis."""

    snaps_itself = True  # hardened releases are snapped from their double-double value

    def __init__(self, *, bound=1.0, sampler="auto", steps=10_000, gibbs_sweeps=1000, max_tries=20_000):
        self.bound = check_positive("bound", bound)
        self.sampler = check_choice("sampler", sampler, _SAMPLERS)
        self.steps = check_int("steps", steps, 2)
        self.gibbs_sweeps = check_int("gibbs_sweeps", gibbs_sweeps, 1)
        self.max_tries = check_int("max_tries", max_tries, 1)

    def options(self) -> dict:
        return {
            "bound": self.bound,
            "sampler": self.sampler,
            "steps": self.steps,
            "gibbs_sweeps": self.gibbs_sweeps,
            "max_tries": self.max_tries,
        }

    def check_hardenable(self) -> None:
        """Hardened releases run the exact sampler with a certified double-double solve
        and, where it cannot run, coordinate Gibbs (ℓ1, ℓ∞ and the exponential mechanism)
        or the Metropolis chain (ℓ2), both on a dyadic lattice (exact positions); the
        gradient map is opt-in (unhardened)."""
        allowed = ["auto", "exact", "gibbs", "metropolis"] if self._has_gibbs else ["auto", "exact", "metropolis"]
        if self.sampler not in allowed:
            raise HardeningError(f"hardened: sampler={self.sampler!r} has no bound on its rounding; allowed with "
                                 f"hardened: {allowed}")

    def spread(self, n: int, d: int, epsilon: float) -> float:
        """A public lower bound on the standard deviation of each coordinate of the
        (untruncated) release, scaled units; subclasses derive it."""
        raise NotImplementedError

    def hardening(self, stats, epsilon) -> Hardening:
        """Coupling route on ``{|theta_j| <= B scale}`` with the grid following the spread
        (:func:`~kngflow.mechanisms.hardening.spread_grid`: ``Λ <= spread / 16``, so the
        rounding adds at most 1/1024 of the privacy noise's variance at every ``n``).

        ``η = Λ 2^-44``: the release is carried in double-double and snapped by the
        sampler (``site = "sampler"``).  The exact route refines ``G θ = c + u`` and
        certifies ``||θ - G^{-1}(c + u)||_2`` a posteriori (:mod:`kngflow.kernels.dd`); the
        Gibbs and Metropolis routes move on the lattice ``2^(floor(log2 B) - 46)``, whose
        positions are exact sums (:func:`~kngflow.models.linear.sampler.gibbs_chains`); the
        product with ``scale`` is kept exact
        (:func:`~kngflow.kernels.dd.scale_dd`).  A draw whose certificate exceeds ``η``
        is not released: the chain runs instead (every route targets the same law).
        δ′ = δ + (1 + e^ε) 2 d 2^-44 (+ the exponential mechanism's ``tv``).
        """
        scale = abs(float(stats.scale))
        spread = self.spread(int(stats.n), int(stats.d), epsilon)
        h = coupling_hardening(self.bound * scale, 0.0, stats.d, site="sampler", spread=spread * scale)
        return h._replace(eta=math.ldexp(h.grid, -ETA_BITS), tv=self._tv_bound())

    def _tv_bound(self) -> float:
        return 0.0

    # subclasses set: _kind (kernel code), _rate(stats, eps), _has_gibbs, _exact(...)
    def _release(self, stats, epsilon, rng):
        """Draw with the first sampler of the policy that succeeds.

        Every sampler targets the same law, so the choice changes only the (MCMC)
        approximation error, never the target: exact draws need ``G^{-1}`` and are
        skipped when ``G`` is singular or ill conditioned (every data set of the
        declared domain releases); a rejection sampler that exhausts ``max_tries``
        returns nothing, and the accepted draws of one that succeeds follow the target
        exactly.  Chains start at ``theta = 0`` whatever the data.
        """
        a = self._rate(stats.d, epsilon)
        order = {
            "auto": ("exact", "gibbs" if self._has_gibbs else "metropolis"),
            "exact": ("exact",),
            "gibbs": ("gibbs",),
            "metropolis": ("metropolis",),
            "gradient_map": ("gradient_map",),
        }[self.sampler]
        for name in order:
            if name == "gradient_map":
                if not well_conditioned(stats.G):
                    raise RuntimeError(
                        "the gradient-map sampler needs an invertible, well-conditioned G = X'X; use sampler='auto'"
                    )
                theta, info = self.draw_gradient_map(stats, epsilon, rng, 1)
                return theta[0], info.release_info()
            if name == "exact":
                if not well_conditioned(stats.G):
                    if len(order) == 1:
                        raise RuntimeError(
                            "the exact sampler needs an invertible, well-conditioned G = X'X; use sampler='auto'"
                        )
                    continue
                theta, tries = self._exact(stats, a, rng, 1, self.max_tries)
                if tries[0] > 0:
                    return theta[0], DrawInfo("exact", 1.0 / tries, tries).release_info()
                if len(order) == 1:
                    raise RuntimeError(
                        f"exact sampler exhausted max_tries={self.max_tries}; use sampler='auto' or raise max_tries"
                    )
            elif name == "gibbs":
                if not self._has_gibbs:
                    raise ValueError(f"sampler 'gibbs' is not available for {self!r}; use 'exact' or 'metropolis'")
                theta, info = self.draw_gibbs(stats, epsilon, rng, 1)
                return theta[0], info.release_info()
            else:
                theta, info = self.draw_metropolis(stats, epsilon, rng, 1)
                return theta[0], info.release_info()
        raise AssertionError("unreachable")

    def _release_output(self, stats, epsilon, rng):
        if not self.hardened:
            return super()._release_output(stats, epsilon, rng)
        return self._release_hardened(stats, epsilon, rng, self._rate(stats.d, epsilon))

    def _release_hardened(self, stats, epsilon, rng, a):
        """A hardened release in output units (:meth:`hardening`): the exact draw refined
        and certified, else the lattice chain (Gibbs where the norm has it, else
        Metropolis: the policy of :meth:`_release`); snapped here from its double-double
        value times ``scale``."""
        h = self.hardening(stats, epsilon)
        scale = float(stats.scale)
        d = stats.d
        hi = lo = None
        info = None
        if self.sampler in ("auto", "exact") and well_conditioned(stats.G):
            G, Ginv, inv_norm, chol, tv = certified_factors(stats.G)
            theta = np.empty((1, d))
            u = np.empty((1, d))
            factor, ascale = self._factor(chol, a)
            # an uncertified factor's draw could not be released: the chain runs instead
            tries = kng_exact(rng, Ginv, stats.c, ascale, self.bound, self._kind, int(self.max_tries), theta, u,
                              self._try_factor(factor)) if self._tv_certified(tv) else 0
            if tries > 0:
                vh, vl, verr = self._rhs(np.asarray(stats.c, dtype=np.float64), u[0], factor, ascale)
                hi, lo = theta[0].copy(), np.zeros(d)
                err = certified_solve(G, Ginv, inv_norm, vh, vl, hi, lo, verr, REFINE_STEPS, scale)
                if err + snap_rounding(h, hi) <= h.eta:
                    info = {"sampler": "exact", "acceptance": 1.0 / tries, "steps": tries}
        elif self.sampler == "exact":
            raise RuntimeError("the exact sampler needs an invertible, well-conditioned G = X'X; use sampler='auto'")
        if info is None:
            if self.sampler == "exact":
                raise RuntimeError("hardened exact sampler: the solve could not be certified to the grid's rounding "
                                   "bound; use sampler='auto'")
            out = np.empty((1, d))
            lattice = dyadic_lattice(self.bound)
            if self._has_gibbs and self.sampler in ("auto", "gibbs"):  # check_hardenable refused gibbs without it
                gibbs_chains(rng, stats.G, stats.c, a, self.bound, self._kind, self.gibbs_sweeps, out, lattice)
                info = {"sampler": "gibbs", "acceptance": 1.0, "steps": self.gibbs_sweeps}
            else:
                acc = np.empty(1)
                metropolis_chains(rng, stats.G, stats.c, a, self.bound, self._kind, self.steps, out, acc, lattice)
                info = {"sampler": "metropolis", "acceptance": float(acc[0]), "steps": self.steps}
            hi, lo = out[0].copy(), np.zeros(d)
            scale_dd(hi, lo, scale)
        return snap(hi, h, rng, lo), info

    def _factor(self, chol, a):
        """The kernel's ``(factor, scale)`` for :func:`kng_exact` (KNG: no factor, ``1/a``)."""
        return NO_FACTOR, 1.0 / a

    def _try_factor(self, factor):
        """The factor :func:`kng_exact` reads in a try (KNG: none)."""
        return NO_FACTOR

    def _rhs(self, c, u, factor, ascale):
        """``(vh, vl, err)``: the right-hand side ``c + u`` of the accepted draw in
        double-double and a bound on its error (KNG: ``u`` is the draw, the sum exact)."""
        vh, vl = two_sum_arrays(c, u)
        return vh, vl, 0.0

    def _tv_certified(self, tv: float) -> bool:
        """Whether the draw's law is certified (``tv``: :func:`certified_factors`); KNG's ``u``
        is exact K-norm noise, so always."""
        return True

    def privacy_claim(self) -> Density:
        """The law of the release: :meth:`log_density` on :meth:`parameter_box`."""
        return Density(log_density=self.log_density, parameter_box=self.parameter_box)

    def parameter_box(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """Bounds ``(lo, hi)`` of a box holding ``Theta`` (for exact audits on a grid)."""
        return np.full(d, -self.bound), np.full(d, self.bound)

    def log_density(self, stats, epsilon, theta):
        """Unnormalised log density at ``theta`` (..., d) in scaled units; -inf outside Theta.

        Used by the privacy audits, which normalise it numerically on a grid.
        """
        a = self._rate(stats.d, check_epsilon(epsilon))
        theta = np.asarray(theta, dtype=np.float64)
        r = theta @ stats.G - stats.c  # G is symmetric
        if self._kind == KIND_EXP:
            energy = a * np.einsum("...i,...i->...", theta, r - stats.c)
        else:
            order = {"l1": 1, "l2": 2, "linf": np.inf}[self.norm]
            energy = a * np.linalg.norm(r, ord=order, axis=-1)
        return np.where(np.abs(theta).sum(-1) <= self.bound, -energy, -np.inf)

    # Batched draws in scaled units, each ``(theta, DrawInfo)`` (used by releases, tests and diagnostics).
    def draw_exact(self, stats, epsilon, rng, size, max_tries=None):
        """``size`` exact draws (scaled units) and their info (each draw's tries; needs ``G^{-1}``)."""
        a = self._rate(stats.d, check_epsilon(epsilon))
        theta, tries = self._exact(stats, a, rng, size, max_tries or self.max_tries)
        if np.any(tries < 0):
            raise RuntimeError("exact sampler exhausted max_tries")
        return theta, DrawInfo("exact", 1.0 / tries, tries)

    def draw_gibbs(self, stats, epsilon, rng, size, sweeps=None, lattice=0.0):
        """Final states of ``size`` independent Gibbs chains (scaled units) and their info
        (with ``lattice > 0``, on that dyadic lattice: :func:`gibbs_chains`)."""
        a = self._rate(stats.d, check_epsilon(epsilon))
        out = np.empty((size, stats.d))
        gibbs_chains(rng, stats.G, stats.c, a, self.bound, self._kind, int(sweeps or self.gibbs_sweeps), out,
                     float(lattice))
        return out, DrawInfo.constant("gibbs", size, 1.0, sweeps or self.gibbs_sweeps)

    def draw_metropolis(self, stats, epsilon, rng, size, steps=None):
        """Final states and info (acceptance rates) of ``size`` independent Metropolis chains."""
        a = self._rate(stats.d, check_epsilon(epsilon))
        out = np.empty((size, stats.d))
        acc = np.empty(size)
        metropolis_chains(rng, stats.G, stats.c, a, self.bound, self._kind, int(steps or self.steps), out, acc)
        return out, DrawInfo.chains("metropolis", acc, steps or self.steps)


class KNG(_Sampled):
    """K-Norm Gradient mechanism for least squares (KNG paper §4.2).

    Samples ``theta`` on ``Theta = {||theta||_1 <= B}`` (uniform base measure) with density

        f(theta) ∝ exp(-eps / (2 Delta_K) * ||grad l_n(theta)||_K)
                 = exp(-(eps / Delta_K) * ||G theta - c||_K),

    since ``grad l_n = 2 (G theta - c)``, where ``Delta_K = 4 (1+B) sup_x ||x||_K``
    bounds ``||grad l_n(D) - grad l_n(D')||_K`` for every ``theta`` in ``Theta``
    (derivation in :mod:`kngflow.models.linear.problem`).  ε-DP by Theorem 3.1 (the
    exponential mechanism on ``||grad l_n||_K / Delta_K``, sensitivity 1; the factor 2
    is required because the normalising constant depends on the data).  The paper's
    printed density ``exp(-eps/(8(1+B)) ||sum (y_i - x_i'theta) x_i||_inf)`` drops the
    factor 2 of the gradient; it is ε/2-DP, i.e. twice as noisy as necessary.

    Parameters (keyword-only)
    -------------------------
    norm : {"l1", "l2", "linf"}
    bound : float, the ℓ1 radius ``B`` of ``Theta``.
    sampler : {"auto", "exact", "gibbs", "metropolis", "gradient_map"}; "auto" tries exact
        draws (not when ``G`` is singular or ill conditioned: they need ``G^{-1}``) and
        falls back to exact Gibbs (ℓ1, ℓ∞) or Metropolis (ℓ2), which target the same law.
        "gradient_map" (opt in) runs the generic gradient-map sampler
        (:func:`~kngflow.mechanisms.map_draws.gradient_map_draws`) on ``G theta - c`` and
        its constant Hessian ``G``: every proposal inside ``Theta`` is accepted, so the
        release (the last of ``proposals`` proposals inside ``Theta``, continuing up to
        ``max_tries`` until one falls inside) has the exact sampler's law.
    steps : Metropolis sweeps (paper: 10 000); gibbs_sweeps : Gibbs sweeps;
    max_tries : exact-sampler tries before falling back.
    """

    kind = "kng"

    def __init__(self, *, norm="linf", proposals=GRADIENT_MAP_PROPOSALS, **kw):
        self.norm = check_choice("norm", norm, NORMS)
        self.proposals = check_int("proposals", proposals, 1)
        super().__init__(**kw)
        self._kind = KNG_KINDS[self.norm]
        self._has_gibbs = self.norm != "l2"

    def options(self) -> dict:
        opts = {"norm": self.norm, **super().options()}
        if self.sampler == "gradient_map":
            opts["proposals"] = self.proposals
        return opts

    def draw_gradient_map(self, stats, epsilon, rng, size, proposals=None):
        """Final states (scaled units) and info (acceptance rates, proposal counts) of ``size``
        gradient-map chains (start 0)."""
        a = self._rate(stats.d, check_epsilon(epsilon))
        G = np.ascontiguousarray(stats.G, dtype=np.float64)
        c = np.ascontiguousarray(stats.c, dtype=np.float64)
        out, acc, steps = gradient_map_draws(_residual_gradient, _gram, (G, c), a, self.norm,
                                             (np.zeros(stats.d), self.bound), 0.0, rng, size,
                                             int(proposals or self.proposals), self.max_tries)
        return out, DrawInfo("gradient_map", acc, steps)

    def sensitivity(self, d: int) -> float:
        return gradient_sensitivity(self.norm, d, self.bound)

    def spread(self, n: int, d: int, epsilon: float) -> float:
        """``1 / (a n d)`` with ``a = eps / Delta_K``: each coordinate of the K-norm noise ``u``
        has variance at least ``1/a^2`` (ℓ∞: ``(d+1)(d+2)/(3a^2)``, ℓ1: ``2/a^2``, ℓ2:
        ``(d+1)/a^2``; isotropic), so ``theta = G^{-1}(c + u)`` has covariance at least
        ``G^{-2}/a^2``, and ``lambda_max(G) <= tr G <= n d`` for ``x`` in ``[-1, 1]^d``."""
        return 1.0 / (self._rate(d, epsilon) * n * d)

    def _rate(self, d, epsilon):
        return epsilon / self.sensitivity(d)

    def _exact(self, stats, a, rng, size, max_tries):
        out = np.empty((size, stats.d))
        Ginv = np.linalg.inv(stats.G)
        u = np.empty((1, stats.d))
        return out, _row_by_row(
            lambda row: kng_exact(rng, Ginv, stats.c, 1.0 / a, self.bound, self._kind, int(max_tries), row, u, NO_FACTOR),
            out)


class Exponential(_Sampled):
    """Exponential mechanism on the squared loss (KNG paper §4.3).

    Density on ``Theta`` (uniform base measure)::

        f(theta) ∝ exp(-eps / (2 (1+B)^2) * l_n(theta)),

    ε-DP by Proposition 2.2 because ``|l_n(D) - l_n(D')| <= (1+B)^2`` on ``Theta``.
    As ``l_n = theta'G theta - 2 c'theta + yy`` this is ``N(G^{-1}c, (1+B)^2/eps G^{-1})``
    truncated to the ℓ1 ball: exact draws by acceptance, exact Gibbs by truncated
    normal conditionals.  Options as :class:`KNG` (no ``norm``).
    """

    kind = "exponential"
    _kind = KIND_EXP
    _has_gibbs = True

    def __init__(self, **kw):
        super().__init__(**kw)
        if self.sampler == "gradient_map":
            raise ValueError("sampler 'gradient_map' is for KNG; use 'auto', 'exact', 'gibbs' or 'metropolis'")

    def sensitivity(self, d: int) -> float:
        return loss_sensitivity(self.bound)

    def spread(self, n: int, d: int, epsilon: float) -> float:
        """``1 / sqrt(2 a n d)``: the covariance ``G^{-1} / (2a)`` is at least
        ``I / (2 a lambda_max(G))`` and ``lambda_max(G) <= n d``."""
        return 1.0 / math.sqrt(2.0 * self._rate(d, epsilon) * n * d)

    def _factor(self, chol, a):
        """Hardened draws: ``u = L z / sqrt(2a)`` with ``L`` the Cholesky factor of ``G``."""
        return chol, 1.0 / math.sqrt(2.0 * a)

    def _try_factor(self, factor):
        """``L^{-T}`` (upper triangular): a try computes ``G^{-1}c + s L^{-T} z`` (:func:`kng_exact`)."""
        return np.ascontiguousarray(np.linalg.inv(factor).T)

    def _rhs(self, c, z, factor, ascale):
        """``c + s L z`` in double-double (:func:`~kngflow.kernels.dd.affine_dd`; the kernel
        stores ``z`` for this kind)."""
        d = c.shape[0]
        vh, vl = np.empty(d), np.empty(d)
        err = affine_dd(c, factor, z, ascale, vh, vl)
        return vh, vl, err

    def _tv_certified(self, tv: float) -> bool:
        """Whether ``tv = 1.5 ||G^{-1}||_2 ||L L^T - G||_F <= 2^-40`` (:func:`certified_factors`):
        then the computed factor's law ``N(0, s^2 L L^T)`` is within that total variation of
        ``N(0, s^2 G)`` (Devroye, Mehrabian & Reddad 2018, Theorem 1.1: at most
        ``1.5 ||Σ1^{-1/2} Σ2 Σ1^{-1/2} - I||_F``) for every try."""
        return tv <= TV_PER_TRY

    def _tv_bound(self) -> float:
        """``max_tries 2^-40``: a release makes at most ``max_tries`` tries, each within
        :meth:`_tv_certified`'s total variation of the exact law."""
        return self.max_tries * TV_PER_TRY

    def _rate(self, d, epsilon):
        return epsilon / (2.0 * self.sensitivity(d))

    def _exact(self, stats, a, rng, size, max_tries):
        out = np.empty((size, stats.d))
        cov = np.linalg.inv(stats.G) / (2.0 * a)
        chol = np.linalg.cholesky(0.5 * (cov + cov.T))
        mean = ols(stats)
        return out, _row_by_row(lambda row: exp_exact(rng, chol, mean, self.bound, int(max_tries), row), out)



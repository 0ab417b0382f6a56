"""KNG and the exponential mechanism written once against a problem's gradient and loss.

A problem plugs in by subclassing :class:`GenericKNG` / :class:`GenericExponential` and
supplying

* ``check_data(data)`` — validate the opaque data object and return it;
* ``kernel_args(data)`` — the tuple its jitted kernels take;
* ``gradient`` (class attribute) — jitted ``gradient(theta, args, g)`` filling ``g``, or
  ``loss`` — jitted ``loss(theta, args) -> float``;
* ``sensitivity(data)`` — the K-norm sensitivity of the gradient, or of the loss,
  derived in the problem's module;
* optionally ``hessian`` (class attribute, KNG) — jitted ``hessian(theta, args, H)``, the
  Jacobian of ``gradient``, used when ``precondition`` is true (else central differences
  of ``gradient``);
* optionally ``surrogate`` (class attribute, KNG whose gradient is not smooth) — jitted
  ``(gradient, hessian)`` of a smooth strictly convex surrogate of the loss on
  ``surrogate_args(data)``, enabling the surrogate map;
* optionally ``domain(data) -> (center, B)`` (default: the ℓ1 ball of radius ``bound``
  around 0), ``output_scale(data)`` (default 1), and faster samplers
  (``draw_exact`` / ``draw_gibbs``, each returning ``(theta, DrawInfo)``) listed in ``samplers``.

Densities (``a`` the rate, base measure uniform on ``{||theta - center||_1 <= B}``, or
with ``base="gaussian"`` a ``N(center, base_scale^2 I)`` on ``R^d``):

* KNG: ``f(theta) ∝ exp(-eps/(2 Delta) ||grad l_n(theta)||_K) base(theta)``;
* exponential mechanism: ``f(theta) ∝ exp(-eps/(2 Delta) l_n(theta)) base(theta)``.

Both are ε-DP by the exponential mechanism (McSherry–Talwar): the utilities
``-||grad l_n||_K`` and ``-l_n`` have sensitivity ``Delta`` uniformly over the support,
and the factor 2 pays for the data-dependent normalising constant.  The base measure
does not depend on the data.

Sampler policy: ``sampler="auto"`` runs the first entry of ``samplers`` (exact draws,
then exact coordinate Gibbs, the gradient map, then the generic random-walk Metropolis
kernel of :mod:`kngflow.kernels.generic`); ``info["sampler"]`` records which one ran.
Every draw method ``draw_<sampler>(data, epsilon, rng, size)`` returns ``(theta, info)``
with a :class:`~kngflow.mechanisms.draws.DrawInfo`, and a release finds it by name in
:attr:`Sampled.draws` (a new sampler is one entry there and its draw method).
The gradient map (:mod:`kngflow.kernels.gradient_map`, KNG with a smooth strictly convex
loss and a jitted ``hessian``) draws the gradient as exact K-norm noise, maps it back by
Newton's method and accepts the root as an independence-Metropolis proposal with
probability ``min(1, det H(current) / det H(proposed))`` inside ``Theta``; under
``"auto"`` a gradient map that finds no proposal inside ``Theta`` in ``max_tries`` hands
over to the next sampler of ``samplers`` (same target).  The surrogate map
(:func:`~kngflow.kernels.gradient_map.surrogate_map_chain`, KNG whose gradient is not
smooth but that declares a smooth ``surrogate``) runs the Metropolis chain's ``steps``
sweeps, then ``proposals`` independence-Metropolis proposals from its end: a mixture of the
base measure and the surrogate's gradient map frozen at its minimiser, accepted on the
exact density; under ``"auto"`` it hands over likewise when its fit fails.  A mechanism
with ``precondition`` true runs that kernel along preconditioned directions
(:func:`~kngflow.kernels.generic.precond_metropolis_chains`: the columns of the inverse
Jacobian of the gradient at the chain's state, adapted in the burn-in with the scales,
frozen after it); it is still recorded as ``"metropolis"`` (the mechanism's options
say which), and its chains still start at the data-independent centre.
"""

from __future__ import annotations

import math

import numpy as np

from kngflow._jit import first_class
from kngflow.kernels.generic import (
    NORM_CODES,
    energies,
    gradient_call,
    gradient_jacobian,
    hessian_call,
    kng_energy,
    kng_jacobian,
    loss_energy,
    metropolis_chains,
    precond_metropolis_chains,
)
from kngflow.kernels.certified import chol_solve_certificate, chol_solve_dd, inverse_norm_bound
from kngflow.kernels.dd import dd_add, scale_dd
from kngflow.kernels.gradient_map import BASE_SHARE, MAX_ITER, gradient_map_chain, surrogate_map_chain
from kngflow.mechanisms.base import SAMPLER_DIAGNOSTICS, Mechanism, Release, check_choice, check_epsilon, check_int, check_positive, check_rng
from kngflow.mechanisms.claims import Density
from kngflow.mechanisms.draws import DrawInfo
from kngflow.mechanisms.hardening import (UNIT_ROUNDOFF, Hardening, HardeningError, coupling_hardening,
                                          dyadic_lattice, snap)

__all__ = ["NonPrivateBase", "Sampled", "sampler_hardening", "HARDENABLE_SAMPLERS", "GenericKNG", "GenericExponential", "NORMS", "SAMPLERS", "gradient_map_draws",
           "surrogate_map_draws", "GRADIENT_MAP_PROPOSALS"]

NORMS = ("l1", "l2", "linf")
SAMPLERS = ("auto", "exact", "gibbs", "metropolis", "gradient_map", "surrogate_map")
#: samplers drawing through a gradient map (option ``proposals``; the gradient map also ``max_tries``)
MAP_SAMPLERS = ("gradient_map", "surrogate_map")
BASES = ("uniform", "gaussian")
#: default proposals of a gradient-map chain (option ``proposals``)
GRADIENT_MAP_PROPOSALS = 50


def gradient_map_draws(gradient, hessian, args, a, norm, domain, base_scale, rng, size, proposals, max_tries,
                       base_share=0.0, warm=None):
    """``size`` gradient-map chains on a problem's jitted ``gradient`` / ``hessian``
    (:func:`~kngflow.kernels.gradient_map.gradient_map_chain`): returns the final states
    (size, d), the accepted fractions (size,) and the proposals made (size,).

    ``a`` is the rate (density ``exp(-a ||gradient||_norm)``), ``domain = (center, B)``
    the ℓ1 ball ``Theta`` (``B = inf``: ``R^d``), ``base_scale > 0`` a Gaussian base
    ``N(center, base_scale^2 I)`` instead.  ``base_share``: the share of proposals drawn
    from the base measure (0: the map alone, exact for a constant Hessian; needs a finite
    ``B`` or a Gaussian base otherwise).  ``warm``: start each Newton solve at the chain's
    state, valid only for a constant Hessian (the solve then converges from every start);
    ``False`` starts every solve at one state-independent point, so that the proposal's law
    does not depend on the state (:mod:`kngflow.kernels.gradient_map`); ``None`` (default):
    warm for the map alone (``base_share = 0``: linear regression, the mean), not warm with
    a base-measure share (a Hessian that varies).  The one entry point of the sampler: KNGs
    of every model call it with their own gradient/Hessian pair.
    """
    center, B = domain
    center = np.ascontiguousarray(center, dtype=np.float64)
    out = np.empty((size, center.shape[0]))
    acc = np.empty(size)
    steps = np.empty(size, dtype=np.int64)
    warm = base_share == 0.0 if warm is None else bool(warm)
    call = (gradient, hessian, rng, args, float(a), NORM_CODES[norm], center, float(B), float(base_scale),
            int(proposals), int(max_tries), MAX_ITER, float(base_share), warm, out, acc, steps)
    entry, call = first_class(gradient_map_chain, call, {0: gradient_call(args), 1: hessian_call(args)})
    status = entry(*call)
    if status == -2:
        raise RuntimeError("gradient-map sampler: the loss has no minimiser inside Theta (separated data?), where "
                           "the map cannot reach the law's mass; use sampler='metropolis'")
    if status < 0:
        raise RuntimeError(f"gradient-map sampler: no proposal inside Theta in max_tries={max_tries} proposals "
                           "(the gradient's image hardly meets the noise); use sampler='metropolis'")
    return out, acc, steps


def surrogate_map_draws(gradient, surrogate, args, sargs, a, norm, domain, base_scale, rng, start, proposals,
                        details=False):
    """Surrogate-map steps (:func:`~kngflow.kernels.gradient_map.surrogate_map_chain`) for KNG
    on a problem's exact jitted ``gradient`` (on ``args``) with the smooth surrogate
    ``surrogate = (gradient, hessian)`` (on ``sargs``), one chain from each row of ``start``
    (size, d; in ``Theta``): returns the final states (size, d), the accepted fractions
    (size,) and the proposals made (size,); other arguments as :func:`gradient_map_draws`.
    With ``details``, also the final states' routes, noises, base-draw low parts and the fit
    (``route_out``, ``u_out``, ``lo_out``, ``fit_out`` of the kernel).  Raises RuntimeError when the surrogate's fit fails."""
    center, B = domain
    center = np.ascontiguousarray(center, dtype=np.float64)
    out = np.array(start, dtype=np.float64, order="C")
    size, d = out.shape
    acc = np.empty(size)
    steps = np.empty(size, dtype=np.int64)
    routes = np.zeros(size, dtype=np.int64)
    us = np.zeros((size, d))
    los = np.zeros((size, d))
    fit = np.zeros((d, d + 1))
    call = (gradient, surrogate[0], surrogate[1], rng, args, sargs, float(a), NORM_CODES[norm], center, float(B),
            float(base_scale), int(proposals), MAX_ITER, out, acc, steps, routes, us, los, fit)
    calls = {0: gradient_call(args), 1: gradient_call(sargs), 2: hessian_call(sargs)}
    entry, call = first_class(surrogate_map_chain, call, calls)
    status = entry(*call)
    if status < 0:
        raise RuntimeError("surrogate-map sampler: the smooth surrogate's Newton fit failed; use sampler='metropolis'")
    return (out, acc, steps, routes, us, los, fit) if details else (out, acc, steps)


class NonPrivateBase(Mechanism):
    """Non-private baseline: ``estimate(data)`` of a subclass, validated like the mechanisms."""

    kind = "nonprivate"
    private = False
    diagnostics = SAMPLER_DIAGNOSTICS

    def check_data(self, data):
        raise NotImplementedError

    def estimate(self, data) -> np.ndarray:
        raise NotImplementedError

    def release(self, data, epsilon, rng) -> Release:
        data = self.check_data(data)
        check_epsilon(epsilon)
        check_rng(rng)
        return Release(self.estimate(data), {"sampler": "none", "acceptance": np.nan, "steps": 0})

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


#: samplers whose rounding a hardened release bounds (:func:`sampler_hardening`): the
#: chains' positions are sums of data-independent proposals, the exact draws (1-D
#: quantiles) an order statistic plus a uniform offset, and the map samplers' final states
#: certified (:meth:`GenericKNG.release_surrogate_hardened`,
#: :meth:`GenericKNG.release_gradient_map_hardened`).  Coordinate Gibbs joins them where
#: its chains move on a dyadic lattice (:attr:`Sampled.lattice_gibbs`,
#: :meth:`Sampled.release_gibbs_hardened`).
HARDENABLE_SAMPLERS = ("exact", "metropolis", "surrogate_map", "gradient_map")
#: a hardened surrogate-map release's grid is 2^-SURROGATE_GRID_BITS of the bound (no public
#: lower bound on the spread exists: data on a hyperplane make the law as narrow as they like),
#: its rounding bound 2^-SURROGATE_ETA_BITS of the grid
SURROGATE_GRID_BITS = 20
SURROGATE_ETA_BITS = 26
#: a hardened gradient-map release is certified in double-double: its rounding bound is
#: 2^-MAP_ETA_BITS of the grid
MAP_ETA_BITS = 44


def sampler_hardening(name: str, steps: int, d: int, bound: float) -> Hardening:
    """The coupling-route :class:`~kngflow.mechanisms.hardening.Hardening` of a release drawn on
    ``{|theta_j| <= bound}`` by sampler ``name``.

    Rounding: an exact draw is at most 64 rounded operations on values of size at most
    ``2 bound``; a Metropolis chain adds at most ``4 steps d`` rounded moves to each
    coordinate (one per coordinate and sweep, ``d`` per sweep along preconditioned
    directions, each twice for proposal and undo), so
    ``eta = (4 steps d + 64) u 2 bound`` with ``u = 2^-53``.  Decisions (accept/reject) are
    modelled as those of exact arithmetic (:mod:`kngflow.mechanisms.hardening`).
    """
    ops = 64 + (4 * steps * d if name == "metropolis" else 0)
    return coupling_hardening(bound, ops * UNIT_ROUNDOFF * 2.0 * bound, d)


class Sampled(Mechanism):
    """Options, sampler policy, release, Metropolis draws and ``log_density`` for sampled mechanisms.

    Keyword-only options
    --------------------
    bound : float, the ℓ1 radius ``B`` of ``Theta`` (uniform base measure).
    base : {"uniform", "gaussian"}; base_scale : sd of the Gaussian base.
    sampler : {"auto", "exact", "gibbs", "metropolis", "gradient_map", "surrogate_map"}.
    steps : Metropolis sweeps (first half burn-in); gibbs_sweeps : Gibbs sweeps.
    KNG adds ``proposals`` (gradient-map or surrogate-map proposals per release) and ``max_tries``
    (gradient-map proposals before the first one inside ``Theta``).
    """

    kind = ""
    diagnostics = SAMPLER_DIAGNOSTICS
    #: the K-norm of the energy (KNG's ``norm`` option; the exponential mechanism's loss takes none)
    norm: str = "linf"
    #: ``parameter_box(d) -> (lo, hi) | None``, a box holding Theta for the audits; None: the problem's
    parameter_box = None
    #: samplers this mechanism has, best first (subclasses restrict or extend)
    samplers: tuple = ("metropolis",)
    #: Metropolis along preconditioned directions (see :meth:`draw_preconditioned`)
    precondition: bool = False
    #: sampler name -> the draw method a release calls, ``(data, epsilon, rng, size) -> (theta, DrawInfo)``
    draws: dict = {  # noqa: RUF012 - read only
        "exact": "draw_exact",
        "gibbs": "draw_gibbs",
        "metropolis": "draw_metropolis",
        "gradient_map": "draw_gradient_map",
        "surrogate_map": "draw_surrogate_map",
    }
    #: sampler name -> the method making a hardened release with it, ``(data, epsilon, rng) -> (theta, info)``,
    #: where the hardening needs more than the draw (others: the draw, snapped by the contract)
    hardened_releases: dict = {"gibbs": "release_gibbs_hardened"}  # noqa: RUF012 - read only
    #: ``draw_gibbs`` takes ``lattice=``: its chains can move on a dyadic lattice, drawing each
    #: coordinate from the target's conditional restricted to the lattice (exact positions),
    #: which makes Gibbs hardenable (:meth:`release_gibbs_hardened`)
    lattice_gibbs: bool = False

    def __init__(self, *, bound=1.0, base="uniform", base_scale=1.0, sampler="auto", steps=10_000, gibbs_sweeps=50):
        self.bound = check_positive("bound", bound)
        self.base = check_choice("base", base, BASES)
        self.base_scale = check_positive("base_scale", base_scale)
        self.sampler = check_choice("sampler", sampler, SAMPLERS)
        self.steps = check_int("steps", steps, 2)
        self.gibbs_sweeps = check_int("gibbs_sweeps", gibbs_sweeps, 1)
        available = self.available_samplers()
        if self.sampler != "auto" and self.sampler not in available:
            raise ValueError(f"sampler must be one of {['auto', *available]} for {type(self).__name__}, got {self.sampler!r}")

    def available_samplers(self) -> tuple:
        """Samplers usable with these options, best first (hardened: only those of
        :data:`HARDENABLE_SAMPLERS`)."""
        return self.samplers

    def _policy(self) -> str:
        """The sampler a release runs first."""
        if self.sampler != "auto":
            return self.sampler
        usable = self.available_samplers()
        if self.hardened:
            usable = [name for name in usable if name in self.hardenable_samplers()]
        return usable[0]

    def hardenable_samplers(self) -> tuple:
        """Samplers whose rounding :meth:`hardening` bounds."""
        return tuple(name for name in self.available_samplers()
                     if name in HARDENABLE_SAMPLERS or (name == "gibbs" and self.lattice_gibbs))

    def check_hardenable(self) -> None:
        """A hardened release needs a bounded ``Theta`` (uniform base measure) and a sampler
        whose rounding is bounded (:data:`HARDENABLE_SAMPLERS`)."""
        if self.base != "uniform":
            raise HardeningError("hardened: base='gaussian' gives Theta no public bound to clamp the release to; "
                                 "use base='uniform' or hardened=false")
        if self.sampler != "auto" and self.sampler not in self.hardenable_samplers():
            raise HardeningError(f"hardened: sampler={self.sampler!r} has no bound on its rounding; allowed with "
                                 f"hardened: {['auto', *self.hardenable_samplers()]}")
        if not self.hardenable_samplers():
            raise HardeningError(f"hardened: none of the samplers {list(self.available_samplers())} of "
                                 f"{type(self).__name__} has a bound on its rounding; pass hardened=false")

    def hardening(self, data, epsilon) -> Hardening:
        """Coupling route on the box holding ``Theta`` (output units):
        :func:`sampler_hardening` with the sampler :meth:`_policy` runs; for the surrogate map
        the grid ``2^-20`` of the bound and ``η = Λ 2^-26`` (about ``2^-46 B``, above the
        rounding a certified state may have: :meth:`GenericKNG.release_surrogate_hardened`),
        so δ′ = δ + (1 + e^ε) 2d 2^-26 (2.2·10^-7 at d = 2, ε = 1); for lattice Gibbs
        (:meth:`release_gibbs_hardened`) the same grid, snapped by the sampler from the
        exact lattice state (``site = "sampler"``), ``η = Λ 2^-44``."""
        data = self.check_data(data)
        center, B = self.domain(data)
        bound = (float(np.max(np.abs(center))) + float(B)) * abs(self.output_scale(data))
        name = self._policy()
        if name == "surrogate_map":
            h = coupling_hardening(bound, 0.0, data.d, bits=SURROGATE_GRID_BITS)
            return h._replace(eta=math.ldexp(h.grid, -SURROGATE_ETA_BITS))
        if name == "gibbs":
            h = coupling_hardening(bound, 0.0, data.d, site="sampler", bits=SURROGATE_GRID_BITS)
            return h._replace(eta=math.ldexp(h.grid, -MAP_ETA_BITS))
        return sampler_hardening(name, self.steps if name == "metropolis" else 0, data.d, bound)

    def options(self) -> dict:
        return {
            "bound": self.bound,
            "base": self.base,
            "base_scale": self.base_scale,
            "sampler": self.sampler,
            "steps": self.steps,
            "gibbs_sweeps": self.gibbs_sweeps,
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.options().items())})"

    # ---------------------------------------------------------------- problem hooks
    def check_data(self, data):
        raise NotImplementedError

    def kernel_args(self, data) -> tuple:
        raise NotImplementedError

    def sensitivity(self, data) -> float:
        raise NotImplementedError

    def domain(self, data):
        """``(center, B)``: the base measure's centre (the chains' start) and ℓ1 radius."""
        return np.zeros(data.d), self.bound

    def output_scale(self, data) -> float:
        return 1.0

    # ---------------------------------------------------------------- release
    def rate(self, data, epsilon) -> float:
        """``a = eps / (2 Delta)``."""
        return check_epsilon(epsilon) / (2.0 * self.sensitivity(data))

    def release(self, data, epsilon, rng) -> Release:
        """Release a private estimate (original units) with the sampler chosen by the policy."""
        data = self.check_data(data)
        epsilon = check_epsilon(epsilon)
        rng = check_rng(rng)
        name = self._policy()
        if self.hardened and name in self.hardened_releases:
            theta, info = getattr(self, self.hardened_releases[name])(data, epsilon, rng)
            return Release(np.asarray(theta, dtype=np.float64), info)
        try:
            theta, info = self.draw_with(name, data, epsilon, rng, 1)
        except RuntimeError:  # no proposal inside Theta in max_tries, or no surrogate fit: the next sampler, same target
            if name not in MAP_SAMPLERS or self.sampler != "auto":
                raise
            theta, info = self.draw_with(self.available_samplers()[1], data, epsilon, rng, 1)
        return Release(np.asarray(theta[0], dtype=np.float64) * self.output_scale(data), info.release_info())

    def release_gibbs_hardened(self, data, epsilon, rng):
        """A hardened coordinate-Gibbs release (output units, snapped) and its info.

        The chain moves on the dyadic lattice ``2^(floor(log2 B) - 46)`` from the
        data-independent centre (``draw_gibbs(..., lattice=)``, :attr:`lattice_gibbs`): each
        coordinate is drawn from the conditional restricted to the lattice points of its
        chord, so the chain targets the density restricted to the lattice (an exponential
        mechanism on a countable set with the same score: ε-DP in exact arithmetic) and
        its positions are exact sums.  The state times the output scale is exact in
        double-double (:func:`~kngflow.kernels.dd.scale_dd`) and snapped from it:
        ``η = Λ 2^-44`` covers the snapping alone.  Decisions are modelled as exact, as
        everywhere (:mod:`kngflow.mechanisms.hardening`).
        """
        h = self.hardening(data, epsilon)
        _, B = self.domain(data)
        theta, info = self.draw_gibbs(data, epsilon, rng, 1, lattice=dyadic_lattice(float(B)))
        hi, lo = theta[0].copy(), np.zeros(data.d)
        scale_dd(hi, lo, float(self.output_scale(data)))
        return snap(hi, h, rng, lo), info.release_info()

    def draw_with(self, name, data, epsilon, rng, size):
        """``(theta, info)``: ``size`` draws (scaled units) of sampler ``name`` (:attr:`draws`)."""
        return getattr(self, self.draws[name])(data, epsilon, rng, size)

    # ---------------------------------------------------------------- draws (scaled units)
    def _energy(self):
        raise NotImplementedError

    def energy_data(self, data, a):
        code = NORM_CODES[self.norm]
        return (self.kernel_args(data), float(a), code, np.empty(data.d))

    def _jacobian(self):
        raise NotImplementedError

    def draw_metropolis(self, data, epsilon, rng, size, steps=None, lattice=0.0):
        """Final states and post-burn-in acceptance rates of ``size`` independent chains
        (along preconditioned directions when ``precondition`` is true; with ``lattice > 0``,
        one coordinate at a time on that lattice, exact positions)."""
        if self.precondition and not lattice:
            return self.draw_preconditioned(data, epsilon, rng, size, steps)
        a = self.rate(data, epsilon)
        center, B = self.domain(data)
        out = np.empty((size, data.d))
        acc = np.empty(size)
        base_scale = self.base_scale if self.base == "gaussian" else 0.0
        metropolis_chains(
            self._energy(), rng, self.energy_data(data, a), np.asarray(center, float), float(B),
            base_scale, int(steps or self.steps), out, acc, float(lattice),
        )
        return out, DrawInfo.chains("metropolis", acc, steps or self.steps)

    def draw_preconditioned(self, data, epsilon, rng, size, steps=None):
        """Final states and, in the info, post-burn-in acceptance rates and frozen directions
        (size, d, d; rows) of ``size`` chains of :func:`~kngflow.kernels.generic.precond_metropolis_chains`
        (recorded as ``"metropolis"``).

        The directions are the normalised columns of the inverse Jacobian of the gradient
        at the chain's state at each adaptation point of the burn-in: data dependent, like
        the adapted scales, and frozen for the second half, which is an exact Metropolis
        chain for the target.  The chain starts at the data-independent centre.
        """
        a = self.rate(data, epsilon)
        center, B = self.domain(data)
        out = np.empty((size, data.d))
        acc = np.empty(size)
        dirs = np.empty((size, data.d, data.d))
        base_scale = self.base_scale if self.base == "gaussian" else 0.0
        precond_metropolis_chains(
            self._energy(), self._jacobian(), rng, self.energy_data(data, a), np.asarray(center, float), float(B),
            base_scale, int(steps or self.steps), out, acc, dirs,
        )
        return out, DrawInfo.chains("metropolis", acc, steps or self.steps, directions=dirs)

    def draw_exact(self, data, epsilon, rng, size):
        raise ValueError(f"sampler 'exact' is not available for {self!r}")

    def draw_gibbs(self, data, epsilon, rng, size, sweeps=None):
        raise ValueError(f"sampler 'gibbs' is not available for {self!r}")

    def draw_gradient_map(self, data, epsilon, rng, size, proposals=None):
        raise ValueError(f"sampler 'gradient_map' is not available for {self!r}")

    def draw_surrogate_map(self, data, epsilon, rng, size, proposals=None):
        raise ValueError(f"sampler 'surrogate_map' is not available for {self!r}")

    #: ``centre(data)``, the non-private estimate the release concentrates around (the
    #: bit-level audit's centre; None: no bit-level audit), set by problems whose exact
    #: sampler computes the release from data values
    centre = None

    def privacy_claim(self) -> Density:
        """The law of the release: :meth:`log_density`, on the mechanism's ``parameter_box(d)``
        where it defines one, else on the problem's."""
        return Density(log_density=self.log_density, parameter_box=self.parameter_box,
                       additive_centre=self.centre)

    def log_density(self, data, epsilon, theta):
        """Unnormalised log density at ``theta`` (..., d), scaled units; -inf outside the support.

        Used by the privacy audits, which normalise it numerically on a grid.
        """
        data = self.check_data(data)
        a = self.rate(data, epsilon)
        theta = np.asarray(theta, dtype=np.float64)
        flat = np.ascontiguousarray(theta.reshape(-1, data.d))
        e = np.empty(flat.shape[0])
        energies(self._energy(), flat, self.energy_data(data, a), e)
        center, B = self.domain(data)
        if self.base == "gaussian":
            logb = -0.5 * np.sum((flat - center) ** 2, axis=1) / self.base_scale**2
        else:
            logb = np.where(np.abs(flat - center).sum(1) <= B, 0.0, -np.inf)
        return (logb - e).reshape(theta.shape[:-1])


class GenericKNG(Sampled):
    """KNG on a problem's gradient (see the module docstring); option ``norm`` in {"l1", "l2", "linf"}."""

    kind = "kng"
    gradient = None  # jitted gradient(theta, args, g), set by the problem's subclass
    hessian = None  # optional jitted hessian(theta, args, H), the Jacobian of ``gradient``
    #: optional ``(gradient, hessian)`` of a smooth strictly convex surrogate of a loss whose
    #: gradient is not smooth, on ``surrogate_args(data)``: enables ``"surrogate_map"``
    surrogate = None
    hardened_releases = {**Sampled.hardened_releases,  # noqa: RUF012 - read only
                         "surrogate_map": "release_surrogate_hardened",
                         "gradient_map": "release_gradient_map_hardened"}

    def __init__(self, *, norm="linf", proposals=GRADIENT_MAP_PROPOSALS, max_tries=10_000, **kw):
        self.norm = check_choice("norm", norm, NORMS)
        self.proposals = check_int("proposals", proposals, 1)
        self.max_tries = check_int("max_tries", max_tries, 1)
        super().__init__(**kw)

    def options(self) -> dict:
        opts = {"norm": self.norm, **super().options()}
        available = self.available_samplers()
        if any(name in MAP_SAMPLERS for name in available):
            opts["proposals"] = self.proposals
        if "gradient_map" in available:
            opts["max_tries"] = self.max_tries
        return opts

    def _energy(self):
        return kng_energy(type(self).gradient)

    def draw_gradient_map(self, data, epsilon, rng, size, proposals=None):
        """Final states and info (acceptance rates, proposal counts) of ``size`` independent
        gradient-map chains (:func:`~kngflow.kernels.gradient_map.gradient_map_chain`) of
        ``proposals`` proposals each (default the ``proposals`` option), scaled units.

        Needs the class's jitted ``hessian``.  A fifth of the proposals
        (:data:`~kngflow.kernels.gradient_map.BASE_SHARE`) are draws of the base measure:
        where ``det H`` is small (a saturating gradient far from the data, a gradient of low
        rank on a tiny data set) the map alone proposes too rarely, and its chains
        misrepresent the law there (the black-box audit read a loss of 4.9 at epsilon = 1 for
        logistic KNG without them).  Every Newton solve starts at one state-independent
        point (``warm=False`` of :func:`gradient_map_draws`): where the solve's convergence
        depends on its start, a start at the chain's state makes the proposal's law depend
        on the state and the chain's law wrong.  Raises RuntimeError when a chain finds no
        proposal inside ``Theta`` in ``max_tries``."""
        if "gradient_map" not in self.available_samplers():
            return super().draw_gradient_map(data, epsilon, rng, size, proposals)
        out, acc, steps = gradient_map_draws(type(self).gradient, type(self).hessian, self.kernel_args(data),
                                             self.rate(data, epsilon), self.norm, self.domain(data),
                                             self.base_scale if self.base == "gaussian" else 0.0, rng, size,
                                             int(proposals or self.proposals), self.max_tries, BASE_SHARE, warm=False)
        return out, DrawInfo("gradient_map", acc, steps)

    def surrogate_args(self, data) -> tuple:
        """The tuple the surrogate's jitted gradient and Hessian take (problems with a ``surrogate``)."""
        raise NotImplementedError

    def draw_surrogate_map(self, data, epsilon, rng, size, proposals=None):
        """Final states and info (acceptance rates, step counts) of ``size`` surrogate-map chains, scaled
        units: the Metropolis chain (:meth:`draw_metropolis`, ``steps`` sweeps from the
        data-independent centre), then ``proposals`` independence-Metropolis proposals from its
        end (:func:`~kngflow.kernels.gradient_map.surrogate_map_chain`: a mixture of the base
        measure and the class's smooth ``surrogate`` frozen at its minimiser, accepted on the
        exact density).  Each step leaves the target invariant; the random walk explores
        targets as wide as ``Theta``, the proposals reach the mode where the walk alone would
        stay far from it (large ``n``).  The acceptance rate is the proposals'; the step count
        is ``steps + proposals``.  The chains share one surrogate fit.  Raises RuntimeError
        when the fit fails."""
        if "surrogate_map" not in self.available_samplers():
            return super().draw_surrogate_map(data, epsilon, rng, size, proposals)
        start, _ = self.draw_metropolis(data, epsilon, rng, size)
        out, acc, steps = surrogate_map_draws(type(self).gradient, type(self).surrogate, self.kernel_args(data),
                                              self.surrogate_args(data), self.rate(data, epsilon), self.norm,
                                              self.domain(data), self.base_scale if self.base == "gaussian" else 0.0,
                                              rng, start, int(proposals or self.proposals))
        return out, DrawInfo("surrogate_map", acc, steps + self.steps)

    def release_surrogate_hardened(self, data, epsilon, rng):
        """A hardened surrogate-map release (output units, before the contract snaps it) and its info.

        The walk moves on the dyadic lattice ``2^(floor(log2 B) - 46)`` from the
        data-independent centre (a lattice point), so its positions are exact; the
        independence steps then end at the walk's state, a base-measure draw (``d + 4``
        rounded operations on values below ``|centre| + B``) or a map proposal
        ``theta_c + M^-1 u``, whose triangular solves are certified a posteriori
        (:func:`~kngflow.kernels.certified.chol_solve_certificate`; ``theta_c`` and ``M`` are
        whatever the fit computed: they define the proposal, as in the unhardened
        sampler).  A state whose rounding (times the output scale, with the product's own
        rounding) exceeds the grid's ``η`` is not released: the walk's state is (the same
        target law, rounding 0).  Decisions are modelled as exact, as everywhere.
        """
        h = self.hardening(data, epsilon)
        out_scale = float(self.output_scale(data))
        center, B = self.domain(data)
        center = np.asarray(center, dtype=np.float64)
        lattice = dyadic_lattice(float(B))
        start, _ = self.draw_metropolis(data, epsilon, rng, 1, lattice=lattice)
        walk = {"sampler": "metropolis", "acceptance": float("nan"), "steps": self.steps}
        try:
            out, acc, steps, routes, us, _, fit = surrogate_map_draws(
                type(self).gradient, type(self).surrogate, self.kernel_args(data), self.surrogate_args(data),
                self.rate(data, epsilon), self.norm, (center, B), 0.0, rng, start, int(self.proposals), details=True)
        except RuntimeError:  # no surrogate fit: the walk's state
            return start[0] * out_scale, walk
        theta, route = out[0], int(routes[0])
        u = UNIT_ROUNDOFF
        if route == 0:
            eta = 0.0
        elif route == 2:
            eta = 2.0 * (data.d + 4) * u * (float(np.max(np.abs(center))) + float(B))
        else:
            L, xc = np.ascontiguousarray(fit[:, :-1]), fit[:, -1].copy()
            x = theta - xc
            eta = chol_solve_certificate(L, x, us[0], inverse_norm_bound(L, np.linalg.inv(L)))
            eta += 2.0 * u * float(np.max(np.abs(theta)) + np.max(np.abs(xc)))
        scale = abs(self.output_scale(data))
        if (eta + 2.0 * u * float(np.max(np.abs(theta)))) * scale * (1.0 + 4.0 * u) <= h.eta:
            return theta * out_scale, {"sampler": "surrogate_map", "acceptance": float(acc[0]),
                                   "steps": int(steps[0]) + self.steps}
        return start[0] * out_scale, walk

    def hessian_norm_bound(self, data) -> float | None:
        """A public upper bound on the largest eigenvalue of the loss's Hessian over
        ``Theta`` (from ``n``, the dimension and the declared record domain), or None where
        none exists.  It sets the grid of a hardened gradient-map release
        (:meth:`hardening`); problems with a bounded Hessian override it."""
        return None

    def hardening(self, data, epsilon) -> Hardening:
        """With the gradient map (hardened, :meth:`release_gradient_map_hardened`): the
        coupling route on the box holding ``Theta``, snapped by the sampler from a
        double-double value (``site = "sampler"``), ``η = Λ 2^-44``, so
        δ′ = δ + (1 + e^ε) 2d 2^-44 (1.6·10^-12 at d = 7, ε = 1).

        The grid follows the release's spread where the problem bounds its Hessian by a
        public ``λ`` (:meth:`hessian_norm_bound`): near the mode the release moves as
        ``H^-1 u`` with ``u`` K-norm noise of rate ``a`` (each coordinate's standard
        deviation at least ``1/a`` for ℓ1, ℓ2 and ℓ∞), so each coordinate's standard
        deviation is at least ``1/(a λ)``, and ``Λ <= 1/(16 a λ)``
        (:func:`~kngflow.mechanisms.hardening.spread_grid`; the snapping adds at most 1/1024
        of that variance).  Otherwise ``Λ = 2^-20`` of the bound.  Other samplers:
        :meth:`Sampled.hardening`."""
        if not (self.hardened and self._policy() == "gradient_map"):
            return super().hardening(data, epsilon)
        data = self.check_data(data)
        center, B = self.domain(data)
        scale = abs(float(self.output_scale(data)))
        bound = (float(np.max(np.abs(center))) + float(B)) * scale
        lam = self.hessian_norm_bound(data)
        if lam is None:
            h = coupling_hardening(bound, 0.0, data.d, site="sampler", bits=SURROGATE_GRID_BITS)
        else:
            spread = scale / (self.rate(data, epsilon) * float(lam))
            h = coupling_hardening(bound, 0.0, data.d, site="sampler", spread=spread)
        return h._replace(eta=math.ldexp(h.grid, -MAP_ETA_BITS))

    def release_gradient_map_hardened(self, data, epsilon, rng):
        """A hardened gradient-map release (output units, snapped) and its info.

        Each proposal of the gradient map solves ``grad L(theta) = u`` by Newton's method,
        and certifying such a root to the grid's ``η`` would need the gradient (an
        exponential per record, for logistic regression) in double-double.  A hardened
        release proposes instead through the map frozen at the loss's minimiser: the
        surrogate-map chain (:func:`~kngflow.kernels.gradient_map.surrogate_map_chain`)
        with the loss as its own smooth surrogate, from the data-independent centre.  Its
        proposal ``theta_c + M^-1 u`` (``M`` the Hessian at the fitted centre ``theta_c``,
        both data dependent, as the Newton solves are) or a base-measure draw is accepted
        on the exact KNG density: independence Metropolis with a fixed proposal, the same
        target.  One exact gradient per proposal (no Newton solve, no Hessian), so it is
        also faster than the unhardened map at large ``n``.

        The final state is certified: the centre is exact; a base-measure draw is carried
        in double-double (:func:`~kngflow.kernels.gradient_map._draw_base_dd`, within
        ``(8 d + 24) u^2 (|centre| + B)``); a map state ``theta_c + (L L')^-1 u`` is solved again in
        double-double from the recorded ``u`` and certified
        (:func:`~kngflow.kernels.certified.chol_solve_dd`).  The value times the output scale
        (:func:`~kngflow.kernels.dd.scale_dd`) is snapped from its double-double value.
        Where the fit fails or ends outside ``Theta`` (separated data: no minimiser, the
        law's mass in a ridge at the edge of ``Theta`` that the frozen map misses, as the
        unhardened map does: :func:`~kngflow.kernels.gradient_map.gradient_map_chain`), or
        the certificate exceeds ``η`` (not observed), the
        random-walk Metropolis chain on the dyadic lattice ``2^(floor(log2 B) - 46)`` runs
        instead (exact positions, the same target).  Decisions are modelled as exact, as
        everywhere (:mod:`kngflow.mechanisms.hardening`).
        """
        h = self.hardening(data, epsilon)
        cls = type(self)
        center, B = self.domain(data)
        center = np.ascontiguousarray(center, dtype=np.float64)
        args = self.kernel_args(data)
        scale = float(self.output_scale(data))
        u = UNIT_ROUNDOFF
        try:
            out, acc, steps, routes, us, los, fit = surrogate_map_draws(
                cls.gradient, (cls.gradient, cls.hessian), args, args, self.rate(data, epsilon), self.norm,
                (center, B), 0.0, rng, center[None, :], int(self.proposals), details=True)
        except RuntimeError:
            out = None
        if out is not None and np.abs(fit[:, -1] - center).sum() > B:
            out = None  # the minimiser outside Theta (or none): the map misses the law (gradient_map_chain)
        if out is not None:
            route = int(routes[0])
            hi, lo = out[0].copy(), np.zeros(data.d)
            if route == 2:
                lo = los[0].copy()
                err = (8.0 * data.d + 24.0) * u * u * (float(np.max(np.abs(center))) + float(B))
            elif route == 1:
                L = np.ascontiguousarray(fit[:, :-1])
                xc = fit[:, -1].copy()
                Linv = np.linalg.inv(L)
                err = chol_solve_dd(L, np.ascontiguousarray(L.T), Linv, np.ascontiguousarray(Linv.T),
                                    inverse_norm_bound(L, Linv), np.ascontiguousarray(us[0]), hi, lo, 2)
                for i in range(data.d):  # theta = theta_c + x, in double-double
                    hi[i], lo[i] = dd_add(hi[i], lo[i], xc[i])
                err += 4.0 * u * u * float(np.max(np.abs(hi)) + np.max(np.abs(xc)))
            else:
                err = 0.0
            err = err * abs(scale) * (1.0 + 4.0 * u) + scale_dd(hi, lo, scale)
            if err <= h.eta:
                info = {"sampler": "frozen_map", "acceptance": float(acc[0]), "steps": int(steps[0])}
                return snap(hi, h, rng, lo), info
        start = self.draw_metropolis(data, epsilon, rng, 1, lattice=dyadic_lattice(float(B)))[0]
        hi, lo = start[0].copy(), np.zeros(data.d)
        scale_dd(hi, lo, scale)  # lattice points times the scale: exact in double-double (rounding 0 for scale 1)
        return snap(hi, h, rng, lo), {"sampler": "metropolis", "acceptance": float("nan"), "steps": self.steps}

    def _jacobian(self):
        cls = type(self)
        return kng_jacobian(cls.hessian) if cls.hessian is not None else gradient_jacobian(cls.gradient)


class GenericExponential(Sampled):
    """Exponential mechanism on a problem's loss (see the module docstring)."""

    kind = "exponential"
    loss = None  # jitted loss(theta, args), set by the problem's subclass

    def __init__(self, **kw):
        super().__init__(**kw)
        if self.base != "uniform":
            raise ValueError("base must be 'uniform' for the exponential mechanism (its loss sensitivity needs a bounded Theta)")

    def _energy(self):
        return loss_energy(type(self).loss)

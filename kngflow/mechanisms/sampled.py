"""The frame of the sampled mechanisms: options, sampler policy, release, Metropolis draws,
the hardening of each sampler and the log density.

:class:`Sampled` is what :class:`~kngflow.mechanisms.generic.GenericKNG` and
:class:`~kngflow.mechanisms.generic.GenericExponential` share: a target
``f(theta) ∝ exp(-energy(theta)) base(theta)`` (the energy from the subclass, the base
measure uniform on the ℓ1 ball ``{||theta - center||_1 <= B}`` or Gaussian) and the
samplers that draw from it.

Sampler policy: ``sampler="auto"`` runs the first entry of ``samplers`` (exact draws,
then exact coordinate Gibbs, the gradient map, then the generic random-walk Metropolis
kernel of :mod:`kngflow.kernels.generic`); ``info["sampler"]`` records which one ran.
Every draw method ``draw_<sampler>(data, epsilon, rng, size)`` returns ``(theta, info)``
with a :class:`~kngflow.mechanisms.draws.DrawInfo`, and a release finds it by name in
:attr:`Sampled.draws` (a new sampler is one entry there and its draw method).
Under ``"auto"`` a map sampler (:data:`MAP_SAMPLERS`) that finds no proposal inside
``Theta`` or no surrogate fit hands over to the next sampler of ``samplers`` (same target).
A mechanism with ``precondition`` true runs the Metropolis kernel along preconditioned directions
(:func:`~kngflow.kernels.generic.precond_metropolis_chains`: the columns of the inverse
Jacobian of the gradient at the chain's state, adapted in the burn-in with the scales,
frozen after it); it is still recorded as ``"metropolis"`` (the mechanism's options
say which), and its chains still start at the data-independent centre.

A hardened release (:mod:`kngflow.mechanisms.hardening`) needs a bounded rounding:
:func:`sampler_hardening` bounds it for exact draws and Metropolis chains, lattice Gibbs
moves on a dyadic lattice (:meth:`Sampled.release_gibbs_hardened`), and the map samplers
certify their final states (KNG's hardened releases,
:class:`~kngflow.mechanisms.generic.GenericKNG`).
"""

from __future__ import annotations

import math

import numpy as np

from kngflow.kernels.dd import scale_dd
from kngflow.kernels.generic import NORM_CODES, energies, metropolis_chains, precond_metropolis_chains
from kngflow.mechanisms.base import SAMPLER_DIAGNOSTICS, Mechanism, Release, check_choice, check_epsilon, check_int, check_positive, check_rng
from kngflow.mechanisms.claims import Density
from kngflow.mechanisms.draws import DrawInfo
from kngflow.mechanisms.hardening import (UNIT_ROUNDOFF, Hardening, HardeningError, coupling_hardening,
                                          dyadic_lattice, snap)

__all__ = ["Sampled", "sampler_hardening", "HARDENABLE_SAMPLERS", "SAMPLERS", "MAP_SAMPLERS", "BASES"]

SAMPLERS = ("auto", "exact", "gibbs", "metropolis", "gradient_map", "surrogate_map")
#: samplers drawing through a gradient map (option ``proposals``; the gradient map also ``max_tries``)
MAP_SAMPLERS = ("gradient_map", "surrogate_map")
BASES = ("uniform", "gaussian")


#: samplers whose rounding a hardened release bounds (:func:`sampler_hardening`): the
#: chains' positions are sums of data-independent proposals, the exact draws (1-D
#: quantiles) an order statistic plus a uniform offset, and the map samplers' final states
#: certified (:meth:`~kngflow.mechanisms.generic.GenericKNG.release_surrogate_hardened`,
#: :meth:`~kngflow.mechanisms.generic.GenericKNG.release_gradient_map_hardened`).  Coordinate Gibbs joins them where
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
        rounding a certified state may have:
        :meth:`~kngflow.mechanisms.generic.GenericKNG.release_surrogate_hardened`),
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

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

Options, the sampler policy (``sampler="auto"`` runs the first entry of ``samplers``;
``info["sampler"]`` records which one ran), the release, the Metropolis draws, the
hardening of each sampler and ``log_density`` are :class:`~kngflow.mechanisms.sampled.Sampled`'s.
The gradient map (:mod:`kngflow.kernels.gradient_map`, KNG with a smooth strictly convex
loss and a jitted ``hessian``) draws the gradient as exact K-norm noise, maps it back by
Newton's method and accepts the root as an independence-Metropolis proposal with
probability ``min(1, det H(current) / det H(proposed))`` inside ``Theta``; under
``"auto"`` a gradient map that finds no proposal inside ``Theta`` in ``max_tries`` hands
over to the next sampler of ``samplers`` (same target).  The surrogate map
(:func:`~kngflow.kernels.surrogate_map.surrogate_map_chain`, KNG whose gradient is not
smooth but that declares a smooth ``surrogate``) runs the Metropolis chain's ``steps``
sweeps, then ``proposals`` independence-Metropolis proposals from its end: a mixture of the
base measure and the surrogate's gradient map frozen at its minimiser, accepted on the
exact density; under ``"auto"`` it hands over likewise when its fit fails.  The kernels'
entry points: :mod:`kngflow.mechanisms.map_draws`.  KNG's hardened releases certify the
map samplers' final states (:meth:`GenericKNG.release_gradient_map_hardened`,
:meth:`GenericKNG.release_surrogate_hardened`).
"""

from __future__ import annotations

import math

import numpy as np

from kngflow.kernels.certified import chol_solve_certificate, chol_solve_dd, inverse_norm_bound
from kngflow.kernels.dd import dd_add, scale_dd
from kngflow.kernels.generic import gradient_jacobian, kng_energy, kng_jacobian, loss_energy
from kngflow.kernels.map_proposals import BASE_SHARE
from kngflow.mechanisms.base import (SAMPLER_DIAGNOSTICS, Mechanism, Release, check_choice, check_epsilon, check_int,
                                     check_rng)
from kngflow.mechanisms.draws import DrawInfo
from kngflow.mechanisms.hardening import UNIT_ROUNDOFF, Hardening, coupling_hardening, dyadic_lattice, snap
from kngflow.mechanisms.map_draws import GRADIENT_MAP_PROPOSALS, gradient_map_draws, surrogate_map_draws
from kngflow.mechanisms.sampled import MAP_ETA_BITS, MAP_SAMPLERS, SURROGATE_GRID_BITS, Sampled

__all__ = ["NonPrivateBase", "GenericKNG", "GenericExponential", "NORMS"]

NORMS = ("l1", "l2", "linf")


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


class GenericKNG(Sampled):
    """KNG on a problem's gradient (see the module docstring); option ``norm`` in {"l1", "l2", "linf"}."""

    kind = "kng"
    gradient = None  # jitted gradient(theta, args, g), set by the problem's subclass
    hessian = None  # optional jitted hessian(theta, args, H), the Jacobian of ``gradient``
    #: optional ``(gradient, hessian)`` of a smooth strictly convex surrogate of a loss whose
    #: gradient is not smooth, on ``surrogate_args(data)``: enables ``"surrogate_map"``
    surrogate = None
    #: the gradient map hands over to the next sampler (RuntimeError; the hardened release: to
    #: Metropolis) where the loss's minimiser is not found inside ``Theta``: set by a problem
    #: whose law then runs to the edge of ``Theta`` out of the map's reach (logistic regression
    #: on separated records; :func:`~kngflow.kernels.gradient_map.gradient_map_chain`)
    needs_minimiser: bool = False
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
        (:data:`~kngflow.kernels.map_proposals.BASE_SHARE`) are draws of the base measure:
        where ``det H`` is small (a saturating gradient far from the data, a gradient of low
        rank on a tiny data set) the map alone proposes too rarely, and its chains
        misrepresent the law there (the black-box audit read a loss of 4.9 at epsilon = 1 for
        logistic KNG without them).  Every Newton solve starts at one state-independent
        point (``warm=False`` of :func:`~kngflow.mechanisms.map_draws.gradient_map_draws`): where the solve's convergence
        depends on its start, a start at the chain's state makes the proposal's law depend
        on the state and the chain's law wrong.  Raises RuntimeError when a chain finds no
        proposal inside ``Theta`` in ``max_tries``."""
        if "gradient_map" not in self.available_samplers():
            return super().draw_gradient_map(data, epsilon, rng, size, proposals)
        out, acc, steps = gradient_map_draws(type(self).gradient, type(self).hessian, self.kernel_args(data),
                                             self.rate(data, epsilon), self.norm, self.domain(data),
                                             self.base_scale if self.base == "gaussian" else 0.0, rng, size,
                                             int(proposals or self.proposals), self.max_tries, BASE_SHARE, warm=False,
                                             need_root=type(self).needs_minimiser)
        return out, DrawInfo("gradient_map", acc, steps)

    def surrogate_args(self, data) -> tuple:
        """The tuple the surrogate's jitted gradient and Hessian take (problems with a ``surrogate``)."""
        raise NotImplementedError

    def draw_surrogate_map(self, data, epsilon, rng, size, proposals=None):
        """Final states and info (acceptance rates, step counts) of ``size`` surrogate-map chains, scaled
        units: the Metropolis chain (:meth:`draw_metropolis`, ``steps`` sweeps from the
        data-independent centre), then ``proposals`` independence-Metropolis proposals from its
        end (:func:`~kngflow.kernels.surrogate_map.surrogate_map_chain`: a mixture of the base
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
        :meth:`~kngflow.mechanisms.sampled.Sampled.hardening`."""
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
        surrogate-map chain (:func:`~kngflow.kernels.surrogate_map.surrogate_map_chain`)
        with the loss as its own smooth surrogate, from the data-independent centre.  Its
        proposal ``theta_c + M^-1 u`` (``M`` the Hessian at the fitted centre ``theta_c``,
        both data dependent, as the Newton solves are) or a base-measure draw is accepted
        on the exact KNG density: independence Metropolis with a fixed proposal, the same
        target.  One exact gradient per proposal (no Newton solve, no Hessian), so it is
        also faster than the unhardened map at large ``n``.

        The final state is certified: the centre is exact; a base-measure draw is carried
        in double-double (:func:`~kngflow.kernels.map_proposals._draw_base_dd`, within
        ``(8 d + 24) u^2 (|centre| + B)``); a map state ``theta_c + (L L')^-1 u`` is solved again in
        double-double from the recorded ``u`` and certified
        (:func:`~kngflow.kernels.certified.chol_solve_dd`).  The value times the output scale
        (:func:`~kngflow.kernels.dd.scale_dd`) is snapped from its double-double value.
        Where the fit fails, or ends outside ``Theta`` for a problem that
        :attr:`needs_minimiser` (separated data: no minimiser, the law's mass in a ridge at
        the edge of ``Theta`` that the frozen map misses, as the unhardened map does:
        :func:`~kngflow.kernels.gradient_map.gradient_map_chain`), or
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
        if out is not None and cls.needs_minimiser and np.abs(fit[:, -1] - center).sum() > B:
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

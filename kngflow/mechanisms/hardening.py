r"""Hardened releases: dithered snapping to a public power-of-two grid, with the guarantee it keeps.

Why.  A release computed in floating point as ``c(D) + W`` can only land on the floats near
``c(D) + W``, and which floats those are depends on ``c(D)``: an attacker who knows both
candidate data sets reads far more than ε from the low bits (Mironov, "On significance of
the least significant bits for differential privacy", CCS 2012;
:mod:`kngflow.audit.bits` measures it).  Every computed release differs from the release
of exact arithmetic by rounding, and that difference is what leaks.

What.  With ``hardened=True`` a mechanism's release ``x`` (the estimate, or for
mechanisms whose estimate is post-processing of a noisy statistic, that statistic) is
replaced by

    Y = clip(Λ floor((clip(x, -2B, 2B) + V) / Λ), -B, B),   V ~ Uniform[0, Λ)^k,

with ``Λ`` a power of two and ``B`` a multiple of ``Λ``, both computed from public
quantities only (:class:`Hardening`, declared by the mechanism in
:meth:`~kngflow.mechanisms.Mechanism.hardening`).  ``V`` is drawn after the mechanism's own
random numbers (``V = Λ U`` with ``U`` the generator's 53-bit uniform: exact), and the
division by ``Λ``, the floor and the product are exact in binary floating point, so ``Y``
is an exact grid point: its bits say nothing beyond which cell it is.

The guarantee.  Let ``X`` be the release of exact arithmetic (ε-DP, or (ε, δ)) and ``X̃``
the computed one, with ``||clip(X̃) - clip(X)||_∞ <= η`` for a public ``η`` (the
mechanism's rounding bound, derived in its ``hardening`` docstring; the rounding of
``X̃ + V`` is included in ``η``).  ``Ŷ``, the snapped exact release, is as private as ``X``
(post-processing with data-independent ``V``).  ``Y`` differs from ``Ŷ`` only when
``X + V`` lies within ``η`` of a cell boundary, and two bounds follow.

* **Lipschitz route** (pure ε′).  If the exact law has a density ``f`` with
  ``f(x) <= exp(L ||x - x'||_∞) f(x')`` where it matters (``L`` public: a K-norm density
  ``exp(-||w||_K / s)`` has ``L = ||(1, ..., 1)||_K / s``), so does ``Z = X + V``.  For a cell
  ``C`` of side ``Λ`` and its ``η``-neighbourhood, the strip ``C^{+η} \ C`` has volume at most
  ``r Λ^k`` with ``r = (1 + 2η/Λ)^k - 1``, and there ``g_Z <= w P(Z ∈ C) / Λ^k`` with
  ``w = exp(L (Λ + η))``; likewise for the inner strip.  Hence for every grid point ``y``

      (1 - r w) P(Ŷ = y)  <=  P(Y = y)  <=  (1 + r w) P(Ŷ = y),

  and ``Y`` is (ε′, δ)-DP with ``ε′ = ε + m log((1 + r w) / (1 - r w))`` for ``m`` snapped
  statistics (composition).  The grid is ``Λ = 2^(floor(log2(1/L)) - b)``, at most
  ``2^(floor(log2 B) - 12)``, with ``b = 10`` where that keeps ``ε′ - ε <= 10^-4 ε``
  (:func:`lipschitz_hardening`): for K-norm noise a thousandth of the noise scale, so
  the rounding (unbiased: ``E[Y] = E[X]``) adds at most ``Λ² / 4`` to each coordinate's
  variance, about 10^-7 of the noise's.
* **Coupling route** ((ε, δ′)).  Without a density bound (sampled releases on a bounded
  ``Theta``), ``P(Y != Ŷ) <= 2 k η / Λ`` exactly, because ``V`` puts ``X + V`` uniformly
  in its cell whatever ``X`` is.  Then
  ``P(Y ∈ S | D) <= e^ε P(Y ∈ S | D') + δ + (1 + e^ε) m 2kη/Λ``: (ε, δ′)-DP with
  ``δ′ = δ + (1 + e^ε) m 2kη/Λ``.  The grid is ``Λ = 2^(floor(log2 B) - 12)``, or, where
  the mechanism declares a public lower bound ``s`` on the standard deviation of each
  coordinate of its release (its *spread*, from ``n``, ε, Δ and the bound), the finer
  ``Λ = 2^(floor(log2 s) - 4)`` (:func:`spread_grid`): the rounding then adds at most
  ``Λ²/4 <= s²/1024``, a thousandth, to each coordinate's variance at every ``n``, where
  a grid tied to the bound alone would dominate the privacy noise at large ``n``.

Extra precision.  :func:`snap` takes the release as an unevaluated sum ``x + lo`` of two
doubles (``lo = 0`` for a plain release) and finds its cell without rounding ``x + V``:
``s + e = x + V`` exactly (:func:`~kngflow.kernels.dd.two_sum`), the cell index of ``s`` and
the offset ``s - kΛ`` are exact, and only the sum of the offset with ``e + lo`` is
rounded, by at most ``u Λ + 2u²|x|``.  A mechanism that carries its release in
double-double (a certified linear solve, :mod:`kngflow.kernels.dd`) snaps it itself
(``site = "sampler"``), so that ``η`` is the certified error of the solve, near ``u² |x|``,
instead of ``u |x|``.

What it does not cover.  The analysis models the random number generator's draws as
exact draws rounded to 53 bits and, for samplers, the sampler's decisions (accept/reject,
which interval) as those of exact arithmetic: η bounds the rounding of the arithmetic
that produces the value, not a flipped decision.  Diagnostics and timing are not covered
(they are not private at all; see :class:`~kngflow.mechanisms.Release`).  For production,
use a library with exact discrete samplers (OpenDP).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from kngflow._jit import jit

__all__ = ["Hardening", "HardeningError", "UNIT_ROUNDOFF", "coupling_hardening", "lipschitz_hardening", "snap",
           "spread_grid", "dyadic_lattice", "guarantee", "knorm_lipschitz"]

#: u = 2^-53, the unit roundoff of float64 (round to nearest)
UNIT_ROUNDOFF = 2.0**-53
#: the Lipschitz route's grid is 2^-LIPSCHITZ_BITS of the density's scale 1/L
LIPSCHITZ_BITS = 10
#: the grid is at most 2^-BOUND_BITS of the bound B (the coupling route's grid)
BOUND_BITS = 12
#: the grid is at most 2^-SPREAD_BITS of a declared public spread (variance added <= 1/1024)
SPREAD_BITS = 4
#: hardened chains move on the lattice 2^(floor(log2 B) - LATTICE_BITS): exact positions in Theta
LATTICE_BITS = 46


class HardeningError(ValueError):
    """A mechanism cannot honour ``hardened=True`` with these options (one line, names the option)."""


class Hardening(NamedTuple):
    """How a mechanism's release is hardened; every field from public quantities only.

    ``grid``: Λ, a power of two; ``bound``: B, the clamp of the snapped values (a multiple
    of Λ); ``eta``: η, the bound on the rounding of each snapped coordinate;
    ``lipschitz``: L of the exact law's density in the ∞-norm (None: coupling route);
    ``size``: coordinates per snapped statistic; ``snaps``: snapped statistics per release;
    ``site``: ``"estimate"`` (snapped by the contract after ``release``),
    ``"statistic"`` (the mechanism snaps its noisy statistic itself with :func:`snap`) or
    ``"sampler"`` (the mechanism snaps its estimate itself, from a double-double value);
    ``tv``: a public bound on the total-variation distance between the law the computed
    release is drawn from (before rounding) and the exact law, certified at every release
    (a factorisation's backward error); it adds ``(1 + e^ε) tv`` to δ′.
    """

    grid: float
    bound: float
    eta: float
    lipschitz: float | None
    size: int
    snaps: int = 1
    site: str = "estimate"
    tv: float = 0.0

    def describe(self, epsilon: float, delta: float = 0.0) -> str:
        """One line: the grid, the bound and the guarantee at ``epsilon``."""
        eps2, delta2 = guarantee(self, epsilon, delta)
        what = {"estimate": "estimate", "sampler": "estimate (from its double-double value)"}.get(
            self.site, f"noisy statistic ({self.snaps} per release)")
        return (f"hardened: {what} snapped to the grid 2^{int(math.log2(self.grid))} with a uniform dither, clamped "
                f"to ±{self.bound:g}, rounding bound η = {self.eta:.2g}: ({_num(eps2, epsilon)}, {_num(delta2, delta)})"
                f"-DP at declared (ε, δ) = ({epsilon:g}, {delta:g})")


def _num(value: float, declared: float) -> str:
    """``value`` as ``declared + excess`` when it exceeds a positive ``declared``."""
    if value == declared:
        return f"{declared:g}"
    return f"{value:.2g}" if declared == 0 else f"{declared:g} + {value - declared:.2g}"


def _floor_pow2(x: float) -> float:
    m, e = math.frexp(x)
    return math.ldexp(1.0, e - 1)


def dyadic_lattice(bound: float) -> float:
    """``2^(floor(log2 bound) - 46)``: a chain on ``{|theta_j| <= bound}`` whose steps are
    multiples of it has exact positions (sums of lattice points below ``2^52`` of it)."""
    return math.ldexp(_floor_pow2(bound), -LATTICE_BITS)


def bound_grid(bound: float, bits: int = BOUND_BITS) -> tuple[float, float]:
    """``(Λ, B)`` of the coupling route: ``Λ = 2^(floor(log2 bound) - bits)`` (default 12) and
    ``B`` the bound rounded up to it."""
    if not (math.isfinite(bound) and bound > 0):
        raise HardeningError(f"hardened: the public bound must be finite and > 0, got {bound!r}")
    grid = math.ldexp(_floor_pow2(bound), -bits)
    return grid, math.ceil(bound / grid) * grid


def spread_grid(spread: float, bound: float) -> tuple[float, float]:
    """``(Λ, B)`` for a release whose coordinates have standard deviation at least ``spread``
    (public): ``Λ = 2^(floor(log2 spread) - 4)``, at most the bound's grid (:func:`bound_grid`),
    and ``B`` the bound rounded up to it."""
    coarse, _ = bound_grid(bound)
    if not (math.isfinite(spread) and spread > 0):
        raise HardeningError(f"hardened: the declared spread must be finite and > 0, got {spread!r}")
    grid = min(math.ldexp(_floor_pow2(spread), -SPREAD_BITS), coarse)
    return grid, math.ceil(bound / grid) * grid


def coupling_hardening(bound: float, eta: float, size: int, snaps: int = 1, site: str = "estimate",
                       spread: float | None = None, bits: int = BOUND_BITS) -> Hardening:
    """The coupling route's :class:`Hardening` on ``[-bound, bound]^size`` (module docstring);
    with a public ``spread`` the grid follows it (:func:`spread_grid`), else it is
    ``2^-bits`` of the bound."""
    grid, bound = bound_grid(bound, bits) if spread is None else spread_grid(spread, bound)
    return Hardening(grid=grid, bound=bound, eta=float(eta), lipschitz=None, size=int(size), snaps=int(snaps),
                     site=site)


def lipschitz_hardening(lipschitz: float, bound: float, eta: float, size: int, epsilon: float, snaps: int = 1,
                        site: str = "estimate", eta_bits: int | None = None) -> Hardening:
    """The Lipschitz route's :class:`Hardening` (module docstring).

    ``Λ = 2^(floor(log2(1/L)) - b)``, at most ``2^(floor(log2 bound) - 12)``, with ``b`` the
    largest of 10, 9, ..., 0 for which ``ε′ - ε <= 10^-4 ε`` (else ``b = 0``, which
    minimises ``ε′ - ε`` up to a factor 2): the finer the grid the smaller the rounding
    (``Λ²/6`` of variance per coordinate), the coarser the smaller ``ε′ - ε``.  With
    ``eta_bits`` the rounding bound is relative to the grid, ``η = Λ 2^-eta_bits`` (a release
    certified in double-double), and ``eta`` is ignored.
    """
    if not (math.isfinite(lipschitz) and lipschitz > 0):
        raise HardeningError(f"hardened: the density's Lipschitz bound must be finite and > 0, got {lipschitz!r}")
    coarse, _ = bound_grid(bound)
    for bits in range(LIPSCHITZ_BITS, -1, -1):
        grid = min(math.ldexp(_floor_pow2(1.0 / lipschitz), -bits), coarse)
        if eta_bits is not None:
            eta = math.ldexp(grid, -eta_bits)
        h = Hardening(grid=grid, bound=math.ceil(bound / grid) * grid, eta=float(eta), lipschitz=float(lipschitz),
                      size=int(size), snaps=int(snaps), site=site)
        try:
            extra = guarantee(h, epsilon)[0] - epsilon
        except HardeningError:
            continue
        if extra <= 1e-4 * epsilon or bits == 0 or grid == coarse:
            return h
    raise HardeningError(f"hardened: the rounding bound η = {eta:g} is too large for any grid of the density "
                         f"scale 1/L = {1.0 / lipschitz:g}")


def knorm_lipschitz(norm: str, k: int, scale: float) -> float:
    """``L`` of the K-norm density ``exp(-||w||_K / scale)`` in ``R^k`` against ∞-norm moves:
    ``||(1, ..., 1)||_K / scale`` (``k``, ``sqrt(k)``, 1 for ℓ1, ℓ2, ℓ∞)."""
    width = {"l1": float(k), "l2": math.sqrt(k), "linf": 1.0}[norm]
    return width / scale


def snap(x, h: Hardening, rng: np.random.Generator, lo=None) -> np.ndarray:
    """``clip(Λ floor((clip(x + lo, ±2B) + V) / Λ), ±B)`` with ``V = Λ U``, ``U`` uniform on [0, 1)^size.

    Draws ``x.size`` uniforms from ``rng`` (after the mechanism's own draws).  ``lo`` (default
    0) is the low part of a double-double release ``x + lo``.  The cell is found without
    rounding ``x + V`` (module docstring, "Extra precision"): with ``lo = 0`` the result is
    that of ``floor((x + V) / Λ)`` in exact arithmetic up to a rounding of at most ``u Λ``.
    The result is an exact multiple of ``Λ``.
    """
    x = np.asarray(x, dtype=np.float64)
    v = h.grid * rng.random(x.shape)
    low = np.zeros(x.shape) if lo is None else np.asarray(lo, dtype=np.float64)
    out = np.empty(x.shape)
    _snap_into(x.ravel(), low.ravel(), v.ravel(), float(h.grid), float(h.bound), out.reshape(-1))
    return out


@jit
def _snap_into(x, lo, v, grid, bound, out):
    """The arithmetic of :func:`snap`, elementwise (``lo`` counts only where ``x`` is not clipped)."""
    for i in range(x.shape[0]):
        c = min(max(x[i], -2.0 * bound), 2.0 * bound)
        low = lo[i] if c == x[i] else 0.0
        s = c + v[i]  # two_sum: s + e = c + v exactly
        bb = s - c
        e = (c - (s - bb)) + (v[i] - bb)
        k = math.floor(s / grid)
        offset = (s - k * grid) + (e + low)  # s - k Λ is exact; one rounding of the small remainder
        y = (k + math.floor(offset / grid)) * grid
        out[i] = min(max(y, -bound), bound)


def guarantee(h: Hardening, epsilon: float, delta: float = 0.0) -> tuple[float, float]:
    """``(ε′, δ′)`` of the hardened release (module docstring), for an exact release that is (ε, δ)-DP."""
    ratio = 2.0 * h.eta / h.grid
    if h.lipschitz is None:
        return float(epsilon), float(delta + (1.0 + math.exp(epsilon)) * (h.snaps * h.size * ratio + h.tv))
    r = math.expm1(h.size * math.log1p(ratio))
    rw = r * math.exp(h.lipschitz * (h.grid + h.eta))
    if not rw < 1.0:
        raise HardeningError(f"hardened: the rounding bound η = {h.eta:g} is too large for the grid {h.grid:g}")
    return float(epsilon + h.snaps * (math.log1p(rw) - math.log1p(-rw))), float(delta)

"""Norms on R^m given by their unit balls: ℓ1, ℓ2, ℓ∞ and any symmetric convex body.

A K-norm mechanism (Hardt & Talwar 2010; Awan & Slavković 2021) adds noise with
density ∝ exp(−‖v‖_K / scale), where ‖·‖_K is the gauge (Minkowski functional)
of a convex body K that is symmetric (K = −K), compact and has 0 in its
interior:

    ‖u‖_K = inf{ t > 0 : u / t ∈ K }.

Every norm object here exposes

``name``
    a short label (``"l1"``, ``"l2"``, ``"linf"`` or a user name);
``__call__(v)``
    the norm of ``v`` along the last axis (vectorised; a scalar for 1-D input);
``contains(u)``
    membership of the unit ball K, vectorised along the last axis;
``box``
    sup{‖u‖∞ : u ∈ K}, so that K ⊂ [−box, box]^m — the proposal box of the
    rejection sampler (Awan–Slavković Algorithm 8);
``dim``
    the dimension the body lives in, or ``None`` for the ℓp families that
    exist in every dimension.

:class:`ConvexBodyNorm` wraps any membership test. When that test is a numba
``@jit`` function of one 1-D float64 array, both the gauge and the rejection
sampler of :mod:`kngflow.noise` run entirely inside numba.

The worked example :func:`example_kt_norm` is the optimal ball K_T of
Awan–Slavković Example 3.1 (see its docstring for the derivation and a
misprint in the paper's Example 8.1).

Caching
-------
Kernels that take the membership test as an argument (``gauge_one`` and the
row loops) are compiled with ``cache=False``: numba keys such a
specialisation on the identity of the function object, so an on-disk cache
would miss in every new process and grow without bound. They compile once per
process (about a second). Kernels that call a fixed membership function by
name, such as :func:`kt_contains`, cache normally.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
from numba.core.registry import CPUDispatcher

from kngflow._jit import jit

__all__ = [
    "Norm",
    "L1Norm",
    "L2Norm",
    "LinfNorm",
    "ConvexBodyNorm",
    "NORM_NAMES",
    "get_norm",
    "example_kt_norm",
    "kt_contains",
    "kt_half_height",
    "KT_AREA",
    "gauge_one",
]

NORM_NAMES = ("l1", "l2", "linf")


class Norm:
    """Base class: a norm on R^m described by its unit ball K.

    Subclasses set ``name``, ``box`` and ``dim`` and implement ``__call__``.
    ``contains(u)`` defaults to ``self(u) <= 1``.
    """

    name: str = "norm"
    box: float = 1.0
    dim: int | None = None

    def __call__(self, v) -> np.ndarray | float:  # pragma: no cover - abstract
        raise NotImplementedError

    def contains(self, u) -> np.ndarray | bool:
        """Whether ``u`` (last axis = coordinates) lies in the closed unit ball K."""
        out = np.asarray(self(u)) <= 1.0
        return bool(out) if out.ndim == 0 else out

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, box={self.box!r}, dim={self.dim!r})"


def _as_float_array(v) -> np.ndarray:
    a = np.asarray(v, dtype=np.float64)
    if a.ndim == 0:
        raise ValueError("v must have at least one axis (the coordinates along the last axis)")
    return a


def _scalar_or_array(a: np.ndarray):
    return float(a) if a.ndim == 0 else a


class L1Norm(Norm):
    """ℓ1 norm Σ|v_i|; unit ball the cross-polytope, ``box = 1``."""

    name = "l1"
    box = 1.0

    def __call__(self, v):
        return _scalar_or_array(np.abs(_as_float_array(v)).sum(axis=-1))


class L2Norm(Norm):
    """Euclidean norm; unit ball the Euclidean ball, ``box = 1``."""

    name = "l2"
    box = 1.0

    def __call__(self, v):
        a = _as_float_array(v)
        return _scalar_or_array(np.sqrt(np.einsum("...i,...i->...", a, a)))


class LinfNorm(Norm):
    """ℓ∞ norm max|v_i|; unit ball the cube [−1, 1]^m, ``box = 1``."""

    name = "linf"
    box = 1.0

    def __call__(self, v):
        a = _as_float_array(v)
        return _scalar_or_array(np.abs(a).max(axis=-1))


# --------------------------------------------------------------------------------------
# gauge of a convex body by bisection
# --------------------------------------------------------------------------------------

_GAUGE_RTOL = 1e-13
_GAUGE_MAXIT = 200


def _gauge_py(contains: Callable, box: float, u: np.ndarray) -> float:
    """Gauge inf{t > 0 : u/t ∈ K} by bisection (plain Python; any membership callable).

    Because K is convex and contains 0, {t > 0 : u/t ∈ K} is an up-ray
    [‖u‖_K, ∞): if u/t ∈ K and s > t then u/s = (t/s)(u/t) + (1 − t/s)·0 ∈ K.
    So membership of u/t is monotone in t and bisection applies. A lower
    bracket is ‖u‖∞ / box (K ⊂ [−box, box]^m), an upper one is found by
    doubling.
    """
    return _gauge_core(contains, box, u)


def _gauge_core(contains, box, u):
    m = u.shape[0]
    amax = 0.0
    for i in range(m):
        a = abs(u[i])
        if a > amax:
            amax = a
    if amax == 0.0:
        return 0.0
    if not math.isfinite(amax):
        return math.inf
    lo = amax / box  # u/t ∉ K for t < lo
    w = np.empty(m)
    hi = lo
    for _ in range(2100):  # doubling: hi ≤ 2^2100·lo covers every finite inner radius
        for i in range(m):
            w[i] = u[i] / hi
        if contains(w):
            break
        lo = hi
        hi = hi * 2.0
    else:
        return math.inf
    if lo == hi:
        return hi
    # invariant: u/hi ∈ K, and u/t ∉ K for t < lo
    for _ in range(_GAUGE_MAXIT):
        if hi - lo <= _GAUGE_RTOL * hi:
            break
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        for i in range(m):
            w[i] = u[i] / mid
        if contains(w):
            hi = mid
        else:
            lo = mid
    return hi


gauge_one = jit(cache=False)(_gauge_core)  # see "Caching" in the module docstring
gauge_one.__doc__ = """Gauge ‖u‖_K = inf{t > 0 : u/t ∈ K} of one 1-D float64 vector, inside numba.

Parameters
----------
contains : numba @jit function ``(float64[:]) -> bool``
    Membership test of K (convex, symmetric, 0 in the interior).
box : float
    sup of ‖w‖∞ over K, giving the lower bracket ‖u‖∞/box.
u : float64[:]

Returns
-------
float
    The gauge to relative accuracy about 1e-13 (the upper end of the final
    bisection bracket, so u/result ∈ K always holds).
"""


@jit(cache=False)  # specialised on a function argument: see "Caching" in the module docstring
def _gauge_rows(contains, box, x, out):
    for k in range(x.shape[0]):
        out[k] = gauge_one(contains, box, x[k])


@jit(cache=False)  # specialised on a function argument: see "Caching" in the module docstring
def _contains_rows(contains, x, out):
    for k in range(x.shape[0]):
        out[k] = contains(x[k])


class ConvexBodyNorm(Norm):
    """The gauge norm of a symmetric convex body K given by its membership test.

    Parameters
    ----------
    contains : callable
        ``contains(u) -> bool`` for one 1-D float64 vector ``u`` of length
        ``dim``: whether u ∈ K. K must be convex, compact, symmetric (u ∈ K ⇔
        −u ∈ K) and contain a neighbourhood of 0 — the conditions under which
        the gauge is a norm. If ``contains`` is a numba ``@jit`` function the
        gauge and the rejection sampler of :func:`kngflow.noise.knorm_noise` run
        inside numba; otherwise they fall back to (slow) Python loops.
    box : float
        sup{‖u‖∞ : u ∈ K}, so K ⊂ [−box, box]^m (must be finite and > 0).
    dim : int, optional
        Dimension of K, if it is tied to one (checked by ``knorm_noise``).
    name : str
        Label used in reprs and results.

    Notes
    -----
    The value ‖u‖_K = inf{t > 0 : u/t ∈ K} is computed by bisection: by
    convexity and 0 ∈ K the set {t : u/t ∈ K} is a ray [‖u‖_K, ∞), so
    membership is monotone in t. The bracket starts at ‖u‖∞/box and is
    doubled until u/hi ∈ K, then halved to a relative width of 1e-13.
    """

    def __init__(self, contains: Callable, box: float, *, dim: int | None = None, name: str = "K"):
        if not callable(contains):
            raise TypeError(f"contains must be callable (a membership test of K), got {type(contains).__name__}")
        if isinstance(box, bool) or not isinstance(box, (int, float, np.integer, np.floating)):
            raise TypeError(f"box must be a real number, got {type(box).__name__}")
        box = float(box)
        if not (math.isfinite(box) and box > 0):
            raise ValueError(f"box must be finite and > 0 (sup of |u_i| over K), got {box!r}")
        if dim is not None:
            if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
                raise TypeError(f"dim must be a positive int or None, got {type(dim).__name__}")
            if dim < 1:
                raise ValueError(f"dim must be a positive int or None, got {dim!r}")
            dim = int(dim)
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, got {type(name).__name__}")
        self.contains_one = contains
        self.box = box
        self.dim = dim
        self.name = name

    @property
    def is_jitted(self) -> bool:
        """True when the membership test is a numba dispatcher (samplers run in numba)."""
        return isinstance(self.contains_one, CPUDispatcher)

    def _rows(self, v) -> tuple[np.ndarray, tuple]:
        a = _as_float_array(v)
        if self.dim is not None and a.shape[-1] != self.dim:
            raise ValueError(f"v must have last axis of length dim={self.dim}, got shape {a.shape}")
        lead = a.shape[:-1]
        return np.ascontiguousarray(a.reshape(-1, a.shape[-1])), lead

    def __call__(self, v):
        x, lead = self._rows(v)
        out = np.empty(x.shape[0])
        if self.is_jitted:
            _gauge_rows(self.contains_one, self.box, x, out)
        else:
            for k in range(x.shape[0]):
                out[k] = _gauge_py(self.contains_one, self.box, x[k])
        return _scalar_or_array(out.reshape(lead))

    def contains(self, u):
        x, lead = self._rows(u)
        out = np.empty(x.shape[0], dtype=np.bool_)
        if self.is_jitted:
            _contains_rows(self.contains_one, x, out)
        else:
            for k in range(x.shape[0]):
                out[k] = bool(self.contains_one(x[k]))
        out = out.reshape(lead)
        return bool(out) if out.ndim == 0 else out


_BUILTIN = {"l1": L1Norm(), "l2": L2Norm(), "linf": LinfNorm()}


def get_norm(norm) -> Norm:
    """Return the norm object for ``norm``.

    Parameters
    ----------
    norm : {"l1", "l2", "linf"} or Norm
        A name of a built-in ℓp norm, or a :class:`Norm` instance (returned
        unchanged).

    Raises
    ------
    TypeError
        If ``norm`` is neither a str nor a :class:`Norm`.
    ValueError
        If ``norm`` is a str other than the allowed names.
    """
    if isinstance(norm, Norm):
        return norm
    if isinstance(norm, str):
        if norm in _BUILTIN:
            return _BUILTIN[norm]
        raise ValueError(f"norm must be one of {list(NORM_NAMES)} or a Norm object, got {norm!r}")
    raise TypeError(f"norm must be one of {list(NORM_NAMES)} or a Norm object, got {type(norm).__name__}")


# --------------------------------------------------------------------------------------
# worked example: the optimal ball K_T of Awan–Slavković Example 3.1
# --------------------------------------------------------------------------------------


@jit
def kt_contains(u):
    """Membership of K_T (Awan–Slavković Example 3.1, corrected), inside numba.

    u ∈ K_T ⇔ |u1| ≤ 2, |u2| ≤ h(|u1|) with h(s) = 2 for s ≤ 1 and
    h(s) = 2 − 2(s − 1)² for 1 < s ≤ 2. See :func:`example_kt_norm`.
    """
    a = abs(u[0])
    b = abs(u[1])
    if a > 2.0:
        return False
    if a <= 1.0:
        return b <= 2.0
    d = a - 1.0
    return b <= 2.0 - 2.0 * d * d


def kt_half_height(u1):
    """Half-height h(|u1|) of K_T: the section {u2 : (u1, u2) ∈ K_T} is [−h, h] (vectorised)."""
    a = np.abs(np.asarray(u1, dtype=np.float64))
    d = a - 1.0
    h = np.where(a <= 1.0, 2.0, 2.0 - 2.0 * d * d)
    h = np.where(a > 2.0, 0.0, h)
    return float(h) if h.ndim == 0 else h


KT_AREA = 40.0 / 3.0


def example_kt_norm() -> ConvexBodyNorm:
    r"""The K_T norm of Awan–Slavković Example 3.1 (optimal K-norm for T).

    Setting: data x_i ∈ [−1, 1], statistic T(X) = (Σ x_i, Σ 2x_i²). Neighbouring
    data sets differ in one record, x₁ versus x₂.

    **Adjacent output space.** u = T(X) − T(X') = (x₁ − x₂, 2x₁² − 2x₂²).
    Write u₁ = x₁ − x₂ and s = x₁ + x₂, so u₂ = 2(x₁ − x₂)(x₁ + x₂) = 2u₁s.
    Given u₁, x₁ = (s + u₁)/2 and x₂ = (s − u₁)/2 both lie in [−1, 1] iff
    |s| ≤ 2 − |u₁|. Hence

        S_T = {u : |u₁| ≤ 2, |u₂| ≤ g(|u₁|)},   g(a) = 2a(2 − a) = 2 − 2(1 − a)²,

    which agrees with the paper's display for S_T in Example 3.1.

    **Convex hull.** g is concave on [0, 2] with g(0) = 0, g(1) = 2 (maximum)
    and g(2) = 0, but a ↦ g(|a|) has a dip at 0, so S_T (a "bow-tie") is not
    convex. Its hull has upper boundary the concave envelope of g(|u₁|) on
    [−2, 2]: the chord at height 2 between the two maxima (±1, 2), and g on
    1 ≤ |u₁| ≤ 2 (already concave, tangent to the chord at ±1). By symmetry
    in u₂,

        K_T = {u ∈ [−2, 2]² : |u₂| ≤ h(|u₁|)},
        h(a) = 2                 for a ≤ 1,
        h(a) = 2 − 2(a − 1)²     for 1 < a ≤ 2.

    Area: 4·(∫₀¹ 2 da + ∫₁² (2 − 2(a−1)²) da) = 4·(2 + 4/3) = 40/3. So the
    u₁-marginal of Uniform(K_T) has density h(|u₁|)/(20/3), and given u₁,
    u₂ ~ Uniform(−h, h).

    **Sensitivity.** K_T is the convex hull of S_T, so every adjacent
    difference lies in K_T and some reach its boundary: Δ_{K_T}(T) = 1 by
    construction. In ℓ∞, Δ∞(T) = 2 (e.g. u = (2, 0) from x₁ = 1, x₂ = −1),
    which is also ``box``.

    **Misprint in the paper.** Example 8.1 prints the bound as
    2 − (1 − u₁)² for u₁ ≥ 1 (and 2 − (u₁ + 1)² for u₁ < −1), dropping the
    factor 2 in front of the square; with that bound the set would contain
    (2, 1) ∉ hull(S_T) (and have area 44/3), so Δ_K(T) would no longer be 1
    for that set and the mechanism would be miscalibrated. (It also writes
    (1 − u₁)² where (u₁ − 1)² is meant for the branch u₁ ≥ 1 — equal, so
    harmless — and the u₁ < −1 branch should read 2 − 2(u₁ + 1)².) §6.1's
    K₂ has the factor 2 right but leaves the case |u₁| ≤ 1 (|u₂| ≤ 2)
    implicit. This implementation uses the derivation above.

    Returns
    -------
    ConvexBodyNorm
        ``name="kt"``, ``dim=2``, ``box=2``, membership :func:`kt_contains`
        (a numba function, so sampling runs inside numba).
    """
    return ConvexBodyNorm(kt_contains, 2.0, dim=2, name="kt")

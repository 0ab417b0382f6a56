"""Support vector machines with the Huber hinge (Chaudhuri, Monteleoni & Sarwate 2011, §3.4.2).

Model
-----
Records ``(x_i, y_i)`` with ``x_i`` in a declared public ball of ``R^d``, by default the
unit ℓ2 ball (``||x_i||_2 <= 1``: rescale a user's covariates by a public bound first), and
labels ``y_i`` in ``{-1, +1}``.  With the margin ``z = y x'w`` the Huber hinge of smoothing ``h > 0`` is

    l_h(z) = 0                          if z > 1 + h,
             (1 + h - z)^2 / (4 h)       if |1 - z| <= h,
             1 - z                       if z < 1 - h,

a convex, continuously differentiable upper approximation of the hinge ``max(0, 1 - z)``
(within ``h / 4`` of it; ``h -> 0`` gives the hinge).  Its derivatives are

    l_h'(z)  = 0, -(1 + h - z) / (2 h), -1          (so -1 <= l_h' <= 0),
    l_h''(z) = 0, 1 / (2 h), 0                       (where it exists: z != 1 +- h).

``l_h'`` is Lipschitz with constant ``c = 1 / (2 h)``; ``l_h''`` jumps at ``z = 1 +- h``,
so ``l_h`` is not twice differentiable there.  The regularised empirical risk of every
mechanism here is

    J(w) = (1/n) sum_i l_h(y_i x_i'w) + (reg/2) ||w||_2^2,

``reg`` (Λ) a public constant; in the sum scale ``n J(w) = sum_i l_h(y_i x_i'w) + (n reg / 2)
||w||^2`` with gradient ``sum_i l_h'(y_i x_i'w) y_i x_i + n reg w`` and (almost everywhere)
Hessian ``sum_i l_h''(y_i x_i'w) x_i x_i' + n reg I``, positive definite: ``J`` is
``reg``-strongly convex and its minimiser unique.

Record domain
-------------
The covariates lie in ``{||x||_D <= r}`` (:class:`~kngflow.problems.domains.RecordDomain`;
the problem's options ``data_norm`` = ``D`` in {"l2", "l1", "linf"} and ``radius`` = ``r``;
default ``"l2"``, 1: the unit ball above).  The constants below are suprema of norms of ``x``
over the ball, ``R_K = sup{||x||_K : ||x||_D <= r} = r c_K`` (:mod:`kngflow.problems.domains`):
unit ℓ2 ball ``R_∞ = R_2 = 1``, ``R_1 = sqrt(d)``; box ``[-r, r]^d`` (``"linf"``)
``R_∞ = r``, ``R_2 = r sqrt(d)``, ``R_1 = r d``; ℓ1 ball every ``R_K = r``.

Constants (derived here, data independent)
------------------------------------------
* One record's gradient ``l_h'(z) y x`` has ℓ2 norm at most ``|l_h'| ||x||_2 <= R_2``:
  ``L = R_2`` (:func:`lipschitz`; 1 = :data:`LIPSCHITZ` for the unit ball, as CMS 2011 assume).
* One record's Hessian ``l_h''(z) x x'`` has eigenvalues in ``[0, ||x||^2 / (2 h)]``, so
  ``c = R_2^2 / (2 h)`` (:func:`curvature`; ``1 / (2 h)`` for the unit ball) bounds them:
  Awan & Slavković's ``lambda`` (CMS's ``c`` is that of the rescaled records
  ``x / R_2``, ``1 / (2 h)``).  ``J`` is ``(c + reg)``-smooth.
* Gradient sensitivity in a norm ``K``: two records' gradient terms differ by
  ``||l_h'(z) y x - l_h'(z') y' x'||_K <= sup ||x||_K + sup ||x'||_K = 2 R_K``
  (:func:`gradient_sensitivity`) at every ``w``: for the unit ball ``Delta_2 = 2``,
  ``Delta_inf = 2``, ``Delta_1 = 2 sqrt(d)``.  The bound is attained, so it is the
  supremum: at ``w = 0`` every margin is ``0 < 1 - h`` when ``h < 1``, ``l_h' = -1``, and
  ``x, y = 1`` against ``x' = -x, y' = 1`` moves the gradient by ``2 x``, with ``x`` the
  point of the ball attaining ``R_K`` (``e_1`` for ℓ2 and ℓ∞ on the unit ball;
  ``(1, ..., 1)/sqrt(d)`` gives ``2 sqrt(d)`` in ℓ1; the corners of a box).  The ridge term
  ``n reg w`` is the same on adjacent data sets (``n`` is public), so it adds nothing.
* The same bound holds for the hinge's subgradient ``-1{z < 1} y x`` (KNG on the hinge).

Data protocol (synthetic)
-------------------------
A linearly separable law with label noise: ``x`` uniform in the unit ball of ``R^d``
(direction uniform on the sphere, radius ``U^{1/d}``), ``y = sign(x'u)`` for the unit
vector ``u`` (``direction``, default alternating signs), flipped with probability
``flip``.  Under another declared domain ``x`` is that draw scaled by ``r / c``, ``c =
sup{||x||_D : ||x||_2 <= 1}`` (``sqrt(d)`` for ℓ1, 1 for ℓ2 and ℓ∞): uniform in the largest
Euclidean ball inside the domain (the same random numbers; labels, the Bayes rate and the
misclassification formula are unchanged by the scaling, ``theta_star`` follows it).
The Bayes classifier is ``sign(x'u)`` with error ``flip``; by the law's rotational symmetry a classifier ``sign(x'w)`` errs with probability exactly
``flip + (1 - 2 flip) angle(w, u) / pi`` (:meth:`SVMProblem.misclassification_exact`).

Error measures (declared by :class:`SVMProblem`)
------------------------------------------------
* ``"misclassification"``: the rate of ``sign(x'w) != y`` on a held-out sample of the same
  law (:data:`HELD_OUT` records drawn once from a fixed seed; ``w = 0`` counts as wrong on
  every record);
* ``"excess_risk"``: the excess regularised risk ``J_ref(w) - J_ref(w*)`` on a reference
  sample of the same law (:data:`REFERENCE` records, another fixed seed), ``w* =
  theta_star`` its minimiser: the population regularised minimiser, to Monte Carlo error.

The ``metric`` option picks the one ``error`` returns (the store's ``error``); both are
methods (:meth:`SVMProblem.misclassification`, :meth:`SVMProblem.excess_risk`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from numbers import Real
from typing import NamedTuple

import numpy as np

from kngflow._jit import jit
from kngflow.kernels.dd import UNIT, dd_add, dd_div, two_prod, two_sum
from kngflow.problems.base import Problem, check_dimension
from kngflow.problems.domains import RecordDomain, domain_covariates, norm_factor, record_domain

__all__ = [
    "SVMData",
    "SVMProblem",
    "svm_data",
    "check_svm_data",
    "LIPSCHITZ",
    "UNIT_BALL",
    "lipschitz",
    "curvature",
    "gradient_sensitivity",
    "covariate_radius",
    "huber_loss",
    "huber_derivative",
    "huber_gradient_dd",
    "huber_loss_sum",
    "huber_gradient",
    "huber_hessian",
    "hinge_gradient",
    "regularised_minimiser",
    "unit_ball",
    "HELD_OUT",
    "REFERENCE",
]

#: ``L`` over the unit ball: one record's gradient ``l_h'(z) y x`` has ℓ2 norm at most ``|l_h'| ||x||_2 <= 1``
LIPSCHITZ = 1.0
#: the default record domain: the unit ℓ2 ball
UNIT_BALL = RecordDomain("l2", 1.0)
#: records of the held-out sample of the misclassification rate
HELD_OUT = 200_000
#: records of the reference sample of ``theta_star`` and the excess risk
REFERENCE = 200_000
#: seeds of the held-out and reference samples (public constants)
_HELD_OUT_SEED = 20_110_101
_REFERENCE_SEED = 20_110_102

_ORD = {"l1": 1, "l2": 2, "linf": np.inf}


def curvature(h: float, d: int = 1, domain: RecordDomain = UNIT_BALL) -> float:
    """``c = R_2^2 / (2 h)``: the largest eigenvalue of one record's Hessian ``l_h''(z) x x'``
    (``l_h'' <= 1/(2h)``, ``||x||_2 <= R_2`` over the record ``domain`` in ``R^d``);
    ``1 / (2 h)`` for the unit ball (CMS 2011's ``c``), Awan & Slavković's ``lambda``."""
    if domain == UNIT_BALL:
        return 1.0 / (2.0 * h)
    return domain.squared_l2_reach(d) / (2.0 * h)


def lipschitz(d: int, domain: RecordDomain = UNIT_BALL) -> float:
    """``L = R_2 = sup ||x||_2`` over the record ``domain`` (:data:`LIPSCHITZ` = 1 for the unit ball)."""
    return LIPSCHITZ if domain == UNIT_BALL else domain.reach("l2", d)


def covariate_radius(norm: str, d: int, domain: RecordDomain = UNIT_BALL) -> float:
    """``R_K = sup{||x||_K : x in the domain}``: unit ℓ2 ball 1 (ℓ2, ℓ∞), ``sqrt(d)`` (ℓ1)."""
    if norm not in ("l1", "l2", "linf"):
        raise KeyError(norm)
    return domain.reach(norm, d)


def gradient_sensitivity(norm: str, d: int, domain: RecordDomain = UNIT_BALL) -> float:
    """``Delta_K = 2 R_K``: unit ball 2 (ℓ2, ℓ∞), ``2 sqrt(d)`` (ℓ1); attained (module docstring)."""
    return 2.0 * covariate_radius(norm, d, domain)


class SVMData(NamedTuple):
    """``X`` (n, d) C-contiguous float64 with rows in the declared ball ``{||x||_data_norm <=
    radius}`` (default the unit ℓ2 ball); ``y`` (n,) float64 in ``{-1, +1}``; ``h`` the Huber
    smoothing (part of the loss, public)."""

    X: np.ndarray
    y: np.ndarray
    h: float
    radius: float = 1.0
    data_norm: str = "l2"

    @property
    def domain(self) -> RecordDomain:
        """The declared record domain (public)."""
        return RecordDomain(self.data_norm, self.radius)

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def d(self) -> int:
        return int(self.X.shape[1])


def check_smoothing(h) -> float:
    """``h`` as a float; TypeError/ValueError naming ``h`` unless a finite number in (0, 1)."""
    if isinstance(h, bool) or not isinstance(h, Real):
        raise TypeError(f"h must be a real number in (0, 1), got {type(h).__name__}")
    if not 0.0 < h < 1.0:
        raise ValueError(f"h must lie in the open interval (0, 1) (the Huber smoothing), got {h!r}")
    return float(h)


def svm_data(X, y, h: float = 0.5, *, radius=1.0, data_norm="l2") -> SVMData:
    """Validate a user's data: ``X`` (n, d) with rows in the declared ball
    ``{||x||_data_norm <= radius}`` (default: ℓ2 norm at most 1), ``y`` (n,) in
    ``{-1, +1}``, ``h`` in (0, 1).  Raises ValueError naming the field."""
    domain = record_domain(data_norm, radius)
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"X must be a non-empty 2-D array (n, d), got shape {X.shape}")
    X = np.ascontiguousarray(X, dtype=np.float64)
    y = np.ascontiguousarray(np.asarray(y, dtype=np.float64))
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have shape ({X.shape[0]},), got {y.shape}")
    if domain != UNIT_BALL:
        domain.require(X)
    return check_svm_data(SVMData(X, y, check_smoothing(h), domain.radius, domain.data_norm))


def check_svm_data(data) -> SVMData:
    """Validate :class:`SVMData`: shapes, rows of ``X`` in the declared record domain (unit ℓ2
    ball: squared norms at most ``1 + 1e-12``, the rounding of a row rescaled to norm 1; see
    :meth:`~kngflow.problems.domains.RecordDomain.contains`), ``y`` in {-1, +1}."""
    if not isinstance(data, SVMData):
        raise TypeError(f"data must be a kngflow.models.svm.problem.SVMData, got {type(data).__name__}")
    X, y = data.X, data.y
    if not (isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype == np.float64 and X.flags.c_contiguous):
        raise ValueError("data.X must be a C-contiguous 2-D float64 array")
    if X.shape[0] == 0:
        raise ValueError("data must hold at least one record")
    if not (isinstance(y, np.ndarray) and y.shape == (X.shape[0],) and y.dtype == np.float64):
        raise ValueError(f"data.y must be a float64 array of length n={X.shape[0]}")
    domain = data.domain
    if domain == UNIT_BALL:
        if not _rows_in_ball(X):  # NaN fails too
            raise ValueError("data.X must have rows of l2 norm at most 1 (rescale the covariates by a public bound)")
    else:
        try:
            domain = record_domain(domain.data_norm, domain.radius)
        except ValueError as exc:
            raise ValueError(f"data.{exc}") from None
        domain.require(X, "data.X")
    if not np.all((y == 1.0) | (y == -1.0)):
        raise ValueError("data.y must hold only -1 and +1")
    check_smoothing(data.h)
    return data


@jit
def _rows_in_ball(X):
    n, d = X.shape
    for i in range(n):
        s = 0.0
        for j in range(d):
            s += X[i, j] * X[i, j]
        if not s <= 1.0 + 1e-12:
            return False
    return True


# ------------------------------------------------------------------ the loss and its derivatives


@jit
def huber_loss(z, h):
    """``l_h(z)`` (scalar)."""
    if z > 1.0 + h:
        return 0.0
    if z < 1.0 - h:
        return 1.0 - z
    t = 1.0 + h - z
    return t * t / (4.0 * h)


@jit
def huber_derivative(z, h):
    """``(l_h'(z), l_h''(z))`` (scalar; ``l_h''`` taken as 1/(2h) on the closed band ``|1 - z| <= h``)."""
    if z > 1.0 + h:
        return 0.0, 0.0
    if z < 1.0 - h:
        return -1.0, 0.0
    return -(1.0 + h - z) / (2.0 * h), 1.0 / (2.0 * h)


@jit
def huber_loss_sum(theta, args):
    """``sum_i l_h(y_i x_i'theta) + ridge/2 ||theta||^2``; ``args = (X, y, h, ridge)``, ``O(n d)``."""
    X, y, h, ridge = args
    n, d = X.shape
    s = 0.0
    for i in range(n):
        t = 0.0
        for j in range(d):
            t += X[i, j] * theta[j]
        s += huber_loss(y[i] * t, h)
    q = 0.0
    for j in range(d):
        q += theta[j] * theta[j]
    return s + 0.5 * ridge * q


@jit
def huber_gradient(theta, args, g):
    """``g = sum_i l_h'(y_i x_i'theta) y_i x_i + ridge theta``; ``args = (X, y, h, ridge)``, ``O(n d)``."""
    X, y, h, ridge = args
    n, d = X.shape
    for j in range(d):
        g[j] = ridge * theta[j]
    for i in range(n):
        t = 0.0
        for j in range(d):
            t += X[i, j] * theta[j]
        w = huber_derivative(y[i] * t, h)[0] * y[i]
        if w != 0.0:
            for j in range(d):
                g[j] += w * X[i, j]


@jit
def huber_gradient_dd(hi, lo, X, y, h, gh, gl):
    """``g = sum_i l_h'(y_i x_i'w) y_i x_i`` at ``w = hi + lo`` in double-double into ``gh + gl``
    (no ridge); returns a bound on ``max_j |g_computed_j - g_exact_j|``.

    Per record: ``t = x_i'w`` from exact products, within ``δt = 2 u sum_j |x_ij lo_j| +
    8 (m + 2) u^2 sum_j |x_ij| (|hi_j| + |lo_j|)`` (as the logistic gradient's,
    :func:`~kngflow.models.logistic.problem.logistic_gradient_dd`); ``z = y_i t`` exactly
    (``y_i = ±1``).  ``l_h'`` is continuous and ``1/(2h)``-Lipschitz, so the branch taken on
    the computed ``z`` (0, -1, or the band's ``-(1 + h - z) / (2h)``) errs by at most
    ``δt / (2h)`` whichever it is.  In the band ``1 + h`` is formed exactly (two_sum), ``z``
    is subtracted in double-double (within ``16 u^2``: every magnitude there is below 4) and
    the quotient by ``2h`` errs by ``8 u^2`` relative (``|l_h'| <= 1``, below 2 computed), so
    ``|Δl'| <= δt / (2h) + 8 u^2 / h + 16 u^2``.  The products and the running sums are
    accounted as in the logistic gradient.
    """
    n, m = X.shape
    err = np.zeros(m)
    for j in range(m):
        gh[j] = 0.0
        gl[j] = 0.0
    oh, ol = two_sum(1.0, h)
    two_h = 2.0 * h
    for i in range(n):
        th, tl = 0.0, 0.0
        small = 0.0
        size = 0.0
        for j in range(m):
            p, e = two_prod(X[i, j], hi[j])
            th, tl = dd_add(th, tl, p)
            th, tl = dd_add(th, tl, e)
            q = X[i, j] * lo[j]
            th, tl = dd_add(th, tl, q)
            small += abs(q)
            size += abs(X[i, j]) * (abs(hi[j]) + abs(lo[j]))
        dt = 2.0 * UNIT * small + 8.0 * (m + 2) * UNIT * UNIT * size
        dw = dt / two_h + 8.0 * UNIT * UNIT / h + 16.0 * UNIT * UNIT
        # a = 1 + h - z in double-double (z = y_i t); the branch is read off its sign and a - 2h's
        ah, al = dd_add(oh, ol, -y[i] * th)
        ah, al = dd_add(ah, al, -y[i] * tl)
        if ah < 0.0:  # z > 1 + h, l_h' = 0: nothing to add, but a wrong branch errs by dw
            for j in range(m):
                err[j] += abs(X[i, j]) * dw
            continue
        bh, bl = dd_add(ah, al, -two_h)
        if bh > 0.0:  # z < 1 - h
            wh, wl = -1.0, 0.0
        else:
            wh, wl = dd_div(-ah, -al, two_h, 0.0)
        wh, wl = y[i] * wh, y[i] * wl
        for j in range(m):
            p, e = two_prod(wh, X[i, j])
            r = wl * X[i, j]
            a, b = dd_add(gh[j], gl[j], p)
            a, b = dd_add(a, b, e + r)
            gh[j] = a
            gl[j] = b
            err[j] += abs(X[i, j]) * dw + 2.0 * UNIT * abs(r) + 2.0 * UNIT * UNIT * (2.0 * abs(a) + abs(p))
    out = 0.0
    for j in range(m):
        out = max(out, err[j])
    return out


@jit
def huber_hessian(theta, args, H):
    """``H = sum_i l_h''(y_i x_i'theta) x_i x_i' + ridge I`` (the Jacobian of :func:`huber_gradient`
    off the kinks ``y_i x_i'theta = 1 +- h``); ``args = (X, y, h, ridge)``, ``O(n d^2)``."""
    X, y, h, ridge = args
    n, d = X.shape
    for a in range(d):
        for b in range(d):
            H[a, b] = 0.0
    for i in range(n):
        t = 0.0
        for j in range(d):
            t += X[i, j] * theta[j]
        c = huber_derivative(y[i] * t, h)[1]
        if c != 0.0:
            for a in range(d):
                ca = c * X[i, a]
                for b in range(a + 1):
                    H[a, b] += ca * X[i, b]
    for a in range(d):
        H[a, a] += ridge
        for b in range(a):
            H[b, a] = H[a, b]


@jit
def hinge_gradient(theta, args, g):
    """The hinge's subgradient ``g = -sum_i 1{y_i x_i'theta < 1} y_i x_i + ridge theta``;
    ``args = (X, y, ridge)``, ``O(n d)`` (piecewise constant in ``theta`` but for the ridge)."""
    X, y, ridge = args
    n, d = X.shape
    for j in range(d):
        g[j] = ridge * theta[j]
    for i in range(n):
        t = 0.0
        for j in range(d):
            t += X[i, j] * theta[j]
        if y[i] * t < 1.0:
            for j in range(d):
                g[j] -= y[i] * X[i, j]


def regularised_minimiser(X, y, h, ridge, V=None, *, tol_abs=0.0, max_iter=200):
    """``argmin sum_i l_h(y_i x_i'w) + ridge/2 ||w||^2 + V'w`` (``ridge > 0``) by Newton's
    method with backtracking from 0: ``(w, iterations, converged)``.

    The objective is ``ridge``-strongly convex with a Lipschitz gradient; its Hessian is
    piecewise constant (it jumps where a margin crosses ``1 +- h``), so this is a semismooth
    Newton method: the full step solves the piecewise-quadratic model exactly and is taken
    whenever it decreases the objective (Armijo), else halved.  Converged when
    ``||grad||_2 <= tol_abs`` or when the Newton decrement is below the objective's
    rounding (``1e-15 (|F| + 1)``); by strong convexity the iterate is then within
    ``||grad||_2 / ridge`` of the exact minimiser.
    """
    n, d = X.shape
    V = np.zeros(d) if V is None else np.asarray(V, dtype=np.float64)
    args = (X, y, float(h), float(ridge))
    w = np.zeros(d)
    g = np.empty(d)
    H = np.empty((d, d))

    def objective(t):
        return huber_loss_sum(t, args) + float(V @ t)

    f = objective(w)
    for it in range(max_iter + 1):
        huber_gradient(w, args, g)
        grad = g + V
        gn = float(np.linalg.norm(grad))
        if gn <= tol_abs:
            return w, it, True
        if it == max_iter:
            break
        huber_hessian(w, args, H)
        step = np.linalg.solve(H, grad)
        dec = float(grad @ step)
        if 0.5 * dec <= 1e-15 * (abs(f) + 1.0):
            return w, it, True
        t = 1.0
        while True:
            new = w - t * step
            fn = objective(new)
            if fn <= f - 1e-4 * t * dec or (fn <= f and t < 1.0):
                break
            if abs(fn - f) <= 1e-14 * (abs(f) + 1.0):  # at rounding level of F: judge by the gradient
                gg = np.empty(d)
                huber_gradient(new, args, gg)
                if np.linalg.norm(gg + V) < gn:
                    break
            t /= 2.0
            if t < 1e-12:
                return w, it, False
        if np.array_equal(new, w):
            return w, it, False
        w, f = new, fn
    return w, max_iter, False


# ------------------------------------------------------------------ the synthetic law


def unit_ball(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    """``n`` points uniform in the unit ℓ2 ball of ``R^d``: a uniform direction times ``U^{1/d}``."""
    X = rng.standard_normal((n, d))
    norms = np.sqrt(np.einsum("ij,ij->i", X, X))
    radius = rng.random(n) ** (1.0 / d)
    X *= (radius / np.maximum(norms, 1e-300))[:, None]
    return X


def _labels(rng: np.random.Generator, X: np.ndarray, u: np.ndarray, flip: float) -> np.ndarray:
    y = np.where(X @ u >= 0.0, 1.0, -1.0)
    y[rng.random(X.shape[0]) < flip] *= -1.0
    return y


@functools.lru_cache(maxsize=16)
def _sample(d: int, u: tuple, flip: float, size: int, seed: int, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """A fixed sample of the law, covariates scaled by ``scale`` (read-only arrays, cached per process)."""
    rng = np.random.default_rng(seed)
    X = unit_ball(rng, size, d)
    if scale != 1.0:
        X *= scale
    y = _labels(rng, X, np.array(u), flip)
    X.setflags(write=False)
    y.setflags(write=False)
    return X, y


@functools.lru_cache(maxsize=16)
def _reference_minimiser(d: int, u: tuple, flip: float, h: float, reg: float, scale: float = 1.0) -> np.ndarray:
    X, y = _sample(d, u, flip, REFERENCE, _REFERENCE_SEED, scale)
    w, _, ok = regularised_minimiser(X, y, h, REFERENCE * reg, tol_abs=1e-9 * REFERENCE)
    if not ok:  # not observed: the objective is strongly convex and piecewise quadratic
        raise RuntimeError("the reference minimiser did not converge")
    w.setflags(write=False)
    return w


def _default_direction(d: int) -> tuple:
    u = np.array([(-1.0) ** j for j in range(d)]) / math.sqrt(d)
    return tuple(float(t) for t in u)


METRICS = ("misclassification", "excess_risk")


class ClassificationErrors:
    """The SVM's two error measures on samples a problem names: :meth:`held_out` (the
    misclassification rate's records) and :meth:`risk_sample` (the records of ``J``, whose
    minimiser is ``theta_star``); the problem also has ``h``, ``reg``, ``metric`` and
    ``theta_star``."""

    @property
    def loglog_slopes(self) -> bool:
        """False for the misclassification rate: bounded, with the Bayes rate (the label noise)
        as its floor, it does not decay as a power of n (no slope section in the report)."""
        return self.metric != "misclassification"

    def held_out(self) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def risk_sample(self) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def misclassification(self, estimate) -> float:
        """Rate of ``sign(x'w) != y`` on :meth:`held_out` (``x'w = 0`` counts as an error)."""
        w = np.asarray(estimate, dtype=float)
        if not np.all(np.isfinite(w)):
            return math.nan
        X, y = self.held_out()
        return float(np.mean(y * (X @ w) <= 0.0))

    def regularised_risk(self, estimate) -> float:
        """``J(w)`` on :meth:`risk_sample`."""
        w = np.ascontiguousarray(estimate, dtype=float)
        X, y = self.risk_sample()
        m = X.shape[0]
        return huber_loss_sum(w, (X, y, self.h, m * self.reg)) / m

    def excess_risk(self, estimate) -> float:
        """``J(w) - J(theta_star)`` on :meth:`risk_sample` (>= 0 up to the minimiser's tolerance)."""
        w = np.asarray(estimate, dtype=float)
        if not np.all(np.isfinite(w)):
            return math.nan
        return self.regularised_risk(w) - self.regularised_risk(self.theta_star)

    def error(self, estimate) -> float:
        """The ``metric``: misclassification rate (held out) or excess regularised risk."""
        return self.misclassification(estimate) if self.metric == "misclassification" else self.excess_risk(estimate)

    def other_metric(self) -> str:
        """The error measure ``error`` does not return."""
        return METRICS[1] if self.metric == METRICS[0] else METRICS[0]


@dataclass(frozen=True, kw_only=True)
class SVMProblem(ClassificationErrors, Problem):
    """Simulated linear classification with label noise, learned by the Huber-hinge SVM.

    ``x ~ U(unit ball of R^d)``, ``y = sign(x'u)`` flipped with probability ``flip``
    (module docstring).  ``theta_star`` is the population minimiser of ``J`` (on a
    :data:`REFERENCE`-record sample of the law from a fixed seed); the error is the
    misclassification rate on a :data:`HELD_OUT`-record held-out sample, or the excess
    regularised risk (``metric``).

    Parameters
    ----------
    d : int, dimension (default 2).
    direction : list of d floats, the Bayes direction ``u`` (normalised; default alternating
        signs ``(1, -1, 1, ...) / sqrt(d)``).
    flip : float in [0, 1/2), the label-noise rate (default 0.1).
    h : float in (0, 1), the Huber smoothing (default 0.5; CMS 2011's experiments).
    reg : float > 0, the ridge ``Λ`` of ``J`` defining ``theta_star`` and the excess risk
        (default 0.01, the ERM mechanisms' default ``reg``; set theirs equal).
    metric : {"misclassification", "excess_risk"}, what ``error`` returns.
    data_norm : {"l2", "l1", "linf"}, the norm ``D`` of the declared record domain (default
        "l2": with ``radius = 1`` the unit ball); every mechanism's constants follow it.
    radius : float > 0, the radius ``r`` of the record domain (default 1).  Under a domain
        other than the unit ball the law's covariates are scaled into the domain (module
        docstring).
    """

    d: int = 2
    direction: tuple | None = None
    flip: float = 0.1
    h: float = 0.5
    reg: float = 0.01
    metric: str = "misclassification"
    data_norm: str = "l2"
    radius: float = 1.0

    #: ``kngflow audit`` builds the problem with d = 2 (exact audits on a grid)
    audit_defaults = {"d": 2}

    def __post_init__(self):
        d = check_dimension(self.d)
        object.__setattr__(self, "d", d)
        if self.direction is None:
            u = _default_direction(d)
        else:
            if not isinstance(self.direction, (list, tuple)) or len(self.direction) != d or not all(
                    isinstance(t, Real) and not isinstance(t, bool) and math.isfinite(t) for t in self.direction):
                raise ValueError(f"direction must be a list of {d} finite numbers, got {self.direction!r}")
            v = np.array(self.direction, dtype=float)
            norm = float(np.linalg.norm(v))
            if norm == 0.0:
                raise ValueError("direction must not be the zero vector")
            u = tuple(float(t) for t in v / norm)
        object.__setattr__(self, "direction", u)
        f = self.flip
        if isinstance(f, bool) or not isinstance(f, Real) or not 0.0 <= f < 0.5:
            raise ValueError(f"flip must be a number in [0, 0.5) (the label-noise rate), got {f!r}")
        object.__setattr__(self, "flip", float(f))
        object.__setattr__(self, "h", check_smoothing(self.h))
        r = self.reg
        if isinstance(r, bool) or not isinstance(r, Real) or not (math.isfinite(r) and r > 0):
            raise ValueError(f"reg must be a finite number > 0, got {r!r}")
        object.__setattr__(self, "reg", float(r))
        if self.metric not in METRICS:
            raise ValueError(f"metric must be one of {', '.join(map(repr, METRICS))}; got {self.metric!r}")
        object.__setattr__(self, "radius", record_domain(self.data_norm, self.radius).radius)

    @property
    def domain(self) -> RecordDomain:
        """The declared record domain ``{||x||_data_norm <= radius}``."""
        return RecordDomain(self.data_norm, self.radius)

    @property
    def scale(self) -> float:
        """``r / c``, ``c = sup{||x||_D : ||x||_2 <= 1}``: the factor of the unit-ball law's
        covariates under the declared domain (1 for the unit ball)."""
        return 1.0 if self.domain == UNIT_BALL else self.radius / norm_factor("l2", self.data_norm, self.d)

    @property
    def theta_star(self) -> np.ndarray:
        """The population regularised minimiser (reference sample, fixed seed)."""
        return np.array(_reference_minimiser(self.d, self.direction, self.flip, self.h, self.reg, self.scale))

    @property
    def caveats(self) -> str:
        text = (f"theta_star is the minimiser of the regularised Huber-hinge risk (h = {self.h:g}, reg = {self.reg:g}) "
                f"on a {REFERENCE}-record sample of the law; misclassification is measured on a {HELD_OUT}-record "
                f"held-out sample (fixed seeds); error = {self.metric}.")
        if self.domain != UNIT_BALL:
            text += (f" Covariates in the declared record domain {self.domain.describe()} (the unit-ball law scaled "
                     f"by {self.scale:.6g}); releases are DP for data in that domain.")
        return text

    def simulate(self, n: int, rng: np.random.Generator) -> SVMData:
        """One data set: ``X`` (n, d) uniform in the unit ball, ``y`` (n,) in {-1, +1}."""
        self.check_n(n)
        X = unit_ball(rng, n, self.d)
        if self.domain != UNIT_BALL:
            X *= self.scale
        y = _labels(rng, X, np.array(self.direction), self.flip)
        return SVMData(X, y, self.h, self.radius, self.data_norm)

    # ---------------------------------------------------------------- error measures
    def held_out(self) -> tuple[np.ndarray, np.ndarray]:
        """The :data:`HELD_OUT`-record held-out sample of the law (fixed seed)."""
        return _sample(self.d, self.direction, self.flip, HELD_OUT, _HELD_OUT_SEED, self.scale)

    def risk_sample(self) -> tuple[np.ndarray, np.ndarray]:
        """The :data:`REFERENCE`-record sample of the law that defines ``J_ref`` and ``theta_star``."""
        return _sample(self.d, self.direction, self.flip, REFERENCE, _REFERENCE_SEED, self.scale)

    def misclassification_exact(self, estimate) -> float:
        """``flip + (1 - 2 flip) angle(w, u) / pi``: the population rate (rotational symmetry
        of the law); 1 for ``w = 0``, which the held-out rate counts as wrong on every record."""
        w = np.asarray(estimate, dtype=float)
        nw = float(np.linalg.norm(w))
        if nw == 0.0:
            return 1.0
        cos = float(np.clip(w @ np.array(self.direction) / nw, -1.0, 1.0))
        return self.flip + (1.0 - 2.0 * self.flip) * math.acos(cos) / math.pi


    @property
    def error_label(self) -> str:
        """What ``error`` measures (the store's ``error_label``)."""
        if self.metric == "misclassification":
            return "held-out misclassification rate"
        return "excess regularised risk J(w) − J(θ*)"

    @property
    def reference_lines(self) -> list:
        """Misclassification: a data-free random direction (rate 1/2) and the Bayes rate
        ``flip`` (the label noise); excess risk: the zero estimate's ``J(0) - J(θ*)``."""
        if self.metric == "misclassification":
            return [(0.5, "random direction (data-free)"), (self.flip, "Bayes rate (label noise)")]
        return [(float(self.excess_risk(np.zeros(self.d))), "zero estimate")]

    def report_sections(self, ds) -> list[str]:
        """The other error measure of the store's estimates, as a Markdown table: the mean over
        finished replicates of the excess regularised risk (or of the misclassification
        rate, when ``metric = "excess_risk"``) per mechanism, ``n`` and ε."""
        other = self.other_metric()
        measure = self.excess_risk if other == "excess_risk" else self.misclassification
        est = np.asarray(ds["estimate"].values, dtype=float)  # (mechanism, n, epsilon, replicate, coef)
        done = np.asarray(ds["done"].values) == 1
        mechs = [str(m) for m in ds["mechanism"].values]
        ns = [int(v) for v in ds["n"].values]
        epss = [float(v) for v in ds["epsilon"].values]
        title = "excess regularised risk" if other == "excess_risk" else "held-out misclassification rate"
        lines = [f"## The other error measure: {title}", "",
                 f"Mean over finished replicates of the {title} "
                 f"(reg = {self.reg:g}, h = {self.h:g}; the store's `error` is the {self.metric.replace('_', ' ')}).",
                 "", "| mechanism | n | " + " | ".join(f"ε = {e:g}" for e in epss) + " |",
                 "|---|---|" + "---|" * len(epss)]
        for a, m in enumerate(mechs):
            for b, n in enumerate(ns):
                cells = []
                for c in range(len(epss)):
                    vals = [measure(est[a, b, c, r]) for r in range(est.shape[3]) if done[a, b, c, r]]
                    vals = [v for v in vals if math.isfinite(v)]
                    cells.append(f"{np.mean(vals):.4g}" if vals else "–")
                lines.append(f"| {m} | {n} | " + " | ".join(cells) + " |")
        return ["\n".join(lines) + "\n"]

    # ---------------------------------------------------------------- audits
    def audit_records(self) -> tuple[np.ndarray, np.ndarray]:
        """Records ``(x_1, ..., x_d, y)`` for privacy audits: ``(boundary, fill)``, ``y = ±1``
        with every covariate row of the domain (:func:`~kngflow.problems.domains.domain_covariates`).

        Unit ℓ2 ball (default): ``boundary`` ``x`` on the unit sphere (``±e_j``,
        ``(±e_i ± e_j)/sqrt(2)`` — for ``d = 2`` the 8 directions at multiples of 45° — and,
        for ``d >= 3``, the sign vectors ``s / sqrt(d)``), where the sensitivities are
        attained; ``fill`` ``x`` in ``{0, ±e_j / 2}``.  Other balls: their sphere's points
        attaining ``R_K`` (the corners of a box, the vertices of an ℓ1 ball), scaled by ``r``.
        """
        xb, xf = domain_covariates(self.domain, self.d)
        boundary = np.array([[*x, y] for x in xb for y in (-1.0, 1.0)])
        fill = np.array([[*x, y] for x in xf for y in (-1.0, 1.0)])
        return boundary, fill

    def audit_data(self, records: np.ndarray) -> SVMData:
        """Mechanism input for a data set given as records ``(k, d + 1)``."""
        records = np.asarray(records, dtype=float)
        return svm_data(records[:, :-1], records[:, -1], self.h, radius=self.radius, data_norm=self.data_norm)

    def gradient(self, data: SVMData, theta) -> np.ndarray:
        """``sum_i l_h'(y_i x_i'theta) y_i x_i`` (no ridge: it cancels between adjacent data sets)."""
        g = np.empty(data.d)
        huber_gradient(np.ascontiguousarray(theta, dtype=float), (data.X, data.y, data.h, 0.0), g)
        return g

    def data_bytes(self, n: int) -> int:
        """``X`` and ``y`` of one data set (kept whole: no sufficient statistics)."""
        return int(n) * (self.d + 1) * 8

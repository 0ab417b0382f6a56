"""Declared record domains: a public norm ball of covariates, the constants it implies and
the records privacy audits draw from it.

A model whose records carry covariates ``x`` in ``R^d`` declares the public ball

    B_D(r) = {x : ||x||_D <= r},   D in {ℓ1, ℓ2, ℓ∞} (``data_norm``), r > 0 (``radius``),

(``D = ℓ∞``, ``r = 1`` is the box ``[-1, 1]^d``).  Every sensitivity of such a model is a
supremum of some norm of ``x`` over the ball, so it follows from one number per norm:

    R_K = sup{||x||_K : ||x||_D <= r} = r c_K,   c_K = sup{||u||_K : ||u||_D <= 1}

(:func:`norm_factor`, :func:`RecordDomain.reach`).  By ``||u||_∞ <= ||u||_2 <= ||u||_1 <=
sqrt(d) ||u||_2 <= d ||u||_∞``, each attained (at ``e_1`` for the left inequalities, at
``(1, ..., 1)`` for the right ones): ``c_K = 1`` when ``K`` is at most as strong as ``D``
(ℓ1 ≥ ℓ2 ≥ ℓ∞), ``c_2 = c_1 = sqrt(d)`` for ``(D, K) = (ℓ∞, ℓ2), (ℓ2, ℓ1)`` and ``c_1 = d``
for ``(ℓ∞, ℓ1)``.  Curvature bounds need ``R_2^2`` (:meth:`RecordDomain.squared_l2_reach`),
computed as ``r^2 d`` or ``r^2`` so that the box's ``m`` stays exact in floating point.
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np

from kngflow._jit import jit

__all__ = ["NORMS", "RecordDomain", "check_data_norm", "check_radius", "record_domain", "norm_factor", "row_norms",
           "domain_covariates", "response_records", "ROUNDING_SLACK"]

NORMS = ("l1", "l2", "linf")
#: relative slack of the ℓ1 and ℓ2 membership checks: the rounding of a row rescaled onto
#: the sphere (``||x|| <= r (1 + 1e-12)``, so every constant holds within a factor ``1 + 1e-12``)
ROUNDING_SLACK = 1e-12


def row_norms(x: np.ndarray, norm: str) -> np.ndarray:
    """Row norms of ``x`` (..., d)."""
    if norm == "l1":
        return np.abs(x).sum(axis=-1)
    if norm == "l2":
        return np.sqrt((x * x).sum(axis=-1))
    return np.abs(x).max(axis=-1)


def norm_factor(data_norm: str, norm: str, d: int) -> float:
    """``c = sup{||u||_norm : ||u||_data_norm <= 1}`` in ``R^d`` (module docstring)."""
    order = {"l1": 0, "l2": 1, "linf": 2}
    i, j = order[data_norm], order[norm]
    if i <= j:  # ||u||_inf <= ||u||_2 <= ||u||_1
        return 1.0
    if (i, j) == (2, 0):
        return float(d)
    return math.sqrt(d)  # (linf, l2) and (l2, l1)


def check_data_norm(value, name: str = "data_norm") -> str:
    """``value`` if one of :data:`NORMS`; ValueError naming ``name`` and the allowed values."""
    if not isinstance(value, str) or value not in NORMS:
        raise ValueError(f"{name} must be one of {list(NORMS)}, got {value!r}")
    return value


def check_radius(value, name: str = "radius") -> float:
    """``value`` as a float; ValueError naming ``name`` unless a finite number > 0."""
    from numbers import Real

    if isinstance(value, bool) or not isinstance(value, Real) or not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


@jit
def _rows_within(X, p, limit):
    """Whether every row has ``sum |x_j|`` (``p = 1``) or ``sum x_j^2`` (``p = 2``) at most
    ``limit``; NaN fails.  No ``n x d`` temporary."""
    n, d = X.shape
    for i in range(n):
        s = 0.0
        for j in range(d):
            s += abs(X[i, j]) if p == 1 else X[i, j] * X[i, j]
        if not s <= limit:
            return False
    return True


class RecordDomain(NamedTuple):
    """The public ball ``{x in R^d : ||x||_data_norm <= radius}`` of a model's covariates."""

    data_norm: str = "linf"
    radius: float = 1.0

    def reach(self, norm: str, d: int) -> float:
        """``R_K = sup{||x||_norm : x in the ball} = radius c_K`` (module docstring)."""
        return self.radius * norm_factor(self.data_norm, norm, d)

    def squared_l2_reach(self, d: int) -> float:
        """``R_2^2 = sup ||x||_2^2``: ``r^2 d`` (ℓ∞ ball) or ``r^2`` (ℓ1, ℓ2 balls), exact for the box."""
        return self.radius * self.radius * (d if self.data_norm == "linf" else 1)

    def describe(self) -> str:
        """``"||x||_l2 <= 1"`` (for messages and caveats)."""
        return f"||x||_{self.data_norm} <= {self.radius:g}"

    def contains(self, X: np.ndarray) -> bool:
        """Whether every row of ``X`` (n, d) C-contiguous float64 lies in the ball (NaN fails).

        ℓ∞: ``-r <= x_ij <= r`` exactly; ℓ1, ℓ2: ``||x_i|| <= r (1 + ROUNDING_SLACK)`` (ℓ2
        compared squared: ``sum x^2 <= r^2 (1 + 1e-12)``), allowing the rounding of rows
        rescaled onto the sphere.  ``min``/``max`` and the jitted loop copy nothing."""
        r = self.radius
        if self.data_norm == "linf":
            return bool(X.min() >= -r and X.max() <= r)
        if self.data_norm == "l2":
            return bool(_rows_within(X, 2, r * r * (1.0 + ROUNDING_SLACK)))
        return bool(_rows_within(X, 1, r * (1.0 + ROUNDING_SLACK)))

    def require(self, X: np.ndarray, name: str = "X") -> None:
        """A one-line ValueError naming ``name`` unless every row of ``X`` lies in the ball."""
        if not self.contains(X):
            raise ValueError(f"{name}: {self.violation(X)}")

    def violation(self, X: np.ndarray) -> str:
        """A one-line message for data outside the ball (the largest row norm, or NaN/inf)."""
        if not np.all(np.isfinite(X)):
            return "must be finite (no NaN or inf)"
        worst = float(row_norms(X, self.data_norm).max())
        return (f"every row must lie in the declared record domain {self.describe()} "
                f"(data_norm={self.data_norm!r}, radius={self.radius!r}); largest ||x_i||_{self.data_norm} is "
                f"{worst:.6g} (rescale the covariates with public bounds)")


def record_domain(data_norm="linf", radius=1.0) -> RecordDomain:
    """A validated :class:`RecordDomain`; ValueError naming ``data_norm`` or ``radius``."""
    return RecordDomain(check_data_norm(data_norm), check_radius(radius))


def domain_covariates(domain: RecordDomain, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Covariate rows ``(boundary, fill)`` of the ball for privacy audits (labels are the model's).

    Where one record moves a model's statistic farthest the covariate sits on the sphere at
    a point attaining some ``R_K``: ``±e_j`` attain ``R_∞`` (and every ``R_K`` of the ℓ1
    ball), sign vectors ``s / ||s||_D`` attain ``R_1`` and ``R_2`` of the ℓ∞ and ℓ2 balls.

    * ℓ∞ (the box): ``boundary`` the ``2^d`` corners ``r s``; ``fill`` the grid
      ``r {-1, 0, 1}^d`` (``d <= 4``; beyond, the corners and 0).
    * ℓ2: ``boundary`` ``±r e_j``, ``r (±e_i ± e_j) / sqrt(2)`` and ``r s / ||s||_2`` for
      the sign vectors ``s`` (over the first ``min(d, 6)`` coordinates, +1 beyond),
      duplicates dropped in order; ``fill`` the centre and ``±r e_j / 2``.  For ``d = 2``
      these are the 8 directions at multiples of 45° (16 records with two labels, 10 in
      ``fill``); ``d = 3``: 26 points (52 records, 14 in ``fill``).
    * ℓ1: ``boundary`` ``±r e_j`` (the vertices) and ``r s / d`` (face centres, ``d <= 6``
      as above); ``fill`` the centre and ``±r e_j / 2``.
    """
    r = domain.radius
    eye = np.eye(d)
    if domain.data_norm == "linf":
        corners = np.array(list(itertools.product((-1.0, 1.0), repeat=d)))
        grid = np.array(list(itertools.product((-1.0, 0.0, 1.0), repeat=d))) if d <= 4 else np.vstack(
            [corners, np.zeros((1, d))])
        return r * corners, r * grid
    k = min(d, 6)
    signs = np.array(list(itertools.product((-1.0, 1.0), repeat=k)))
    signs = np.hstack([signs, np.ones((len(signs), d - k))])
    xs = [*eye, *(-eye)]
    if domain.data_norm == "l2":
        for i in range(d):
            for j in range(i + 1, d):
                for si in (-1.0, 1.0):
                    for sj in (-1.0, 1.0):
                        xs.append((si * eye[i] + sj * eye[j]) / math.sqrt(2.0))
    xs += list(signs / float(row_norms(signs[0], domain.data_norm)))
    pts = np.array(xs)
    _, first = np.unique(np.round(pts, 12), axis=0, return_index=True)
    boundary = r * pts[np.sort(first)]
    fill = r * np.vstack([np.zeros((1, d)), 0.5 * eye, -0.5 * eye])
    return boundary, fill


def response_records(d: int, y_max: float, *, scale_from_data: bool = False,
                     domain: RecordDomain | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Records ``(x, y)`` ``(boundary, fill)`` of a regression for privacy audits: the
    covariates of :func:`domain_covariates` (default: the box ``[-1, 1]^d``), ``y = ±y_max``
    on the boundary and ``y`` in ``{-y_max, 0, y_max}`` in the fill.  With
    ``scale_from_data`` (a protocol that scales by ``max|y|`` of the data, so ``y`` has no
    public bound) boundary records also take ``y = ±y_max/10`` and fill records ``y`` in
    ``{-y_max/10, 0, y_max/10}``, so that one record can change the scale tenfold."""
    corners, grid = domain_covariates(RecordDomain("linf", 1.0) if domain is None else domain, d)
    ys_b, ys_f = [-y_max, y_max], [-y_max, 0.0, y_max]
    if scale_from_data:
        ys_b += [-y_max / 10, y_max / 10]
        ys_f = [-y_max / 10, 0.0, y_max / 10]
    boundary = np.array([[*x, y] for x in corners for y in ys_b])
    fill = np.array([[*x, y] for x in grid for y in ys_f])
    return boundary, fill

"""Multivariate mean of bounded data (KNG paper §4.1): data, loss, sensitivities.

Model
-----
Records ``x_1, ..., x_n`` in ``R^d`` lie in a public ball ``{||x||_D <= r}`` of a data
norm ``D`` in {ℓ1, ℓ2, ℓ∞}; the mean minimises the sum of squares

    l_n(theta) = sum_i ||x_i - theta||_2^2,   grad l_n(theta) = -2 n (xbar - theta).

The representation is the sufficient statistic ``xbar`` (with ``n``): no copy of the data.

Sensitivities (derived here)
----------------------------
Neighbouring data sets differ in one record ``x_1 -> x_1'``; both lie in the ball, so
``||x_1 - x_1'||_D <= 2 r``.  Write ``c_K = sup{||u||_K : ||u||_D <= 1}`` for the factor
between the data norm and a norm ``K`` (``c = 1`` when ``K = D``; ``D = ℓ∞``: ``c_1 = d``,
``c_2 = sqrt(d)``; ``D = ℓ2``: ``c_1 = sqrt(d)``, ``c_∞ = 1``; ``D = ℓ1``: ``c_K = 1``).

* Gradient, in ``K``: ``||grad l_n(D) - grad l_n(D')||_K = 2 ||x_1 - x_1'||_K <= 4 r c_K``.
  KNG's density ``exp(-eps/(2 * 4 r c_K) * 2n ||xbar - theta||_K)`` is the K-norm
  mechanism ``xbar + W``.  Its normalising constant over ``Theta = R^d`` does not depend on
  the data (a location family, Remark 4.1), so the factor 2 is not needed: the ratio of
  densities is ``exp(a (||xbar' - theta||_K - ||xbar - theta||_K)) <= exp(a ||xbar - xbar'||_K)``
  with ``||xbar - xbar'||_K <= 2 r c_K / n``, and ``a = eps n / (2 r c_K)`` gives ``eps``.
  (The paper's text says "sensitivity ≤ 2r" but its density ``exp(-n/(4r) ||xbar - theta||)``
  at ``eps = 1`` is the one with ``Delta = 4r`` and the factor 2.)
* Loss (exponential mechanism on ``Theta`` = the data ball): ``l_n(D) - l_n(D') =
  ||x_1 - theta||_2^2 - ||x_1' - theta||_2^2`` with both terms in ``[0, (2 r c_2)^2]``, so the
  sensitivity is ``(2 r c_2)^2``.  The density ``exp(-eps/(2 Delta) n ||theta - xbar||_2^2)``
  on the ball is ``N(xbar, Delta/(eps n) I)`` truncated to the ball.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from kngflow.problems.base import SimulatedProblem, check_dimension, check_finite_positive, check_vector
# the record-domain helpers are shared with every model that declares a ball (re-exported here)
from kngflow.problems.domains import NORMS, norm_factor, row_norms

__all__ = [
    "MeanData",
    "MeanProblem",
    "NORMS",
    "mean_data",
    "norm_factor",
    "gradient_sensitivity",
    "loss_sensitivity",
    "radial_clip",
    "row_norms",
]

#: rows simulated at a time (bounds the memory of one data set at ``CHUNK * d`` floats)
CHUNK = 1 << 18


def gradient_sensitivity(radius: float, data_norm: str, norm: str, d: int) -> float:
    """``4 r c_K``: ℓ_K sensitivity of ``grad l_n`` (module docstring)."""
    return 4.0 * radius * norm_factor(data_norm, norm, d)


def loss_sensitivity(radius: float, data_norm: str, d: int) -> float:
    """``(2 r c_2)^2``: sensitivity of ``l_n`` on the data ball (module docstring)."""
    return (2.0 * radius * norm_factor(data_norm, "l2", d)) ** 2


def _check_norm(name: str, value) -> str:
    if value not in NORMS:
        raise ValueError(f"{name} must be one of {list(NORMS)}, got {value!r}")
    return value


class MeanData(NamedTuple):
    """The sufficient statistic of a bounded data set: ``xbar`` and ``n``, with the public ball."""

    xbar: np.ndarray
    n: int
    radius: float
    data_norm: str

    @property
    def d(self) -> int:
        return int(self.xbar.shape[0])


def mean_data(x, radius, data_norm="linf") -> MeanData:
    """Validate a user's records ``x`` (n, d) against the public ball and summarise them.

    Raises ValueError naming ``x`` (empty, not 2-D, NaN/inf, a record outside the ball of
    radius ``radius`` in ``data_norm``), ``radius`` or ``data_norm``.
    """
    radius = check_finite_positive("radius", radius)
    data_norm = _check_norm("data_norm", data_norm)
    x = np.asarray(x)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"x must be a non-empty 2-D array (n, d), got shape {x.shape}")
    if not np.issubdtype(x.dtype, np.number) or np.issubdtype(x.dtype, np.complexfloating):
        raise TypeError(f"x must hold real numbers, got dtype {x.dtype}")
    x = x.astype(np.float64, copy=False)
    if not np.isfinite(x).all():
        raise ValueError("x must be finite (no NaN or inf)")
    worst = float(row_norms(x, data_norm).max())
    if worst > radius:
        raise ValueError(f"x: every record must satisfy ||x_i||_{data_norm} <= radius = {radius}; largest is {worst}")
    return MeanData(x.mean(axis=0), int(x.shape[0]), radius, data_norm)


def radial_clip(e: np.ndarray, rho: float, norm: str) -> None:
    """Shrink each row of ``e`` in place onto ``{||e||_norm <= rho}`` along its ray (odd map)."""
    nrm = row_norms(e, norm)
    big = nrm > rho
    e[big] *= (rho / nrm[big])[:, None]


@dataclass(frozen=True, kw_only=True)
class MeanProblem(SimulatedProblem):
    """Simulated mean estimation in a public ball.

    ``x_i = theta + e_i`` with ``e_i ~ N(0, sigma^2 I_d)`` shrunk along its ray onto the
    ball ``{||e||_D <= radius - ||theta||_D}``.  The shrinking is odd (``e -> -e``
    commutes with it), so ``e_i`` stays symmetric, ``E x_i = theta`` exactly, and every
    record lies in ``{||x||_D <= radius}``.

    Parameters
    ----------
    d : int >= 1
    theta : list of d floats (default: zeros) with ``||theta||_D < radius``.
    sigma : float > 0; radius : float > 0; data_norm : {"l1", "l2", "linf"} (``D``).
    """

    d: int = 2
    theta: tuple | None = None
    sigma: float = 0.5
    radius: float = 1.0
    data_norm: str = "linf"
    name: str = field(default="mean", init=False)
    #: the non-private error falls like n^(-1/2) (a √n-consistent estimator against the truth)
    error_rate_in_n = -0.5
    audit_defaults = {"d": 2}

    def __post_init__(self):
        object.__setattr__(self, "d", check_dimension(self.d))
        object.__setattr__(self, "radius", check_finite_positive("radius", self.radius))
        _check_norm("data_norm", self.data_norm)
        object.__setattr__(self, "sigma", check_finite_positive("sigma", self.sigma))
        theta = check_vector("theta", self.theta, self.d)
        if not float(row_norms(np.array(theta), self.data_norm)) < self.radius:
            raise ValueError(f"theta must lie strictly inside the data ball: ||theta||_{self.data_norm} < radius = {self.radius}")
        object.__setattr__(self, "theta", theta)

    @property
    def theta_star(self) -> np.ndarray:
        return np.array(self.theta)

    @property
    def caveats(self) -> str:
        return f"records in the public ball ||x||_{self.data_norm} <= {self.radius}; releases are DP for data in that ball."

    def simulate(self, n: int, rng: np.random.Generator) -> MeanData:
        """The mean of ``n`` simulated records, accumulated over chunks of :data:`CHUNK` rows."""
        self.check_n(n)
        theta = self.theta_star
        rho = self.radius - float(row_norms(theta, self.data_norm))
        total = np.zeros(self.d)
        for start in range(0, n, CHUNK):
            e = rng.standard_normal((min(CHUNK, n - start), self.d))
            e *= self.sigma
            radial_clip(e, rho, self.data_norm)
            total += e.sum(axis=0)
        return MeanData(theta + total / n, int(n), self.radius, self.data_norm)

    def audit_records(self) -> tuple[np.ndarray, np.ndarray]:
        """Records for privacy audits: ``(boundary, fill)``, each row one ``x`` in ``R^d``.

        ``boundary``: points of the sphere ``||x||_D = radius`` where one changed record
        moves ``xbar`` farthest in some norm: ``±radius e_j`` and
        ``radius (±1, ..., ±1) / ||(1, ..., 1)||_D`` (the ℓ∞ ball's corners; ``d <= 6``).
        ``fill``: the boundary records and 0.
        """
        signs = np.array(list(itertools.product((-1.0, 1.0), repeat=min(self.d, 6))))
        signs = np.hstack([signs, np.ones((len(signs), self.d - signs.shape[1]))])
        corners = signs / float(row_norms(signs[0], self.data_norm))
        axes = np.vstack([np.eye(self.d), -np.eye(self.d)])
        boundary = self.radius * np.vstack([axes, corners])
        return boundary, np.vstack([boundary, np.zeros((1, self.d))])

    def audit_data(self, records: np.ndarray) -> MeanData:
        """Mechanism input for a data set given as records ``(m, d)``."""
        return mean_data(records, self.radius, self.data_norm)

    def parameter_box(self) -> tuple[np.ndarray, np.ndarray]:
        """A box holding the exponential mechanism's ``Theta`` (the data ball)."""
        return np.full(self.d, -self.radius), np.full(self.d, self.radius)

"""Geometric median in ``R^d`` (KNG paper §4.4): data, gradient, sensitivity, Weiszfeld.

Model
-----
Records ``x_1, ..., x_n`` in ``R^d``; the (Euclidean) geometric median minimises

    l_n(theta) = sum_i ||x_i - theta||_2,
    grad l_n(theta) = -sum_i u_i(theta),   u_i = (x_i - theta) / ||x_i - theta||_2,

(``u_i = 0`` where ``x_i = theta``; the gradient exists off a null set, which is all KNG
needs).  There are no sufficient statistics: the data are kept (one ``n x d`` array).

Sensitivity (derived here)
--------------------------
Changing one record changes one unit vector: ``||u - u'||_K <= 2 c_K`` with
``c_K = sup{||u||_K : ||u||_2 <= 1}`` (``c_1 = sqrt(d)``, ``c_2 = c_∞ = 1``), for every
``theta`` and with no bound on the data.  The paper states 2 (its norm is the one of the
objective, here ℓ2).  Far from the data every ``u_i`` points the same way, so KNG's
density ``exp(-eps/(2 Delta) ||sum_i u_i(theta)||_K)`` tends to ``exp(-eps n ||u||_K /
(2 Delta)) > 0`` instead of decaying: ``Theta`` is bounded, uniform base measure on
``{||theta||_1 <= B}``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from kngflow._jit import jit
from kngflow.problems.base import SimulatedProblem, check_dimension, check_finite_positive, check_vector
from kngflow.problems.rows import D_COLUMNS, N_ROWS

__all__ = [
    "GeoMedianData",
    "GeoMedianProblem",
    "geomedian_data",
    "gradient_sensitivity",
    "geomedian_gradient",
    "weiszfeld",
]


class GeoMedianData(NamedTuple):
    """The records ``X`` (n, d), C-contiguous float64."""

    X: np.ndarray

    n = N_ROWS
    d = D_COLUMNS


def geomedian_data(x) -> GeoMedianData:
    """Validate a user's records ``x`` (n, d); ValueError naming ``x`` if empty, not 2-D or not finite."""
    x = np.asarray(x)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"x must be a non-empty 2-D array (n, d), got shape {x.shape}")
    if not np.issubdtype(x.dtype, np.number) or np.issubdtype(x.dtype, np.complexfloating):
        raise TypeError(f"x must hold real numbers, got dtype {x.dtype}")
    x = np.ascontiguousarray(x, dtype=np.float64)
    if not np.isfinite(x).all():
        raise ValueError("x must be finite (no NaN or inf)")
    return GeoMedianData(x)


def gradient_sensitivity(norm: str, d: int) -> float:
    """``2 c_K``: the ℓ_K sensitivity of ``grad l_n`` (module docstring)."""
    return 2.0 * (math.sqrt(d) if norm == "l1" else 1.0)


@jit
def geomedian_gradient(theta, args, g):
    """``g = -sum_i (x_i - theta)/||x_i - theta||_2`` in ``O(n d)``; ``args = (X,)``."""
    X = args[0]
    n, d = X.shape
    for j in range(d):
        g[j] = 0.0
    for i in range(n):
        s = 0.0
        for j in range(d):
            t = X[i, j] - theta[j]
            s += t * t
        if s > 0.0:
            inv = 1.0 / math.sqrt(s)
            for j in range(d):
                g[j] -= (X[i, j] - theta[j]) * inv


@jit
def weiszfeld(X, tol, max_iter, out):
    """Geometric median of the rows of ``X`` into ``out`` (d,); returns the iterations used.

    Weiszfeld's iteration with the Vardi–Zhang (2000) step at a data point, started from
    the mean, stopped when a step moves less than ``tol`` (times ``1 + ||theta||``).
    """
    n, d = X.shape
    y = np.zeros(d)
    for i in range(n):
        for j in range(d):
            y[j] += X[i, j] / n
    num = np.empty(d)
    r = np.empty(d)
    it = 0
    for it in range(1, max_iter + 1):
        for j in range(d):
            num[j] = 0.0
            r[j] = 0.0
        den = 0.0
        eta = 0.0
        for i in range(n):
            s = 0.0
            for j in range(d):
                t = X[i, j] - y[j]
                s += t * t
            if s == 0.0:
                eta += 1.0
                continue
            w = 1.0 / math.sqrt(s)
            den += w
            for j in range(d):
                num[j] += w * X[i, j]
                r[j] += w * (X[i, j] - y[j])
        if den == 0.0:  # every record equals y
            break
        rn = 0.0
        for j in range(d):
            rn += r[j] * r[j]
        rn = math.sqrt(rn)
        lam = 1.0 if (eta == 0.0 or rn == 0.0) else max(0.0, 1.0 - eta / rn)
        step = 0.0
        size = 0.0
        for j in range(d):
            t = lam * num[j] / den + (1.0 - lam) * y[j]
            step += (t - y[j]) ** 2
            size += t * t
            y[j] = t
        if math.sqrt(step) <= tol * (1.0 + math.sqrt(size)):
            break
    for j in range(d):
        out[j] = y[j]
    return it


@dataclass(frozen=True, kw_only=True)
class GeoMedianProblem(SimulatedProblem):
    """Simulated geometric-median estimation.

    ``x_i = theta + sigma z_i``, ``z_i ~ N(0, I_d)``: centrally symmetric about ``theta``,
    so the population geometric median is ``theta``.

    Parameters
    ----------
    d : int >= 1
    theta : list of d floats (default zeros); must lie in the mechanisms' ``Theta``
        (``||theta||_1 <= bound``, checked by the sweep's mechanisms' options).
    sigma : float > 0
    """

    d: int = 2
    theta: tuple | None = None
    sigma: float = 1.0
    name: str = field(default="geomedian", init=False)
    #: the non-private error falls like n^(-1/2) (a √n-consistent estimator against the truth)
    error_rate_in_n = -0.5
    audit_defaults = {"d": 2}

    def __post_init__(self):
        object.__setattr__(self, "d", check_dimension(self.d))
        object.__setattr__(self, "sigma", check_finite_positive("sigma", self.sigma))
        object.__setattr__(self, "theta", check_vector("theta", self.theta, self.d))

    @property
    def theta_star(self) -> np.ndarray:
        return np.array(self.theta)

    def simulate(self, n: int, rng: np.random.Generator) -> GeoMedianData:
        """One data set (n, d) — the only copy of the data."""
        self.check_n(n)
        X = rng.standard_normal((n, self.d))
        X *= self.sigma
        X += self.theta_star
        return GeoMedianData(X)

    def audit_records(self) -> tuple[np.ndarray, np.ndarray]:
        """Records for privacy audits: ``(boundary, fill)``, rows ``x`` in ``R^d``.

        The data domain is all of ``R^d``; one record moves the gradient most when its
        unit vector ``u_i(theta)`` turns around, i.e. when it jumps between far-apart
        points on either side of ``Theta``.  ``boundary``: ``±5 e_j`` and
        ``±5 (1, ..., 1)/sqrt(d)``; ``fill``: those, 0, and ``±0.5 e_j`` (records inside
        ``Theta``, where the others' unit vectors vary fastest).
        """
        axes = np.vstack([np.eye(self.d), -np.eye(self.d)])
        diag = np.ones((1, self.d)) / np.sqrt(self.d)
        boundary = 5.0 * np.vstack([axes, diag, -diag])
        return boundary, np.vstack([boundary, np.zeros((1, self.d)), 0.5 * axes])

    def audit_data(self, records: np.ndarray) -> GeoMedianData:
        """Mechanism input for a data set given as records ``(m, d)``."""
        return geomedian_data(records)

"""1-D quantiles (the median at ``tau = 1/2``): data, loss, sensitivities.

Model (KNG paper §4.5, last paragraph)
--------------------------------------
Real data ``y_1, ..., y_n`` in public bounds ``[lower, upper]``; the ``tau``-quantile
minimises the check loss

    l_n(theta) = sum_i rho_tau(y_i - theta),   rho_tau(r) = r (tau - 1{r <= 0}),

on ``Theta = [lower, upper]`` (uniform base measure).  Its gradient (almost everywhere) is

    l_n'(theta) = sum_i (1{y_i <= theta} - tau) = k(theta) - tau n,

with ``k(theta) = #{y_i <= theta}``: constant between order statistics.

Sensitivities (derived here)
----------------------------
Neighbouring data sets differ in one record ``y_1 -> y_1'``.

* Gradient: record ``i`` contributes ``1 - tau`` or ``-tau``, so the change is at most
  ``(1 - tau) - (-tau) = 1`` for every ``theta``: ``Delta = 1``.  KNG's density
  ``exp(-eps/2 |k(theta) - tau n|)`` is then Smith's (2011) PrivateQuantile.  (The KNG
  paper's equation (3) uses the quantile-regression constant ``2(1 - tau) C_X`` with
  ``C_X = 1``; that bound ignores that ``x_i = 1`` cannot change sign and is loose by a
  factor ``2 (1 - tau) >= 1`` for ``tau <= 1/2`` — and too small for ``tau > 1/2``.)
* Loss (exponential mechanism): ``rho_tau(y - theta)`` lies in
  ``[0, max(tau, 1 - tau) (upper - lower)]`` for ``y, theta`` in the bounds, so
  ``|l_n(D) - l_n(D')| <= max(tau, 1 - tau) (upper - lower)``.  The standard
  calibration ``exp(-eps l_n / (2 Delta))`` is then loose by ``2 max(tau, 1 - tau)``:
  ``l_n(D) - l_n(D')`` is 1-Lipschitz in ``theta`` (its slope is a difference of two
  values in ``{-tau, 1 - tau}``), so its range over ``[lower, upper]`` is at most
  ``upper - lower`` and the privacy loss at most ``eps / (2 max(tau, 1 - tau))``
  (checked in ``tests/models/quantile/test_quantile.py``).  kngflow keeps the standard mechanism.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from numbers import Real
from typing import NamedTuple

import numpy as np
from scipy.special import ndtri

from kngflow.problems.base import Problem, check_tau

__all__ = [
    "QuantileData",
    "QuantileProblem",
    "check_tau",
    "quantile_data",
    "empirical_quantile",
    "gradient_sensitivity",
    "loss_sensitivity",
]


def check_bounds(lower, upper) -> tuple[float, float]:
    """Validate public bounds: finite reals with ``lower < upper``."""
    for name, v in (("lower", lower), ("upper", upper)):
        if isinstance(v, bool) or not isinstance(v, Real) or not math.isfinite(v):
            raise ValueError(f"{name} must be a finite real number, got {v!r}")
    if not lower < upper:
        raise ValueError(f"lower must be < upper, got lower={lower!r}, upper={upper!r}")
    return float(lower), float(upper)


class QuantileData(NamedTuple):
    """A 1-D data set ready for the quantile mechanisms.

    ``y`` is sorted ascending and lies in ``[lower, upper]``; ``tau`` and the bounds are
    public.
    """

    y: np.ndarray
    tau: float
    lower: float
    upper: float

    @property
    def n(self) -> int:
        return int(self.y.shape[0])

    @property
    def d(self) -> int:
        return 1


def quantile_data(x, tau, lower, upper) -> QuantileData:
    """Validate a user's array and public parameters; returns sorted :class:`QuantileData`.

    Raises ValueError naming ``x`` (empty, not 1-D, NaN/inf, outside the bounds),
    ``tau`` or ``lower``/``upper``.
    """
    tau = check_tau(tau)
    lower, upper = check_bounds(lower, upper)
    x = np.asarray(x)
    if x.ndim != 1:
        raise ValueError(f"x must be a 1-D array, got shape {x.shape}")
    if x.shape[0] == 0:
        raise ValueError("x must not be empty")
    if not np.issubdtype(x.dtype, np.number) or np.issubdtype(x.dtype, np.complexfloating):
        raise TypeError(f"x must hold real numbers, got dtype {x.dtype}")
    x = np.sort(x.astype(np.float64, copy=False))
    if not (np.isfinite(x[0]) and np.isfinite(x[-1])) or np.isnan(x).any():
        raise ValueError("x must be finite (no NaN or inf)")
    if x[0] < lower or x[-1] > upper:
        raise ValueError(f"x must lie in [lower, upper] = [{lower}, {upper}]; got values in [{x[0]}, {x[-1]}]")
    return QuantileData(x, tau, lower, upper)


def empirical_quantile(data: QuantileData) -> float:
    """The smallest minimiser of the check loss: ``y_(ceil(tau n))`` (order statistic)."""
    k = max(int(math.ceil(data.tau * data.n)), 1)
    return float(data.y[k - 1])


def gradient_sensitivity() -> float:
    """Sensitivity of ``l_n'(theta) = k(theta) - tau n``: 1 (see module docstring)."""
    return 1.0


def loss_sensitivity(tau: float, lower: float, upper: float) -> float:
    """Sensitivity of the check loss on ``[lower, upper]``: ``max(tau, 1-tau)(upper-lower)``."""
    return max(tau, 1.0 - tau) * (upper - lower)


@dataclass(frozen=True, kw_only=True)
class QuantileProblem(Problem):
    """Simulated 1-D quantile estimation.

    ``y_i = location + e_i`` with ``e_i ~ N(0, 1)``, clipped to the public bounds
    ``[lower, upper]`` (clipping moves no quantile that lies inside the bounds), so the
    true parameter is ``theta* = location + Phi^{-1}(tau)``.

    Parameters
    ----------
    tau : float in (0, 1)
    location : float
    lower, upper : float, public bounds with ``lower < theta* < upper``.
    """

    tau: float = 0.5
    location: float = 0.0
    lower: float = -10.0
    upper: float = 10.0
    name: str = field(default="quantile", init=False)
    d: int = field(default=1, init=False)
    #: the non-private error falls like n^(-1/2) (a √n-consistent estimator against the truth)
    error_rate_in_n = -0.5

    def __post_init__(self):
        object.__setattr__(self, "tau", check_tau(self.tau))
        lower, upper = check_bounds(self.lower, self.upper)
        if isinstance(self.location, bool) or not isinstance(self.location, Real) or not math.isfinite(self.location):
            raise ValueError(f"location must be a finite real number, got {self.location!r}")
        if not lower < self.location + float(ndtri(self.tau)) < upper:
            raise ValueError("location must put theta* = location + Phi^-1(tau) strictly inside [lower, upper]")
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)
        object.__setattr__(self, "location", float(self.location))

    @property
    def theta_star(self) -> np.ndarray:
        return np.array([self.location + float(ndtri(self.tau))])

    @property
    def caveats(self) -> str:
        return f"data clipped to the public bounds [{self.lower}, {self.upper}]; releases are DP for the clipped data."

    def check_n(self, n: int) -> None:
        """Raise ValueError naming ``n`` unless ``n >= 1``."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
            raise TypeError(f"n must be an integer, got {type(n).__name__}")
        if n < 1:
            raise ValueError(f"n must be at least 1, got n={n}")

    def simulate(self, n: int, rng: np.random.Generator) -> QuantileData:
        """One data set of size ``n`` (sorted; ``n`` floats of memory plus the sort)."""
        self.check_n(n)
        y = rng.standard_normal(n)
        y += self.location
        np.clip(y, self.lower, self.upper, out=y)
        y.sort()
        return QuantileData(y, self.tau, self.lower, self.upper)

    def error(self, estimate) -> float:
        """``|estimate - theta*|``."""
        return float(np.linalg.norm(np.asarray(estimate, float) - self.theta_star))

    @property
    def data_variables(self) -> dict:
        return {}

    def data_summary(self, data) -> dict:
        return {}

    def audit_records(self) -> tuple[np.ndarray, np.ndarray]:
        """Records (one value each) for privacy audits: ``(boundary, fill)``.

        One record changes ``#{y_i <= theta}`` by one for every ``theta`` between its old
        and new value, most when it jumps across the whole range: boundary records are
        ``lower`` and ``upper``; fill records also the midpoint and the quarter points.
        """
        lo, hi = self.lower, self.upper
        boundary = np.array([[lo], [hi]])
        return boundary, np.array([[lo], [hi], [0.5 * (lo + hi)], [0.75 * lo + 0.25 * hi], [0.25 * lo + 0.75 * hi]])

    def audit_data(self, records: np.ndarray) -> QuantileData:
        """Mechanism input for a data set given as records ``(m, 1)``."""
        return quantile_data(np.asarray(records, dtype=float)[:, 0], self.tau, self.lower, self.upper)

    def parameter_box(self) -> tuple[np.ndarray, np.ndarray]:
        """``Theta = [lower, upper]`` (public bounds, part of the declared domain)."""
        return np.array([self.lower]), np.array([self.upper])

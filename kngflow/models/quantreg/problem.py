"""Quantile regression (KNG paper §4.5): data protocol, loss, gradient, sensitivities.

Model and bounds
----------------
Pairs ``(x_i, y_i)`` with ``x_i`` in ``[-1, 1]^d`` and ``y_i`` in ``[-1, 1]`` (after
scaling), ``Theta = {||theta||_1 <= B}``.  Check loss and gradient (almost everywhere)::

    l_n(theta) = sum_i rho_tau(y_i - x_i'theta),   rho_tau(r) = r (tau - 1{r <= 0}),
    grad l_n(theta) = sum_i x_i (1{y_i <= x_i'theta} - tau).

The problem keeps the data themselves (there are no sufficient statistics): one
``n x d`` float64 matrix and the ``n`` responses.

Sensitivities (derived here; the paper's printed constants are checked against them)
-----------------------------------------------------------------------------------
Neighbouring data sets differ in one record ``(x_1, y_1) -> (x_1', y_1')``; write
``C_X = sup_x ||x||_K`` (``1``, ``sqrt(d)``, ``d`` for ℓ∞, ℓ2, ℓ1 on the cube).

* Gradient: record 1 contributes ``x_1 (1 - tau)`` or ``-x_1 tau``, of K-norm at most
  ``max(tau, 1 - tau) C_X``, so for every ``theta``

      ||grad l_n(D) - grad l_n(D')||_K <= 2 max(tau, 1 - tau) C_X,

  attained by ``x_1' = -x_1`` with both indicators 1 (``2 (1 - tau) C_X``) or both 0
  (``2 tau C_X``).  The paper prints ``2 (1 - tau) C_X``, which is the bound only for
  ``tau <= 1/2``; for ``tau > 1/2`` it is too small and the paper's KNG would not be
  ε-DP.
* Loss (exponential mechanism): ``|x'theta| <= ||x||_inf ||theta||_1 <= B`` so
  ``|y - x'theta| <= 1 + B`` and ``0 <= rho_tau(r) <= max(tau, 1 - tau)(1 + B)``; one
  term changes, and both values lie in that interval, so

      |l_n(D) - l_n(D')| <= max(tau, 1 - tau)(1 + B),

  attained with ``y_1 = 1, x_1'theta = -B`` against ``y_1' = x_1'theta``.  The paper's
  density ``exp(-eps l_n / (4 max{tau, 1-tau}(1+B)))`` corresponds to sensitivity
  ``2 max(tau, 1 - tau)(1 + B)`` (the triangle inequality without using ``rho >= 0``):
  valid, but twice the noise needed (it is ε/2-DP).  kngflow uses the tight constant.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from numbers import Real
from typing import NamedTuple

import numpy as np
from scipy.special import ndtri

from kngflow.problems.base import Problem, check_tau
from kngflow.problems.domains import response_records
from kngflow.problems.protocols import PROTOCOLS, check_regression_n, protocol_audit_options, protocol_caveats
from kngflow.warnings import PrivacyLeakWarning
from kngflow.problems.rows import D_COLUMNS, N_ROWS

__all__ = [
    "QuantRegData",
    "QuantRegProblem",
    "quantreg_data",
    "quantreg_lp",
    "check_loss",
    "check_gradient",
    "gradient_sensitivity",
    "loss_sensitivity",
    "covariate_radius",
]

_NORM_RADIUS = {"linf": lambda d: 1.0, "l2": lambda d: math.sqrt(d), "l1": lambda d: float(d)}


def covariate_radius(norm: str, d: int) -> float:
    """``C_X = sup ||x||_K`` over ``[-1, 1]^d``."""
    if norm not in _NORM_RADIUS:
        raise ValueError(f"norm must be one of 'l1', 'l2', 'linf', got {norm!r}")
    return _NORM_RADIUS[norm](d)


def gradient_sensitivity(norm: str, d: int, tau: float) -> float:
    """``2 max(tau, 1 - tau) C_X`` (module docstring)."""
    return 2.0 * max(tau, 1.0 - tau) * covariate_radius(norm, d)


def loss_sensitivity(tau: float, bound: float) -> float:
    """``max(tau, 1 - tau)(1 + B)`` (module docstring)."""
    return max(tau, 1.0 - tau) * (1.0 + bound)


class QuantRegData(NamedTuple):
    """Scaled quantile-regression data: ``X`` (n, d) in ``[-1, 1]``, ``y = Y / scale`` in ``[-1, 1]``.

    Estimates in these units are multiplied by ``scale`` to return to original units
    (quantile regression is equivariant under scaling of ``Y``).
    """

    X: np.ndarray
    y: np.ndarray
    tau: float
    scale: float

    n = N_ROWS
    d = D_COLUMNS


def quantreg_data(X, y, tau, *, y_bound: float | None = None) -> QuantRegData:
    """Validate a user's bounded data set.

    ``X`` (n, d) with entries in ``[-1, 1]`` (include a column of ones for an intercept);
    ``y`` (n,) in ``[-y_bound, y_bound]``, divided by that public bound.  Without
    ``y_bound`` it is divided by ``max|y|`` as in the KNG paper's Algorithm 1 — computed
    without privacy, so the release is then not end-to-end DP, and a
    :class:`~kngflow.warnings.PrivacyLeakWarning` says so (the numbers are the same).
    """
    return _quantreg_data(X, y, tau, y_bound, warn=True)


def _quantreg_data(X, y, tau, y_bound, *, warn: bool) -> QuantRegData:
    """:func:`quantreg_data`; ``warn=False`` where the data-derived scale is a declared protocol
    (``audit_data`` under the ``"paper"`` protocol, whose caveat is recorded)."""
    tau = check_tau(tau)
    X = np.ascontiguousarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"X must be a non-empty 2-D array (n, d), got shape {X.shape}")
    n, d = X.shape
    if y.shape != (n,):
        raise ValueError(f"y must be a 1-D array of length n={n}, got shape {y.shape}")
    if n < d:
        raise ValueError(f"n must be at least d={d}, got n={n}")
    if not np.all(np.isfinite(X)) or np.max(np.abs(X)) > 1.0:
        raise ValueError("X must have every entry finite and in [-1, 1] (the declared covariate bound)")
    if not np.all(np.isfinite(y)):
        raise ValueError("y must be finite (no NaN or inf)")
    if y_bound is None:
        scale = float(np.max(np.abs(y))) or 1.0
        if warn:
            warnings.warn(PrivacyLeakWarning(
                "quantreg_data: y_bound not given, so y is scaled by max|y| computed from the data without privacy: "
                "releases from these data are not end-to-end DP (pass a public y_bound)"), stacklevel=3)
    else:
        if isinstance(y_bound, bool) or not isinstance(y_bound, Real) or not (math.isfinite(y_bound) and y_bound > 0):
            raise ValueError(f"y_bound must be finite and > 0, got {y_bound!r}")
        if np.max(np.abs(y)) > y_bound:
            raise ValueError(f"y must lie in [-y_bound, y_bound] = [-{y_bound}, {y_bound}]")
        scale = float(y_bound)
    return QuantRegData(X, y / scale, tau, scale)


def check_loss(data: QuantRegData, theta) -> np.ndarray:
    """``l_n(theta)`` in scaled units for ``theta`` of shape (..., d)."""
    theta = np.asarray(theta, float)
    res = data.y[:, None] - data.X @ theta.reshape(-1, data.d).T  # (n, m)
    loss = np.sum(res * (data.tau - (res <= 0)), axis=0)
    return loss.reshape(theta.shape[:-1])


def check_gradient(data: QuantRegData, theta) -> np.ndarray:
    """``grad l_n(theta)`` for ``theta`` of shape (..., d)."""
    theta = np.asarray(theta, float)
    res = data.y[:, None] - data.X @ theta.reshape(-1, data.d).T
    g = ((res <= 0) - data.tau).T @ data.X  # (m, d)
    return g.reshape(theta.shape)


def _dual_lp(X, y, tau, rhs) -> np.ndarray:
    """``theta`` from ``max y'a  s.t.  X'a = rhs,  tau - 1 <= a_i <= tau`` (HiGHS)."""
    from scipy.optimize import linprog

    res = linprog(-y, A_eq=X.T, b_eq=rhs, bounds=(tau - 1.0, tau), method="highs")
    if res.status != 0:
        raise RuntimeError(f"quantile-regression LP failed: {res.message}")
    return -np.asarray(res.eqlin.marginals, dtype=np.float64)


def quantreg_lp(data: QuantRegData, *, direct_max: int = 5000) -> np.ndarray:
    """Exact non-private estimate (scaled units) of the quantile-regression linear program.

    The primal ``min tau 1'u + (1 - tau) 1'v  s.t.  X theta + u - v = y,  u, v >= 0`` has
    ``2n + d`` variables.  kngflow solves its dual, with ``n`` box-bounded variables and
    ``d`` equality rows (HiGHS)::

        max y'a  s.t.  X'a = 0,  tau - 1 <= a_i <= tau,

    whose equality multipliers are ``theta`` (``-`` HiGHS's ``eqlin.marginals`` for
    ``min -y'a``): an exact primal solution by strong duality.

    For ``n > direct_max`` it first applies Portnoy & Koenker's (1997) preprocessing:
    solve on a fixed subsample of ``m ~ 2 sqrt(d) n^(2/3)`` rows, keep the ``~m`` rows
    whose residuals lie nearest the ``tau``-quantile of the residuals, and fix the dual
    variables of the others at their bounds (``tau`` above, ``tau - 1`` below the band),
    which moves their contribution ``X_F'a_F`` to the right-hand side.  The reduced
    solution is optimal for the full problem iff every fixed row keeps its residual's
    sign (complementary slackness); this is checked, and the band is doubled until it
    holds (the full LP is the last resort).  Cost ``O(n d)`` plus a small LP.
    """
    X, y, tau = data.X, data.y, data.tau
    n, d = X.shape
    if n <= direct_max:
        return _dual_lp(X, y, tau, np.zeros(d))
    m = int(min(n, 2.0 * math.sqrt(d) * n ** (2.0 / 3.0)))
    sub = np.random.default_rng(0).choice(n, size=m, replace=False)  # fixed: the estimate is a function of the data
    theta = _dual_lp(X[sub], y[sub], tau, np.zeros(d))
    while 2 * m < n:
        r = y - X @ theta
        k_lo = max(int(tau * n - m / 2), 0)
        k_hi = min(int(tau * n + m / 2), n - 1)
        lo, hi = np.partition(r, [k_lo, k_hi])[[k_lo, k_hi]]
        below = r < lo
        above = r > hi
        keep = ~(below | above)
        rhs = -(tau * X[above].sum(axis=0) + (tau - 1.0) * X[below].sum(axis=0))
        theta_k = _dual_lp(X[keep], y[keep], tau, rhs)
        r = y - X @ theta_k
        if np.all(r[below] <= 0.0) and np.all(r[above] >= 0.0):
            return theta_k
        m *= 2
    return _dual_lp(X, y, tau, np.zeros(d))




@dataclass(frozen=True, kw_only=True)
class QuantRegProblem(Problem):
    """KNG paper §4.5.1: simulated quantile regression (Algorithm 1's design).

    ``X_i1 = 1``, ``X_ij ~ U(-1, 1)`` for ``j >= 2``, ``Y = X theta* + e`` with
    ``e = Z - Phi^{-1}(tau)``, ``Z ~ N(0, 1)``, so that the conditional ``tau``-quantile
    of ``Y`` is ``x'theta*`` (for ``tau = 1/2``, ``e ~ N(0, 1)`` exactly as in the
    paper).  Protocol ``"paper"`` divides ``Y`` by ``R = max|Y|`` (computed without
    privacy, as the paper does); ``"public_bound"`` clips ``Y`` to ``[-y_bound, y_bound]``
    and divides by ``y_bound``.

    Parameters
    ----------
    tau : float in (0, 1)
    theta_star : sequence of d >= 1 floats (default ``(0, -1)``, Figure 2)
    protocol : {"paper", "public_bound"}
    y_bound : float, required by ``"public_bound"``.
    """

    tau: float = 0.5
    theta_star: np.ndarray | None = None
    protocol: str = "paper"
    y_bound: float | None = None
    name: str = field(default="quantreg", init=False)
    #: the non-private error falls like n^(-1/2) (a √n-consistent estimator against the truth)
    error_rate_in_n = -0.5
    audit_defaults = {"protocol": "public_bound", "y_bound": 1.0}

    @classmethod
    def audit_options(cls, given: dict) -> dict:
        """The audit's data protocol is ``public_bound`` with ``y_bound = 1`` unless ``given`` says otherwise."""
        return protocol_audit_options(cls.audit_defaults, given)

    def __post_init__(self):
        object.__setattr__(self, "tau", check_tau(self.tau))
        ts = np.array([0.0, -1.0]) if self.theta_star is None else np.asarray(self.theta_star, dtype=float)
        if ts.ndim != 1 or ts.shape[0] < 1 or not np.all(np.isfinite(ts)):
            raise ValueError(f"theta_star must be a non-empty list of finite numbers, got {self.theta_star!r}")
        object.__setattr__(self, "theta_star", ts)
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}, got {self.protocol!r}")
        if self.protocol == "public_bound":
            yb = self.y_bound
            if yb is None or isinstance(yb, bool) or not isinstance(yb, Real) or not (math.isfinite(yb) and yb > 0):
                raise ValueError(f"y_bound must be finite and > 0 with protocol 'public_bound', got {yb!r}")

    @property
    def d(self) -> int:
        return int(self.theta_star.shape[0])

    # the same Y protocols as linear regression, so the same caveats and the same n >= d
    @property
    def caveats(self) -> str:
        return protocol_caveats(self.protocol, self.y_bound)

    def check_n(self, n: int) -> None:
        """Raise TypeError/ValueError naming ``n`` unless an integer ``>= d``."""
        check_regression_n(n, self.d)

    def simulate(self, n: int, rng: np.random.Generator) -> QuantRegData:
        """One scaled data set: ``X`` (n, d) and ``y`` (n,), the only ``n x d`` array."""
        self.check_n(n)
        rng_x, rng_e = rng.spawn(2)
        d = self.d
        X = np.empty((n, d))
        X[:, 0] = 1.0
        if d > 1:
            X[:, 1:] = rng_x.random((n, d - 1))
            X[:, 1:] *= 2.0
            X[:, 1:] -= 1.0
        y = X @ self.theta_star
        y += rng_e.standard_normal(n)
        y -= float(ndtri(self.tau))
        if self.protocol == "public_bound":
            np.clip(y, -self.y_bound, self.y_bound, out=y)
            scale = float(self.y_bound)
        else:
            scale = float(np.max(np.abs(y))) or 1.0
        y /= scale
        return QuantRegData(X, y, self.tau, scale)

    def error(self, estimate) -> float:
        """``||estimate - theta*||_2``."""
        return float(np.linalg.norm(np.asarray(estimate, float) - self.theta_star))

    @property
    def data_variables(self) -> dict:
        return {
            "scale": (("n", "replicate"), "float64", np.nan, {"long_name": "scale of Y (R = max|Y| or the public bound)"}),
        }

    def audit_records(self) -> tuple[np.ndarray, np.ndarray]:
        """Records ``(x_1, ..., x_d, y)`` for privacy audits: ``(boundary, fill)``.

        ``boundary``: ``x`` at the corners of the covariate cube ``{-1, 1}^d`` (where the
        gradient's sensitivity ``2 max(tau, 1 - tau) sup ||x||_K`` is reached) and
        ``y = ±y_max``; ``fill``: ``x`` in ``{-1, 0, 1}^d`` (``d <= 4``; corners and 0
        beyond) and ``y`` in ``{-y_max, 0, y_max}``.  ``y_max`` is the public bound (1
        under the paper protocol, whose scale ``max|y|`` depends on the data: boundary
        records there also take ``y = ±y_max/10``, so one record can change the scale
        tenfold).
        """
        ym = float(self.y_bound) if self.protocol == "public_bound" else 1.0
        return response_records(self.d, ym, scale_from_data=self.protocol == "paper")

    def audit_data(self, records: np.ndarray) -> QuantRegData:
        """Mechanism input for a data set given as records ``(m, d + 1)``, after the protocol."""
        records = np.asarray(records, dtype=float)
        y_bound = float(self.y_bound) if self.protocol == "public_bound" else None
        return _quantreg_data(records[:, :-1], records[:, -1], self.tau, y_bound, warn=False)

    def data_summary(self, data: QuantRegData) -> dict:
        return {"scale": float(data.scale)}

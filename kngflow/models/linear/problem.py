"""Linear regression: data protocol, streaming sufficient statistics, loss and sensitivities.

Model and bounds (KNG paper §4.2)
---------------------------------
Pairs ``(x_i, y_i)`` with ``x_i`` in ``[-1, 1]^d`` and ``y_i`` in ``[-1, 1]`` (after
scaling), parameter space ``Theta = {theta : ||theta||_1 <= B}``.  The empirical risk is

    l_n(theta) = sum_i (y_i - x_i' theta)^2 = theta' G theta - 2 c' theta + yy,

with ``G = X'X``, ``c = X'y``, ``yy = y'y``.  Every mechanism in kngflow needs only
``(G, c, yy, n)``, so data are never held as an ``n x d`` matrix: they are generated
(or read) in fixed-size blocks and folded into these statistics.

Sensitivities (derived here; the papers' printed constants are checked against these)
-------------------------------------------------------------------------------------
Neighbouring data sets differ in one record ``(x_1, y_1) -> (x_1', y_1')``.  For
``theta`` in ``Theta``: ``|x' theta| <= ||x||_inf ||theta||_1 <= B`` so the residual
satisfies ``|y - x' theta| <= 1 + B``.

* Gradient ``grad l_n(theta) = -2 sum_i (y_i - x_i' theta) x_i``.  Only record 1
  changes, so for any norm ``K``::

      ||grad l_n(D) - grad l_n(D')||_K <= 2(1+B)||x_1||_K + 2(1+B)||x_1'||_K
                                       <= 4 (1+B) sup_x ||x||_K,

  with ``sup ||x||_inf = 1``, ``sup ||x||_2 = sqrt(d)``, ``sup ||x||_1 = d`` over the
  cube.  Hence ``Delta_inf = 4(1+B)`` (KNG paper), ``Delta_2 = 4(1+B) sqrt(d)``,
  ``Delta_1 = 4(1+B) d``.  The same bound holds uniformly in ``theta`` in ``Theta``,
  which is what objective perturbation needs (per-record gradient difference).
* Loss itself (exponential mechanism): each term ``(y - x' theta)^2`` lies in
  ``[0, (1+B)^2]`` so ``|l_n(D) - l_n(D')| <= (1+B)^2``.
* Hessian of one record's loss ``2 x x'`` has largest eigenvalue ``2 ||x||_2^2 <= 2d``
  (the ``lambda`` of objective perturbation).
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from kngflow._jit import jit
from kngflow.problems.base import Problem
from kngflow.problems.domains import response_records
from kngflow.problems.protocols import PROTOCOLS, check_regression_n, protocol_audit_options, protocol_caveats
from kngflow.warnings import PrivacyLeakWarning

__all__ = [
    "LinearStats",
    "StatsAccumulator",
    "LinearProblem",
    "paper_theta_star",
    "stats_from_arrays",
    "gradient_sensitivity",
    "loss_sensitivity",
    "hessian_bound",
    "loss",
    "gradient",
    "ols",
    "ols_stderr",
    "well_conditioned",
    "BLOCK_ROWS",
    "dataset_stats",
]

#: Rows folded into the statistics at a time.  Block boundaries are fixed in absolute
#: row index, so the statistics are bit-identical whatever chunks a caller feeds in.
BLOCK_ROWS = 1 << 16

_NORM_RADIUS = {
    "linf": lambda d: 1.0,
    "l2": lambda d: math.sqrt(d),
    "l1": lambda d: float(d),
}


@jit
def _design_block(U, e, theta, X, y):
    """One pass over a block: ``X = [1, 2U - 1]`` and ``y = X theta + e``."""
    d = X.shape[1]
    for i in range(U.shape[0]):
        X[i, 0] = 1.0
        acc = theta[0]
        for j in range(1, d):
            v = U[i, j - 1] * 2.0 - 1.0
            X[i, j] = v
            acc += v * theta[j]
        y[i] = acc + e[i]


class LinearStats(NamedTuple):
    """Sufficient statistics of a scaled linear-regression data set.

    ``G = X'X``, ``c = X'y'`` and ``yy = y''y'`` where ``y' = y / scale`` lies in
    ``[-1, 1]``; estimates computed from them are multiplied by ``scale`` to return to
    the original units.
    """

    G: np.ndarray
    c: np.ndarray
    yy: float
    scale: float
    n: int

    @property
    def d(self) -> int:
        return self.G.shape[0]


def paper_theta_star(d: int = 12) -> np.ndarray:
    """KNG paper §4.3: ``theta* = (0, -1, -1 + 2/(d-1), ..., 1 - 2/(d-1))``."""
    if d < 2:
        return np.zeros(d)
    return np.concatenate([[0.0], -1.0 + 2.0 * np.arange(d - 1) / (d - 1)])


def gradient_sensitivity(norm: str, d: int, bound: float) -> float:
    """K-norm sensitivity of the squared-loss gradient: ``4 (1+B) sup ||x||_K``."""
    if norm not in _NORM_RADIUS:
        raise ValueError(f"norm must be one of 'l1', 'l2', 'linf', got {norm!r}")
    return 4.0 * (1.0 + bound) * _NORM_RADIUS[norm](d)


def loss_sensitivity(bound: float) -> float:
    """Sensitivity of the squared loss ``l_n`` on ``||theta||_1 <= B``: ``(1+B)^2``."""
    return (1.0 + bound) ** 2


def hessian_bound(d: int) -> float:
    """Largest eigenvalue of one record's Hessian ``2 x x'`` on the cube: ``2 d``."""
    return 2.0 * d


def loss(stats: LinearStats, theta: np.ndarray) -> float:
    """Scaled empirical risk ``theta'G theta - 2 c'theta + yy``."""
    theta = np.asarray(theta, dtype=float)
    return float(theta @ stats.G @ theta - 2.0 * stats.c @ theta + stats.yy)


def gradient(stats: LinearStats, theta: np.ndarray) -> np.ndarray:
    """Gradient of the scaled empirical risk: ``2 (G theta - c)``."""
    return 2.0 * (stats.G @ np.asarray(theta, dtype=float) - stats.c)


class StatsAccumulator:
    """Fold rows ``(x_i, y_i)`` into ``(X'X, X'y, y'y, max|y|, n)`` block by block.

    Rows are buffered into blocks of :data:`BLOCK_ROWS` rows aligned on absolute row
    index; each full block is reduced with one BLAS call and the block results are
    added in order.  The result therefore depends only on the rows, not on how the
    caller chunked them.  (With a multithreaded BLAS the reduction of one block is
    still deterministic for a fixed thread count; kngflow's workers run one thread.)
    Memory: one ``BLOCK_ROWS x d`` buffer.
    """

    def __init__(self, d: int, *, block_rows: int = BLOCK_ROWS):
        self.d = int(d)
        self._X = np.empty((block_rows, self.d))
        self._y = np.empty(block_rows)
        self._fill = 0
        self.G = np.zeros((self.d, self.d))
        self.s = np.zeros(self.d)
        self.yy = 0.0
        self.ymax = 0.0
        self.n = 0

    def add(self, X: np.ndarray, y: np.ndarray) -> None:
        """Add rows ``X`` (m, d) and responses ``y`` (m,)."""
        m = X.shape[0]
        start = 0
        cap = self._X.shape[0]
        while start < m:
            take = min(cap - self._fill, m - start)
            if take == cap and self._fill == 0:
                self._reduce(X[start : start + take], y[start : start + take])
            else:
                self._X[self._fill : self._fill + take] = X[start : start + take]
                self._y[self._fill : self._fill + take] = y[start : start + take]
                self._fill += take
                if self._fill == cap:
                    self._flush()
            start += take

    def _flush(self) -> None:
        if self._fill:
            self._reduce(self._X[: self._fill], self._y[: self._fill])
            self._fill = 0

    def _reduce(self, X: np.ndarray, y: np.ndarray) -> None:
        self.G += X.T @ X
        self.s += X.T @ y
        self.yy += float(y @ y)
        self.ymax = max(self.ymax, float(np.max(np.abs(y))))
        self.n += X.shape[0]

    def finish(self, scale: float | None = None) -> LinearStats:
        """Statistics with ``y`` divided by ``scale`` (default ``max|y|``)."""
        self._flush()
        R = self.ymax if scale is None else float(scale)
        if not R > 0:
            R = 1.0
        return LinearStats(self.G.copy(), self.s / R, self.yy / R**2, R, self.n)


def stats_from_arrays(
    X: np.ndarray,
    y: np.ndarray,
    *,
    y_bound: float | None = None,
    chunk_rows: int = BLOCK_ROWS,
) -> LinearStats:
    """Sufficient statistics of a user's bounded data set.

    Parameters
    ----------
    X : array (n, d)
        Covariates, every entry in ``[-1, 1]`` (include a column of ones for an
        intercept).  Rescale your columns beforehand; values outside raise.
    y : array (n,)
        Responses.  With ``y_bound`` given they must lie in ``[-y_bound, y_bound]``
        and are divided by ``y_bound`` (a public bound: end-to-end DP).  Without it,
        they are divided by ``max|y|`` as in the KNG paper's Algorithm 1 — that scale
        is computed without privacy, so the release is not end-to-end DP, and a
        :class:`~kngflow.warnings.PrivacyLeakWarning` says so (the numbers are the same).
    chunk_rows : int
        Rows read at a time (memory only; the result does not depend on it).
    """
    return _stats_from_arrays(X, y, y_bound, chunk_rows, warn=True)


def _stats_from_arrays(X, y, y_bound, chunk_rows, *, warn: bool) -> LinearStats:
    """:func:`stats_from_arrays`; ``warn=False`` for callers whose data-derived scale is a
    declared protocol (``audit_data`` under the ``"paper"`` protocol, whose caveat is recorded)."""
    X = np.asarray(X)
    y = np.asarray(y)
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D array (n, d), got shape {X.shape}")
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(f"y must be a 1-D array of length n={X.shape[0]}, got shape {y.shape}")
    n, d = X.shape
    if n < d:
        raise ValueError(f"n must be at least d={d} (number of rows >= number of columns), got n={n}")
    if not np.all(np.isfinite(X)) or np.max(np.abs(X)) > 1.0:
        raise ValueError("X must have every entry finite and in [-1, 1] (the declared covariate bound)")
    if not np.all(np.isfinite(y)):
        raise ValueError("y must be finite")
    if y_bound is not None:
        if not (np.isfinite(y_bound) and y_bound > 0):
            raise ValueError(f"y_bound must be finite and > 0, got {y_bound!r}")
        if np.max(np.abs(y)) > y_bound:
            raise ValueError(f"y must lie in [-y_bound, y_bound] = [-{y_bound}, {y_bound}]")
    if int(chunk_rows) < 1:
        raise ValueError(f"chunk_rows must be a positive integer, got {chunk_rows!r}")
    if y_bound is None and warn:
        warnings.warn(PrivacyLeakWarning(
            "stats_from_arrays: y_bound not given, so y is scaled by max|y| computed from the data without privacy: "
            "releases from these statistics are not end-to-end DP (pass a public y_bound)"), stacklevel=3)
    acc = StatsAccumulator(d)
    for start in range(0, n, int(chunk_rows)):
        acc.add(
            np.ascontiguousarray(X[start : start + chunk_rows], dtype=np.float64),
            np.ascontiguousarray(y[start : start + chunk_rows], dtype=np.float64),
        )
    return acc.finish(y_bound)




@functools.cache
def dataset_stats(name: str) -> LinearStats:
    """Sufficient statistics of the real data set ``name`` (:mod:`kngflow.models.linear.datasets`),
    computed once per process; ``G`` and ``c`` are read-only (shared by every replicate)."""
    from kngflow.models.linear.datasets import load_dataset

    data = load_dataset(name)
    stats = stats_from_arrays(data.X, data.y, y_bound=1.0)
    for a in (stats.G, stats.c):
        a.setflags(write=False)
    return stats


@dataclass(frozen=True, kw_only=True)
class LinearProblem(Problem):
    """KNG paper Algorithm 1: simulated linear regression — or a real data set.

    ``X_i1 = 1``, ``X_ij ~ U(-1, 1)`` for ``j >= 2``, ``e_i ~ N(0, 1)``,
    ``Y = X theta* + e``.  Protocol ``"paper"`` scales by ``R = max|Y|`` (computed
    without privacy, exactly as the paper does); protocol ``"public_bound"`` clips
    ``Y`` to ``[-y_bound, y_bound]`` and scales by the public ``y_bound``.

    With ``dataset`` (Awan & Slavković §6.3) the data are a fixed real data set,
    preprocessed once per process (:mod:`kngflow.models.linear.datasets`): ``simulate``
    ignores its generator and returns the same sufficient statistics for every
    replicate, so replicates differ only by the mechanisms' noise; ``theta_star`` is the
    non-private OLS estimate on those data, so ``error`` is the distance to it; ``d`` is
    the data set's and ``n`` must be its number of rows.  The preprocessing scales ``Y``
    into ``[-1, 1]``, so the protocol is ``"public_bound"`` with ``y_bound = 1``; its
    truncation quantiles are not private (see ``caveats``).

    Parameters
    ----------
    d : int
        Number of coefficients (intercept included), ``>= 1``; default 12, or the data
        set's.
    theta_star : array (d,), optional
        True coefficients; default :func:`paper_theta_star`.  Not with ``dataset``.
    protocol : {"paper", "public_bound"}
        Default ``"paper"``, or ``"public_bound"`` with ``dataset`` (the only one allowed).
    y_bound : float
        Public bound on ``|Y|``, required by ``"public_bound"``; 1 with ``dataset``.
    dataset : {"randhie"}, optional
        A real data set instead of simulated data.
    """

    d: int | None = None
    theta_star: np.ndarray | None = field(default=None)
    protocol: str | None = None
    y_bound: float | None = None
    dataset: str | None = None
    name: str = field(default="linear", init=False)
    #: the OLS standard errors: the report's coverage of the non-private reference
    reference_stderr = "ols_stderr"
    audit_defaults = {"d": 2, "protocol": "public_bound", "y_bound": 1.0}
    #: the KNG paper's Figure 1 comparison
    report_comparisons = {"KNG and exponential mechanism": ("kng", "exponential")}

    @property
    def error_rate_in_n(self) -> float | None:  # type: ignore[override]
        """-0.5 against the truth (the non-private fit is √n-consistent); None on a real data
        set, whose reference is the full-data fit."""
        return -0.5 if self.reference == "truth" else None

    @classmethod
    def audit_options(cls, given: dict) -> dict:
        """The audit's data protocol is ``public_bound`` with ``y_bound = 1`` unless ``given`` says otherwise."""
        return protocol_audit_options(cls.audit_defaults, given)

    def __post_init__(self):
        if self.dataset is not None:
            self._init_dataset()
            return
        d = 12 if self.d is None else self.d
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
            raise ValueError(f"d must be a positive integer, got {self.d!r}")
        object.__setattr__(self, "d", int(d))
        ts = paper_theta_star(int(self.d)) if self.theta_star is None else np.asarray(self.theta_star, float)
        if ts.shape != (self.d,):
            raise ValueError(f"theta_star must have shape (d,) = ({self.d},), got {ts.shape}")
        object.__setattr__(self, "theta_star", ts)
        object.__setattr__(self, "protocol", "paper" if self.protocol is None else self.protocol)
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}, got {self.protocol!r}")
        if self.protocol == "public_bound":
            if self.y_bound is None or not (np.isfinite(self.y_bound) and self.y_bound > 0):
                raise ValueError(f"y_bound must be finite and > 0 with protocol 'public_bound', got {self.y_bound!r}")

    def _init_dataset(self) -> None:
        from kngflow.models.linear.datasets import check_dataset, load_dataset

        check_dataset(self.dataset, "linear")
        stats = dataset_stats(self.dataset)
        if self.d is not None and self.d != stats.d:
            raise ValueError(f"d must be omitted or {stats.d} with dataset {self.dataset!r}, got {self.d!r}")
        if self.theta_star is not None:
            raise ValueError(
                f"theta_star must be omitted with dataset {self.dataset!r}: the reference is the non-private "
                "estimate on the data set"
            )
        if self.protocol not in (None, "public_bound"):
            raise ValueError(
                f"protocol must be 'public_bound' (or omitted) with dataset {self.dataset!r}: the preprocessing "
                f"scales Y into [-1, 1], got {self.protocol!r}"
            )
        if self.y_bound not in (None, 1, 1.0) or isinstance(self.y_bound, bool):
            raise ValueError(f"y_bound must be 1 (or omitted) with dataset {self.dataset!r}, got {self.y_bound!r}")
        object.__setattr__(self, "d", stats.d)
        object.__setattr__(self, "protocol", "public_bound")
        object.__setattr__(self, "y_bound", 1.0)
        object.__setattr__(self, "theta_star", ols(stats) * stats.scale)
        load_dataset(self.dataset)  # cached: the caveat below reads it

    @property
    def caveats(self) -> str:
        if self.dataset is not None:
            from kngflow.models.linear.datasets import load_dataset

            return (
                f"real data set {self.dataset!r} (n = {dataset_stats(self.dataset).n}, fixed: replicates differ only "
                "by the mechanisms' noise; theta_star is the non-private OLS estimate on these data, so error is the "
                "distance to it, as in Awan-Slavkovic 6.3); " + load_dataset(self.dataset).caveat + "."
            )
        return protocol_caveats(self.protocol, self.y_bound)

    @property
    def reference(self) -> str:
        """What ``theta_star`` is, for labels: the truth, or the non-private estimate on a data set."""
        return "truth" if self.dataset is None else "the non-private estimate"

    def check_n(self, n: int) -> None:
        """Raise ValueError naming ``n`` unless ``n >= d`` (with ``dataset``: ``n`` = its row count)."""
        if self.dataset is not None and not isinstance(n, bool) and isinstance(n, (int, np.integer)):
            rows = dataset_stats(self.dataset).n
            if n != rows:
                raise ValueError(f"n must be {rows}, the number of rows of dataset {self.dataset!r}, got n={n}")
        check_regression_n(n, self.d)

    def simulate(self, n: int, rng: np.random.Generator, *, chunk_rows: int = BLOCK_ROWS) -> LinearStats:
        """Generate one data set of size ``n`` straight into sufficient statistics.

        Covariates and errors come from two child streams of ``rng`` (``rng.spawn``),
        each drawn sequentially, so the data — and, through :class:`StatsAccumulator`,
        the statistics — are bit-identical whatever ``chunk_rows`` is.  Memory is
        ``O(chunk_rows * d)``.  With ``dataset``: the data set's statistics (cached,
        read-only, the same object every call; ``rng`` is not used).
        """
        self.check_n(n)
        if not isinstance(rng, np.random.Generator):
            raise TypeError("rng must be a numpy.random.Generator")
        if self.dataset is not None:
            return dataset_stats(self.dataset)
        rng_x, rng_e = rng.spawn(2)
        d = self.d
        acc = StatsAccumulator(d)
        theta = self.theta_star
        clip = self.y_bound if self.protocol == "public_bound" else None
        chunk_rows = int(chunk_rows)
        rows = min(chunk_rows, n)
        U = np.empty((rows, d - 1))
        e = np.empty(rows)
        X = np.empty((rows, d))
        y = np.empty(rows)
        for start in range(0, n, chunk_rows):
            m = min(chunk_rows, n - start)
            rng_x.random(out=U[:m])
            rng_e.standard_normal(out=e[:m])
            _design_block(U[:m], e[:m], theta, X[:m], y[:m])
            if clip is not None:
                np.clip(y[:m], -clip, clip, out=y[:m])
            acc.add(X[:m], y[:m])
        return acc.finish(clip)

    def error(self, estimate: np.ndarray) -> float:
        """Euclidean distance ``||estimate - theta*||_2`` (Algorithm 1, step 8)."""
        return float(np.linalg.norm(np.asarray(estimate, float) - self.theta_star))

    @property
    def data_variables(self) -> dict:
        """Per-data-set store variables: name -> (dims, dtype, fill, attrs)."""
        return {
            "scale": (("n", "replicate"), "float64", np.nan, {"long_name": "scale of Y (R = max|Y| or the public bound)"}),
            "ols_stderr": (
                ("n", "replicate", "coef"),
                "float64",
                np.nan,
                {"long_name": "classical OLS standard errors, original units"},
            ),
        }

    # ------------------------------------------------------------------ audit seam
    def audit_records(self) -> tuple[np.ndarray, np.ndarray]:
        """Records ``(x_1, ..., x_d, y)`` for privacy audits: ``(boundary, fill)``.

        ``boundary``: the corners of the declared domain, ``x`` in ``{-1, 1}^d`` (the
        covariate cube's corners, where the gradient's sensitivity bound is reached) and
        ``y = ±y_max``; the record an audit changes is drawn from these.  ``fill``: the
        other records of an audit data set, ``x`` in ``{-1, 0, 1}^d`` (``d <= 4``; the
        corners and 0 beyond) and ``y`` in ``{-y_max, 0, y_max}``.  ``y_max`` is the
        public bound (1 without one).  Under the ``paper`` protocol ``y`` is unbounded
        and the scale ``max|y|`` depends on the data: boundary records also take
        ``y = ±y_max/10`` and fill records ``y`` in ``{-y_max/10, 0, y_max/10}``, so an
        audit can change ``max|y|`` tenfold with one record.
        """
        ym = float(self.y_bound) if self.y_bound is not None else 1.0
        return response_records(self.d, ym, scale_from_data=self.protocol == "paper")

    def gradient(self, stats: LinearStats, theta: np.ndarray) -> np.ndarray:
        """Gradient of the scaled empirical risk at ``theta``: ``2 (G theta - c)``."""
        return gradient(stats, theta)

    def audit_data(self, records: np.ndarray) -> LinearStats:
        """Mechanism input for a data set given as records ``(m, d + 1)``.

        Applies the problem's protocol: division by the public ``y_bound`` (1 when none
        is set), or — ``paper`` protocol — by ``max|y|`` of these very records.
        """
        records = np.asarray(records, dtype=np.float64)
        if records.ndim != 2 or records.shape[1] != self.d + 1:
            raise ValueError(f"records must have shape (m, d + 1) = (m, {self.d + 1}), got {records.shape}")
        y_bound = None if self.protocol == "paper" else (self.y_bound or 1.0)
        return _stats_from_arrays(records[:, :-1], records[:, -1], y_bound, BLOCK_ROWS, warn=False)

    def data_summary(self, stats: LinearStats) -> dict:
        """``scale`` (R) and the classical OLS standard errors in original units."""
        return {"scale": float(stats.scale), "ols_stderr": ols_stderr(stats)}


#: Largest condition number of ``G`` for which ``G^{-1}`` is used: solving with it loses
#: at most about ``1e8 * 2^-52 ≈ 2e-8`` relative accuracy.
MAX_CONDITION = 1e8


def well_conditioned(G: np.ndarray) -> bool:
    """Whether ``G`` is invertible with condition number at most :data:`MAX_CONDITION`.

    Every release on a data set asks this of the same ``G`` (one per mechanism and ε, and
    the non-private estimate and its standard errors): the answer is cached by ``G``'s
    bytes, which saves an SVD (about 30 µs at d = 4, a tenth of a small-n release) per call.
    """
    G = np.ascontiguousarray(G, dtype=np.float64)
    return _well_conditioned(G.tobytes(), G.shape)


@functools.lru_cache(maxsize=1024)
def _well_conditioned(buffer: bytes, shape: tuple) -> bool:
    return bool(np.linalg.cond(np.frombuffer(buffer).reshape(shape)) <= MAX_CONDITION)


def ols(stats: LinearStats) -> np.ndarray:
    """Unconstrained least squares in scaled units.

    ``G^{-1} c`` when ``G`` is well conditioned; otherwise (a singular or ill-conditioned
    ``X'X``, e.g. every row equal) the minimum-norm least-squares solution
    ``G^+ c = X^+ y'`` (``G theta = c`` is always consistent: ``c = X'y'`` lies in the
    range of ``X'``, which is the range of ``G``).
    """
    if well_conditioned(stats.G):
        return np.linalg.solve(stats.G, stats.c)
    return np.linalg.lstsq(stats.G, stats.c, rcond=None)[0]


def ols_stderr(stats: LinearStats) -> np.ndarray:
    """Classical OLS standard errors ``scale * sqrt(sigma^2 diag(G^{-1}))``, original units.

    ``sigma^2 = RSS / (n - d)`` with ``RSS = yy - c' G^{-1} c``; NaN when ``n <= d`` or
    when ``G`` is singular or ill conditioned (the coefficients are not identified).
    """
    d = stats.d
    if stats.n <= d or not well_conditioned(stats.G):
        return np.full(d, np.nan)
    theta = ols(stats)
    rss = max(stats.yy - float(stats.c @ theta), 0.0)
    sigma2 = rss / (stats.n - d)
    diag = np.diag(np.linalg.inv(stats.G))
    return stats.scale * np.sqrt(sigma2 * diag)

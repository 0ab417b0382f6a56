r"""Bayesian linear regression with a normal–inverse-gamma prior: data, statistic, sensitivity, release.

Model
-----
Records ``(x_i, y_i)``, ``x_i`` in a public record domain of ``R^p`` (``data_norm``: the box
``[-1, 1]^p``, ``"linf"``, or the unit ℓ2 ball, ``"l2"``), design row ``z_i = (1, x_i)`` (column 0
the intercept, as in :mod:`kngflow.models.linear`; ``d = p + 1`` coefficients) and

    y_i = z_i' beta + e_i,   e_i ~ N(0, sigma^2),   sigma^2 unknown,

with the conjugate normal–inverse-gamma prior ``NIG(mu0, Lambda0, a0, b0)``:
``beta | sigma^2 ~ N(mu0, sigma^2 Lambda0^-1)``, ``sigma^2 ~ InvGamma(a0, b0)`` (public options).
The response is clipped to the public ``[-y_bound, y_bound]`` (every mechanism sees the
clipped ``y``; with the defaults ``|z' beta| <= 1``, ``sigma = 1``, ``y_bound = 5`` a response
is clipped with probability below ``6e-5``).  ``n`` is public.

The sufficient statistic
------------------------
With the scaled response ``y' = y / y_bound`` in ``[-1, 1]`` and ``w = (x, y')`` in
``W = domain x [-1, 1]`` (``m = p + 1 = d`` coordinates), the augmented vector is
``a = (1, w)`` and the augmented Gram matrix

    A = sum_i a_i a_i' = [[X'X, X'y'], [y''X, y''y']]    ((d + 1) x (d + 1), A[0, 0] = n)

holds everything the posterior needs (``G = X'X``, ``c = X'y``, ``yy = y'y`` after undoing the
scale).  The released statistic ``T`` is the upper triangle of ``A`` in row-major order
without the constant ``A[0, 0] = n``: ``d_T = (d + 1)(d + 2)/2 - 1`` entries
(:func:`t_dim`; 5 at ``d = 2``: ``sum x, sum y', sum x^2, sum x y', sum y'^2``).  Its
per-record term is ``t(w) = (w_i; w_i w_j, i <= j)`` (:func:`record_t`), so
``T(D) - T(D') = t(w) - t(w')`` for data sets differing in one record.

ℓ1 sensitivity (replace-one, ``n`` public)
-------------------------------------------
Write ``u = w - w'``, ``s = w + w'``.  Then ``w_i - w'_i = u_i`` and
``w_i w_j - w'_i w'_j = (u_i s_j + s_i u_j) / 2``, so

    ||t(w) - t(w')||_1 <= U + (U S + sum_i |u_i| |s_i|) / 2,    U = ||u||_1, S = ||s||_1      (*)

(the diagonal terms are ``|u_i s_i|``; the off-diagonal ones, summed over ``i < j``, at most
``(U S - sum_i |u_i||s_i|) / 2``).

* Box (``W = [-1, 1]^m``).  ``|u_i| + |s_i| = 2 max(|w_i|, |w'_i|) <= 2``, and (*) grows with
  every ``|s_i|``, so put ``|s_i| = 2 - a_i`` (``a_i = |u_i|``):
  ``(*) = (m + 2) U - U^2 / 2 - sum_i a_i^2 / 2``, concave, largest at equal ``a_i = a``:
  ``m (m + 2) a - m (m + 1) a^2 / 2``, maximised at ``a = (m + 2)/(m + 1)`` (inside [0, 2]):

      Delta_1 = m (m + 2)^2 / (2 (m + 1)),   m = d        (16/3 at d = 2, 9.375 at d = 3)

  (:func:`l1_sensitivity`).  It is attained, by ``w = (1, ..., 1)`` against
  ``w' = -(1, ..., 1) / (m + 1)``: every ``u_i = a``, ``s_i = 2 - a`` is positive, so no term of
  (*) cancels.  (Checked numerically by a search over pairs of records; the audit records
  include this pair, :meth:`BayesLinearProblem.audit_records`.)
* Unit ℓ2 ball of covariates (``x`` in ``{||x||_2 <= 1}``, ``|y'| <= 1``).  The ball lies in the
  box, so the box's constant holds; another bound: with ``alpha = ||u_x||_2``,
  ``beta = ||s_x||_2`` (``alpha^2 + beta^2 = 2||x||^2 + 2||x'||^2 <= 4``) and ``a + b <= 2`` for
  the response's ``|u_y|, |s_y|``: ``U <= P = sqrt(p) alpha + a``, ``S <= Q = sqrt(p) beta + b``,
  ``sum |u_i||s_i| <= alpha beta + a b <= 2 + 1`` (Cauchy–Schwarz), and
  ``P + Q <= sqrt(2p) * 2 + 2``; ``P + P Q / 2`` with ``Q = K - P`` is at most ``(K + 2)^2 / 8``, so

      Delta_1 <= (sqrt(2p) + 2)^2 / 2 + 3/2 = p + 2 sqrt(2p) + 7/2.

  The model takes the smaller of the two (:func:`l1_sensitivity`): the box's at ``d <= 3``
  (at ``d = 2`` the ball is the interval ``[-1, 1]``, the same domain, exact), 11.40 at
  ``d = 4`` and 13.16 at ``d = 5``, against numerical suprema of about 8.17, 9.61 and 11.09 at
  ``d = 3, 4, 5`` (a local search over pairs): valid, up to 20 % above the tight constant.

Release (declared by the problem, as :mod:`kngflow.models.bayes` declares its own)
---------------------------------------------------------------------------------
A posterior summary of ONE coefficient, ``beta_j`` with ``j = coef`` (default 1, the first
slope), stored as the problem's ``d`` release entries:

* ``summary = "interval"`` (default): 3 entries ``(mean, lower, upper)``, the posterior mean
  of ``beta_j`` and the equal-tailed credible interval at ``level`` (default 0.9);
* ``summary = "point"``: 1 entry, the posterior mean (the audits' view).

``theta_star`` is ``beta_j`` repeated.  Error measures, as the Beta–Bernoulli model's:
``"abs"`` (``|mean - beta_j|``), ``"miss"`` (1 when ``beta_j`` lies outside the interval;
its mean is ``1 - coverage``) and ``"width"``.
"""

from __future__ import annotations

import functools
import math
from numbers import Real
from typing import NamedTuple

import numpy as np

from kngflow.problems.base import check_finite_positive
from kngflow.problems.summary import ERROR_MEASURES, SUMMARIES, PosteriorSummary, check_level, check_summary
from kngflow.problems.domains import RecordDomain, response_records

__all__ = ["NIGPrior", "BayesLinearData", "BayesLinearProblem", "bayes_linear_data", "check_bayes_linear_data",
           "nig_prior", "t_dim", "t_layout", "record_t", "stats_t", "augmented", "l1_sensitivity",
           "extreme_records", "DATA_NORMS", "ERROR_MEASURES", "SUMMARIES", "BLOCK_ROWS"]

#: the record domains of the covariates: the box [-1, 1]^p or the unit ℓ2 ball
DATA_NORMS = ("linf", "l2")
#: rows simulated and folded into ``A`` at a time (fixed: the statistic does not depend on memory)
BLOCK_ROWS = 1 << 16


# ----------------------------------------------------------------------------- the statistic
def t_dim(d: int) -> int:
    """``d_T = (d + 1)(d + 2)/2 - 1``: the entries of ``T`` for ``d`` coefficients (intercept included)."""
    return (d + 1) * (d + 2) // 2 - 1


def t_layout(d: int) -> tuple[np.ndarray, np.ndarray]:
    """``(i, j)``: the entries ``A[i, j]`` (``i <= j``, row-major, ``(0, 0)`` left out) that make ``T``."""
    return _layout(int(d))


@functools.lru_cache(maxsize=None)
def _layout(d: int) -> tuple[np.ndarray, np.ndarray]:
    i, j = np.triu_indices(d + 1)
    i, j = i[1:], j[1:]
    i.setflags(write=False)
    j.setflags(write=False)
    return i, j


def record_t(w: np.ndarray) -> np.ndarray:
    """Per-record terms ``t(w)`` (k, d_T) of scaled records ``w = (x, y')`` (k, d)."""
    w = np.atleast_2d(np.asarray(w, dtype=np.float64))
    a = np.hstack([np.ones((w.shape[0], 1)), w])
    i, j = t_layout(w.shape[1])
    return a[:, i] * a[:, j]


def stats_t(A: np.ndarray) -> np.ndarray:
    """``T`` (d_T,) read off the augmented Gram matrix ``A`` ((d + 1) x (d + 1))."""
    A = np.asarray(A, dtype=np.float64)
    i, j = t_layout(A.shape[0] - 1)
    return A[i, j].copy()


def augmented(T: np.ndarray, n: float, d: int) -> np.ndarray:
    """The symmetric ``A`` with ``A[0, 0] = n`` whose upper triangle is ``T`` (a noisy ``T`` too)."""
    A = np.empty((d + 1, d + 1))
    A[0, 0] = float(n)
    i, j = t_layout(d)
    A[i, j] = T
    A[j, i] = T
    return A


def l1_sensitivity(d: int, data_norm: str = "linf") -> float:
    """ℓ1 sensitivity of ``T`` under replace-one (module docstring): ``m (m + 2)^2 / (2 (m + 1))``
    with ``m = d`` for the box; for the ℓ2 ball the smaller of that and ``p + 2 sqrt(2p) + 7/2``."""
    m = d
    box = m * (m + 2) ** 2 / (2.0 * (m + 1))
    if data_norm == "linf":
        return box
    p = d - 1
    return min(box, p + 2.0 * math.sqrt(2.0 * p) + 3.5)


def extreme_records(d: int, data_norm: str = "linf") -> np.ndarray:
    """Scaled records ``w = (x, y')`` (4, d) of the pair that attains the box's sensitivity,
    ``±(1, ..., 1)`` and ``∓(1, ..., 1)/(d + 1)`` (the ℓ2 ball: ``x`` rescaled onto it)."""
    one = np.ones(d)
    if data_norm == "l2":
        one[:-1] /= math.sqrt(d - 1)
    return np.vstack([one, -one, -one / (d + 1), one / (d + 1)])


# ----------------------------------------------------------------------------- the prior
class NIGPrior(NamedTuple):
    """``beta | sigma^2 ~ N(mu0, sigma^2 precision^-1)``, ``sigma^2 ~ InvGamma(a0, b0)`` (original units)."""

    mu0: np.ndarray
    precision: np.ndarray
    a0: float
    b0: float

    @property
    def d(self) -> int:
        return self.mu0.shape[0]


def nig_prior(d: int, mu0=None, precision=0.1, a0: float = 1.0, b0: float = 1.0) -> NIGPrior:
    """A validated :class:`NIGPrior`.  ``mu0``: list of ``d`` numbers (None: zeros);
    ``precision``: a number ``lambda`` (``Lambda0 = lambda I``), a list of ``d`` numbers (a diagonal)
    or a ``d x d`` symmetric positive definite list of lists; ``a0, b0 > 0``."""
    mu = np.zeros(d) if mu0 is None else np.asarray(mu0, dtype=np.float64)
    if mu.shape != (d,) or not np.all(np.isfinite(mu)):
        raise ValueError(f"mu0 must be a list of d={d} finite numbers, got {mu0!r}")
    if isinstance(precision, Real) and not isinstance(precision, bool):
        lam = check_finite_positive("prior_precision", precision) * np.eye(d)
    else:
        lam = np.asarray(precision, dtype=np.float64)
        if lam.shape == (d,):
            lam = np.diag(lam)
        ok = lam.shape == (d, d) and np.all(np.isfinite(lam)) and np.allclose(lam, lam.T)
        if ok:
            try:
                np.linalg.cholesky(lam)
            except np.linalg.LinAlgError:
                ok = False
        if not ok:
            raise ValueError(f"prior_precision must be a number > 0, a list of d={d} numbers > 0 or a symmetric "
                             f"positive definite d x d matrix, got {precision!r}")
    return NIGPrior(mu, np.ascontiguousarray(lam), check_finite_positive("a0", a0), check_finite_positive("b0", b0))


# ----------------------------------------------------------------------------- the data
class BayesLinearData(NamedTuple):
    """A data set as its augmented Gram matrix ``A`` (scaled response ``y' = y / y_bound``), with the
    public facts every mechanism needs: ``n``, the bound, the domain, the prior, the credible
    ``level``, the coefficient ``coef`` summarised and whether the release carries the interval."""

    A: np.ndarray
    n: int
    y_bound: float
    data_norm: str
    prior: NIGPrior
    level: float = 0.9
    coef: int = 1
    interval: bool = True

    @property
    def d(self) -> int:
        """Coefficients of the regression (intercept included)."""
        return self.A.shape[0] - 1

    @property
    def release_size(self) -> int:
        """Entries of a release: 3 with the interval, 1 without."""
        return 3 if self.interval else 1

    def original(self) -> tuple[np.ndarray, np.ndarray, float]:
        """``(G, c, yy) = (X'X, X'y, y'y)`` in the response's original units."""
        d, B = self.d, self.y_bound
        return self.A[:d, :d].copy(), self.A[:d, d] * B, float(self.A[d, d]) * B * B


def _check_coef(coef, d: int) -> int:
    if isinstance(coef, bool) or not isinstance(coef, (int, np.integer)) or not 0 <= coef < d:
        raise ValueError(f"coef must be an integer in [0, d) = [0, {d}), got {coef!r}")
    return int(coef)


def _check_data_norm(data_norm) -> str:
    if data_norm not in DATA_NORMS:
        raise ValueError(f"data_norm must be one of {list(DATA_NORMS)}, got {data_norm!r}")
    return data_norm


def check_bayes_linear_data(data) -> BayesLinearData:
    """Validate :class:`BayesLinearData`: ``A`` symmetric ``(d + 1) x (d + 1)``, ``d >= 2``,
    ``A[0, 0] = n``, entries within the domain's bounds (``|A_ij| <= n``, a non-negative
    diagonal), a prior of dimension ``d``, ``level`` in (0, 1) and ``coef`` in ``[0, d)``."""
    if not isinstance(data, BayesLinearData):
        raise TypeError("data must be a kngflow.models.bayes_linear.problem.BayesLinearData, "
                        f"got {type(data).__name__}")
    A, n = data.A, data.n
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"data.n must be an integer >= 1, got {n!r}")
    if not isinstance(A, np.ndarray) or A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] < 3:
        raise ValueError(f"data.A must be a square (d + 1) x (d + 1) array with d >= 2, got {np.shape(A)}")
    tol = 1e-9 * n
    if A[0, 0] != n or not np.all(np.isfinite(A)) or np.abs(A - A.T).max() > tol:
        raise ValueError(f"data.A must be symmetric and finite with A[0, 0] = n = {n}")
    if np.abs(A).max() > n + tol or np.diag(A).min() < -tol:
        raise ValueError(f"data.A must have every |A_ij| <= n = {n} and a non-negative diagonal "
                         "(covariates and scaled response in [-1, 1])")
    check_finite_positive("data.y_bound", data.y_bound)
    _check_data_norm(data.data_norm)
    if not isinstance(data.prior, NIGPrior) or data.prior.d != data.d:
        raise ValueError(f"data.prior must be a NIGPrior of dimension d = {data.d}")
    check_level(data.level)
    _check_coef(data.coef, data.d)
    return data


def bayes_linear_data(x, y, *, y_bound: float, data_norm: str = "linf", mu0=None, prior_precision=0.1,
                      a0: float = 1.0, b0: float = 1.0, level: float = 0.9, coef: int = 1,
                      interval: bool = True) -> BayesLinearData:
    """A user's records as mechanism input: covariates ``x`` (n, p) in the declared domain (the box
    ``[-1, 1]^p`` or the unit ℓ2 ball: a row outside is a ValueError naming ``x``; rescale with public
    bounds), responses ``y`` (n,) clipped to the public ``[-y_bound, y_bound]``.  The intercept
    column is added here (``d = p + 1``).  The prior and the release options as
    :class:`BayesLinearProblem`'s."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    y = np.asarray(y, dtype=np.float64).ravel()
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0 or y.shape != (x.shape[0],):
        raise ValueError(f"x must be (n, p) with p >= 1 and y (n,), got {x.shape} and {y.shape}")
    if not np.all(np.isfinite(y)):
        raise ValueError("y: every response must be finite")
    B = check_finite_positive("y_bound", y_bound)
    RecordDomain(_check_data_norm(data_norm), 1.0).require(np.ascontiguousarray(x), "x")
    d = x.shape[1] + 1
    A = np.zeros((d + 1, d + 1))
    for start in range(0, x.shape[0], BLOCK_ROWS):
        xb, yb = x[start:start + BLOCK_ROWS], y[start:start + BLOCK_ROWS]
        _fold(A, xb, np.clip(yb, -B, B) / B)
    A[0, 0] = float(x.shape[0])
    prior = nig_prior(d, mu0, prior_precision, a0, b0)
    return BayesLinearData(A, int(x.shape[0]), B, data_norm, prior, check_level(level), _check_coef(coef, d),
                           bool(interval))


def _fold(A: np.ndarray, x: np.ndarray, ys: np.ndarray) -> None:
    """``A += sum a a'`` over the rows ``a = (1, x, y')`` of one block."""
    m, p = x.shape
    Z = np.empty((m, p + 2))
    Z[:, 0] = 1.0
    Z[:, 1:p + 1] = x
    Z[:, p + 1] = ys
    A += Z.T @ Z


# ----------------------------------------------------------------------------- the problem
class BayesLinearProblem(PosteriorSummary):
    """Linear regression with a NIG prior; the posterior summary of one coefficient released.

    Parameters
    ----------
    d : int >= 2, coefficients including the intercept (default 2: intercept and one slope).
    beta : list of d numbers, the true coefficients (default ``(0, -1)`` at ``d = 2``; the
        KNG paper's ``(0, -1, -1 + 2/(d-1), ...)`` in general).
    sigma : float > 0, the noise standard deviation (default 1).
    y_bound : float > 0, the public bound the response is clipped to (default 5).
    data_norm : "linf" (covariates uniform in the box ``[-1, 1]^p``, default) or "l2" (uniform
        in the unit ℓ2 ball): the declared record domain.
    mu0, prior_precision, a0, b0 : the public NIG prior (default ``mu0 = 0``, ``Lambda0 = 0.1 I``,
        ``a0 = b0 = 1``), in the response's original units.
    level : float in (0, 1), the credible level (default 0.9).
    coef : int, the coefficient summarised (default 1, the first slope).
    summary : "interval" (``(mean, lower, upper)``) or "point" (the posterior mean).
    error_measure : "abs", "miss" or "width" (the last two need ``summary = "interval"``).
    """

    #: the audits see the 1-D release (the posterior mean)
    audit_defaults = {"summary": "point"}

    def __init__(self, *, d: int = 2, beta=None, sigma: float = 1.0, y_bound: float = 5.0, data_norm: str = "linf",
                 mu0=None, prior_precision=0.1, a0: float = 1.0, b0: float = 1.0, level: float = 0.9,
                 coef: int = 1, summary: str = "interval", error_measure: str = "abs"):
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 2:
            raise ValueError(f"d must be an integer >= 2 (an intercept and at least one slope), got {d!r}")
        self.dim = int(d)
        if beta is None:
            beta = np.concatenate([[0.0], -1.0 + 2.0 * np.arange(d - 1) / (d - 1)])
        b = np.asarray(beta, dtype=np.float64) if isinstance(beta, (list, tuple, np.ndarray)) else None
        if b is None or b.shape != (d,) or not np.all(np.isfinite(b)):
            raise ValueError(f"beta must be a list of d={d} finite numbers, got {beta!r}")
        self.beta = b
        self.sigma = check_finite_positive("sigma", sigma)
        self.y_bound = check_finite_positive("y_bound", y_bound)
        self.data_norm = _check_data_norm(data_norm)
        self.prior = nig_prior(self.dim, mu0, prior_precision, a0, b0)
        self.level = check_level(level)
        self.coef = _check_coef(coef, self.dim)
        summary, error_measure = check_summary(summary, error_measure)
        self.summary, self.error_measure = summary, error_measure

    def __repr__(self) -> str:
        return (f"BayesLinearProblem(d={self.dim}, beta={self.beta.tolist()}, sigma={self.sigma:g}, "
                f"y_bound={self.y_bound:g}, data_norm={self.data_norm!r}, coef={self.coef}, "
                f"summary={self.summary!r}, error_measure={self.error_measure!r})")

    # -- the contract ---------------------------------------------------------------------
    @property
    def truth(self) -> float:
        return float(self.beta[self.coef])

    @property
    def loglog_slopes(self) -> bool:  # type: ignore[override]
        """A miss rate or a width has no power law in ``n`` worth a slope; ``|mean - beta_j|`` has."""
        return self.error_measure == "abs"

    @property
    def error_rate_in_n(self) -> float | None:  # type: ignore[override]
        return -0.5 if self.error_measure == "abs" else None

    @property
    def caveats(self) -> str:
        what = (f"(posterior mean, lower, upper) of the {self.level:g} equal-tailed credible interval of "
                f"beta_{self.coef}"
                if self.interval else f"the posterior mean of beta_{self.coef}")
        p = self.prior
        return (f"y = (1, x)'beta + N(0, sigma^2), beta = {self.beta.tolist()}, sigma = {self.sigma:g}, x uniform in "
                f"the {'box [-1, 1]^p' if self.data_norm == 'linf' else 'unit l2 ball'} (p = {self.dim - 1}); "
                "y clipped "
                f"to [-{self.y_bound:g}, {self.y_bound:g}] (public bound); NIG prior mu0 = {p.mu0.tolist()}, "
                f"Lambda0 = {p.precision.tolist()}, a0 = {p.a0:g}, b0 = {p.b0:g}; data kept as the augmented Gram "
                f"matrix [X y]'[X y]; the estimate is {what}; error = {self.error_measure}.")

    @property
    def error_label(self) -> str:
        if self.error_measure == "miss":
            return f"miss rate of the {self.level:g} credible interval of β_{self.coef} (1 − coverage)"
        if self.error_measure == "width":
            return f"width of the {self.level:g} credible interval of β_{self.coef}"
        return f"|posterior mean − β_{self.coef}|"

    @property
    def reference_lines(self) -> list:
        """``miss``: the nominal ``1 - level``; ``abs``: the prior mean's error; ``width``: the
        prior's interval width (``beta_j`` is Student t with ``2 a0`` degrees of freedom a priori)."""
        if self.error_measure == "miss":
            return [(round(1.0 - self.level, 12), f"nominal miss rate 1 − {self.level:g}")]
        p, j = self.prior, self.coef
        if self.error_measure == "width":
            from scipy.special import stdtrit

            scale = math.sqrt(p.b0 / p.a0 * np.linalg.inv(p.precision)[j, j])
            return [(float(2.0 * scale * stdtrit(2.0 * p.a0, (1.0 + self.level) / 2.0)), "the prior's interval")]
        return [(abs(float(p.mu0[j]) - float(self.beta[j])), "prior mean")]

    def check_n(self, n: int) -> None:
        """An integer ``n > d`` (the residual sum of squares has ``n - d`` degrees of freedom)."""
        super().check_n(n)
        if n <= self.dim:
            raise ValueError(f"n must be larger than d={self.dim}, got n={n}")

    def simulate(self, n: int, rng: np.random.Generator) -> BayesLinearData:
        """``n`` records folded into ``A`` in blocks of :data:`BLOCK_ROWS` rows (one block's
        covariates, then its noise, drawn from ``rng``): ``x`` uniform in the domain,
        ``y = (1, x)'beta + sigma e`` clipped to ``[-y_bound, y_bound]``."""
        self.check_n(n)
        p = self.dim - 1
        A = np.zeros((self.dim + 1, self.dim + 1))
        for start in range(0, n, BLOCK_ROWS):
            m = min(BLOCK_ROWS, n - start)
            if self.data_norm == "linf":
                x = rng.uniform(-1.0, 1.0, (m, p))
            else:  # uniform in the ball: a uniform direction times U^(1/p)
                g = rng.standard_normal((m, p))
                x = g / np.linalg.norm(g, axis=1, keepdims=True) * rng.uniform(0.0, 1.0, (m, 1)) ** (1.0 / p)
            y = self.beta[0] + x @ self.beta[1:] + self.sigma * rng.standard_normal(m)
            _fold(A, x, np.clip(y, -self.y_bound, self.y_bound) / self.y_bound)
        A[0, 0] = float(n)
        return BayesLinearData(A, int(n), self.y_bound, self.data_norm, self.prior, self.level, self.coef,
                               self.interval)

    # -- audits ---------------------------------------------------------------------------
    def audit_records(self) -> tuple[np.ndarray, np.ndarray]:
        """``(boundary, fill)`` records ``(x_1, ..., x_p, y)`` in original units: the domain's
        records with ``y`` at ``±y_bound`` (and 0 in the fill), plus the pair that attains the
        box's sensitivity (:func:`extreme_records`)."""
        p = self.dim - 1
        boundary, fill = response_records(p, self.y_bound, domain=RecordDomain(self.data_norm, 1.0))
        extreme = extreme_records(self.dim, self.data_norm) * np.r_[np.ones(p), self.y_bound]
        return np.vstack([boundary, extreme]), fill

    def audit_data(self, records: np.ndarray) -> BayesLinearData:
        """Mechanism input for a data set given as records ``(k, p + 1)`` of the declared domain."""
        r = np.atleast_2d(np.asarray(records, dtype=np.float64))
        p = self.dim - 1
        x = np.ascontiguousarray(r[:, :p])
        RecordDomain(self.data_norm, 1.0).require(x, "records")
        A = np.zeros((self.dim + 1, self.dim + 1))
        _fold(A, x, np.clip(r[:, p], -self.y_bound, self.y_bound) / self.y_bound)
        A[0, 0] = float(len(r))
        return BayesLinearData(A, len(r), self.y_bound, self.data_norm, self.prior, self.level, self.coef,
                               self.interval)

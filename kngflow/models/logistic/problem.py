"""Logistic regression (Awan & Slavković, Algorithm 3): data, loss, gradient, sensitivities.

Model
-----
Records ``(x_i, y_i)`` with ``x_i`` in a declared public ball of ``R^m`` (no intercept
column: Algorithm 3 draws every ``X_ij ~ U[-1, 1]``) and ``y_i`` in ``{0, 1}``;
``P(y_i = 1) = sigma(x_i' beta)``, ``sigma(t) = 1 / (1 + e^-t)``.  The loss and its
gradient are

    l_n(beta) = sum_i log(1 + exp(x_i' beta)) - y_i x_i' beta,
    grad l_n(beta) = sum_i x_i (sigma(x_i' beta) - y_i).

There are no sufficient statistics; the data are kept (one ``n x m`` array).

Record domain
-------------
The covariates lie in ``{||x||_D <= r}`` (:class:`~kngflow.problems.domains.RecordDomain`;
the problem's options ``data_norm`` = ``D`` in {"l1", "l2", "linf"} and ``radius`` = ``r``).
The default, ``data_norm = "linf"``, ``radius = 1``, is the box ``[-1, 1]^m`` of Algorithm 3;
``"l2"`` declares rows in a Euclidean ball (e.g. rows normalised to ``||x||_2 <= 1``).
Every constant below is a supremum of a norm of ``x`` over the ball, written with
``R_K = sup{||x||_K : ||x||_D <= r} = r c_K`` (:mod:`kngflow.problems.domains`): for the
box ``R_∞ = 1``, ``R_2 = sqrt(m)``, ``R_1 = m``; for the unit ℓ2 ball ``R_∞ = R_2 = 1``,
``R_1 = sqrt(m)``; for the ℓ1 ball of radius ``r`` every ``R_K = r``.

Sensitivities (derived here)
----------------------------
One record contributes ``x_i (sigma(x_i' beta) - y_i)`` with ``|sigma - y| < 1``, so two
records differ by at most ``||x||_K + ||x'||_K <= 2 R_K``: ``Delta_K = 2 R_K``
(:func:`gradient_sensitivity`; box: ``Delta_inf = 2``, ``Delta_2 = 2 sqrt(m)``,
``Delta_1 = 2 m``, the values the paper uses (§5); unit ℓ2 ball: ``Delta_inf = Delta_2 = 2``,
``Delta_1 = 2 sqrt(m)``) — for every ``beta``.  They are the suprema: for the box
``x = (1, ..., 1)``, ``y = 0`` against ``x' = (1, ..., 1, 1 - delta)``, ``y' = 1``, with
``x'beta -> +inf`` and ``x''beta -> -inf``, gives a difference tending to ``x + x'`` (the
paper calls the last two approximate); in any ball two records near the point attaining
``R_K`` do the same.  The suprema are
approached only as ``|x'beta| -> inf``; on a bounded ``Theta`` the attained sensitivity is
smaller (``|sigma - y| <= sigma(B)`` and, for ℓ1/ℓ2, nearly collinear records), so these
``Delta`` are valid but conservative there.  One record's Hessian ``sigma (1 - sigma) x x'``
has eigenvalues at most ``||x||_2^2 / 4 <= R_2^2 / 4`` (``m / 4`` for the box, ``r^2 / 4``
for an ℓ1 or ℓ2 ball): the bound ``lambda`` of objective perturbation
(:func:`hessian_bound`).  As
``||beta|| -> inf`` the gradient tends to ``sum_i x_i (1{x_i' beta > 0} - y_i)``, which
does not grow, so KNG's density does not decay: ``Theta`` is bounded (uniform base on
``{||beta||_1 <= B}``; ``||beta*||_1 = 4`` in Algorithm 3).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from kngflow._jit import jit
from kngflow.kernels.dd import EXP_DD_REL, UNIT, dd_add_dd, dd_div, exp_dd
from kngflow.problems.base import SimulatedProblem, check_vector
from kngflow.problems.declared import BETA_DIMENSION, DECLARED_DOMAIN, TRUE_BETA
from kngflow.problems.domains import NORMS, RecordDomain, record_domain
from kngflow.problems.linear_terms import (add_outer_lower, add_row_dd, largest, mirror_lower, row_dot, row_dot_dd,
                                           start_dd_sum, zero_matrix)
from kngflow.problems.logistic_law import BOX, box_design, logistic_labels
from kngflow.problems.records import design_matrix, labelled_records
from kngflow.problems.rows import D_COLUMNS, N_ROWS

__all__ = [
    "BOX",
    "LogisticData",
    "LogisticProblem",
    "logistic_data",
    "gradient_sensitivity",
    "hessian_bound",
    "logistic_gradient",
    "logistic_gradient_dd",
    "logistic_hessian",
    "logistic_loss",
    "logistic_mle",
    "perturbed_minimiser",
    "PAPER_BETA",
    "dataset_data",
    "dataset_mle",
]

#: Algorithm 3's coefficients (m = 7)
PAPER_BETA = (0.0, -1.0, -0.5, -0.25, 0.0, 0.75, 1.5)


class LogisticData(NamedTuple):
    """``X`` (n, m) C-contiguous float64 with rows in the declared ball ``{||x||_data_norm <=
    radius}`` (default the box ``[-1, 1]^m``); ``y`` (n,) float64 in ``{0, 1}``."""

    X: np.ndarray
    y: np.ndarray
    radius: float = 1.0
    data_norm: str = "linf"

    domain = DECLARED_DOMAIN
    n = N_ROWS
    d = D_COLUMNS


def logistic_data(X, y, *, radius=1.0, data_norm="linf") -> LogisticData:
    """Validate a user's data: ``X`` (n, m) finite with rows in the declared ball
    ``{||x||_data_norm <= radius}`` (default the box ``[-1, 1]^m``), ``y`` (n,) in ``{0, 1}``.

    Raises ValueError naming ``X``, ``y``, ``data_norm`` or ``radius``."""
    domain = record_domain(data_norm, radius)
    X = design_matrix(X)
    if domain == BOX:
        if not (X.min() >= -1.0 and X.max() <= 1.0):  # NaN fails both; no copy of X
            raise ValueError("X must be finite and in [-1, 1] (rescale the covariates with public bounds)")
    else:
        domain.require(X)
    y = np.asarray(y, dtype=np.float64)
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have shape ({X.shape[0]},), got {y.shape}")
    if not np.all((y == 0.0) | (y == 1.0)):
        raise ValueError("y must hold only 0 and 1")
    return LogisticData(X, np.ascontiguousarray(y), domain.radius, domain.data_norm)


def gradient_sensitivity(norm: str, m: int, domain: RecordDomain = BOX) -> float:
    """``Delta_K = 2 R_K = 2 sup{||x||_K : x in the domain}`` (module docstring).

    Box (default): 2 (ℓ∞), ``2 sqrt(m)`` (ℓ2), ``2 m`` (ℓ1); ℓ2 ball of radius ``r``:
    ``2 r`` (ℓ∞, ℓ2), ``2 r sqrt(m)`` (ℓ1); ℓ1 ball: ``2 r`` in every norm."""
    if norm not in NORMS:
        raise KeyError(norm)
    return 2.0 * domain.reach(norm, m)


def hessian_bound(m: int, domain: RecordDomain = BOX) -> float:
    """``lambda = R_2^2 / 4``: the largest eigenvalue of one record's Hessian
    ``sigma(1 - sigma) x x'`` (``sigma' <= 1/4``, ``||x||_2^2 <= R_2^2``): ``m / 4`` for the
    box, ``r^2 / 4`` for an ℓ1 or ℓ2 ball of radius ``r``."""
    return domain.squared_l2_reach(m) / 4.0


@jit
def _log1pexp(t):
    return t + math.log1p(math.exp(-t)) if t > 0.0 else math.log1p(math.exp(t))


@jit
def logistic_gradient(beta, args, g):
    """``g = sum_i x_i (sigma(x_i' beta) - y_i)`` in ``O(n m)``; ``args = (X, y)``."""
    X, y = args
    n, m = X.shape
    for j in range(m):
        g[j] = 0.0
    for i in range(n):
        w = 1.0 / (1.0 + math.exp(-row_dot(X, i, beta))) - y[i]
        for j in range(m):
            g[j] += w * X[i, j]


@jit
def logistic_hessian(beta, X, H):
    """``H = sum_i sigma_i (1 - sigma_i) x_i x_i'`` in ``O(n m^2)``, no ``n x m`` temporary."""
    zero_matrix(H)
    for i in range(X.shape[0]):
        p = 1.0 / (1.0 + math.exp(-row_dot(X, i, beta)))
        add_outer_lower(H, X, i, p * (1.0 - p))
    mirror_lower(H)


@jit
def logistic_gradient_dd(hi, lo, X, y, gh, gl):
    """``g = sum_i x_i (sigma(x_i' beta) - y_i)`` at ``beta = hi + lo`` in double-double into
    ``gh + gl``; returns a bound on ``max_j |g_computed_j - g_exact_j|``.

    Per record: ``t = x_i' beta`` from exact products (within ``δt = u sum_j |x_ij lo_j| +
    8 (m + 2) u^2 sum_j |x_ij| (|hi_j| + |lo_j|)``, as :func:`~kngflow.kernels.certified.residual_dd`);
    ``e = exp(-|t|)`` by :func:`~kngflow.kernels.dd.exp_dd`; ``w = sigma(t) - y_i`` as
    ``±1 / (1 + e)`` or ``±e / (1 + e)`` (never a difference of nearly equal numbers).  ``w``
    moves by at most ``|Δe|`` per ``Δe`` and by ``|Δt| / 4`` per ``Δt``, and the double-double
    sum and quotient err by ``12 u^2`` relative, so ``|Δw| <= EXP_DD_REL + 12 u^2 + δt / 4``
    (plus ``2^-1074`` where ``e`` is subnormal).  Each ``w x_ij`` is an exact product
    plus one rounded one (``u |w_lo x_ij|``), and each double-double addition to the running
    sum ``S`` errs by at most ``2 u^2 |S|``, which is accumulated as it goes.
    """
    err = start_dd_sum(gh, gl)
    tiny = 2.0**-1074
    for i in range(X.shape[0]):
        th, tl, dt = row_dot_dd(X, i, hi, lo)
        if th >= 0.0:
            eh, el = exp_dd(-th, -tl)
        else:
            eh, el = exp_dd(th, tl)
        dh, dl = dd_add_dd(1.0, 0.0, eh, el)
        # sigma - y: t >= 0: 1/(1+e) - y; t < 0: e/(1+e) - y
        if (th >= 0.0) == (y[i] == 1.0):
            wh, wl = dd_div(eh, el, dh, dl)  # t >= 0, y = 1: -e/(1+e); t < 0, y = 0: e/(1+e)
        else:
            wh, wl = dd_div(1.0, 0.0, dh, dl)  # t >= 0, y = 0: 1/(1+e); t < 0, y = 1: -1/(1+e)
        if y[i] == 1.0:
            wh, wl = -wh, -wl
        add_row_dd(gh, gl, err, X, i, wh, wl, EXP_DD_REL + 12.0 * UNIT * UNIT + 0.25 * dt + tiny)
    return largest(err)


@jit
def logistic_loss(beta, args):
    """``sum_i log(1 + exp(x_i' beta)) - y_i x_i' beta`` in ``O(n m)``; ``args = (X, y)``."""
    X, y = args
    s = 0.0
    for i in range(X.shape[0]):
        t = row_dot(X, i, beta)
        s += _log1pexp(t) - y[i] * t
    return s


def logistic_mle(data: LogisticData, *, tol: float = 1e-10, max_iter: int = 100) -> np.ndarray:
    """The maximum-likelihood estimate by Newton's method with step halving, from 0.

    Stops when the Newton decrement is below ``tol``.  Where the MLE does not exist
    (separated data: the loss decreases without bound along a direction) the iteration
    stops after ``max_iter`` steps and returns its last iterate, a large finite vector,
    so a simulation study still gets a (poor) non-private estimate.
    """
    X, y = data.X, data.y
    beta = np.zeros(data.d)
    loss = logistic_loss(beta, (X, y))
    g = np.empty(data.d)
    H = np.empty((data.d, data.d))
    for _ in range(max_iter):
        logistic_gradient(beta, (X, y), g)
        logistic_hessian(beta, X, H)
        try:
            step = np.linalg.solve(H, g)
        except np.linalg.LinAlgError:
            step = np.linalg.lstsq(H, g, rcond=None)[0]
        if not np.all(np.isfinite(step)) or float(g @ step) < tol:
            break
        t = 1.0
        while t > 1e-12:
            new = beta - t * step
            new_loss = logistic_loss(new, (X, y))
            if new_loss <= loss:
                break
            t /= 2.0
        else:
            break
        beta, loss = new, new_loss
    return beta


def perturbed_minimiser(X, y, gamma, V, tol_abs, max_iter):
    """``argmin F``, ``F(theta) = sum_i l(theta; x_i, y_i) + gamma/2 |theta|^2 + V'theta``
    (``gamma > 0``), by Newton's method with backtracking from 0.

    Stops when ``||grad F||_2 <= tol_abs``, or when the Newton decrement ``grad' H^-1 grad / 2``
    (the decrease a full step would bring) is below the rounding of ``F`` — with ``n``
    near 10^6 the summed gradient cannot be computed more finely than about 1e-9 n; either
    way, by ``gamma``-strong convexity, the iterate is within ``||grad F|| / gamma`` of the
    exact minimiser.  Steps are solved through
    the eigendecomposition of the data Hessian (eigenvalues clipped at 0), so rank-deficient
    designs are fine; where ``F`` no longer resolves the decrease (rounding), a step is
    accepted when it decreases ``||grad F||``.  Returns ``(theta, iterations, converged)``;
    ``converged`` is False when ``max_iter`` steps or floating-point resolution (no
    decrease left, or steps below 1e-13 of ``||theta||``: huge releases of rank-deficient
    designs at huge eps) stopped it first."""
    d = X.shape[1]
    theta = np.zeros(d)
    g = np.empty(d)
    H = np.empty((d, d))
    args = (X, y)

    def objective(t):
        return logistic_loss(t, args) + 0.5 * gamma * float(t @ t) + float(V @ t)

    f = objective(theta)
    for it in range(max_iter + 1):
        logistic_gradient(theta, args, g)
        grad = g + gamma * theta + V
        if float(np.linalg.norm(grad)) <= tol_abs:
            return theta, it, True
        if it == max_iter:
            break
        logistic_hessian(theta, X, H)
        lam, Q = np.linalg.eigh(H)
        step = Q @ ((Q.T @ grad) / (np.maximum(lam, 0.0) + gamma))
        if 0.5 * float(grad @ step) <= 1e-15 * (abs(f) + 1.0):
            return theta, it, True  # Newton decrement below F's rounding: nothing left to gain
        t = 1.0
        while True:
            new = theta - t * step
            fn = objective(new)
            if fn <= f:
                break
            if fn - f <= 1e-14 * (abs(f) + 1.0):  # at rounding level of F: judge by the gradient
                gn = np.empty(d)
                logistic_gradient(new, args, gn)
                if np.linalg.norm(gn + gamma * new + V) < np.linalg.norm(grad):
                    break
            t /= 2.0
            if t < 1e-10:
                return theta, it, False
        if np.array_equal(new, theta):
            return theta, it, False
        if t * float(np.linalg.norm(step)) <= 1e-13 * (1.0 + float(np.linalg.norm(theta))):
            return new, it + 1, False  # steps at the floating-point resolution of theta
        theta, f = new, fn
    return theta, max_iter, False



@functools.cache
def dataset_data(name: str) -> LogisticData:
    """The real data set ``name`` (:mod:`kngflow.models.logistic.datasets`) as :class:`LogisticData`:
    read once per process, read-only arrays shared by every replicate (no mechanism writes them)."""
    from kngflow.models.logistic.datasets import load_dataset

    data = load_dataset(name)
    return LogisticData(data.X, data.y)


@functools.cache
def dataset_mle(name: str) -> np.ndarray:
    """The non-private MLE on the real data set ``name`` (computed once per process; read-only)."""
    beta = logistic_mle(dataset_data(name))
    beta.setflags(write=False)
    return beta


@dataclass(frozen=True, kw_only=True)
class LogisticProblem(SimulatedProblem):
    """Simulated logistic regression (Awan & Slavković, Algorithm 3) — or a real data set.

    ``X_ij ~ U[-1, 1]``, ``U_i ~ U[0, 1]``, ``Y_i = 1{U_i < sigma(x_i' beta)}``.

    With ``dataset`` the data are a fixed real data set, preprocessed once per process
    (:mod:`kngflow.models.logistic.datasets`): ``simulate`` ignores its generator and returns
    the same read-only arrays for every replicate (replicates differ only by the
    mechanisms' noise); ``beta`` — hence ``theta_star`` — is set to the non-private MLE
    on those data, so ``error`` is the distance to it; ``m`` is the data set's and ``n``
    must be its number of rows.

    Record domain (``data_norm``, ``radius``): the declared public ball of the covariates,
    which every mechanism's constants follow (module docstring).  Under a ball other than
    the default box the simulated covariates are Algorithm 3's box draw scaled into the
    ball: ``x = (r / c) u`` with ``u ~ U[-1, 1]^m`` and ``c = sup{||u||_D : u in [-1, 1]^m}``
    (``sqrt(m)`` for ℓ2, ``m`` for ℓ1, 1 for ℓ∞), i.e. uniform on the largest cube inside
    the ball (the same random numbers as the box draw; ``beta`` is unchanged, so the
    signal ``x'beta`` shrinks by ``r / c``).

    Parameters
    ----------
    beta : list of m floats (default Algorithm 3's seven coefficients); ``m = len(beta)``.
        Not with ``dataset``.
    dataset : {"fair"}, optional
        A real data set instead of simulated data (its covariates lie in the box: only the
        default domain).
    data_norm : {"linf", "l2", "l1"}, the norm ``D`` of the record domain (default "linf":
        with ``radius = 1`` the box ``[-1, 1]^m``).
    radius : float > 0, the radius ``r`` of the record domain (default 1).
    """

    beta: tuple | None = None
    dataset: str | None = None
    data_norm: str = "linf"
    radius: float = 1.0
    name: str = field(default="logistic", init=False)

    def __post_init__(self):
        domain = record_domain(self.data_norm, self.radius)
        object.__setattr__(self, "radius", domain.radius)
        if self.dataset is not None and domain != BOX:
            raise ValueError(f"data_norm and radius must be left at their defaults ('linf', 1) with dataset "
                             f"{self.dataset!r}: its covariates are scaled into the box [-1, 1]^m")
        if self.dataset is not None:
            from kngflow.models.logistic.datasets import check_dataset

            check_dataset(self.dataset, "logistic")
            if self.beta is not None:
                raise ValueError(
                    f"beta must be omitted with dataset {self.dataset!r}: the reference is the non-private MLE "
                    "on the data set"
                )
            object.__setattr__(self, "beta", tuple(float(b) for b in dataset_mle(self.dataset)))
            return
        beta = PAPER_BETA if self.beta is None else self.beta
        n = len(beta) if isinstance(beta, (list, tuple)) else 0
        if n < 1:
            raise ValueError(f"beta must be a non-empty list of finite numbers, got {self.beta!r}")
        object.__setattr__(self, "beta", check_vector("beta", list(beta), n))

    d = BETA_DIMENSION
    theta_star = TRUE_BETA
    domain = DECLARED_DOMAIN

    @property
    def caveats(self) -> str:
        if self.dataset is None:
            if self.domain == BOX:
                return ""
            return (f"covariates in the declared record domain {self.domain.describe()} (Algorithm 3's box draw "
                    "scaled into it); releases are DP for data in that domain.")
        from kngflow.models.logistic.datasets import load_dataset

        data = load_dataset(self.dataset)
        return (
            f"real data set {self.dataset!r} (n = {data.n}, fixed: replicates differ only by the mechanisms' noise; "
            "theta_star is the non-private MLE on these data, so error is the distance to it); "
            + data.caveat + "."
        )

    @property
    def error_rate_in_n(self) -> float | None:  # type: ignore[override]
        """-0.5 against the truth (the non-private fit is √n-consistent); None on a real data
        set, whose reference is the full-data fit."""
        return -0.5 if self.reference == "truth" else None

    @property
    def reference(self) -> str:
        """What ``theta_star`` is, for labels: the truth, or the non-private estimate on a data set."""
        return "truth" if self.dataset is None else "the non-private estimate"

    def check_n(self, n: int) -> None:
        """``n >= 1``; with ``dataset``, ``n`` must be its number of rows."""
        super().check_n(n)
        if self.dataset is not None:
            from kngflow.models.logistic.datasets import load_dataset

            rows = load_dataset(self.dataset).n
            if n != rows:
                raise ValueError(f"n must be {rows}, the number of rows of dataset {self.dataset!r}, got n={n}")

    def simulate(self, n: int, rng: np.random.Generator) -> LogisticData:
        """One data set: ``X`` (n, m) and ``y`` (n,), the only ``n x m`` array.

        With ``dataset``: the data set itself (cached, read-only, never copied; ``rng``
        is not used).
        """
        self.check_n(n)
        if self.dataset is not None:
            return dataset_data(self.dataset)
        X = box_design(rng, n, self.d, self.domain)  # the box draw scaled onto the largest cube inside the ball
        y = logistic_labels(rng, X, self.theta_star).astype(np.float64)
        return LogisticData(X, y, self.radius, self.data_norm)

    def audit_records(self) -> tuple[np.ndarray, np.ndarray]:
        """Records ``(x_1, ..., x_m, y)`` for privacy audits: ``(boundary, fill)``, ``y`` in
        ``{0, 1}`` with every covariate row of the domain
        (:func:`~kngflow.problems.domains.domain_covariates`).

        Box (default): ``boundary`` ``x`` at the corners of ``[-1, 1]^m`` (where
        ``sup ||x||_K`` is reached); ``fill`` ``x`` in ``{-1, 0, 1}^m`` (``m <= 4``; corners
        and 0 beyond).  ℓ2 ball: ``boundary`` points of the sphere (``±r e_j``,
        ``r (±e_i ± e_j) / sqrt(2)``, sign vectors ``r s / sqrt(m)``: where ``R_∞``, ``R_2``
        and ``R_1`` are reached); ``fill`` the centre and ``±r e_j / 2`` (52 and 14 records
        for ``m = 3``).  ℓ1 ball: its vertices ``±r e_j`` and face centres ``r s / m``; the
        same ``fill``.
        """
        return labelled_records(self.domain, self.d, (0.0, 1.0))

    def audit_data(self, records: np.ndarray) -> LogisticData:
        """Mechanism input for a data set given as records ``(k, m + 1)``."""
        records = np.asarray(records, dtype=float)
        return logistic_data(records[:, :-1], records[:, -1], radius=self.radius, data_norm=self.data_norm)

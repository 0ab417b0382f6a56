r"""Bayesian logistic regression with a Gaussian prior on a public ball: data, model, errors.

Model
-----
Records ``(x_i, y_i)``, ``x_i`` in a declared public ball of ``R^m``
(:class:`~kngflow.problems.domains.RecordDomain`; default the unit ℓ2 ball
``||x||_2 <= 1``) and ``y_i`` in ``{-1, +1}``, with

    P(y_i = y | x_i, theta) = sigma(y x_i' theta),   sigma(z) = 1 / (1 + e^-z),

and the prior ``theta ~ N(0, s^2 I_m)`` truncated to the public ball
``Theta = {||theta||_2 <= R}`` (``s`` = ``prior_scale``, ``R`` = ``bound``; public options
carried with the data, as the Beta–Bernoulli model carries its prior).  The posterior is

    p(theta | D)  ∝  exp(-||theta||^2 / (2 s^2)) prod_i sigma(y_i x_i' theta)   on Theta.

Labels may be given as ``{0, 1}`` (the logistic model's convention, ``0 -> -1``) or
``{-1, +1}``; they are stored as ``±1`` (:func:`bayes_logistic_data`).

Data protocol (:class:`BayesLogisticProblem`)
---------------------------------------------
Awan & Slavković's Algorithm 3 design scaled into the record domain, as the logistic
model simulates it: ``u ~ U[-1, 1]^m``, ``x = (r / c) u`` with ``c = sup{||u||_D : u in
[-1, 1]^m}`` (``sqrt(m)`` for the ℓ2 ball: uniform on the largest cube inside it),
``U_i ~ U[0, 1]``, ``y_i = +1`` if ``U_i < sigma(x_i' beta)`` else ``-1``.  ``beta`` (the
study's ``theta_star``) must lie inside ``Theta``.  The draws are those of
:mod:`kngflow.problems.logistic_law`, the law the logistic model simulates as well (a model
package imports no other model: ``tests/test_import_rules.py``).

The log-likelihood's range (the privacy constant)
-------------------------------------------------
For ``x`` in the domain and ``theta`` in ``Theta``, ``|x'theta| <= ||x||_2 ||theta||_2 <=
R_2 R`` with ``R_2 = sup ||x||_2`` over the domain (1 for the unit ℓ2 ball, ``sqrt(m)`` for
the box ``[-1, 1]^m``; :meth:`~kngflow.problems.domains.RecordDomain.reach`), so
``y x'theta`` lies in ``[-B, B]`` with

    B = R R_2   (:func:`score_range`),

and one record's log-likelihood ``log sigma(y x'theta)`` lies in ``[log sigma(-B),
log sigma(B)]``, an interval of width exactly

    log sigma(B) - log sigma(-B) = log(e^B) = B.

Replacing one record moves ``l(theta; D) = sum_i log sigma(y_i x_i'theta)`` by at most
``B`` at every ``theta`` in ``Theta``, and by exactly ``B`` at ``theta = R x / ||x||_2``
with ``||x||_2 = R_2`` and the label flipped.  The mechanisms
(:mod:`kngflow.models.bayes_logistic.mechanisms`) turn this into ε.

Errors
------
``error`` is ``||estimate - beta||_2`` (the contract's default).  The distance to the
non-private posterior mean is :meth:`BayesLogisticProblem.error_measures` with the
posterior mean given; in a store it is ``||estimate(ops) - estimate(nonprivate)||_2``
within a replicate (every mechanism of a replicate sees the same data; ``docs/bayes_logistic.md``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from kngflow.problems.base import SimulatedProblem, check_finite_positive, check_vector
from kngflow.problems.declared import BETA_DIMENSION, DECLARED_DOMAIN, TRUE_BETA
from kngflow.problems.domains import RecordDomain, record_domain
from kngflow.problems.logistic_law import box_design, logistic_labels
from kngflow.problems.records import check_design, design_matrix, labelled_records, require_declared
from kngflow.problems.rows import D_COLUMNS, N_ROWS

__all__ = ["BayesLogisticData", "BayesLogisticProblem", "bayes_logistic_data", "check_bayes_logistic_data",
           "score_range", "DEFAULT_BETA", "DEFAULT_BOUND", "DEFAULT_PRIOR_SCALE", "L2_BALL"]

#: default true coefficients (m = 2; ``||beta||_2 = 2.24``)
DEFAULT_BETA = (2.0, -1.0)
#: default radius ``R`` of the public ball ``Theta`` of the coefficients
DEFAULT_BOUND = 4.0
#: default prior standard deviation ``s`` (``N(0, s^2 I)`` truncated to ``Theta``)
DEFAULT_PRIOR_SCALE = 2.0
#: the default record domain: the unit ℓ2 ball
L2_BALL = RecordDomain("l2", 1.0)


def score_range(bound: float, domain: RecordDomain, m: int) -> float:
    """``B = R R_2``: the bound on ``|y x'theta|`` over the record domain and ``||theta||_2 <= R``,
    which is also the width of the range of one record's log-likelihood (module docstring)."""
    return float(bound) * domain.reach("l2", m)


class BayesLogisticData(NamedTuple):
    """``X`` (n, m) C-contiguous float64 with rows in the declared domain, ``y`` (n,) float64
    in ``{-1, +1}``, and the public facts: ``bound`` (``R``), ``prior_scale`` (``s``), the
    domain's ``radius`` and ``data_norm``."""

    X: np.ndarray
    y: np.ndarray
    bound: float = DEFAULT_BOUND
    prior_scale: float = DEFAULT_PRIOR_SCALE
    radius: float = 1.0
    data_norm: str = "l2"

    domain = DECLARED_DOMAIN
    n = N_ROWS
    d = D_COLUMNS

    @property
    def score_range(self) -> float:
        """``B = R R_2`` (:func:`score_range`)."""
        return score_range(self.bound, self.domain, self.d)


def _labels(y, n: int, name: str = "y") -> np.ndarray:
    y = np.asarray(y, dtype=np.float64)
    if y.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {y.shape}")
    ones = y == 1.0
    if np.all(ones | (y == -1.0)):
        return np.ascontiguousarray(y)
    if np.all(ones | (y == 0.0)):
        return np.where(ones, 1.0, -1.0)
    raise ValueError(f"{name} must hold labels in {{0, 1}} or in {{-1, +1}} (not a mix of 0 and -1)")


def bayes_logistic_data(X, y, *, bound=DEFAULT_BOUND, prior_scale=DEFAULT_PRIOR_SCALE, radius=1.0,
                        data_norm="l2") -> BayesLogisticData:
    """A user's data as mechanism input: ``X`` (n, m) finite with rows in the declared ball
    ``{||x||_data_norm <= radius}`` (default the unit ℓ2 ball), ``y`` (n,) labels in
    ``{0, 1}`` or ``{-1, +1}`` (stored as ``±1``), the public ``bound`` ``R`` of ``Theta``
    and the prior's ``prior_scale``.

    Raises ValueError naming ``X``, ``y``, ``bound``, ``prior_scale``, ``data_norm`` or ``radius``."""
    domain = record_domain(data_norm, radius)
    X = design_matrix(X)
    domain.require(X)
    return BayesLogisticData(X, _labels(y, X.shape[0]), check_finite_positive("bound", bound),
                             check_finite_positive("prior_scale", prior_scale), domain.radius, domain.data_norm)


def check_bayes_logistic_data(data) -> BayesLogisticData:
    """Validate :class:`BayesLogisticData`: shapes and dtypes, rows of ``X`` in the declared
    domain, ``y`` in ``{-1, +1}``, finite positive ``bound`` and ``prior_scale``."""
    if not isinstance(data, BayesLogisticData):
        raise TypeError("data must be a kngflow.models.bayes_logistic.problem.BayesLogisticData, "
                        f"got {type(data).__name__} (bayes_logistic_data(X, y) builds one)")
    X, y = data.X, data.y
    check_design(X)
    if not (isinstance(y, np.ndarray) and y.shape == (X.shape[0],) and y.dtype == np.float64
            and y.flags.c_contiguous and np.all((y == 1.0) | (y == -1.0))):
        raise ValueError(f"data.y must be a contiguous float64 array of length n={X.shape[0]} in {{-1, +1}}")
    check_finite_positive("data.bound", data.bound)
    check_finite_positive("data.prior_scale", data.prior_scale)
    require_declared(data, X)
    return data


class BayesLogisticProblem(SimulatedProblem):
    """Simulated Bayesian logistic regression (module docstring): Algorithm 3's design in the
    record domain, a truncated Gaussian prior on ``{||theta||_2 <= bound}``.

    Parameters
    ----------
    beta : list of m floats, the true coefficients (default ``[2, -1]``), with
        ``||beta||_2 < bound``.
    bound : float > 0, the radius ``R`` of the public ball ``Theta`` (default 4).
    prior_scale : float > 0, the prior's standard deviation ``s`` (default 2).
    data_norm : {"l2", "linf", "l1"}, the norm of the record domain (default "l2").
    radius : float > 0, the radius of the record domain (default 1).
    """

    def __init__(self, *, beta=None, bound=DEFAULT_BOUND, prior_scale=DEFAULT_PRIOR_SCALE, data_norm="l2",
                 radius=1.0):
        beta = DEFAULT_BETA if beta is None else beta
        m = len(beta) if isinstance(beta, (list, tuple)) else 0
        if m < 1:
            raise ValueError(f"beta must be a non-empty list of finite numbers, got {beta!r}")
        self.beta = check_vector("beta", list(beta), m)
        self.bound = check_finite_positive("bound", bound)
        self.prior_scale = check_finite_positive("prior_scale", prior_scale)
        domain = record_domain(data_norm, radius)
        self.data_norm, self.radius = domain.data_norm, domain.radius
        if not math.hypot(*self.beta) < self.bound:
            raise ValueError(f"beta must lie inside the ball ||theta||_2 < bound = {self.bound:g}, got "
                             f"||beta||_2 = {math.hypot(*self.beta):.4g}")

    def __repr__(self) -> str:
        return (f"BayesLogisticProblem(beta={list(self.beta)}, bound={self.bound:g}, prior_scale={self.prior_scale:g}, "
                f"data_norm={self.data_norm!r}, radius={self.radius:g})")

    # -- the contract ---------------------------------------------------------------------
    d = BETA_DIMENSION
    theta_star = TRUE_BETA
    domain = DECLARED_DOMAIN

    @property
    def score_range(self) -> float:
        """``B = bound R_2``: the width of one record's log-likelihood range on ``Theta``."""
        return score_range(self.bound, self.domain, self.d)

    #: the posterior mean is sqrt(n)-consistent for beta
    error_rate_in_n = -0.5

    @property
    def caveats(self) -> str:
        return (f"records x in {self.domain.describe()} (Algorithm 3's box draw scaled into it), labels ±1 with "
                f"P(y = 1) = sigma(x'beta); prior N(0, {self.prior_scale:g}^2 I) truncated to ||theta||_2 <= "
                f"{self.bound:g}; the log-likelihood range of one record is B = {self.score_range:g}.")

    @property
    def error_label(self) -> str:
        return "ℓ2 distance to the true β"

    def data_bytes(self, n: int) -> int:
        """The records: ``n (m + 1)`` float64 and twice that of scratch."""
        return 3 * 8 * int(n) * (self.d + 1) + (1 << 16)

    def simulate(self, n: int, rng: np.random.Generator) -> BayesLogisticData:
        """One data set (module docstring): ``X`` (n, m) and ``y`` (n,) in ``{-1, +1}``."""
        self.check_n(n)
        X = box_design(rng, n, self.d, self.domain)
        y = np.where(logistic_labels(rng, X, self.theta_star), 1.0, -1.0)
        return BayesLogisticData(X, y, self.bound, self.prior_scale, self.radius, self.data_norm)

    def error_measures(self, estimate, posterior_mean=None) -> dict:
        """``{"truth": ||estimate - beta||_2, "posterior_mean": ||estimate - posterior_mean||_2}``
        (the second NaN when no posterior mean is given)."""
        e = np.asarray(estimate, dtype=np.float64)
        pm = (math.nan if posterior_mean is None
              else float(np.linalg.norm(e - np.asarray(posterior_mean, dtype=np.float64))))
        return {"truth": float(np.linalg.norm(e - self.theta_star)), "posterior_mean": pm}

    # -- audits ---------------------------------------------------------------------------
    def audit_records(self) -> tuple[np.ndarray, np.ndarray]:
        """Records ``(x_1, ..., x_m, y)``, ``y`` in ``{-1, +1}``, with the covariates of
        :func:`~kngflow.problems.domains.domain_covariates`: ``boundary`` on the sphere
        (where ``||x||_2 = R_2`` and one record's log-likelihood range ``B`` is reached),
        ``fill`` the centre and half-way points."""
        return labelled_records(self.domain, self.d, (-1.0, 1.0))

    def audit_data(self, records: np.ndarray) -> BayesLogisticData:
        """Mechanism input for a data set given as records ``(k, m + 1)``."""
        records = np.asarray(records, dtype=float)
        return bayes_logistic_data(records[:, :-1], records[:, -1], bound=self.bound, prior_scale=self.prior_scale,
                                   radius=self.radius, data_norm=self.data_norm)

    def parameter_box(self) -> tuple[np.ndarray, np.ndarray]:
        """``[-R, R]^m``, holding ``Theta = {||theta||_2 <= R}``."""
        return np.full(self.d, -self.bound), np.full(self.d, self.bound)

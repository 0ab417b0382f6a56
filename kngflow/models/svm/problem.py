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

Constants
---------
``L = R_2`` (:func:`lipschitz`), ``c = R_2^2 / (2 h)`` (:func:`curvature`) and the gradient
sensitivity ``Delta_K = 2 R_K`` (:func:`gradient_sensitivity`, attained), derived in
:mod:`kngflow.models.svm.loss` with the loss's sums and the regularised minimiser; the
data class and its checks are :mod:`kngflow.models.svm.data`.

Data protocol (synthetic)
-------------------------
A linearly separable law with label noise (:mod:`kngflow.models.svm.law`): ``x`` uniform
in the unit ball of ``R^d`` (scaled into another declared domain), ``y = sign(x'u)`` for
the unit vector ``u`` (``direction``), flipped with probability ``flip``.
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

import math
from dataclasses import dataclass
from numbers import Real

import numpy as np

from kngflow.models.svm.data import UNIT_BALL, SVMData, check_smoothing, check_svm_data, svm_data
from kngflow.models.svm.law import (HELD_OUT, HELD_OUT_SEED, REFERENCE, REFERENCE_SEED, default_direction, labels,
                                    law_sample, reference_minimiser, unit_ball)
from kngflow.models.svm.loss import (LIPSCHITZ, covariate_radius, curvature, gradient_sensitivity, hinge_gradient,
                                     huber_derivative, huber_gradient, huber_gradient_dd, huber_hessian, huber_loss,
                                     huber_loss_sum, lipschitz, regularised_minimiser)
from kngflow.problems.base import Problem, check_dimension
from kngflow.problems.declared import DECLARED_DOMAIN
from kngflow.problems.domains import norm_factor, record_domain
from kngflow.problems.records import labelled_records

__all__ = [
    "SVMData",
    "SVMProblem",
    "svm_data",
    "check_svm_data",
    "check_smoothing",
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
    "METRICS",
    "ClassificationErrors",
]


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
            u = default_direction(d)
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

    domain = DECLARED_DOMAIN

    @property
    def scale(self) -> float:
        """``r / c``, ``c = sup{||x||_D : ||x||_2 <= 1}``: the factor of the unit-ball law's
        covariates under the declared domain (1 for the unit ball)."""
        return 1.0 if self.domain == UNIT_BALL else self.radius / norm_factor("l2", self.data_norm, self.d)

    @property
    def theta_star(self) -> np.ndarray:
        """The population regularised minimiser (reference sample, fixed seed)."""
        return np.array(reference_minimiser(self.d, self.direction, self.flip, self.h, self.reg, self.scale))

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
        y = labels(rng, X, np.array(self.direction), self.flip)
        return SVMData(X, y, self.h, self.radius, self.data_norm)

    # ---------------------------------------------------------------- error measures
    def held_out(self) -> tuple[np.ndarray, np.ndarray]:
        """The :data:`HELD_OUT`-record held-out sample of the law (fixed seed)."""
        return law_sample(self.d, self.direction, self.flip, HELD_OUT, HELD_OUT_SEED, self.scale)

    def risk_sample(self) -> tuple[np.ndarray, np.ndarray]:
        """The :data:`REFERENCE`-record sample of the law that defines ``J_ref`` and ``theta_star``."""
        return law_sample(self.d, self.direction, self.flip, REFERENCE, REFERENCE_SEED, self.scale)

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
        return labelled_records(self.domain, self.d, (-1.0, 1.0))

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

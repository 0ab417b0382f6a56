"""The SVM on a real data set: the 1996 American National Election Study (statsmodels' ``anes96``).

Nothing is downloaded: statsmodels installs the data file with the package (as it does the
linear and logistic models' real data sets).

``anes96`` is 944 respondents of the 1996 ANES who voted for Clinton or Dole.  Label
``y = +1`` for a Dole vote, ``-1`` for Clinton.  Covariates (8), each mapped from its
questionnaire code range onto ``[-1, 1]`` (public ranges: no preprocessing step reads the
data): ``TVnews`` (days a week watching TV news, 0–7), ``selfLR``, ``ClinLR``, ``DoleLR``
(left–right placement of oneself, Clinton and Dole, 1–7), ``PID`` (party identification,
0–6), ``age`` (18–91: voters are adults; the survey's oldest is 91), ``educ`` (1–7),
``income`` (1–24); and a constant 1, so ``x`` has 9 entries in ``[-1, 1]`` and
``||x||_2 <= 3``.  The records are divided by that public bound 3, so ``||x||_2 <= 1`` as
CMS 2011 require.  ``popul`` (census place population, no public upper bound) is left out.

The rows are split once, by a public permutation (seed :data:`SPLIT_SEED`), into
:data:`N_TRAIN` training rows, the data set every mechanism sees, and the remaining
:data:`N_HELD_OUT` held-out rows, on which the misclassification rate is measured.  The
reference ``theta_star`` is the non-private minimiser of ``J`` on the training rows: the
data are fixed, so replicates differ only in the mechanisms' noise.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from kngflow.problems.base import Problem
from kngflow.problems.datasets import frozen, scale_code_ranges
from kngflow.models.svm.problem import (METRICS, ClassificationErrors, SVMData, SVMProblem, check_smoothing,
                                        regularised_minimiser, svm_data)

__all__ = ["ANES_RANGES", "ANES_BOUND", "N_TRAIN", "N_HELD_OUT", "SPLIT_SEED", "anes96_records", "anes96_split",
           "AnesSVMProblem"]

#: questionnaire code ranges of the covariates (public)
ANES_RANGES = {"TVnews": (0.0, 7.0), "selfLR": (1.0, 7.0), "ClinLR": (1.0, 7.0), "DoleLR": (1.0, 7.0),
               "PID": (0.0, 6.0), "age": (18.0, 91.0), "educ": (1.0, 7.0), "income": (1.0, 24.0)}
#: public bound on ``||x||_2`` of ``x = (1, scaled covariates)``: ``sqrt(9) = 3``
ANES_BOUND = 3.0
#: rows of the full table
N_ROWS = 944
#: training rows (the mechanisms' data set) and held-out rows (the misclassification rate)
N_TRAIN = 708
N_HELD_OUT = N_ROWS - N_TRAIN
#: seed of the public permutation that splits the rows
SPLIT_SEED = 1996


@functools.lru_cache(maxsize=1)
def anes96_records() -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` of all 944 rows: ``X = (1, covariates scaled to [-1, 1]) / 3`` (read-only),
    ``y = +1`` for a Dole vote, ``-1`` for Clinton (module docstring)."""
    from statsmodels.datasets import anes96

    df = anes96.load_pandas().data
    if len(df) != N_ROWS:
        raise ValueError(f"anes96: expected {N_ROWS} rows, got {len(df)}")
    X = np.column_stack([np.ones(len(df))] + scale_code_ranges(df, ANES_RANGES, "anes96")) / ANES_BOUND
    # rounding can put a row of nine entries of size 1/3 a few ulps above the unit sphere
    norms = np.sqrt(np.einsum("ij,ij->i", X, X))
    X = X / np.maximum(norms, 1.0)[:, None]
    y = np.where(df["vote"].to_numpy() > 0.5, 1.0, -1.0)
    return frozen(np.ascontiguousarray(X)), frozen(y)


@functools.lru_cache(maxsize=1)
def anes96_split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(X_train, y_train, X_held_out, y_held_out)`` by the public permutation of :data:`SPLIT_SEED`."""
    X, y = anes96_records()
    perm = np.random.default_rng(SPLIT_SEED).permutation(N_ROWS)
    tr, te = np.sort(perm[:N_TRAIN]), np.sort(perm[N_TRAIN:])
    return (frozen(np.ascontiguousarray(X[tr])), frozen(y[tr]), frozen(np.ascontiguousarray(X[te])),
            frozen(y[te]))


@functools.lru_cache(maxsize=8)
def _training_minimiser(h: float, reg: float) -> np.ndarray:
    X, y, _, _ = anes96_split()
    w, _, ok = regularised_minimiser(X, y, h, N_TRAIN * reg, tol_abs=1e-12 * N_TRAIN)
    if not ok:  # not observed: strongly convex, piecewise quadratic
        raise RuntimeError("the non-private minimiser on anes96 did not converge")
    return frozen(w)


@dataclass(frozen=True, kw_only=True)
class AnesSVMProblem(ClassificationErrors, Problem):
    """The Huber-hinge SVM on the 1996 ANES vote (module docstring): fixed training rows, error
    on held-out rows.

    Parameters
    ----------
    h : float in (0, 1), the Huber smoothing (default 0.5).
    reg : float > 0, the ridge ``Λ`` of ``J`` defining ``theta_star`` and the excess risk (default
        0.01; set the mechanisms' ``reg`` equal).
    metric : {"misclassification", "excess_risk"}: the held-out misclassification rate, or the
        excess regularised risk ``J(w) - J(theta_star)`` on the training rows.
    """

    h: float = 0.5
    reg: float = 0.01
    metric: str = "misclassification"

    #: the SVM model's mechanism kinds apply (the data are :class:`~kngflow.models.svm.problem.SVMData`)
    family: ClassVar[str] = "svm"

    def __post_init__(self):
        object.__setattr__(self, "h", check_smoothing(self.h))
        r = self.reg
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not (math.isfinite(r) and r > 0):
            raise ValueError(f"reg must be a finite number > 0, got {r!r}")
        object.__setattr__(self, "reg", float(r))
        if self.metric not in METRICS:
            raise ValueError(f"metric must be one of {', '.join(map(repr, METRICS))}; got {self.metric!r}")

    @property
    def d(self) -> int:
        return len(ANES_RANGES) + 1

    @property
    def theta_star(self) -> np.ndarray:
        """The non-private minimiser of ``J`` on the training rows."""
        return np.array(_training_minimiser(self.h, self.reg))

    @property
    def reference(self) -> str:
        return "the non-private estimate"

    @property
    def caveats(self) -> str:
        return (f"real data set: the 1996 ANES vote (statsmodels' anes96), {N_TRAIN} training rows fixed across "
                f"replicates (only the mechanisms' noise varies), misclassification on {N_HELD_OUT} held-out rows; "
                "covariates scaled by their public code ranges and the row bound 3, no step reads the data.")

    def check_n(self, n: int) -> None:
        super().check_n(n)
        if n != N_TRAIN:
            raise ValueError(f"n must be {N_TRAIN}, the training rows of anes96, got n={n}")

    def simulate(self, n: int, rng: np.random.Generator) -> SVMData:
        """The training rows (the same read-only arrays for every replicate; ``rng`` unused)."""
        self.check_n(n)
        X, y, _, _ = anes96_split()
        return SVMData(X, y, self.h)

    def data_bytes(self, n: int) -> int:
        return int(n) * (self.d + 1) * 8

    # ---------------------------------------------------------------- errors
    def held_out(self) -> tuple[np.ndarray, np.ndarray]:
        """The held-out rows."""
        return anes96_split()[2:]

    def risk_sample(self) -> tuple[np.ndarray, np.ndarray]:
        """The training rows: ``J`` is the training objective, ``theta_star`` its minimiser."""
        return anes96_split()[:2]

    @property
    def error_label(self) -> str:
        if self.metric == "misclassification":
            return f"misclassification on the {N_HELD_OUT} held-out rows"
        return "excess regularised risk J(w) − J(ŵ) on the training rows"

    @property
    def reference_lines(self) -> list:
        """Misclassification: a data-free random direction (1/2 in expectation) and the
        non-private minimiser's held-out rate; excess risk: the zero estimate's."""
        if self.metric == "misclassification":
            return [(0.5, "random direction (data-free)"),
                    (self.misclassification(self.theta_star), "non-private minimiser")]
        return [(float(self.excess_risk(np.zeros(self.d))), "zero estimate")]

    def report_sections(self, ds) -> list[str]:
        """The other error measure's table (as :meth:`SVMProblem.report_sections`)."""
        return SVMProblem.report_sections(self, ds)

    # ---------------------------------------------------------------- audits
    def audit_records(self) -> tuple[np.ndarray, np.ndarray]:
        """The SVM's declared record domain in ``d = 9`` (``x`` in the unit ball, ``y = ±1``)."""
        return SVMProblem(d=self.d, h=self.h).audit_records()

    def audit_data(self, records: np.ndarray) -> SVMData:
        records = np.asarray(records, dtype=float)
        return svm_data(records[:, :-1], records[:, -1], self.h)

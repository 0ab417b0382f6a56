r"""k-means on a real data set: Fisher's iris (scikit-learn's ``load_iris``), shipped here.

The data are the 150 flowers of Fisher's iris data (UCI "Iris", CC BY 4.0; the copy
scikit-learn ships as ``sklearn.datasets.load_iris``): sepal length, sepal width, petal
length and petal width in cm, one decimal.  :data:`IRIS_MM` holds them in millimetres
(integers), so no run needs scikit-learn; ``tests/models/kmeans/test_kmeans.py`` checks them against
scikit-learn's copy where it is installed.

Public scaling rule (reads no data): every measurement is taken to lie in ``[0, 8]`` cm
(a bound fixed before looking at the data; the largest is 7.9), mapped to ``[-1, 1]`` by
``(x - 4) / 4``, and the 4-vector divided by ``sqrt(4) = 2``, so every record lies in the
unit ball of ``R^4`` (option ``features = "petal"``: petal length and width only, divided
by ``sqrt(2)``, a record in the unit disc).

:class:`IrisKMeansProblem` (``family = "kmeans"``: the k-means kinds apply): ``n <= 150``; at
``n = 150`` every replicate sees the whole data set, below it a subsample without
replacement drawn with the replicate's data stream (the study of NICV against ``n``).  The
error is the NICV ratio on the **whole** data set, ``NICV(C; X) / NICV(C_ref; X)``,
``C_ref`` the best of 10 non-private k-means++ + Lloyd runs on it (fixed seed), which is
also ``theta_star`` (the reference is the non-private estimate, not a truth).
"""

from __future__ import annotations

import math

import numpy as np

from kngflow.models.kmeans.lloyd import best_of, canonical_centres
from kngflow.models.kmeans.problem import (ERROR_MEASURES, REFERENCE_INITS, REFERENCE_ITERATIONS, KMeansData,
                                           KMeansProblem, kmeans_data, matched_distance, nicv)
from kngflow.problems.base import Problem
from kngflow.problems.declared import STACKED_COEFFICIENTS

__all__ = ["IRIS_MM", "N_ROWS", "FEATURES", "iris_records", "IrisKMeansProblem"]

#: rows of the data set
N_ROWS = 150
#: the columns each ``features`` option keeps
FEATURES = {"all": (0, 1, 2, 3), "petal": (2, 3)}
#: the public bound: every measurement in [0, 8] cm
LOW_CM, HIGH_CM = 0.0, 8.0
_SEED = 1936
_CACHE: dict = {}

#: sepal length, sepal width, petal length, petal width in mm (Fisher's iris, scikit-learn's order)
IRIS_MM = (
    (51, 35, 14, 2), (49, 30, 14, 2), (47, 32, 13, 2), (46, 31, 15, 2), (50, 36, 14, 2), (54, 39, 17, 4), (46,
    34, 14, 3), (50, 34, 15, 2), (44, 29, 14, 2), (49, 31, 15, 1), (54, 37, 15, 2), (48, 34, 16, 2), (48, 30,
    14, 1), (43, 30, 11, 1), (58, 40, 12, 2), (57, 44, 15, 4), (54, 39, 13, 4), (51, 35, 14, 3), (57, 38, 17,
    3), (51, 38, 15, 3), (54, 34, 17, 2), (51, 37, 15, 4), (46, 36, 10, 2), (51, 33, 17, 5), (48, 34, 19, 2),
    (50, 30, 16, 2), (50, 34, 16, 4), (52, 35, 15, 2), (52, 34, 14, 2), (47, 32, 16, 2), (48, 31, 16, 2), (54,
    34, 15, 4), (52, 41, 15, 1), (55, 42, 14, 2), (49, 31, 15, 2), (50, 32, 12, 2), (55, 35, 13, 2), (49, 36,
    14, 1), (44, 30, 13, 2), (51, 34, 15, 2), (50, 35, 13, 3), (45, 23, 13, 3), (44, 32, 13, 2), (50, 35, 16,
    6), (51, 38, 19, 4), (48, 30, 14, 3), (51, 38, 16, 2), (46, 32, 14, 2), (53, 37, 15, 2), (50, 33, 14, 2),
    (70, 32, 47, 14), (64, 32, 45, 15), (69, 31, 49, 15), (55, 23, 40, 13), (65, 28, 46, 15), (57, 28, 45, 13),
    (63, 33, 47, 16), (49, 24, 33, 10), (66, 29, 46, 13), (52, 27, 39, 14), (50, 20, 35, 10), (59, 30, 42, 15),
    (60, 22, 40, 10), (61, 29, 47, 14), (56, 29, 36, 13), (67, 31, 44, 14), (56, 30, 45, 15), (58, 27, 41, 10),
    (62, 22, 45, 15), (56, 25, 39, 11), (59, 32, 48, 18), (61, 28, 40, 13), (63, 25, 49, 15), (61, 28, 47, 12),
    (64, 29, 43, 13), (66, 30, 44, 14), (68, 28, 48, 14), (67, 30, 50, 17), (60, 29, 45, 15), (57, 26, 35, 10),
    (55, 24, 38, 11), (55, 24, 37, 10), (58, 27, 39, 12), (60, 27, 51, 16), (54, 30, 45, 15), (60, 34, 45, 16),
    (67, 31, 47, 15), (63, 23, 44, 13), (56, 30, 41, 13), (55, 25, 40, 13), (55, 26, 44, 12), (61, 30, 46, 14),
    (58, 26, 40, 12), (50, 23, 33, 10), (56, 27, 42, 13), (57, 30, 42, 12), (57, 29, 42, 13), (62, 29, 43, 13),
    (51, 25, 30, 11), (57, 28, 41, 13), (63, 33, 60, 25), (58, 27, 51, 19), (71, 30, 59, 21), (63, 29, 56, 18),
    (65, 30, 58, 22), (76, 30, 66, 21), (49, 25, 45, 17), (73, 29, 63, 18), (67, 25, 58, 18), (72, 36, 61, 25),
    (65, 32, 51, 20), (64, 27, 53, 19), (68, 30, 55, 21), (57, 25, 50, 20), (58, 28, 51, 24), (64, 32, 53, 23),
    (65, 30, 55, 18), (77, 38, 67, 22), (77, 26, 69, 23), (60, 22, 50, 15), (69, 32, 57, 23), (56, 28, 49, 20),
    (77, 28, 67, 20), (63, 27, 49, 18), (67, 33, 57, 21), (72, 32, 60, 18), (62, 28, 48, 18), (61, 30, 49, 18),
    (64, 28, 56, 21), (72, 30, 58, 16), (74, 28, 61, 19), (79, 38, 64, 20), (64, 28, 56, 22), (63, 28, 51, 15),
    (61, 26, 56, 14), (77, 30, 61, 23), (63, 34, 56, 24), (64, 31, 55, 18), (60, 30, 48, 18), (69, 31, 54, 21),
    (67, 31, 56, 24), (69, 31, 51, 23), (58, 27, 51, 19), (68, 32, 59, 23), (67, 33, 57, 25), (67, 30, 52, 23),
    (63, 25, 50, 19), (65, 30, 52, 20), (62, 34, 54, 23), (59, 30, 51, 18)
)


def iris_records(features: str = "all") -> np.ndarray:
    """``(150, d)`` records in the unit ball by the public rule (module docstring), read-only."""
    if features not in FEATURES:
        raise ValueError(f"features must be one of {list(FEATURES)}, got {features!r}")
    if features not in _CACHE:
        cols = FEATURES[features]
        X = np.array(IRIS_MM, dtype=np.float64)[:, cols] / 10.0
        centre, half = (LOW_CM + HIGH_CM) / 2.0, (HIGH_CM - LOW_CM) / 2.0
        x = (X - centre) / half / math.sqrt(len(cols))
        r = np.sqrt((x * x).sum(axis=1))
        x = x / np.maximum(r, 1.0)[:, None]  # rounding only: every row is inside by the rule
        x.flags.writeable = False
        _CACHE[features] = x
    return _CACHE[features]


class IrisKMeansProblem(Problem):
    """``k`` centres of Fisher's iris, scaled into the unit ball by a public rule (module docstring).

    Parameters
    ----------
    k : int >= 1 (default 3, the three species).
    features : "all" (4-D, default) or "petal" (petal length and width, 2-D).
    error_measure : "nicv" (the NICV ratio on the whole data set) or "matched" (the matched
        distance to the non-private centres).
    """

    family = "kmeans"
    audit_defaults = {"k": 2, "features": "petal"}
    coefficient_summaries = False

    def __init__(self, *, k: int = 3, features: str = "all", error_measure: str = "nicv"):
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"k must be an integer >= 1, got {k!r}")
        if features not in FEATURES:
            raise ValueError(f"features must be one of {list(FEATURES)}, got {features!r}")
        if error_measure not in ERROR_MEASURES:
            raise ValueError(f"error_measure must be one of {list(ERROR_MEASURES)}, got {error_measure!r}")
        self.k, self.features, self.error_measure = int(k), features, error_measure
        self.d_data = len(FEATURES[features])

    def __repr__(self) -> str:
        return f"IrisKMeansProblem(k={self.k}, features={self.features!r}, error_measure={self.error_measure!r})"

    def _reference(self) -> tuple[np.ndarray, float]:
        key = ("ref", self.k, self.features)
        if key not in _CACHE:
            x = iris_records(self.features)
            C = best_of(x, self.k, np.random.default_rng(_SEED), n_init=REFERENCE_INITS,
                        iterations=REFERENCE_ITERATIONS)
            _CACHE[key] = (C, nicv(C, x))
        return _CACHE[key]

    d = STACKED_COEFFICIENTS

    @property
    def theta_star(self) -> np.ndarray:
        """The non-private centres on the whole data set, canonical order."""
        return canonical_centres(self._reference()[0])

    @property
    def reference(self) -> str:
        return "the non-private estimate"

    @property
    def caveats(self) -> str:
        return (f"real data set: Fisher's iris (150 flowers, {self.features} features, d = {self.d_data}), every "
                "measurement mapped from the public range [0, 8] cm to [-1, 1] and the vector divided by "
                f"sqrt({self.d_data}); n < 150 subsamples without replacement; error = {self.error_measure} on the "
                "whole data set, relative to the best of 10 non-private k-means++ + Lloyd runs.")

    @property
    def error_label(self) -> str:
        if self.error_measure == "nicv":
            return "NICV on the whole iris data relative to non-private Lloyd"
        return "matched distance to the non-private centres"

    @property
    def reference_lines(self) -> list:
        return [(self._error_of(np.zeros((self.k, self.d_data))), "every centre at 0")]

    def check_n(self, n: int) -> None:
        super().check_n(n)
        if n > N_ROWS:
            raise ValueError(f"n must be at most {N_ROWS}, the iris row count, got n={n}")

    def simulate(self, n: int, rng: np.random.Generator) -> KMeansData:
        """The whole data set at ``n = 150``; below, ``n`` rows drawn without replacement with ``rng``."""
        self.check_n(n)
        x = iris_records(self.features)
        if n == N_ROWS:
            return KMeansData(x, self.k)
        return KMeansData(np.ascontiguousarray(x[np.sort(rng.choice(N_ROWS, n, replace=False))]), self.k)

    def data_bytes(self, n: int) -> int:
        return 4 * N_ROWS * (self.d_data + self.k) * 8

    def as_centres(self, estimate) -> np.ndarray:
        e = np.asarray(estimate, dtype=np.float64)
        if e.shape != (self.d,):
            raise ValueError(f"estimate must have shape ({self.d},) = k * d entries, got {e.shape}")
        return e.reshape(self.k, self.d_data)

    def _error_of(self, C: np.ndarray) -> float:
        if not np.all(np.isfinite(C)):
            return math.nan
        ref, ref_nicv = self._reference()
        if self.error_measure == "matched":
            return matched_distance(C, ref)
        return nicv(C, iris_records(self.features)) / ref_nicv

    def error(self, estimate) -> float:
        return self._error_of(self.as_centres(estimate))

    def audit_records(self) -> tuple[np.ndarray, np.ndarray]:
        """The unit ball's records (as :meth:`KMeansProblem.audit_records`)."""
        return KMeansProblem.audit_records(self)

    def audit_data(self, records: np.ndarray) -> KMeansData:
        return kmeans_data(records, self.k, 1.0)

    def parameter_box(self) -> tuple[np.ndarray, np.ndarray]:
        return np.full(self.d, -1.0), np.full(self.d, 1.0)

r"""k-means clustering (Sarwate's survey §7.2.1; Su, Cao, Li, Bertino & Jin 2016): data, release, errors.

Model
-----
Records ``x_1, ..., x_n`` in the public unit ball ``||x_i||_2 <= 1`` of ``R^d`` (a user's
data is rescaled by a public bound first: :func:`kmeans_data`).  The estimand is a set of
``k`` centres minimising the k-means cost ``sum_i min_j ||x_i - c_j||^2``.

Data protocol (synthetic, :class:`KMeansProblem`)
-------------------------------------------------
An equal-weight mixture of ``k`` Gaussians ``N(mu_j, sd^2 I_d)`` whose means lie on the
circle of radius ``separation`` in the plane of the first two axes, at the angles
``pi / (2k) + 2 pi j / k`` (the offset makes the first coordinates distinct, so the
canonical order below is strict); for ``d = 1`` the means are ``separation *
linspace(-1, 1, k)``.  A draw ``y`` outside the unit ball is **clipped radially**,
``x = y / ||y||``: the clipping is part of the data-generating process, so every record
lies in the declared domain and the records' law is the clipped mixture (with the
defaults ``separation = 0.5``, ``sd = 0.1`` a draw leaves the ball with probability about
``4e-7``).  ``theta_star`` is the mixture's means in canonical order.

Release
-------
``k`` centres in ``R^d``, stored as ``k * d`` coefficients in canonical order
(:func:`~kngflow.models.kmeans.lloyd.canonical_centres`): the centres sorted by their first
coordinate (ties by the second, ...), flattened row-major, ``coef = j * d + a``.  The order
is a function of the set of centres, so it is post-processing and costs no privacy.

Error measures (lower is better, like every stored ``error``)
-------------------------------------------------------------
* ``"nicv"`` (default): Su et al.'s normalised intra-cluster variance relative to the
  non-private optimum.  For centres ``C`` and records ``D = (x_1, ..., x_m)``,

      NICV(C; D) = (1/m) sum_i min_j ||x_i - c_j||^2,

  and the stored error is ``NICV(C; R) / NICV(C_ref; R)`` on a public **reference sample**
  ``R`` of :data:`REFERENCE` records of the same law (a fixed seed), with ``C_ref`` the
  best of :data:`REFERENCE_INITS` runs of non-private Lloyd from k-means++ seeding on
  ``R`` (:data:`REFERENCE_ITERATIONS` iterations at most).  About 1 for a good release (it
  can fall slightly below 1: Lloyd finds a local optimum), large for a bad one.
  ``error_measures(estimate, data)`` also gives ``"nicv_data"``, the same ratio on the
  data set the release came from (``C_ref`` then Lloyd's on that data set, a fixed seed):
  Su et al.'s own NICV, which the store cannot hold (``error`` sees the release only).
* ``"matched"``: the distance between centre sets after the best matching,
  ``min_pi sqrt(sum_j ||c_pi(j) - mu_j||^2)`` over the permutations ``pi`` of the centres
  (Hungarian matching, ``scipy.optimize.linear_sum_assignment``, imported when used).

Sensitivities (replace-one adjacency, ``||x||_2, ||x'||_2 <= 1``) are derived where they are
used: :mod:`kngflow.models.kmeans.mechanisms`.
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np

from kngflow.models.kmeans.lloyd import best_of, canonical_centres, cost
from kngflow.problems.base import SimulatedProblem, check_dimension, check_finite_positive
from kngflow.problems.declared import STACKED_COEFFICIENTS
from kngflow.problems.records import to_unit_ball

__all__ = ["KMeansData", "KMeansProblem", "kmeans_data", "check_kmeans_data", "matched_distance", "nicv",
           "ERROR_MEASURES", "REFERENCE"]

#: the error measures the problem declares (``error_measure`` picks the one stored as ``error``)
ERROR_MEASURES = ("nicv", "matched")
#: records of the public reference sample of the NICV ratio
REFERENCE = 20_000
#: k-means++ restarts and Lloyd iterations of the non-private reference centres
REFERENCE_INITS = 10
REFERENCE_ITERATIONS = 100
#: seed of the reference sample and of the reference runs (public constants)
_REFERENCE_SEED = 20_160_301
_REFERENCE_CACHE: dict = {}


class KMeansData(NamedTuple):
    """Records ``x`` (n, d) in the unit ball and the public number ``k`` of centres to release."""

    x: np.ndarray
    k: int

    @property
    def n(self) -> int:
        return int(self.x.shape[0])

    @property
    def d(self) -> int:
        return int(self.x.shape[1])


def check_kmeans_data(data) -> KMeansData:
    """Validate :class:`KMeansData`: float64 rows ``(n, d)`` with ``n >= 1`` and an integer ``k >= 1``
    (that the rows lie in the unit ball is :func:`kmeans_data`'s and the simulation's guarantee)."""
    if not isinstance(data, KMeansData):
        raise TypeError(f"data must be a kngflow.models.kmeans.problem.KMeansData, got {type(data).__name__}")
    x = data.x
    if not (isinstance(x, np.ndarray) and x.ndim == 2 and x.shape[0] >= 1 and x.shape[1] >= 1
            and x.dtype == np.float64):
        raise ValueError("data.x must be a non-empty 2-D float64 array (n, d)")
    if isinstance(data.k, bool) or not isinstance(data.k, (int, np.integer)) or data.k < 1:
        raise ValueError(f"data.k must be an integer >= 1, got {data.k!r}")
    return data


def kmeans_data(x, k: int = 3, bound: float = 1.0) -> KMeansData:
    """A user's records ``x`` (n, d) with the public bound ``||x_i||_2 <= bound`` as mechanism input.

    The records are divided by ``bound`` (a record beyond it is a ValueError naming ``x``,
    not clipped silently); the released centres are then those of the rescaled records:
    multiply them by ``bound``.
    """
    x = to_unit_ball(x, bound)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    return KMeansData(np.ascontiguousarray(x), int(k))


def nicv(centres: np.ndarray, x: np.ndarray) -> float:
    """``(1/m) sum_i min_j ||x_i - c_j||^2``: the normalised intra-cluster variance of ``centres`` on rows ``x``."""
    return cost(x, np.asarray(centres, float)) / x.shape[0]


def matched_distance(centres: np.ndarray, reference: np.ndarray) -> float:
    """``min_pi sqrt(sum_j ||c_pi(j) - r_j||^2)`` over matchings of two sets of ``k`` centres (Hungarian)."""
    from scipy.optimize import linear_sum_assignment  # here: importing scipy.optimize costs every worker

    C = np.asarray(centres, float)
    R = np.asarray(reference, float)
    D = ((C[:, None, :] - R[None, :, :]) ** 2).sum(-1)
    rows, cols = linear_sum_assignment(D)
    return math.sqrt(float(D[rows, cols].sum()))


def _unit_ball_clip(y: np.ndarray) -> np.ndarray:
    r = np.sqrt((y * y).sum(axis=1))
    return np.where((r > 1.0)[:, None], y / np.maximum(r, 1.0)[:, None], y)


class KMeansProblem(SimulatedProblem):
    """Records from a clipped Gaussian mixture in the unit ball; ``k`` centres released (module docstring).

    Parameters
    ----------
    k : int >= 1, the number of components and of released centres (default 3).
    d : int >= 1, the dimension (default 2).
    separation : float in [0, 1), the radius of the circle the means lie on (default 0.5).
    sd : float > 0, the components' standard deviation per coordinate (default 0.1).
    error_measure : "nicv" (the NICV ratio on the reference sample) or "matched" (the
        matched distance to the means), the value stored as ``error``.
    """

    audit_defaults = {"k": 2, "d": 2}
    #: centres in canonical order swap places under noise: no per-coefficient summaries
    coefficient_summaries = False

    def __init__(self, *, k: int = 3, d: int = 2, separation: float = 0.5, sd: float = 0.1,
                 error_measure: str = "nicv"):
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"k must be an integer >= 1, got {k!r}")
        d = check_dimension(d)
        if isinstance(separation, bool) or not isinstance(separation, (int, float)) or not 0.0 <= separation < 1.0:
            raise ValueError(f"separation must be a number in [0, 1), got {separation!r}")
        sd = check_finite_positive("sd", sd)
        if error_measure not in ERROR_MEASURES:
            raise ValueError(f"error_measure must be one of {list(ERROR_MEASURES)}, got {error_measure!r}")
        self.k, self.d_data, self.separation, self.sd = int(k), d, float(separation), sd
        self.error_measure = error_measure
        self._means = self._make_means()

    def __repr__(self) -> str:
        return (f"KMeansProblem(k={self.k}, d={self.d_data}, separation={self.separation:g}, sd={self.sd:g}, "
                f"error_measure={self.error_measure!r})")

    def _make_means(self) -> np.ndarray:
        k, d, r = self.k, self.d_data, self.separation
        mu = np.zeros((k, d))
        if d == 1:
            mu[:, 0] = r * (np.linspace(-1.0, 1.0, k) if k > 1 else 0.0)
        else:
            ang = math.pi / (2 * k) + 2.0 * math.pi * np.arange(k) / k
            mu[:, 0], mu[:, 1] = r * np.cos(ang), r * np.sin(ang)
        return mu

    # -- the contract ---------------------------------------------------------------------
    #: the number of stored coefficients: ``k * d``
    d = STACKED_COEFFICIENTS

    @property
    def means(self) -> np.ndarray:
        """The mixture's means ``(k, d)`` (in the order of the angles)."""
        return self._means.copy()

    @property
    def theta_star(self) -> np.ndarray:
        """The means in canonical order, flattened (``coef = j * d + a``)."""
        return canonical_centres(self._means)

    @property
    def caveats(self) -> str:
        return (f"records from an equal-weight mixture of {self.k} Gaussians (sd {self.sd:g}, means on a circle of "
                f"radius {self.separation:g}) clipped radially into the unit ball of R^{self.d_data}; the estimate is "
                f"{self.k} centres sorted by first coordinate, flattened row-major; error = {self.error_measure} "
                f"(nicv: the k-means cost per record on a {REFERENCE}-record reference sample, over that of "
                "non-private Lloyd with k-means++ seeding).")

    @property
    def error_label(self) -> str:
        if self.error_measure == "nicv":
            return "NICV relative to non-private Lloyd (k-means++)"
        return "matched distance between centre sets"

    @property
    def reference_lines(self) -> list:
        """The data-free release of every centre at 0: its NICV ratio, or its matched distance ``||mu||``."""
        zero = np.zeros((self.k, self.d_data))
        return [(self._error_of(zero), "every centre at 0")]

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` records ``(n, d)`` of the clipped mixture."""
        comp = rng.integers(0, self.k, size=n)
        y = self._means[comp] + self.sd * rng.standard_normal((n, self.d_data))
        return _unit_ball_clip(y)

    def simulate(self, n: int, rng: np.random.Generator) -> KMeansData:
        """One data set: ``n`` records of the clipped mixture (kept whole: Lloyd reads every record each iteration)."""
        self.check_n(n)
        return KMeansData(self.sample(n, rng), self.k)

    def data_bytes(self, n: int) -> int:
        return 4 * int(n) * (self.d_data + self.k) * 8

    def reference_sample(self) -> tuple[np.ndarray, float]:
        """``(R, NICV(C_ref; R))``: the public reference sample and the reference centres' NICV (cached)."""
        key = (self.k, self.d_data, self.separation, self.sd)
        if key not in _REFERENCE_CACHE:
            rng = np.random.default_rng(_REFERENCE_SEED)
            R = self.sample(REFERENCE, rng)
            C = best_of(R, self.k, rng, n_init=REFERENCE_INITS, iterations=REFERENCE_ITERATIONS)
            _REFERENCE_CACHE[key] = (R, nicv(C, R))
        return _REFERENCE_CACHE[key]

    def as_centres(self, estimate) -> np.ndarray:
        """The ``(k, d)`` centres stored row-major in ``estimate``."""
        e = np.asarray(estimate, dtype=np.float64)
        if e.shape != (self.d,):
            raise ValueError(f"estimate must have shape ({self.d},) = k * d entries, got {e.shape}")
        return e.reshape(self.k, self.d_data)

    def _error_of(self, C: np.ndarray) -> float:
        if not np.all(np.isfinite(C)):
            return math.nan
        if self.error_measure == "matched":
            return matched_distance(C, self._means)
        R, ref = self.reference_sample()
        return nicv(C, R) / ref

    def error(self, estimate) -> float:
        """The declared ``error_measure`` of a stored estimate (module docstring)."""
        return self._error_of(self.as_centres(estimate))

    def error_measures(self, estimate, data: KMeansData | None = None) -> dict:
        """``nicv`` and ``matched`` and, given the data set it was released from, ``nicv_data``:
        ``NICV(C; D) / NICV(C_lloyd; D)``, ``C_lloyd`` the best of :data:`REFERENCE_INITS`
        k-means++ + Lloyd runs on ``D`` (fixed seed)."""
        C = self.as_centres(estimate)
        R, ref = self.reference_sample()
        out = {"nicv": nicv(C, R) / ref, "matched": matched_distance(C, self._means)}
        if data is not None:
            x = check_kmeans_data(data).x
            C0 = best_of(x, self.k, np.random.default_rng(_REFERENCE_SEED), n_init=REFERENCE_INITS,
                         iterations=REFERENCE_ITERATIONS)
            out["nicv_data"] = nicv(C, x) / nicv(C0, x)
        return out

    # -- audits ---------------------------------------------------------------------------
    def audit_records(self) -> tuple[np.ndarray, np.ndarray]:
        """``(boundary, fill)`` records of the unit ball, for the privacy audits.

        ``boundary``: ``±e_a``, ``(±e_a ± e_b) / sqrt(2)`` (``a < b`` among the first three
        axes) and ``±(1, ..., 1) / sqrt(d)`` (the records of largest ℓ1 norm, ``sqrt(d)``,
        which reach the sums' ℓ1 sensitivity ``2 sqrt(d)``).  ``fill``: those and 0.  At
        most ``2d + 14`` records.
        """
        d = self.d_data
        rows = [np.eye(d), -np.eye(d)]
        diag = []
        for a, b in itertools.combinations(range(min(d, 3)), 2):
            for s in (1.0, -1.0):
                for t in (1.0, -1.0):
                    r = np.zeros(d)
                    r[a], r[b] = s, t
                    diag.append(r / math.sqrt(2.0))
        if diag:
            rows.append(np.array(diag))
        if d > 2:
            ones = np.ones(d) / math.sqrt(d)
            rows.append(np.vstack([ones, -ones]))
        boundary = np.unique(np.vstack(rows), axis=0)
        return boundary, np.vstack([boundary, np.zeros((1, d))])

    def audit_data(self, records: np.ndarray) -> KMeansData:
        """Mechanism input for a data set given as records ``(m, d)`` in the unit ball."""
        return kmeans_data(records, self.k, 1.0)

    def parameter_box(self) -> tuple[np.ndarray, np.ndarray]:
        """The box ``[-1, 1]^(k d)`` holding every released centre set (centres lie in the ball)."""
        return np.full(self.d, -1.0), np.full(self.d, 1.0)

r"""The black-box audit's calibration suite: mechanisms of known privacy loss on several
record domains, broken ones and their correct twins.

Each problem here is a bounded-mean problem on a record domain of its own shape, written
against the public contract as a user's own problem would be: the ℓ∞ cube ``[-1, 1]^2``
(:class:`Cube`), the ℓ2 disc (:class:`Disc`), the ℓ2 ball in three dimensions
(:class:`Ball`), the ℓ1 ball in three dimensions (:class:`Diamond`), the probability
simplex of three categories (:class:`Simplex`), the interval ``[-1, 1]``
(:class:`Interval`), and the ℓ2 balls of R^6 and R^8 with their sign vectors declared
(:class:`Ball6`, :class:`Ball8`: 77 and 273 records).  Each declares a finite set of audit records that contains a pair
at the domain's ℓ1 diameter ``Δ`` (the sup of ``||x - x'||_1`` over the domain).

:class:`LaplaceMean` releases the mean of ``n`` records plus independent Laplace noise of
scale ``factor * Δ / (n ε)`` on each coordinate.  The mean of two adjacent data sets moves
by ``(x - x') / n``, so the log density ratio of the releases is at most
``||x - x'||_1 / (factor Δ / ε)``, with equality on a set of positive mass: the privacy
loss is exactly ``ε / factor``.  ``factor = 1`` is the correct twin (loss ε: the
mechanism is tight, so any event the audit counts is at the edge); ``factor < 1`` is a
broken mechanism with loss ``ε / factor`` (``factor = 1 / 1.4``: 1.4 ε).

The data-dependent mechanisms (:data:`DATA_DEPENDENT`) take their noise from the data —
a clipping radius (:class:`DataRadiusMean`), the spread (:class:`SpreadMean`), a branch on
constant data (:class:`BranchMean`) — or give small data sets less noise
(:class:`SmallNMean`); each has a twin whose noise does not follow the data.

:func:`suite` and :func:`data_dependent_suite` list the cases; ``benchmarks/audit_calibration.py`` measures the detection
rate of the broken mechanisms and the false-flag rate of the twins over seeds.  On the
command line: ``kngflow audit kngflow.audit.calibration:LaplaceMean --problem
kngflow.audit.calibration:Disc --option factor=0.7``.
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np

from kngflow.mechanisms import Mechanism, Release
from kngflow.problems import Problem

__all__ = ["MeanRecords", "Cube", "Disc", "Ball", "Diamond", "Simplex", "Interval", "Ball6", "Ball8", "LaplaceMean",
           "DataRadiusMean", "SpreadMean", "BranchMean", "SmallNMean", "GEOMETRIES", "WIDE", "DATA_DEPENDENT", "suite",
           "data_dependent_suite"]


class MeanRecords(NamedTuple):
    """A data set as the calibration mechanisms see it: the mean of its ``n`` records, the
    public ℓ1 diameter of the record domain, the records themselves (rows), and the
    domain's public centre and ℓ2 radius about it (what the data-dependent mechanisms
    compare the records with)."""

    xbar: np.ndarray
    n: int
    diameter: float
    x: np.ndarray | None = None
    centre: np.ndarray | None = None
    radius: float = 1.0


class _Domain(Problem):
    """A bounded-mean problem on a record domain (subclasses: ``d``, ``diameter``,
    ``inside(x)``, ``records()``, ``uniform(n, rng)``)."""

    d: int
    diameter: float
    tolerance = 1e-9

    @property
    def theta_star(self) -> np.ndarray:
        return self.uniform(200_000, np.random.default_rng(0)).mean(0)

    def simulate(self, n: int, rng: np.random.Generator) -> MeanRecords:
        """The mean of ``n`` records drawn uniformly on the domain."""
        return self.audit_data(self.uniform(int(n), rng))

    def inside(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def records(self) -> np.ndarray:
        raise NotImplementedError

    def uniform(self, n: int, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def audit_records(self) -> tuple[np.ndarray, np.ndarray]:
        """``(boundary, fill)``: the declared records other than the centre, and all of them."""
        rec = self.records()
        centre = np.all(np.isclose(rec, self.centre()), axis=1)
        return rec[~centre], rec

    def centre(self) -> np.ndarray:
        return np.zeros(self.d)

    def audit_data(self, records: np.ndarray) -> MeanRecords:
        """The data set made of ``records`` (rows); ValueError if one lies outside the domain."""
        x = np.asarray(records, dtype=float).reshape(-1, self.d)
        if len(x) == 0 or not np.all(np.isfinite(x)) or not np.all(self.inside(x)):
            raise ValueError(f"records must be finite points of the {type(self).__name__.lower()} domain")
        centre = self.centre()
        radius = float(np.max(np.linalg.norm(self.records() - centre, axis=1)))
        return MeanRecords(x.mean(axis=0), len(x), float(self.diameter), x, centre, radius)


class Cube(_Domain):
    """Records in the ℓ∞ cube ``[-1, 1]^2``; declared: corners, edge midpoints, centre (Δ = 4)."""

    d, diameter = 2, 4.0

    def inside(self, x):
        return np.max(np.abs(x), axis=1) <= 1 + self.tolerance

    def records(self):
        return np.array(list(itertools.product((-1.0, 0.0, 1.0), repeat=2)))

    def uniform(self, n, rng):
        return rng.uniform(-1.0, 1.0, (n, 2))


class Disc(_Domain):
    """Records in the unit ℓ2 disc; declared: 16 points of the circle and the centre (Δ = 2√2)."""

    d, diameter = 2, 2 * math.sqrt(2.0)

    def inside(self, x):
        return np.linalg.norm(x, axis=1) <= 1 + self.tolerance

    def records(self):
        t = 2 * np.pi * np.arange(16) / 16
        return np.vstack([np.column_stack([np.cos(t), np.sin(t)]), np.zeros((1, 2))])

    def uniform(self, n, rng):
        t = rng.uniform(0, 2 * np.pi, n)
        r = np.sqrt(rng.uniform(0, 1, n))
        return np.column_stack([r * np.cos(t), r * np.sin(t)])


class Ball(_Domain):
    """Records in the unit ℓ2 ball of R^3; declared: the 26 unit directions of a cube's
    faces, edges and corners, and the centre (Δ = 2√3)."""

    d, diameter = 3, 2 * math.sqrt(3.0)

    def inside(self, x):
        return np.linalg.norm(x, axis=1) <= 1 + self.tolerance

    def records(self):
        v = np.array([p for p in itertools.product((-1.0, 0.0, 1.0), repeat=3) if any(p)])
        return np.vstack([v / np.linalg.norm(v, axis=1, keepdims=True), np.zeros((1, 3))])

    def uniform(self, n, rng):
        g = rng.standard_normal((n, 3))
        return g / np.linalg.norm(g, axis=1, keepdims=True) * rng.uniform(0, 1, (n, 1)) ** (1 / 3)


class Diamond(_Domain):
    """Records in the unit ℓ1 ball of R^3; declared: its 6 vertices, the 12 midpoints of its
    edges and the centre (Δ = 2)."""

    d, diameter = 3, 2.0

    def inside(self, x):
        return np.sum(np.abs(x), axis=1) <= 1 + self.tolerance

    def records(self):
        e = np.eye(3)
        mids = [s * e[i] / 2 + t * e[j] / 2 for i, j in itertools.combinations(range(3), 2)
                for s in (-1, 1) for t in (-1, 1)]
        return np.vstack([e, -e, np.array(mids), np.zeros((1, 3))])

    def uniform(self, n, rng):
        w = rng.exponential(size=(n, 4))
        return (w[:, :3] / w.sum(1, keepdims=True)) * rng.choice([-1.0, 1.0], (n, 3))


class Simplex(_Domain):
    """Records in the probability simplex of 3 categories (a histogram query); declared: the
    vertices (one category each), edge midpoints and the centroid (Δ = 2)."""

    d, diameter = 3, 2.0

    def inside(self, x):
        return (np.min(x, axis=1) >= -self.tolerance) & (np.abs(x.sum(axis=1) - 1) <= self.tolerance)

    def centre(self):
        return np.full(3, 1 / 3)

    def records(self):
        e = np.eye(3)
        mids = [(e[i] + e[j]) / 2 for i, j in itertools.combinations(range(3), 2)]
        return np.vstack([e, np.array(mids), np.full((1, 3), 1 / 3)])

    def uniform(self, n, rng):
        return rng.dirichlet(np.ones(3), n)


class _SignBall(_Domain):
    """Records in the unit ℓ2 ball of R^d; declared: the ``2^d`` sign vectors scaled to the
    sphere, ``±e_i`` and the centre (Δ = 2√d, reached by opposite sign vectors)."""

    def inside(self, x):
        return np.linalg.norm(x, axis=1) <= 1 + self.tolerance

    def records(self):
        signs = np.array(list(itertools.product((-1.0, 1.0), repeat=self.d))) / math.sqrt(self.d)
        e = np.eye(self.d)
        return np.vstack([signs, e, -e, np.zeros((1, self.d))])

    def uniform(self, n, rng):
        g = rng.standard_normal((n, self.d))
        return g / np.linalg.norm(g, axis=1, keepdims=True) * rng.uniform(0, 1, (n, 1)) ** (1 / self.d)


class Ball6(_SignBall):
    """Records in the unit ℓ2 ball of R^6: 64 sign vectors / √6, ±e_i and the centre (77
    records, Δ = 2√6)."""

    d, diameter = 6, 2 * math.sqrt(6.0)


class Ball8(_SignBall):
    """Records in the unit ℓ2 ball of R^8: 256 sign vectors / √8, ±e_i and the centre (273
    records, Δ = 2√8)."""

    d, diameter = 8, 2 * math.sqrt(8.0)


class Interval(_Domain):
    """Records in ``[-1, 1]``; declared: -1, -1/2, 0, 1/2, 1 (Δ = 2)."""

    d, diameter = 1, 2.0

    def inside(self, x):
        return np.abs(x[:, 0]) <= 1 + self.tolerance

    def records(self):
        return np.linspace(-1.0, 1.0, 5)[:, None]

    def uniform(self, n, rng):
        return rng.uniform(-1.0, 1.0, (n, 1))


class LaplaceMean(Mechanism):
    """The mean plus Laplace noise of scale ``factor * Δ / (n ε)`` per coordinate (Δ: the
    domain's ℓ1 diameter): privacy loss exactly ``ε / factor`` (see the module docstring)."""

    def __init__(self, *, factor: float = 1.0):
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not (0 < factor < math.inf):
            raise ValueError(f"factor must be a finite number > 0, got {factor!r}")
        self.factor = float(factor)

    def release(self, data: MeanRecords, epsilon: float, rng: np.random.Generator) -> Release:
        scale = self.factor * data.diameter / (data.n * epsilon)
        return Release(data.xbar + rng.laplace(0.0, scale, data.xbar.shape))

    def loss(self, epsilon: float) -> float:
        """The exact privacy loss at ``epsilon``."""
        return epsilon / self.factor

    def __repr__(self) -> str:
        return f"LaplaceMean(factor={self.factor:g})"


def _unit(value: float, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value <= 1):
        raise ValueError(f"{name} must be a number in (0, 1], got {value!r}")
    return float(value)


class _DataScaledMean(Mechanism):
    """The mean plus Laplace noise of scale ``s(D) * Δ / (n ε)`` per coordinate, where the
    factor ``s(D)`` in ``[floor, 1]`` is taken from the data (subclasses: ``factor``).

    With ``floor = 1`` the factor is 1 on every data set: the correct twin, a
    :class:`LaplaceMean` of loss exactly ε.  With ``floor < 1`` it is not ε-DP for any ε:
    on two adjacent data sets with factors ``s < s'`` the log density ratio of the
    releases grows without bound along any coordinate (``|t|/(s b) - |t - m|/(s' b)``,
    ``b = Δ/(n ε)``), so these mechanisms are the most common real bug in DP code (a
    sensitivity, clipping radius or branch taken from the data) and must be flagged
    whatever the pair's records, once the search reaches data sets of both kinds."""

    def __init__(self, *, floor: float = 1.0):
        self.floor = _unit(floor, "floor")

    def factor(self, data: MeanRecords) -> float:
        raise NotImplementedError

    def release(self, data: MeanRecords, epsilon: float, rng: np.random.Generator) -> Release:
        scale = max(self.floor, min(1.0, self.factor(data))) * data.diameter / (data.n * epsilon)
        return Release(data.xbar + rng.laplace(0.0, scale, data.xbar.shape))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(floor={self.floor:g})"


class DataRadiusMean(_DataScaledMean):
    """Noise scaled by a clipping radius taken from the data: ``s(D) = max_i ||x_i - c||_2 / R``
    (``c``, ``R``: the domain's centre and radius), at least ``floor``.  A data set of
    records near the centre gets ``floor`` of the noise."""

    def factor(self, data):
        return float(np.max(np.linalg.norm(data.x - data.centre, axis=1))) / data.radius


class SpreadMean(_DataScaledMean):
    """Noise scaled by the data's spread: ``s(D) = max_i ||x_i - xbar||_2 / R``, at least
    ``floor``.  A data set of identical records gets ``floor`` of the noise."""

    def factor(self, data):
        return float(np.max(np.linalg.norm(data.x - data.xbar, axis=1))) / data.radius


class BranchMean(_DataScaledMean):
    """A data-dependent branch: ``s(D) = floor`` when every record is the same (a "constant
    column" shortcut), else 1."""

    def factor(self, data):
        return 0.0 if np.all(data.x == data.x[0]) else 1.0


class SmallNMean(Mechanism):
    """Less noise for small data sets: scale ``factor * Δ / (n ε)`` when ``n < below``, the
    calibrated ``Δ / (n ε)`` otherwise.  Its loss is ``ε / factor`` on data sets of fewer
    than ``below`` records and ε on the others, so it is caught only where the search
    tries the smallest data sets; ``factor = 1`` is the correct twin."""

    def __init__(self, *, factor: float = 1.0, below: int = 4):
        self.factor = _unit(factor, "factor")
        if isinstance(below, bool) or not isinstance(below, int) or below < 1:
            raise ValueError(f"below must be an integer >= 1, got {below!r}")
        self.below = below

    def release(self, data: MeanRecords, epsilon: float, rng: np.random.Generator) -> Release:
        f = self.factor if data.n < self.below else 1.0
        return Release(data.xbar + rng.laplace(0.0, f * data.diameter / (data.n * epsilon), data.xbar.shape))

    def loss(self, epsilon: float) -> float:
        """The exact privacy loss at ``epsilon`` (reached on the small data sets)."""
        return epsilon / self.factor

    def __repr__(self) -> str:
        return f"SmallNMean(factor={self.factor:g}, below={self.below})"


#: The suite's record domains.
GEOMETRIES = {"l-inf cube": Cube, "l2 disc": Disc, "l2 ball (3-D)": Ball, "l1 ball (3-D)": Diamond,
              "simplex": Simplex, "1-D interval": Interval, "l2 ball (6-D)": Ball6, "l2 ball (8-D)": Ball8}
#: Geometries added with losses of 1.5 ε (their extreme pairs are few among many records).
WIDE = ("l2 ball (6-D)", "l2 ball (8-D)")
#: The data-dependent broken mechanisms: (name, broken, correct twin).
DATA_DEPENDENT = {
    "radius from the data": (DataRadiusMean(floor=0.25), DataRadiusMean(floor=1.0)),
    "spread of the data": (SpreadMean(floor=0.25), SpreadMean(floor=1.0)),
    "branch on constant data": (BranchMean(floor=0.5), BranchMean(floor=1.0)),
    "less noise for n < 4": (SmallNMean(factor=0.5, below=4), SmallNMean(factor=1.0, below=4)),
}


def suite(losses=(1.2, 1.4, 1.7, 2.0)) -> list[tuple[str, Problem, Mechanism, float]]:
    """``(geometry, problem, mechanism, true loss in units of ε)`` for every geometry: the
    correct twin (loss 1) and a broken mechanism at each of ``losses`` (1.5 for the
    geometries of :data:`WIDE`)."""
    return [(name, cls(), LaplaceMean(factor=1.0 / loss), float(loss))
            for name, cls in GEOMETRIES.items() for loss in (1.0, *((1.5,) if name in WIDE else losses))]


def data_dependent_suite(geometries=("l2 disc", "l2 ball (3-D)")) -> list[tuple[str, str, Problem, Mechanism, bool]]:
    """``(geometry, mechanism name, problem, mechanism, broken)``: each data-dependent
    mechanism of :data:`DATA_DEPENDENT` and its twin on each of ``geometries``."""
    return [(g, name, GEOMETRIES[g](), mech, broken) for g in geometries
            for name, pair in DATA_DEPENDENT.items() for mech, broken in zip(pair, (True, False))]

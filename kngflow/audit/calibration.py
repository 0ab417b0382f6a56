r"""The black-box audit's calibration suite: mechanisms of known privacy loss on several
record domains, broken ones and their correct twins.

Each problem here is a bounded-mean problem on a record domain of its own shape, written
against the public contract as a user's own problem would be: the ℓ∞ cube ``[-1, 1]^2``
(:class:`Cube`), the ℓ2 disc (:class:`Disc`), the ℓ2 ball in three dimensions
(:class:`Ball`), the ℓ1 ball in three dimensions (:class:`Diamond`), the probability
simplex of three categories (:class:`Simplex`) and the interval ``[-1, 1]``
(:class:`Interval`).  Each declares a finite set of audit records that contains a pair
at the domain's ℓ1 diameter ``Δ`` (the sup of ``||x - x'||_1`` over the domain).

:class:`LaplaceMean` releases the mean of ``n`` records plus independent Laplace noise of
scale ``factor * Δ / (n ε)`` on each coordinate.  The mean of two adjacent data sets moves
by ``(x - x') / n``, so the log density ratio of the releases is at most
``||x - x'||_1 / (factor Δ / ε)``, with equality on a set of positive mass: the privacy
loss is exactly ``ε / factor``.  ``factor = 1`` is the correct twin (loss ε: the
mechanism is tight, so any event the audit counts is at the edge); ``factor < 1`` is a
broken mechanism with loss ``ε / factor`` (``factor = 1 / 1.4``: 1.4 ε).

:func:`suite` lists the cases; ``benchmarks/audit_calibration.py`` measures the detection
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

__all__ = ["MeanRecords", "Cube", "Disc", "Ball", "Diamond", "Simplex", "Interval", "LaplaceMean", "GEOMETRIES",
           "suite"]


class MeanRecords(NamedTuple):
    """A data set as the calibration mechanisms see it: the mean of its ``n`` records and
    the public ℓ1 diameter of the record domain."""

    xbar: np.ndarray
    n: int
    diameter: float


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
        return MeanRecords(x.mean(axis=0), len(x), float(self.diameter))


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


#: The suite's record domains.
GEOMETRIES = {"l-inf cube": Cube, "l2 disc": Disc, "l2 ball (3-D)": Ball, "l1 ball (3-D)": Diamond,
              "simplex": Simplex, "1-D interval": Interval}


def suite(losses=(1.2, 1.4, 1.7, 2.0)) -> list[tuple[str, Problem, Mechanism, float]]:
    """``(geometry, problem, mechanism, true loss in units of ε)`` for every geometry: the
    correct twin (loss 1) and a broken mechanism at each of ``losses``."""
    return [(name, cls(), LaplaceMean(factor=1.0 / loss), float(loss))
            for name, cls in GEOMETRIES.items() for loss in (1.0, *losses)]

"""Adjacent data sets for privacy audits, built from a problem's records.

A data set is an array of records (rows); what a record is belongs to the problem
(linear regression: ``(x_1, ..., x_d, y)``).  Two data sets are adjacent when one record
is replaced by another.  The problem supplies ``audit_records() -> (boundary, fill)``;
audits change a boundary record (where sensitivity bounds are reached) inside small data
sets made of fill records, which is where one record moves a release most.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

__all__ = ["AdjacentPair", "audit_view", "candidate_pairs", "parse_pair"]

#: Data-set sizes tried by the searches (small n: one record weighs most).
SIZES = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)


@dataclass(frozen=True)
class AdjacentPair:
    """Data sets ``rest + [record]`` and ``rest + [other]``."""

    rest: np.ndarray
    record: np.ndarray
    other: np.ndarray

    def datasets(self) -> tuple[np.ndarray, np.ndarray]:
        return np.vstack([self.rest, self.record]), np.vstack([self.rest, self.other])

    def swapped(self) -> "AdjacentPair":
        return AdjacentPair(self.rest, self.other, self.record)

    def __str__(self) -> str:
        """The ``--pair`` syntax: ``14*(1,-0.5,-1) + (1,-1,1) -> (1,1,-1)``."""
        rows, counts = np.unique(self.rest, axis=0, return_counts=True)
        terms = [f"{k}*{_fmt(r)}" if k > 1 else _fmt(r) for r, k in zip(rows, counts)]
        return " + ".join(terms + [_fmt(self.record)]) + " -> " + _fmt(self.other)


class _RestrictedProblem:
    """``problem`` with ``audit_records`` passed through the claim's restriction; the rest of
    what audits read of a problem (``d``, ``audit_data``, ``parameter_box``)
    is the problem's."""

    def __init__(self, problem, restrict):
        self._problem, self._restrict = problem, restrict

    @property
    def d(self) -> int:
        return self._problem.d

    @property
    def name(self) -> str:
        return self._problem.name

    def audit_records(self):
        return self._restrict(*self._problem.audit_records())

    def audit_data(self, records):
        return self._problem.audit_data(records)

    def parameter_box(self):
        return self._problem.parameter_box()


def audit_view(mechanism, problem):
    """The problem as an audit of ``mechanism`` sees it.

    A mechanism whose declared domain is narrower than the problem's (sufficient-statistics
    regression needs the intercept column equal to 1) says so in its privacy claim,
    ``restrict_records(boundary, fill) -> (boundary, fill)``; audits then draw their
    records from that domain only.
    """
    restrict = mechanism.privacy_claim().restrict_records
    return problem if restrict is None else _RestrictedProblem(problem, restrict)


def _fmt(row) -> str:
    return "(" + ",".join(f"{v:g}" for v in row) + ")"


def candidate_pairs(problem, rng: np.random.Generator, count: int, min_size: int = 1) -> list[AdjacentPair]:
    """``count`` adjacent pairs: a size from :data:`SIZES` (at least ``min_size``), the
    other records split between two fill records, the changed record a boundary record
    replaced by another boundary record."""
    boundary, fill = problem.audit_records()
    sizes = [n for n in SIZES if n >= min_size] or [min_size]
    out = []
    for _ in range(count):
        n = int(rng.choice(sizes))
        a, b = fill[rng.integers(len(fill), size=2)]
        k = int(rng.integers(0, n))
        rest = np.vstack([np.tile(a, (k, 1)), np.tile(b, (n - 1 - k, 1))]).reshape(n - 1, -1)
        i, j = rng.choice(len(boundary), 2, replace=False)
        out.append(AdjacentPair(rest, boundary[i], boundary[j]))
    return out


_ROW = re.compile(r"^\s*(?:(\d+)\s*\*\s*)?\(([^()]*)\)\s*$")


def parse_pair(text: str, width: int) -> AdjacentPair:
    """Parse ``K*(r) + ... + (changed) -> (replacement)`` with records of ``width`` numbers.

    Raises ValueError naming what is wrong.
    """
    if text.count("->") != 1:
        raise ValueError("pair must have the form 'K*(r) + ... + (record) -> (other)' with one '->'")
    left, right = text.split("->")

    def row(term: str) -> tuple[int, np.ndarray]:
        m = _ROW.match(term)
        if not m:
            raise ValueError(f"pair: cannot read record {term.strip()!r}; write (v1,...,v{width}) or K*(...)")
        try:
            vals = np.array([float(v) for v in m.group(2).split(",")])
        except ValueError:
            raise ValueError(f"pair: record {term.strip()!r} must hold numbers") from None
        if vals.shape != (width,) or not np.all(np.isfinite(vals)):
            raise ValueError(f"pair: record {term.strip()!r} must hold {width} finite numbers")
        return int(m.group(1) or 1), vals

    terms = [row(t) for t in left.split("+")]
    count, record = terms[-1]
    if count != 1:
        raise ValueError("pair: the changed record (last before '->') must appear once")
    k_other, other = row(right)
    if k_other != 1:
        raise ValueError("pair: the replacement record (after '->') must appear once")
    rest = [np.tile(v, (k, 1)) for k, v in terms[:-1]]
    rest = np.vstack(rest) if rest else np.empty((0, width))
    return AdjacentPair(rest, record, other)

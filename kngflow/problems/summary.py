"""Releases that are a posterior summary of one scalar: ``(mean, lower, upper)`` of an
equal-tailed credible interval, or the point estimate alone, with their error measures.

A problem subclasses :class:`PosteriorSummary` (a :class:`~kngflow.problems.base.SimulatedProblem`) and declares ``truth`` (the true value of the
summarised scalar), ``summary``, ``error_measure`` and ``level`` (checked by
:func:`check_summary` and :func:`check_level`).  The error measures of a stored estimate:

* ``abs``: ``|mean - truth|`` (the posterior mean, or one posterior sample);
* ``miss``: 1 when ``truth`` lies outside ``[lower, upper]``, else 0 (its mean over
  replicates is the miss rate, ``1 - coverage``); ``covered``: ``1 - miss``;
* ``width``: ``upper - lower``.

``miss``, ``covered`` and ``width`` are NaN for a point release.
"""

from __future__ import annotations

import math
from numbers import Real

import numpy as np

from kngflow.problems.base import SimulatedProblem

__all__ = ["ERROR_MEASURES", "SUMMARIES", "PosteriorSummary", "check_level", "check_summary"]

#: the error measures of a posterior summary (module docstring)
ERROR_MEASURES = ("abs", "miss", "width")
#: what a release holds: the interval's ``(mean, lower, upper)``, or the point estimate
SUMMARIES = ("interval", "point")


def check_level(level) -> float:
    """The credible level, a number in (0, 1)."""
    if isinstance(level, bool) or not isinstance(level, Real) or not 0.0 < level < 1.0:
        raise ValueError(f"level must be a number in (0, 1), got {level!r}")
    return float(level)


def check_summary(summary, error_measure) -> tuple[str, str]:
    """``(summary, error_measure)``, one of :data:`SUMMARIES` and one of :data:`ERROR_MEASURES`
    (a point release has only ``abs``)."""
    if summary not in SUMMARIES:
        raise ValueError(f"summary must be one of {list(SUMMARIES)}, got {summary!r}")
    if error_measure not in ERROR_MEASURES:
        raise ValueError(f"error_measure must be one of {list(ERROR_MEASURES)}, got {error_measure!r}")
    if summary == "point" and error_measure != "abs":
        raise ValueError(f"error_measure {error_measure!r} needs summary = 'interval'; with summary = 'point' "
                         "only 'abs' is allowed")
    return summary, error_measure


class PosteriorSummary(SimulatedProblem):
    """The release layout and error measures of a posterior summary of ``truth`` (module docstring)."""

    summary: str
    error_measure: str
    level: float

    @property
    def truth(self) -> float:
        """The true value of the summarised scalar."""
        raise NotImplementedError

    @property
    def interval(self) -> bool:
        return self.summary == "interval"

    @property
    def d(self) -> int:
        """Entries of a release: 3 (``mean, lower, upper``) or 1 (the point estimate)."""
        return 3 if self.interval else 1

    @property
    def theta_star(self) -> np.ndarray:
        """``truth`` repeated ``d`` times."""
        return np.full(self.d, self.truth)

    @property
    def coefficient_summaries(self) -> bool:
        """Only the point release's entry is an estimate of ``truth``."""
        return not self.interval

    def as_summary(self, estimate) -> tuple[float, float, float]:
        """``(mean, lower, upper)`` of a stored estimate (NaN bounds for ``summary = "point"``)."""
        e = np.asarray(estimate, dtype=np.float64)
        if e.shape != (self.d,):
            raise ValueError(f"estimate must have shape ({self.d},), got {e.shape}")
        if self.interval:
            return float(e[0]), float(e[1]), float(e[2])
        return float(e[0]), math.nan, math.nan

    def error_measures(self, estimate, data=None) -> dict:
        """``abs``, ``miss``, ``covered`` and ``width`` of a stored estimate (module docstring)."""
        mean, lo, hi = self.as_summary(estimate)
        truth = self.truth
        has = math.isfinite(lo) and math.isfinite(hi)
        miss = (0.0 if lo <= truth <= hi else 1.0) if has else math.nan
        return {"abs": abs(mean - truth), "miss": miss, "covered": 1.0 - miss,
                "width": (hi - lo) if has else math.nan}

    def error(self, estimate) -> float:
        """The declared ``error_measure`` of a stored estimate."""
        return self.error_measures(estimate)[self.error_measure]

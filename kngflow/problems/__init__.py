"""The problem contract: :class:`Problem` (:mod:`kngflow.problems.base`) and shared protocols.

This package imports nothing above it (no registry, no model).  Problems are built by
name through the façade: ``from kngflow.api import get_problem`` (names resolved by
:mod:`kngflow.registry`); the models' data helpers (``stats_from_arrays``, ``mean_data``,
...) are in :mod:`kngflow.api` too.
"""

from __future__ import annotations

from kngflow.problems.base import Problem, check_problem, check_problem_class

__all__ = ["Problem", "check_problem", "check_problem_class"]

#: names this package held before the façade: they live in kngflow.api now
_MOVED = frozenset({
    "PROBLEMS", "get_problem", "problem_options", "stats_from_arrays", "logistic_data", "mean_data",
    "quantile_data", "quantreg_data", "geomedian_data", "GeoMedianData", "LinearStats", "LogisticData",
    "MeanData", "QuantileData", "QuantRegData", "GeoMedianProblem", "LinearProblem", "LogisticProblem",
    "MeanProblem", "QuantileProblem", "QuantRegProblem",
})


def __getattr__(name: str):
    if name in _MOVED:
        raise AttributeError(f"kngflow.problems.{name} is in the public façade now: from kngflow.api import {name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

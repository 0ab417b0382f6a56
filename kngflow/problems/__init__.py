"""Statistical problems: data protocols, sufficient statistics, losses, sensitivities.

The contract is :class:`Problem` (:mod:`kngflow.problems.base`).  ``get_problem(name,
**options)`` builds a validated problem: ``name`` is a built-in problem, a name registered
through the ``kngflow.problems`` entry-point group, or a ``"package.module:Class"``
reference (:mod:`kngflow.registry`).
"""

from __future__ import annotations

import inspect

from kngflow.problems.base import Problem

#: public names defined by the model packages: name -> model (imported on first use)
_DATA_HELPERS = {
    "stats_from_arrays": "linear", "LinearStats": "linear", "LinearProblem": "linear",
    "logistic_data": "logistic", "LogisticData": "logistic", "LogisticProblem": "logistic",
    "mean_data": "mean", "MeanData": "mean", "MeanProblem": "mean",
    "quantile_data": "quantile", "QuantileData": "quantile", "QuantileProblem": "quantile",
    "quantreg_data": "quantreg", "QuantRegData": "quantreg", "QuantRegProblem": "quantreg",
    "geomedian_data": "geomedian", "GeoMedianData": "geomedian", "GeoMedianProblem": "geomedian",
}


def __getattr__(name: str):
    """``PROBLEMS`` (name -> class) and the models' data helpers, imported on first use."""
    import importlib

    if name == "PROBLEMS":
        from kngflow.models import MODELS, load

        value = {m: load(m).PROBLEM for m in MODELS}
    elif name in _DATA_HELPERS:
        value = getattr(importlib.import_module(f"kngflow.models.{_DATA_HELPERS[name]}.problem"), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


__all__ = [
    "PROBLEMS",
    "Problem",
    "problem_options",
    # the data helpers: a user's own records -> a mechanism's input
    "stats_from_arrays",
    "logistic_data",
    "mean_data",
    "quantile_data",
    "quantreg_data",
    "geomedian_data",
    "GeoMedianData",
    "LinearStats",
    "LogisticData",
    "MeanData",
    "QuantileData",
    "QuantRegData",
    "get_problem",
    "GeoMedianProblem",
    "LinearProblem",
    "LogisticProblem",
    "MeanProblem",
    "QuantileProblem",
    "QuantRegProblem",
]


def get_problem(name: str, **options):
    """Return the problem ``name`` built with keyword ``options``.

    Raises ValueError naming ``problem`` and the allowed names for an unknown
    problem, and TypeError naming the option for an unknown option.
    """
    from kngflow.registry import problem_class

    cls = problem_class(name)
    try:
        return cls(**options)
    except TypeError as exc:
        allowed = problem_options(cls)
        raise TypeError(f"unknown option for problem {name!r}: {exc}; allowed options: {allowed}") from None


def problem_options(cls) -> list[str]:
    """Names of the options (keyword arguments of the constructor) of problem class ``cls``."""
    fields = getattr(cls, "__dataclass_fields__", None)
    if fields is not None:
        return [f for f, spec in fields.items() if spec.init]
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    return [p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]

"""Statistical problems: data protocols, sufficient statistics, losses, sensitivities.

The contract is :class:`Problem` (:mod:`kngflow.problems.base`).  ``get_problem(name,
**options)`` builds a validated problem: ``name`` is a built-in problem, a name registered
through the ``kngflow.problems`` entry-point group, or a ``"package.module:Class"``
reference (:mod:`kngflow.registry`).
"""

from __future__ import annotations

import inspect

from .base import Problem

from .geomedian import GeoMedianProblem
from .linear import LinearProblem
from .logistic import LogisticProblem
from .mean import MeanProblem
from .quantile import QuantileProblem
from .quantreg import QuantRegProblem

PROBLEMS = {
    "linear": LinearProblem,
    "quantile": QuantileProblem,
    "quantreg": QuantRegProblem,
    "mean": MeanProblem,
    "geomedian": GeoMedianProblem,
    "logistic": LogisticProblem,
}

__all__ = [
    "PROBLEMS",
    "Problem",
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
    from ..registry import problem_class

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

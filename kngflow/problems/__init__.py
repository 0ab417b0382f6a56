"""Statistical problems: data protocols, sufficient statistics, losses, sensitivities.

``get_problem(name, **options)`` builds a validated problem object (see
``docs/contracts.md`` for the interface the sweep engine relies on).
"""

from __future__ import annotations

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
    if name not in PROBLEMS:
        raise ValueError(f"problem must be one of {sorted(PROBLEMS)}, got {name!r}")
    cls = PROBLEMS[name]
    try:
        return cls(**options)
    except TypeError as exc:
        allowed = [f for f in cls.__dataclass_fields__ if cls.__dataclass_fields__[f].init]
        raise TypeError(f"unknown option for problem {name!r}: {exc}; allowed options: {allowed}") from None

"""Differential-privacy mechanisms (never imports dask or zarr).

``get_mechanism(problem, kind, **options)`` builds a validated mechanism whose
``release(stats, epsilon, rng)`` returns a :class:`~kngflow.mechanisms.base.Release`.
"""

from __future__ import annotations

import inspect

from .base import Release
from . import erm, erm_linear, geomedian, linear_ss, logistic, mean, quantile, quantreg
from .linear import KNG, Exponential, ExtendedObjectivePerturbation, NonPrivate, ObjectivePerturbation
from .quantile import private_quantile

MECHANISMS = {
    "linear": {
        "nonprivate": NonPrivate,
        "kng": KNG,
        "exponential": Exponential,
        "objective": ObjectivePerturbation,
        "objective_ext": ExtendedObjectivePerturbation,
        "ss": linear_ss.SufficientStatistics,
        "output": erm_linear.OutputPerturbation,
        "noisy_gd": erm_linear.NoisyGD,
    },
    "quantile": {"nonprivate": quantile.NonPrivate, "kng": quantile.KNG, "exponential": quantile.Exponential},
    "quantreg": {"nonprivate": quantreg.NonPrivate, "kng": quantreg.KNG, "exponential": quantreg.Exponential},
    "mean": {"nonprivate": mean.NonPrivate, "kng": mean.KNG, "exponential": mean.Exponential},
    "geomedian": {"nonprivate": geomedian.NonPrivate, "kng": geomedian.KNG},
    "logistic": {
        "nonprivate": logistic.NonPrivate,
        "kng": logistic.KNG,
        "objective_ext": logistic.ExtendedObjectivePerturbation,
        "objective": logistic.ObjectivePerturbation,
        "output": erm.OutputPerturbation,
        "objective_chaudhuri": erm.ObjectivePerturbationChaudhuri,
        "noisy_gd": erm.NoisyGD,
        "dpsgd": erm.DPSGD,
    },
}

__all__ = ["MECHANISMS", "Release", "get_mechanism", "allowed_options", "private_quantile"]


def allowed_options(problem: str, kind: str) -> list[str]:
    """Names of the keyword options of mechanism ``kind`` for ``problem``."""
    cls = MECHANISMS[problem][kind]
    names = []
    for klass in cls.__mro__:
        if "__init__" in klass.__dict__:
            params = inspect.signature(klass.__init__).parameters.values()
            names += [p.name for p in params if p.kind is p.KEYWORD_ONLY and p.name not in names]
            if not any(p.kind is p.VAR_KEYWORD for p in params):
                break  # options passed on with **kw continue up the hierarchy
    return names


def get_mechanism(problem: str, kind: str, **options):
    """Build mechanism ``kind`` for ``problem`` with keyword ``options``.

    Raises ValueError naming ``problem``/``kind`` and the allowed values, and
    TypeError naming an unknown option and the allowed ones.
    """
    if problem not in MECHANISMS:
        raise ValueError(f"problem must be one of {sorted(MECHANISMS)}, got {problem!r}")
    kinds = MECHANISMS[problem]
    if kind not in kinds:
        raise ValueError(f"mechanism kind must be one of {sorted(kinds)} for problem {problem!r}, got {kind!r}")
    allowed = allowed_options(problem, kind)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise TypeError(f"unknown option(s) {unknown} for mechanism {kind!r}; allowed options: {allowed}")
    return kinds[kind](**options)

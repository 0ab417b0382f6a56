"""Differential-privacy mechanisms (never imports dask or zarr).

The contract: :class:`Mechanism` (keyword-only options, ``release(data, epsilon, rng)``
returning a :class:`Release`), typed :class:`Diagnostic` declarations and one privacy
claim (:mod:`kngflow.mechanisms.claims`).  ``get_mechanism(problem, kind, **options)``
builds a validated mechanism: ``kind`` is a built-in kind of ``problem``, a name
registered through the ``kngflow.mechanisms`` entry-point group, or a
``"package.module:Class"`` reference (:mod:`kngflow.registry`).
"""

from __future__ import annotations

from .base import Diagnostic, Mechanism, Release
from .claims import BlackBox, Composed, Density, GradientNoise, PrivacyClaim, StatisticNoise
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

__all__ = ["MECHANISMS", "Mechanism", "Release", "Diagnostic", "PrivacyClaim", "BlackBox", "Density",
           "GradientNoise", "StatisticNoise", "Composed", "get_mechanism", "allowed_options", "private_quantile"]


def allowed_options(problem: str, kind: str) -> list[str]:
    """Names of the keyword options of mechanism ``kind`` for ``problem``."""
    from ..registry import mechanism_class

    return mechanism_class(problem, kind).option_names()


def get_mechanism(problem: str, kind: str, **options):
    """Build mechanism ``kind`` for ``problem`` with keyword ``options``.

    Raises ValueError (:class:`kngflow.registry.PluginError`) naming ``kind`` and the
    allowed values, and TypeError naming an unknown option and the allowed ones.
    """
    from ..registry import is_reference, mechanism_class, problem_names

    if not is_reference(problem) and problem not in problem_names():
        raise ValueError(f"problem must be one of {problem_names()} or a 'package.module:Class' reference, "
                         f"got {problem!r}")
    cls = mechanism_class(problem, kind)
    allowed = cls.option_names()
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise TypeError(f"unknown option(s) {unknown} for mechanism {kind!r}; allowed options: {allowed}")
    return cls(**options)

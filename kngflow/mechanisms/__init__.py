"""Differential-privacy mechanisms: the contract (never imports dask, zarr or a model).

The contract: :class:`Mechanism` (keyword-only options, ``release(data, epsilon, rng)``
returning a :class:`Release`), typed :class:`Diagnostic` declarations and one privacy
claim (:mod:`kngflow.mechanisms.claims`).  ``get_mechanism(problem, kind, **options)``
builds a validated mechanism: ``kind`` is a built-in kind of ``problem``, a name
registered through the ``kngflow.mechanisms`` entry-point group, or a
``"package.module:Class"`` reference (:mod:`kngflow.registry`).
"""

from __future__ import annotations

from kngflow.mechanisms.base import Diagnostic, Mechanism, Release
from kngflow.mechanisms.claims import BlackBox, Composed, Density, GradientNoise, PrivacyClaim, StatisticNoise

__all__ = ["MECHANISMS", "Mechanism", "Release", "Diagnostic", "PrivacyClaim", "BlackBox", "Density",
           "GradientNoise", "StatisticNoise", "Composed", "get_mechanism", "allowed_options", "private_quantile"]


def __getattr__(name: str):
    """``MECHANISMS`` (problem -> kind -> class) and ``private_quantile``, built on first use
    from the model packages, so that importing the contract imports no model."""
    if name == "MECHANISMS":
        from kngflow.models import MODELS, load

        value = {m: dict(load(m).MECHANISMS) for m in MODELS}
    elif name == "private_quantile":
        from kngflow.models.quantile.mechanisms import private_quantile as value
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def allowed_options(problem: str, kind: str) -> list[str]:
    """Names of the keyword options of mechanism ``kind`` for ``problem``."""
    from kngflow.registry import mechanism_class

    return mechanism_class(problem, kind).option_names()


def get_mechanism(problem: str, kind: str, **options):
    """Build mechanism ``kind`` for ``problem`` with keyword ``options``.

    ``hardened`` defaults to True here (the API a user calls on their own data) for every
    private mechanism that declares a hardening (every built-in one): the release is
    snapped to a public grid (:mod:`kngflow.mechanisms.hardening`); options it cannot
    honour raise a one-line error naming them; pass ``hardened=False`` for the unhardened
    floating-point release.

    Raises ValueError (:class:`kngflow.registry.PluginError`) naming ``kind`` and the
    allowed values, and TypeError naming an unknown option and the allowed ones.
    """
    from kngflow.registry import is_reference, mechanism_class, problem_names

    if not is_reference(problem) and problem not in problem_names():
        raise ValueError(f"problem must be one of {problem_names()} or a 'package.module:Class' reference, "
                         f"got {problem!r}")
    cls = mechanism_class(problem, kind)
    allowed = cls.option_names()
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise TypeError(f"unknown option(s) {unknown} for mechanism {kind!r}; allowed options: {allowed}")
    if "hardened" not in options and cls.private and cls.declares_hardening():
        options = {**options, "hardened": True}
    return cls(**options)

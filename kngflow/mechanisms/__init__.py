"""Differential-privacy mechanisms: the contract (never imports dask, zarr, a model or the registry).

The contract: :class:`Mechanism` (keyword-only options, ``release(data, epsilon, rng)``
returning a :class:`Release`), typed :class:`Diagnostic` declarations and one privacy
claim (:mod:`kngflow.mechanisms.claims`); the mechanism families written once for every
model (:mod:`kngflow.mechanisms.generic`, :mod:`kngflow.mechanisms.erm`) and the
hardening.  Mechanisms are built by name through the façade:
``from kngflow.api import get_mechanism, private_quantile`` (:mod:`kngflow.registry`).
"""

from __future__ import annotations

from kngflow.mechanisms.base import Diagnostic, Mechanism, Release
from kngflow.mechanisms.claims import BlackBox, Composed, Density, GradientNoise, PrivacyClaim, StatisticNoise

__all__ = ["Mechanism", "Release", "Diagnostic", "PrivacyClaim", "BlackBox", "Density", "GradientNoise",
           "StatisticNoise", "Composed"]

#: names this package held before the façade: they live in kngflow.api now
_MOVED = frozenset({"MECHANISMS", "get_mechanism", "allowed_options", "private_quantile"})


def __getattr__(name: str):
    if name in _MOVED:
        raise AttributeError(f"kngflow.mechanisms.{name} is in the public façade now: from kngflow.api import {name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""The built-in statistical models, one package per model.

Each package holds its problem (data protocol, loss, gradient, sensitivities), its
mechanisms and its model-specific kernels, and exposes ``PROBLEM`` (the problem class) and
``MECHANISMS`` (kind -> mechanism class).  No model imports another; shared pieces live in
:mod:`kngflow.kernels`, :mod:`kngflow.mechanisms` (the contract and the mechanism families
written once: generic KNG and exponential mechanism, private ERM) and :mod:`kngflow.problems`.
"""

from __future__ import annotations

import importlib

__all__ = ["MODELS", "load"]

#: the built-in models, by problem name
MODELS = ("linear", "quantile", "quantreg", "mean", "geomedian", "logistic")


def load(name: str):
    """The model package ``name`` (imported on first use)."""
    return importlib.import_module(f"kngflow.models.{name}")

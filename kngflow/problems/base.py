"""Shared pieces of simulated problems: the defaults of the problem interface.

A problem (``docs/contracts.md``) that derives from :class:`SimulatedProblem` only has to
provide ``name``, ``d``, ``theta_star``, ``simulate`` and its audit hooks; this class
supplies ``check_n`` (n >= 1), the ℓ2 ``error``, no ``caveats`` and no per-data-set
store variables.
"""

from __future__ import annotations

import math
from numbers import Real

import numpy as np

__all__ = ["SimulatedProblem", "check_dimension", "check_vector", "check_finite_positive"]


def check_dimension(d) -> int:
    """``d`` as an int; ValueError naming ``d`` unless an integer >= 1."""
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError(f"d must be an integer >= 1, got {d!r}")
    return int(d)


def check_finite_positive(name: str, value) -> float:
    """``value`` as a float; ValueError naming ``name`` unless finite and > 0."""
    if isinstance(value, bool) or not isinstance(value, Real) or not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def check_vector(name: str, value, d: int) -> tuple:
    """``value`` (list or tuple of ``d`` finite reals; None: zeros) as a tuple of floats."""
    value = (0.0,) * d if value is None else value
    if not isinstance(value, (list, tuple)) or len(value) != d or not all(
        isinstance(t, Real) and not isinstance(t, bool) and math.isfinite(t) for t in value
    ):
        raise ValueError(f"{name} must be a list of {d} finite numbers, got {value!r}")
    return tuple(float(t) for t in value)


class SimulatedProblem:
    """Defaults of the problem interface (see the module docstring)."""

    @property
    def caveats(self) -> str:
        return ""

    @property
    def reference(self) -> str:
        """What ``theta_star`` is, for labels: the true parameter of the simulation."""
        return "truth"

    def check_n(self, n: int) -> None:
        """Raise TypeError/ValueError naming ``n`` unless an integer ``>= 1``."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
            raise TypeError(f"n must be an integer, got {type(n).__name__}")
        if n < 1:
            raise ValueError(f"n must be at least 1, got n={n}")

    def error(self, estimate) -> float:
        """``||estimate - theta*||_2``."""
        return float(np.linalg.norm(np.asarray(estimate, float) - self.theta_star))

    @property
    def data_variables(self) -> dict:
        """No per-data-set store variables."""
        return {}

    def data_summary(self, data) -> dict:
        return {}

"""The SVM's data: records ``(x_i, y_i)``, covariates in a declared ball, labels ``±1``.

:class:`SVMData` holds a design ``X`` (n, d) whose rows lie in the public record domain
``{||x||_D <= r}`` (:class:`~kngflow.problems.domains.RecordDomain`; the fields
``data_norm`` = ``D`` and ``radius`` = ``r``, default the unit ℓ2 ball
:data:`UNIT_BALL`), labels ``y`` in ``{-1, +1}`` and the Huber smoothing ``h`` of the
loss (public: it is part of the loss every mechanism minimises, so it travels with the
data).  :func:`svm_data` builds one from a user's arrays, :func:`check_svm_data`
validates one handed to a mechanism.

The unit ball is checked on squared row norms, ``sum_j x_ij^2 <= 1 + 1e-12``: a row
rescaled to norm 1 may round to just above it, and every constant of the model then holds
within a factor ``1 + 1e-12`` (as :meth:`~kngflow.problems.domains.RecordDomain.contains`
allows for every ℓ1 and ℓ2 ball).
"""

from __future__ import annotations

from numbers import Real
from typing import NamedTuple

import numpy as np

from kngflow._jit import jit
from kngflow.problems.declared import DECLARED_DOMAIN
from kngflow.problems.domains import RecordDomain, record_domain
from kngflow.problems.records import check_record_arrays, design_matrix, require_declared
from kngflow.problems.rows import D_COLUMNS, N_ROWS

__all__ = ["SVMData", "svm_data", "check_svm_data", "check_smoothing", "UNIT_BALL"]

#: the default record domain: the unit ℓ2 ball
UNIT_BALL = RecordDomain("l2", 1.0)


class SVMData(NamedTuple):
    """``X`` (n, d) C-contiguous float64 with rows in the declared ball ``{||x||_data_norm <=
    radius}`` (default the unit ℓ2 ball); ``y`` (n,) float64 in ``{-1, +1}``; ``h`` the Huber
    smoothing (part of the loss, public)."""

    X: np.ndarray
    y: np.ndarray
    h: float
    radius: float = 1.0
    data_norm: str = "l2"

    domain = DECLARED_DOMAIN
    n = N_ROWS
    d = D_COLUMNS


def check_smoothing(h) -> float:
    """``h`` as a float; TypeError/ValueError naming ``h`` unless a finite number in (0, 1)."""
    if isinstance(h, bool) or not isinstance(h, Real):
        raise TypeError(f"h must be a real number in (0, 1), got {type(h).__name__}")
    if not 0.0 < h < 1.0:
        raise ValueError(f"h must lie in the open interval (0, 1) (the Huber smoothing), got {h!r}")
    return float(h)


def svm_data(X, y, h: float = 0.5, *, radius=1.0, data_norm="l2") -> SVMData:
    """Validate a user's data: ``X`` (n, d) with rows in the declared ball
    ``{||x||_data_norm <= radius}`` (default: ℓ2 norm at most 1), ``y`` (n,) in
    ``{-1, +1}``, ``h`` in (0, 1).  Raises ValueError naming the field."""
    domain = record_domain(data_norm, radius)
    X = design_matrix(X, "d")
    y = np.ascontiguousarray(np.asarray(y, dtype=np.float64))
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have shape ({X.shape[0]},), got {y.shape}")
    if domain != UNIT_BALL:
        domain.require(X)
    return check_svm_data(SVMData(X, y, check_smoothing(h), domain.radius, domain.data_norm))


def check_svm_data(data) -> SVMData:
    """Validate :class:`SVMData`: shapes, rows of ``X`` in the declared record domain (unit ℓ2
    ball: squared norms at most ``1 + 1e-12``, the rounding of a row rescaled to norm 1; see
    :meth:`~kngflow.problems.domains.RecordDomain.contains`), ``y`` in {-1, +1}."""
    X, y = check_record_arrays(data, SVMData)
    if data.domain == UNIT_BALL:
        if not _rows_in_ball(X):  # NaN fails too
            raise ValueError("data.X must have rows of l2 norm at most 1 (rescale the covariates by a public bound)")
    else:
        require_declared(data, X)
    if not np.all((y == 1.0) | (y == -1.0)):
        raise ValueError("data.y must hold only -1 and +1")
    check_smoothing(data.h)
    return data


@jit
def _rows_in_ball(X):
    n, d = X.shape
    for i in range(n):
        s = 0.0
        for j in range(d):
            s += X[i, j] * X[i, j]
        if not s <= 1.0 + 1e-12:
            return False
    return True

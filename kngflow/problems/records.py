"""Checks and builders of records ``(x_i, y_i)`` with covariates in a declared record domain.

A model whose data are a design ``X`` (n, d) — one record a row, its covariates in the
public ball ``{||x||_D <= r}`` (:class:`~kngflow.problems.domains.RecordDomain`) — and
responses ``y`` (n,) validates them twice: once when a user's arrays are turned into the
model's data class (:func:`design_matrix`: any array-like becomes a C-contiguous float64
copy, or the array itself when it already is one), and again when a mechanism is handed
a data class (:func:`check_design`, :func:`check_responses`, :func:`require_declared`:
nothing is copied, and the declared ``data_norm`` and ``radius`` are validated as well,
since a data class can be built directly).  The messages name the field (``X``,
``data.X``, ``data.y``, ``data.data_norm``, ``data.radius``).

Privacy audits draw adjacent data sets from a finite set of records of the domain:
:func:`labelled_records` pairs every covariate row of
:func:`~kngflow.problems.domains.domain_covariates` (the points of the sphere where the
sensitivities are attained, and interior points) with every label of a classifier.
"""

from __future__ import annotations

import numpy as np

from kngflow.problems.base import check_finite_positive
from kngflow.problems.domains import RecordDomain, domain_covariates, record_domain

__all__ = ["to_unit_ball", "design_matrix", "check_design", "check_responses", "check_record_arrays", "require_declared",
           "labelled_records"]


def to_unit_ball(x, bound) -> np.ndarray:
    """``x / bound``: records ``x`` (n, d) with the public bound ``||x_i||_2 <= bound`` moved into
    the unit ℓ2 ball.  ValueError naming ``bound`` unless finite and positive, naming ``x``
    unless a non-empty finite 2-D array whose rows all satisfy the bound (within ``1e-12``
    relative: the rounding of a row rescaled onto the sphere); a record beyond the bound is
    an error, never clipped silently."""
    bound = check_finite_positive("bound", bound)
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"x must be a non-empty 2-D array (n, d), got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("x must be finite (no NaN or inf)")
    worst = float(np.sqrt((x * x).sum(axis=1)).max())
    if worst > bound * (1 + 1e-12):
        raise ValueError(f"x: every record must satisfy ||x_i||_2 <= bound = {bound}; largest is {worst}")
    return x / bound


def design_matrix(X, columns: str = "m") -> np.ndarray:
    """``X`` as a C-contiguous float64 array; ValueError naming ``X`` unless it is a non-empty
    2-D array (``columns``: the letter of its second dimension in the message)."""
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"X must be a non-empty 2-D array (n, {columns}), got shape {X.shape}")
    return np.ascontiguousarray(X, dtype=np.float64)


def check_design(X) -> None:
    """ValueError naming ``data.X`` unless ``X`` is a C-contiguous 2-D float64 array with a row."""
    if not (isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype == np.float64 and X.flags.c_contiguous):
        raise ValueError("data.X must be a C-contiguous 2-D float64 array")
    if X.shape[0] == 0:
        raise ValueError("data must hold at least one record")


def check_responses(y, n: int) -> None:
    """ValueError naming ``data.y`` unless ``y`` is a float64 array of shape ``(n,)``."""
    if not (isinstance(y, np.ndarray) and y.shape == (n,) and y.dtype == np.float64):
        raise ValueError(f"data.y must be a float64 array of length n={n}")


def check_record_arrays(data, cls: type) -> tuple[np.ndarray, np.ndarray]:
    """``(data.X, data.y)`` of ``data``, an instance of the data class ``cls`` (TypeError
    naming the class with its module otherwise), checked by :func:`check_design` and
    :func:`check_responses`."""
    if not isinstance(data, cls):
        raise TypeError(f"data must be a {cls.__module__}.{cls.__qualname__}, got {type(data).__name__}")
    X, y = data.X, data.y
    check_design(X)
    check_responses(y, X.shape[0])
    return X, y


def require_declared(data, X) -> RecordDomain:
    """The record domain ``data`` declares (``data.data_norm``, ``data.radius``), validated
    (ValueError naming ``data.data_norm`` or ``data.radius``); ValueError naming ``data.X``
    unless every row of ``X`` lies in it."""
    try:
        domain = record_domain(data.data_norm, data.radius)
    except ValueError as exc:
        raise ValueError(f"data.{exc}") from None
    domain.require(X, "data.X")
    return domain


def labelled_records(domain: RecordDomain, d: int, labels: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Records ``(x_1, ..., x_d, y)`` for privacy audits: ``(boundary, fill)``, every covariate
    row of :func:`~kngflow.problems.domains.domain_covariates` with every label in ``labels``
    (rows in the order of the covariates, the labels varying fastest)."""
    xb, xf = domain_covariates(domain, d)
    boundary = np.array([[*x, y] for x in xb for y in labels])
    fill = np.array([[*x, y] for x in xf for y in labels])
    return boundary, fill

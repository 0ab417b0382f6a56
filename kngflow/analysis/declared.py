"""What a store declares about its mechanisms and its problem — the one place the analysis asks.

The analysis layer names no problem and no mechanism kind: everything it needs to know about
them comes from the plug-in contract, through this module.

* :func:`nonprivate_labels` — labels of the non-private reference mechanisms (mechanism classes
  with ``private = False``); the first is the report's reference.
* :func:`reference_stderr` — the name of the per-data-set variable (dims n, replicate, coef)
  holding the non-private reference's standard errors, or None when the problem declares none.
* :func:`problem_sections` — the Markdown blocks the problem adds to the report
  (``Problem.report_sections(ds)``).
* :func:`error_label` and :func:`reference_lines` — what the stored ``error`` measures, in
  words, and the errors of trivial releases the figures draw (``Problem.error_label``,
  ``Problem.reference_lines``; store attributes of the same names), and
  :func:`coefficient_summaries` — whether per-coefficient bias/SD/RMSE tables mean anything;
  :func:`loglog_slopes` and :func:`error_rate_in_n` — whether log–log slopes of the error on n
  mean anything, and the slope the non-private error is known to have (``Problem.loglog_slopes``,
  ``Problem.error_rate_in_n``; read from the problem built from the spec, never stored).

Stores written by the sweep engine carry the root attributes ``nonprivate`` (JSON list of
labels) and ``reference_stderr`` (a variable name, ``""`` for none).  Stores written before
have neither: both are then derived from the store's spec (``spec`` attribute, TOML) and
problem name (``problem`` attribute) through :mod:`kngflow.registry`, imported lazily, so that
opening a new store never imports the numerical layers.  Whatever cannot be resolved — a
plug-in that is not importable where the analysis runs, a spec without kinds — reads as "no
reference" (the mechanism counts as private; the problem as declaring no standard errors).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping

import numpy as np
import xarray as xr

from .storemeta import kinds_by_label, problem_name
from .storemeta import labels as _labels
from .storemeta import spec as _spec

__all__ = ["nonprivate_labels", "reference_stderr", "problem_name", "problem_comparisons", "problem_sections",
           "declared_private", "error_label", "reference_lines", "coefficient_summaries",
           "loglog_slopes", "error_rate_in_n"]


def _cached(func):
    """Memoise ``func``'s resolved answers (not None: a plug-in may become importable later)."""
    cache: dict = {}

    @functools.wraps(func)
    def wrapper(*args):
        if args in cache:
            return cache[args]
        value = func(*args)
        if value is not None:
            cache[args] = value
        return value

    wrapper.cache_clear = cache.clear
    return wrapper


@_cached
def _private(problem: str | None, kind: str) -> bool | None:
    """``mechanism_class(problem, kind).private`` (True when the class does not say), or None
    when the kind cannot be resolved.  Without a problem name, a kind is non-private when every
    problem of the registry that has it says so."""
    try:
        from kngflow.registry import mechanism_class, problem_names
    except Exception:  # noqa: BLE001 - analysis must work without the numerical layers
        return None
    candidates = [problem] if problem is not None else problem_names()
    answers = []
    for name in candidates:
        try:
            cls = mechanism_class(name, kind)
        except Exception:  # noqa: BLE001 - unknown kind, plug-in not importable here, ...
            continue
        answers.append(cls.private is not False)
    if not answers:
        return None
    return any(answers)


def declared_private(problem: str | None, kind: str) -> bool | None:
    """Whether mechanism ``kind`` of problem ``problem`` is private, from the registry (the
    mechanism class's ``private``); None when the kind cannot be resolved here."""
    return _private(problem, str(kind))


def nonprivate_labels(ds: xr.Dataset) -> list[str]:
    """Labels of the non-private reference mechanisms of ``ds``, in the order of its
    ``mechanism`` coordinate (the first is the report's reference; ``[]`` when none).

    From the root attribute ``nonprivate`` (JSON list) when the store has it; otherwise each
    mechanism's kind (the spec, see :func:`kngflow.analysis.storemeta.kinds_by_label`) is
    resolved through the registry and the classes with ``private = False`` are kept.
    """
    labels = _labels(ds)
    declared = ds.attrs.get("nonprivate_labels")
    if declared is not None:
        try:
            listed = json.loads(declared) if isinstance(declared, str) else list(declared)
        except (TypeError, ValueError):
            listed = None
        if isinstance(listed, list):
            listed = {str(x) for x in listed}
            return [label for label in labels if label in listed]
    problem = problem_name(ds)
    return [label for label, kind in kinds_by_label(ds).items() if _private(problem, kind) is False]


@_cached
def _problem_reference_stderr(problem: str) -> str | None:
    try:
        from kngflow.registry import problem_class

        value = problem_class(problem).reference_stderr
    except Exception:  # noqa: BLE001 - plug-in not importable here: no reference
        return None
    return value if isinstance(value, str) and value else None


def reference_stderr(ds: xr.Dataset) -> str | None:
    """Name of the variable with the non-private reference's standard errors, or None.

    From the root attribute ``reference_stderr`` (``""``: none) when the store has it;
    otherwise the problem class's ``reference_stderr`` (resolved through the registry).
    The variable need not be present in ``ds`` (check ``name in ds``).
    """
    declared = ds.attrs.get("reference_stderr")
    if declared is not None:
        return str(declared) or None
    problem = problem_name(ds)
    return None if problem is None else _problem_reference_stderr(problem)


def problem_comparisons(ds: xr.Dataset) -> dict:
    """``{title: kinds}``: the groups of mechanism kinds the store's problem wants compared with
    the reference on their own (its class's ``report_comparisons``; ``{}`` if unresolvable)."""
    name = problem_name(ds)
    try:
        from kngflow.registry import problem_class

        value = dict(problem_class(name).report_comparisons) if name is not None else {}
    except Exception:  # noqa: BLE001 - plug-in not importable here: no comparisons
        return {}
    return {str(t): tuple(k) for t, k in value.items()}


def _store_problem(ds: xr.Dataset):
    """The store's problem built from its spec's ``[problem]`` table (through the registry,
    imported lazily); None when it cannot be built here."""
    name = problem_name(ds)
    if name is None:
        return None
    try:
        from kngflow.api import get_problem

        table = _spec(ds).get("problem")
        options = {}
        if isinstance(table, Mapping) and table.get("name", name) == name:
            options = {k: v for k, v in table.items() if k != "name"}
        return get_problem(name, **options)
    except Exception:  # noqa: BLE001 - plug-in not importable here, options it rejects, ...
        return None


def problem_sections(ds: xr.Dataset) -> list[str]:
    """Markdown blocks the store's problem adds to the report: ``report_sections(ds)`` of the
    problem built from the spec's ``[problem]`` table; ``[]`` when the problem cannot be built
    here or adds none (a problem class that keeps the base class's method is not built)."""
    name = problem_name(ds)
    if name is None:
        return []
    try:
        from kngflow.problems.base import Problem
        from kngflow.registry import problem_class

        if problem_class(name).report_sections is Problem.report_sections:
            return []
        problem = _store_problem(ds)
        sections = [] if problem is None else problem.report_sections(ds)
        return [str(s) for s in sections or [] if str(s).strip()]
    except Exception:  # noqa: BLE001 - a plug-in that fails here costs its sections, not the report
        return []


def _declaring_problem(ds: xr.Dataset, member: str):
    """The store's problem (:func:`_store_problem`) when its class overrides the contract's
    ``member``, else None (the base class's default is then read off the store itself)."""
    name = problem_name(ds)
    if name is None:
        return None
    try:
        from kngflow.problems.base import Problem
        from kngflow.registry import problem_class

        if getattr(problem_class(name), member) is getattr(Problem, member):
            return None
    except Exception:  # noqa: BLE001 - plug-in not importable here
        return None
    return _store_problem(ds)


def _reference_word(ds: xr.Dataset) -> str:
    return str(ds.attrs.get("reference") or "truth")


def error_label(ds: xr.Dataset) -> str:
    """What the store's ``error`` measures, in words (``Problem.error_label``).

    From the root attribute ``error_label`` when the store has it; otherwise from the problem
    built from the spec, when its class declares one; otherwise the coefficient-vector default ``"ℓ2 distance to
    <reference>"``."""
    declared = ds.attrs.get("error_label")
    if isinstance(declared, str) and declared.strip():
        return declared
    problem = _declaring_problem(ds, "error_label")
    if problem is not None:
        try:
            return str(problem.error_label)
        except Exception:  # noqa: BLE001 - a plug-in that fails here costs its label
            pass
    return f"ℓ2 distance to {_reference_word(ds)}"


def reference_lines(ds: xr.Dataset) -> list[tuple[float, str]]:
    """``[(value, label)]``: the errors of trivial releases the store's problem declares
    (``Problem.reference_lines``) for the error-against-ε figure.

    From the root attribute ``reference_lines`` (JSON) when the store has it; otherwise from
    the problem built from the spec, when its class declares them; otherwise ``||theta_star||_2``, the zero estimate's
    error, when the store has ``theta_star`` (the coefficient-vector default)."""
    declared = ds.attrs.get("reference_lines")
    lines = None
    if declared is not None:
        try:
            lines = json.loads(declared) if isinstance(declared, str) else list(declared)
        except (TypeError, ValueError):
            lines = None
    if lines is None:
        problem = _declaring_problem(ds, "reference_lines")
        if problem is not None:
            try:
                lines = list(problem.reference_lines)
            except Exception:  # noqa: BLE001
                lines = None
    if lines is None:
        if "theta_star" not in ds:
            return []
        norm = float(np.sqrt((np.asarray(ds["theta_star"].values, dtype=float) ** 2).sum()))
        return [(norm, "‖θ*‖₂ (zero estimate)")]
    out = []
    for item in lines:
        try:
            value, label = item
            out.append((float(value), str(label)))
        except (TypeError, ValueError):
            continue
    return out


def coefficient_summaries(ds: xr.Dataset) -> bool:
    """Whether the store's estimates are coefficients whose per-coefficient bias, SD and RMSE
    around ``theta_star`` mean something (``Problem.coefficient_summaries``): the root
    attribute of that name (JSON boolean) when present, else the problem class's (through the
    registry), else True."""
    declared = ds.attrs.get("coefficient_summaries")
    if declared is not None:
        try:
            return bool(json.loads(declared) if isinstance(declared, str) else declared)
        except (TypeError, ValueError):
            return True
    name = problem_name(ds)
    if name is None:
        return True
    try:
        from kngflow.registry import problem_class

        return bool(problem_class(name).coefficient_summaries)
    except Exception:  # noqa: BLE001 - plug-in not importable here: the default
        return True


def _problem_value(ds: xr.Dataset, member: str, default):
    """``member`` of the problem built from the store's spec when its class declares it (a class
    attribute or a property), else ``default``; the root attribute of that name (JSON) first."""
    declared = ds.attrs.get(member)
    if declared is not None:
        try:
            return json.loads(declared) if isinstance(declared, str) else declared
        except (TypeError, ValueError):
            return default
    problem = _declaring_problem(ds, member)
    if problem is None:
        return default
    try:
        return getattr(problem, member)
    except Exception:  # noqa: BLE001 - a plug-in that fails here costs its declaration
        return default


def loglog_slopes(ds: xr.Dataset) -> bool:
    """Whether log–log slopes of the store's mean error on n mean something
    (``Problem.loglog_slopes``): False for a bounded error that does not decay as a power of n
    (a misclassification rate, whose floor is the Bayes rate).  True when undeclared."""
    return bool(_problem_value(ds, "loglog_slopes", True))


def error_rate_in_n(ds: xr.Dataset) -> float | None:
    """The exponent r of the non-private error, E error ∝ n^r, that the store's problem declares
    (``Problem.error_rate_in_n``; -0.5 for a √n-consistent estimator against the truth), or None."""
    value = _problem_value(ds, "error_rate_in_n", None)
    try:
        return None if value is None or isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        return None

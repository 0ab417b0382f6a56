"""A store's own metadata, read from its attributes: the one module that parses ``ds.attrs["spec"]``.

* :func:`spec` -- the spec the store was run with (the TOML text of ``ds.attrs["spec"]``),
  parsed; ``{}`` when there is none or it does not parse;
* :func:`problem_name` -- the store's problem (``problem`` attribute, else the spec's);
* :func:`kinds_by_label` -- each mechanism label's kind (what the spec's ``kind`` says);
* :func:`mechanism_deltas` -- each mechanism label's δ (``delta`` attribute).

Nothing here resolves a name through the registry: that is :mod:`kngflow.analysis.declared`,
which builds on these readers (and :mod:`kngflow.analysis.summaries` on both).
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from typing import Any

import xarray as xr

__all__ = ["spec", "labels", "problem_name", "kinds_by_label", "mechanism_deltas"]


def labels(ds: xr.Dataset) -> list[str]:
    """The mechanism labels of ``ds`` (its ``mechanism`` coordinate; ``[]`` without one)."""
    return [str(m) for m in ds["mechanism"].values] if "mechanism" in ds.coords else []


def spec(ds: xr.Dataset) -> dict[str, Any]:
    """The parsed spec of ``ds`` (``ds.attrs["spec"]``, TOML); ``{}`` when absent or unreadable."""
    text = ds.attrs.get("spec")
    if not isinstance(text, str) or not text.strip():
        return {}
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}


def problem_name(ds: xr.Dataset) -> str | None:
    """The store's problem: its ``problem`` attribute, else the spec's (``problem = "..."`` or
    ``[problem] name = "..."``); None when neither says."""
    name = ds.attrs.get("problem")
    if isinstance(name, str) and name:
        return name
    value = spec(ds).get("problem")
    if isinstance(value, Mapping):
        value = value.get("name")
    return value if isinstance(value, str) and value else None


def _mechanisms_from_toml(obj: Any) -> dict[str, str]:
    """Find ``label -> kind`` in a parsed spec, wherever mechanisms are listed.

    Accepts ``[[mechanisms]]`` arrays of tables (``label``/``kind`` keys;
    ``label`` defaults to ``kind``), tables keyed by label
    (``[mechanisms.mine] kind = "mypkg.mech:Laplace"``), and either form nested one or
    more tables deep (e.g. ``[[study.mechanisms]]``).
    """
    found: dict[str, str] = {}
    if isinstance(obj, Mapping):
        for key in ("mechanisms", "mechanism"):
            value = obj.get(key)
            if isinstance(value, list):
                for entry in value:
                    if isinstance(entry, Mapping) and "kind" in entry:
                        label = str(entry.get("label", entry["kind"]))
                        found[label] = str(entry["kind"])
            elif isinstance(value, Mapping):
                for label, entry in value.items():
                    if isinstance(entry, Mapping) and "kind" in entry:
                        found[str(entry.get("label", label))] = str(entry["kind"])
        if found:
            return found
        for value in obj.values():
            if isinstance(value, (Mapping, list)):
                found.update(_mechanisms_from_toml(value))
    elif isinstance(obj, list):
        for value in obj:
            found.update(_mechanisms_from_toml(value))
    return found


def kinds_by_label(ds: xr.Dataset) -> dict[str, str]:
    """Map each mechanism label of ``ds`` to its kind (the spec's ``kind``: a registered name
    or a ``package.module:Class`` reference).

    The kinds come from the TOML text in ``ds.attrs["spec"]``; a ``kind``
    coordinate along ``mechanism`` (if a store carries one) takes precedence.
    Labels whose kind cannot be found map to the label itself.
    """
    kinds = _mechanisms_from_toml(spec(ds))
    if "kind" in ds.coords and ds["kind"].dims == ("mechanism",):
        for label, kind in zip(ds["mechanism"].values, ds["kind"].values):
            kinds[str(label)] = str(kind)
    return {label: kinds.get(label, label) for label in labels(ds)}


def mechanism_deltas(ds: xr.Dataset) -> dict[str, float]:
    """Map each mechanism label to its δ: 0 for ε-DP, δ > 0 for (ε, δ)-DP mechanisms.

    From ``ds.attrs["delta"]`` (JSON written by the sweep engine); stores written before
    it existed held only ε-DP mechanisms, so a missing entry reads 0.
    """
    try:
        deltas = json.loads(ds.attrs.get("delta", "{}"))
    except (TypeError, ValueError):
        deltas = {}
    return {label: float(deltas.get(label, 0.0)) for label in labels(ds)}

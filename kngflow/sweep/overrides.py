"""Reduced runs: a spec's grid axes replaced by the command line's ``--n``, ``--epsilon`` and
``--replicates`` (:func:`apply_overrides`), and those overrides in words (:func:`describe_overrides`).

Seeds are keyed by values, so every cell of a reduced run equals the same cell of the full
study; the reduced spec records what differs from the spec's own grid in
:attr:`~kngflow.sweep.spec.Spec.overrides`, which the store keeps, so that a reduced run and
the full study never share a store.  Every value is checked as the spec's own are (the
limits of :data:`~kngflow.sweep.spec.LIMITS`, the problem's own check of n), and a bad flag
raises :class:`~kngflow.sweep.spec.SpecError` whose field is the flag.
"""

from __future__ import annotations

import math
from typing import Any

from .spec import EXTREME_HINT, LIMITS, Spec, SpecError

__all__ = ["apply_overrides", "describe_overrides", "OVERRIDE_FLAGS"]

#: The command-line flag of each overridable grid axis, in the order they are shown.
OVERRIDE_FLAGS = {"n": "--n", "epsilon": "--epsilon", "replicates": "--replicates"}


def describe_overrides(overrides: dict) -> str:
    """``--n 100,1000 --epsilon 1 --replicates 10`` (``no overrides`` for a full study)."""
    parts = []
    for key, flag in OVERRIDE_FLAGS.items():
        if key in overrides:
            value = overrides[key]
            shown = ",".join(f"{v:g}" if key == "epsilon" else str(v) for v in value) if isinstance(value, list) \
                else str(value)
            parts.append(f"{flag} {shown}")
    return " ".join(parts) if parts else "no overrides (the full study)"


def _split(flag: str, text: str) -> list[str]:
    items = [t.strip() for t in str(text).split(",")]
    if not any(items) or not all(items):
        raise SpecError(flag, f"must be a comma-separated list of values, e.g. {flag} 100,1000; got {text!r}")
    return items


def apply_overrides(spec: Spec, *, n: str | None = None, epsilon: str | None = None,
                    replicates: str | None = None) -> Spec:
    """``spec`` with its grid axes replaced by the command line's ``--n``, ``--epsilon`` and
    ``--replicates`` (each optional; ``None`` keeps the spec's axis): a reduced run.

    ``--n`` and ``--epsilon`` are comma-separated lists that replace the axis (each value is
    checked as the spec's own are: distinct, within :data:`LIMITS` unless the spec says
    ``allow_extreme``, n allowed by the problem); ``--replicates K`` keeps the spec's first
    K replicates (``0..K-1`` for a count, where K may also exceed the spec's count).  Seeds
    are keyed by values, so every cell of the reduced run equals the same cell of the full
    study.  The result records what differs from the spec in :attr:`Spec.overrides` (an
    override equal to the spec's own axis is no override).  Raises :class:`SpecError` whose
    field is the flag.
    """
    hint = "" if spec.allow_extreme else EXTREME_HINT
    changes: dict[str, Any] = {}
    overrides: dict[str, Any] = dict(spec.overrides)
    if n is not None:
        ns = []
        for item in _split("--n", n):
            try:
                value = int(item)
            except ValueError:
                raise SpecError("--n", f"{item!r} is not an integer (write 10000 or 10_000, not 1e4)") from None
            if value > LIMITS["n"] and not spec.allow_extreme:
                raise SpecError("--n", f"n = {value} is beyond the limit {LIMITS['n']:.0e}{hint}")
            try:
                for point in spec.axis_points():
                    spec.problem(point).check_n(value)
            except (TypeError, ValueError) as exc:
                raise SpecError("--n", str(exc)) from None
            ns.append(value)
        if len(set(ns)) != len(ns):
            raise SpecError("--n", f"values must be distinct, got {ns}")
        changes["n"] = tuple(ns)
    if epsilon is not None:
        lo, hi = LIMITS["epsilon"]
        eps = []
        for item in _split("--epsilon", epsilon):
            try:
                value = float(item)
            except ValueError:
                raise SpecError("--epsilon", f"{item!r} is not a number") from None
            if not math.isfinite(value) or value <= 0:
                raise SpecError("--epsilon", f"must be finite numbers > 0, got {item}")
            if not (lo <= value <= hi or spec.allow_extreme):
                raise SpecError("--epsilon", f"epsilon = {value!r} is outside [{lo:g}, {hi:g}]{hint}")
            eps.append(value)
        if len(set(eps)) != len(eps):
            raise SpecError("--epsilon", f"values must be distinct, got {epsilon}")
        changes["epsilon"] = tuple(eps)
    if replicates is not None:
        try:
            count = int(str(replicates).strip())
        except ValueError:
            raise SpecError("--replicates", f"must be a count K >= 1 (the spec's first K replicates), "
                            f"got {replicates!r}") from None
        if count < 1:
            raise SpecError("--replicates", f"must be a count K >= 1 (the spec's first K replicates), got {count}")
        if isinstance(spec.replicates, range) and spec.replicates.start == 0:
            if count > LIMITS["replicates"] and not spec.allow_extreme:
                raise SpecError("--replicates", f"{count} replicates is beyond the limit "
                                f"{LIMITS['replicates']:.0e}{hint}")
            changes["replicates"] = range(count)
        elif count > len(spec.replicates):
            raise SpecError("--replicates", f"the spec lists {len(spec.replicates)} replicates; K must be at most "
                            f"{len(spec.replicates)} (its first K), got {count}")
        else:
            changes["replicates"] = tuple(spec.replicates[:count])
    for key, value in list(changes.items()):
        own = getattr(spec, key)
        if list(value) == list(own) or (key != "replicates" and set(value) == set(own)):
            changes[key] = own  # the spec's own axis (in its order): no override
            continue
        overrides[key] = len(value) if key == "replicates" else list(value)
    if not changes:
        return spec
    import dataclasses

    return dataclasses.replace(spec, **changes, overrides=overrides)

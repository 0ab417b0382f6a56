"""One cell of a study in this process: what ``kngflow debug SPEC --cell ...`` runs.

:func:`parse_cell` reads ``mechanism=kng,n=1000,epsilon=1,replicate=3`` against the spec's
grid (a :class:`CellError` names the key and the allowed values); :func:`debug_cell`
simulates that replicate's data and releases the cell with the sweep's own functions
(:func:`kngflow.sweep.task.simulate_data`, :func:`kngflow.sweep.task.release_cell`) on the
same stable streams, so its estimate is the stored cell's, bit for bit.  A spec with problem
axes (``[grid.problem] d = [...]``) takes them as more keys (``...,replicate=3,d=16``); the
estimate printed is the problem's own ``d`` entries (the store pads shorter ones with NaN).  Nothing catches
the mechanism's exceptions: a failing release shows its real traceback.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .spec import Spec
from .task import Cell, release_cell, simulate_data

__all__ = ["CellError", "CellKey", "parse_cell", "debug_cell", "cell_lines"]

KEYS = ("mechanism", "n", "epsilon", "replicate")


class CellError(ValueError):
    """A ``--cell`` that is not a cell of the spec's grid (one line: the key and what is allowed)."""


@dataclass(frozen=True)
class CellKey:
    """The coordinates of one cell."""

    mechanism: str
    n: int
    epsilon: float
    replicate: int
    #: ``((option, value), ...)`` on the spec's problem axes (``()`` for a spec without them)
    axes: tuple = ()

    @property
    def point(self) -> tuple:
        return tuple(v for _, v in self.axes)

    def __str__(self) -> str:
        return (f"mechanism={self.mechanism},n={self.n},epsilon={self.epsilon:g},replicate={self.replicate}"
                + "".join(f",{k}={v}" for k, v in self.axes))


def _shown(values, limit: int = 12) -> str:
    values = list(values)
    text = ", ".join(str(v) for v in values[:limit])
    return text + (f", ... ({len(values)} values)" if len(values) > limit else "")


def parse_cell(spec: Spec, text: str) -> CellKey:
    """``mechanism=LABEL,n=N,epsilon=E,replicate=R`` as a :class:`CellKey` of ``spec``'s grid.

    A key may be left out where its axis has one value.  Raises :class:`CellError` for an
    unknown or repeated key, a value that does not parse, or one the grid does not have.
    """
    given: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, eq, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not value:
            raise CellError(f"--cell: {part!r} is not KEY=VALUE; write e.g. "
                            "mechanism=kng,n=1000,epsilon=1,replicate=3")
        keys = KEYS + spec.axis_names
        if key not in keys:
            raise CellError(f"--cell: unknown key {key!r}; allowed keys are {', '.join(keys)}")
        if key in given:
            raise CellError(f"--cell: {key} is given twice")
        given[key] = value
    axes = {"mechanism": list(spec.labels), "n": list(spec.n), "epsilon": list(spec.epsilon),
            "replicate": spec.replicates}
    out = {}
    for key in KEYS:
        allowed = axes[key]
        if key not in given:
            if len(allowed) == 1:
                out[key] = allowed[0]
                continue
            raise CellError(f"--cell: {key} is missing; the spec's {key} values are {_fmt(key, allowed)}")
        value = given[key]
        try:
            parsed = {"mechanism": str, "n": int, "replicate": int, "epsilon": float}[key](value)
        except ValueError:
            kind = {"n": "an integer", "replicate": "an integer", "epsilon": "a number"}[key]
            raise CellError(f"--cell: {key}={value} is not {kind}") from None
        if parsed not in allowed:
            raise CellError(f"--cell: {key}={value} is not in the spec's grid; its {key} values are "
                            f"{_fmt(key, allowed)}")
        out[key] = parsed
    point = []
    for name, values in spec.problem_axes:
        if name not in given:
            if len(values) == 1:
                point.append(values[0])
                continue
            raise CellError(f"--cell: {name} is missing; the spec's {name} values are {_shown(values)}")
        match = [v for v in values if _same(v, given[name])]
        if not match:
            raise CellError(f"--cell: {name}={given[name]} is not in the spec's grid; its {name} values are "
                            f"{_shown(values)}")
        point.append(match[0])
    return CellKey(mechanism=str(out["mechanism"]), n=int(out["n"]), epsilon=float(out["epsilon"]),
                   replicate=int(out["replicate"]), axes=spec.axis_items(tuple(point)))


def _same(value, text: str) -> bool:
    """Whether ``text`` (from ``--cell``) names the problem-axis ``value``."""
    if str(value) == text:
        return True
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(text) == float(value)
        except ValueError:
            return False
    return False


def _fmt(key: str, values) -> str:
    if key == "replicate" and isinstance(values, range) and len(values) > 12:
        return f"{values.start}..{values.stop - 1}"
    if key == "epsilon":
        return _shown(f"{v:g}" for v in values)
    return _shown(values)


def debug_cell(spec: Spec, cell: CellKey) -> tuple[Cell, dict]:
    """Compute ``cell`` of ``spec`` here: ``(the cell, the data set's summary)``.

    The data set of ``(n, replicate)`` and the release come from the same stable streams and
    the same functions as in a sweep, so ``estimate``, ``error`` and the diagnostics equal the
    stored cell's bit for bit.  Exceptions propagate (that is the point).
    """
    point = cell.point or None
    problem = spec.problem(point)
    mechanism = spec.build_mechanisms(point)[cell.mechanism]
    stats = simulate_data(spec, problem, cell.n, cell.replicate, cell.point)
    summary = dict(problem.data_summary(stats))
    return release_cell(spec, problem, mechanism, stats, cell.n, cell.replicate, cell.mechanism, cell.epsilon,
                        cell.point), summary


def _value(v) -> str:
    """Exact text of a number (``repr``: it reads back to the same float64), arrays as lists."""
    a = np.asarray(v)
    if a.ndim == 0:
        x = a.item()
        return repr(float(x)) if isinstance(x, float) else repr(x)
    return "[" + ", ".join(_value(x) for x in a.ravel()) + "]"


def cell_lines(spec: Spec, cell: CellKey, result: Cell, summary: dict) -> list[str]:
    """What ``kngflow debug`` prints: the cell, its seed, the release and its diagnostics.
    Numbers are printed with ``repr`` (they read back to the same float64)."""
    kind = next(m.kind for m in spec.mechanisms if m.label == cell.mechanism)
    lines = [
        f"cell: {cell}",
        f"spec: {spec.name or '-'} (hash {spec.hash[:12]}), problem {spec.problem_name}, mechanism kind {kind}, "
        f"root seed {spec.seed}",
        f"estimate: {_value(result.estimate)}",
        f"error: {_value(result.error)}",
        f"seconds: {result.seconds:.6f}",
    ]
    for name, value in result.diagnostics.items():
        lines.append(f"diagnostic {name}: {_value(value)}")
    info = result.release.diagnostics() if hasattr(result.release, "diagnostics") else {}
    for name, value in info.items():
        lines.append(f"info {name}: {_value(value) if _numeric(value) else repr(value)}")
    for name, value in summary.items():
        lines.append(f"data {name}: {_value(value)}")
    return lines


def _numeric(value) -> bool:
    try:
        return np.asarray(value).dtype.kind in "biuf"
    except Exception:  # noqa: BLE001 - anything else is printed with repr
        return False

"""A store as one tidy table: one row per done cell (what ``kngflow export`` writes).

Columns, in order: the cell coordinates (the dims of ``done``: ``mechanism``, ``n``,
``epsilon``, ``replicate`` and any other grid axis a store has); the estimate's columns
``estimate_<coef>`` (``estimate_0``, ``estimate_1``, ... for the usual integer ``coef``
coordinate); then every other variable over the cell dims, ``coef`` or both, in the store's
order: the error, ``seconds``, the mechanisms' declared diagnostics (coded ones as their
stored integer codes, see the variable's ``flag_meanings``), the problem's per-data-set
variables repeated on each cell of their data set (``scale``, ``ols_stderr_<coef>``, ...)
and ``theta_star_<coef>``.  ``done`` and ``failed`` are left out: every row is a done cell.

Nothing here knows a mechanism or a problem: the columns follow the store's variables.
The table is built one value of the first cell dim at a time, so memory stays that of
one slice; CSV rows are appended as they come (floats as ``repr``, which reads back to the
same float64), Parquet is written at the end.  The file appears only once complete.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import numpy as np

__all__ = ["FORMATS", "parquet_problem", "export_columns", "export_frames", "export_store"]

FORMATS = ("csv", "parquet")
SKIP = ("done", "failed")


def parquet_problem() -> str | None:
    """One line when no Parquet engine (pyarrow or fastparquet) is installed, else None."""
    import importlib.util

    if importlib.util.find_spec("pyarrow") or importlib.util.find_spec("fastparquet"):
        return None
    return ("--format parquet needs pyarrow or fastparquet, and neither is installed: "
            "`pip install pyarrow` (or use --format csv)")


def _variables(ds) -> tuple[tuple[str, ...], str | None, list[str]]:
    """``(cell dims, the coef dim or None, variables exported)``."""
    cells = tuple(ds["done"].dims)
    extra = [d for d in ds["estimate"].dims if d not in cells]
    coef = extra[0] if extra else None
    allowed = set(cells) | ({coef} if coef else set())
    rest = [str(v) for v in ds.data_vars if v not in SKIP and v != "estimate" and ds[v].dims
            and set(ds[v].dims) <= allowed]

    def order(v):  # the error first, then per-cell diagnostics, per-data-set variables, the rest
        dims = set(ds[v].dims)
        if v in ("error", "seconds"):
            return (0 if v == "error" else 1), v
        return (2 if set(cells) <= dims else 3 if dims - {coef} else 4), v

    return cells, coef, ["estimate"] + sorted(rest, key=order)


def _suffix(value) -> str:
    return str(value.item() if hasattr(value, "item") else value)


def export_columns(ds) -> list[str]:
    """The column names of the table of ``ds``, in order."""
    cells, coef, names = _variables(ds)
    labels = [_suffix(c) for c in ds[coef].values] if coef else []
    out = list(cells)
    for v in names:
        out += [f"{v}_{c}" for c in labels] if coef and coef in ds[v].dims else [v]
    return out


def export_frames(ds):
    """The table of ``ds`` as pandas DataFrames, one per value of the first cell dim (only done cells)."""
    import pandas as pd

    cells, coef, names = _variables(ds)
    labels = [_suffix(c) for c in ds[coef].values] if coef else []
    columns = export_columns(ds)
    first = cells[0]
    for i in range(ds.sizes[first]):
        part = ds[["done", *names]].isel({first: [i]}).load()
        done = part["done"].transpose(*cells).values == 1
        where = np.nonzero(done)
        data = {}
        for k, dim in enumerate(cells):
            values = part[dim].values
            if values.dtype.kind in "OUT":
                values = np.asarray([str(x) for x in values], dtype=object)
            data[dim] = values[where[k]]
        for v in names:
            var = part[v]
            if coef and coef in var.dims:
                arr = var.broadcast_like(part["done"]).transpose(*cells, coef).values[where]
                for j, c in enumerate(labels):
                    data[f"{v}_{c}"] = arr[:, j]
            else:
                data[v] = var.broadcast_like(part["done"]).transpose(*cells).values[where]
        yield pd.DataFrame(data, columns=columns)


def export_store(store, output, fmt: str = "csv") -> tuple[int, int]:
    """Write the done cells of ``store`` to ``output`` as ``fmt`` (csv or parquet); returns
    ``(rows, columns)``.  ``output`` is replaced only once the new file is complete."""
    import pandas as pd

    from .zarrstore import open_dataset

    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    ds = open_dataset(store)
    output = Path(output)
    tmp = output.with_name(f".{output.name}.tmp-{uuid.uuid4().hex[:8]}")
    rows = 0
    try:
        if fmt == "csv":
            header = True
            for frame in export_frames(ds):
                frame.to_csv(tmp, mode="w" if header else "a", header=header, index=False)
                header = False
                rows += len(frame)
            if header:  # a store with no slice at all: the header alone
                pd.DataFrame(columns=export_columns(ds)).to_csv(tmp, index=False)
        else:
            frames = list(export_frames(ds))
            table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=export_columns(ds))
            rows = len(table)
            table.to_parquet(tmp, index=False)
        os.replace(tmp, output)
    finally:
        if tmp.exists():
            tmp.unlink()
    return rows, len(export_columns(ds))

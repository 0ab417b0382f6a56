"""Find and repair damage in a store: every chunk read back, done flags cross-checked.

:func:`verify_store` reads all metadata and every chunk of every array.  A chunk
that cannot be decoded (truncated, garbage, a failing CRC32C checksum in stores
that have one) is damage; so is a cell whose ``done`` flag is 1 while its
``estimate`` is all NaN (a missing ``estimate`` chunk reads as NaN).  A missing
``done`` chunk only means "not done" and is recomputed by the next run.

:func:`repair_store` rewrites each damaged chunk with fill values and clears the
``done`` flags of the cells it holds, so the next run recomputes exactly those
cells; seeds are per cell, so the repaired store equals an undamaged one.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .zarrstore import CELL_DIMS, VARIABLES, StoreDamaged, _array, _group, read_meta

__all__ = ["Damage", "verify_store", "repair_store"]


@dataclass(frozen=True)
class Damage:
    """One damaged chunk (or metadata file) and the cells it holds.

    ``region`` maps dims of the variable to slices (empty for metadata);
    ``cells`` describes them (``mechanism``, ``n``, ``epsilon``, ``replicate``).
    """

    file: str
    what: str
    variable: str | None = None
    region: tuple = ()
    cells: str = ""

    def line(self) -> str:
        return f"{self.file}: {self.what}" + (f"; cells {self.cells}" if self.cells else "")


def _describe(meta, dims, region) -> str:
    parts = []
    for d, sl in zip(dims, region):
        if d == "coef":
            continue
        vals = list(meta.coords[d][sl])
        if d == "mechanism":
            text = ",".join(str(v) for v in vals)
        elif d == "replicate" and len(vals) > 1:
            text = f"{vals[0]}..{vals[-1]}"
        else:
            text = ",".join(f"{v:g}" for v in vals)
        parts.append(f"{'eps' if d == 'epsilon' else d}={text}")
    return " ".join(parts)


def _chunk_file(path: Path, name: str, index: tuple) -> str:
    return str(path / name / "c" / "/".join(str(i) for i in index))


def _chunks(arr):
    grid = [range(-(-s // c)) for s, c in zip(arr.shape, arr.chunks)]
    for index in itertools.product(*grid):
        yield index, tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(index, arr.chunks, arr.shape))


def verify_store(path, *, progress: bool = False) -> list[Damage]:
    """Every damaged metadata file and chunk of the store at ``path`` (empty: sound).

    Parameters
    ----------
    path : str or PathLike
        The store.
    progress : bool
        Show a tqdm progress bar over the chunks.

    Returns
    -------
    list of Damage
        Damage found, metadata first.  Damaged root metadata (nothing else can be read)
        gives one entry.
    """
    path = Path(path)
    try:
        meta = read_meta(path)
    except StoreDamaged as exc:
        return [Damage(file=str(path / "zarr.json"), what=str(exc).split(" (", 1)[-1].split("); ")[0])]
    g = _group(path)
    names = [n for n, _ in g.arrays() if n not in meta.coords and n != "theta_star"]
    arrays = {n: _array(g, n) for n in sorted(names)}
    total = sum(int(np.prod([-(-s // c) for s, c in zip(a.shape, a.chunks)])) for a in arrays.values())
    from tqdm import tqdm

    bar = tqdm(total=total, unit="chunk", desc="verify", disable=not progress, leave=False)
    out: list[Damage] = []
    values = {}
    for name, arr in arrays.items():
        dims = tuple(arr.metadata.dimension_names)
        keep = name in ("done", "estimate")
        whole = np.full(arr.shape, np.nan if arr.dtype.kind == "f" else 0, dtype=arr.dtype) if keep else None
        for index, region in _chunks(arr):
            try:
                block = arr[region]
                if whole is not None:
                    whole[region] = block
            except Exception as exc:  # noqa: BLE001 - any decode error is damage
                what = str(exc).splitlines()[0][:100] if str(exc) else type(exc).__name__
                out.append(Damage(_chunk_file(path, name, index), f"cannot be read ({what})", name, region,
                                  _describe(meta, dims, region)))
            bar.update(1)
        values[name] = whole
    bar.close()
    est, done = values.get("estimate"), values.get("done")
    if est is not None and done is not None:
        bad = (done == 1) & np.isnan(est).all(axis=-1)
        damaged_chunks = {d.file for d in out}
        arr = arrays["estimate"]
        for index, region in _chunks(arr):
            if _chunk_file(path, "estimate", index) in damaged_chunks:
                continue
            cells = region[:4]
            if bad[cells].any():
                out.append(Damage(_chunk_file(path, "estimate", index),
                                  f"{int(bad[cells].sum())} cells done but without an estimate (missing chunk?)",
                                  "estimate", region, _describe(meta, CELL_DIMS, cells)))
    return out


def repair_store(path, damage: list[Damage]) -> int:
    """Rewrite the damaged chunks with fill values and clear the ``done`` flags of their cells.

    Parameters
    ----------
    path : str or PathLike
        The store.
    damage : list of Damage
        What :func:`verify_store` found; entries without a variable (metadata) are skipped.

    Returns
    -------
    int
        The number of cells marked as not done.
    """
    g = _group(path, mode="r+")
    done = _array(g, "done")
    reset = np.zeros(done.shape, dtype=bool)
    for d in damage:
        if d.variable is None:
            continue
        arr = _array(g, d.variable)
        dims = tuple(arr.metadata.dimension_names)
        fill = VARIABLES[d.variable][2] if d.variable in VARIABLES else arr.metadata.fill_value
        shape = tuple(s.stop - s.start for s in d.region)
        arr[d.region] = np.full(shape, fill, dtype=arr.dtype)
        sel = tuple(d.region[dims.index(dim)] if dim in dims else slice(None) for dim in CELL_DIMS)
        reset[sel] = True
    if reset.any():
        flags = np.asarray(done[...])
        flags[reset] = 0
        done[...] = flags
    return int(reset.sum())

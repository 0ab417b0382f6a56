"""Find and repair damage in a store: every chunk read back, done flags cross-checked.

:func:`verify_store` reads all metadata and every chunk of every array.  A chunk
that cannot be decoded (truncated, garbage, a failing CRC32C checksum in stores
that have one) is damage; so is a cell whose ``done`` flag is 1 while its
``estimate`` is all NaN (a missing ``estimate`` chunk reads as NaN).  A missing
``done`` chunk only means "not done" and is recomputed by the next run.

:func:`repair_store` rewrites each damaged chunk with fill values and clears the
``done`` flags of the cells it holds, so the next run recomputes exactly those
cells; seeds are per cell, so the repaired store equals an undamaged one.

:func:`rebuild_metadata` rewrites damaged or missing metadata (the root or an
array's ``zarr.json``) from a template store made from the spec, when everything
still readable agrees with it; otherwise it names the file and why.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .zarrstore import (
    CELL_DIMS,
    VARIABLES,
    StoreDamaged,
    StoreError,
    _array,
    _group,
    _quiet,
    consolidate,
    read_meta,
    store_axes,
)

__all__ = ["Damage", "verify_store", "repair_store", "metadata_damage", "rebuild_metadata", "stored_spec_text"]

COORDS = CELL_DIMS + ("coef",)
FAILURES = "_kngflow/failures"


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


def _meta_problem(file: Path) -> str | None:
    """Why the metadata file ``file`` is damaged (None: it reads as zarr 3 metadata)."""
    if not file.exists():
        return "missing"
    try:
        m = json.loads(file.read_text())
    except (OSError, ValueError) as exc:
        return f"cannot be read: {str(exc).splitlines()[0][:100] if str(exc) else type(exc).__name__}"
    if not isinstance(m, dict) or m.get("zarr_format") != 3 or m.get("node_type") not in ("array", "group"):
        return "is not zarr metadata"
    return None


def _array_names(path: Path) -> set:
    """Arrays the store should hold: its folders, the ones the root's consolidated metadata
    names, the coordinates of the problem axes its root names, and every kngflow store's
    variables and coordinates."""
    names = {p.name for p in path.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
    try:
        root = json.loads((path / "zarr.json").read_text())
        listed = root.get("consolidated_metadata") or {}
        names |= {k for k in listed.get("metadata", {}) if "/" not in k and not k.startswith(("_", "."))}
        attrs = root.get("attributes") or {}
        names |= {a for a in store_axes(attrs if isinstance(attrs, dict) else {}) if a.isidentifier()}
    except (OSError, ValueError, AttributeError):
        pass
    return names | set(VARIABLES) | set(COORDS) | {"theta_star"}


def metadata_damage(path) -> list[Damage]:
    """Each metadata file (the root's and every array's ``zarr.json``) that is missing or damaged.

    Raises :class:`~kngflow.store.StoreError` when ``path`` holds no store at all
    (no root ``zarr.json`` and none of a kngflow store's arrays).
    """
    path = Path(path)
    root = path / "zarr.json"
    if not root.exists() and not any((path / v / "zarr.json").exists() for v in VARIABLES):
        read_meta(path)  # raises: not a zarr store
    out = []
    why = _meta_problem(root)
    if why:
        out.append(Damage(str(root), why))
    elif "spec_hash" not in (json.loads(root.read_text()).get("attributes") or {}):
        return []  # a zarr store but not kngflow's: read_meta says so
    for name in sorted(_array_names(path)):
        why = _meta_problem(path / name / "zarr.json")
        if why:
            out.append(Damage(str(path / name / "zarr.json"), why))
    return out


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
    damage = metadata_damage(path)
    if damage:
        return damage
    try:
        meta = read_meta(path)
    except StoreDamaged as exc:
        what = str(exc).split(" (", 1)[-1].rsplit("); ", 1)[0]
        m = re.match(r"(\S+zarr\.json) (.*)", what)
        return [Damage(file=m.group(1), what=m.group(2)) if m else Damage(file=str(path / "zarr.json"), what=what)]
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
            cells = region[:-1]  # every dim but coef (problem axes first, where the store has them)
            if bad[cells].any():
                out.append(Damage(_chunk_file(path, "estimate", index),
                                  f"{int(bad[cells].sum())} cells done but without an estimate (missing chunk?)",
                                  "estimate", region, _describe(meta, meta.cell_dims, cells)))
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
    cell_dims = tuple(done.metadata.dimension_names)  # problem axes (if any), then CELL_DIMS
    reset = np.zeros(done.shape, dtype=bool)
    for d in damage:
        if d.variable is None:
            continue
        arr = _array(g, d.variable)
        dims = tuple(arr.metadata.dimension_names)
        fill = VARIABLES[d.variable][2] if d.variable in VARIABLES else arr.metadata.fill_value
        shape = tuple(s.stop - s.start for s in d.region)
        arr[d.region] = np.full(shape, fill, dtype=arr.dtype)
        sel = tuple(d.region[dims.index(dim)] if dim in dims else slice(None) for dim in cell_dims)
        reset[sel] = True
    if reset.any():
        flags = np.asarray(done[...])
        flags[reset] = 0
        done[...] = flags
    return int(reset.sum())


# --------------------------------------------------------------------------- rebuild metadata
def stored_spec_text(path) -> str | None:
    """The spec text in the root attributes of the store at ``path`` (None if unreadable)."""
    try:
        text = json.loads((Path(path) / "zarr.json").read_text())["attributes"]["spec"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return text if isinstance(text, str) else None


def _layout(m: dict) -> dict:
    """Array metadata without what differs between a new store and one extended or chunked otherwise."""
    m = dict(m)
    m.pop("shape", None)
    m.pop("chunk_grid", None)
    return m


def _write_json(file: Path, meta: dict) -> None:
    tmp = file.with_name(f"zarr.json.tmp-{uuid.uuid4().hex[:8]}")
    tmp.write_text(json.dumps(meta, indent=2))
    os.replace(tmp, file)


def _read_with(meta: dict, array_dir: Path, sel=Ellipsis):
    """The values ``[sel]`` of the array in ``array_dir`` decoded with the metadata ``meta``."""
    import zarr

    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp) / "a"
        where.mkdir()
        (where / "zarr.json").write_text(json.dumps(meta))
        if (array_dir / "c").exists():
            os.symlink(array_dir / "c", where / "c")
        with _quiet():
            return np.asarray(zarr.open_array(str(where), mode="r")[sel])


def rebuild_metadata(path, template, check: Callable | None = None) -> list[str]:
    """Rewrite the damaged or missing metadata of the store at ``path`` from ``template``.

    Parameters
    ----------
    path : str or PathLike
        The store.
    template : str or PathLike
        A new, empty store made from the spec the store was made from (the sweep's
        ``prepare_store`` into a temporary directory).
    check : callable, optional
        Called as ``check(read)`` once the arrays' metadata are sound and before a
        damaged root is rewritten, where ``read(name, sel=...)`` returns the values
        ``[sel]`` of array ``name``; it raises :class:`~kngflow.store.StoreError` when the store's cells are
        not the spec's (the caller recomputes one done cell).

    Returns
    -------
    list of str
        The files rewritten (empty: no metadata was damaged).

    Raises
    ------
    StoreDamaged
        Naming the file that cannot be rebuilt and why: the arrays the store holds, an
        intact array's metadata, the coordinates or the spec hash differ from what the
        spec creates, or a coordinate was extended (its chunking is unknown).  Nothing
        is written then.
    """
    path, template = Path(path), Path(template)
    bad = {Path(d.file) for d in metadata_damage(path)}
    if not bad:
        return []
    root = path / "zarr.json"

    def fail(file, why):
        return StoreDamaged(f"{file} is damaged and cannot be rebuilt from the spec: {why}")

    tnames = {p.name for p in template.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
    snames = _array_names(path)
    if snames != tnames:
        first = min(bad)
        raise fail(first, f"the store's arrays {sorted(snames - tnames)} / the spec's {sorted(tnames - snames)} differ")
    tmeta = {name: json.loads((template / name / "zarr.json").read_text()) for name in tnames}
    smeta = {name: json.loads((path / name / "zarr.json").read_text())
             for name in tnames if path / name / "zarr.json" not in bad}
    sizes, chunks = {}, {}
    for name, m in smeta.items():
        if _layout(m) != _layout(tmeta[name]):
            keys = sorted(k for k in set(m) | set(tmeta[name]) if k not in ("shape", "chunk_grid")
                          and m.get(k) != tmeta[name].get(k))
            raise fail(min(bad), f"{path / name / 'zarr.json'} is not what the spec creates ({', '.join(keys)})")
        dims = m.get("dimension_names") or []
        for dim, size, c in zip(dims, m["shape"], m["chunk_grid"]["configuration"]["chunk_shape"]):
            sizes.setdefault(dim, size)
            if list(dims) != [name] and name != "theta_star":  # a variable chunked along the cells
                chunks.setdefault(dim, c)
    new = {}
    for name in sorted(tnames):
        file = path / name / "zarr.json"
        if file not in bad:
            continue
        m = json.loads(json.dumps(tmeta[name]))
        dims = m.get("dimension_names") or []
        shape = [sizes.get(d, s) for d, s in zip(dims, m["shape"])]
        if list(dims) == [name]:
            files = list((path / name / "c").iterdir()) if (path / name / "c").is_dir() else []
            if len(files) > 1:
                raise fail(file, "the coordinate was extended after the store was made (its chunking is unknown)")
            chunk = shape
        elif name == "theta_star":  # one chunk, as written at creation: (coef) or (*problem axes, coef)
            chunk = shape
        else:
            chunk = [chunks.get(d, c) for d, c in zip(dims, m["chunk_grid"]["configuration"]["chunk_shape"])]
        m["shape"], m["chunk_grid"]["configuration"]["chunk_shape"] = shape, chunk
        new[name] = m

    def read(name, sel=Ellipsis):
        return _read_with(new.get(name) or smeta[name], path / name, sel)

    troot = json.loads((template / "zarr.json").read_text())
    troot.pop("consolidated_metadata", None)
    if root in bad:
        for dim in store_axes(troot.get("attributes") or {}) + COORDS:  # problem axes (if any) first
            try:
                have = read(dim)
            except Exception as exc:  # noqa: BLE001 - a damaged coordinate chunk
                raise fail(root, f"coordinate {dim} cannot be read ({type(exc).__name__})") from None
            want = _read_with(tmeta[dim], template / dim)
            if have.shape != want.shape or not all(str(a) == str(b) for a, b in zip(have.tolist(), want.tolist())):
                raise fail(root, f"coordinate {dim} of the store is {have.tolist()}, the spec's {want.tolist()}")
        if check is not None:
            try:
                check(read)
            except StoreError as exc:
                raise fail(root, str(exc)) from None
    else:
        have = json.loads(root.read_text()).get("attributes", {}).get("spec_hash")
        if have != troot["attributes"]["spec_hash"]:
            raise fail(min(bad), f"the store was made from another spec (hash {str(have)[:12]}, the spec's "
                       f"{troot['attributes']['spec_hash'][:12]})")
    written = []
    for name, m in new.items():
        _write_json(path / name / "zarr.json", m)
        written.append(str(path / name / "zarr.json"))
    if root in bad:
        (path / FAILURES).mkdir(parents=True, exist_ok=True)
        for sub in (path / "_kngflow", path / FAILURES):
            if _meta_problem(sub / "zarr.json"):
                _write_json(sub / "zarr.json", {"zarr_format": 3, "node_type": "group", "attributes": {}})
        _write_json(root, troot)
        written.append(str(root))
    consolidate(path)
    return written

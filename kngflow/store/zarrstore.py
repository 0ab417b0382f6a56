"""The results store: one xarray/zarr (format 3) directory per study.

Layout (``docs/contracts.md``)::

    dims       mechanism × n × epsilon × replicate (× coef)
    chunks     mechanism and epsilon: all labels/values known at creation,
               replicate (then n): as many as fit a few MB of ``estimate``

The chunks are large and compact: one process (the client's
:class:`~kngflow.store.writer.StoreWriter`) writes every result, so chunks need
not match the units of work and a region may cover parts of chunks (a single
writer's read-modify-write loses nothing).  Results are written before their
``done`` flags, so a crash in between only costs a recomputation.  Resume reads
``done`` (and ``failed``), never counts chunk files — zarr 3 does not write
chunks equal to the fill value.  Stores made with any chunking (one replicate
per chunk included) open, resume and extend the same way.

Problem axes.  A study whose spec has ``[grid.problem]`` (e.g. ``d = [8, 16, 32]``) has one
more dim per problem option, named after it and placed before ``mechanism`` (root attribute
``problem_axes``: their names, in order; absent from a store without axes, whose layout is
unchanged).  Every per-cell and per-data-set variable and ``theta_star`` gains those leading
dims, with one axis value per chunk.  ``coef`` is as long as the longest estimate over the
axis values and a shorter estimate (PCA's ``d * k`` entries at a smaller ``d``) is padded
with NaN, as is its ``theta_star``.  Padding was chosen over one variable per axis value
because it keeps one ``estimate`` variable whose dims are the contract analysts code
against (``ds.estimate.sel(d=16)`` is that d's releases, its NaN tail dropped with
``.dropna("coef", how="all")``), lets every reader that selects by dim name (export, the
analysis, verify) work unchanged, and costs at most the largest value's width per cell,
which chunk compression shrinks further.

The store never knows about mechanisms or Dask; :mod:`kngflow.sweep` drives it.
Failure messages live in zarr groups ``_kngflow/failures/<flush>`` (attributes),
so the directory stays a valid zarr hierarchy and ``xr.open_zarr`` ignores them.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import zarr

__all__ = [
    "CELL_DIMS",
    "VARIABLES",
    "StoreError",
    "StoreDamaged",
    "StoreMeta",
    "STORE_FORMAT",
    "damaged",
    "create_store",
    "cell_variable_names",
    "check_cell_variables",
    "check_data_variables",
    "data_variable_names",
    "read_meta",
    "extend_store",
    "read_flags",
    "read_region",
    "write_failures",
    "read_failures",
    "consolidate",
    "open_dataset",
]

CELL_DIMS = ("mechanism", "n", "epsilon", "replicate")
DATA_DIMS = ("n", "replicate")
FAILURES_GROUP = "_kngflow/failures"

#: Per-cell variables every store has: name -> (dims, dtype, fill value).  More per-cell
#: variables (the mechanisms' declared diagnostics) and per-data-set variables (over ``n,
#: replicate`` and possibly ``coef``, declared by the problem) are passed to :func:`create_store`.
VARIABLES: dict[str, tuple[tuple[str, ...], str, float | int]] = {
    "estimate": (CELL_DIMS + ("coef",), "float64", np.nan),
    "error": (CELL_DIMS, "float64", np.nan),
    "seconds": (CELL_DIMS, "float64", np.nan),
    "done": (CELL_DIMS, "int8", 0),
    "failed": (CELL_DIMS, "int8", 0),
}
#: Format of the stores this version writes (root attribute ``kngflow_store_format``);
#: a store without the attribute is format 1.  Newer formats are refused.
STORE_FORMAT = 1
DAMAGED_HINT = "run `kngflow verify {path}`, then `kngflow run SPEC --store {path} --repair`"
COORD_DTYPES = {"mechanism": object, "n": np.int64, "epsilon": np.float64, "replicate": np.int64, "coef": np.int64}


def store_axes(attrs: dict) -> tuple[str, ...]:
    """The problem-axis names of a store from its root attributes (``()``: none)."""
    raw = attrs.get("problem_axes")
    if not raw:
        return ()
    try:
        names = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return ()
    return tuple(str(x) for x in names) if isinstance(names, list) else ()


def _plain(value):
    """A numpy scalar as the Python value a spec writes (int, float or str)."""
    return value.item() if hasattr(value, "item") else value


def _axis_dtype(values):
    arr = np.asarray(values)
    if arr.dtype.kind in "iub":
        return np.int64
    if arr.dtype.kind == "f":
        return np.float64
    return object


class StoreError(RuntimeError):
    """A store that cannot be used as asked (missing, foreign, other spec, misaligned)."""


@dataclass(frozen=True)
class StoreMeta:
    """Coordinates, chunk sizes and attributes of a store (no chunk data read)."""

    path: str
    coords: dict  # dim -> numpy array
    chunks: dict  # dim -> chunk length along that dim
    attrs: dict

    @property
    def axes(self) -> tuple[str, ...]:
        """The problem axes (leading dims before ``mechanism``); ``()`` for a store without them."""
        return store_axes(self.attrs)

    @property
    def cell_dims(self) -> tuple[str, ...]:
        return self.axes + CELL_DIMS

    def axis_points(self) -> list[tuple]:
        """``(index tuple, value tuple)`` of every point of the problem axes (``[((), ())]`` without axes)."""
        import itertools

        axes = self.axes
        idx = itertools.product(*(range(len(self.coords[a])) for a in axes))
        return [(tuple(i), tuple(_plain(self.coords[a][k]) for a, k in zip(axes, i))) for i in idx]

    @property
    def shape(self) -> dict:
        return {k: len(v) for k, v in self.coords.items()}


@contextmanager
def _quiet():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*[Cc]onsolidated metadata.*")
        warnings.filterwarnings("ignore", message=".*not recognized as a component of a Zarr hierarchy.*")
        warnings.filterwarnings("ignore", category=UserWarning, module="zarr.*")
        warnings.filterwarnings("ignore", category=RuntimeWarning, module="zarr.*")
        yield


def _compressors() -> tuple:
    """Zstandard, then a CRC32C checksum, so a damaged chunk reads as damage."""
    return (zarr.codecs.ZstdCodec(level=0), zarr.codecs.Crc32cCodec())


class StoreDamaged(StoreError):
    """Metadata or chunks of the store cannot be read back; the message names the file."""


def damaged(path, what: str) -> StoreDamaged:
    """A :class:`StoreDamaged` naming ``what`` is damaged and the commands that find and repair it."""
    return StoreDamaged(f"store {path} is damaged ({what}); " + DAMAGED_HINT.format(path=path))


def _group(path, mode="r"):
    try:
        with _quiet():
            return zarr.open_group(str(path), mode=mode, use_consolidated=False)
    except (ValueError, KeyError, TypeError) as exc:  # JSONDecodeError is a ValueError
        raise damaged(path, f"{Path(path) / 'zarr.json'} cannot be read: {str(exc).splitlines()[0][:120]}") from None


def open_dataset(path) -> xr.Dataset:
    """``xr.open_zarr`` of the store without relying on consolidated metadata."""
    import xarray as xr  # here, not at the top: `kngflow status` needs zarr only

    with _quiet():
        return xr.open_zarr(str(path), consolidated=False)


# --------------------------------------------------------------------------- create
def create_store(
    path,
    *,
    coords: dict,
    chunks: dict,
    theta_star,
    attrs: dict,
    variable_attrs: dict | None = None,
    data_variables: dict | None = None,
    cell_variables: dict | None = None,
    axes: dict | None = None,
) -> StoreMeta:
    """Write the lazy template of a new store (no data chunks) and return its meta.

    ``chunks`` gives the chunk length along ``mechanism``, ``n``, ``epsilon`` and
    ``replicate`` (missing dims: the whole axis; lengths are capped at the axis).

    ``data_variables`` maps the names of per-data-set variables to ``(dims, dtype,
    fill)`` with ``dims`` starting with ``("n", "replicate")`` (the problem's
    ``data_variables``); they are stored next to the per-cell :data:`VARIABLES`.
    ``cell_variables`` maps more per-cell variables (the mechanisms' diagnostics) to
    ``(dtype, fill)``; their dims are the cell dims.

    The template is written with ``to_zarr(..., compute=False)`` into a temporary
    sibling directory that is renamed into place, so a crash never leaves a half
    template behind.  Float variables get ``fill_value`` NaN explicitly.

    ``axes`` (``{option: values}``, ordered) adds the problem axes as leading dims of
    every variable (one value per chunk); ``theta_star`` then has shape ``(*axis sizes,
    coef)``, NaN-padded where a point's estimate is shorter (see the module docstring).
    """
    import dask.array as da
    import xarray as xr

    path = Path(path)
    if path.exists():
        raise StoreError(f"{path} already exists")
    axes = dict(axes or {})
    c = {dim: np.asarray(list(v), dtype=_axis_dtype(list(v))) for dim, v in axes.items()}
    c.update({dim: np.asarray(coords[dim], dtype=COORD_DTYPES[dim]) for dim in CELL_DIMS + ("coef",)})
    lead = tuple(axes)
    sizes = {k: len(v) for k, v in c.items()}
    chunks = {d: int(chunks.get(d, sizes[d])) for d in CELL_DIMS}
    for d, k in chunks.items():
        if k < 1:
            raise ValueError(f"chunk length along {d} must be >= 1, got {k}")
    chunks = {d: min(k, max(1, sizes[d])) for d, k in chunks.items()}
    chunks["coef"] = sizes["coef"]
    chunks.update({a: 1 for a in lead})
    data_vars = {}
    encoding = {}
    variable_attrs = variable_attrs or {}
    declared = {**VARIABLES, **check_cell_variables(cell_variables or {}), **check_data_variables(data_variables or {})}
    for name, (dims, dtype, fill) in declared.items():
        dims = lead + tuple(dims)
        shape = tuple(sizes[d] for d in dims)
        ch = tuple(chunks[d] for d in dims)
        data_vars[name] = (dims, da.full(shape, fill, dtype=dtype, chunks=ch), variable_attrs.get(name, {}))
        encoding[name] = {"fill_value": fill, "chunks": ch, "compressors": _compressors()}
    theta = np.asarray(theta_star, dtype=np.float64)
    want = tuple(sizes[a] for a in lead) + (sizes["coef"],)
    if theta.shape != want:
        raise ValueError(f"theta_star must have shape {want}, got {theta.shape}")
    data_vars["theta_star"] = (lead + ("coef",), theta)
    extra = {"problem_axes": json.dumps(list(lead))} if lead else {}
    ds = xr.Dataset(data_vars, coords=c, attrs={**attrs, **extra, "kngflow_store_format": STORE_FORMAT})
    for dim in c:
        encoding[dim] = {"chunks": (max(1, sizes[dim]),)}

    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with _quiet():
            ds.to_zarr(str(tmp), mode="w-", compute=False, encoding=encoding, consolidated=False, zarr_format=3)
            g = zarr.open_group(str(tmp), mode="r+", use_consolidated=False)
            g.require_group(FAILURES_GROUP)
        consolidate(tmp)
        os.rename(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return read_meta(path)


def check_cell_variables(cell_variables: dict) -> dict:
    """Validate per-cell variable declarations ``name -> (dtype, fill)``; returns ``name -> (dims, dtype, fill)``."""
    out = {}
    for name, (dtype, fill) in cell_variables.items():
        if name in VARIABLES or name in CELL_DIMS + ("coef", "theta_star") or not name.isidentifier():
            raise ValueError(f"diagnostic {name!r} clashes with a store variable or dimension, or is not an identifier")
        out[name] = (CELL_DIMS, str(dtype), fill)
    return out


def cell_variable_names(path) -> list[str]:
    """Names of the per-cell variables of the store at ``path`` besides :data:`VARIABLES` (the diagnostics)."""
    g = _group(path)
    cells = store_axes(dict(g.attrs)) + CELL_DIMS
    return sorted(name for name, arr in g.arrays()
                  if name not in VARIABLES and tuple(arr.metadata.dimension_names or ()) == cells)


def check_data_variables(data_variables: dict) -> dict:
    """Validate per-data-set variable declarations ``name -> (dims, dtype, fill, ...)``."""
    out = {}
    for name, decl in data_variables.items():
        dims, dtype, fill = tuple(decl[0]), str(decl[1]), decl[2]
        if name in VARIABLES or name in CELL_DIMS + ("coef", "theta_star"):
            raise ValueError(f"data variable {name!r} clashes with a store variable or dimension")
        if dims[:2] != DATA_DIMS or not set(dims[2:]) <= {"coef"}:
            raise ValueError(f"data variable {name!r}: dims must be ('n', 'replicate') or ('n', 'replicate', 'coef'), got {dims}")
        out[name] = (dims, dtype, fill)
    return out


def data_variable_names(path) -> list[str]:
    """Names of the per-data-set variables of the store at ``path`` (dims start with n, replicate)."""
    g = _group(path)
    lead = len(store_axes(dict(g.attrs)))
    names = []
    for name, arr in g.arrays():
        dims = tuple(arr.metadata.dimension_names or ())
        if name not in VARIABLES and dims[lead:lead + 2] == DATA_DIMS:
            names.append(name)
    return sorted(names)


def consolidate(path) -> None:
    """Write consolidated metadata so plain ``xr.open_zarr(store)`` opens quickly and quietly.

    kngflow itself never reads it (it may be stale while a run extends a store).
    """
    with _quiet():
        zarr.consolidate_metadata(str(path))


def _drop_consolidated(path) -> None:
    root = Path(path) / "zarr.json"
    meta = json.loads(root.read_text())
    if meta.pop("consolidated_metadata", None) is not None:
        tmp = root.with_name(f"zarr.json.tmp-{uuid.uuid4().hex[:8]}")
        tmp.write_text(json.dumps(meta, indent=2))
        os.replace(tmp, root)


# --------------------------------------------------------------------------- read
def read_meta(path) -> StoreMeta:
    """Coordinates, chunking and attributes; raise StoreError if ``path`` is no kngflow store."""
    path = Path(path)
    if not (path / "zarr.json").exists():
        raise StoreError(f"{path} is not a zarr store (no zarr.json)")
    g = _group(path)
    attrs = dict(g.attrs)
    if "spec_hash" not in attrs:
        raise StoreError(f"{path} is a zarr store but not a kngflow store (no spec_hash attribute)")
    fmt = attrs.get("kngflow_store_format", 1)
    if not isinstance(fmt, int) or fmt > STORE_FORMAT:
        raise StoreError(
            f"{path} has store format {fmt!r}, newer than the format {STORE_FORMAT} this kngflow reads; "
            "upgrade kngflow to read it"
        )
    coords = {}
    for dim in store_axes(attrs) + CELL_DIMS + ("coef",):
        arr = _array(g, dim)
        try:
            values = arr[...]
        except Exception as exc:  # noqa: BLE001 - any decode error of a chunk is damage
            raise damaged(path, f"coordinate {dim} cannot be read: {type(exc).__name__}") from None
        if dim not in COORD_DTYPES:  # a problem axis: its own dtype
            values = np.asarray(values)
            coords[dim] = values if values.dtype.kind in "iuf" else np.asarray([str(v) for v in values], dtype=object)
            continue
        coords[dim] = np.asarray(values, dtype=COORD_DTYPES[dim]) if dim != "mechanism" else np.asarray(
            [str(v) for v in values], dtype=object
        )
    est = _array(g, "estimate")
    for name in VARIABLES:
        _array(g, name)
    dims = tuple(est.metadata.dimension_names)
    chunks = dict(zip(dims, est.chunks))
    return StoreMeta(path=str(path), coords=coords, chunks=chunks, attrs=attrs)


def _array(g, name: str):
    """The array ``name`` of group ``g``; :class:`StoreDamaged` if its metadata is missing or damaged."""
    path = Path(str(g.store_path.store.root)) if hasattr(g.store_path.store, "root") else Path(str(g.store_path))
    meta = path / name / "zarr.json"
    try:
        with _quiet():
            arr = g[name]
    except (ValueError, KeyError, TypeError) as exc:
        why = "missing" if not meta.exists() else f"cannot be read: {str(exc).splitlines()[0][:120]}"
        raise damaged(path, f"{meta} {why}") from None
    if not isinstance(arr, zarr.Array):
        raise damaged(path, f"{meta} is not an array")
    return arr


def read_flags(path) -> tuple[np.ndarray, np.ndarray]:
    """``(done, failed)`` as int8 arrays over (mechanism, n, epsilon, replicate)."""
    g = _group(path)
    out = []
    for name in ("done", "failed"):
        try:
            out.append(np.asarray(_array(g, name)[...]))
        except StoreDamaged:
            raise
        except Exception as exc:  # noqa: BLE001 - any decode error of a chunk is damage
            raise damaged(path, f"a chunk of {name} cannot be read: {type(exc).__name__}") from None
    return out[0], out[1]


def read_region(path, region: dict, variables) -> dict:
    """Read ``variables`` (numpy) over ``region`` (dim -> slice)."""
    g = _group(path)
    out = {}
    meta_dims = {}
    for name in variables:
        arr = g[name]
        dims = tuple(arr.metadata.dimension_names)
        meta_dims[name] = dims
        sel = tuple(region.get(d, slice(None)) for d in dims)
        out[name] = np.asarray(arr[sel])
    return out


# --------------------------------------------------------------------------- extend
def extend_store(path, new_coords: dict, attrs: dict) -> StoreMeta:
    """Append coordinate values along ``mechanism``/``n``/``epsilon``/``replicate``.

    Only the client calls this, before any task runs (never ``append_dim`` from
    parallel writers).  Arrays are resized in place: existing chunks keep their
    bytes, the new cells read as the fill values (done = 0).  ``attrs`` replace
    the root attributes (new spec text and hash).
    """
    path = Path(path)
    _drop_consolidated(path)
    meta = read_meta(path)
    g = _group(path, mode="r+")
    sizes = {d: len(v) for d, v in meta.coords.items()}
    added = {d: list(v) for d, v in new_coords.items() if len(v)}
    new_sizes = dict(sizes)
    for d, vals in added.items():
        if d not in CELL_DIMS:
            raise StoreError(f"cannot extend dimension {d!r}")
        new_sizes[d] = sizes[d] + len(vals)
    with _quiet():
        for name, arr in g.arrays():
            dims = tuple(arr.metadata.dimension_names or ())
            shape = tuple(new_sizes.get(d, s) for d, s in zip(dims, arr.shape))
            if shape != arr.shape:
                arr.resize(shape)
        for d, vals in added.items():
            arr = g[d]
            arr[sizes[d] :] = np.asarray(vals, dtype=COORD_DTYPES[d])
        g.attrs.update(attrs)
    consolidate(path)
    return read_meta(path)


def update_attrs(path, attrs: dict) -> None:
    _drop_consolidated(path)
    g = _group(path, mode="r+")
    g.attrs.update(attrs)
    consolidate(path)


# --------------------------------------------------------------------------- failures
def write_failures(path, key: str, records: list[dict]) -> None:
    """Record failures under ``key`` (a list of JSON-able dicts with cell and message)."""
    with _quiet():
        zarr.create_group(
            store=str(path), path=f"{FAILURES_GROUP}/{key}", overwrite=True, attributes={"failures": records}
        )


def read_failures(path) -> list[dict]:
    """Every recorded failure record (possibly stale: check the ``failed`` flags)."""
    root = Path(path) / FAILURES_GROUP
    out = []
    if not root.exists():
        return out
    for sub in sorted(root.iterdir()):
        meta = sub / "zarr.json"
        if not meta.exists():
            continue
        try:
            records = json.loads(meta.read_text()).get("attributes", {}).get("failures", [])
        except (OSError, ValueError):
            continue
        for r in records:
            out.append(dict(r, task=sub.name))
    return out

"""The single writer: blocks of results in, few large writes to the store out.

Workers never open the store.  They return a :class:`Block` (numpy arrays for
consecutive replicates of one n) to the client, whose :class:`StoreWriter`
buffers blocks and flushes them every ``interval`` seconds (or when the buffer
holds ``max_cells`` cells) from a background thread:

1. contiguous blocks of the same n are joined, so one flush makes one write per
   variable and run of replicates;
2. every result variable (``failed`` and the data variables included) is
   written first, the ``done`` flags last, so ``done = 1`` only ever vouches for
   values on disk; a kill -9 of the client loses at most the unflushed blocks;
3. failure messages of the flush go into one ``_kngflow/failures/<flush>`` group.

A block may cover cells that are already done (a resumed or extended store):
its ``mask`` says which cells it sets and the others are read back and kept.
Because one process writes, regions need not be chunk-aligned.
"""

from __future__ import annotations

import queue
import threading
import time
import uuid
from dataclasses import dataclass, field

import numpy as np

from .zarrstore import VARIABLES, StoreError, _group, _quiet, write_failures

__all__ = ["Block", "write_blocks", "StoreWriter", "StoreWriteError"]


class StoreWriteError(StoreError):
    """The writer could not write (disk full, file too large, read-only): the run must stop."""

#: Failure messages kept per flush (the ``failed`` flags are kept for every cell).
MAX_MESSAGES_PER_FLUSH = 1000


@dataclass
class Block:
    """Results of replicates ``start:stop`` of the n at ``n_index``.

    ``cells`` maps per-cell variables (``done`` and ``failed`` included) to
    arrays shaped (mechanism, epsilon, replicate[, coef]) in the store's order;
    ``mask`` (same shape without coef, bool) marks the cells the block sets (None:
    all).  ``data`` maps per-data-set variables to (replicate[, coef]) arrays,
    ``data_mask`` (replicate,) marks the replicates they are valid for (None: all).
    ``at`` holds the indices along the store's problem axes (``()`` for a store without them).
    """

    n_index: int
    start: int
    stop: int
    cells: dict
    mask: np.ndarray | None = None
    data: dict = field(default_factory=dict)
    data_mask: np.ndarray | None = None
    failures: list = field(default_factory=list)
    at: tuple = ()

    @property
    def size(self) -> int:
        return int(self.cells["done"].size)


def _join(blocks: list[Block]) -> list[Block]:
    """Concatenate blocks of the same n whose replicate ranges touch."""
    out: list[Block] = []
    for b in sorted(blocks, key=lambda b: (tuple(b.at), b.n_index, b.start)):
        last = out[-1] if out else None
        if last is not None and (tuple(last.at), last.n_index, last.stop, set(last.data)) == (
                tuple(b.at), b.n_index, b.start, set(b.data)):
            out[-1] = _concat(out[-1], b)
        else:
            out.append(b)
    return out


def _concat(a: Block, b: Block) -> Block:
    def mask(x, y, shape_x, shape_y):
        if x is None and y is None:
            return None
        x = np.ones(shape_x, bool) if x is None else x
        y = np.ones(shape_y, bool) if y is None else y
        return np.concatenate([x, y], axis=-1)

    shape_a, shape_b = a.cells["done"].shape, b.cells["done"].shape
    return Block(
        n_index=a.n_index,
        start=a.start,
        stop=b.stop,
        cells={k: np.concatenate([a.cells[k], b.cells[k]], axis=2) for k in a.cells},
        mask=mask(a.mask, b.mask, shape_a, shape_b),
        data={k: np.concatenate([a.data[k], b.data[k]], axis=0) for k in a.data},
        data_mask=mask(a.data_mask, b.data_mask, (shape_a[2],), (shape_b[2],)),
        failures=a.failures + b.failures,
        at=a.at,
    )


def _write(arr, sel: tuple, values: np.ndarray, mask: np.ndarray | None) -> None:
    values = np.asarray(values, dtype=arr.dtype)
    if mask is not None and not mask.all():
        old = np.asarray(arr[sel])
        m = mask.reshape(mask.shape + (1,) * (values.ndim - mask.ndim))
        values = np.where(m, values, old)
    arr[sel] = values


def write_blocks(path, blocks: list[Block], *, key: str | None = None) -> None:
    """Write ``blocks`` into the store at ``path``: results first, ``done`` flags last."""
    if not blocks:
        return
    joined = _join(blocks)
    g = _group(path, mode="r+")
    with _quiet():
        arrays = {}
        for b in joined:
            cell_sel = tuple(b.at) + (slice(None), b.n_index, slice(None), slice(b.start, b.stop))
            for name, values in b.cells.items():
                if name != "done":
                    arr = arrays.setdefault(name, g[name])
                    _write(arr, cell_sel, values, b.mask)
            for name, values in b.data.items():
                arr = arrays.setdefault(name, g[name])
                _write(arr, tuple(b.at) + (b.n_index, slice(b.start, b.stop)), values, b.data_mask)
        done = g["done"]
        for b in joined:
            _write(done, tuple(b.at) + (slice(None), b.n_index, slice(None), slice(b.start, b.stop)), b.cells["done"],
                   b.mask)
    failures = [r for b in blocks for r in b.failures]
    if failures:
        write_failures(path, key or f"f{time.time_ns()}-{uuid.uuid4().hex[:6]}", failures[:MAX_MESSAGES_PER_FLUSH])


def empty_cells(shape: tuple, d: int, cell_variables: dict | None = None) -> dict:
    """Per-cell arrays of ``shape`` (mechanism, epsilon, replicate) filled with the store's fill
    values: :data:`VARIABLES` and the declared ``cell_variables`` (``name -> (dtype, fill)``)."""
    out = {}
    for name, (dims, dtype, fill) in VARIABLES.items():
        out[name] = np.full(shape + ((d,) if "coef" in dims else ()), fill, dtype=dtype)
    for name, (dtype, fill) in (cell_variables or {}).items():
        out[name] = np.full(shape, fill, dtype=dtype)
    return out


class StoreWriter:
    """Buffer :class:`Block` objects and write them from a background thread.

    ``put`` never blocks on I/O (unless ``max_pending`` blocks are queued);
    the thread flushes every ``interval`` seconds or once ``max_cells`` cells are
    buffered.  ``close`` writes what is left.  An error in the thread is raised
    by the next ``put`` or by ``close``.  Use as a context manager.
    """

    def __init__(self, path, *, interval: float = 2.0, max_cells: int = 2_000_000, max_pending: int = 256):
        self.path = str(path)
        self.interval = float(interval)
        self.max_cells = int(max_cells)
        self._queue: queue.Queue = queue.Queue(maxsize=max_pending)
        self._error: BaseException | None = None
        self.flushes = 0
        self.cells_written = 0
        self._thread = threading.Thread(target=self._loop, name="kngflow-store-writer", daemon=True)
        self._thread.start()

    def put(self, block: Block) -> None:
        while True:
            self._raise()
            if not self._thread.is_alive():
                raise RuntimeError("the store writer has stopped")
            try:
                self._queue.put(block, timeout=0.5)
                return
            except queue.Full:
                continue

    def _raise(self) -> None:
        if self._error is not None:
            err, self._error = self._error, None
            raise err

    def _loop(self) -> None:
        buffer: list[Block] = []
        cells = 0
        last = time.monotonic()
        closing = False
        while not closing:
            timeout = max(0.0, last + self.interval - time.monotonic())
            try:
                item = self._queue.get(timeout=timeout)
                if item is None:
                    closing = True
                else:
                    buffer.append(item)
                    cells += item.size
            except queue.Empty:
                pass
            if buffer and (closing or cells >= self.max_cells or time.monotonic() - last >= self.interval):
                try:
                    write_blocks(self.path, buffer)
                except OSError as exc:
                    self._error = StoreWriteError(
                        f"cannot write the store {self.path}: {exc.strerror or exc}; the cells written before are "
                        "kept: free space (or fix the file system) and run the same command again to resume"
                    )
                    return
                except BaseException as exc:  # noqa: BLE001 - handed to the caller
                    self._error = exc
                    return
                self.flushes += 1
                self.cells_written += cells
                buffer, cells = [], 0
            if not buffer:
                last = time.monotonic()

    def close(self) -> None:
        """Write every buffered block and stop the thread."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        self._raise()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

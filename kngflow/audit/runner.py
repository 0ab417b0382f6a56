r"""Where an audit's releases are drawn: in this process or as Dask tasks.

The black-box audit asks for releases in *chunks*: ``(data set, size, key)``, where the
key names the chunk (stage of the audit, data set, chunk number).  A chunk draws its
releases from its own generator, ``default_rng(SeedSequence(seed, spawn_key=key))``, so
its output depends on the audit's seed and the key only, never on which process draws
it, in which order, or next to which other chunks.  The chunks of a request are cut by
:func:`chunk_sizes` from its total size alone; an audit therefore gives the same bound in
one process (:class:`LocalRunner`) and on a cluster of any size (:class:`DaskRunner`).

Chunks return either the releases (estimates and other outputs) or, through a
``reduce`` function applied on the worker, something small: the main stage of the audit
counts its chosen events there, so 10^7 releases per data set never travel.
"""

from __future__ import annotations

import math
import time
import zlib
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

__all__ = ["Chunk", "LocalRunner", "DaskRunner", "chunk_sizes", "draw_chunk", "releases"]

#: Fewest releases in one chunk (a task of a fast mechanism then lasts about 10 ms).
CHUNK_MIN = 500
#: Most chunks one request of releases is cut into (tasks of slow mechanisms stay long).
CHUNKS_MAX = 128


class Chunk(NamedTuple):
    """``size`` releases on the data set ``records``, from the stream named ``key``."""

    records: np.ndarray
    size: int
    key: tuple


def chunk_sizes(total: int) -> list[int]:
    """Sizes of the chunks ``total`` releases are cut into: at least :data:`CHUNK_MIN`
    each (the last one the remainder), at most :data:`CHUNKS_MAX` of them; a function of
    ``total`` alone."""
    total = int(total)
    if total <= 0:
        return []
    size = max(CHUNK_MIN, math.ceil(total / CHUNKS_MAX))
    out = [size] * (total // size)
    if total % size:
        out.append(total % size)
    return out


def releases(mechanism, data, epsilon: float, rng: np.random.Generator, size: int):
    """``size`` releases on ``data``: estimates ``(size, d)`` and the other outputs as a dict
    of float arrays (``info`` fields, a text value as a stable number, the wall time of
    each call as ``seconds``)."""
    est, side = [], {}
    for _ in range(size):
        t = time.perf_counter()
        rel = mechanism.release(data, epsilon, rng)
        dt = time.perf_counter() - t
        est.append(np.concatenate([np.ravel(v) for v in rel.record().values()]))
        for k, v in rel.diagnostics().items():
            side.setdefault(k, []).append(float(zlib.crc32(v.encode())) if isinstance(v, str) else float(v))
        side.setdefault("seconds", []).append(dt)
    return np.array(est, dtype=float).reshape(size, -1), {k: np.array(v) for k, v in side.items()}


def draw_chunk(mechanism, problem, epsilon: float, seed: int, chunk: Chunk, reduce: Callable | None = None):
    """The releases of one chunk (``reduce(estimates, other outputs)`` of them when given)."""
    rng = np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=tuple(int(k) for k in chunk.key)))
    est, side = releases(mechanism, problem.audit_data(chunk.records), epsilon, rng, chunk.size)
    return (est, side) if reduce is None else reduce(est, side)


class LocalRunner:
    """Draws the chunks one after the other in this process."""

    workers = 1

    def map(self, mechanism, problem, epsilon: float, seed: int, chunks: Sequence[Chunk],
            reduce: Callable | None = None, progress: Callable | None = None) -> list:
        """``draw_chunk`` of every chunk, in order; ``progress(releases)`` after each."""
        out = []
        for ch in chunks:
            out.append(draw_chunk(mechanism, problem, epsilon, seed, ch, reduce))
            if progress:
                progress(ch.size)
        return out

    def __repr__(self) -> str:
        return "one process"


class DaskRunner:
    """Draws the chunks as tasks of a ``distributed.Client`` (one task per chunk).

    The mechanism and the problem travel to the workers once (scattered on first use);
    results are collected in the order of the chunks, whatever order they finish in.  The
    workers must be able to import the mechanism's and the problem's modules.
    """

    def __init__(self, client):
        self.client = client
        self._scattered: dict[tuple[int, int], tuple] = {}

    def _objects(self, mechanism, problem):
        key = (id(mechanism), id(problem))
        if key not in self._scattered:  # the objects are kept alive with their futures
            futs = self.client.scatter([mechanism, problem], broadcast=True, hash=False)
            self._scattered[key] = (mechanism, problem, *futs)
        return self._scattered[key][2:]

    @property
    def workers(self) -> int:
        return max(1, len(self.client.scheduler_info(n_workers=-1).get("workers", {})))

    def map(self, mechanism, problem, epsilon: float, seed: int, chunks: Sequence[Chunk],
            reduce: Callable | None = None, progress: Callable | None = None) -> list:
        """``draw_chunk`` of every chunk as Dask tasks; results in the chunks' order."""
        if not chunks:
            return []
        mech_f, prob_f = self._objects(mechanism, problem)
        futures = [self.client.submit(draw_chunk, mech_f, prob_f, epsilon, seed, ch, reduce, pure=False)
                   for ch in chunks]
        out = []
        try:
            for ch, fut in zip(chunks, futures):  # in order (the client need not be the default one)
                out.append(fut.result())
                if progress:
                    progress(ch.size)
        finally:
            for f in futures:
                f.release()
        return out

    def __repr__(self) -> str:
        return f"Dask cluster at {self.client.scheduler.address} ({self.workers} workers)"

"""From a validated spec and a store to a list of chunk-aligned tasks.

A *cell* is (mechanism, n, ε, replicate).  A *chunk* of the store holds every
mechanism and ε of a block of ``replicate_chunk`` replicates of one n (see
:mod:`kngflow.store.zarrstore`).  A *task* owns one or more consecutive whole
chunks of one n: it simulates each replicate's data once, runs every missing
(mechanism, ε) release on it, and writes its region.  Tasks are sized by a
simple cost model so that one lasts about ``task_seconds``: many replicates at
small n, one at n = 10^7.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Task", "CostModel", "plan_tasks", "default_replicate_chunk"]


@dataclass(frozen=True)
class CostModel:
    """Seconds of one replicate of one task ≈ ``per_row·n + per_release·releases``.

    ``per_row`` is the data simulation plus sufficient statistics (≈ 12 draws and a
    rank-1 update per row); ``per_release`` a release with a sampler (MCMC at
    10^4 steps is the slow case).  Only the sizes of tasks depend on it, never
    the results.
    """

    per_row: float = 1.0e-7
    per_release: float = 0.01
    task_seconds: float = 1.0

    def replicate_seconds(self, n: int, releases: int) -> float:
        return self.per_row * n + self.per_release * releases

    def replicates_per_task(self, n: int, releases: int) -> int:
        return max(1, int(math.floor(self.task_seconds / max(self.replicate_seconds(n, releases), 1e-9))))


def default_replicate_chunk(n_values, n_replicates: int, releases: int, cost: CostModel | None = None) -> int:
    """Replicates per chunk: what one task does at the largest n (chunks must fit every n)."""
    cost = cost or CostModel()
    return max(1, min(n_replicates, cost.replicates_per_task(max(n_values), releases)))


@dataclass(frozen=True)
class Task:
    """A chunk-aligned block of cells: one n, a replicate range, a mechanism and ε chunk."""

    key: str
    n: int
    region: tuple  # ((dim, start, stop), ...) over mechanism, n, epsilon, replicate
    labels: tuple
    epsilons: tuple
    replicates: tuple
    data_summary: bool  # this task writes scale / ols_stderr of its replicates
    missing: int  # cells not done when planned

    def region_slices(self) -> dict:
        return {d: slice(a, b) for d, a, b in self.region}

    @property
    def cost_n(self) -> int:
        return self.n


def _ranges(size: int, chunk: int):
    for start in range(0, size, chunk):
        yield start, min(start + chunk, size)


def plan_tasks(meta, done: np.ndarray, *, cost: CostModel | None = None, key_prefix: str = "") -> list[Task]:
    """Tasks covering every chunk with at least one cell not done, largest n first.

    ``done`` is the (mechanism, n, epsilon, replicate) flag array read from the
    store; ``meta`` its :class:`~kngflow.store.StoreMeta`.  Consecutive replicate
    chunks of the same n (and mechanism/ε chunk) are merged up to the size the
    cost model allows.
    """
    cost = cost or CostModel()
    coords, chunks = meta.coords, meta.chunks
    labels, ns, eps, reps = coords["mechanism"], coords["n"], coords["epsilon"], coords["replicate"]
    tasks: list[Task] = []
    order = sorted(range(len(ns)), key=lambda i: -int(ns[i]))
    for i in order:
        n = int(ns[i])
        for m0, m1 in _ranges(len(labels), chunks["mechanism"]):
            for e0, e1 in _ranges(len(eps), chunks["epsilon"]):
                releases = (m1 - m0) * (e1 - e0)
                per_task = cost.replicates_per_task(n, releases)
                chunks_per_task = max(1, per_task // chunks["replicate"])
                pending: list[tuple[int, int, int]] = []  # (r0, r1, missing)

                def flush():
                    if not pending:
                        return
                    r0, r1 = pending[0][0], pending[-1][1]
                    miss = sum(p[2] for p in pending)
                    region = (("mechanism", m0, m1), ("n", i, i + 1), ("epsilon", e0, e1), ("replicate", r0, r1))
                    tag = hashlib.sha1(repr((key_prefix, region)).encode()).hexdigest()[:16]
                    tasks.append(
                        Task(
                            key=f"kngflow-{tag}",
                            n=n,
                            region=region,
                            labels=tuple(str(x) for x in labels[m0:m1]),
                            epsilons=tuple(float(x) for x in eps[e0:e1]),
                            replicates=tuple(int(x) for x in reps[r0:r1]),
                            data_summary=(m0 == 0 and e0 == 0),
                            missing=miss,
                        )
                    )
                    pending.clear()

                for r0, r1 in _ranges(len(reps), chunks["replicate"]):
                    block = done[m0:m1, i, e0:e1, r0:r1]
                    miss = int(block.size - np.count_nonzero(block))
                    if miss == 0:
                        flush()
                        continue
                    pending.append((r0, r1, miss))
                    if len(pending) >= chunks_per_task:
                        flush()
                flush()
    return tasks

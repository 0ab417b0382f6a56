"""The client loop: submit a study's tasks to Dask with bounded concurrency and write their results.

Workers never open the store.  A task (:func:`~kngflow.sweep.task.compute_block`, on a
worker) computes the missing cells of a block of replicates of one n and returns them as
a :class:`~kngflow.store.Block` of numpy arrays; the client (:func:`run_sweep`) hands
each block to one :class:`~kngflow.store.StoreWriter`, which writes large, compact
chunks from a background thread, results before ``done`` flags.  Tasks come lazily from
:func:`~kngflow.sweep.plan.iter_tasks` and at most ``max_in_flight`` futures exist at a
time (``distributed.as_completed``, topped up as tasks finish; results are fetched as
their tasks finish and taken in batches), so the client's memory does not grow with the
grid.  How many futures, and how long the tasks, follows the cluster as workers join and
leave (:class:`_Window`).
"""

from __future__ import annotations

import contextlib
import math
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kngflow import store as st

from .cluster import adaptive_maximum
from .quiet import Interrupted, WorkLeft
from .plan import CostModel, Task, count_tasks, default_task_timeout, estimate, iter_tasks, scaled_cost
from .prepare import _progress, prepare_store
from .provenance import SchedulerLost, VersionMismatch, WorkersLost, check_workers, plugin_modules, \
    runtime_versions, scheduler_lost
from .spec import Spec
from .task import _store_axes, _summary, compute_block, failed_block, timeout_message

__all__ = ["RunResult", "run_sweep"]


@dataclass
class RunResult:
    """What a run did: counts over the whole store after the run, and its failures.

    ``computed`` counts the cells that this run's tasks released.
    """

    action: str
    total: int
    done_before: int
    done: int
    failed: int
    tasks: int
    seconds: float
    failures: list = field(default_factory=list)
    computed: int = 0

    @property
    def ok(self) -> bool:
        return self.failed == 0 and self.done == self.total


class _Window:
    """The run's view of the cluster, re-read every ``every`` seconds while it runs.

    ``threads`` is what the workers present have; ``capacity`` is at least that,
    and the adaptive maximum (in threads) when the client's own cluster adapts (what
    :func:`kngflow.sweep.cluster.adapt` was asked for: kngflow keeps its own record),
    so that an adaptive cluster sees enough queued work to grow.  About two
    futures per thread of ``capacity`` are kept in flight, and tasks are cut
    long enough that the scheduler sees at most
    :data:`~kngflow.sweep.plan.MAX_TASK_RATE` tasks per second.  Workers seen
    for the first time are asked for their :func:`runtime_versions`.
    """

    def __init__(self, client, cost: CostModel, *, fixed: int | None = None, every: float = 2.0,
                 expect: dict | None = None, worker_timeout: float | None = None):
        self.client, self.cost, self.fixed, self.every, self.expect = client, cost, fixed, every, expect
        self.worker_timeout = worker_timeout
        self._seen = False  # some worker was present: from then on, no worker at all is a loss
        self._empty_since: float | None = None
        self.known: set = set()
        self.threads = self.capacity = 0
        self._at = -math.inf
        self.refresh(force=True)

    def refresh(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._at < self.every:
            return
        self._at = now
        try:
            nthreads = self.client.nthreads()
        except OSError as exc:  # CommClosedError, connection refused or timed out
            raise scheduler_lost(exc) from None
        self._check_lost(bool(nthreads), now)
        if self.expect is not None:
            check_workers(self.client, self.expect, set(nthreads) - self.known)
        self.known = set(nthreads)
        self.threads = sum(nthreads.values())
        self.capacity = max(self.threads, self._adaptive_threads(len(nthreads)))

    def worked(self) -> None:
        """A result came back from a worker: some worker was present, even one that joined
        and left between two refreshes."""
        self._seen = True

    def _check_lost(self, present: bool, now: float) -> None:
        """Raise :class:`WorkersLost` once no worker has been present for ``worker_timeout`` s after
        some were (an adaptive cluster the client owns brings its own workers back: never)."""
        if present or self.worker_timeout is None:
            self._seen = self._seen or present
            self._empty_since = None
            return
        if not self._seen or adaptive_maximum(getattr(self.client, "cluster", None)) is not None:
            return
        if self._empty_since is None:
            self._empty_since = now
        elif now - self._empty_since >= self.worker_timeout:
            raise WorkersLost(
                f"every Dask worker left the run and none joined within {self.worker_timeout:g} s "
                "(--connect-timeout); the cells done so far are saved: start workers, then run the same "
                "command again to resume"
            )

    def _adaptive_threads(self, workers: int) -> int:
        maximum = adaptive_maximum(getattr(self.client, "cluster", None))
        if maximum is None or not math.isfinite(maximum):
            return 0
        return int(maximum * (self.threads / workers if workers else 1))

    @property
    def in_flight(self) -> int:
        return self.fixed or max(4, 2 * self.capacity)

    def sizing(self) -> tuple[CostModel, int]:
        """``(cost model, ramp)`` for the next task (:func:`~kngflow.sweep.plan.iter_tasks`)."""
        return scaled_cost(self.cost, max(1, self.capacity)), self.threads


def _work_left(cost: CostModel, labels, epsilons, ns, done: np.ndarray, threads: int):
    """``(WorkLeft, per_cell, release)``: the run's :class:`~kngflow.sweep.quiet.WorkLeft`, over
    the cost model's seconds of the cells not done; ``per_cell[i]``, a cell's share of the
    seconds of its replicate at the i-th n; ``release[i, m]``, the m-th mechanism's release
    seconds there."""
    per_cell = np.array([cost.replicate_seconds(int(n), labels, len(epsilons)) for n in ns]) / (
        len(labels) * len(epsilons))
    todo = np.count_nonzero(done == 0, axis=tuple(i for i in range(done.ndim) if i != done.ndim - 3))
    release = np.array([[cost.release(label, int(n)) for label in labels] for n in ns])
    return WorkLeft(float(np.dot(todo, per_cell)), threads), per_cell, release


def _measured_ratio(block: st.Block, release: np.ndarray) -> float | None:
    """Median over the block's finished cells of their measured release seconds over the cost
    model's (None without any)."""
    done = block.cells["done"].astype(bool)
    if block.mask is not None:
        done &= block.mask
    expected = np.broadcast_to(release[block.n_index][:, None, None], done.shape)[done]
    measured = block.cells["seconds"][done]
    keep = expected > 0
    return float(np.median(measured[keep] / expected[keep])) if keep.any() else None


@contextlib.contextmanager
def _say_saved_if_interrupted(store_path, total: int):
    """On a signal, once the store writer inside has written every finished cell, the
    one line says how many cells the store now holds."""
    try:
        yield
    except Interrupted as exc:
        try:
            done = int(np.count_nonzero(st.read_flags(store_path)[0]))
        except Exception:  # noqa: BLE001 - the line is said without the count
            exc.announce()
        else:
            exc.announce(f"{done} of {total} cells are saved")
        raise


def run_sweep(
    spec: Spec,
    store_path,
    client,
    *,
    replicate_chunk: int | None = None,
    cost: CostModel | None = None,
    max_in_flight: int | None = None,
    retries: int = 2,
    task_timeout: float | None = None,
    flush_seconds: float = 2.0,
    progress: bool = True,
    log=print,
    prepared=None,
    check_versions: bool = True,
    refresh_seconds: float = 2.0,
    worker_timeout: float | None = None,
) -> RunResult:
    """Compute every missing cell of ``spec`` into ``store_path`` on ``client``'s cluster.

    Re-running with the same spec resumes: only cells whose ``done`` flag is 0
    are computed (failed cells are retried).  Results do not depend on the
    number of workers, their arrival or departure, the batching or the order of
    completion.  The workers only need ``import kngflow``: they never see
    ``store_path``.

    The run follows the cluster (:class:`_Window`): every ``refresh_seconds`` it
    re-reads the workers and threads present (and the adaptive maximum of a
    cluster the client owns), keeps about two futures per thread in flight
    (``max_in_flight`` fixes the number), and cuts longer tasks as the cluster
    grows.  Results are fetched as tasks finish.  A worker that retires
    (``dask worker --lifetime``) or dies hands its tasks back to the scheduler,
    which runs them elsewhere; no cell is lost or written twice.

    ``check_versions``: every worker, present or joining later, must run the
    client's kngflow, numpy and numba (:data:`MATCHED_PACKAGES`); otherwise
    :class:`VersionMismatch` is raised (before anything is computed for a
    worker present at the start; each task also checks its worker before it
    computes).

    ``task_timeout`` (seconds; default :func:`default_task_timeout`) bounds a
    task: a worker stops computing a task past it, and the client cancels a
    task that has not returned ``2 × task_timeout + 10`` s after its submission
    (a task may wait for one other task before it starts; a kernel that never
    returns cannot be interrupted inside the worker).  Either way its cells are
    marked failed with the reason.  ``flush_seconds`` is the longest a finished
    block waits in the client before it is written.  ``prepared`` is the result
    of :func:`prepare_store` when the caller already called it.

    ``worker_timeout`` (seconds; default: wait for ever): once every worker has left
    (killed, or their jobs ended), the run waits this long for one to join, then stops
    with :class:`WorkersLost` (not with a cluster the client owns that adapts: it starts
    workers itself).  A lost scheduler stops the run with :class:`SchedulerLost`.  Either
    way the cells written so far are kept and a rerun resumes.
    """
    from distributed import as_completed

    t0 = time.perf_counter()
    cost = cost or CostModel()
    store_path = str(Path(store_path).resolve())
    expect = runtime_versions(plugin_modules(spec)) if check_versions else None
    window = _Window(client, cost, fixed=max_in_flight, every=refresh_seconds, expect=expect,
                     worker_timeout=worker_timeout)
    if prepared is None:
        prepared = prepare_store(spec, store_path, replicate_chunk=replicate_chunk)
    meta, action = prepared
    labels, epsilons = _store_axes(meta)
    d = len(meta.coords["coef"])
    done, _failed = st.read_flags(store_path)
    total = int(done.size)
    done_before = int(np.count_nonzero(done))
    if task_timeout is None:
        task_timeout = default_task_timeout(estimate(spec, cost, progress=_progress(meta, done, spec)))
    tasks = iter_tasks(meta, done, key_prefix=f"{store_path}{spec.hash}{uuid.uuid4().hex}", sizing=window.sizing)
    if log:
        sized, ramp = window.sizing()
        log(
            f"store {store_path}: {action}; {done_before}/{total} cells done, {total - done_before} to compute "
            f"in {count_tasks(meta, done, cost=sized, ramp=ramp)} tasks (chunks: "
            + ", ".join(f"{k}={meta.chunks[k]}" for k in ("mechanism", "n", "epsilon", "replicate"))
            + f"; task timeout {task_timeout:g} s)"
        )
    work, per_cell, release = _work_left(cost, labels, epsilons, meta.coords["n"], done, window.threads)
    del done, _failed
    failures: list[dict] = []
    n_computed = n_failed = n_tasks = 0
    bar = None
    if done_before < total:
        if progress:  # a bar on a terminal, plain lines in a log
            from .quiet import progress_bar

            bar = progress_bar(total, done_before, work=work)
        futs: dict = {}  # key -> (task, submitted at, future)
        # results are fetched as they finish, on the client's event loop: a result lost with
        # its worker is recomputed there, and the loop below never waits on a gather (it
        # goes on following the cluster, and stops once every worker has left)
        ready = as_completed(with_results=True)

        def submit() -> bool:
            task = next(tasks, None)
            if task is None:
                return False
            fut = client.submit(
                compute_block, spec.text, labels, epsilons, task, task_timeout, expect,
                key=task.key, retries=retries, pure=False,
            )
            futs[fut.key] = (task, time.monotonic(), fut)
            ready.add(fut)
            return True

        def finish(block: st.Block) -> None:
            nonlocal n_computed, n_failed, n_tasks
            writer.put(block)
            s = _summary(block)
            n_tasks += 1
            if len(failures) < 1000:
                failures.extend(block.failures[:20])
            n_failed += s["failed"]
            n_computed += s["done"]
            if bar is not None:
                work.threads = window.threads
                work.add(s["computed"] * per_cell[block.n_index], _measured_ratio(block, release))
                if n_failed:
                    bar.set_postfix(failed=n_failed, refresh=False)
                bar.update(s["done"])

        def failure(task: Task, fut) -> None:
            try:
                exc = fut.exception()
            except Exception as e:  # noqa: BLE001 - cancelled or lost
                finish(failed_block(labels, epsilons, d, task, f"task failed: {e!r}", meta.axes))
                return
            if isinstance(exc, VersionMismatch):
                raise VersionMismatch(str(exc))
            msg = f"task failed after {retries} retries: {type(exc).__name__}: {exc}"
            finish(failed_block(labels, epsilons, d, task, msg, meta.axes))

        grace = 2 * task_timeout + 10
        checked = time.monotonic()
        with _say_saved_if_interrupted(store_path, total), st.StoreWriter(store_path, interval=flush_seconds) as writer:
            try:
                while True:
                    window.refresh()
                    while len(futs) < window.in_flight and submit():
                        pass
                    if not futs:
                        break
                    batch = [(f, r) for f, r in ready.next_batch(block=False) if futs.get(f.key, (0, 0, None))[2] is f]
                    for fut, result in batch:
                        task = futs.pop(fut.key)[0]
                        if isinstance(result, st.Block):
                            window.worked()
                            finish(result)
                        else:  # an error or a cancellation
                            failure(task, fut)
                        fut.release()
                    now = time.monotonic()
                    if now - checked > 1.0:
                        checked = now
                        for key, (task, since, fut) in list(futs.items()):
                            if now - since > grace:  # a kernel that does not return: give up on the task
                                del futs[key]
                                client.cancel([fut], force=True)
                                finish(failed_block(labels, epsilons, d, task, timeout_message(task_timeout),
                                                    meta.axes))
                    if not batch:
                        time.sleep(0.02)
            except BaseException as exc:
                with contextlib.suppress(Exception):
                    client.cancel([f for _, _, f in futs.values()], force=True)
                closed = getattr(client, "status", "running") != "running"  # after the scheduler went away
                if isinstance(exc, Exception) and not isinstance(exc, SchedulerLost) and closed:
                    raise scheduler_lost(exc) from None
                raise
        st.consolidate(store_path)
    done, failed = st.read_flags(store_path)
    if bar is not None:
        bar.n = int(np.count_nonzero(done))
        bar.close()
    return RunResult(
        action=action,
        total=total,
        done_before=done_before,
        done=int(np.count_nonzero(done)),
        failed=int(np.count_nonzero(failed & (done == 0))),
        tasks=n_tasks,
        seconds=time.perf_counter() - t0,
        failures=failures,
        computed=n_computed,
    )

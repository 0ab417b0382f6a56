"""From a validated spec and a store's ``done`` flags to tasks, and what a run will cost.

A *cell* is (mechanism, n, ε, replicate).  A *task* is a block of consecutive
replicates of one n, with every mechanism and ε: it simulates each replicate's
data once, runs every missing (mechanism, ε) release on it and returns the
results as numpy arrays (:mod:`kngflow.sweep.engine`).  Tasks never touch the
store, so their size is set by the cost model alone (about ``task_seconds`` of
work: thousands of replicates at n = 100, one at n = 10^7), independently of the
store's chunks.  :func:`iter_tasks` yields them lazily, largest n first, so the
client never holds one object per task of a huge grid.

:class:`CostModel` predicts seconds; :func:`calibrate` measures it on this
machine and :func:`estimate` turns it into the lines of ``kngflow plan``.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass, field, replace

import numpy as np

from kngflow.problems.base import DEFAULT_BLOCK_ROWS  # noqa: F401 - the contract's default, named here for the planner

__all__ = [
    "Task",
    "CostModel",
    "Estimate",
    "iter_tasks",
    "count_tasks",
    "plan_tasks",
    "calibrate",
    "estimate",
    "default_chunks",
    "default_task_timeout",
    "scaled_cost",
    "startup_seconds",
    "MAX_TASK_RATE",
]

#: Target bytes of one chunk of the largest variable (``estimate``): chunks of a few MB
#: keep the store at tens of files and each flush cheap.
CHUNK_BYTES = 4 << 20
#: Resident memory of a worker process with kngflow, numba and dask imported.
WORKER_BASE_BYTES = 300 << 20
#: Tasks per second the scheduler should see at most.  Dask's scheduler spends about
#: 0.2-1 ms of CPU per task (:data:`SCHEDULER_SECONDS_PER_TASK` here), so 200 tasks/s keep
#: its one core at most a fifth busy: tasks get longer as the cluster grows
#: (:func:`scaled_cost`), never shorter than ``--task-seconds``.
MAX_TASK_RATE = 200.0
#: Scheduler CPU seconds per task (its idle cost per worker subtracted) and client CPU
#: seconds per cell (receiving, buffering and writing results), measured by
#: ``benchmarks/bench_scale.py`` on a 2-core machine shared by 16 single-threaded workers
#: (360 000 cells of d = 4 in 2211 tasks: 4.55 ms and 56 us); upper bounds for a
#: scheduler and a client that have a core of their own.
SCHEDULER_SECONDS_PER_TASK = 4.5e-3
CLIENT_SECONDS_PER_CELL = 56e-6
#: Fraction of one core past which the plan warns that the scheduler or the client saturates.
SATURATION = 0.5


def _data_set_bytes(problem, ns) -> int:
    """Worker memory of the largest simulated data set: ``problem.data_bytes(n)`` maximised
    over ``ns`` (the contract's default: four blocks of :data:`DEFAULT_BLOCK_ROWS` rows of
    ``d + 1`` float64)."""
    return max(int(problem.data_bytes(int(n))) for n in ns)


@dataclass(frozen=True)
class CostModel:
    """Seconds of one replicate ≈ ``per_data + per_row·n + Σ_mechanisms release(label, n)·|ε|``.

    ``per_data`` and ``per_row`` are the data simulation plus sufficient
    statistics; ``per_release`` maps a mechanism label to the seconds of one
    release (stream set-up included) at two sample sizes, ``((n0, s0), (n1, s1))``,
    interpolated linearly in log n between them (a sampler may switch from MCMC
    to an exact draw as n grows); ``default_release`` serves labels not
    measured.  :func:`calibrate` measures all of them on this machine.  Only task
    sizes, time limits and estimates depend on the model, never results.
    """

    per_row: float = 1.0e-7
    per_data: float = 0.0
    default_release: float = 0.01
    per_release: dict = field(default_factory=dict)
    task_seconds: float = 1.0

    def release(self, label, n: int) -> float:
        points = self.per_release.get(str(label))
        if not points:
            return self.default_release
        (n0, s0), (n1, s1) = points
        if n <= n0 or n1 <= n0:
            return s0
        if n >= n1:
            return s1
        w = math.log(n / n0) / math.log(n1 / n0)
        return s0 + w * (s1 - s0)

    def release_seconds(self, labels, n: int) -> float:
        return float(sum(self.release(lab, n) for lab in labels))

    def replicate_seconds(self, n: int, labels, n_epsilon: int) -> float:
        return self.per_data + self.per_row * n + self.release_seconds(labels, n) * n_epsilon

    def replicates_per_task(self, n: int, labels, n_epsilon: int) -> int:
        per = max(self.replicate_seconds(n, labels, n_epsilon), 1e-9)
        return max(1, int(math.floor(self.task_seconds / per)))


def scaled_cost(cost: CostModel, threads: int) -> CostModel:
    """``cost`` with tasks long enough that ``threads`` busy threads send the scheduler
    at most :data:`MAX_TASK_RATE` tasks per second (``task_seconds >= threads / 200``)."""
    need = threads / MAX_TASK_RATE
    return cost if cost.task_seconds >= need else replace(cost, task_seconds=need)


def default_chunks(sizes: dict, d: int) -> dict:
    """Chunk lengths of a new store: whole mechanism and ε axes, replicates (then n) up to
    :data:`CHUNK_BYTES` of ``estimate``.  Independent of tasks (one writer writes any region)."""
    per_rep = max(1, sizes["mechanism"] * sizes["epsilon"] * d * 8)
    rchunk = max(1, min(sizes["replicate"], CHUNK_BYTES // per_rep))
    nchunk = max(1, min(sizes["n"], CHUNK_BYTES // (per_rep * rchunk))) if rchunk == sizes["replicate"] else 1
    return {"mechanism": sizes["mechanism"], "n": nchunk, "epsilon": sizes["epsilon"], "replicate": rchunk}


@dataclass(frozen=True)
class Task:
    """Replicates ``start:stop`` (indices into the store's replicate axis) of the n at ``n_index``.

    ``at`` and ``point`` are the indices and values of the task's point on the store's problem
    axes (``()`` for a store without them).  ``need`` is None when every cell of the block is missing, else a bool array
    (mechanism, epsilon, replicate) of the cells to compute.
    """

    key: str
    n: int
    n_index: int
    start: int
    stop: int
    replicates: np.ndarray
    need: np.ndarray | None
    missing: int
    at: tuple = ()
    point: tuple = ()

    def region_slices(self, axes: tuple = ()) -> dict:
        out = {"n": slice(self.n_index, self.n_index + 1), "replicate": slice(self.start, self.stop)}
        out.update({a: slice(i, i + 1) for a, i in zip(axes, self.at)})
        return out


#: The first ``ramp`` tasks of :func:`iter_tasks` are this many times shorter.
RAMP_DIVISOR = 16


def _extents(meta, done: np.ndarray, sizing):
    """``(point, n index, todo, start, stop)`` of each task of :func:`iter_tasks`, in order;
    ``point`` is ``(indices, values)`` on the problem axes (``((), ())`` without them).

    ``sizing()`` gives ``(cost model, ramp)`` and is asked again for every task."""
    labels, ns, eps = (meta.coords[k] for k in ("mechanism", "n", "epsilon"))
    issued = 0
    points = meta.axis_points() if hasattr(meta, "axis_points") else [((), ())]
    for i, point in ((i, p) for i in sorted(range(len(ns)), key=lambda k: -int(ns[k])) for p in points):
        todo = done[point[0]][:, i, :, :] == 0  # (M, E, R)
        rep_todo = np.flatnonzero(todo.any(axis=(0, 1)))
        # runs of consecutive replicates with work, cut into tasks of per_task replicates
        breaks = np.flatnonzero(np.diff(rep_todo) != 1) + 1
        for run in np.split(rep_todo, breaks) if rep_todo.size else ():
            a = 0
            while a < len(run):
                cost, ramp = sizing()
                per_task = cost.replicates_per_task(int(ns[i]), labels, len(eps))
                size = per_task if issued >= ramp else max(1, per_task // RAMP_DIVISOR)
                yield point, i, todo, int(run[a]), int(run[min(a + size, len(run)) - 1]) + 1
                a += size
                issued += 1


def _fixed(cost: CostModel | None, ramp: int):
    sized = (cost or CostModel(), ramp)
    return lambda: sized


def iter_tasks(
    meta, done: np.ndarray, *, cost: CostModel | None = None, key_prefix: str = "", ramp: int = 0, sizing=None
):
    """Yield tasks covering every cell not done, largest n first, lazily.

    ``done`` is the (mechanism, n, epsilon, replicate) flag array of the store and
    ``meta`` its :class:`~kngflow.store.StoreMeta`.  Fully done replicates are
    skipped; a task covers at most ``cost.replicates_per_task`` replicates, the
    first ``ramp`` tasks :data:`RAMP_DIVISOR` times fewer (one short task per
    worker first: results and failures show up early).

    ``sizing``, a function returning ``(cost, ramp)``, replaces ``cost`` and
    ``ramp`` and is called before each task is cut: the run's engine passes
    one that follows the cluster as workers join and leave.  Task extents never
    change results (seeds are per cell).
    """
    ns, reps = meta.coords["n"], meta.coords["replicate"]
    for (at, point), i, todo, start, stop in _extents(meta, done, sizing or _fixed(cost, ramp)):
        block = todo[:, :, start:stop]
        missing = int(np.count_nonzero(block))
        tag = hashlib.sha1(repr((key_prefix, i, start, stop) + ((at,) if at else ())).encode()).hexdigest()[:16]
        yield Task(
            key=f"kngflow-{tag}",
            n=int(ns[i]),
            n_index=i,
            start=start,
            stop=stop,
            replicates=np.asarray(reps[start:stop], dtype=np.int64),
            need=None if missing == block.size else block.copy(),
            missing=missing,
            at=at,
            point=point,
        )


def count_tasks(meta, done: np.ndarray, *, cost: CostModel | None = None, ramp: int = 0) -> int:
    """How many tasks :func:`iter_tasks` yields (without making them)."""
    return sum(1 for _ in _extents(meta, done, _fixed(cost, ramp)))


def plan_tasks(meta, done: np.ndarray, *, cost: CostModel | None = None, key_prefix: str = "") -> list[Task]:
    """:func:`iter_tasks` as a list (for small studies and tests)."""
    return list(iter_tasks(meta, done, cost=cost, key_prefix=key_prefix))


# --------------------------------------------------------------------------- calibration
def calibrate(spec, *, budget: float = 3.0, task_seconds: float = 1.0) -> CostModel:
    """Measure the cost model of ``spec`` on this machine (a few seconds at most).

    Times the simulation of data sets at the smallest n and at
    ``min(max(n), 2·10^5)`` rows (``per_data``, ``per_row``), and each mechanism's
    releases (a fresh stream each, as in a run) on both data sets, after one
    warm-up call that loads the compiled kernels; a mechanism stops being timed
    once it has used its share of ``budget`` seconds.  Streams are fresh
    generators, never the study's.  BLAS runs on one thread, as on a worker.
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        return _calibrate(spec, budget, task_seconds)


def _calibrate(spec, budget: float, task_seconds: float) -> CostModel:
    mechanisms = spec.build_mechanisms()
    points = spec.axis_points()
    rng = np.random.default_rng(12345)
    measured = [_calibrate_point(spec, spec.problem(p), mechanisms, rng, budget / len(points)) for p in points]
    per_row = float(np.mean([m[0] for m in measured]))
    per_data = float(np.mean([m[1] for m in measured]))
    per_release = {}
    for label in mechanisms:
        found = [m[2][label] for m in measured if label in m[2]]
        if found:
            ends = [(f[0], f[-1]) for f in found]
            per_release[label] = tuple((ends[0][j][0], float(np.mean([e[j][1] for e in ends if e[j][0] == ends[0][j][0]])))
                                       for j in range(2))
    default = max((p[0][1] for p in per_release.values()), default=CostModel.default_release)
    return CostModel(per_row=per_row, per_data=per_data, default_release=default, per_release=per_release,
                     task_seconds=task_seconds)


def _calibrate_point(spec, problem, mechanisms, rng, budget: float) -> tuple[float, float, dict]:
    """``(per_row, per_data, {label: [(n, seconds), ...]})`` of one problem (one point of the
    problem axes): the model's terms where it is the only one.  With problem axes the model
    holds their mean over the points, so that an estimate (which multiplies by the number of
    points) sums them."""
    n0, n1 = int(min(spec.n)), int(min(max(spec.n), 200_000))

    def best(f, k=3):
        out = []
        for _ in range(k):
            t = time.perf_counter()
            f()
            out.append(time.perf_counter() - t)
        return min(out)

    problem.simulate(n1, rng)  # warm-up: compiled kernels load on first use
    t0 = best(lambda: problem.simulate(n0, rng))
    t1 = best(lambda: problem.simulate(n1, rng), 2) if n1 > n0 else t0
    per_row = max(t1 - t0, 0.0) / (n1 - n0) if n1 > n0 else t0 / n0
    per_data = max(t0 - per_row * n0, 0.0)
    data = [(n0, problem.simulate(n0, rng)), (n1, problem.simulate(n1, rng))]
    eps = sorted(spec.epsilon)
    share = budget / max(1, len(mechanisms))
    per_release = {}
    for label, mech in mechanisms.items():
        start = time.perf_counter()
        points = []
        for n, stats in data:
            times = []
            for k, e in enumerate(eps):
                try:
                    if not times and not points:
                        mech.release(stats, epsilon=e, rng=rng)
                    t = time.perf_counter()
                    mech.release(stats, epsilon=e, rng=np.random.default_rng(np.random.SeedSequence(k)))
                    times.append(time.perf_counter() - t)
                except Exception:  # noqa: BLE001 - a failing release is the run's business, not the plan's
                    continue
                if time.perf_counter() - start > share:
                    break
            if times:
                points.append((n, float(np.mean(times))))
        if points:
            per_release[label] = points
    return per_row, per_data, per_release


def startup_seconds(workers: int, calibration: float) -> float:
    """Seconds a ``kngflow run`` on ``workers`` local workers spends outside its tasks.

    The run's own imports, then the local cluster's scheduler and ``workers`` worker
    processes, each a fresh interpreter importing Dask and kngflow (started together, so
    ``ceil((workers + 1) / cores)`` imports long on this machine's cores); its calibration
    (``calibration``: as long as the plan's); one second for the store's creation and the
    cluster's close.  An import is timed here, by a fresh interpreter importing what a
    worker imports (about a second on an idle 2-core machine, more on a busy one).  Without
    this the plan's estimate of a short run was 0.03 of its wall time (a PCA study computing
    for 1.6 s in a run of 9.6 s).
    """
    import os
    import subprocess
    import sys

    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import distributed, kngflow.sweep.task"], capture_output=True, check=False)
    imports = time.perf_counter() - t
    cores = os.cpu_count() or 1
    return calibration + imports * (1 + math.ceil((workers + 1) / cores)) + 1.0


# --------------------------------------------------------------------------- estimate
@dataclass(frozen=True)
class Estimate:
    """What a run of a spec will cost (from a :class:`CostModel`)."""

    cells: int
    to_compute: int
    tasks: int
    compute_seconds: float  # on one core
    max_task_seconds: float
    worker_bytes: int
    number_bytes: int  # bytes of the numbers the store holds
    store_files: int

    def lines(self, workers: int | None = None, startup: float | None = None) -> list[str]:
        """The plan's lines; with ``workers``, the compute spread over them, and with
        ``startup`` (:func:`startup_seconds`) the wall time of a run on that many local workers."""
        par = f", {_duration(self.compute_seconds / workers)} on {workers} workers" if workers else ""
        wall = ([f"plan: wall ≈ {_duration(self.compute_seconds / workers + startup)} on {workers} local workers "
                 f"({_duration(startup)} of it starting the cluster and calibrating)"]
                if workers and startup is not None else [])
        return [
            f"plan: {self.cells} cells, {self.to_compute} to compute in {self.tasks} tasks "
            f"(longest ≈ {_duration(self.max_task_seconds)})",
            f"plan: compute ≈ {_duration(self.compute_seconds)} on one core{par}",
            *wall,
            f"plan: task timeout {default_task_timeout(self):g} s by default; peak memory ≈ {_size(self.worker_bytes)} per worker; store ≈ {_size(self.number_bytes)} "
            f"in ≈ {self.store_files} files",
        ]

    def cluster_lines(self, threads: int) -> list[str]:
        """What ``threads`` busy worker threads ask of the scheduler and of the client
        (from :data:`SCHEDULER_SECONDS_PER_TASK` and :data:`CLIENT_SECONDS_PER_CELL`),
        with a warning line for each that would saturate."""
        if not self.tasks or not self.compute_seconds:
            return []
        wall = self.compute_seconds / threads
        rate = self.tasks / wall
        cells = self.to_compute / wall
        sched, client = rate * SCHEDULER_SECONDS_PER_TASK, cells * CLIENT_SECONDS_PER_CELL
        lines = [
            f"plan: on {threads} threads: tasks of ≈ {_duration(self.compute_seconds / self.tasks)} on average; "
            f"scheduler ≈ {rate:.0f} tasks/s (target <= {MAX_TASK_RATE:.0f}; ≈ {100 * sched:.0f}% of a core); "
            f"client writes ≈ {cells:.0f} cells/s (≈ {100 * client:.0f}% of a core)"
        ]
        if wall < 60:  # a short run: a busy minute harms nobody
            return lines
        if sched > SATURATION or rate > MAX_TASK_RATE:
            lines.append(
                f"plan: warning: the scheduler would be saturated ({rate:.0f} tasks/s); "
                "raise --task-seconds or add replicates per n"
            )
        if client > SATURATION:
            lines.append(
                f"plan: warning: the client would be saturated ({cells:.0f} cells/s to receive and write); "
                "run the client on a machine of its own or split the study"
            )
        return lines

    def too_big(self, *, max_core_hours: float = 24.0, max_store_bytes: float = 100e9, max_worker_bytes: float = 8e9):
        """Why a run should ask for ``--yes`` (None when the estimate is within the limits)."""
        if self.compute_seconds > max_core_hours * 3600:
            return f"estimated compute {_duration(self.compute_seconds)} on one core exceeds {max_core_hours:g} core-hours"
        if self.number_bytes > max_store_bytes:
            return f"estimated store {_size(self.number_bytes)} exceeds {_size(max_store_bytes)}"
        if self.worker_bytes > max_worker_bytes:
            return f"estimated memory {_size(self.worker_bytes)} per worker exceeds {_size(max_worker_bytes)}"
        return None


def estimate(spec, cost: CostModel, *, progress: dict | None = None, chunks: dict | None = None) -> Estimate:
    """Cells, tasks, compute seconds, worker memory and store size of running ``spec``.

    ``progress`` maps n to ``(cells done, replicates complete)`` in an existing
    store (:func:`kngflow.sweep.engine.store_progress`); without it every cell is
    missing.  Counting is per n in closed form, so a 10^8-cell grid is estimated
    without materialising anything per cell or per task.
    """
    problem = spec.problem()
    d = int(spec.coef_width())
    P = len(spec.axis_points())  # points of the problem axes
    M, E, R = len(spec.labels), len(spec.epsilon), len(spec.replicates)
    cells = P * M * len(spec.n) * E * R
    seconds = tasks = to_compute = 0
    longest = 0.0
    for n in spec.n:
        cells_done, reps_done = (progress or {}).get(int(n), (0, 0))
        reps, cells_n = P * R - reps_done, P * M * E * R - cells_done
        per_task = cost.replicates_per_task(n, spec.labels, E)
        tasks += P * -(-(reps // P) // per_task) if P > 1 else -(-reps // per_task)
        to_compute += cells_n
        seconds += reps * (cost.per_data + cost.per_row * n) + cost.release_seconds(spec.labels, n) * cells_n / M
        if reps:
            longest = max(longest, min(reps, per_task) * cost.replicate_seconds(n, spec.labels, E))
    per_task_cells = max(min(R, cost.replicates_per_task(n, spec.labels, E)) for n in spec.n) * M * E
    worker = WORKER_BASE_BYTES + _data_set_bytes(problem, spec.n) + per_task_cells * (d + 8) * 8
    data_vars = problem.data_variables
    data_bytes = sum(8 * (d if "coef" in decl[0] else 1) for decl in data_vars.values())
    number_bytes = cells * (8 * (d + 4) + 3) + P * len(spec.n) * R * data_bytes
    sizes = {"mechanism": M, "n": len(spec.n), "epsilon": E, "replicate": R}
    ch = chunks or default_chunks(sizes, d)
    n_chunks = P * -(-len(spec.n) // ch["n"]) * -(-R // ch["replicate"])
    n_vars = 8 + len(data_vars)
    files = n_vars * (n_chunks + 1) + 5 * 2 + 2 + 2  # chunks and metadata, coordinates, theta_star, root
    return Estimate(cells, to_compute, tasks, seconds, longest, int(worker), int(number_bytes), int(files))


def default_task_timeout(est: Estimate) -> float:
    """Default per-task time limit: 20 times the longest task of the estimate in whole
    seconds, at least 5 minutes."""
    return float(max(300, math.ceil(20.0 * est.max_task_seconds)))


def _duration(s: float) -> str:
    if s < 120:
        return f"{s:.1f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    if s < 3 * 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} days"


def _size(b: float) -> str:
    for unit, k in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if b >= k:
            return f"{b / k:.1f} {unit}"
    return f"{int(b)} B"

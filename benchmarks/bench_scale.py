"""Benchmark: a run on a cluster whose workers come and go, and what it projects to 1000 workers.

A real ``dask scheduler`` and 16 ``dask worker --nthreads 1`` processes on
127.0.0.1, started in waves while the run goes on:

* wave 1: 4 workers before the run starts;
* wave 2: 6 workers ``--late`` seconds after the run starts;
* wave 3: 6 workers ``2 × --late`` seconds after, with ``--lifetime`` (they
  retire mid-run: their tasks go back to the scheduler).

The study (linear regression, d = 4, two n, three ε, three mechanisms) runs in
this process through :func:`kngflow.sweep.run_sweep`, so that its CPU time is
the client's (event loop, fetching results, the store's writer thread).  Printed
in one run:

* utilisation: the mean over samples (every 0.5 s) of busy threads (a worker
  with a task processing) over threads present;
* the scheduler's CPU seconds per task (the process's CPU time during the run,
  less its idle cost per worker measured for 5 s before the run, over the tasks
  run) and the client's CPU seconds per cell (this process's CPU time, the
  sampling of the scheduler every 0.5 s included);
* the store compared with the same study on a local 2-worker cluster (it must
  be identical: the run is only faster or slower, never different);
* the projection to 100 and 1000 single-threaded workers with
  :mod:`kngflow.sweep.plan`'s task sizing (at most 200 tasks/s): scheduler and
  client load, and the worker counts at which each would saturate one core.

The 16 workers share this machine's cores: their tasks run slower than on a
cluster, which leaves the per-task and per-cell costs (CPU seconds) comparable.

    python benchmarks/bench_scale.py [--replicates 20000] [--task-seconds 0.05] [--late 5] [--lifetime 12]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import xarray as xr

SPEC = """\
name = "scale"
seed = 77

[problem]
name = "linear"
d = 4
protocol = "paper"

[grid]
n = [100, 1000]
epsilon = [0.3, 1.0, 3.0]
replicates = {replicates}

[[mechanisms]]
label = "nonprivate"
kind = "nonprivate"

[[mechanisms]]
label = "kng"
kind = "kng"
norm = "linf"
bound = 1.0

[[mechanisms]]
label = "exponential"
kind = "exponential"
bound = 1.0
"""


class Processes:
    """A scheduler and worker processes on 127.0.0.1 (each in its own process group)."""

    def __init__(self, root: Path):
        from kngflow.sweep.cluster import WORKER_ENV

        self.root = root
        self.file = root / "scheduler.json"
        self.env = {**os.environ, **WORKER_ENV}
        self.procs: list[subprocess.Popen] = []
        bindir = Path(sys.executable).parent
        self.scheduler = self._spawn([str(bindir / "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0",
                                      "--dashboard-address", "127.0.0.1:0", "--scheduler-file", str(self.file)])
        while not (self.file.exists() and self.file.stat().st_size):
            time.sleep(0.05)
        time.sleep(0.2)

    def _spawn(self, args: list[str]) -> subprocess.Popen:
        p = subprocess.Popen(args, env=self.env, cwd=self.root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
        self.procs.append(p)
        return p

    def workers(self, k: int, *extra: str) -> None:
        for _ in range(k):
            self._spawn([str(Path(sys.executable).parent / "dask"), "worker", str(self._address()), "--nthreads", "1",
                         "--no-dashboard", "--host", "127.0.0.1", *extra])

    def _address(self) -> str:
        return json.loads(self.file.read_text())["address"]

    def close(self) -> None:
        import signal

        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def sample(client, stop: threading.Event, out: list) -> None:
    """Append ``(busy threads, threads present)`` every 0.5 s until ``stop``."""
    while not stop.wait(0.5):
        try:
            nthreads = client.nthreads()
            processing = client.processing()
        except Exception:  # noqa: BLE001 - the client is closing
            return
        busy = sum(min(n, len(processing.get(w, ()))) for w, n in nthreads.items())
        out.append((busy, sum(nthreads.values())))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=20000)
    ap.add_argument("--task-seconds", type=float, default=0.05,
                    help="target task length (short: many tasks, so that the per-task cost is measured)")
    ap.add_argument("--late", type=float, default=5.0, help="seconds between the waves of workers")
    ap.add_argument("--lifetime", type=float, default=12.0, help="--lifetime of the third wave, seconds")
    args = ap.parse_args()

    from distributed import Client

    from kngflow.sweep import calibrate, parse_spec, run_sweep
    from kngflow.sweep.cluster import local_cluster
    from kngflow.sweep.plan import (
        CLIENT_SECONDS_PER_CELL,
        MAX_TASK_RATE,
        SCHEDULER_SECONDS_PER_TASK,
        estimate,
        scaled_cost,
    )

    spec = parse_spec(SPEC.format(replicates=args.replicates))
    cost = calibrate(spec, task_seconds=args.task_seconds)
    tmp = Path(tempfile.mkdtemp(prefix="bench_scale-"))
    procs = Processes(tmp)
    sched = psutil.Process(procs.scheduler.pid)
    try:
        procs.workers(4)
        client = Client(scheduler_file=str(procs.file), timeout=60)
        client.wait_for_workers(4, timeout=120)
        idle0 = sum(sched.cpu_times()[:2])
        time.sleep(5.0)  # the scheduler's own cost with 4 idle workers (heartbeats, ticks)
        idle_per_worker = (sum(sched.cpu_times()[:2]) - idle0) / 5.0 / 4
        samples: list = []
        stop = threading.Event()
        sampler = threading.Thread(target=sample, args=(client, stop, samples), daemon=True)
        waves = [threading.Timer(args.late, procs.workers, args=(6,)),
                 threading.Timer(2 * args.late, procs.workers,
                                 args=(6, "--lifetime", f"{args.lifetime}s", "--lifetime-stagger", "2s"))]
        s_cpu0 = sum(sched.cpu_times()[:2])
        c0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        sampler.start()
        for w in waves:
            w.start()
        result = run_sweep(spec, tmp / "scale.zarr", client, cost=cost, progress=False, log=None)
        wall = time.perf_counter() - t0
        c1 = resource.getrusage(resource.RUSAGE_SELF)
        s_cpu = sum(sched.cpu_times()[:2]) - s_cpu0
        stop.set()
        sampler.join()
        for w in waves:
            w.cancel()
        peak_workers = max(t for _, t in samples)
        client.close()
    finally:
        procs.close()
    client_cpu = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)
    util = [b / t for b, t in samples if t]
    idle = idle_per_worker * float(np.mean([t for _, t in samples])) * wall
    per_task, per_cell = max(s_cpu - idle, 0.0) / result.tasks, client_cpu / result.computed

    with local_cluster(2, dashboard_address=None) as cluster, Client(cluster) as local:
        run_sweep(spec, tmp / "ref.zarr", local, cost=cost, progress=False, log=None)
    a, b = xr.open_zarr(tmp / "scale.zarr").load(), xr.open_zarr(tmp / "ref.zarr").load()
    same = all(np.array_equal(a[v].values, b[v].values, equal_nan=a[v].dtype.kind == "f")
               for v in a.data_vars if v != "seconds")

    print(f"study: {result.total} cells ({result.computed} computed, {result.failed} failed) in {result.tasks} tasks, "
          f"{wall:.1f} s; workers present: up to {peak_workers} (4, then +6 at {args.late:g} s, "
          f"+6 retiring after {args.lifetime:g} s at {2 * args.late:g} s)")
    print(f"utilisation: {np.mean(util):.2f} busy threads per thread present (mean of {len(util)} samples; "
          f"median {np.median(util):.2f})")
    print(f"scheduler: {s_cpu:.2f} CPU s during the run, {idle:.2f} s of them the idle cost of the workers present "
          f"({1e3 * idle_per_worker:.1f} ms/s per worker); {1e3 * per_task:.2f} ms per task for {result.tasks} tasks "
          f"(plan assumes {1e3 * SCHEDULER_SECONDS_PER_TASK:.2f} ms)")
    print(f"client: {client_cpu:.2f} CPU s for {result.computed} cells = {1e6 * per_cell:.2f} us per cell "
          f"(plan assumes {1e6 * CLIENT_SECONDS_PER_CELL:.2f} us)")
    print(f"store identical to a local 2-worker run: {same}")
    print(f"projection (single-threaded workers, tasks >= workers/{MAX_TASK_RATE:.0f} s; measured costs):")
    est0 = estimate(spec, cost)
    for workers in (16, 100, 1000):
        est = estimate(spec, scaled_cost(cost, workers))
        wall_w = est.compute_seconds / workers
        rate, cells = est.tasks / wall_w, est.to_compute / wall_w
        print(f"  {workers:>5} workers: tasks of {est.compute_seconds / est.tasks:.2f} s, {rate:.0f} tasks/s -> "
              f"scheduler {100 * rate * per_task:.0f}% of a core; {cells:.0f} cells/s -> client "
              f"{100 * cells * per_cell:.0f}% of a core")
    cell_seconds = est0.compute_seconds / est0.to_compute
    print(f"  the client saturates one core at {1 / per_cell:.0f} cells/s: about "
          f"{cell_seconds / per_cell:.0f} busy workers on cells of {1e3 * cell_seconds:.2f} ms like these; "
          f"the scheduler at {1 / per_task:.0f} tasks/s (tasks are cut to keep it at {MAX_TASK_RATE:.0f})")


if __name__ == "__main__":
    main()

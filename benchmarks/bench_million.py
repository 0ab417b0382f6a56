"""Benchmark: a 10^6-cell small-n study through the engine and the store, then Figure 1's store.

The study: linear regression (d = 4, paper protocol), n in {100, 1000}, five ε,
three mechanisms (non-private, KNG, exponential), 33 334 replicates: 1 000 020
cells of about 0.1 ms each.  Printed in one run:

* the engine's wall time (``run_sweep`` on a local cluster of ``--workers``
  single-threaded workers; cluster start-up and calibration excluded) against
  the single-process compute of the same releases (data simulation, streams,
  releases and errors in a plain loop, no Dask, no store) divided by the
  workers.  The loop runs on every ``--baseline-stride``-th replicate, half of
  them before and half after the engine (the machine's speed may drift over the
  minutes of a run), and is scaled up to the whole study.  The same loop run in
  ``--workers`` processes at once shows what the cores give together (they share
  caches and memory bandwidth), and the engine's wall time against that;
* the client's peak RSS (this process: it also hosts the scheduler);
* the store's file count and bytes on disk against the bytes of the numbers it
  holds (``Dataset.nbytes`` of the loaded store);
* ``xr.open_zarr(store).load()``, ``kngflow status`` and ``kngflow report`` times;
* the same store numbers, ``load()`` and ``report`` times, and the wall time for
  ``workflows/kng_linear.toml`` (the KNG paper's Figure 1), unless ``--no-figure1``;
* the cost of the stores' CRC32C checksum: the million store's data written and read
  back (``to_zarr`` and ``open_zarr(...).load()``, same chunks, best of
  ``--checksum-repeats``) with Zstandard and CRC32C, as kngflow writes stores, and
  with Zstandard alone; the ratios checksummed / plain.

    python benchmarks/bench_million.py [--workers 2] [--replicates 33334] [--no-figure1] [--checksum-repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SPEC = """\
name = "million"
description = "10^6 small-n cells: linear regression, d = 4, two n, five epsilon, three mechanisms."
seed = 20260101

[problem]
name = "linear"
d = 4
protocol = "paper"

[grid]
n = [100, 1000]
epsilon = [0.1, 0.3, 1.0, 3.0, 10.0]
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


def kngflow_command() -> list[str]:
    exe = Path(sys.executable).with_name("kngflow")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "kngflow.cli"]


def cli_seconds(*args) -> float:
    """Wall seconds of ``kngflow ARGS`` in a fresh process (start-up included); raises if it fails."""
    t0 = time.perf_counter()
    proc = subprocess.run([*kngflow_command(), *map(str, args)], capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"kngflow {' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return dt


def run_engine(spec, store: str, workers: int) -> tuple[float, object, float]:
    """``(wall seconds, RunResult, client CPU seconds)`` of ``run_sweep`` on a fresh local cluster (start-up excluded)."""
    from distributed import Client

    from kngflow.sweep import calibrate, run_sweep
    from kngflow.sweep.cluster import local_cluster

    cost = calibrate(spec)
    with local_cluster(workers, dashboard_address=None) as cluster, Client(cluster) as client:
        client.wait_for_workers(workers)
        t0, cpu0 = time.perf_counter(), time.process_time()
        result = run_sweep(spec, store, client, cost=cost, progress=sys.stderr.isatty(), log=None)
        return time.perf_counter() - t0, result, time.process_time() - cpu0


def baseline_seconds(spec, stride: int, offset: int = 0) -> tuple[float, int, int]:
    """Single-process seconds of every ``stride``-th replicate's releases (from ``offset``).

    The same work as a task, without Dask or the store: simulate each data set
    once, then each (mechanism, ε) release with its own stream and its error.
    BLAS runs on one thread, as on a worker.  Returns ``(seconds, releases, replicates)`` timed.
    """
    from threadpoolctl import threadpool_limits

    from kngflow.sweep import seeds

    problem, mechanisms = spec.problem(), spec.build_mechanisms()
    reps = list(spec.replicates)[offset::stride]
    releases = 0
    with threadpool_limits(limits=1):
        for n in spec.n:  # warm-up: compiled kernels load on first use
            stats = problem.simulate(n, seeds.data_rng(0, spec.problem_name, n, 0))
            for label, mech in mechanisms.items():
                mech.release(stats, epsilon=spec.epsilon[0], rng=seeds.release_rng(0, spec.problem_name, n, 0, label, 1.0))
        t0 = time.perf_counter()
        for n in spec.n:
            for rep in reps:
                stats = problem.simulate(n, seeds.data_rng(spec.seed, spec.problem_name, n, rep))
                problem.data_summary(stats)
                for label, mech in mechanisms.items():
                    for eps in spec.epsilon:
                        rng = seeds.release_rng(spec.seed, spec.problem_name, n, rep, label, eps)
                        rel = mech.release(stats, epsilon=eps, rng=rng)
                        problem.error(rel.estimate)
                        releases += 1
        seconds = time.perf_counter() - t0
    return seconds, releases, len(reps)


def _baseline_part(args) -> tuple[float, int, int]:
    spec_text, stride, offset = args
    from kngflow.sweep import parse_spec

    return baseline_seconds(parse_spec(spec_text), stride, offset)


def parallel_baseline_seconds(spec_text: str, spec, stride: int, workers: int) -> float:
    """The plain loop in ``workers`` processes at once (interleaved replicates, no Dask, no
    store), scaled to the whole study: what the machine gives when all cores compute."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(workers) as pool:
        parts = pool.map(_baseline_part, [(spec_text, stride * workers, k * stride) for k in range(workers)])
    per_replicate = sum(sec / reps for sec, _, reps in parts) / workers
    return per_replicate * len(spec.replicates) / workers


def store_numbers(store: str) -> dict:
    """Files and bytes on disk, bytes of the numbers held, and ``xr.open_zarr(store).load()`` seconds."""
    import xarray as xr

    files = [p for p in Path(store).rglob("*") if p.is_file()]
    t0 = time.perf_counter()
    ds = xr.open_zarr(store).load()
    load = time.perf_counter() - t0
    return {
        "files": len(files),
        "bytes": sum(p.stat().st_size for p in files),
        "number_bytes": int(ds.nbytes),
        "load_s": load,
        "cells": int(ds.done.size),
        "done": int(ds.done.sum()),
    }


def report_seconds(store: str, tmp: str) -> float:
    return cli_seconds("report", store, "--out", Path(tmp) / f"report-{Path(store).stem}")


def checksum_cost(store: str, tmp: str, repeats: int) -> dict:
    """Write and read the data of ``store`` with and without the CRC32C codec (same chunks,
    same Zstandard level as kngflow's stores): best-of-``repeats`` seconds and their ratios."""
    import xarray as xr
    import zarr

    from kngflow.store.zarrstore import _compressors, _quiet

    with _quiet():
        ds = xr.open_zarr(store, consolidated=False).load()
        g = zarr.open_group(store, mode="r", use_consolidated=False)
        chunks = {v: g[v].chunks for v in ds.data_vars}
    codecs = {"crc32c": _compressors(), "plain": tuple(c for c in _compressors() if type(c).__name__ != "Crc32cCodec")}
    assert len(codecs["plain"]) == len(codecs["crc32c"]) - 1
    best = {k: {"write_s": float("inf"), "read_s": float("inf")} for k in codecs}
    for _ in range(repeats):
        for kind, comp in codecs.items():  # alternate, so that a drifting machine biases neither
            path = str(Path(tmp) / f"checksum-{kind}.zarr")
            shutil.rmtree(path, ignore_errors=True)
            encoding = {v: {"chunks": chunks[v], "compressors": comp} for v in ds.data_vars}
            with _quiet():
                t0 = time.perf_counter()
                ds.to_zarr(path, mode="w", encoding=encoding, consolidated=False, zarr_format=3)
                t1 = time.perf_counter()
                xr.open_zarr(path, consolidated=False).load()
                t2 = time.perf_counter()
            best[kind]["write_s"] = min(best[kind]["write_s"], t1 - t0)
            best[kind]["read_s"] = min(best[kind]["read_s"], t2 - t1)
            best[kind]["bytes"] = sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())
            shutil.rmtree(path, ignore_errors=True)
    return {**best, "repeats": repeats, "number_bytes": int(ds.nbytes),
            "write_ratio": best["crc32c"]["write_s"] / best["plain"]["write_s"],
            "read_ratio": best["crc32c"]["read_s"] / best["plain"]["read_s"],
            "bytes_ratio": best["crc32c"]["bytes"] / best["plain"]["bytes"]}


def print_store(prefix: str, s: dict) -> None:
    print(f"{prefix} store      {s['files']} files, {s['bytes'] / 1e6:.1f} MB on disk for "
          f"{s['number_bytes'] / 1e6:.1f} MB of numbers (x{s['bytes'] / s['number_bytes']:.2f})")
    print(f"{prefix} load()     {s['load_s']:.2f} s")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--replicates", type=int, default=33_334, help="replicates of the small-n study (default 33 334)")
    ap.add_argument("--baseline-stride", type=int, default=10,
                    help="time the single-process loop on every K-th replicate and scale up (default 10)")
    ap.add_argument("--no-figure1", action="store_true", help="skip the Figure 1 store")
    ap.add_argument("--keep", metavar="DIR", help="leave the stores in DIR (default: a temporary directory, removed)")
    ap.add_argument("--json", action="store_true", help="print the numbers as one JSON line too")
    ap.add_argument("--checksum-repeats", type=int, default=5, metavar="K",
                    help="write/read repetitions of the checksum cost, best of K (default 5; 0: skip)")
    args = ap.parse_args(argv)

    from kngflow.sweep import load_spec, parse_spec

    tmp = args.keep or tempfile.mkdtemp(prefix="kngflow-bench-")
    os.makedirs(tmp, exist_ok=True)
    out: dict = {"workers": args.workers}
    try:
        spec = parse_spec(SPEC.format(replicates=args.replicates))
        store = str(Path(tmp) / "million.zarr")
        shutil.rmtree(store, ignore_errors=True)
        # the single-process loop runs half before and half after the engine (interleaved
        # replicates), so that a machine whose speed drifts over minutes biases neither side
        stride = 2 * args.baseline_stride
        before = baseline_seconds(spec, stride, 0)
        wall, result, client_cpu = run_engine(spec, store, args.workers)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
        after = baseline_seconds(spec, stride, args.baseline_stride)
        releases = before[1] + after[1]
        base = (before[0] + after[0]) * len(spec.replicates) / (before[2] + after[2])
        parallel = parallel_baseline_seconds(SPEC.format(replicates=args.replicates), spec, args.baseline_stride,
                                             args.workers)
        per_worker = base / args.workers
        out["million"] = {
            "cells": result.total, "failed": result.failed, "tasks": result.tasks, "wall_s": wall,
            "baseline_s": base, "baseline_before_s": before[0], "baseline_after_s": after[0],
            "baseline_releases_timed": releases, "ratio": wall / per_worker,
            "parallel_plain_s": parallel, "ratio_to_parallel_plain": wall / parallel,
            "client_peak_rss_mb": rss / 2**20, "client_cpu_s": client_cpu,
            **store_numbers(store),
            "status_s": cli_seconds("status", store),
            "report_s": report_seconds(store, tmp),
        }
        m = out["million"]
        print(f"study           {m['cells']} cells ({len(spec.replicates)} replicates, n = {list(spec.n)}, "
              f"{len(spec.epsilon)} eps, {len(spec.labels)} mechanisms); {m['failed']} failed, {m['tasks']} tasks")
        print(f"engine wall     {wall:.1f} s on {args.workers} workers")
        print(f"single process  {base:.1f} s ({releases} releases timed, every {args.baseline_stride}th replicate, "
              f"half before and half after the engine: {before[0]:.1f} s and {after[0]:.1f} s; scaled) "
              f"/ {args.workers} = {per_worker:.1f} s")
        print(f"ratio           engine / (single process / workers) = {m['ratio']:.2f}")
        print(f"plain parallel  the same loop in {args.workers} processes at once: {parallel:.1f} s "
              f"(the cores slow each other by x{parallel / per_worker:.2f}); engine / that = {wall / parallel:.2f}")
        print(f"client peak RSS {m['client_peak_rss_mb']:.0f} MB (client and scheduler)")
        print(f"client CPU      {client_cpu:.1f} s during the engine's run (client, scheduler and writer "
              f"share the workers' cores: {client_cpu / (wall * args.workers):.1%} of them)")
        print_store("", m)
        print(f"status          {m['status_s']:.2f} s")
        print(f"report          {m['report_s']:.2f} s")
        if args.checksum_repeats > 0:
            c = out["checksum"] = checksum_cost(store, tmp, args.checksum_repeats)
            print(f"checksum        CRC32C on {c['number_bytes'] / 1e6:.1f} MB of numbers, best of {c['repeats']}: "
                  f"write {c['crc32c']['write_s']:.3f} s vs {c['plain']['write_s']:.3f} s without "
                  f"(x{c['write_ratio']:.3f}), read {c['crc32c']['read_s']:.3f} s vs {c['plain']['read_s']:.3f} s "
                  f"(x{c['read_ratio']:.3f}), bytes x{c['bytes_ratio']:.4f}")

        if not args.no_figure1:
            fig = load_spec(ROOT / "workflows" / "kng_linear.toml")
            store = str(Path(tmp) / "figure1.zarr")
            shutil.rmtree(store, ignore_errors=True)
            wall, result, _ = run_engine(fig, store, args.workers)
            out["figure1"] = {"cells": result.total, "failed": result.failed, "wall_s": wall,
                              **store_numbers(store), "report_s": report_seconds(store, tmp)}
            f = out["figure1"]
            print(f"figure 1        {f['cells']} cells, {f['failed']} failed; engine wall {wall:.1f} s")
            print_store("figure 1", f)
            print(f"figure 1 report {f['report_s']:.2f} s")
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

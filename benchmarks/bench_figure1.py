"""Benchmark: the KNG paper's Figure 1 grid (workflows/kng_linear.toml) on a local cluster.

Prints the wall time of the whole run (cluster start excluded, store creation
included), the peak RSS of every worker process, and the RNG floor: the time
numpy needs to draw the same random numbers (Σn · replicates rows of 11
uniforms + 1 normal) on the same number of cores, measured on a sample and
extrapolated.  The ratio wall / floor is the figure of merit (DESIGN.md budget:
≤ 60 s wall and ≤ 400 MB per worker on 2 cores, against a ≈ 35 s floor).

    python benchmarks/bench_figure1.py [--workers 2] [--spec workflows/kng_linear.toml] [--store PATH]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import bench_cell  # same directory: the RNG floor is measured the same way in both benchmarks

ROOT = Path(__file__).resolve().parents[1]


def rng_floor(rows_total: int, uniforms: int, cores: int, sample_rows: int = 20_000_000) -> dict:
    """Seconds numpy needs for ``rows_total`` rows on ``cores``, timed on a sample and extrapolated."""
    per_row = bench_cell.rng_floor(sample_rows, uniforms=uniforms) / sample_rows
    return {"rows": rows_total, "rows_per_s_per_core": 1.0 / per_row, "seconds": rows_total * per_row / cores}


def worker_peak_rss() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default=str(ROOT / "workflows" / "kng_linear.toml"))
    ap.add_argument("--store", default=None, help="store path (default: a temporary directory, removed)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", action="store_true", help="print the numbers as one JSON line too")
    args = ap.parse_args(argv)

    from distributed import Client

    from kngflow.sweep import load_spec, run_sweep
    from kngflow.sweep.cluster import local_cluster

    spec = load_spec(args.spec)
    tmp = None
    store = args.store
    if store is None:
        tmp = tempfile.mkdtemp(prefix="kngflow-bench-")
        store = str(Path(tmp) / "figure1.zarr")
    rows = sum(spec.n) * len(spec.replicates)
    d = spec.problem().d
    try:
        with local_cluster(args.workers, dashboard_address=None) as cluster, Client(cluster) as client:
            client.wait_for_workers(args.workers)
            t0 = time.perf_counter()
            result = run_sweep(spec, store, client, progress=sys.stderr.isatty())
            wall = time.perf_counter() - t0
            rss = client.run(worker_peak_rss)
        floor = rng_floor(rows, uniforms=d - 1, cores=args.workers)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    peak = max(rss.values())
    print(f"spec            {args.spec} ({len(spec.mechanisms)} mechanisms, n = {list(spec.n)}, "
          f"{len(spec.replicates)} replicates, eps = {list(spec.epsilon)})")
    print(f"cells           {result.done}/{result.total} done, {result.failed} failed, {result.tasks} tasks")
    print(f"wall            {wall:.1f} s on {args.workers} workers")
    for addr, v in sorted(rss.items()):
        print(f"peak RSS        {v / 2**20:.0f} MB  ({addr})")
    print(f"RNG floor       {floor['seconds']:.1f} s  ({rows:.3g} rows x ({d - 1} uniforms + 1 normal) at "
          f"{floor['rows_per_s_per_core'] / 1e6:.1f} M rows/s/core, / {args.workers} cores)")
    print(f"ratio           wall / floor = {wall / floor['seconds']:.2f}")
    if args.json:
        print(json.dumps({
            "wall_s": wall, "floor_s": floor["seconds"], "ratio": wall / floor["seconds"],
            "peak_rss_mb": peak / 2**20, "cells": result.total, "failed": result.failed, "tasks": result.tasks,
        }))
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())

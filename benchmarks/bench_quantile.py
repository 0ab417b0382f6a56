"""Benchmark: quantile regression (KNG paper Figure 2) and the cost of one sampler update.

Three measurements, all in one process run:

1. ``--figure``: the Figure 2 grid (workflows/kng_quantile.toml) on a local cluster of
   ``--workers`` processes: wall time of the run (cluster start excluded), peak RSS per
   worker (budget: <= 60 s on 2 cores).
2. ``--large``: one n = 10^7 replicate: simulation, then one KNG release (Metropolis, the
   paper's 1000 steps, then 50 surrogate-map proposals) and one exponential-mechanism
   release (exact coordinate Gibbs, 10 sweeps), as in workflows/kng_quantile_large.toml
   (budget: <= 60 s in all).
3. ``--updates``: seconds of one exact Gibbs coordinate update and of one Metropolis energy
   evaluation against n, with the constant per row (both should be linear in n).

    python benchmarks/bench_quantile.py [--figure] [--large] [--updates] [--workers 2]

Without flags all three run.  Times measured on a shared machine are noisy; compare
ratios within one run.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def figure(spec_path: str, workers: int) -> None:
    from distributed import Client

    from bench_figure1 import worker_peak_rss  # same directory
    from kngflow.sweep import load_spec, run_sweep
    from kngflow.sweep.cluster import local_cluster

    spec = load_spec(spec_path)
    tmp = tempfile.mkdtemp(prefix="kngflow-bench-")
    try:
        with local_cluster(workers, dashboard_address=None) as cluster, Client(cluster) as client:
            client.wait_for_workers(workers)
            t0 = time.perf_counter()
            result = run_sweep(spec, str(Path(tmp) / "figure2.zarr"), client, progress=sys.stderr.isatty())
            wall = time.perf_counter() - t0
            rss = client.run(worker_peak_rss)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"figure 2        {spec_path}: n = {list(spec.n)}, {len(spec.replicates)} replicates, "
          f"{len(spec.mechanisms)} mechanisms")
    print(f"  cells         {result.done}/{result.total} done, {result.failed} failed, {result.tasks} tasks")
    print(f"  wall          {wall:.1f} s on {workers} workers (budget 60 s on 2)")
    print(f"  peak RSS      {max(rss.values()) / 2**20:.0f} MB per worker (max)")


def large(n: int) -> None:
    from kngflow.api import get_mechanism, get_problem

    prob = get_problem("quantreg", tau=0.5, theta_star=[0.0, -1.0])
    rng = np.random.default_rng(1)
    small = prob.simulate(1000, rng)
    options = {"steps": 1000, "gibbs_sweeps": 10, "hardened": False}  # as a spec on synthetic data
    for kind in ("kng", "exponential"):  # compile outside the timings
        get_mechanism("quantreg", kind, **options).release(small, 1.0, rng)
    t0 = time.perf_counter()
    data = prob.simulate(n, rng)
    t_sim = time.perf_counter() - t0
    total = t_sim
    print(f"n = {n:.0e}      simulate {t_sim:.2f} s")
    for kind in ("kng", "exponential"):
        mech = get_mechanism("quantreg", kind, **options)
        t0 = time.perf_counter()
        rel = mech.release(data, 1.0, rng)
        dt = time.perf_counter() - t0
        total += dt
        print(f"  {kind:12s}  {dt:.2f} s ({rel.info['sampler']}, {rel.info['steps']} steps/sweeps), "
              f"error {prob.error(rel.estimate):.2e}")
    print(f"  total         {total:.2f} s (budget 60 s)")


def updates(ns) -> None:
    """Seconds per coordinate update: the first (a full O(n) pass: Metropolis from the
    data-independent start, the first Gibbs conditional over all of Theta) and the steady
    state (difference of two run lengths: Metropolis on its residual band, the
    exponential mechanism's Gibbs on its window; KNG's Gibbs always sorts all breaks)."""
    from kngflow.api import get_mechanism, get_problem

    prob = get_problem("quantreg")

    def per_update(fn, short, long, d):
        t0 = time.perf_counter()
        fn(short)
        t1 = time.perf_counter()
        fn(long)
        t2 = time.perf_counter()
        return (t1 - t0) / (short * d), ((t2 - t1) - (t1 - t0)) / ((long - short) * d)

    print("one coordinate update, seconds and ns per row: first (full pass) | steady state")
    print("               n        Gibbs first         Gibbs steady        Metropolis first    Metropolis steady")
    for n in ns:
        data = prob.simulate(n, np.random.default_rng(2))
        for kind in ("kng", "exponential"):
            mech = get_mechanism("quantreg", kind)
            mech.draw_gibbs(data, 1.0, np.random.default_rng(3), 1, sweeps=1)  # compile
            mech.draw_metropolis(data, 1.0, np.random.default_rng(3), 1, steps=2)
            g_first, _ = per_update(lambda k: mech.draw_gibbs(data, 1.0, np.random.default_rng(3), 1, sweeps=k),
                                    1, 2, data.d)
            _, g_steady = per_update(lambda k: mech.draw_gibbs(data, 1.0, np.random.default_rng(3), 1, sweeps=k),
                                     10, 20, data.d)
            m_first, _ = per_update(lambda k: mech.draw_metropolis(data, 1.0, np.random.default_rng(3), 1, steps=k),
                                    2, 4, data.d)
            _, m_steady = per_update(lambda k: mech.draw_metropolis(data, 1.0, np.random.default_rng(3), 1, steps=k),
                                     1000, 2000, data.d)
            cols = "".join(f"{max(v, 0.0):.2e} {max(v, 0.0) / n * 1e9:6.1f}      " for v in (g_first, g_steady, m_first, m_steady))
            print(f"  {kind:12s} {n:>7.0e}   {cols}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--figure", action="store_true")
    ap.add_argument("--large", action="store_true")
    ap.add_argument("--updates", action="store_true")
    ap.add_argument("--spec", default=str(ROOT / "workflows" / "kng_quantile.toml"))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--n", type=int, default=10_000_000, help="n of the large replicate")
    ap.add_argument("--max-n", type=int, default=10_000_000, help="largest n of --updates")
    args = ap.parse_args(argv)
    every = not (args.figure or args.large or args.updates)
    if every or args.updates:
        updates([n for n in (10**3, 10**4, 10**5, 10**6, 10**7) if n <= args.max_n])
    if every or args.large:
        large(args.n)
    if every or args.figure:
        figure(args.spec, args.workers)
    return 0


if __name__ == "__main__":
    sys.exit(main())

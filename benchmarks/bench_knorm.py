"""Benchmark: Awan–Slavković's studies and the private-ERM baselines.

Two measurements, in one process run:

1. ``--replicate``: one logistic-regression data set of ``--n`` records (default 10^6,
   m = 7, Algorithm 3) and one release of every logistic mechanism at ε = 1: wall time, the
   same time in units of one pass over the data (one numba gradient evaluation, and one
   naive numpy gradient ``X.T @ (expit(X @ b) - y)``), the error ``||release - beta||_2``
   (KNG: with its sampler and post-burn-in acceptance), and the peak memory the release
   allocates (``tracemalloc``) as a multiple of the data's size — at most one copy of the
   data is the budget.
2. ``--studies``: the wall time of each study on a local cluster of ``--workers``
   processes (cluster start excluded, cost-model calibration included as in ``kngflow
   run``): Figure 3 (``knorm_linear_coverage.toml``), Figure 4
   (``knorm_randhie.toml``), ``erm_linear.toml``, ``logistic_fair.toml`` and
   ``erm_baselines.toml`` as shipped, and Figure 2 (``knorm_logistic.toml``) without KNG
   (whose 1000 Metropolis sweeps of O(n m) updates at n = 10^5 dominate it: see
   ``kngflow plan``) unless ``--full``.

    python benchmarks/bench_knorm.py [--replicate] [--studies] [--n 1000000] [--workers 2]

Without flags both run.  Times on a shared machine are noisy; compare ratios within a run.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))


def replicate(n: int, kng_steps: int) -> None:
    from scipy.special import expit

    from kngflow.api import MECHANISMS, get_mechanism, get_problem
    from kngflow.models.logistic.problem import logistic_gradient

    prob = get_problem("logistic")
    rng = np.random.default_rng(1)
    small = prob.simulate(500, rng)
    kinds = sorted(MECHANISMS["logistic"])
    options = {kind: ({"steps": kng_steps} if kind == "kng" else {}) for kind in kinds}
    for kind in kinds:  # compile (numba) and calibrate (accountants) outside the timings
        get_mechanism("logistic", kind, **options[kind]).release(small, 1.0, rng)
    t0 = time.perf_counter()
    data = prob.simulate(n, rng)
    t_sim = time.perf_counter() - t0
    beta = np.asarray(prob.theta_star, dtype=np.float64)
    g = np.empty(data.d)
    t0 = time.perf_counter()
    for _ in range(5):
        logistic_gradient(beta, (data.X, data.y), g)
    t_pass = (time.perf_counter() - t0) / 5
    t0 = time.perf_counter()
    for _ in range(5):
        data.X.T @ (expit(data.X @ beta) - data.y)
    t_naive = (time.perf_counter() - t0) / 5
    size = data.X.nbytes + data.y.nbytes
    print(f"logistic n = {n:.0e}, m = {data.d}: data {size / 2**20:.0f} MB, simulate {t_sim:.2f} s; "
          f"one gradient pass {t_pass * 1e3:.1f} ms (numba), {t_naive * 1e3:.1f} ms (naive numpy)")
    print(f"  {'mechanism':22s} {'seconds':>9s} {'passes':>9s} {'naive passes':>13s} {'peak alloc / data':>18s}  error")
    for kind in kinds:
        mech = get_mechanism("logistic", kind, **options[kind])
        tracemalloc.start()
        t0 = time.perf_counter()
        rel = mech.release(data, 1.0, np.random.default_rng(2))
        dt = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        sampler = f"  [{rel.info['sampler']}, acceptance {rel.info['acceptance']:.2f}]" if kind == "kng" else ""
        print(f"  {kind:22s} {dt:9.2f} {dt / t_pass:9.0f} {dt / t_naive:13.1f} {peak / size:18.2f}  "
              f"{prob.error(rel.estimate):.3f}{sampler}")


def _spec_without_kng(path: Path, out: Path) -> Path:
    text = path.read_text()
    text = re.sub(r'\[\[mechanisms\]\]\nlabel = "[^"]*"\nkind = "kng"\n(?:[a-z_]+ = [^\n]*\n)*', "", text)
    text = re.sub(r"\[sampler\]\n(?:[a-z_]+ = [^\n]*\n)*", "", text)
    out.write_text(text)
    return out


def studies(workers: int, full: bool) -> None:
    from distributed import Client

    from bench_figure1 import worker_peak_rss
    from kngflow.sweep import calibrate, load_spec, run_sweep
    from kngflow.sweep.cluster import local_cluster

    tmp = Path(tempfile.mkdtemp(prefix="kngflow-bench-"))
    specs = [ROOT / "workflows" / f"{name}.toml"
             for name in ("knorm_linear_coverage", "knorm_randhie", "erm_linear", "logistic_fair", "erm_baselines")]
    path = ROOT / "workflows" / "knorm_logistic.toml"
    specs.append(path if full else _spec_without_kng(path, tmp / "knorm_logistic_no_kng.toml"))
    try:
        with local_cluster(workers, dashboard_address=None) as cluster, Client(cluster) as client:
            client.wait_for_workers(workers)
            for path in specs:
                spec = load_spec(path)
                t0 = time.perf_counter()  # as `kngflow run`: calibrate the cost model, then run
                result = run_sweep(spec, str(tmp / f"{path.stem}.zarr"), client, cost=calibrate(spec),
                                   progress=sys.stderr.isatty())
                wall = time.perf_counter() - t0
                rss = max(client.run(worker_peak_rss).values())
                print(f"{path.name:32s} {result.done}/{result.total} cells, {result.failed} failed: "
                      f"{wall:.1f} s on {workers} workers, peak RSS {rss / 2**20:.0f} MB per worker")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicate", action="store_true")
    ap.add_argument("--studies", action="store_true")
    ap.add_argument("--full", action="store_true", help="Figure 2 with KNG (hours)")
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--kng-steps", type=int, default=1000, help="Metropolis steps of KNG in --replicate")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    every = not (args.replicate or args.studies)
    if every or args.replicate:
        replicate(args.n, args.kng_steps)
    if every or args.studies:
        studies(args.workers, args.full)
    return 0


if __name__ == "__main__":
    sys.exit(main())

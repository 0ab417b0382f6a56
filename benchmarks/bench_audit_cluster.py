"""Wall time of one black-box audit in one process and on a local Dask cluster.

The audit of the calibration suite's ℓ2-disc Laplace mean (loss 1.4 ε, pair searched) at
``--draws`` releases per data set, first in this process, then with its releases drawn as
Dask tasks on a local cluster of ``--workers`` single-threaded processes (the cluster's
start is timed separately).  The bounds must be identical; prints the wall times and
their ratio, measured in this run.

    python benchmarks/bench_audit_cluster.py [--draws 1000000] [--workers 2]
"""

from __future__ import annotations

import argparse
import time

from kngflow.audit import blackbox_audit
from kngflow.audit.calibration import Disc, LaplaceMean
from kngflow.audit.runner import DaskRunner


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    kw = dict(draws=args.draws, seed=0)
    t0 = time.perf_counter()
    one = blackbox_audit(LaplaceMean(factor=1 / 1.4), Disc(), 1.0, **kw)
    t_one = time.perf_counter() - t0
    from kngflow.sweep.cluster import connect

    t0 = time.perf_counter()
    with connect(workers=args.workers, dashboard_address=None) as client:
        client.wait_for_workers(args.workers)
        t_start = time.perf_counter() - t0
        t0 = time.perf_counter()
        many = blackbox_audit(LaplaceMean(factor=1 / 1.4), Disc(), 1.0, runner=DaskRunner(client), **kw)
        t_many = time.perf_counter() - t0
    assert many.bound == one.bound and str(many.pair) == str(one.pair), (one.summary(), many.summary())
    print(f"{args.draws} releases per data set (pair searched): bound {one.bound:.4f} in both; one process "
          f"{t_one:.1f} s, {args.workers} workers {t_many:.1f} s (cluster start {t_start:.1f} s more): "
          f"ratio {t_one / t_many:.2f}")


if __name__ == "__main__":
    main()

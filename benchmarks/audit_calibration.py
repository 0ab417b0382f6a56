"""The black-box audit's calibration suite (``kngflow.audit.calibration``): detection rate of
broken mechanisms and false-flag rate of their correct twins, over seeds, at the default
settings of ``kngflow audit``.

For every record domain (ℓ∞ cube, ℓ2 disc, ℓ2 ball in 3-D, ℓ1 ball in 3-D, simplex, 1-D
interval) the Laplace mean with the calibrated noise (true loss ε) and with less noise
(true loss 1.2 ε, 1.4 ε, 2 ε) is audited at declared ε = 1 with the pair searched, once
per seed.  Prints a Markdown table: flagged / runs, the median lower bound, the median
power statement (the loss flagged w.p. >= 0.9 on the chosen pair and events), how often
the search chose a pair at the domain's ℓ1 diameter, and the median seconds per audit.

    python benchmarks/audit_calibration.py [--seeds 10] [--losses 1 1.2 1.4 2] [--jobs 2]
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from kngflow.audit import blackbox_audit
from kngflow.audit.calibration import GEOMETRIES, LaplaceMean


def one(args):
    name, loss, seed = args
    problem = GEOMETRIES[name]()
    t0 = time.perf_counter()
    res = blackbox_audit(LaplaceMean(factor=1.0 / loss), problem, 1.0, seed=seed)
    worst = bool(np.isclose(np.abs(res.pair.record - res.pair.other).sum(), problem.diameter))
    return name, loss, seed, res.bound, not res.passed, res.details["power"]["loss"], worst, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--losses", type=float, nargs="+", default=[1.0, 1.2, 1.4, 2.0])
    ap.add_argument("--geometries", nargs="+", default=list(GEOMETRIES))
    ap.add_argument("--jobs", type=int, default=1, help="audits run at once (processes)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    print(f"declared epsilon = 1, default settings, {args.seeds} seeds, {args.jobs} processes\n")
    print("| domain | true loss / ε | flagged | median bound | median power statement | worst pair chosen "
          "| median s / audit |")
    print("|---|---|---|---|---|---|---|", flush=True)
    with ProcessPoolExecutor(args.jobs) as pool:
        for g in args.geometries:
            rows = list(pool.map(one, [(g, loss, s) for loss in args.losses for s in range(args.seeds)]))
            for loss in args.losses:
                r = [x for x in rows if x[1] == loss]
                print(f"| {g} | {loss:g}{' (twin)' if loss == 1 else ''} | {sum(x[4] for x in r)}/{len(r)} "
                      f"| {np.median([x[3] for x in r]):.3f} | {np.median([x[5] for x in r]):.3f} "
                      f"| {sum(x[6] for x in r)}/{len(r)} | {np.median([x[7] for x in r]):.1f} |", flush=True)
    print(f"\n{time.perf_counter() - t0:.0f} s in all")


if __name__ == "__main__":
    main()

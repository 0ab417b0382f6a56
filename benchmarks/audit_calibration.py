"""The audit's calibration suite (``kngflow.audit.calibration``): detection rate of broken
mechanisms and false-flag rate of their correct twins, over seeds, at the default settings
of ``kngflow audit`` (the pipeline with its options' defaults: draws chosen by the time
budget, the pair and the rest of the data set searched).

Row groups (``--rows``):

* ``laplace``: for every record domain of :data:`~kngflow.audit.calibration.GEOMETRIES`
  but the wide ones, the Laplace mean with the calibrated noise (true loss ε) and with
  less noise (1.2 ε, 1.4 ε, 1.7 ε, 2 ε);
* ``wide``: the sign balls of R^6 and R^8 (77 and 273 records), twin and 1.5 ε;
* ``data-dependent``: each mechanism of
  :data:`~kngflow.audit.calibration.DATA_DEPENDENT` (noise from a clipping radius or the
  spread taken from the data, a branch on constant data, less noise for small n) and its
  twin, on the ℓ2 disc and the ℓ2 ball of R^3.

Prints a Markdown table: flagged / runs, the median lower bound, the median power
statement (the loss flagged w.p. >= 0.9 on the chosen pair and events), how often the pair
chosen is at the domain's ℓ1 diameter, the median draws, and the median wall and CPU
seconds per audit (the CPU seconds do not grow when other work shares the cores).

    python benchmarks/audit_calibration.py [--seeds 10] [--rows wide data-dependent] [--dependent-on 'l2 disc']
        [--losses 1 1.2 1.4 2] [--jobs 2]
"""

from __future__ import annotations

import argparse
import inspect
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from kngflow.audit.calibration import GEOMETRIES, WIDE, data_dependent_suite
from kngflow.audit.pipeline import AuditContext, AuditOptions, run_audit

MODULE = "kngflow.audit.calibration"


def rows(groups, dependent=("l2 disc", "l2 ball (3-D)"), losses=(1.0, 1.2, 1.4, 1.7, 2.0), domains=None):
    """``(group, geometry, label, mechanism class name, options, broken)`` of each row
    (``dependent``: the domains of the data-dependent rows; ``losses``: the true losses / ε
    of the Laplace rows; ``domains``: those of the Laplace rows, default all but the wide ones)."""
    out = []
    if "laplace" in groups:
        out += [("laplace", g, f"{loss:g}", "LaplaceMean", {"factor": 1 / loss}, loss > 1)
                for g in GEOMETRIES if g not in WIDE and (domains is None or g in domains) for loss in losses]
    if "wide" in groups:
        out += [("wide", g, f"{loss:g}", "LaplaceMean", {"factor": 1 / loss}, loss > 1)
                for g in WIDE for loss in (1.0, 1.5)]
    if "data-dependent" in groups:
        for g, name, _, mech, broken in data_dependent_suite(dependent):
            opts = {k: getattr(mech, k) for k in inspect.signature(type(mech)).parameters}
            out.append(("data-dependent", g, name + ("" if broken else " (twin)"), type(mech).__name__, opts, broken))
    return out


def one(args):
    (group, geometry, label, cls, opts, broken), seed = args
    t0, c0 = time.perf_counter(), time.process_time()
    ctx = AuditContext.build(AuditOptions(f"{MODULE}:{cls}", f"{MODULE}:{GEOMETRIES[geometry].__name__}",
                                          options=opts, seed=seed, progress=False))
    verdict = run_audit(ctx)
    res = next(r for r in verdict.results if r.kind == "black-box")
    worst = bool(np.isclose(np.abs(res.pair.record - res.pair.other).sum(), ctx.problem.diameter))
    return (group, geometry, label, not verdict.passed, res.bound, res.details["power"]["loss"], worst,
            res.details["draws"], time.perf_counter() - t0, time.process_time() - c0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--rows", nargs="+", default=["laplace", "wide", "data-dependent"],
                    choices=["laplace", "wide", "data-dependent"])
    ap.add_argument("--dependent-on", nargs="+", default=["l2 disc", "l2 ball (3-D)"], choices=list(GEOMETRIES),
                    help="domains of the data-dependent rows")
    ap.add_argument("--losses", nargs="+", type=float, default=[1.0, 1.2, 1.4, 1.7, 2.0],
                    help="true losses / epsilon of the laplace rows (1: the correct twin)")
    ap.add_argument("--domains", nargs="+", choices=[g for g in GEOMETRIES if g not in WIDE],
                    help="domains of the laplace rows (default: all but the wide ones)")
    ap.add_argument("--jobs", type=int, default=1, help="audits run at once (processes)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    print(f"declared epsilon = 1, kngflow audit's defaults, {args.seeds} seeds, {args.jobs} processes\n")
    print("| rows | domain | mechanism (true loss / ε) | flagged | median bound | median power statement "
          "| pair at the diameter | median draws | median s / audit | median CPU s / audit |")
    print("|---|---|---|---|---|---|---|---|---|---|", flush=True)
    todo = rows(args.rows, args.dependent_on, args.losses, args.domains)
    with ProcessPoolExecutor(args.jobs) as pool:
        for row in todo:
            r = list(pool.map(one, [(row, s) for s in range(args.seeds)]))
            print(f"| {row[0]} | {row[1]} | {row[2]} | {sum(x[3] for x in r)}/{len(r)} "
                  f"| {np.median([x[4] for x in r]):.3f} | {np.median([x[5] for x in r]):.3f} "
                  f"| {sum(x[6] for x in r)}/{len(r)} | {np.median([x[7] for x in r]):.0f} "
                  f"| {np.median([x[8] for x in r]):.1f} | {np.median([x[9] for x in r]):.1f} |", flush=True)
    print(f"\n{time.perf_counter() - t0:.0f} s in all")


if __name__ == "__main__":
    main()

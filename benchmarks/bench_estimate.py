"""The plan's time estimate against the actual run, measured in one run.

For each study (a reduced run of a shipped spec: the grid overrides below), ``kngflow plan
SPEC --workers W`` prints the estimated wall time of a run on ``W`` local workers: the
compute, from a cost model it measures on this machine, spread over the workers, plus the
run's start-up (the local cluster's start, the run's calibration, the store's creation and
the cluster's close: :func:`kngflow.sweep.plan.startup_seconds`).  Then ``kngflow run`` of
the same reduced study on ``W`` workers is timed (wall clock of the whole command).
Printed per study: the estimate, the actual time and their ratio (estimate / actual; 1 is
exact, the target band is 0.5–2); exits 1 when a ratio lies outside the band.

    python benchmarks/bench_estimate.py [--workers 2] [--only bayes kmeans]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: (name, spec, overrides): the docs' studies, reduced to under a minute or two on 2 workers
STUDIES = [
    ("bayes", "workflows/bayes.toml", []),
    ("bayes_linear", "workflows/bayes_linear.toml", ["--replicates", "300"]),
    ("kmeans", "workflows/kmeans.toml", ["--replicates", "20"]),
    ("svm", "workflows/svm.toml", ["--replicates", "10"]),
    ("kng_linear", "workflows/kng_linear.toml", ["--replicates", "20"]),
    ("pca", "workflows/pca.toml", ["--replicates", "20"]),
    ("pca_dimension", "workflows/pca_dimension.toml", ["--replicates", "10"]),
    ("smoke", "workflows/smoke.toml", []),
]

_WALL = re.compile(r"wall ≈ (?P<value>[\d.]+) (?P<unit>s|min|h) on \d+ local workers")
_UNITS = {"s": 1.0, "min": 60.0, "h": 3600.0}


def kngflow(*args: str) -> subprocess.CompletedProcess:
    """The CLI beside this Python (the environment's ``kngflow`` script)."""
    exe = Path(sys.executable).parent / "kngflow"
    return subprocess.run([str(exe), *args], cwd=ROOT, capture_output=True, text=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--only", nargs="*", help="study names (default: all)")
    args = ap.parse_args()
    ratios = []
    for name, spec, overrides in STUDIES:
        if args.only and name not in args.only:
            continue
        plan = kngflow("plan", spec, "--workers", str(args.workers), *overrides)
        m = _WALL.search(plan.stdout + plan.stderr)
        if plan.returncode or not m:
            print(f"{name}: plan failed: {(plan.stdout + plan.stderr).strip().splitlines()[-1:]}")
            return 1
        estimate = float(m["value"]) * _UNITS[m["unit"]]
        with tempfile.TemporaryDirectory() as tmp:
            started = time.perf_counter()
            run = kngflow("run", spec, "--store", str(Path(tmp) / "s.zarr"), "--workers", str(args.workers),
                          *overrides)
            actual = time.perf_counter() - started
        if run.returncode:
            print(f"{name}: run failed: {(run.stdout + run.stderr).strip().splitlines()[-1:]}")
            return 1
        ratios.append(estimate / actual)
        print(f"{name:14s} {' '.join(overrides) or '(full)':18s} estimate {estimate:7.1f} s  actual {actual:7.1f} s  "
              f"ratio {estimate / actual:5.2f}", flush=True)
    inside = sum(0.5 <= r <= 2 for r in ratios)
    print(f"ratios {min(ratios):.2f} … {max(ratios):.2f}; within 0.5–2: {inside} of {len(ratios)}")
    return 0 if inside == len(ratios) else 1


if __name__ == "__main__":
    sys.exit(main())

"""The plan's time estimate against the actual run, measured in one run.

For each study (a reduced run of a shipped spec: the grid overrides below), ``kngflow plan
SPEC --workers W`` prints the estimated wall time of a run on ``W`` local workers: the
compute, from a cost model it measures on this machine, spread over the workers, plus the
run's start-up (the local cluster's start, the run's calibration, the store's creation and
the cluster's close: :func:`kngflow.sweep.plan.startup_seconds`).  Then ``kngflow run`` of
the same reduced study on ``W`` workers is timed (wall clock of the whole command).
Printed per study: the estimate, the actual time and their ratio (estimate / actual; 1 is
exact, the target band is 0.5–2); then the run's own estimates of its time left (progress
lines off a terminal: ``about … left``), each against the time the run went on after its
line (ratio: said / actual): the first, as the run starts computing (the cost model's), and
the one printed as its first cells finish (corrected by what they took).  Where under 5 s
were left the ratio is printed but not rated: the time left is said in whole seconds and
the cluster's close takes about one.  Exits 1 when a rated ratio lies outside the band.

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
#: the run's own estimate of what is left, on its progress lines
_LEFT = re.compile(r"about (?P<value>[\d.]+) (?P<unit>s|min|h) left")
_UNITS = {"s": 1.0, "min": 60.0, "h": 3600.0}


def kngflow(*args: str) -> subprocess.CompletedProcess:
    """The CLI beside this Python (the environment's ``kngflow`` script)."""
    exe = Path(sys.executable).parent / "kngflow"
    return subprocess.run([str(exe), *args], cwd=ROOT, capture_output=True, text=True)


def timed_run(*args: str) -> tuple[int, float, list[tuple[float, str]]]:
    """``kngflow run ARGS``: its exit status, its wall time and its output lines, each with the
    seconds since the start at which it was printed."""
    exe = Path(sys.executable).parent / "kngflow"
    started = time.perf_counter()
    proc = subprocess.Popen([str(exe), "run", *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, bufsize=1)
    lines = [(time.perf_counter() - started, line.rstrip("\n")) for line in proc.stdout]
    status = proc.wait()
    return status, time.perf_counter() - started, lines


def said_left(lines: list[tuple[float, str]], actual: float, *, computing: bool) -> tuple[str, float | None]:
    """``(text, ratio)`` for the first progress line with a time left (``computing``: the first
    printed once cells have finished, which gives a pace in cells/s): what it said was left,
    over the time the run went on after it (ratio None where under 5 s were left or no line
    matches)."""
    for at, line in lines:
        m = _LEFT.search(line)
        if m and (not computing or "cells/s" in line):
            left, rest = float(m["value"]) * _UNITS[m["unit"]], actual - at
            rated = rest >= 5.0
            return f"{left:5.1f}/{rest:5.1f} s = {left / max(rest, 1e-9):4.2f}{'' if rated else ' (not rated)'}", (
                left / rest if rated else None)
    return "-", None


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
            status, actual, lines = timed_run(spec, "--store", str(Path(tmp) / "s.zarr"), "--workers",
                                              str(args.workers), "--no-dashboard", *overrides)
        if status:
            print(f"{name}: run failed: {lines[-1][1] if lines else ''}")
            return 1
        ratios.append(estimate / actual)
        said = [said_left(lines, actual, computing=c) for c in (False, True)]
        ratios += [r for _, r in said if r is not None]
        print(f"{name:14s} {' '.join(overrides) or '(full)':18s} plan {estimate:6.1f} s  actual {actual:6.1f} s  "
              f"ratio {estimate / actual:4.2f}; the run's time left: first {said[0][0]}, "
              f"once cells finish {said[1][0]}", flush=True)
    inside = sum(0.5 <= r <= 2 for r in ratios)
    print(f"ratios {min(ratios):.2f} … {max(ratios):.2f}; within 0.5–2: {inside} of {len(ratios)}")
    return 0 if inside == len(ratios) else 1


if __name__ == "__main__":
    sys.exit(main())

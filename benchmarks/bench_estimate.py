"""The plan's time estimate against the actual run, measured in one run.

For each study (a reduced run of a shipped spec: the grid overrides below), ``kngflow plan
SPEC --workers W`` prints the estimated wall time of a run on ``W`` local workers: the
compute, from a cost model it measures on this machine, spread over the workers, plus the
run's start-up (the local cluster's start, the run's calibration, the store's creation and
the cluster's close: :func:`kngflow.sweep.plan.startup_seconds`).  Then ``kngflow run`` of
the same reduced study on ``W`` workers is timed (wall clock of the whole command).
Printed per study: the estimate, the actual time and their ratio (estimate / actual; 1 is
exact, the target band is 0.5–2).  The run's own estimates are timed against what was left
of it when each was printed: its plan line (``plan: compute ≈ … on W workers``, printed once
the cluster is up) and its first progress line with a time left (``about … left``, off a
terminal every 30 s: a run shorter than that has none); each ratio is the time the line
said was left over the time the run went on after it.  Exits 1 when a ratio lies outside
the band.

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
#: the run's own estimates of what is left: its plan line, then its progress lines
_RUN_PLAN = re.compile(r"^plan: compute .*, (?P<value>[\d.]+) (?P<unit>s|min|h) on \d+ workers$")
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


def said_left(lines: list[tuple[float, str]], pattern: re.Pattern, actual: float) -> str:
    """``left / after`` for the first line matching ``pattern``: the time it said was left
    over the time the run went on after it ("-" where no line matches)."""
    for at, line in lines:
        if m := pattern.search(line):
            left = float(m["value"]) * _UNITS[m["unit"]]
            return f"{left:6.1f}/{actual - at:6.1f} s = {left / max(actual - at, 1e-9):4.2f}"
    return "-"


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
        own = [said_left(lines, _RUN_PLAN, actual), said_left(lines, _LEFT, actual)]
        ratios += [float(r.rsplit("= ", 1)[1]) for r in own if r != "-"]
        print(f"{name:14s} {' '.join(overrides) or '(full)':18s} plan {estimate:7.1f} s  actual {actual:7.1f} s  "
              f"ratio {estimate / actual:5.2f}; the run's plan line {own[0]}; its first time left {own[1]}",
              flush=True)
    inside = sum(0.5 <= r <= 2 for r in ratios)
    print(f"ratios {min(ratios):.2f} … {max(ratios):.2f}; within 0.5–2: {inside} of {len(ratios)}")
    return 0 if inside == len(ratios) else 1


if __name__ == "__main__":
    sys.exit(main())

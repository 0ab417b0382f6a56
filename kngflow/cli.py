"""``kngflow`` command line: run | plan | status | report.

Exit status: 0 success, 1 some cells failed (or the run was interrupted),
2 bad input (invalid spec, a store made from another spec, a bad cluster file).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

__all__ = ["main", "build_parser"]

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kngflow",
        description="Monte Carlo studies of differential-privacy mechanisms on Dask, stored in xarray/zarr.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="run (or resume, or extend) a study into a store",
        description="Run the study SPEC into the zarr store PATH. Re-running the same command resumes: "
        "only cells not done are computed. A spec that only adds n, epsilon, mechanisms or replicates "
        "extends the store; any other change is refused.",
    )
    run.add_argument("spec", help="study spec (TOML), e.g. workflows/kng_linear.toml")
    run.add_argument("--store", required=True, metavar="PATH", help="zarr store directory (created if missing)")
    target = run.add_mutually_exclusive_group()
    target.add_argument("--scheduler", metavar="ADDR", help="address of a running Dask scheduler (tcp://host:8786)")
    target.add_argument("--scheduler-file", metavar="FILE", help="scheduler file written by `dask scheduler --scheduler-file`")
    target.add_argument("--cluster", metavar="FILE", help="deployment file, e.g. cluster/slurm.yaml")
    run.add_argument(
        "--connect-timeout", type=float, default=60.0, metavar="S",
        help="seconds to wait for the Dask scheduler (default 60)",
    )
    run.add_argument("--workers", type=int, metavar="N", help="local workers (default: one per core) or jobs for --cluster")
    run.add_argument("--dashboard-address", default=":8787", metavar="ADDR", help="local dashboard address (default :8787)")
    run.add_argument("--no-dashboard", action="store_true", help="start the local cluster without a dashboard")
    run.add_argument("--task-seconds", type=float, default=1.0, metavar="S", help="target duration of one task (default 1)")
    run.add_argument("--replicate-chunk", type=int, metavar="K", help="replicates per store chunk for a new store (default: cost model)")
    run.add_argument("--max-in-flight", type=int, metavar="K", help="futures in flight (default: 2 per worker thread, >= 4)")
    run.add_argument("--retries", type=int, default=2, metavar="R", help="Dask retries of a failing task (default 2)")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument(
        "--task-timeout", type=float, metavar="S",
        help="seconds one task may run before its cells are marked failed (default: from the cost model, >= 300)",
    )
    run.add_argument("--flush-seconds", type=float, default=2.0, metavar="S",
                     help="longest time finished results wait in the client before they are written (default 2)")
    run.add_argument("--yes", action="store_true", help="run even when the plan exceeds the limits (24 core-hours, "
                     "100 GB of store, 8 GB per worker)")

    plan = sub.add_parser(
        "plan", help="cells, tasks, compute time, memory and store size of a study, without running it",
        description="Estimate a run of SPEC from a cost model measured on this machine (a few seconds). "
        "With --store, cells already done there are not counted.",
    )
    plan.add_argument("spec", help="study spec (TOML)")
    plan.add_argument("--store", metavar="PATH", help="existing store to resume or extend")
    plan.add_argument("--task-seconds", type=float, default=1.0, metavar="S", help="target duration of one task (default 1)")
    plan.add_argument("--workers", type=int, metavar="N", help="also show the time on N workers")

    status = sub.add_parser("status", help="done / failed / total per n and mechanism, with failure messages")
    status.add_argument("store", metavar="PATH")
    status.add_argument("--max-messages", type=int, default=20, metavar="K", help="failure messages to show (default 20)")

    report = sub.add_parser("report", help="tables and figures of a store (kngflow.analysis.report)")
    report.add_argument("store", metavar="STORE")
    report.add_argument("--out", required=True, metavar="DIR")
    return p


def _err(msg: str) -> None:
    print(f"kngflow: error: {msg}", file=sys.stderr)


def _check_scheduler_file(path) -> str | None:
    """Why ``path`` is not a usable ``dask scheduler --scheduler-file`` file (None if it is)."""
    p = Path(path)
    if not p.exists():
        return "does not exist"
    try:
        info = json.loads(p.read_text())
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    except ValueError:
        return "is not a scheduler file (not JSON); write it with `dask scheduler --scheduler-file FILE`"
    if not isinstance(info, dict) or not isinstance(info.get("address"), str) or not info["address"]:
        return "is not a scheduler file (no scheduler address); write it with `dask scheduler --scheduler-file FILE`"
    return None


def _dashboard_link(client) -> str | None:
    """The dashboard address, or None when the scheduler serves none."""
    try:
        return client.dashboard_link
    except (KeyError, AttributeError, OSError):
        return None


def cmd_run(args) -> int:
    from kngflow.store import StoreError
    from kngflow.sweep import SpecError, load_spec, prepare_store, run_sweep
    from kngflow.sweep.cluster import ClusterConfigError, connect, load_cluster_config

    try:
        spec = load_spec(args.spec)
    except SpecError as exc:
        _err(f"invalid spec {args.spec}: {exc}")
        return EXIT_BAD_INPUT
    for name in ("workers", "replicate_chunk", "max_in_flight"):
        v = getattr(args, name)
        if v is not None and v < 1:
            _err(f"--{name.replace('_', '-')} must be >= 1, got {v}")
            return EXIT_BAD_INPUT
    if not args.task_seconds > 0 or args.retries < 0:
        _err("--task-seconds must be > 0 and --retries >= 0")
        return EXIT_BAD_INPUT
    for name in ("task_timeout", "flush_seconds"):
        v = getattr(args, name)
        if v is not None and not v > 0:
            _err(f"--{name.replace('_', '-')} must be > 0, got {v}")
            return EXIT_BAD_INPUT
    if not args.connect_timeout > 0:
        _err(f"--connect-timeout must be > 0, got {args.connect_timeout}")
        return EXIT_BAD_INPUT
    if args.cluster:
        try:
            load_cluster_config(args.cluster)
        except ClusterConfigError as exc:
            _err(str(exc))
            return EXIT_BAD_INPUT
    if args.scheduler_file:
        problem = _check_scheduler_file(args.scheduler_file)
        if problem:
            _err(f"--scheduler-file {args.scheduler_file} {problem}")
            return EXIT_BAD_INPUT
    try:  # refuse a foreign store now; create or extend it only once connected
        cost, est = _plan(spec, args.store, args.task_seconds, args.workers)
    except StoreError as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
    why = est.too_big()
    if why and not args.yes:
        _err(f"{why}; check the spec, or run again with --yes")
        return EXIT_BAD_INPUT
    dashboard = None if args.no_dashboard else args.dashboard_address
    where = args.scheduler or args.scheduler_file or args.cluster or "local cluster"
    try:
        with contextlib.ExitStack() as stack:
            try:
                client = stack.enter_context(
                    connect(
                        scheduler=args.scheduler,
                        scheduler_file=args.scheduler_file,
                        cluster_file=args.cluster,
                        workers=args.workers,
                        dashboard_address=dashboard,
                        timeout=args.connect_timeout,
                    )
                )
            except OSError as exc:  # refused, unreachable, timed out (TimeoutError is an OSError)
                _err(f"cannot connect to the Dask scheduler of {where}: {exc}")
                return EXIT_BAD_INPUT
            try:
                prepared = prepare_store(spec, args.store, replicate_chunk=args.replicate_chunk)
            except StoreError as exc:
                _err(str(exc))
                return EXIT_BAD_INPUT
            nworkers = len(client.nthreads())
            print(f"scheduler {client.scheduler.address}; {nworkers} workers", flush=True)
            remote = args.scheduler or args.scheduler_file or args.cluster
            link = _dashboard_link(client) if (remote or dashboard) else None
            if link:
                print(f"dashboard: {link}", flush=True)
            result = run_sweep(
                spec,
                args.store,
                client,
                prepared=prepared,
                cost=cost,
                max_in_flight=args.max_in_flight,
                retries=args.retries,
                task_timeout=args.task_timeout,
                flush_seconds=args.flush_seconds,
                progress=not args.no_progress,
            )
    except ClusterConfigError as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        _err("interrupted; run the same command again to resume")
        return EXIT_FAILED
    print(
        f"{result.done}/{result.total} cells done, {result.failed} failed "
        f"({result.computed} computed in {result.seconds:.1f} s, {result.tasks} tasks)",
        flush=True,
    )
    if result.failures:
        print("failures (first ones):")
        for r in result.failures[:10]:
            print(f"  {r['mechanism']} n={r['n']} eps={r['epsilon']} rep={r['replicate']}: {r['message']}")
        print(f"see: kngflow status {args.store}")
    return EXIT_OK if result.ok else EXIT_FAILED


def _plan(spec, store, task_seconds: float, workers: int | None):
    """Calibrate the cost model, print the plan lines and return ``(cost, estimate)``."""
    from kngflow.sweep import calibrate, estimate
    from kngflow.sweep.engine import store_progress

    progress = store_progress(spec, store) if store else None
    cost = calibrate(spec, task_seconds=task_seconds)
    est = estimate(spec, cost, progress=progress)
    for line in est.lines(workers):
        print(line, flush=True)
    return cost, est


def cmd_plan(args) -> int:
    from kngflow.store import StoreError
    from kngflow.sweep import SpecError, load_spec

    try:
        spec = load_spec(args.spec)
    except SpecError as exc:
        _err(f"invalid spec {args.spec}: {exc}")
        return EXIT_BAD_INPUT
    if not args.task_seconds > 0 or (args.workers is not None and args.workers < 1):
        _err("--task-seconds must be > 0 and --workers >= 1")
        return EXIT_BAD_INPUT
    try:
        est = _plan(spec, args.store, args.task_seconds, args.workers)[1]
    except StoreError as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
    why = est.too_big()
    if why:
        print(f"plan: {why}: `kngflow run` asks for --yes")
    return EXIT_OK


def status_text(path, max_messages: int = 20) -> str:
    """The ``kngflow status`` table as text."""

    from kngflow.store import read_failures, read_flags, read_meta

    meta = read_meta(path)
    done, failed = read_flags(path)
    failed = failed.astype(bool) & (done == 0)
    done = done.astype(bool)
    labels = [str(x) for x in meta.coords["mechanism"]]
    ns = [int(x) for x in meta.coords["n"]]
    width = max([len("mechanism")] + [len(x) for x in labels])
    lines = [
        f"store {path}",
        f"study {meta.attrs.get('title') or '-'} (spec {str(meta.attrs.get('spec_hash', ''))[:12]}), "
        f"problem {meta.attrs.get('problem')}, dims "
        + ", ".join(f"{k}={len(v)}" for k, v in meta.coords.items()),
        f"overall: {int(done.sum())} done, {int(failed.sum())} failed, {done.size} total",
        "",
        f"{'n':>10}  {'mechanism':<{width}}  {'done':>7}  {'failed':>7}  {'total':>7}",
    ]
    for i in sorted(range(len(ns)), key=lambda k: ns[k]):
        for a, lab in enumerate(labels):
            dd, ff = done[a, i], failed[a, i]
            lines.append(f"{ns[i]:>10}  {lab:<{width}}  {int(dd.sum()):>7}  {int(ff.sum()):>7}  {dd.size:>7}")
    if failed.any():
        idx = {
            "mechanism": {v: k for k, v in enumerate(labels)},
            "n": {v: k for k, v in enumerate(ns)},
            "epsilon": {float(v): k for k, v in enumerate(meta.coords["epsilon"])},
            "replicate": {int(v): k for k, v in enumerate(meta.coords["replicate"])},
        }
        current = []
        for r in read_failures(path):
            try:
                cell = (
                    idx["mechanism"][r["mechanism"]],
                    idx["n"][int(r["n"])],
                    idx["epsilon"][float(r["epsilon"])],
                    idx["replicate"][int(r["replicate"])],
                )
            except (KeyError, ValueError, TypeError):
                continue
            if failed[cell]:
                current.append(r)
        lines.append("")
        lines.append(f"failures ({int(failed.sum())} cells; showing {min(max_messages, len(current))} messages):")
        for r in current[:max_messages]:
            lines.append(f"  {r['mechanism']} n={r['n']} eps={r['epsilon']} rep={r['replicate']}: {r['message']}")
    return "\n".join(lines)


def cmd_status(args) -> int:
    from kngflow.store import StoreError

    try:
        print(status_text(args.store, args.max_messages))
    except StoreError as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
    return EXIT_OK


def cmd_report(args) -> int:
    from kngflow.store import StoreError, read_meta

    try:
        read_meta(args.store)
    except StoreError as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
    from kngflow.analysis.report import write_report

    out = write_report(args.store, args.out)
    if out is not None:
        print(out)
    return EXIT_OK


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    handler = {"run": cmd_run, "plan": cmd_plan, "status": cmd_status, "report": cmd_report}[args.command]
    return handler(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

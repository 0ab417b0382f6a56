"""``kngflow`` command line: run | plan | status | verify | report | audit | export | debug.

Exit status: 0 success; 1 some cells failed (``run``, ``status``); 2 bad input
(invalid spec, a store made from another spec or in use by another run, a bad
cluster file, address or path), found before any cluster starts and before
anything is created; 130 (143) interrupted by SIGINT (SIGTERM), after one line
on stderr: run the same command again to resume.  ``debug`` alone lets a failing
release raise: its traceback is what it is for.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

__all__ = ["main", "build_parser"]

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    from kngflow import __version__

    p = argparse.ArgumentParser(
        prog="kngflow",
        description="Monte Carlo studies of differential-privacy mechanisms on Dask, stored in xarray/zarr.",
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}", help="print the version and exit")
    sub = p.add_subparsers(
        dest="command", required=True, metavar="COMMAND", help="what to do; `kngflow COMMAND -h` for its options"
    )

    run = sub.add_parser(
        "run",
        help="run (or resume, or extend) a study into a store",
        description="Run the study SPEC into the zarr store PATH. Re-running the same command resumes: "
        "only cells not done are computed. A spec that only adds n, epsilon, mechanisms or replicates "
        "extends the store; any other change is refused. One run at a time per store: the lock file "
        "PATH.lock beside it says which run holds it.",
    )
    run.add_argument("spec", help="study spec (TOML), e.g. workflows/kng_linear.toml")
    run.add_argument("--store", required=True, metavar="PATH", help="zarr store directory (created if missing)")
    target = run.add_mutually_exclusive_group()
    target.add_argument("--scheduler", metavar="ADDR", help="address of a running Dask scheduler (tcp://host:8786)")
    target.add_argument("--scheduler-file", metavar="FILE", help="scheduler file written by `dask scheduler --scheduler-file`")
    target.add_argument("--cluster", metavar="FILE", help="deployment file, e.g. cluster/slurm.yaml")
    run.add_argument(
        "--connect-timeout", type=float, default=60.0, metavar="S",
        help="seconds to wait for the Dask scheduler, and for a worker once every worker has left the run "
        "(then the run stops; the cells done are kept) (default 60)",
    )
    run.add_argument("--workers", type=int, metavar="N", help="local workers (default: one per core) or jobs for --cluster")
    run.add_argument(
        "--min-workers", type=int, metavar="K",
        help="wait until K workers have joined (at most --connect-timeout) before the first task goes out",
    )
    run.add_argument("--dashboard-address", default=":8787", metavar="ADDR", help="local dashboard address (default :8787)")
    run.add_argument("--no-dashboard", action="store_true", help="start the local cluster without a dashboard")
    run.add_argument("--task-seconds", type=float, default=1.0, metavar="S", help="target duration of one task (default 1)")
    run.add_argument("--replicate-chunk", type=int, metavar="K", help="replicates per store chunk for a new store (default: a few MB per chunk)")
    run.add_argument("--max-in-flight", type=int, metavar="K",
                     help="futures in flight (default: 2 per worker thread present, re-read as workers join and leave, >= 4)")
    run.add_argument("--retries", type=int, default=2, metavar="R", help="Dask retries of a failing task (default 2)")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument(
        "--log-file", metavar="FILE",
        help="append Dask's logging and warnings (client and local workers) to FILE instead of the terminal",
    )
    run.add_argument(
        "--task-timeout", type=float, metavar="S",
        help="seconds one task may run before its cells are marked failed (default: from the cost model, >= 300)",
    )
    run.add_argument("--flush-seconds", type=float, default=2.0, metavar="S",
                     help="longest time finished results wait in the client before they are written (default 2)")
    run.add_argument("--repair", action="store_true",
                     help="repair a damaged store first: damaged chunks are cleared and their cells recomputed "
                     "(see `kngflow verify`)")
    run.add_argument("--yes", action="store_true", help="run even when the plan exceeds the limits (24 core-hours, "
                     "100 GB of store, 8 GB per worker)")
    _add_overrides(run)

    plan = sub.add_parser(
        "plan", help="cells, tasks, compute time, memory and store size of a study, without running it",
        description="Estimate a run of SPEC from a cost model measured on this machine (a few seconds). "
        "With --store, cells already done there are not counted.",
    )
    plan.add_argument("spec", help="study spec (TOML)")
    plan.add_argument("--store", metavar="PATH", help="existing store to resume or extend")
    plan.add_argument("--task-seconds", type=float, default=1.0, metavar="S", help="target duration of one task (default 1)")
    plan.add_argument("--workers", type=int, metavar="N",
                      help="plan for N single-threaded workers: their wall time, task length, scheduler rate and "
                      "client load")
    plan.add_argument("--target-mcse", type=float, metavar="X",
                      help="replicates that bring the Monte Carlo SE of --statistic to at most X in every "
                      "(mechanism, n, epsilon) cell, from the pilot store --pilot; prints the table and the "
                      "`replicates = R` line of the spec that gets there")
    plan.add_argument("--pilot", metavar="STORE", help="pilot store of SPEC (e.g. 20 replicates) for --target-mcse")
    plan.add_argument("--statistic", default="mean_error", metavar="NAME",
                      help="statistic for --target-mcse: mean_error (default), median_error, rmse, coverage")
    _add_overrides(plan)

    status = sub.add_parser(
        "status",
        help="done / failed / total per n and mechanism, with failure messages (exit 1 if cells failed)",
    )
    status.add_argument("store", metavar="PATH", help="zarr store written by kngflow run")
    status.add_argument("--max-messages", type=int, default=20, metavar="K", help="failure messages to show (default 20)")
    status.add_argument("--json", action="store_true", help="print the counts and failures as one JSON object")

    verify = sub.add_parser(
        "verify", help="read every chunk and all metadata of a store; list damaged files and their cells "
        "(exit 1 if any)",
    )
    verify.add_argument("store", metavar="PATH", help="zarr store written by kngflow run")
    verify.add_argument("--no-progress", action="store_true", help="no progress bar")

    report = sub.add_parser("report", help="tables and figures of a store (kngflow.analysis.report)")
    report.add_argument("store", metavar="STORE", help="zarr store written by kngflow run")
    report.add_argument("--out", metavar="DIR",
                        help="directory for report.md and the figures (created; default: STORE-report beside the store)")
    report.add_argument("--html", action="store_true",
                        help="also write report.html: one self-contained file (figures inline, sortable tables, "
                        "diagnosands, spec and provenance; nothing fetched when viewed)")
    claims = report.add_mutually_exclusive_group()
    claims.add_argument("--claims", metavar="FILE",
                        help="claims file to evaluate (default: workflows/NAME.claims.toml of the store's study, "
                        "if there is one; see docs/claims.md)")
    claims.add_argument("--no-claims", action="store_true", help="evaluate no claims file")

    export = sub.add_parser(
        "export", help="one row per done cell as CSV or Parquet, for pandas, R or a spreadsheet",
        description="Write the done cells of STORE as a table: one row per cell with every coordinate "
        "(mechanism, n, epsilon, replicate and any other grid axis), the estimate's columns (estimate_0, "
        "estimate_1, ... after the coef coordinate), the error, seconds, the mechanisms' diagnostics and the "
        "problem's per-data-set variables (e.g. scale, ols_stderr_0, ...). Cells not done are left out.",
    )
    export.add_argument("store", metavar="STORE", help="zarr store written by kngflow run")
    export.add_argument("--format", choices=("csv", "parquet"), default="csv",
                        help="csv (default) or parquet (needs pyarrow or fastparquet)")
    export.add_argument("--output", metavar="PATH",
                        help="file to write (default: STORE.csv or STORE.parquet beside the store)")
    export.add_argument("--force", action="store_true", help="overwrite PATH if it exists")

    debug = sub.add_parser(
        "debug", help="compute one cell of a study in this process and print its release and diagnostics",
        description="Compute one cell of SPEC here, in the foreground: the replicate's data set and the "
        "mechanism's release on the very streams a sweep uses, so the estimate equals the stored cell bit for "
        "bit. Prints the estimate, the error, the declared diagnostics, the release's info and the data set's "
        "summary (numbers as repr, which reads back exactly). A failing release shows its full Python "
        "traceback (exit 1); a bad spec or a cell not in the grid is one line (exit 2).",
    )
    debug.add_argument("spec", help="study spec (TOML)")
    debug.add_argument("--cell", required=True, metavar="KEY=VALUE,...",
                       help="the cell, e.g. mechanism=kng,n=1000,epsilon=1,replicate=3 (a key may be left out "
                       "where its axis has one value)")

    from kngflow.audit import command as audit_command

    audit_command.add_parser(sub)
    audit = sub.choices["audit"]
    audit.epilog = ((audit.epilog + " ") if audit.epilog else "") + PAIR_NOTATION
    return p


def _add_overrides(parser) -> None:
    """``--n``, ``--epsilon``, ``--replicates``: a reduced run of the spec (``run`` and ``plan``)."""
    group = parser.add_argument_group(
        "reduced run",
        "replace grid axes of SPEC for a smaller run; each cell equals the same cell of the full study (seeds are "
        "keyed by values). The store records the overrides and refuses a run with other ones (or none).",
    )
    group.add_argument("--n", metavar="N1,N2,...", help="sample sizes to run instead of the spec's grid.n")
    group.add_argument("--epsilon", metavar="E1,E2,...",
                       help="privacy levels to run instead of the spec's grid.epsilon")
    group.add_argument("--replicates", metavar="K",
                       help="run the spec's first K replicates (0..K-1 for a count replicates = R)")


def _load_spec(args):
    """The spec of ``args.spec`` with the command line's grid overrides; None after one error line."""
    from kngflow.sweep.overrides import apply_overrides
    from kngflow.sweep.spec import SpecError, load_spec

    try:
        spec = load_spec(args.spec)
    except SpecError as exc:
        _err(f"invalid spec {args.spec}: {exc}")
        return None
    try:
        return apply_overrides(spec, n=args.n, epsilon=args.epsilon, replicates=args.replicates)
    except SpecError as exc:
        _err(str(exc))
        return None


#: How ``kngflow audit`` writes an adjacent pair (``--pair`` and its output); docs/audits.md says the same.
PAIR_NOTATION = (
    "Pairs are written as the audit prints them, e.g. '(0,1) + (1,-1) -> (-1,-1)': a data set is a sum of "
    "records, each record in parentheses with the problem's fields (linear regression: x1, ..., y), and "
    "'K*(r)' is K copies of the record r; the last record before '->' is the one that changes, and the "
    "record after '->' replaces it. So '(0,1) + (1,-1) -> (-1,-1)' is the two records (0,1), (1,-1) against "
    "(0,1), (-1,-1). A '-0' is a zero (the sign of a floating-point zero, kept as computed): (-0,-1) is (0,-1)."
)


def _err(msg: str) -> None:
    print(f"kngflow: error: {msg}", file=sys.stderr)


def _path_problem(option: str, path, *, directory: bool = True) -> str | None:
    """See :func:`kngflow.sweep.targets.path_problem`."""
    from kngflow.sweep.targets import path_problem

    return path_problem(option, path, directory=directory)


def _target_problem(args) -> str | None:
    """See :func:`kngflow.sweep.targets.run_target_problem`."""
    from kngflow.sweep.targets import run_target_problem

    return run_target_problem(args)


def _damage_problem(store, *, repair: bool = False, spec=None) -> str | None:
    """One line if the store is damaged (None if sound or absent): :func:`kngflow.sweep.repair.damage_problem`."""
    from kngflow.sweep.repair import damage_problem

    return damage_problem(store, repair=repair, spec=spec, log=lambda line: print(line, flush=True))


def cmd_run(args) -> int:
    spec = _load_spec(args)
    if spec is None:
        return EXIT_BAD_INPUT
    for name in ("workers", "min_workers", "replicate_chunk", "max_in_flight"):
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
    problem = _target_problem(args)
    if problem:
        _err(problem)
        return EXIT_BAD_INPUT
    from kngflow.sweep.prepare import overrides_problem

    problem = overrides_problem(spec, args.store)  # a reduced run never mixes with another one's store
    if problem:
        _err(problem)
        return EXIT_BAD_INPUT
    from kngflow.sweep.engine import PluginFailure, preflight

    try:
        preflight(spec)  # plug-ins release once here, before a cluster starts or anything is written
    except PluginFailure as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT

    if spec.overrides:
        from kngflow.sweep.overrides import describe_overrides

        print(f"reduced run of {args.spec}: {describe_overrides(spec.overrides)}", flush=True)
    from kngflow.sweep.launch import RunRefused, launch_run

    try:
        result = launch_run(spec, args, say=lambda line: print(line, flush=True))
    except RunRefused as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
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


def cmd_plan(args) -> int:
    import time

    from kngflow.store import StoreError
    from kngflow.sweep.launch import estimate_run

    spec = _load_spec(args)
    if spec is None:
        return EXIT_BAD_INPUT
    if args.target_mcse is not None or args.pilot is not None:
        return _plan_target(args, spec)
    if not args.task_seconds > 0 or (args.workers is not None and args.workers < 1):
        _err("--task-seconds must be > 0 and --workers >= 1")
        return EXIT_BAD_INPUT
    try:
        damage = _damage_problem(args.store) if args.store else None
        if damage:
            _err(damage)
            return EXIT_BAD_INPUT
        started = time.perf_counter()
        est = estimate_run(spec, args.store, args.task_seconds, args.workers)[1]
        calibration = time.perf_counter() - started
    except StoreError as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
    if spec.overrides:
        from kngflow.sweep.overrides import describe_overrides

        print(f"plan: reduced run of {args.spec}: {describe_overrides(spec.overrides)}")
    startup = None
    if args.workers:
        from kngflow.sweep.plan import startup_seconds

        startup = startup_seconds(args.workers, calibration)
    for line in est.lines(args.workers, startup) + (est.cluster_lines(args.workers) if args.workers else []):
        print(line)
    why = est.too_big()
    if why:
        print(f"plan: {why}: `kngflow run` asks for --yes")
    return EXIT_OK


def _pilot_problem(spec, pilot) -> str | None:
    """See :func:`kngflow.sweep.prepare.pilot_problem`."""
    from kngflow.sweep.prepare import pilot_problem

    return pilot_problem(spec, pilot)


def _plan_target(args, spec) -> int:
    """``kngflow plan SPEC --target-mcse X --pilot STORE``: replicates for a target precision."""
    from kngflow.analysis.claims import STATISTICS, ClaimsError
    from kngflow.analysis.target import target_plan

    if args.target_mcse is None or args.pilot is None:
        _err("--target-mcse X and --pilot STORE go together")
        return EXIT_BAD_INPUT
    if not args.target_mcse > 0:
        _err(f"--target-mcse must be > 0, got {args.target_mcse:g}")
        return EXIT_BAD_INPUT
    if args.statistic not in STATISTICS:
        _err(f"--statistic {args.statistic!r} is not known; allowed: {', '.join(STATISTICS)}")
        return EXIT_BAD_INPUT
    why = _pilot_problem(spec, args.pilot)
    if why:
        _err(why)
        return EXIT_BAD_INPUT
    try:
        lines, short = target_plan(args.pilot, args.spec, len(spec.replicates), args.target_mcse, args.statistic)
    except ClaimsError as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
    for line in lines:
        print(line)
    if short:
        _err(short)
        return EXIT_BAD_INPUT
    return EXIT_OK


def status_data(path, max_messages: int = 20) -> dict:
    """What ``kngflow status --json`` prints: :func:`kngflow.store.status.status_data`."""
    from kngflow.store.status import status_data as read_status

    return read_status(path, max_messages)


def status_text(path, max_messages: int = 20, data: dict | None = None) -> str:
    """The ``kngflow status`` table: :func:`kngflow.store.status.status_text`."""
    from kngflow.store.status import status_text as table

    return table(path, max_messages, data)


def cmd_status(args) -> int:
    from kngflow.store import StoreError

    try:
        damage = _damage_problem(args.store)
        if damage:
            _err(damage)
            return EXIT_BAD_INPUT
        data = status_data(args.store, args.max_messages)
    except StoreError as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
    print(json.dumps(data) if args.json else status_text(args.store, data=data))
    return EXIT_FAILED if data["failed"] else EXIT_OK


def default_report_dir(store) -> Path:
    """Where ``kngflow report STORE`` writes without ``--out``: ``STORE-report`` beside the store."""
    return Path(os.fspath(store).rstrip("/\\") + "-report")


def cmd_report(args) -> int:
    from kngflow.store import StoreError, read_meta

    if args.out is None:
        args.out = default_report_dir(args.store)
    problem = _path_problem("--out", args.out)
    if problem:
        _err(problem)
        return EXIT_BAD_INPUT
    from kngflow.analysis.claims import ClaimsError
    from kngflow.analysis.report import make_report, missing_variable, open_store

    try:  # a store without a variable the report needs: say which (before calling it damaged)
        missing = missing_variable(open_store(args.store))
    except Exception:  # noqa: BLE001 -- not readable as a dataset: the checks below say why
        missing = None
    if missing:
        _err(f"{args.store}: {missing}")
        return EXIT_BAD_INPUT
    try:
        damage = _damage_problem(args.store)
        if damage:
            _err(damage)
            return EXIT_BAD_INPUT
        read_meta(args.store)
    except StoreError as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
    try:  # make_report checks the claims against the store before it writes anything
        _md, written, verdicts = make_report(args.store, args.out, html=args.html,
                                             claims=False if args.no_claims else args.claims)
    except ClaimsError as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
    for path in written:
        print(f"wrote {path}")
    if verdicts:
        counts = {v: sum(1 for x in verdicts if x.verdict == v) for v in ("agrees", "disagrees", "inconclusive")}
        print(f"claims: {len(verdicts)} evaluated: " + ", ".join(f"{n} {v}" for v, n in counts.items()))
    return EXIT_OK


def cmd_verify(args) -> int:
    from kngflow.store import StoreError
    from kngflow.store.verify import verify_store

    if not (Path(args.store) / "zarr.json").exists() and not Path(args.store).is_dir():
        _err(f"{args.store} is not a zarr store (no such directory)")
        return EXIT_BAD_INPUT
    try:
        damage = verify_store(args.store, progress=not args.no_progress and sys.stderr.isatty())
    except StoreError as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
    if not damage:
        print(f"store {args.store} is sound")
        return EXIT_OK
    print(f"store {args.store}: {len(damage)} damaged files")
    for d in damage:
        print(f"  {d.line()}")
    print(f"repair: kngflow run SPEC --store {args.store} --repair")
    return EXIT_FAILED


def default_export_path(store, fmt: str) -> Path:
    """Where ``kngflow export STORE`` writes without ``--output``: ``STORE.csv`` (``STORE.parquet``)."""
    return Path(os.fspath(store).rstrip("/\\") + f".{fmt}")


def cmd_export(args) -> int:
    from kngflow.store import StoreError, read_meta
    from kngflow.store.export import export_store, parquet_problem

    if args.format == "parquet":
        missing = parquet_problem()
        if missing:
            _err(missing)
            return EXIT_BAD_INPUT
    if not Path(args.store).is_dir():
        _err(f"{args.store} is not a kngflow store (no such directory)")
        return EXIT_BAD_INPUT
    output = Path(args.output) if args.output else default_export_path(args.store, args.format)
    problem = _path_problem("--output", output, directory=False)
    if not problem and output.exists() and not args.force:
        problem = f"{output} exists; pass --force to overwrite it, or --output PATH"
    if problem:
        _err(problem)
        return EXIT_BAD_INPUT
    try:
        read_meta(args.store)
        damage = _damage_problem(args.store)
        if damage:
            _err(damage)
            return EXIT_BAD_INPUT
        rows, columns = export_store(args.store, output, args.format)
    except StoreError as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
    print(f"wrote {output}: {rows} rows (done cells), {columns} columns")
    return EXIT_OK


def cmd_debug(args) -> int:
    from kngflow.sweep.debug import CellError, cell_lines, debug_cell, parse_cell
    from kngflow.sweep.spec import SpecError, load_spec

    try:
        spec = load_spec(args.spec)
    except SpecError as exc:
        _err(f"invalid spec {args.spec}: {exc}")
        return EXIT_BAD_INPUT
    try:
        cell = parse_cell(spec, args.cell)
    except CellError as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
    result, summary = debug_cell(spec, cell)  # no try: a failing release shows its traceback
    for line in cell_lines(spec, cell, result, summary):
        print(line)
    return EXIT_OK


def cmd_audit(args) -> int:
    from kngflow.audit import command

    return command.run(args)


def main(argv=None) -> int:
    from kngflow.sweep.quiet import Interrupted, exit_on_signals

    args = build_parser().parse_args(argv)
    handler = {"run": cmd_run, "plan": cmd_plan, "status": cmd_status, "report": cmd_report, "audit": cmd_audit,
               "verify": cmd_verify, "export": cmd_export, "debug": cmd_debug}[
        args.command
    ]
    hint = "; run the same command again to resume" if args.command == "run" else ""
    try:
        with exit_on_signals("interrupted by {signal}{saved}" + hint):
            status = handler(args)
        sys.stdout.flush()  # inside the try: a closed pipe is reported below, not at exit
        return status
    except Interrupted as exc:
        return exc.status
    except BrokenPipeError:  # the reader went away (``kngflow status STORE | head``): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell reports it


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

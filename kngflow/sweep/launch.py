"""One ``kngflow run`` once its spec and options are checked: lock the store, check (or repair)
it, estimate the run, connect to the cluster, check the workers, prepare the store and run
the sweep (:func:`launch_run`); and the estimate ``kngflow plan`` prints (:func:`estimate_run`).

What refuses to run raises :class:`RunRefused` with the one line to show; what the run
reports on the way (the estimate, the scheduler, the dashboard) goes to ``say``.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

__all__ = ["RunRefused", "launch_run", "estimate_run"]


class RunRefused(Exception):
    """A run that stops before its sweep (or that loses its scheduler): one line saying why."""


def estimate_run(spec, store, task_seconds: float, threads: int | None = None):
    """``(cost model calibrated on this machine, estimate of running spec into store)``;
    with ``threads``, tasks as long as a run on that many threads cuts them."""
    from kngflow.sweep import calibrate, estimate
    from kngflow.sweep.engine import store_progress
    from kngflow.sweep.plan import scaled_cost

    progress = store_progress(spec, store) if store else None
    cost = calibrate(spec, task_seconds=task_seconds)
    sized = scaled_cost(cost, threads) if threads else cost
    return cost, estimate(spec, sized, progress=progress)


def _dashboard_link(client) -> str | None:
    """The dashboard address, or None when the scheduler serves none."""
    try:
        return client.dashboard_link
    except (KeyError, AttributeError, OSError):
        return None


def launch_run(spec, args, say):
    """Run ``spec`` into ``args.store`` with the options of ``kngflow run`` (``args``, checked
    by the command line); returns the sweep's result.  ``say(line)`` prints a progress line."""
    import distributed  # noqa: F401 - its loggers must exist before --log-file takes them over

    from kngflow.store import StoreError
    from kngflow.store.lock import RunLock
    from kngflow.sweep import prepare_store, run_sweep
    from kngflow.sweep.cluster import ClusterConfigError, connect
    from kngflow.sweep.engine import (SchedulerLost, VersionMismatch, check_store, check_workers, plugin_modules,
                                      runtime_versions)
    from kngflow.sweep.quiet import busy_ports, drop_reconnect_errors, log_to_file
    from kngflow.sweep.repair import damage_problem

    if args.log_file:
        log_to_file(args.log_file)
    else:
        drop_reconnect_errors()  # a lost scheduler is reported by the caller, in one line
    dashboard = None if args.no_dashboard else args.dashboard_address
    where = args.scheduler or args.scheduler_file or args.cluster or "local cluster"
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(RunLock(args.store))
            damage = damage_problem(args.store, repair=args.repair, spec=spec, log=say)
            if damage:
                raise RunRefused(damage)
            check_store(spec, args.store)  # refuse a foreign store now; create or extend it once connected
            cost, est = estimate_run(spec, args.store, args.task_seconds)
            why = est.too_big()
            if why and not args.yes:
                raise RunRefused(f"{why} (see `kngflow plan {args.spec}`); run again with --yes to run it anyway")
            if args.scheduler or args.scheduler_file:
                address = args.scheduler or json.loads(Path(args.scheduler_file).read_text())["address"]
                say(f"connecting to {address} (timeout {args.connect_timeout:g} s)")
            try:
                with busy_ports() as busy:  # distributed's warning about a busy port: one line of ours below
                    client = stack.enter_context(
                        connect(
                            scheduler=args.scheduler,
                            scheduler_file=args.scheduler_file,
                            cluster_file=args.cluster,
                            workers=args.workers,
                            dashboard_address=dashboard,
                            timeout=args.connect_timeout,
                            log_file=args.log_file,
                        )
                    )
            except OSError as exc:  # refused, unreachable, timed out (TimeoutError is an OSError)
                raise RunRefused(f"cannot connect to the Dask scheduler of {where}: {exc}") from None
            if args.min_workers:
                say(f"waiting for {args.min_workers} workers (timeout {args.connect_timeout:g} s)")
                try:
                    client.wait_for_workers(args.min_workers, timeout=args.connect_timeout)
                except TimeoutError:
                    raise RunRefused(f"--min-workers {args.min_workers}: only {len(client.nthreads())} workers "
                                     f"joined {where} within --connect-timeout {args.connect_timeout:g} s") from None
            # before anything is written: same kngflow, numpy, numba and plug-in modules everywhere
            check_workers(client, runtime_versions(plugin_modules(spec)))
            prepared = prepare_store(spec, args.store, replicate_chunk=args.replicate_chunk)
            nworkers = len(client.nthreads())
            for line in est.lines(nworkers) + est.cluster_lines(max(1, sum(client.nthreads().values()))):
                say(line)
            say(f"scheduler {client.scheduler.address}; {nworkers} workers")
            remote = args.scheduler or args.scheduler_file or args.cluster
            link = _dashboard_link(client) if (remote or dashboard) else None
            taken = [port for port, _used in busy]
            if link:
                say(f"dashboard: {link}" + (f" (port {taken[0]} is in use)" if taken else ""))
            elif taken:
                say(f"dashboard: none (port {taken[0]} is in use)")
            return run_sweep(
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
                worker_timeout=args.connect_timeout,
            )
    except (ClusterConfigError, VersionMismatch, SchedulerLost, StoreError) as exc:
        raise RunRefused(str(exc)) from None

"""What a run is pointed at, checked before anything starts: the paths it writes, Dask
addresses, a scheduler file, the dashboard's port and the deployment file
(:mod:`kngflow.sweep.deploy`).

Only the syntax of addresses and what is on this machine are checked: nothing is
started, contacted or created.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from kngflow.store.lock import writable_problem

from .deploy import ClusterConfigError, check_submit_command, load_cluster_config

__all__ = ["path_problem", "check_address", "check_scheduler_file", "check_dashboard_address", "run_target_problem"]

#: Schemes of Dask scheduler addresses.
_SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")
_HOST_RE = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?)$")


def _port_problem(port: str, lowest: int) -> str | None:
    if not port.isdigit() or not lowest <= int(port) <= 65535:
        return f"port must be an integer in {lowest}..65535, got {port!r}"
    return None


def check_address(address: str) -> str | None:
    """Why ``address`` is not a Dask scheduler address ``[SCHEME://]HOST:PORT`` (None if it is).

    Checks the syntax only (nothing is contacted): scheme one of tcp, tls, ws,
    wss, ucx; a host name, IPv4 or bracketed IPv6 address; a port in 1..65535.
    """
    scheme, sep, rest = address.rpartition("://")
    if sep and scheme not in _SCHEMES:
        return f"unknown scheme {scheme!r}; use one of {', '.join(_SCHEMES)}"
    host, sep, port = rest.rpartition(":")
    if not sep or not _HOST_RE.match(host):
        return "expected [tcp://]HOST:PORT, e.g. tcp://10.0.0.5:8786"
    return _port_problem(port, 1)


def check_scheduler_file(path) -> str | None:
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
    why = check_address(info["address"])
    return f"has a bad address {info['address']!r}: {why}" if why else None


def check_dashboard_address(address: str) -> str | None:
    """Why ``address`` is not a dashboard address ``[HOST]:PORT`` of this machine (None if it is).

    The port may be 0 (any free port); a host must be an address of this
    machine (it is bound to, nothing else is tried).
    """
    host, sep, port = address.rpartition(":")
    if not sep and address.isdigit():
        host, port = "", address
    elif not sep or (host and not _HOST_RE.match(host)):
        return "expected [HOST]:PORT, e.g. :8787 or 127.0.0.1:0"
    problem = _port_problem(port, 0)
    if problem or not host:
        return problem
    import socket

    try:
        infos = socket.getaddrinfo(host.strip("[]"), 0, type=socket.SOCK_STREAM)
        with socket.socket(infos[0][0], socket.SOCK_STREAM) as sock:
            sock.bind(infos[0][4])
    except OSError as exc:
        return f"host {host!r} is not an address of this machine: {exc.strerror or exc}"
    return None


def path_problem(option: str, path, *, directory: bool = True) -> str | None:
    """One line on why ``path`` given to ``option`` cannot be written (None if it can)."""
    p = Path(path)
    if directory:
        problem = writable_problem(p)
    elif p.is_dir():
        problem = "is a directory, not a file"
    elif not p.parent.is_dir():
        problem = f"cannot be created: directory {p.parent} does not exist"
    elif p.exists() and not os.access(p, os.W_OK):
        problem = "is not writable"
    else:
        problem = writable_problem(p.parent) and f"cannot be created: directory {p.parent} is not writable"
    return f"{option} {path} {problem}" if problem else None


def run_target_problem(args) -> str | None:
    """Why the store, log file or Dask target of ``kngflow run`` cannot work (None if they can);
    ``args`` holds ``store``, ``log_file``, ``scheduler``, ``scheduler_file``, ``no_dashboard``,
    ``dashboard_address``, ``cluster`` and ``workers`` (the parsed command line).

    Only the syntax of addresses and what is on this machine are checked;
    nothing is started, contacted or created.
    """
    problem = path_problem("--store", args.store) or (
        args.log_file and path_problem("--log-file", args.log_file, directory=False)
    )
    if problem:
        return problem
    if args.scheduler:
        why = check_address(args.scheduler)
        if why:
            return f"--scheduler {args.scheduler!r}: {why}"
    if args.scheduler_file:
        why = check_scheduler_file(args.scheduler_file)
        if why:
            return f"--scheduler-file {args.scheduler_file} {why}"
    if not args.no_dashboard and not (args.scheduler or args.scheduler_file):
        why = check_dashboard_address(args.dashboard_address)
        if why:
            return f"--dashboard-address {args.dashboard_address!r}: {why}"
    if args.cluster:
        try:
            cfg = load_cluster_config(args.cluster)
            check_submit_command(cfg)
        except ClusterConfigError as exc:
            return str(exc)
        if cfg["kind"] == "python" and args.workers:
            return f"--workers: not used with {args.cluster} (kind python); size the deployment in its options"
    return None

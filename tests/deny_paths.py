"""Dask worker preload for the integration tests: the worker may not touch the client's files.

``dask worker --preload tests/deny_paths.py`` with ``KNGFLOW_DENY_ROOT`` set (and
optionally ``KNGFLOW_ALLOW_ROOT``, a directory inside it) installs an audit hook
(PEP 578) in the worker process: opening, listing, creating, renaming or
removing any path under the denied root (except under the allowed one) raises
``PermissionError``.  The tests keep their stores under the denied root and the
workers' own directories under the allowed one, so a worker that opened a store
would fail its task.
"""

from __future__ import annotations

import os
import sys

DENY = os.environ.get("KNGFLOW_DENY_ROOT")
ALLOW = os.environ.get("KNGFLOW_ALLOW_ROOT")
#: Audit events whose leading arguments are paths (see the audit events table of the Python docs).
EVENTS = {
    "open", "os.listdir", "os.scandir", "os.mkdir", "os.remove", "os.rmdir", "os.rename", "os.truncate",
    "os.chdir", "os.chmod", "os.utime", "shutil.rmtree", "shutil.copyfile", "shutil.move",
}


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _hook(event: str, args: tuple) -> None:
    if event not in EVENTS:
        return
    for arg in args[:2]:
        if isinstance(arg, (str, bytes, os.PathLike)):
            path = os.path.realpath(os.fsdecode(arg))
            if _under(path, DENY) and not (ALLOW and _under(path, ALLOW)):
                raise PermissionError(f"worker may not access {path} ({event})")


if DENY:
    DENY = os.path.realpath(DENY)
    ALLOW = ALLOW and os.path.realpath(ALLOW)
    sys.addaudithook(_hook)

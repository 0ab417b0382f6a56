"""Dask worker preload of :func:`kngflow.sweep.cluster.local_cluster` (imported in each worker process).

The import runs in the worker process's main thread before the worker starts:

* SIGINT and SIGTERM no longer interrupt the worker.  Ctrl-C at the terminal
  (or ``kill`` of the process group) reaches every process of the group; the
  ``kngflow`` client, which gets the same signal, closes the cluster.  The
  worker only silences its logging (no tracebacks, no shutdown warnings), and
  after SIGTERM exits by itself within :data:`GRACE` seconds should no client
  close it.
* With :data:`~kngflow.sweep.quiet.LOG_FILE_ENV` set (``kngflow run
  --log-file``), the worker's stderr (its logging, warnings and anything else
  it prints) is appended to that file.  Without it, a heartbeat that meets the
  closing scheduler as the cluster closes logs nothing
  (:func:`~kngflow.sweep.quiet.drop_heartbeat_errors`).
"""

from __future__ import annotations

import os
import signal
import threading

from kngflow.sweep.quiet import LOG_FILE_ENV, drop_heartbeat_errors, silence

#: Seconds after SIGTERM before a worker that nobody closed exits.
GRACE = 10.0


def _on_signal(signum, frame):
    silence()
    if signum == signal.SIGTERM:
        timer = threading.Timer(GRACE, os._exit, args=(128 + signum,))
        timer.daemon = True
        timer.start()


def _setup() -> None:
    if threading.current_thread() is threading.main_thread():
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, _on_signal)
    path = os.environ.get(LOG_FILE_ENV)
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(fd, 2)
        os.close(fd)
    else:
        drop_heartbeat_errors()


_setup()

"""Keep an unattended run's terminal clean: signals, shutdown noise and log files.

Used by the ``kngflow`` command line (the client) and by the worker processes of
a local cluster (:mod:`kngflow.sweep.worker_preload`).

* :func:`exit_on_signals`: SIGINT and SIGTERM print one line and raise
  :class:`Interrupted` in the main thread, whose ``status`` is the
  conventional ``128 + signal`` (130, 143); from then on logging, warnings and
  the tracebacks of shutting-down threads are silenced.  A second signal
  exits at once.
* :func:`log_to_file`: the handlers that write logging to the terminal write
  to a file instead, and warnings go there too.
* :func:`drop_reconnect_errors`: ``distributed``'s own log lines about a lost
  scheduler stay off the terminal; the command line says it in one line.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import warnings
from collections.abc import Iterator

__all__ = ["Interrupted", "exit_on_signals", "silence", "log_to_file", "drop_reconnect_errors", "LOG_FILE_ENV",
           "SIGNALS"]

#: Signals that stop a run cleanly.
SIGNALS = (signal.SIGINT, signal.SIGTERM)

#: Environment variable naming the log file of the worker processes of a local cluster.
LOG_FILE_ENV = "KNGFLOW_LOG_FILE"


class Interrupted(BaseException):
    """The process received SIGINT or SIGTERM; ``status`` is the exit status (128 + signal)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.status = 128 + signum


def silence() -> None:
    """From now on nothing of logging, warnings or dying threads reaches the terminal."""
    logging.disable(logging.CRITICAL)
    warnings.simplefilter("ignore")
    threading.excepthook = lambda args: None
    sys.unraisablehook = lambda unraisable: None


@contextlib.contextmanager
def exit_on_signals(message: str) -> Iterator[None]:
    """Turn SIGINT/SIGTERM into one line on stderr and :class:`Interrupted`.

    Parameters
    ----------
    message : str
        The line printed (after ``kngflow: ``) when a signal arrives;
        ``{signal}`` is replaced by the signal's name, e.g.
        ``"interrupted by {signal}; run the same command again to resume"``.

    The previous handlers are restored on exit.  A second signal while the
    first one is being handled (closing the cluster can take seconds) exits at
    once with the same status.
    """
    received: list[int] = []

    def handler(signum, frame):
        if received:
            os._exit(128 + received[0])
        received.append(signum)
        silence()
        if _stop_progress_bars():
            sys.stderr.write("\n")  # end the bar's line
        print(f"kngflow: {message.format(signal=signal.Signals(signum).name)}", file=sys.stderr, flush=True)
        raise Interrupted(signum)

    previous = {s: signal.signal(s, handler) for s in SIGNALS}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _stop_progress_bars() -> bool:
    """Freeze every tqdm bar shown (it will not be drawn again); whether there was one."""
    tqdm = sys.modules.get("tqdm")
    shown = False
    for bar in list(tqdm.tqdm._instances) if tqdm else []:
        shown = shown or not bar.disable
        bar.disable = True
    return shown


def _terminal_handlers(logger: logging.Logger) -> list[logging.Handler]:
    return [
        h
        for h in logger.handlers
        if type(h) is logging.StreamHandler and getattr(h, "stream", None) in (sys.stderr, sys.stdout)
    ]


def log_to_file(path: str | os.PathLike) -> logging.Handler:
    """Send logging (and warnings) that would reach the terminal to the file ``path`` instead.

    Every logger that writes to stderr/stdout (Dask's ``distributed`` loggers
    among them) writes to ``path`` (appended) instead; the root logger gets the
    file handler too, so loggers without handlers of their own and
    ``warnings`` (through ``logging.captureWarnings``) end up there.  Returns
    the file handler.
    """
    handler = logging.FileHandler(path, mode="a", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(name)s %(levelname)s: %(message)s"))
    loggers = [logging.getLogger()] + [
        lg for lg in list(logging.root.manager.loggerDict.values()) if isinstance(lg, logging.Logger)
    ]
    for lg in loggers:
        terminal = _terminal_handlers(lg)
        for h in terminal:
            lg.removeHandler(h)
        if terminal or lg is logging.root:
            lg.addHandler(handler)
    if logging.root.level > logging.WARNING:
        logging.root.setLevel(logging.WARNING)
    logging.captureWarnings(True)
    return handler


class _LostScheduler(logging.Filter):
    """Drops the client's records about reconnecting to a scheduler that went away."""

    PREFIXES = ("Failed to reconnect to scheduler", "Lost connection to scheduler", "Not able to reconnect")

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = str(record.getMessage())
        except Exception:  # noqa: BLE001 - a malformed record is not ours to judge
            return True
        return not msg.startswith(self.PREFIXES)


def drop_reconnect_errors() -> None:
    """Keep ``distributed.client``'s "Failed to reconnect to scheduler ..." records off the terminal.

    A run that loses its scheduler stops with one line of its own
    (:class:`~kngflow.sweep.engine.SchedulerLost`); the client's error record about the same
    loss would be a second line.  Call it only when logging reaches the terminal (with
    :func:`log_to_file` the record belongs in the file).
    """
    lg = logging.getLogger("distributed.client")
    if not any(isinstance(f, _LostScheduler) for f in lg.filters):
        lg.addFilter(_LostScheduler())

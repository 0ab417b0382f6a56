"""Keep an unattended run's terminal clean: signals, shutdown noise and log files.

Used by the ``kngflow`` command line (the client) and by the worker processes of
a local cluster (:mod:`kngflow.sweep.worker_preload`).

* :func:`exit_on_signals`: SIGINT and SIGTERM raise :class:`Interrupted` in the
  main thread, whose ``status`` is the conventional ``128 + signal`` (130, 143),
  and which prints one line (saying how many cells a sweep saved); from then on
  logging, warnings and the tracebacks of shutting-down threads are silenced.  A
  second signal exits at once.
* :func:`log_to_file`: the handlers that write logging to the terminal write
  to a file instead, and warnings go there too.
* :func:`drop_reconnect_errors`: ``distributed``'s own log lines about a lost
  scheduler stay off the terminal; the command line says it in one line.
  :func:`drop_heartbeat_errors` does the same for a local worker's failed heartbeat
  as the cluster closes.
* :func:`progress_bar`: a tqdm bar on a terminal; off a terminal (a batch job's
  log) a plain line every :data:`PLAIN_INTERVAL` seconds instead of carriage-return
  updates.  Given the run's :class:`WorkLeft`, either says the time left from the
  estimated work left, not from the cells per second.
* :func:`busy_ports`: ``distributed``'s warning about a busy dashboard port,
  caught, so that the command line names the port used in its own line.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import signal
import statistics
import sys
import threading
import time
import warnings
from collections.abc import Iterator

__all__ = ["Interrupted", "exit_on_signals", "silence", "log_to_file", "drop_reconnect_errors", "drop_heartbeat_errors",
           "LOG_FILE_ENV", "SIGNALS", "progress_bar", "PlainProgress", "PLAIN_INTERVAL", "WorkLeft", "busy_ports"]

#: Set by :func:`silence`: nothing more is written to the terminal (progress lines included).
_SILENCED = threading.Event()

#: Signals that stop a run cleanly.
SIGNALS = (signal.SIGINT, signal.SIGTERM)

#: Environment variable naming the log file of the worker processes of a local cluster.
LOG_FILE_ENV = "KNGFLOW_LOG_FILE"


class Interrupted(BaseException):
    """The process received SIGINT or SIGTERM; ``status`` is the exit status (128 + signal).

    Its one line (``message``, with ``{signal}`` and ``{saved}`` filled in) is printed once,
    by :meth:`announce`: by the code that knows what was saved as soon as it is saved (a
    sweep, once its store writer has written every finished cell), or else as the
    :func:`exit_on_signals` block is left.
    """

    def __init__(self, signum: int, message: str = "interrupted by {signal}{saved}"):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.status = 128 + signum
        self.message = message
        self.announced = False

    def announce(self, saved: str = "") -> None:
        """Print the one line (once); ``saved`` says what was kept, e.g. ``"12 of 48 cells
        are saved"``."""
        if not self.announced:
            self.announced = True
            text = self.message.format(signal=signal.Signals(self.signum).name, saved=f"; {saved}" if saved else "")
            print(f"kngflow: {text}", file=sys.stderr, flush=True)


def silence() -> None:
    """From now on nothing of logging, warnings, progress lines or dying threads reaches the terminal."""
    _SILENCED.set()
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
        The line printed (after ``kngflow: ``) for a signal, by
        :meth:`Interrupted.announce`; ``{signal}`` is replaced by the signal's name and
        ``{saved}`` by what was saved (``"; 12 of 48 cells are saved"``, or nothing), e.g.
        ``"interrupted by {signal}{saved}; run the same command again to resume"``.

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
        _forward_to_children(signum)
        if _stop_progress_bars():
            sys.stderr.write("\n")  # end the bar's line
        raise Interrupted(signum, message)

    previous = {s: signal.signal(s, handler) for s in SIGNALS}
    try:
        yield
    except Interrupted as exc:
        exc.announce()  # unless what was saved said it already
        raise
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _forward_to_children(signum: int) -> None:
    """Pass the signal on to this process's child processes (the worker processes of a local
    cluster), as a terminal does to its process group: their preload
    (:mod:`kngflow.sweep.worker_preload`) then keeps them quiet while the cluster closes, so a
    signal sent to the client alone (``kill PID``, a batch system) prints no more than one sent
    to the group.  multiprocessing's resource tracker ignores both signals."""
    try:
        import psutil

        children = psutil.Process().children(recursive=True)
    except Exception:  # noqa: BLE001 - no psutil, or the process table cannot be read: nothing to pass on
        return
    for child in children:
        with contextlib.suppress(Exception):
            child.send_signal(signum)


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


class _Drop(logging.Filter):
    """Drops the records whose message starts with one of ``prefixes``."""

    def __init__(self, *prefixes: str):
        super().__init__()
        self.prefixes = prefixes

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            return not str(record.getMessage()).startswith(self.prefixes)
        except Exception:  # noqa: BLE001 - a malformed record is not ours to judge
            return True


def _add_filter(logger: str, *prefixes: str) -> None:
    lg = logging.getLogger(logger)
    if not any(isinstance(f, _Drop) and f.prefixes == prefixes for f in lg.filters):
        lg.addFilter(_Drop(*prefixes))


def drop_reconnect_errors() -> None:
    """Keep ``distributed.client``'s "Failed to reconnect to scheduler ..." and "Couldn't
    gather ... keys, rescheduling ..." records, ``distributed.batched``'s "Batched Comm
    Closed ..." (with its traceback) and the nannies' "Worker process still alive after ...
    seconds, killing" off the terminal.

    A run that loses its scheduler stops with one line of its own
    (:class:`~kngflow.sweep.engine.SchedulerLost`); the client's records about the same
    loss (a message to the scheduler under way as it went) would be more lines.  A local
    worker slow to exit as the cluster closes (a busy machine) is killed as planned: not
    news either; nor is a result lost with its worker before the client fetched it: the
    scheduler computes it again (and a run whose every worker left stops with one line of
    its own).  Call it only when logging reaches the terminal (with :func:`log_to_file`
    the record belongs in the file).
    """
    _add_filter("distributed.client", "Failed to reconnect to scheduler", "Lost connection to scheduler",
                "Not able to reconnect", "Couldn't gather")
    _add_filter("distributed.batched", "Batched Comm Closed")
    _add_filter("distributed.nanny", "Worker process still alive after")


def drop_heartbeat_errors() -> None:
    """Keep a local worker's "Failed to communicate with scheduler during heartbeat." record (an
    error with its traceback) off the terminal.

    A local cluster's scheduler runs in the client's process and closes with it, and a worker
    whose heartbeat is under way at that moment logs the closed stream; a scheduler lost in
    the middle of a run is reported by the client, in one line.  Called by the workers of a
    local cluster (:mod:`kngflow.sweep.worker_preload`) when their stderr is the terminal.
    """
    _add_filter("distributed.worker", "Failed to communicate with scheduler during heartbeat")


#: Seconds between two progress lines off a terminal.
PLAIN_INTERVAL = 30.0


class WorkLeft:
    """The time left of a run from its estimated work, corrected by what the cells done took.

    ``total``: the estimated seconds, on one core, of the cells to compute (the plan's cost
    model); ``threads``: the worker threads computing them (the run updates it as workers
    join and leave).  The time left is ``ratio · (total − done) / threads``, where ``ratio``
    is the median, over the blocks finished so far, of the measured release seconds of
    their cells over the estimated ones; the first block of each thread is left out (its
    releases load or compile the worker's kernels: hundreds of times their estimate), and
    before any other block the ratio is 1 (the plan's estimate).

    A pace read off the cells per second (tqdm's) overstated a short run's time left up to
    25-fold as its first cells finished: a sweep computes the largest n first, whose cells
    cost the most, and each worker starts with its kernels to load.  The work weighs each
    cell by its n; the median and the first blocks left out keep the start-up out."""

    def __init__(self, total: float, threads: int = 1):
        self.total, self.done, self.threads = float(total), 0.0, int(threads)
        self._ratios: list[float] = []
        self._blocks = 0

    def add(self, work: float, ratio: float | None = None) -> None:
        """``work`` more done, by a block whose cells took ``ratio`` times their estimate."""
        self.done += float(work)
        self._blocks += 1
        if self._blocks <= max(self.threads, 1):
            return  # a thread's first block: its worker's start-up
        if ratio is not None and math.isfinite(ratio) and ratio > 0 and len(self._ratios) < MAX_RATIOS:
            self._ratios.append(float(ratio))

    def seconds(self) -> float:
        ratio = statistics.median(self._ratios) if self._ratios else 1.0
        return ratio * max(self.total - self.done, 0.0) / max(self.threads, 1)


#: blocks whose ratio :class:`WorkLeft` keeps (the first ones: enough for a median)
MAX_RATIOS = 10_000


class PlainProgress:
    """Progress as plain lines, for a log file: ``cells: 120/3600 (3.3%), 4.1 cells/s, about 14 min left``
    at the start, as the first cells finish, then at most every ``interval`` seconds as cells
    finish, and once at the end.
    The time left comes from ``work`` (a :class:`WorkLeft` the caller keeps up to date) when it
    is given, else from the cells per second.

    The subset of tqdm's interface the sweep uses: ``update``, ``set_postfix``, ``n``, ``close``.
    Nothing is written once :func:`silence` ran (an interrupted run prints its one line only).
    """

    def __init__(self, total: int, initial: int = 0, *, stream=None, interval: float = PLAIN_INTERVAL,
                 desc: str = "cells", work: WorkLeft | None = None):
        self.total, self.n, self.initial = int(total), int(initial), int(initial)
        self.stream = stream if stream is not None else sys.stderr
        self.interval, self.desc = float(interval), desc
        self.postfix: dict = {}
        self.work = work
        self._t0 = self._last = time.monotonic()
        self._closed = False
        self._write()

    def _write(self) -> None:
        if _SILENCED.is_set():
            return
        elapsed = time.monotonic() - self._t0
        pct = 100.0 * self.n / self.total if self.total else 100.0
        line = f"{self.desc}: {self.n}/{self.total} ({pct:.1f}%)"
        rate = (self.n - self.initial) / elapsed if elapsed > 0 else 0.0
        if rate > 0:
            line += f", {rate:.3g} cells/s"
        left = self.work.seconds() if self.work else (self.total - self.n) / rate if rate > 0 else None
        if self.n < self.total and left is not None:
            line += f", about {_duration(left)} left"
        line += f", {_duration(elapsed)} elapsed"
        for k, v in self.postfix.items():
            line += f", {k} {v}"
        try:
            self.stream.write(line + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # a closed log: progress is not worth failing the run for
            pass

    def update(self, k: int = 1) -> None:
        first = self.n == self.initial  # the first finished cells: the first time left, at once
        self.n += int(k)
        now = time.monotonic()
        if first or now - self._last >= self.interval:
            self._last = now
            self._write()

    def set_postfix(self, refresh: bool = False, **values) -> None:
        self.postfix.update(values)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._write()


def _duration(seconds: float) -> str:
    seconds = max(0.0, float(seconds))
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def progress_bar(total: int, initial: int = 0, *, stream=None, interval: float | None = None,
                 work: WorkLeft | None = None):
    """A tqdm bar when ``stream`` (default stderr) is a terminal, else :class:`PlainProgress`
    (plain lines every ``interval`` seconds, default :data:`PLAIN_INTERVAL`).  ``work``: the
    run's :class:`WorkLeft`, which then gives the time left shown."""
    stream = stream if stream is not None else sys.stderr
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    if not tty:
        return PlainProgress(total, initial, stream=stream, interval=PLAIN_INTERVAL if interval is None else interval,
                             work=work)
    from tqdm import tqdm

    kw = dict(total=total, initial=initial, unit="cell", desc="cells", dynamic_ncols=True, smoothing=0.1, file=stream)
    if work is None:
        return tqdm(**kw)

    class Bar(tqdm):  # the time left from the work, where tqdm's would come from the cells per second
        failed = 0

        def update(self, n=1):
            parts = [f"about {_duration(work.seconds())} left"] if self.n + n < self.total else []
            self.set_postfix_str(", ".join(parts + [f"failed {self.failed}"] * bool(self.failed)), refresh=False)
            return super().update(n)

        def set_postfix(self, ordered_dict=None, refresh=True, failed=0, **values):
            self.failed = failed  # shown from the next update on

    return Bar(bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}, {rate_fmt}{postfix}]", **kw)


_BUSY = re.compile(r"Port (\d+) is already in use.*?on port (\d+) instead", re.S)


@contextlib.contextmanager
def busy_ports() -> Iterator[list[tuple[int, int]]]:
    """Catch ``distributed``'s "Port N is already in use ... Hosting the HTTP server on port M
    instead" warnings; the list yielded fills with ``(N, M)`` pairs.  Other warnings pass."""
    found: list[tuple[int, int]] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield found
    for w in caught:
        m = _BUSY.search(str(w.message))
        if m:
            found.append((int(m.group(1)), int(m.group(2))))
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)

"""One run at a time per store: a lock file next to the store.

The lock of the store ``results.zarr`` is the file ``results.zarr.lock`` beside
it (outside the zarr hierarchy, so ``xr.open_zarr`` never sees it).  The run
holding it keeps an exclusive ``flock`` on the file and has written its host,
process id and start time into it; the file is removed when the run ends, on
every exit path that Python sees (normal end, exception, SIGINT/SIGTERM turned
into an exception).

A run killed outright (``kill -9``, a crash) leaves the file behind, but the
kernel drops its ``flock`` with the process.  The next run on the same host
gets the ``flock``, recognises the lock as stale and takes it over, saying so.
A lock written on another host cannot be checked from here (its process id
means nothing locally): it is refused with the instruction to delete the file
if that run is gone.
"""

from __future__ import annotations

import datetime
import fcntl
import json
import os
import socket
import sys
from pathlib import Path

from .zarrstore import StoreError

__all__ = ["StoreLocked", "RunLock", "lock_path", "writable_problem"]


class StoreLocked(StoreError):
    """Another run holds the store's lock; the message says which (host, pid, since)."""


def lock_path(store: str | os.PathLike) -> Path:
    """The lock file of ``store``: ``STORE.lock`` in the same directory."""
    p = Path(os.path.abspath(store))
    return p.with_name(p.name + ".lock")


def _nearest_existing(p: Path) -> Path:
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def writable_problem(path: str | os.PathLike) -> str | None:
    """Why a directory at ``path`` (existing or to be created) cannot be written, or None.

    ``path`` must be a directory if it exists; it, and the nearest existing
    directory above it (where a missing ``path`` or a lock file is created),
    must be writable.
    """
    p = Path(os.path.abspath(path))
    if p.exists() and not p.is_dir():
        return "is a file, not a directory"
    for d in ([p] if p.exists() else []) + [_nearest_existing(p.parent)]:
        if not d.is_dir():
            return f"cannot be created: {d} is a file, not a directory"
        if not os.access(d, os.W_OK | os.X_OK) or not (_mounted_writable(d) if d == p else _can_create(d)):
            return "is not writable" if d == p else f"cannot be written: directory {d} is not writable"
    return None


def _mounted_writable(d: Path) -> bool:
    """Whether the file system of ``d`` is mounted read-write (checked without writing)."""
    return not os.statvfs(d).f_flag & os.ST_RDONLY


def _can_create(d: Path) -> bool:
    """Whether a file can be created in ``d`` (os.access says yes to root on read-only mounts and /proc)."""
    probe = d / f".kngflow-probe-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except OSError:
        return False
    os.close(fd)
    os.unlink(probe)
    return True


def _describe(info: dict) -> str:
    return f"host {info.get('host', '?')}, pid {info.get('pid', '?')}, since {info.get('since', '?')}"


def _read(fd: int) -> dict:
    try:
        data = os.pread(fd, 65536, 0)
        info = json.loads(data) if data else {}
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


class RunLock:
    """Exclusive lock of a store for one run; a context manager.

    Parameters
    ----------
    store : path
        The store directory (it need not exist yet).
    log : callable, default print to stderr
        Receives the line saying that a stale lock was taken over.

    Raises
    ------
    StoreLocked
        On entry, when another live run holds the lock (or a lock written on
        another host exists).
    """

    def __init__(self, store: str | os.PathLike, log=None):
        self.store = Path(store)
        self.path = lock_path(store)
        self.log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self._fd: int | None = None
        self._made: list[Path] = []

    def acquire(self) -> None:
        host = socket.gethostname()
        parent = self.path.parent
        while not parent.exists():
            self._made.append(parent)
            parent = parent.parent
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                info = _read(fd)
                os.close(fd)
                self._remove_made()
                raise StoreLocked(
                    f"store {self.store} is in use by another run ({_describe(info)}); "
                    f"wait for it to finish or stop it (lock file {self.path})"
                ) from None
            try:
                mine = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                mine = False
            if mine:
                break
            os.close(fd)  # the holder removed the file meanwhile: lock the new one
        previous = _read(fd)
        if previous and previous.get("host") != host:
            os.close(fd)
            raise StoreLocked(
                f"store {self.store} has the lock of a run on another host ({_describe(previous)}); "
                f"if that run is no longer running, delete {self.path}"
            )
        if previous:
            self.log(f"kngflow: taking over the stale lock of a run that ended without releasing it "
                     f"({_describe(previous)})")
        since = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        info = {"host": host, "pid": os.getpid(), "since": since, "argv": sys.argv}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        os.fsync(fd)
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            if os.path.samestat(os.fstat(self._fd), os.stat(self.path)):
                os.unlink(self.path)
        except FileNotFoundError:
            pass
        finally:
            os.close(self._fd)
            self._fd = None
        self._remove_made()

    def _remove_made(self) -> None:
        """Remove the directories :meth:`acquire` created, unless a store was made in them."""
        for d in self._made:
            try:
                d.rmdir()
            except OSError:
                break
        self._made = []

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

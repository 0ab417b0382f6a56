"""Real ``dask scheduler`` and ``dask worker`` processes on 127.0.0.1 for the tests.

The workers run in their own directory and cannot touch the client's files
(``deny_paths.py``: any access to the tests' stores raises).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from kngflow.sweep.cluster import WORKER_ENV

DENY_PATHS = Path(__file__).with_name("deny_paths.py")


#: the longest wait for a state the tests need (a scheduler up, workers joined, the cluster idle):
#: an upper bound, never a delay -- every wait polls and returns as soon as the state is reached,
#: and a loaded 2-core machine can take a minute to start a worker that imports numba
READY_TIMEOUT = 300


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group of ``proc`` (started with ``start_new_session``) and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not fail
        pass


class DaskProcesses:
    """A real ``dask scheduler`` and ``dask worker`` processes on 127.0.0.1."""

    def __init__(self, root: Path, deny: Path):
        self.root = root
        self.scheduler_file = root / "scheduler.json"
        self.env = dict(os.environ, **WORKER_ENV, KNGFLOW_DENY_ROOT=str(deny), KNGFLOW_ALLOW_ROOT=str(root))
        self.env.pop("DASK_SCHEDULER_ADDRESS", None)
        self.workers: dict[str, subprocess.Popen] = {}
        self._count = 0
        self.scheduler = None
        self.client = None

    def start(self) -> None:
        from distributed import Client

        self.scheduler = self._spawn(
            "scheduler",
            ["dask", "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
             "--dashboard-address", "127.0.0.1:0", "--scheduler-file", str(self.scheduler_file)],
        )
        deadline = time.monotonic() + READY_TIMEOUT
        while not self._scheduler_file_ready():
            if self.scheduler.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("dask scheduler did not start:\n" + self.log("scheduler"))
            time.sleep(0.05)
        self.address = json.loads(self.scheduler_file.read_text())["address"]
        # not the default scheduler: the tests read stores in this process, out of the workers' reach
        self.client = Client(scheduler_file=str(self.scheduler_file), timeout=READY_TIMEOUT, set_as_default=False)

    def _scheduler_file_ready(self) -> bool:
        try:
            return bool(json.loads(self.scheduler_file.read_text()).get("address"))
        except (OSError, ValueError):
            return False

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        exe = Path(sys.executable).with_name(args[0])
        log = open(self.root / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        try:
            return subprocess.Popen(
                [str(exe), *args[1:]], stdout=log, stderr=subprocess.STDOUT, env=self.env,
                cwd=self.root, start_new_session=True,
            )
        finally:
            log.close()

    def log(self, name: str) -> str:
        p = self.root / f"{name}.log"
        return p.read_text(errors="replace")[-4000:] if p.exists() else ""

    def worker_names(self) -> dict[str, str]:
        """``{address: name}`` of the workers the scheduler knows."""
        info = self.client.scheduler_info(n_workers=-1)["workers"]
        return {addr: str(w.get("name")) for addr, w in info.items()}

    def scale(self, k: int) -> None:
        """Exactly ``k`` workers connected (kill the newest ones or start more)."""
        while len(self.workers) > k:
            name = sorted(self.workers, key=lambda s: int(s[1:]))[-1]
            kill_group(self.workers.pop(name))
        while len(self.workers) < k:
            self.start_worker()
        self.wait_for_workers(k)

    def start_worker(self, *extra: str) -> str:
        """Start one ``dask worker --nthreads 1`` (with ``extra`` arguments); its name."""
        self._count += 1
        name = f"w{self._count}"
        self.workers[name] = self._spawn(
            name,
            ["dask", "worker", "--nthreads", "1", "--no-dashboard", "--name", name, "--host", "127.0.0.1",
             "--local-directory", str(self.root / name), "--scheduler-file", str(self.scheduler_file),
             "--preload", str(DENY_PATHS), *extra],
        )
        return name

    def wait_for_workers(self, k: int, timeout: float = READY_TIMEOUT) -> None:
        """Wait until the scheduler knows exactly the ``k`` workers started here."""
        self.client.wait_for_workers(k, timeout=timeout)
        deadline = time.monotonic() + timeout
        while set(self.worker_names().values()) != set(self.workers):
            for name, proc in self.workers.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"dask worker {name} exited with {proc.returncode}:\n{self.log(name)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"workers {sorted(self.workers)} != {self.worker_names()}")
            time.sleep(0.05)

    def kill_worker(self, name: str) -> None:
        """kill -9 a worker (its nanny and worker process: the whole process group)."""
        kill_group(self.workers.pop(name))

    def wait_idle(self, timeout: float = READY_TIMEOUT) -> None:
        """Wait until neither the scheduler nor any worker holds a task (orphans finished)."""

        def scheduler_tasks(dask_scheduler):
            return len(dask_scheduler.tasks)

        def worker_tasks(dask_worker):
            return len(dask_worker.state.tasks) + dask_worker.state.executing_count

        deadline = time.monotonic() + timeout
        quiet = 0
        while quiet < 3:
            busy = self.client.run_on_scheduler(scheduler_tasks) + sum(self.client.run(worker_tasks).values())
            quiet = quiet + 1 if busy == 0 else 0
            if time.monotonic() > deadline:
                raise RuntimeError("the cluster did not become idle")
            time.sleep(0.05)

    def close(self) -> None:
        """Close the client, then kill -9 every worker and the scheduler (whatever was started)."""
        try:
            if self.client is not None:
                self.client.close(timeout=10)
        except Exception:  # noqa: BLE001 - teardown goes on
            pass
        finally:
            for name in list(self.workers):
                kill_group(self.workers.pop(name))
            if self.scheduler is not None:
                kill_group(self.scheduler)

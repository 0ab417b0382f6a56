"""The command line in unattended use: signals, pre-flight checks, the store lock, status --json.

Every test runs the real ``kngflow`` entry point in a subprocess (real Dask processes on
127.0.0.1 where a run starts).  Bad input must give one ``kngflow: error:`` line, exit 2,
create nothing and start no cluster (nothing on stdout: not even "connecting to").
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
import xarray as xr
from testkit import EXPONENTIAL, kngflow_cli, kngflow_command, tiny_spec

import kngflow
from kngflow import store as st
from kngflow.cli import build_parser
from kngflow.store.lock import RunLock, StoreLocked, lock_path
from kngflow.sweep import CostModel, parse_spec, plan_tasks, prepare_store, run_task
from kngflow.sweep.engine import mark_task_failed

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "workflows" / "smoke.toml"

#: A study that computes for minutes: long enough to be interrupted mid-run.
SLOW_SPEC = tiny_spec(n=(20, 50), replicates=20_000, extra=EXPONENTIAL).replace("steps = 200", "steps = 20_000")


def one_error_line(proc, *patterns: str) -> str:
    """stderr is exactly one ``kngflow: error:`` line matching every pattern."""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kngflow: error: "), proc.stderr
    for pat in patterns:
        assert re.search(pat, lines[0]), (pat, lines[0])
    return lines[0]


def start_run(spec: Path, store: Path, *extra, progress: bool = False) -> subprocess.Popen:
    """``kngflow run`` in its own session (process group), as a terminal would start it."""
    return subprocess.Popen(
        [*kngflow_command(), "run", str(spec), "--store", str(store), "--workers", "2", "--no-dashboard",
         *([] if progress else ["--no-progress"]), *map(str, extra)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )


def wait_computing(proc: subprocess.Popen, store: Path, timeout: float = 300) -> None:
    """Until the store holds the first results (the run is computing)."""
    t0 = time.monotonic()
    while not (store / "zarr.json").exists() or not st.read_flags(store)[0].any():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - t0 < timeout, "the run did not start"
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()


def alive(pids) -> list[int]:
    """The processes of ``pids`` still running (zombies are gone)."""
    out = []
    for p in pids:
        try:
            if psutil.Process(p).status() != "zombie":
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def wait_gone(pids, timeout: float = 60) -> list[int]:
    """Poll until every process of ``pids`` has ended (at most ``timeout`` s); those still running."""
    deadline = time.monotonic() + timeout
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive(pids)


def wait_for_text(path: Path, text: str, timeout: float = 120) -> None:
    """Poll the file ``path`` until it holds ``text``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        time.sleep(0.1)
    raise AssertionError(f"{path} did not get {text!r} within {timeout:g} s")


def _worker_started(pid: int, log: Path) -> bool:
    """Whether worker process ``pid`` has run kngflow's worker preload, which installs its
    signal handlers and then points its stderr at ``log`` (``--log-file``); before that, a
    SIGINT is the starting interpreter's KeyboardInterrupt traceback."""
    try:
        return any(f.fd == 2 and Path(f.path) == log.resolve() for f in psutil.Process(pid).open_files())
    except psutil.Error:
        return False


def worker_pids(proc: subprocess.Popen) -> list[int]:
    kids = psutil.Process(proc.pid).children(recursive=True)
    return [k.pid for k in kids if any("spawn_main" in a for a in k.cmdline())]


# ----------------------------------------------------------------------------- signals
PROGRESS_LINE = re.compile(r"cells: \d+/\d+ \(\d+\.\d%\)(, [\w./ ]+)*")


@pytest.mark.parametrize(
    "sig, status, progress, target",
    [(signal.SIGINT, 130, True, "group"), (signal.SIGTERM, 143, False, "group"),
     (signal.SIGINT, 130, False, "client"), (signal.SIGTERM, 143, True, "client")],
    ids=["SIGINT-group", "SIGTERM-group", "SIGINT-client", "SIGTERM-client"],
)
@pytest.mark.slow
def test_signal_prints_one_line(sig, status, progress, target, tmp_path):
    """The terminal signals every process of the group (client, scheduler, nannies, workers);
    ``kill PID`` or a batch system signals the client alone, which passes it on to its local
    workers: either way stderr holds the one line (after the plain progress lines, if any)."""
    spec = tmp_path / "slow.toml"
    spec.write_text(SLOW_SPEC)
    store = tmp_path / "s.zarr"
    proc = start_run(spec, store, progress=progress)
    try:
        wait_computing(proc, store)
        workers = worker_pids(proc)
        assert len(workers) == 2
        if target == "group":
            os.killpg(proc.pid, sig)
        else:
            os.kill(proc.pid, sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == status, out + err
    line = re.compile(rf"kngflow: interrupted by {sig.name}; (\d+) of (\d+) cells are saved; "
                      r"run the same command again to resume")
    lines = err.splitlines()
    saved = line.fullmatch(lines[-1]) if lines else None
    assert saved and "\r" not in err, err
    if progress:  # off a terminal: plain progress lines before it, at least the first one
        assert lines[:-1] and all(PROGRESS_LINE.fullmatch(x) for x in lines[:-1]), err
    else:
        assert len(lines) == 1, err
    assert not lock_path(store).exists()
    assert not wait_gone(workers)
    # what was computed is in the store and readable, and the line said how much
    ds = xr.open_zarr(store)
    assert ds.done.sum() > 0
    assert (int(saved.group(1)), int(saved.group(2))) == (int(ds.done.sum()), ds.done.size), err


@pytest.mark.slow
@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_signal_on_a_separate_dask_scheduler_prints_one_line(sig, status, tmp_path):
    """A run on a ``dask scheduler`` with two ``dask worker`` processes (each in its own
    session, as on a cluster): the signal reaches the client alone; its stderr is the one line,
    and the scheduler and workers stay up for the next run."""
    from daskprocs import DaskProcesses

    runs = tmp_path / "runs"
    runs.mkdir()
    procs = DaskProcesses(tmp_path / "dask", deny=runs)
    (tmp_path / "dask").mkdir()
    try:
        procs.start()
        procs.scale(2)
        spec = runs / "slow.toml"
        spec.write_text(SLOW_SPEC)
        store = runs / "s.zarr"
        proc = subprocess.Popen(
            [*kngflow_command(), "run", str(spec), "--store", str(store), "--scheduler-file",
             str(procs.scheduler_file), "--no-progress"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            wait_computing(proc, store)
            os.kill(proc.pid, sig)
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        assert proc.returncode == status, out + err
        assert re.fullmatch(rf"kngflow: interrupted by {sig.name}; \d+ of \d+ cells are saved; run the same command "
                            r"again to resume\n", err), err
        assert not lock_path(store).exists()
        assert all(p.poll() is None for p in [procs.scheduler, *procs.workers.values()])
    finally:
        procs.close()


@pytest.mark.slow
def test_busy_dashboard_port_gives_one_line_naming_the_port_used(tmp_path):
    """distributed's "Port N is already in use ... UserWarning" stays off the terminal: one line
    of ours names the busy port and the dashboard's address."""
    (tmp_path / "spec.toml").write_text(tiny_spec(replicates=2))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = kngflow_cli("run", tmp_path / "spec.toml", "--store", tmp_path / "s.zarr", "--workers", 1,
                           "--dashboard-address", f"127.0.0.1:{port}", "--no-progress")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == "", proc.stderr
    lines = [x for x in proc.stdout.splitlines() if x.startswith("dashboard:")]
    assert len(lines) == 1 and re.fullmatch(rf"dashboard: http://127\.0\.0\.1:(\d+)/status \(port {port} is in use\)",
                                            lines[0]), proc.stdout
    assert lines[0].split(":")[3].split("/")[0] != str(port)
    assert "UserWarning" not in proc.stdout + proc.stderr


@pytest.mark.slow
def test_progress_off_a_terminal_is_plain_lines(tmp_path):
    """stderr to a file (a batch job's log): plain progress lines, no carriage returns; the last
    one at 100 %."""
    (tmp_path / "spec.toml").write_text(tiny_spec(replicates=6))
    with open(tmp_path / "err.log", "w") as log:
        proc = subprocess.run([*kngflow_command(), "run", str(tmp_path / "spec.toml"), "--store",
                               str(tmp_path / "s.zarr"), "--workers", "1", "--no-dashboard"],
                              stdout=subprocess.PIPE, stderr=log, text=True, timeout=300)
    err = (tmp_path / "err.log").read_text()
    assert proc.returncode == 0, proc.stdout + err
    lines = err.splitlines()
    assert "\r" not in err and 2 <= len(lines) <= 10, err
    assert all(PROGRESS_LINE.fullmatch(x) for x in lines), err
    assert lines[0].startswith("cells: 0/48 (0.0%)") and lines[-1].startswith("cells: 48/48 (100.0%)"), err


@pytest.mark.slow
def test_progress_on_a_terminal_is_a_bar(tmp_path):
    """Control of the test above: with stderr on a terminal (a pseudo-terminal here) the
    progress is tqdm's bar, redrawn in place with carriage returns."""
    import fcntl
    import pty
    import struct
    import termios

    (tmp_path / "spec.toml").write_text(tiny_spec(replicates=6))
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # 24 x 120: room for the bar
    try:
        proc = subprocess.Popen([*kngflow_command(), "run", str(tmp_path / "spec.toml"), "--store",
                                 str(tmp_path / "s.zarr"), "--workers", "1", "--no-dashboard"],
                                stdout=subprocess.PIPE, stderr=slave, text=True)
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # the terminal closed: the run exited
                break
            if not data:
                break
            chunks.append(data)
        out = proc.communicate(timeout=300)[0]
    finally:
        os.close(master)
    err = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == 0, out + err
    assert "\r" in err and re.search(r"cells: 100%.*48/48", err), err
    assert not re.search(r"^cells: \d+/\d+ \(", err, re.M)  # no plain lines on a terminal


@pytest.mark.slow
def test_log_file_takes_the_logs_of_client_and_workers(tmp_path):
    """A killed worker makes the nanny warn and its replacement log: all of it goes to the file."""
    spec = tmp_path / "slow.toml"
    spec.write_text(SLOW_SPEC)
    store, log = tmp_path / "s.zarr", tmp_path / "logs" / "run.log"
    log.parent.mkdir()
    proc = start_run(spec, store, "--log-file", log)
    try:
        wait_computing(proc, store)
        before = worker_pids(proc)
        os.kill(before[0], signal.SIGKILL)
        wait_for_text(log, "Restarting worker")  # the nanny notices and restarts the worker
        # the replacement (a pid not seen before: the other worker alone is no sign of it) must
        # be past its interpreter's start-up before the group's SIGINT (a signal there is
        # Python's own KeyboardInterrupt traceback, not kngflow's output)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            now = [p for p in worker_pids(proc) if p != before[0]]
            if set(now) - set(before) and all(_worker_started(p, log) for p in now):
                break
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, out + err
    assert re.fullmatch(r"kngflow: interrupted by SIGINT; \d+ of \d+ cells are saved; run the same command again "
                        r"to resume\n", err), err
    text = log.read_text()
    assert re.search(r"^\S+ \S+ \d+ distributed\.nanny WARNING: Restarting worker", text, re.M), text


@pytest.mark.slow
def test_local_workers_ignore_signals_and_write_stderr_to_the_log_file(tmp_path):
    from distributed import Client

    from kngflow.sweep.cluster import local_cluster

    def probe():
        # one write() per line: print() writes text and newline separately, and the two
        # workers' writes may interleave in the shared (O_APPEND) file
        sys.stderr.write("written by a worker\n")
        sys.stderr.flush()
        return signal.getsignal(signal.SIGINT).__module__, signal.getsignal(signal.SIGTERM).__module__

    log = tmp_path / "workers.log"
    with local_cluster(2, dashboard_address=None, log_file=log) as cluster, Client(cluster) as client:
        handlers = client.run(probe)
    assert list(handlers.values()) == [("kngflow.sweep.worker_preload",) * 2] * 2
    assert log.read_text().count("written by a worker") == 2


def _log_records():
    """In a worker: a failed heartbeat as distributed logs it (an error with its traceback),
    then another error of the same logger; whether kngflow's filter is on that logger."""
    import logging

    from kngflow.sweep import quiet

    lg = logging.getLogger("distributed.worker")
    try:
        raise OSError("Stream is closed: " + "a test record")  # the traceback quotes this line
    except OSError:
        lg.exception("Failed to communicate with scheduler during heartbeat.")
    lg.error("another worker error")
    return any(isinstance(f, quiet._Drop) for f in lg.filters)


@pytest.mark.slow
def test_a_local_workers_failed_heartbeat_at_close_stays_off_the_terminal(tmp_path, capfd):
    """The closing scheduler of a local cluster can meet a worker's heartbeat; distributed then
    logs the closed stream with a traceback (seen once at the end of a successful run).  With a
    log file it goes there; without, it stays off the terminal while other errors do not.
    The second cluster starts in the same process as the first: its workers do not inherit
    the first one's log file (the nanny copies pre-spawn variables into this process for good)."""
    from distributed import Client

    from kngflow.sweep.cluster import local_cluster

    log = tmp_path / "workers.log"
    for log_file in (log, None):
        with local_cluster(2, dashboard_address=None, log_file=log_file) as cluster, Client(cluster) as client:
            filtered = list(client.run(_log_records).values())
        assert filtered == [log_file is None] * 2
    text, err = log.read_text(), capfd.readouterr().err
    for out, to_file in ((text, True), (err, False)):
        assert out.count("another worker error") == 2, out
        # the test's own records (a worker's real heartbeat may meet the closing scheduler too)
        assert out.count("Stream is closed: a test record") == (2 if to_file else 0), out
        assert ("during heartbeat" in out) == to_file, out
        assert ("Traceback" in out) == to_file, out


def test_the_clients_records_of_a_lost_scheduler_or_result_stay_off_the_terminal(capfd):
    """A run's client reports a lost scheduler (or every worker gone) in one line of its own:
    distributed's records of the same events (a message to the scheduler under way as it went,
    with its traceback; a result lost with its worker, which the scheduler computes again) do
    not reach the terminal, while the other records of the same loggers do."""
    import logging

    from kngflow.sweep.quiet import _Drop, drop_reconnect_errors

    records = [("distributed.batched", "Batched Comm Closed <TCP (closed) Client->Scheduler>"),
               ("distributed.client", "Couldn't gather 1 keys, rescheduling ('kngflow-a4788eb0',)"),
               ("distributed.client", "Failed to reconnect to scheduler after 3.00 seconds, closing client")]
    handler = logging.StreamHandler()  # a terminal handler, as distributed's logging config sets up
    loggers = {name: logging.getLogger(name) for name, _ in records}

    def no_filters():
        for lg in loggers.values():
            lg.filters = [f for f in lg.filters if not isinstance(f, _Drop)]

    no_filters()  # as in a fresh client process
    for lg in loggers.values():
        lg.addHandler(handler)
    try:
        for shown in (True, False):
            if not shown:
                drop_reconnect_errors()
            for name, message in records:
                try:
                    raise OSError("Stream is closed")
                except OSError:
                    loggers[name].warning(message, exc_info=True)
            loggers["distributed.client"].warning("another client warning")
            err = capfd.readouterr().err
            assert err.count("another client warning") == 1, err
            for _, message in records:  # without the filters every record shows: the control
                assert (message in err) == shown, err
            assert ("Traceback" in err) == shown, err
    finally:
        for lg in loggers.values():
            lg.removeHandler(handler)
        no_filters()


# ----------------------------------------------------------------------------- pre-flight
def _dead_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


PREFLIGHT = {
    # name: (arguments after SPEC --store STORE, pattern of the error line)
    "scheduler garbage": (["--scheduler", "garbage"], r"--scheduler 'garbage': expected \[tcp://\]HOST:PORT"),
    "scheduler port": (["--scheduler", "tcp://127.0.0.1:99999"], r"port must be an integer in 1\.\.65535, got '99999'"),
    "scheduler scheme": (["--scheduler", "http://127.0.0.1:8786"], r"unknown scheme 'http'"),
    "scheduler file port": (["--scheduler-file", "{tmp}/badport.json"], r"--scheduler-file \S+ has a bad address"),
    "dashboard garbage": (["--dashboard-address", "abc"], r"--dashboard-address 'abc': expected \[HOST\]:PORT"),
    "dashboard port": (["--dashboard-address", ":70000"], r"--dashboard-address ':70000': port must be"),
    "dashboard host": (["--dashboard-address", "192.0.2.1:8787"], r"not an address of this machine"),
    "slurm without sbatch": (["--cluster", str(REPO / "cluster" / "slurm.yaml")], r"cluster\.kind: slurm submits jobs with sbatch, which is not on PATH"),
    "pbs without qsub": (["--cluster", str(REPO / "cluster" / "pbs.yaml")], r"cluster\.kind: pbs submits jobs with qsub"),
    "unknown local option": (["--cluster", "{tmp}/colour.yaml"], r"cluster\.options\.colour: unknown option for kind local"),
    "unknown slurm option": (["--cluster", "{tmp}/slurm.yaml"], r"cluster\.options\.walltme: unknown option for kind slurm; did you mean walltime"),
    "log file is a directory": (["--log-file", "{tmp}"], r"--log-file \S+ is a directory"),
    "log file directory missing": (["--log-file", "{tmp}/logs/run.log"], r"--log-file \S+ cannot be created: directory \S+logs does not exist"),
}


@pytest.mark.parametrize("case", list(PREFLIGHT))
def test_bad_target_is_refused_before_any_cluster_starts(case, tmp_path, monkeypatch):
    args, pattern = PREFLIGHT[case]
    (tmp_path / "spec.toml").write_text(tiny_spec())
    (tmp_path / "badport.json").write_text(json.dumps({"address": "tcp://127.0.0.1:123456"}))
    (tmp_path / "colour.yaml").write_text("kind: local\noptions: {colour: red}\n")
    (tmp_path / "slurm.yaml").write_text("kind: slurm\noptions: {cores: 1, memory: 1GiB, walltme: '01:00:00'}\n")
    listing = sorted(tmp_path.iterdir())
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(kngflow_command()[0]).parent), "/usr/bin", "/bin"])}
    assert shutil.which("sbatch", path=env["PATH"]) is None and shutil.which("qsub", path=env["PATH"]) is None
    args = [a.format(tmp=tmp_path) for a in args]
    # refused before any cluster starts: in this process (kngflow.cli.main), on that PATH
    monkeypatch.setenv("PATH", env["PATH"])
    proc = kngflow_cli("run", tmp_path / "spec.toml", "--store", tmp_path / "new.zarr", *args, process=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    one_error_line(proc, pattern)
    assert proc.stdout == ""  # no "connecting to", no scheduler
    assert sorted(tmp_path.iterdir()) == listing


@pytest.mark.slow
def test_connecting_says_where_and_how_long(tmp_path):
    (tmp_path / "spec.toml").write_text(tiny_spec())
    dead = _dead_address()
    proc = kngflow_cli("run", tmp_path / "spec.toml", "--store", tmp_path / "s.zarr", "--scheduler", dead,
                       "--connect-timeout", "1.5")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == [f"connecting to {dead} (timeout 1.5 s)"]
    one_error_line(proc, rf"cannot connect to the Dask scheduler of {dead}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.toml"]


def test_store_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "spec.toml").write_text(tiny_spec())
    (tmp_path / "s.zarr").write_text("not a directory\n")
    proc = kngflow_cli("run", tmp_path / "spec.toml", "--store", tmp_path / "s.zarr", "--workers", 1, process=False)
    assert proc.returncode == 2
    one_error_line(proc, r"--store \S+s\.zarr is a file, not a directory")
    assert proc.stdout == "" and (tmp_path / "s.zarr").read_text() == "not a directory\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.zarr", "spec.toml"]


@pytest.fixture
def readonly_dir():
    """A read-only directory that a test can hand to the CLI, and the user to run it as.

    Root writes into read-only directories, so as root the CLI runs as ``nobody`` (setpriv).
    """
    if os.geteuid() == 0 and not shutil.which("setpriv"):
        pytest.skip("running as root without setpriv: a read-only directory is writable")
    base = Path(tempfile.mkdtemp(prefix="kngflow-ro-"))
    base.chmod(0o755)
    (base / "ro").mkdir()
    (base / "spec.toml").write_text(tiny_spec())
    (base / "spec.toml").chmod(0o644)
    (base / "ro").chmod(0o555)
    prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
    (base / "cache").mkdir(mode=0o777)
    (base / "cache").chmod(0o777)  # numba's cache, where that user can write
    env = {**os.environ, "NUMBA_CACHE_DIR": str(base / "cache")}

    def cli(*args):
        return subprocess.run([*prefix, *kngflow_command(), *map(str, args)], capture_output=True, text=True,
                              timeout=120, cwd=base, env=env)

    yield base, cli
    (base / "ro").chmod(0o755)
    shutil.rmtree(base)


@pytest.mark.parametrize("store", ["ro/s.zarr", "ro/deeper/s.zarr"])
@pytest.mark.slow
def test_store_in_a_read_only_directory_is_refused(readonly_dir, store):
    base, cli = readonly_dir
    proc = cli("run", base / "spec.toml", "--store", base / store, "--workers", 1)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    one_error_line(proc, rf"--store \S+ cannot be written: directory {re.escape(str(base / 'ro'))} is not writable")
    assert proc.stdout == "" and list((base / "ro").iterdir()) == []


def test_report_out_must_be_a_writable_directory(readonly_dir, tmp_path):
    base, cli = readonly_dir
    (tmp_path / "file").write_text("x")
    # checked before the store is even opened: the store need not exist
    proc = kngflow_cli("report", tmp_path / "nothing.zarr", "--out", tmp_path / "file")
    assert proc.returncode == 2
    one_error_line(proc, r"--out \S+file is a file, not a directory")
    proc = cli("report", base / "nothing.zarr", "--out", base / "ro" / "report")
    assert proc.returncode == 2
    one_error_line(proc, r"--out \S+report cannot be written: directory \S+ro is not writable")
    assert list((base / "ro").iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["file"]


@pytest.mark.parametrize(
    "grid, pattern",
    [
        ("replicates = 1_000_000_000", r"grid\.replicates: 1000000000 replicates is beyond the limit 1e\+08"),
        ("n = [1_000_000_000_000]", r"grid\.n\[0\]: n = 1000000000000 is beyond the limit 1e\+09"),
        ("epsilon = [1e20]", r"grid\.epsilon\[0\]: epsilon = 1e\+20 is outside"),
    ],
    ids=["1e9 replicates", "n 1e12", "epsilon 1e20"],
)
def test_absurd_grid_exits_2_at_once(grid, pattern, tmp_path):
    key = grid.split(" =")[0]
    text = re.sub(rf"^{key} = .*$", grid, tiny_spec(), count=1, flags=re.M)
    (tmp_path / "spec.toml").write_text(text)
    t0 = time.perf_counter()
    proc = kngflow_cli("run", tmp_path / "spec.toml", "--store", tmp_path / "s.zarr", timeout=60)
    elapsed = time.perf_counter() - t0
    assert proc.returncode == 2, proc.stdout + proc.stderr
    one_error_line(proc, pattern, r"set allow_extreme = true in \[grid\]")
    assert proc.stdout == "" and sorted(p.name for p in tmp_path.iterdir()) == ["spec.toml"]
    # a second on an idle machine (materialising 1e9 replicates took 14 GB and minutes): a loose
    # bound, since other processes share the machine
    assert elapsed < 20, elapsed


def test_non_utf8_spec_is_one_line(tmp_path):
    (tmp_path / "spec.toml").write_bytes(tiny_spec().replace('"tiny"', '"\xe9t\xe9"').encode("latin-1"))
    proc = kngflow_cli("run", tmp_path / "spec.toml", "--store", tmp_path / "s.zarr", process=False)
    assert proc.returncode == 2
    one_error_line(proc, r"invalid spec \S+: spec: '\S+spec\.toml' is not UTF-8 text \(byte 0xe9")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.toml"]


# ----------------------------------------------------------------------------- the lock
def test_lock_refuses_a_second_holder_and_is_removed(tmp_path):
    store = tmp_path / "s.zarr"
    with RunLock(store) as lock:
        info = json.loads(lock.path.read_text())
        assert info["pid"] == os.getpid() and info["host"] == socket.gethostname()
        with pytest.raises(StoreLocked, match=rf"in use by another run \(host \S+, pid {os.getpid()}, since 20"):
            RunLock(store).acquire()
    assert not lock_path(store).exists() and list(tmp_path.iterdir()) == []
    with RunLock(tmp_path / "a" / "b" / "s.zarr"):  # made the directories for the lock ...
        assert (tmp_path / "a" / "b").is_dir()
    assert list(tmp_path.iterdir()) == []  # ... and removed them, no store being made there


def test_second_run_on_a_locked_store_exits_2(tmp_path):
    (tmp_path / "spec.toml").write_text(tiny_spec())
    store = tmp_path / "s.zarr"
    with RunLock(store):  # the lock is an flock: another open file in this process cannot take it either
        proc = kngflow_cli("run", tmp_path / "spec.toml", "--store", store, "--workers", 1, "--no-dashboard",
                           process=False)
        assert lock_path(store).exists()
    assert proc.returncode == 2, proc.stdout + proc.stderr
    one_error_line(proc, rf"store \S+s\.zarr is in use by another run \(host {re.escape(socket.gethostname())}, "
                         rf"pid {os.getpid()}, since \d{{4}}-\d\d-\d\dT", r"lock file \S+s\.zarr\.lock")
    assert proc.stdout == "" and not store.exists()


def test_lock_written_on_another_host_is_refused(tmp_path):
    (tmp_path / "spec.toml").write_text(tiny_spec())
    store = tmp_path / "s.zarr"
    lock_path(store).write_text(json.dumps({"host": "elsewhere", "pid": 1, "since": "2026-01-01T00:00:00+00:00"}))
    proc = kngflow_cli("run", tmp_path / "spec.toml", "--store", store, "--workers", 1, "--no-dashboard",
                       process=False)
    assert proc.returncode == 2
    one_error_line(proc, r"lock of a run on another host \(host elsewhere, pid 1, since 2026-01-01", r"delete \S+\.lock")
    assert lock_path(store).exists() and not store.exists()


@pytest.mark.slow
def test_stale_lock_of_a_killed_run_is_taken_over(tmp_path):
    store = tmp_path / "s.zarr"
    killed = subprocess.run(
        [sys.executable, "-c", "import os, signal, sys; from kngflow.store.lock import RunLock; "
         "RunLock(sys.argv[1]).acquire(); os.kill(os.getpid(), signal.SIGKILL)", str(store)],
        capture_output=True, text=True, timeout=60,
    )
    assert killed.returncode == -signal.SIGKILL
    stale = json.loads(lock_path(store).read_text())
    assert not psutil.pid_exists(stale["pid"])
    proc = kngflow_cli("run", SMOKE, "--store", store, "--workers", 1, "--no-dashboard", "--no-progress")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [
        "kngflow: taking over the stale lock of a run that ended without releasing it "
        f"(host {stale['host']}, pid {stale['pid']}, since {stale['since']})"
    ], proc.stderr
    assert not lock_path(store).exists()
    assert int(xr.open_zarr(store).done.sum()) == 32


# ----------------------------------------------------------------------------- status, version, help
@pytest.fixture(scope="module")
def failed_store(tmp_path_factory):
    """A store of ``tiny_spec()`` with some cells done and one task's cells failed."""
    tmp = tmp_path_factory.mktemp("failed")
    spec = parse_spec(tiny_spec())
    path = tmp / "s.zarr"
    cost = CostModel(task_seconds=1e-9)  # one chunk per task
    meta, _ = prepare_store(spec, path, replicate_chunk=1)
    tasks = plan_tasks(meta, st.read_flags(path)[0], cost=cost)
    for t in tasks[1::2]:
        run_task(str(path), spec.text, meta, t)
    mark_task_failed(str(path), meta, tasks[0], "task failed after 2 retries: boom")
    return path


def test_status_json_and_exit_status(failed_store):
    ds = xr.open_zarr(failed_store)
    done, failed = ds.done.values.astype(bool), ds.failed.values.astype(bool) & (ds.done.values == 0)
    assert done.any() and failed.any()
    proc = kngflow_cli("status", failed_store, "--json", "--max-messages", 3)
    assert proc.returncode == 1, proc.stderr  # cells failed
    data = json.loads(proc.stdout)
    assert (data["done"], data["failed"], data["total"]) == (int(done.sum()), int(failed.sum()), done.size)
    assert data["dims"] == {"mechanism": 2, "n": 2, "epsilon": 2, "replicate": 4, "coef": 3}
    assert len(data["groups"]) == 4 and sum(g["total"] for g in data["groups"]) == done.size
    for g in data["groups"]:
        sel = {"n": g["n"], "mechanism": g["mechanism"]}
        assert g["done"] == int(ds.done.sel(**sel).sum())
        assert g["failed"] == int((ds.failed.sel(**sel) & (ds.done.sel(**sel) == 0)).sum())
    assert 1 <= len(data["failures"]) <= 3
    assert all(f["message"] == "task failed after 2 retries: boom" for f in data["failures"])
    text = kngflow_cli("status", failed_store)
    assert text.returncode == 1 and f"overall: {done.sum()} done, {failed.sum()} failed" in text.stdout


def test_status_of_a_store_without_failures_exits_0(tmp_path):
    spec = parse_spec(tiny_spec(n=(20,), epsilon=(1.0,), replicates=2))
    meta, _ = prepare_store(spec, tmp_path / "s.zarr", replicate_chunk=1)
    for t in plan_tasks(meta, st.read_flags(tmp_path / "s.zarr")[0]):
        run_task(str(tmp_path / "s.zarr"), spec.text, meta, t)
    proc = kngflow_cli("status", tmp_path / "s.zarr", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["failed"] == 0 and json.loads(proc.stdout)["done"] == 4


def test_version():
    proc = kngflow_cli("--version")
    assert proc.returncode == 0 and proc.stdout == f"kngflow {kngflow.__version__}\n"


def test_every_argument_has_help():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.choices and isinstance(a.choices, dict))
    parsers = {"kngflow": parser, **sub.choices}
    assert set(parsers) >= {"kngflow", "run", "status", "report"}
    missing = [
        f"{name} {a.dest}"
        for name, p in parsers.items()
        for a in p._actions
        if a.dest != "help" and not (a.help or "").strip()
    ]
    assert missing == []

"""Environment faults end in one line (exit 2) or a completed run, never a traceback or lost cells."""

from __future__ import annotations

import resource
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import xarray as xr
from testkit import assert_same, kngflow_cli, kngflow_command, one_line, study_run, tiny_spec
from daskprocs import DaskProcesses, kill_group

from kngflow import store as st
from kngflow.store import VARIABLES

#: every test here drives real processes (a cluster, a killed run, a full disk)
pytestmark = pytest.mark.slow

RUN = ("--workers", 1, "--no-dashboard", "--no-progress")


@pytest.fixture(scope="module")
def sound(tmp_path_factory, study_cluster):
    """(spec path, a complete store) made once."""
    tmp = tmp_path_factory.mktemp("faults")
    spec = tmp / "tiny.toml"
    spec.write_text(tiny_spec(replicates=3))
    store = tmp / "s.zarr"
    r = study_run(study_cluster, spec, store)
    assert r.returncode == 0, r.stderr
    return spec, store


def _small_files(limit: int):
    def pre():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write() then fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return pre


def test_disk_full_stops_with_one_line_and_resume_is_bit_identical(sound, tmp_path):
    spec, good = sound
    store = tmp_path / "s.zarr"
    shutil.copytree(good, store)
    for name in VARIABLES:  # the template of a new store: no chunk written yet
        shutil.rmtree(store / name / "c", ignore_errors=True)
    r = kngflow_cli("run", spec, "--store", store, *RUN, preexec_fn=_small_files(64))
    line = one_line(r)
    assert "cannot write the store" in line and "resume" in line
    assert int(xr.open_zarr(store)["done"].sum()) == 0
    r = kngflow_cli("run", spec, "--store", store, *RUN)
    assert r.returncode == 0, r.stderr
    assert_same(xr.open_zarr(good).load(), xr.open_zarr(store).load())


@pytest.mark.parametrize("kind", ["binary", "huge", "unreadable"])
def test_bad_spec_files_give_one_line(tmp_path, kind):
    spec = tmp_path / "s.toml"
    if kind == "binary":
        spec.write_bytes(bytes(range(256)) * 4)
    elif kind == "huge":
        spec.write_text("# " + "x" * (20 << 20) + "\n" + tiny_spec())
    else:
        spec.mkdir()
    for cmd in (("run", spec, "--store", tmp_path / "x.zarr", *RUN), ("plan", spec)):
        one_line(kngflow_cli(*cmd))
    assert not (tmp_path / "x.zarr").exists()


def test_lock_held_by_a_live_run_gives_one_line_and_a_stale_lock_is_taken_over(sound, tmp_path):
    import subprocess
    import sys

    spec, good = sound
    store = tmp_path / "s.zarr"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom kngflow.store.lock import RunLock\n"
                               f"with RunLock({str(store)!r}):\n    print('held', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        for cmd in (("run", spec, "--store", store, *RUN),):
            assert "pid" in one_line(kngflow_cli(*cmd))
    finally:
        holder.kill()
        holder.wait()
    assert not store.exists()
    r = kngflow_cli("run", spec, "--store", store, *RUN)  # the lock file left by the killed holder is stale
    assert r.returncode == 0, r.stderr
    assert_same(xr.open_zarr(good).load(), xr.open_zarr(store).load())


@pytest.mark.parametrize("fault", ["root zarr.json damaged", "root zarr.json missing", "a file", "missing"])
def test_read_commands_answer_store_faults_with_one_line(sound, tmp_path, fault):
    spec, good = sound
    store = tmp_path / "s.zarr"
    if fault == "a file":
        store.write_text("x")
    elif fault != "missing":
        shutil.copytree(good, store)
        if fault.endswith("damaged"):
            (store / "zarr.json").write_text("{garbage")
        else:
            (store / "zarr.json").unlink()
    for cmd in (("status", store), ("report", store, "--out", tmp_path / "rep"), ("plan", spec, "--store", store),
                ("verify", store, "--no-progress")):
        r = kngflow_cli(*cmd)
        if cmd[0] == "plan" and fault == "missing":  # plans a new store
            assert r.returncode == 0, r.stderr
        elif cmd[0] == "verify" and fault.startswith("root"):  # damage, listed
            assert r.returncode == 1 and "zarr.json" in r.stdout and not r.stderr.strip(), r.stdout + r.stderr
        else:
            one_line(r)
    assert not (tmp_path / "rep").exists()


def test_read_only_mount_is_refused(sound, tmp_path):
    import os
    import subprocess

    mnt = tmp_path / "ro"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(mnt)],
                                           capture_output=True).returncode:
        pytest.skip("cannot mount a read-only tmpfs here (not root, or mount not allowed)")
    try:
        line = one_line(kngflow_cli("run", sound[0], "--store", mnt / "x.zarr", *RUN))
        assert "not writable" in line
        assert list(mnt.iterdir()) == []
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


# --------------------------------------------------------------------------- a cluster lost mid-run
KNG_MH = """
[[mechanisms]]
label = "kng_mh"
kind = "kng"
norm = "linf"
bound = 1.0
sampler = "metropolis"
steps = 200_000
"""
# 90 Metropolis releases of about 35 ms: a few seconds on one worker, tasks of about 0.3 s
SLOW = tiny_spec(seed=3, n=(50,), epsilon=(1.0,), replicates=90, extra=KNG_MH)
WAIT = 3  # --connect-timeout: how long a run waits for a lost scheduler or for a worker


@pytest.fixture(scope="module")
def slow(tmp_path_factory, study_cluster):
    """(spec path, the store of an uninterrupted run)."""
    tmp = tmp_path_factory.mktemp("slow")
    spec = tmp / "slow.toml"
    spec.write_text(SLOW)
    store = tmp / "ref.zarr"
    r = study_run(study_cluster, spec, store, "--task-seconds", "0.3")
    assert r.returncode == 0, r.stderr
    return spec, st.open_dataset(store).load()


@pytest.fixture
def cluster(tmp_path):
    """``new()``: a fresh ``dask scheduler`` with one ``dask worker`` (the stores are out of their reach)."""
    started = []

    def new():
        root = tmp_path / f"dask{len(started)}"
        root.mkdir()
        procs = DaskProcesses(root, deny=tmp_path / "runs")
        started.append(procs)
        procs.start()
        procs.scale(1)
        return procs

    (tmp_path / "runs").mkdir()
    try:
        yield new
    finally:
        for procs in started:
            procs.close()


def _run_on(procs, spec, store, wait=WAIT):
    err = store.with_suffix(".err")
    with open(err, "w") as f:
        proc = subprocess.Popen([*kngflow_command(), "run", str(spec), "--store", str(store), "--scheduler-file",
                                 str(procs.scheduler_file), "--connect-timeout", str(wait), "--task-seconds", "0.3",
                                 "--no-progress"], stdout=subprocess.PIPE, stderr=f, text=True, env=procs.env,
                                start_new_session=True)
    proc.err = err
    return proc


def _wait_done(proc, store, timeout=120) -> int:
    """Wait until the run has written some cells (and not all): how many are done."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            done = int(st.read_flags(store)[0].sum())
        except Exception:  # noqa: BLE001 - not created yet, or a chunk being written
            done = 0
        if done:
            return done
        time.sleep(0.05)
    kill_group(proc)
    pytest.fail(f"the run wrote no cell in time (exit {proc.returncode}): {proc.err.read_text()}")


def _ended(proc, timeout=300):
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        kill_group(proc)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, Path(proc.err).read_text())


def _cells_kept(store, before: int, total: int) -> None:
    done = int(st.read_flags(store)[0].sum())
    assert before <= done < total, (before, done, total)
    assert kngflow_cli("verify", store, "--no-progress").returncode == 0


def test_scheduler_killed_mid_run_stops_with_one_line_and_a_rerun_resumes(slow, cluster, tmp_path):
    spec, ref = slow
    store = tmp_path / "runs" / "s.zarr"
    procs = cluster()
    run = _run_on(procs, spec, store)
    before = _wait_done(run, store)
    kill_group(procs.scheduler)
    t = time.monotonic()
    r = _ended(run)
    assert "lost the Dask scheduler" in one_line(r) and "resume" in r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    assert time.monotonic() - t < 30  # a short --connect-timeout bounds the client's reconnect wait
    _cells_kept(store, before, ref.done.size)
    r = _ended(_run_on(cluster(), spec, store))  # a fresh scheduler
    assert r.returncode == 0, r.stdout + r.stderr
    assert_same(ref, st.open_dataset(store).load())


@pytest.mark.parametrize("then", ["none joins", "one joins"])
def test_every_worker_killed_mid_run(slow, cluster, tmp_path, then):
    """No worker left: the run waits --connect-timeout for one; if none joins it stops with one
    line (cells kept) and a rerun with workers completes; if one joins it completes."""
    spec, ref = slow
    store = tmp_path / "runs" / "s.zarr"
    procs = cluster()
    run = _run_on(procs, spec, store, wait=60 if then == "one joins" else WAIT)  # a worker starts in seconds
    before = _wait_done(run, store)
    for name in list(procs.workers):
        procs.kill_worker(name)
    if then == "one joins":
        procs.start_worker()
        r = _ended(run)
        assert r.returncode == 0, r.stdout + r.stderr
    else:
        r = _ended(run)
        line = one_line(r)
        assert "every Dask worker left" in line and "resume" in line
        _cells_kept(store, before, ref.done.size)
        procs.scale(1)
        r = _ended(_run_on(procs, spec, store))
        assert r.returncode == 0, r.stdout + r.stderr
    assert_same(ref, st.open_dataset(store).load())


# --------------------------------------------------------------------------- extend, plan, audit
def _files(store):
    return {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(store.rglob("*")) if p.is_file()}


def test_extend_and_plan_on_a_damaged_store_give_one_line_and_write_nothing(sound, tmp_path):
    spec, good = sound
    store = tmp_path / "s.zarr"
    shutil.copytree(good, store)
    chunk = store / "estimate" / "c" / "0" / "0" / "0" / "0" / "0"
    chunk.write_bytes(chunk.read_bytes()[:10])
    bigger = tmp_path / "bigger.toml"
    bigger.write_text(tiny_spec(n=(20, 50, 80), replicates=4))  # adds an n and a replicate
    files = _files(store)
    for cmd in (("run", bigger, "--store", store, *RUN), ("plan", bigger, "--store", store),
                ("plan", spec, "--store", store)):
        line = one_line(kngflow_cli(*cmd))
        assert "damaged" in line and str(chunk) in line and "--repair" in line
    assert _files(store) == files
    assert not list(tmp_path.glob("*.lock"))


@pytest.mark.parametrize("module", ["raise ImportError('no module named numpy_extra')\n", "def (:\n"])
def test_audit_of_a_plugin_that_cannot_be_imported_gives_one_line(tmp_path, module):
    import os

    (tmp_path / "broken_plugin.py").write_text(module)
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    r = kngflow_cli("audit", "kng", "--problem", "broken_plugin:Problem", "--draws", 100, "--no-progress", env=env)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "error" in lines[0] and "broken_plugin" in lines[0], r.stderr

"""Environment faults end in one line (exit 2) or a completed run, never a traceback or lost cells."""

from __future__ import annotations

import resource
import shutil
import signal

import pytest
import xarray as xr
from conftest import assert_same, kngflow_cli, tiny_spec

from kngflow.store import VARIABLES

RUN = ("--workers", 1, "--no-dashboard", "--no-progress")


@pytest.fixture(scope="module")
def sound(tmp_path_factory):
    """(spec path, a complete store) made once."""
    tmp = tmp_path_factory.mktemp("faults")
    spec = tmp / "tiny.toml"
    spec.write_text(tiny_spec(replicates=3))
    store = tmp / "s.zarr"
    r = kngflow_cli("run", spec, "--store", store, *RUN)
    assert r.returncode == 0, r.stderr
    return spec, store


def _one_line(r):
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kngflow: error: "), r.stderr
    return lines[0]


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
    line = _one_line(r)
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
        _one_line(kngflow_cli(*cmd))
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
            assert "pid" in _one_line(kngflow_cli(*cmd))
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
        elif cmd[0] == "verify" and fault.endswith("damaged"):
            assert r.returncode == 1 and "zarr.json" in r.stdout and not r.stderr.strip(), r.stdout + r.stderr
        else:
            _one_line(r)
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
        line = _one_line(kngflow_cli("run", sound[0], "--store", mnt / "x.zarr", *RUN))
        assert "not writable" in line
        assert list(mnt.iterdir()) == []
    finally:
        subprocess.run(["umount", str(mnt)], check=True)

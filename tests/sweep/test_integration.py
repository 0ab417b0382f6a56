"""Integration: ``kngflow run`` against a real ``dask scheduler`` and real ``dask worker`` processes.

One scheduler and its workers (started with ``--scheduler-file`` on 127.0.0.1, each in its
own process group) serve the whole module.  The workers run in their own directory and
cannot touch the client's files (``deny_paths.py``: any access to the tests' stores raises),
and the client runs in the store's parent directory with a relative ``--store``, so the
store's path means nothing to a worker.  The study is small but has many tasks
(``--task-seconds 0.001 --replicate-chunk 1``) and a Metropolis mechanism that makes each
task last tens of milliseconds, so that a process can be killed while some, but not all,
cells are done.  Every store is compared with an uninterrupted reference run bit for bit
(``seconds`` is wall time and only compared where it proves a cell was not recomputed).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from testkit import ALL_VARIABLES, assert_same, kngflow_command, tiny_spec
from daskprocs import DaskProcesses, kill_group

import kngflow.analysis  # noqa: F401  (the ds.kng accessor)
from kngflow import store as st

pytestmark = pytest.mark.slow

KNG_MH = """
[[mechanisms]]
label = "kng_mh"
kind = "kng"
norm = "linf"
bound = 1.0
sampler = "metropolis"
steps = 200_000
"""
SEED = 4242
EPSILON = (0.5, 2.0)
REPLICATES = 12
N_VALUES = (50, 1_000, 100_000)
LABELS = ("nonprivate", "kng", "kng_mh")
TOTAL = len(LABELS) * len(N_VALUES) * len(EPSILON) * REPLICATES
SMALL_TASKS = ("--task-seconds", "0.001", "--replicate-chunk", "1")
# runs to interrupt flush every 50 ms, so that a partial store is seen before a fast run ends
INTERRUPTIBLE = (*SMALL_TASKS, "--flush-seconds", "0.05")
TIMEOUT = 120  # seconds; a hang fails the test instead of blocking the run


def spec_text(epsilon=EPSILON, replicates=REPLICATES) -> str:
    return tiny_spec(seed=SEED, n=N_VALUES, epsilon=epsilon, replicates=replicates, extra=KNG_MH)


@pytest.fixture(scope="module")
def dask_procs(tmp_path_factory):
    procs = DaskProcesses(tmp_path_factory.mktemp("dask"), deny=tmp_path_factory.getbasetemp())
    try:
        procs.start()
        procs.scale(2)
        yield procs
    finally:
        procs.close()


def write_spec(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def run_command(dask_procs, spec: Path, store: Path, extra) -> dict:
    """``kngflow run`` in the store's parent directory, the store given by its name only."""
    cmd = [*kngflow_command(), "run", str(spec), "--store", store.name,
           "--scheduler-file", str(dask_procs.scheduler_file), *extra]
    return {"args": cmd, "env": dask_procs.env, "cwd": store.parent}


def run_cli(dask_procs, spec: Path, store: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(**run_command(dask_procs, spec, store, extra), capture_output=True, text=True,
                          timeout=TIMEOUT)


def start_cli(dask_procs, spec: Path, store: Path, out: Path, *extra: str) -> subprocess.Popen:
    with open(out.with_suffix(".out"), "wb") as so, open(out.with_suffix(".err"), "wb") as se:
        return subprocess.Popen(**run_command(dask_procs, spec, store, extra), stdout=so, stderr=se,
                                start_new_session=True)


def interrupt_client(dask_procs, spec: Path, store: Path, out: Path) -> subprocess.Popen:
    """Start ``kngflow run`` with many small tasks and kill -9 it once some cells are done."""
    proc = start_cli(dask_procs, spec, store, out, *INTERRUPTIBLE)
    try:
        wait_partial(proc, store, out)
    finally:
        kill_group(proc)
    return proc


def wait_partial(proc: subprocess.Popen, store: Path, out: Path) -> int:
    """Poll the store's done flags until some but not all cells are done; return the count."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(
                "the run ended before it could be interrupted (rc "
                f"{proc.returncode}):\n{out.with_suffix('.out').read_text()}{out.with_suffix('.err').read_text()}"
            )
        if (store / "zarr.json").exists():
            try:
                done, _ = st.read_flags(store)
            except Exception:  # noqa: BLE001 - the template may be in the middle of being written
                done = None
            if done is not None and 0 < np.count_nonzero(done) < done.size:
                return int(np.count_nonzero(done))
        time.sleep(0.01)
    kill_group(proc)
    pytest.fail("no cell was done in time")


def counts(stdout: str) -> dict:
    """The counts ``kngflow run`` prints: before (start line) and after (final line)."""
    start = re.search(r": (created|resumed|extended); (\d+)/(\d+) cells done, (\d+) to compute", stdout)
    end = re.search(r"^(\d+)/(\d+) cells done, (\d+) failed \((\d+) computed", stdout, re.M)
    assert start and end, stdout
    return {
        "action": start.group(1),
        "done_before": int(start.group(2)),
        "total": int(start.group(3)),
        "to_compute": int(start.group(4)),
        "done": int(end.group(1)),
        "failed": int(end.group(3)),
        "computed": int(end.group(4)),
    }


def load(store: Path) -> xr.Dataset:
    with st.open_dataset(store) as ds:
        return ds.load()


def assert_complete(ds: xr.Dataset) -> None:
    assert (ds.done.values == 1).all() and (ds.failed.values == 0).all()
    assert np.isfinite(ds.estimate.values).all() and np.isfinite(ds.error.values).all()
    assert (ds.sampler.sel(mechanism="kng_mh").values == 3).all()  # Metropolis ran


@pytest.fixture(scope="module")
def reference(dask_procs, tmp_path_factory):
    """An uninterrupted run of the study on two workers, many small tasks."""
    tmp = tmp_path_factory.mktemp("reference")
    spec = write_spec(tmp / "study.toml", spec_text())
    store = tmp / "ref.zarr"
    dask_procs.scale(2)
    proc = run_cli(dask_procs, spec, store, *SMALL_TASKS)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ds = load(store)
    assert_complete(ds)
    return {"spec": spec, "store": store, "ds": ds, "proc": proc}


def test_run_prints_addresses_progress_and_counts(reference, dask_procs):
    out, err = reference["proc"].stdout, reference["proc"].stderr
    assert f"scheduler {dask_procs.address}; 2 workers" in out
    assert re.search(r"^dashboard: http://127\.0\.0\.1:\d+/status$", out, re.M), out
    c = counts(out)
    assert c == {"action": "created", "done_before": 0, "total": TOTAL, "to_compute": TOTAL,
                 "done": TOTAL, "failed": 0, "computed": TOTAL}
    assert f"{TOTAL}/{TOTAL} cells done, 0 failed" in out
    # the progress, off a terminal (stderr is a pipe): plain lines, the last at 100 %
    assert re.search(rf"^cells: {TOTAL}/{TOTAL} \(100\.0%\)", err, re.M) and "\r" not in err, err[-2000:]
    assert "Traceback" not in err


def test_workers_cannot_reach_the_store(reference, dask_procs):
    """The stores of this module are out of the workers' reach, yet every run above completed."""
    store = str(reference["store"])
    assert "zarr.json" in os.listdir(store)  # the client reads it
    seen = dask_procs.client.run(os.listdir, store, on_error="return")
    assert len(seen) == len(dask_procs.workers)
    assert all(isinstance(v, PermissionError) and "worker may not access" in str(v) for v in seen.values()), seen
    assert set(dask_procs.client.run(os.getcwd).values()) == {str(dask_procs.root)}  # not the client's cwd
    assert os.getcwd() != str(dask_procs.root)


def test_status_after_run(reference):
    proc = subprocess.run([*kngflow_command(), "status", str(reference["store"])],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    per = len(EPSILON) * REPLICATES
    assert f"overall: {TOTAL} done, 0 failed, {TOTAL} total" in lines
    rows = [ln.split() for ln in lines if re.match(r"^\s*\d+\s+\S+\s+\d+\s+\d+\s+\d+\s*$", ln)]
    assert sorted((int(r[0]), r[1]) for r in rows) == sorted((n, m) for n in N_VALUES for m in LABELS)
    for r in rows:
        assert r[2:] == [str(per), "0", str(per)], r
    assert "failures" not in proc.stdout


def test_worker_killed_mid_sweep(reference, dask_procs, tmp_path):
    dask_procs.scale(3)
    spec, store, out = reference["spec"], tmp_path / "s.zarr", tmp_path / "run"
    proc = start_cli(dask_procs, spec, store, out, *INTERRUPTIBLE)
    try:
        wait_partial(proc, store, out)
        # kill -9 a worker that is running (or holding) a task of the sweep right now
        names = dask_procs.worker_names()
        busy = [names[addr] for addr, keys in dask_procs.client.processing().items() if keys and addr in names]
        assert busy, "no worker was processing a task"
        victim = busy[0]
        dask_procs.kill_worker(victim)
        done_at_kill = int(np.count_nonzero(st.read_flags(store)[0]))
        assert done_at_kill < TOTAL, "the sweep finished before the worker was killed"
        rc = proc.wait(timeout=TIMEOUT)
    finally:
        kill_group(proc)
    text = out.with_suffix(".out").read_text() + out.with_suffix(".err").read_text()
    assert rc == 0, text
    assert f"{TOTAL}/{TOTAL} cells done, 0 failed" in text
    assert re.search(rf"^cells: {TOTAL}/{TOTAL} \(100\.0%\)", text, re.M)  # the progress ends at the store's count
    assert victim not in dask_procs.worker_names().values()  # the worker is really gone
    ds = load(store)
    assert_complete(ds)
    assert_same(reference["ds"], ds)
    dask_procs.scale(2)


def test_client_killed_then_resume(reference, dask_procs, tmp_path):
    dask_procs.scale(2)
    spec, store, out = reference["spec"], tmp_path / "s.zarr", tmp_path / "run"
    proc = interrupt_client(dask_procs, spec, store, out)  # kill -9 the client mid-sweep
    assert proc.returncode == -signal.SIGKILL
    # tasks already running on workers finish and write their regions; wait for them
    dask_procs.wait_idle()
    before = load(store)
    done_before = int(before.done.sum())
    assert 0 < done_before < TOTAL
    assert int(before.failed.sum()) == 0
    # unfinished cells read as missing: the writer writes a flush's results first and their
    # done flags last, so a client killed inside a flush may leave results without their flag,
    # and the analysis counts only cells whose flag is set
    missing = before.done.values == 0
    assert np.isfinite(before.error.values[~missing]).all()
    masked = before.kng.masked("error").values
    assert np.isnan(masked[missing]).all() and np.array_equal(masked[~missing], before.error.values[~missing])

    status = subprocess.run([*kngflow_command(), "status", str(store)], capture_output=True, text=True,
                            timeout=TIMEOUT)
    assert status.returncode == 0, status.stderr
    assert f"overall: {done_before} done, 0 failed, {TOTAL} total" in status.stdout
    for n in N_VALUES:
        for m in LABELS:
            k = int(before.done.sel(n=n, mechanism=m).sum())
            assert re.search(rf"^\s*{n}\s+{m}\s+{k}\s+0\s+{len(EPSILON) * REPLICATES}\s*$", status.stdout, re.M)

    proc = run_cli(dask_procs, spec, store, *SMALL_TASKS)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    c = counts(proc.stdout)
    assert c["action"] == "resumed"
    assert c["done_before"] == done_before and c["total"] == TOTAL
    assert c["to_compute"] == TOTAL - done_before
    assert c["computed"] == TOTAL - done_before and c["done"] == TOTAL and c["failed"] == 0
    after = load(store)
    assert_complete(after)
    # cells done before the restart were not recomputed: even their wall times are unchanged
    kept = before.done.values == 1
    assert np.array_equal(before.seconds.values[kept], after.seconds.values[kept])
    assert_same(reference["ds"], after)


def test_client_killed_then_resumed_at_once(reference, dask_procs, tmp_path):
    """Re-run at once, while tasks of the killed client may still be running on workers."""
    dask_procs.scale(2)
    spec, store, out = reference["spec"], tmp_path / "s.zarr", tmp_path / "run"
    interrupt_client(dask_procs, spec, store, out)
    proc = run_cli(dask_procs, spec, store, *SMALL_TASKS)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    c = counts(proc.stdout)
    assert c["action"] == "resumed" and 0 < c["done_before"] < TOTAL
    assert c["done"] == TOTAL and c["failed"] == 0
    assert c["computed"] <= TOTAL - c["done_before"]
    after = load(store)
    assert_complete(after)
    assert_same(reference["ds"], after)
    dask_procs.wait_idle()


@pytest.mark.parametrize(
    "workers, batching",
    [
        (1, ()),  # the default cost model: one task (and one chunk) per n
        (2, ("--task-seconds", "0.001", "--replicate-chunk", "5")),  # a short last chunk
        (3, ("--task-seconds", "0.2", "--replicate-chunk", "3", "--max-in-flight", "2")),
    ],
)
def test_same_estimates_any_workers_and_batching(reference, dask_procs, tmp_path, workers, batching):
    dask_procs.scale(workers)
    store = tmp_path / "s.zarr"
    proc = run_cli(dask_procs, reference["spec"], store, *batching)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"; {workers} workers" in proc.stdout
    ds = load(store)
    if "--replicate-chunk" in batching:
        want = int(batching[batching.index("--replicate-chunk") + 1])
        assert st.read_meta(store).chunks["replicate"] == want
    assert_complete(ds)
    assert_same(reference["ds"], ds)


def test_extend_with_replicates_and_epsilon(reference, dask_procs, tmp_path):
    dask_procs.scale(2)
    store = tmp_path / "s.zarr"
    steps = [
        ("created", spec_text(epsilon=EPSILON[:1], replicates=REPLICATES - 2)),
        ("extended", spec_text(epsilon=EPSILON[:1], replicates=REPLICATES)),  # two more replicates
        ("extended", spec_text(epsilon=EPSILON, replicates=REPLICATES)),  # one more epsilon
    ]
    old = None
    for i, (action, text) in enumerate(steps):
        spec = write_spec(tmp_path / f"study{i}.toml", text)
        # replicate chunks of 4: the last chunk of the first store (replicates 8, 9) is short, so
        # the added replicates 10 and 11 share a chunk (and a task) with cells already done
        proc = run_cli(dask_procs, spec, store, "--task-seconds", "0.001", "--replicate-chunk", "4")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        c = counts(proc.stdout)
        new = load(store)
        assert c["action"] == action and c["total"] == new.done.size
        old_cells = 0 if old is None else old.done.size
        assert c["done_before"] == old_cells
        assert c["computed"] == new.done.size - old_cells and c["done"] == new.done.size
        assert (new.done.values == 1).all()
        assert st.read_meta(store).chunks["replicate"] == 4  # an extended store keeps its chunking
        if old is not None:
            # existing cells bit for bit, seconds included: they were not recomputed
            assert_same(old, new, variables=ALL_VARIABLES, subset=True)
        old = new
    assert new.attrs["spec_hash"] == reference["ds"].attrs["spec_hash"]
    assert_same(reference["ds"], new)

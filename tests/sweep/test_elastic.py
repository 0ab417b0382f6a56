"""A run follows the cluster it gets: workers that join late, workers that retire, workers
with other versions, ``--min-workers``, factory deployments, planning for large clusters
and the provenance a store records.

Real ``dask scheduler`` and ``dask worker`` processes on 127.0.0.1 (:mod:`daskprocs`);
every store is compared bit for bit with a run of the same spec on the test process's
one-worker cluster (``conftest.study_cluster``).
"""

from __future__ import annotations

import importlib.metadata as md
import json
import re
import statistics
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from testkit import TESTS, assert_same, kngflow_cli, kngflow_command, study_run, tiny_spec
from daskprocs import DaskProcesses, kill_group

from kngflow import store as st
from kngflow.sweep import parse_spec
from kngflow.sweep.engine import package_versions
from kngflow.sweep.plan import MAX_TASK_RATE, CostModel, Estimate, estimate, iter_tasks, scaled_cost

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
# 480 Metropolis releases of about 35 ms: some 17 s of compute, tasks of about 0.3 s
SPEC = tiny_spec(seed=2024, n=(50, 1_000), epsilon=(0.5, 2.0), replicates=120, extra=KNG_MH)
TASKS = ("--task-seconds", "0.3", "--no-progress")
FAKE_VERSION = TESTS / "fake_version.py"
TIMEOUT = 900  # the longest wait for a run or a state (an upper bound, never a delay): a loaded machine is slow


def load(store: Path) -> xr.Dataset:
    with st.open_dataset(store) as ds:
        return ds.load()


@pytest.fixture(scope="module")
def study(tmp_path_factory, study_cluster):
    """The spec and its store computed on the test process's one-worker cluster."""
    tmp = tmp_path_factory.mktemp("elastic")
    spec = tmp / "study.toml"
    spec.write_text(SPEC)
    store = tmp / "ref.zarr"
    run = study_run(study_cluster, spec, store, *TASKS)
    assert run.returncode == 0, run.stdout + run.stderr
    return {"spec": spec, "ds": load(store)}


@pytest.fixture
def procs(tmp_path):
    """A scheduler with no worker yet."""
    p = DaskProcesses(tmp_path / "dask", deny=tmp_path / "runs")
    (tmp_path / "dask").mkdir()
    (tmp_path / "runs").mkdir()
    try:
        p.start()
        yield p
    finally:
        p.close()


def start_run(procs: DaskProcesses, spec: Path, store: Path, *extra: str) -> subprocess.Popen:
    """``kngflow run`` on the scheduler of ``procs``: stdout piped, stderr to ``STORE.err``."""
    with open(store.with_suffix(".err"), "w") as err:
        proc = subprocess.Popen(
            [*kngflow_command(), "run", str(spec), "--store", str(store), "--scheduler-file",
             str(procs.scheduler_file), *TASKS, *extra],
            stdout=subprocess.PIPE, stderr=err, text=True, env=procs.env, start_new_session=True,
        )
    proc.err_path = store.with_suffix(".err")
    return proc


def finish(proc: subprocess.Popen) -> tuple[str, str]:
    """Wait for the run: ``(stdout, stderr)``."""
    try:
        out, _ = proc.communicate(timeout=TIMEOUT)
    finally:
        kill_group(proc)
    return out, proc.err_path.read_text()


def wait_for_line(proc: subprocess.Popen, pattern: str) -> str:
    """Read the run's stdout until a line matches ``pattern`` (the text read so far)."""
    text = ""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            kill_group(proc)
            pytest.fail(f"the run ended early:\n{text}{proc.err_path.read_text()}")
        text += line
        if re.search(pattern, line):
            return text
    kill_group(proc)
    pytest.fail(f"no line matching {pattern!r}:\n{text}")


def wait_for_submitted(proc: subprocess.Popen, procs: DaskProcesses) -> int:
    """Poll the scheduler until it holds tasks of the run (the run must still be going); their count."""

    def scheduler_tasks(dask_scheduler):
        return len(dask_scheduler.tasks)

    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the run ended before it submitted a task (rc {proc.returncode}):\n{proc.err_path.read_text()}")
        held = procs.client.run_on_scheduler(scheduler_tasks)
        if held:
            return held
        time.sleep(0.05)
    kill_group(proc)
    pytest.fail("the run submitted no task in time")


def wait_for_done_cell(proc: subprocess.Popen, store: Path) -> int:
    """Poll the store's done flags until a cell is done (the run must still be going); the count."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the run ended before a cell was seen done (rc {proc.returncode}):\n{proc.err_path.read_text()}")
        try:
            done, _ = st.read_flags(store)
        except Exception:  # noqa: BLE001 - the template may be in the middle of being written
            done = None
        if done is not None and np.count_nonzero(done):
            return int(np.count_nonzero(done))
        time.sleep(0.05)
    kill_group(proc)
    pytest.fail("no cell was done in time")


def processing(procs: DaskProcesses) -> int:
    """Tasks the scheduler has handed to workers right now."""
    return sum(len(keys) for keys in procs.client.processing().values())


def watch(proc: subprocess.Popen, procs: DaskProcesses, every: float = 0.5) -> tuple[list[int], str, str]:
    """Sample :func:`processing` until the run ends: ``(samples, stdout, stderr)``."""
    samples = []
    deadline = time.monotonic() + TIMEOUT
    while proc.poll() is None and time.monotonic() < deadline:
        samples.append(processing(procs))
        time.sleep(every)
    return (samples, *finish(proc))


def computed(stdout: str) -> int:
    m = re.search(r"^(\d+)/(\d+) cells done, (\d+) failed \((\d+) computed", stdout, re.M)
    assert m, stdout
    assert m.group(1) == m.group(2) and m.group(3) == "0", stdout
    return int(m.group(4))


def late_run(study, procs, tmp_path, *worker_args) -> tuple[list[int], str, xr.Dataset]:
    """Run with no worker; once the run has started, 8 single-thread workers join, each
    with its ``worker_args``.  Returns the samples of :func:`processing` taken after they
    joined, the run's stdout and the store."""
    store = tmp_path / "runs" / "late.zarr"
    proc = start_run(procs, study["spec"], store)
    wait_for_line(proc, r"^store .*: created; 0/")
    wait_for_submitted(proc, procs)  # the run has submitted tasks, with no worker to run them
    for args in worker_args:
        procs.start_worker(*args)
    procs.client.wait_for_workers(len(worker_args), timeout=120)
    samples, out, err = watch(proc, procs)
    assert proc.returncode == 0, out + err
    assert "Traceback" not in err, err
    return samples, out, load(store)


def test_late_workers_are_used(study, procs, tmp_path):
    samples, out, ds = late_run(study, procs, tmp_path, *[()] * 8)
    # a run that kept the window it had at its start (no worker: 4 futures) shows at most 4
    assert len(samples) >= 6, samples
    assert max(samples) >= 7, samples
    assert statistics.median(samples[: len(samples) // 2]) >= 7, samples
    assert computed(out) == ds.done.size  # every cell once: none lost, none computed twice
    assert_same(study["ds"], ds)


def test_retiring_workers_lose_nothing(study, procs, tmp_path):
    lifetime = ("--lifetime", "6s", "--lifetime-stagger", "1s")
    samples, out, ds = late_run(study, procs, tmp_path, *[lifetime, ()] * 4)
    retired = [name for name, p in procs.workers.items() if p.poll() is not None]
    assert len(retired) == 4, (retired, procs.log("w1"))  # the four with a lifetime left mid-run
    assert "retire" in procs.log("w1").lower() or "lifetime" in procs.log("w1").lower(), procs.log("w1")
    assert computed(out) == ds.done.size
    assert_same(study["ds"], ds)


def test_worker_with_another_version_stops_the_run_before_anything(study, procs, tmp_path):
    procs.start_worker()
    procs.start_worker("--preload", str(FAKE_VERSION))
    procs.client.wait_for_workers(2, timeout=120)
    store = tmp_path / "runs" / "other.zarr"
    proc = start_run(procs, study["spec"], store)
    out, err = finish(proc)
    assert proc.returncode == 2, out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kngflow: error: worker tcp://127.0.0.1:"), err
    assert "runs kngflow 0.0.0+other but the client runs kngflow " in lines[0], err
    assert not store.exists()


def test_worker_with_another_version_joining_late_stops_the_run(study, procs, tmp_path):
    procs.start_worker()
    procs.client.wait_for_workers(1, timeout=120)
    store = tmp_path / "runs" / "late_other.zarr"
    proc = start_run(procs, study["spec"], store)
    wait_for_line(proc, r"^store .*: created; 0/")
    wait_for_done_cell(proc, store)  # the good worker has finished (and the client written) a cell
    procs.start_worker("--preload", str(FAKE_VERSION))
    out, err = finish(proc)
    assert proc.returncode == 2, out + err
    assert err.strip().splitlines()[-1].startswith("kngflow: error: worker tcp://"), err
    assert "0.0.0+other" in err and "Traceback" not in err, err
    ds = load(store)  # what the good worker finished is kept, and is right
    done = ds.done.values == 1
    assert 0 < done.sum() < done.size
    for v in ("estimate", "error", "acceptance"):
        x, y = ds[v].values, study["ds"][v].values
        if x.ndim > done.ndim:
            done_v = np.broadcast_to(done[..., None], x.shape)
        else:
            done_v = done
        assert np.array_equal(x[done_v], y[done_v], equal_nan=True), v


def test_min_workers_times_out_with_one_line(study, procs, tmp_path):
    store = tmp_path / "runs" / "none.zarr"
    proc = start_run(procs, study["spec"], store, "--min-workers", "2", "--connect-timeout", "3")
    out, err = finish(proc)
    assert proc.returncode == 2, out + err
    assert err.strip() == (
        f"kngflow: error: --min-workers 2: only 0 workers joined {procs.scheduler_file} within --connect-timeout 3 s"
    ), err
    assert not store.exists()


# --- any deployment: kind python ------------------------------------------------------------

FACTORIES = '''
from distributed import Client
from kngflow.sweep.cluster import local_cluster


def client(workers=1):
    return Client(local_cluster(workers, dashboard_address=None))


def broken():
    raise RuntimeError("no quota left")


def wrong():
    return 42
'''


def _factory_files(tmp_path: Path) -> dict:
    (tmp_path / "mysite_dask.py").write_text(FACTORIES)
    files = {}
    for name, body in {
        "client": 'factory: "mysite_dask:client"\noptions: {workers: 2}',
        "broken": 'factory: "mysite_dask:broken"',
        "wrong": 'factory: "mysite_dask:wrong"',
        "missing": 'factory: "mysite_nowhere:make"',
        "badoption": 'factory: "mysite_dask:client"\noptions: {nodes: 2}',
    }.items():
        files[name] = tmp_path / f"{name}.yaml"
        files[name].write_text(f"kind: python\n{body}\n")
    return files


def test_factory_deployment_runs_a_study(tmp_path, study_cluster):
    files = _factory_files(tmp_path)
    spec = tmp_path / "tiny.toml"
    spec.write_text(tiny_spec(seed=5))
    env = {"PYTHONPATH": str(tmp_path)}
    run = kngflow_cli("run", spec, "--store", tmp_path / "f.zarr", "--cluster", files["client"], "--no-progress",
                      env=_env(env))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "; 2 workers" in run.stdout
    ref = study_run(study_cluster, spec, tmp_path / "ref.zarr")
    assert ref.returncode == 0, ref.stderr
    assert_same(load(tmp_path / "ref.zarr"), load(tmp_path / "f.zarr"))


@pytest.mark.parametrize(
    "name, message",
    [
        ("broken", "cluster.factory: mysite_dask:broken raised RuntimeError: no quota left"),
        ("wrong", "cluster.factory: mysite_dask:wrong returned int, not a distributed.Client or a Cluster"),
        ("missing", "cluster.factory: cannot import 'mysite_nowhere' (ModuleNotFoundError"),
        ("badoption", "cluster.options: mysite_dask:client does not accept them"),
    ],
)
def test_bad_factory_is_one_line(tmp_path, name, message):
    files = _factory_files(tmp_path)
    spec = tmp_path / "tiny.toml"
    spec.write_text(tiny_spec(seed=5))
    store = tmp_path / "s.zarr"
    run = kngflow_cli("run", spec, "--store", store, "--cluster", files[name], "--no-progress",
                      env=_env({"PYTHONPATH": str(tmp_path)}))
    assert run.returncode == 2, run.stdout + run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kngflow: error: " + message), run.stderr
    assert not store.exists()


def test_python_file_of_cluster_dir_connects():
    from kngflow.sweep.cluster import connect

    with connect(cluster_file=str(Path(__file__).resolve().parents[2] / "cluster" / "python.yaml")) as client:
        assert sorted(client.nthreads().values()) == [1, 1]


def _env(extra: dict) -> dict:
    import os

    return {**os.environ, **extra}


# --- planning for the cluster you get ------------------------------------------------------


def test_task_length_follows_the_thread_count():
    cost = CostModel(per_row=0.0, default_release=0.001, task_seconds=1.0)
    assert scaled_cost(cost, 2) is cost
    assert scaled_cost(cost, 1000).task_seconds == pytest.approx(1000 / MAX_TASK_RATE)
    spec = parse_spec(tiny_spec(n=(100,), epsilon=(1.0,), replicates=1_000_000))
    for threads in (2, 100, 1000, 10_000):
        est = estimate(spec, scaled_cost(cost, threads))
        rate = est.tasks / (est.compute_seconds / threads)
        assert rate <= MAX_TASK_RATE * 1.01, (threads, rate)
    # fewer, longer tasks on the big cluster; the same cells
    small, big = estimate(spec, cost), estimate(spec, scaled_cost(cost, 1000))
    assert big.tasks < small.tasks / 4 and big.to_compute == small.to_compute


def test_tasks_follow_a_sizing_that_changes():
    from kngflow.sweep import prepare_store

    spec = parse_spec(tiny_spec(n=(100,), epsilon=(1.0,), replicates=64))
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        meta, _ = prepare_store(spec, Path(tmp) / "s.zarr")
        done = np.zeros([len(meta.coords[k]) for k in ("mechanism", "n", "epsilon", "replicate")], np.int8)
        per = {"seconds": 0.004}
        cost = CostModel(per_row=0.0, default_release=0.001, task_seconds=1.0)

        def sizing():
            return CostModel(per_row=0.0, default_release=0.001, task_seconds=per["seconds"]), 0

        sizes = []
        for task in iter_tasks(meta, done, cost=cost, sizing=sizing):
            sizes.append(task.stop - task.start)
            per["seconds"] = 0.02  # the cluster grew: longer tasks from now on
        assert sizes[0] == 2 and set(sizes[1:-1]) == {10}, sizes
        assert sum(sizes) == 64


def test_cluster_lines_warn_when_scheduler_or_client_saturate():
    calm = Estimate(cells=10**7, to_compute=10**7, tasks=10**6, compute_seconds=10.0**6, max_task_seconds=1.0,
                    worker_bytes=0, number_bytes=0, store_files=0)
    lines = calm.cluster_lines(100)
    assert len(lines) == 1 and "on 100 threads" in lines[0] and "scheduler ≈ 100 tasks/s" in lines[0], lines
    busy = calm.cluster_lines(10_000)  # 10 000 tasks/s and 10^5 cells/s for 100 s
    assert len(calm.cluster_lines(10**6)) == 1  # the same for one second: no warning
    assert any("warning: the scheduler would be saturated" in x for x in busy), busy
    assert any("warning: the client would be saturated" in x for x in busy), busy


def test_plan_for_a_thousand_workers(tmp_path):
    root = Path(__file__).resolve().parents[2]
    out = kngflow_cli("plan", root / "workflows" / "smoke.toml", "--workers", 1000)
    assert out.returncode == 0, out.stderr
    assert re.search(r"plan: on 1000 threads: tasks of ≈ .*; scheduler ≈ \d+ tasks/s", out.stdout), out.stdout
    assert "client writes ≈" in out.stdout


# --- provenance -------------------------------------------------------------------------------


def test_provenance_records_every_runtime_dependency():
    from kngflow.sweep.engine import git_revision

    git_revision.cache_clear()  # HEAD may have moved since this process first asked
    v = package_versions()
    assert v["python"] and v["platform"] and v["kngflow"]
    requires = [re.match(r"[A-Za-z0-9_.-]+", r).group(0) for r in md.requires("kngflow") if "extra ==" not in r]
    for name in requires + ["distributed", "dp-accounting", "statsmodels"]:
        assert v.get(name), (name, v)
    root = Path(__file__).resolve().parents[2]
    if (root / ".git").exists() and Path(__import__("kngflow").__file__).resolve().is_relative_to(root):
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
        assert v["kngflow_git"].split("+")[0] == head.stdout.strip()


def test_store_records_provenance(tmp_path):
    from kngflow.sweep.engine import store_attrs

    attrs = store_attrs(parse_spec(tiny_spec()))
    assert json.loads(attrs["versions"]) == package_versions()


# --- the window and the version guard, in this process ----------------------------------------


def test_window_counts_the_adaptive_maximum():
    from distributed import Client

    from kngflow.sweep.cluster import adapt_cluster, local_cluster
    from kngflow.sweep.runner import _Window

    with local_cluster(1, dashboard_address=None) as cluster, Client(cluster) as client:
        client.wait_for_workers(1, timeout=60)
        window = _Window(client, CostModel())
        assert (window.threads, window.capacity, window.in_flight) == (1, 1, 4)
        adapt_cluster(cluster, minimum=1, maximum=600)  # the run's own adaptive cluster may grow to 600
        window.refresh(force=True)
        assert (window.threads, window.capacity, window.in_flight) == (1, 600, 1200)
        assert window.sizing()[0].task_seconds == pytest.approx(600 / MAX_TASK_RATE)
        assert window.sizing()[1] == 1  # short first tasks: one per thread present


def test_a_task_checks_its_process_versions_first():
    from kngflow.sweep.engine import VersionMismatch, compute_block, runtime_versions

    spec = parse_spec(tiny_spec(n=(20,), epsilon=(1.0,), replicates=1))
    import tempfile

    from kngflow.sweep import prepare_store

    with tempfile.TemporaryDirectory() as tmp:
        meta, _ = prepare_store(spec, Path(tmp) / "s.zarr")
    done = np.zeros((2, 1, 1, 1), np.int8)
    task = next(iter_tasks(meta, done))
    args = (spec.text, list(meta.coords["mechanism"]), list(meta.coords["epsilon"]), task)
    assert compute_block(*args, expect=runtime_versions()).cells["done"].all()
    other = dict(runtime_versions(), numba="0.1")
    with pytest.raises(VersionMismatch, match=r"^this process runs numba .* but the client runs numba 0\.1;"):
        compute_block(*args, expect=other)

"""The ``kngflow`` command line, run as a real subprocess (the installed entry point).

Bad input (an invalid spec, a store made from another spec, bad arguments) must print one
clear message on stderr that names the offending field and what is allowed, exit with
status 2 and leave the store untouched (no store created for a new path).  A real run on
a local cluster (workflows/smoke.toml) writes the documented store layout and prints the
scheduler address, the progress bar and the final counts; a partially computed store reads
NaN where cells are not done.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from testkit import kngflow_cli, kngflow_command, tiny_spec

from kngflow import store as st
from kngflow.sweep import CostModel, parse_spec, plan_tasks, prepare_store, run_task

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "workflows" / "smoke.toml"
TIMEOUT = 300


def snapshot(root: Path) -> dict:
    """Every file and directory under ``root`` with its bytes and mtime."""
    out = {}
    for p in sorted(root.rglob("*")):
        s = p.stat()
        out[str(p.relative_to(root))] = (p.read_bytes() if p.is_file() else None, s.st_mtime_ns)
    return out


def assert_one_error(stderr: str, *patterns: str) -> str:
    """stderr is one ``kngflow: error:`` message (no traceback) matching every pattern."""
    assert "Traceback" not in stderr, stderr
    assert stderr.count("error:") == 1 and stderr.startswith("kngflow: error:"), stderr
    for pat in patterns:
        assert re.search(pat, stderr), (pat, stderr)
    return stderr


@pytest.fixture(scope="module")
def partial_store(tmp_path_factory):
    """A store of ``tiny_spec()`` where only some tasks ran (in this process)."""
    tmp = tmp_path_factory.mktemp("partial")
    spec = parse_spec(tiny_spec())
    (tmp / "study.toml").write_text(spec.text)
    path = tmp / "s.zarr"
    cost = CostModel(task_seconds=1e-9)  # one chunk per task
    meta, _ = prepare_store(spec, path, replicate_chunk=1)
    tasks = plan_tasks(meta, st.read_flags(path)[0], cost=cost)
    for t in tasks[::3]:
        run_task(str(path), spec.text, meta, t)
    done, _ = st.read_flags(path)
    assert 0 < done.sum() < done.size
    return tmp / "study.toml", path


BAD_SPECS = {
    # name: (spec text, field named in the message, what is allowed)
    "unknown top-level field": (
        'colour = "red"\n' + tiny_spec(),
        r"\bcolour: unknown field",
        r"allowed fields are \[.*'grid'",
    ),
    "unknown mechanism kind": (
        tiny_spec().replace('kind = "kng"', 'kind = "kgn"'),
        r"mechanisms\[1\]\.kind: unknown mechanism kind 'kgn'",
        r"allowed values are \[.*'kng'",
    ),
    "unknown mechanism option": (
        tiny_spec().replace('norm = "linf"', 'norm = "linf"\nbandwidth = 2'),
        r"mechanisms\[1\]\.bandwidth: unknown option",
        r"allowed options: \[.*'norm'",
    ),
    "bad mechanism option value": (
        tiny_spec().replace('norm = "linf"', 'norm = "l7"'),
        r"mechanisms\[1\]\.norm: ",
        r"'l1', 'l2', 'linf'",
    ),
    "epsilon zero": (tiny_spec(epsilon=(0.5, 0)), r"grid\.epsilon\[1\]: ", r"> 0, got 0"),
    "epsilon negative": (tiny_spec(epsilon=(-1.0,)), r"grid\.epsilon\[0\]: ", r"> 0, got -1\.0"),
    "empty n": (tiny_spec(n=()), r"grid\.n: ", r"non-empty list of integers"),
    "empty epsilon": (tiny_spec(epsilon=()), r"grid\.epsilon: ", r"non-empty list of finite numbers > 0"),
    "n smaller than d": (tiny_spec(n=(20, 2)), r"grid\.n\[1\]: ", r"at least d=3, got n=2"),
    "zero replicates": (tiny_spec(replicates=0), r"grid\.replicates: ", r"count >= 1"),
    "not TOML": ("seed = \n", r"\bspec: not valid TOML", r""),
}


@pytest.mark.parametrize("case", list(BAD_SPECS))
def test_bad_spec_exits_2_and_touches_no_store(case, partial_store, tmp_path):
    text, field, allowed = BAD_SPECS[case]
    spec = tmp_path / "bad.toml"
    spec.write_text(text)
    # an existing store: not a byte nor an mtime changes
    _, store = partial_store
    before = snapshot(store)
    proc = kngflow_cli("run", spec, "--store", store, "--workers", 1, "--no-dashboard", process=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert_one_error(proc.stderr, rf"invalid spec {re.escape(str(spec))}: ", field, allowed)
    assert proc.stderr.count("\n") == 1  # one line
    assert proc.stdout == ""
    assert snapshot(store) == before
    # a new store path: nothing is created
    proc = kngflow_cli("run", spec, "--store", tmp_path / "new.zarr", "--workers", 1, "--no-dashboard", process=False)
    assert proc.returncode == 2 and proc.stderr.count("error:") == 1, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.toml"]


@pytest.mark.parametrize(
    "change, why",
    [
        (lambda t: t.replace("seed = 7", "seed = 8"), r"seed differs \(store: 7, spec: 8\)"),
        (lambda t: t.replace("bound = 1.0", "bound = 2.0"), r"mechanism 'kng' differs"),
        (
            lambda t: t.replace("epsilon = [0.5, 2.0]", "epsilon = [0.5]"),
            r"grid\.epsilon drops values present in the store: \[2\.0\]",
        ),
    ],
    ids=["seed", "mechanism option", "dropped epsilon"],
)
def test_store_of_another_spec_exits_2_untouched(change, why, partial_store, tmp_path):
    spec_path, store = partial_store
    other = tmp_path / "other.toml"
    other.write_text(change(spec_path.read_text()))
    before = snapshot(store)
    proc = kngflow_cli("run", other, "--store", store, "--workers", 1, "--no-dashboard", process=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert_one_error(
        proc.stderr, r"was made from a different spec", r"only adding n, epsilon, mechanisms or replicates", why
    )
    assert proc.stdout == ""
    assert snapshot(store) == before


@pytest.mark.parametrize(
    "args, message",
    [
        (["--workers", "0"], r"--workers must be >= 1, got 0"),
        (["--replicate-chunk", "0"], r"--replicate-chunk must be >= 1, got 0"),
        (["--task-seconds", "0"], r"--task-seconds must be > 0"),
        (["--scheduler-file", "{tmp}/missing.json"], r"--scheduler-file \S+missing\.json does not exist"),
        (["--scheduler-file", "{tmp}/notjson.json"], r"--scheduler-file \S+notjson\.json is not a scheduler file"),
        (["--scheduler-file", "{tmp}/noaddress.json"], r"--scheduler-file \S+noaddress\.json is not a scheduler file"),
        (["--cluster", "{tmp}/missing.yaml"], r"cluster: cannot read"),
        (["--scheduler", "{dead}", "--scheduler-file", "{tmp}/noaddress.json"], r"not allowed with argument"),
        (["--workers", "two"], r"--workers: invalid int value"),
        (["--connect-timeout", "0"], r"--connect-timeout must be > 0"),
        (["--scheduler", "{dead}", "--connect-timeout", "1"], r"cannot connect to the Dask scheduler of tcp://"),
        (["--scheduler-file", "{tmp}/stale.json", "--connect-timeout", "1"],
         r"cannot connect to the Dask scheduler of \S+stale\.json: .*tcp://127\.0\.0\.1:\d+"),
    ],
    ids=["workers 0", "replicate-chunk 0", "task-seconds 0", "missing scheduler file", "scheduler file not JSON",
         "scheduler file without address", "missing cluster file", "two targets", "workers not an int",
         "connect-timeout 0", "no scheduler at the address", "stale scheduler file"],
)
def test_bad_arguments_exit_2_and_touch_no_store(args, message, partial_store, tmp_path):
    spec, store = partial_store
    with socket.socket() as s:  # a port where nothing listens
        s.bind(("127.0.0.1", 0))
        dead = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    (tmp_path / "notjson.json").write_text("tcp://127.0.0.1:8786\n")
    (tmp_path / "noaddress.json").write_text('{"type": "Scheduler"}\n')
    (tmp_path / "stale.json").write_text(json.dumps({"type": "Scheduler", "address": dead}))
    args = [a.format(tmp=tmp_path, dead=dead) for a in args]
    listing = sorted(p.name for p in tmp_path.iterdir())
    before = snapshot(store)
    for target in (store, tmp_path / "new.zarr"):
        proc = kngflow_cli("run", spec, "--store", target, *args, process=False)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr and proc.stderr.count("error:") == 1, proc.stderr
        assert re.search(message, proc.stderr), proc.stderr
    assert snapshot(store) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == listing


def test_store_path_that_is_no_store_exits_2_untouched(partial_store, tmp_path):
    spec, _ = partial_store
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "notes.txt").write_text("not a store\n")
    before = snapshot(tmp_path)
    proc = kngflow_cli("run", spec, "--store", tmp_path / "results", "--workers", 1, "--no-dashboard", process=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert_one_error(proc.stderr, r"results is not a zarr store")
    assert snapshot(tmp_path) == before


def test_status_of_a_missing_store_exits_2(tmp_path):
    """The entry point and ``python -m kngflow.cli`` are the same command."""
    for cmd in (kngflow_command(), [sys.executable, "-m", "kngflow.cli"]):
        proc = subprocess.run([*cmd, "status", str(tmp_path / "nothing.zarr")], capture_output=True, text=True,
                              timeout=TIMEOUT)
        assert proc.returncode == 2, cmd
        assert_one_error(proc.stderr, r"nothing\.zarr is not a zarr store")
    assert list(tmp_path.iterdir()) == []


def test_partial_store_reads_nan_and_status_counts(partial_store):
    spec_path, store = partial_store
    ds = xr.open_zarr(store)
    done = ds.done.values.astype(bool)
    assert 0 < done.sum() < done.size
    assert np.isnan(ds.estimate.values[~done]).all() and np.isnan(ds.error.values[~done]).all()
    assert np.isnan(ds.seconds.values[~done]).all() and (ds.sampler.values[~done] == -1).all()
    assert np.isfinite(ds.estimate.values[done]).all() and np.isfinite(ds.error.values[done]).all()
    proc = kngflow_cli("status", store)
    assert proc.returncode == 0, proc.stderr
    assert f"overall: {done.sum()} done, 0 failed, {done.size} total" in proc.stdout
    for n in ds.n.values:
        for m in ds.mechanism.values:
            k = int(ds.done.sel(n=n, mechanism=m).sum())
            total = ds.done.sel(n=n, mechanism=m).size
            assert re.search(rf"^\s*{n}\s+{m}\s+{k}\s+0\s+{total}\s*$", proc.stdout, re.M), proc.stdout


@pytest.mark.slow
def test_smoke_run_on_local_cluster(tmp_path):
    store = tmp_path / "smoke.zarr"
    proc = kngflow_cli("run", SMOKE, "--store", store, "--workers", 1, "--no-dashboard")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert re.search(r"^scheduler tcp://127\.0\.0\.1:\d+; 1 workers$", out, re.M), out
    assert "dashboard:" not in out  # --no-dashboard
    assert re.search(r"created; 0/32 cells done, 32 to compute", out), out
    assert re.search(r"^32/32 cells done, 0 failed \(32 computed in [\d.]+ s, \d+ tasks\)$", out, re.M), out
    # progress off a terminal (stderr is a pipe here): plain lines, the last at 100 %
    assert re.search(r"^cells: 32/32 \(100\.0%\)", proc.stderr, re.M) and "\r" not in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr

    ds = xr.open_zarr(store)
    assert dict(ds.sizes) == {"mechanism": 4, "n": 2, "epsilon": 1, "replicate": 4, "coef": 12}
    assert list(ds.mechanism.values) == ["nonprivate", "kng", "exponential", "objective"]
    assert list(ds.n.values) == [100, 1000] and list(ds.epsilon.values) == [1.0]
    for v in ("estimate", "error", "seconds", "acceptance", "steps", "sampler", "done"):
        assert v in ds.data_vars, v
    assert ds.estimate.dims == ("mechanism", "n", "epsilon", "replicate", "coef")
    assert ds.error.dims == ("mechanism", "n", "epsilon", "replicate")
    assert (ds.done.values == 1).all()
    assert np.isfinite(ds.estimate.values).all() and np.isfinite(ds.error.values).all()
    assert ds.attrs["spec"] == SMOKE.read_text()

    # the same command again: nothing to compute, the store is not rewritten
    before = snapshot(store)
    proc = kngflow_cli("run", SMOKE, "--store", store, "--workers", 1, "--dashboard-address", "127.0.0.1:0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^dashboard: http://127\.0\.0\.1:\d+/status$", proc.stdout, re.M), proc.stdout
    assert "resumed; 32/32 cells done, 0 to compute in 0 tasks" in proc.stdout
    assert re.search(r"^32/32 cells done, 0 failed \(0 computed", proc.stdout, re.M), proc.stdout
    assert snapshot(store) == before

"""``kngflow plan``, ``run`` refusing a plan over the limits without ``--yes``, and ``--task-timeout``."""

from __future__ import annotations

import re

import pytest
import xarray as xr
from testkit import kngflow_cli, study_run, tiny_spec

from kngflow import store as st

#: 10^6 replicates at n = 10^8: weeks of compute on one core (days on a fast one), far over the
#: 24 core-hour limit.
HUGE = tiny_spec(n=(20, 100_000_000), epsilon=(1.0,), replicates=1_000_000)
PLAN_LINE = re.compile(r"^plan: (\d+) cells, (\d+) to compute in (\d+) tasks \(longest ≈ [\d.]+ \w+\)$")


def test_plan_prints_the_estimate(tmp_path):
    (tmp_path / "spec.toml").write_text(tiny_spec(replicates=10))
    proc = kngflow_cli("plan", tmp_path / "spec.toml", "--workers", 2)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    m = PLAN_LINE.match(lines[0])
    assert m and m.group(1) == m.group(2) == str(2 * 2 * 2 * 10), lines
    assert re.match(r"^plan: compute ≈ [\d.]+ \w+ on one core, [\d.]+ \w+ on 2 workers$", lines[1]), lines
    wall = re.match(r"^plan: wall ≈ ([\d.]+) s on 2 local workers \(([\d.]+) s of it starting the cluster and "
                    r"calibrating\)$", lines[2])
    assert wall and float(wall[1]) >= float(wall[2]) > 1.0, lines  # the start-up: at least the store's second
    assert re.match(r"^plan: task timeout 300 s by default; peak memory ≈ [\d.]+ MB per worker; "
                    r"store ≈ [\d.]+ KB in ≈ \d+ files$", lines[3]), lines
    assert list(tmp_path.iterdir()) == [tmp_path / "spec.toml"]  # nothing written


def test_default_task_timeout_is_whole_seconds_and_at_least_five_minutes():
    from types import SimpleNamespace

    from kngflow.sweep.plan import default_task_timeout

    assert default_task_timeout(SimpleNamespace(max_task_seconds=0.8)) == 300.0
    assert default_task_timeout(SimpleNamespace(max_task_seconds=147.429)) == 2949.0  # 20 x, rounded up


@pytest.mark.slow
def test_plan_counts_what_a_store_already_holds(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(tiny_spec(n=(20,), epsilon=(1.0,), replicates=3))
    store = tmp_path / "s.zarr"
    run = kngflow_cli("run", spec, "--store", store, "--workers", 1, "--no-dashboard", "--no-progress")
    assert run.returncode == 0, run.stdout + run.stderr
    assert PLAN_LINE.match(run.stdout.splitlines()[0]), run.stdout  # run starts with the plan
    spec.write_text(tiny_spec(n=(20,), epsilon=(1.0,), replicates=5))  # two more replicates
    proc = kngflow_cli("plan", spec, "--store", store)
    assert proc.returncode == 0, proc.stderr
    assert PLAN_LINE.match(proc.stdout.splitlines()[0]).groups()[:2] == ("10", "4")
    other = tmp_path / "other.toml"
    other.write_text(tiny_spec(seed=99, n=(20,), epsilon=(1.0,), replicates=3))
    bad = kngflow_cli("plan", other, "--store", store)
    assert bad.returncode == 2 and bad.stdout == "" and "different spec" in bad.stderr.splitlines()[0]


@pytest.mark.slow
def test_run_refuses_a_plan_over_the_limits_without_yes(tmp_path, study_cluster):
    (tmp_path / "spec.toml").write_text(HUGE)
    plan = kngflow_cli("plan", tmp_path / "spec.toml")
    assert plan.returncode == 0 and "exceeds 24 core-hours: `kngflow run` asks for --yes" in plan.stdout
    proc = kngflow_cli("run", tmp_path / "spec.toml", "--store", tmp_path / "s.zarr", "--workers", 1, "--no-dashboard")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == ""  # no cluster started
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and re.match(r"^kngflow: error: estimated compute [\d.]+ days on one core exceeds "
                                        r"24 core-hours .*run again with --yes", lines[0]), proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.toml"]  # no store, no lock
    # a spec within the limits runs without --yes (negative control of the refusal)
    (tmp_path / "small.toml").write_text(tiny_spec(n=(20, 1000), epsilon=(1.0,), replicates=2))
    ok = study_run(study_cluster, tmp_path / "small.toml", tmp_path / "s.zarr")
    assert ok.returncode == 0, ok.stdout + ok.stderr


@pytest.mark.slow
def test_task_timeout_marks_cells_failed(tmp_path):
    (tmp_path / "spec.toml").write_text(tiny_spec(n=(20,), epsilon=(1.0,), replicates=40))
    store = tmp_path / "s.zarr"
    proc = kngflow_cli("run", tmp_path / "spec.toml", "--store", store, "--workers", 1, "--no-dashboard",
                       "--no-progress", "--task-timeout", "1e-9")
    assert proc.returncode == 1, proc.stdout + proc.stderr  # cells failed
    ds = xr.open_zarr(store)
    failed = ds.failed.values == 1
    assert failed.any() and not (failed & (ds.done.values == 1)).any()
    assert {r["message"] for r in st.read_failures(store)} == {
        "task timeout: the task exceeded --task-timeout 1e-09 s; cell not computed"
    }
    assert "task timeout" in proc.stdout
    # resumed without the limit, the failed cells are computed
    again = kngflow_cli("run", tmp_path / "spec.toml", "--store", store, "--workers", 1, "--no-dashboard", "--no-progress")
    assert again.returncode == 0, again.stdout + again.stderr
    assert int(xr.open_zarr(store).done.sum()) == 80


@pytest.mark.parametrize("arg", [("--task-timeout", "0"), ("--flush-seconds", "-1")])
def test_bad_times_exit_2(tmp_path, arg):
    (tmp_path / "spec.toml").write_text(tiny_spec())
    proc = kngflow_cli("run", tmp_path / "spec.toml", "--store", tmp_path / "s.zarr", *arg, process=False)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [f"kngflow: error: {arg[0]} must be > 0, got {float(arg[1])}"]
    assert not (tmp_path / "s.zarr").exists()

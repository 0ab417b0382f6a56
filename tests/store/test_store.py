"""The zarr store: template, the single writer, done flags, resume, refuse/extend specs, plans.

Tasks run in this process (``run_task`` called directly) with the real problem
and mechanisms; Dask itself is exercised in test_integration.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from testkit import ALL_VARIABLES, EXPONENTIAL, assert_same, tiny_spec

from kngflow import store as st
from kngflow.api import MECHANISMS
from kngflow.sweep import CostModel, SpecMismatch, estimate, iter_tasks, parse_spec, plan_tasks, prepare_store, run_task
from kngflow.sweep.engine import compute_block, failed_block, timeout_message

def run_all(spec, path, *, cost=None, replicate_chunk=None, limit=None):
    """Prepare the store and run (up to ``limit``) planned tasks in this process."""
    meta, action = prepare_store(spec, path, replicate_chunk=replicate_chunk)
    done, _ = st.read_flags(path)
    tasks = plan_tasks(meta, done, cost=cost)
    summaries = [run_task(str(path), spec.text, meta, t) for t in tasks[:limit]]
    return meta, action, tasks, summaries


def chunk_files(path, var):
    root = Path(path) / var / "c"
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def test_template(tmp_path):
    spec = parse_spec(tiny_spec())
    path = tmp_path / "s.zarr"
    meta, action = prepare_store(spec, path, replicate_chunk=2)
    assert action == "created"
    assert meta.chunks == {"mechanism": 2, "n": 1, "epsilon": 2, "replicate": 2, "coef": 3}
    # no data chunk written by the template (compute=False)
    for v in ("estimate", "done", "error", "scale"):
        assert chunk_files(path, v) == []
    declared = {**st.VARIABLES, **st.check_data_variables(spec.problem().data_variables)}
    assert set(declared) >= {"scale", "ols_stderr"}
    for v, (dims, dtype, fill) in declared.items():
        meta_json = json.loads((path / v / "zarr.json").read_text())
        assert tuple(meta_json["dimension_names"]) == dims
        if dtype == "float64":
            assert meta_json["fill_value"] == "NaN", v
        else:
            assert meta_json["fill_value"] == fill, v
    ds = st.open_dataset(path)
    assert list(ds.mechanism.values) == ["nonprivate", "kng"]
    assert ds.n.dtype == np.int64 and ds.epsilon.dtype == np.float64 and ds.replicate.dtype == np.int64
    assert ds.sampler.dtype == np.int8 and ds.done.dtype == np.int8 and ds.failed.dtype == np.int8
    assert np.isnan(ds.estimate.values).all() and (ds.done.values == 0).all() and (ds.sampler.values == -1).all()
    assert np.array_equal(ds.theta_star.values, spec.problem().theta_star)
    attrs = ds.attrs
    assert attrs["spec"] == spec.text and attrs["spec_hash"] == spec.hash
    assert json.loads(attrs["versions"])["zarr"].startswith("3")
    assert "WITHOUT privacy" in attrs["caveats"] and attrs["problem"] == "linear"
    assert attrs["kngflow_version"]
    flags = ds.sampler.attrs
    assert dict(zip(flags["flag_meanings"].split(), flags["flag_values"]))["metropolis"] == 3
    # plain xr.open_zarr works quietly (consolidated metadata is written)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        xr.open_zarr(path).close()


def test_default_chunks_are_compact(tmp_path):
    # a grid with n = 10^7 no longer forces one replicate per chunk: chunks follow bytes, not tasks
    spec = parse_spec(tiny_spec(n=(20, 10_000_000), replicates=300))
    meta, _ = prepare_store(spec, tmp_path / "s.zarr")
    assert meta.chunks == {"mechanism": 2, "n": 2, "epsilon": 2, "replicate": 300, "coef": 3}
    from kngflow.sweep.plan import CHUNK_BYTES, default_chunks

    big = default_chunks({"mechanism": 3, "n": 2, "epsilon": 5, "replicate": 10**6}, 4)
    assert big["n"] == 1 and big["replicate"] * 3 * 5 * 4 * 8 <= CHUNK_BYTES < (big["replicate"] + 1) * 3 * 5 * 4 * 8


def test_tasks_cover_each_missing_cell_once(tmp_path):
    spec = parse_spec(tiny_spec(replicates=9))
    path = tmp_path / "s.zarr"
    meta, _ = prepare_store(spec, path, replicate_chunk=4)
    done = np.zeros((2, 2, 2, 9), np.int8)
    done[:, :, :, 2:4] = 1  # complete replicates: skipped
    done[1, 0, 1, 6] = 1  # a partial replicate: computed except that cell
    for per_task, ramp in ((1e-9, 0), (0.002, 0), (1e9, 0), (0.33, 3), (1e9, 2)):
        cost = CostModel(task_seconds=per_task)
        it = iter_tasks(meta, done, cost=cost, ramp=ramp)
        assert iter(it) is it  # a generator: nothing materialised up front
        covered = np.zeros_like(done)
        tasks = list(it)
        for t in tasks:
            assert np.array_equal(t.replicates, meta.coords["replicate"][t.start : t.stop])
            need = np.ones((2, 2, t.stop - t.start), bool) if t.need is None else t.need
            covered[:, t.n_index, :, t.start : t.stop] += need
            assert t.missing == need.sum()
        assert np.array_equal(covered, 1 - done)  # every missing cell in exactly one task
        assert [t.n for t in tasks] == sorted((t.n for t in tasks), reverse=True)  # largest n first
        per = cost.replicates_per_task(50, spec.labels, 2)
        sizes = [t.stop - t.start for t in tasks]
        assert max(sizes[:ramp], default=1) <= max(1, per // 16) and max(sizes) <= per  # short tasks first
        if ramp:
            continue
        est = estimate(spec, cost, progress={20: (int(done[:, 0].sum()), 2), 50: (int(done[:, 1].sum()), 2)})
        assert est.to_compute == int((1 - done).sum())
        # the estimate ignores that done replicates split a run of tasks (one gap per n here)
        assert est.tasks <= len(tasks) <= est.tasks + 2 and (per_task > 1e-9 or est.tasks == len(tasks))
    assert len(plan_tasks(meta, done, cost=CostModel(task_seconds=1e-9))) == 2 * 7  # one replicate per task


def test_plan_estimate_and_limits():
    spec = parse_spec(tiny_spec(n=(20, 1000), replicates=10))
    cost = CostModel(per_row=1e-6, per_data=0.0, per_release={"nonprivate": ((20, 1e-3), (1000, 1e-3)),
                                                               "kng": ((10, 0.1), (1000, 0.01))})
    assert cost.release("kng", 5) == 0.1 and cost.release("kng", 5000) == 0.01 and cost.release("x", 5) == 0.01
    assert abs(cost.release("kng", 100) - 0.055) < 1e-12  # halfway in log n
    est = estimate(spec, cost)
    assert est.cells == est.to_compute == 2 * 2 * 2 * 10
    want = sum(10 * (n * 1e-6 + 2 * (1e-3 + cost.release("kng", n))) for n in (20, 1000))
    assert abs(est.compute_seconds - want) < 1e-9
    assert est.too_big() is None
    assert "core-hours" in est.too_big(max_core_hours=want / 3600 / 2)
    lines = est.lines(workers=2)
    assert lines[0].startswith("plan: 80 cells, 80 to compute in ") and "on 2 workers" in lines[1]
    # a 10^8-cell grid is estimated in closed form (nothing per cell)
    huge = parse_spec(tiny_spec(n=(20, 50), replicates=12_500_000))
    assert estimate(huge, cost).cells == 10**8


def test_run_task_writes_results_then_done(tmp_path):
    spec = parse_spec(tiny_spec(extra=EXPONENTIAL))
    path = tmp_path / "s.zarr"
    meta, _, tasks, summaries = run_all(spec, path, replicate_chunk=2)
    ds = st.open_dataset(path)
    assert (ds.done.values == 1).all() and (ds.failed.values == 0).all()
    assert np.isfinite(ds.estimate.values).all() and np.isfinite(ds.error.values).all()
    assert (ds.sampler.sel(mechanism="nonprivate").values == 0).all()
    assert set(np.unique(ds.sampler.sel(mechanism="kng").values)) <= {1, 2, 3}
    err = np.linalg.norm(ds.estimate - ds.theta_star, axis=-1)
    np.testing.assert_allclose(ds.error.values, err, rtol=1e-14)
    assert np.isfinite(ds.scale.values).all() and np.isfinite(ds.ols_stderr.values).all()
    assert sum(s["done"] for s in summaries) == ds.done.size
    # the same data set serves every mechanism and epsilon: the non-private
    # estimate (OLS) is identical across epsilon
    ols = ds.estimate.sel(mechanism="nonprivate")
    assert np.array_equal(ols.isel(epsilon=0).values, ols.isel(epsilon=1).values)
    # running again does nothing
    assert plan_tasks(meta, st.read_flags(path)[0]) == []


def test_resume_computes_only_missing(tmp_path):
    spec = parse_spec(tiny_spec(replicates=6))
    ref = tmp_path / "ref.zarr"
    run_all(spec, ref, replicate_chunk=1)
    path = tmp_path / "s.zarr"
    cost = CostModel(task_seconds=1e-9)  # one chunk per task
    meta, _, tasks, _ = run_all(spec, path, replicate_chunk=1, cost=cost, limit=5)
    done, _ = st.read_flags(path)
    n_done = int(done.sum())
    assert 0 < n_done < done.size
    # a flush interrupted after the results but before the done flags: results without flags
    labels, eps = list(meta.coords["mechanism"]), list(meta.coords["epsilon"])
    block = compute_block(spec.text, labels, eps, tasks[5])
    block.cells["done"][:] = 0
    block.cells["error"][:] = 123.0
    st.write_blocks(path, [block])
    assert int(st.read_flags(path)[0].sum()) == n_done
    meta, action, left, summaries = run_all(spec, path, cost=cost)
    assert action == "resumed"
    assert len(left) == len(tasks) - 5
    assert sum(s["computed"] for s in summaries) == done.size - n_done
    assert_same(st.open_dataset(ref), st.open_dataset(path))


def test_refuses_a_different_spec(tmp_path):
    spec = parse_spec(tiny_spec())
    path = tmp_path / "s.zarr"
    run_all(spec, path)
    before = {p: p.stat().st_mtime_ns for p in path.rglob("*") if p.is_file()}
    changed = [
        tiny_spec(seed=8),
        tiny_spec().replace("bound = 1.0", "bound = 2.0"),
        tiny_spec().replace("steps = 200", "steps = 300"),
        tiny_spec(n=(20,)),  # drops n = 50
        tiny_spec(epsilon=(0.5,)),
        tiny_spec(replicates=3),
        tiny_spec().replace('label = "kng"', 'label = "kng_linf"'),
        tiny_spec().replace("d = 3", "d = 4"),
    ]
    for text in changed:
        with pytest.raises(SpecMismatch, match="different spec"):
            prepare_store(parse_spec(text), path)
    after = {p: p.stat().st_mtime_ns for p in path.rglob("*") if p.is_file()}
    assert before == after


def test_extend_keeps_existing_cells(tmp_path):
    spec = parse_spec(tiny_spec(replicates=3))
    path = tmp_path / "s.zarr"
    run_all(spec, path, replicate_chunk=2)
    old = st.open_dataset(path).load()
    bigger = parse_spec(tiny_spec(n=(20, 30, 50), epsilon=(0.5, 1.0, 2.0), replicates=5, extra=EXPONENTIAL))
    meta, action, tasks, summaries = run_all(bigger, path)
    assert action == "extended"
    assert meta.chunks["replicate"] == 2  # the store keeps its chunking
    new = st.open_dataset(path)
    assert list(new.n.values) == [20, 50, 30] and list(new.epsilon.values) == [0.5, 2.0, 1.0]
    assert list(new.mechanism.values) == ["nonprivate", "kng", "exponential"]
    assert new.attrs["spec_hash"] == bigger.hash
    assert json.loads(new.attrs["spec_history"]) == [spec.hash]
    # old cells bit for bit (seconds included: they were not recomputed)
    assert_same(old, new, variables=ALL_VARIABLES, subset=True)
    assert (new.done.values == 1).all()
    assert sum(s["computed"] for s in summaries) == new.done.size - old.done.size
    # the extended store equals a fresh run of the bigger spec
    fresh = tmp_path / "fresh.zarr"
    run_all(bigger, fresh, replicate_chunk=1)
    assert_same(st.open_dataset(fresh), new)


def test_failures_are_recorded_and_retried(tmp_path, monkeypatch):
    spec = parse_spec(tiny_spec())
    path = tmp_path / "s.zarr"
    kng = MECHANISMS["linear"]["kng"]
    original = kng.release

    def flaky(self, stats, epsilon, rng):
        if epsilon == 2.0 and stats.n == 50:
            raise FloatingPointError("synthetic failure")
        return original(self, stats, epsilon, rng)

    monkeypatch.setattr(kng, "release", flaky)
    meta, _, tasks, summaries = run_all(spec, path)
    done, failed = st.read_flags(path)
    ds = st.open_dataset(path)
    bad = ds.failed.sel(mechanism="kng", n=50, epsilon=2.0).values
    assert (bad == 1).all() and int(failed.sum()) == bad.size
    assert int(done.sum()) == done.size - bad.size
    assert np.isnan(ds.estimate.sel(mechanism="kng", n=50, epsilon=2.0).values).all()
    records = st.read_failures(path)
    assert len(records) == bad.size
    assert all("FloatingPointError: synthetic failure" in r["message"] for r in records)
    assert {r["replicate"] for r in records} == {0, 1, 2, 3}

    from kngflow.cli import status_text

    text = status_text(path)
    assert "synthetic failure" in text and "failed" in text

    # a whole task failing (after Dask's retries) marks its missing cells, and only those
    t = plan_tasks(meta, done)[0]
    labels, eps = list(meta.coords["mechanism"]), list(meta.coords["epsilon"])
    block = failed_block(labels, eps, 3, t, "task failed after 2 retries: KilledWorker: boom")
    assert len(block.failures) == t.missing == bad.size
    st.write_blocks(path, [block])
    assert np.array_equal(st.read_flags(path)[1], failed) and np.array_equal(st.read_flags(path)[0], done)
    # a task past its time limit: every cell not computed is failed with the reason
    timed = compute_block(spec.text, labels, eps, t, timeout=0.0)
    assert timed.cells["failed"][t.need].all() and not timed.cells["done"].any()
    assert {r["message"] for r in timed.failures} == {timeout_message(0.0)}

    monkeypatch.setattr(kng, "release", original)
    run_all(spec, path)
    done, failed = st.read_flags(path)
    assert done.all() and not failed.any()
    ref = tmp_path / "ref.zarr"
    run_all(spec, ref)
    assert_same(st.open_dataset(ref), st.open_dataset(path))
    assert "failures (" not in status_text(path)


def test_not_a_store(tmp_path):
    with pytest.raises(st.StoreError, match="not a zarr store"):
        st.read_meta(tmp_path)
    xr.Dataset({"x": ("a", np.arange(3))}).to_zarr(tmp_path / "other.zarr", consolidated=False)
    with pytest.raises(st.StoreError, match="not a kngflow store"):
        st.read_meta(tmp_path / "other.zarr")
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir()), os.listdir(tmp_path)

"""Grid axes over problem options (``[grid.problem]``): validation, seeds, store, debug, export.

A tiny PCA study with ``d`` as a grid axis runs in this process (``run_task``: the workers'
own ``compute_block``).  Checked: each bad ``[grid.problem]`` is one ``kngflow: error:``
line naming the field, exit 2, nothing written; the seeds of a spec without problem axes
are today's (its hash, and a cell recomputed from the legacy spawn key, bit for bit);
adding a value to an axis leaves the other values' cells bit-identical; ``kngflow debug
--cell ...,d=8`` reproduces a stored cell (another d as the negative control); ``kngflow
export`` has a ``d`` column and reads back to the stored values; a damaged chunk or damaged
metadata of an axis store (the root, an array's, the axis coordinate's, ``theta_star``'s) is
found, repaired from the spec (a damaged root only by the spec the store was made from: another
seed and other ``d`` values are the negative controls) and the resumed store equals the
undamaged run bit for bit, as ``tests/store/test_verify.py`` checks for a store without axes.
"""

from __future__ import annotations

import json
import shutil
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from testkit import (WORKFLOWS, assert_changed_fill_value_is_not_repaired, copy_store, damage_metadata, kngflow_cli,
                     one_line, tiny_spec, undo_replicate)

from kngflow import store as st
from kngflow.sweep import parse_spec, plan_tasks, prepare_store, run_task
from kngflow.sweep import seeds

PCA = """name = "pca_axes"
seed = 31
[problem]
name = "pca"
k = 1
spike_shares = [0.5]
error_measure = "energy_loss"
[grid]
n = [200, 2_000]
epsilon = [1.0]
replicates = 3
[grid.problem]
{axis}
[[mechanisms]]
label = "exponential"
kind = "exponential"
[[mechanisms]]
label = "mod_sulq"
kind = "mod_sulq"
delta = 1e-5
"""


def run_here(text: str, store) -> xr.Dataset:
    """Every cell of the spec ``text`` into ``store`` in this process; the opened store."""
    spec = parse_spec(text)
    meta, _ = prepare_store(spec, store)
    for task in plan_tasks(meta, st.read_flags(store)[0]):
        run_task(str(store), spec.text, meta, task)
    assert st.read_flags(store)[0].all()
    return xr.open_zarr(store)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("axes")
    text = PCA.format(axis="d = [4, 8]")
    path = tmp / "study.toml"
    path.write_text(text)
    return path, tmp / "s.zarr", run_here(text, tmp / "s.zarr")


# --------------------------------------------------------------------------- validation
BAD = [
    ("dd = [4, 8]", "grid.problem.dd: unknown option of problem 'pca'; allowed options:"),
    ("d = [4, 1]", "grid.problem.d[1]: d = 1 is rejected by problem 'pca'"),
    ("d = []", "grid.problem.d: must be a non-empty list"),
    ("d = [4, 4]", "grid.problem.d: values must be distinct"),
    ("k = [1, 2]\nerror_measure = [\"projection\"]", "grid.problem.k[0]: k = 1 is rejected"),
    ("n = [4]", "grid.problem.n: 'n' is a store dimension"),
]


@pytest.mark.parametrize("axis,message", BAD)
def test_bad_problem_axes_are_one_line_exit_2_nothing_written(tmp_path, axis, message):
    text = PCA.format(axis=axis)
    if axis.startswith("k ="):  # spike_shares has one entry: k = 2 is the value rejected... k = 1 passes
        text = text.replace("k = 1\n", "").replace("spike_shares = [0.5]\n", "")
        text = text.replace("error_measure = \"energy_loss\"\n", "").replace("k = [1, 2]", "k = [1, 9]")
        message = "grid.problem.k[1]: k = 9 is rejected by problem 'pca'"
    spec = tmp_path / "bad.toml"
    spec.write_text(text)
    store = tmp_path / "s.zarr"
    res = kngflow_cli("run", spec, "--store", store, process=False)
    assert message in one_line(res), res.stderr
    assert not store.exists() and not list(tmp_path.glob(".s.zarr*"))


def test_an_option_both_in_problem_and_grid_problem_is_refused(tmp_path):
    text = PCA.format(axis="d = [4, 8]").replace("k = 1\n", "k = 1\nd = 4\n")
    spec = tmp_path / "bad.toml"
    spec.write_text(text)
    res = kngflow_cli("run", spec, "--store", tmp_path / "s.zarr", process=False)
    assert res.returncode == 2
    assert "grid.problem.d: is also set in [problem] (d = 4); give it in one place" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and not (tmp_path / "s.zarr").exists()


# --------------------------------------------------------------------------- seeds
#: spec hashes of shipped specs (reduced as run), recorded from stores made before problem axes existed
LEGACY_HASHES = {
    "smoke": ({}, "cb48a39235ec236ee1161132dc9e0b60ced823453a85e8c1626e0ca8125bf93e"),
    "pca": ({"n": "100,1000", "replicates": "3"}, "645a09c26d6cd9cf2f50c47fb18614a7f53022e56690a09760215ffba9180a3f"),
    "kng_quantile": ({"n": "10,100", "replicates": "3"},
                     "8306df1e350de140fd84cfd774038ca50b9e2cd20d748bcb6b74ffdbe1ff9a44"),
}


@pytest.mark.parametrize("name", sorted(LEGACY_HASHES))
def test_specs_without_problem_axes_keep_their_hash(name):
    from kngflow.sweep.overrides import apply_overrides

    overrides, digest = LEGACY_HASHES[name]
    spec = apply_overrides(parse_spec((WORKFLOWS / f"{name}.toml").read_text()), **overrides)
    assert spec.problem_axes == () and "problem" not in spec.canonical()["grid"]
    assert spec.hash == digest


def test_cells_without_problem_axes_keep_the_legacy_streams(tmp_path):
    """A store made without axes: every cell equals the release on the stream keyed as before
    problem axes existed, ``(crc32(problem), n, replicate, 1, crc32(label), bits(eps))``."""
    spec = parse_spec(tiny_spec(replicates=2))
    ds = run_here(spec.text, tmp_path / "s.zarr")
    assert "problem_axes" not in ds.attrs and ds["estimate"].dims == ("mechanism", "n", "epsilon", "replicate", "coef")
    problem, mechs = spec.problem(), spec.build_mechanisms()
    crc = zlib.crc32(spec.problem_name.encode()) & 0xFFFFFFFF
    for label in spec.labels:
        n, eps, rep = spec.n[-1], spec.epsilon[0], 1
        data = problem.simulate(n, np.random.default_rng(np.random.SeedSequence(spec.seed, spawn_key=(crc, n, rep, 0))))
        key = (crc, n, rep, 1, zlib.crc32(label.encode()) & 0xFFFFFFFF, seeds.float_bits(eps))
        rel = mechs[label].release(data, epsilon=eps, rng=np.random.default_rng(
            np.random.SeedSequence(spec.seed, spawn_key=key)))
        stored = ds["estimate"].sel(mechanism=label, n=n, epsilon=eps, replicate=rep).values
        assert np.array_equal(np.asarray(rel.estimate, float), stored), label
    # negative control: the other replicate's stream gives another release
    other = ds["estimate"].sel(mechanism=spec.labels[-1], n=spec.n[-1], epsilon=spec.epsilon[0], replicate=0).values
    assert not np.array_equal(np.asarray(rel.estimate, float), other)


def test_axis_keys_are_apart_from_legacy_keys_and_independent_of_other_values():
    assert seeds.cell_key("pca", 100, 3) == seeds.cell_key("pca", 100, 3, ())
    with_axis = seeds.cell_key("pca", 100, 3, (("d", 8),))
    assert with_axis[:3] == seeds.cell_key("pca", 100, 3) and with_axis[3] == 2
    assert seeds.cell_key("pca", 100, 3, (("d", 8), ("k", 1))) == seeds.cell_key("pca", 100, 3, (("k", 1), ("d", 8)))
    assert seeds.value_key(8) != seeds.value_key(8.0) != seeds.value_key("8")


def test_adding_an_axis_value_keeps_the_other_values_cells(study, tmp_path):
    _path, _store, ds = study
    more = run_here(PCA.format(axis="d = [4, 6, 8]"), tmp_path / "more.zarr")
    assert list(more["d"].values) == [4, 6, 8]
    for d in (4, 8):
        for v in ("estimate", "error"):
            a, b = ds[v].sel(d=d).values, more[v].sel(d=d).values
            assert np.array_equal(a, b, equal_nan=True), (d, v)
    # the points differ from each other (their own streams and problems)
    assert not np.array_equal(more["error"].sel(d=4).values, more["error"].sel(d=6).values)


# --------------------------------------------------------------------------- store layout
def test_axis_store_layout_pads_shorter_estimates_with_nan(study):
    _path, store, ds = study
    assert ds.attrs["problem_axes"] == '["d"]'
    assert ds["estimate"].dims == ("d", "mechanism", "n", "epsilon", "replicate", "coef")
    assert ds.sizes["coef"] == 8 and ds["theta_star"].dims == ("d", "coef")
    est4 = ds["estimate"].sel(d=4).values
    assert np.isfinite(est4[..., :4]).all() and np.isnan(est4[..., 4:]).all()
    assert np.isfinite(ds["estimate"].sel(d=8).values).all()
    res = kngflow_cli("status", store)
    assert res.returncode == 0 and "d=2" in res.stdout and res.stdout.count(" exponential ") == 4
    assert kngflow_cli("verify", store).returncode == 0


# --------------------------------------------------------------------------- debug and export
def printed(out: str, key: str) -> list[float]:
    import re

    line = re.search(rf"^{re.escape(key)}: (.*)$", out, re.M).group(1)
    return [float(x) for x in line.strip("[]").split(",")]


@pytest.mark.parametrize("mechanism,n,replicate,d", [("exponential", 2000, 1, 8), ("mod_sulq", 200, 2, 4)])
def test_debug_reproduces_a_cell_of_an_axis_store(study, mechanism, n, replicate, d):
    path, _store, ds = study
    res = kngflow_cli("debug", path, "--cell", f"mechanism={mechanism},n={n},epsilon=1,replicate={replicate},d={d}")
    assert res.returncode == 0, res.stderr
    stored = ds["estimate"].sel(mechanism=mechanism, n=n, epsilon=1.0, replicate=replicate, d=d).values
    got = printed(res.stdout, "estimate")
    assert [x.hex() for x in got] == [float(x).hex() for x in stored[: len(got)]] and len(got) == d
    assert np.isnan(stored[len(got):]).all()
    assert printed(res.stdout, "error")[0].hex() == float(
        ds["error"].sel(mechanism=mechanism, n=n, epsilon=1.0, replicate=replicate, d=d)).hex()
    other = 4 if d == 8 else 8  # negative control: the other d's cell differs
    res2 = kngflow_cli("debug", path, "--cell", f"mechanism={mechanism},n={n},epsilon=1,replicate={replicate},"
                       f"d={other}")
    assert res2.returncode == 0 and printed(res2.stdout, "error") != printed(res.stdout, "error")


def test_debug_refuses_a_value_not_on_the_axis(study):
    path, _store, _ds = study
    res = kngflow_cli("debug", path, "--cell", "mechanism=exponential,n=200,epsilon=1,replicate=0,d=5")
    assert res.returncode == 2 and "d=5 is not in the spec's grid; its d values are 4, 8" in res.stderr
    res = kngflow_cli("debug", path, "--cell", "mechanism=exponential,n=200,epsilon=1,replicate=0")
    assert res.returncode == 2 and "d is missing" in res.stderr


def test_export_has_the_axis_column_and_round_trips(study, tmp_path):
    _path, store, ds = study
    out = tmp_path / "cells.csv"
    res = kngflow_cli("export", store, "--output", out)
    assert res.returncode == 0, res.stderr
    table = pd.read_csv(out)
    assert list(table.columns[:5]) == ["d", "mechanism", "n", "epsilon", "replicate"]
    assert len(table) == int(ds["done"].sum()) == 2 * 2 * 2 * 3
    for row in table.itertuples(index=False):
        cell = dict(d=row.d, mechanism=row.mechanism, n=row.n, epsilon=row.epsilon, replicate=row.replicate)
        assert float(ds["error"].sel(cell)).hex() == float(row.error).hex()
        est = ds["estimate"].sel(cell).values
        got = np.array([getattr(row, f"estimate_{j}") for j in range(8)])
        assert np.array_equal(est, got, equal_nan=True)


# --------------------------------------------------------------------------- damage and repair
#: ``kngflow run``'s options where a test runs it (refused runs stop before a cluster starts)
RUN = ("--workers", 1, "--no-dashboard", "--no-progress")


def _repair(store, spec_path) -> list[str]:
    """``kngflow run --repair``'s repair (:func:`~kngflow.sweep.repair.damage_problem`), in this
    process; the lines it logs.  The run then resumes with :func:`run_here`."""
    from kngflow.sweep.repair import damage_problem

    assert "is damaged" in damage_problem(store)
    lines = []
    assert damage_problem(store, repair=True, spec=parse_spec(spec_path.read_text()), log=lines.append) is None, lines
    assert damage_problem(store) is None
    return lines


def assert_same_store(good, store) -> None:
    """``store`` equals the undamaged ``good`` bit for bit: the same files, every metadata file
    (root, arrays, coordinates, ``theta_star``) the same JSON, every chunk the same bytes (the
    wall-clock ``seconds`` aside: the same cells hold one), every variable the same values."""
    good, store = Path(good), Path(store)
    files = {p.relative_to(good): p for p in good.rglob("*") if p.is_file()}
    assert sorted(files) == sorted(p.relative_to(store) for p in store.rglob("*") if p.is_file())
    for rel, p in files.items():
        if rel.name == "zarr.json":
            assert json.loads(p.read_text()) == json.loads((store / rel).read_text()), rel
        elif rel.parts[0] != "seconds":
            assert p.read_bytes() == (store / rel).read_bytes(), rel
    a, b = xr.open_zarr(good), xr.open_zarr(store)
    assert a.attrs == b.attrs and sorted(a.variables) == sorted(b.variables)
    for v in a.variables:
        x, y = a[v].values, b[v].values
        assert a[v].dims == b[v].dims and x.dtype == y.dtype, v
        if v == "seconds":
            assert np.array_equal(np.isnan(x), np.isnan(y)), v
        else:
            assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), v
    assert b["theta_star"].dims == ("d", "coef") and list(b["d"].values) == [4, 8]


def test_truncated_chunk_of_an_axis_store_is_found_and_repaired_bit_for_bit(study, tmp_path):
    from kngflow.store.verify import verify_store

    path, good, _ds = study
    store = copy_store(study[1], tmp_path)
    chunk = store / "estimate" / "c" / "1" / "0" / "0" / "0" / "0" / "0"  # the chunk of d = 8
    chunk.write_bytes(chunk.read_bytes()[:10])
    assert verify_store(good) == []
    v = kngflow_cli("verify", store, "--no-progress")
    assert v.returncode == 1, v.stdout + v.stderr
    assert str(chunk) in v.stdout and "d=8 " in v.stdout and "mechanism=" in v.stdout and "replicate=" in v.stdout
    for cmd in (("status", store), ("run", path, "--store", store, *RUN)):
        line = one_line(kngflow_cli(*cmd, process=False))
        assert "damaged" in line and "verify" in line
    lines = _repair(store, path)
    assert lines == [f"repaired {store}: 1 damaged chunks cleared, 12 cells to recompute"]
    assert int(st.read_flags(store)[0].sum()) == 24 - 12  # the d = 8 chunk's cells; every other cell kept
    run_here(path.read_text(), store)
    assert kngflow_cli("verify", store, "--no-progress").returncode == 0
    assert_same_store(good, store)


def test_missing_estimate_chunk_of_done_cells_of_an_axis_store_is_damage(study, tmp_path):
    from kngflow.store.verify import verify_store

    store = copy_store(study[1], tmp_path)
    (store / "estimate" / "c" / "0" / "0" / "0" / "0" / "0" / "0").unlink()
    damage = verify_store(store)
    assert len(damage) == 1 and "12 cells done but without an estimate" in damage[0].what
    assert damage[0].cells.startswith("d=4 mechanism=")


@pytest.mark.parametrize("target", ["zarr.json", "estimate/zarr.json", "d/zarr.json", "theta_star/zarr.json"])
def test_damaged_metadata_of_an_axis_store_gives_one_line(study, tmp_path, target):
    path = study[0]
    store = copy_store(study[1], tmp_path)
    (store / target).write_text("{garbage")
    for cmd in (("status", store), ("run", path, "--store", store, *RUN)):
        assert target in one_line(kngflow_cli(*cmd, process=False))
    v = kngflow_cli("verify", store, "--no-progress")
    assert v.returncode == 1 and target in v.stdout, v.stdout + v.stderr


@pytest.mark.parametrize("target", ["zarr.json", "zarr.json missing", "estimate/zarr.json", "n/zarr.json missing",
                                    "done/zarr.json", "d/zarr.json", "d/zarr.json missing", "theta_star/zarr.json",
                                    "theta_star/zarr.json missing", "steps/zarr.json"])
def test_damaged_metadata_of_an_axis_store_is_rebuilt_from_the_spec_and_the_run_resumes(study, tmp_path, target):
    path, good, _ds = study
    store = copy_store(study[1], tmp_path)
    undo_replicate(store, 2)
    file = damage_metadata(store, target)
    assert f"rebuilt {file} from the spec" in _repair(store, path)[0]
    done = st.read_flags(store)[0]
    assert done.shape == (2, 2, 2, 1, 3) and int(done.sum()) == 16  # the done cells are kept, at every d
    run_here(path.read_text(), store)
    assert kngflow_cli("verify", store, "--no-progress").returncode == 0
    assert_same_store(good, store)


def test_axis_metadata_that_cannot_be_rebuilt_gives_one_line(study, tmp_path):
    """A damaged root and another spec (another seed: the same coordinates and chunks; other
    ``d`` values), or an intact array unlike the spec's: one line naming the file, nothing written."""
    path = study[0]
    store = copy_store(study[1], tmp_path)
    (store / "zarr.json").write_text("{garbage")
    other = tmp_path / "other.toml"
    other.write_text(path.read_text().replace("seed = 31", "seed = 32"))
    line = one_line(kngflow_cli("run", other, "--store", store, "--repair", *RUN, process=False))
    assert "cannot repair" in line and str(store / "zarr.json") in line and "does not reproduce" in line
    assert "cell d=" in line
    other.write_text(PCA.format(axis="d = [4, 6]"))
    line = one_line(kngflow_cli("run", other, "--store", store, "--repair", *RUN, process=False))
    assert "cannot repair" in line and "coordinate d of the store is [4, 8], the spec's [4, 6]" in line
    assert (store / "zarr.json").read_text() == "{garbage"
    assert_changed_fill_value_is_not_repaired(store, path, *RUN)


def test_repair_rebuilds_a_reduced_axis_store_from_its_own_overrides(tmp_path):
    """Damaged metadata of a reduced axis store is rebuilt from the store's spec and its overrides."""
    from kngflow.sweep.overrides import apply_overrides
    from kngflow.sweep.repair import damage_problem

    spec = parse_spec(PCA.format(axis="d = [4, 8]"))
    reduced = apply_overrides(spec, n="200", replicates="2")
    store = tmp_path / "s.zarr"
    meta, _ = prepare_store(reduced, store)
    for task in plan_tasks(meta, st.read_flags(store)[0]):
        run_task(str(store), reduced.text, meta, task)
    before = tmp_path / "before.zarr"
    shutil.copytree(store, before)
    (store / "error" / "zarr.json").unlink()
    assert "is damaged" in damage_problem(store)
    assert damage_problem(store, repair=True, spec=spec, log=lambda line: None) is None
    assert damage_problem(store) is None
    assert_same_store(before, store)


@pytest.mark.slow
def test_kngflow_run_repair_of_an_axis_store_on_a_cluster(study, tmp_path):
    """End to end: a damaged root and a truncated chunk, ``kngflow run --repair`` on a local cluster."""
    path, good, _ds = study
    store = copy_store(study[1], tmp_path)
    chunk = store / "estimate" / "c" / "0" / "0" / "0" / "0" / "0" / "0"  # the chunk of d = 4
    chunk.write_bytes(chunk.read_bytes()[:10])
    (store / "zarr.json").write_text("{garbage")
    r = kngflow_cli("run", path, "--store", store, "--repair", *RUN)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"rebuilt {store / 'zarr.json'} from the spec" in r.stdout and "12 cells to recompute" in r.stdout
    assert kngflow_cli("verify", store, "--no-progress").returncode == 0
    assert_same_store(good, store)

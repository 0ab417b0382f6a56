"""Grid axes over problem options (``[grid.problem]``): validation, seeds, store, debug, export.

A tiny PCA study with ``d`` as a grid axis runs in this process (``run_task``: the workers'
own ``compute_block``).  Checked: each bad ``[grid.problem]`` is one ``kngflow: error:``
line naming the field, exit 2, nothing written; the seeds of a spec without problem axes
are today's (its hash, and a cell recomputed from the legacy spawn key, bit for bit);
adding a value to an axis leaves the other values' cells bit-identical; ``kngflow debug
--cell ...,d=8`` reproduces a stored cell (another d as the negative control); ``kngflow
export`` has a ``d`` column and reads back to the stored values.
"""

from __future__ import annotations

import zlib

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from testkit import WORKFLOWS, kngflow_cli, tiny_spec

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
    assert res.returncode == 2, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kngflow: error: ") and message in lines[0], res.stderr
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
    from kngflow.sweep.spec import apply_overrides

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

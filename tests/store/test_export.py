"""``kngflow export STORE --format csv|parquet``: one row per done cell, round-tripping the store.

Stores are computed in this process (``run_task``) and the command runs through
``kngflow.cli.main``.  The CSV read back with pandas equals the store cell by cell, bit
for bit (coordinates, every estimate column, the error, the diagnostics and the data set's
variables); cells not done are left out.  Bad input (no store, a foreign directory, an
existing output without ``--force``, Parquet without an engine) is one line and exit 2,
writing nothing.
"""

from __future__ import annotations

import importlib.util
import re

import numpy as np
import pandas as pd
import pytest
from testkit import EXPONENTIAL, tiny_spec

from kngflow import store as st
from kngflow.cli import default_export_path, main
from kngflow.store.export import export_columns
from kngflow.sweep import CostModel, parse_spec, plan_tasks, prepare_store, run_task


def make_store(path, *, every: int = 1, **kw):
    """The tiny study (with the exponential mechanism) in ``path``; only every ``every``-th task run."""
    spec = parse_spec(tiny_spec(extra=EXPONENTIAL, **kw))
    meta, _ = prepare_store(spec, path, replicate_chunk=1)
    for task in plan_tasks(meta, st.read_flags(path)[0], cost=CostModel(task_seconds=1e-9))[::every]:
        run_task(str(path), spec.text, meta, task)
    return path


@pytest.fixture(scope="module")
def partial(tmp_path_factory):
    """A store where only some cells are done."""
    path = make_store(tmp_path_factory.mktemp("export") / "s.zarr", every=2)
    done = st.read_flags(path)[0]
    assert 0 < done.sum() < done.size
    return path


def hexes(values) -> list[str]:
    return [float(v).hex() for v in np.asarray(values, dtype=np.float64).ravel()]


def expected_rows(ds) -> list[dict]:
    """The done cells of ``ds`` as the rows the export must hold (in the store's order)."""
    rows = []
    done = ds.done.transpose("mechanism", "n", "epsilon", "replicate").values
    for a, i, e, r in zip(*np.nonzero(done == 1)):
        cell = ds.isel(mechanism=a, n=i, epsilon=e, replicate=r)
        row = {"mechanism": str(cell.mechanism.values), "n": int(cell.n), "epsilon": float(cell.epsilon),
               "replicate": int(cell.replicate)}
        for c in range(ds.sizes["coef"]):
            row[f"estimate_{c}"] = float(cell.estimate.values[c])
            row[f"ols_stderr_{c}"] = float(cell.ols_stderr.values[c])
            row[f"theta_star_{c}"] = float(cell.theta_star.values[c])
        for v in ("error", "seconds", "acceptance", "steps", "scale"):
            row[v] = float(cell[v].values)
        row["sampler"] = int(cell.sampler.values)
        rows.append(row)
    return rows


def assert_rows_equal(table: pd.DataFrame, rows: list[dict]) -> None:
    assert len(table) == len(rows)
    for got, want in zip(table.to_dict("records"), rows):
        for key, value in want.items():
            if isinstance(value, float):
                assert hexes([got[key]]) == hexes([value]), (key, got, want)
            else:
                assert got[key] == value, (key, got, want)


def test_csv_round_trips_the_done_cells(partial, tmp_path, capsys):
    out = tmp_path / "cells.csv"
    assert main(["export", str(partial), "--output", str(out)]) == 0
    ds = st.open_dataset(partial).load()
    rows = expected_rows(ds)
    assert capsys.readouterr().out == f"wrote {out}: {len(rows)} rows (done cells), 19 columns\n"
    table = pd.read_csv(out)
    assert list(table.columns) == [
        "mechanism", "n", "epsilon", "replicate", "estimate_0", "estimate_1", "estimate_2", "error", "seconds",
        "acceptance", "sampler", "steps", "ols_stderr_0", "ols_stderr_1", "ols_stderr_2", "scale",
        "theta_star_0", "theta_star_1", "theta_star_2"]
    assert list(table.columns) == export_columns(ds)
    assert {"done", "failed"}.isdisjoint(table.columns)
    assert_rows_equal(table, rows)
    assert 0 < len(rows) < ds.done.size  # only the done cells
    # negative control: a row of another cell does not pass
    with pytest.raises(AssertionError):
        assert_rows_equal(table, rows[1:] + rows[:1])


def test_default_output_beside_the_store_and_no_overwrite(tmp_path, capsys):
    store = make_store(tmp_path / "s.zarr", n=(20,), epsilon=(1.0,), replicates=2)
    target = default_export_path(store, "csv")
    assert target == tmp_path / "s.zarr.csv"
    assert main(["export", str(store)]) == 0
    assert f"wrote {target}: 6 rows" in capsys.readouterr().out
    before = target.read_bytes()
    target.write_text("mine\n")
    assert main(["export", str(store)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"kngflow: error: {target} exists; pass --force to overwrite it, or --output PATH\n"
    assert target.read_text() == "mine\n"
    assert main(["export", str(store), "--force"]) == 0
    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def test_bad_input_is_one_line(tmp_path, capsys):
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "zarr.json").write_text('{"zarr_format": 3, "node_type": "group", "attributes": {}}')
    store = make_store(tmp_path / "s.zarr", n=(20,), epsilon=(1.0,), replicates=1)
    cases = [
        (["export", str(tmp_path / "missing.zarr")], r"missing\.zarr is not a kngflow store \(no such directory\)"),
        (["export", str(tmp_path)], r"is not a zarr store \(no zarr\.json\)"),
        (["export", str(tmp_path / "plain")], r"is a zarr store but not a kngflow store"),
        (["export", str(store), "--output", str(tmp_path / "no" / "x.csv")], r"--output .* directory .* does not exist"),
        (["export", str(store), "--output", str(tmp_path)], r"--output .* is a directory"),
    ]
    for argv, pattern in cases:
        assert main(argv) == 2, argv
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and err.startswith("kngflow: error: "), err
        assert re.search(pattern, err), (pattern, err)
    assert not any(p.suffix == ".csv" for p in tmp_path.rglob("*"))
    with pytest.raises(SystemExit):  # argparse: an unknown format
        main(["export", str(store), "--format", "xlsx"])
    assert "invalid choice: 'xlsx'" in capsys.readouterr().err


def test_parquet_without_an_engine_names_what_to_install(tmp_path, capsys, monkeypatch):
    store = make_store(tmp_path / "s.zarr", n=(20,), epsilon=(1.0,), replicates=1)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("pyarrow", "fastparquet") else real(name, *a))
    assert main(["export", str(store), "--format", "parquet"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert "needs pyarrow or fastparquet" in err and "pip install pyarrow" in err
    assert not default_export_path(store, "parquet").exists()


def test_parquet_round_trips(partial, tmp_path, capsys):
    if not (importlib.util.find_spec("pyarrow") or importlib.util.find_spec("fastparquet")):
        pytest.skip("no Parquet engine installed (pyarrow or fastparquet)")
    out = tmp_path / "cells.parquet"
    assert main(["export", str(partial), "--format", "parquet", "--output", str(out)]) == 0
    table = pd.read_parquet(out)
    assert_rows_equal(table, expected_rows(st.open_dataset(partial).load()))

"""Reduced runs: ``kngflow run SPEC --n 100,1000 --epsilon 1 --replicates 10`` (and ``plan``).

The flags replace grid axes of the spec; seeds are keyed by values, so every cell of a
reduced run equals the same cell of the full study bit for bit.  The store records the
overrides (``overrides`` attribute, ``kngflow status``, the report's provenance) and never
mixes with a store made under other overrides, or none: one ``kngflow: error:`` line naming
both sides, exit 2, nothing written, before any cluster is contacted.  Bad flag values are
refused like the spec's own fields.  Stores are computed in this process (``run_task``);
one real ``kngflow run`` on a local worker checks the whole path.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from testkit import assert_same, tiny_spec

from kngflow import store as st
from kngflow.cli import main
from kngflow.sweep import parse_spec, plan_tasks, prepare_store, run_task
from kngflow.sweep.engine import SpecMismatch, check_store
from kngflow.sweep.overrides import apply_overrides, describe_overrides

NOWHERE = "tcp://127.0.0.1:9"  # a refused run must stop before it contacts any scheduler


def run_here(spec, path):
    """Prepare ``path`` for ``spec`` and compute every cell in this process."""
    meta, _ = prepare_store(spec, path)
    for task in plan_tasks(meta, st.read_flags(path)[0]):
        run_task(str(path), spec.text, meta, task)
    return path


def snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*"))}


def one_error(err: str, *patterns: str) -> None:
    assert "Traceback" not in err and err.count("\n") == 1 and err.startswith("kngflow: error: "), err
    for pattern in patterns:
        assert re.search(pattern, err), (pattern, err)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """``(spec path, full store, reduced store)``: the tiny study in full, and with
    ``--n 50 --epsilon 2 --replicates 2``."""
    tmp = tmp_path_factory.mktemp("reduced")
    spec = parse_spec(tiny_spec(replicates=3))
    path = tmp / "study.toml"
    path.write_text(spec.text)
    full = run_here(spec, tmp / "full.zarr")
    reduced = run_here(apply_overrides(spec, n="50", epsilon="2", replicates="2"), tmp / "reduced.zarr")
    return path, full, reduced


def test_overrides_replace_the_grid_axes():
    spec = parse_spec(tiny_spec(n=(20, 50), epsilon=(0.5, 2.0), replicates=4))
    small = apply_overrides(spec, n="50, 100", epsilon="1", replicates="2")
    assert (small.n, small.epsilon, small.replicates) == ((50, 100), (1.0,), range(2))
    assert small.overrides == {"n": [50, 100], "epsilon": [1.0], "replicates": 2}
    assert describe_overrides(small.overrides) == "--n 50,100 --epsilon 1 --replicates 2"
    assert small.hash != spec.hash and small.text == spec.text and small.seed == spec.seed
    assert apply_overrides(spec) is spec and spec.overrides == {}
    # an override equal to the spec's own axis (in any order) is no override
    same = apply_overrides(spec, n="50,20", replicates="4")
    assert same.overrides == {} and same.hash == spec.hash and same.n == (20, 50)
    assert apply_overrides(spec, epsilon="2").overrides == {"epsilon": [2.0]}
    # more replicates than the spec's count: the first K of 0, 1, 2, ...
    assert apply_overrides(spec, replicates="6").replicates == range(6)
    # a spec listing its replicates: its first K
    listed = parse_spec(tiny_spec(replicates=[7, 3, 9]))
    assert apply_overrides(listed, replicates="2").replicates == (7, 3)
    assert apply_overrides(listed, replicates="2").overrides == {"replicates": 2}


BAD_FLAGS = {
    "n not an integer": (["--n", "1e3"], r"--n: '1e3' is not an integer"),
    "n empty item": (["--n", "20,,50"], r"--n: must be a comma-separated list of values"),
    "n repeated": (["--n", "20,20"], r"--n: values must be distinct, got \[20, 20\]"),
    "n below d": (["--n", "2"], r"--n: .*\b2\b"),
    "n extreme": (["--n", str(10**10)], r"--n: n = 10000000000 is beyond the limit 1e\+09; set allow_extreme"),
    "epsilon negative": (["--epsilon", "-1"], r"--epsilon: must be finite numbers > 0, got -1"),
    "epsilon word": (["--epsilon", "one"], r"--epsilon: 'one' is not a number"),
    "epsilon extreme": (["--epsilon", "1e9"], r"--epsilon: epsilon = 1000000000.0 is outside \[1e-06, 1e\+06\]"),
    "replicates zero": (["--replicates", "0"], r"--replicates: must be a count K >= 1 \(the spec's first K "
                        r"replicates\), got 0"),
    "replicates word": (["--replicates", "ten"], r"--replicates: must be a count K >= 1"),
}


@pytest.mark.parametrize("name", BAD_FLAGS)
@pytest.mark.parametrize("command", ["run", "plan"])
def test_bad_flag_values_are_one_line_and_write_nothing(tmp_path, capsys, name, command):
    spec = tmp_path / "study.toml"
    spec.write_text(tiny_spec())
    flags, pattern = BAD_FLAGS[name]
    store = tmp_path / "s.zarr"
    argv = [command, str(spec), "--store", str(store), *flags]
    if command == "run":
        argv += ["--scheduler", NOWHERE]
    before = snapshot(tmp_path)
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    one_error(err, pattern)
    assert snapshot(tmp_path) == before


def test_replicates_beyond_a_listed_spec_are_refused(tmp_path, capsys):
    spec = tmp_path / "study.toml"
    spec.write_text(tiny_spec(replicates=[7, 3, 9]))
    assert main(["run", str(spec), "--store", str(tmp_path / "s.zarr"), "--replicates", "4",
                 "--scheduler", NOWHERE]) == 2
    one_error(capsys.readouterr().err, r"--replicates: the spec lists 3 replicates; K must be at most 3")
    assert not (tmp_path / "s.zarr").exists()


def test_a_reduced_run_equals_the_full_study_bit_for_bit(stores):
    _, full, reduced = stores
    small = st.open_dataset(reduced)
    assert list(small.n.values) == [50] and list(small.epsilon.values) == [2.0]
    assert list(small.replicate.values) == [0, 1]
    assert_same(small, st.open_dataset(full), subset=True)
    # negative control: the same cells of a study with another root seed differ
    other = parse_spec(tiny_spec(seed=8, replicates=3))
    path = run_here(apply_overrides(other, n="50", epsilon="2", replicates="2"), Path(reduced).with_name("seed8.zarr"))
    with pytest.raises(AssertionError):
        assert_same(small, st.open_dataset(path))


def test_the_store_records_the_overrides(stores, capsys):
    _, full, reduced = stores
    small = st.open_dataset(reduced)
    assert json.loads(small.attrs["overrides"]) == {"n": [50], "epsilon": [2.0], "replicates": 2}
    assert json.loads(st.open_dataset(full).attrs["overrides"]) == {}
    assert main(["status", str(reduced)]) == 0
    out = capsys.readouterr().out
    assert "reduced run: --n 50 --epsilon 2 --replicates 2" in out
    assert main(["status", str(full)]) == 0
    assert "reduced run" not in capsys.readouterr().out
    from kngflow.analysis.html import _provenance_rows

    assert ["overrides", small.attrs["overrides"]] in _provenance_rows(small.attrs)
    assert not any(row[0] == "overrides" for row in _provenance_rows(st.open_dataset(full).attrs))


MIXES = {
    # name: (store, flags, what the store says, what the run says)
    "full run on a reduced store": ("reduced", [], r"made with --n 50 --epsilon 2 --replicates 2",
                                    r"this run has no overrides \(the full study\)"),
    "other overrides": ("reduced", ["--n", "20", "--epsilon", "2", "--replicates", "2"],
                        r"made with --n 50 --epsilon 2 --replicates 2", r"this run has --n 20 --epsilon 2 "
                        r"--replicates 2"),
    # --n 20,50 is the spec's own axis: no override of n
    "the spec's own n": ("reduced", ["--n", "20,50", "--epsilon", "2", "--replicates", "2"],
                         r"made with --n 50 --epsilon 2 --replicates 2", r"this run has --epsilon 2 --replicates 2;"),
    "fewer overrides": ("reduced", ["--n", "50", "--epsilon", "2"], r"made with --n 50 --epsilon 2 --replicates 2",
                        r"this run has --n 50 --epsilon 2;"),
    "reduced run on the full store": ("full", ["--replicates", "2"], r"made with no overrides \(the full study\)",
                                      r"this run has --replicates 2"),
}


@pytest.mark.parametrize("name", MIXES)
@pytest.mark.parametrize("command", ["run", "plan"])
def test_other_overrides_never_share_a_store(stores, capsys, name, command):
    spec, full, reduced = stores
    which, flags, theirs, ours = MIXES[name]
    store = {"full": full, "reduced": reduced}[which]
    argv = [command, str(spec), "--store", str(store), *flags] + (["--scheduler", NOWHERE] if command == "run" else [])
    before = snapshot(Path(store).parent)
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    one_error(err, rf"store {re.escape(str(store))} was {theirs}", ours, r"never share a store")
    assert snapshot(Path(store).parent) == before


def test_the_same_overrides_resume(stores):
    spec_path, _, reduced = stores
    spec = parse_spec(spec_path.read_text())
    assert check_store(apply_overrides(spec, n="50", epsilon="2", replicates="2"), reduced) == "resume"
    # the same values in another order are the same overrides
    assert check_store(apply_overrides(spec, replicates="2", epsilon="2.0", n="50"), reduced) == "resume"
    with pytest.raises(SpecMismatch, match="never share a store"):
        check_store(apply_overrides(spec, n="50", epsilon="2", replicates="3"), reduced)


def test_plan_takes_the_flags(stores, capsys):
    spec, _, reduced = stores
    assert main(["plan", str(spec), "--n", "50", "--epsilon", "2", "--replicates", "2", "--store", str(reduced)]) == 0
    out = capsys.readouterr().out
    assert "plan: reduced run of" in out and "--n 50 --epsilon 2 --replicates 2" in out
    assert re.search(r"plan: 4 cells, 0 to compute", out), out
    assert main(["plan", str(spec), "--n", "20", "--replicates", "1"]) == 0
    assert re.search(r"plan: 4 cells, 4 to compute", capsys.readouterr().out)


def test_help_lists_the_flags():
    from kngflow.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    for command in ("run", "plan"):
        text = sub.choices[command].format_help()
        for flag in ("--n N1,N2,...", "--epsilon E1,E2,...", "--replicates K"):
            assert flag in text, (command, flag)


@pytest.mark.slow
def test_kngflow_run_with_overrides(stores, tmp_path, capsys):
    """The real command on one local worker: the overrides' cells, recorded, equal to the full study."""
    spec, full, _ = stores
    store = tmp_path / "run.zarr"
    argv = ["run", str(spec), "--store", str(store), "--n", "20", "--epsilon", "0.5", "--replicates", "2",
            "--workers", "1", "--no-dashboard", "--no-progress"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "reduced run of" in out and "--n 20 --epsilon 0.5 --replicates 2" in out
    assert "4/4 cells done, 0 failed" in out
    ds = st.open_dataset(store)
    assert json.loads(ds.attrs["overrides"]) == {"n": [20], "epsilon": [0.5], "replicates": 2}
    assert_same(ds, st.open_dataset(full), subset=True)


def test_repair_rebuilds_a_reduced_store_from_its_own_overrides(tmp_path):
    """Damaged metadata of a reduced store is rebuilt from the store's spec and its overrides."""
    import os

    from kngflow.sweep.repair import damage_problem

    spec = parse_spec(tiny_spec(replicates=3))
    store = run_here(apply_overrides(spec, n="50", replicates="2"), tmp_path / "s.zarr")
    before = st.open_dataset(store).load()
    os.remove(store / "error" / "zarr.json")
    assert "is damaged" in damage_problem(store)
    assert damage_problem(store, repair=True, spec=spec, log=lambda line: None) is None
    assert damage_problem(store) is None
    assert_same(before, st.open_dataset(store))

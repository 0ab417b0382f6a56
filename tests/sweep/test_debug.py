"""``kngflow debug SPEC --cell ...``: one cell in this process, bit for bit the stored cell.

A tiny study runs into a store in this process (``run_task``: the workers' own
``compute_block``); ``debug`` then recomputes cells through ``kngflow.cli.main`` and its
printed estimate (``repr`` floats) must equal the stored one bit for bit (``float.hex``),
with a different replicate as the negative control.  A bad spec or a cell not in the grid
is one ``kngflow: error:`` line and exit 2; a failing release raises its own exception
(the traceback is what ``debug`` is for).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from testkit import EXPONENTIAL, tiny_spec

from kngflow import store as st
from kngflow.api import MECHANISMS
from kngflow.cli import main
from kngflow.sweep import parse_spec, plan_tasks, prepare_store, run_task
from kngflow.sweep.debug import CellKey, debug_cell, parse_cell


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """``(spec path, store)``: the tiny study with the exponential mechanism, every cell done."""
    tmp = tmp_path_factory.mktemp("debug")
    spec = parse_spec(tiny_spec(replicates=3, extra=EXPONENTIAL))
    path = tmp / "study.toml"
    path.write_text(spec.text)
    store = tmp / "s.zarr"
    meta, _ = prepare_store(spec, store)
    for task in plan_tasks(meta, st.read_flags(store)[0]):
        run_task(str(store), spec.text, meta, task)
    assert st.read_flags(store)[0].all()
    return path, store


def printed(out: str, key: str) -> list[float]:
    """The numbers of the ``key: ...`` line of ``kngflow debug``'s output."""
    line = re.search(rf"^{re.escape(key)}: (.*)$", out, re.M).group(1)
    return [float(x) for x in line.strip("[]").split(",")]


def hexes(values) -> list[str]:
    return [float(v).hex() for v in np.asarray(values, dtype=np.float64).ravel()]


CELLS = [("kng", 50, 2.0, 2), ("exponential", 20, 0.5, 1), ("nonprivate", 50, 0.5, 0)]


@pytest.mark.parametrize("mechanism,n,epsilon,replicate", CELLS)
def test_debug_reproduces_the_stored_cell_bit_for_bit(study, capsys, mechanism, n, epsilon, replicate):
    spec_path, store = study
    code = main(["debug", str(spec_path), "--cell", f"mechanism={mechanism},n={n},epsilon={epsilon:g},"
                 f"replicate={replicate}"])
    out, err = capsys.readouterr()
    assert code == 0 and err == "", err
    ds = st.open_dataset(store)
    cell = dict(mechanism=mechanism, n=n, epsilon=epsilon, replicate=replicate)
    assert hexes(printed(out, "estimate")) == hexes(ds.estimate.sel(cell).values)
    assert hexes(printed(out, "error")) == hexes(ds.error.sel(cell).values)
    for name in ("acceptance", "steps"):  # the declared diagnostics, as stored
        assert hexes(printed(out, f"diagnostic {name}")) == hexes(ds[name].sel(cell).values), name
    assert f"cell: mechanism={mechanism},n={n},epsilon={epsilon:g},replicate={replicate}" in out
    assert "root seed 7" in out and "data scale: " in out
    # negative control: another replicate (same mechanism, n and epsilon) is another cell
    other = dict(cell, replicate=(replicate + 1) % 3)
    assert hexes(printed(out, "estimate")) != hexes(ds.estimate.sel(other).values)


def test_debug_cell_function_equals_the_store(study):
    spec_path, store = study
    spec = parse_spec(spec_path.read_text())
    ds = st.open_dataset(store)
    result, summary = debug_cell(spec, CellKey("kng", 20, 0.5, 0))
    assert hexes(result.estimate) == hexes(ds.estimate.sel(mechanism="kng", n=20, epsilon=0.5, replicate=0).values)
    assert hexes([summary["scale"]]) == hexes(ds.scale.sel(n=20, replicate=0).values)
    assert result.diagnostics["sampler"] == int(ds.sampler.sel(mechanism="kng", n=20, epsilon=0.5, replicate=0))
    # another epsilon on the same data set: same data, another release
    other, summary2 = debug_cell(spec, CellKey("kng", 20, 2.0, 0))
    assert summary2["scale"] == summary["scale"] and hexes(other.estimate) != hexes(result.estimate)


def test_parse_cell_defaults_a_single_valued_axis():
    spec = parse_spec(tiny_spec(n=(20,), epsilon=(1.0,), replicates=[5, 9]))
    assert parse_cell(spec, "mechanism=kng, replicate=9") == CellKey("kng", 20, 1.0, 9)
    assert parse_cell(spec, "replicate=5,mechanism=nonprivate,epsilon=1e0,n=20") == CellKey("nonprivate", 20, 1.0, 5)


BAD_CELLS = {
    "not in the grid (n)": ("mechanism=kng,n=30,epsilon=2,replicate=0", r"--cell: n=30 is not in the spec's grid; "
                            r"its n values are 20, 50"),
    "not in the grid (replicate)": ("mechanism=kng,n=20,epsilon=2,replicate=3", r"replicate=3 is not in the spec's "
                                    r"grid; its replicate values are 0, 1, 2"),
    "not in the grid (epsilon)": ("mechanism=kng,n=20,epsilon=1,replicate=0", r"epsilon=1 is not in the spec's grid; "
                                  r"its epsilon values are 0.5, 2"),
    "unknown mechanism": ("mechanism=kgn,n=20,epsilon=2,replicate=0", r"mechanism=kgn is not in the spec's grid; "
                          r"its mechanism values are nonprivate, kng, exponential"),
    "missing key": ("mechanism=kng,n=20,epsilon=2", r"replicate is missing; the spec's replicate values are 0, 1, 2"),
    "unknown key": ("mech=kng,n=20,epsilon=2,replicate=0", r"unknown key 'mech'; allowed keys are mechanism, n, "
                    r"epsilon, replicate"),
    "not a number": ("mechanism=kng,n=2e1,epsilon=2,replicate=0", r"n=2e1 is not an integer"),
    "not key=value": ("kng,n=20", r"'kng' is not KEY=VALUE"),
    "twice": ("n=20,n=50", r"n is given twice"),
}


@pytest.mark.parametrize("name", BAD_CELLS)
def test_a_cell_not_in_the_grid_is_one_line(study, capsys, name):
    spec_path, _ = study
    cell, pattern = BAD_CELLS[name]
    assert main(["debug", str(spec_path), "--cell", cell]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("kngflow: error: --cell: "), err
    assert re.search(pattern, err), err


def test_a_bad_spec_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text(tiny_spec().replace('kind = "kng"', 'kind = "kgn"'))
    assert main(["debug", str(bad), "--cell", "mechanism=kng,n=20,epsilon=2,replicate=0"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert re.search(r"invalid spec .*mechanisms\[1\]\.kind: unknown mechanism kind 'kgn'", err), err


def test_a_failing_release_raises_its_own_exception(study, capsys, monkeypatch):
    """The sweep records a failing release's message; debug lets it raise (a real traceback)."""
    spec_path, _ = study
    kng = MECHANISMS["linear"]["kng"]

    def broken(self, stats, epsilon, rng):
        raise FloatingPointError("synthetic failure in the release")

    monkeypatch.setattr(kng, "release", broken)
    with pytest.raises(FloatingPointError, match="synthetic failure in the release") as info:
        main(["debug", str(spec_path), "--cell", "mechanism=kng,n=20,epsilon=2,replicate=0"])
    assert any(entry.name == "broken" for entry in info.traceback)  # the mechanism's own frame
    assert capsys.readouterr().err == ""

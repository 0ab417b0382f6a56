"""Damage found and repaired: checksummed chunks, `kngflow verify`, `kngflow run --repair`."""

from __future__ import annotations

import json

import pytest
import zarr

from kngflow import store as st
from kngflow.store.verify import verify_store

from testkit import (assert_changed_fill_value_is_not_repaired, assert_same, copy_store, damage_metadata, kngflow_cli,
                     one_line, study_run, tiny_spec, undo_replicate)

RUN = ("--workers", 1, "--no-dashboard", "--no-progress")
#: every test reads (a copy of) the store of a real ``kngflow run`` on a Dask cluster: the slow tier
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sound(tmp_path_factory, study_cluster):
    """(spec path, a complete store) made once; tests damage copies of it."""
    tmp = tmp_path_factory.mktemp("sound")
    spec = tmp / "tiny.toml"
    spec.write_text(tiny_spec(replicates=3))
    store = tmp / "s.zarr"
    r = study_run(study_cluster, spec, store)
    assert r.returncode == 0, r.stderr
    return spec, store


def test_new_stores_have_checksums_and_a_format(sound):
    g = zarr.open_group(str(sound[1]), mode="r")
    assert g.attrs["kngflow_store_format"] == st.STORE_FORMAT
    codecs = g["estimate"].metadata.codecs
    assert any(type(c).__name__ == "Crc32cCodec" for c in codecs)


@pytest.mark.slow
def test_truncated_chunk_is_found_and_repaired_bit_for_bit(sound, tmp_path, study_cluster):
    spec, good = sound
    store = copy_store(sound[1], tmp_path)
    chunk = store / "estimate" / "c" / "0" / "0" / "0" / "0" / "0"
    chunk.write_bytes(chunk.read_bytes()[:10])
    assert verify_store(good) == []
    v = kngflow_cli("verify", store, "--no-progress")
    assert v.returncode == 1, v.stdout + v.stderr
    assert str(chunk) in v.stdout and "mechanism=" in v.stdout and "replicate=" in v.stdout
    for cmd in (("status", store), ("report", store, "--out", tmp_path / "rep"), ("run", spec, "--store", store, *RUN)):
        line = one_line(kngflow_cli(*cmd))
        assert "damaged" in line and "verify" in line
    r = study_run(study_cluster, spec, store, "--repair")
    assert r.returncode == 0, r.stderr
    assert "repaired" in r.stdout
    assert kngflow_cli("verify", store, "--no-progress").returncode == 0
    assert_same(st.open_dataset(good).load(), st.open_dataset(store).load())
    assert kngflow_cli("report", store, "--out", tmp_path / "rep").returncode == 0


def test_missing_estimate_chunk_of_done_cells_is_damage(sound, tmp_path):
    store = copy_store(sound[1], tmp_path)
    (store / "estimate" / "c" / "0" / "0" / "0" / "0" / "0").unlink()
    damage = verify_store(store)
    assert len(damage) == 1 and "done but without an estimate" in damage[0].what


@pytest.mark.parametrize("target", ["zarr.json", "estimate/zarr.json"])
def test_damaged_metadata_gives_one_line(sound, tmp_path, target):
    spec = sound[0]
    store = copy_store(sound[1], tmp_path)
    (store / target).write_text("{garbage")
    for cmd in (("status", store), ("report", store, "--out", tmp_path / "rep"), ("run", spec, "--store", store, *RUN)):
        assert target in one_line(kngflow_cli(*cmd))
    v = kngflow_cli("verify", store, "--no-progress")
    assert v.returncode == 1 and target in v.stdout, v.stdout + v.stderr


@pytest.mark.slow
@pytest.mark.parametrize("target", ["zarr.json", "zarr.json missing", "estimate/zarr.json", "n/zarr.json missing",
                                    "done/zarr.json"])
def test_damaged_metadata_is_rebuilt_from_the_spec_and_the_run_resumes(sound, tmp_path, target, study_cluster):
    spec, good = sound
    store = copy_store(sound[1], tmp_path)
    undo_replicate(store, 2)
    file = damage_metadata(store, target)
    r = study_run(study_cluster, spec, store, "--repair")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"rebuilt {file} from the spec" in r.stdout
    assert "16/24 cells done, 8 to compute" in r.stdout  # the done cells are kept
    assert kngflow_cli("verify", store, "--no-progress").returncode == 0
    assert_same(st.open_dataset(good).load(), st.open_dataset(store).load())


def test_metadata_that_cannot_be_rebuilt_gives_one_line(sound, tmp_path):
    """A damaged root and another spec (another seed: same coordinates and chunks), or an
    intact array unlike the spec's: one line naming the file, nothing written."""
    spec = sound[0]
    other = tmp_path / "other.toml"
    other.write_text(tiny_spec(replicates=3, seed=8))
    store = copy_store(sound[1], tmp_path)
    (store / "zarr.json").write_text("{garbage")
    line = one_line(kngflow_cli("run", other, "--store", store, "--repair", *RUN, process=False))
    assert "cannot repair" in line and str(store / "zarr.json") in line and "does not reproduce" in line
    assert (store / "zarr.json").read_text() == "{garbage"
    assert_changed_fill_value_is_not_repaired(store, spec, *RUN)


def test_store_of_a_future_format_is_refused(sound, tmp_path):
    store = copy_store(sound[1], tmp_path)
    meta = json.loads((store / "zarr.json").read_text())
    meta["attributes"]["kngflow_store_format"] = st.STORE_FORMAT + 1
    meta.pop("consolidated_metadata", None)
    (store / "zarr.json").write_text(json.dumps(meta))
    assert "upgrade kngflow" in one_line(kngflow_cli("status", store))


@pytest.mark.parametrize("where", ["/proc/x.zarr", "file"])
def test_unwritable_store_is_refused_before_anything_is_created(sound, tmp_path, where):
    store = "/proc/x.zarr" if where == "/proc/x.zarr" else tmp_path / "plain"
    if where == "file":
        store.write_text("x")
    line = one_line(kngflow_cli("run", sound[0], "--store", store, *RUN, process=False))
    assert str(store) in line
    assert sorted(p.name for p in tmp_path.iterdir()) == (["plain"] if where == "file" else [])

"""The dependency floors in pyproject.toml are the versions .ci/floors.txt installs."""

import tomllib
from pathlib import Path

import numpy as np
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def _pyproject_floors():
    """The runtime dependencies' floors and the ``estimators`` extra's (scikit-learn)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] + project["optional-dependencies"]["estimators"]
    floors = {}
    for d in deps:
        req = Requirement(d)
        lows = [s.version for s in req.specifier if s.operator == ">="]
        assert len(lows) == 1, f"{d}: one '>=' floor expected"
        floors[canonicalize_name(req.name)] = Version(lows[0])
    return floors


def _pins():
    pins = {}
    for line in (ROOT / ".ci" / "floors.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            (spec,) = req.specifier
            assert spec.operator == "==", line
            pins[canonicalize_name(req.name)] = Version(spec.version)
    return pins


def test_floors_file_pins_exactly_pyproject_floors():
    floors, pins = _pyproject_floors(), _pins()
    # distributed comes with dask[distributed] and is released in lockstep with it
    assert pins.pop("distributed") == floors["dask"]
    assert pins == floors


def test_zarr_2_is_refused_at_install_time():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (zarr_req,) = [Requirement(d) for d in deps if Requirement(d).name == "zarr"]
    assert not zarr_req.specifier.contains("2.18.7")


def test_written_float_fill_value_is_nan(tmp_path):
    xr = pytest.importorskip("xarray")
    zarr = pytest.importorskip("zarr")
    ds = xr.Dataset({"x": ("i", np.full(4, np.nan))})
    ds.to_zarr(tmp_path / "s.zarr", mode="w-", zarr_format=3, consolidated=False,
               encoding={"x": {"fill_value": np.nan}})
    arr = zarr.open_array(tmp_path / "s.zarr" / "x", mode="r")
    assert np.isnan(arr.metadata.fill_value)


def test_crc32c_codec_round_trips(tmp_path):
    zarr = pytest.importorskip("zarr")
    from zarr.codecs import BytesCodec, Crc32cCodec

    # Crc32cCodec is a bytes-to-bytes codec: pass it as a compressor
    b = zarr.create_array(tmp_path / "b.zarr", shape=(6,), chunks=(3,), dtype="f8",
                          fill_value=np.nan, compressors=[Crc32cCodec()], zarr_format=3)
    b[:] = np.arange(6.0)
    back = zarr.open_array(tmp_path / "b.zarr", mode="r")
    assert any(isinstance(c, Crc32cCodec) for c in back.compressors)
    np.testing.assert_array_equal(back[:], np.arange(6.0))

"""A store written before problems became plug-ins and before the single-writer engine.

``tests/data/legacy_smoke.zarr`` was written by kngflow 0.1.0 as it stood when KNG
Figure 1 landed (``kngflow run workflows/smoke.toml``: linear regression, d = 12, all
four mechanisms, n = 100 and 1000, 4 replicates; replicate chunks of 4, as that engine
sized them).  Today's code must open it, report on it and resume it, and the cells it
recomputes must equal the old ones bit for bit: the linear-regression numbers (Figure 1's
included) did not move.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr

from testkit import DETERMINISTIC, TESTS, assert_same, kngflow_cli, kngflow_command, study_run

LEGACY = TESTS / "data" / "legacy_smoke.zarr"
SPEC = Path(__file__).resolve().parents[2] / "workflows" / "smoke.toml"

pytestmark = pytest.mark.slow  # a real run resumes the store


def test_legacy_store_opens_reports_and_resumes_bit_for_bit(tmp_path, study_cluster):
    store = tmp_path / "legacy.zarr"
    shutil.copytree(LEGACY, store)
    old = xr.open_zarr(store).load()
    assert int(old["done"].sum()) == old["done"].size == 32

    status = kngflow_cli("status", store)
    assert status.returncode == 0 and "overall: 32 done, 0 failed, 32 total" in status.stdout, status.stdout + status.stderr
    # a reader that goes away (``kngflow status STORE | head -1``) gets no traceback
    proc = subprocess.Popen([*kngflow_command(), "status", str(store)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    proc.stdout.close()
    assert proc.wait(timeout=120) == 141
    assert proc.stderr.read() == ""
    report = kngflow_cli("report", store, "--out", tmp_path / "report")
    assert report.returncode == 0, report.stderr
    assert "| kng | 10^3 | 1 | 4/4 |" in (tmp_path / "report" / "report.md").read_text()

    # forget replicates 2 and 3 of every cell, as if the old run had been interrupted
    done = zarr.open_group(str(store), mode="r+")["done"]
    flags = done[:]
    flags[..., 2:] = 0
    done[:] = flags
    run = study_run(study_cluster, SPEC, store)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "resumed; 16/32 cells done, 16 to compute" in run.stdout, run.stdout
    new = xr.open_zarr(store).load()
    variables = [v for v in DETERMINISTIC if v in old]
    # the cells that stayed done were not touched
    assert_same(old.isel(replicate=slice(0, 2)), new.isel(replicate=slice(0, 2)), variables)
    # the recomputed cells equal a fresh run of the same spec on this machine, bit for bit
    fresh_store = tmp_path / "fresh.zarr"
    fresh = study_run(study_cluster, SPEC, fresh_store)
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    fresh = xr.open_zarr(fresh_store).load()
    assert_same(fresh.isel(replicate=slice(2, 4)), new.isel(replicate=slice(2, 4)), variables)
    # and the old ones, bit for bit, where this machine's floating point reproduces the old
    # run's (the data and the non-private fit equal): the same BLAS kernels.  On another CPU
    # the last bits of a sum may differ, and a rejection sampler's accept/reject with them.
    if np.array_equal(fresh["estimate"].sel(mechanism="nonprivate").values,
                      old["estimate"].sel(mechanism="nonprivate").values):
        assert_same(old, new, variables)
    else:
        np.testing.assert_allclose(new["estimate"].sel(mechanism="nonprivate").values,
                                   old["estimate"].sel(mechanism="nonprivate").values, rtol=0, atol=1e-12)
    # the negative control: a recomputed cell that differed would be caught
    tampered = new.copy(deep=True)
    tampered["estimate"][1, 1, 0, 3, 0] = np.nextafter(tampered["estimate"][1, 1, 0, 3, 0].item(), np.inf)
    try:
        assert_same(old, tampered, ["estimate"])
    except AssertionError:
        pass
    else:
        raise AssertionError("assert_same missed a one-ulp change")

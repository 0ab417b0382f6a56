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
import xarray as xr
import zarr

from conftest import DETERMINISTIC, assert_same, kngflow_cli, kngflow_command

LEGACY = Path(__file__).with_name("data") / "legacy_smoke.zarr"
SPEC = Path(__file__).resolve().parents[1] / "workflows" / "smoke.toml"


def test_legacy_store_opens_reports_and_resumes_bit_for_bit(tmp_path):
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
    run = kngflow_cli("run", SPEC, "--store", store, "--workers", "1", "--no-dashboard", timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "resumed; 16/32 cells done, 16 to compute" in run.stdout, run.stdout
    new = xr.open_zarr(store).load()
    assert_same(old, new, [v for v in DETERMINISTIC if v in old])
    # the negative control: a recomputed cell that differed would be caught
    tampered = new.copy(deep=True)
    tampered["estimate"][1, 1, 0, 3, 0] = np.nextafter(tampered["estimate"][1, 1, 0, 3, 0].item(), np.inf)
    try:
        assert_same(old, tampered, ["estimate"])
    except AssertionError:
        pass
    else:
        raise AssertionError("assert_same missed a one-ulp change")

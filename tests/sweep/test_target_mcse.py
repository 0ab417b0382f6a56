"""``kngflow plan SPEC --target-mcse X --pilot STORE``: replicates for a target Monte Carlo SE.

A real pilot (20 replicates of a small mean study) is run, the plan's ``replicates = R`` is
applied to the spec, the run extends the same store, and the achieved MCSE of the mean error
is checked against X in every cell.  Negative control: the pilot's own replicate count does
not reach X.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import xarray as xr
from testkit import kngflow_cli, study_run
from scipy import stats

SPEC = """
name = "mcse_pilot"
seed = 424242

[problem]
name = "mean"
d = 2
theta = [0.5, -0.25]
sigma = 0.5
radius = 1.0
data_norm = "linf"

[grid]
n = [100, 1_000]
epsilon = [1.0]
replicates = {replicates}

[[mechanisms]]
label = "nonprivate"
kind = "nonprivate"

[[mechanisms]]
label = "kng_linf"
kind = "kng"
norm = "linf"
"""
PILOT = 20
CELLS = 4  # 2 mechanisms x 2 n x 1 epsilon
#: The SE after R = ceil((sd_pilot/X)^2) replicates is about X * sd/sd_pilot.  The pilot's SD
#: from 20 replicates is below the truth by the factor sqrt(chi2_19/19); the margin is that
#: factor's 1e-4/CELLS quantile (a union bound over the cells), times 1.15 for the SD
#: estimated from the R replicates themselves: a false failure is rarer than 1 in 10^4.
MARGIN = math.sqrt((PILOT - 1) / stats.chi2.ppf(1e-4 / CELLS, PILOT - 1)) * 1.15


def _mcse(store) -> xr.DataArray:
    ds = xr.open_zarr(store)
    err = ds.error.where(ds.done == 1)
    return (err.std("replicate", ddof=1) / np.sqrt(err.count("replicate"))).compute()


@pytest.fixture(scope="module")
def pilot(tmp_path_factory, study_cluster):
    tmp = tmp_path_factory.mktemp("mcse")
    spec = tmp / "study.toml"
    spec.write_text(SPEC.format(replicates=PILOT))
    proc = study_run(study_cluster, spec, tmp / "study.zarr")
    assert proc.returncode == 0, proc.stderr
    return tmp, spec, tmp / "study.zarr"


@pytest.mark.slow
def test_planned_replicates_reach_the_target(pilot, study_cluster):
    _, spec, store = pilot
    pilot_se = _mcse(store)
    X = float(pilot_se.max()) / 3  # about 9 times the pilot's replicates in the widest cell
    assert float(pilot_se.max()) > X  # negative control: 20 replicates do not reach X
    proc = kngflow_cli("plan", spec, "--target-mcse", X, "--pilot", store)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    m = re.search(r"^needed: replicates = (\d+) \(the largest over the grid, which is a product\), driven by (.+)$",
                  out, re.MULTILINE)
    assert m, out
    R = int(m.group(1))
    assert R > PILOT and ("kng_linf" in m.group(2) or "nonprivate" in m.group(2))
    assert f"set  replicates = {R}  (now {PILOT})" in out
    rows = [line for line in out.splitlines() if re.match(r"^(nonprivate|kng_linf)\s", line)]
    assert len(rows) == CELLS and all(line.rstrip().endswith("sd") for line in rows), out
    spec.write_text(SPEC.format(replicates=R))
    proc = study_run(study_cluster, spec, store)
    assert proc.returncode == 0, proc.stderr
    achieved = _mcse(store)
    assert int(xr.open_zarr(store).done.sum()) == CELLS * R
    assert float(achieved.max()) <= MARGIN * X, (float(achieved.max()), X, MARGIN)
    # the planned count is what the pilot's SD asks for, not a blanket: the widest cell drives it
    assert float(achieved.max()) > 0.5 * X
    proc = kngflow_cli("plan", spec, "--target-mcse", X, "--pilot", store)
    assert proc.returncode == 0 and ("no change needed" in proc.stdout or "set  replicates" in proc.stdout)


@pytest.mark.parametrize("case, message", [
    ("missing", "pilot store {tmp}/nowhere.zarr does not exist"),
    ("other", "was made from another spec (its seed differs"),
    ("wider", "has no n = 10000: the pilot must cover SPEC's grid"),
    ("zero", "--target-mcse must be > 0, got 0"),
    ("negative", "--target-mcse must be > 0, got -0.1"),
    ("statistic", "--statistic 'mode' is not known; allowed: mean_error, median_error, rmse, coverage"),
    ("alone", "--target-mcse X and --pilot STORE go together"),
])
@pytest.mark.slow
def test_bad_target_input_is_one_line_exit_2(pilot, case, message):
    tmp, spec, store = pilot
    args = ["plan", spec, "--target-mcse", 0.01, "--pilot", store]
    if case == "missing":
        args[5] = tmp / "nowhere.zarr"
    elif case == "other":
        other = tmp / "other.toml"
        other.write_text(SPEC.format(replicates=PILOT).replace("seed = 424242", "seed = 1"))
        args[1] = other
    elif case == "wider":
        other = tmp / "wider.toml"
        other.write_text(SPEC.format(replicates=PILOT).replace("n = [100, 1_000]", "n = [100, 1_000, 10_000]"))
        args[1] = other
    elif case in ("zero", "negative"):
        args[3] = 0 if case == "zero" else -0.1
    elif case == "statistic":
        args += ["--statistic", "mode"]
    elif case == "alone":
        args = args[:4]
    proc = kngflow_cli(*args)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message.format(tmp=tmp) in lines[0], proc.stderr
    assert not (tmp / "nowhere.zarr").exists()


def test_rule_for_cells_without_spread_or_with_too_few_replicates():
    from synthetic import SyntheticMechanism as SM
    from synthetic import synthetic_dataset

    from kngflow.analysis.target import MIN_PILOT, replicates_for_target

    ds = synthetic_dataset([SM("np", "nonprivate"), SM("k", "kng", lambda n, e: 0.1)], n=[100, 1000], replicates=20,
                           d=2, seed=2, done=lambda lab, n, e, r: not (lab == "k" and n == 1000 and r >= MIN_PILOT - 1))
    ds["error"] = ds.error.where(~((ds.mechanism == "np") & (ds.n == 100)), 0.25)  # no spread
    res = replicates_for_target(ds, 0.001)
    cell = res.sel(mechanism="np", n=100, epsilon=1.0)
    assert str(cell.rule.values) == "no spread" and int(cell.needed) == 20
    few = res.sel(mechanism="k", n=1000, epsilon=1.0)
    assert str(few.rule.values) == "too few" and np.isnan(float(few.needed))
    ok = res.sel(mechanism="k", n=100, epsilon=1.0)
    assert int(ok.needed) == math.ceil((float(ok.sd) / 0.001) ** 2)

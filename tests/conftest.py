"""Shared test helpers: a tiny real study spec, the real CLI, bit-for-bit store comparison."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from kngflow import store as st

from xdist_groups import pytest_xdist_make_scheduler  # noqa: F401  (pytest-xdist's hook)

#: Store variables that must match bit for bit between runs (``seconds`` is wall time).
DETERMINISTIC = [v for v in st.VARIABLES if v != "seconds"] + ["scale", "ols_stderr", "theta_star"]
ALL_VARIABLES = list(st.VARIABLES) + ["scale", "ols_stderr", "theta_star"]

TINY_SPEC = """\
name = "tiny"
seed = {seed}

[problem]
name = "linear"
d = 3
protocol = "paper"

[grid]
n = {n}
epsilon = {epsilon}
replicates = {replicates}

[sampler]
steps = 200

[[mechanisms]]
label = "nonprivate"
kind = "nonprivate"

[[mechanisms]]
label = "kng"
kind = "kng"
norm = "linf"
bound = 1.0
{extra}
"""


def tiny_spec(*, seed=7, n=(20, 50), epsilon=(0.5, 2.0), replicates=4, extra="") -> str:
    """TOML text of a small real linear-regression study (d = 3)."""
    return TINY_SPEC.format(
        seed=seed,
        n=list(n),
        epsilon=list(epsilon),
        replicates=replicates if isinstance(replicates, int) else list(replicates),
        extra=extra,
    )


EXPONENTIAL = """
[[mechanisms]]
label = "exponential"
kind = "exponential"
bound = 1.0
"""


@pytest.fixture
def spec_text():
    return tiny_spec


def kngflow_command() -> list[str]:
    """The installed ``kngflow`` entry point (``python -m kngflow.cli`` if there is none)."""
    exe = Path(sys.executable).with_name("kngflow")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "kngflow.cli"]


def kngflow_cli(*args, timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    """Run the real CLI with ``args`` and capture its output."""
    return subprocess.run([*kngflow_command(), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, **kw)


WORKFLOWS = Path(__file__).resolve().parents[1] / "workflows"


def reduced_workflow(tmp_path, name: str, replace) -> Path:
    """``workflows/NAME.toml`` with each ``(old, new)`` of ``replace`` applied (each ``old``
    must occur), written to ``tmp_path``."""
    text = (WORKFLOWS / f"{name}.toml").read_text()
    for old, new in replace:
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def run_and_report(tmp_path, spec: Path):
    """``kngflow run`` on 1 worker (every cell must finish), then ``kngflow report``:
    the store's dataset and the report directory."""
    store = tmp_path / "study.zarr"
    run = kngflow_cli("run", spec, "--store", store, "--workers", 1, "--no-dashboard", "--no-progress")
    assert run.returncode == 0, run.stdout + run.stderr
    ds = xr.open_zarr(store)
    assert int(ds["done"].sum()) == ds["done"].size
    out = tmp_path / "report"
    rep = kngflow_cli("report", store, "--out", out)
    assert rep.returncode == 0, rep.stderr
    return ds, out


def assert_same(a: xr.Dataset, b: xr.Dataset, variables=DETERMINISTIC, *, subset=False) -> None:
    """Bit-for-bit equality (NaN-aware) after aligning ``b`` on ``a``'s coordinates.

    With ``subset``, ``b`` may have more cells than ``a`` (an extended store).
    """
    for dim in ("mechanism", "n", "epsilon", "replicate"):
        x, y = set(a[dim].values.tolist()), set(b[dim].values.tolist())
        assert x <= y if subset else x == y, dim
    b = b.sel(mechanism=a.mechanism, n=a.n, epsilon=a.epsilon, replicate=a.replicate)
    for v in variables:
        x, y = a[v].values, b[v].values
        assert x.dtype == y.dtype, v
        assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), v

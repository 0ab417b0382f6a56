"""Helpers the tests import: a tiny real study spec, the real CLI (in-process where no cluster
starts), bit-for-bit store comparison, and the repository's paths."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import xarray as xr

from kngflow import store as st

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


def kngflow_command() -> list[str]:
    """The installed ``kngflow`` entry point (``python -m kngflow.cli`` if there is none)."""
    exe = Path(sys.executable).with_name("kngflow")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "kngflow.cli"]


#: commands that start no cluster, run in-process by :func:`kngflow_cli`
IN_PROCESS = frozenset({"plan", "status", "report", "audit", "verify", "export", "debug"})
#: options that make a command start or reach a cluster (it then runs as a real process)
CLUSTER_OPTIONS = ("--scheduler", "--scheduler-file", "--cluster", "--workers")


def kngflow_cli(*args, timeout: float = 300, process: bool | None = None, **kw) -> subprocess.CompletedProcess:
    """Run the CLI with ``args`` and capture its output.

    Commands that start no cluster run in this process, through :func:`kngflow.cli.main`
    (45 ms against 1.2 s for a new interpreter); ``run``, any command reaching a cluster,
    and calls with ``process=True`` or ``subprocess.run`` keywords (``env``, ``cwd``,
    ``input``) run the real entry point as a child process.  ``process=False`` runs any
    command in this process: a ``run`` that must be refused before a cluster starts.
    Either way the result is a ``CompletedProcess`` with the exit status and the captured
    stdout and stderr.
    """
    argv = list(map(str, args))
    if process is None:
        process = bool(kw) or not in_process(argv)
    if process:
        return subprocess.run([*kngflow_command(), *argv], capture_output=True, text=True, timeout=timeout, **kw)
    return cli_in_process(argv)


def in_process(argv: list[str]) -> bool:
    """Whether ``kngflow ARGV`` starts no cluster (:data:`IN_PROCESS`, no :data:`CLUSTER_OPTIONS`),
    so that a test may run it in its own process."""
    return bool(argv) and argv[0] in IN_PROCESS and not any(a.split("=")[0] in CLUSTER_OPTIONS for a in argv)


def cli_in_process(argv: list[str]) -> subprocess.CompletedProcess:
    """``kngflow ARGV`` through :func:`kngflow.cli.main` with stdout and stderr captured, as
    the process would end: ``SystemExit``'s status, or a traceback on stderr and status 1."""
    import contextlib
    import io
    import logging
    import traceback
    import warnings

    from kngflow import cli

    out, err = io.StringIO(), io.StringIO()
    disabled = logging.root.manager.disable
    with warnings.catch_warnings(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = cli.main(argv)
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if not isinstance(exc.code, (int, type(None))):
                print(exc.code, file=sys.stderr)
        except Exception:
            traceback.print_exc()
            status = 1
        finally:
            logging.disable(disabled)
    return subprocess.CompletedProcess(["kngflow", *argv], status, out.getvalue(), err.getvalue())


#: the tests' folder and the repository root
TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
WORKFLOWS = REPO / "workflows"


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


def study_run(cluster, spec: Path, store: Path, *args) -> subprocess.CompletedProcess:
    """``kngflow run SPEC --store STORE --scheduler ADDRESS --no-progress ARGS`` in this process,
    on the test process's one-worker cluster (the ``study_cluster`` fixture)."""
    return kngflow_cli("run", spec, "--store", store, "--scheduler", cluster.address, "--no-progress", *args,
                       process=False)


def run_and_report(tmp_path, spec: Path, cluster):
    """``kngflow run`` on the one-worker ``cluster`` (:func:`study_run`; every cell must
    finish), then ``kngflow report``: the store's dataset and the report directory."""
    store = tmp_path / "study.zarr"
    run = study_run(cluster, spec, store)
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


# ---------------------------------------------------------------------------
# command-line refusals and damaged stores
# ---------------------------------------------------------------------------
def one_line(r: subprocess.CompletedProcess) -> str:
    """The one ``kngflow: error: ...`` line of a refusal (exit status 2, nothing else on stderr)."""
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kngflow: error: "), r.stderr
    return lines[0]


def copy_store(store: Path, tmp_path: Path) -> Path:
    """A copy of ``store`` at ``tmp_path/s.zarr`` (a test may damage it)."""
    copy = tmp_path / "s.zarr"
    shutil.copytree(store, copy)
    return copy


def undo_replicate(store: Path, replicate: int) -> None:
    """Mark the cells of one replicate not done (at every point of the problem axes), as an
    interrupted run leaves them."""
    import zarr

    done = zarr.open_group(str(store), mode="r+", use_consolidated=False)["done"]
    flags = done[...]
    flags[..., replicate] = 0
    done[...] = flags


def damage_metadata(store: Path, target: str) -> Path:
    """Damage one metadata file of ``store``: ``"PATH missing"`` deletes it, ``"PATH"`` writes
    garbage into it; the file's path."""
    file = store / target.split()[0]
    if target.endswith("missing"):
        file.unlink()
    else:
        file.write_text("{garbage")
    return file


def assert_changed_fill_value_is_not_repaired(store: Path, spec: Path, *run) -> None:
    """With the root's metadata damaged, ``error``'s fill value changed is not rebuilt from the
    spec (a value the spec cannot vouch for): ``kngflow run SPEC --repair`` refuses in one line
    naming the file, and the root stays as it was."""
    import json

    meta = json.loads((store / "error" / "zarr.json").read_text())
    meta["fill_value"] = 0.0
    (store / "error" / "zarr.json").write_text(json.dumps(meta))
    line = one_line(kngflow_cli("run", spec, "--store", store, "--repair", *run, process=False))
    assert "cannot repair" in line and str(store / "error" / "zarr.json") in line and "fill_value" in line
    assert (store / "zarr.json").read_text() == "{garbage"


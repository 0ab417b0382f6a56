"""Plug-ins from outside kngflow: docs/plugins.md runs as written, and bad plug-ins fail in one line.

The tutorial's files are written to a temporary folder (outside the kngflow tree) that
is put on ``PYTHONPATH``; its commands run with the real CLI and a local 2-worker cluster.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import textwrap
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from testkit import kngflow_cli

DOC = Path(__file__).resolve().parents[1] / "docs" / "plugins.md"


def doc_blocks() -> tuple[dict, list[tuple[list[str], int]]]:
    """``({file name: text}, [(command argv, expected exit status)])`` from docs/plugins.md."""
    files, commands = {}, []
    for lang, body in re.findall(r"```(\w+)\n(.*?)```", DOC.read_text(), flags=re.S):
        first = body.splitlines()[0]
        if lang in ("python", "toml") and first.startswith("# file: "):
            files[first[len("# file: "):].strip()] = body
        elif lang == "console":
            for line in body.splitlines():
                if line.startswith("$ kngflow "):
                    cmd, _, comment = line[2:].partition("#")
                    status = int(re.search(r"exit (\d)", comment).group(1)) if "exit" in comment else 0
                    commands.append((shlex.split(cmd)[1:], status))
    return files, commands


def _env(folder: Path) -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])}


@pytest.fixture(scope="module")
def tutorial(tmp_path_factory):
    """The tutorial's files in a fresh folder, its commands run there in order."""
    folder = tmp_path_factory.mktemp("outside")
    files, commands = doc_blocks()
    for name, text in files.items():
        (folder / name).write_text(text)
    results = []
    for argv, status in commands:
        argv = [a for a in argv if a != "--no-dashboard"] + (["--no-dashboard", "--no-progress"]
                                                              if argv[0] == "run" else [])
        if argv[0] == "audit":  # 50 000 draws, not the time budget's (up to 500 000 for these fast releases)
            argv += ["--draws", "50000"]
        proc = kngflow_cli(*argv, cwd=folder, env=_env(folder), timeout=600)
        results.append((argv, status, proc))
    return folder, results


def test_the_tutorial_has_its_pieces():
    files, commands = doc_blocks()
    assert {"laplace_mean.py", "compare.toml", "beta_mean.py", "beta.toml"} <= set(files)
    assert [c[0][0] for c in commands].count("audit") == 3 and (["audit", "laplace_mean:HalfLaplaceMean",
                                                                  "--problem", "mean", "--no-progress"], 1) in commands


@pytest.mark.slow
def test_every_command_of_the_tutorial_ends_as_documented(tutorial):
    _, results = tutorial
    for argv, status, proc in results:
        assert proc.returncode == status, (argv, proc.stdout[-2000:], proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr, (argv, proc.stderr[-2000:])


@pytest.mark.slow
def test_outside_mechanism_is_stored_reported_and_recorded(tutorial):
    folder, _ = tutorial
    ds = xr.open_zarr(folder / "compare.zarr")
    assert list(ds.mechanism.values) == ["nonprivate", "kng_linf", "laplace"]
    assert int(ds.done.sum()) == ds.done.size
    err = ds.error.sel(mechanism="laplace")
    # Laplace noise of scale 2 r d / (n eps) per coordinate: E||W||_2 shrinks like 1/n
    means = err.mean(("epsilon", "replicate")).values
    assert means[0] > 5 * means[2]
    assert set(ds.data_vars) >= {"acceptance", "steps", "sampler"}  # declared by the built-ins
    assert np.isnan(ds.acceptance.sel(mechanism="laplace")).all()  # the plug-in declares none
    plugins = json.loads(ds.attrs["plugins"])
    assert [p["module"] for p in plugins] == ["laplace_mean"] and plugins[0]["class"] == "LaplaceMean"
    assert len(plugins[0]["sha256"]) == 64 and plugins[0]["file"].endswith("laplace_mean.py")
    assert json.loads(ds.attrs["nonprivate_labels"]) == ["nonprivate"]
    report = (folder / "compare-report" / "report.md").read_text()
    assert "laplace" in report and "kng_linf" in report


@pytest.mark.slow
def test_outside_problem_runs_with_builtin_and_outside_mechanisms(tutorial):
    folder, _ = tutorial
    ds = xr.open_zarr(folder / "beta.zarr")
    assert ds.attrs["problem"] == "beta_mean:BetaMean"
    assert int(ds.done.sum()) == ds.done.size and np.isfinite(ds.estimate).all()
    assert {p["class"] for p in json.loads(ds.attrs["plugins"])} == {"BetaMean", "LaplaceMean"}
    assert "laplace" in (folder / "beta-report" / "report.md").read_text()


# --------------------------------------------------------------------------- bad plug-ins
BAD = '''
import numpy as np
from kngflow.mechanisms import Mechanism, Release

class Raises(Mechanism):
    def release(self, data, epsilon, rng):
        raise RuntimeError("boom")

class WrongShape(Mechanism):
    def release(self, data, epsilon, rng):
        return Release(np.zeros(data.d + 1))

class NotARelease(Mechanism):
    def release(self, data, epsilon, rng):
        return data.xbar

class Positional(Mechanism):
    def __init__(self, scale=1.0):
        self.scale = scale
    def release(self, data, epsilon, rng):
        return Release(data.xbar)

class NotAMechanism:
    def release(self, data, epsilon, rng):
        return Release(data.xbar)
'''

SPEC = '''
seed = 1
[problem]
name = "mean"
[grid]
n = [50]
epsilon = [1.0]
replicates = 2
[[mechanisms]]
label = "m"
kind = "{kind}"
'''


@pytest.mark.parametrize("kind, message", [
    ("bad_plugins:Raises", "mechanism 'm' (bad_plugins:Raises): release failed on a trial data set (n=50, "
                           "epsilon=1): RuntimeError: boom"),
    ("bad_plugins:WrongShape", "estimate of shape (3,); the problem has d=2 coefficients"),
    ("bad_plugins:NotARelease", "release must return kngflow.mechanisms.Release"),
    ("bad_plugins:Positional", "options must be keyword-only"),
    ("bad_plugins:NotAMechanism", "must be a class deriving from kngflow.mechanisms.Mechanism"),
    ("bad_plugins:Missing", "module 'bad_plugins' has no attribute 'Missing'"),
    ("no_such_module:Thing", "cannot import module 'no_such_module' (ModuleNotFoundError"),
])
@pytest.mark.slow
def test_a_bad_plugin_is_one_line_and_nothing_is_written(tmp_path, kind, message):
    (tmp_path / "bad_plugins.py").write_text(textwrap.dedent(BAD))
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC.format(kind=kind))
    store = tmp_path / "s.zarr"
    proc = kngflow_cli("run", spec, "--store", store, "--workers", 1, "--no-dashboard", "--no-progress",
                       env=_env(tmp_path), timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert not store.exists() and not Path(f"{store}.lock").exists()


@pytest.mark.slow
def test_a_worker_that_cannot_import_the_plugin_is_named(tmp_path):
    """The client imports the module, the workers (another PYTHONPATH) do not: one line, nothing computed."""
    from daskprocs import DaskProcesses

    runs, dask_dir = tmp_path / "runs", tmp_path / "dask"
    runs.mkdir()
    dask_dir.mkdir()
    (runs / "laplace_mean.py").write_text(doc_blocks()[0]["laplace_mean.py"])
    spec = runs / "s.toml"
    spec.write_text(SPEC.format(kind="laplace_mean:LaplaceMean"))
    procs = DaskProcesses(dask_dir, deny=runs)
    try:
        procs.start()
        procs.start_worker()
        procs.wait_for_workers(1)
        proc = kngflow_cli("run", spec, "--store", runs / "s.zarr", "--scheduler-file", procs.scheduler_file,
                           "--no-progress", env=_env(runs), timeout=180)
    finally:
        procs.close()
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot import plug-in module 'laplace_mean'" in lines[0], proc.stderr
    assert not (runs / "s.zarr").exists()


# --------------------------------------------------------------------------- entry points, public names
@pytest.mark.slow
def test_an_installed_package_registers_short_names(tmp_path):
    """A distribution's ``kngflow.mechanisms`` / ``kngflow.problems`` entry points (a real
    ``.dist-info`` on ``PYTHONPATH``) make short names usable in a spec; the store records
    the plug-in's package version."""
    files = doc_blocks()[0]
    pkg = tmp_path / "site" / "kngplug"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "laplace_mean.py").write_text(files["laplace_mean.py"])
    (pkg / "beta_mean.py").write_text(files["beta_mean.py"])
    info = tmp_path / "site" / "kngplug-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kngplug\nVersion: 1.2.3\n")
    (info / "top_level.txt").write_text("kngplug\n")
    (info / "entry_points.txt").write_text(
        "[kngflow.mechanisms]\nlaplace_mean = kngplug.laplace_mean:LaplaceMean\n\n"
        "[kngflow.problems]\nbeta_mean = kngplug.beta_mean:BetaMean\n")
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC.format(kind="laplace_mean").replace('name = "mean"', 'name = "beta_mean"'))
    store = tmp_path / "s.zarr"
    proc = kngflow_cli("run", spec, "--store", store, "--workers", 1, "--no-dashboard", "--no-progress",
                       env=_env(tmp_path / "site"), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ds = xr.open_zarr(store)
    assert int(ds.done.sum()) == ds.done.size and ds.attrs["problem"] == "beta_mean"
    plugins = {p["class"]: p for p in json.loads(ds.attrs["plugins"])}
    assert plugins["LaplaceMean"]["version"] == "1.2.3" and plugins["BetaMean"]["module"] == "kngplug.beta_mean"


def test_the_public_names_stay_importable():
    """What users import: get_mechanism, private_quantile and the data helpers, from documented places."""
    from kngflow.mechanisms import Mechanism, Release
    from kngflow.api import get_mechanism, private_quantile
    from kngflow.problems import Problem
    from kngflow.api import geomedian_data, get_problem, logistic_data, mean_data, quantreg_data, stats_from_arrays

    rng = np.random.default_rng(0)
    data = mean_data(rng.uniform(-1, 1, (50, 2)), radius=1.0)
    assert (data.n, data.radius, data.data_norm, data.xbar.shape) == (50, 1.0, "linf", (2,))
    assert isinstance(get_mechanism("mean", "kng", hardened=False), Mechanism)
    assert isinstance(get_mechanism("mean", "kng", hardened=False).release(data, 1.0, rng), Release)
    assert -1.0 <= private_quantile(rng, rng.uniform(-1, 1, 100), 0.5, 1.0, -1.0, 1.0) <= 1.0
    assert isinstance(get_problem("linear"), Problem)
    for helper in (geomedian_data, logistic_data, quantreg_data, stats_from_arrays):
        assert callable(helper)

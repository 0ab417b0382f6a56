"""An outside model package, installed with a real ``.dist-info`` entry point in the
``kngflow.models`` group, names its own ``kng`` and runs, reports and audits like a built-in one.

The package lives in a temporary site folder put on ``PYTHONPATH`` (the CLI, its local
workers and the audit all see it); nothing of it is in the kngflow tree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import xarray as xr

from testkit import kngflow_cli

MODEL = textwrap.dedent('''
    """A box mean: records in [-1, 1]^d, estimate their mean.  A model module: PROBLEM + MECHANISMS."""
    import itertools
    from dataclasses import dataclass

    import numpy as np

    from kngflow.mechanisms import Mechanism, Release
    from kngflow.mechanisms.claims import Density
    from kngflow.problems import Problem


    @dataclass(frozen=True)
    class BoxData:
        n: int
        d: int
        xbar: np.ndarray


    def box_data(x):
        x = np.asarray(x, float)
        return BoxData(n=x.shape[0], d=x.shape[1], xbar=x.mean(axis=0))


    class BoxMean(Problem):
        def __init__(self, *, d=2, a=0.5):
            self.d, self.a = int(d), float(a)
            self.theta_star = np.zeros(self.d)

        def simulate(self, n, rng):
            return box_data(2.0 * rng.beta(self.a, self.a, size=(n, self.d)) - 1.0)

        def audit_records(self):
            corners = np.array(list(itertools.product((-1.0, 1.0), repeat=self.d)))
            return corners, np.vstack([corners, np.zeros((1, self.d))])

        def audit_data(self, records):
            return box_data(records)

        def parameter_box(self):
            return -2.0 * np.ones(self.d), 2.0 * np.ones(self.d)


    class NonPrivate(Mechanism):
        private = False

        def release(self, data, epsilon, rng):
            return Release(data.xbar.copy())


    class KNG(Mechanism):
        """KNG for the box mean: the gradient of n ||theta - xbar||^2 / 2 moves by 2d in l1 when
        one record changes, so density exp(-epsilon n ||theta - xbar||_1 / (2 d)) (a location
        family: Laplace noise of scale 2 d / (n epsilon) on each coordinate)."""

        def __init__(self, *, scale_factor=1.0):
            self.scale_factor = float(scale_factor)

        def _scale(self, data, epsilon):
            return self.scale_factor * 2.0 * data.d / (data.n * epsilon)

        def release(self, data, epsilon, rng):
            return Release(data.xbar + rng.laplace(0.0, self._scale(data, epsilon), size=data.d))

        def privacy_claim(self):
            def log_density(data, epsilon, theta):
                return -np.abs(np.asarray(theta) - data.xbar).sum(axis=-1) / self._scale(data, epsilon)

            return Density(log_density=log_density, normalised=True)


    class HalfKNG(KNG):
        """A broken twin: half the noise, only 2 epsilon-DP."""

        def __init__(self):
            super().__init__(scale_factor=0.5)


    PROBLEM = BoxMean
    MECHANISMS = {"nonprivate": NonPrivate, "kng": KNG, "kng_half": HalfKNG}
''')

SPEC = textwrap.dedent('''
    name = "box mean"
    seed = 5

    [problem]
    name = "boxmean"
    d = 2

    [grid]
    n = [50, 500]
    epsilon = [1.0]
    replicates = 6

    [[mechanisms]]
    label = "nonprivate"
    kind = "nonprivate"

    [[mechanisms]]
    label = "kng"
    kind = "kng"
''')


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A site folder holding the package ``boxmodel`` and its ``.dist-info`` (version 0.3.0)
    with the entry point ``boxmean = boxmodel.model`` in the group ``kngflow.models``."""
    root = tmp_path_factory.mktemp("site")
    (root / "boxmodel").mkdir()
    (root / "boxmodel" / "__init__.py").write_text("")
    (root / "boxmodel" / "model.py").write_text(MODEL)
    info = root / "boxmodel-0.3.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: boxmodel\nVersion: 0.3.0\n")
    (info / "top_level.txt").write_text("boxmodel\n")
    (info / "entry_points.txt").write_text("[kngflow.models]\nboxmean = boxmodel.model\n")
    return root


def _env(site) -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}


def test_the_model_and_its_own_kinds_are_looked_up_per_problem(site):
    code = textwrap.dedent('''
        import sys
        from kngflow import registry
        names = registry.problem_names()
        assert "boxmean" in names and "mean" in names, names
        assert "boxmodel.model" not in sys.modules          # listing loads no model
        assert registry.kind_names("boxmean") == ["kng", "kng_half", "nonprivate"], registry.kind_names("boxmean")
        assert registry.mechanism_class("boxmean", "kng").__module__ == "boxmodel.model"
        assert registry.mechanism_class("mean", "kng").__module__.startswith("kngflow.models.mean")
        assert registry.problem_class("boxmean").__name__ == "BoxMean"
        print("ok")
    ''')
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(site))
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


def test_without_the_package_the_name_is_unknown():
    """Negative control: without the site folder, ``boxmean`` is not a problem name."""
    from kngflow import registry

    assert "boxmean" not in registry.problem_names()
    with pytest.raises(registry.PluginError, match="problem must be one of"):
        registry.problem_class("boxmean")


@pytest.mark.slow
def test_the_outside_model_runs_reports_and_audits(site, tmp_path):
    spec = tmp_path / "box.toml"
    spec.write_text(SPEC)
    store = tmp_path / "box.zarr"
    run = kngflow_cli("run", spec, "--store", store, "--workers", 1, "--no-dashboard", "--no-progress",
                      env=_env(site), timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    ds = xr.open_zarr(store)
    assert int(ds.done.sum()) == ds.done.size == 2 * 2 * 6
    assert ds.attrs["problem"] == "boxmean"
    plugins = {p["class"]: p for p in json.loads(ds.attrs["plugins"])}
    assert plugins["KNG"]["module"] == "boxmodel.model" and plugins["KNG"]["version"] == "0.3.0"
    assert plugins["BoxMean"]["version"] == "0.3.0"
    err = ds.error.sel(mechanism="kng").values
    assert (err > 0).all() and float(ds.error.sel(mechanism="kng", n=500).mean()) < 0.2

    out = tmp_path / "report"
    report = kngflow_cli("report", store, "--out", out, env=_env(site), timeout=600)
    assert report.returncode == 0, report.stdout + report.stderr
    text = (out / "report.md").read_text()
    assert "kng" in text and "nonprivate" in text

    # 50 000 draws, not the time budget's (up to 500 000 for fast releases)
    audit = kngflow_cli("audit", "kng", "--problem", "boxmean", "--no-progress", "--draws", "50000", env=_env(site),
                        timeout=600)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "exact audit of KNG()" in audit.stdout and "verdict: PASS" in audit.stdout
    # negative control: the model's own half-noise twin is flagged
    half = kngflow_cli("audit", "kng_half", "--problem", "boxmean", "--no-progress", "--draws", "50000", env=_env(site),
                       timeout=600)
    assert half.returncode == 1, half.stdout + half.stderr

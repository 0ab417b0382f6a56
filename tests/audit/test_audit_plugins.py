"""``kngflow audit`` on plug-ins: mechanisms from a module outside kngflow, audited by their claim.

The plug-in module is written to a temporary folder that is put on ``PYTHONPATH``; the
real command runs in a subprocess.  A plug-in that declares only ``__init__`` (keyword-only
options) and ``release`` is audited black-box; one whose claim is a ``Density`` is audited
exactly; a broken plug-in ends in one line on stderr and exit 2.
"""

from __future__ import annotations

import os
import textwrap

import numpy as np
import pytest

from testkit import kngflow_cli
from test_plugins import BAD

PLUGIN = '''
"""Laplace mechanisms for a bounded mean, and broken mechanisms, as kngflow plug-ins."""
import numpy as np

from kngflow.mechanisms import Mechanism, Release
from kngflow.mechanisms.claims import Density


class AuditLaplace(Mechanism):
    """Laplace noise of scale factor * 2 r d / (n epsilon) per coordinate of the mean: epsilon-DP at factor 1."""

    def __init__(self, *, factor=1.0):
        self.factor = float(factor)

    def release(self, data, epsilon, rng):
        b = self.factor * 2.0 * data.radius * data.d / (data.n * epsilon)
        return Release(data.xbar + rng.laplace(0.0, b, size=data.d))


class HalfAuditLaplace(AuditLaplace):
    """Half the calibrated noise: only 2 epsilon-DP."""

    def __init__(self):
        super().__init__(factor=0.5)


class DensityLaplace(AuditLaplace):
    """The same mechanism, claiming its law: an l1 Laplace density, normalised up to a constant
    that depends on the public n only, read pointwise on the data ball."""

    def log_density(self, data, epsilon, theta):
        b = self.factor * 2.0 * data.radius * data.d / (data.n * epsilon)
        return -np.sum(np.abs(np.asarray(theta) - data.xbar), axis=-1) / b

    def privacy_claim(self):
        return Density(log_density=self.log_density, normalised=True)
'''

PLUGIN += BAD  # the broken mechanisms of the run tests: Raises, WrongShape, NotARelease, Positional, ...

BROKEN_IMPORT = '''
import a_module_that_is_not_installed_anywhere  # noqa: F401
'''

NO_DOMAIN = '''
import numpy as np

from kngflow.problems import Problem
from kngflow.api import mean_data


class NoDomain(Problem):
    family = "mean"

    def __init__(self, *, d=2):
        self.d = int(d)
        self.theta_star = np.zeros(self.d)

    def simulate(self, n, rng):
        return mean_data(rng.uniform(-1.0, 1.0, size=(n, self.d)), radius=1.0)
'''


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("plugins")
    (path / "audit_plugin.py").write_text(textwrap.dedent(PLUGIN))
    (path / "broken_plugin.py").write_text(textwrap.dedent(BROKEN_IMPORT))
    (path / "nodomain_plugin.py").write_text(textwrap.dedent(NO_DOMAIN))
    return path


def audit(folder, *args, timeout=600):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])}
    return kngflow_cli("audit", *args, "--no-progress", cwd=folder, env=env, timeout=timeout)



def one_line_error(out, *parts):
    assert out.returncode == 2 and out.stdout == "", (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kngflow audit: error:"), out.stderr
    for part in parts:
        assert part in lines[0], (part, lines[0])
    return lines[0]


#: Draws of the black-box audits of the Laplace plug-in and its twin: without --draws the time
#: budget picks up to 500 000 on a fast machine (how --draws and the budget choose is
#: test_audit_cli.py's subject).  At 20 000 the plug-in passes at 0.87 and the twin with
#: half the noise is flagged at 1.79 (seed 0).
DRAWS = "20000"


@pytest.mark.slow
def test_release_only_plugin_passes_black_box(folder):
    out = audit(folder, "audit_plugin:AuditLaplace", "--problem", "mean", "--draws", DRAWS)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "black-box audit of AuditLaplace()" in out.stdout and "exact audit" not in out.stdout
    assert out.stdout.strip().endswith("verdict: PASS (declared epsilon=1)")
    # options are keyword-only and given as --option (TOML value)
    out = audit(folder, "audit_plugin:AuditLaplace", "--problem", "mean", "--option", "factor=2.0",
                "--draws", "500")
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.slow
def test_twin_with_half_the_noise_is_flagged(folder):
    out = audit(folder, "audit_plugin:HalfAuditLaplace", "--problem", "mean", "--draws", DRAWS)
    assert "black-box audit of HalfAuditLaplace()" in out.stdout, out.stdout + out.stderr
    assert out.returncode == 1 and "verdict: FLAGGED by black-box audit" in out.stdout, out.stdout + out.stderr


@pytest.mark.slow
def test_density_claim_is_audited_exactly(folder):
    # 1% more noise than the calibration, so that the reported loss is clear of epsilon (the
    # Laplace mechanism is tight: at factor 1 its worst pair's loss is epsilon up to rounding,
    # which the audit tolerates, 1e-9 epsilon; see the in-process test below)
    out = audit(folder, "audit_plugin:DensityLaplace", "--problem", "mean", "--option", "factor=1.01",
                "--draws", "500")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "exact audit of DensityLaplace()" in out.stdout and "black-box audit of DensityLaplace()" in out.stdout
    assert "privacy loss 0.9901 vs declared epsilon 1 (tolerance 1e-09): PASS" in out.stdout, out.stdout
    out = audit(folder, "audit_plugin:DensityLaplace", "--problem", "mean", "--option", "factor=1.01",
                "--draws", "500", "--run-epsilon", "2")
    assert out.returncode == 1 and "verdict: FLAGGED by exact" in out.stdout, out.stdout + out.stderr
    assert "privacy loss 1.9802" in out.stdout, out.stdout


def test_density_claim_in_process_exact_loss():
    """The same Density plug-in in process: the exact loss of the worst pair is ε (Laplace is tight)."""
    from kngflow.audit import AdjacentPair, audit_plan, exact_audit
    from kngflow.mechanisms import Mechanism, Release
    from kngflow.mechanisms.claims import Density
    from kngflow.api import get_problem

    class Lap(Mechanism):
        def release(self, data, epsilon, rng):
            return Release(data.xbar)

        def log_density(self, data, epsilon, theta):
            b = 2.0 * data.radius * data.d / (data.n * epsilon)
            return -np.sum(np.abs(theta - data.xbar), axis=-1) / b

        def privacy_claim(self):
            return Density(log_density=self.log_density, normalised=True)

    problem = get_problem("mean", d=1)
    assert audit_plan(Lap(), problem) == ["exact", "black-box"]
    pair = AdjacentPair(np.array([[1.0]]), np.array([1.0]), np.array([-1.0]))
    res = exact_audit(Lap(), problem, 1.0, pairs=[pair], points=2001)
    assert res.bound == pytest.approx(1.0, abs=1e-12) and res.tolerance == 1e-9 and res.passed
    assert not exact_audit(Lap(), problem, 1.0, run_epsilon=2.0, pairs=[pair], points=2001).passed


@pytest.mark.parametrize("cls, parts", [
    ("Raises", ["'audit_plugin:Raises'", "RuntimeError: boom"]),
    ("WrongShape", ["'audit_plugin:WrongShape'", "shape (3,)", "d=2"]),
    ("NotARelease", ["'audit_plugin:NotARelease'", "must return kngflow.mechanisms.Release", "ndarray"]),
    ("Positional", ["audit_plugin:Positional", "keyword-only", "scale"]),
    ("NotAMechanism", ["audit_plugin:NotAMechanism", "must be a class deriving from kngflow.mechanisms.Mechanism"]),
    ("Missing", ["audit_plugin:Missing", "has no attribute 'Missing'"]),
])
@pytest.mark.slow
def test_broken_plugin_mechanism_one_line_exit_2(folder, cls, parts):
    one_line_error(audit(folder, f"audit_plugin:{cls}", "--problem", "mean", "--draws", "200"), *parts)


@pytest.mark.slow
def test_plugin_module_that_does_not_import_one_line_exit_2(folder):
    one_line_error(audit(folder, "broken_plugin:Anything", "--problem", "mean", "--draws", "200"),
                   "cannot import module 'broken_plugin'", "ModuleNotFoundError")


@pytest.mark.slow
def test_bad_options_and_problems_one_line_exit_2(folder):
    one_line_error(audit(folder, "audit_plugin:AuditLaplace", "--problem", "mean", "--option", "factor"),
                   "--option must be KEY=VALUE")
    one_line_error(audit(folder, "audit_plugin:AuditLaplace", "--problem", "mean", "--option", "speed=2"),
                   "unknown option(s) ['speed']")
    one_line_error(audit(folder, "audit_plugin:AuditLaplace", "--problem", "nodomain_plugin:NoDomain"),
                   "problem 'nodomain_plugin:NoDomain' declares no audit record domain")
    one_line_error(audit(folder, "audit_plugin:AuditLaplace", "--problem", "no_such_module:Problem"),
                   "cannot import module 'no_such_module'")
    one_line_error(audit(folder, "audit_plugin:AuditLaplace", "--problem", "poisson"), "problem must be one of")


@pytest.mark.slow
def test_plugin_problem_lends_its_family_kinds(folder):
    """A built-in kind named for a plug-in problem of the mean family: the problem's record
    domain is missing, so the audit stops in one line naming the problem."""
    one_line_error(audit(folder, "kng", "--problem", "nodomain_plugin:NoDomain"),
                   "'nodomain_plugin:NoDomain' declares no audit record domain")

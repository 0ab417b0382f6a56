"""``kngflow.audit`` on the quantile and quantile-regression mechanisms (issue of the plug-in seam).

Exact audits (the law normalised on a grid over Theta, pairs searched over boundary
records): every mechanism passes at its epsilon, and the same mechanism run at 2 epsilon
is caught.  PrivateQuantile's loss is epsilon exactly (one record jumping across the
range moves the count by one everywhere between).  Losses found at epsilon = 1 (100
candidate pairs): quantile KNG 1.000 (tau = 1/2 and 0.9), exponential (tau = 0.25) 0.64;
quantile regression KNG 1.000 (tau = 1/2), 0.87 (tau = 0.8), exponential 0.97.
"""

import pytest
from conftest import kngflow_cli

from kngflow.audit import exact_audit
from kngflow.mechanisms import get_mechanism
from kngflow.problems import get_problem

BOUNDED = {"protocol": "public_bound", "y_bound": 1.0}


@pytest.mark.parametrize(
    "problem, kind, popts",
    [
        ("quantile", "kng", {}),
        ("quantile", "kng", {"tau": 0.9}),
        ("quantile", "exponential", {"tau": 0.25}),
        ("quantreg", "kng", BOUNDED),
        ("quantreg", "kng", {**BOUNDED, "tau": 0.8}),
        ("quantreg", "exponential", BOUNDED),
    ],
)
def test_exact_audit_passes_and_catches_2eps(problem, kind, popts):
    p = get_problem(problem, **popts)
    m = get_mechanism(problem, kind, hardened=False, **({"bound": 1.0} if problem == "quantreg" else {}))
    points = 2001 if p.d == 1 else 401
    ok = exact_audit(m, p, 1.0, candidates=100, points=points)
    assert ok.passed, ok.summary()
    if problem == "quantile" and kind == "kng":
        assert ok.bound > 0.99  # PrivateQuantile is tight: a record jumping across the range spends all of epsilon
    bad = exact_audit(m, p, 1.0, run_epsilon=2.0, candidates=100, points=points)
    assert not bad.passed, bad.summary()


def test_kngflow_audit_command_on_quantiles():
    out = kngflow_cli("audit", "kng", "--problem", "quantile", "--problem-option", "tau=0.9", "--draws", "2000",
                      "--no-progress")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "exact audit of KNG" in out.stdout and out.stdout.strip().endswith("verdict: PASS (declared epsilon=1)")
    out = kngflow_cli("audit", "exponential", "--problem", "quantreg", "--problem-option", "protocol=public_bound", "--option",
                      "bound=1", "--run-epsilon", "2", "--draws", "300", "--no-progress",
                      "--pair", "22*(-1,1,1) + 41*(1,-1,-1) + (1,-1,1) -> (1,-1,-1)")
    assert out.returncode == 1 and "verdict: FLAGGED by exact audit" in out.stdout, out.stdout + out.stderr

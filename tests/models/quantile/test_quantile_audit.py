"""``kngflow.audit`` on the quantile and quantile-regression mechanisms (issue of the plug-in seam).

Exact audits (the law normalised on a grid over Theta, pairs searched over boundary
records): every mechanism passes at its epsilon, and the same mechanism run at 2 epsilon
is caught.  PrivateQuantile's loss is epsilon exactly (one record jumping across the
range moves the count by one everywhere between).  Losses found at epsilon = 1 (100
candidate pairs): quantile KNG 1.000 (tau = 1/2 and 0.9), exponential (tau = 0.25) 0.64;
quantile regression KNG 1.000 (tau = 1/2), 0.87 (tau = 0.8), exponential 0.97.
"""

import pytest
from testkit import kngflow_cli

from kngflow.audit import exact_audit
from kngflow.api import get_mechanism, get_problem

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
@pytest.mark.slow
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


@pytest.mark.slow
def test_kngflow_audit_command_on_quantiles():
    out = kngflow_cli("audit", "kng", "--problem", "quantile", "--problem-option", "tau=0.9", "--draws", "2000",
                      "--no-progress")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "exact audit of KNG" in out.stdout and out.stdout.strip().endswith("verdict: PASS (declared epsilon=1)")
    out = kngflow_cli("audit", "exponential", "--problem", "quantreg", "--problem-option", "protocol=public_bound", "--option",
                      "bound=1", "--run-epsilon", "2", "--draws", "300", "--no-progress",
                      "--pair", "22*(-1,1,1) + 41*(1,-1,-1) + (1,-1,1) -> (1,-1,-1)")
    assert out.returncode == 1 and "verdict: FLAGGED by exact audit" in out.stdout, out.stdout + out.stderr


BB = dict(draws=2000, pilot=400, candidates=4, score_draws=100)
#: all records have y = -1 and x'theta >= -1 on Theta: the gradient is constant on Theta and
#: the law uniform, far wider than the surrogate's map (its proposals alone stay in a corner)
UNIFORM_TARGET = "19*(-1,-1,-1) + 12*(1,-1,-1) + (1,-1,-1) -> (1,1,-1)"
#: the pair on which the black-box audit (20 000 draws) came closest to epsilon at 2 epsilon
#: (event ratio e^0.98): its power there needs a wider gap, so its control runs at 4 epsilon
#: (the 2 epsilon control is the exact audit's, above)
CLOSEST = "5*(1,-1,0) + 26*(1,0,0) + (-1,1,1) -> (-1,-1,-1)"


@pytest.mark.slow
def test_blackbox_audit_of_quantreg_kng_default_sampler():
    """The releases of quantile-regression KNG's default sampler (Metropolis, then the
    surrogate map) pass the black-box audit at epsilon, on searched pairs, on a pair whose
    law is uniform on Theta and on the closest pair found; run at 4 epsilon they are flagged
    (lower bounds on the closest pair 1.16-1.30 over seeds 4-6, 1.30 at the seed below; at
    epsilon 0.16-0.27).  The walk runs 300 sweeps, not the Figure 2 spec's 1000, in a
    third of the time: the audit reads the same (at 1000 sweeps 1.15-1.40 and 0.26-0.29 on
    those seeds)."""
    from kngflow.audit import blackbox_audit
    from kngflow.audit.pairs import parse_pair

    p = get_problem("quantreg", **BOUNDED)
    m = get_mechanism("quantreg", "kng", hardened=False, bound=1.0, steps=300)
    ok = blackbox_audit(m, p, 1.0, seed=3, **BB)
    assert ok.passed and ok.bound <= 1.0, ok.summary()
    for pair in (UNIFORM_TARGET, CLOSEST):
        ok = blackbox_audit(m, p, 1.0, seed=4, pair=parse_pair(pair, 3), **BB)
        assert ok.passed and ok.bound <= 1.0, ok.summary()
    bad = blackbox_audit(m, p, 1.0, run_epsilon=4.0, seed=4, pair=parse_pair(CLOSEST, 3), **BB)
    assert not bad.passed and bad.bound > 1.0, bad.summary()

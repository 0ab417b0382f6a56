"""The audit's calibration suite, reduced (the full table: ``benchmarks/audit_calibration.py``,
``docs/audits.md``).

Laplace means of exactly known loss on six record domains, audited black-box at the
default settings with the pair searched.  Every correct twin (loss ε, tight) passes — an
ε-DP mechanism is flagged with probability at most 1e-5 — and every mechanism with loss
2ε is flagged; so are the two mechanisms of the report that the earlier search passed
(a disc with loss 1.41 ε, a ball with loss 1.65 ε).
"""

from __future__ import annotations

import numpy as np
import pytest

from kngflow.audit import blackbox_audit
from kngflow.audit.calibration import GEOMETRIES, Ball, Disc, LaplaceMean, suite


def test_suite_lists_every_geometry_with_a_twin():
    cases = suite()
    assert {g for g, *_ in cases} == set(GEOMETRIES) and len(cases) == 5 * len(GEOMETRIES)
    for name, problem, mech, loss in cases:
        boundary, fill = problem.audit_records()
        rec = np.vstack([boundary, fill])
        # the declared records reach the domain's l1 diameter, so the loss is attained
        assert max(np.abs(a - b).sum() for a in rec for b in rec) == pytest.approx(problem.diameter)
        assert mech.loss(1.0) == pytest.approx(loss)
        with pytest.raises(ValueError, match="domain"):
            problem.audit_data(rec * 1.5 + 0.1)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(GEOMETRIES))
def test_twin_passes_and_two_epsilon_is_flagged(name):
    problem = GEOMETRIES[name]()
    ok = blackbox_audit(LaplaceMean(factor=1.0), problem, 1.0, seed=0)
    assert ok.passed and ok.bound <= 1.0, ok.summary()
    assert ok.details["power"]["loss"] < 1.4, ok.summary()  # the pass says what it could have seen
    bad = blackbox_audit(LaplaceMean(factor=0.5), problem, 1.0, seed=0)
    assert not bad.passed and bad.bound > 1.2, bad.summary()


@pytest.mark.slow
@pytest.mark.parametrize("problem, loss", [(Disc(), 1.41), (Ball(), 1.65)], ids=["disc", "ball"])
def test_the_reported_misses_are_flagged(problem, loss):
    res = blackbox_audit(LaplaceMean(factor=1.0 / loss), problem, 1.0, seed=0)
    assert not res.passed, res.summary()

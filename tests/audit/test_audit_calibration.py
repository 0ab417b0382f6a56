"""The audit's calibration suite, reduced (the full table: ``benchmarks/audit_calibration.py``,
``docs/audits.md``).

Laplace means of exactly known loss on six record domains, audited black-box at the
default settings with the pair searched.  Every correct twin (loss ε, tight) passes — an
ε-DP mechanism is flagged with probability at most 1e-5 — and every mechanism with loss
2ε is flagged; so are the two mechanisms of the report that the earlier search passed
(a disc with loss 1.41 ε, a ball with loss 1.65 ε).  Mechanisms whose noise follows the
data are flagged and their twins pass; a loss of 1.5 ε over six coordinates is flagged;
the releases drawn match the plan.
"""

from __future__ import annotations

import numpy as np
import pytest

from kngflow.audit import blackbox_audit
from kngflow.audit.blackbox import planned_releases
from kngflow.audit.calibration import (DATA_DEPENDENT, GEOMETRIES, WIDE, Ball, Ball6, Disc, LaplaceMean,
                                       data_dependent_suite, suite)
from kngflow.audit.pairs import audit_view
from kngflow.audit.pipeline import AuditContext, AuditOptions, BlackBoxStep

#: the six domains of the first table (the wide ones need the CLI's larger default draws)
NARROW = [g for g in GEOMETRIES if g not in WIDE]


def test_suite_lists_every_geometry_with_a_twin():
    cases = suite()
    assert {g for g, *_ in cases} == set(GEOMETRIES) and len(cases) == 5 * len(NARROW) + 2 * len(WIDE)
    for name, problem, mech, loss in cases:
        boundary, fill = problem.audit_records()
        rec = np.vstack([boundary, fill])
        # the declared records reach the domain's l1 diameter, so the loss is attained
        assert np.abs(rec[:, None] - rec[None]).sum(-1).max() == pytest.approx(problem.diameter)
        assert mech.loss(1.0) == pytest.approx(loss)
        with pytest.raises(ValueError, match="domain"):
            problem.audit_data(rec * 1.5 + 0.1)


@pytest.mark.slow
@pytest.mark.parametrize("name", NARROW)
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


def test_the_data_dependent_suite_pairs_each_broken_mechanism_with_its_twin():
    cases = data_dependent_suite()
    assert len(cases) == 2 * 2 * len(DATA_DEPENDENT)
    rng = np.random.default_rng(0)
    small = Disc().audit_data(np.zeros((3, 2)))  # every record at the centre
    wide = Disc().audit_data(np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 0.0]]))
    for broken, twin in DATA_DEPENDENT.values():
        # the twin's noise does not follow the data; the broken one's is smaller on small data
        t_small = np.std([twin.release(small, 1.0, rng).estimate[0] for _ in range(4000)])
        b_small = np.std([broken.release(small, 1.0, rng).estimate[0] for _ in range(4000)])
        t_wide = np.std([twin.release(wide, 1.0, rng).estimate[0] - wide.xbar[0] for _ in range(4000)])
        assert b_small < 0.8 * t_small and t_wide == pytest.approx(t_small, rel=0.1)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(DATA_DEPENDENT))
def test_data_dependent_noise_is_flagged_and_its_twin_passes(name):
    """The mechanisms whose noise follows the data (the most common real bug) are caught on
    the disc: the search tries data sets whose records all sit at the centre, are all alike,
    or are few; the twins, whose noise does not follow the data, pass (reduced draws: the
    10-seed table at the defaults is in docs/audits.md; at 5000 draws the broken ones are
    flagged at 3.72, 3.83, 2.21 and 1.77, the twins pass at 0.77)."""
    broken, twin = DATA_DEPENDENT[name]
    bad = blackbox_audit(broken, Disc(), 1.0, seed=0, draws=5_000)
    assert not bad.passed and bad.bound > 1.3, bad.summary()
    ok = blackbox_audit(twin, Disc(), 1.0, seed=0, draws=5_000)
    assert ok.passed, ok.summary()


@pytest.mark.slow
def test_a_loss_of_one_and_a_half_epsilon_in_six_dimensions_is_flagged():
    """Opposite sign vectors of the 77 records of R^6 carry a loss of 1.5 ε spread over six
    coordinates (the issue's miss: the search stopped at half the ℓ1 distance); with the
    draws a fast mechanism gets from the time budget it is flagged, and its twin passes."""
    bad = blackbox_audit(LaplaceMean(factor=1 / 1.5), Ball6(), 1.0, seed=0, draws=200_000)
    assert not bad.passed, bad.summary()
    assert np.abs(bad.pair.record - bad.pair.other).sum() == pytest.approx(Ball6.diameter)
    assert blackbox_audit(LaplaceMean(factor=1.0), Ball6(), 1.0, seed=0, draws=200_000).passed


@pytest.mark.slow
@pytest.mark.parametrize("name", list(GEOMETRIES))
def test_releases_drawn_match_the_plan(name):
    """Releases drawn against releases planned (the time budget and the progress bar read the
    plan) lie within 0.9-1.1 on every domain of the suite, for a broken mechanism of each kind
    too; the pipeline's black-box step costs the same.  The control: the plan of a search over
    a tenth of the records is off by more than that."""
    problem = GEOMETRIES[name]()
    mechs = [LaplaceMean(factor=1.0)] + ([b for b, _ in DATA_DEPENDENT.values()] if name == "l2 disc" else [])
    for mech in mechs:
        drawn = []
        blackbox_audit(mech, problem, 1.0, seed=0, draws=2_000, progress=drawn.append)
        planned = planned_releases(2_000, problem=audit_view(mech, problem))
        assert 0.9 <= sum(drawn) / planned <= 1.1, (repr(mech), sum(drawn), planned)
    ctx = AuditContext.build(AuditOptions("kngflow.audit.calibration:LaplaceMean",
                                          f"kngflow.audit.calibration:{type(problem).__name__}"))
    assert BlackBoxStep().cost(ctx, 2_000) == planned_releases(2_000, problem=ctx.view)
    # the control: the earlier plan (two contexts of at most 64 records, one refinement round)
    old = planned_releases(2_000) + 100 * (2 * min(len(ctx.records), 64) + 16 + 40)
    assert not 0.9 <= sum(drawn) / old <= 1.1

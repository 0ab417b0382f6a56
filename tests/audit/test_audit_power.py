"""The black-box audit's power statement and ``target_power``.

:func:`~kngflow.audit.power.flag_probability` is an exact sum over binomial counts: checked
against a simulation of the counts and of the Clopper–Pearson test itself.  The statement
of an audit (the smallest loss on its pair and events flagged with probability >= 0.9) is
checked against whole audits: a Laplace mean whose loss is just above the stated figure
is flagged in at least 90 % of runs; one well below it is not (the statement is not
vacuously high... nor vacuously low).
"""

from __future__ import annotations

import numpy as np
import pytest

from kngflow.audit import blackbox_audit, clopper_pearson, parse_pair
from kngflow.audit.calibration import Interval, LaplaceMean
from kngflow.audit.power import draws_for_loss, event_power, flag_probability, loss_at_power

PAIR = parse_pair("(0) + (1) -> (-1)", 1)
KW = dict(pair=PAIR, draws=20_000)


@pytest.mark.parametrize("p_num, p_den, n", [(0.3, 0.1, 2000), (0.05, 0.012, 20_000), (0.6, 0.25, 500)])
def test_flag_probability_matches_simulated_counts(p_num, p_den, n):
    level, eps = 1e-5 / 8, 1.0
    rng = np.random.default_rng(0)
    reps = 20_000
    k_num, k_den = rng.binomial(n, p_num, reps), rng.binomial(n, p_den, reps)
    lo, _ = clopper_pearson(k_num, n, level)
    _, hi = clopper_pearson(k_den, n, level)
    with np.errstate(divide="ignore"):
        sim = np.mean(np.log(lo) - np.log(hi) > eps)
    exact = flag_probability(p_num, p_den, n, n, level, eps)
    # 5 standard errors of the simulated share (at least 0.005)
    assert abs(sim - exact) < max(5 * np.sqrt(exact * (1 - exact) / reps), 0.005), (sim, exact)


def test_power_grows_with_loss_and_draws():
    level = 1e-5 / 8
    assert event_power(0.5, 0.5, 1.6, 20_000, level, 1.0) > event_power(0.5, 0.5, 1.3, 20_000, level, 1.0)
    assert event_power(0.1, 0.1, 1.3, 50_000, level, 1.0) > event_power(0.1, 0.1, 1.3, 5_000, level, 1.0)
    assert event_power(0.5, 0.5, 1.0, 10**6, level, 1.0) < 1e-4  # a loss of epsilon is never flagged
    masses = [(0.4, 0.15)]
    loss = loss_at_power(masses, 20_000, level, 1.0)
    assert 1.0 < loss < 1.5
    assert event_power(*masses[0], loss, 20_000, level, 1.0) >= 0.9 > event_power(*masses[0], loss - 0.01, 20_000,
                                                                                     level, 1.0)
    n = draws_for_loss(masses, loss, level, 1.0, start=1000)
    assert 0.95 * 20_000 < n <= 20_000 * 1.02
    assert draws_for_loss(masses, 1.001, level, 1.0, budget=10**5) == 10**5  # out of reach: the budget


def _flagged(loss, decided):
    """``(flagged, runs)``: audits of a Laplace mean of loss ``loss`` (seeds 1-30, in order)
    flagged, counted until ``decided(flagged, runs)`` says that the runs left can no longer
    change the test's assertion on the count over all 30 (so its verdict is the 30 runs'; a
    run is a whole audit, about 0.35 s of CPU)."""
    flagged = runs = 0
    for s in range(1, 31):
        flagged += not blackbox_audit(LaplaceMean(factor=1 / loss), Interval(), 1.0, seed=s, **KW).passed
        runs += 1
        if decided(flagged, runs):
            break
    return flagged, runs


@pytest.mark.slow
def test_stated_power_against_simulation():
    """Interval [-1, 1], the pair (0, 1) vs (0, -1), 20 000 draws: the correct mechanism passes
    and states a loss L; mechanisms with loss L + 0.05 are flagged in >= 27 of 30 runs (in
    40 of 40 when this test was written, 30 of 30 at L = 1.117 now), with loss L - 0.3 in
    at most 15 of 30 (a negative control: the statement is not far above what the audit
    sees; 0 of 30, bounds 0.70-0.75).  The runs stop once the count is decided: 27 runs
    when the first 27 are flagged, 15 when none of the first 15 is."""
    ok = blackbox_audit(LaplaceMean(factor=1.0), Interval(), 1.0, seed=0, **KW)
    assert ok.passed
    stated = ok.details["power"]["loss"]
    assert 1.0 < stated < 1.4 and "binomial law" in ok.details["power"]["method"]
    assert any(note.startswith(f"power: a loss of {stated:.3f} or more") for note in ok.details["notes"])
    # decided: 27 flagged, or too few runs left to reach 27
    above, runs = _flagged(stated + 0.05, lambda flagged, runs: flagged >= 27 or flagged + 30 - runs < 27)
    assert above >= 27, (above, runs)
    # decided: more than 15 flagged, or too few runs left to pass 15
    below, runs = _flagged(stated - 0.3, lambda flagged, runs: flagged > 15 or flagged + 30 - runs <= 15)
    assert below <= 15, (below, runs)


def test_target_power_draws_until_the_loss_is_within_reach():
    """With target 1.1 the audit draws more than its 5000 and states at most about 1.1 (the
    plan uses the pilot's masses, the statement the fresh draws'); without it, the statement
    at 5000 draws is higher."""
    kw = dict(pair=PAIR, draws=5000, seed=3)
    plain = blackbox_audit(LaplaceMean(factor=1.0), Interval(), 1.0, **kw)
    aimed = blackbox_audit(LaplaceMean(factor=1.0), Interval(), 1.0, target_power=1.1, **kw)
    assert aimed.details["draws"] > 5000 and aimed.details["target_power"] == 1.1
    assert aimed.details["power"]["loss"] < 1.13 < plain.details["power"]["loss"]
    assert aimed.passed and plain.passed
    capped = blackbox_audit(LaplaceMean(factor=1.0), Interval(), 1.0, target_power=1.01, max_draws=8000, **kw)
    assert capped.details["draws"] == 8000


def test_bit_level_audit_states_its_power():
    from kngflow.audit.bits import _power

    none = _power(np.zeros(6, int), np.zeros(6, int), 50_000, 1e-5, 1.0, 0.0)
    assert none["loss"] == np.inf and "none occurred" in none["statement"]
    some = _power(np.array([300, 0, 0, 0, 0, 0]), np.array([100, 0, 0, 0, 0, 0]), 50_000, 1e-5, 1.0, 0.0)
    assert 1.0 < some["loss"] < 3.0 and some["statement"].startswith(f"power: a loss of {some['loss']:.3f}")
    # the statement is the black-box audit's: the same loss as loss_at_power at the Bonferroni level of 12 ratios
    masses = [(300 / 50_000, 100 / 50_000)]
    assert some["loss"] <= loss_at_power(masses, 50_000, 1e-5 / 24, 1.0)

"""kngflow.audit: exact audits (density on a grid, K-norm noise in closed form), the
black-box and side-channel audits, and their negative controls.

Exact audits are deterministic (no false failures); black-box audits flag an ε-DP
mechanism with probability at most alpha = 1e-5 (Clopper–Pearson with Bonferroni).
Negative controls: the same mechanism run at 2ε (3ε where the declared sensitivity is
not attained on the domain, see the pairs below) while declaring ε; the non-private
estimator; the paper protocol's data-dependent scaling.  Adversarial pairs below were
found by ``exact_audit``'s search (1000 candidates) and are checked here on the fine grid.
"""

import numpy as np
import pytest

from kngflow.audit import (
    blackbox_audit,
    candidate_pairs,
    clopper_pearson,
    exact_audit,
    knorm_audit,
    loss_lower_bound,
    parse_pair,
    side_channel_audit,
)
from kngflow.api import get_mechanism, get_problem

EPS = 1.0


def problem(d=2, protocol="public_bound"):
    if protocol == "paper":
        return get_problem("linear", d=d, protocol="paper")
    return get_problem("linear", d=d, protocol="public_bound", y_bound=1.0)


# (kind, options, d, pair, factor of ε at which the negative control is flagged)
EXACT_CASES = [
    ("kng", {"norm": "linf"}, 2, "26*(-1,1,-1) + 5*(1,1,0) + (-1,1,1) -> (1,1,1)", 2.0),
    ("kng", {"norm": "l1"}, 2, "59*(-1,1,-1) + 4*(1,0,1) + (-1,1,1) -> (-1,-1,-1)", 3.0),
    ("kng", {"norm": "l2"}, 2, "59*(-1,1,-1) + 4*(1,0,1) + (-1,1,1) -> (-1,-1,-1)", 3.0),
    ("exponential", {}, 2, "5*(-1,1,1) + 10*(1,-1,-1) + (1,-1,1) -> (1,-1,-1)", 2.0),
    ("kng", {"norm": "linf"}, 1, "14*(-1,1) + (1,-1) + (-1,-1) -> (-1,1)", 3.0),
    ("exponential", {}, 1, "14*(-1,1) + (1,-1) + (-1,-1) -> (-1,1)", 2.0),
]


@pytest.mark.parametrize("kind, opts, d, pair, factor", EXACT_CASES)
def test_exact_audit_passes_and_negative_control_flagged(kind, opts, d, pair, factor):
    mech = get_mechanism("linear", kind, hardened=False, **opts)
    prob = problem(d)
    p = parse_pair(pair, d + 1)
    ok = exact_audit(mech, prob, EPS, pairs=[p])
    assert ok.passed and ok.bound <= EPS and ok.details["numerical_error"] < 2e-3
    assert ok.bound > 0.4 * EPS  # the pair is adversarial: a sizeable share of the budget
    bad = exact_audit(mech, prob, EPS, run_epsilon=factor * EPS, pairs=[p])
    assert not bad.passed and bad.bound > EPS + bad.tolerance
    # the loss scales with the run ε: at 2ε it is about twice the loss at ε
    twice = exact_audit(mech, prob, EPS, run_epsilon=2 * EPS, pairs=[p])
    assert twice.bound > 1.8 * ok.bound


@pytest.mark.parametrize("kind, opts", [("kng", {"norm": n}) for n in ("l1", "l2", "linf")] + [("exponential", {})])
def test_exact_audit_search_within_epsilon(kind, opts):
    mech = get_mechanism("linear", kind, hardened=False, **opts)
    res = exact_audit(mech, problem(2), 0.5, candidates=60, keep=2, points=401, seed=1)
    assert res.passed and 0 < res.bound <= 0.5 + res.tolerance and res.pair is not None


def test_exact_audit_needs_log_density_and_low_dimension():
    with pytest.raises(ValueError, match="d = 1 or 2"):
        exact_audit(get_mechanism("linear", "kng", hardened=False), problem(3), EPS)
    with pytest.raises(ValueError, match="log_density"):
        exact_audit(get_mechanism("linear", "objective", hardened=False), problem(2), EPS)


@pytest.mark.parametrize("norm", ["l1", "l2", "linf"])
@pytest.mark.parametrize("q", [0.25, 0.5, 0.75])
def test_knorm_audit_objective(norm, q):
    """Closed form: the noise's loss stays within q·ε (exactly q·ε for ℓ∞, whose sensitivity
    4(1+B) is attained), the Jacobian's reaches (1-q)·ε (a corner record replaced by x = 0);
    run at 2ε the total exceeds ε."""
    mech = get_mechanism("linear", "objective_ext", hardened=False, norm=norm, q=q)
    res = knorm_audit(mech, problem(2), EPS)
    dt = res.details
    assert res.passed and res.bound <= EPS + res.tolerance
    assert dt["noise_max"] <= q * EPS * (1 + 1e-12) and dt["jacobian_max"] == pytest.approx((1 - q) * EPS, rel=1e-9)
    if norm == "linf":
        assert dt["noise_max"] == pytest.approx(q * EPS, rel=1e-12)
    bad = knorm_audit(mech, problem(2), EPS, run_epsilon=2 * EPS)
    assert not bad.passed and bad.bound > 1.2 * EPS


def test_clopper_pearson_matches_beta_interval():
    from statsmodels.stats.proportion import proportion_confint

    for k in (0, 1, 17, 99, 100):
        lo, hi = clopper_pearson(np.array([k]), 100, 0.01)
        elo, ehi = proportion_confint(k, 100, alpha=0.02, method="beta")
        assert lo[0] == pytest.approx(elo, abs=1e-12) and hi[0] == pytest.approx(ehi, abs=1e-12)


def test_loss_lower_bound_is_conservative_and_sensitive():
    n = 10_000
    same = np.array([1000, 3000, 6000])
    assert loss_lower_bound(same, same, n, 1e-5) == 0.0
    far = np.array([5000, 4000, 1000])
    near = np.array([500, 400, 9100])  # true ratios 10, 10 and 9.1
    assert np.log(10) - 0.3 < loss_lower_bound(far, near, n, 1e-5) < np.log(10)


def test_loss_lower_bound_at_delta():
    """(ε, δ)-DP allows P_a <= e^ε P_b + δ: the same counts that show a loss above 1 at
    δ = 0 show none at δ = 0.5, and a little less at δ = 0.01."""
    n = 1000
    a, b = np.array([600, 400]), np.array([100, 900])
    at0 = loss_lower_bound(a, b, n, 1e-5)
    assert at0 > 1.0
    assert loss_lower_bound(a, b, n, 1e-5, delta=0.5) == 0.0
    assert 0.0 < loss_lower_bound(a, b, n, 1e-5, delta=0.01) < at0


def test_parse_pair_round_trip_and_errors():
    p = parse_pair("2*(1,0,1) + (1,-1,1) -> (1,1,-1)", 3)
    assert p.rest.shape == (2, 3) and str(p) == "2*(1,0,1) + (1,-1,1) -> (1,1,-1)"
    assert str(parse_pair(str(p), 3)) == str(p)
    for bad, match in [("(1,2,3)", "one '->'"), ("(1,2) -> (1,2,3)", "3 finite numbers"),
                       ("(a,b,c) -> (1,2,3)", "must hold numbers"), ("2*(1,1,1) -> (1,1,1)", "must appear once"),
                       ("(1,1,1) -> [1,1,1]", "cannot read record")]:
        with pytest.raises(ValueError, match=match):
            parse_pair(bad, 3)


def test_candidate_pairs_are_adjacent_and_on_the_boundary():
    prob = problem(2)
    boundary, _ = prob.audit_records()
    for p in candidate_pairs(prob, np.random.default_rng(0), 50, min_size=2):
        D, D2 = p.datasets()
        assert D.shape == D2.shape and (D != D2).any(axis=1).sum() == 1
        assert any((boundary == p.record).all(1)) and any((boundary == p.other).all(1))


# ----------------------------------------------------------------------------- black box

# 50 releases per record score the pairs (half the audit's floor of 100 at 2000 draws): the
# search's releases, MCMC on the data sets of singular X'X, were most of these audits' time.
# Measured at 50 (seed 3): every shipped mechanism passes with bound 0, but objective_ext
# (linf, q = 0.75) at 0.11 (at 100: 0, but objective_ext (l2, q = 0.75) at 0.05); the
# controls below are flagged at 5.04, 4.96 and 4.95 (at 100, with 12 candidates for the
# paper protocol: 5.04, 4.63 and 4.99).
BB = dict(draws=2000, pilot=400, candidates=4, score_draws=50)
SHIPPED = (
    [("kng", {"norm": n}) for n in ("l1", "l2", "linf")]
    + [("exponential", {}), ("objective", {})]
    + [("objective_ext", {"norm": n, "q": q}) for n in ("l1", "l2", "linf") for q in (0.25, 0.5, 0.75)]
)


@pytest.mark.parametrize("kind, opts", SHIPPED)
@pytest.mark.slow
def test_blackbox_every_shipped_mechanism_passes(kind, opts):
    mech = get_mechanism("linear", kind, hardened=False, **opts)
    res = blackbox_audit(mech, problem(2), EPS, seed=3, **BB)
    assert res.passed and res.bound <= EPS, res.summary()


@pytest.mark.slow
def test_blackbox_flags_nonprivate_and_paper_protocol():
    res = blackbox_audit(get_mechanism("linear", "nonprivate", hardened=False), problem(2), EPS, seed=0, **BB)
    assert not res.passed and res.bound > 4  # the most 2000 draws can show: log(2000 / log(1/level))
    for kind in ("kng", "objective"):
        res = blackbox_audit(get_mechanism("linear", kind, hardened=False), problem(2, "paper"), EPS, seed=0, **BB)
        assert not res.passed and res.bound > 3, res.summary()


def test_side_channel_leak_reproducer():
    """A pair where the tries of exact KNG tell the two data sets apart; the
    released record (the estimate) does not."""
    pair = parse_pair("14*(1,-0.5,-1) + (1,-1,1) -> (1,1,-1)", 3)
    res = side_channel_audit(get_mechanism("linear", "kng", hardened=False, norm="linf"), problem(2), EPS, pair=pair,
                             draws=2000, pilot=400)
    assert res.passed and res.bound <= EPS
    fields = res.details["fields"]
    assert set(fields) == {"sampler", "acceptance", "steps", "seconds"}
    assert fields["steps"][1] and fields["acceptance"][1] and fields["steps"][0] > 2
    assert not fields["sampler"][1]
    assert "DATA-DEPENDENT" in res.summary()


def test_kng_without_factor_two_is_the_2eps_mechanism():
    """Dropping the factor 2 of Theorem 3.1 (rate ε/Δ on ||grad||) is KNG run at 2ε,
    which the exact audit flags above (linf pair)."""
    from kngflow.models.linear.problem import gradient

    mech = get_mechanism("linear", "kng", hardened=False)
    p = parse_pair(EXACT_CASES[0][3], 3)
    stats = problem(2).audit_data(p.datasets()[0])
    theta = np.random.default_rng(0).uniform(-0.5, 0.5, (100, 2))
    no_factor_two = -EPS / mech.sensitivity(2) * np.abs([gradient(stats, t) for t in theta]).max(1)
    np.testing.assert_allclose(mech.log_density(stats, 2 * EPS, theta), no_factor_two)

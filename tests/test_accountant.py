"""kngflow.accountant: basic composition of pure ε releases, dp_accounting's PLD composition of
Gaussian releases (checked against the analytic Gaussian mechanism), their mixture, the
one-line refusal that records nothing, and estimators spending their mechanism's event.

The analytic check: ``k`` Gaussian releases of noise multiplier ``z`` compose exactly to one
Gaussian release of multiplier ``z / sqrt(k)`` (Dong, Roth & Su), whose ε at δ solves Balle &
Wang's ``delta(eps) = Phi(-eps z + 1/(2z)) - e^eps Phi(-eps z - 1/(2z))`` (computed here with
scipy, independently of kngflow and dp_accounting).  dp_accounting's PLD is pessimistic with
discretisation 1e-4, so its ε lies in ``[exact, exact + TOL]``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

dpa = pytest.importorskip("dp_accounting")

from dp_accounting.pld import PLDAccountant  # noqa: E402

from kngflow import api  # noqa: E402
from kngflow.accountant import BudgetAccountant, claim_event, gaussian_event, pld_epsilon  # noqa: E402
from kngflow.mechanisms.claims import BlackBox  # noqa: E402

#: how far above the exact ε dp_accounting's pessimistic PLD (discretisation 1e-4) may read
TOL = 1e-4


def analytic_delta(eps: float, z: float) -> float:
    """Balle & Wang (2018): δ(ε) of the Gaussian mechanism with noise multiplier ``z``."""
    return float(norm.cdf(-eps * z + 1.0 / (2.0 * z)) - math.exp(eps) * norm.cdf(-eps * z - 1.0 / (2.0 * z)))


def analytic_epsilon(delta: float, z: float) -> float:
    """The ε at which :func:`analytic_delta` equals ``delta`` (it decreases in ε)."""
    return brentq(lambda e: analytic_delta(e, z) - delta, 0.0, 200.0, xtol=1e-14, rtol=1e-14)


def matches_composition(total_epsilon: float, z: float, k: int, delta: float) -> bool:
    """Whether ``total_epsilon`` is k-fold composition of multiplier ``z`` at ``delta``, within PLD's rounding."""
    exact = analytic_epsilon(delta, z / math.sqrt(k))
    return exact - 1e-9 <= total_epsilon <= exact + TOL


# -- (1) pure ε: basic composition, exactly --------------------------------------------------

@pytest.mark.parametrize("delta_budget", [0.0, 1e-5])
def test_pure_epsilon_sequence_is_the_exact_sum(delta_budget):
    spends = [0.1] * 10 + [0.25, 0.05, 1e-3]
    acc = BudgetAccountant(epsilon=2.0, delta=delta_budget)
    for e in spends:
        acc.spend(e)
    assert acc.total() == (math.fsum(spends), 0.0)  # exact, not approx
    assert acc.spent_events == [None] * len(spends)
    assert acc.remaining() == (2.0 - math.fsum(spends), delta_budget)


# -- (2) Gaussian releases: PLD, tighter than the sum, equal to the analytic composition ------

def test_gaussian_event_is_the_analytic_gaussian_at_the_claim():
    """The event of an (ε, δ) Gaussian release is the multiplier at which the exact curve passes
    through (ε, δ), rounded to the safe side (never more noise than that)."""
    for eps, delta in [(0.5, 1e-6), (1.0, 1e-5), (4.0, 1e-8), (0.01, 1e-5)]:
        z = gaussian_event(eps, delta).noise_multiplier
        assert analytic_delta(eps, z) >= delta * (1 - 1e-9)
        assert analytic_delta(eps, z * (1 + 1e-7)) < delta  # and no less noise than needed
    # the noisy-moment PCA calibrates sigma analytically: its sigma / Delta is that multiplier
    from kngflow.models.pca.problem import upper_sensitivity

    mech = api.get_mechanism("pca", "analyze_gauss", hardened=False)
    z_pca = mech.sigma(500, 3, 0.7) / upper_sensitivity(500)
    assert gaussian_event(0.7, mech.delta).noise_multiplier == pytest.approx(z_pca, rel=1e-9)


def test_k_gaussian_releases_compose_tightly():
    eps0, delta0, k, delta_budget = 0.5, 1e-6, 10, 1e-5
    event = gaussian_event(eps0, delta0)
    z = event.noise_multiplier
    acc = BudgetAccountant(epsilon=3.0, delta=delta_budget)
    for _ in range(k):
        acc.spend(eps0, delta0, event=event)
    eps, delta = acc.total()
    assert delta == delta_budget
    assert eps < k * eps0  # 1.5225 < 5: PLD's tightness (basic would not even fit the budget)
    # the same events composed by dp_accounting directly, one by one
    direct = PLDAccountant()
    for _ in range(k):
        direct.compose(dpa.GaussianDpEvent(z))
    assert eps == pytest.approx(direct.get_epsilon(delta_budget), abs=TOL)
    # independent: the analytic Gaussian composition (z / sqrt(k)), Balle & Wang via scipy
    assert matches_composition(eps, z, k, delta_budget)
    assert eps == pytest.approx(1.52252560, abs=TOL)


def test_wrong_noise_multiplier_fails_the_same_check():
    """Negative controls: the check above can fail — 1 % more or less noise, or one release
    more or fewer, is off by far more than PLD's rounding."""
    eps0, delta0, k, delta_budget = 0.5, 1e-6, 10, 1e-5
    z = gaussian_event(eps0, delta0).noise_multiplier
    eps = pld_epsilon([dpa.GaussianDpEvent(z)] * k, delta_budget)
    assert matches_composition(eps, z, k, delta_budget)
    for wrong_z, wrong_k in [(1.01 * z, k), (z / 1.01, k), (z, k - 1), (z, k + 1)]:
        assert not matches_composition(eps, wrong_z, wrong_k, delta_budget)


def test_distinct_gaussian_releases_compose_as_one_gaussian():
    """Releases at different ε: multipliers z_i compose to 1/z^2 = sum 1/z_i^2."""
    events = [gaussian_event(e, 1e-6) for e in (0.3, 0.6, 1.0)]
    acc = BudgetAccountant(epsilon=math.inf, delta=1e-5)
    for e, ev in zip((0.3, 0.6, 1.0), events):
        acc.spend(e, 1e-6, event=ev)
    z = 1.0 / math.sqrt(sum(ev.noise_multiplier ** -2 for ev in events))
    assert matches_composition(acc.total()[0], z, 1, 1e-5)
    assert acc.total()[0] < 1.9


def test_one_gaussian_release_at_the_whole_budget_still_fits():
    """The total is the smaller of basic and PLD composition: PLD's pessimistic rounding never
    refuses what the release's own (ε, δ) fits."""
    acc = BudgetAccountant(epsilon=1.0, delta=1e-5).spend(1.0, 1e-5, event=gaussian_event(1.0, 1e-5))
    assert acc.total() == (1.0, 1e-5)


# -- (3) the refusal: one line, what is left, nothing recorded --------------------------------

def test_over_budget_gaussian_release_refuses_in_one_line_and_records_nothing():
    event = gaussian_event(0.5, 1e-6)
    acc = BudgetAccountant(epsilon=1.0, delta=1e-5)
    for _ in range(4):
        acc.spend(0.5, 1e-6, event=event)  # 4 x 0.5 fit a budget of 1 by PLD (0.919), a fifth does not (1.039)
    before = (list(acc.spent_budget), list(acc.spent_events), acc.total())
    assert before[2][0] < 1.0
    with pytest.raises(ValueError, match=r"^privacy budget exceeded: .*\(left: epsilon=0\.\d+, delta=0\)$") as info:
        acc.spend(0.5, 1e-6, event=event)
    assert "\n" not in str(info.value) and "GaussianDpEvent" in str(info.value)
    assert (acc.spent_budget, acc.spent_events, acc.total()) == before
    for pure in (BudgetAccountant(epsilon=5.0), BudgetAccountant()):  # a pure budget refuses a Gaussian release,
        with pytest.raises(ValueError, match=r"delta 1e-06 > 0"):       # even with no limit on ε
            pure.spend(0.5, 1e-6, event=event)
        assert pure.spent_budget == [] and pure.total() == (0.0, 0.0)


def test_events_it_cannot_compose_are_refused_in_one_line():
    acc = BudgetAccountant(epsilon=5.0, delta=1e-5)
    bad = [dpa.PoissonSampledDpEvent(0.1, dpa.GaussianDpEvent(2.0)), dpa.NonPrivateDpEvent(),
           dpa.GaussianDpEvent(0.0), dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(2.0), 0), (1.0, 1e-6)]
    for event in bad:
        with pytest.raises(ValueError, match="^event") as info:
            acc.spend(0.5, 1e-6, event=event)
        assert "\n" not in str(info.value)
    assert acc.spent_budget == [] and acc.total() == (0.0, 0.0)


def test_claims_map_to_events_where_they_allow_one():
    """Pure ε and black-box claims map to no event (basic composition); a Gaussian statistic
    claim maps to its Gaussian; subsampled steps (DP-SGD, q < 1) and unknown n to none."""
    pca = api.get_mechanism("pca", "analyze_gauss", hardened=False)
    data = api.pca_data(np.eye(3) * 0.5, 1, bound=1.0)
    assert claim_event(pca.privacy_claim(), data, 0.7) == gaussian_event(0.7, pca.delta)
    assert claim_event(BlackBox(), data, 0.7) is None
    assert claim_event(BlackBox(delta=1e-6), data, 0.7) is None
    exp = api.get_mechanism("pca", "exponential", hardened=False)
    assert claim_event(exp.privacy_claim(), data, 0.7) is None
    X, y = _classification()
    ldata = api.logistic_data(X, y, radius=1.0, data_norm="l2")
    gd = api.get_mechanism("logistic", "noisy_gd", hardened=False)
    assert claim_event(gd.privacy_claim(), ldata, 0.5, n=len(X)) == gaussian_event(0.5, gd.delta)
    assert claim_event(gd.privacy_claim(), ldata, 0.5) is None  # steps(n) needs n
    sgd = api.get_mechanism("logistic", "dpsgd", hardened=False, sampling_rate=0.5)
    assert claim_event(sgd.privacy_claim(), ldata, 0.5, n=len(X)) is None
    gamma = api.get_mechanism("logistic", "noisy_gd", hardened=False, noise="gamma")
    assert claim_event(gamma.privacy_claim(), ldata, 0.5, n=len(X)) is None


# -- estimators spend their release's event ----------------------------------------------------

def _classification(n=120, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 2)) / 2.0
    return X, (X[:, 0] + 0.3 * rng.normal(size=n) > 0).astype(int)


def test_estimator_gaussian_fits_compose_by_pld_and_the_over_budget_fit_refuses():
    from kngflow.estimators import PCA

    X, _ = _classification()
    acc = BudgetAccountant(epsilon=1.0, delta=1e-5)

    def fit(seed):
        return PCA(1, epsilon=0.5, mechanism="analyze_gauss", accountant=acc, random_state=seed,
                   hardened=False).fit(X)

    for seed in range(3):
        fit(seed)  # basic composition would refuse the second (delta 2e-5 > 1e-5)
    event = gaussian_event(0.5, 1e-5)
    assert acc.spent_budget == [(0.5, 1e-5)] * 3 and acc.spent_events == [event] * 3
    eps, delta = acc.total()
    assert delta == 1e-5 and matches_composition(eps, event.noise_multiplier, 3, 1e-5) and eps < 1.0
    est = PCA(1, epsilon=0.5, mechanism="analyze_gauss", accountant=acc, random_state=9, hardened=False)
    with pytest.raises(ValueError, match=r"^privacy budget exceeded.*\(left: epsilon=") as info:
        est.fit(X)
    assert "\n" not in str(info.value)
    assert not hasattr(est, "components_")
    assert len(acc.spent_budget) == 3 and acc.total() == (eps, delta)


def test_estimator_hardened_and_subsampled_releases_spend_their_epsilon_delta():
    """A hardened release (snapped: not Gaussian) and DP-SGD with q < 1 are spent by basic
    composition; an unhardened noisy-GD release by its Gaussian event; the PLD part is read at
    the δ the basic part leaves."""
    from kngflow.estimators import LogisticRegression

    X, y = _classification()
    acc = BudgetAccountant(epsilon=5.0, delta=1e-4)
    LogisticRegression(mechanism="noisy_gd", epsilon=0.5, accountant=acc, random_state=0).fit(X, y)
    LogisticRegression(mechanism="dpsgd", epsilon=0.5, accountant=acc, random_state=0, hardened=False,
                       options={"sampling_rate": 0.5, "epochs": 1.0}).fit(X, y)
    assert acc.spent_events == [None, None] and acc.total() == (1.0, 2e-5)
    for seed in range(2):
        LogisticRegression(mechanism="noisy_gd", epsilon=0.5, accountant=acc, random_state=seed,
                           hardened=False).fit(X, y)
    event = gaussian_event(0.5, 1e-5)
    assert acc.spent_events[2:] == [event, event]
    eps, delta = acc.total()
    assert delta == 1e-4
    assert 1.0 + analytic_epsilon(1e-4 - 2e-5, event.noise_multiplier / math.sqrt(2)) - 1e-9 <= eps
    assert eps <= 1.0 + analytic_epsilon(1e-4 - 2e-5, event.noise_multiplier / math.sqrt(2)) + TOL


# -- (4) pure, Gaussian and (ε, δ) releases mixed ---------------------------------------------

def test_mixed_pure_gaussian_and_epsilon_delta_releases():
    acc = BudgetAccountant(epsilon=4.0, delta=1e-5)
    event = gaussian_event(0.5, 1e-6)
    acc.spend(0.2)                      # pure ε
    acc.spend(0.5, 1e-6, event=event)   # Gaussian
    acc.spend(0.3)                      # pure ε
    acc.spend(0.5, 1e-6, event=event)
    acc.spend(0.1, 2e-6)                # (ε, δ) with no event: basic composition
    acc.spend(0.5, 1e-6, event=event)
    eps, delta = acc.total()
    z = event.noise_multiplier
    # the basic part adds up exactly; the PLD part is read at the delta it leaves
    pld = eps - math.fsum([0.2, 0.3, 0.1])
    assert delta == 1e-5
    assert matches_composition(pld, z, 3, 1e-5 - 2e-6)
    direct = PLDAccountant().compose(dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(z), 3)).get_epsilon(1e-5 - 2e-6)
    assert pld == pytest.approx(direct, abs=1e-12)
    assert eps < math.fsum(e for e, _ in acc.spent_budget)  # tighter than the sum 2.1
    # a negative control: reading the PLD part at the whole budget's delta is a different number
    assert not matches_composition(pld, z, 3, 1e-5)
    # pure ε on top still adds up exactly
    before = eps
    acc.spend(0.25)
    assert acc.total()[0] == pytest.approx(before + 0.25, abs=1e-12)


def test_basic_composition_is_kept_where_it_is_the_smaller():
    """One cheap Gaussian release and large pure ε spends: the total is min(basic, PLD)."""
    acc = BudgetAccountant(epsilon=3.0, delta=1e-5)
    acc.spend(2.0)
    acc.spend(0.5, 1e-5, event=gaussian_event(0.5, 1e-5))
    assert acc.total() == (2.5, 1e-5)
    assert "spent epsilon=2.5, delta=1e-05 in 2 release(s)" in repr(acc)

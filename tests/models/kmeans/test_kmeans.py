"""The k-means model (kngflow/models/kmeans/): data, release, errors, DPLloyd's noise law and the audits."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from kngflow.api import get_mechanism, get_problem
from kngflow.audit import AdjacentPair, audit_plan, blackbox_audit, discrete_audit, statistic_audit
from kngflow.mechanisms.claims import Discrete
from kngflow.models.kmeans.expmech import ExpMech, candidate_sets, grid_points, set_costs
from kngflow.models.kmeans.lloyd import canonical_centres, cost
from kngflow.models.kmeans.mechanisms import (DPLloyd, Grid, NonPrivate, default_count_share, su_grid_size,
                                              sum_sensitivity)
from kngflow.models.kmeans.problem import KMeansData, kmeans_data, matched_distance
from kngflow.models.kmeans.sketch import Sketch, decode, features, frequencies, sketch_sensitivity
from kngflow.registry import problem_names

#: the private mechanisms
PRIVATE = ["dplloyd", "eugkm", "expmech", "sketch"]

#: a KS p-value below this fails (a false failure is rarer than 1 in 10^4)
P_MIN = 1e-4


def test_registry_lists_the_model():
    assert "kmeans" in problem_names()
    p = get_problem("kmeans")
    assert p.d == 6 and p.theta_star.shape == (6,)
    assert isinstance(get_mechanism("kmeans", "dplloyd"), DPLloyd)
    assert isinstance(get_mechanism("kmeans", "eugkm"), Grid)
    assert isinstance(get_mechanism("kmeans", "expmech"), ExpMech)
    assert isinstance(get_mechanism("kmeans", "sketch"), Sketch)
    assert not get_mechanism("kmeans", "nonprivate").private
    for kind in PRIVATE:  # every private k-means mechanism declares its hardening
        m = get_mechanism("kmeans", kind)
        assert m.hardened and "hardened" in type(m).option_names() and type(m).hardenable()


def test_simulation_is_in_the_ball_and_theta_star_is_canonical():
    p = get_problem("kmeans", k=4, d=3, separation=0.9, sd=0.3)
    data = p.simulate(5000, np.random.default_rng(0))
    assert isinstance(data, KMeansData) and data.x.shape == (5000, 3) and data.k == 4
    r = np.sqrt((data.x**2).sum(axis=1))
    assert r.max() <= 1.0 + 1e-12 and (r > 1.0 - 1e-12).any()  # sd 0.3 at radius 0.9: some clipped
    first = p.theta_star.reshape(4, 3)[:, 0]
    assert np.all(np.diff(first) > 0)


@pytest.mark.parametrize("kind", ["nonprivate", *PRIVATE])
def test_release_shape_order_and_domain(kind):
    p = get_problem("kmeans", k=3, d=2)
    data = p.simulate(500, np.random.default_rng(1))
    rel = get_mechanism("kmeans", kind).release(data, 1.0, np.random.default_rng(2))
    assert rel.estimate.shape == (6,)
    C = p.as_centres(rel.estimate)
    assert np.all(np.diff(C[:, 0]) >= 0) and np.all((C**2).sum(axis=1) <= 1.0 + 1e-12)
    assert np.isfinite(p.error(rel.estimate))


@pytest.mark.parametrize("options, field", [
    ({"k": 0}, "k"), ({"d": 0}, "d"), ({"separation": 1.0}, "separation"), ({"sd": -1.0}, "sd"),
    ({"error_measure": "cost"}, "error_measure"),
])
def test_problem_options_are_validated(options, field):
    with pytest.raises(ValueError, match=f"^{field} "):
        get_problem("kmeans", **options)


@pytest.mark.parametrize("cls, options, field", [
    (DPLloyd, {"iterations": 0}, "iterations"), (DPLloyd, {"count_share": 1.0}, "count_share"),
    (Grid, {"cells": 0}, "cells"), (Grid, {"n_init": 0}, "n_init"), (NonPrivate, {"iterations": 0}, "iterations"),
    (ExpMech, {"spacing": 0.3}, "spacing"), (ExpMech, {"spacing": 2.0}, "spacing"),
    (Sketch, {"frequencies": 0}, "frequencies"), (Sketch, {"bandwidth": -1.0}, "bandwidth"),
])
def test_mechanism_options_are_validated(cls, options, field):
    with pytest.raises(ValueError, match=f"^{field} "):
        cls(**options)


def test_user_data_outside_the_bound_is_an_error():
    with pytest.raises(ValueError, match="^x: "):
        kmeans_data(np.array([[2.0, 0.0]]), 2, 1.0)
    assert kmeans_data(np.array([[2.0, 0.0]]), 2, 2.0).x.tolist() == [[1.0, 0.0]]


def test_canonical_order_and_matched_distance():
    C = np.array([[0.3, 0.1], [-0.2, 0.5], [0.0, -0.4]])
    out = canonical_centres(C).reshape(3, 2)
    assert out[:, 0].tolist() == [-0.2, 0.0, 0.3]
    assert canonical_centres(C[::-1]).tolist() == canonical_centres(C).tolist()
    assert matched_distance(C[[2, 0, 1]], C) == 0.0
    assert matched_distance(C + np.array([0.3, 0.4]), C) == pytest.approx(math.sqrt(3) * 0.5)


def test_nicv_of_nonprivate_is_about_one():
    p = get_problem("kmeans")
    data = p.simulate(2000, np.random.default_rng(3))
    est = NonPrivate().release(data, 1.0, np.random.default_rng(4)).estimate
    errs = p.error_measures(est, data)
    assert abs(errs["nicv"] - 1.0) < 0.02 and abs(errs["nicv_data"] - 1.0) < 1e-6
    assert errs["matched"] < 0.05
    assert p.reference_lines[0][0] > 5.0  # every centre at 0


def test_nicv_of_dplloyd_goes_to_one_as_eps_n_grows():
    p = get_problem("kmeans")
    med = {}
    for n, eps in [(200, 0.5), (2000, 1.0), (50_000, 2.0)]:
        data = p.simulate(n, np.random.default_rng(n))
        errs = [p.error(DPLloyd().release(data, eps, np.random.default_rng(r)).estimate) for r in range(9)]
        med[n] = float(np.median(errs))
    assert med[200] > 2.0 and med[2000] < med[200] and med[50_000] < 1.05, med


def test_dplloyd_scales():
    m = DPLloyd(iterations=4, count_share=0.25)
    b_N, b_S = m.noise_scales(3, 2.0)
    assert b_N == pytest.approx(2 * 4 / (0.25 * 2.0)) and b_S == pytest.approx(2 * math.sqrt(3) * 4 / (0.75 * 2.0))
    assert sum_sensitivity(2) == pytest.approx(2 * math.sqrt(2))
    rho = default_count_share(2)
    assert rho / (1 - rho) == pytest.approx(2 ** (-2 / 3))
    assert su_grid_size(10_000, 1.0, 2) == 32


def _count_noise(mech, epsilon, draws, seed):
    """Draws of ``N~ - N`` of one DPLloyd iteration on a fixed data set and fixed centres."""
    x = np.array([[0.5, 0.0], [0.6, 0.1], [-0.5, 0.0], [-0.4, -0.2], [0.0, 0.9]])
    c = np.array([[0.5, 0.0], [-0.5, 0.0]])
    N, S = mech.counts_and_sums(x, c)
    rng = np.random.default_rng(seed)
    out = np.empty((draws, 2))
    sums = np.empty((draws, 4))
    for i in range(draws):
        Nn, Sn, _ = mech.iteration(x, c, epsilon, rng)
        out[i] = Nn - N
        sums[i] = (Sn - S).ravel()
    return out.ravel(), sums.ravel()


def test_dplloyd_noise_law_is_laplace_with_the_derived_scales():
    mech = DPLloyd(iterations=3)
    b_N, b_S = mech.noise_scales(2, 1.0)
    counts, sums = _count_noise(mech, 1.0, 10_000, 5)
    assert stats.kstest(counts, stats.laplace(scale=b_N).cdf).pvalue > P_MIN
    assert stats.kstest(sums, stats.laplace(scale=b_S).cdf).pvalue > P_MIN
    # control: the scale of a mechanism run at 2 eps (half the noise) is rejected
    assert stats.kstest(counts, stats.laplace(scale=b_N / 2).cdf).pvalue < P_MIN
    assert stats.kstest(sums, stats.laplace(scale=b_S / 2).cdf).pvalue < P_MIN


@pytest.mark.parametrize("kind", ["dplloyd", "eugkm", "sketch"])
def test_statistic_audit_passes_and_catches_two_eps(kind):
    p = get_problem("kmeans", k=2, d=2)
    m = get_mechanism("kmeans", kind, hardened=False)
    ok = statistic_audit(m, p, 1.0)
    bad = statistic_audit(m, p, 1.0, run_epsilon=2.0)
    if kind == "sketch":  # the bound 2 sqrt(2) m / n is not reached by records at every frequency at once
        assert ok.passed and 0.6 < ok.bound < 1.0 and bad.bound == pytest.approx(2 * ok.bound)
    else:
        assert ok.passed and ok.bound == pytest.approx(1.0)  # the sensitivities are reached
    assert not bad.passed


#: one record at +1 against one at -1 (k = 1, d = 1): the centre's tail carries the sums' share of eps
PAIR = AdjacentPair(np.zeros((0, 1)), np.array([1.0]), np.array([-1.0]))


@pytest.mark.parametrize("kind, options", [
    ("dplloyd", {"iterations": 1, "count_share": 0.2}),
    ("eugkm", {"cells": 2, "n_init": 1, "iterations": 5}),
])
@pytest.mark.slow
def test_blackbox_audit_passes_and_catches_two_eps(kind, options):
    p = get_problem("kmeans", k=1, d=1)
    m = get_mechanism("kmeans", kind, hardened=False, **options)
    assert blackbox_audit(m, p, 1.0, pair=PAIR, draws=5000, seed=1).passed
    assert not blackbox_audit(m, p, 1.0, run_epsilon=2.0, pair=PAIR, draws=20_000, seed=1).passed


@pytest.mark.slow
def test_blackbox_audit_searched_pair_passes():
    p = get_problem("kmeans", k=2, d=2)
    m = get_mechanism("kmeans", "dplloyd", hardened=False)
    assert blackbox_audit(m, p, 1.0, draws=5000, seed=1).passed



# -- the exponential mechanism over centre sets ------------------------------------------------


def test_candidate_grid_and_sets():
    pts = grid_points(2, 0.25)
    assert pts.shape == (49, 2) and np.all((pts**2).sum(axis=1) <= 1.0)
    assert np.all(np.lexsort(pts.T[::-1]) == np.arange(49))  # lexicographic
    assert np.all(np.round(pts / 0.25) * 0.25 == pts)  # exact multiples of the spacing
    P, sets, out = candidate_sets(2, 3, 0.25)
    assert sets.shape == (math.comb(49, 3), 3) and out.shape == (len(sets), 6)
    rows = np.random.default_rng(0).integers(0, len(sets), 50)
    for r in rows:  # every outcome is already in canonical order
        assert out[r].tolist() == canonical_centres(P[sets[r]]).tolist()
    with pytest.raises(ValueError, match="^spacing: .* exceed"):
        candidate_sets(2, 4, 1 / 16)
    with pytest.raises(ValueError, match="^spacing: .* fewer than k"):
        candidate_sets(1, 4, 1.0)


def test_set_costs_are_the_kmeans_costs():
    x = get_problem("kmeans").simulate(300, np.random.default_rng(0)).x
    P, sets, _ = candidate_sets(2, 3, 0.25)
    c = set_costs(x, P, sets)
    for r in np.random.default_rng(1).integers(0, len(sets), 20):
        assert c[r] == pytest.approx(cost(x, P[sets[r]]), rel=1e-12)


def _expmech_draws(epsilon_law, epsilon_run, draws, seed):
    """Observed counts of ``draws`` releases at ``epsilon_run`` and the exact softmax law at ``epsilon_law``
    (k = 2 centres on the 9-point grid of [-1, 1]: 36 outcomes; 36 records)."""
    x = np.repeat([[-0.6], [-0.5], [-0.45], [-0.4], [0.1], [0.3], [0.35], [0.4], [0.5], [0.55], [0.9], [-1.0]], 3,
                  axis=0)
    data = KMeansData(x, 2)
    m = ExpMech(spacing=0.25)
    out = m.outcomes(data)
    index = {tuple(row): i for i, row in enumerate(out)}
    # the law: exp(-eps cost / 8), computed here from the k-means cost itself
    P, sets, _ = candidate_sets(1, 2, 0.25)
    costs = np.array([cost(x, P[s]) for s in sets])
    w = np.exp(-epsilon_law * (costs - costs.min()) / 8.0)
    law = w / w.sum()
    assert np.allclose(m.probabilities(data, epsilon_law), law, rtol=1e-12, atol=0)
    rng = np.random.default_rng(seed)
    counts = np.zeros(len(out))
    for _ in range(draws):
        counts[index[tuple(m.release(data, epsilon_run, rng).estimate)]] += 1
    return counts, law


def _chi2_pvalue(counts, law):
    expected = law * counts.sum()
    big = expected >= 5  # pool the cells expected to hold fewer than 5
    obs = np.append(counts[big], counts[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    keep = exp > 0
    return stats.chisquare(obs[keep], exp[keep]).pvalue


@pytest.mark.slow
def test_expmech_law_is_the_exact_softmax():
    counts, law = _expmech_draws(1.0, 1.0, 20_000, 3)
    assert law.max() / law.min() > 20  # a law far from uniform
    assert _chi2_pvalue(counts, law) > P_MIN
    # control: releases of a mechanism run at 2 eps fail the same test against the law at eps
    bad, _ = _expmech_draws(1.0, 2.0, 20_000, 3)
    assert _chi2_pvalue(bad, law) < P_MIN


def test_expmech_claim_and_plan():
    p = get_problem("kmeans", k=2, d=2)
    m = get_mechanism("kmeans", "expmech", hardened=False)
    assert isinstance(m.privacy_claim(), Discrete) and m.privacy_claim().kind == "discrete"
    assert audit_plan(m, p) == ["exact", "black-box"]
    with pytest.raises(TypeError, match="Discrete claim needs"):
        Discrete()


@pytest.mark.parametrize("k, d, low, high", [(2, 2, 0.55, 1.15), (1, 2, 0.85, 1.85), (1, 1, 0.9, 1.9)])
@pytest.mark.slow
def test_expmech_discrete_audit_passes_and_catches_two_eps(k, d, low, high):
    """The exact law over every outcome: below eps at eps (0.59 at k = 2, about 0.9 at k = 1:
    64 copies of x' concentrate the law), above it when the mechanism runs at 2 eps."""
    p = get_problem("kmeans", k=k, d=d)
    m = get_mechanism("kmeans", "expmech", hardened=False)
    ok = discrete_audit(m, p, 1.0)
    bad = discrete_audit(m, p, 1.0, run_epsilon=2.0)
    assert ok.passed and low < ok.bound <= 1.0, ok.bound
    assert not bad.passed and bad.bound > high, bad.bound


def test_discrete_audit_rejects_data_dependent_outcomes():
    class Leaky(ExpMech):
        def outcomes(self, data):
            return super().outcomes(data) + data.x[-1, 0]

    with pytest.raises(ValueError, match="different outcome sets"):
        discrete_audit(Leaky(), get_problem("kmeans", k=1, d=1), 1.0)


@pytest.mark.slow
def test_kngflow_audit_passes_expmech_and_flags_two_eps(capsys):
    """On 64 copies of (-1, 0) beside the record that moves to (1, 0) the exact audit reads
    0.565 at eps and 1.142 at 2 eps.  The same commands with the pair searched are
    docs/kmeans.md's, which ``tests/test_docs.py`` runs."""
    from kngflow.cli import main

    args = ["audit", "expmech", "--problem", "kmeans", "--draws", "1000", "--no-progress",
            "--pair", "64*(-1,0) + (-1,0) -> (1,0)"]
    assert main(args) == 0
    assert main([*args, "--run-epsilon", "2"]) == 1
    out = capsys.readouterr().out
    assert "FLAGGED by exact audit" in out


def test_expmech_utility_approaches_the_grid_optimum():
    p = get_problem("kmeans")
    data = p.simulate(5000, np.random.default_rng(4))
    m = ExpMech()
    P, sets, out = candidate_sets(2, 3, 0.25)
    best = out[np.argmin(set_costs(data.x, P, sets))]
    errs = [p.error(m.release(data, 1.0, np.random.default_rng(r)).estimate) for r in range(5)]
    assert max(errs) <= p.error(best) + 0.05 and p.error(best) < 1.25


# -- compressive k-means (the noisy sketch) ------------------------------------------------------


def test_sketch_sensitivity_bound_holds_and_is_reached_per_frequency():
    om = frequencies(2, 30, 0.2, 0)
    rng = np.random.default_rng(0)
    g = rng.standard_normal((2000, 2))
    x = g / np.linalg.norm(g, axis=1)[:, None] * rng.uniform(size=(2000, 1)) ** 0.5
    F = features(x, om)
    diffs = np.abs(F[:1000] - F[1000:]).sum(axis=1)
    assert diffs.max() <= sketch_sensitivity(30, 1)  # 2 sqrt(2) m for n = 1
    # one frequency: antipodal angles on a diagonal reach 2 sqrt(2)
    one = np.array([[math.pi, 0.0]])
    F2 = features(np.array([[0.25, 0.0], [-0.75, 0.0]]), one)
    assert np.abs(F2[0] - F2[1]).sum() == pytest.approx(2 * math.sqrt(2))
    assert np.array_equal(frequencies(2, 30, 0.2, 0), om)  # public: a function of the seed


def test_sketch_noise_law_is_laplace_with_the_derived_scale():
    p = get_problem("kmeans")
    data = p.simulate(500, np.random.default_rng(0))
    m = Sketch()
    z = m.statistic(data)
    rng = np.random.default_rng(5)
    noise = np.concatenate([m.noisy_sketch(data, 1.0, rng) - z for _ in range(400)])  # 24 000 coordinates
    b = m.scale(data, 1.0)
    assert b == pytest.approx(2 * math.sqrt(2) * 30 / (500 * 1.0))
    assert stats.kstest(noise, stats.laplace(scale=b).cdf).pvalue > P_MIN
    assert stats.kstest(noise, stats.laplace(scale=b / 2).cdf).pvalue < P_MIN  # the 2 eps control


def test_sketch_decoder_recovers_the_centres_from_a_clean_sketch():
    p = get_problem("kmeans")
    data = p.simulate(20_000, np.random.default_rng(1))
    m = Sketch()
    C, _ = decode(m.statistic(data), m.omega(data), 3)
    assert matched_distance(C, p.means) < 0.1 and p.error(canonical_centres(C)) < 1.1


# -- hardening -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", PRIVATE)
def test_hardened_release_keeps_the_guarantee_and_the_utility(kind):
    p = get_problem("kmeans")
    data = p.simulate(1000, np.random.default_rng(6))
    hard = get_mechanism("kmeans", kind)
    soft = get_mechanism("kmeans", kind, hardened=False)
    eps2, delta2 = hard.hardened_guarantee(data, 1.0)
    assert 1.0 <= eps2 <= 1.0 + 1e-4 and delta2 <= 1e-6
    e_hard = p.error(hard.release(data, 1.0, np.random.default_rng(7)).estimate)
    e_soft = p.error(soft.release(data, 1.0, np.random.default_rng(7)).estimate)
    assert abs(e_hard - e_soft) < 0.01
    if kind == "expmech":  # already on its public grid: the snapping gives the release back
        a = hard.release(data, 1.0, np.random.default_rng(8)).estimate
        assert a.tolist() == soft.release(data, 1.0, np.random.default_rng(8)).estimate.tolist()


def test_hardened_dplloyd_steps_land_on_the_grid():
    p = get_problem("kmeans")
    data = p.simulate(1000, np.random.default_rng(9))
    m = DPLloyd(hardened=True)
    h = m.hardening(data, 1.0)
    c = DPLloyd.initial_centres(3, 2, np.random.default_rng(0))
    Nn, Sn, _ = m.iteration(data.x, c, 1.0, np.random.default_rng(1), (h, np.random.default_rng(2)))
    y = np.concatenate([Nn, Sn.ravel()])
    assert h.site == "statistic" and h.snaps == m.iterations
    assert np.all(y / h.grid == np.round(y / h.grid))


# -- the real-data problem (Fisher's iris) -------------------------------------------------------

IRIS = "kngflow.models.kmeans.iris:IrisKMeansProblem"


def test_iris_ships_scikit_learns_data():
    from kngflow.models.kmeans.iris import IRIS_MM

    sklearn_datasets = pytest.importorskip("sklearn.datasets")
    X = sklearn_datasets.load_iris().data
    assert np.array_equal(np.array(IRIS_MM) / 10.0, np.round(X, 1)) and np.allclose(np.array(IRIS_MM) / 10.0, X)


def test_iris_problem_scaling_subsampling_and_reference():
    from kngflow.models.kmeans.iris import iris_records

    x = iris_records("all")
    assert x.shape == (150, 4) and np.sqrt((x**2).sum(axis=1)).max() <= 1.0 and not x.flags.writeable
    # the public rule: (cm - 4) / 4 / sqrt(d); sepal length 5.1 cm of the first flower
    assert x[0, 0] == pytest.approx((5.1 - 4.0) / 4.0 / 2.0)
    p = get_problem(IRIS, features="petal")
    assert p.real_data and p.d == 6
    whole = p.simulate(150, np.random.default_rng(0))
    assert whole.x.shape == (150, 2) and np.array_equal(whole.x, p.simulate(150, np.random.default_rng(1)).x)
    sub = p.simulate(50, np.random.default_rng(2))
    assert sub.x.shape == (50, 2) and len(np.unique(sub.x, axis=0)) <= 50
    assert p.error(p.theta_star) == pytest.approx(1.0) and p.reference_lines[0][0] > 10
    with pytest.raises(ValueError, match="^n must be at most 150"):
        p.simulate(151, np.random.default_rng(0))
    with pytest.raises(ValueError, match="^features "):
        get_problem(IRIS, features="sepal")
    for kind in ("nonprivate", *PRIVATE):  # the k-means kinds apply (family)
        rel = get_mechanism(IRIS, kind).release(whole, 4.0, np.random.default_rng(3))
        assert np.isfinite(p.error(rel.estimate))

"""The k-means model (kngflow/models/kmeans/): data, release, errors, DPLloyd's noise law and the audits."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from kngflow.api import get_mechanism, get_problem
from kngflow.audit import AdjacentPair, blackbox_audit, statistic_audit
from kngflow.models.kmeans.lloyd import canonical_centres
from kngflow.models.kmeans.mechanisms import (DPLloyd, Grid, NonPrivate, default_count_share, su_grid_size,
                                              sum_sensitivity)
from kngflow.models.kmeans.problem import KMeansData, kmeans_data, matched_distance
from kngflow.registry import problem_names

#: a KS p-value below this fails (a false failure is rarer than 1 in 10^4)
P_MIN = 1e-4


def test_registry_lists_the_model():
    assert "kmeans" in problem_names()
    p = get_problem("kmeans")
    assert p.d == 6 and p.theta_star.shape == (6,)
    assert isinstance(get_mechanism("kmeans", "dplloyd"), DPLloyd)
    assert isinstance(get_mechanism("kmeans", "eugkm"), Grid)
    assert not get_mechanism("kmeans", "nonprivate").private
    assert "hardened" not in DPLloyd.option_names() and not DPLloyd.hardenable()


def test_simulation_is_in_the_ball_and_theta_star_is_canonical():
    p = get_problem("kmeans", k=4, d=3, separation=0.9, sd=0.3)
    data = p.simulate(5000, np.random.default_rng(0))
    assert isinstance(data, KMeansData) and data.x.shape == (5000, 3) and data.k == 4
    r = np.sqrt((data.x**2).sum(axis=1))
    assert r.max() <= 1.0 + 1e-12 and (r > 1.0 - 1e-12).any()  # sd 0.3 at radius 0.9: some clipped
    first = p.theta_star.reshape(4, 3)[:, 0]
    assert np.all(np.diff(first) > 0)


@pytest.mark.parametrize("kind", ["nonprivate", "dplloyd", "eugkm"])
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


@pytest.mark.parametrize("kind", ["dplloyd", "eugkm"])
def test_statistic_audit_passes_and_catches_two_eps(kind):
    p = get_problem("kmeans", k=2, d=2)
    m = get_mechanism("kmeans", kind, hardened=False)
    ok = statistic_audit(m, p, 1.0)
    assert ok.passed and ok.bound == pytest.approx(1.0)  # the sensitivities are reached
    assert not statistic_audit(m, p, 1.0, run_epsilon=2.0).passed


#: one record at +1 against one at -1 (k = 1, d = 1): the centre's tail carries the sums' share of eps
PAIR = AdjacentPair(np.zeros((0, 1)), np.array([1.0]), np.array([-1.0]))


@pytest.mark.parametrize("kind, options", [
    ("dplloyd", {"iterations": 1, "count_share": 0.2}),
    ("eugkm", {"cells": 2, "n_init": 1, "iterations": 5}),
])
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

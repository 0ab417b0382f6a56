"""The Bayesian model (kngflow/models/bayes/): data, release, errors, the laws of the posteriors and the audits.

Statistical checks use fixed seeds and tolerances at which a correct implementation fails
less often than once in 10^4 (KS p-values against :data:`P_MIN`, binomial bands at
``z = 3.9``); each has a negative control — a deliberately wrong law — that fails the same
check.  The deterministic checks (the noise-aware mixture against a brute-force grid
posterior) have a numerical tolerance and a wrong-law control.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from scipy.special import betainc

from kngflow.api import get_mechanism, get_problem
from kngflow.audit import AdjacentPair, blackbox_audit, exact_audit, statistic_audit
from kngflow.models.bayes.mechanisms import OPS, Naive, NoiseAware, NonPrivate, laplace_scale, ops_range
from kngflow.models.bayes.posterior import (TRUNCATION, beta_summary, gibbs_noise_aware, mixture_cdf,
                                            noise_aware_summary, noise_aware_weights, tangent_rejection,
                                            truncated_beta)
from kngflow.models.bayes.problem import BernoulliData, bernoulli_data
from kngflow.registry import problem_names

#: a KS p-value below this fails (a false failure is rarer than 1 in 10^4)
P_MIN = 1e-4
#: two-sided normal quantile of 1e-4: binomial bands at +- Z standard errors
Z = 3.9


def _mech(kind, **options):
    return get_mechanism("bayes", kind, hardened=False, **options)


# -- registration, shapes, validation ---------------------------------------------------------
def test_registry_lists_the_model():
    assert "bayes" in problem_names()
    p = get_problem("bayes")
    assert p.d == 3 and p.theta_star.tolist() == [0.3, 0.3, 0.3] and not p.coefficient_summaries
    point = get_problem("bayes", summary="point")
    assert point.d == 1 and point.coefficient_summaries
    assert isinstance(_mech("naive"), Naive) and isinstance(_mech("noise_aware"), NoiseAware)
    assert isinstance(_mech("ops"), OPS) and not get_mechanism("bayes", "nonprivate").private
    assert not OPS.hardenable() and "hardened" not in OPS.option_names()


@pytest.mark.parametrize("kind", ["nonprivate", "naive", "noise_aware", "ops"])
@pytest.mark.parametrize("summary", ["interval", "point"])
def test_release_shape_and_range(kind, summary):
    p = get_problem("bayes", summary=summary, error_measure="abs")
    data = p.simulate(200, np.random.default_rng(1))
    est = _mech(kind).release(data, 1.0, np.random.default_rng(2)).estimate
    assert est.shape == (p.d,) and 0.0 < est[0] < 1.0
    if summary == "interval" and kind != "ops":
        assert 0.0 < est[1] < est[0] < est[2] < 1.0
    if summary == "interval" and kind == "ops":
        assert np.isnan(est[1:]).all()
        assert math.isnan(p.error_measures(est)["miss"])


def test_error_measures():
    p = get_problem("bayes", theta=0.4, error_measure="miss")
    assert p.error(np.array([0.5, 0.3, 0.45])) == 0.0 and p.error(np.array([0.5, 0.41, 0.6])) == 1.0
    m = p.error_measures(np.array([0.5, 0.3, 0.45]))
    assert m["abs"] == pytest.approx(0.1) and m["width"] == pytest.approx(0.15) and m["covered"] == 1.0
    assert p.reference_lines == [(pytest.approx(0.1), "nominal miss rate 1 − 0.9")]
    assert get_problem("bayes", theta=0.4).reference_lines[0][0] == pytest.approx(0.1)  # prior mean 1/2


@pytest.mark.parametrize("options, field", [
    ({"theta": 1.0}, "theta"), ({"a": 0.0}, "a"), ({"b": -1.0}, "b"), ({"level": 1.0}, "level"),
    ({"summary": "mean"}, "summary"), ({"error_measure": "cover"}, "error_measure"),
    ({"summary": "point", "error_measure": "miss"}, "error_measure"),
])
def test_problem_options_are_validated(options, field):
    with pytest.raises(ValueError, match=f"^{field} "):
        get_problem("bayes", **options)


@pytest.mark.parametrize("value", [0.0, 0.5, -0.1, True])
def test_ops_option_is_validated(value):
    with pytest.raises(ValueError, match="^theta_min "):
        OPS(theta_min=value)


def test_user_records_must_be_zero_or_one():
    with pytest.raises(ValueError, match="^x: "):
        bernoulli_data(np.array([0, 1, 2]))
    d = bernoulli_data(np.array([[1.0], [0.0], [1.0]]), a=2.0, b=3.0)
    assert d == BernoulliData(2, 3, 2.0, 3.0, 0.9, True)


def test_nonprivate_is_the_conjugate_posterior():
    data = BernoulliData(7, 20, 2.0, 3.0, 0.9, True)
    est = NonPrivate().release(data, 1.0, np.random.default_rng(0)).estimate
    law = stats.beta(9.0, 16.0)
    assert est.tolist() == pytest.approx([law.mean(), law.ppf(0.05), law.ppf(0.95)], rel=1e-12)


# -- the noisy count --------------------------------------------------------------------------
def test_noisy_count_is_laplace_with_the_derived_scale():
    data = BernoulliData(30, 100)
    rng = np.random.default_rng(3)
    draws = np.array([Naive.noisy_count(data, 0.5, rng) for _ in range(20_000)]) - 30.0
    assert laplace_scale(0.5) == 2.0
    assert stats.kstest(draws, stats.laplace(scale=2.0).cdf).pvalue > P_MIN
    # control: the scale of a count released at 2 eps (half the noise) is rejected
    assert stats.kstest(draws, stats.laplace(scale=1.0).cdf).pvalue < P_MIN


def test_naive_and_noise_aware_use_the_noisy_count_only():
    data = BernoulliData(30, 100)
    s_noisy = Naive.noisy_count(data, 0.5, np.random.default_rng(4))
    naive = _mech("naive").release(data, 0.5, np.random.default_rng(4)).estimate
    sc = min(max(s_noisy, 0.0), 100.0)
    assert naive.tolist() == pytest.approx(list(beta_summary(1 + sc, 1 + 100 - sc, 0.9)), rel=1e-12)
    aware = _mech("noise_aware").release(data, 0.5, np.random.default_rng(4)).estimate
    assert aware.tolist() == pytest.approx(list(noise_aware_summary(s_noisy, 100, 1.0, 1.0, 2.0, 0.9)[:3]))


# -- the noise-aware posterior against a brute-force grid posterior --------------------------
def _grid_posterior(s_noisy, n, a, b, noise_logpdf, level=0.9, points=200_000):
    """Brute force: prior(theta) sum_s Binom(s; n, theta) exp(noise_logpdf(s~ - s)) at the midpoints of
    ``points`` equal cells of [0, 1] (the midpoint rule; a, b >= 1: no singular density), its CDF at
    the cells' edges; (mean, lower, upper) by interpolating the CDF."""
    edges = np.linspace(0.0, 1.0, points + 1)
    th = (edges[1:] + edges[:-1]) / 2
    s = np.arange(n + 1)
    like = stats.binom.pmf(s[:, None], n, th[None, :]) * np.exp(noise_logpdf(s_noisy - s))[:, None]
    dens = stats.beta.pdf(th, a, b) * like.sum(axis=0)
    cdf = np.concatenate([[0.0], np.cumsum(dens)])
    z = cdf[-1]
    q = (1 - level) / 2
    return float(np.dot(th, dens) / z), float(np.interp(q * z, cdf, edges)), float(np.interp((1 - q) * z, cdf, edges))


@pytest.mark.parametrize("s_noisy, n, a, b, eps", [(4.3, 12, 2.0, 3.0, 0.7), (-1.5, 8, 1.0, 1.0, 0.4),
                                                   (17.8, 15, 1.5, 1.0, 1.5)])
@pytest.mark.slow
def test_noise_aware_posterior_matches_the_grid_posterior(s_noisy, n, a, b, eps):
    c = 1.0 / eps
    laplace = lambda v: -np.abs(v) / c  # noqa: E731
    exact = noise_aware_summary(s_noisy, n, a, b, c, 0.9)[:3]
    grid = _grid_posterior(s_noisy, n, a, b, laplace)
    assert exact == pytest.approx(grid, abs=2e-6)
    # controls: a Gaussian of the same variance, and Laplace noise of half the scale, fail the same check
    gauss = _grid_posterior(s_noisy, n, a, b, lambda v: -v**2 / (2 * 2 * c * c))
    half = _grid_posterior(s_noisy, n, a, b, lambda v: -np.abs(v) / (c / 2))
    assert max(abs(x - y) for x, y in zip(exact, gauss)) > 1e-3
    assert max(abs(x - y) for x, y in zip(exact, half)) > 1e-3


def test_noise_aware_truncation_is_bounded_and_harmless():
    n, c = 100_000, 10.0  # eps = 0.1
    s, w, bound = noise_aware_weights(30_123.4, n, 1.0, 1.0, c)
    assert bound <= TRUNCATION and s.size < 2_000 and w.sum() == pytest.approx(1.0)
    # the full sum over every count agrees with the window to the bound's order
    full = np.arange(n + 1, dtype=float)
    from kngflow.models.bayes.posterior import log_beta_binomial
    lw = -np.abs(30_123.4 - full) / c + log_beta_binomial(full, n, 1.0, 1.0)
    wf = np.exp(lw - lw.max())
    wf /= wf.sum()
    mean_full = float(np.dot(wf, 1 + full)) / (n + 2)
    mean_win = float(np.dot(w, 1 + s)) / (n + 2)
    assert abs(mean_full - mean_win) < 1e-12
    # an informative prior far from s~ widens the window until the bound holds
    s2, _, bound2 = noise_aware_weights(5.0, 200, 300.0, 30.0, 0.5)
    assert bound2 <= TRUNCATION and s2.max() > 5.0 + 40 * 0.5


@pytest.mark.parametrize("s_noisy, n, a, b, c", [
    (30.5, 100, 1.0, 1.0, 0.01),          # no count within 40 c of s~: the window grows to 30 and 31
    (-5.0, 100, 1.0, 1.0, 0.01), (105.3, 100, 1.0, 1.0, 0.01),  # far beyond an end
    (3.2, 10, 1.0, 1.0, 1000.0),          # the window is all of [0, n]: nothing neglected
    (2.0, 10**7, 50.0, 1.0, 10.0),        # the prior pulls the count far from s~
])
def test_noise_aware_summary_at_the_edges(s_noisy, n, a, b, c):
    mean, lo, hi, terms, bound = noise_aware_summary(s_noisy, n, a, b, c, 0.9)
    assert 0.0 <= lo < mean < hi <= 1.0 and terms >= 1 and bound <= TRUNCATION
    if c == 0.01 and 0 < s_noisy < n:
        assert terms == 2 and mean == pytest.approx((1 + 30.5) / 102)


def _mixture_cdf(s_noisy, n, a, b, c):
    s, w, _ = noise_aware_weights(s_noisy, n, a, b, c)
    return lambda v: np.array([mixture_cdf(t, a + s, b + n - s, w) for t in np.atleast_1d(v)])


@pytest.mark.slow
def test_gibbs_sampler_matches_the_exact_mixture():
    """Independent chains (20 sweeps from a prior draw each: i.i.d. final states) against the
    exact mixture; controls: the mixture at twice eps (half the noise) and the naive posterior."""
    s_noisy, n, a, b, c = 4.3, 12, 2.0, 3.0, 2.5
    x = gibbs_noise_aware(np.random.default_rng(10), s_noisy, n, a, b, c, 5000, 20, chains=5000)
    assert stats.kstest(x, _mixture_cdf(s_noisy, n, a, b, c)).pvalue > P_MIN
    assert stats.kstest(x, _mixture_cdf(s_noisy, n, a, b, c / 2)).pvalue < P_MIN
    assert stats.kstest(x, stats.beta(a + s_noisy, b + n - s_noisy).cdf).pvalue < P_MIN


def test_noise_aware_gibbs_option_agrees_with_the_exact_summary():
    data = BernoulliData(40, 100)
    exact = _mech("noise_aware").release(data, 0.5, np.random.default_rng(11)).estimate
    rel = _mech("noise_aware", sampler="gibbs").release(data, 0.5, np.random.default_rng(11))
    assert rel.info["sampler"] == "gibbs" and rel.info["steps"] == 4000
    # same stream: the same noisy count; 4000 draws give the mean and the quantiles to about 0.003
    assert rel.estimate == pytest.approx(exact, abs=0.015)
    with pytest.raises(ValueError, match="^sampler "):
        NoiseAware(sampler="mcmc")


@pytest.mark.slow
def test_noise_aware_interval_is_calibrated_under_the_prior():
    """theta drawn from the prior: the exact posterior given what was released covers theta with
    probability exactly ``level``; the naive posterior (noise ignored) is the control that fails."""
    R, n, eps, a, b = 4000, 20, 0.3, 2.0, 2.0
    rng = np.random.default_rng(20180101)
    hits = {"noise_aware": 0, "naive": 0}
    for _ in range(R):
        theta = rng.beta(a, b)
        data = BernoulliData(int(rng.binomial(n, theta)), n, a, b, 0.9, True)
        for kind in hits:
            est = _mech(kind).release(data, eps, rng).estimate
            hits[kind] += int(est[1] <= theta <= est[2])
    band = Z * math.sqrt(0.9 * 0.1 / R)
    assert abs(hits["noise_aware"] / R - 0.9) < band, hits
    assert abs(hits["naive"] / R - 0.9) > band, hits  # control: under-covers (about 0.6)


# -- one posterior sample ---------------------------------------------------------------------
def _truncated_cdf(alpha, beta, lo, hi):
    Fl, Fh = betainc(alpha, beta, lo), betainc(alpha, beta, hi)
    return lambda x: (betainc(alpha, beta, np.clip(x, lo, hi)) - Fl) / (Fh - Fl)


def test_ops_scales():
    m = OPS(theta_min=0.05)
    assert ops_range(0.05) == pytest.approx(math.log(19.0))
    assert m.temperature(1.0) == pytest.approx(1 / (2 * math.log(19.0)))
    assert m.temperature(100.0) == 1.0  # capped: one sample of the posterior itself
    assert m.tempered(BernoulliData(10, 50, 2.0, 1.0), 1.0) == pytest.approx(
        (2.0 + 10 * m.temperature(1.0), 1.0 + 40 * m.temperature(1.0)))


@pytest.mark.slow
def test_ops_sample_has_the_tempered_truncated_posterior_law():
    m, data, eps = OPS(theta_min=0.05), BernoulliData(10, 50), 1.0
    rng = np.random.default_rng(5)
    x = np.array([m.release(data, eps, rng).estimate[0] for _ in range(20_000)])
    alpha, beta = m.tempered(data, eps)
    assert stats.kstest(x, _truncated_cdf(alpha, beta, 0.05, 0.95)).pvalue > P_MIN
    # control: the law at twice the temperature (a release at 2 eps) is rejected
    t = m.temperature(eps)
    assert stats.kstest(x, _truncated_cdf(1 + 2 * t * 10, 1 + 2 * t * 40, 0.05, 0.95)).pvalue < P_MIN
    # control: the untruncated tempered posterior is rejected too
    assert stats.kstest(x, stats.beta(alpha, beta).cdf).pvalue < P_MIN


def test_tangent_rejection_draws_the_truncated_law():
    rng = np.random.default_rng(6)
    x = np.array([tangent_rejection(rng, 3.0, 2.0, 0.05, 0.3, 0.3)[0] for _ in range(20_000)])
    assert stats.kstest(x, _truncated_cdf(3.0, 2.0, 0.05, 0.3)).pvalue > P_MIN
    # control: the proposal alone (the tangent's exponential law, every proposal accepted)
    g = 2 / 0.3 - 1 / 0.7
    prop = lambda v: (np.exp(g * (np.clip(v, 0.05, 0.3) - 0.3)) - np.exp(g * -0.25)) / (1 - np.exp(-0.25 * g))  # noqa
    assert stats.kstest(x, prop).pvalue < P_MIN


def test_truncated_beta_far_tails():
    rng = np.random.default_rng(7)
    for alpha, beta, near in [(20_000.0, 2.0, 0.95), (2.0, 20_000.0, 0.05), (3_000.0, 2.0, 0.95)]:
        x, _ = truncated_beta(rng, alpha, beta, 0.05, 0.95)
        assert 0.05 <= x <= 0.95 and abs(x - near) < 1e-2
    big = get_problem("bayes", theta=0.999).simulate(10**7, np.random.default_rng(8))
    est = _mech("ops").release(big, 1.0, np.random.default_rng(9)).estimate
    assert 0.98 < est[0] <= 0.99  # the mass piles up at 1 - theta_min


# -- privacy audits ---------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["naive", "noise_aware"])
def test_statistic_audit_passes_and_catches_two_eps(kind):
    p = get_problem("bayes", **get_problem("bayes").audit_defaults)
    ok = statistic_audit(_mech(kind), p, 1.0)
    assert ok.passed and ok.bound == pytest.approx(1.0)  # the sensitivity 1 is reached (0 -> 1)
    assert not statistic_audit(_mech(kind), p, 1.0, run_epsilon=2.0).passed


@pytest.mark.parametrize("theta_min", [0.01, 0.05])
def test_exact_density_audit_of_ops_passes_and_catches_two_eps(theta_min):
    p = get_problem("bayes", summary="point")
    m = _mech("ops", theta_min=theta_min)
    ok = exact_audit(m, p, 1.0)
    assert ok.passed and ok.bound > 0.5
    assert not exact_audit(m, p, 1.0, run_epsilon=2.0).passed


#: 63 zeros and a 0 against a 1: the noisy count moves by one; OPS's law piles up at theta_min
PAIR = AdjacentPair(np.zeros((63, 1)), np.array([0.0]), np.array([1.0]))


@pytest.mark.parametrize("kind", ["naive", pytest.param("noise_aware", marks=pytest.mark.slow)])
@pytest.mark.slow
def test_blackbox_audit_passes_and_catches_two_eps(kind):
    """5000 draws a side at eps (bound 0.80 naive, 0.80 noise-aware: pass) and at 2 eps (1.71
    and 1.70: caught; 20 000 draws read 1.85 and 1.84)."""
    p = get_problem("bayes", summary="point")
    assert blackbox_audit(_mech(kind), p, 1.0, pair=PAIR, draws=5000, seed=1).passed
    assert not blackbox_audit(_mech(kind), p, 1.0, run_epsilon=2.0, pair=PAIR, draws=5000, seed=1).passed


@pytest.mark.parametrize("kind", ["ops", pytest.param("noise_aware", marks=pytest.mark.slow)])
@pytest.mark.slow
def test_audit_command_on_the_model(kind, capsys):
    """``kngflow audit KIND --problem bayes`` (the problem's audit view: the point release on
    records {0, 1}) passes at eps and flags the mechanism run at 2 eps.  The closed-form steps
    decide (OPS's exact audit: 0.75 at eps, 1.60 at 2 eps; the noise-aware posterior's
    statistic audit: 1.0 and 2.0); the black-box step, on :data:`PAIR` with 500 fresh draws a
    side, only adds evidence (noise-aware: 0.49 at eps, 1.20 at 2 eps; OPS: 0.0).  The same
    commands with the pair searched are docs/bayes.md's, which ``tests/test_docs.py`` runs."""
    from kngflow.cli import main

    args = ["audit", kind, "--problem", "bayes", "--option", "hardened=false", "--draws", "500", "--no-progress",
            "--pair", "63*(0) + (0) -> (1)"]
    assert main(args) == 0
    assert main([*args, "--run-epsilon", "2"]) == 1
    out = capsys.readouterr().out
    head = "exact audit of OPS" if kind == "ops" else "statistic audit (K-norm noise, closed form) of NoiseAware"
    assert head in out


# -- the generic claim type the studies use ---------------------------------------------------
def test_value_claims_decide_both_ways():
    """``type = "value"`` (kngflow.analysis.claims): a cell's statistic against an absolute band.
    The synthetic non-private error at n = 100 is ||N(0, I_3)|| / 10, of mean 0.1596."""
    from synthetic import SyntheticMechanism, synthetic_dataset

    from kngflow.analysis.claims import evaluate_claims, parse_claims

    ds = synthetic_dataset([SyntheticMechanism("np", "nonprivate")], n=[100, 1000], epsilon=[1.0],
                           replicates=400, d=3, seed=11)

    def verdict(**band):
        text = ('[[claims]]\nid = "v"\ntype = "value"\nsource = "t"\nstatement = "s"\n'
                'statistic = "mean_error"\nmechanism = "np"\nn = 100\n'
                + "".join(f"{k} = {v}\n" for k, v in band.items()))
        (v,) = evaluate_claims(ds, parse_claims(text)[1])
        return v

    ok = verdict(min=0.14, max=0.18)
    assert ok.verdict == "agrees" and ok.numbers[0]["value"] == pytest.approx(0.1596, abs=0.01)
    assert "value claimed in [0.14, 0.18]" in ok.summary
    assert verdict(min=0.2).verdict == "disagrees"  # control: the band the statistic is not in
    assert verdict(max=0.1).verdict == "disagrees"
    with pytest.raises(Exception, match="needs min, max or both"):
        parse_claims('[[claims]]\nid = "v"\ntype = "value"\nsource = "t"\nstatement = "s"\n'
                     'statistic = "mean_error"\nmechanism = "np"\n')

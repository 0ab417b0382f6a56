"""Exact audits of the gradient-method baselines (noisy GD, DP-SGD): closed-form step
statistics, Gaussian hockey-stick checks, the accountant re-check and their negative
controls (the same mechanism calibrated for 2ε).  All checks are deterministic."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from testkit import kngflow_cli
from kngflow.audit import (accountant_audit, accountant_audit_applies, gaussian_delta, gaussian_epsilon,
                           statistic_audit, statistic_audit_applies)
from kngflow.api import get_mechanism
from kngflow.models.logistic import erm
from kngflow.noise import knorm_noise
from kngflow.api import get_problem

BETA = "beta=[0.5,-1.0]"


@pytest.fixture(scope="module")
def problem():
    return get_problem("logistic", beta=[0.5, -1.0])


def _audits(mech, problem, run):
    """(exact statistic audit, accountant audit or None) at declared ε = 1, run at ``run``."""
    res = statistic_audit(mech, problem, 1.0, run_epsilon=run)
    acc = accountant_audit(mech, problem, 1.0, run_epsilon=run) if accountant_audit_applies(mech) else None
    return res, acc


# ------------------------------------------------------------------ Gaussian hockey stick

@pytest.mark.parametrize("mu", [0.05, 0.3, 1.0, 3.0])
def test_gaussian_delta_is_balle_wang_and_epsilon_inverts_it(mu):
    """δ(ε) = Φ(-ε/μ + μ/2) - e^ε Φ(-ε/μ - μ/2); ε(δ) its inverse to 1e-10."""
    for eps in (0.0, 0.5, 2.0):
        want = stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)
        assert gaussian_delta(eps, mu) == pytest.approx(want, rel=1e-9, abs=1e-300)
    for delta in (1e-5, 1e-3):
        e = gaussian_epsilon(mu, delta)
        if e > 0:
            assert gaussian_delta(e, mu) == pytest.approx(delta, rel=1e-8)
            assert gaussian_delta(e * (1 - 1e-6), mu) > delta
        else:
            assert gaussian_delta(0.0, mu) <= delta
    assert gaussian_epsilon(0.0, 1e-5) == 0.0 and gaussian_epsilon(mu, 0.0) == math.inf
    assert gaussian_delta(1.0, math.inf) == 1.0


def test_gaussian_delta_against_dp_accounting_pld():
    """The closed form agrees with dp_accounting's PLD accountant of one Gaussian mechanism."""
    import dp_accounting as dpa
    from dp_accounting.pld import PLDAccountant

    for z in (1.0, 4.0):  # mu = 1/z
        acc = PLDAccountant(value_discretization_interval=1e-4)
        acc.compose(dpa.GaussianDpEvent(z))
        for eps in (0.5, 1.0):
            assert gaussian_delta(eps, 1.0 / z) == pytest.approx(acc.get_delta(eps), rel=1e-3, abs=1e-9)


# ------------------------------------------------------------------ the statistics are the steps'

def test_noisy_gd_statistic_is_the_first_step_gradient():
    """One step from theta_0 = 0 without projection: theta_1 = -eta (grad J(0) + Z); the
    statistic's first row (theta_0) is grad J(0), and the same rng reproduces Z."""
    data = get_problem("logistic", beta=[0.5, -1.0]).simulate(50, np.random.default_rng(3))
    n, d, eps = 50, 2, 0.7
    for noise in ("gamma", "gaussian"):
        mech = get_mechanism("logistic", "noisy_gd", hardened=False, noise=noise, iterations=1, radius=1e9)
        theta1 = mech.release(data, eps, np.random.default_rng(11)).estimate
        rng = np.random.default_rng(11)
        level = mech.noise_level(n, d, eps)
        Z = knorm_noise(rng, "l2", d, level, size=1)[0] if noise == "gamma" else rng.standard_normal((1, d))[0] * level
        g = -theta1 / mech.eta(d) - Z
        assert np.allclose(mech.statistic(data)[0], g, atol=1e-12)
        assert np.allclose(g, data.X.T @ (0.5 - data.y) / n, atol=1e-12)
        norm, scale = mech.statistic_noise(data, eps)
        assert scale == level and (norm == "gaussian") == (noise == "gaussian")
    pts = mech.audit_iterates(d)
    assert np.array_equal(pts[0], np.zeros(d)) and np.allclose(np.linalg.norm(pts[1:], axis=1), 1e9)


def test_dpsgd_statistic_is_the_clipped_sum():
    """q = 1, one step from 0: theta_1 = -lr (S(0) + N(0, (zC)^2 I)) / n; the statistic at
    every audited iterate is the clipped sum the release computes (clip 0.5 < ||x|| binds)."""
    data = get_problem("logistic", beta=[0.5, -1.0]).simulate(40, np.random.default_rng(4))
    n, d, eps = 40, 2, 1.0
    mech = get_mechanism("logistic", "dpsgd", hardened=False, sampling_rate=1.0, epochs=1.0, clip=0.5)
    assert mech.schedule(n) == (1.0, 1) and mech.statistic_steps(n) == 1
    theta1 = mech.release(data, eps, np.random.default_rng(5)).estimate
    z = mech.noise_multiplier(n, eps)
    N = np.random.default_rng(5).standard_normal(d) * z * 0.5
    lr = 1.0 / (d / 4 + mech.reg)
    S = mech.statistic(data)
    assert np.allclose(S[0], -theta1 * n / lr - N, atol=1e-10)
    for k, theta in enumerate(mech.audit_iterates(d)):
        G = data.X * (1 / (1 + np.exp(-data.X @ theta)) - data.y)[:, None]
        G *= np.minimum(1.0, 0.5 / np.maximum(np.linalg.norm(G, axis=1), 1e-300))[:, None]
        assert np.allclose(S[k], G.sum(0), atol=1e-10)
    assert mech.statistic_noise(data, eps) == ("gaussian", z * 0.5)


# ------------------------------------------------------------------ pass at ε, flagged at 2ε

def test_noisy_gd_gamma_one_step_exact_audit_catches_2_epsilon(problem):
    """Gamma noise, T = 1, m = 2: the step's loss is ||grad J_D - grad J_D'|| / s with
    s = 2L/(n eps); the worst pair moves the gradient by 2 sqrt(m - 1)/n = 2/n at an
    iterate on C's boundary (two corners differing in one coordinate), so the loss is
    eps / sqrt(2) = 0.7071 (pass) and 1.4142 at 2 eps (caught).  At theta_0 = 0 alone the
    gradient moves by at most L/n: 0.5 and 1.0."""
    mech = get_mechanism("logistic", "noisy_gd", hardened=False, noise="gamma", iterations=1)
    ok, acc = _audits(mech, problem, 1.0)
    assert acc is None and ok.kind == "statistic" and ok.details["law"] == "knorm"
    assert ok.passed and ok.bound == pytest.approx(1 / math.sqrt(2), rel=1e-4), ok.summary()
    assert ok.details["first_point_step"] == pytest.approx(0.5, rel=1e-12)
    assert "post-processing" in ok.summary() and "public iterate" in ok.summary()
    bad, _ = _audits(mech, problem, 2.0)
    assert not bad.passed and bad.bound == pytest.approx(math.sqrt(2), rel=1e-4), bad.summary()


def test_noisy_gd_gamma_many_steps_audits_the_step_at_eps_over_T(problem):
    """T = 20: each step is audited at its budget eps/T and composed (basic composition)."""
    mech = get_mechanism("logistic", "noisy_gd", hardened=False, noise="gamma", iterations=20)
    ok = statistic_audit(mech, problem, 1.0)
    assert ok.passed and ok.details["steps"] == 20
    assert ok.details["step_loss"] == pytest.approx(1 / math.sqrt(2) / 20, rel=1e-4)
    assert "basic composition" in ok.summary()
    assert not statistic_audit(mech, problem, 1.0, run_epsilon=2.0).passed


def test_noisy_gd_gaussian_one_step_exact_audit_catches_2_epsilon(problem):
    """Gaussian noise, T = 1, delta = 1e-5 (accountant calibration): the worst pair's
    mu = 0.175, exact epsilon at delta 0.626 (pass, delta(1) = 2.5e-10); calibrated for 2 eps:
    mu = 0.329, exact epsilon 1.253, delta(1) = 1.8e-4 > 1e-5 (caught).  The accountant
    re-check: 1.000 at eps, 2.000 at 2 eps (caught)."""
    mech = get_mechanism("logistic", "noisy_gd", hardened=False, iterations=1)
    ok, acc = _audits(mech, problem, 1.0)
    assert ok.passed and ok.details["law"] == "gaussian" and 0.55 < ok.bound < 0.7, ok.summary()
    assert ok.details["delta_at_epsilon"] <= 1e-5 and "at delta 1e-05" in ok.summary()
    assert acc.passed and acc.bound <= 1.0 + 1e-8, acc.summary()
    bad, bad_acc = _audits(mech, problem, 2.0)
    assert not bad.passed and bad.bound > 1.2 and bad.details["delta_at_epsilon"] > 1e-4, bad.summary()
    assert not bad_acc.passed and bad_acc.bound > 1.9, bad_acc.summary()


def test_noisy_gd_gaussian_many_steps_and_printed_calibration(problem):
    """T = 50: Gaussian steps compose exactly (mu sqrt(T)); the same exact epsilon as T = 1.
    The chapter's printed sigma is flagged by both checks (exact 1.11, accountant 1.77 at T = 1)."""
    mech = get_mechanism("logistic", "noisy_gd", hardened=False, iterations=50)
    ok, acc = _audits(mech, problem, 1.0)
    assert ok.passed and acc.passed and ok.details["steps"] == 50
    assert ok.details["mu"] == pytest.approx(math.sqrt(50) * ok.details["step_loss"])
    assert not statistic_audit(mech, problem, 1.0, run_epsilon=2.0).passed
    printed = get_mechanism("logistic", "noisy_gd", hardened=False, iterations=1, calibration="printed")
    res, acc = _audits(printed, problem, 1.0)
    assert not res.passed and res.bound > 1.05 and not acc.passed and acc.bound > 1.5


@pytest.mark.parametrize("opts", [{"sampling_rate": 1.0, "epochs": 1.0}, {}])
def test_dpsgd_full_batch_exact_audit_catches_2_epsilon(problem, opts):
    """q = 1 (sampling_rate 1, or the default batch 256 >= n on the audit's small data sets,
    T = epochs): the sum of clipped gradients moves by 2 sqrt(m - 1) = 2 at worst (C = sqrt 2),
    exact epsilon at delta 0.621 (pass) and 1.244 at 2 eps (caught), the same for T = 5
    (exact Gaussian composition); the accountant re-check (group privacy from add/remove)
    1.000 and 1.964 (caught)."""
    mech = get_mechanism("logistic", "dpsgd", hardened=False, **opts)
    assert statistic_audit_applies(mech, problem)
    ok, acc = _audits(mech, problem, 1.0)
    assert ok.passed and 0.55 < ok.bound < 0.7 and ok.details["delta_at_epsilon"] <= 1e-5, ok.summary()
    assert acc.passed and acc.bound <= 1.0 + 1e-8, acc.summary()
    bad, bad_acc = _audits(mech, problem, 2.0)
    assert not bad.passed and bad.bound > 1.2 and bad.details["delta_at_epsilon"] > 1e-4, bad.summary()
    assert not bad_acc.passed and bad_acc.bound > 1.9, bad_acc.summary()


@pytest.mark.slow
def test_dpsgd_subsampled_is_left_to_the_accountant(problem):
    """q < 1: no closed form (a subsampled mixture); the accountant audit decides, and
    catches the 2 eps calibration."""
    mech = get_mechanism("logistic", "dpsgd", hardened=False, sampling_rate=0.5, epochs=2.0)
    assert not statistic_audit_applies(mech, problem) and accountant_audit_applies(mech)
    with pytest.raises(ValueError, match="no audited pair"):
        statistic_audit(mech, problem, 1.0)
    ok = accountant_audit(mech, problem, 1.0)
    assert ok.passed and 0.9 < ok.bound <= 1.0 + 1e-8, ok.summary()
    bad = accountant_audit(mech, problem, 1.0, run_epsilon=2.0)
    assert not bad.passed and bad.bound > 1.9, bad.summary()


def test_gamma_noise_has_no_accountant_audit():
    assert not accountant_audit_applies(get_mechanism("logistic", "noisy_gd", hardened=False, noise="gamma"))


# ------------------------------------------------------------------ the command

@pytest.mark.parametrize("mechanism, options, flagged", [
    ("noisy_gd", ["--option", "noise=gamma", "--option", "iterations=1"], "statistic audit"),
    ("dpsgd", ["--option", "sampling_rate=1", "--option", "epochs=1"], "statistic, accountant audit"),
])
@pytest.mark.slow
def test_audit_command_runs_the_exact_checks(mechanism, options, flagged):
    args = ["audit", mechanism, "--problem", "logistic", "--problem-option", BETA, *options,
            "--draws", "300", "--no-progress"]
    out = kngflow_cli(*args)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "statistic audit (" in out.stdout and "noise, closed form) of" in out.stdout and "public iterate" in out.stdout
    assert out.stdout.strip().endswith("verdict: PASS (declared epsilon=1)")
    out = kngflow_cli(*args, "--run-epsilon", "2")
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"verdict: FLAGGED by {flagged}" in out.stdout

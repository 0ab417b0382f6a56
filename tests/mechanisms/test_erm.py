"""Private-ERM baselines for logistic regression (kngflow.mechanisms.erm)."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from scipy import stats
from scipy.special import expit

import dp_accounting as dpa
from dp_accounting.rdp import RdpAccountant

from kngflow.audit import blackbox_audit
from kngflow.api import MECHANISMS, allowed_options, get_mechanism
from kngflow.models.logistic import erm
from kngflow.api import get_problem
from kngflow.models.logistic.problem import LogisticData, logistic_gradient

P = 1e-5
KINDS = ("output", "objective_chaudhuri", "noisy_gd", "dpsgd")


def _data(n, m=2, seed=0):
    beta = [0.5, -1.0] if m == 2 else None
    return get_problem("logistic", beta=beta).simulate(n, np.random.default_rng(seed))


@pytest.fixture(scope="module")
def big():
    data = get_problem("logistic").simulate(10_000, np.random.default_rng(7))
    return data, erm.regularised_minimiser(data, erm.DEFAULT_REG)[0]


def test_registered_and_options():
    for kind in KINDS:
        assert kind in MECHANISMS["logistic"]
    assert set(allowed_options("logistic", "noisy_gd")) >= {"reg", "iterations", "radius", "noise", "delta", "calibration"}
    assert set(allowed_options("logistic", "dpsgd")) >= {"reg", "batch_size", "epochs", "clip", "lr", "delta"}
    # δ > 0 mechanisms expose delta (attribute and options); pure ε-DP ones do not
    for kind, opts in [("output", {}), ("objective_chaudhuri", {}), ("noisy_gd", {"noise": "gamma"})]:
        mech = get_mechanism("logistic", kind, hardened=False, **opts)
        assert not hasattr(mech, "delta") and "delta" not in mech.options()
    for kind, opts in [("noisy_gd", {}), ("dpsgd", {"delta": 1e-6})]:
        mech = get_mechanism("logistic", kind, hardened=False, **opts)
        assert isinstance(mech.delta, float) and mech.options()["delta"] == mech.delta
    assert "reg=0.01" in repr(get_mechanism("logistic", "output", hardened=False))


@pytest.mark.parametrize("kind, opts, name", [
    ("output", {"reg": -1.0}, "reg"),
    ("output", {"tol": 0.5}, "tol"),
    ("objective_chaudhuri", {"reg": 0}, "reg"),
    ("noisy_gd", {"iterations": 0}, "iterations"),
    ("noisy_gd", {"radius": -2.0}, "radius"),
    ("noisy_gd", {"step_size": 0.0}, "step_size"),
    ("noisy_gd", {"noise": "laplace"}, "noise"),
    ("noisy_gd", {"delta": 1.5}, "delta"),
    ("noisy_gd", {"calibration": "guess"}, "calibration"),
    ("noisy_gd", {"noise": "gamma", "delta": 1e-5}, "delta"),
    ("noisy_gd", {"noise": "gamma", "calibration": "printed"}, "calibration"),
    ("dpsgd", {"batch_size": 0}, "batch_size"),
    ("dpsgd", {"epochs": -1.0}, "epochs"),
    ("dpsgd", {"clip": 0.0}, "clip"),
    ("dpsgd", {"lr": float("nan")}, "lr"),
    ("dpsgd", {"delta": 0.0}, "delta"),
    ("dpsgd", {"max_steps": 1.5}, "max_steps"),
    ("dpsgd", {"sampling_rate": 0.0}, "sampling_rate"),
    ("dpsgd", {"sampling_rate": 1.5}, "sampling_rate"),
])
def test_bad_options_rejected(kind, opts, name):
    with pytest.raises((ValueError, TypeError), match=name):
        get_mechanism("logistic", kind, hardened=False, **opts)


def test_loss_constants():
    """|l'(t)| < 1 and 0 < l''(t) <= 1/4 (max at t = 0) for both labels: the data-independent
    conditions of CMS Theorem 9 and the constants L, smoothness used by every mechanism."""
    t = np.linspace(-30, 30, 200_001)
    s = expit(t)
    for y in (0.0, 1.0):
        assert np.max(np.abs(s - y)) <= erm.LOSS_LIPSCHITZ  # sup, approached as |t| -> inf
    curv = s * (1 - s)
    assert np.all(curv > 0) and np.max(curv) == pytest.approx(erm.LOSS_CURVATURE, abs=1e-12)
    # per-record gradient norm bound L = sqrt(m) over the corners of [-1, 1]^m
    m = 3
    X = np.array(np.meshgrid(*[[-1.0, 1.0]] * m)).reshape(m, -1).T
    g = np.linalg.norm(X, axis=1)[:, None] * np.abs(expit(X @ np.array([30.0, 0, 0]))[:, None])
    assert g.max() <= erm.lipschitz(m) + 1e-12


def test_output_noise_follows_gamma_law():
    data = _data(40)
    mech = get_mechanism("logistic", "output", hardened=False, reg=0.05)
    theta, _, ok = mech.minimiser(data)
    assert ok
    rng = np.random.default_rng(1)
    eps = 1.0
    Z = np.array([mech.release(data, eps, rng).estimate for _ in range(3000)]) - theta
    r = np.linalg.norm(Z, axis=1)
    scale = 2 * math.sqrt(2) * (1 + mech.tol) / (40 * 0.05 * eps)
    assert mech.noise_scale(40, 2, eps) == pytest.approx(scale, rel=1e-12)
    assert stats.kstest(r, stats.gamma(2, scale=scale).cdf).pvalue > P
    assert stats.kstest(r, stats.gamma(2, scale=2 * scale).cdf).pvalue < P  # control
    # uniform direction: angles uniform on the circle
    ang = (np.arctan2(Z[:, 1], Z[:, 0]) + np.pi) / (2 * np.pi)
    assert stats.kstest(ang, "uniform").pvalue > P


def _adjacent_pairs(rng, count, m):
    """Small data sets from {-1, 0, 1}^m records; one record replaced by a corner record."""
    fill = np.array(np.meshgrid(*[[-1.0, 0.0, 1.0]] * m)).reshape(m, -1).T
    corners = fill[np.all(np.abs(fill) == 1, axis=1)]
    for _ in range(count):
        n = int(rng.integers(1, 12))
        X = fill[rng.integers(len(fill), size=n)]
        y = rng.integers(0, 2, size=n).astype(float)
        X2, y2 = X.copy(), y.copy()
        X2[-1], y2[-1] = corners[rng.integers(len(corners))], float(rng.integers(0, 2))
        yield LogisticData(np.ascontiguousarray(X), y), LogisticData(np.ascontiguousarray(X2), y2)


def _crafted_pairs():
    """k records (0, 1; y = 1) push theta_2 up; the changed record (1, 1; 0) -> (1, -1; 1)
    is misfit on both sides, and the data put no curvature on theta_1 besides it."""
    for k in (10, 20, 40):
        rest = np.tile([0.0, 1.0], (k, 1))
        yield (LogisticData(np.vstack([rest, [1.0, 1.0]]), np.append(np.ones(k), 0.0)),
               LogisticData(np.vstack([rest, [1.0, -1.0]]), np.append(np.ones(k), 1.0)))


def test_output_sensitivity_bound_holds_and_is_nearly_attained():
    rng = np.random.default_rng(3)
    m = 2
    worst = 0.0
    for reg in (0.003, 0.03, 0.3):
        for D, D2 in [*_adjacent_pairs(rng, 300, m), *_crafted_pairs()]:
            a = erm.regularised_minimiser(D, reg)
            b = erm.regularised_minimiser(D2, reg)
            assert a[2] and b[2]
            ratio = np.linalg.norm(a[0] - b[0]) / (2 * math.sqrt(m) / (D.n * reg))
            assert ratio <= 1 + 1e-6
            worst = max(worst, ratio)
    assert worst >= 0.5, worst


def test_chaudhuri_constants_as_in_paper():
    c = 0.25
    # regime eps' > 0: n = 10^4, reg = 0.01, m = 7 (reg~ = reg/m)
    n, reg, m, eps = 10_000, 0.01, 7, 1.0
    lam = reg / m
    eps_p, Delta = get_mechanism("logistic", "objective_chaudhuri", hardened=False, reg=reg).constants(n, m, eps)
    assert eps_p == pytest.approx(eps - math.log(1 + 2 * c / (n * lam) + c ** 2 / (n ** 2 * lam ** 2)), rel=1e-12)
    assert eps_p > 0 and Delta == 0.0
    # regime eps' <= 0: n = 100, eps = 1/64
    n, eps = 100, 1 / 64
    assert eps - math.log(1 + 2 * c / (n * lam) + c ** 2 / (n ** 2 * lam ** 2)) <= 0
    eps_p, Delta = erm.chaudhuri_constants(eps, n, lam)
    assert eps_p == eps / 2
    assert Delta == pytest.approx(c / (n * (math.exp(eps / 4) - 1)) - lam, rel=1e-10)
    assert Delta > lam
    tot = lam + Delta  # the total ridge makes the log term exactly eps/2
    assert math.log(1 + 2 * c / (n * tot) + c ** 2 / (n * tot) ** 2) == pytest.approx(eps / 2, rel=1e-9)


@pytest.mark.parametrize("n, eps", [(30, 1.0), (30, 0.01)])  # eps' > 0 and eps' <= 0
def test_objective_chaudhuri_noise_law(n, eps):
    """The noise is recoverable from the release: V = -(grad l_n(theta) + gamma theta);
    ||V|| ~ Gamma(m, 2 sqrt(m) / eps')."""
    data = _data(n, seed=4)
    mech = get_mechanism("logistic", "objective_chaudhuri", hardened=False, reg=0.05)
    m = 2
    eps_p, Delta = mech.constants(n, m, eps)
    assert (Delta > 0) == (eps < 0.5)
    gamma = n * (0.05 + m * Delta)
    rng = np.random.default_rng(5)
    g = np.empty(m)
    r = []
    for _ in range(2000):
        th = mech.release(data, eps, rng).estimate
        logistic_gradient(th, (data.X, data.y), g)
        r.append(np.linalg.norm(g + gamma * th))
    scale = 2 * math.sqrt(m) / eps_p
    assert stats.kstest(r, stats.gamma(m, scale=scale).cdf).pvalue > P
    assert stats.kstest(r, stats.gamma(m, scale=1.5 * scale).cdf).pvalue < P  # control


def _rdp_gauss_eps(z, T, delta):
    acc = RdpAccountant(list(np.concatenate([np.linspace(1.05, 20, 300), np.geomspace(20.5, 1e12, 500)])))
    acc.compose(dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(z), T))
    return acc.get_epsilon(delta)


@pytest.mark.parametrize("eps", [1 / 64, 1.0])
def test_noisy_gd_accountant_calibration(eps):
    n, m, T, delta = 1000, 2, 50, 1e-5
    mech = get_mechanism("logistic", "noisy_gd", hardened=False, iterations=T)
    sigma = mech.noise_level(n, m, eps)
    z = sigma / (2 * math.sqrt(m) / n)  # multiplier w.r.t. the replace-one sensitivity 2L/n
    got = _rdp_gauss_eps(z, T, delta)
    assert 0.95 * eps <= got <= eps * (1 + 1e-9)
    assert _rdp_gauss_eps(z / 2, T, delta) > eps  # control
    assert erm.gaussian_gd_noise_multiplier.cache_info().currsize >= 1
    t = time.perf_counter()
    mech.noise_level(n, m, eps)  # cached
    assert time.perf_counter() - t < 0.01


def _exact_gauss_delta(eps, s):
    """Balle & Wang's exact δ(ε) of the Gaussian mechanism with noise multiplier s."""
    return stats.norm.cdf(1 / (2 * s) - eps * s) - math.exp(eps) * stats.norm.cdf(-1 / (2 * s) - eps * s)


def test_noisy_gd_printed_sigma_is_not_valid_under_replacement():
    """The chapter's sigma^2 = 2 L^2 T log(1/δ)/(n ε)^2: over (ε, δ) under the chapter's
    one-individual-changed adjacency (sensitivity 2L/n), within it for add/remove (L/n).
    T Gaussian steps with multiplier z are exactly one with multiplier z / sqrt(T)."""
    n, m, T, delta, eps = 1000, 2, 100, 1e-5, 1.0
    L = math.sqrt(m)
    sigma = get_mechanism("logistic", "noisy_gd", hardened=False, iterations=T, calibration="printed").noise_level(n, m, eps)
    assert sigma == pytest.approx(math.sqrt(2 * L * L * T * math.log(1 / delta)) / (n * eps))
    assert _exact_gauss_delta(eps, sigma / (2 * L / n) / math.sqrt(T)) > 100 * delta
    assert _exact_gauss_delta(eps, sigma / (L / n) / math.sqrt(T)) <= delta
    assert _rdp_gauss_eps(sigma / (L / n), T, delta) <= eps
    # the accountant-calibrated sigma is valid by the exact curve too
    acc = get_mechanism("logistic", "noisy_gd", hardened=False, iterations=T).noise_level(n, m, eps)
    assert _exact_gauss_delta(eps, acc / (2 * L / n) / math.sqrt(T)) <= delta


def test_noisy_gd_gamma_per_step_scale(monkeypatch):
    n, m, eps = 200, 2, 0.5
    data = _data(n, seed=8)
    # the per-step scale 2 L T / (n eps), as passed to the sampler
    seen = []
    import kngflow.mechanisms.erm.noisy_gd as shared  # noisy GD is written once there

    real = shared.knorm_noise
    monkeypatch.setattr(shared, "knorm_noise", lambda rng, norm, d, scale, size=None: seen.append((norm, scale, size))
                        or real(rng, norm, d, scale, size=size))
    get_mechanism("logistic", "noisy_gd", hardened=False, noise="gamma", iterations=7).release(data, eps, np.random.default_rng(0))
    assert seen == [("l2", pytest.approx(2 * math.sqrt(m) * 7 / (n * eps), rel=1e-12), 7)]
    monkeypatch.setattr(shared, "knorm_noise", real)
    # one step: Z_0 = -theta_1 / eta - grad J(0) is recoverable; ||Z_0|| ~ Gamma(m, 2L/(n eps))
    mech = get_mechanism("logistic", "noisy_gd", hardened=False, noise="gamma", iterations=1, radius=1e9)
    eta = mech.eta(m)
    g0 = data.X.T @ (0.5 - data.y) / n
    rng = np.random.default_rng(9)
    r = [np.linalg.norm(-mech.release(data, eps, rng).estimate / eta - g0) for _ in range(3000)]
    scale = 2 * math.sqrt(m) / (n * eps)
    assert stats.kstest(r, stats.gamma(m, scale=scale).cdf).pvalue > P
    assert stats.kstest(r, stats.gamma(m, scale=2 * scale).cdf).pvalue < P  # control


def test_dpsgd_accountant_calibration():
    n, eps, delta = 2000, 1.0, 1e-5
    mech = get_mechanism("logistic", "dpsgd", hardened=False, batch_size=200, epochs=3.0, delta=delta)
    q, T = mech.schedule(n)
    assert q == 0.1 and T == 30
    z = mech.noise_multiplier(n, eps)
    ea, da = eps / 2, delta / (1 + math.exp(eps / 2))
    assert mech.accountant_target(eps) == (ea, da)

    def rdp(z):
        acc = RdpAccountant(list(range(2, 65)) + [128, 256, 512, 1024, 2048, 4096, 8192])
        acc.compose(dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(z)), T))
        return acc.get_epsilon(da)

    # group privacy: (2 ε_a, (1 + e^ε_a) δ_a) = (ε, δ) under replacement
    assert 0.95 * eps <= 2 * rdp(z) <= eps * (1 + 1e-6)
    assert 2 * rdp(z / 2) > eps  # control
    assert (1 + math.exp(ea)) * da == pytest.approx(delta)


def test_utility_at_huge_epsilon(big):
    data, theta = big
    opts = {"output": {}, "objective_chaudhuri": {}, "noisy_gd": {"iterations": 1000}, "dpsgd": {"epochs": 20.0}}
    tols = {"output": 1e-6, "objective_chaudhuri": 1e-4, "noisy_gd": 1e-3, "dpsgd": 0.15}
    for kind in KINDS:
        est = get_mechanism("logistic", kind, hardened=False, **opts[kind]).release(data, 1e6, np.random.default_rng(1)).estimate
        assert np.linalg.norm(est - theta) < tols[kind], kind


def test_utility_improves_with_epsilon(big):
    data, theta = big
    for kind in KINDS:
        mech = get_mechanism("logistic", kind, hardened=False)
        err = {eps: np.median([np.linalg.norm(mech.release(data, eps, np.random.default_rng(s)).estimate - theta)
                               for s in range(5)]) for eps in (1 / 64, 1.0)}
        assert err[1.0] < err[1 / 64], (kind, err)


def test_dpsgd_release_is_fast(big):
    data, _ = big
    mech = get_mechanism("logistic", "dpsgd", hardened=False)
    mech.release(data, 1.0, np.random.default_rng(0))  # calibration (cached)
    t = time.perf_counter()
    mech.release(data, 1.0, np.random.default_rng(1))
    assert time.perf_counter() - t < 1.0


def _degenerate():
    m = 3
    ones = np.ones((20, m))
    yield LogisticData(ones.copy(), np.ones(20))  # all records equal
    X = np.random.default_rng(0).uniform(-1, 1, (30, m))
    yield LogisticData(X, (X[:, 0] > 0).astype(float))  # perfectly separated
    yield LogisticData(np.ones((1, m)), np.zeros(1))  # n = 1


@pytest.mark.parametrize("kind, opts", [("output", {}), ("objective_chaudhuri", {}), ("noisy_gd", {}),
                                        ("noisy_gd", {"noise": "gamma"}), ("noisy_gd", {"calibration": "printed"}),
                                        ("dpsgd", {"epochs": 2.0})])
def test_degenerate_data_and_extreme_epsilon_release(kind, opts):
    mech = get_mechanism("logistic", kind, hardened=False, **opts)
    rng = np.random.default_rng(2)
    for data in _degenerate():
        for eps in (1e-6, 1.0, 1e6):
            rel = mech.release(data, eps, rng)
            assert rel.estimate.shape == (data.d,) and np.all(np.isfinite(rel.estimate)), (data.n, eps)
            assert set(rel.info) == {"sampler", "acceptance", "steps"}


@pytest.mark.slow
def test_blackbox_audit_output_perturbation():
    problem = get_problem("logistic", beta=[0.5, -1.0])
    mech = get_mechanism("logistic", "output", hardened=False, reg=0.1)
    kw = dict(draws=4000, pilot=800, candidates=6, score_draws=150, seed=0)
    res = blackbox_audit(mech, problem, 1.0, **kw)
    assert res.passed, res
    control = blackbox_audit(mech, problem, 1.0, run_epsilon=8.0, **kw)  # noise 8x too small
    assert not control.passed and control.bound > 1.0, control


@pytest.mark.slow
def test_output_perturbation_statistic_audit_catches_2_epsilon():
    """Closed form (gamma noise around the computed minimiser), m = 2: the default pairs
    (64 copies of one record as the rest) reach a loss of 0.60 at eps = 1 (pass) and 1.21
    at 2 eps (caught); the bound 2L/(n reg) is approached, never exceeded.  The minimisers
    do not depend on eps and the noise scale is 2L(1 + tol)/(n reg eps), so at 2 eps every
    pair's loss doubles and the worst pair stays the worst: the control audits that pair
    (a search of its own would compute the same minimisers again and read the same 1.21)."""
    from kngflow.audit.exact import statistic_audit

    problem = get_problem("logistic", beta=[0.5, -1.0])
    mech = get_mechanism("logistic", "output", hardened=False)
    ok = statistic_audit(mech, problem, 1.0)
    assert ok.passed and ok.bound > 0.5, ok.summary()
    bad = statistic_audit(mech, problem, 1.0, run_epsilon=2.0, pairs=[ok.pair])
    assert not bad.passed and bad.bound == pytest.approx(2 * ok.bound, rel=1e-12), bad.summary()


def test_poisson_sample_keeps_each_index_with_probability_q():
    """Counts per index over 4000 samples of range(50) at q = 0.1: binomial(4000, 0.1)
    each (chi-square over indices, p > 1e-5); control: q = 0.12 rejected."""
    rng = np.random.default_rng(5)
    counts = np.zeros(50)
    for _ in range(4000):
        idx = erm.poisson_sample(rng, 50, 0.1)
        assert np.all(np.diff(idx) > 0) and (idx.size == 0 or idx[-1] < 50)
        counts[idx] += 1

    def pvalue(q):
        chi2 = float(np.sum((counts - 4000 * q) ** 2 / (4000 * q * (1 - q))))
        return stats.chi2.sf(chi2, 50)

    assert pvalue(0.1) > 1e-5
    assert pvalue(0.12) < 1e-5
    assert np.array_equal(erm.poisson_sample(rng, 7, 1.0), np.arange(7))


def test_dpsgd_sampling_rate_sets_q():
    m = get_mechanism("logistic", "dpsgd", hardened=False, sampling_rate=0.1, epochs=2.0)
    assert m.schedule(1000) == (0.1, 20) and m.options()["sampling_rate"] == 0.1
    assert get_mechanism("logistic", "dpsgd", hardened=False, batch_size=50, epochs=2.0).schedule(1000) == (0.05, 40)


@pytest.mark.slow
def test_dpsgd_blackbox_audit_at_its_delta():
    """The black-box audit tests an (ε, δ) mechanism at its δ and says so."""
    problem = get_problem("logistic", beta=[0.5, -1.0])
    mech = get_mechanism("logistic", "dpsgd", hardened=False, delta=1e-5, epochs=2.0)
    res = blackbox_audit(mech, problem, 1.0, draws=1500, pilot=300, candidates=3, score_draws=100, seed=2)
    assert res.passed and res.details["delta"] == 1e-5 and "at delta 1e-05" in res.summary(), res.summary()


@pytest.mark.slow
def test_objective_chaudhuri_exact_audit_catches_2_epsilon():
    """Its release has the change-of-variables density of objective perturbation (the noise
    law itself is checked above): exact audit, m = 2, 60 candidate pairs: loss 0.53 at
    eps = 1, 1.06 at 2 eps (caught)."""
    from kngflow.audit import exact_audit

    problem = get_problem("logistic", beta=[0.5, -1.0])
    mech = get_mechanism("logistic", "objective_chaudhuri", hardened=False)
    ok = exact_audit(mech, problem, 1.0, candidates=60, points=401)
    assert ok.passed, ok.summary()
    bad = exact_audit(mech, problem, 1.0, run_epsilon=2.0, candidates=60, points=401)
    assert not bad.passed, bad.summary()

"""1-D quantile mechanisms: exact samplers against numerically integrated densities,
Metropolis against exact, exact density-ratio privacy checks, and bad input.

KS tests use fixed seeds and reject at p < 1e-5 (a correct sampler fails with probability
1e-5 per check); each has a negative control (a wrong epsilon or tau) that must fail.
"""

import numpy as np
import pytest
from scipy import stats

from kngflow.api import get_mechanism, private_quantile, get_problem
from kngflow.models.quantile.problem import QuantileData, empirical_quantile, quantile_data

P_REJECT = 1e-5


def kng_logf(y, tau, eps, t):
    """Smith's PrivateQuantile, written from the formula: -eps/2 |#{y_i <= t} - tau n|."""
    return -0.5 * eps * np.abs(np.searchsorted(y, t, side="right") - tau * y.size)


def exp_logf(y, tau, eps, t, lower, upper):
    """Exponential mechanism on the check loss, via prefix sums of the sorted data."""
    n = y.size
    k = np.searchsorted(y, t, side="right")
    csum = np.concatenate([[0.0], np.cumsum(y)])
    below = k * t - csum[k]  # sum over y_i <= t of (t - y_i)
    above = (csum[n] - csum[k]) - (n - k) * t  # sum over y_i > t of (y_i - t)
    loss = tau * above + (1 - tau) * below
    return -eps * loss / (2 * max(tau, 1 - tau) * (upper - lower))


def grid_cdf(logf, lo, hi, knots, m=200_001):
    """CDF on [lo, hi] by the midpoint rule on a grid refined at the order statistics ``knots``."""
    t = np.union1d(np.linspace(lo, hi, m), knots[(knots > lo) & (knots < hi)])
    mid = 0.5 * (t[1:] + t[:-1])
    lf = logf(mid)
    mass = np.exp(lf - lf.max()) * np.diff(t)
    cdf = np.concatenate([[0.0], np.cumsum(mass)])
    return lambda x: np.interp(x, t, cdf / cdf[-1])


def ks_p(draws, cdf):
    return stats.kstest(draws, cdf).pvalue


def draws(kind, data, eps, size, seed, **opts):
    mech = get_mechanism("quantile", kind, hardened=False, **opts)
    return mech.draw_exact(data, eps, np.random.default_rng(seed), size)[0][:, 0]


CASES = {
    "continuous": lambda rng: np.clip(rng.standard_normal(200), -3, 3),
    "heavy_ties": lambda rng: np.clip(np.round(rng.standard_normal(1000), 0), -3, 3),
    "all_tied": lambda rng: np.zeros(50),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("tau", [0.5, 0.1])
@pytest.mark.parametrize("eps", [1.0, 0.05])
def test_kng_exact_matches_integrated_density(case, tau, eps):
    y = np.sort(CASES[case](np.random.default_rng(1)))
    data = quantile_data(y, tau, -3.0, 3.0)
    x = draws("kng", data, eps, 20_000, 2)
    assert np.all((x >= -3) & (x <= 3))
    cdf = grid_cdf(lambda t: kng_logf(y, tau, eps, t), -3.0, 3.0, y)
    assert ks_p(x, cdf) > P_REJECT
    # Negative control: the mechanism for another tau does not follow this density (with
    # ties the law can be the same at every epsilon, so a wrong epsilon is no control).
    wrong_tau = 0.99 if case == "all_tied" else tau + 0.3
    wrong = draws("kng", quantile_data(y, wrong_tau, -3.0, 3.0), eps, 20_000, 2)
    assert ks_p(wrong, cdf) < P_REJECT


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("tau", [0.5, 0.8])
def test_exponential_exact_matches_integrated_density(case, tau):
    y = np.sort(CASES[case](np.random.default_rng(3)))
    eps = 2.0
    data = quantile_data(y, tau, -3.0, 3.0)
    x = draws("exponential", data, eps, 20_000, 4)
    cdf = grid_cdf(lambda t: exp_logf(y, tau, eps, t, -3.0, 3.0), -3.0, 3.0, y)
    assert ks_p(x, cdf) > P_REJECT
    assert ks_p(draws("exponential", data, 3 * eps, 20_000, 4), cdf) < P_REJECT


def test_log_density_matches_formulas():
    y = np.sort(np.round(np.random.default_rng(5).standard_normal(300), 1))
    data = quantile_data(y, 0.3, -5.0, 5.0)
    t = np.linspace(-6, 6, 1001)
    for kind, ref in (
        ("kng", kng_logf(y, 0.3, 0.7, t)),
        ("exponential", exp_logf(y, 0.3, 0.7, t, -5.0, 5.0)),
    ):
        ld = get_mechanism("quantile", kind, hardened=False).log_density(data, 0.7, t[:, None])
        inside = np.abs(t) <= 5
        assert np.all(np.isneginf(ld[~inside]))
        diff = ld[inside] - ref[inside]
        np.testing.assert_allclose(diff, diff[0], atol=1e-9 * max(1.0, np.abs(ref).max()))


@pytest.mark.slow
@pytest.mark.parametrize("ties", [False, True])
def test_large_n_no_underflow(ties):
    """n = 10^7: every interval's weight exp(-eps/2 |k - n/2|) underflows but the most likely ones."""
    rng = np.random.default_rng(6)
    y = rng.standard_normal(10_000_000)
    if ties:
        y = np.round(y, 2)  # about 800 distinct values, 10^4 copies each around 0
    y = np.sort(np.clip(y, -5, 5))
    tau, eps = 0.5, 1.0
    data = QuantileData(y, tau, -5.0, 5.0)
    med = empirical_quantile(data)
    for kind, halfwidth, logf in (
        ("kng", 0.025 if ties else 2e-3, lambda t: kng_logf(y, tau, eps, t)),
        ("exponential", 0.2, lambda t: exp_logf(y, tau, eps, t, -5.0, 5.0)),
    ):
        x = draws(kind, data, eps, 20_000, 7)
        lo, hi = med - halfwidth, med + halfwidth
        assert np.all((x > lo) & (x < hi))  # the mass outside is < 1e-100 (checked below)
        ends = logf(np.array([lo, hi])) - logf(np.array([med]))
        assert np.all(ends < -250)
        near = y[np.searchsorted(y, lo) : np.searchsorted(y, hi)]
        cdf = grid_cdf(logf, lo, hi, np.unique(near), m=400_001)
        assert ks_p(x, cdf) > P_REJECT
        # Negative control: the mechanism for tau = 0.51 (with ties epsilon barely matters).
        assert ks_p(draws(kind, data._replace(tau=0.51), eps, 20_000, 7), cdf) < P_REJECT


def test_tiny_epsilon_is_nearly_uniform_and_exact():
    y = np.sort(np.random.default_rng(8).uniform(-1, 1, 100_000))
    eps = 1e-9
    data = quantile_data(y, 0.5, -1.0, 1.0)
    x = draws("kng", data, eps, 20_000, 9)
    assert stats.kstest(x, stats.uniform(-1, 2).cdf).pvalue > P_REJECT


@pytest.mark.parametrize("kind", ["kng", "exponential"])
@pytest.mark.slow
def test_metropolis_agrees_with_exact(kind):
    y = np.sort(np.clip(np.random.default_rng(10).standard_normal(1000), -4, 4))
    data = quantile_data(y, 0.5, -4.0, 4.0)
    mech = get_mechanism("quantile", kind, hardened=False, sampler="metropolis", steps=400)
    eps = 1.0
    chains, info = mech.draw_metropolis(data, eps, np.random.default_rng(11), 2000)
    acc = info.acceptance
    assert 0.2 < acc.mean() < 0.7
    exact = draws(kind, data, eps, 20_000, 12)
    assert stats.ks_2samp(chains[:, 0], exact).pvalue > P_REJECT
    wrong, _ = mech.draw_metropolis(data, 3 * eps, np.random.default_rng(11), 2000)
    assert stats.ks_2samp(wrong[:, 0], exact).pvalue < P_REJECT


def test_release_records_sampler_and_units():
    prob = get_problem("quantile", tau=0.25, location=1.0, lower=-9.0, upper=11.0)
    rng = np.random.default_rng(13)
    data = prob.simulate(10_000, rng)
    assert np.all(np.diff(data.y) >= 0)
    assert prob.theta_star[0] == pytest.approx(1.0 + stats.norm.ppf(0.25))
    rel = get_mechanism("quantile", "nonprivate", hardened=False).release(data, 1.0, rng)
    assert rel.info["sampler"] == "none"
    assert abs(rel.estimate[0] - prob.theta_star[0]) < 0.1
    for kind in ("kng", "exponential"):
        rel = get_mechanism("quantile", kind, hardened=False).release(data, 1.0, rng)
        assert rel.info["sampler"] == "exact" and rel.estimate.shape == (1,)
        assert prob.error(rel.estimate) < 0.3
        rel = get_mechanism("quantile", kind, hardened=False, sampler="metropolis", steps=100).release(data, 1.0, rng)
        assert rel.info["sampler"] == "metropolis" and rel.info["steps"] == 100


def test_private_quantile_api():
    rng = np.random.default_rng(14)
    x = rng.uniform(0, 10, 100_001)
    vals = [private_quantile(np.random.default_rng(s), x, 0.9, 1.0, 0.0, 10.0) for s in range(20)]
    assert np.all(np.abs(np.array(vals) - np.quantile(x, 0.9)) < 0.01)
    # the draw is a function of the rng state only
    assert private_quantile(np.random.default_rng(1), x, 0.9, 1.0, 0.0, 10.0) == vals[1]


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"tau": 0.0}, ValueError, "tau"),
        ({"tau": 1.5}, ValueError, "tau"),
        ({"tau": "half"}, TypeError, "tau"),
        ({"lower": 1.0, "upper": 1.0}, ValueError, "lower"),
        ({"lower": 2.0, "upper": 1.0}, ValueError, "lower"),
        ({"upper": np.inf}, ValueError, "upper"),
        ({"x": np.array([0.5, 3.0])}, ValueError, "x must lie in"),
        ({"x": np.array([])}, ValueError, "x must not be empty"),
        ({"x": np.array([0.1, np.nan])}, ValueError, "NaN"),
        ({"x": np.ones((2, 2))}, ValueError, "x must be a 1-D"),
        ({"x": np.array(["a"])}, TypeError, "x must hold real"),
        ({"epsilon": 0.0}, ValueError, "epsilon"),
        ({"epsilon": -1.0}, ValueError, "epsilon"),
        ({"rng": 3}, TypeError, "rng"),
    ],
)
def test_private_quantile_bad_input(kwargs, exc, match):
    args = {"rng": np.random.default_rng(0), "x": np.array([0.1, 0.5]), "tau": 0.5, "epsilon": 1.0, "lower": 0.0, "upper": 1.0}
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        private_quantile(**args)


@pytest.mark.parametrize(
    "opts, match",
    [({"tau": 1.0}, "tau"), ({"lower": 3.0, "upper": -3.0}, "lower"), ({"location": 50.0}, "location"), ({"bogus": 1}, "bogus")],
)
def test_problem_bad_options(opts, match):
    with pytest.raises((TypeError, ValueError), match=match):
        get_problem("quantile", **opts)


def test_mechanism_bad_options_and_data():
    with pytest.raises(ValueError, match="sampler"):
        get_mechanism("quantile", "kng", hardened=False, sampler="gibbs")
    with pytest.raises(ValueError, match="sampler"):
        get_mechanism("quantile", "kng", hardened=False, base="gaussian", sampler="exact")
    with pytest.raises(TypeError, match="data"):
        get_mechanism("quantile", "kng", hardened=False).release(np.zeros(3), 1.0, np.random.default_rng(0))
    bad = QuantileData(np.array([0.0, 5.0]), 0.5, -1.0, 1.0)
    with pytest.raises(ValueError, match="data.y"):
        get_mechanism("quantile", "exponential", hardened=False).release(bad, 1.0, np.random.default_rng(0))


# ----------------------------------------------------------------------------- privacy

def max_log_ratio(kind, eps, y1, y2, lower=-1.0, upper=1.0, tau=0.5):
    """max_t |log f_D(t) - log f_D'(t)| of the normalised densities (exact integrals)."""
    mech = get_mechanism("quantile", kind, hardened=False)
    knots = np.union1d(y1, y2)
    t = np.union1d(np.linspace(lower, upper, 20_001), knots)
    mid = 0.5 * (t[1:] + t[:-1])
    out = []
    for y in (y1, y2):
        lf = mech.log_density(quantile_data(y, tau, lower, upper), eps, mid[:, None])
        out.append(lf - np.logaddexp.reduce(lf + np.log(np.diff(t))))
    return float(np.max(np.abs(out[0] - out[1])))


def neighbours(rng):
    """Adjacent data sets: one record moved between the bounds, the others piled at a bound
    (where the normalising constants differ most), or random."""
    for m in (0, 5, 30):
        for pile in (-1.0, 1.0):
            yield np.array([pile] * m + [-1.0]), np.array([pile] * m + [1.0])
    for _ in range(15):
        rest = list(np.round(rng.uniform(-1, 1, int(rng.integers(0, 12))), 2))
        a, b = (-1.0, 1.0) if rng.random() < 0.7 else tuple(rng.uniform(-1, 1, 2))
        yield np.array(rest + [a]), np.array(rest + [b])


@pytest.mark.parametrize("kind", ["kng", "exponential"])
@pytest.mark.parametrize("tau", [0.5, 0.1, 0.9])
def test_density_ratio_within_epsilon_and_2eps_caught(kind, tau):
    """KNG's privacy loss reaches epsilon.  The exponential mechanism's stays below
    epsilon / (2 max(tau, 1 - tau)): l_D - l_D' is 1-Lipschitz in t, so its range over
    [lower, upper] is at most (upper - lower), while the standard calibration pays for
    twice the sensitivity max(tau, 1 - tau)(upper - lower)."""
    eps = 1.0
    tight = eps if kind == "kng" else eps / (2 * max(tau, 1 - tau))
    pairs = list(neighbours(np.random.default_rng(15)))
    worst = max(max_log_ratio(kind, eps, y1, y2, tau=tau) for y1, y2 in pairs)
    assert worst <= tight + 1e-6
    assert worst > 0.75 * tight  # the neighbours come close to the bound (deterministic)
    # Negative control: the mechanism run at 2 eps / tight * eps violates epsilon-DP.
    loose = 2 * eps * eps / tight
    assert max(max_log_ratio(kind, loose, y1, y2, tau=tau) for y1, y2 in pairs) > eps + 1e-3

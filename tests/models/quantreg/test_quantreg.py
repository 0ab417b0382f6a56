"""Quantile regression: the exact LP against statsmodels' QuantReg, exact coordinate Gibbs
and Metropolis against the numerically integrated density and each other (KS per
coordinate, p < 1e-5 rejects, negative controls), exact density-ratio privacy checks
(including the paper's printed gradient constant failing for tau > 1/2), bad input.
"""

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats

from kngflow.api import get_mechanism
from kngflow.mechanisms.sampled import Sampled
from kngflow.models.quantreg.mechanisms import KNG
from kngflow.api import get_problem
from kngflow.models.quantreg.gibbs import _qr_exp_conditional
from kngflow.models.quantreg.problem import (
    check_gradient,
    check_loss,
    gradient_sensitivity,
    loss_sensitivity,
    quantreg_data,
    quantreg_lp,
)

P_REJECT = 1e-5


def sim(n, seed, tau=0.5):
    return get_problem("quantreg", tau=tau).simulate(n, np.random.default_rng(seed))


# ------------------------------------------------------------------------ non-private LP

@pytest.mark.parametrize("tau", [0.5, 0.25, 0.9])
@pytest.mark.parametrize("n", [40, 1000])
def test_lp_equals_statsmodels_quantreg(tau, n):
    data = sim(n, 1, tau)
    lp = quantreg_lp(data)
    fit = sm.QuantReg(data.y, data.X).fit(q=tau, p_tol=1e-12, max_iter=20_000).params
    # statsmodels' IRLS floors |residual| at 1e-6, so its answer is within ~1e-6 of the vertex;
    # the vertex it points at (the d points it interpolates) is the LP solution to 1e-12.
    assert np.max(np.abs(lp - fit)) < 1e-5
    basis = np.argsort(np.abs(data.y - data.X @ fit))[: data.d]
    vertex = np.linalg.solve(data.X[basis], data.y[basis])
    np.testing.assert_allclose(lp, vertex, atol=1e-10)
    # and the LP is optimal: no smaller check loss at statsmodels' answer
    assert check_loss(data, lp) <= check_loss(data, fit) + 1e-12


@pytest.mark.parametrize("tau", [0.5, 0.15, 0.9])
def test_lp_preprocessing_is_exact(tau):
    """Portnoy-Koenker preprocessing returns the full LP's solution."""
    data = sim(30_000, 17, tau)
    full = quantreg_lp(data, direct_max=10**9)
    np.testing.assert_allclose(quantreg_lp(data, direct_max=1000), full, rtol=0, atol=1e-12)


def test_nonprivate_release_in_original_units():
    data = sim(500, 2)
    rel = get_mechanism("quantreg", "nonprivate", hardened=False).release(data, 1.0, np.random.default_rng(0))
    np.testing.assert_allclose(rel.estimate, quantreg_lp(data) * data.scale)
    assert rel.info["sampler"] == "none"


# ------------------------------------------------------------------ densities and samplers

def grid_marginals(mech, data, eps, lo, hi, m=301, base_scale=None):
    """Marginal CDFs of the normalised density on the box [lo, hi] (midpoint rule).

    The density is written from the formulas with numpy (``check_gradient`` /
    ``check_loss``), independent of the samplers' kernels.
    """
    axes = [np.linspace(lo[k], hi[k], m + 1) for k in range(2)]
    mids = [0.5 * (a[1:] + a[:-1]) for a in axes]
    T = np.stack(np.meshgrid(*mids, indexing="ij"), -1).reshape(-1, 2)
    a = eps / (2 * mech.sensitivity(data))
    lf = np.empty(len(T))
    # about 10^5 residuals (n per point) at a time: the temporaries stay in cache (4000
    # points at once took 5-6 times longer at n = 1000 and n = 10^4)
    rows = max(1, 100_000 // data.n)
    for s in range(0, len(T), rows):
        t = T[s : s + rows]
        if mech.kind == "kng":
            g = check_gradient(data, t)
            norm = {"linf": np.inf, "l2": 2, "l1": 1}[mech.norm]
            lf[s : s + rows] = -a * np.linalg.norm(g, ord=norm, axis=1)
        else:
            lf[s : s + rows] = -a * check_loss(data, t)
    if base_scale is None:
        lf[np.abs(T).sum(1) > mech.bound] = -np.inf
    else:
        lf -= 0.5 * (T**2).sum(1) / base_scale**2
    # the box must hold all the mass: its edges are 1e-7 below the peak
    f = np.exp(lf - lf.max()).reshape(m, m)
    edge = max(f[0].max(), f[-1].max(), f[:, 0].max(), f[:, -1].max())
    inside_ball = base_scale is None and np.all(np.abs(np.array([lo, hi])).sum(1) >= mech.bound)
    assert edge < 1e-7 or inside_ball
    cdfs = []
    for k in range(2):
        marg = f.sum(axis=1 - k)
        c = np.concatenate([[0.0], np.cumsum(marg)])
        cdfs.append(lambda x, ax=axes[k], c=c / c[-1]: np.interp(x, ax, c))
    # log_density agrees with the formulas up to a constant
    ld = mech.log_density(data, eps, T[:: 997])
    ok = np.isfinite(ld)
    d = ld[ok] - lf[:: 997][ok]
    np.testing.assert_allclose(d, d[0], atol=1e-8)
    return cdfs


def ks_marginals(draws, cdfs):
    return min(stats.kstest(draws[:, k], cdfs[k]).pvalue for k in range(2))


# (kind, norm, n, eps, window half-widths around the LP estimate or None = the whole ball)
CASES = [
    ("kng", "linf", 1000, 1.0, (0.04, 0.12)),
    ("kng", "l2", 1000, 1.0, (0.04, 0.12)),
    ("exponential", None, 1000, 1.0, (0.35, 0.6)),
    ("kng", "linf", 25, 1.0, None),
    ("kng", "l1", 25, 0.5, None),
    ("exponential", None, 25, 1.0, None),
]


def build(kind, norm, **kw):
    return get_mechanism("quantreg", kind, hardened=False, **({"norm": norm} if norm else {}), **kw)


def box(data, window):
    if window is None:
        return (-1.0, -1.0), (1.0, 1.0)
    c = quantreg_lp(data)
    return tuple(c - window), tuple(c + window)


@pytest.mark.slow
@pytest.mark.parametrize("kind, norm, n, eps, window", CASES)
def test_gibbs_matches_integrated_density(kind, norm, n, eps, window):
    data = sim(n, 3)
    mech = build(kind, norm)
    cdfs = grid_marginals(mech, data, eps, *box(data, window))
    draws, _ = mech.draw_gibbs(data, eps, np.random.default_rng(4), 2000, sweeps=10)
    assert np.all(np.abs(draws).sum(1) <= mech.bound + 1e-12)
    assert ks_marginals(draws, cdfs) > P_REJECT
    # Negative control: the chains at 3 epsilon do not follow this density.
    wrong, _ = mech.draw_gibbs(data, 3 * eps, np.random.default_rng(4), 2000, sweeps=10)
    assert ks_marginals(wrong, cdfs) < P_REJECT


@pytest.mark.slow
@pytest.mark.parametrize("kind, norm, n, eps, window", [CASES[0], CASES[2], CASES[3]])
def test_metropolis_matches_integrated_density_and_gibbs(kind, norm, n, eps, window):
    data = sim(n, 3)
    mech = build(kind, norm, sampler="metropolis", steps=300)
    cdfs = grid_marginals(mech, data, eps, *box(data, window))
    draws, info = mech.draw_metropolis(data, eps, np.random.default_rng(5), 1000)
    acc = info.acceptance
    assert 0.2 < acc.mean() < 0.7
    assert ks_marginals(draws, cdfs) > P_REJECT
    gibbs, _ = mech.draw_gibbs(data, eps, np.random.default_rng(6), 1000, sweeps=10)
    assert min(stats.ks_2samp(draws[:, k], gibbs[:, k]).pvalue for k in range(2)) > P_REJECT
    wrong, _ = mech.draw_metropolis(data, 3 * eps, np.random.default_rng(5), 1000)
    assert min(stats.ks_2samp(wrong[:, k], gibbs[:, k]).pvalue for k in range(2)) < P_REJECT


@pytest.mark.slow
def test_metropolis_gaussian_base_matches_integrated_density():
    data = sim(25, 7)
    mech = get_mechanism("quantreg", "kng", hardened=False, base="gaussian", base_scale=0.4, steps=300)
    assert mech.available_samplers() == ("surrogate_map", "metropolis")  # no exact Gibbs under a Gaussian base
    cdfs = grid_marginals(mech, data, 1.0, (-2.5, -2.5), (2.5, 2.5), base_scale=0.4)
    draws, _ = mech.draw_metropolis(data, 1.0, np.random.default_rng(8), 1000)
    assert ks_marginals(draws, cdfs) > P_REJECT
    wide = get_mechanism("quantreg", "kng", hardened=False, base="gaussian", base_scale=1.0, steps=300)
    wrong, _ = wide.draw_metropolis(data, 1.0, np.random.default_rng(8), 1000)
    assert ks_marginals(wrong, cdfs) < P_REJECT


@pytest.mark.parametrize("t0, h", [(0.0, 4.0), (0.3, 1e-3), (-0.9, 0.05)])
@pytest.mark.slow
def test_windowed_exponential_conditional_is_exact(t0, h):
    """The exponential mechanism's coordinate conditional drawn on a window (whole,
    narrow and far from the mode: tail envelopes and rejections) follows the numerically
    integrated conditional; the draw with the rate doubled does not."""
    data = sim(200, 14)
    j, L, a = 1, 0.8, 2.0
    b = data.y - data.X[:, 0] * 0.1  # residuals without coordinate 1, theta_0 = 0.1
    grid = np.linspace(-L, L, 200_001)
    loss = np.array([check_loss_1d(b, data.X[:, j], data.tau, t) for t in grid])

    def cdf_of(rate):
        dens = np.exp(-rate * (loss - loss.min()))
        c = np.concatenate([[0.0], np.cumsum((dens[1:] + dens[:-1]) / 2)])
        return lambda x: np.interp(x, grid, c / c[-1])

    n = data.X.shape[0]
    work = [np.empty(n + 1), np.empty(n), np.empty(n + 2), np.empty(n + 1), np.empty(n, np.int64), np.empty(n + 1, np.int64)]
    rng = np.random.default_rng(15)
    draws = np.array([_qr_exp_conditional(rng, data.X, b, j, L, data.tau, a, t0, h, *work)[0] for _ in range(4000)])
    assert np.all(np.abs(draws) <= L)
    assert stats.kstest(draws, cdf_of(a)).pvalue > P_REJECT
    assert stats.kstest(draws, cdf_of(2 * a)).pvalue < P_REJECT  # negative control


def check_loss_1d(b, x, tau, t):
    r = b - x * t
    return float(np.sum(r * (tau - (r <= 0))))


@pytest.mark.parametrize("n, base", [(300, "uniform"), (20_000, "uniform"), (20_000, "gaussian")])
def test_banded_metropolis_is_the_generic_chain(n, base):
    """The banded energy changes nothing but rounding: with a continuous energy (the
    exponential mechanism) the chains equal the generic kernel's draw for draw; at
    n = 20 000 the band is rebuilt at proposals and at batch ends, and at n = 300 it
    overflows (plain passes).  KNG's piecewise-constant energy can turn an exact tie
    into a uniform draw after a rounding difference; its law is checked above."""
    data = sim(n, 12)
    kind = "exponential" if base == "uniform" else "kng"
    mech = get_mechanism("quantreg", kind, hardened=False, steps=400, base=base, base_scale=0.5)
    fast, info = mech.draw_metropolis(data, 1.0, np.random.default_rng(13), 3)
    acc_fast = info.acceptance
    slow, info_slow = Sampled.draw_metropolis(mech, data, 1.0, np.random.default_rng(13), 3)
    acc_slow = info_slow.acceptance
    if kind == "exponential":
        np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-9)
        np.testing.assert_array_equal(acc_fast, acc_slow)
    else:  # the same tuned scales: both chains end within the KNG posterior's width
        assert np.max(np.abs(fast - slow)) < 0.05 and 0.2 < acc_fast.mean() < 0.7


def test_release_policy_and_units():
    data = sim(300, 9)
    rng = np.random.default_rng(10)
    for kind, first in (("kng", "surrogate_map"), ("exponential", "gibbs")):
        rel = get_mechanism("quantreg", kind, hardened=False, steps=50).release(data, 1.0, rng)
        assert rel.info["sampler"] == first and rel.estimate.shape == (2,)
        rel2 = get_mechanism("quantreg", kind, hardened=False, sampler="metropolis", steps=50).release(data, 1.0, rng)
        assert rel2.info["sampler"] == "metropolis" and rel2.info["steps"] == 50
        rel3 = get_mechanism("quantreg", kind, hardened=False, sampler="gibbs", gibbs_sweeps=3).release(data, 1.0, rng)
        assert rel3.info["sampler"] == "gibbs" and rel3.info["steps"] == 3
        assert 0.0 < rel2.info["acceptance"] < 1.0
        assert np.abs(rel.estimate / data.scale).sum() <= 1.0 + 1e-12
    g = get_mechanism("quantreg", "kng", hardened=False, base="gaussian", steps=20).release(data, 1.0, rng)
    assert g.info["sampler"] == "surrogate_map" and g.info["steps"] == 20 + 50  # Metropolis sweeps, then proposals
    g = get_mechanism("quantreg", "kng", hardened=False, base="gaussian", sampler="metropolis", steps=20).release(
        data, 1.0, rng)
    assert g.info["sampler"] == "metropolis"


# ------------------------------------------------------------------------------ privacy

GRID = np.linspace(-1, 1, 801)
THETA = np.stack(np.meshgrid(GRID, GRID, indexing="ij"), -1).reshape(-1, 2)
THETA = THETA[np.abs(THETA).sum(1) <= 1.0]
SLACK = 5e-3  # grid quadrature error of the log normalising constants


def records(recs, tau):
    X = np.array([[1.0, x] for x, _ in recs])
    y = np.array([y for _, y in recs])
    return quantreg_data(X, y, tau, y_bound=1.0)


def max_log_ratio(mech, eps, D1, D2, tau):
    l1 = mech.log_density(records(D1, tau), eps, THETA)
    l2 = mech.log_density(records(D2, tau), eps, THETA)
    l1 -= np.logaddexp.reduce(l1)
    l2 -= np.logaddexp.reduce(l2)
    return float(np.max(np.abs(l1 - l2)))


def neighbour_pairs(seed, count=20):
    """Adjacent data sets: one record moved between corners of [-1, 1]^2, the others random
    or piled on a corner."""
    rng = np.random.default_rng(seed)
    corners = [(-1.0, -1.0), (1.0, -1.0), (-1.0, 1.0), (1.0, 1.0)]
    # found by a random search over records (x, y) in {-1, 0, 1}^2 (privacy loss 1.16 at 2 eps, tau = 0.8)
    rest = [(0.0, -1.0)] + [(-1.0, 0.0)] * 5 + [(1.0, 1.0)]
    yield [(1.0, 0.0)] + rest, [(-1.0, 1.0)] + rest
    for k in range(count):
        m = int(rng.integers(1, 8))
        if k % 2:
            rest = [corners[int(rng.integers(4))]] * m
        else:
            rest = [tuple(map(float, r)) for r in rng.uniform(-1, 1, (m, 2))]
        i, j = rng.choice(4, 2, replace=False)
        yield [corners[i]] + rest, [corners[j]] + rest


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["kng", "exponential"])
@pytest.mark.parametrize("tau", [0.5, 0.8])
def test_density_ratio_within_epsilon_and_2eps_caught(kind, tau):
    mech = get_mechanism("quantreg", kind, hardened=False, bound=1.0)
    pairs = list(neighbour_pairs(11))
    eps = 1.0
    assert max(max_log_ratio(mech, eps, a, b, tau) for a, b in pairs) <= eps + SLACK
    assert max(max_log_ratio(mech, 2 * eps, a, b, tau) for a, b in pairs) > eps + SLACK


@pytest.mark.slow
def test_paper_gradient_constant_is_not_private_for_tau_above_half():
    """The paper's Delta = 2 (1 - tau) C_X: at tau = 0.8 KNG with it leaks more than epsilon."""

    class PaperKNG(KNG):
        def sensitivity(self, data):
            return 2 * (1 - data.tau)

    pairs = list(neighbour_pairs(12))
    assert max(max_log_ratio(PaperKNG(), 1.0, a, b, 0.8) for a, b in pairs) > 1.5
    assert max(max_log_ratio(PaperKNG(), 1.0, a, b, 0.3) for a, b in pairs) <= 1.0 + SLACK


def test_sensitivities():
    assert gradient_sensitivity("linf", 2, 0.5) == 1.0
    assert gradient_sensitivity("linf", 2, 0.8) == pytest.approx(1.6)
    assert gradient_sensitivity("l1", 3, 0.2) == pytest.approx(2 * 0.8 * 3)
    assert gradient_sensitivity("l2", 4, 0.5) == pytest.approx(2.0)
    assert loss_sensitivity(0.5, 1.0) == 1.0
    # attained: x' = -x with both indicators 1 gives 2 (1 - tau) ||x||_K
    d1 = records([(1.0, -1.0), (0.0, -1.0)], 0.2)
    d2 = records([(-1.0, -1.0), (0.0, -1.0)], 0.2)
    t = np.array([0.0, 0.5])  # x'theta = +-0.5 >= y = -1 for both
    diff = check_gradient(d1, t) - check_gradient(d2, t)
    assert np.abs(diff).max() == pytest.approx(gradient_sensitivity("linf", 2, 0.2))


# ---------------------------------------------------------------------------- bad input

@pytest.mark.parametrize(
    "X, y, kw, exc, match",
    [
        (np.ones((3, 2)), np.zeros(3), {"tau": 1.0}, ValueError, "tau"),
        (np.ones((3, 2)), np.zeros(3), {"tau": 0.0}, ValueError, "tau"),
        (np.ones((3, 2)) * 2, np.zeros(3), {}, ValueError, "X must"),
        (np.ones((3, 2)), np.zeros(4), {}, ValueError, "y must"),
        (np.ones((1, 2)), np.zeros(1), {}, ValueError, "n must"),
        (np.ones((0, 2)), np.zeros(0), {}, ValueError, "X must"),
        (np.ones((3, 2)), np.array([0.0, np.nan, 1.0]), {}, ValueError, "y must be finite"),
        (np.ones((3, 2)), np.array([0.0, 3.0, 1.0]), {"y_bound": 2.0}, ValueError, "y must lie"),
        (np.ones((3, 2)), np.zeros(3), {"y_bound": -1.0}, ValueError, "y_bound"),
    ],
)
def test_quantreg_data_bad_input(X, y, kw, exc, match):
    kw = {"tau": 0.5, **kw}
    with pytest.raises(exc, match=match):
        quantreg_data(X, y, kw.pop("tau"), **kw)


@pytest.mark.parametrize(
    "opts, match",
    [
        ({"tau": 1.2}, "tau"),
        ({"theta_star": []}, "theta_star"),
        ({"theta_star": [0.0, float("nan")]}, "theta_star"),
        ({"protocol": "other"}, "protocol"),
        ({"protocol": "public_bound"}, "y_bound"),
        ({"color": 1}, "color"),
    ],
)
def test_problem_bad_options(opts, match):
    with pytest.raises((TypeError, ValueError), match=match):
        get_problem("quantreg", **opts)


def test_mechanism_bad_options():
    with pytest.raises(ValueError, match="norm"):
        get_mechanism("quantreg", "kng", hardened=False, norm="l3")
    with pytest.raises(ValueError, match="base"):
        get_mechanism("quantreg", "exponential", hardened=False, base="gaussian")
    with pytest.raises(ValueError, match="sampler"):
        get_mechanism("quantreg", "kng", hardened=False, sampler="exact")
    with pytest.raises(ValueError, match="bound"):
        get_mechanism("quantreg", "kng", hardened=False, bound=0.0)
    with pytest.raises(TypeError, match="data"):
        get_mechanism("quantreg", "kng", hardened=False).release(sim(10, 0).X, 1.0, np.random.default_rng(0))
    bad = sim(10, 0)._replace(y=np.full(10, 2.0))
    with pytest.raises(ValueError, match="data.X and data.y"):
        get_mechanism("quantreg", "exponential", hardened=False).release(bad, 1.0, np.random.default_rng(0))


@pytest.mark.parametrize("case", ["uniform", "normal", "cauchy", "ties", "clustered", "constant", "one"])
def test_bucket_argsort(case):
    from kngflow.models.quantreg.gibbs import bucket_argsort

    rng = np.random.default_rng(16)
    m = 5000
    keys = {
        "uniform": rng.random(m),
        "normal": rng.standard_normal(m),
        "cauchy": rng.standard_cauchy(m),
        "ties": np.round(rng.standard_normal(m), 1),
        "clustered": np.concatenate([rng.random(m - 3) * 1e-9, [1e6, -1e6, 3.0]]),
        "constant": np.full(m, 2.5),
        "one": np.array([1.0]),
    }[case]
    m = keys.size
    order = np.full(m + 3, -1, dtype=np.int64)
    count = np.empty(m + 1, dtype=np.int64)
    padded = np.concatenate([keys, [np.nan, np.nan]])  # only keys[:m] are read
    bucket_argsort(padded, m, order, count)
    np.testing.assert_array_equal(order[:m], np.argsort(keys, kind="stable"))


# ------------------------------------------------------------------------ Engel data

def engel_data(tau):
    from statsmodels.datasets import engel

    df = engel.load_pandas().data  # ships with statsmodels: nothing is downloaded
    x = (df["income"].to_numpy() - 1000.0) / 4000.0  # public centre and scale
    X = np.column_stack([np.ones(len(x)), x])
    return quantreg_data(X, df["foodexp"].to_numpy(), tau, y_bound=2500.0)


@pytest.mark.parametrize("tau", [0.5, 0.9])
def test_engel_lp_equals_statsmodels(tau):
    data = engel_data(tau)
    lp = get_mechanism("quantreg", "nonprivate", hardened=False).release(data, 1.0, np.random.default_rng(0)).estimate
    fit = sm.QuantReg(data.y * data.scale, data.X).fit(q=tau, p_tol=1e-12, max_iter=20_000).params
    np.testing.assert_allclose(lp, fit, rtol=1e-6)


def test_engel_readme_example():
    """The README's example runs: private releases inside Theta, in original units."""
    data = engel_data(0.5)
    rng = np.random.default_rng(7)
    for kind in ("kng", "exponential"):
        rel = get_mechanism("quantreg", kind, hardened=False, bound=2.0, steps=200).release(data, 1.0, rng)
        assert np.abs(rel.estimate / data.scale).sum() <= 2.0 + 1e-12


# ------------------------------------------------------------------------ the surrogate map

# (norm, n, eps, window half-widths around the LP estimate or None = the whole ball)
SURROGATE_CASES = [
    ("linf", 25, 1.0, None),
    ("l1", 25, 0.5, None),
    ("linf", 1000, 1.0, (0.04, 0.12)),
    ("l2", 1000, 1.0, (0.04, 0.12)),
    ("linf", 10_000, 1.0, (0.006, 0.018)),
]


@pytest.mark.slow
@pytest.mark.parametrize("steps", [2, 1000])
@pytest.mark.parametrize("norm, n, eps, window", SURROGATE_CASES)
def test_surrogate_map_matches_integrated_density(norm, n, eps, window, steps):
    """The default sampler of quantile-regression KNG releases the numerically integrated
    law (KS per coordinate, 2000 chains sharing one surrogate fit; 1000 at n = 10^4, where a
    chain costs ten times more); at 2 epsilon it does not.
    With 2 Metropolis sweeps before them the 50 independence proposals alone reach the law
    (p-values 0.38-0.74 at the seeds below; at n = 10^4, on 1000 draws, 0.20 and 0.34).

    The control's size: at 2 epsilon the largest KS distance to the reference is 0.16-0.19
    from n = 1000 on (0.09-0.19 at n = 25; read on 400 draws), so 400 draws there reject
    with ``sqrt(n) D`` = 3.3-3.9 against the threshold's 2.5 (p-values 1e-13 to 1e-9 at
    the seed below); n = 25 keeps 2000."""
    data = sim(n, 3)
    mech = build("kng", norm, steps=steps)
    assert mech.available_samplers()[0] == "surrogate_map"
    cdfs = grid_marginals(mech, data, eps, *box(data, window))
    draws, info = mech.draw_surrogate_map(data, eps, np.random.default_rng(4), 1000 if n >= 10_000 else 2000)
    acc, steps = info.acceptance, info.steps
    assert np.all(np.abs(draws).sum(1) <= mech.bound + 1e-12)
    assert np.all(steps == mech.steps + 50) and 0.2 < acc.mean() <= 1.0
    assert ks_marginals(draws, cdfs) > P_REJECT
    wrong, _ = mech.draw_surrogate_map(data, 2 * eps, np.random.default_rng(4), 400 if n >= 1000 else 2000)
    assert ks_marginals(wrong, cdfs) < P_REJECT  # negative control


@pytest.mark.slow
def test_surrogate_map_gaussian_base_matches_integrated_density():
    """Under a Gaussian base the surrogate map (1000 Metropolis sweeps, as in the cases
    above, then the 50 proposals) releases the integrated law (p = 0.51 at this seed); with
    a base 2.5 times as wide it does not (p = 4e-102)."""
    data = sim(25, 7)
    mech = get_mechanism("quantreg", "kng", hardened=False, base="gaussian", base_scale=0.4, steps=1000)
    cdfs = grid_marginals(mech, data, 1.0, (-2.5, -2.5), (2.5, 2.5), base_scale=0.4)
    draws, _ = mech.draw_surrogate_map(data, 1.0, np.random.default_rng(8), 2000)
    assert ks_marginals(draws, cdfs) > P_REJECT
    wide = get_mechanism("quantreg", "kng", hardened=False, base="gaussian", base_scale=1.0, steps=1000)
    wrong, _ = wide.draw_surrogate_map(data, 1.0, np.random.default_rng(8), 2000)
    assert ks_marginals(wrong, cdfs) < P_REJECT


STUCK = 60.0  # energy above the minimum: probability below e^-35 under the law


@pytest.mark.slow
def test_surrogate_map_never_stuck_at_n_1e5():
    """At n = 10^5 (the Figure 2 spec's settings, its 1000 steps included) no release is
    stuck: every one has ``a ||g(theta)||_inf < 60`` (the energy's minimum is >= 0; the
    largest here is 8.0), where the paper's 1000 Metropolis steps alone leave 1.2-1.5 % of
    releases far from the mode (2 of these 200 chains; none at the mechanism's default
    10^4 steps, which would hide a failure of the proposals).  Control: draws from the
    uniform base measure are flagged by the same criterion (energies above 2400)."""
    data = get_problem("quantreg", tau=0.5, theta_star=[0.0, -1.0], protocol="paper").simulate(
        100_000, np.random.default_rng(21))
    mech = build("kng", "linf", bound=1.0, steps=1000)
    draws, _ = mech.draw_surrogate_map(data, 1.0, np.random.default_rng(22), 200)
    energy = -mech.log_density(data, 1.0, draws)
    assert energy.max() < STUCK
    prior = np.random.default_rng(23).uniform(-0.5, 0.5, size=(20, 2))
    assert np.all(-mech.log_density(data, 1.0, prior) > STUCK)


def test_surrogate_map_falls_back_when_the_fit_fails():
    """A design of rank 1 has a singular surrogate Hessian: under "auto" the release hands
    over to Metropolis (same target); asked for by name, the sampler says why it failed."""
    X = np.column_stack([np.ones(40), np.zeros(40)])
    y = np.random.default_rng(30).uniform(-1, 1, 40)
    data = quantreg_data(X, y, 0.5, y_bound=1.0)
    rel = build("kng", "linf", steps=50).release(data, 1.0, np.random.default_rng(31))
    assert rel.info["sampler"] == "metropolis" and rel.info["steps"] == 50
    with pytest.raises(RuntimeError, match="surrogate's Newton fit failed; use sampler='metropolis'"):
        build("kng", "linf", sampler="surrogate_map").release(data, 1.0, np.random.default_rng(31))
    with pytest.raises(ValueError, match="sampler must be one of"):
        build("exponential", None, sampler="surrogate_map")
    # hardened releases run the same sampler, certified (tests/mechanisms/test_hardened_surrogate.py),
    # and where the fit fails the walk's state, whose rounding is 0 (lattice positions)
    assert get_mechanism("quantreg", "kng", hardened=True).release(
        sim(50, 32), 1.0, np.random.default_rng(33)).info["sampler"] == "surrogate_map"
    assert get_mechanism("quantreg", "kng", hardened=True, steps=50).release(
        data, 1.0, np.random.default_rng(31)).info["sampler"] == "metropolis"

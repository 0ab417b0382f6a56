"""Sufficient-statistics linear regression (Awan & Slavković §6): layout, sensitivities,
the body K, the noise law, the estimators and a black-box audit."""

import itertools

import numpy as np
import pytest
from scipy import stats as sps

from kngflow.audit import blackbox_audit
from kngflow.audit.pairs import AdjacentPair
from kngflow.api import allowed_options, get_mechanism
from kngflow.models.linear import ss as L
from kngflow.noise import knorm_noise
from kngflow.api import get_problem
from kngflow.models.linear.problem import ols, stats_from_arrays

P_MIN = 1e-5


def _records(values, p):
    """Every record (x, y) with entries from ``values``: x (m, p), y (m,)."""
    grid = np.array(list(itertools.product(values, repeat=p + 1)))
    return grid[:, :p], grid[:, p]


def _differences(x, y):
    t = L.record_t(x, y)
    return (t[:, None, :] - t[None, :, :]).reshape(-1, t.shape[1])


def _data(p, n, seed, y_bound=1.0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, p))
    y = np.clip(x @ np.linspace(-0.5, 0.5, p) + 0.3 * rng.standard_normal(n), -y_bound, y_bound)
    return x, y, stats_from_arrays(np.column_stack([np.ones(n), x]), y, y_bound=y_bound)


def test_layout_rescaling_and_rebuild():
    x, y, stats = _data(3, 200, 0, y_bound=2.0)
    yp = y / 2.0
    T = L.stats_t(stats)
    assert len(T) == L.t_dim(3) == (4 * 5) // 2 - 1 + 4 == 13
    direct = np.concatenate([
        x.sum(0), 2 * (x**2).sum(0), [(x[:, 0] * x[:, 1]).sum(), (x[:, 0] * x[:, 2]).sum(), (x[:, 1] * x[:, 2]).sum()],
        [yp.sum()], (x * yp[:, None]).sum(0),
    ])
    np.testing.assert_allclose(T, direct, rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(L.record_t(x, yp).sum(0), direct, rtol=1e-12, atol=1e-10)
    G, c = L.rebuild(T, stats.n, 3)
    assert G[0, 0] == stats.n and np.array_equal(G, G.T)
    np.testing.assert_allclose(G, stats.G, rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(c, stats.c, rtol=1e-12, atol=1e-10)
    assert [L.t_dim(p) for p in (0, 1, 5, 11)] == [1, 4, 26, 89]


@pytest.mark.parametrize("p, values", [(1, np.linspace(-1, 1, 21)), (2, np.linspace(-1, 1, 9)),
                                       (3, np.linspace(-1, 1, 5))])
def test_linf_and_l1_sensitivity_on_a_grid(p, values):
    """Over every pair of grid records: max |D_i| = 2 and max ||D||_1 = (p^2 + 7p + 4)/2, both
    attained (the grid contains the maximisers x = 1, y = 1 vs x' = 0, y' = -1)."""
    D = _differences(*_records(values, p))
    assert np.abs(D).max() == L.LINF_SENSITIVITY
    l1 = np.abs(D).sum(1)
    assert l1.max() == pytest.approx(L.l1_sensitivity(p), abs=1e-12)
    assert L.l1_sensitivity(p) < 2 * L.t_dim(p)  # the bound d_T * Delta_inf is not attained


def test_l1_sensitivity_never_exceeded_p5():
    """p = 5: random continuous pairs, corner/zero pairs and a local ascent stay below 32 = Delta_1."""
    p, rng = 5, np.random.default_rng(1)
    assert L.l1_sensitivity(p) == 32.0
    x = np.array([[1.0] * 5, [0.0] * 5])
    assert np.abs(_differences(x, np.array([1.0, -1.0]))).sum(1).max() == 32.0
    x, y = _records((-1.0, 0.0, 1.0), p)
    t = L.record_t(x, y)
    for chunk in np.array_split(np.arange(len(t)), 8):
        assert np.abs(t[chunk, None, :] - t[None, :, :]).sum(-1).max() <= 32.0 + 1e-12
    r = rng.uniform(-1, 1, (200_000, 2, p + 1))
    ta, tb = L.record_t(r[:, 0, :p], r[:, 0, p]), L.record_t(r[:, 1, :p], r[:, 1, p])
    assert np.abs(ta - tb).sum(1).max() < 32.0
    best = r[np.argmax(np.abs(ta - tb).sum(1))]  # coordinate ascent from the best random pair
    f = lambda z: np.abs(L.record_t(z[:1, :p], z[:1, p]) - L.record_t(z[1:, :p], z[1:, p])).sum()  # noqa: E731
    for _ in range(20):
        for i, j in itertools.product(range(2), range(p + 1)):
            cand = np.repeat(best[None], 41, 0)
            cand[:, i, j] = np.linspace(-1, 1, 41)
            best = cand[np.argmax([f(z) for z in cand])]
    assert f(best) <= 32.0 + 1e-12


@pytest.mark.parametrize("p, values", [(1, np.linspace(-1, 1, 21)), (2, np.linspace(-1, 1, 9)),
                                       (5, (-1.0, -0.5, 0.0, 0.5, 1.0))])
def test_adjacent_differences_lie_in_K(p, values):
    """Every adjacent difference of a grid lies in K (so Delta_K <= 1), and some lie on its
    boundary (Delta_K = 1): a_1 = 2 from x_1 = 1 vs -1."""
    body = L.kt_norm(p)
    x, y = _records(values, p)
    if p == 5:  # 5^6 records: every pair of a random subset of 1200
        idx = np.random.default_rng(0).choice(len(x), 1200, replace=False)
        x, y = x[idx], y[idx]
    D = _differences(x, y)
    assert body.contains(D / (1 + 1e-12)).all()  # rounding: boundary differences such as 2(x^2 - x'^2)
    assert not body.contains(D * (1 + 1e-9)).all()
    rng = np.random.default_rng(2)
    r = rng.uniform(-1, 1, (100_000, 2, p + 1))
    D = L.record_t(r[:, 0, :p], r[:, 0, p]) - L.record_t(r[:, 1, :p], r[:, 1, p])
    assert body.contains(D / (1 + 1e-12)).all()


def test_K_projections_tight_and_K_larger_than_hull():
    """K_3's vertices and K_2's curved boundary are adjacent differences; K is an outer
    approximation of conv(S_T): points of K beyond the support function of S_T (p = 1, 2)."""
    for sx, sy in itertools.product((-1, 1), repeat=2):  # (2, 2, 0), (2, 0, 2), (0, 2, 2) with signs
        d = L.record_t(np.array([[sx], [-sx]]), np.array([sy, -sy]))
        assert np.array_equal((d[0] - d[1])[[0, 2, 3]], [2 * sx, 2 * sy, 0])
        d = L.record_t(np.array([[sx], [-sx]]), np.array([sy, sy]))
        assert np.array_equal((d[0] - d[1])[[0, 2, 3]], [2 * sx, 0, 2 * sx * sy])
        d = L.record_t(np.array([[sx], [sx]]), np.array([sy, -sy]))
        assert np.array_equal((d[0] - d[1])[[0, 2, 3]], [0, 2 * sy, 2 * sx * sy])
    a = np.linspace(1, 2, 11)  # x = 1 vs x' = 1 - a: (a, 2 - 2(a - 1)^2)
    d = L.record_t(np.ones((11, 1)), np.zeros(11)) - L.record_t((1 - a)[:, None], np.zeros(11))
    np.testing.assert_allclose(d[:, 1], 2 - 2 * (a - 1) ** 2, atol=1e-12)
    body = L.kt_norm(2)
    inside = np.array([1.5, 0, 1.5, 0, 0, 0, 0, 0])  # (a1, q1) on K_2's curve, in the p = 2 layout
    assert body.contains(inside) and not body.contains(inside + 1e-9 * np.eye(8)[2])
    witness = np.array([0, 0, 2, 2, 2, 0, 0, 0.0])  # (a1, a2, q1, q2, c12, b, e1, e2)
    assert body.contains(witness) and body(witness) == pytest.approx(1.0)
    t = L.record_t(*_records(np.linspace(-1, 1, 41), 2))
    s = t[:, 2] + t[:, 3] + t[:, 4]
    assert s.max() - s.min() == pytest.approx(5.0)  # support of S_T in that direction: 5 < 6
    witness = np.array([0, 2, 0, 2.0])  # p = 1, (a, q, b, e): q + e = 4 in K, <= 3 + 1/8 on S_T
    assert L.kt_norm(1).contains(witness)
    t = L.record_t(*_records(np.linspace(-1, 1, 81), 1))
    assert (t[:, 1] + t[:, 3]).max() - (t[:, 1] + t[:, 3]).min() == pytest.approx(25 / 8)


def _wrong_uniform(rng, p, size):
    """The fibred proposal WITHOUT its acceptance step (not uniform on K): negative control."""
    out = np.empty((size, L.t_dim(p)))
    ib = 2 * p + p * (p - 1) // 2
    for s in range(size):
        for j in range(p):
            while True:
                a, q = rng.uniform(-2, 2, 2)
                if abs(q) <= (2.0 if abs(a) <= 1 else 2 - 2 * (abs(a) - 1) ** 2):
                    break
            out[s, j], out[s, p + j] = a, q
        b = out[s, ib] = rng.uniform(-2, 2)
        w = lambda u, v: min(2.0, 4 - abs(u) - abs(v))  # noqa: E731
        i = 2 * p
        for j, k in itertools.combinations(range(p), 2):
            out[s, i] = w(out[s, j], out[s, k]) * rng.uniform(-1, 1)
            i += 1
        for j in range(p):
            out[s, ib + 1 + j] = w(out[s, j], b) * rng.uniform(-1, 1)
    return out


def test_uniform_on_K_and_knorm_law():
    """p = 5 (d_T = 26).  U ~ Uniform(K): ||U||_K^26 ~ U(0, 1), and coordinates match the cube
    rejection sampler (Algorithm 8).  V = r U: ||V||_K ~ Gamma(26, s) (Prop. 4.3; Gamma(27) is
    the radius r, not ||V||_K).  Controls: the proposal without acceptance, scale 2s, Gamma(27)."""
    p, m, rng = 5, 26, np.random.default_rng(3)
    body = L.kt_norm(p)
    U = np.empty((4000, m))
    for row in U:
        assert L.draw_kt_into(rng, p, 0.0, row, 10**6) > 0
    assert body.contains(U).all()
    gauge = body(U)
    assert sps.kstest(gauge**m, "uniform").pvalue > P_MIN
    assert sps.kstest(body(_wrong_uniform(rng, p, 4000)) ** m, "uniform").pvalue < P_MIN
    cube = knorm_noise(rng, body, m, 1.0, size=4000) / rng.standard_gamma(m + 1.0, 4000)[:, None]  # r U / r
    for i in (0, 5, 10, 20, 21):  # a_1, q_1, c_12, b, e_1
        assert sps.ks_2samp(U[:, i], cube[:, i]).pvalue > P_MIN
    s = 0.7
    V = np.empty((4000, m))
    for row in V:
        L.draw_kt_into(rng, p, s, row, 10**6)
    nv = body(V)
    assert sps.kstest(nv, sps.gamma(m, scale=s).cdf).pvalue > P_MIN
    assert sps.kstest(nv, sps.gamma(m, scale=2 * s).cdf).pvalue < P_MIN
    assert sps.kstest(nv, sps.gamma(m + 1, scale=s).cdf).pvalue < P_MIN


@pytest.mark.parametrize("norm, radius", [("linf", lambda v: np.abs(v).max(1)), ("l1", lambda v: np.abs(v).sum(1)),
                                          ("kt", L.kt_norm(5))])
def test_mechanism_noise_scale(norm, radius):
    """The mechanism's noise has ||V|| ~ Gamma(d_T, Delta/eps); control: the scale 2 d_T / eps
    of the d_T * Delta_inf bound (ℓ1), or Delta doubled."""
    mech, eps, p = get_mechanism("linear", "ss", hardened=False, norm=norm), 2.0, 5
    rng = np.random.default_rng(4)
    V = np.array([mech.noise(p, eps, rng)[0] for _ in range(3000)])
    delta = {"linf": 2.0, "l1": 32.0, "kt": 1.0}[norm]
    assert mech.sensitivity(p) == delta
    assert sps.kstest(radius(V), sps.gamma(26, scale=delta / eps).cdf).pvalue > P_MIN
    wrong = 52.0 if norm == "l1" else 2 * delta
    assert sps.kstest(radius(V), sps.gamma(26, scale=wrong / eps).cdf).pvalue < P_MIN


def test_release_is_post_processing_of_T_plus_noise():
    x, y, stats = _data(5, 500, 5, y_bound=3.0)
    for norm, est in itertools.product(("linf", "l1", "kt"), ("pinv", "ridge")):
        mech = get_mechanism("linear", "ss", hardened=False, norm=norm, estimator=est)
        rel = mech.release(stats, 0.5, np.random.default_rng(9))
        V, tries = mech.noise(5, 0.5, np.random.default_rng(9))
        G, c = L.rebuild(L.stats_t(stats) + V, stats.n, 5)
        lam = 16 * 26 / 0.5 if est == "ridge" else 0.0
        np.testing.assert_allclose(rel.estimate, 3.0 * np.linalg.pinv(G + lam * np.eye(6)) @ c, rtol=1e-10)
        assert rel.info == {"sampler": "exact", "acceptance": 1.0 / tries, "steps": tries}
        assert mech.release(stats, 0.5, np.random.default_rng(9)).estimate.tolist() == rel.estimate.tolist()


def test_large_epsilon_limits_and_ridge_shrinks():
    x, y, stats = _data(3, 2000, 6, y_bound=2.0)
    beta = 2.0 * ols(stats)
    for norm in ("linf", "l1", "kt"):
        for est in ("pinv", "ridge"):
            rel = get_mechanism("linear", "ss", hardened=False, norm=norm, estimator=est).release(stats, 1e9, np.random.default_rng(0))
            np.testing.assert_allclose(rel.estimate, beta, rtol=1e-5, atol=1e-6)
        lam = 300.0  # lambda = n reg / 2
        rel = get_mechanism("linear", "ss", hardened=False, norm=norm, estimator="ridge", reg=2 * lam / 2000).release(
            stats, 1e9, np.random.default_rng(0))
        np.testing.assert_allclose(rel.estimate, 2.0 * np.linalg.solve(stats.G + lam * np.eye(4), stats.c), rtol=1e-6)
        assert np.linalg.norm(rel.estimate) < 0.95 * np.linalg.norm(beta)
    mech = get_mechanism("linear", "ss", hardened=False, estimator="ridge")
    assert mech.penalty(5, 0.5) == 16 * 26 / 0.5 and get_mechanism("linear", "ss", hardened=False).penalty(5, 0.5) == 0.0


def test_linf_beats_l1_prop_4_13():
    """p = 5, n = 1e4, eps = 1: ℓ∞ noise (variance 27*28/3*4 = 1008 per entry) beats ℓ1
    (2 * 32^2 = 2048) in error; control: ℓ∞ at eps/2 (variance 4032) does not."""
    problem = get_problem("linear", d=6, protocol="public_bound", y_bound=4.0)
    stats = problem.simulate(10**4, np.random.default_rng(7))
    err = {}
    for norm, eps in (("linf", 1.0), ("l1", 1.0), ("linf", 0.5)):
        mech, rng = get_mechanism("linear", "ss", hardened=False, norm=norm), np.random.default_rng(8)
        err[norm, eps] = np.array([problem.error(mech.release(stats, eps, rng).estimate) for _ in range(300)])
    assert np.median(err["linf", 1.0]) < np.median(err["l1", 1.0])
    assert sps.mannwhitneyu(err["linf", 1.0], err["l1", 1.0], alternative="less").pvalue < P_MIN
    assert sps.mannwhitneyu(err["linf", 0.5], err["l1", 1.0], alternative="less").pvalue > P_MIN


@pytest.mark.parametrize("d", [1, 2, 6])
def test_degenerate_data_releases(d):
    """All rows equal: X'X singular (rank 1); every norm and estimator releases finite values."""
    stats = stats_from_arrays(np.ones((15, d)), np.full(15, 0.5), y_bound=1.0)
    for norm, est in itertools.product(("linf", "l1", "kt"), ("pinv", "ridge")):
        for eps in (1.0, 1e3):
            rel = get_mechanism("linear", "ss", hardened=False, norm=norm, estimator=est).release(stats, eps, np.random.default_rng(0))
            assert rel.estimate.shape == (d,) and np.all(np.isfinite(rel.estimate))


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"norm": "l2"}, ValueError, "norm must be one of 'l1', 'linf', 'kt'"),
    ({"estimator": "lasso"}, ValueError, "estimator must be one of 'pinv', 'ridge'"),
    ({"estimator": "ridge", "reg": -1.0}, ValueError, "reg must be finite and > 0"),
    ({"estimator": "ridge", "reg": "1"}, TypeError, "reg must be a real number"),
    ({"reg": 1.0}, ValueError, "reg is only used with estimator='ridge'"),
    ({"max_tries": 0}, ValueError, "max_tries must be an integer >= 1"),
    ({"bound": 1.0}, TypeError, r"unknown option\(s\) \['bound'\]"),
])
def test_bad_options(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        get_mechanism("linear", "ss", hardened=False, **kwargs)


def test_registry_and_input_checks():
    assert allowed_options("linear", "ss") == ["norm", "estimator", "reg", "max_tries", "hardened"]
    mech = get_mechanism("linear", "ss", hardened=False, norm="kt")
    assert repr(mech) == "SufficientStatistics(norm='kt', estimator='pinv', reg=None, max_tries=1000000)"
    x, y, stats = _data(2, 50, 10)
    no_intercept = stats_from_arrays(np.column_stack([np.zeros(50), x]), y, y_bound=1.0)
    with pytest.raises(ValueError, match=r"G\[0, 0\] must equal n=50 \(column 0 of X must be the intercept"):
        mech.release(no_intercept, 1.0, np.random.default_rng(0))
    G = stats.G.copy()
    G[0, 1] = G[1, 0] = 51.0
    with pytest.raises(ValueError, match=r"\|G\[0, j\]\| <= n=50"):
        mech.release(stats._replace(G=G), 1.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"\|c_j\| <= n=50"):
        mech.release(stats._replace(c=stats.c * 100), 1.0, np.random.default_rng(0))
    G = stats.G.copy()
    G[1, 2] += 1.0
    with pytest.raises(ValueError, match="must be symmetric"):
        mech.release(stats._replace(G=G), 1.0, np.random.default_rng(0))
    with pytest.raises(TypeError, match="stats must be a kngflow.models.linear.problem.LinearStats"):
        mech.release((stats.G, stats.c), 1.0, np.random.default_rng(0))
    strict, p5 = get_mechanism("linear", "ss", hardened=False, norm="kt", max_tries=1), _data(5, 30, 0)[2]
    rng = np.random.default_rng(0)
    with pytest.raises(RuntimeError, match="max_tries=1"):
        for _ in range(100):  # acceptance about 0.36 at p = 5
            strict.release(p5, 1.0, rng)


@pytest.mark.parametrize("norm", ["kt", "linf", "l1"])
@pytest.mark.slow
def test_blackbox_audit(norm):
    """d = 2 (intercept + one covariate), public bound 1: the audit passes at eps = 1 on a pair
    with an intercept column (the problem's own audit records have none: column 0 takes the
    values -1, 0, 1, which :func:`check_intercept` rejects); control: run at 6 eps, flagged."""
    problem = get_problem("linear", d=2, protocol="public_bound", y_bound=1.0)
    rest = np.array([[1.0, 1.0, 0.0]] * 10 + [[1.0, -1.0, 0.0]] * 10)
    pair = AdjacentPair(rest, np.array([1.0, 1.0, 1.0]), np.array([1.0, -1.0, -1.0]))
    mech = get_mechanism("linear", "ss", hardened=False, norm=norm)
    kw = dict(pair=pair, draws=2500, pilot=500, seed=0)
    assert blackbox_audit(mech, problem, 1.0, **kw).passed
    assert not blackbox_audit(mech, problem, 1.0, run_epsilon=6.0, **kw).passed


@pytest.mark.parametrize("norm", ["linf", "l1", "kt"])
def test_statistic_audit_passes_and_catches_2_epsilon(norm):
    """Closed form over every pair of intercept records (p = 1): the loss is exactly 1 at
    epsilon = 1 (the sensitivity is attained) and 2 at 2 epsilon (caught)."""
    from kngflow.audit.exact import statistic_audit

    problem = get_problem("linear", d=2, protocol="public_bound", y_bound=1.0)
    mech = get_mechanism("linear", "ss", hardened=False, norm=norm)
    ok = statistic_audit(mech, problem, 1.0)
    assert ok.passed and ok.bound == pytest.approx(1.0, abs=1e-9), ok.summary()
    assert np.all(ok.pair.rest[:, 0] == 1.0) and ok.pair.record[0] == ok.pair.other[0] == 1.0
    bad = statistic_audit(mech, problem, 1.0, run_epsilon=2.0)
    assert not bad.passed and bad.bound == pytest.approx(2.0, abs=1e-9)

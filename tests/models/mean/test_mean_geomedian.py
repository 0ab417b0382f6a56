"""Mean (K-norm mechanism, truncated Gaussian) and geometric median (KNG by Metropolis).

Statistical checks use fixed seeds and a level of 1e-6 (KS); each has a negative control
(a wrong scale or law) that the same check must reject.
"""

import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from testkit import kngflow_cli, study_run
from scipy import optimize, stats

from kngflow.api import get_mechanism
from kngflow.models.geomedian.mechanisms import NonPrivate as GeoNonPrivate
from kngflow.api import get_problem
from kngflow.models.geomedian.problem import geomedian_data, geomedian_gradient
from kngflow.models.mean.problem import mean_data, norm_factor, radial_clip, row_norms
from kngflow.sweep import load_spec

LEVEL = 1e-6
CORNER = {"linf": np.array([1.0, 1.0]), "l2": np.array([1.0, 1.0]) / np.sqrt(2), "l1": np.array([1.0, 0.0])}


# ------------------------------------------------------------------ mean: data


def test_mean_simulation_is_unbiased_and_inside_the_ball():
    rng = np.random.default_rng(1)
    for norm in ("linf", "l2", "l1"):
        e = rng.standard_normal((10_000, 3))
        radial_clip(e, 0.4, norm)
        assert row_norms(e, norm).max() <= 0.4 * (1 + 1e-12)
    p = get_problem("mean", d=2, theta=[0.5, -0.3], sigma=1.0, data_norm="l2")
    xbars = np.array([p.simulate(200, rng).xbar for _ in range(2000)])
    se = xbars.std(0, ddof=1) / np.sqrt(len(xbars))
    z = np.abs(xbars.mean(0) - p.theta_star) / se
    assert z.max() < 5.0  # P(|Z| > 5 on either of 2 coordinates) < 1.2e-6
    # negative control: a mean shifted by 1% of the radius is detected by the same check
    assert (np.abs(xbars.mean(0) - (p.theta_star + 0.01)) / se).max() > 5.0


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(x=np.ones((3, 2)) * 1.5, radius=1.0), "x: every record"),
        (dict(x=np.ones((0, 2)), radius=1.0), "non-empty"),
        (dict(x=np.array([[np.nan, 0.0]]), radius=1.0), "finite"),
        (dict(x=np.ones((3, 2)), radius=0.0), "radius"),
        (dict(x=np.ones((3, 2)), radius=1.0, data_norm="l3"), "data_norm"),
    ],
)
def test_mean_data_bad_input(kw, match):
    with pytest.raises(ValueError, match=match):
        mean_data(**kw)


def test_mean_problem_bad_options():
    with pytest.raises(ValueError, match="theta"):
        get_problem("mean", d=2, theta=[1.0, 0.0])  # on the boundary of the l_inf ball
    with pytest.raises(ValueError, match="theta"):
        get_problem("mean", d=3, theta=[0.0, 0.0])
    with pytest.raises(ValueError, match="sigma"):
        get_problem("mean", sigma=-1.0)


# ------------------------------------------------------------------ mean: KNG = K-norm mechanism


@pytest.mark.parametrize("norm", ["l1", "l2", "linf"])
def test_mean_kng_radius_law(norm):
    """``||theta - xbar||_K ~ Gamma(d, 1/a)`` for the K-norm density ``exp(-a ||w||_K)``."""
    data = mean_data(np.array([[0.5, -0.5], [0.2, 0.1], [-0.3, 0.9]]), 1.0)
    rng = np.random.default_rng(2)
    mech = get_mechanism("mean", "kng", hardened=False, norm=norm)
    a = 1.0 * 2 * 3 / (4 * norm_factor("linf", norm, 2))  # eps n / (2 r c_K)
    assert mech.rate(data, 1.0) == pytest.approx(a)
    radii = np.array([row_norms(mech.release(data, 1.0, rng).estimate - data.xbar, norm) for _ in range(3000)])
    assert stats.kstest(radii, stats.gamma(2, scale=1 / a).cdf).pvalue > LEVEL
    # negative control: the generic KNG rate (factor 2) doubles the scale; rejected
    wrong = get_mechanism("mean", "kng", hardened=False, norm=norm, location_family=False)
    radii = np.array([row_norms(wrong.release(data, 1.0, rng).estimate - data.xbar, norm) for _ in range(3000)])
    assert stats.kstest(radii, stats.gamma(2, scale=1 / a).cdf).pvalue < LEVEL


@pytest.mark.parametrize("data_norm", ["l1", "l2", "linf"])
@pytest.mark.parametrize("norm", ["l1", "l2", "linf"])
def test_mean_kng_privacy_loss_is_exactly_epsilon_at_the_worst_pair(data_norm, norm):
    """Location family: equal normalising constants, so the loss is ``a ||xbar - xbar'||_K``.

    The worst pair changes one record between two opposite points of the data ball that
    are farthest apart in ``K``; the loss must be ``<= eps`` and (the scale being tight)
    equal to it.  The negative control, a rate that ignores the norm factor ``c_K``, is
    caught wherever ``c_K > 1``.
    """
    eps, n = 0.7, 4
    far = {("linf", "l1"): [1, 1], ("linf", "l2"): [1, 1], ("l2", "l1"): [0.5**0.5, 0.5**0.5], ("l2", "linf"): [1, 0]}
    x1 = np.array(far.get((data_norm, norm), CORNER[data_norm]), dtype=float)
    rest = [np.array([0.1, -0.2])] * (n - 1)
    D1 = mean_data(np.array([x1] + rest), 1.0, data_norm)
    D2 = mean_data(np.array([-x1] + rest), 1.0, data_norm)
    mech = get_mechanism("mean", "kng", hardened=False, norm=norm)
    theta = np.random.default_rng(3).uniform(-1, 1, (20_000, 2))
    theta = np.concatenate([theta, [D1.xbar, D2.xbar]])
    loss = np.abs(mech.log_density(D1, eps, theta) - mech.log_density(D2, eps, theta)).max()
    assert loss == pytest.approx(eps, rel=1e-9)
    c = norm_factor(data_norm, norm, 2)
    if c > 1:
        assert loss * c > eps  # the rate without c_K
    # the generic rate eps / (2 Delta) spends half of it
    half = get_mechanism("mean", "kng", hardened=False, norm=norm, location_family=False)
    assert np.abs(half.log_density(D1, eps, theta) - half.log_density(D2, eps, theta)).max() == pytest.approx(eps / 2)


# ------------------------------------------------------------------ mean: exponential mechanism


def _reference_truncated_gaussian(rng, xbar, s, norm, size):
    """Exact draws by rejection: box-truncated normal coordinates, accepted inside the ball."""
    out = []
    while len(out) < size:
        lo, hi = (-1 - xbar) / s, (1 - xbar) / s
        z = stats.truncnorm.rvs(lo, hi, loc=xbar, scale=s, size=(4 * size, 2), random_state=rng)
        out.extend(z[row_norms(z, norm) <= 1.0])
    return np.array(out[:size])


@pytest.mark.parametrize("norm", ["linf", "l2", "l1"])
def test_mean_exponential_matches_the_truncated_gaussian(norm):
    x = np.array([[0.5, 0.5], [0.5, 0.4], [0.3, 0.2]]) * (0.5 if norm == "l1" else 1.0)
    data = mean_data(x, 1.0, norm)
    mech = get_mechanism("mean", "exponential", hardened=False, gibbs_sweeps=30)
    eps = 20.0
    s = mech.sd(data, eps)
    assert s == pytest.approx(np.sqrt((2 * norm_factor(norm, "l2", 2)) ** 2 / (eps * 3)))
    rng = np.random.default_rng(4)
    draws = np.array([mech.release(data, eps, rng).estimate for _ in range(3000)])
    assert row_norms(draws, norm).max() <= 1.0 + 1e-12
    ref = _reference_truncated_gaussian(rng, data.xbar, s, norm, 6000)
    wrong = _reference_truncated_gaussian(rng, data.xbar, 1.5 * s, norm, 6000)
    for j in range(2):
        assert stats.ks_2samp(draws[:, j], ref[:, j]).pvalue > LEVEL / 2
    # negative control: a 1.5x wrong scale is rejected on some coordinate
    assert min(stats.ks_2samp(draws[:, j], wrong[:, j]).pvalue for j in range(2)) < LEVEL


GRID = np.linspace(-1, 1, 401)
SQUARE = np.stack(np.meshgrid(GRID, GRID, indexing="ij"), -1).reshape(-1, 2)


def _max_log_ratio(mech, eps, D1, D2, theta=SQUARE):
    l1, l2 = mech.log_density(D1, eps, theta), mech.log_density(D2, eps, theta)
    ok = np.isfinite(l1)
    assert (ok == np.isfinite(l2)).all()  # the support does not depend on the data
    l1, l2 = l1[ok] - np.logaddexp.reduce(l1[ok]), l2[ok] - np.logaddexp.reduce(l2[ok])
    return float(np.abs(l1 - l2).max())


@pytest.mark.parametrize("norm", ["linf", "l2", "l1"])
def test_mean_exponential_density_ratio_and_2eps_caught(norm):
    c = CORNER[norm]
    flip = c if norm == "l1" else c * np.array([1.0, -1.0])
    D1 = mean_data(np.array([flip] * 5), 1.0, norm)
    D2 = mean_data(np.array([-flip] + [flip] * 4), 1.0, norm)
    mech = get_mechanism("mean", "exponential", hardened=False)
    assert _max_log_ratio(mech, 1.0, D1, D2) <= 1.0 + 5e-3
    # negative control: the same mechanism at 2 eps breaks eps-DP on this pair
    assert _max_log_ratio(mech, 2.0, D1, D2) > 1.0 + 5e-3


def test_mean_mechanisms_bad_options():
    with pytest.raises(ValueError, match="norm"):
        get_mechanism("mean", "kng", hardened=False, norm="l3")
    with pytest.raises(TypeError, match="location_family"):
        get_mechanism("mean", "kng", hardened=False, location_family="yes")
    with pytest.raises(ValueError, match="gibbs_sweeps"):
        get_mechanism("mean", "exponential", hardened=False, gibbs_sweeps=0)


# ------------------------------------------------------------------ geometric median


def test_weiszfeld_matches_a_generic_minimiser_and_handles_ties():
    rng = np.random.default_rng(5)
    X = rng.standard_normal((301, 3)) * [1.0, 2.0, 0.5]
    est = GeoNonPrivate().release(geomedian_data(X), 1.0, rng).estimate
    ref = optimize.minimize(lambda t: np.linalg.norm(X - t, axis=1).sum(), X.mean(0), method="Nelder-Mead",
                            options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20_000}).x
    np.testing.assert_allclose(est, ref, atol=1e-6)
    # ties: six copies of the origin outweigh four other points, the median is the origin
    T = np.array([[0.0, 0.0]] * 6 + [[1.0, 0.0], [0.0, 1.0], [-1.0, 0.3], [0.2, -1.0]])
    np.testing.assert_allclose(GeoNonPrivate().release(geomedian_data(T), 1.0, rng).estimate, 0.0, atol=1e-9)
    # every record equal
    np.testing.assert_allclose(GeoNonPrivate().release(geomedian_data(np.ones((4, 2))), 1.0, rng).estimate, 1.0)


def test_geomedian_gradient_is_the_loss_gradient():
    X = np.random.default_rng(6).standard_normal((50, 2))
    theta, g = np.array([0.3, -0.2]), np.empty(2)
    geomedian_gradient(theta, (X,), g)
    loss = lambda t: np.linalg.norm(X - t, axis=1).sum()  # noqa: E731
    num = [(loss(theta + h) - loss(theta - h)) / 2e-6 for h in np.eye(2) * 1e-6]
    np.testing.assert_allclose(g, num, rtol=1e-6)


L1BALL = SQUARE[np.abs(SQUARE).sum(1) <= 1.0]


def test_geomedian_kng_metropolis_matches_the_normalised_density():
    X = np.array([[0.2, 0.1], [-0.5, 0.4], [0.6, -0.3], [0.0, 0.9], [-0.2, -0.7], [0.4, 0.4]])
    data = geomedian_data(X)
    mech = get_mechanism("geomedian", "kng", hardened=False, norm="l2", bound=1.0, steps=300)
    rng = np.random.default_rng(7)
    draws, info = mech.draw_metropolis(data, 2.0, rng, 3000)
    acc = info.acceptance
    assert 0.2 < acc.mean() < 0.8

    def ks(eps):
        logf = mech.log_density(data, eps, L1BALL)
        w = np.exp(logf - logf.max())
        order = np.argsort(L1BALL[:, 0], kind="stable")
        x, cdf = L1BALL[order, 0], np.cumsum(w[order]) / w.sum()
        emp = np.searchsorted(np.sort(draws[:, 0]), x, side="right") / len(draws)
        return np.abs(emp - cdf).max()

    critical = np.sqrt(-np.log(LEVEL / 2) / (2 * len(draws))) + 0.01  # KS level 1e-6, plus grid error
    assert ks(2.0) < critical
    assert ks(8.0) > critical  # negative control: the law at 4 eps is rejected


def test_geomedian_kng_density_ratio_and_2eps_caught():
    mech = get_mechanism("geomedian", "kng", hardened=False, norm="l2", bound=1.0)
    rest = [[0.9, 0.0], [0.9, 0.05], [0.85, -0.05]]
    D1, D2 = geomedian_data(np.array([[-1.0, 0.0]] + rest)), geomedian_data(np.array([[1.0, 0.0]] + rest))
    assert _max_log_ratio(mech, 1.0, D1, D2, L1BALL) <= 1.0 + 5e-3
    assert _max_log_ratio(mech, 2.0, D1, D2, L1BALL) > 1.0 + 5e-3


def test_geomedian_problem_and_bad_input():
    p = get_problem("geomedian", d=2, theta=[0.1, -0.2], sigma=0.5)
    D = p.simulate(20_000, np.random.default_rng(8))
    est = get_mechanism("geomedian", "nonprivate", hardened=False).release(D, 1.0, np.random.default_rng(0)).estimate
    assert p.error(est) < 0.05
    with pytest.raises(ValueError, match="x must be finite"):
        geomedian_data([[0.0, np.inf]])
    with pytest.raises(ValueError, match="non-empty"):
        geomedian_data(np.ones(3))
    with pytest.raises(ValueError, match="theta"):
        get_problem("geomedian", d=2, theta=[0.0])


# ------------------------------------------------------------------ workflows and the real command line

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("name", ["kng_mean", "kng_geomedian"])
def test_workflow_builds_its_problem_and_mechanisms(name):
    spec = load_spec(ROOT / "workflows" / f"{name}.toml")
    problem = spec.problem()
    data = problem.simulate(50, np.random.default_rng(0))
    for m in spec.mechanisms:
        rel = get_mechanism(spec.problem_name, m.kind, hardened=False, **m.options).release(data, 1.0, np.random.default_rng(1))
        assert rel.estimate.shape == (problem.d,) and np.isfinite(problem.error(rel.estimate))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["kng_mean", "kng_geomedian"])
def test_plugin_problem_runs_and_reports_through_the_cli(tmp_path, name, study_cluster):
    """The engine, store and report run a new problem without knowing its name."""
    text = (ROOT / "workflows" / f"{name}.toml").read_text()
    text = re.sub(r"(?m)^n = .*$", "n = [20, 200]", text)
    text = re.sub(r"(?m)^replicates = .*$", "replicates = 3", text).replace("steps = 1_000", "steps = 100")
    spec = tmp_path / f"{name}.toml"
    spec.write_text(text)
    store = tmp_path / "s.zarr"
    run = study_run(study_cluster, spec, store)
    assert run.returncode == 0, run.stdout + run.stderr
    ds = xr.open_zarr(store)
    assert int(ds.done.sum()) == ds.done.size and not int(ds.failed.sum())
    assert ds.attrs["problem"] == spec_problem(text)
    assert np.isfinite(ds.error.values).all()
    rep = kngflow_cli("report", store, "--out", tmp_path / "rep")
    assert rep.returncode == 0, rep.stdout + rep.stderr
    assert (tmp_path / "rep" / "report.md").exists() and (tmp_path / "rep" / "error_vs_n.png").exists()


def spec_problem(text: str) -> str:
    return re.search(r'(?m)^name = "(\w+)"', text.split("[problem]")[1]).group(1)


# ------------------------------------------------------------------ kngflow.audit on the new problems


@pytest.mark.parametrize(
    "problem, kind, popts, mopts",
    [
        ("mean", "exponential", {"data_norm": "linf"}, {}),
        ("mean", "exponential", {"data_norm": "l2"}, {}),
        ("mean", "exponential", {"data_norm": "l1"}, {}),
        ("geomedian", "kng", {}, {"norm": "l2", "bound": 1.0}),
    ],
)
@pytest.mark.slow
def test_exact_audit_passes_and_catches_2eps(problem, kind, popts, mopts):
    from kngflow.audit import exact_audit

    p = get_problem(problem, d=2, **popts)
    m = get_mechanism(problem, kind, hardened=False, **mopts)
    ok = exact_audit(m, p, 1.0, candidates=100, points=401)
    assert ok.passed and ok.bound <= 1.0 + ok.tolerance, ok.summary()
    bad = exact_audit(m, p, 1.0, run_epsilon=2.0, candidates=100, points=401)
    assert not bad.passed, bad.summary()


@pytest.mark.slow
@pytest.mark.parametrize("norm", ["linf", "l1"])
def test_blackbox_audit_of_the_k_norm_mean(norm):
    """The location family has no grid to normalise on R^d: black-box audit on the worst pair
    (one record between opposite corners of the l_inf ball, two records in all)."""
    from kngflow.audit import blackbox_audit
    from kngflow.audit.pairs import parse_pair

    p = get_problem("mean", d=2)
    m = get_mechanism("mean", "kng", hardened=False, norm=norm)
    pair = parse_pair("(0,0) + (1,1) -> (-1,-1)", 2)
    ok = blackbox_audit(m, p, 1.0, pair=pair, draws=20_000)
    assert ok.passed, ok.summary()
    bad = blackbox_audit(m, p, 1.0, run_epsilon=2.0, pair=pair, draws=20_000)
    assert not bad.passed, bad.summary()


@pytest.mark.slow
def test_kngflow_audit_command_on_the_new_problems():
    out = kngflow_cli("audit", "exponential", "--problem", "mean", "--problem-option", "data_norm=l2",
                      "--draws", "500", "--no-progress")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "exact audit of Exponential" in out.stdout and out.stdout.strip().endswith("verdict: PASS (declared epsilon=1)")
    # Theta = R^d: no grid audit; the black-box audit catches the 2 epsilon control
    out = kngflow_cli("audit", "kng", "--problem", "mean", "--option", "norm=l1", "--option", "hardened=false",
                      "--run-epsilon", "2", "--draws", "20000", "--pair", "(0,0) + (1,1) -> (-1,-1)", "--no-progress")
    assert out.returncode == 1 and "exact audit" not in out.stdout
    # (the bit-level audit flags the unhardened float release too: tests/audit/test_bit_audit.py)
    assert "verdict: FLAGGED by bit-level, black-box audit" in out.stdout
    for args, message in [
        (["kng", "--problem", "mean", "--problem-option", "protocol=paper"], "unknown option for problem 'mean'"),
        (["kng", "--problem", "geomedian", "--option", "bound"], "--option must be KEY=VALUE"),
        (["kng", "--problem", "geomedian", "--option", "radius=2"], "unknown option(s) ['radius']"),
        (["kng", "--problem", "mean", "--problem-option", "data_norm=l7"], "data_norm must be one of"),
    ]:
        out = kngflow_cli("audit", *args)
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2 and out.stdout == "" and len(lines) == 1 and message in lines[0], out.stderr

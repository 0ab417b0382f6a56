"""The PCA model (kngflow/models/pca): problem, sensitivities, the Bingham samplers, the mechanisms' audits.

Statistical tests use fixed seeds; each KS test asserts p > 1e-4 (or a Bonferroni share
of it), so a correct sampler fails with probability below 1e-4, and each has a negative
control (the law at twice the rate, i.e. 2 epsilon) that must fail the same test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from kngflow.audit import AdjacentPair, blackbox_audit, exact_audit, gaussian_delta, statistic_audit
from kngflow.mechanisms.base import check_mechanism_class
from kngflow.problems.base import check_problem_class
from kngflow.models.pca import MECHANISMS, PROBLEM
from kngflow.models.pca.mechanisms import (AnalyzeGauss, Exponential, ModSULQ, NonPrivate, SULQ,
                                           analytic_gaussian_sigma, check_pca_data)
from kngflow.models.pca.problem import (PCAData, PCAProblem, canonical_basis, captured_energy, pca_data,
                                        projection_distance, rescale, second_moment, upper_triangle)
from kngflow.models.pca.sampler import bingham_draws, bingham_gibbs, bingham_sphere, bingham_vector, haar_stiefel

P_MIN = 1e-4


def rotation(d: int, seed: int) -> np.ndarray:
    q, r = np.linalg.qr(np.random.default_rng(seed).standard_normal((d, d)))
    return q * np.sign(np.diag(r))


def quadratic(d: int, eigenvalues, seed: int) -> np.ndarray:
    Q = rotation(d, seed)
    return (Q * np.asarray(eigenvalues, float)) @ Q.T


# -- the problem -------------------------------------------------------------------------

def test_contract_and_declarations():
    assert PROBLEM is PCAProblem
    check_problem_class(PCAProblem)
    for cls in MECHANISMS.values():
        check_mechanism_class(cls)
    p = PCAProblem(d=5, k=2)
    assert p.d == 10 and p.theta_star.shape == (10,)
    U = p.as_basis(p.theta_star)
    np.testing.assert_allclose(U.T @ U, np.eye(2), atol=1e-12)
    assert p.error(p.theta_star) == pytest.approx(0.0, abs=1e-7)
    # invariance: another basis of the same subspace, signs flipped
    O = rotation(2, 3) * np.array([1.0, -1.0])
    assert p.error((U @ O).ravel()) == pytest.approx(0.0, abs=1e-7)
    # the orthogonal complement's best k directions are at the largest distance sqrt(2k)
    W = np.linalg.svd(np.eye(5) - U @ U.T)[0][:, :2]
    assert p.error(W.ravel()) == pytest.approx(2.0, abs=1e-9)
    energy = PCAProblem(d=5, k=2, error_measure="energy_loss")
    assert energy.error(p.theta_star) == pytest.approx(0.0, abs=1e-12)
    assert energy.error(W.ravel()) > 0.3
    assert p.error_measures(W.ravel())["energy_population"] == pytest.approx(1.0 - energy.error(W.ravel()))
    Sigma = p.population_moment
    np.testing.assert_allclose(Sigma @ U, U @ (U.T @ Sigma @ U), atol=1e-12)  # U is an eigenspace
    assert np.linalg.eigvalsh(U.T @ Sigma @ U).min() > np.linalg.eigvalsh(Sigma)[:3].max()


def test_options_are_validated():
    for kw, match in [({"d": 1}, "d must"), ({"d": 3, "k": 3}, "k must"), ({"k": 2, "spikes": [3.0]}, "spikes"),
                      ({"k": 2, "spikes": [2.0, 3.0]}, "non-increasing"), ({"spikes": [0.5]}, "spikes"),
                      ({"basis": "eye"}, "basis"), ({"error_measure": "angle"}, "error_measure")]:
        with pytest.raises(ValueError, match=match):
            PCAProblem(**kw)
    with pytest.raises(ValueError, match="bound"):
        rescale(np.ones((3, 2)), 1.0)
    np.testing.assert_allclose(rescale(np.array([[3.0, 4.0]]), 5.0), [[0.6, 0.8]])
    with pytest.raises(ValueError, match="k must"):
        pca_data(np.eye(2), k=3)
    with pytest.raises(TypeError, match="PCAData"):
        check_pca_data(np.eye(2))
    with pytest.raises(ValueError, match="symmetric"):
        check_pca_data(PCAData(np.array([[1.0, 0.2], [0.0, 1.0]]), 5, 1))
    with pytest.raises(ValueError, match="delta"):
        AnalyzeGauss(delta=0.0)
    with pytest.raises(ValueError, match="calibration"):
        AnalyzeGauss(calibration="rdp")
    with pytest.raises(ValueError, match="sweeps"):
        Exponential(sweeps=0)
    with pytest.raises(ValueError, match="epsilon <= 1"):
        AnalyzeGauss(calibration="classical").sigma(10, 2, 2.0)


def test_simulated_second_moment():
    p = PCAProblem(d=4, k=2, spikes=[5.0, 3.0])
    n = 200_000
    data = p.simulate(n, np.random.default_rng(0))
    assert data.n == n and data.k == 2 and np.trace(data.A) <= 1.0
    # entries are means of terms bounded by 1/2 (off-diagonal) or 1: well within 6 / sqrt(n)
    assert np.abs(data.A - p.population_moment).max() < 6 / math.sqrt(n)
    assert projection_distance(NonPrivate().estimate(data).reshape(4, 2), p.population_basis) < 0.05


def test_canonical_basis():
    rng = np.random.default_rng(5)
    V = haar_stiefel(6, 3, rng)
    B = canonical_basis(V)
    np.testing.assert_allclose(B.T @ B, np.eye(3), atol=1e-12)
    np.testing.assert_allclose(B @ B.T, V @ V.T, atol=1e-12)
    np.testing.assert_allclose(np.triu(B, 1), 0.0, atol=1e-12)  # the echelon shape
    np.testing.assert_allclose(canonical_basis(V @ rotation(3, 1) * np.array([-1.0, 1.0, -1.0])), B, atol=1e-10)
    # an axis-aligned subspace (a zero leading block) is handled
    np.testing.assert_allclose(canonical_basis(np.array([[0.0], [-1.0], [0.0]])).ravel(), [0.0, 1.0, 0.0])


def test_sensitivities():
    """The bounds derived in kngflow.models.pca.problem: sqrt(2)/n for the upper triangle of A,
    1 for the score n tr(V^T A V), both reached where the docstrings say."""
    rng = np.random.default_rng(11)
    d = 4
    x, y = rng.standard_normal((2, 20_000, d))
    x /= np.maximum(np.linalg.norm(x, axis=1), 1.0)[:, None] * rng.uniform(1.0, 1.5, (20_000, 1))
    y /= np.linalg.norm(y, axis=1)[:, None]
    M = np.einsum("ni,nj->nij", x, x) - np.einsum("ni,nj->nij", y, y)
    assert np.linalg.norm(upper_triangle(M), axis=1).max() <= math.sqrt(2) + 1e-12
    assert np.sqrt((M**2).sum(axis=(1, 2))).max() <= math.sqrt(2) + 1e-12
    e = np.eye(d)
    assert np.linalg.norm(upper_triangle(np.outer(e[0], e[0]) - np.outer(e[1], e[1]))) == pytest.approx(math.sqrt(2))
    V = np.array([haar_stiefel(d, 2, rng) for _ in range(2000)])
    du = np.einsum("nij,ni->nj", V, x[:2000]) ** 2 - np.einsum("nij,ni->nj", V, y[:2000]) ** 2
    assert np.abs(du.sum(axis=1)).max() <= 1.0 + 1e-12
    assert np.abs(np.sum((e[:, :2].T @ e[0]) ** 2) - np.sum((e[:, :2].T @ e[2]) ** 2)) == 1.0


# -- the exact k = 1 sampler ------------------------------------------------------------------

def test_kernel_equals_py_func():
    lam = np.array([0.0, 3.0, 40.0])
    a, ta = bingham_draws(np.random.default_rng(4), lam, 50, 1000)
    b, tb = bingham_draws.py_func(np.random.default_rng(4), lam, 50, 1000)
    np.testing.assert_array_equal(a, b)
    assert ta == tb


def circle_cdf(C: np.ndarray, cells: int = 1 << 17):
    """CDF of the angle of ``x ∝ exp(x^T C x)`` on the circle, normalised on a grid of ``cells``."""
    edges = np.linspace(-np.pi, np.pi, cells + 1)
    mid = 0.5 * (edges[1:] + edges[:-1])
    c, s = np.cos(mid), np.sin(mid)
    e = C[0, 0] * c * c + 2 * C[0, 1] * c * s + C[1, 1] * s * s
    cdf = np.concatenate([[0.0], np.cumsum(np.exp(e - e.max()))])
    cdf /= cdf[-1]
    return lambda t: np.interp(t, edges, cdf)


@pytest.mark.parametrize("eigenvalues, seed", [((0.8, 0.0), 1), ((6.0, 0.0), 2), ((400.0, 0.0), 3)])
def test_exact_sampler_circle(eigenvalues, seed):
    C = quadratic(2, eigenvalues, seed)
    cdf = circle_cdf(C)
    x, _ = bingham_sphere(C, np.random.default_rng(seed), 20_000)
    assert stats.kstest(np.arctan2(x[:, 1], x[:, 0]), cdf).pvalue > P_MIN
    x2, _ = bingham_sphere(2 * C, np.random.default_rng(seed + 100), 20_000)  # 2 epsilon
    assert stats.kstest(np.arctan2(x2[:, 1], x2[:, 0]), cdf).pvalue < P_MIN


def sphere_cdfs(C: np.ndarray, nz: int = 2000, nphi: int = 2048):
    """CDFs of ``z = x_3`` and of the angle of ``(x_1, x_2)`` for ``x ∝ exp(x^T C x)`` on the sphere of
    R^3, normalised on a grid (the area element is ``dz dphi``, Archimedes)."""
    ze, pe = np.linspace(-1, 1, nz + 1), np.linspace(-np.pi, np.pi, nphi + 1)
    z, p = 0.5 * (ze[1:] + ze[:-1])[:, None], 0.5 * (pe[1:] + pe[:-1])[None, :]
    s, c, sn = np.sqrt(1 - z * z), np.cos(p), np.sin(p)
    e = (s * s * (C[0, 0] * c * c + 2 * C[0, 1] * c * sn + C[1, 1] * sn * sn)
         + 2 * z * s * (C[0, 2] * c + C[1, 2] * sn) + C[2, 2] * z * z)
    w = np.exp(e - e.max())
    cz = np.concatenate([[0.0], np.cumsum(w.sum(axis=1))])
    cp = np.concatenate([[0.0], np.cumsum(w.sum(axis=0))])
    return (lambda t: np.interp(t, ze, cz / cz[-1])), (lambda t: np.interp(t, pe, cp / cp[-1]))


def sphere_ks(x: np.ndarray, C: np.ndarray) -> float:
    """Smaller KS p-value of the two angles (z, phi) against the grid law, Bonferroni-doubled."""
    cz, cp = sphere_cdfs(C)
    return 2 * min(stats.kstest(x[:, 2], cz).pvalue, stats.kstest(np.arctan2(x[:, 1], x[:, 0]), cp).pvalue)


@pytest.mark.parametrize("eigenvalues, seed", [((1.5, 0.7, 0.0), 4), ((60.0, 25.0, 0.0), 5)])
def test_exact_sampler_sphere(eigenvalues, seed):
    C = quadratic(3, eigenvalues, seed)
    x, _ = bingham_sphere(C, np.random.default_rng(seed), 20_000)
    assert sphere_ks(x, C) > P_MIN
    x2, _ = bingham_sphere(2 * C, np.random.default_rng(seed + 100), 20_000)
    assert sphere_ks(x2, C) < P_MIN


def test_exponential_release_is_the_exact_draw():
    """The mechanism releases the canonical form of one exact draw at rate eps n / 2."""
    p = PCAProblem(d=3, k=1)
    data = p.simulate(500, np.random.default_rng(1))
    rel = Exponential().release(data, 0.5, np.random.default_rng(9))
    v, tries = bingham_vector(np.random.default_rng(9), 0.5 * 500 / 2 * data.A, 1_000_000)
    np.testing.assert_allclose(rel.estimate, v * np.sign(v[0]), rtol=1e-12)
    assert rel.info == {"sampler": "exact", "acceptance": 1.0 / tries, "steps": tries}
    # the acceptance rate does not collapse with n (KGM's bounded efficiency)
    big = p.simulate(200_000, np.random.default_rng(2))
    rng = np.random.default_rng(3)
    steps = [Exponential().release(big, 1.0, rng).info["steps"] for _ in range(2000)]
    assert 2000 / sum(steps) > 0.3


# -- the Gibbs sampler (k > 1) ---------------------------------------------------------------

def gibbs(C, k, size, sweeps, seed):
    rng = np.random.default_rng(seed)
    d = C.shape[0]
    return np.array([bingham_gibbs(rng, C, haar_stiefel(d, k, rng), sweeps, 1_000_000)[0] for _ in range(size)])


@pytest.mark.slow
def test_gibbs_matches_exact_law():
    """d = 3, k = 2: tr(V^T C V) = tr C - w^T C w for the unit normal w of span(V), so w has the
    Bingham law exp(-w^T C w), which the exact sampler draws; the Gibbs chain's w must match it."""
    C = quadratic(3, (20.0, 8.0, 0.0), 6)
    V = gibbs(C, 2, 8000, 20, 7)
    w = np.cross(V[:, :, 0], V[:, :, 1])
    w *= np.random.default_rng(8).choice([-1.0, 1.0], size=(len(w), 1))  # the law is antipodally symmetric
    assert sphere_ks(w, -C) > P_MIN / 2  # Bonferroni with the two-sample test below
    exact, _ = bingham_sphere(-C, np.random.default_rng(10), 8000)  # and against exact draws, on |w^T u_1|
    u1 = np.linalg.eigh(C)[1][:, -1]
    assert stats.ks_2samp(np.abs(w @ u1), np.abs(exact @ u1)).pvalue > P_MIN / 2
    V2 = gibbs(2 * C, 2, 8000, 20, 11)  # 2 epsilon
    w2 = np.cross(V2[:, :, 0], V2[:, :, 1]) * np.random.default_rng(12).choice([-1.0, 1.0], size=(8000, 1))
    assert sphere_ks(w2, -C) < P_MIN


@pytest.mark.slow
def test_gibbs_matches_long_chains():
    """d = 5, k = 2: the default 20 sweeps against 100 sweeps, on the captured energy and on the
    squared cosine with the top eigenvector (two-sample KS, Bonferroni over the two)."""
    C = quadratic(5, (30.0, 22.0, 10.0, 4.0, 0.0), 13)
    top = np.linalg.eigh(C)[1][:, -1]

    def summary(Vs):
        return np.einsum("nia,ij,nja->n", Vs, C, Vs), np.sum(np.einsum("nia,i->na", Vs, top) ** 2, axis=1)

    short, long_ = summary(gibbs(C, 2, 2000, 20, 14)), summary(gibbs(C, 2, 2000, 100, 15))
    assert 2 * min(stats.ks_2samp(a, b).pvalue for a, b in zip(short, long_)) > P_MIN
    hot = summary(gibbs(2 * C, 2, 2000, 20, 16))
    assert 2 * min(stats.ks_2samp(a, b).pvalue for a, b in zip(hot, long_)) < P_MIN


# -- mechanisms ---------------------------------------------------------------------------------

@pytest.mark.parametrize("k", [1, 2])
def test_releases_are_canonical_bases(k):
    p = PCAProblem(d=4, k=k)
    data = p.simulate(20_000, np.random.default_rng(0))
    for kind, cls in MECHANISMS.items():
        rel = cls().release(data, 1.0, np.random.default_rng(1))
        V = p.as_basis(rel.estimate)
        np.testing.assert_allclose(V.T @ V, np.eye(k), atol=1e-10)
        np.testing.assert_allclose(canonical_basis(V), V, atol=1e-10)
        assert 0.0 <= p.error(rel.estimate) < 0.5, kind
        assert 0.5 < captured_energy(V, data.A) <= 1.0 + 1e-12
        assert set(rel.info) == {"sampler", "acceptance", "steps"}


def test_noise_calibrations():
    n, d, eps, delta = 1000, 3, 0.7, 1e-6
    sigma = AnalyzeGauss(delta=delta).sigma(n, d, eps)
    assert gaussian_delta(eps, math.sqrt(2) / n / sigma) == pytest.approx(delta, rel=1e-8)
    assert AnalyzeGauss(delta=delta, calibration="classical").sigma(n, d, eps) == pytest.approx(
        math.sqrt(2) / n * math.sqrt(2 * math.log(1.25 / delta)) / eps)
    smallest = analytic_gaussian_sigma(1.0, eps, delta)  # no smaller sigma is (eps, delta)-DP
    assert gaussian_delta(eps, 1.0 / (smallest * (1 - 1e-6))) > delta
    beta = (d + 1) / (n * eps) * math.sqrt(2 * math.log((d * d + d) / (2 * math.sqrt(2 * math.pi) * delta)))
    assert ModSULQ(delta=delta).sigma(n, d, eps) == pytest.approx(beta + 1 / (n * math.sqrt(eps)))
    assert SULQ(delta=delta).sigma(n, d, eps) == pytest.approx(math.sqrt(2 * math.log(1.25 * 6 / delta)) * 6 / (n * eps))


def test_kng_has_a_mode_at_every_eigenvector():
    """Why KNG is left out: on the circle its density exp(-eps/(2 Delta) ||grad_S l||), Delta = 1,
    puts as much mass near the bottom eigenvector as near the top one, at every n; the
    exponential mechanism's mass near the bottom one vanishes."""
    A = np.diag([0.6, 0.25])
    phi = np.linspace(-np.pi, np.pi, 400_000, endpoint=False)
    u = np.stack([np.cos(phi), np.sin(phi)], 1)
    Au = u @ A
    near_bottom = np.abs(np.abs(u[:, 1]) - 1.0) < 0.02  # within ~0.2 rad of ±e_2
    near_top = np.abs(np.abs(u[:, 0]) - 1.0) < 0.02
    for n in (1_000, 10_000):
        grad = n * (Au - np.sum(u * Au, 1)[:, None] * u)  # (I - v v^T) n A v
        kng = np.exp(-1.0 / 2.0 * np.linalg.norm(grad, axis=1))
        kng /= kng.sum()
        assert kng[near_bottom].sum() == pytest.approx(kng[near_top].sum(), rel=1e-3)
        assert kng[near_bottom].sum() > 0.49
        expo = np.exp(n / 2 * (np.sum(u * Au, 1) - 0.6))
        assert expo[near_bottom].sum() / expo.sum() < 1e-10


# -- privacy audits ------------------------------------------------------------------------------

@pytest.mark.parametrize("cls, declared, control, d", [
    (AnalyzeGauss, 1.0, 2.0, 2),
    (AnalyzeGauss, 1.0, 2.0, 3),
    (ModSULQ, 1.0, 4.0, 2),  # conservative: exact epsilon 0.31 at epsilon 1, so 2 epsilon is still private
    (SULQ, 0.5, 2.0, 2),  # conservative: (epsilon/m, delta/m) per entry, m = d(d+1)/2
])
def test_statistic_audits(cls, declared, control, d):
    p = PCAProblem(d=d, k=1)
    ok = statistic_audit(cls(), p, declared)
    assert ok.passed and ok.bound <= declared * (1 + 1e-9)
    bad = statistic_audit(cls(), p, declared, run_epsilon=control)
    assert not bad.passed
    if cls is AnalyzeGauss:  # the analytic calibration is tight
        assert ok.bound == pytest.approx(declared, rel=1e-6)


@pytest.mark.slow
def test_exponential_exact_audit():
    """d = 2, k = 1: the density is computable; the searched pair brings the loss close to epsilon."""
    p, m = PCAProblem(d=2, k=1), Exponential()
    ok = exact_audit(m, p, 1.0, candidates=150, keep=2, points=401, seed=1)
    assert ok.passed and ok.bound > 0.9
    bad = exact_audit(m, p, 1.0, run_epsilon=2.0, candidates=150, keep=2, points=401, seed=1)
    assert not bad.passed and bad.bound > 1.8


@pytest.mark.slow
def test_exponential_blackbox_audit():
    """k = 1: a pair whose loss at 2 epsilon sits on an event of probability about 0.06 (three records
    along e_2 and e_1 -> e_2), where the black-box test has the power to see it."""
    p, m = PCAProblem(d=2, k=1), Exponential()
    e1, e2 = np.eye(2)
    pair = AdjacentPair(np.tile(e2, (3, 1)), e1, e2)
    assert blackbox_audit(m, p, 1.0, pair=pair, draws=10_000, seed=1).passed
    assert not blackbox_audit(m, p, 1.0, run_epsilon=2.0, pair=pair, draws=20_000, seed=1).passed  # bound 1.21


@pytest.mark.slow
def test_gibbs_blackbox_audit():
    """k = 2 (Gibbs), d = 3: black-box at epsilon; the control runs at 4 epsilon because at 2 epsilon
    the black-box test has no power here: on the pairs tried (r records e_3 and m records e_2
    besides e_1 -> e_2, r <= 8, m <= 4), the best threshold event on the exact law would give a
    lower bound of 1.01 with 20 000 releases (computed on a grid of the sphere), and the audit
    budget here is 5 000 (at 4 epsilon the bound is 1.85)."""
    p, m = PCAProblem(d=3, k=2), Exponential()
    e = np.eye(3)
    pair = AdjacentPair(np.vstack([np.tile(e[2], (4, 1)), np.tile(e[1], (2, 1))]), e[0], e[1])
    assert blackbox_audit(m, p, 1.0, pair=pair, draws=5_000, seed=2).passed
    assert not blackbox_audit(m, p, 1.0, run_epsilon=4.0, pair=pair, draws=5_000, seed=2).passed


# -- a sweep through package.module:Class references --------------------------------------------------

SPEC = """
name = "pca_references"
seed = 7

[problem]
name = "kngflow.models.pca.problem:PCAProblem"
d = 3
k = 2

[grid]
n = [200, 2_000]
epsilon = [1.0]
replicates = 3

[[mechanisms]]
label = "nonprivate"
kind = "kngflow.models.pca.mechanisms:NonPrivate"

[[mechanisms]]
label = "analyze_gauss"
kind = "kngflow.models.pca.mechanisms:AnalyzeGauss"
delta = 1e-5

[[mechanisms]]
label = "exponential"
kind = "kngflow.models.pca.mechanisms:Exponential"
sweeps = 10
"""


def test_sweep_through_references(tmp_path):
    from kngflow.store import open_dataset, read_flags
    from kngflow.sweep.engine import prepare_store, run_task
    from kngflow.sweep.plan import plan_tasks
    from kngflow.sweep.spec import parse_spec

    spec = parse_spec(SPEC)
    path = tmp_path / "pca.zarr"
    meta, _ = prepare_store(spec, path)
    done, _ = read_flags(path)
    for task in plan_tasks(meta, done):
        run_task(str(path), spec.text, meta, task)
    ds = open_dataset(path)
    assert int(ds["done"].sum()) == 3 * 2 * 3
    assert ds.sizes["coef"] == 6
    V = ds["estimate"].values.reshape(3, 2, 1, 3, 3, 2)
    gram = np.einsum("...ia,...ib->...ab", V, V)
    np.testing.assert_allclose(gram, np.broadcast_to(np.eye(2), gram.shape), atol=1e-9)
    err = ds["error"].sel(mechanism="nonprivate").values
    assert np.all(err[1] < err[0].max() + 0.5) and np.all(np.isfinite(err))
    assert int(ds["sampler"].sel(mechanism="exponential").values.min()) == 2  # gibbs


def test_digits_real_data():
    """scikit-learn's digits: the problem reads the shipped exact statistic (no scikit-learn at run
    time); the reference is the non-private subspace."""
    from kngflow.models.pca.problem import DigitsPCAProblem, digits_moment

    p = DigitsPCAProblem(k=2, error_measure="energy_loss")
    assert p.real_data and p.d == 128
    data = p.simulate(1797, np.random.default_rng(0))
    assert data.A is p.simulate(1797, np.random.default_rng(1)).A and not data.A.flags.writeable
    assert np.trace(data.A) <= 1.0 and data.n == 1797
    assert p.error(NonPrivate().release(data, 1.0, np.random.default_rng(0)).estimate) == pytest.approx(0.0, abs=1e-12)
    rel = Exponential().release(data, 1.0, np.random.default_rng(2))
    assert 0.0 < p.error(rel.estimate) < 1.0 and rel.info["sampler"] == "gibbs"
    with pytest.raises(ValueError, match="1797"):
        p.simulate(1000, np.random.default_rng(0))
    sklearn = pytest.importorskip("sklearn")  # the shipped statistic is the data set's, bit for bit
    from kngflow.models.pca.problem import load_digits_records

    assert sklearn.__version__
    x = load_digits_records()
    assert x.shape == (1797, 64) and np.sqrt((x * x).sum(axis=1)).max() <= 1.0
    np.testing.assert_array_equal(digits_moment(), second_moment(x))

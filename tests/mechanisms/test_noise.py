"""Tests for kngflow.noise: exact K-norm noise (Awan–Slavković Props 4.1, 4.3, 4.13, Algs 5–8).

Statistical tests use fixed seeds and per-test false-failure rates ≤ 1e-5
(Bonferroni over the entries checked); each has a negative control that runs
the same check on a deliberately wrong law and asserts that it fails.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from kngflow._jit import jit
from kngflow.noise import (
    draw_body_into,
    draw_l1_into,
    draw_l2_into,
    draw_linf_into,
    draw_uniform_body_into,
    knorm_noise,
)
from kngflow.norms import ConvexBodyNorm, example_kt_norm, get_norm, kt_contains

ALPHA = 1e-5  # per statistical test


# ---------------------------------------------------------------------------------------
# helpers (jitted wrappers exercise the kernels from inside numba)
# ---------------------------------------------------------------------------------------


@jit
def _misprinted_kt_contains(u):
    """The set printed in the paper's Example 8.1: |u2| <= 2 - (|u1| - 1)^2 for |u1| > 1."""
    a = abs(u[0])
    b = abs(u[1])
    if a > 2.0:
        return False
    if a <= 1.0:
        return b <= 2.0
    return b <= 2.0 - (a - 1.0) * (a - 1.0)


@jit
def _box_contains(u):
    return True


@jit
def _l1_ball(u):
    return np.abs(u).sum() <= 1.0


@jit(cache=False)  # specialised on a function argument: not cacheable
def _uniform_rows(rng, contains, box, out):
    for k in range(out.shape[0]):
        if draw_uniform_body_into(rng, contains, box, out[k], 1000000) < 0:
            raise RuntimeError("exhausted")


@jit(cache=False)  # passes the global dispatcher kt_contains as a value: not cacheable
def _kernels_from_jit(rng, scale, out3):
    """Calls the three ℓp kernels from inside numba."""
    draw_l1_into(rng, scale, out3[0])
    draw_l2_into(rng, scale, out3[1])
    draw_linf_into(rng, scale, out3[2])
    return draw_body_into(rng, kt_contains, 2.0, scale, out3[3, :2], 1000)


def _ks_gamma(r, shape, scale):
    return stats.kstest(r, stats.gamma(shape, scale=scale).cdf).pvalue


# ---------------------------------------------------------------------------------------
# unit tests
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("norm,dim", [("l1", 3), ("l2", 4), ("linf", 12), ("kt", 2)])
def test_shapes_and_dtype(norm, dim):
    nm = example_kt_norm() if norm == "kt" else norm
    rng = np.random.default_rng(0)
    one = knorm_noise(rng, nm, dim, 0.5)
    assert one.shape == (dim,) and one.dtype == np.float64
    many = knorm_noise(rng, nm, dim, 2, size=7)
    assert many.shape == (7, dim) and np.isfinite(many).all()
    assert knorm_noise(rng, nm, dim, 1.0, size=np.int64(1)).shape == (1, dim)


def test_validation_errors():
    rng = np.random.default_rng(0)
    with pytest.raises(TypeError, match="rng"):
        knorm_noise(np.random.RandomState(0), "l1", 2, 1.0)
    with pytest.raises(TypeError, match="rng"):
        knorm_noise(0, "l1", 2, 1.0)
    with pytest.raises(ValueError, match=r"norm must be one of \['l1', 'l2', 'linf'\]"):
        knorm_noise(rng, "l3", 2, 1.0)
    with pytest.raises(TypeError, match="norm"):
        knorm_noise(rng, 1, 2, 1.0)
    for bad in (0, -3):
        with pytest.raises(ValueError, match="dim must be a positive int"):
            knorm_noise(rng, "l1", bad, 1.0)
    for bad in (2.0, True, "2"):
        with pytest.raises(TypeError, match="dim"):
            knorm_noise(rng, "l1", bad, 1.0)
    for bad in (0.0, -1.0, np.inf, np.nan):
        with pytest.raises(ValueError, match="scale must be a finite real number > 0"):
            knorm_noise(rng, "linf", 2, bad)
    for bad in ("1", None, True):
        with pytest.raises(TypeError, match="scale"):
            knorm_noise(rng, "linf", 2, bad)
    with pytest.raises(ValueError, match="size must be None or a positive int"):
        knorm_noise(rng, "l2", 2, 1.0, size=0)
    with pytest.raises(TypeError, match="size"):
        knorm_noise(rng, "l2", 2, 1.0, size=2.5)
    with pytest.raises(TypeError, match="size"):
        knorm_noise(rng, "l2", 2, 1.0, size=(2, 3))
    with pytest.raises(ValueError, match="dim must equal"):
        knorm_noise(rng, example_kt_norm(), 3, 1.0)
    with pytest.raises(ValueError, match="max_tries"):
        knorm_noise(rng, example_kt_norm(), 2, 1.0, max_tries=0)


@pytest.mark.parametrize("jitted", [True, False])
def test_rejection_exhaustion_raises(jitted):
    # the ℓ1 ball fills 1/20! of its box in 20 dimensions: never accepted
    contains = _l1_ball if jitted else _l1_ball.py_func
    nm = ConvexBodyNorm(contains, 1.0, name="tiny")
    with pytest.raises(RuntimeError, match="max_tries=50"):
        knorm_noise(np.random.default_rng(0), nm, 20, 1.0, max_tries=50)
    # the same body in 1-D is the whole box and never rejects
    assert knorm_noise(np.random.default_rng(0), nm, 1, 1.0, size=3, max_tries=1).shape == (3, 1)


@pytest.mark.parametrize("kernel", [draw_l1_into, draw_l2_into, draw_linf_into])
def test_kernel_equals_py_func_and_batch(kernel):
    name = {draw_l1_into: "l1", draw_l2_into: "l2", draw_linf_into: "linf"}[kernel]
    m, n, scale = 6, 50, 1.7
    a = np.empty((n, m))
    b = np.empty((n, m))
    rng_a, rng_b = np.random.default_rng(42), np.random.default_rng(42)
    for k in range(n):
        kernel(rng_a, scale, a[k])
        kernel.py_func(rng_b, scale, b[k])
    np.testing.assert_array_equal(a, b)
    # a batch from knorm_noise is n successive kernel calls on the same generator
    np.testing.assert_array_equal(knorm_noise(np.random.default_rng(42), name, m, scale, size=n), a)
    np.testing.assert_array_equal(knorm_noise(np.random.default_rng(42), name, m, scale), a[0])
    # the generator state advanced identically
    assert rng_a.random() == rng_b.random()


def test_body_kernel_equals_py_func_and_python_fallback():
    n, scale = 200, 0.8
    a = np.empty((n, 2))
    b = np.empty((n, 2))
    rng_a, rng_b = np.random.default_rng(7), np.random.default_rng(7)
    for k in range(n):
        assert draw_body_into(rng_a, kt_contains, 2.0, scale, a[k], 100) > 0
        assert draw_body_into.py_func(rng_b, kt_contains, 2.0, scale, b[k], 100) > 0
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(knorm_noise(np.random.default_rng(7), example_kt_norm(), 2, scale, size=n), a)
    # a ConvexBodyNorm with a plain Python membership test takes the Python path, same draws
    slow = ConvexBodyNorm(kt_contains.py_func, 2.0, dim=2)
    assert not slow.is_jitted
    np.testing.assert_array_equal(knorm_noise(np.random.default_rng(7), slow, 2, scale, size=n), a)


def test_kernels_callable_from_jit():
    out = np.zeros((4, 5))
    tries = _kernels_from_jit(np.random.default_rng(3), 1.0, out)
    assert tries >= 1
    assert np.all(out[:3] != 0.0) and np.all(out[3, :2] != 0.0) and np.all(out[3, 2:] == 0.0)
    out2 = np.zeros((4, 5))
    _kernels_from_jit.py_func(np.random.default_rng(3), 1.0, out2)
    np.testing.assert_array_equal(out, out2)


# ---------------------------------------------------------------------------------------
# Prop 4.3: ‖V‖_K ~ Gamma(m, scale)
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("norm,m", [("l1", 5), ("l2", 3), ("linf", 12), ("kt", 2)])
def test_norm_of_noise_is_gamma(norm, m):
    nm = example_kt_norm() if norm == "kt" else get_norm(norm)
    scale, n = 0.7, 20000
    r = nm(knorm_noise(np.random.default_rng(100 + m), nm, m, scale, size=n))
    assert _ks_gamma(r, m, scale) > ALPHA
    # negative controls, same KS at the same threshold
    r_wrong = nm(knorm_noise(np.random.default_rng(200 + m), nm, m, 1.1 * scale, size=n))
    assert _ks_gamma(r_wrong, m, scale) < ALPHA
    assert _ks_gamma(r, m + 1, scale) < ALPHA  # Prop 4.1's Gamma(m+1) is the wrong law for ‖V‖


# ---------------------------------------------------------------------------------------
# Prop 4.13 covariances (and ℓ2 by the same method)
# ---------------------------------------------------------------------------------------


def _moment_zscores(v, var, fourth, cross):
    """z-scores of the sample means, E[V_i^2] and E[V_i V_j] (i<j) under a centred law.

    ``var`` = E V_i², ``fourth`` = E V_i⁴, ``cross`` = E V_i² V_j² (i ≠ j); V is symmetric,
    so the means are 0 with variance var/n, mean(V_i²) has variance (fourth − var²)/n and
    mean(V_i V_j) has mean 0 and variance cross/n.
    """
    n, m = v.shape
    z = list(v.mean(0) / np.sqrt(var / n))
    z += list((np.mean(v * v, 0) - var) / np.sqrt((fourth - var**2) / n))
    iu = np.triu_indices(m, 1)
    z += list(((v.T @ v) / n)[iu] / np.sqrt(cross / n))
    return np.abs(np.array(z))


def _zthreshold(k):
    return stats.norm.isf(ALPHA / (2 * k))  # two-sided, Bonferroni over k entries


def _check_moments(v, var, fourth, cross):
    z = _moment_zscores(v, var, fourth, cross)
    return z.max() < _zthreshold(z.size)


def test_prop_4_13_covariances():
    m, delta, eps, n = 5, 0.5, 2.0, 40000
    # ℓ1-Mech with ℓ1 sensitivity approximated by mΔ∞: Var = 2m²Δ²/ε² I
    var1 = 2 * m**2 * delta**2 / eps**2
    b = m * delta / eps
    laws = {"l1": (b, var1, 24 * b**4, 4 * b**4)}
    # ℓ∞-Mech: Var = (m+1)(m+2)/3 Δ²/ε² I
    s = delta / eps
    varinf = (m + 1) * (m + 2) / 3 * delta**2 / eps**2
    er4 = (m + 1) * (m + 2) * (m + 3) * (m + 4) * s**4  # E r^4, r ~ Gamma(m+1, s)
    laws["linf"] = (s, varinf, er4 / 5, er4 / 9)  # E U^4 = 1/5, E U^2 = 1/3
    # ℓ2: V = ρθ, ρ ~ Gamma(m, s), θ uniform on the sphere: E V_i² = (m+1)s²,
    # E V_i⁴ = Eρ⁴·3/(m(m+2)) = 3(m+1)(m+3)s⁴, E V_i²V_j² = (m+1)(m+3)s⁴
    laws["l2"] = (s, (m + 1) * s**2, 3 * (m + 1) * (m + 3) * s**4, (m + 1) * (m + 3) * s**4)
    for i, (name, (scale, var, fourth, cross)) in enumerate(laws.items()):
        v = knorm_noise(np.random.default_rng(300 + i), name, m, scale, size=n)
        assert _check_moments(v, var, fourth, cross), name
        # negative control: 10% too large a scale must fail the same check
        w = knorm_noise(np.random.default_rng(400 + i), name, m, 1.1 * scale, size=n)
        assert not _check_moments(w, var, fourth, cross), name
    # the two formulas of Prop 4.13 agree with the samplers' own scales
    assert var1 == pytest.approx(2 * b**2) and varinf == pytest.approx((m + 1) * (m + 2) * s**2 / 3)


# ---------------------------------------------------------------------------------------
# uniformity of the rejection sampler on K_T
# ---------------------------------------------------------------------------------------


def _kt_u1_cdf(u):
    """CDF of the u1-marginal of Uniform(K_T): density h(|u1|)/(20/3) on [-2, 2]."""
    t = np.minimum(np.abs(u), 2.0)
    big = t > 1
    H = np.where(big, 2 + 2 * (t - 1) - (2 / 3) * (t - 1) ** 3, 2 * t)
    return 0.5 + np.sign(u) * H / (20 / 3)


def _kt_uniformity_pvalue(u):
    a = np.abs(u[:, 0])
    h = np.where(a <= 1, 2.0, 2 - 2 * (a - 1) ** 2)
    p1 = stats.kstest(u[:, 0], _kt_u1_cdf).pvalue
    p2 = stats.kstest(u[:, 1] / h, stats.uniform(-1, 2).cdf).pvalue
    return min(1.0, 2 * min(p1, p2))  # Bonferroni over the two KS tests


@pytest.mark.slow
def test_rejection_sampler_uniform_on_kt():
    n = 20000
    u = np.empty((n, 2))
    _uniform_rows(np.random.default_rng(5), kt_contains, 2.0, u)
    assert example_kt_norm().contains(u).all()
    assert _kt_uniformity_pvalue(u) > ALPHA
    # negative controls: uniform on the paper's misprinted set, and on the box
    for wrong in (_misprinted_kt_contains, _box_contains):
        w = np.empty((n, 2))
        _uniform_rows(np.random.default_rng(6), wrong, 2.0, w)
        assert _kt_uniformity_pvalue(w) < ALPHA


def test_kt_noise_is_radius_times_uniform():
    """Algorithm 8 with the r of Prop 4.1: V/r would be Uniform(K_T); check V's u1-law via scale.

    E‖V‖_KT = 2·scale (Gamma(2, scale)); the printed Algorithm 8 (no r) would give
    ‖U‖_KT ~ Beta(2, 1) with mean 2/3 whatever the scale.
    """
    kt = example_kt_norm()
    r = kt(knorm_noise(np.random.default_rng(9), kt, 2, 3.0, size=4000))
    assert abs(r.mean() - 6.0) < 6 * np.sqrt(2 * 9.0 / 4000)

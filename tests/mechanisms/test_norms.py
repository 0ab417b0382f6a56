"""Tests for kngflow.norms: ℓp norms, gauge norms of convex bodies, the K_T example."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate

from kngflow._jit import jit
from kngflow.norms import (
    KT_AREA,
    ConvexBodyNorm,
    L1Norm,
    L2Norm,
    LinfNorm,
    example_kt_norm,
    gauge_one,
    get_norm,
    kt_contains,
    kt_half_height,
)


@jit
def _l1_ball(u):
    return np.abs(u).sum() <= 1.0


@jit
def _linf_ball(u):
    return np.abs(u).max() <= 1.0


@jit
def _l2_ball_radius3(u):
    return np.sqrt((u * u).sum()) <= 3.0


def _py_l1_ball(u):
    return float(np.abs(u).sum()) <= 1.0


# ---------------------------------------------------------------------------------------
# ℓp norms and get_norm
# ---------------------------------------------------------------------------------------


def test_lp_values_and_shapes():
    rng = np.random.default_rng(0)
    v = rng.normal(size=(4, 3, 5))
    np.testing.assert_allclose(get_norm("l1")(v), np.abs(v).sum(-1))
    np.testing.assert_allclose(get_norm("l2")(v), np.linalg.norm(v, axis=-1))
    np.testing.assert_allclose(get_norm("linf")(v), np.abs(v).max(-1))
    for name in ("l1", "l2", "linf"):
        nm = get_norm(name)
        assert nm.name == name and nm.box == 1.0 and nm.dim is None
        assert nm(v).shape == (4, 3)
        assert isinstance(nm([3.0, -4.0]), float)
        assert nm.contains(v).shape == (4, 3)
    assert get_norm("l2")([3.0, -4.0]) == 5.0
    assert get_norm("l1").contains([0.5, -0.5]) is True
    assert get_norm("l1").contains([0.5, -0.51]) is False
    assert get_norm("linf").contains([1.0, -1.0]) is True


def test_get_norm_validation():
    assert isinstance(get_norm("l1"), L1Norm)
    assert isinstance(get_norm("l2"), L2Norm)
    assert isinstance(get_norm("linf"), LinfNorm)
    kt = example_kt_norm()
    assert get_norm(kt) is kt
    with pytest.raises(ValueError, match=r"norm must be one of \['l1', 'l2', 'linf'\]"):
        get_norm("l3")
    with pytest.raises(ValueError, match="norm"):
        get_norm("L1")
    with pytest.raises(TypeError, match="norm"):
        get_norm(2)
    with pytest.raises(TypeError, match="norm"):
        get_norm(None)


def test_convex_body_validation():
    with pytest.raises(TypeError, match="contains"):
        ConvexBodyNorm(1.0, 1.0)
    with pytest.raises(ValueError, match="box"):
        ConvexBodyNorm(_l1_ball, 0.0)
    with pytest.raises(ValueError, match="box"):
        ConvexBodyNorm(_l1_ball, np.inf)
    with pytest.raises(TypeError, match="box"):
        ConvexBodyNorm(_l1_ball, "1")
    with pytest.raises(ValueError, match="dim"):
        ConvexBodyNorm(_l1_ball, 1.0, dim=0)
    with pytest.raises(TypeError, match="dim"):
        ConvexBodyNorm(_l1_ball, 1.0, dim=2.0)
    with pytest.raises(ValueError, match="dim"):
        example_kt_norm()(np.zeros(3))


# ---------------------------------------------------------------------------------------
# gauge by bisection
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("jitted", [True, False])
def test_gauge_matches_known_norms(jitted):
    rng = np.random.default_rng(1)
    v = rng.standard_cauchy(size=(200, 4)) * 10.0 ** rng.uniform(-5, 5, size=(200, 1))
    if jitted:
        cases = [
            (ConvexBodyNorm(_l1_ball, 1.0, name="l1b"), np.abs(v).sum(-1)),
            (ConvexBodyNorm(_linf_ball, 1.0), np.abs(v).max(-1)),
            # loose box (5 > 3): the bracket still works
            (ConvexBodyNorm(_l2_ball_radius3, 5.0), np.linalg.norm(v, axis=-1) / 3.0),
        ]
    else:
        cases = [(ConvexBodyNorm(_py_l1_ball, 1.0), np.abs(v).sum(-1))]
    for nm, want in cases:
        assert nm.is_jitted is jitted
        got = nm(v)
        assert got.shape == (200,)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
        assert nm(np.zeros(4)) == 0.0
        # homogeneity and symmetry
        np.testing.assert_allclose(nm(-2.5 * v[:20]), 2.5 * want[:20], rtol=1e-12)
        np.testing.assert_array_equal(nm.contains(v / (want[:, None] * (1 + 1e-9))), True)
        np.testing.assert_array_equal(nm.contains(v / (want[:, None] * (1 - 1e-9))), False)


def test_gauge_one_inside_jit():
    @jit(cache=False)
    def wrap(u):
        return gauge_one(_l1_ball, 1.0, u)

    u = np.array([0.25, -0.5, 1.0])
    assert abs(wrap(u) - 1.75) <= 1e-12 * 1.75


# ---------------------------------------------------------------------------------------
# the K_T example
# ---------------------------------------------------------------------------------------


def test_kt_membership_boundary():
    kt = example_kt_norm()
    assert kt.name == "kt" and kt.dim == 2 and kt.box == 2.0 and kt.is_jitted
    inside = np.array([[0, 0], [1, 2], [-1, -2], [0.5, 2.0], [2, 0], [-2, 0], [1.5, 1.5], [1.5, -1.5]], float)
    outside = np.array([[0, 2.0001], [2.0001, 0], [1.5, 1.5001], [2, 1.0], [-1.9, 0.5], [1.2, 1.95]], float)
    assert kt.contains(inside).all()
    assert not kt.contains(outside).any()
    # (2, 1) lies inside the paper's misprinted set 2 - (1 - u1)^2 but not in K_T
    assert 1.0 <= 2 - (1 - 2.0) ** 2
    # hand-computed gauges: (1.5, 1) hits the parabola at t = 0.9
    np.testing.assert_allclose(kt(np.array([[1.5, 1.0], [1.0, 2.0], [2.0, 0.0], [0.0, 1.0]])),
                               [0.9, 1.0, 1.0, 0.5], rtol=1e-12)


def test_kt_contains_jit_equals_py_func_and_nests():
    rng = np.random.default_rng(2)
    u = rng.uniform(-2.2, 2.2, size=(5000, 2))
    a = np.array([kt_contains(x) for x in u])
    b = np.array([kt_contains.py_func(x) for x in u])
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(example_kt_norm().contains(u), a)

    @jit(cache=False)
    def count_inside(x):
        c = 0
        for k in range(x.shape[0]):
            if kt_contains(x[k]):
                c += 1
        return c

    assert count_inside(u) == a.sum()


def test_kt_area_and_half_height():
    # area 40/3 from the derived boundary
    area = 2 * integrate.quad(kt_half_height, -2, 2, points=[-1, 1])[0]
    assert abs(area - 40 / 3) < 1e-10 and KT_AREA == 40 / 3
    assert kt_half_height(0.3) == 2.0 and kt_half_height(2.0) == 0.0
    assert kt_half_height(1.5) == pytest.approx(1.5)


def test_kt_is_convex_hull_of_adjacent_output_space():
    """Sensitivity of T = (Σx, Σ2x²) is 1 in the K_T norm and 2 in ℓ∞; S_T ⊂ K_T, hull touches."""
    kt = example_kt_norm()
    g = np.linspace(-1, 1, 201)
    x1, x2 = np.meshgrid(g, g)
    u = np.stack([(x1 - x2).ravel(), (2 * x1**2 - 2 * x2**2).ravel()], axis=-1)
    vals = kt(u)
    assert vals.max() <= 1 + 1e-12
    assert vals.max() >= 1 - 1e-12  # attained, e.g. x1 = 1, x2 = -1
    assert np.abs(u).max() == 2.0  # ℓ∞ sensitivity
    # S_T = {|u2| <= 2|u1|(2 - |u1|)}: the adjacent differences satisfy it with equality at the edge
    assert np.all(np.abs(u[:, 1]) <= 2 * np.abs(u[:, 0]) * (2 - np.abs(u[:, 0])) + 1e-12)
    # every boundary point of K_T is a convex combination of points of S_T:
    # for |u1| <= 1 the chord between (-1, ±2) and (1, ±2); (1, 2) comes from x1 = 1, x2 = 0
    for p in [(1.0, 2.0), (-1.0, 2.0), (1.0, -2.0)]:
        assert abs(p[1]) <= 2 * abs(p[0]) * (2 - abs(p[0])) + 1e-15
    # and for 1 < |u1| <= 2 the boundary is in S_T itself
    s = np.linspace(1, 2, 11)
    assert np.allclose(2 * s * (2 - s), kt_half_height(s))

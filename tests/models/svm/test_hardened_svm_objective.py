"""Hardened SVM objective perturbation (CMS 2011 and Awan & Slavković's extension, Huber hinge).

As the logistic one (tests/mechanisms/test_hardened_objective.py): the same noise and the same solve,
the minimiser certified in double-double and snapped from it.  The Huber hinge's Hessian
jumps where a margin crosses 1 ± h, so no public bound on the density's log-Lipschitz
constant exists and the coupling route is used: (ε, (1 + e^ε) 2 d 2^-48)-DP.  The
double-double gradient is checked against 60-digit decimal arithmetic on records that
straddle the band's edges (the plain float64 gradient is the negative control); the release
at n = 10^6 lies on a grid of 2^-4 of its spread and moves by less than one cell; the
bit-level audit passes the hardened release; `kngflow audit` prints the guarantee and its
exact audit passes at ε while the 2ε control is caught.
"""

from __future__ import annotations

import math
from decimal import Decimal, getcontext

import numpy as np
import pytest

from testkit import kngflow_cli
from kngflow.api import get_mechanism, get_problem
from kngflow.audit import bit_audit, exact_audit
from kngflow.models.svm.mechanisms import OBJECTIVE_ETA_BITS
from kngflow.models.svm.problem import huber_gradient, huber_gradient_dd, svm_data

getcontext().prec = 60

KINDS = [("objective", {}), ("objective_ext", {"norm": "linf"}), ("objective_ext", {"norm": "l1", "q": 0.7})]


def exact_huber_gradient(X, y, h, hi, lo):
    h = Decimal(float(h))
    out = [Decimal(0)] * X.shape[1]
    w = [Decimal(float(a)) + Decimal(float(b)) for a, b in zip(hi, lo)]
    for i in range(X.shape[0]):
        z = Decimal(float(y[i])) * sum(Decimal(float(X[i, j])) * w[j] for j in range(X.shape[1]))
        d1 = Decimal(0) if z > 1 + h else Decimal(-1) if z < 1 - h else -(1 + h - z) / (2 * h)
        for j in range(X.shape[1]):
            out[j] += d1 * Decimal(float(y[i])) * Decimal(float(X[i, j]))
    return out


def test_the_double_double_huber_gradient_is_within_its_bound_and_float64_is_not():
    rng = np.random.default_rng(1)
    n, m, h = 600, 3, 0.3
    X = rng.normal(size=(n, m))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    hi = np.array([0.7, -2.5, 1.3])
    lo = np.array([3e-17, -1e-17, 2e-17])
    margins = y * (X @ hi)
    # records on each side of both band edges, some a rounding away from them
    X[:20] *= ((1.0 + h) / margins[:20])[:, None] * (1.0 + rng.uniform(-1e-12, 1e-12, 20))[:, None]
    X[20:40] *= ((1.0 - h) / margins[20:40])[:, None] * (1.0 + rng.uniform(-1e-12, 1e-12, 20))[:, None]
    X = X / max(1.0, float(np.linalg.norm(X, axis=1).max()))
    data = svm_data(X, y, h)
    gh, gl = np.empty(m), np.empty(m)
    bound = huber_gradient_dd(hi, lo, data.X, data.y, data.h, gh, gl)
    exact = exact_huber_gradient(data.X, data.y, h, hi, lo)
    err = max(float(abs(Decimal(gh[j]) + Decimal(gl[j]) - exact[j])) for j in range(m))
    assert err <= bound < 1e-25, (err, bound)
    g = np.empty(m)
    huber_gradient(hi, (data.X, data.y, float(h), 0.0), g)
    assert max(float(abs(Decimal(g[j]) - exact[j])) for j in range(m)) > 1e6 * bound  # control


@pytest.fixture(scope="module")
def million():
    return get_problem("svm").simulate(1_000_000, np.random.default_rng(6))


@pytest.mark.parametrize("kind, options", KINDS)
def test_hardened_svm_objective_perturbation_releases_at_n_1e6_on_a_grid_of_its_spread(kind, options, million):
    data = million
    mech = get_mechanism("svm", kind, **options)
    assert mech.hardened  # the default: no hardened=False needed any more
    h = mech.hardening(data, 1.0)
    assert h.site == "sampler" and h.lipschitz is None and h.eta == math.ldexp(h.grid, -OBJECTIVE_ETA_BITS)
    eps2, delta2 = mech.hardened_guarantee(data, 1.0)
    assert eps2 == 1.0 and 0.0 < delta2 <= (1.0 + math.e) * 2 * data.d * 2.0**-48 * 1.0001
    plain = get_mechanism("svm", kind, hardened=False, tol=1e-300, **options).release(data, 1.0,
                                                                                     np.random.default_rng(3))
    rel = mech.release(data, 1.0, np.random.default_rng(3))
    assert np.array_equal(rel.estimate / h.grid, np.round(rel.estimate / h.grid))
    assert np.max(np.abs(rel.estimate - plain.estimate)) < h.grid
    # the grid is 2^-4 of the spread proxy, itself below the release's spread: the snapping
    # adds at most 1/1024 of the noise's variance; here the noise moves w by far more than a cell
    spread = np.std([get_mechanism("svm", kind, hardened=False, **options).release(data, 1.0, np.random.default_rng(
        s)).estimate for s in range(8)], axis=0)
    assert np.all(spread > 4 * h.grid), (spread, h.grid)


def test_unhardened_svm_objective_releases_are_unchanged():
    """``hardened=False`` keeps the float64 path bit for bit (the stores' path)."""
    from kngflow.models.svm.mechanisms import ObjectivePerturbation

    data = get_problem("svm").simulate(500, np.random.default_rng(2))
    a = ObjectivePerturbation().release(data, 1.0, np.random.default_rng(4)).estimate  # direct: unhardened
    b = get_mechanism("svm", "objective", hardened=False).release(data, 1.0, np.random.default_rng(4)).estimate
    c = get_mechanism("svm", "objective").release(data, 1.0, np.random.default_rng(4)).estimate
    assert np.array_equal(a, b) and not np.array_equal(b, c)


@pytest.mark.parametrize("kind, options", KINDS[:2])
def test_hardened_svm_objective_passes_the_bit_level_audit(kind, options):
    from kngflow.registry import problem_class

    prob = get_problem("svm", **problem_class("svm").audit_options({}))
    mech = get_mechanism("svm", kind, **options)
    assert mech.hardened
    res = bit_audit(mech, prob, 1.0, draws=3_000, seed=3)
    assert res.passed and res.bound == 0.0, res.summary()


def test_hardened_svm_objective_exact_audit_passes_and_catches_the_2eps_control():
    from test_svm import _OBJ_PAIRS, _pair  # the searched worst pair

    problem = get_problem("svm", d=2)
    mech = get_mechanism("svm", "objective")
    assert mech.hardened
    pairs = [_pair(_OBJ_PAIRS["objective"])]
    ok = exact_audit(mech, problem, 1.0, pairs=pairs, points=101)
    assert ok.passed and ok.bound > 0.6, ok.summary()
    bad = exact_audit(mech, problem, 1.0, run_epsilon=2.0, pairs=pairs, points=101)
    assert not bad.passed, bad.summary()


@pytest.mark.slow
def test_kngflow_audit_prints_the_guarantee_of_the_hardened_svm_objective():
    out = kngflow_cli("audit", "objective", "--problem", "svm", "--draws", "2000", "--no-progress",
                      "--pair", "(1,0,1) + (0,1,1) -> (-1,0,-1)")  # a given pair: no search (~10 s)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "verdict: PASS" in out.stdout and "(1, 5.3e-14)-DP" in out.stdout, out.stdout
    assert "hardened: estimate (from its double-double value) snapped to the grid 2^-" in out.stdout, out.stdout
    assert "-DP at declared (ε, δ) = (1, 0)" in out.stdout, out.stdout

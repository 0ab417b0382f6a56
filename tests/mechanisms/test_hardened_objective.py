"""Hardened logistic objective perturbation at every n: the minimiser certified in double-double.

The certificate needs the gradient in double-double (kngflow.kernels.dd.exp_dd and
kngflow.models.logistic.problem.logistic_gradient_dd, each with an error bound); both are
checked against 60-digit decimal arithmetic, with the plain float64 computation as the
negative control (it errs by more than the bound).  The hardening's rounding bound follows
the grid, so the grid stays at 2^-10 of the density's scale at n = 10^6 (where a bound from
float64 sums could not be met) and the release works there.
"""

from __future__ import annotations

import math
from decimal import Decimal, getcontext

import numpy as np
import pytest

from kngflow.api import get_mechanism, get_problem
from kngflow.kernels.dd import EXP_DD_REL, exp_dd
from kngflow.models.logistic.problem import logistic_data, logistic_gradient, logistic_gradient_dd

getcontext().prec = 60


def test_the_double_double_exponential_is_within_its_relative_bound():
    rng = np.random.default_rng(0)
    xs = np.concatenate([-rng.exponential(3.0, 3000), -rng.uniform(0.0, 650.0, 1000), [0.0, -0.3465735902799727]])
    worst_dd = worst_plain = 0.0
    for x in xs:
        x = float(x)
        exact = Decimal(x).exp()
        h, l = exp_dd(x, 0.0)
        worst_dd = max(worst_dd, float(abs((Decimal(h) + Decimal(l) - exact) / exact)))
        worst_plain = max(worst_plain, float(abs((Decimal(math.exp(x)) - exact) / exact)))
    assert worst_dd <= EXP_DD_REL, worst_dd
    assert worst_plain > 1e6 * EXP_DD_REL  # control: float64's exp is far outside the bound


def exact_gradient(X, y, beta):
    out = [Decimal(0)] * X.shape[1]
    for i in range(X.shape[0]):
        t = sum(Decimal(float(X[i, j])) * Decimal(float(beta[j])) for j in range(X.shape[1]))
        w = 1 / (1 + (-t).exp()) - Decimal(float(y[i]))
        for j in range(X.shape[1]):
            out[j] += w * Decimal(float(X[i, j]))
    return out


def test_the_double_double_logistic_gradient_is_within_its_bound_and_float64_is_not():
    rng = np.random.default_rng(1)
    n, m = 400, 3
    X = rng.uniform(-1.0, 1.0, (n, m))
    y = (rng.random(n) < 0.4).astype(np.float64)
    data = logistic_data(X, y)
    beta = np.array([0.7, -2.5, 30.0])  # a large coefficient: saturated and tiny terms both
    gh, gl = np.empty(m), np.empty(m)
    bound = logistic_gradient_dd(beta, np.zeros(m), data.X, data.y, gh, gl)
    exact = exact_gradient(data.X, data.y, beta)
    err = max(float(abs(Decimal(gh[j]) + Decimal(gl[j]) - exact[j])) for j in range(m))
    assert err <= bound < 1e-24, (err, bound)
    g = np.empty(m)
    logistic_gradient(beta, (data.X, data.y), g)
    assert max(float(abs(Decimal(g[j]) - exact[j])) for j in range(m)) > 1e6 * bound  # control


@pytest.fixture(scope="module")
def million():
    return get_problem("logistic").simulate(1_000_000, np.random.default_rng(6))


@pytest.mark.parametrize("kind", ["objective_ext", "objective", "objective_chaudhuri"])
def test_hardened_objective_perturbation_releases_at_n_1e6_on_a_grid_of_its_density_scale(kind, million):
    data = million
    mech = get_mechanism("logistic", kind)
    h = mech.hardening(data, 1.0)
    assert h.site == "sampler" and h.eta == math.ldexp(h.grid, -32)
    assert h.grid <= math.ldexp(1.0 / h.lipschitz, -10)  # the finest grid the route allows
    eps2, delta2 = mech.hardened_guarantee(data, 1.0)
    assert 1.0 < eps2 < 1.0 + 1e-7 and delta2 == 0.0
    # the unhardened release solved to float64's resolution, which at this n is about 1e-8
    # (the summed gradient resolves about 1e-9 n): the same noise, the same minimiser
    plain = get_mechanism("logistic", kind, hardened=False, tol=1e-300).release(data, 1.0, np.random.default_rng(3))
    plain = plain.estimate
    rel = mech.release(data, 1.0, np.random.default_rng(3))
    assert np.array_equal(rel.estimate / h.grid, np.round(rel.estimate / h.grid))
    assert np.max(np.abs(rel.estimate - plain)) <= 1e-6

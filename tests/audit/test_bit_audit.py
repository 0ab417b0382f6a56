"""The bit-level audit: events impossible in exact arithmetic, counted in float64 (Mironov 2012).

The issue's reproducer: the mean of D1 = {(1, 1), (0, 0)} against D2 = {(-1, -1), (0, 0)}
(radius 1, l-infinity data ball, epsilon = 1).  Naive float addition of K-norm noise to the
mean leaks far more than epsilon; a release snapped to a public grid coarser than the float
error of the computation does not.
"""

from __future__ import annotations

import numpy as np
import pytest

from testkit import kngflow_cli
from kngflow.audit import audit_plan, bit_audit
from kngflow.audit.pairs import AdjacentPair
from kngflow.mechanisms import Mechanism, Release
from kngflow.api import get_mechanism
from kngflow.mechanisms.claims import BlackBox
from kngflow.api import get_problem

PAIR = AdjacentPair(np.array([[0.0, 0.0]]), np.array([1.0, 1.0]), np.array([-1.0, -1.0]))


class LaplaceMean(Mechanism):
    """Laplace noise of scale 2 r d / (n epsilon) per coordinate of the mean; ``grid`` > 0 snaps
    the release to multiples of ``grid`` (a power of two)."""

    def __init__(self, *, grid=0.0):
        self.grid = float(grid)

    def release(self, data, epsilon, rng):
        x = data.xbar + rng.laplace(0.0, 2.0 * data.radius * data.d / (data.n * epsilon), size=data.d)
        return Release(np.round(x / self.grid) * self.grid if self.grid else x)

    def privacy_claim(self):
        return BlackBox(additive_centre=lambda data: data.xbar)


@pytest.mark.parametrize("norm", ["linf", "l2", "l1"])
@pytest.mark.slow
def test_naive_kngflow_kmeans_are_flagged(norm):
    res = bit_audit(get_mechanism("mean", "kng", hardened=False, norm=norm), get_problem("mean", d=2), 1.0, pair=PAIR,
                    draws=50_000)
    assert not res.passed and res.bound > 3.0, res.summary()


def test_a_snapped_release_passes_and_the_same_release_unsnapped_is_flagged():
    problem = get_problem("mean", d=2)
    snapped = bit_audit(LaplaceMean(grid=2.0**-30), problem, 1.0, pair=PAIR, draws=50_000)
    assert snapped.passed and snapped.bound == 0.0 and not any(snapped.details["counts"]), snapped.summary()
    naive = bit_audit(LaplaceMean(), problem, 1.0, pair=PAIR, draws=50_000)
    assert not naive.passed and naive.bound > 3.0, naive.summary()


def test_the_audit_runs_where_the_claim_names_an_additive_centre():
    problem = get_problem("mean", d=2)
    assert audit_plan(get_mechanism("mean", "kng", hardened=False), problem) == ["bit-level", "black-box"]
    assert "bit-level" not in audit_plan(get_mechanism("mean", "exponential", hardened=False), problem)
    assert "bit-level" in audit_plan(get_mechanism("logistic", "output", hardened=False), get_problem("logistic", beta=[0.5]))
    with pytest.raises(ValueError, match="names no additive centre"):
        bit_audit(get_mechanism("mean", "exponential", hardened=False), problem, 1.0)


@pytest.mark.slow
def test_kngflow_audit_prints_the_bit_level_verdict():
    out = kngflow_cli("audit", "kng", "--problem", "mean", "--option", "norm=linf", "--option", "hardened=false",
                      "--draws", "20000", "--pair", "(0,0) + (1,1) -> (-1,-1)", "--no-progress")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "bit-level audit of KNG" in out.stdout and "events impossible in exact arithmetic" in out.stdout
    assert "verdict: FLAGGED by bit-level audit" in out.stdout

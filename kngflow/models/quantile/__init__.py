"""The 1-D quantile (KNG paper §4.1: KNG is Smith's PrivateQuantile), sampled exactly."""

from __future__ import annotations

from kngflow.models.quantile import mechanisms
from kngflow.models.quantile import problem

#: the problem class
PROBLEM = problem.QuantileProblem
#: the mechanism kinds of this problem
MECHANISMS = {
    "nonprivate": mechanisms.NonPrivate,
    "kng": mechanisms.KNG,
    "exponential": mechanisms.Exponential,
}

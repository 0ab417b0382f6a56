"""Quantile regression (KNG paper §4.5, Figure 2): exact LP, KNG and the exponential mechanism."""

from __future__ import annotations

from kngflow.models.quantreg import mechanisms
from kngflow.models.quantreg import problem

#: the problem class
PROBLEM = problem.QuantRegProblem
#: the mechanism kinds of this problem
MECHANISMS = {
    "nonprivate": mechanisms.NonPrivate,
    "kng": mechanisms.KNG,
    "exponential": mechanisms.Exponential,
}

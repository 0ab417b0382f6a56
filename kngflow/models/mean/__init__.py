"""The mean of records in a public ball (KNG paper §4.1): KNG is the K-norm mechanism."""

from __future__ import annotations

from kngflow.models.mean import mechanisms
from kngflow.models.mean import problem

#: the problem class
PROBLEM = problem.MeanProblem
#: the mechanism kinds of this problem
MECHANISMS = {
    "nonprivate": mechanisms.NonPrivate,
    "kng": mechanisms.KNG,
    "exponential": mechanisms.Exponential,
}

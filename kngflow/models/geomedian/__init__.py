"""The geometric median (KNG paper §4.4)."""

from __future__ import annotations

from kngflow.models.geomedian import mechanisms
from kngflow.models.geomedian import problem

#: the problem class
PROBLEM = problem.GeoMedianProblem
#: the mechanism kinds of this problem
MECHANISMS = {
    "nonprivate": mechanisms.NonPrivate,
    "kng": mechanisms.KNG,
}

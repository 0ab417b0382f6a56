"""k-means clustering (Sarwate's survey §7.2.1): ``k`` centres in the unit ball as a release.

The release is ``k`` centres sorted by first coordinate and flattened row-major
(:mod:`kngflow.models.kmeans.problem`); the problem declares the NICV ratio and the matched
distance between centre sets as its errors.  Mechanisms: non-private Lloyd (k-means++),
DPLloyd and the grid method EUGkM, kind ``eugkm`` (:mod:`kngflow.models.kmeans.mechanisms`).
"""

from __future__ import annotations

from kngflow.models.kmeans import mechanisms
from kngflow.models.kmeans import problem

#: the problem class
PROBLEM = problem.KMeansProblem
#: the mechanism kinds of this problem
MECHANISMS = {
    "nonprivate": mechanisms.NonPrivate,
    "dplloyd": mechanisms.DPLloyd,
    "eugkm": mechanisms.Grid,
}

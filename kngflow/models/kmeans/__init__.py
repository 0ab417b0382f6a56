"""k-means clustering (Sarwate's survey §7.2.1): ``k`` centres in the unit ball as a release.

The release is ``k`` centres sorted by first coordinate and flattened row-major
(:mod:`kngflow.models.kmeans.problem`); the problem declares the NICV ratio and the matched
distance between centre sets as its errors.  Mechanisms: non-private Lloyd (k-means++),
DPLloyd and the grid method EUGkM, kind ``eugkm`` (:mod:`kngflow.models.kmeans.mechanisms`), the
exponential mechanism over centre sets on a public grid, kind ``expmech``
(:mod:`kngflow.models.kmeans.expmech`), and compressive k-means from a Laplace-noised
random-Fourier sketch, kind ``sketch`` (:mod:`kngflow.models.kmeans.sketch`).
"""

from __future__ import annotations

from kngflow.models.kmeans import expmech
from kngflow.models.kmeans import mechanisms
from kngflow.models.kmeans import problem
from kngflow.models.kmeans import sketch

#: the problem class
PROBLEM = problem.KMeansProblem
#: the mechanism kinds of this problem
MECHANISMS = {
    "nonprivate": mechanisms.NonPrivate,
    "dplloyd": mechanisms.DPLloyd,
    "eugkm": mechanisms.Grid,
    "expmech": expmech.ExpMech,
    "sketch": sketch.Sketch,
}

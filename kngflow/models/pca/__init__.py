"""Principal components (Sarwate's survey §7.2.3): a subspace-valued release.

The release is an orthonormal ``d x k`` basis in canonical form, stored row-major as the
problem's ``d * k`` coefficients; the problem declares the subspace-invariant error
measures (:mod:`kngflow.models.pca.problem`).  Mechanisms: non-private, Analyze Gauss,
MOD-SULQ, SULQ and the exponential mechanism (:mod:`kngflow.models.pca.mechanisms`).
"""

from __future__ import annotations

from kngflow.models.pca import mechanisms
from kngflow.models.pca import problem

#: the problem class
PROBLEM = problem.PCAProblem
#: the mechanism kinds of this problem
MECHANISMS = {
    "nonprivate": mechanisms.NonPrivate,
    "analyze_gauss": mechanisms.AnalyzeGauss,
    "mod_sulq": mechanisms.ModSULQ,
    "sulq": mechanisms.SULQ,
    "exponential": mechanisms.Exponential,
}

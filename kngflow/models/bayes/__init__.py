"""Private Bayesian inference (Sarwate's survey §7.2.2): the Beta–Bernoulli posterior as a release.

The release is a posterior summary, ``(mean, lower, upper)`` of the credible interval or the
point estimate alone, declared by the problem with its error measures (posterior-mean
error, miss of the interval, its width: :mod:`kngflow.models.bayes.problem`).  Mechanisms:
the exact conjugate posterior, the naive and the noise-aware posterior of a Laplace-noised
count, and one posterior sample (:mod:`kngflow.models.bayes.mechanisms`; the exact
noise-aware mixture in :mod:`kngflow.models.bayes.posterior`).
"""

from __future__ import annotations

from kngflow.models.bayes import mechanisms
from kngflow.models.bayes import problem

#: the problem class
PROBLEM = problem.BetaBernoulliProblem
#: the mechanism kinds of this problem
MECHANISMS = {
    "nonprivate": mechanisms.NonPrivate,
    "naive": mechanisms.Naive,
    "noise_aware": mechanisms.NoiseAware,
    "ops": mechanisms.OPS,
}

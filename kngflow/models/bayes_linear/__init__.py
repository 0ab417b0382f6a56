"""Private Bayesian linear regression (Sarwate's survey §7.2.2): a normal–inverse-gamma posterior as a release.

The model (:mod:`kngflow.models.bayes_linear.problem`): ``y = (1, x)'beta + N(0, sigma^2)``
with ``sigma^2`` unknown, covariates in a declared domain (the box or the unit ℓ2 ball), the
response clipped to a public bound, the conjugate NIG prior; the data kept as the augmented
Gram matrix, whose upper triangle ``T`` is the statistic (ℓ1 sensitivity derived there).
The release is a posterior summary of one coefficient, ``(mean, lower, upper)`` of its
credible interval or its posterior mean, declared by the problem with its error measures
(posterior-mean error, miss of the interval, its width), as the Beta–Bernoulli model
(:mod:`kngflow.models.bayes`) does.  Mechanisms (:mod:`kngflow.models.bayes_linear.mechanisms`):
the exact conjugate posterior, and the naive and the noise-aware posterior of the
Laplace-noised statistic (the sampler in :mod:`kngflow.models.bayes_linear.posterior`).
"""

from __future__ import annotations

from kngflow.models.bayes_linear import mechanisms
from kngflow.models.bayes_linear import problem

#: the problem class
PROBLEM = problem.BayesLinearProblem
#: the mechanism kinds of this problem
MECHANISMS = {
    "nonprivate": mechanisms.NonPrivate,
    "naive": mechanisms.Naive,
    "noise_aware": mechanisms.NoiseAware,
}

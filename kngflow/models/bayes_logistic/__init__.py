"""Bayesian logistic regression with a truncated Gaussian prior, for one posterior sample (Sarwate's survey §7.2.2).

Records ``(x, y)`` with ``x`` in a declared ball (default ``||x||_2 <= 1``) and ``y`` in
``{-1, +1}``; prior ``N(0, s^2 I)`` truncated to the public ball ``||theta||_2 <= R``
(:mod:`kngflow.models.bayes_logistic.problem`).  Mechanisms: the non-private posterior mean
and one sample of the posterior tempered to ε (Wang, Fienberg & Smola 2015;
:mod:`kngflow.models.bayes_logistic.mechanisms`), drawn exactly by rejection from a
Gaussian envelope (:mod:`kngflow.models.bayes_logistic.posterior`).
"""

from __future__ import annotations

from kngflow.models.bayes_logistic import mechanisms
from kngflow.models.bayes_logistic import problem

#: the problem class
PROBLEM = problem.BayesLogisticProblem
#: the mechanism kinds of this problem
MECHANISMS = {
    "nonprivate": mechanisms.NonPrivate,
    "ops": mechanisms.OPS,
}

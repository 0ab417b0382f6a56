"""Linear regression (KNG paper §4.2, Figure 1; Awan & Slavković §6.2–6.3, Figures 3–4).

``problem``: Algorithm 1's data (or a real data set) as streaming sufficient statistics;
``mechanisms``: non-private OLS, KNG and the exponential mechanism (exact samplers, Gibbs,
Metropolis: ``sampler``); ``objective``: objective perturbation; ``ss``: noisy sufficient statistics;
``erm``: the private-ERM baselines on the squared loss.
"""

from __future__ import annotations

from kngflow.models.linear import erm
from kngflow.models.linear import mechanisms
from kngflow.models.linear import objective
from kngflow.models.linear import problem
from kngflow.models.linear import ss

#: the problem class
PROBLEM = problem.LinearProblem
#: the mechanism kinds of this problem
MECHANISMS = {
    "nonprivate": mechanisms.NonPrivate,
    "kng": mechanisms.KNG,
    "exponential": mechanisms.Exponential,
    "objective": objective.ObjectivePerturbation,
    "objective_ext": objective.ExtendedObjectivePerturbation,
    "ss": ss.SufficientStatistics,
    "output": erm.OutputPerturbation,
    "noisy_gd": erm.NoisyGD,
}

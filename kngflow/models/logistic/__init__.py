"""Logistic regression (Awan & Slavković Algorithm 3, Figure 2; the chapter's ERM baselines)."""

from __future__ import annotations

from kngflow.models.logistic import erm
from kngflow.models.logistic import mechanisms
from kngflow.models.logistic import problem

#: the problem class
PROBLEM = problem.LogisticProblem
#: the mechanism kinds of this problem
MECHANISMS = {
    "nonprivate": mechanisms.NonPrivate,
    "kng": mechanisms.KNG,
    "objective_ext": mechanisms.ExtendedObjectivePerturbation,
    "objective": mechanisms.ObjectivePerturbation,
    "output": erm.OutputPerturbation,
    "objective_chaudhuri": erm.ObjectivePerturbationChaudhuri,
    "noisy_gd": erm.NoisyGD,
    "dpsgd": erm.DPSGD,
}

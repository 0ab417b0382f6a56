"""Support vector machines with the Huber hinge (Chaudhuri, Monteleoni & Sarwate 2011; Sarwate's chapter §7.3.1)."""

from __future__ import annotations

from kngflow.models.svm import mechanisms
from kngflow.models.svm import problem

#: the problem class
PROBLEM = problem.SVMProblem
#: the mechanism kinds of this problem
MECHANISMS = {
    "nonprivate": mechanisms.NonPrivate,
    "output": mechanisms.OutputPerturbation,
    "objective": mechanisms.ObjectivePerturbation,
    "objective_ext": mechanisms.ExtendedObjectivePerturbation,
    "noisy_gd": mechanisms.NoisyGD,
    "dpsgd": mechanisms.DPSGD,
    "kng": mechanisms.KNG,
    "kng_hinge": mechanisms.HingeKNG,
}

"""Private-ERM baselines written once against a loss (Sarwate's chapter §7.3–7.4).

The mechanisms target the minimiser of ``J(theta) = (1/n) sum_i l(theta; z_i) + (reg/2)
||theta||_2^2`` for a loss ``l`` that a model supplies through the hooks of :class:`ERMMechanism`
(``check_data``, ``size``, ``lipschitz``, ``smoothness``, ``mean_gradient``, ``finish``,
``default_radius``; output perturbation also ``minimiser``; ``lipschitz_of`` and
``smoothness_of`` where the bounds depend on public facts of the data, such as its declared
record domain): the logistic loss
(:mod:`kngflow.models.logistic.erm`, where the constants are derived) and the squared
loss on sufficient statistics (:mod:`kngflow.models.linear.erm`).  Adjacency is
kngflow's: data sets of the same (public) size ``n`` differing in one record.  Here:
output perturbation, noisy projected gradient descent, and the privacy accountants
(dp-accounting's RDP accountant) that calibrate the Gaussian variants; DP-SGD on the
loss's per-example gradients (hook ``per_example_gradients``); and the constants of
Chaudhuri, Monteleoni & Sarwate's objective perturbation (:func:`cms_constants`), shared
by every model that runs it (a loss with ``|l'| <= 1``, ``l'' <= c`` on records ``||x|| <= 1``).

The release is ``estimate`` alone; ``info`` (sampler, acceptance, steps) is diagnostics.

Modules: :mod:`~kngflow.mechanisms.erm.base` (:class:`ERMMechanism`, the hooks),
:mod:`~kngflow.mechanisms.erm.output`, :mod:`~kngflow.mechanisms.erm.noisy_gd`,
:mod:`~kngflow.mechanisms.erm.dpsgd`, :mod:`~kngflow.mechanisms.erm.accountants`,
:mod:`~kngflow.mechanisms.erm.objective` (objective perturbation's constants) and
:mod:`~kngflow.mechanisms.erm.certified` (its hardened minimiser).
"""

from __future__ import annotations

from kngflow.mechanisms.erm.accountants import (dpsgd_accountant_epsilon, dpsgd_noise_multiplier,
                                               gaussian_gd_noise_multiplier, gd_accountant_epsilon)
from kngflow.mechanisms.erm.base import DEFAULT_REG, ERMMechanism, erm_release, gaussian_lipschitz
from kngflow.mechanisms.erm.certified import certified_ridge_minimiser
from kngflow.mechanisms.erm.dpsgd import DPSGD, DPSGD_AUDIT_RADIUS, EPS_CAP
from kngflow.mechanisms.erm.noisy_gd import NoisyGD, audit_iterates, poisson_sample, printed_gd_sigma
from kngflow.mechanisms.erm.objective import SLACK_RULES, cms_constants
from kngflow.mechanisms.erm.output import OutputPerturbation

__all__ = [
    "ERMMechanism",
    "erm_release",
    "OutputPerturbation",
    "NoisyGD",
    "DPSGD",
    "DEFAULT_REG",
    "EPS_CAP",
    "DPSGD_AUDIT_RADIUS",
    "SLACK_RULES",
    "cms_constants",
    "gd_accountant_epsilon",
    "gaussian_gd_noise_multiplier",
    "dpsgd_accountant_epsilon",
    "dpsgd_noise_multiplier",
    "poisson_sample",
    "printed_gd_sigma",
    "audit_iterates",
    "gaussian_lipschitz",
    "certified_ridge_minimiser",
]

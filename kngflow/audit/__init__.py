"""Privacy audits of kngflow's mechanisms (exact, black-box and side-channel).

Exact audits compute the law of a release (KNG and the exponential mechanism by
numerical normalisation of ``log_density`` in 1-D/2-D; K-norm noise on a gradient in
closed form; K-norm or Gaussian noise on a released statistic in closed form, step by
step for gradient methods); accountant audits re-check the ε a privacy accountant
certifies for an (ε, δ) mechanism's calibrated noise (multi-step, subsampled);
black-box audits sample releases on adjacent data sets (the pair and the rest of the data
set searched over the problem's declared records) and give a Clopper–Pearson lower confidence bound on
the privacy loss with a statement of their power, drawing in this process or as Dask
tasks (:mod:`~kngflow.audit.runner`, the same bound either way); the side-channel audit
applies the black-box test to every output a release carries besides the estimate.
:mod:`~kngflow.audit.calibration` holds the black-box audit's calibration suite;
:mod:`~kngflow.audit.pipeline` runs the audits as ``kngflow audit`` does (options ->
context -> steps -> verdict).  The seam with problems and mechanisms is described in
``docs/contracts.md`` ("Audits").
"""

import importlib

#: public names and the submodule defining each; imported on first use, so that
#: ``kngflow status`` (whose parser lists the audit command) does not import scipy.stats
_WHERE = {
    "AuditResult": "result",
    "exact_audit": "exact",
    "discrete_audit": "exact",
    "discrete_audit_applies": "exact",
    "knorm_audit": "exact",
    "statistic_audit": "exact",
    "statistic_audit_applies": "exact",
    "gaussian_delta": "exact",
    "gaussian_epsilon": "exact",
    "accountant_audit": "accountant",
    "accountant_audit_applies": "accountant",
    "audit_view": "pairs",
    "AdjacentPair": "pairs",
    "candidate_pairs": "pairs",
    "parse_pair": "pairs",
    "blackbox_audit": "blackbox",
    "bit_audit": "bits",
    "bit_audit_applies": "bits",
    "side_channel_audit": "blackbox",
    "clopper_pearson": "result",
    "loss_lower_bound": "result",
    "audit_callable": "blackbox",
    "LocalRunner": "runner",
    "DaskRunner": "runner",
    "audit_plan": "pipeline",
    "AuditOptions": "pipeline",
    "AuditContext": "pipeline",
    "run_audit": "pipeline",
    "Verdict": "pipeline",
}

__all__ = list(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)

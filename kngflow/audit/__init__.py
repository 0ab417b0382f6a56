"""Privacy audits of kngflow's mechanisms (exact, black-box and side-channel).

Exact audits compute the law of a release (KNG and the exponential mechanism by
numerical normalisation of ``log_density`` in 1-D/2-D; K-norm noise in closed form);
black-box audits sample releases on adjacent data sets and give a Clopper–Pearson lower
confidence bound on the privacy loss; the side-channel audit applies the black-box test
to every output a release carries besides the estimate.  The seam with problems and
mechanisms is described in ``docs/contracts.md`` ("Audits").
"""

from .blackbox import blackbox_audit, clopper_pearson, loss_lower_bound, side_channel_audit
from .exact import AuditResult, exact_audit, knorm_audit
from .pairs import AdjacentPair, candidate_pairs, parse_pair

__all__ = [
    "AuditResult",
    "AdjacentPair",
    "candidate_pairs",
    "parse_pair",
    "exact_audit",
    "knorm_audit",
    "blackbox_audit",
    "side_channel_audit",
    "clopper_pearson",
    "loss_lower_bound",
]

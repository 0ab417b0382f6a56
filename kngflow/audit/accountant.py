"""Accountant audit: re-check the ε an (ε, δ) mechanism's noise calibration certifies.

Multi-step and subsampled Gaussian mechanisms (noisy gradient descent with many steps,
DP-SGD with Poisson sampling rate ``q < 1``) have no closed-form law the exact audits can
read; their privacy rests on a privacy accountant.  A mechanism claims
:class:`~kngflow.mechanisms.claims.Composed` with
``accountant_epsilon(n, epsilon, run_epsilon) -> float`` — the ε that ``dp-accounting``'s
accountant certifies, at the claim's ``delta`` and for adjacent data sets of public
size ``n``, for the noise the mechanism calibrates at ``run_epsilon`` — and the audit
checks it against the declared ε.  This is a check of the calibration as run (the noise
multiplier, the schedule, the mapping between adjacency notions), not a measurement of the
release's law: the accountant's ε is an upper bound on the true ε.  A mechanism calibrated
for 2ε gets an accountant ε near 2ε and is flagged.
"""

from __future__ import annotations

from ..mechanisms.claims import Composed
from .pairs import SIZES, AdjacentPair
from .result import AuditResult

__all__ = ["accountant_audit", "accountant_audit_applies"]


def accountant_audit_applies(mechanism) -> bool:
    """Whether the mechanism's claim is :class:`~kngflow.mechanisms.claims.Composed` (an
    ``accountant_epsilon`` at a ``delta > 0``, which the claim requires)."""
    return isinstance(mechanism.privacy_claim(), Composed)


def accountant_audit(mechanism, problem, epsilon: float, *, run_epsilon: float | None = None,
                     pair: AdjacentPair | None = None) -> AuditResult:
    """The largest accountant ε over the audited data-set sizes (the pair's, else
    :data:`~kngflow.audit.pairs.SIZES` from ``d`` up and the statistic audit's sizes);
    passes when it is at most the declared ε (relative tolerance 1e-8; the calibrations
    stop within 1e-9).  The schedule (sampling rate, steps) may depend on ``n``: every size is checked."""
    claim = mechanism.privacy_claim()
    if not isinstance(claim, Composed):
        raise ValueError(f"accountant audits need a mechanism claiming Composed; {mechanism!r} claims {claim.kind}")
    run = float(epsilon if run_epsilon is None else run_epsilon)
    d = problem.d
    sizes = [len(pair.rest) + 1] if pair is not None else sorted({n for n in SIZES if n >= d} | {max(d, 2) + 1, 65})
    values = {n: float(claim.accountant_epsilon(n, float(epsilon), run)) for n in sizes}
    n_max = max(values, key=values.get)
    bound = values[n_max]
    delta = float(claim.delta)
    tol = 1e-8 * epsilon
    notes = [f"dp-accounting's epsilon at delta {delta:g} for the noise calibrated at epsilon {run:g}, "
             f"largest at n = {n_max} of {len(sizes)} data-set size{'s' if len(sizes) > 1 else ''}: an upper "
             "bound on the true epsilon, covering multi-step and subsampled configurations"]
    return AuditResult("accountant", repr(mechanism), float(epsilon), bound, tol, pair, bool(bound <= epsilon + tol),
                       {"run_epsilon": run, "delta": delta, "by_size": values, "notes": notes})

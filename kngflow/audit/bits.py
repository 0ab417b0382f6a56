r"""The bit-level audit: events that are impossible in exact arithmetic, counted in float64.

A release computed in floating point as ``centre(D) + W`` (``W`` data-independent noise)
can only land on the floats near ``centre(D) + W``, and which floats those are depends on
``centre(D)``: Mironov's attack on naive noise addition ("On significance of the least
significant bits for differential privacy", CCS 2012).  In exact arithmetic the triangle
inequality forbids, for adjacent ``D, D'`` with centres ``c, c'`` and any norm,

    E_K = { ||theta - c'||_K - ||theta - c||_K > ||c - c'||_K },

and its mirror (``c`` and ``c'`` swapped).  In float64 the computed differences can cross
the bound, and how often depends on the data set the release came from.  The audit counts
``E_K`` and its mirror for K in {l1, l2, linf} (evaluated in float64 from the releases and
both candidate centres, as an attacker who knows both candidate inputs would) on releases
under ``D`` and under ``D'``, and turns the counts into a Clopper–Pearson lower confidence
bound on the privacy loss at the claim's δ, exactly as the black-box audit does
(:func:`~kngflow.audit.blackbox.loss_lower_bound`, Bonferroni over the events and pairs).
Any event's probability ratio bounds the loss from below, so a flag is a proof at
confidence ``1 - alpha`` whatever the event; the events are chosen because in exact
arithmetic both probabilities are 0, so any asymmetry is the floating-point leak.

It runs for mechanisms whose privacy claim names an ``additive_centre``
(:class:`~kngflow.mechanisms.claims.PrivacyClaim`): the K-norm mean (KNG for the mean) and
output perturbation.  Releases that are post-processing of a noisy statistic in another
space (noisy sufficient statistics, objective perturbation) are not covered by this event.
"""

from __future__ import annotations

import numpy as np

from . import power as pw
from .pairs import AdjacentPair, audit_view, candidate_pairs
from .result import ALPHA, AuditResult, loss_lower_bound

__all__ = ["bit_audit", "bit_audit_applies", "BIT_DRAWS"]

#: releases per data set (the issue's reproducer used 200 000)
BIT_DRAWS = 200_000
_ORDERS = {"l1": 1, "l2": 2, "linf": np.inf}


def bit_audit_applies(mechanism) -> bool:
    """Whether the mechanism's claim names an additive centre."""
    return mechanism.privacy_claim().additive_centre is not None


def _counts(thetas: np.ndarray, c: np.ndarray, c2: np.ndarray) -> np.ndarray:
    """Counts of ``E_K`` and its mirror, K = l1, l2, linf, among the rows of ``thetas``."""
    out = []
    for order in _ORDERS.values():
        gap = np.linalg.norm(c - c2, ord=order)
        s = np.linalg.norm(thetas - c2, ord=order, axis=1) - np.linalg.norm(thetas - c, ord=order, axis=1)
        out += [np.count_nonzero(s > gap), np.count_nonzero(-s > gap)]
    return np.array(out)


def _releases(mechanism, data, epsilon, rng, size, progress) -> np.ndarray:
    out = np.empty((size, np.size(mechanism.release(data, epsilon, rng).estimate)))
    for i in range(size):
        out[i] = mechanism.release(data, epsilon, rng).estimate
        if progress is not None and (i + 1) % 1000 == 0:
            progress(1000)
    return out


def bit_audit(mechanism, problem, epsilon: float, *, run_epsilon: float | None = None,
              pair: AdjacentPair | None = None, draws: int = BIT_DRAWS, pairs: int = 4, seed: int = 0,
              alpha: float = ALPHA, progress=None) -> AuditResult:
    """Lower confidence bound on the privacy loss from floating-point events (module docstring).

    ``pair``: the adjacent data sets (default: the pair of largest ``||c - c'||`` among
    ``pairs`` candidates of the problem's record domain, which moves the centres most).
    """
    claim = mechanism.privacy_claim()
    if claim.additive_centre is None:
        raise ValueError(f"bit-level audit: the privacy claim of {mechanism!r} names no additive centre")
    problem = audit_view(mechanism, problem)
    run = float(epsilon if run_epsilon is None else run_epsilon)
    rng = np.random.default_rng(seed)
    if pair is None:
        found = candidate_pairs(problem, rng, 8 * pairs, min_size=problem.d)

        def spread(p):
            a, b = (np.asarray(claim.additive_centre(problem.audit_data(x)), float) for x in p.datasets())
            return float(np.linalg.norm(a - b, ord=np.inf))

        pair = max(found, key=spread)
    D, D2 = (problem.audit_data(x) for x in pair.datasets())
    c = np.asarray(claim.additive_centre(D), dtype=np.float64)
    c2 = np.asarray(claim.additive_centre(D2), dtype=np.float64)
    a = _releases(mechanism, D, run, rng, draws, progress)
    b = _releases(mechanism, D2, run, rng, draws, progress)
    ka, kb = _counts(a, c, c2), _counts(b, c, c2)
    bound = loss_lower_bound(ka, kb, draws, alpha, float(claim.delta))
    names = [f"{k}{m}" for k in _ORDERS for m in ("", " mirror")]
    notes = ["events impossible in exact arithmetic (triangle inequality in " + ", ".join(_ORDERS) + "): "
             + "; ".join(f"{n}: {x} vs {y}" for n, x, y in zip(names, ka, kb) if x or y) if (ka.any() or kb.any())
             else "events impossible in exact arithmetic: none occurred under either data set"]
    power = _power(ka, kb, int(draws), alpha, float(epsilon), float(claim.delta))
    notes.append(power["statement"])
    return AuditResult("bit-level", repr(mechanism), float(epsilon), bound, 0.0, pair, bool(bound <= epsilon),
                       {"run_epsilon": run, "draws": int(draws), "counts": ka.tolist(), "counts_other": kb.tolist(),
                        "delta": float(claim.delta), "notes": notes, "power": power})


def _power(ka, kb, n, alpha, epsilon, delta) -> dict:
    """The power statement of the bit-level test (as the black-box audit's,
    :mod:`~kngflow.audit.power`): the smallest loss on one of its events, in either
    orientation, flagged w.p. >= 0.9 with ``n`` draws per side, at the masses measured."""
    masses = [(x / n, y / n) for x, y in zip(ka, kb)] + [(y / n, x / n) for x, y in zip(ka, kb)]
    level = alpha / (2 * len(masses))  # as loss_lower_bound's Bonferroni
    loss = pw.loss_at_power(masses, n, level, epsilon, delta)
    method = "binomial law of the event counts at the masses measured on the releases"
    statement = (f"power: a loss of {loss:.3f} or more on this pair, realised on one of these events, is flagged "
                 f"with probability >= {pw.POWER:g} with these draws ({method})" if np.isfinite(loss) else
                 f"power: no loss below {pw.LOSS_MAX:g} on these events is flagged with probability >= {pw.POWER:g} "
                 f"with these draws (their masses are too small{'' if ka.any() or kb.any() else ': none occurred'})")
    return {"loss": loss, "power": pw.POWER, "method": method, "statement": statement}

"""What the audits share: the outcome of one audit, the family-wise error level and the
one-sided Clopper–Pearson bounds every sampled audit builds on (written once, here)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import stats as sps

from .pairs import AdjacentPair

__all__ = ["ALPHA", "AuditResult", "clopper_pearson", "loss_lower_bound"]

#: Default family-wise error of one audit (probability of flagging an ε-DP mechanism).
ALPHA = 1e-5


def clopper_pearson(k, n, level: float) -> tuple[np.ndarray, np.ndarray]:
    """One-sided Clopper–Pearson bounds ``(lower, upper)`` on a binomial proportion from
    ``k`` successes of ``n``, each holding with probability at least ``1 - level``
    (vectorised; ``k`` may be fractional, as the searches' shrunk proportions are)."""
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    lo = np.where(k > 0, sps.beta.ppf(level, np.maximum(k, 1e-12), np.maximum(n - k, 0) + 1), 0.0)
    hi = np.where(k < n, sps.beta.ppf(1 - level, k + 1, np.maximum(n - k, 1e-12)), 1.0)
    return lo, hi


def loss_lower_bound(counts_a: np.ndarray, counts_b: np.ndarray, n: int, alpha: float, delta: float = 0.0) -> float:
    """Lower confidence bound on the privacy loss ε at ``delta`` from event counts on two
    data sets.

    ``counts_a``, ``counts_b``: counts of the same ``m`` events in ``n`` releases each.
    Both orientations are tested; Bonferroni over ``2 m`` ratios, each needing two bounds.
    (ε, δ)-DP gives ``P_a(E) <= e^ε P_b(E) + δ``, so ``log((lo_a - δ) / hi_b)`` bounds ε
    from below (events with ``lo_a <= δ`` say nothing); ``delta = 0`` is the ε-DP test.
    """
    m = 2 * np.asarray(counts_a).size
    level = alpha / (2 * m)
    lo_a, hi_a = clopper_pearson(np.ravel(counts_a), n, level)
    lo_b, hi_b = clopper_pearson(np.ravel(counts_b), n, level)
    with np.errstate(divide="ignore"):
        r = np.concatenate([np.log(np.maximum(lo_a - delta, 0.0)) - np.log(hi_b),
                            np.log(np.maximum(lo_b - delta, 0.0)) - np.log(hi_a)])
    return float(max(0.0, np.max(r)))


@dataclass
class AuditResult:
    """Outcome of one audit.

    ``bound`` is the privacy loss found: exact (``kind`` "exact", "statistic" (noise on a
    released statistic, its law in ``details["law"]``) or "knorm") or a lower confidence
    bound (``kind`` "black-box", "side-channel", "bit-level"); ``passed`` is ``bound <= epsilon +
    tolerance`` (the declared ε, or its share for "knorm").  ``details`` holds per-kind
    extras (numerical error, the run ε, per-field bounds of a side-channel audit...).
    """

    kind: str
    mechanism: str
    epsilon: float
    bound: float
    tolerance: float
    pair: AdjacentPair | None
    passed: bool
    details: dict = field(default_factory=dict)

    def summary(self) -> str:
        """Lines for people: the loss found, the limit, the pair and the verdict."""
        run = self.details.get("run_epsilon", self.epsilon)
        ran = "" if run == self.epsilon else f" run at epsilon={run:g}"
        what = {"exact": "privacy loss", "knorm": "privacy loss", "statistic": "privacy loss",
                "accountant": "accountant epsilon"}.get(self.kind, "privacy loss lower bound")
        law = {"gaussian": "Gaussian", "knorm": "K-norm"}.get(self.details.get("law"), "")
        title = f"statistic audit ({law} noise, closed form)" if self.kind == "statistic" else f"{self.kind} audit"
        limit = f"declared epsilon {self.epsilon:g}"
        if self.details.get("delta"):
            limit += f" at delta {self.details['delta']:g}"
        if self.kind == "knorm":
            dt = self.details
            limit += (f" (noise {dt['noise_max']:.4f} of {dt['noise_limit']:g}, "
                      f"Jacobian {dt['jacobian_max']:.4f} of {dt['jacobian_limit']:g})")
        lines = [
            f"{title} of {self.mechanism}{ran}",
            f"  {what} {self.bound:.4f} vs {limit} (tolerance {self.tolerance:.2g}): "
            f"{'PASS' if self.passed else 'FLAGGED'}",
        ]
        if self.pair is not None:
            lines.append(f"  pair: {self.pair}")
        lines.extend(f"  {note}" for note in self.details.get("notes", ()))
        for name, (b, flag) in self.details.get("fields", {}).items():
            verdict = "DATA-DEPENDENT (not private)" if flag else "no evidence of data dependence"
            lines.append(f"  field {name}: lower bound {b:.3f} -> {verdict}")
        return "\n".join(lines)

"""A privacy budget for a sequence of releases: :class:`BudgetAccountant` (diffprivlib's convention).

An accountant holds a total ``(epsilon, delta)`` and the ``(epsilon_i, delta_i)`` of every
release spent from it.  Releases compose by basic (sequential) composition: ``k`` releases
that are ``(epsilon_i, delta_i)``-DP on the same data are ``(sum epsilon_i, sum delta_i)``-DP
(Dwork & Roth 2014, Theorem 3.16), for pure ε (``delta_i = 0``) and approximate DP alike.
Tighter (advanced or RDP) composition is not attempted here: it needs more of each release
than its ``(ε, δ)`` (kngflow's Gaussian mechanisms calibrate themselves with dp-accounting's
RDP accountant internally, and report the resulting ``(ε, δ)``).

:meth:`BudgetAccountant.spend` refuses, in one line and without recording anything, a
release that would take the total over the budget.  The estimators of
:mod:`kngflow.estimators` spend from an accountant before they release.  Sums are taken
with :func:`math.fsum` and compared with a relative slack of :data:`SLACK` (1e-12), so that
ten releases of ε = 0.1 fit a budget of 1.
"""

from __future__ import annotations

import math
from numbers import Real

__all__ = ["BudgetAccountant", "SLACK"]

#: relative slack of the budget comparison (floating-point sums of the spends)
SLACK = 1e-12


def _check(name: str, value, *, upper: float | None = None, allow_inf: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or math.isnan(value) or value < 0:
        raise ValueError(f"{name} must be a number >= 0, got {value!r}")
    if not allow_inf and math.isinf(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if upper is not None and value > upper:
        raise ValueError(f"{name} must be at most {upper}, got {value!r}")
    return float(value)


class BudgetAccountant:
    """A total privacy budget ``(epsilon, delta)`` spent by a sequence of releases.

    Parameters
    ----------
    epsilon : float >= 0 (may be ``math.inf``: track the spending without a limit)
        The total ε.
    delta : float in [0, 1] (default 0: a pure ε-DP budget; (ε, δ) releases are refused)
        The total δ.

    Example::

        acc = BudgetAccountant(epsilon=1.0)
        acc.spend(0.5)            # a first ε = 0.5 release
        acc.spend(0.5)            # a second
        acc.spend(0.1)            # ValueError: privacy budget exceeded ...
        acc.total()               # (1.0, 0.0)
    """

    def __init__(self, epsilon: float = math.inf, delta: float = 0.0):
        self.epsilon = _check("epsilon", epsilon, allow_inf=True)
        self.delta = _check("delta", delta, upper=1.0)
        self.spent_budget: list[tuple[float, float]] = []

    def __repr__(self) -> str:
        eps, delta = self.total()
        return (f"BudgetAccountant(epsilon={self.epsilon:g}, delta={self.delta:g}; spent epsilon={eps:g}, "
                f"delta={delta:g} in {len(self.spent_budget)} release(s))")

    def total(self) -> tuple[float, float]:
        """``(epsilon, delta)`` spent so far (basic composition: the sums)."""
        return (math.fsum(e for e, _ in self.spent_budget), math.fsum(d for _, d in self.spent_budget))

    def remaining(self) -> tuple[float, float]:
        """``(epsilon, delta)`` left (never below 0)."""
        eps, delta = self.total()
        return max(self.epsilon - eps, 0.0), max(self.delta - delta, 0.0)

    def check(self, epsilon: float, delta: float = 0.0) -> bool:
        """True when a release of ``(epsilon, delta)`` fits the budget; ValueError (one line,
        naming what is left) when it does not.  Records nothing."""
        epsilon = _check("epsilon", epsilon)
        delta = _check("delta", delta, upper=1.0)
        eps_total = math.fsum([*(e for e, _ in self.spent_budget), epsilon])
        delta_total = math.fsum([*(d for _, d in self.spent_budget), delta])
        over = []
        if eps_total > self.epsilon * (1.0 + SLACK):
            over.append(f"epsilon {eps_total:.6g} > {self.epsilon:g}")
        if delta_total > self.delta * (1.0 + SLACK):
            over.append(f"delta {delta_total:.6g} > {self.delta:g}")
        if over:
            left_eps, left_delta = self.remaining()
            raise ValueError(f"privacy budget exceeded: a release of (epsilon={epsilon:g}, delta={delta:g}) would "
                             f"bring the total to {' and '.join(over)} (left: epsilon={left_eps:.6g}, "
                             f"delta={left_delta:.6g})")
        return True

    def spend(self, epsilon: float, delta: float = 0.0) -> "BudgetAccountant":
        """Record a release of ``(epsilon, delta)``; ValueError (one line) and nothing recorded
        when it would exceed the budget.  Returns the accountant."""
        self.check(epsilon, delta)
        self.spent_budget.append((float(epsilon), float(delta)))
        return self

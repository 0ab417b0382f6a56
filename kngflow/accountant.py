r"""A privacy budget for a sequence of releases: :class:`BudgetAccountant` (diffprivlib's convention).

An accountant holds a total ``(epsilon, delta)`` and, for every release spent from it, the
release's own guarantee ``(epsilon_i, delta_i)`` and, where the release's law allows it, a
``dp_accounting`` event (:class:`dp_accounting.DpEvent`) describing it.  Two compositions
are computed, and the total is the one with the smaller ε within the budget's δ:

* **basic composition** of every release's ``(epsilon_i, delta_i)``: ``k`` releases that are
  ``(epsilon_i, delta_i)``-DP on the same data are ``(sum epsilon_i, sum delta_i)``-DP
  (Dwork & Roth 2014, Theorem 3.16; adaptive sequences too).  With no events recorded this
  is the total, exactly as before events existed: pure ε releases always add up exactly
  (``math.fsum``), ``delta = 0``.
* **PLD composition** of the events: the releases with an event are composed by
  ``dp_accounting``'s privacy-loss-distribution accountant
  (:class:`dp_accounting.pld.PLDAccountant`, Meiser & Mohammadi 2018, Koskela et al. 2020,
  Doroshenko et al. 2022; its default discretisation 1e-4 with pessimistic rounding, so its
  ε is an upper bound), which is tight for Gaussian noise — ``k`` Gaussian releases of noise
  multiplier ``z`` compose exactly to one of multiplier ``z / sqrt(k)`` — where basic
  composition adds the ε up.  The PLD accountant, not the RDP one, because the RDP
  accountant's conversion to ``(ε, δ)`` is loose, and both exist at the dependency floor
  (dp-accounting 0.4.2).  The releases without an event (pure ε, and (ε, δ) releases whose
  claim maps to no event) are added to it by basic composition:
  ``(sum_basic epsilon_i + epsilon_PLD(delta - sum_basic delta_i), delta)`` — the PLD part
  is read at all of the budget's δ the other releases leave.

The events the PLD part takes are unsampled :class:`~dp_accounting.GaussianDpEvent` and
:class:`~dp_accounting.LaplaceDpEvent` (noise multiplier: noise scale over the sensitivity
under the adjacency the release is private for, kngflow's replace-one for its mechanisms;
the PLD of an unsampled Gaussian or Laplace depends on that ratio only, so dp_accounting's
default add-or-remove relation reads it unchanged), :class:`~dp_accounting.NoOpDpEvent` and
compositions of those (:class:`~dp_accounting.SelfComposedDpEvent`,
:class:`~dp_accounting.ComposedDpEvent`).  Subsampled events (``PoissonSampledDpEvent``,
...) are refused: at dp-accounting 0.4.2 its PLD accountant composes them under
add-or-remove adjacency only, and kngflow's releases are private under replace-one (DP-SGD
reaches replace-one through group privacy, which no event expresses), so a DP-SGD release
with sampling rate below 1 is spent as its declared ``(ε, δ)``.

Mapping a mechanism's privacy claim to an event (:func:`claim_event`, what the estimators
of :mod:`kngflow.estimators` pass to :meth:`BudgetAccountant.spend`):

* a pure ε claim (``delta == 0``): no event; basic composition (the sum);
* a :class:`~kngflow.mechanisms.claims.StatisticNoise` claim with Gaussian noise
  (``noise(data, epsilon) == ("gaussian", sigma)``) whose release is made of Gaussian steps
  (no ``steps``, or ``steps(n)`` not None: noisy gradient descent, DP-SGD with sampling rate
  1, the noisy-moment PCA kinds): the noisy statistic is a Gaussian mechanism, i.e. μ-GDP
  (adaptive steps compose to ``sqrt(sum mu_t^2)``: Dong, Roth & Su 2022), and its claimed
  ``(ε, δ)`` — what the statistic audit checks — bounds μ by the μ* at which the Gaussian
  mechanism's exact curve (Balle & Wang 2018, Theorem 8) passes through ``(ε, δ)``.  Its
  event is ``GaussianDpEvent(1 / mu*)`` (:func:`gaussian_event`), exact for an analytically
  calibrated mechanism and an upper bound on the loss of a conservatively calibrated one.
  (The claims carry no sensitivity, so ``sigma / Delta`` cannot be read off them.)
* every other claim (black-box, density, subsampled steps) and every hardened release (its
  snapped law is no longer Gaussian): no event; its declared ``(ε, δ)`` by basic composition.

Adaptivity: the mechanisms may be chosen after seeing earlier outputs, but a total compared
with a budget is a privacy *filter* when the privacy parameters themselves are chosen so.
Basic composition is a valid filter (Rogers, Roth, Ullman & Vadhan 2016), and so is the PLD
total of Gaussian releases alone (a function of ``sum 1 / z_i^2``: a Gaussian-DP filter,
Smith & Thakurta 2022); for mixtures of the two, fix the sequence of ``(epsilon_i, delta_i)``
in advance.

:meth:`BudgetAccountant.spend` refuses, in one line naming what is left and without
recording anything, a release that would take the total over the budget.  Sums are taken
with :func:`math.fsum` and compared with a relative slack of :data:`SLACK` (1e-12), so that
ten releases of ε = 0.1 fit a budget of 1.
"""

from __future__ import annotations

import math
from numbers import Real

__all__ = ["BudgetAccountant", "SLACK", "claim_event", "gaussian_event", "check_event", "pld_epsilon"]

#: relative slack of the budget comparison (floating-point sums of the spends)
SLACK = 1e-12

#: dp_accounting event types the PLD part composes (by class name; containers recurse)
_LEAVES = ("GaussianDpEvent", "LaplaceDpEvent", "NoOpDpEvent")
_CONTAINERS = ("SelfComposedDpEvent", "ComposedDpEvent")


def _check(name: str, value, *, upper: float | None = None, allow_inf: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or math.isnan(value) or value < 0:
        raise ValueError(f"{name} must be a number >= 0, got {value!r}")
    if not allow_inf and math.isinf(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if upper is not None and value > upper:
        raise ValueError(f"{name} must be at most {upper}, got {value!r}")
    return float(value)


def _dpa():
    """``dp_accounting``, imported on first use (importing kngflow.accountant loads none of it)."""
    import dp_accounting

    return dp_accounting


def check_event(event):
    """``event`` if the PLD part can compose it (see the module docstring); one-line
    ValueError naming the offending (sub)event otherwise."""
    dpa = _dpa()
    if not isinstance(event, dpa.DpEvent):
        raise ValueError(f"event must be a dp_accounting DpEvent, got {type(event).__name__}")

    def walk(e):
        if isinstance(e, dpa.SelfComposedDpEvent):
            if isinstance(e.count, bool) or not isinstance(e.count, int) or e.count < 1:
                raise ValueError(f"event: SelfComposedDpEvent count must be an integer >= 1, got {e.count!r}")
            walk(e.event)
        elif isinstance(e, dpa.ComposedDpEvent):
            for sub in e.events:
                walk(sub)
        elif isinstance(e, (dpa.GaussianDpEvent, dpa.LaplaceDpEvent)):
            z = e.noise_multiplier
            if isinstance(z, bool) or not isinstance(z, Real) or not (math.isfinite(z) and z > 0):
                raise ValueError(f"event: {type(e).__name__} needs a finite noise multiplier > 0, got {z!r}")
        elif not isinstance(e, dpa.NoOpDpEvent):
            raise ValueError(f"event: {e!r} cannot be composed here: the accountant takes unsampled "
                             f"{', '.join(_LEAVES)} and their compositions ({', '.join(_CONTAINERS)}); "
                             "spend the release's (epsilon, delta) without an event")

    walk(event)
    return event


#: ``{(events key, delta): epsilon}``: PLD compositions already computed (bounded)
_PLD_CACHE: dict = {}


def pld_epsilon(events, delta: float) -> float:
    """ε at ``delta`` of the composition of ``events`` (dp_accounting DpEvents) by
    dp_accounting's :class:`~dp_accounting.pld.PLDAccountant` (default discretisation,
    pessimistic: an upper bound on the true ε; ``math.inf`` where none is finite, e.g. Gaussian
    noise at ``delta = 0``).  Identical events are passed as one ``SelfComposedDpEvent``
    (dp_accounting composes ``k`` Gaussians of multiplier ``z`` as one of ``z / sqrt(k)``);
    results are cached."""
    dpa = _dpa()
    groups: dict[str, list] = {}
    for e in events:
        groups.setdefault(repr(e), [e, 0])[1] += 1
    key = (tuple(sorted((k, c) for k, (_, c) in groups.items())), float(delta))
    if key not in _PLD_CACHE:
        from dp_accounting.pld import PLDAccountant

        acc = PLDAccountant()
        acc.compose(dpa.ComposedDpEvent([dpa.SelfComposedDpEvent(groups[k][0], c) for k, c in key[0]]))
        if len(_PLD_CACHE) > 512:
            _PLD_CACHE.clear()
        _PLD_CACHE[key] = float(acc.get_epsilon(max(float(delta), 0.0)))
    return _PLD_CACHE[key]


def gaussian_event(epsilon: float, delta: float):
    """The :class:`~dp_accounting.GaussianDpEvent` of a Gaussian mechanism that is exactly
    ``(epsilon, delta)``-DP: noise multiplier ``1 / mu*`` with ``mu*`` the root of the analytic
    Gaussian curve ``delta(eps; mu) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) = delta``
    (Balle & Wang 2018, Theorem 8; :func:`~kngflow.mechanisms.claims.gaussian_hockey_stick`).

    δ(ε; μ) increases with μ, so every Gaussian mechanism (of any number of adaptive steps)
    that is ``(epsilon, delta)``-DP is μ-GDP with ``mu <= mu*``, and this event dominates it.
    The multiplier is rounded down (``mu`` up) so that the event never claims more noise than
    ``mu*`` allows.  ValueError (one line) unless ``epsilon > 0`` and ``0 < delta < 1``.
    """
    from kngflow.mechanisms.claims import gaussian_hockey_stick, gaussian_mu

    epsilon = _check("epsilon", epsilon)
    delta = _check("delta", delta, upper=1.0)
    if not (epsilon > 0.0 and 0.0 < delta < 1.0):
        raise ValueError(f"a Gaussian event needs epsilon > 0 and 0 < delta < 1, got ({epsilon!r}, {delta!r})")

    def gap(mu: float) -> float:
        return gaussian_hockey_stick(epsilon, mu) - delta

    try:
        mu = gaussian_mu(epsilon, delta)
    except ValueError:
        raise ValueError(f"a Gaussian event: no noise multiplier reaches (epsilon={epsilon:g}, delta={delta:g})") from None
    z = 1.0 / mu
    while gap(1.0 / z) < 0.0:  # round z down until its mu is at least mu*
        z = math.nextafter(z, 0.0) if z * 1e-12 < 1e-300 else z * (1.0 - 1e-12)
    return _dpa().GaussianDpEvent(noise_multiplier=z)


def claim_event(claim, data, epsilon: float, *, n: int | None = None):
    """The dp_accounting event of one release made under ``claim`` (a mechanism's
    :meth:`~kngflow.mechanisms.Mechanism.privacy_claim`) on ``data`` at ``epsilon``, or None
    where the claim allows none (the release is then spent as its ``(epsilon, claim.delta)``
    by basic composition).

    A :class:`~kngflow.mechanisms.claims.StatisticNoise` claim with ``delta > 0`` whose noise is
    Gaussian and whose release is made of Gaussian steps — no ``steps``, or ``steps(n)`` not
    None for the data set's size ``n`` (None when ``n`` is not given) — gets
    :func:`gaussian_event` of its claimed ``(epsilon, delta)``; pure ε claims, other claims and
    subsampled steps get None.  The caller passes None for a hardened release (its snapped
    law is not Gaussian).
    """
    from kngflow.mechanisms.claims import StatisticNoise

    delta = float(claim.delta)
    if delta == 0.0 or not isinstance(claim, StatisticNoise):
        return None
    if claim.steps is not None and (n is None or claim.steps(int(n)) is None):
        return None
    law = claim.noise(data, epsilon)[0]
    if not (isinstance(law, str) and law == "gaussian"):
        return None
    return gaussian_event(epsilon, delta)


class BudgetAccountant:
    """A total privacy budget ``(epsilon, delta)`` spent by a sequence of releases.

    Releases without an event compose by basic composition; releases with a dp_accounting
    event compose by dp_accounting's PLD accountant, tightly (module docstring).
    :meth:`total` is the smaller-ε of the two valid totals: with pure ε releases only, the
    sum of their ε and ``delta = 0``, exactly.

    Parameters
    ----------
    epsilon : float >= 0 (may be ``math.inf``: track the spending without a limit)
        The total ε.
    delta : float in [0, 1] (default 0: a pure ε-DP budget; (ε, δ) releases are refused)
        The total δ; the PLD part's ε is read at it.

    Attributes
    ----------
    spent_budget : list of (float, float)
        Each release's own ``(epsilon, delta)``, in order.
    spent_events : list of dp_accounting.DpEvent or None
        Each release's event (None: basic composition), in order.

    Example::

        acc = BudgetAccountant(epsilon=1.0)
        acc.spend(0.5)            # a first ε = 0.5 release
        acc.spend(0.5)            # a second
        acc.spend(0.1)            # ValueError: privacy budget exceeded ...
        acc.total()               # (1.0, 0.0)

        acc = BudgetAccountant(epsilon=2.0, delta=1e-5)
        for _ in range(4):        # four Gaussian releases, each (0.5, 1e-6)-DP
            acc.spend(0.5, 1e-6, event=gaussian_event(0.5, 1e-6))
        acc.total()               # (0.919..., 1e-05): PLD, not 4 x 0.5 = 2
    """

    def __init__(self, epsilon: float = math.inf, delta: float = 0.0):
        self.epsilon = _check("epsilon", epsilon, allow_inf=True)
        self.delta = _check("delta", delta, upper=1.0)
        self.spent_budget: list[tuple[float, float]] = []
        self.spent_events: list = []

    def __repr__(self) -> str:
        eps, delta = self.total()
        return (f"BudgetAccountant(epsilon={self.epsilon:g}, delta={self.delta:g}; spent epsilon={eps:g}, "
                f"delta={delta:g} in {len(self.spent_budget)} release(s))")

    # ------------------------------------------------------------------ composition
    def _events(self) -> list:
        """``spent_events`` padded with None for releases recorded in ``spent_budget`` alone."""
        return list(self.spent_events) + [None] * (len(self.spent_budget) - len(self.spent_events))

    def _compose(self, budget: list, events: list) -> tuple[tuple[float, float], tuple[float, float] | None]:
        """``(basic, pld)``: the basic composition of every ``(epsilon, delta)`` in ``budget``,
        and (None when no event) the PLD composition of ``events`` at what the budget's δ
        leaves, plus the basic composition of the releases without an event."""
        basic = (math.fsum(e for e, _ in budget), math.fsum(d for _, d in budget))
        with_event = [ev for ev in events if ev is not None]
        if not with_event:
            return basic, None
        rest = [b for b, ev in zip(budget, events) if ev is None]
        eps_rest, delta_rest = math.fsum(e for e, _ in rest), math.fsum(d for _, d in rest)
        if delta_rest > self.delta * (1.0 + SLACK):
            return basic, (math.inf, delta_rest)
        left = self.delta - delta_rest
        eps_pld = pld_epsilon(with_event, left) if left > 0.0 else math.inf
        return basic, (eps_rest + eps_pld, max(self.delta, delta_rest))

    def _best(self, basic, pld) -> tuple[float, float]:
        """The total with the smaller ε among those with a finite ε within the budget's δ
        (basic if neither is)."""
        fits = [t for t in (basic, pld)
                if t is not None and math.isfinite(t[0]) and t[1] <= self.delta * (1.0 + SLACK)]
        return min(fits, key=lambda t: t[0]) if fits else basic

    def total(self) -> tuple[float, float]:
        """``(epsilon, delta)`` spent so far: basic composition (the sums) when no release has an
        event; otherwise the smaller ε of the sums and of the PLD composition (ε at the budget's
        δ, which is then the δ reported)."""
        return self._best(*self._compose(self.spent_budget, self._events()))

    def remaining(self) -> tuple[float, float]:
        """``(epsilon, delta)`` left (never below 0).  Once the PLD composition gives the total,
        all of the budget's δ counts as spent (its ε is read there); a later release still fits
        while the recomputed total stays within the budget."""
        eps, delta = self.total()
        return max(self.epsilon - eps, 0.0), max(self.delta - delta, 0.0)

    # ------------------------------------------------------------------ spending
    def check(self, epsilon: float, delta: float = 0.0, *, event=None) -> bool:
        """True when a release of ``(epsilon, delta)`` (with its dp_accounting ``event``, or
        None) fits the budget; ValueError (one line, naming what is left) when it does not.
        Records nothing."""
        epsilon = _check("epsilon", epsilon)
        delta = _check("delta", delta, upper=1.0)
        if event is not None:
            check_event(event)
        basic, pld = self._compose([*self.spent_budget, (epsilon, delta)], [*self._events(), event])
        eps_cap, delta_cap = self.epsilon * (1.0 + SLACK), self.delta * (1.0 + SLACK)
        if pld is None:
            eps_total, delta_total = basic
            over = []
            if eps_total > eps_cap:
                over.append(f"epsilon {eps_total:.6g} > {self.epsilon:g}")
            if delta_total > delta_cap:
                over.append(f"delta {delta_total:.6g} > {self.delta:g}")
            what = f"(epsilon={epsilon:g}, delta={delta:g})"
        else:
            eps_total, delta_total = self._best(basic, pld)
            if delta_total <= delta_cap and math.isfinite(eps_total) and eps_total <= eps_cap:
                return True
            over = [f"epsilon {eps_total:.6g} > {self.epsilon:g} at delta {delta_total:.6g}"
                    if delta_total <= delta_cap else f"delta {delta_total:.6g} > {self.delta:g}"]
            what = f"(epsilon={epsilon:g}, delta={delta:g}{'' if event is None else f'; {event!r}'})"
        if over:
            left_eps, left_delta = self.remaining()
            raise ValueError(f"privacy budget exceeded: a release of {what} would bring the total to "
                             f"{' and '.join(over)} (left: epsilon={left_eps:.6g}, delta={left_delta:.6g})")
        return True

    def spend(self, epsilon: float, delta: float = 0.0, *, event=None) -> "BudgetAccountant":
        """Record a release of ``(epsilon, delta)``, the release's own guarantee, with its
        dp_accounting ``event`` (None: basic composition only; see :func:`claim_event` and
        :func:`gaussian_event`); ValueError (one line) and nothing recorded when it would exceed
        the budget.  Returns the accountant."""
        self.check(epsilon, delta, event=event)
        events = self._events()
        self.spent_budget.append((float(epsilon), float(delta)))
        self.spent_events = [*events, event]
        return self

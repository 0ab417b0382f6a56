"""The audit as one pipeline: options -> context -> plan of steps -> results -> verdict.

* :class:`AuditOptions` (frozen) is what a user asks for: the mechanism and problem by
  name, their options, ε, the run ε of a negative control, draws or a time budget, where
  to draw, the pair, the seed.
* :class:`AuditContext` is built once from them and checked there (one
  :class:`AuditInputError` naming what is wrong): the problem, the mechanism, its privacy
  claim, the problem as the claim restricts it (:func:`~kngflow.audit.pairs.audit_view`),
  ε, run ε, δ, the declared records, a trial release.
* The plan (:func:`plan`) is a list of typed :class:`Step` s, each with ``applies(ctx)``,
  ``cost(ctx, draws)`` (the releases it draws) and ``run(ctx, draws, found)``: the exact
  density audit, the closed-form statistic and K-norm audits, the accountant audit, the
  bit-level audit, the black-box audit and, on request, the side-channel audit, which
  reuses the pair the black-box step searched (one search serves both).
* :func:`choose_draws` fits the sampled steps' costs to the time budget, and
  :func:`run_audit` runs the plan into a :class:`Verdict`, which renders itself.

Which steps apply follows from the claim alone (``docs/contracts.md``, "Audits").
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .pairs import AdjacentPair
from .result import AuditResult

__all__ = ["AuditOptions", "AuditContext", "AuditInputError", "Step", "ExactStep", "StatisticStep", "KnormStep",
           "AccountantStep", "BitStep", "BlackBoxStep", "SideChannelStep", "STEPS", "plan", "audit_plan",
           "choose_draws", "run_audit", "Verdict", "DEFAULT_DRAWS", "BUDGET_DRAWS", "one_line"]

#: Releases per data set of the sampled steps that a default audit aims at.
DEFAULT_DRAWS = 50_000
#: The draws a time budget chooses from, largest first, when ``draws`` is not given: more
#: than the default where fast releases leave time for them (a loss spread over many
#: coordinates is realised on events of small mass, which need many draws), fewer where
#: slow ones would not fit; steps of 2 to 2.5, so that the timing's variation from one run
#: to the next (10-20 %) seldom changes the step.
BUDGET_DRAWS = (500_000, 200_000, 100_000, 50_000, 20_000, 10_000, 5_000, 2_000, 1_000)


class AuditInputError(ValueError):
    """A user's mistake or a broken plug-in, found before anything is drawn: one line."""


@dataclass(frozen=True)
class AuditOptions:
    """What to audit and how (``kngflow audit``'s arguments, checked by :class:`AuditContext`).

    ``draws`` None: chosen by ``time_budget`` (CPU seconds) from :data:`BUDGET_DRAWS`;
    ``workers`` / ``scheduler``: draw the sampled steps' releases on a local Dask cluster
    or an existing one (the bound does not depend on it); ``pair``: the ``--pair`` syntax
    (default: searched).
    """

    mechanism: str
    problem: str
    problem_options: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    epsilon: float = 1.0
    run_epsilon: float | None = None
    draws: int | None = None
    time_budget: float = 240.0
    target_power: float | None = None
    max_draws: int = 10_000_000
    workers: int | None = None
    scheduler: str | None = None
    pair: str | None = None
    side_channel: bool = False
    seed: int = 0
    progress: bool = True

    def check(self) -> None:
        """Raise :class:`AuditInputError` for a value out of its range (syntax of numbers is
        the command line's)."""
        if not (self.epsilon > 0 and math.isfinite(self.epsilon)):
            raise AuditInputError(f"--epsilon must be > 0, got {self.epsilon!r}")
        if self.run_epsilon is not None and not (self.run_epsilon > 0 and math.isfinite(self.run_epsilon)):
            raise AuditInputError(f"--run-epsilon must be > 0, got {self.run_epsilon!r}")
        if self.draws is not None and self.draws < 100:
            raise AuditInputError(f"--draws must be >= 100, got {self.draws!r}")
        if not self.time_budget >= 0:
            raise AuditInputError(f"--time-budget must be >= 0, got {self.time_budget!r}")
        if self.target_power is not None and not self.target_power > 0:
            raise AuditInputError(f"--target-power must be > 0, got {self.target_power!r}")
        if self.max_draws < 100:
            raise AuditInputError(f"--max-draws must be >= 100, got {self.max_draws!r}")
        if self.max_draws < (self.draws or 0):
            raise AuditInputError(f"--max-draws must be >= --draws ({self.draws}), got {self.max_draws!r}")
        if self.workers is not None and self.workers < 1:
            raise AuditInputError(f"--workers must be >= 1, got {self.workers!r}")
        if self.seed < 0:
            raise AuditInputError(f"--seed must be >= 0, got {self.seed!r}")
        if self.scheduler is not None:
            from kngflow.sweep.cluster import check_address

            if self.workers is not None:
                raise AuditInputError("--workers and --scheduler exclude each other: a scheduler brings its own workers")
            why = check_address(self.scheduler)
            if why:
                raise AuditInputError(f"--scheduler {self.scheduler!r}: {why}")


def one_line(exc: BaseException) -> str:
    """``Type: message`` of an exception, on one line."""
    text = str(exc).replace("\n", " ").strip()
    return type(exc).__name__ + (f": {text}" if text else "")


@dataclass(frozen=True)
class AuditContext:
    """Everything the steps read, worked out once: the problem and mechanism, the claim,
    the problem as the claim restricts it (``view``), ε, run ε, δ, the distinct declared
    records, the given pair (or None), a trial data set and its release's CPU time (None
    until :func:`choose_draws` measures it)."""

    options: AuditOptions
    problem: object
    mechanism: object
    claim: object
    view: object
    epsilon: float
    run_epsilon: float
    delta: float
    records: np.ndarray
    pair: AdjacentPair | None
    trial: object

    @classmethod
    def build(cls, options: AuditOptions) -> "AuditContext":
        """Check ``options``, build the problem and mechanism, read the claim, make one
        trial release; :class:`AuditInputError` names what is wrong."""
        from kngflow.api import get_mechanism, get_problem
        from kngflow.mechanisms.claims import PrivacyClaim
        from kngflow.registry import mechanism_class, problem_class

        from .pairs import audit_view, parse_pair

        options.check()
        kind, name = options.mechanism, options.problem
        try:
            problem = get_problem(name, **problem_class(name).audit_options(dict(options.problem_options)))
        except (TypeError, ValueError) as exc:  # unknown problem (PluginError), bad or unknown option
            raise AuditInputError(str(exc).replace("\n", " ").strip()) from None
        except Exception as exc:  # noqa: BLE001 - a plug-in problem failing to build, named
            raise AuditInputError(f"problem {name!r} cannot be built: {one_line(exc)}") from None
        mech_options = dict(options.options)
        try:
            mech_class = mechanism_class(name, kind)
            if "hardened" not in mech_options and mech_class.private and not mech_class.declares_hardening():
                # what can be audited of a mechanism that cannot be hardened is its float64
                # release, and the verdict says so; only a user's own call must spell it out
                mech_options["hardened"] = False
            mechanism = get_mechanism(name, kind, **mech_options)
        except (TypeError, ValueError) as exc:  # unknown kind, broken plug-in (PluginError), bad or unknown option
            raise AuditInputError(str(exc).replace("\n", " ").strip()) from None
        except Exception as exc:  # noqa: BLE001 - a plug-in mechanism failing to build, named
            raise AuditInputError(f"mechanism {kind!r} cannot be built: {one_line(exc)}") from None
        try:
            claim = mechanism.privacy_claim()
        except Exception as exc:  # noqa: BLE001 - the plug-in's failure, named
            raise AuditInputError(f"mechanism {kind!r}: privacy_claim() failed: {one_line(exc)}") from None
        if not isinstance(claim, PrivacyClaim):
            raise AuditInputError(f"mechanism {kind!r}: privacy_claim() must return a "
                                  f"kngflow.mechanisms.claims.PrivacyClaim, got {type(claim).__name__}")
        view = audit_view(mechanism, problem)
        try:
            width = problem.audit_records()[0].shape[1]
            boundary, fill = view.audit_records()
        except NotImplementedError:
            raise AuditInputError(f"problem {name!r} declares no audit record domain: it must implement "
                                  "audit_records() and audit_data(records) to be audited") from None
        except Exception as exc:  # noqa: BLE001 - the problem's failure, named
            raise AuditInputError(f"problem {name!r}: audit_records() failed: {one_line(exc)}") from None
        try:
            pair = parse_pair(options.pair, width) if options.pair else None
        except ValueError as exc:
            raise AuditInputError(str(exc)) from None
        if pair is not None and len(pair.rest) + 1 < problem.d:
            raise AuditInputError(f"--pair: a data set needs at least d={problem.d} records, got {len(pair.rest) + 1}")
        epsilon = float(options.epsilon)
        run = epsilon if options.run_epsilon is None else float(options.run_epsilon)
        records = np.unique(np.vstack([boundary, fill]), axis=0)
        ctx = cls(options, problem, mechanism, claim, view, epsilon, run, float(claim.delta), records, pair, None)
        return ctx._with_trial(boundary, fill)

    def _with_trial(self, boundary, fill) -> "AuditContext":
        """One release on an audit data set (the pair's first, else ``d`` records), checked
        as the steps need it: a :class:`~kngflow.mechanisms.Release` whose estimate has
        ``d`` coefficients.  Its stream is its own; the steps' are not touched."""
        from dataclasses import replace

        from kngflow.mechanisms.base import release_problem

        name, kind, d = self.options.problem, self.options.mechanism, int(self.view.d)
        rows = self.pair.datasets()[0] if self.pair is not None else np.vstack(
            [np.tile(fill[0], (max(d, 2) - 1, 1)), boundary[:1]])
        try:
            data = self.view.audit_data(rows)
        except NotImplementedError:
            raise AuditInputError(f"problem {name!r} declares no audit record domain: it must implement "
                                  "audit_data(records) to be audited") from None
        except Exception as exc:  # noqa: BLE001 - the problem's failure, named
            raise AuditInputError(f"problem {name!r}: audit_data() failed: {one_line(exc)}") from None
        rng = np.random.default_rng(np.random.SeedSequence(self.options.seed, spawn_key=(7,)))
        try:
            rel = self.mechanism.release(data, self.run_epsilon, rng)
        except Exception as exc:  # noqa: BLE001 - the mechanism's failure, named
            raise AuditInputError(f"mechanism {kind!r}: release failed on an audit data set of {len(rows)} records "
                                  f"(epsilon={self.run_epsilon:g}): {one_line(exc)}") from None
        why = release_problem(rel, d)
        if why:
            raise AuditInputError(f"mechanism {kind!r}: {why}")
        return replace(self, trial=data)

    def release_seconds(self, *, at_least: int = 5, most: int = 500, seconds: float = 1.0) -> float:
        """CPU seconds of one release on the trial data set (``time.process_time``: what else
        the machine runs does not change it much): after one release to warm up, releases
        timed until ``seconds`` have passed (at least ``at_least``, at most ``most``), from
        a stream of their own."""
        rng = np.random.default_rng(np.random.SeedSequence(self.options.seed, spawn_key=(8,)))
        self.mechanism.release(self.trial, self.run_epsilon, rng)
        t0 = time.process_time()
        k = 0
        while k < most and (k < at_least or time.process_time() - t0 < seconds):
            self.mechanism.release(self.trial, self.run_epsilon, rng)
            k += 1
        return (time.process_time() - t0) / k


# ----------------------------------------------------------------------------- steps


class Step:
    """One audit of the plan: ``applies(ctx)`` from the claim, ``cost(ctx, draws)`` the
    releases it draws with ``draws`` per data set (0: closed form), ``run(ctx, draws,
    found, runner, progress)`` its :class:`~kngflow.audit.result.AuditResult`.  ``found``
    is shared by the steps of one audit (the black-box step leaves its pair there);
    ``progress`` is a factory ``(total, unit) -> bar`` with ``update(k)``."""

    name = "step"

    def applies(self, ctx: AuditContext) -> bool:
        raise NotImplementedError

    def cost(self, ctx: AuditContext, draws: int) -> int:
        return 0

    def run(self, ctx: AuditContext, draws: int, found: dict, runner, progress) -> AuditResult:
        raise NotImplementedError


def _pairs(ctx):
    return [ctx.pair] if ctx.pair is not None else None


class ExactStep(Step):
    """The law computed: on a grid (a ``Density`` claim, d <= 2, a bounded ``Theta``), or
    over a public finite set of outcomes (a ``Discrete`` claim, any d)."""

    name = "exact"

    def applies(self, ctx):
        from .exact import discrete_audit_applies, exact_audit_applies

        return exact_audit_applies(ctx.mechanism, ctx.problem) or discrete_audit_applies(ctx.mechanism)

    def run(self, ctx, draws, found, runner, progress):
        from .exact import discrete_audit, discrete_audit_applies, exact_audit

        if discrete_audit_applies(ctx.mechanism):
            return discrete_audit(ctx.mechanism, ctx.problem, ctx.epsilon, run_epsilon=ctx.run_epsilon,
                                  seed=ctx.options.seed, pairs=_pairs(ctx))
        with progress(0 if ctx.pair else 1000, "pair", ctx.pair is not None) as bar:
            return exact_audit(ctx.mechanism, ctx.problem, ctx.epsilon, run_epsilon=ctx.run_epsilon,
                               seed=ctx.options.seed, pairs=_pairs(ctx), candidates=1000, progress=bar.update)


class StatisticStep(Step):
    """Closed form for noise on a released statistic (a ``StatisticNoise`` claim)."""

    name = "statistic"

    def applies(self, ctx):
        from .exact import statistic_audit_applies

        return not ExactStep().applies(ctx) and statistic_audit_applies(ctx.mechanism, ctx.problem, ctx.pair)

    def run(self, ctx, draws, found, runner, progress):
        from .exact import statistic_audit

        return statistic_audit(ctx.mechanism, ctx.problem, ctx.epsilon, run_epsilon=ctx.run_epsilon,
                               seed=ctx.options.seed, pairs=_pairs(ctx))


class KnormStep(Step):
    """Closed form for K-norm noise on the loss gradient (a ``GradientNoise`` claim)."""

    name = "knorm"

    def applies(self, ctx):
        from kngflow.mechanisms.claims import GradientNoise

        return (isinstance(ctx.claim, GradientNoise) and not ExactStep().applies(ctx)
                and not StatisticStep().applies(ctx))

    def run(self, ctx, draws, found, runner, progress):
        from .exact import knorm_audit

        return knorm_audit(ctx.mechanism, ctx.problem, ctx.epsilon, run_epsilon=ctx.run_epsilon, seed=ctx.options.seed)


class AccountantStep(Step):
    """The accountant's ε of an (ε, δ) mechanism's calibrated noise (a ``Composed`` claim)."""

    name = "accountant"

    def applies(self, ctx):
        from .accountant import accountant_audit_applies

        return accountant_audit_applies(ctx.mechanism)

    def run(self, ctx, draws, found, runner, progress):
        from .accountant import accountant_audit

        return accountant_audit(ctx.mechanism, ctx.problem, ctx.epsilon, run_epsilon=ctx.run_epsilon, pair=ctx.pair)


class BitStep(Step):
    """Floating-point events of a release around an additive centre (:mod:`~kngflow.audit.bits`)."""

    name = "bit-level"

    def applies(self, ctx):
        from .bits import bit_audit_applies

        return bit_audit_applies(ctx.mechanism)

    def cost(self, ctx, draws):
        return 2 * draws

    def run(self, ctx, draws, found, runner, progress):
        from .bits import bit_audit

        with progress(self.cost(ctx, draws), "release", False) as bar:
            return bit_audit(ctx.mechanism, ctx.problem, ctx.epsilon, run_epsilon=ctx.run_epsilon, pair=ctx.pair,
                             draws=draws, seed=ctx.options.seed, progress=bar.update)


class BlackBoxStep(Step):
    """Releases on a searched pair of neighbouring data sets, a lower confidence bound on
    the loss (always)."""

    name = "black-box"

    def applies(self, ctx):
        return True

    def cost(self, ctx, draws):
        from .blackbox import planned_releases

        return planned_releases(draws, problem=None if ctx.pair is not None else ctx.view)

    def run(self, ctx, draws, found, runner, progress):
        from .blackbox import blackbox_audit

        with progress(self.cost(ctx, draws), "release", False) as bar:
            res = blackbox_audit(ctx.mechanism, ctx.problem, ctx.epsilon, run_epsilon=ctx.run_epsilon, pair=ctx.pair,
                                 draws=draws, seed=ctx.options.seed, target_power=ctx.options.target_power,
                                 max_draws=ctx.options.max_draws, runner=runner, progress=bar.update)
        found["pair"] = res.pair
        return res


class SideChannelStep(Step):
    """The black-box test on every output besides the estimate, on the black-box step's
    pair (on request)."""

    name = "side-channel"

    def applies(self, ctx):
        return bool(ctx.options.side_channel)

    @staticmethod
    def _draws(draws):
        return draws, max(100, draws // 10)

    def cost(self, ctx, draws):
        from .blackbox import side_channel_releases

        return side_channel_releases(*self._draws(draws))

    def run(self, ctx, draws, found, runner, progress):
        from .blackbox import side_channel_audit

        n, pilot = self._draws(draws)
        with progress(self.cost(ctx, draws), "release", False) as bar:
            return side_channel_audit(ctx.mechanism, ctx.problem, ctx.epsilon, run_epsilon=ctx.run_epsilon,
                                      pair=found.get("pair", ctx.pair), draws=n, pilot=pilot, seed=ctx.options.seed,
                                      runner=runner, progress=bar.update)


#: Every step, in the order an audit runs them.
STEPS = (ExactStep(), StatisticStep(), KnormStep(), AccountantStep(), BitStep(), BlackBoxStep(), SideChannelStep())
#: The steps that compute the law (their loss is exact, not a lower bound).
DECISIVE = ("exact", "statistic", "knorm")


def plan(ctx: AuditContext) -> list[Step]:
    """The steps that apply to the context, in the order they run."""
    return [s for s in STEPS if s.applies(ctx)]


def audit_plan(mechanism, problem, pair: AdjacentPair | None = None) -> list[str]:
    """The names of the steps ``kngflow audit`` runs on ``mechanism`` and ``problem`` (without
    ``--side-channel``), from the privacy claim alone: one of ``"exact"``, ``"statistic"``
    or ``"knorm"`` where one applies, ``"accountant"`` for a ``Composed`` claim,
    ``"bit-level"`` for a claim naming an additive centre, then ``"black-box"`` (always)."""
    from .pairs import audit_view

    claim = mechanism.privacy_claim()
    ctx = AuditContext(AuditOptions("", ""), problem, mechanism, claim, audit_view(mechanism, problem), 1.0, 1.0,
                       float(claim.delta), np.empty((0, problem.d)), pair, None)
    return [s.name for s in plan(ctx)]


def choose_draws(ctx: AuditContext, steps: list[Step], spent: float = 0.0,
                 say: Callable[[str], None] | None = None) -> int:
    """Releases per data set of the sampled steps: ``options.draws`` where given; else the
    largest of :data:`BUDGET_DRAWS` whose releases (the steps' :meth:`Step.cost`), at the
    CPU time per release measured on the trial data set, fit what is left of the time
    budget after ``spent`` CPU seconds (1000 where none fits).  ``say`` gets a line where
    that is fewer than :data:`DEFAULT_DRAWS`.  CPU seconds, not wall time: the choice does
    not follow the machine's load, nor the workers (workers make the audit faster, not
    larger)."""
    if ctx.options.draws is not None:
        return int(ctx.options.draws)

    def count(n):
        return sum(s.cost(ctx, n) for s in steps)

    per = ctx.release_seconds()
    left = ctx.options.time_budget - spent
    draws = next((n for n in BUDGET_DRAWS if count(n) * per <= left), BUDGET_DRAWS[-1])
    if draws < DEFAULT_DRAWS and say is not None:
        over = "" if count(draws) * per <= left else f"; {draws} take about {_duration(count(draws) * per)}"
        full = _duration(count(DEFAULT_DRAWS) * per)
        say(f"draws: {draws} releases per data set, not {DEFAULT_DRAWS}: at {per * 1e3:.3g} ms of CPU per release "
            f"{DEFAULT_DRAWS} would take about {full}, over the {_duration(max(0, left))} left of the time budget "
            f"of {ctx.options.time_budget:g} s{over} (--time-budget S; --draws N draws N)")
    return draws


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


# ----------------------------------------------------------------------------- verdict


@dataclass(frozen=True)
class Verdict:
    """The results of one audit and what they allow one to say."""

    epsilon: float
    results: tuple
    hardening: str = ""

    @property
    def flagged(self) -> list[str]:
        return [r.kind for r in self.results if not r.passed]

    @property
    def passed(self) -> bool:
        return not self.flagged

    def render(self) -> str:
        """Each result's summary, the hardening line, what decides, then the verdict line."""
        lines = [r.summary() for r in self.results]
        if self.hardening:
            lines.append(self.hardening)
        decisive = [r.kind for r in self.results if r.kind in DECISIVE]
        if decisive:
            lines.append(f"decisive: the {decisive[0]} audit computes the law of the release, so its loss is the "
                         "privacy loss on the pairs it covers; the sampled audits can only add evidence of a leak")
        elif any(r.kind == "black-box" for r in self.results):
            lines.append("no audit computes this mechanism's law (its claim allows none): the black-box bound is "
                         "evidence about the data sets searched, not a proof of privacy")
        flagged = self.flagged
        lines.append(f"verdict: {'FLAGGED by ' + ', '.join(flagged) + ' audit' if flagged else 'PASS'}"
                     f" (declared epsilon={self.epsilon:g})")
        return "\n".join(lines)


def _hardening_line(ctx: AuditContext) -> str:
    if ctx.mechanism.hardened:
        # the guarantee of the hardened release, derived in kngflow.mechanisms.hardening
        return ctx.mechanism.hardening(ctx.trial, ctx.run_epsilon).describe(ctx.run_epsilon, ctx.delta)
    if ctx.mechanism.private:
        return ("not hardened: the float64 release itself, whose low bits depend on the data"
                + (" (--option hardened=true snaps it to a public grid)" if type(ctx.mechanism).hardenable() else
                   " (the mechanism declares no hardening; see docs/plugins.md, 'Hardening a plug-in')"))
    return ""


class _Quiet:
    """No progress bar."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def update(self, k: int = 1) -> None:
        pass


def run_audit(ctx: AuditContext, *, runner=None, progress=None, say: Callable[[str], None] | None = None,
              started: float | None = None) -> Verdict:
    """Run the plan of ``ctx``: closed-form steps first, then the draws chosen for the
    sampled ones (:func:`choose_draws`, the time budget counted from ``started``, a
    ``time.process_time()``; default: now), then those.  ``progress(total, unit,
    disable)`` makes a bar (default: none)."""
    started = time.process_time() if started is None else started
    if progress is None:
        def progress(total, unit, disable):
            return _Quiet()

    steps = plan(ctx)
    found: dict = {}
    results = [s.run(ctx, 0, found, runner, progress) for s in steps if not s.cost(ctx, 1000)]
    sampled = [s for s in steps if s.cost(ctx, 1000)]
    draws = choose_draws(ctx, sampled, time.process_time() - started, say) if sampled else 0
    results += [s.run(ctx, draws, found, runner, progress) for s in sampled]
    return Verdict(ctx.epsilon, tuple(results), _hardening_line(ctx))

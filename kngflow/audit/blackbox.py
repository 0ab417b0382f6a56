r"""Black-box privacy audits: sample releases, bound the privacy loss from below.

For adjacent data sets ``D, D'`` an ε-DP mechanism satisfies
``P_D(E) <= e^ε P_D'(E)`` for every event ``E``.  The audit

1. picks the pair (unless given) over neighbouring data sets of the problem's declared
   records: the rest of the data set is searched too (fills of one record of each class
   at the smallest size, a mixture, random rests), the extreme pairs are always scored,
   every swap in each context is scored from releases drawn on the data set completed by
   each record, the other records are changed by local moves, and a fixed number of pairs
   are scored again on larger samples (:func:`~kngflow.audit.search.search_pair`);
2. draws a separate *pilot* sample on ``D`` and ``D'`` and chooses, from it alone, the
   events: its first half fits statistics of a release (projections on the mean
   difference, Fisher and principal directions and the axes, a Gaussian and a kernel log
   likelihood ratio, histogram log likelihood ratios), its second half the threshold
   events ``{s > t}``, ``{s <= t}`` and orientations whose bound on ``draws`` fresh
   releases is predicted largest (:func:`~kngflow.audit.events.select_events`);
3. draws ``draws`` fresh releases on each side and counts each chosen event (with
   ``target_power``: as many draws as a loss of that size needs to be flagged with
   probability 0.9, by the pilot's masses of the events, up to ``max_draws``);
4. reports ``max log((lo_D(E) - δ) / hi_D'(E))`` over the ``k`` chosen events in their
   orientations, with ``lo``/``hi`` one-sided Clopper–Pearson bounds at level
   ``alpha / (2 k)`` (Bonferroni).  The events depend on the pilot only, so with
   probability at least ``1 - alpha`` every bound holds at once and the reported value is
   a lower confidence bound on the privacy loss: an ε-DP mechanism is flagged (bound > ε)
   with probability at most ``alpha``;
5. states its power: the smallest loss on this pair, realised on one of its events, that
   these draws flag with probability at least 0.9 (:mod:`~kngflow.audit.power`).

The bound is on the loss of the searched pair and events only: a pass is evidence, not
proof, of privacy; a flag is a proof of a violation at confidence ``1 - alpha`` (for the
law the mechanism samples).  :func:`audit_callable` runs steps 2–5 on any release
function and two given inputs.

Releases are drawn in chunks with their own seeds (:mod:`~kngflow.audit.runner`), in
this process or as Dask tasks (``runner``): the bound is the same whatever the number of
workers.  Mechanisms whose sampler is approximate (MCMC fallbacks) are audited as they
run: the guarantee then concerns the law they actually sample.

The side-channel audit (:func:`side_channel_audit`) runs the same test on every output a
release carries besides its released record (``Release.record()``): each ``info`` field
and the wall time of the call, one at a time.
"""

from __future__ import annotations

import math

import numpy as np

from . import power as pw
from .events import SMOOTH, best_predicted, clean, select_events, statistics
from .pairs import AdjacentPair, audit_view
from .result import ALPHA, AuditResult, clopper_pearson
from .runner import Chunk, LocalRunner, chunk_sizes, releases
from .search import search_cost, search_pair

__all__ = ["blackbox_audit", "side_channel_audit", "audit_callable", "sample_releases", "planned_releases",
           "side_channel_releases"]
#: Default fresh releases per side (the calibration suite's broken mechanisms at 1.4 ε are
#: flagged with it: ``docs/audits.md``).
DRAWS = 50_000
#: Most releases per declared record (and per side of a pair) that score the pairs by
#: default; fewer (``draws / 20``, at least 100) for audits of fewer draws.
SCORE_DRAWS = 500


def _score_draws(draws: int, score_draws: int | None) -> int:
    return int(score_draws) if score_draws is not None else min(SCORE_DRAWS, max(100, int(draws) // 20))
#: Events chosen on the pilot and counted on the fresh draws.
EVENTS = 4
#: Default most fresh releases per side that ``target_power`` may ask for.
MAX_DRAWS = 10**7


def _delta(mechanism) -> float:
    """The δ of the mechanism's privacy claim (0: pure ε-DP); the audit bounds ε at that δ."""
    return float(mechanism.privacy_claim().delta)


def _pilot_size(draws: int, pilot: int | None) -> int:
    return int(pilot) if pilot is not None else max(1000, min(draws // 5, 20_000))


def _join(parts):
    if not parts:
        return np.empty((0, 0)), {}
    est = np.vstack([p[0] for p in parts])
    keys = set().union(*(p[1] for p in parts))
    side = {k: np.concatenate([p[1].get(k, np.full(len(p[0]), np.nan)) for p in parts]) for k in keys}
    return est, side


class _Sampler:
    """The releases of one audit: each request is numbered, and its chunks are drawn from
    the streams ``(request, data set, chunk)`` of the audit's seed, on ``runner``; the
    chunks of the data sets of a request alternate (slow drifts of the machine — timings,
    caches — then fall on both sides alike)."""

    def __init__(self, mechanism, problem, epsilon, seed, runner, progress):
        self.mechanism, self.problem, self.epsilon, self.seed = mechanism, problem, float(epsilon), int(seed)
        self.runner = runner or LocalRunner()
        self.progress = progress
        self.requests = 0

    def accepts(self, records) -> bool:
        try:
            self.problem.audit_data(records)
        except ValueError:
            return False
        return True

    def __call__(self, datasets, size, reduce=None, strict=False):
        """Per data set: ``(estimates, other outputs)`` joined over its chunks, or the list of
        ``reduce(...)`` of its chunks; None for a data set the problem rejects (``strict``:
        the problem's ValueError is raised instead)."""
        request = self.requests
        self.requests += 1
        if strict:
            for X in datasets:
                self.problem.audit_data(X)
        ok = [self.accepts(X) for X in datasets]
        sizes = chunk_sizes(size)
        chunks, owner = [], []
        for c, k in enumerate(sizes):
            for i, X in enumerate(datasets):
                if ok[i]:
                    chunks.append(Chunk(np.asarray(X, dtype=float), k, (request, i, c)))
                    owner.append(i)
        res = self.runner.map(self.mechanism, self.problem, self.epsilon, self.seed, chunks, reduce, self.progress)
        per = [[] for _ in datasets]
        for i, r in zip(owner, res):
            per[i].append(r)
        if reduce is not None:
            return [p if ok[i] else None for i, p in enumerate(per)]
        return [_join(p) if ok[i] else None for i, p in enumerate(per)]


class _Counter:
    """Counts of the chosen events among releases (the main stage's reduction, run where
    the releases are drawn)."""

    def __init__(self, cleaner, events):
        self.cleaner, self.events = cleaner, events

    def __call__(self, est, side):
        x = self.cleaner(est)
        values = {}  # each statistic evaluated once
        for ev in self.events:
            if id(ev.statistic) not in values:
                values[id(ev.statistic)] = ev.statistic.fn(x)
        counts = [int(ev.indicator(x, values[id(ev.statistic)]).sum()) for ev in self.events]
        return np.array(counts, dtype=np.int64), len(x)


def _choose(pa, pb, n, alpha, delta, events):
    """The cleaning map and the chosen events from pilots ``pa``, ``pb`` (rows): first halves
    fit the statistics, second halves choose thresholds and orientations for ``n`` fresh
    draws per side."""
    cl = clean(np.vstack([pa, pb]))
    pa, pb = cl(pa), cl(pb)
    ha, hb = len(pa) // 2, len(pb) // 2
    stats = statistics(pa[:ha], pb[:hb])
    chosen = select_events(stats, pa[ha:], pb[hb:], n, alpha / (2 * events), delta, events)
    return cl, chosen, (pa[ha:], pb[hb:])


def _pilot_masses(chosen, sa, sb):
    """``(p_num, p_den)`` of each event on the select samples, the numerator's shrunk one
    standard error down (the event was chosen for it)."""
    out = []
    for ev in chosen:
        ka, kb = float(ev.indicator(sa).sum()), float(ev.indicator(sb).sum())
        (kn, mn), (kd, md) = ((ka, len(sa)), (kb, len(sb))) if ev.forward else ((kb, len(sb)), (ka, len(sa)))
        out.append((float(clopper_pearson(kn, mn, SMOOTH)[0]), kd / md))
    return out


def _test(chosen, counts_a, counts_b, na, nb, alpha, delta, epsilon):
    """The bound from the counts of the chosen events, its details and power statement."""
    info = {"events": []}
    if not chosen or na == 0 or nb == 0:
        info["power"] = {"loss": math.inf, "power": pw.POWER, "method": "no event was chosen"}
        info["notes"] = ["power: no event was found on the pilot; this audit would flag no loss"]
        return 0.0, info
    level = alpha / (2 * len(chosen))
    best, masses = 0.0, []
    for ev, ka, kb in zip(chosen, counts_a, counts_b):
        ka, kb = int(ka), int(kb)
        (num, n_num), (den, n_den) = ((ka, na), (kb, nb)) if ev.forward else ((kb, nb), (ka, na))
        lo, _ = clopper_pearson(np.array([num]), n_num, level)
        _, hi = clopper_pearson(np.array([den]), n_den, level)
        with np.errstate(divide="ignore"):
            b_ev = float(np.log(max(lo[0] - delta, 0.0)) - np.log(hi[0]))
        masses.append((num / n_num, den / n_den))
        info["events"].append({"event": ev.describe(), "orientation": "D over D'" if ev.forward else "D' over D",
                               "count_D": ka, "count_D'": kb, "draws": (na, nb), "predicted": ev.predicted,
                               "bound": max(b_ev, 0.0)})
        best = max(best, b_ev)
    top = max(info["events"], key=lambda e: e["bound"])
    info["event"] = top["event"]
    k_other = top["count_D'"]
    loss = pw.loss_at_power(masses, min(na, nb), level, epsilon, delta)
    method = "binomial law of the event counts at the masses measured on the fresh draws"
    info["power"] = {"loss": loss, "power": pw.POWER, "method": method}
    statement = (f"power: a loss of {loss:.3f} or more on this pair, realised on one of its {len(chosen)} events, "
                 f"is flagged with probability >= {pw.POWER:g} with these draws ({method}); a statement about "
                 "this pair and these events only, not about data sets the search did not try"
                 if math.isfinite(loss) else
                 f"power: no loss below {pw.LOSS_MAX:g} on these events is flagged with probability >= {pw.POWER:g} "
                 "with these draws (their masses are too small)")
    info["notes"] = [(f"event: {top['event']} ({top['orientation']}): {top['count_D']} of {na} fresh releases "
                      f"on D, {k_other} of {nb} on D'"), statement]
    return max(best, 0.0), info


def _fresh_counts(sampler, pair, cl, chosen, draws):
    """Counts of the chosen events on ``draws`` fresh releases per side of ``pair``."""
    if not chosen:
        return np.zeros(0), np.zeros(0), 0, 0
    per = sampler(list(pair.datasets()), draws, reduce=_Counter(cl, chosen), strict=True)
    (ca, na), (cb, nb) = ((np.sum([c for c, _ in p], axis=0), sum(m for _, m in p)) for p in per)
    return ca, cb, na, nb


def _plan_draws(chosen, selects, draws, target_power, max_draws, alpha, delta, epsilon):
    """Draws per side for the main stage: ``draws``, or (``target_power``) the draws that
    flag a loss of ``target_power`` w.p. 0.9 on one of the events at their pilot masses."""
    if target_power is None or not chosen:
        return int(draws)
    masses = _pilot_masses(chosen, *selects)
    return max(int(draws), pw.draws_for_loss(masses, float(target_power), alpha / (2 * len(chosen)), epsilon,
                                             delta, start=int(draws), budget=int(max_draws)))


def _searched(sampler, problem, extract, *, draws, candidates, moves, score_draws, seed, alpha,
              delta):
    """The searched pair and the search's details."""
    level = alpha / (2 * EVENTS)

    def score(a, b):
        cl = clean(np.vstack([a, b]))
        return best_predicted(cl(a), cl(b), draws, level, delta)

    def sample(datasets, size):
        return [None if r is None else extract(*r) for r in sampler(datasets, size)]

    rng = np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(2**31,)))
    res = search_pair(sample, score, problem, rng, contexts=max(1, candidates // 4),
                      moves=candidates if moves is None else moves, score_draws=score_draws, min_size=problem.d)
    return res.pair, {"pairs_scored": res.details["swaps_scored"], "pair_score": res.score, "search": res.details,
                      "searched": searched_line(res.details)}


def searched_line(details: dict) -> str:
    """What the pair search tried, in one line (for the verdict)."""
    kinds = ", ".join(f"{k} {v}" for k, v in details["datasets"].items())
    sizes = details["sizes"]
    return (f"searched: {sum(details['datasets'].values())} sets of other records ({kinds}; data sets of "
            f"{min(sizes)}-{max(sizes)} records), {details['swaps_scored']} swaps of {details['records']} declared "
            f"records, the {details['extreme_pairs']} extreme pairs among them; the pair below is the one whose "
            "releases differed most")


def planned_releases(draws: int, pilot: int | None = None, *, problem=None, candidates: int = 8,
                     moves: int | None = None, score_draws: int | None = None) -> int:
    """Releases one :func:`blackbox_audit` draws with these settings: the pair search's on
    ``problem`` (as the audit sees it, :func:`~kngflow.audit.pairs.audit_view`; None: the
    pair is given, no search), then the pilot and the fresh draws on each side.  Exact
    where the problem accepts every data set searched (for the time budget and the
    progress bar)."""
    search = 0
    if problem is not None:
        search = search_cost(problem, contexts=max(1, candidates // 4), moves=candidates if moves is None else moves,
                             score_draws=_score_draws(draws, score_draws), min_size=problem.d)
    return search + 2 * (draws + _pilot_size(draws, pilot))


def blackbox_audit(
    mechanism,
    problem,
    epsilon: float,
    *,
    run_epsilon: float | None = None,
    pair: AdjacentPair | None = None,
    draws: int = DRAWS,
    pilot: int | None = None,
    candidates: int = 8,
    moves: int | None = None,
    score_draws: int | None = None,
    alpha: float = ALPHA,
    events: int = EVENTS,
    seed: int = 0,
    target_power: float | None = None,
    max_draws: int = MAX_DRAWS,
    runner=None,
    progress=None,
) -> AuditResult:
    """Black-box audit of the released record (the estimate).

    Parameters
    ----------
    mechanism : object with ``release(data, epsilon, rng) -> Release``.
    problem : object with ``d``, ``audit_records()`` and ``audit_data(records)``.
    epsilon : declared ε; ``run_epsilon`` is the one the mechanism runs at (default ε;
        a negative control runs at ``2 epsilon``).
    pair : the adjacent pair; default: searched over the declared records
        (:func:`~kngflow.audit.search.search_pair`): every swap scored on ``score_draws``
        releases per record (default ``draws / 20``, between 100 and 500) in ``max(1, candidates // 4)`` sets of other records, then
        ``moves`` (default ``candidates``) moves of the other records.
    draws : fresh releases per side counted for the bound.
    pilot : releases per side that choose the events (default ``draws / 5``, between
        1 000 and 20 000).  events : events counted on the fresh draws (Bonferroni).
    alpha : family-wise error: an ε-DP mechanism is flagged w.p. at most ``alpha``.
    target_power : a loss L: draw as many fresh releases (at least ``draws``, at most
        ``max_draws``) as make a loss of L on the pilot's events flagged w.p. >= 0.9.
    runner : where releases are drawn (:class:`~kngflow.audit.runner.LocalRunner`, the
        default, or :class:`~kngflow.audit.runner.DaskRunner`); the result does not depend on it.
    progress : optional callable ``progress(releases_done)``.

    Notes
    -----
    A mechanism with ``delta > 0`` ((ε, δ)-DP) is tested at its δ: the bound is on ε given
    that δ (``P_D(E) <= e^ε P_D'(E) + δ``).  ``details["power"]`` holds the power statement
    (:mod:`~kngflow.audit.power`).
    """
    run = float(epsilon if run_epsilon is None else run_epsilon)
    delta = _delta(mechanism)
    pilot = _pilot_size(draws, pilot)
    score_draws = _score_draws(draws, score_draws)
    problem = audit_view(mechanism, problem)
    sampler = _Sampler(mechanism, problem, run, seed, runner, progress)
    search = {}
    if pair is None:
        pair, search = _searched(sampler, problem, lambda e, side: e, draws=draws, candidates=candidates,
                                 moves=moves, score_draws=score_draws, seed=seed, alpha=alpha, delta=delta)
    (pa, _), (pb, _) = sampler(list(pair.datasets()), pilot, strict=True)
    cl, chosen, selects = _choose(pa, pb, draws, alpha, delta, events)
    n = _plan_draws(chosen, selects, draws, target_power, max_draws, alpha, delta, float(epsilon))
    if n != draws:
        cl, chosen, selects = _choose(pa, pb, n, alpha, delta, events)
    ca, cb, na, nb = _fresh_counts(sampler, pair, cl, chosen, n)
    bound, info = _test(chosen, ca, cb, na, nb, alpha, delta, float(epsilon))
    info["pilot"] = (len(pa), len(pb))
    info["notes"] = ([search["searched"]] if search else ["pair: given, not searched"]) + info["notes"]
    return AuditResult("black-box", repr(mechanism), float(epsilon), bound, 0.0, pair, bool(bound <= epsilon),
                       {"run_epsilon": run, "draws": n, "alpha": alpha, "delta": delta, "seed": seed,
                        "target_power": target_power, **info, **search})


def sample_releases(mechanism, problem, records, epsilon, rng, size, progress=None):
    """``size`` releases on the data set ``records`` from ``rng``: estimates (size, d) and
    the other outputs as a dict of float arrays (``info`` fields, ``sampler`` as its code,
    and the wall time of each call as ``seconds``)."""
    out = releases(mechanism, problem.audit_data(records), epsilon, rng, size)
    if progress:
        progress(size)
    return out


def side_channel_audit(
    mechanism,
    problem,
    epsilon: float,
    *,
    run_epsilon: float | None = None,
    pair: AdjacentPair | None = None,
    draws: int = 5_000,
    pilot: int | None = 1_000,
    candidates: int = 8,
    moves: int | None = None,
    score_draws: int = 200,
    alpha: float = ALPHA,
    seed: int = 0,
    runner=None,
    progress=None,
) -> AuditResult:
    """The black-box test on the released record and on every other output, field by field.

    ``details["fields"]`` maps each non-record output (``info`` fields, ``seconds``) to
    ``(lower bound, data_dependent)``, where data dependence means a bound above ε
    (Bonferroni over the fields and the record).  ``passed`` refers to the released
    record only: the audit passes when the record's bound is at most ε, whatever the
    diagnostics show — they are not part of the release.  The mechanism runs at
    ``run_epsilon`` (default ε) and is tested at its claim's δ, as in
    :func:`blackbox_audit`.  ``kngflow audit`` passes the pair its black-box step chose;
    without one, the pair searched is the one whose other outputs differ most.
    """

    def side_only(e, side):
        return np.column_stack([side[k] for k in sorted(side)])

    run = float(epsilon if run_epsilon is None else run_epsilon)
    delta = _delta(mechanism)
    pilot = _pilot_size(draws, pilot)
    problem = audit_view(mechanism, problem)
    sampler = _Sampler(mechanism, problem, run, seed, runner, progress)
    search = {}
    if pair is None:
        pair, search = _searched(sampler, problem, side_only, draws=draws, candidates=candidates,
                                 moves=moves, score_draws=score_draws, seed=seed, alpha=alpha, delta=0.0)
    (pa, sa), (pb, sb) = sampler(list(pair.datasets()), pilot, strict=True)
    (a, ta), (b, tb) = sampler(list(pair.datasets()), draws, strict=True)
    level = alpha / (len(ta) + 1)
    record, info = _event_test(pa, pb, a, b, level, delta, EVENTS, float(epsilon))
    fields = {}
    for k in sorted(ta):
        bound, _ = _event_test(sa[k][:, None], sb[k][:, None], ta[k][:, None], tb[k][:, None], level, 0.0, EVENTS,
                               float(epsilon))
        fields[k] = (bound, bool(bound > epsilon))
    return AuditResult("side-channel", repr(mechanism), float(epsilon), record, 0.0, pair, bool(record <= epsilon),
                       {"fields": fields, "draws": draws, "alpha": alpha, "run_epsilon": run, "delta": delta,
                        **info, **search})


def side_channel_releases(draws: int = 5_000, pilot: int | None = 1_000) -> int:
    """Releases one :func:`side_channel_audit` on a given pair draws."""
    return 2 * (draws + _pilot_size(draws, pilot))


def _event_test(pa, pb, a, b, alpha, delta, events, epsilon):
    """Bound, details and power statement from pilots ``pa``, ``pb`` and fresh samples ``a``, ``b`` (rows)."""
    cl, chosen, _ = _choose(pa, pb, min(len(a), len(b)), alpha, delta, events)
    ca = [int(ev.indicator(cl(a)).sum()) for ev in chosen]
    cb = [int(ev.indicator(cl(b)).sum()) for ev in chosen]
    bound, info = _test(chosen, ca, cb, len(a), len(b), alpha, delta, epsilon)
    info["pilot"] = (len(pa), len(pb))
    return bound, info


def audit_callable(
    f,
    data,
    other,
    epsilon: float,
    *,
    delta: float = 0.0,
    draws: int = DRAWS,
    pilot: int | None = None,
    seed: int = 0,
    alpha: float = ALPHA,
    events: int = EVENTS,
    progress=None,
) -> AuditResult:
    """Black-box audit of any release function on two given neighbouring inputs.

    ``f(data, rng) -> array`` releases once on one input (any library's mechanism wrapped
    so; ``rng`` a numpy Generator it should draw its randomness from); ``data`` and
    ``other`` are the two neighbouring inputs.  The releases (flattened to vectors) go
    through the same event search on a pilot, held-out estimation and power statement as
    :func:`blackbox_audit`.  Returns an :class:`~kngflow.audit.exact.AuditResult` of kind
    "black-box" (no pair: the inputs are the caller's); flagged when the lower confidence
    bound on ε at ``delta`` exceeds ``epsilon``.
    """
    rng = np.random.default_rng(seed)
    pilot = _pilot_size(draws, pilot)

    def draw(x, k):
        rows = [np.ravel(np.asarray(f(x, rng), dtype=float)) for _ in range(k)]
        if progress:
            progress(k)
        return np.array(rows, dtype=float).reshape(k, -1)

    pa, pb = draw(data, pilot), draw(other, pilot)
    a, b = draw(data, draws), draw(other, draws)
    bound, info = _event_test(pa, pb, a, b, alpha, float(delta), events, float(epsilon))
    name = getattr(f, "__qualname__", None) or repr(f)
    return AuditResult("black-box", name, float(epsilon), bound, 0.0, None, bool(bound <= epsilon),
                       {"draws": draws, "alpha": alpha, "delta": float(delta), **info})

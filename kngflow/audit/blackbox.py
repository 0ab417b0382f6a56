r"""Black-box privacy audits: sample releases, bound the privacy loss from below.

For adjacent data sets ``D, D'`` an ε-DP mechanism satisfies
``P_D(E) <= e^ε P_D'(E)`` for every event ``E``.  The audit

1. picks the pair (unless given): random restarts over candidate pairs of the problem's
   records, then local moves (the changed record or its replacement becomes another
   record of the domain; the other records change), each pair scored on a small sample
   of releases by the bound its best event would give
   (:func:`~kngflow.audit.search.search_pair`);
2. draws a separate *pilot* sample on ``D`` and ``D'`` (in alternating batches) and
   chooses, from it alone, the events: its first half fits statistics of a release
   (projections on the mean difference, Fisher and principal directions and the axes, a
   Gaussian and a kernel log likelihood ratio, histogram log likelihood ratios), its second half the
   threshold events ``{s > t}``, ``{s <= t}`` and orientations whose bound on ``draws``
   fresh releases is predicted largest (:func:`~kngflow.audit.search.select_events`);
3. draws ``draws`` fresh releases on each side and counts each chosen event;
4. reports ``max log((lo_D(E) - δ) / hi_D'(E))`` over the ``k`` chosen events in their
   orientations, with ``lo``/``hi`` one-sided Clopper–Pearson bounds at level
   ``alpha / (2 k)`` (Bonferroni).  The events depend on the pilot only, so with
   probability at least ``1 - alpha`` every bound holds at once and the reported value is
   a lower confidence bound on the privacy loss: an ε-DP mechanism is flagged (bound > ε)
   with probability at most ``alpha``.

The bound is on the loss of the searched pair and events only: a pass is evidence, not
proof, of privacy; a flag is a proof of a violation at confidence ``1 - alpha`` (for the
law the mechanism samples).  :func:`audit_callable` runs steps 2–4 on any release
function and two given inputs.

Mechanisms whose sampler is approximate (MCMC fallbacks) are audited as they run: the
guarantee then concerns the law they actually sample.

The side-channel audit (:func:`side_channel_audit`) runs the same test on every output a
release carries besides its released record (``Release.record()``): each ``info`` field
and the wall time of the call, one at a time.
"""

from __future__ import annotations

import time
import zlib

import numpy as np
from scipy import stats as sps

from .exact import AuditResult
from .pairs import AdjacentPair, audit_view
from .search import best_predicted, clean, search_pair, select_events, statistics

__all__ = ["clopper_pearson", "loss_lower_bound", "blackbox_audit", "side_channel_audit", "audit_callable",
           "sample_releases", "planned_releases"]

#: Default family-wise error of one audit (probability of flagging an ε-DP mechanism).
ALPHA = 1e-5
#: Default fresh releases per side (a Laplace mechanism run at 2ε is flagged).
DRAWS = 100_000
#: Events chosen on the pilot and counted on the fresh draws.
EVENTS = 4
#: Releases drawn on one side before switching to the other.
BATCH = 500



def clopper_pearson(k: np.ndarray, n: int, level: float) -> tuple[np.ndarray, np.ndarray]:
    """One-sided Clopper–Pearson bounds ``(lower, upper)``, each holding w.p. >= 1 - level."""
    k = np.asarray(k, dtype=float)
    lo = np.where(k > 0, sps.beta.ppf(level, np.maximum(k, 1), n - k + 1), 0.0)
    hi = np.where(k < n, sps.beta.ppf(1 - level, k + 1, np.maximum(n - k, 1)), 1.0)
    return lo, hi


def loss_lower_bound(counts_a: np.ndarray, counts_b: np.ndarray, n: int, alpha: float, delta: float = 0.0) -> float:
    """Lower confidence bound on the privacy loss ε at ``delta`` from event counts on two
    data sets.

    ``counts_a``, ``counts_b``: counts of the same ``m`` events in ``n`` releases each.
    Both orientations are tested; Bonferroni over ``2 m`` ratios, each needing two bounds.
    (ε, δ)-DP gives ``P_a(E) <= e^ε P_b(E) + δ``, so ``log((lo_a - δ) / hi_b)`` bounds ε
    from below (events with ``lo_a <= δ`` say nothing); ``delta = 0`` is the ε-DP test.
    """
    m = 2 * counts_a.size
    level = alpha / (2 * m)
    lo_a, hi_a = clopper_pearson(counts_a.ravel(), n, level)
    lo_b, hi_b = clopper_pearson(counts_b.ravel(), n, level)
    with np.errstate(divide="ignore"):
        r = np.concatenate([np.log(np.maximum(lo_a - delta, 0.0)) - np.log(hi_b),
                            np.log(np.maximum(lo_b - delta, 0.0)) - np.log(hi_a)])
    return float(max(0.0, np.max(r)))


def _delta(mechanism) -> float:
    """The δ of the mechanism's privacy claim (0: pure ε-DP); the audit bounds ε at that δ."""
    return float(mechanism.privacy_claim().delta)


def _pilot_size(draws: int, pilot: int | None) -> int:
    return int(pilot) if pilot is not None else max(1000, min(draws // 5, 20_000))


def _releases(mechanism, data, epsilon, rng, size):
    """``size`` releases on ``data``: estimates (size, d) and the other outputs as a dict of
    float arrays (``info`` fields, a text value as a stable number, wall time as ``seconds``)."""
    est, side = [], {}
    for _ in range(size):
        t = time.perf_counter()
        rel = mechanism.release(data, epsilon, rng)
        dt = time.perf_counter() - t
        est.append(np.concatenate([np.ravel(v) for v in rel.record().values()]))
        for k, v in rel.diagnostics().items():
            side.setdefault(k, []).append(float(zlib.crc32(v.encode())) if isinstance(v, str) else float(v))
        side.setdefault("seconds", []).append(dt)
    return np.array(est, dtype=float).reshape(size, -1), {k: np.array(v) for k, v in side.items()}


def sample_releases(mechanism, problem, records, epsilon, rng, size, progress=None):
    """``size`` releases on the data set ``records``: estimates (size, d) and the other
    outputs as a dict of float arrays (``info`` fields, ``sampler`` as its code, and the
    wall time of each call as ``seconds``)."""
    data = problem.audit_data(records)
    parts = []
    for start in range(0, size, BATCH):
        k = min(BATCH, size - start)
        parts.append(_releases(mechanism, data, epsilon, rng, k))
        if progress:
            progress(k)
    return _join(parts)


def _join(parts):
    if not parts:
        return np.empty((0, 0)), {}
    est = np.vstack([p[0] for p in parts])
    keys = set().union(*(p[1] for p in parts))
    side = {k: np.concatenate([p[1].get(k, np.full(len(p[0]), np.nan)) for p in parts]) for k in keys}
    return est, side


def _draw_both(draw_a, draw_b, size, progress):
    """``size`` draws on each side, in alternating batches (slow drifts of the machine —
    timings, caches — then fall on both sides alike)."""
    pa, pb = [], []
    for start in range(0, size, BATCH):
        k = min(BATCH, size - start)
        pa.append(draw_a(k))
        pb.append(draw_b(k))
        if progress:
            progress(2 * k)
    return _join(pa), _join(pb)


def _event_test(pa, pb, a, b, alpha, delta=0.0, events=EVENTS):
    """Lower confidence bound on the loss (at ``delta``) and its details.

    Pilots ``pa``, ``pb`` (rows) choose the events: their first halves fit the statistics
    (:func:`~kngflow.audit.search.statistics`), their second halves the thresholds and
    orientations (:func:`~kngflow.audit.search.select_events`).  The fresh samples ``a``,
    ``b`` are counted once per chosen event; each of its two Clopper–Pearson bounds holds
    at level ``alpha / (2 k)`` (``k`` events), so all hold at once w.p. >= 1 - alpha.
    """
    cl = clean(np.vstack([pa, pb]))
    pa, pb, a, b = cl(pa), cl(pb), cl(a), cl(b)
    ha, hb = len(pa) // 2, len(pb) // 2
    stats = statistics(pa[:ha], pb[:hb])
    na, nb = len(a), len(b)
    chosen = select_events(stats, pa[ha:], pb[hb:], min(na, nb), alpha / (2 * events), delta, events)
    info = {"events": [], "pilot": (len(pa), len(pb))}
    if not chosen or na == 0 or nb == 0:
        return 0.0, info
    level = alpha / (2 * len(chosen))
    best = 0.0
    for ev in chosen:
        ka, kb = int(ev.indicator(a).sum()), int(ev.indicator(b).sum())
        (num, n_num), (den, n_den) = ((ka, na), (kb, nb)) if ev.forward else ((kb, nb), (ka, na))
        lo, _ = clopper_pearson(np.array([num]), n_num, level)
        _, hi = clopper_pearson(np.array([den]), n_den, level)
        with np.errstate(divide="ignore"):
            b_ev = float(np.log(max(lo[0] - delta, 0.0)) - np.log(hi[0]))
        info["events"].append({"event": ev.describe(), "orientation": "D over D'" if ev.forward else "D' over D",
                               "count_D": ka, "count_D'": kb, "draws": (na, nb), "predicted": ev.predicted,
                               "bound": max(b_ev, 0.0)})
        best = max(best, b_ev)
    top = max(info["events"], key=lambda e: e["bound"])
    info["event"] = top["event"]
    kb_top = top["count_D'"]
    info["notes"] = [(f"event: {top['event']} ({top['orientation']}): {top['count_D']} of {na} fresh releases "
                      f"on D, {kb_top} of {nb} on D'")]
    return max(best, 0.0), info


def _pair_score(extract, sampler, size, n, level, delta, progress):
    """Score of a pair: the best predicted bound of a projection event on ``size`` releases
    per side (-inf when the problem rejects a data set of the pair)."""

    def score(p):
        try:
            (ea, sa), (eb, sb) = sampler(p, size, progress)
        except ValueError:
            return -np.inf
        a, b = extract(ea, sa), extract(eb, sb)
        cl = clean(np.vstack([a, b]))
        return best_predicted(cl(a), cl(b), n, level, delta)

    return score


def _collect(mechanism, problem, epsilon, pair, *, draws, pilot, candidates, moves, score_draws, seed, extract,
             delta, alpha, progress):
    """The pair (searched on ``extract``-ed releases when None), search details, and the
    pilot and main samples on both sides, each an ``(estimates, other outputs)`` tuple."""
    problem = audit_view(mechanism, problem)
    rng = np.random.default_rng(seed)

    def sampler(p, size, prog):
        A, B = (problem.audit_data(X) for X in p.datasets())
        return _draw_both(lambda k: _releases(mechanism, A, epsilon, rng, k),
                          lambda k: _releases(mechanism, B, epsilon, rng, k), size, prog)

    search = {}
    if pair is None:
        score = _pair_score(extract, sampler, score_draws, draws, alpha / (2 * EVENTS), delta, progress)
        pair, best, tried = search_pair(score, problem, rng, restarts=candidates,
                                        moves=candidates if moves is None else moves, min_size=problem.d)
        search = {"pairs_scored": tried, "pair_score": best}
    pilots = sampler(pair, pilot, progress)
    mains = sampler(pair, draws, progress)
    return pair, search, (*pilots, *mains)


def planned_releases(draws: int, pilot: int | None = None, *, pair_given: bool = False, candidates: int = 8,
                     moves: int | None = None, score_draws: int = 200) -> int:
    """Releases one :func:`blackbox_audit` makes with these settings (for a progress bar);
    the pair search may stop early, making fewer."""
    search = 0 if pair_given else 2 * score_draws * (candidates + (candidates if moves is None else moves))
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
    score_draws: int = 200,
    bins: int = 10,
    alpha: float = ALPHA,
    events: int = EVENTS,
    seed: int = 0,
    progress=None,
) -> AuditResult:
    """Black-box audit of the released record (the estimate).

    Parameters
    ----------
    mechanism : object with ``release(data, epsilon, rng) -> Release``.
    problem : object with ``d``, ``audit_records()`` and ``audit_data(records)``.
    epsilon : declared ε; ``run_epsilon`` is the one the mechanism runs at (default ε;
        a negative control runs at ``2 epsilon``).
    pair : the adjacent pair; default: searched (``candidates`` random pairs, then
        ``moves`` local moves, default ``candidates``; ``score_draws`` releases per side
        score a pair).
    draws : fresh releases per side counted for the bound (default 100 000: a Laplace
        mechanism run at 2ε is flagged with probability about 1).
    pilot : releases per side that choose the events (default ``draws / 5``, between
        1 000 and 20 000).  events : events counted on the fresh draws (Bonferroni).
    bins : unused (the binned test it set is replaced by the event search); kept for callers.
    alpha : family-wise error: an ε-DP mechanism is flagged w.p. at most ``alpha``.
    progress : optional callable ``progress(releases_done)``.

    Notes
    -----
    A mechanism with ``delta > 0`` ((ε, δ)-DP) is tested at its δ: the bound is on ε given
    that δ (``P_D(E) <= e^ε P_D'(E) + δ``).
    """
    run = float(epsilon if run_epsilon is None else run_epsilon)
    delta = _delta(mechanism)
    pilot = _pilot_size(draws, pilot)
    pair, search, samples = _collect(mechanism, problem, run, pair, draws=draws, pilot=pilot, candidates=candidates,
                                     moves=moves, score_draws=score_draws, seed=seed,
                                     extract=lambda e, side: e, delta=delta, alpha=alpha, progress=progress)
    (pa, _), (pb, _), (a, _), (b, _) = samples
    bound, info = _event_test(pa, pb, a, b, alpha, delta, events)
    return AuditResult("black-box", repr(mechanism), float(epsilon), bound, 0.0, pair, bool(bound <= epsilon),
                       {"run_epsilon": run, "draws": draws, "alpha": alpha, "delta": delta, **info, **search})


def side_channel_audit(
    mechanism,
    problem,
    epsilon: float,
    *,
    pair: AdjacentPair | None = None,
    draws: int = 5_000,
    pilot: int | None = 1_000,
    candidates: int = 8,
    moves: int | None = None,
    score_draws: int = 200,
    bins: int = 10,
    alpha: float = ALPHA,
    seed: int = 0,
    progress=None,
) -> AuditResult:
    """The black-box test on the released record and on every other output, field by field.

    ``details["fields"]`` maps each non-record output (``info`` fields, ``seconds``) to
    ``(lower bound, data_dependent)``, where data dependence means a bound above ε
    (Bonferroni over the fields and the record).  ``passed`` refers to the released
    record only: the audit passes when the record's bound is at most ε, whatever the
    diagnostics show — they are not part of the release.  The pair, when searched, is the
    one whose other outputs differ most.
    """

    def side_only(e, side):
        return np.column_stack([side[k] for k in sorted(side)])

    pilot = _pilot_size(draws, pilot)
    pair, search, samples = _collect(mechanism, problem, epsilon, pair, draws=draws, pilot=pilot,
                                     candidates=candidates, moves=moves, score_draws=score_draws, seed=seed,
                                     extract=side_only, delta=0.0, alpha=alpha, progress=progress)
    (pa, sa), (pb, sb), (a, ta), (b, tb) = samples
    level = alpha / (len(ta) + 1)
    record, info = _event_test(pa, pb, a, b, level)
    fields = {}
    for k in sorted(ta):
        bound, _ = _event_test(sa[k][:, None], sb[k][:, None], ta[k][:, None], tb[k][:, None], level)
        fields[k] = (bound, bool(bound > epsilon))
    return AuditResult("side-channel", repr(mechanism), float(epsilon), record, 0.0, pair, bool(record <= epsilon),
                       {"fields": fields, "draws": draws, "alpha": alpha, **info, **search})


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
    through the same event search on a pilot and held-out estimation as
    :func:`blackbox_audit`.  Returns an :class:`~kngflow.audit.exact.AuditResult` of kind
    "black-box" (no pair: the inputs are the caller's); flagged when the lower confidence
    bound on ε at ``delta`` exceeds ``epsilon``.
    """
    rng = np.random.default_rng(seed)
    pilot = _pilot_size(draws, pilot)

    def drawer(x):
        def draw(k):
            rows = [np.ravel(np.asarray(f(x, rng), dtype=float)) for _ in range(k)]
            return np.array(rows, dtype=float).reshape(k, -1), {}
        return draw

    (pa, _), (pb, _) = _draw_both(drawer(data), drawer(other), pilot, progress)
    (a, _), (b, _) = _draw_both(drawer(data), drawer(other), draws, progress)
    bound, info = _event_test(pa, pb, a, b, alpha, float(delta), events)
    name = getattr(f, "__qualname__", None) or repr(f)
    return AuditResult("black-box", name, float(epsilon), bound, 0.0, None, bool(bound <= epsilon),
                       {"draws": draws, "alpha": alpha, "delta": float(delta), **info})

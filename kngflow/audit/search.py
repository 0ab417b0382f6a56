r"""The pair search of the black-box audit: which adjacent pair of data sets tells two
release laws apart best.

The rest of the data set is part of the search (:func:`search_pair`): *contexts*
(:func:`search_contexts`) are fills of the smallest data set the problem allows (copies
of the centre record, of an extreme, of the opposite extreme, and a mixture) with the
extreme pairs (:func:`extreme_pairs`: largest ℓ1, ℓ2, ℓ∞ and per-axis separation) swapped
in, and random rests with every declared record (or, past :data:`EXHAUSTIVE_RECORDS`, the
extreme records and a sample) swapped in.  In each, releases are drawn once on the data
set completed by each swapped record and every swap is scored from two of these samples
(:func:`~kngflow.audit.events.best_predicted`: the predicted bound of the best event on
them).  The other records are then changed by local moves, and a fixed number of pairs
(the criteria's best in turn, the extreme pairs among them) are scored again on larger
fresh samples before the audit spends its draws on the winner.  The contexts follow from
the records alone, so :func:`search_cost` knows the releases in advance.

The events behind the predicted bound are the event search's (:mod:`kngflow.audit.events`);
the swaps are also ranked by the spread-scaled distances of their mean releases
(:func:`separations`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from .events import clean
from .pairs import SIZES, AdjacentPair

__all__ = ["search_pair", "search_cost", "SearchResult", "Context", "search_contexts", "extreme_pairs", "record_classes",
           "score_matrix", "separations", "domain"]

#: Most declared records whose every swap is scored in one context (64 records: 2016
#: swaps); larger sets are searched on the extreme records and a random sample of the
#: others, a new sample in each context.
EXHAUSTIVE_RECORDS = 64
#: Swaps per criterion kept from the contexts for the refinement.
REFINE_TOP = 3
#: Successive halving of the swaps kept: (sample size in units of the scoring samples,
#: pairs scored at that size).  The first round scores a fixed number of distinct pairs
#: (the criteria's best in turn), so that the search's cost is known before it runs.
REFINE_ROUNDS = ((2, 8), (12, 3))


def domain(problem) -> tuple[np.ndarray, np.ndarray]:
    """``(records, fill)``: the distinct declared records (boundary and fill), and the fill records."""
    boundary, fill = problem.audit_records()
    records = np.unique(np.vstack([boundary, fill]), axis=0)
    return records, np.unique(np.asarray(fill), axis=0)


def extreme_pairs(records: np.ndarray) -> list[tuple[int, int]]:
    """The swaps of largest separation among ``records`` (rows): for the ℓ1, ℓ2 and ℓ∞
    distances and for each axis, the first pair ``i < j`` at the maximum; distinct."""
    x = np.asarray(records, dtype=float)
    if len(x) < 2:
        return []
    from scipy.spatial.distance import cdist

    def dists():  # one (k, k) matrix at a time: never the (k, k, d) differences
        yield from (cdist(x, x, metric) for metric in ("cityblock", "euclidean", "chebyshev"))
        yield from (np.abs(np.subtract.outer(x[:, j], x[:, j])) for j in range(x.shape[1]))

    out = []
    for D in dists():
        i, j = np.unravel_index(int(np.argmax(D)), D.shape)
        p = (int(min(i, j)), int(max(i, j)))
        if i != j and p not in out:
            out.append(p)
    return out


def record_classes(records: np.ndarray, fill: np.ndarray) -> dict[str, int]:
    """Representatives of the classes of declared records, as indices into ``records``: the
    centre (the fill record nearest the records' centroid), an extreme (the record
    farthest from it) and the record farthest from that extreme."""
    x = np.asarray(records, dtype=float)
    r = np.linalg.norm(x - x.mean(0), axis=1)
    in_fill = np.array([bool(np.any(np.all(np.isclose(row, fill), axis=1))) for row in x])
    centre = int(np.argmin(np.where(in_fill, r, np.inf))) if in_fill.any() else int(np.argmin(r))
    extreme = int(np.argmax(r))
    far = int(np.argmax(np.linalg.norm(x - x[extreme], axis=1)))
    return {"centre": centre, "extreme": extreme, "opposite extreme": far}


class Context(NamedTuple):
    """The other records of the data sets searched (``rest``) and which declared records
    (indices) are swapped in; ``kind`` names how the rest was made."""

    kind: str
    rest: np.ndarray
    swapped: np.ndarray


def search_contexts(records: np.ndarray, fill: np.ndarray, min_size: int, rng: np.random.Generator,
                    random: int = 2) -> list[Context]:
    """The contexts of a search, their number and sizes known from the records alone.

    * **fills** of the smallest data set the problem allows (``size`` records, the first of
      :data:`~kngflow.audit.pairs.SIZES` from ``max(min_size, 2)``): ``size - 1`` copies of one
      record of each class (:func:`record_classes`: the centre, an extreme, the opposite
      extreme) and a mixture of the centre and the extreme (half each), with the extreme
      pairs (:func:`extreme_pairs`) and the class representatives swapped in.  A mechanism
      whose noise, clipping or branch follows the data meets its extreme data sets here
      (every record small, every record alike);
    * ``random`` rests of copies of one or two fill records (the first at ``size``
      records, the others of a size from those sizes), with every declared record swapped in
      (past :data:`EXHAUSTIVE_RECORDS`: the extreme records and a random sample of the
      others, that many in all).
    """
    sizes = _sizes(min_size)
    size = sizes[0]
    k = len(records)
    classes = record_classes(records, fill)
    ends = sorted({i for p in extreme_pairs(records) for i in p} | set(classes.values()))
    c, e = records[classes["centre"]], records[classes["extreme"]]
    half = (size - 1) // 2
    out = [Context(f"fill: {size - 1} copies of the {name} record", np.tile(records[i], (size - 1, 1)),
                   np.array(ends)) for name, i in classes.items()]
    if half:
        out.append(Context("fill: mixture of the centre and extreme records",
                           np.vstack([np.tile(c, (half, 1)), np.tile(e, (size - 1 - half, 1))]), np.array(ends)))
    others = np.setdiff1d(np.arange(k), ends)
    for r in range(max(1, random)):
        rest = _rest(fill, int(size if r == 0 else rng.choice(sizes)), rng)
        if k <= EXHAUSTIVE_RECORDS:
            swapped = np.arange(k)
        else:
            pick = rng.choice(others, max(0, min(len(others), EXHAUSTIVE_RECORDS - len(ends))), replace=False)
            swapped = np.sort(np.concatenate([ends, pick]).astype(int))
        out.append(Context("random records", rest, swapped))
    return out


def score_matrix(samples: list[np.ndarray], score: Callable[[np.ndarray, np.ndarray], float]) -> np.ndarray:
    """``S[i, j] = score(samples[i], samples[j])`` for every swap ``i < j`` (else -inf)."""
    k = len(samples)
    S = np.full((k, k), -np.inf)
    for i in range(k):
        for j in range(i + 1, k):
            if samples[i] is not None and samples[j] is not None:
                S[i, j] = score(samples[i], samples[j])
    return S


def separations(samples: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Distances between the mean releases of every two samples (``i < j``; else -inf), in
    units of the releases' spread pooled over all samples: ℓ1 of the mean difference
    over each coordinate's standard deviation (the loss of noise added coordinate by
    coordinate grows with it), and the Mahalanobis distance (the loss of elliptical noise
    grows with it).  Means are estimated far more precisely than events' probabilities,
    so these rank swaps of location families with little noise."""
    ok = [s is not None and len(s) > 1 for s in samples]
    k = len(samples)
    out = {"l1 separation": np.full((k, k), -np.inf), "l2 separation": np.full((k, k), -np.inf)}
    if sum(ok) < 2:
        return out
    mu = np.array([s.mean(0) if o else np.full(samples[ok.index(True)].shape[1], np.nan)
                   for s, o in zip(samples, ok)])
    cov = np.mean([np.atleast_2d(np.cov(s, rowvar=False)) for s, o in zip(samples, ok) if o], axis=0)
    d = cov.shape[0]
    sd = np.sqrt(np.maximum(np.diag(cov), 1e-300))
    vals, vecs = np.linalg.eigh(cov)
    W = vecs / np.sqrt(np.maximum(vals, 1e-12 * max(float(vals.max()), 1e-300)))
    iu = np.triu_indices(k, 1)
    diff = mu[iu[0]] - mu[iu[1]]
    good = np.all(np.isfinite(diff), axis=1)
    out["l1 separation"][iu] = np.where(good, np.sum(np.abs(np.nan_to_num(diff) / sd), axis=1), -np.inf)
    out["l2 separation"][iu] = np.where(good, np.linalg.norm(np.nan_to_num(diff) @ W, axis=1), -np.inf)
    if d == 1:
        out.pop("l2 separation")
    return out


def _rest(fill: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size - 1`` records split between two fill records (at random), sorted."""
    a, b = fill[rng.integers(len(fill), size=2)]
    k = int(rng.integers(0, size))
    rest = np.vstack([np.tile(a, (k, 1)), np.tile(b, (size - 1 - k, 1))]).reshape(size - 1, -1)
    return rest[np.lexsort(rest.T[::-1])] if len(rest) else rest


def _rest_move(rest: np.ndarray, fill: np.ndarray, rng: np.random.Generator, min_size: int) -> np.ndarray:
    """One random change of the other records: another size (rows resampled from the current
    ones or the fill), some rows replaced by one fill record, or the whole rest made of
    copies of one or two fill records."""
    kind = int(rng.integers(3))
    if kind == 0:
        sizes = [s for s in SIZES if s >= max(min_size, 2)]
        i = int(np.searchsorted(sizes, len(rest) + 1))
        j = int(np.clip(i + rng.choice([-1, 1]) * int(rng.integers(1, 3)), 0, len(sizes) - 1))
        pool = rest if len(rest) else fill
        rest = pool[rng.integers(len(pool), size=sizes[j] - 1)]
    elif kind == 1 and len(rest):
        k = int(rng.integers(1, len(rest) + 1))
        rest = rest.copy()
        rest[rng.choice(len(rest), k, replace=False)] = fill[rng.integers(len(fill))]
    else:
        return _rest(fill, max(len(rest) + 1, min_size, 2), rng)
    return rest[np.lexsort(rest.T[::-1])] if len(rest) else rest


class SearchResult(NamedTuple):
    pair: AdjacentPair
    score: float
    details: dict


def _sizes(min_size: int) -> list[int]:
    return [n for n in SIZES if n >= max(min_size, 2)] or [max(min_size, 2)]


def search_cost(problem, *, contexts: int = 2, moves: int = 8, score_draws: int = 200, min_size: int = 1) -> int:
    """Releases :func:`search_pair` draws with these settings on ``problem``'s declared
    records when the problem accepts every data set (fewer where it rejects some)."""
    records, fill = domain(problem)
    plan = search_contexts(records, fill, min_size, np.random.default_rng(0), contexts)
    refine = sum(2 * factor * keep for factor, keep in REFINE_ROUNDS)
    return score_draws * (sum(len(c.swapped) for c in plan) + 2 * moves + refine)


def search_pair(sample: Callable[[list[np.ndarray], int], list], score: Callable[[np.ndarray, np.ndarray], float],
                problem, rng: np.random.Generator, *, contexts: int = 2, moves: int = 8, score_draws: int = 200,
                min_size: int = 1) -> SearchResult:
    """The adjacent pair whose releases look most different, over the declared records and
    the data sets around them.

    ``sample(datasets, size)`` returns ``size`` releases (rows) on each data set of the
    list, or None for a data set the problem rejects; ``score(a, b)`` rates two samples
    (higher: easier to tell apart).

    1. **Contexts** (:func:`search_contexts`): the other records of the data set are part of the
       search.  Fills of the smallest data set the problem allows (copies of the centre,
       of an extreme, of the opposite extreme, and their mixture), with the extreme pairs
       and class representatives swapped in; then ``contexts`` random rests with every
       declared record swapped in (past :data:`EXHAUSTIVE_RECORDS`, the extreme records
       and a random sample).  In each, ``score_draws`` releases are drawn on the data set
       completed by each swapped record, and every swap of two of them is scored from
       these samples, by the predicted bound and by the spread-scaled distances of the
       mean releases (:func:`separations`).
    2. **The other records.** From the best swap, ``moves`` random changes of the other
       records (their number and which fill records), each scored on fresh samples of the
       pair, the better one kept.
    3. **Refinement.** The :data:`REFINE_TOP` best swaps of step 1 by each criterion (the
       extreme pairs are a criterion of their own), taken in turn, and the result of step
       2 are scored again on fresh samples by successive halving (:data:`REFINE_ROUNDS`);
       the best wins.

    Every extreme pair is scored in every fill, before anything is refined, whatever the
    number of declared records.  Returns the pair, its refined score and details (the data
    sets and swaps tried, by kind).
    """
    records, fill = domain(problem)
    k = len(records)
    plan = search_contexts(records, fill, min_size, rng, contexts)
    found = []  # (criterion, rank key, rest, i, j): the score, or (-order, score) for the extreme pairs
    scored = 0
    extremes = extreme_pairs(records)
    for ctx in plan:
        idx = [int(i) for i in ctx.swapped]
        samples = sample([np.vstack([ctx.rest, records[i]]) for i in idx], score_draws)
        valid = [x for x in samples if x is not None]
        if valid:
            cl = clean(np.vstack(valid))
            samples = [None if x is None else cl(x) for x in samples]
        criteria = {"predicted bound": score_matrix(samples, score), **separations(samples)}
        scored += len(idx) * (len(idx) - 1) // 2
        for crit, S in criteria.items():
            for f in np.argsort(S, axis=None)[::-1][:REFINE_ROUNDS[0][1]]:
                a, b = np.unravel_index(int(f), S.shape)
                if np.isfinite(S[a, b]):
                    found.append((crit, float(S[a, b]), ctx.rest, idx[a], idx[b]))
        where = {r: pos for pos, r in enumerate(idx)}
        for rank, (i, j) in enumerate(extremes):  # candidates for the refinement: l1, l2, linf, the axes
            if i in where and j in where:
                a, b = sorted((where[i], where[j]))
                if np.isfinite(criteria["predicted bound"][a, b]):
                    found.append(("extreme pair", (-rank, float(criteria["predicted bound"][a, b])), ctx.rest, i, j))
    if not found:
        raise ValueError("no adjacent pair of the declared records gives data sets the problem accepts")
    # the best few of each criterion over all contexts, the criteria in turn, distinct
    # (the extreme pairs in their order, each in the context where it scores best)
    ranked = {crit: sorted((f for f in found if f[0] == crit), key=lambda f: f[1], reverse=True)
              for crit in dict.fromkeys(c for c, *_ in found)}
    top, keys = [], set()
    for r in range(max(len(fs) for fs in ranked.values())):
        if len(top) >= REFINE_ROUNDS[0][1] and r >= REFINE_TOP:
            break
        for crit, fs in ranked.items():
            if r < len(fs):
                _, s, rest, i, j = fs[r]
                p = AdjacentPair(rest, records[i], records[j])
                if _key(p) not in keys and _key(p.swapped()) not in keys:
                    keys.add(_key(p))
                    top.append((crit, s, p))
    best_s, best = max(((s, p) for c, s, p in top if c == "predicted bound"), key=lambda t: t[0],
                       default=(-np.inf, top[0][2]))
    seen = {_key(best)}
    tried = 0
    for _ in range(4 * moves):
        if tried == moves:
            break
        new_rest = _rest_move(best.rest, fill, rng, min_size)
        p = AdjacentPair(new_rest, best.record, best.other)
        if _key(p) in seen or len(new_rest) + 1 < min_size:
            continue
        seen.add(_key(p))
        tried += 1
        a, b = sample(list(p.datasets()), score_draws)
        s = -np.inf if a is None or b is None else score(a, b)
        if s > best_s:
            best, best_s = p, s
    cands = [p for _, _, p in top][: REFINE_ROUNDS[0][1]]
    if all(_key(best) != _key(p) for p in cands):
        cands = cands[: REFINE_ROUNDS[0][1] - 1] + [best]
    rounds = []
    for factor, keep in REFINE_ROUNDS:
        cands = cands[:keep]
        fresh = sample([d for p in cands for d in p.datasets()], factor * score_draws)
        refined = [-np.inf if a is None or b is None else score(a, b) for a, b in zip(fresh[::2], fresh[1::2])]
        rounds.append([(str(p), float(r)) for p, r in zip(cands, refined)])
        order = np.argsort(refined, kind="stable")[::-1]
        cands, refined = [cands[i] for i in order], [refined[i] for i in order]
    kinds: dict[str, int] = {}
    for ctx in plan:
        kinds[ctx.kind.split(":")[0]] = kinds.get(ctx.kind.split(":")[0], 0) + 1
    kinds["moves of the other records"] = tried
    sizes = sorted({len(c.rest) + 1 for c in plan})
    details = {"records": k, "swaps_scored": scored + tried, "contexts": [c.kind for c in plan],
               "datasets": kinds, "sizes": sizes, "extreme_pairs": len(extremes),
               "search": "every swap" if k <= EXHAUSTIVE_RECORDS else "extreme records and a sample",
               "refined": rounds}
    return SearchResult(cands[0], float(refined[0]), details)


def _key(p: AdjacentPair) -> bytes:
    return np.ascontiguousarray(p.rest).tobytes() + b"|" + p.record.tobytes() + b"|" + p.other.tobytes()

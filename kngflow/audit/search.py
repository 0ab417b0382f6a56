r"""The searches of the black-box audit: which output event, and which adjacent pair,
tell two release laws apart best.

**Event search** (:func:`select_events`).  From a *fit* sample of releases on each side
(rows), :func:`statistics` builds real-valued statistics of a release: projections on the
coordinate axes, the mean difference, the Fisher direction and the extreme principal axes;
a Gaussian log likelihood ratio (QDA); a kernel density log ratio; smoothed histogram log likelihood ratios on the
leading one and two directions.  An event is ``{s(x) > t}`` or ``{s(x) <= t}`` for one
statistic ``s`` and a threshold ``t`` among the quantiles of a separate *select* sample.
Each event and orientation (``D`` over ``D'`` or ``D'`` over ``D``) is scored by the bound
it would give on ``n`` fresh draws per side (:func:`predicted_bound`): the select
sample's proportions, shrunk by one standard error towards the ratio 1, put through the
one-sided Clopper–Pearson bounds at the final test's level.  That trades the log ratio
against the mass of the event (a rare event with a large ratio is worth little on ``n``
draws).  The best events are then counted on fresh draws by the caller: the events depend
on the fit and select samples only, so the Clopper–Pearson bounds of the fresh counts
keep their level.

**Pair search** (:func:`search_pair`).  Random restarts over candidate pairs of the
problem's records (:func:`~kngflow.audit.pairs.candidate_pairs`), then greedy local moves
from the best pair found: the changed record or its replacement becomes another record of
the domain (boundary and fill records), the other records change (size of the data set,
some or all of them replaced by a fill record).  Each pair is scored by a caller's
function (the predicted bound of the best event on a small sample of releases).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from scipy import stats as sps

from .pairs import SIZES, AdjacentPair, candidate_pairs

__all__ = ["Statistic", "Event", "statistics", "select_events", "predicted_bound", "search_pair", "clean"]

#: One-sided level of the shrinkage of select-sample proportions (one standard error).
SMOOTH = 0.1587
#: Most thresholds tried per statistic.
THRESHOLDS = 256
#: Most fit-sample points per side in a kernel density estimate.
KERNEL_CENTRES = 1000


class Statistic(NamedTuple):
    """A real function of releases (rows of ``x``), fixed before the counts it serves."""

    name: str
    fn: Callable[[np.ndarray], np.ndarray]


class Event(NamedTuple):
    """``{statistic > threshold}`` (``upper``) or ``{statistic <= threshold}``; ``forward``:
    the ratio tested is ``P_D(E) / P_D'(E)`` (else ``P_D'(E) / P_D(E)``)."""

    statistic: Statistic
    threshold: float
    upper: bool
    forward: bool
    predicted: float

    def indicator(self, x: np.ndarray) -> np.ndarray:
        s = self.statistic.fn(x)
        return s > self.threshold if self.upper else s <= self.threshold

    def describe(self) -> str:
        return f"{self.statistic.name} {'>' if self.upper else '<='} {self.threshold:.6g}"


# ----------------------------------------------------------------------------- statistics


def clean(pilot: np.ndarray):
    """A map making release matrices finite, fixed from ``pilot``: NaN goes below every
    finite value of its column, -inf below that, +inf above the largest (kept distinct,
    so that events can still separate them)."""
    with np.errstate(invalid="ignore"):
        fin = np.where(np.isfinite(pilot), pilot, np.nan)
        lo = np.nan_to_num(np.nanmin(fin, axis=0, initial=np.inf) if fin.size else np.zeros(pilot.shape[1]),
                           posinf=0.0)
        hi = np.nan_to_num(np.nanmax(fin, axis=0, initial=-np.inf) if fin.size else np.zeros(pilot.shape[1]),
                           neginf=0.0)
    span = np.maximum(hi - lo, 1.0)

    def apply(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        if np.all(np.isfinite(x)):
            return x
        x = np.where(np.isnan(x), lo - span, x)
        x = np.where(x == -np.inf, lo - 2 * span, x)
        return np.where(x == np.inf, hi + span, x)

    return apply


def _unit(v: np.ndarray) -> np.ndarray | None:
    n = np.linalg.norm(v)
    return v / n if n > 0 and np.isfinite(n) else None


def directions(a: np.ndarray, b: np.ndarray, *, axes: bool = True) -> list[tuple[str, np.ndarray]]:
    """Unit directions from samples ``a``, ``b`` (rows): mean difference, Fisher direction,
    first and last principal axes of the pooled sample, and the coordinate axes; near
    duplicates and non-finite ones (degenerate samples) dropped."""
    with np.errstate(all="ignore"):
        return _directions(a, b, axes)


def _directions(a, b, axes):
    d = a.shape[1]
    cands = []
    if d == 1:
        return [("x", np.ones(1))]
    diff = a.mean(0) - b.mean(0)
    cands.append(("mean-difference projection", diff))
    if len(a) > 2 and len(b) > 2:
        within = 0.5 * (np.cov(a, rowvar=False) + np.cov(b, rowvar=False))
        ridge = 1e-9 * max(float(np.trace(within)) / d, 1e-300)
        cands.append(("Fisher projection", np.linalg.pinv(within + ridge * np.eye(d)) @ diff))
        _, vecs = np.linalg.eigh(np.cov(np.vstack([a, b]), rowvar=False))
        cands += [("first principal projection", vecs[:, -1]), ("last principal projection", vecs[:, 0])]
    if axes:
        cands += [(f"x[{j}]", np.eye(d)[j]) for j in range(d)]
    out = []
    for name, v in cands:
        v = _unit(v)
        if v is not None and all(abs(v @ u) < 1 - 1e-9 for _, u in out):
            out.append((name, v))
    return out


def _projection(name, v) -> Statistic:
    return Statistic(name, lambda x, v=v: x @ v)


def _edges(values: np.ndarray, bins: int) -> np.ndarray:
    return np.unique(np.quantile(values, np.linspace(0, 1, bins + 1)[1:-1]))


def _histogram_ratio(name, V: np.ndarray, a: np.ndarray, b: np.ndarray, bins: int) -> Statistic:
    """Smoothed log ratio of the two samples' frequencies on a grid of pooled-quantile
    cells of the projections ``x @ V`` (V: (d, k), k = 1 or 2)."""
    pa, pb = a @ V, b @ V
    edges = [_edges(np.concatenate([pa[:, j], pb[:, j]]), bins) for j in range(V.shape[1])]
    shape = tuple(len(e) + 1 for e in edges)

    def cells(p):
        idx = [np.searchsorted(e, p[:, j], side="right") for j, e in enumerate(edges)]
        return np.ravel_multi_index(idx, shape)

    size = int(np.prod(shape))
    ca = np.bincount(cells(pa), minlength=size) + 0.5
    cb = np.bincount(cells(pb), minlength=size) + 0.5
    lr = np.log(ca / ca.sum()) - np.log(cb / cb.sum())
    return Statistic(name, lambda x: lr[cells(x @ V)])


def _kernel_ratio(a: np.ndarray, b: np.ndarray, centres: int = KERNEL_CENTRES) -> Statistic:
    """Log ratio of Gaussian kernel density estimates (at most ``centres`` points per side,
    whitened by the pooled covariance, Scott's bandwidth)."""
    d = a.shape[1]
    pooled = np.vstack([a, b])
    mu = pooled.mean(0)
    cov = np.atleast_2d(np.cov(pooled, rowvar=False))
    vals, vecs = np.linalg.eigh(cov)
    vals = np.maximum(vals, 1e-12 * max(float(vals.max()), 1e-300))
    W = vecs / np.sqrt(vals)
    ca, cb = ((s[:centres] - mu) @ W for s in (a, b))
    h2 = (min(len(ca), len(cb)) ** (-2.0 / (d + 4))) * 2.0

    def logkde(z, c):
        out = np.empty(len(z))
        cc = np.einsum("ij,ij->i", c, c)
        for i in range(0, len(z), 2048):
            zz = z[i:i + 2048]
            e = -(np.einsum("ij,ij->i", zz, zz)[:, None] - 2 * zz @ c.T + cc[None, :]) / h2
            mx = e.max(1)
            out[i:i + 2048] = mx + np.log(np.exp(e - mx[:, None]).mean(1))
        return out

    def fn(x):
        z = (x - mu) @ W
        return logkde(z, ca) - logkde(z, cb)

    return Statistic("kernel log-likelihood ratio", fn)


def _gaussian_ratio(a: np.ndarray, b: np.ndarray) -> Statistic | None:
    """Log ratio of Gaussian fits (QDA score), ridge-regularised covariances."""
    d = a.shape[1]
    parts = []
    for s in (a, b):
        cov = np.atleast_2d(np.cov(s, rowvar=False))
        scale = max(float(np.trace(cov)) / d, 1e-300)
        cov = cov + 1e-6 * scale * np.eye(d)
        sign, logdet = np.linalg.slogdet(cov)
        if sign <= 0 or not np.isfinite(logdet):
            return None
        parts.append((s.mean(0), np.linalg.inv(cov), logdet))
    (ma, ia, la), (mb, ib, lb) = parts

    def fn(x):
        da, db = x - ma, x - mb
        return 0.5 * (np.einsum("ij,jk,ik->i", db, ib, db) - np.einsum("ij,jk,ik->i", da, ia, da) + lb - la)

    return Statistic("Gaussian log-likelihood ratio", fn)


def statistics(a: np.ndarray, b: np.ndarray, *, cheap: bool = False) -> list[Statistic]:
    """Statistics of a release fitted on samples ``a``, ``b`` (rows).  ``cheap``: the
    projections only (no density estimates), for scoring pairs on small samples where the
    same sample chooses the events."""
    dirs = directions(a, b)
    out = [_projection(name, v) for name, v in dirs]
    if cheap:
        return out
    m = min(len(a), len(b))
    if m >= 40:
        bins = int(np.clip(np.sqrt(m) / 2, 8, 64))
        for name, v in dirs[:3]:
            out.append(_histogram_ratio(f"histogram log-ratio on {name}", v[:, None], a, b, bins))
        if len(dirs) >= 2 and a.shape[1] >= 2:
            V = np.column_stack([dirs[0][1], dirs[1][1]])
            out.append(_histogram_ratio(f"2-D histogram log-ratio on {dirs[0][0]}, {dirs[1][0]}", V, a, b,
                                        int(np.clip(m ** (1 / 3), 4, 16))))
    if m >= 40 and a.shape[1] >= 2:
        out.append(_kernel_ratio(a, b))
    if m >= 5 * a.shape[1] + 5:
        g = _gaussian_ratio(a, b)
        if g is not None:
            out.append(g)
    return out


# ----------------------------------------------------------------------------- events


def _cp_lo(k, n, level):
    k = np.asarray(k, dtype=float)
    return np.where(k > 0, sps.beta.ppf(level, np.maximum(k, 1e-12), np.maximum(n - k, 0) + 1), 0.0)


def _cp_hi(k, n, level):
    k = np.asarray(k, dtype=float)
    return np.where(k < n, sps.beta.ppf(1 - level, k + 1, np.maximum(n - k, 1e-12)), 1.0)


def predicted_bound(k_num, m_num, k_den, m_den, n: int, level: float, delta: float = 0.0) -> np.ndarray:
    """The bound ``log((lo_num - delta) / hi_den)`` that ``n`` fresh draws per side would
    give (Clopper–Pearson at ``level``) if their proportions were the select sample's
    (``k`` of ``m``), each shrunk one standard error towards the other side's."""
    p_num = _cp_lo(k_num, m_num, SMOOTH)
    p_den = _cp_hi(k_den, m_den, SMOOTH)
    lo = _cp_lo(p_num * n, n, level)
    hi = _cp_hi(p_den * n, n, level)
    with np.errstate(divide="ignore"):
        return np.log(np.maximum(lo - delta, 0.0)) - np.log(hi)


def _thresholds(values: np.ndarray) -> np.ndarray:
    u = np.unique(values)
    if len(u) <= THRESHOLDS:
        return u[:-1] if len(u) > 1 else u
    return np.unique(np.quantile(values, np.linspace(0, 1, THRESHOLDS + 2)[1:-1]))


def select_events(stats: list[Statistic], a: np.ndarray, b: np.ndarray, n: int, level: float,
                  delta: float = 0.0, keep: int = 4) -> list[Event]:
    """The ``keep`` best events (one per statistic and orientation at most) by
    :func:`predicted_bound` on the select samples ``a``, ``b`` for ``n`` fresh draws."""
    best = []
    ma, mb = len(a), len(b)
    for st in stats:
        sa, sb = np.asarray(st.fn(a), dtype=float), np.asarray(st.fn(b), dtype=float)
        t = _thresholds(np.concatenate([sa, sb]))
        ka = ma - np.searchsorted(np.sort(sa), t, side="right")  # counts of s > t
        kb = mb - np.searchsorted(np.sort(sb), t, side="right")
        for upper in (True, False):
            ea, eb = (ka, kb) if upper else (ma - ka, mb - kb)
            for forward in (True, False):
                num, mn, den, md = (ea, ma, eb, mb) if forward else (eb, mb, ea, ma)
                pred = predicted_bound(num, mn, den, md, n, level, delta)
                i = int(np.argmax(pred))
                if np.isfinite(pred[i]) and pred[i] > 0:
                    best.append(Event(st, float(t[i]), upper, forward, float(pred[i])))
    best.sort(key=lambda e: -e.predicted)
    out, seen = [], set()
    for ev in best:  # distinct events only (on the select samples)
        key = np.packbits(np.concatenate([ev.indicator(a), ev.indicator(b)])).tobytes() + bytes([ev.forward])
        if key not in seen:
            seen.add(key)
            out.append(ev)
        if len(out) == keep:
            break
    return out


def best_predicted(a: np.ndarray, b: np.ndarray, n: int, level: float, delta: float = 0.0) -> float:
    """Score of a pair from small samples: the best predicted bound over the projection
    events, the same samples choosing directions and thresholds (ranking only)."""
    ev = select_events(statistics(a, b, cheap=True), a, b, n, level, delta, keep=1)
    return ev[0].predicted if ev else 0.0


# ----------------------------------------------------------------------------- pairs


def _domain(problem) -> tuple[np.ndarray, np.ndarray]:
    boundary, fill = problem.audit_records()
    records = np.unique(np.vstack([boundary, fill]), axis=0)
    return records, np.unique(np.asarray(fill), axis=0)


def _moves(pair: AdjacentPair, records: np.ndarray, fill: np.ndarray, rng: np.random.Generator,
           min_size: int) -> AdjacentPair:
    """One random local move from ``pair``."""
    rest, rec, oth = pair.rest, pair.record, pair.other
    kind = int(rng.integers(5))
    if kind == 0:
        oth = records[rng.integers(len(records))]
    elif kind == 1:
        rec = records[rng.integers(len(records))]
    elif kind == 2:  # another size, rows resampled from the current rest (or fill)
        sizes = [s for s in SIZES if s >= max(min_size, 1)]
        n = len(rest) + 1
        i = int(np.searchsorted(sizes, n))
        j = int(np.clip(i + rng.choice([-1, 1]) * int(rng.integers(1, 3)), 0, len(sizes) - 1))
        pool = rest if len(rest) else fill
        rest = pool[rng.integers(len(pool), size=sizes[j] - 1)]
    elif kind == 3 and len(rest):  # some rows of the rest become one fill record
        k = int(rng.integers(1, len(rest) + 1))
        rest = rest.copy()
        rest[rng.choice(len(rest), k, replace=False)] = fill[rng.integers(len(fill))]
    else:  # the whole rest: copies of one or two fill records
        n = max(len(rest), min_size - 1)
        a, b = fill[rng.integers(len(fill), size=2)]
        k = int(rng.integers(0, n + 1))
        rest = np.vstack([np.tile(a, (k, 1)), np.tile(b, (n - k, 1))]).reshape(n, -1)
    rest = rest[np.lexsort(rest.T[::-1])] if len(rest) else rest
    return AdjacentPair(np.asarray(rest, dtype=float), np.asarray(rec, dtype=float), np.asarray(oth, dtype=float))


def search_pair(score: Callable[[AdjacentPair], float], problem, rng: np.random.Generator, *, restarts: int,
                moves: int, min_size: int = 1, progress=None) -> tuple[AdjacentPair, float, int]:
    """The best-scoring pair: ``restarts`` random candidates, then ``moves`` greedy local
    moves from the best so far.  ``score`` returns -inf for a pair it cannot use (a data
    set the problem rejects).  Returns ``(pair, score, pairs scored)``."""
    records, fill = _domain(problem)
    best, best_s, tried = None, -np.inf, 0
    for p in candidate_pairs(problem, rng, max(restarts, 1), min_size):
        s = score(p)
        tried += 1
        if s > best_s or best is None:
            best, best_s = p, s
    seen = {_key(best)}
    for _ in range(moves):
        for _attempt in range(20):  # a move to a pair not scored yet
            p = _moves(best, records, fill, rng, min_size)
            if _key(p) not in seen and not np.array_equal(p.record, p.other) and len(p.rest) + 1 >= min_size:
                break
        else:
            break
        seen.add(_key(p))
        s = score(p)
        tried += 1
        if s > best_s:
            best, best_s = p, s
    return best, float(best_s), tried


def _key(p: AdjacentPair) -> bytes:
    return np.ascontiguousarray(p.rest).tobytes() + b"|" + p.record.tobytes() + b"|" + p.other.tobytes()

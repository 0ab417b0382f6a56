r"""The event search of the black-box audit: which output event tells two release laws
apart best.

Events are chosen by :func:`select_events`.  From a *fit* sample of releases on each side
(rows), :func:`statistics` builds real-valued statistics of a release: projections on the
coordinate axes, the mean difference, the Fisher direction and the extreme principal axes;
a Gaussian log likelihood ratio (QDA); a kernel density log ratio; smoothed histogram log
likelihood ratios on the leading one and two directions; and the sum over the coordinate
axes of one-dimensional histogram log ratios (exact for laws that are products over the
coordinates, such as Laplace noise added coordinate by coordinate).  An event is
``{s(x) > t}`` or ``{s(x) <= t}`` for one statistic ``s`` and a threshold ``t`` among the
quantiles of a separate *select* sample.  Each event and orientation (``D`` over ``D'``
or ``D'`` over ``D``) is scored by the bound it would give on ``n`` fresh draws per side
(:func:`predicted_bound`): the select sample's proportions, shrunk by one standard error
towards the ratio 1, put through the one-sided Clopper–Pearson bounds at the final test's
level.  That trades the log ratio against the mass of the event (a rare event with a
large ratio is worth little on ``n`` draws).  The best events are then counted on fresh
draws by the caller: the events depend on the fit and select samples only, so the
Clopper–Pearson bounds of the fresh counts keep their level.

The pair search (:mod:`kngflow.audit.search`) ranks the swaps of declared records by the
best event on small samples (:func:`best_predicted`), after :func:`clean` has made the
releases finite.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from scipy.special import ndtri

__all__ = ["Statistic", "Event", "statistics", "select_events", "predicted_bound", "best_predicted", "clean"]

#: One-sided level of the shrinkage of select-sample proportions (one standard error).
SMOOTH = 0.1587
#: Most thresholds tried per statistic.
THRESHOLDS = 256
#: Thresholds per statistic in a pair's score (:func:`best_predicted`), from small samples.
SCORE_THRESHOLDS = 16
#: Most fit-sample points per side in a kernel density estimate (its cost on the fresh
#: draws grows with them: it dominated the audit at 1000).
KERNEL_CENTRES = 300


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

    def indicator(self, x: np.ndarray, values: np.ndarray | None = None) -> np.ndarray:
        """Whether each row of ``x`` is in the event (``values``: the statistic's, if known)."""
        s = self.statistic.fn(x) if values is None else values
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


@functools.cache
def _inner_levels(bins: int) -> np.ndarray:
    """The ``bins - 1`` inner levels ``1/bins, ..., (bins-1)/bins`` of a pooled-quantile grid."""
    levels = np.linspace(0, 1, bins + 1)[1:-1]
    levels.flags.writeable = False
    return levels


@functools.lru_cache(maxsize=64)  # the counts of distinct values vary with the samples
def _spread(count: int, most: int) -> np.ndarray:
    """``most`` indices spread evenly over ``range(count)``, its ends left out."""
    idx = np.linspace(0, count - 1, most + 2).astype(int)[1:-1]
    idx.flags.writeable = False
    return idx


def _edges(values: np.ndarray, bins: int) -> list[np.ndarray]:
    """Cell edges of each column of ``values`` (rows: both samples pooled) at its quantiles."""
    q = np.quantile(values, _inner_levels(bins), axis=0)
    return [np.unique(q[:, j]) for j in range(q.shape[1])]


def _histogram_ratio(name, V: np.ndarray, a: np.ndarray, b: np.ndarray, bins: int) -> Statistic:
    """Smoothed log ratio of the two samples' frequencies on a grid of pooled-quantile
    cells of the projections ``x @ V`` (V: (d, k), k = 1 or 2)."""
    pa, pb = a @ V, b @ V
    edges = _edges(np.vstack([pa, pb]), bins)
    shape = tuple(len(e) + 1 for e in edges)

    def cells(p):
        idx = [np.searchsorted(e, p[:, j], side="right") for j, e in enumerate(edges)]
        return np.ravel_multi_index(idx, shape)

    size = int(np.prod(shape))
    ca = np.bincount(cells(pa), minlength=size) + 0.5
    cb = np.bincount(cells(pb), minlength=size) + 0.5
    lr = np.log(ca / ca.sum()) - np.log(cb / cb.sum())
    return Statistic(name, lambda x: lr[cells(x @ V)])


def _monotone(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The weighted least-squares non-decreasing fit to ``y`` (pool adjacent violators)."""
    values, weights, counts = [], [], []
    for yi, wi in zip(y, w):
        values.append(float(yi)), weights.append(float(wi)), counts.append(1)
        while len(values) > 1 and values[-2] > values[-1]:
            v, wt, c = values.pop(), weights.pop(), counts.pop()
            values[-1] = (values[-1] * weights[-1] + v * wt) / (weights[-1] + wt)
            weights[-1] += wt
            counts[-1] += c
    return np.repeat(values, counts)


def _axes_ratio(a: np.ndarray, b: np.ndarray, bins: int, monotone: bool = False) -> Statistic:
    """Sum over the coordinate axes of smoothed one-dimensional histogram log ratios
    (pooled-quantile cells): the log likelihood ratio of two laws that are products over
    the coordinates, estimated one coordinate at a time.

    ``monotone``: each axis's log ratios fitted monotone (pool adjacent violators, weights
    the inverse variances of the cells' log ratios, the direction of the better fit): the
    log likelihood ratio of product laws with monotone likelihood ratios (noise of a
    log-concave law added coordinate by coordinate to two locations), estimated with far
    less noise than by free histograms when the shift is small against the noise."""
    parts = []
    for j, e in enumerate(_edges(np.vstack([a, b]), bins)):
        ca = np.bincount(np.searchsorted(e, a[:, j], side="right"), minlength=len(e) + 1) + 0.5
        cb = np.bincount(np.searchsorted(e, b[:, j], side="right"), minlength=len(e) + 1) + 0.5
        lr = np.log(ca / ca.sum()) - np.log(cb / cb.sum())
        if monotone:
            w = 1.0 / (1.0 / ca + 1.0 / cb)
            up, down = _monotone(lr, w), -_monotone(-lr, w)
            lr = up if np.sum(w * (lr - up) ** 2) <= np.sum(w * (lr - down) ** 2) else down
        parts.append((e, lr))

    def fn(x):
        return sum(lr[np.searchsorted(e, x[:, j], side="right")] for j, (e, lr) in enumerate(parts))

    return Statistic(f"sum of per-axis {'monotone' if monotone else 'histogram'} log-ratios", fn)


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
    m = min(len(a), len(b))
    if a.shape[1] >= 2 and m >= 100:
        out.append(_axes_ratio(a, b, int(np.clip(np.sqrt(m) / (4 if cheap else 2), 4, 64))))
    if cheap:
        return out
    if a.shape[1] >= 2 and m >= 100:
        out.append(_axes_ratio(a, b, int(np.clip(np.sqrt(m), 8, 128)), monotone=True))
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


def _wilson(k, n, z, upper: bool):
    """Wilson score bound for ``k`` successes of ``n`` at ``z`` standard errors (vectorised;
    a fast stand-in for Clopper–Pearson where bounds only rank events)."""
    k = np.asarray(k, dtype=float)
    p = k / n
    centre = p + z * z / (2 * n)
    half = z * np.sqrt(np.maximum(p * (1 - p), 0.0) / n + z * z / (4 * n * n))
    return np.clip((centre + half if upper else centre - half) / (1 + z * z / n), 0.0, 1.0)


def predicted_bound(k_num, m_num, k_den, m_den, n: int, level: float, delta: float = 0.0) -> np.ndarray:
    """The bound ``log((lo_num - delta) / hi_den)`` that ``n`` fresh draws per side would
    give at one-sided ``level`` if their proportions were the select sample's (``k`` of
    ``m``), each shrunk one standard error towards the other side's.  Wilson score bounds
    stand in for Clopper–Pearson (this only ranks events; the test itself is exact)."""
    s, z = -ndtri(SMOOTH), -ndtri(level)
    p_num = _wilson(k_num, m_num, s, upper=False)
    p_den = _wilson(k_den, m_den, s, upper=True)
    lo = _wilson(p_num * n, n, z, upper=False)
    hi = _wilson(p_den * n, n, z, upper=True)
    with np.errstate(divide="ignore"):
        return np.log(np.maximum(lo - delta, 0.0)) - np.log(hi)


def _thresholds(values: np.ndarray, most: int = THRESHOLDS) -> np.ndarray:
    u = np.unique(values)
    if len(u) <= most:
        return u[:-1] if len(u) > 1 else u
    return u[_spread(len(u), most)]


#: The four orientations of an event, as ``(upper, forward)``: ``{s > t}`` and ``{s <= t}``,
#: each with the ratio taken both ways.
ORIENTATIONS = ((True, True), (True, False), (False, True), (False, False))


def _threshold_counts(st: Statistic, a: np.ndarray, b: np.ndarray, thresholds: int):
    """The thresholds of ``st`` on the select samples and, at each, the counts of ``s > t``
    in ``a`` and in ``b``."""
    sa, sb = np.asarray(st.fn(a), dtype=float), np.asarray(st.fn(b), dtype=float)
    t = _thresholds(np.concatenate([sa, sb]), thresholds)
    return (t, len(a) - np.searchsorted(np.sort(sa), t, side="right"),
            len(b) - np.searchsorted(np.sort(sb), t, side="right"))


def _oriented(ka, kb, ma: int, mb: int):
    """``(k_num, m_num, k_den, m_den)`` of the events above counts ``ka``, ``kb`` (of ``ma``,
    ``mb`` releases) in the four :data:`ORIENTATIONS`, stacked on a new first axis."""
    num, den, mn, md = [], [], [], []
    for upper, forward in ORIENTATIONS:
        ea, eb = (ka, kb) if upper else (ma - ka, mb - kb)
        num.append(ea if forward else eb)
        den.append(eb if forward else ea)
        mn.append(ma if forward else mb)
        md.append(mb if forward else ma)
    shape = (len(ORIENTATIONS),) + (1,) * np.ndim(ka)
    return np.array(num), np.reshape(mn, shape), np.array(den), np.reshape(md, shape)


def select_events(stats: list[Statistic], a: np.ndarray, b: np.ndarray, n: int, level: float,
                  delta: float = 0.0, keep: int = 4, thresholds: int = THRESHOLDS) -> list[Event]:
    """The ``keep`` best events (one per statistic and orientation at most) by
    :func:`predicted_bound` on the select samples ``a``, ``b`` for ``n`` fresh draws."""
    best = []
    for st in stats:
        t, ka, kb = _threshold_counts(st, a, b, thresholds)
        pred = predicted_bound(*_oriented(ka, kb, len(a), len(b)), n, level, delta)  # all four at once
        for (upper, forward), row in zip(ORIENTATIONS, pred):
            i = int(np.argmax(row))
            if np.isfinite(row[i]) and row[i] > 0:
                best.append(Event(st, float(t[i]), upper, forward, float(row[i])))
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
    events and the per-axis histogram log-ratio, the same samples choosing the statistics
    and thresholds (for ranking pairs only).

    The predicted bound of :func:`select_events`'s best event (``keep=1``,
    :data:`SCORE_THRESHOLDS` thresholds), computed for every statistic and orientation in
    one call of :func:`predicted_bound`: the pair search scores thousands of pairs."""
    counts = [_threshold_counts(st, a, b, SCORE_THRESHOLDS) for st in statistics(a, b, cheap=True)]
    if not counts:
        return 0.0
    width = max(len(t) for t, _, _ in counts)
    valid = np.zeros((len(counts), width), dtype=bool)
    ka = np.zeros((len(counts), width), dtype=np.intp)
    kb = np.zeros_like(ka)
    for j, (t, ca, cb) in enumerate(counts):
        valid[j, :len(t)] = True
        ka[j, :len(t)], kb[j, :len(t)] = ca, cb
    pred = predicted_bound(*_oriented(ka, kb, len(a), len(b)), n, level, delta)
    pred[:, ~valid] = -np.inf  # (orientation, statistic, threshold)
    top = pred.max(axis=-1)  # a row's NaN is its max, as it is its argmax in select_events
    top = top[np.isfinite(top) & (top > 0)]
    return float(top.max()) if top.size else 0.0

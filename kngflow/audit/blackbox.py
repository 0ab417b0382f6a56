r"""Black-box privacy audits: sample releases, bound the privacy loss from below.

For adjacent data sets ``D, D'`` an ε-DP mechanism satisfies
``P_D(E) <= e^ε P_D'(E)`` for every event ``E``.  The audit

1. picks the pair: among candidate pairs (small data sets, a boundary record changed,
   :func:`~kngflow.audit.pairs.candidate_pairs`), the one whose releases move most —
   largest smoothed log ratio of binned frequencies on a small scoring sample;
2. draws a separate *pilot* sample on ``D`` and ``D'`` and fixes, from it alone, up to four
   directions (Fisher direction ``S^+ (m_D - m_D')``, mean difference, first and last
   principal axes of the pooled pilot) and, per direction, bin edges at pooled-pilot
   quantiles;
3. draws ``draws`` fresh releases on each side and counts, for every direction ``k``
   and bin ``b``, ``N_D(k, b)`` and ``N_D'(k, b)``;
4. reports ``max log(lo_D(E) / hi_D'(E))`` over events and both orientations, with
   ``lo``/``hi`` one-sided Clopper–Pearson bounds at level ``alpha / (2 m)``, ``m`` the
   number of (direction, bin, orientation) triples (Bonferroni).  With probability at
   least ``1 - alpha`` every bound holds at once, so the reported value is a lower
   confidence bound on the privacy loss: an ε-DP mechanism is flagged (bound > ε) with
   probability at most ``alpha``.

Mechanisms whose sampler is approximate (MCMC fallbacks) are audited as they run: the
guarantee then concerns the law they actually sample.

The side-channel audit (:func:`side_channel_audit`) runs the same test on every output a
release carries besides its released record (``Release.record()``): each ``info`` field
and the wall time of the call, one at a time.
"""

from __future__ import annotations

import time

import numpy as np
from scipy import stats as sps

from .exact import AuditResult
from .pairs import AdjacentPair, audit_view, candidate_pairs

__all__ = ["clopper_pearson", "loss_lower_bound", "blackbox_audit", "side_channel_audit", "sample_releases"]

#: Default family-wise error of one audit (probability of flagging an ε-DP mechanism).
ALPHA = 1e-5
_SAMPLER_CODES = {"none": 0.0, "exact": 1.0, "gibbs": 2.0, "metropolis": 3.0}


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


def sample_releases(mechanism, problem, records, epsilon, rng, size, progress=None):
    """``size`` releases on the data set ``records``: estimates (size, d) and the other
    outputs as a dict of float arrays (``info`` fields, ``sampler`` as its code, and the
    wall time of each call as ``seconds``)."""
    data = problem.audit_data(records)
    est, side = [], {}
    for i in range(size):
        t = time.perf_counter()
        rel = mechanism.release(data, epsilon, rng)
        dt = time.perf_counter() - t
        est.append(np.concatenate([np.ravel(v) for v in rel.record().values()]))
        for k, v in rel.diagnostics().items():
            side.setdefault(k, []).append(_SAMPLER_CODES.get(v, np.nan) if isinstance(v, str) else float(v))
        side.setdefault("seconds", []).append(dt)
        if progress and (i + 1) % 100 == 0:
            progress(100)
    if progress and size % 100:
        progress(size % 100)
    return np.array(est), {k: np.array(v) for k, v in side.items()}


def _directions(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Up to four unit directions from pilot samples (rows) of the two sides."""
    d = a.shape[1]
    if d == 1:
        return np.ones((1, 1))
    diff = a.mean(0) - b.mean(0)
    pooled = np.vstack([a, b])
    cov = np.cov(pooled, rowvar=False)
    _, vecs = np.linalg.eigh(cov)
    cands = [np.linalg.pinv(0.5 * (np.cov(a, rowvar=False) + np.cov(b, rowvar=False))) @ diff, diff, vecs[:, -1], vecs[:, 0]]
    out = []
    for v in cands:
        nv = np.linalg.norm(v)
        if nv > 0 and np.isfinite(nv):
            v = v / nv
            if all(abs(v @ u) < 1 - 1e-9 for u in out):
                out.append(v)
    return np.array(out) if out else np.eye(d)[:1]


def _counts(x: np.ndarray, edges: np.ndarray) -> np.ndarray:
    return np.bincount(np.searchsorted(edges, x, side="right"), minlength=len(edges) + 1)


def _edges(pilot: np.ndarray, bins: int) -> np.ndarray:
    return np.unique(np.quantile(pilot, np.linspace(0, 1, bins + 1)[1:-1]))


def _test(a, b, pa, pb, bins, alpha, delta=0.0):
    """Loss lower bound (at ``delta``) from main samples a, b (n, k) with directions/edges from pilots."""
    dirs = _directions(pa, pb)
    ca, cb = [], []
    for v in dirs:
        edges = _edges(np.concatenate([pa @ v, pb @ v]), bins)
        ca.append(_counts(a @ v, edges))
        cb.append(_counts(b @ v, edges))
    return loss_lower_bound(np.concatenate(ca), np.concatenate(cb), a.shape[0], alpha, delta)


def _score(a: np.ndarray, b: np.ndarray, bins: int = 5) -> float:
    """How far apart two small samples are: the largest add-one-smoothed log ratio of
    pooled-quantile bin frequencies over the coordinates and the mean-difference direction."""
    dirs = [np.eye(a.shape[1])[j] for j in range(a.shape[1])]
    diff = a.mean(0) - b.mean(0)
    if np.linalg.norm(diff) > 0:
        dirs.append(diff / np.linalg.norm(diff))
    best = 0.0
    for v in dirs:
        edges = _edges(np.concatenate([a @ v, b @ v]), bins)
        ca, cb = _counts(a @ v, edges) + 1.0, _counts(b @ v, edges) + 1.0
        best = max(best, float(np.max(np.abs(np.log(ca) - np.log(cb)))))
    return best


def _collect(mechanism, problem, epsilon, pair, *, draws, pilot, candidates, score_draws, seed, extract,
             progress):
    """The pair (chosen by ``extract``-ed scores when None) and the pilot and main samples
    on both sides, each an ``(estimates, other outputs)`` tuple."""
    problem = audit_view(mechanism, problem)
    rng = np.random.default_rng(seed)
    if pair is None:
        best = -np.inf
        for p in candidate_pairs(problem, rng, candidates, problem.d):
            a, b = (extract(*sample_releases(mechanism, problem, D, epsilon, rng, score_draws)) for D in p.datasets())
            if progress:
                progress(2 * score_draws)
            s = _score(a, b)
            if s > best:
                best, pair = s, p
    D, D2 = pair.datasets()
    samples = [sample_releases(mechanism, problem, X, epsilon, rng, size, progress)
               for size in (pilot, draws) for X in (D, D2)]
    return pair, samples


def blackbox_audit(
    mechanism,
    problem,
    epsilon: float,
    *,
    run_epsilon: float | None = None,
    pair: AdjacentPair | None = None,
    draws: int = 20_000,
    pilot: int = 2_000,
    candidates: int = 8,
    score_draws: int = 200,
    bins: int = 10,
    alpha: float = ALPHA,
    seed: int = 0,
    progress=None,
) -> AuditResult:
    """Black-box audit of the released record (the estimate) on one adjacent pair.

    Parameters
    ----------
    mechanism : object with ``release(data, epsilon, rng) -> Release``.
    problem : object with ``d``, ``audit_records()`` and ``audit_data(records)``.
    epsilon : declared ε; ``run_epsilon`` is the one the mechanism runs at (default ε;
        a negative control runs at ``2 epsilon``).
    pair : the adjacent pair; default the candidate that moves the release most.
    draws, pilot : releases per side for the test and for choosing directions and bins.
    candidates, score_draws : pairs scored, and releases per side to score each.
    bins : pooled-quantile bins per direction.  alpha : family-wise error.
    progress : optional callable ``progress(releases_done)``.

    A mechanism with ``delta > 0`` ((ε, δ)-DP) is tested at its δ: the bound is on ε given
    that δ (:func:`loss_lower_bound`).
    """
    run = float(epsilon if run_epsilon is None else run_epsilon)
    pair, samples = _collect(mechanism, problem, run, pair, draws=draws, pilot=pilot, candidates=candidates,
                             score_draws=score_draws, seed=seed, extract=lambda e, side: e, progress=progress)
    (pa, _), (pb, _), (a, _), (b, _) = samples
    delta = float(getattr(mechanism, "delta", 0.0))
    bound = _test(a, b, pa, pb, bins, alpha, delta)
    return AuditResult("black-box", repr(mechanism), float(epsilon), bound, 0.0, pair, bool(bound <= epsilon),
                       {"run_epsilon": run, "draws": draws, "alpha": alpha, "delta": delta})


def side_channel_audit(
    mechanism,
    problem,
    epsilon: float,
    *,
    pair: AdjacentPair | None = None,
    draws: int = 5_000,
    pilot: int = 1_000,
    candidates: int = 8,
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
    diagnostics show — they are not part of the release.
    """

    def side_only(e, side):
        return np.column_stack([side[k] for k in sorted(side)])

    pair, samples = _collect(mechanism, problem, epsilon, pair, draws=draws, pilot=pilot, candidates=candidates,
                             score_draws=score_draws, seed=seed, extract=side_only, progress=progress)
    (pa, sa), (pb, sb), (a, ta), (b, tb) = samples
    level = alpha / (len(ta) + 1)
    record = _test(a, b, pa, pb, bins, level)
    fields = {}
    for k in sorted(ta):
        bound = _test(ta[k][:, None], tb[k][:, None], sa[k][:, None], sb[k][:, None], bins, level)
        fields[k] = (bound, bool(bound > epsilon))
    return AuditResult("side-channel", repr(mechanism), float(epsilon), record, 0.0, pair, bool(record <= epsilon),
                       {"fields": fields, "draws": draws, "alpha": alpha})

"""Weighted k-means in numpy: squared distances, the cost, k-means++ seeding and Lloyd's iterations.

Shared by the problem (its non-private reference) and the mechanisms (the non-private
baseline; the grid mechanism's weighted k-means on noisy cells).  Every function takes
optional non-negative ``weights`` (None: 1 per row); nothing here is private by itself.
"""

from __future__ import annotations

import numpy as np

__all__ = ["squared_distances", "assign", "cost", "kmeanspp", "lloyd", "best_of", "canonical_centres"]

#: rows handled at a time (bounds the ``(rows, k)`` distance matrix)
CHUNK = 1 << 16


def squared_distances(x: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """``(n, k)`` squared Euclidean distances of rows ``x`` (n, d) to ``centres`` (k, d)."""
    diff = x[:, None, :] - centres[None, :, :]
    return np.einsum("nkd,nkd->nk", diff, diff)


def assign(x: np.ndarray, centres: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(labels, d2)``: the nearest centre of every row (lowest index on ties) and its squared distance."""
    n = x.shape[0]
    labels = np.empty(n, dtype=np.intp)
    d2 = np.empty(n)
    for start in range(0, n, CHUNK):
        D = squared_distances(x[start:start + CHUNK], centres)
        lab = np.argmin(D, axis=1)
        labels[start:start + CHUNK] = lab
        d2[start:start + CHUNK] = D[np.arange(D.shape[0]), lab]
    return labels, d2


def cost(x: np.ndarray, centres: np.ndarray, weights: np.ndarray | None = None) -> float:
    """The k-means cost ``sum_i w_i min_j ||x_i - c_j||^2``."""
    d2 = assign(x, centres)[1]
    return float(d2.sum() if weights is None else weights @ d2)


def kmeanspp(x: np.ndarray, k: int, rng: np.random.Generator, weights: np.ndarray | None = None) -> np.ndarray:
    """k-means++ seeding (Arthur & Vassilvitskii 2007), weighted: the first centre a row drawn
    ``∝ w``, each next one ``∝ w D^2`` (``D`` the distance to the nearest chosen centre;
    ``∝ w`` again when every ``w D^2`` is 0)."""
    n = x.shape[0]
    w = np.ones(n) if weights is None else np.asarray(weights, float)
    total = w.sum()
    p = w / total if total > 0 else np.full(n, 1.0 / n)
    centres = np.empty((k, x.shape[1]))
    centres[0] = x[rng.choice(n, p=p)]
    d2 = squared_distances(x, centres[:1])[:, 0]
    for j in range(1, k):
        s = w * d2
        tot = s.sum()
        q = s / tot if tot > 0 else p
        centres[j] = x[rng.choice(n, p=q)]
        d2 = np.minimum(d2, squared_distances(x, centres[j:j + 1])[:, 0])
    return centres


def lloyd(x: np.ndarray, centres: np.ndarray, iterations: int, weights: np.ndarray | None = None) -> np.ndarray:
    """At most ``iterations`` Lloyd steps from ``centres`` (stops when no row changes cluster);
    a cluster that loses all its weight keeps its centre."""
    c = np.array(centres, dtype=np.float64)
    k, d = c.shape
    w = np.ones(x.shape[0]) if weights is None else np.asarray(weights, float)
    labels = None
    for _ in range(iterations):
        new = assign(x, c)[0]
        if labels is not None and np.array_equal(new, labels):
            break
        labels = new
        W = np.bincount(labels, weights=w, minlength=k)
        for a in range(d):
            S = np.bincount(labels, weights=w * x[:, a], minlength=k)
            c[:, a] = np.where(W > 0, S / np.where(W > 0, W, 1.0), c[:, a])
    return c


def best_of(x: np.ndarray, k: int, rng: np.random.Generator, *, n_init: int, iterations: int,
            weights: np.ndarray | None = None) -> np.ndarray:
    """The lowest-cost result of ``n_init`` runs of k-means++ seeding then Lloyd."""
    best, best_cost = None, np.inf
    for _ in range(n_init):
        c = lloyd(x, kmeanspp(x, k, rng, weights), iterations, weights)
        cc = cost(x, c, weights)
        if cc < best_cost:
            best, best_cost = c, cc
    return best


def canonical_centres(centres: np.ndarray) -> np.ndarray:
    """The centres (k, d) sorted by their first coordinate (ties by the second, ...), flattened
    row-major: ``coef = j * d + a`` is coordinate ``a`` of the ``j``-th centre in that order.
    A function of the set of centres alone, so post-processing of any release."""
    c = np.asarray(centres, dtype=np.float64)
    order = np.lexsort(c.T[::-1])
    return np.ascontiguousarray(c[order]).ravel()

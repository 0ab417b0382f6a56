r"""The exponential mechanism over centre sets on a public grid (after Wang, Wang & Singh 2015).

Candidates
----------
A public grid of candidate centres: the points ``h j`` (``j`` in ``Z^d``) of the unit ball,
``h = spacing`` a power of two (default ``1/4``: 49 points in the disc), listed in
lexicographic order; the candidate releases are the ``M = binom(G, k)`` sets of ``k``
distinct grid points (:func:`candidate_sets`; at most :data:`MAX_CANDIDATES`).  Both are
functions of the public ``d``, ``k`` and ``h`` only.  A set listed by increasing indices is
already in canonical order (the points are sorted lexicographically), so a release is a row
of :func:`candidate_sets`' outcomes exactly, with no arithmetic on it.

Utility and its sensitivity (derived here, replace-one, ``n`` public)
---------------------------------------------------------------------
The utility of a centre set ``C`` is ``u(C; D) = -cost(C; D) = -sum_i f(x_i, C)`` with
``f(x, C) = min_{c in C} ||x - c||_2^2``.  Records and candidate centres lie in the unit
ball, so ``0 <= f(x, C) <= (||x|| + ||c||)^2 <= 4`` for every record and candidate
(``f = 4`` at ``x = -c`` on the sphere when every centre of ``C`` sits at ``c``'s place
or farther; ``f = 0`` when a centre sits on ``x``).  Replacing ``x`` by ``x'`` changes the
utility of ``C`` by ``g(C) = f(x, C) - f(x', C)``, a number in ``[-4, 4]``: the utility's
sensitivity is ``Delta = 4``, and ``g`` spans a range of at most ``2 Delta = 8`` over ``C``.

The mechanism releases ``C`` with probability

    p_D(C) = exp(-eps cost(C; D) / (2 Delta)) / Z_D,   2 Delta = 8.

For adjacent ``D, D'`` (``D`` holding ``x``, ``D'`` holding ``x'``),

    log p_D(C) - log p_D'(C) = -(eps / 8) g(C) + log (Z_D' / Z_D),
    Z_D' / Z_D = E_{C' ~ p_D}[exp((eps / 8) g(C'))]  in  [exp(eps min g / 8), exp(eps max g / 8)],

so ``|log p_D(C) - log p_D'(C)| <= (eps / 8)(max g - min g) <= eps``: ε-DP (McSherry &
Talwar 2007).  The factor 2 is needed: under replace-one the utilities do not all move the
same way (``g`` changes sign with ``C``).  The bound is approached when ``p_D`` concentrates
on sets with ``g = 4`` (a centre on ``x'``, none near ``x = -x'``: many copies of ``x'`` in
the rest) and ``C`` has ``g = -4``.  With ``k = 1`` the audit's data sets of 64 copies of
``x'`` reach 0.90 ε (``d = 2``, ε = 1; 0.93 ε in ``d = 1``); with ``k >= 2`` the other
centres are free to serve ``x`` and the loss found is smaller (0.59 ε at ``k = 2``,
``d = 2``; 0.49 ε in ``d = 1``), so the 2ε control is caught at ``k = 2, d = 2`` (1.19) but
not at ``k = 2, d = 1`` (0.99): ``tests/models/kmeans/test_kmeans.py``.

Sampler (exact)
---------------
The ``M`` costs are computed exactly in the sense of floating point (a jitted loop over
records and candidate sets: ``O(n M k)``), the log weights are ``-eps cost / 8``, and one
uniform picks the outcome by inversion of the cumulative weights (the softmax normalised
once).  The law is the exact softmax up to rounding (bounded in :meth:`ExpMech.hardening`);
``tests/models/kmeans/test_kmeans.py`` checks it against the exact probabilities by a chi-square test,
with a 2ε control that must fail the same test.

Claim: :class:`~kngflow.mechanisms.claims.Discrete` (the outcomes and their log weights), audited
exactly over every outcome by :func:`kngflow.audit.exact.discrete_audit`.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from kngflow._jit import jit
from kngflow.mechanisms.base import SAMPLER_DIAGNOSTICS, Mechanism, Release, check_epsilon, check_rng
from kngflow.mechanisms.claims import Discrete
from kngflow.mechanisms.hardening import UNIT_ROUNDOFF, Hardening, HardeningError
from kngflow.models.kmeans.lloyd import squared_distances
from kngflow.models.kmeans.problem import check_kmeans_data

__all__ = ["ExpMech", "grid_points", "candidate_sets", "set_costs", "COST_SENSITIVITY", "MAX_CANDIDATES"]

#: the utility's sensitivity ``Delta`` (records and centres in the unit ball: ``f`` in [0, 4])
COST_SENSITIVITY = 4.0
#: the most candidate sets the mechanism enumerates (``binom(G, k)``)
MAX_CANDIDATES = 250_000

_CACHE: dict = {}


def _check_spacing(spacing) -> float:
    if isinstance(spacing, bool) or not isinstance(spacing, (int, float)) or not math.isfinite(spacing):
        raise TypeError(f"spacing must be a number, got {type(spacing).__name__}")
    if not 0.0 < spacing <= 1.0 or math.frexp(spacing)[0] != 0.5:
        raise ValueError(f"spacing must be a power of two in (0, 1] (1, 0.5, 0.25, ...), got {spacing!r}")
    return float(spacing)


def grid_points(d: int, spacing: float) -> np.ndarray:
    """``(G, d)``: the points ``spacing * j`` (``j`` integer) of the closed unit ball, in lexicographic order."""
    r = int(round(1.0 / spacing))
    axes = np.arange(-r, r + 1)
    mesh = np.stack(np.meshgrid(*([axes] * d), indexing="ij"), -1).reshape(-1, d)  # lexicographic
    inside = (mesh * mesh).sum(axis=1) <= r * r  # integers: exact
    return mesh[inside].astype(np.float64) * spacing


def candidate_sets(d: int, k: int, spacing: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(points (G, d), sets (M, k) of point indices, outcomes (M, k d))``, cached; the outcomes
    are the sets' centres in canonical order, flattened.  ValueError naming ``spacing`` when
    ``binom(G, k)`` exceeds :data:`MAX_CANDIDATES`, or when ``k`` exceeds ``G``."""
    key = (int(d), int(k), float(spacing))
    if key not in _CACHE:
        pts = grid_points(d, spacing)
        G = len(pts)
        if k > G:
            raise ValueError(f"spacing: the grid of spacing {spacing:g} has {G} points in the unit ball of R^{d}, "
                             f"fewer than k = {k}; take a finer spacing")
        M = math.comb(G, k)
        if M > MAX_CANDIDATES:
            raise ValueError(f"spacing: {M} candidate sets (binom({G}, {k})) exceed {MAX_CANDIDATES}; "
                             "take a coarser spacing")
        sets = np.fromiter(itertools.chain.from_iterable(itertools.combinations(range(G), k)), dtype=np.int64,
                           count=M * k).reshape(M, k)
        outcomes = np.ascontiguousarray(pts[sets].reshape(M, k * d))
        _CACHE[key] = (pts, sets, outcomes)
    return _CACHE[key]


@jit
def _set_costs(D, sets, out):
    """``out[m] = sum_i min_j D[i, sets[m, j]]`` (records in order, so the sum is the same everywhere)."""
    M, k = sets.shape
    for m in range(M):
        out[m] = 0.0
    for i in range(D.shape[0]):
        for m in range(M):
            best = D[i, sets[m, 0]]
            for j in range(1, k):
                v = D[i, sets[m, j]]
                if v < best:
                    best = v
            out[m] += best


def set_costs(x: np.ndarray, points: np.ndarray, sets: np.ndarray) -> np.ndarray:
    """``(M,)``: the k-means cost ``sum_i min_{c in C} ||x_i - c||^2`` of every candidate set."""
    D = np.ascontiguousarray(squared_distances(x, points))
    out = np.empty(sets.shape[0])
    _set_costs(D, sets, out)
    return out


class ExpMech(Mechanism):
    """The exponential mechanism over ``k``-sets of a public grid of centres; ε-DP (module docstring).

    ``P(C) ∝ exp(-eps cost(C; D) / 8)`` over the ``binom(G, k)`` sets of ``k`` distinct points
    of the grid ``spacing * Z^d`` inside the unit ball; drawn exactly (one uniform, inversion
    of the cumulative weights).

    Keyword-only option: ``spacing`` (a power of two in (0, 1], default 0.25: 49 points in
    the disc, 18 424 sets of 3).  Cost ``O(n binom(G, k) k)`` per release.

    Hardenable: the release is one of the public grid's points, already exact multiples of
    ``spacing`` (:meth:`hardening`).

    Claim: :class:`~kngflow.mechanisms.claims.Discrete` (:meth:`outcomes`, :meth:`log_weights`).
    """

    kind = "expmech"
    diagnostics = SAMPLER_DIAGNOSTICS

    def __init__(self, *, spacing=0.25):
        self.spacing = _check_spacing(spacing)

    def __repr__(self) -> str:
        return f"ExpMech(spacing={self.spacing:g})"

    def outcomes(self, data) -> np.ndarray:
        """``(M, k d)``: every candidate release (canonical order), from the public ``d`` and ``k``."""
        data = check_kmeans_data(data)
        return candidate_sets(data.d, data.k, self.spacing)[2]

    def log_weights(self, data, epsilon) -> np.ndarray:
        """``(M,)``: ``-eps cost(C; D) / (2 Delta)`` of every candidate set, ``Delta = 4``."""
        data = check_kmeans_data(data)
        epsilon = check_epsilon(epsilon)
        pts, sets, _ = candidate_sets(data.d, data.k, self.spacing)
        return -(epsilon / (2.0 * COST_SENSITIVITY)) * set_costs(data.x, pts, sets)

    def probabilities(self, data, epsilon) -> np.ndarray:
        """``(M,)``: the exact softmax law of the release over :meth:`outcomes`."""
        lw = self.log_weights(data, epsilon)
        w = np.exp(lw - lw.max())
        return w / w.sum()

    @staticmethod
    def draw_index(log_weights: np.ndarray, rng: np.random.Generator) -> int:
        """One index drawn with probability ``∝ exp(log_weights)``: inversion with one uniform."""
        w = np.exp(log_weights - log_weights.max())
        c = np.cumsum(w)
        return int(min(np.searchsorted(c, rng.random() * c[-1], side="right"), len(c) - 1))

    def release(self, data, epsilon, rng) -> Release:
        data = check_kmeans_data(data)
        rng = check_rng(rng)
        lw = self.log_weights(data, epsilon)
        m = self.draw_index(lw, rng)
        out = candidate_sets(data.d, data.k, self.spacing)[2][m].copy()
        return Release(out, {"sampler": "exact", "acceptance": 1.0, "steps": len(lw)})

    def hardening(self, data, epsilon) -> Hardening:
        """The release is one of the public outcomes, exact multiples of ``Λ = spacing`` (a power
        of two) within ``[-1, 1]``, so the contract's snapping to that grid (site ``"estimate"``)
        gives it back unchanged (``η = 0``: with the dither ``V`` in ``[0, Λ)`` the cell of
        ``x + V`` is ``x``'s); what rounding changes is the law over the outcomes, bounded in
        total variation (``tv``), which adds ``(1 + e^ε) tv`` to δ.

        Bound, ``u = 2^-53``: a term ``min_j ||x - c_j||^2`` (``d`` squares summed, at most 4) is
        within ``4 (d + 2) u`` of its value, the sum of ``n`` terms (at most ``4 n``) within
        ``4 n (n - 1) u`` more, so each cost is within ``e_c = 4 n (n + d + 1) u``; the log
        weights ``-eps cost / 8``, their shift and ``exp`` add a relative ``8 u``: every
        weight is within a factor ``exp(±a)`` of the exact one, ``a = eps e_c / 8 + 8 u``, and
        the normalised law within ``exp(±2a)``: a total variation of at most ``e^(2a) - 1``.
        Inversion: the ``M`` cumulative sums are within ``M u`` of the total each, and the
        53-bit uniform is within ``2^-53``: at most ``M (2 M u + 2^-53)`` more.
        """
        data = check_kmeans_data(data)
        epsilon = check_epsilon(epsilon)
        M = math.comb(len(grid_points(data.d, self.spacing)), data.k)
        n, u = data.n, UNIT_ROUNDOFF
        a = epsilon * 4.0 * n * (n + data.d + 1) * u / 8.0 + 8.0 * u
        tv = math.expm1(2.0 * a) + M * (2.0 * M * u + 2.0**-53)
        if not tv < 1e-3:
            raise HardeningError(f"hardened: the rounding of {M} candidate sets on n = {n} records bounds the law "
                                 f"only within a total variation of {tv:.2g}")
        return Hardening(grid=self.spacing, bound=1.0, eta=0.0, lipschitz=None, size=data.k * data.d, tv=tv)

    def privacy_claim(self) -> Discrete:
        return Discrete(outcomes=self.outcomes, log_weights=self.log_weights)

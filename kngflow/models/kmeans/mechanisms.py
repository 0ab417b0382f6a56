r"""Mechanisms for k-means (Sarwate's survey §7.2.1): non-private Lloyd, DPLloyd and the grid method (EUGkM).

Every mechanism releases ``k`` centres in the unit ball in canonical order
(:func:`~kngflow.models.kmeans.lloyd.canonical_centres`: sorted by first coordinate,
flattened row-major), a function of the set of centres (post-processing).

Adjacency is replace-one (``n`` public), records in the unit ℓ2 ball of ``R^d``.

* :class:`NonPrivate`: Lloyd's iterations from k-means++ seeding, best of ``n_init`` runs.
* :class:`DPLloyd` (Blum, Dwork, McSherry & Nissim 2005; Su et al. 2016): ``T`` Lloyd
  iterations, each releasing Laplace-noised counts and coordinate sums per cluster.
* :class:`Grid` (Su et al.'s EUGkM): a Laplace-noised histogram on a uniform grid sized by
  Su et al.'s rule, then weighted k-means on the cells' centres.

Sensitivities of one Lloyd iteration (DPLloyd)
----------------------------------------------
At current centres ``c_1, ..., c_k`` (public given the past releases) every record goes to
its nearest centre; the iteration's statistic is the counts ``N_j`` and the coordinate sums
``S_j = sum_{i in cluster j} x_i`` (``k`` counts, ``k d`` sums).  Replacing a record ``x``
(in cluster ``a``) by ``x'`` (in cluster ``b``):

* counts: if ``a != b``, ``N_a`` drops by 1 and ``N_b`` grows by 1, else nothing changes:
  ℓ1 sensitivity ``Delta_N = 2``;
* sums: if ``a != b``, ``S_a`` changes by ``-x`` and ``S_b`` by ``+x'``, ℓ1 change
  ``||x||_1 + ||x'||_1``; if ``a = b``, ``S_a`` changes by ``x' - x``, ℓ1 change
  ``||x' - x||_1 <= ||x||_1 + ||x'||_1``.  On the unit ℓ2 ball ``||x||_1 <= sqrt(d) ||x||_2
  <= sqrt(d)`` (Cauchy–Schwarz, equality at ``(±1, ..., ±1) / sqrt(d)``), so
  ``Delta_S = 2 sqrt(d)`` (ℓ1 over all clusters' sums), reached by ``x = (1, ..., 1)/sqrt(d)``,
  ``x' = -x``.

Both are reached together (``x, x' = ±(1, ..., 1)/sqrt(d)`` in different clusters), so the
budget must cover ``Delta_N`` and ``Delta_S`` at once.  With ε split evenly over the ``T``
iterations, ``eps_t = eps / T``, and a share ``rho`` of it for the counts: Laplace noise
``Lap(b_N)`` on each count and ``Lap(b_S)`` on each sum coordinate with

    b_N = Delta_N / (rho eps_t) = 2 T / (rho eps),
    b_S = Delta_S / ((1 - rho) eps_t) = 2 sqrt(d) T / ((1 - rho) eps).

One iteration is then ``eps_t``-DP: the Laplace density ratio of the stacked noisy
statistic is at most ``exp(Delta_N / b_N + Delta_S / b_S) = exp(rho eps_t + (1 - rho) eps_t)``.
Equivalently, the scaled statistic ``T = (rho N / 2, (1 - rho) S / (2 sqrt(d)))`` has ℓ1
sensitivity at most ``rho + (1 - rho) = 1`` and carries i.i.d. ``Lap(T / eps)`` noise: the
claim the statistic audit checks.  The iterations are adaptive (each at the centres the
previous noisy output gave), and ``T`` adaptive ``eps / T``-DP steps are ε-DP by basic
composition (a sum of pure ε: no accountant needed).  New centres ``S~_j / N~_j``
projected onto the unit ball, a cluster with ``N~_j <= 1`` keeping its centre, and the
canonical order are post-processing.

The default share minimises the centre's noise variance for a centre of norm at most 1:
``Var(S~/N~) ~ (d 2 b_S^2 + ||c||^2 2 b_N^2) / N^2 ∝ d^2 / (1 - rho)^2 + 1 / rho^2``,
minimal at ``rho / (1 - rho) = d^(-2/3)``, i.e. ``rho = 1 / (1 + d^(2/3))`` (0.39 at
``d = 2``; Su et al. 2016 derive the same ``1 : d^(2/3)`` ratio of the count's and the
sums' budgets).

The grid (EUGkM)
----------------
The box ``[-1, 1]^d`` (holding the ball) is cut into ``m^d`` equal cells; the histogram of
cell counts changes in two cells by 1 each when one record moves to another cell (ℓ1
sensitivity 2, whatever the grid), so ``Lap(2 / eps)`` per cell is ε-DP.  Su et al.'s rule
sizes the grid from public quantities: ``m = (n eps / 10)^(2 / (2 + d))`` cells per
dimension (rounded, at least 1, at most ``MAX_CELLS^(1/d)``).  The released centres are
weighted k-means (k-means++ seeding, Lloyd) on the cells' centres with weights
``max(H~, 0)``, projected onto the unit ball: post-processing.
"""

from __future__ import annotations

import math

import numpy as np

from kngflow.mechanisms.base import (SAMPLER_DIAGNOSTICS, Mechanism, Release, check_epsilon, check_int,
                                     check_probability, check_rng)
from kngflow.mechanisms.claims import StatisticNoise
from kngflow.mechanisms.generic import NonPrivateBase
from kngflow.mechanisms.hardening import UNIT_ROUNDOFF, Hardening, coupling_hardening, lipschitz_hardening, snap
from kngflow.models.kmeans.lloyd import assign, best_of, canonical_centres
from kngflow.models.kmeans.problem import check_kmeans_data
from kngflow.norms import get_norm

__all__ = ["NonPrivate", "DPLloyd", "Grid", "count_sensitivity", "sum_sensitivity", "default_count_share",
           "su_grid_size", "MAX_CELLS"]

#: the most cells the grid mechanism uses (``m`` is capped at ``MAX_CELLS^(1/d)``)
MAX_CELLS = 1 << 20


def count_sensitivity() -> float:
    """``2``: ℓ1 sensitivity of the ``k`` cluster counts under replace-one (module docstring)."""
    return 2.0


def sum_sensitivity(d: int) -> float:
    """``2 sqrt(d)``: ℓ1 sensitivity of the ``k d`` cluster sums for records in the unit ℓ2 ball."""
    return 2.0 * math.sqrt(d)


def default_count_share(d: int) -> float:
    """``1 / (1 + d^(2/3))``: the share of each iteration's budget spent on the counts (module docstring)."""
    return 1.0 / (1.0 + d ** (2.0 / 3.0))


def su_grid_size(n: int, epsilon: float, d: int) -> int:
    """Su et al.'s cells per dimension ``m = (n eps / 10)^(2 / (2 + d))``, rounded, in ``[1, MAX_CELLS^(1/d)]``."""
    m = int(round((n * epsilon / 10.0) ** (2.0 / (2.0 + d))))
    cap = max(1, int(math.floor(MAX_CELLS ** (1.0 / d) + 1e-9)))
    return min(max(m, 1), cap)


def _project_ball(c: np.ndarray) -> np.ndarray:
    r = np.sqrt((c * c).sum(axis=1))
    return np.where((r > 1.0)[:, None], c / np.maximum(r, 1.0)[:, None], c)


class NonPrivate(NonPrivateBase):
    """Lloyd's iterations from k-means++ seeding: the non-private baseline (not private).

    Keyword-only options: ``n_init`` (k-means++ restarts, the lowest-cost result kept;
    default 3), ``iterations`` (Lloyd steps at most per run; default 100).  The seeding
    draws from the release's ``rng``.
    """

    def __init__(self, *, n_init=3, iterations=100):
        self.n_init = check_int("n_init", n_init, 1)
        self.iterations = check_int("iterations", iterations, 1)

    def __repr__(self) -> str:
        return f"NonPrivate(n_init={self.n_init}, iterations={self.iterations})"

    def check_data(self, data):
        return check_kmeans_data(data)

    def release(self, data, epsilon, rng) -> Release:
        data = check_kmeans_data(data)
        check_epsilon(epsilon)
        rng = check_rng(rng)
        C = best_of(data.x, data.k, rng, n_init=self.n_init, iterations=self.iterations)
        return Release(canonical_centres(C), {"sampler": "none", "acceptance": np.nan, "steps": self.iterations})


class DPLloyd(Mechanism):
    """DPLloyd (Su et al. 2016; diffprivlib's ``KMeans``): ε-DP by basic composition of ``T`` noisy Lloyd steps.

    Start: ``k`` centres drawn i.i.d. uniform in the ball of radius 1/2 from the release's
    ``rng`` (data independent).  Each of the ``T`` iterations assigns every record to its
    nearest centre and releases ``N~_j = N_j + Lap(b_N)`` and ``S~_j = S_j + Lap(b_S)^d``,
    ``b_N = 2 T / (rho eps)``, ``b_S = 2 sqrt(d) T / ((1 - rho) eps)`` (derivation in the
    module docstring); the next centres are ``S~_j / N~_j`` projected onto the unit ball,
    or the previous centre when ``N~_j <= 1``.

    Keyword-only options: ``iterations`` (``T``, default 5), ``count_share`` (``rho`` in
    (0, 1); default None: ``1 / (1 + d^(2/3))``).  Hardenable: each step's noisy
    statistic is snapped (:meth:`hardening`).

    Claim: :class:`~kngflow.mechanisms.claims.StatisticNoise` with ``T`` steps of i.i.d.
    ``Lap(T / eps)`` noise on the scaled statistic ``(rho N / 2, (1 - rho) S / (2 sqrt(d)))``
    (ℓ1 sensitivity 1) at public centre sets (:meth:`audit_iterates`); the steps are
    adaptive, which basic composition allows.
    """

    kind = "dplloyd"
    diagnostics = SAMPLER_DIAGNOSTICS

    def __init__(self, *, iterations=5, count_share=None):
        self.iterations = check_int("iterations", iterations, 1)
        self.count_share = None if count_share is None else check_probability("count_share", count_share)

    def __repr__(self) -> str:
        return f"DPLloyd(iterations={self.iterations}, count_share={self.count_share!r})"

    def share(self, d: int) -> float:
        """``rho``: the option, or :func:`default_count_share` of ``d``."""
        return default_count_share(d) if self.count_share is None else self.count_share

    def noise_scales(self, d: int, epsilon: float) -> tuple[float, float]:
        """``(b_N, b_S)``: the Laplace scales of each noisy count and each noisy sum coordinate."""
        epsilon = check_epsilon(epsilon)
        rho, T = self.share(d), self.iterations
        return count_sensitivity() * T / (rho * epsilon), sum_sensitivity(d) * T / ((1.0 - rho) * epsilon)

    @staticmethod
    def counts_and_sums(x: np.ndarray, centres: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(N, S)``: records per nearest centre ``(k,)`` and their coordinate sums ``(k, d)``."""
        k, d = centres.shape
        labels = assign(x, centres)[0]
        N = np.bincount(labels, minlength=k).astype(np.float64)
        S = np.stack([np.bincount(labels, weights=x[:, a], minlength=k) for a in range(d)], axis=1)
        return N, S

    def iteration(self, x: np.ndarray, centres: np.ndarray, epsilon: float, rng: np.random.Generator,
                  harden: tuple | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One noisy Lloyd step: ``(N~, S~, next centres)``; with ``harden = (hardening, dither
        generator)`` the noisy ``(N~, S~)`` are snapped (:meth:`hardening`) before the centres."""
        k, d = centres.shape
        b_N, b_S = self.noise_scales(d, epsilon)
        N, S = self.counts_and_sums(x, centres)
        Nn = N + rng.laplace(0.0, b_N, size=k)
        Sn = S + rng.laplace(0.0, b_S, size=(k, d))
        if harden is not None:
            y = snap(np.concatenate([Nn, Sn.ravel()]), harden[0], harden[1])
            Nn, Sn = y[:k], y[k:].reshape(k, d)
        ok = Nn > 1.0
        new = np.where(ok[:, None], Sn / np.where(ok, Nn, 1.0)[:, None], centres)
        return Nn, Sn, _project_ball(new)

    @staticmethod
    def initial_centres(k: int, d: int, rng: np.random.Generator) -> np.ndarray:
        """``k`` points i.i.d. uniform in the ball of radius 1/2 (data independent)."""
        g = rng.standard_normal((k, d))
        g /= np.maximum(np.sqrt((g * g).sum(axis=1)), 1e-300)[:, None]
        return 0.5 * g * rng.uniform(size=(k, 1)) ** (1.0 / d)

    def release(self, data, epsilon, rng) -> Release:
        data = check_kmeans_data(data)
        epsilon = check_epsilon(epsilon)
        rng = check_rng(rng)
        c = self.initial_centres(data.k, data.d, rng)
        # hardened: the dither comes from a stream 2^128 draws ahead, so the noise is the unhardened release's
        harden = (self.hardening(data, epsilon), np.random.Generator(rng.bit_generator.jumped())) \
            if self.hardened else None
        for _ in range(self.iterations):
            c = self.iteration(data.x, c, epsilon, rng, harden)[2]
        return Release(canonical_centres(c), {"sampler": "exact", "acceptance": 1.0, "steps": self.iterations})

    def hardening(self, data, epsilon) -> Hardening:
        """Lipschitz route on each step's noisy ``(N~, S~)`` (site ``"statistic"``, ``T`` snaps;
        the centres are post-processing).

        Given the step's public centres the noise has density
        ``∝ exp(-||v_N||_1 / b_N - ||v_S||_1 / b_S)``: ``L = k / b_N + k d / b_S`` against
        ∞-norm moves.  Clamp ``B = n + 64 max(b_N, b_S)`` (``|N_j|, |S_ja| <= n``).  Rounding,
        ``u = 2^-53``: counts are exact integers; a sum of at most ``n`` coordinates of size at
        most 1 is within ``n (n - 1) u``; the noise, the sum and the dither add ``32 u B``:
        ``eta = (n^2 + 32 B) u``.
        """
        data = check_kmeans_data(data)
        epsilon = check_epsilon(epsilon)
        k, d = data.k, data.d
        b_N, b_S = self.noise_scales(d, epsilon)
        bound = data.n + 64.0 * max(b_N, b_S)
        eta = (float(data.n) ** 2 + 32.0 * bound) * UNIT_ROUNDOFF
        return lipschitz_hardening(k / b_N + k * d / b_S, bound, eta, k * (d + 1), epsilon,
                                   snaps=self.iterations, site="statistic")

    # -- the claim --------------------------------------------------------------------------
    @staticmethod
    def audit_iterates(k: int, d: int) -> list[np.ndarray]:
        """Public centre sets ``(k, d)`` at which a step's statistic is audited: every centre at
        0 (one cluster: only the sums move), and ``c_1 = u/2``, ``c_j = -u/2`` (``j > 1``;
        ties go to the lowest index) for ``u = e_1`` and ``u = (1, ..., 1)/sqrt(d)``, which
        split the extreme records ``±u`` between two clusters (counts and sums move)."""
        out = [np.zeros((k, d))]
        if k > 1:
            for u in (np.eye(d)[0], np.ones(d) / math.sqrt(d)):
                c = np.tile(-u / 2.0, (k, 1))
                c[0] = u / 2.0
                out.append(c)
        return out

    def statistic(self, data) -> np.ndarray:
        """Rows: the scaled statistic ``(rho N / 2, (1 - rho) S / (2 sqrt(d)))`` at each of :meth:`audit_iterates`."""
        data = check_kmeans_data(data)
        rho, d = self.share(data.d), data.d
        rows = []
        for c in self.audit_iterates(data.k, d):
            N, S = self.counts_and_sums(data.x, c)
            rows.append(np.concatenate([rho * N / count_sensitivity(), (1.0 - rho) * S.ravel() / sum_sensitivity(d)]))
        return np.array(rows)

    def statistic_noise(self, data, epsilon: float):
        """Per step: ℓ1 K-norm noise (i.i.d. Laplace) of scale ``T / eps`` on the scaled statistic."""
        return get_norm("l1"), self.iterations / float(epsilon)

    def statistic_steps(self, n: int) -> int:
        return self.iterations

    def privacy_claim(self) -> StatisticNoise:
        return StatisticNoise(statistic=self.statistic, noise=self.statistic_noise, steps=self.statistic_steps,
                              additive=True,
                              description="per Lloyd step, the counts and coordinate sums per cluster at the "
                                          "step's public centres, scaled to (rho N / 2, (1 - rho) S / (2 sqrt(d))); "
                                          "the next centres S~/N~ are post-processing (steps adaptive)")


class Grid(Mechanism):
    """EUGkM (Su et al. 2016): a Laplace-noised histogram on a uniform grid, then weighted k-means; ε-DP.

    ``m^d`` equal cells on ``[-1, 1]^d`` with ``m`` from Su et al.'s rule
    (:func:`su_grid_size`) unless ``cells`` sets it; counts ``H + Lap(2 / eps)`` per cell
    (module docstring); weighted k-means++ and Lloyd on the cells' centres with weights
    ``max(H~, 0)``, best of ``n_init``, projected onto the unit ball.

    Keyword-only options: ``cells`` (int >= 1 cells per dimension, or None: the rule),
    ``n_init`` (default 3), ``iterations`` (default 50).  Hardenable: the noisy histogram
    is snapped (:meth:`hardening`).

    Claim: :class:`~kngflow.mechanisms.claims.StatisticNoise`, ℓ1 K-norm (i.i.d. Laplace)
    noise of scale ``2 / eps`` on the histogram; the grid is a public input (``n``, ε, ``d``),
    so the audited statistic is the histogram at several public grids (rows, zero-padded:
    :data:`AUDIT_GRIDS`), whose sensitivity 2 holds for every grid.
    """

    kind = "eugkm"
    diagnostics = SAMPLER_DIAGNOSTICS
    #: cells per dimension of the grids the statistic audit evaluates the histogram on
    AUDIT_GRIDS = (1, 2, 3, 5, 8)

    def __init__(self, *, cells=None, n_init=3, iterations=50):
        self.cells = None if cells is None else check_int("cells", cells, 1)
        self.n_init = check_int("n_init", n_init, 1)
        self.iterations = check_int("iterations", iterations, 1)

    def __repr__(self) -> str:
        return f"Grid(cells={self.cells!r}, n_init={self.n_init}, iterations={self.iterations})"

    def grid_size(self, n: int, d: int, epsilon: float) -> int:
        """Cells per dimension: ``cells`` or Su et al.'s rule."""
        if self.cells is not None:
            if self.cells ** d > MAX_CELLS:
                raise ValueError(f"cells: cells^d must be at most {MAX_CELLS}, got {self.cells}^{d}")
            return self.cells
        return su_grid_size(n, epsilon, d)

    @staticmethod
    def histogram(x: np.ndarray, m: int) -> np.ndarray:
        """Counts ``(m^d,)`` of the rows in the cells of ``[-1, 1]^d`` (C order of the cell indices)."""
        idx = np.clip(np.floor((x + 1.0) * (m / 2.0)).astype(np.int64), 0, m - 1)
        flat = np.ravel_multi_index(tuple(idx.T), (m,) * x.shape[1])
        return np.bincount(flat, minlength=m ** x.shape[1]).astype(np.float64)

    @staticmethod
    def cell_centres(m: int, d: int) -> np.ndarray:
        """``(m^d, d)`` centres of the cells, in the histogram's order."""
        g = -1.0 + (np.arange(m) + 0.5) * (2.0 / m)
        mesh = np.meshgrid(*([g] * d), indexing="ij")
        return np.stack([a.ravel() for a in mesh], axis=1)

    def release(self, data, epsilon, rng) -> Release:
        data = check_kmeans_data(data)
        epsilon = check_epsilon(epsilon)
        rng = check_rng(rng)
        m = self.grid_size(data.n, data.d, epsilon)
        counts = self.histogram(data.x, m)
        V = rng.laplace(0.0, count_sensitivity() / epsilon, size=m ** data.d)
        H = counts + V
        if self.hardened:
            # H + lo = counts + V exactly (two-sum: the counts are exact integers); the dither comes
            # from a stream 2^128 draws ahead, so the noise and k-means++ draws are the unhardened ones
            bb = H - counts
            lo = (counts - (H - bb)) + (V - bb)
            H = snap(H, self.hardening(data, epsilon), np.random.Generator(rng.bit_generator.jumped()), lo)
        w = np.maximum(H, 0.0)
        pts = self.cell_centres(m, data.d)
        C = best_of(pts, data.k, rng, n_init=self.n_init, iterations=self.iterations, weights=w)
        return Release(canonical_centres(_project_ball(C)), {"sampler": "exact", "acceptance": 1.0, "steps": m})

    def hardening(self, data, epsilon) -> Hardening:
        """Coupling route on the noisy histogram (site ``"statistic"``; the weighted k-means is
        post-processing), its grid tied to the noise's spread.

        Each cell's noise is ``Lap(2 / eps)``, of standard deviation ``s = 2 sqrt(2) / eps``
        (public): ``Λ = 2^(floor(log2 s) - 4)`` (:func:`~kngflow.mechanisms.hardening.spread_grid`),
        so the snapping adds at most ``s^2 / 1024`` to a cell's variance.  Clamp
        ``B = n + 64 (2 / eps)`` (``0 <= H <= n``).  Rounding, ``u = 2^-53``: the counts are
        exact integers and ``counts + V`` is passed to the snapping as an exact double-double
        sum (two-sum), so only ``V = Lap(2 / eps)`` itself is rounded, by at most
        ``8 u |V|``; ``|V| <= 64 (2 / eps)`` except with probability ``e^-64`` per cell,
        counted in ``tv = m^d e^-64``; the snapping's own rounding is at most ``u Λ``.
        So ``eta = 512 u (2 / eps) + u Λ``, whatever ``n``, and the ``m^d`` cells give
        ``δ′ = (1 + e^ε) (m^d 2 η / Λ + tv)`` (:func:`~kngflow.mechanisms.hardening.guarantee`).
        """
        data = check_kmeans_data(data)
        epsilon = check_epsilon(epsilon)
        b = count_sensitivity() / epsilon
        bound = data.n + 64.0 * b
        cells = self.grid_size(data.n, data.d, epsilon) ** data.d
        h = coupling_hardening(bound, 0.0, cells, site="statistic", spread=math.sqrt(2.0) * b)
        eta = 8.0 * UNIT_ROUNDOFF * 64.0 * b + UNIT_ROUNDOFF * h.grid
        return h._replace(eta=eta, tv=cells * math.exp(-64.0))

    def statistic(self, data) -> np.ndarray:
        """Rows: the histogram on each of :data:`AUDIT_GRIDS` (zero-padded to the largest)."""
        data = check_kmeans_data(data)
        hs = [self.histogram(data.x, m) for m in self.AUDIT_GRIDS]
        width = max(h.size for h in hs)
        return np.array([np.pad(h, (0, width - h.size)) for h in hs])

    def statistic_noise(self, data, epsilon: float):
        """ℓ1 K-norm noise (i.i.d. Laplace) of scale ``2 / eps`` on the cell counts."""
        return get_norm("l1"), count_sensitivity() / float(epsilon)

    def privacy_claim(self) -> StatisticNoise:
        return StatisticNoise(statistic=self.statistic, noise=self.statistic_noise, additive=True,
                              description="cell counts of a uniform grid on [-1, 1]^d (the grid a public input: "
                                          "audited at several); the centres are weighted k-means on the noisy "
                                          "cells, post-processing")


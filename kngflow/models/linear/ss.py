r"""Sufficient-statistics linear regression (Awan & Slavković §6): noisy ``X'X``, ``X'Y``.

Setting and adjacency
---------------------
Records ``r = (x, y)`` with ``x`` in ``[-1, 1]^p`` and the scaled response ``y' = y / scale``
in ``[-1, 1]``; the design is ``X = [1, x]`` (column 0 the intercept, so ``G[0, 0] = n``).
Adjacent data sets have the same size ``n`` and differ in one record (bounded DP,
replace-one), so ``n`` is public and released exactly.  The response scale must be public
too: with the ``linear`` problem's protocol ``"public_bound"`` ``Y`` is clipped to
``[-y_bound, y_bound]`` and divided by that bound.  Algorithm 4's ``Y ~ N(X beta, 1)`` is
unbounded, so the study clips it, and the estimator then targets the regression of the
clipped response: ``E[clip(Y) | x]`` is pulled towards 0 where ``|x' beta|`` comes within
a few units of ``y_bound`` (bias), while a larger bound inflates the noise in original
units (estimates are multiplied by ``scale``).  Protocol ``"paper"`` (``scale = max|Y|``,
computed without privacy) is not end-to-end DP.  Algorithm 4's coverage metric is computed
by the analysis layer, not here.

The statistic
-------------
``T`` holds the unique non-constant entries of ``X'X`` and ``X'y'``, each rescaled to
sensitivity 2, in the order (``d_T = (p+1)(p+2)/2 - 1 + (p+1)`` entries)::

    a_j = sum x_j (j = 1..p),  q_j = 2 sum x_j^2,  c_jk = sum x_j x_k (j < k, row-major),
    b = sum y',  e_j = sum x_j y'.

``T(D) = sum_i t(r_i)`` with ``t(x, y) = (x, 2x^2, x_j x_k, y, x y)``, so for adjacent data
sets ``T(D) - T(D') = t(r) - t(r')`` ranges over ``S_T = {t(r) - t(r')}``.

Mechanisms (each ε-DP; ``V`` has density ∝ exp(-||v||/s), translation invariant, so the
density ratio of ``T(D) + V`` and ``T(D') + V`` is at most ``exp(||T(D) - T(D')|| / s)``
and ``s = Delta / eps`` gives ε-DP; the estimate is post-processing)

* ``"linf"``: every coordinate of ``t`` lies in an interval of length 2 (``[-1, 1]``, or
  ``[0, 2]`` for ``2x^2``), so ``Delta_inf = 2`` (attained: ``x_1 = 1`` vs ``-1``).
* ``"l1"``: ``Delta_1 = (p^2 + 7p + 4) / 2`` (:func:`l1_sensitivity`; 32 at ``p = 5``,
  against ``2 d_T = 52`` for the bound ``d_T Delta_inf``).  Proof: with ``z = (1, x, y)``,
  ``M = z z'`` and ``u = z - z'``, ``s = z + z'`` (``u_0 = 0``, ``s_0 = 2``,
  ``|u_i| + |s_i| = 2 max(|z_i|, |z'_i|) <= 2``), ``||t(r) - t(r')||_1`` is half the
  entrywise ℓ1 norm of ``M - M'`` minus ``|y^2 - y'^2|/2``, plus ``(3/2) sum_j |x_j^2 -
  x'_j^2|`` (the doubled diagonal).  ``M - M' = (u s' + s u') / 2`` has entrywise ℓ1 norm
  at most ``||u||_1 ||s||_1 <= U (2p + 4 - U) <= (p + 2)^2`` (``U = ||u||_1``), and the
  diagonal part is at most ``3p/2``: total ``(p+2)^2/2 + 3p/2``.  Attained by ``x = 1``,
  ``y = 1`` against ``x' = 0``, ``y' = -1``: ``4p + 2 + p(p-1)/2``.
* ``"kt"``: the K-norm mechanism of §6.1 with ``K`` = the vectors whose projections lie in
  ``K_2`` for every ``(a_j, q_j)`` and in ``K_3`` for every ``(a_j, a_k, c_jk)`` and
  ``(a_j, b, e_j)`` (:func:`kt_contains`); ``s = 1 / eps``.  ``K_2`` is the hull of
  Example 3.1 (:func:`kngflow.norms.example_kt_norm`: ``|q| <= 2`` for ``|a| <= 1``,
  ``|q| <= 2 - 2(|a| - 1)^2`` beyond); §6.1 prints it with the factor 2 that Example 8.1
  drops, but leaves the case ``|a| <= 1`` implicit.
  ``K_3 = {|u_i| <= 2, |u_1| + |u_2| + |u_3| <= 4}`` holds the differences of ``(x, y, xy)``:
  ``xy - x'y' = (u_x s_y + s_x u_y)/2`` and ``|s| <= 2 - |u|`` give
  ``|u_3| <= |u_1| + |u_2| - |u_1||u_2|``, so the sum is at most
  ``4 - (2 - |u_1|)(2 - |u_2|) <= 4``; its vertices (permutations of ``(±2, ±2, 0)``) are
  differences, so it is the hull.  Hence ``S_T ⊂ K`` and ``Delta_K <= 1`` (``= 1``: ``a_1``
  reaches 2).  ``K`` is an intersection of cylinders over the projected hulls: it contains
  ``conv(S_T)`` but is strictly larger for every ``p >= 1`` (``q_1 = e_1 = 2``, all else 0,
  lies in ``K``, yet ``q_1 + e_1 <= 25/8`` on ``S_T``; for ``p >= 2`` also
  ``q_1 = q_2 = c_12 = 2`` against ``q_1 + q_2 + c_12 <= 5``), so this is the paper's K-norm
  mechanism, ε-DP but not the optimal (minimal) K.

Sampling ``K`` (Prop. 4.1): ``V = r U``, ``r ~ Gamma(d_T + 1, s)``, ``U ~ Uniform(K)``.
Rejection from the cube ``[-2, 2]^{d_T}`` (Algorithm 8; :func:`kt_norm` with
:func:`kngflow.noise.knorm_noise`) accepts 14.5% of proposals at ``p = 5`` (measured; 5.7% at
``p = 7``).  :func:`draw_kt_into` uses that ``K`` is fibred over ``(a, b)``: given them,
every ``q_j``, ``c_jk``, ``e_j`` ranges independently over ``[-w, w]`` with ``w = h(|a_j|)`` or
``L(s, t) = min(2, 4 - |s| - |t|)``.  It proposes each ``(a_j, q_j)`` uniform on ``K_2``
and ``b`` uniform on ``[-2, 2]``, accepts with probability
``prod_{j<k} L(a_j, a_k)/2 * prod_j L(a_j, b)/2`` (the ratio of the ``(a, b)`` marginal of
Uniform(K) to the proposal, at most 1), then draws the other fibres uniformly: exact, and
``(6/5)^p`` times the cube's acceptance at about ``2.4 p + 2`` uniforms per try (measured:
36% at ``p = 5``, 8% at ``p = 10``, 4% at ``p = 12``).

Post-processing: ``(X'X)*`` symmetric with ``[0, 0] = n`` exactly, diagonal ``q_j / 2``;
``beta = [(X'X)*]^+ (X'y')*`` (eq. 5) or ``[(X'X)* + lambda I]^+ (X'y')*`` (eq. 6), times
``scale``.
"""

from __future__ import annotations

import functools

import numpy as np

from kngflow._jit import jit
from kngflow.noise import DEFAULT_MAX_TRIES, knorm_noise
from kngflow.norms import ConvexBodyNorm, get_norm
from kngflow.models.linear.problem import LinearStats
from kngflow.mechanisms.base import check_choice, check_epsilon, check_int, check_positive
from kngflow.mechanisms.claims import StatisticNoise
from kngflow.mechanisms.hardening import UNIT_ROUNDOFF, Hardening, lipschitz_hardening, snap
from kngflow.models.linear.mechanisms import LinearMechanism

__all__ = [
    "SufficientStatistics",
    "t_dim",
    "record_t",
    "stats_t",
    "rebuild",
    "l1_sensitivity",
    "LINF_SENSITIVITY",
    "kt_contains",
    "kt_norm",
    "draw_kt_into",
    "check_intercept",
]

_NORMS = ("l1", "linf", "kt")
_ESTIMATORS = ("pinv", "ridge")

#: ℓ∞ sensitivity of the rescaled ``T``: every coordinate moves by at most 2.
LINF_SENSITIVITY = 2.0


def t_dim(p: int) -> int:
    """Length ``d_T = (p+1)(p+2)/2 - 1 + (p+1)`` of ``T`` for ``p`` covariates."""
    return (p + 1) * (p + 2) // 2 - 1 + (p + 1)


def l1_sensitivity(p: int) -> float:
    """ℓ1 sensitivity of the rescaled ``T``: ``(p^2 + 7p + 4) / 2`` (derivation in the module)."""
    return (p * p + 7 * p + 4) / 2.0


@functools.cache
def _pairs(p: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.triu_indices(p, 1)``, read-only: the positions of the cross products, built once
    for each ``p`` (numpy builds them from a p x p mask at every call, and every release
    reads them)."""
    j, k = np.triu_indices(p, 1)
    j.flags.writeable = k.flags.writeable = False
    return j, k


def record_t(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-record contributions ``t(x, y)`` (m, d_T) of records ``x`` (m, p), ``y`` (m,)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    p = x.shape[1]
    j, k = _pairs(p)
    return np.concatenate([x, 2.0 * x * x, x[:, j] * x[:, k], y[:, None], x * y[:, None]], axis=1)


def stats_t(stats: LinearStats) -> np.ndarray:
    """The rescaled statistic ``T`` (d_T,) read off ``G = X'X`` and ``c = X'y'``."""
    G, c = np.asarray(stats.G), np.asarray(stats.c)
    p = G.shape[0] - 1
    j, k = _pairs(p)
    inner = G[1:, 1:]
    return np.concatenate([G[0, 1:], 2.0 * np.diag(inner), inner[j, k], c[:1], c[1:]])


def rebuild(T: np.ndarray, n: int, p: int) -> tuple[np.ndarray, np.ndarray]:
    """``((X'X)*, (X'y')*)`` from a (noisy) ``T``: symmetric, ``[0, 0] = n``, diagonal ``q / 2``."""
    T = np.asarray(T, dtype=np.float64)
    d = p + 1
    G = np.empty((d, d))
    G[0, 0] = float(n)
    G[0, 1:] = G[1:, 0] = T[:p]
    inner = np.diag(T[p : 2 * p] / 2.0)
    j, k = _pairs(p)
    m = 2 * p + len(j)
    inner[j, k] = inner[k, j] = T[2 * p : m]
    G[1:, 1:] = inner
    return G, T[m : m + d].copy()


def check_intercept(stats: LinearStats) -> None:
    """Raise ValueError unless ``stats`` can come from ``X = [1, x]``, ``|x|, |y'| <= 1``.

    Necessary conditions checked: ``G`` symmetric, ``G[0, 0] == n`` (column 0 is the
    intercept, all ones), every ``|G[i, j]| <= n``, ``0 <= G[j, j]`` and ``|c_j| <= n``.
    """
    G, c, n = np.asarray(stats.G), np.asarray(stats.c), stats.n
    tol = 1e-9 * max(n, 1)
    if G[0, 0] != n:
        raise ValueError(
            f"stats.G[0, 0] must equal n={n} (column 0 of X must be the intercept, all ones), got {G[0, 0]!r}"
        )
    if np.abs(G - G.T).max() > tol:
        raise ValueError("stats.G must be symmetric (G = X'X)")
    if np.any(np.abs(G[0, 1:]) > n + tol):
        raise ValueError(f"stats.G[0, j] = sum x_j must satisfy |G[0, j]| <= n={n} (covariates in [-1, 1])")
    if np.any(np.abs(G) > n + tol) or np.any(np.diag(G) < -tol):
        raise ValueError(f"stats.G must have every |G[i, j]| <= n={n} and a non-negative diagonal")
    if np.any(np.abs(c) > n + tol):
        raise ValueError(f"stats.c = X'y' must satisfy |c_j| <= n={n} (scaled response in [-1, 1])")


# --------------------------------------------------------------------------------------
# the body K of §6.1
# --------------------------------------------------------------------------------------


@jit
def _p_of(m):
    """Number of covariates ``p`` with ``t_dim(p) == m``, or -1."""
    p = 0
    while (p + 1) * (p + 2) // 2 + p < m:
        p += 1
    return p if (p + 1) * (p + 2) // 2 + p == m else -1


@jit
def _k2_height(a):
    """Half-height of ``K_2`` over ``|a| <= 2``: 2, or ``2 - 2(|a| - 1)^2`` beyond 1."""
    a = abs(a)
    if a <= 1.0:
        return 2.0
    w = a - 1.0
    return 2.0 - 2.0 * w * w


@jit
def _k3_width(s, t):
    """Half-width ``min(2, 4 - |s| - |t|)`` of ``K_3``'s fibre over ``(s, t)`` in ``[-2, 2]^2``."""
    return min(2.0, 4.0 - abs(s) - abs(t))


@jit
def kt_contains(u):
    """Membership of the §6.1 body ``K`` (layout of the module docstring), inside numba.

    ``|a_j|, |b| <= 2``; ``|q_j| <= h(|a_j|)`` (``K_2``); ``|c_jk| <= min(2, 4 - |a_j| - |a_k|)``
    and ``|e_j| <= min(2, 4 - |a_j| - |b|)`` (``K_3``).  False for a length that is no ``d_T``.
    """
    p = _p_of(u.shape[0])
    if p < 0:
        return False
    ib = 2 * p + p * (p - 1) // 2
    b = u[ib]
    if abs(b) > 2.0:
        return False
    for j in range(p):
        a = u[j]
        if abs(a) > 2.0 or abs(u[p + j]) > _k2_height(a) or abs(u[ib + 1 + j]) > _k3_width(a, b):
            return False
    i = 2 * p
    for j in range(p):
        for k in range(j + 1, p):
            if abs(u[i]) > _k3_width(u[j], u[k]):
                return False
            i += 1
    return True


def kt_norm(p: int) -> ConvexBodyNorm:
    """The gauge norm of ``K`` for ``p`` covariates (box 2): for :func:`kngflow.noise.knorm_noise`
    (Algorithm 8, rejection from the cube) and for evaluating ``||v||_K``."""
    return ConvexBodyNorm(kt_contains, 2.0, dim=t_dim(p), name=f"kt(p={p})")


@jit
def draw_kt_into(rng, p, scale, out, max_tries):
    """Fill ``out`` (d_T,) with one draw ∝ exp(-||v||_K / scale); returns the tries or -1.

    ``U ~ Uniform(K)`` by the fibred rejection sampler of the module docstring (proposal:
    ``(a_j, q_j)`` uniform on ``K_2`` by rejection from ``[-2, 2]^2``, ``b`` uniform; accept
    with ``prod L/2``; then the ``c``, ``e`` fibres), then ``V = r U``, ``r ~ Gamma(d_T+1, scale)``.
    With ``scale <= 0`` returns ``U`` itself.
    """
    ib = 2 * p + p * (p - 1) // 2
    for t in range(max_tries):
        for j in range(p):
            while True:
                a = 4.0 * rng.random() - 2.0
                q = 4.0 * rng.random() - 2.0
                if abs(q) <= _k2_height(a):
                    break
            out[j] = a
            out[p + j] = q
        b = 4.0 * rng.random() - 2.0
        out[ib] = b
        acc = 1.0
        for j in range(p):
            acc *= 0.5 * _k3_width(out[j], b)
            for k in range(j + 1, p):
                acc *= 0.5 * _k3_width(out[j], out[k])
        if rng.random() < acc:
            i = 2 * p
            for j in range(p):
                for k in range(j + 1, p):
                    out[i] = _k3_width(out[j], out[k]) * (2.0 * rng.random() - 1.0)
                    i += 1
            for j in range(p):
                out[ib + 1 + j] = _k3_width(out[j], b) * (2.0 * rng.random() - 1.0)
            if scale > 0.0:
                r = rng.standard_gamma(out.shape[0] + 1.0) * scale
                for i in range(out.shape[0]):
                    out[i] *= r
            return t + 1
    return -1


# --------------------------------------------------------------------------------------
# the mechanism
# --------------------------------------------------------------------------------------


class SufficientStatistics(LinearMechanism):
    """Awan & Slavković §6: K-norm noise on the sufficient statistics, OLS/ridge after.

    Releases ``T* = T + V`` (``V`` ∝ exp(-||v|| eps / Delta), module docstring) and returns
    ``[(X'X)*]^+ (X'y')*`` (eq. 5) or ``[(X'X)* + lambda I]^+ (X'y')*`` (eq. 6) in original
    units.  Unconstrained: the estimate need not lie in any ℓ1 ball.  Needs ``X = [1, x]``
    (``G[0, 0] == n``; :func:`check_intercept`).

    Parameters (keyword-only)
    -------------------------
    norm : {"linf", "l1", "kt"}; ``Delta`` = 2, ``(p^2 + 7p + 4)/2``, 1.
    estimator : {"pinv", "ridge"}.
    reg : float or None; the ridge of eq. (6) in the ERM convention every mechanism shares,
        ``(1/n) sum_i (y_i - x_i'theta)^2 + (reg/2)|theta|^2`` (scaled units), i.e.
        ``lambda = n reg / 2`` added to ``X'X``.  None: the paper's §6.3
        ``lambda = 16 d / eps`` with ``d = d_T``, the length of ``T`` (§6.1's ``d``).
    max_tries : rejection tries per ``"kt"`` draw (RuntimeError when exhausted).

    ``info``: sampler "exact", acceptance ``1/tries``, steps = tries (1 for ℓ1/ℓ∞); the
    tries do not depend on the data.
    """

    kind = "ss"

    def __init__(self, *, norm="linf", estimator="pinv", reg=None, max_tries=DEFAULT_MAX_TRIES):
        self.norm = check_choice("norm", norm, _NORMS)
        self.estimator = check_choice("estimator", estimator, _ESTIMATORS)
        self.reg = None if reg is None else check_positive("reg", reg)
        if reg is not None and estimator != "ridge":
            raise ValueError("reg is only used with estimator='ridge'")
        self.max_tries = check_int("max_tries", max_tries, 1)

    def options(self) -> dict:
        return {"norm": self.norm, "estimator": self.estimator, "reg": self.reg, "max_tries": self.max_tries}

    def privacy_claim(self) -> StatisticNoise:
        """K-norm noise on the scaled sufficient statistics, audited on records whose intercept is 1."""
        return StatisticNoise(statistic=self.statistic, noise=self.statistic_noise,
                              restrict_records=self.restrict_audit_records, additive_centre=self.centre)

    def centre(self, stats) -> np.ndarray:
        """The non-private OLS estimate (eq. 5 without noise), in original units: the
        bit-level audit's centre."""
        p = stats.d - 1
        return self.estimate(stats_t(stats), stats.n, p, 0.0) * stats.scale

    @staticmethod
    def restrict_audit_records(boundary: np.ndarray, fill: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The declared domain has ``x_0 = 1`` (the intercept): audits use those records."""
        def ones(r):
            r = np.array(r, dtype=np.float64)
            r[:, 0] = 1.0
            return np.unique(r, axis=0)
        return ones(boundary), ones(fill)

    def sensitivity(self, p: int) -> float:
        """``Delta`` of the rescaled ``T`` in this mechanism's norm."""
        return {"linf": LINF_SENSITIVITY, "l1": l1_sensitivity(p), "kt": 1.0}[self.norm]

    # ---------------------------------------------------------------- audit seam
    def statistic(self, stats) -> np.ndarray:
        """The statistic the noise is added to: ``T`` (scaled units)."""
        return stats_t(stats)

    def statistic_noise(self, stats, epsilon: float):
        """``(norm, scale)`` of ``V``: the norm as a callable, ``scale = Delta / eps``."""
        p = stats.d - 1
        return (kt_norm(p) if self.norm == "kt" else get_norm(self.norm)), self.sensitivity(p) / epsilon

    def penalty(self, p: int, epsilon: float, n: int = 0) -> float:
        """Ridge ``lambda`` added to ``X'X`` (0 for "pinv"): ``n reg / 2``, or the paper's rule."""
        if self.estimator == "pinv":
            return 0.0
        return 0.5 * n * self.reg if self.reg is not None else 16.0 * t_dim(p) / check_epsilon(epsilon)

    def noise(self, p: int, epsilon: float, rng: np.random.Generator) -> tuple[np.ndarray, int]:
        """One noise vector ``V`` (d_T,) and the tries it took."""
        scale = self.sensitivity(p) / epsilon
        if self.norm != "kt":
            return knorm_noise(rng, self.norm, t_dim(p), scale), 1
        out = np.empty(t_dim(p))
        tries = draw_kt_into(rng, p, scale, out, self.max_tries)
        if tries < 0:
            raise RuntimeError(
                f"rejection sampling of K (p={p}) rejected max_tries={self.max_tries} proposals in a row; "
                "raise max_tries"
            )
        return out, tries

    def estimate(self, T: np.ndarray, n: int, p: int, lam: float) -> np.ndarray:
        """Eq. (5)/(6) in scaled units from a (noisy) ``T``."""
        G, c = rebuild(T, n, p)
        if lam:
            G[np.diag_indices_from(G)] += lam
        return np.linalg.pinv(G) @ c

    def hardening(self, stats, epsilon) -> Hardening:
        """Lipschitz route on the noisy statistic ``T + V`` (site "statistic"; the estimate is
        post-processing of the snapped statistic).

        ``V ∝ exp(-||v||_K / s)``, ``s = Delta / eps``: ``L = ||(1, ..., 1)||_K / s`` with
        ``||1||_K`` = 1 (ℓ∞), ``d_T`` (ℓ1) and at most ``d_T / 2`` for ``K_T`` (``2 e_j`` lies
        in ``K``).  Clamp ``B = 2n + 128 (d_T + 1) s``: ``|T_k| <= 2n``, and a coordinate of
        ``V`` exceeds ``128 (d_T + 1) s`` only when the gamma radius exceeds 64 times its mean.
        Rounding: each entry of ``G`` and ``c`` sums ``n`` products of size at most 1, an
        error of at most ``n u n`` in any order of summation, and ``T + V`` plus the dither add
        at most ``64 u 2B``: ``eta = (2 n^2 + 128 B) u``, ``u = 2^-53``.
        """
        p = stats.d - 1
        dim = t_dim(p)
        scale = self.sensitivity(p) / epsilon
        width = {"linf": 1.0, "l1": float(dim), "kt": 0.5 * dim}[self.norm]
        bound = 2.0 * stats.n + 128.0 * (dim + 1) * scale
        eta = (2.0 * float(stats.n) ** 2 + 128.0 * bound) * UNIT_ROUNDOFF
        return lipschitz_hardening(width / scale, bound, eta, dim, epsilon, site="statistic")

    def _release(self, stats, epsilon, rng):
        check_intercept(stats)
        p = stats.d - 1
        V, tries = self.noise(p, epsilon, rng)
        T = stats_t(stats) + V
        if self.hardened:
            T = snap(T, self.hardening(stats, epsilon), rng)
        theta = self.estimate(T, stats.n, p, self.penalty(p, epsilon, stats.n))
        return theta, {"sampler": "exact", "acceptance": 1.0 / tries, "steps": tries}

r"""Samplers for the Bingham law on the sphere and the matrix Bingham law on the Stiefel manifold.

The exponential mechanism for the top-``k`` subspace releases ``V`` (``d x k``, ``V^T V = I``)
with density ``∝ exp(tr(V^T C V))`` against the uniform (Haar) law, ``C = (eps n / 2) A``.

``k = 1``: exact rejection sampling (Kent, Ganeiber & Mardia 2013)
------------------------------------------------------------------
In the eigenbasis of ``C`` (eigenvalues ``c_1 >= ... >= c_d``) write ``x = Q w``; then
``w^T Q^T C Q w = c_1 - sum_i lam_i w_i^2`` with ``lam_i = c_1 - c_i >= 0`` and ``min lam = 0``, so
the target is the Bingham density ``f*(w) = exp(-w^T L w)``, ``L = diag(lam)``.  The
envelope is the angular central Gaussian ``ACG(Omega)``, ``Omega = I + 2 L / b``, with
unnormalised density ``g*(w) = (w^T Omega w)^(-d/2)`` on the sphere, drawn as ``y / ||y||``
with ``y ~ N(0, Omega^-1)``.  With ``t = w^T L w >= 0``, ``w^T Omega w = 1 + 2 t / b`` and

    f*(w) / g*(w) = exp(-t) (1 + 2 t / b)^(d/2) <= exp(-(d - b) / 2) (d / b)^(d/2) =: M(b),

the maximum over ``t >= 0`` being at ``1 + 2 t / b = d / b`` (for ``b <= d``).  Accepting a
proposal with probability ``f* / (M g*)`` gives exact draws from the Bingham law for any
``b`` in ``(0, d]``; KGM choose ``b`` minimising ``M(b)`` times the ratio of normalisers,
the root of ``sum_i 1 / (b + 2 lam_i) = 1`` (in ``[1, d]`` since one ``lam_i`` is 0).  The
acceptance rate is bounded below uniformly in ``L`` for fixed ``d`` (KGM 2013), so the
number of tries does not grow with ``n``: no fallback is needed (``max_tries`` guards
against a broken input only).

``k > 1``: column-wise Gibbs (Hoff 2009)
----------------------------------------
Given the other columns, column ``j`` is ``v_j = N z`` with ``N`` an orthonormal basis of
their orthogonal complement (``d x m``, ``m = d - k + 1``) and ``z`` on the sphere of
``R^m``; ``tr(V^T C V) = z^T (N^T C N) z + const``, so ``z`` is Bingham with parameter
``N^T C N`` (and the law does not depend on which basis ``N`` is taken).  Each conditional
is drawn exactly by the ``k = 1`` sampler: the chain's only approximation is its finite
number of sweeps.  It starts from a Haar-random ``V`` (data-independent).
"""

from __future__ import annotations

import math

import numpy as np

from kngflow._jit import jit

__all__ = ["acg_b", "bingham_draws", "bingham_gibbs", "bingham_sphere", "bingham_vector", "haar_stiefel"]

#: bisection steps for KGM's ``b`` (halves ``[1, d]`` below 1e-15 relative for d <= 2^10)
_BISECT = 80


@jit
def acg_b(lam):
    """KGM's ``b``: the root in ``[1, d]`` of ``sum_i 1 / (b + 2 lam_i) = 1`` (``lam >= 0``, min 0)."""
    d = lam.shape[0]
    lo, hi = 1.0, float(d)
    for _ in range(_BISECT):
        mid = 0.5 * (lo + hi)
        s = 0.0
        for i in range(d):
            s += 1.0 / (mid + 2.0 * lam[i])
        if s > 1.0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


@jit
def _bingham_one(rng, lam, b, omega_sqrt, log_m, w, max_tries):
    """One exact draw from ``exp(-sum lam_i w_i^2)`` on the sphere into ``w``; returns the tries
    (``max_tries + 1`` if none was accepted)."""
    d = lam.shape[0]
    half_d = 0.5 * d
    for tries in range(1, max_tries + 1):
        nrm = 0.0
        for i in range(d):
            w[i] = rng.standard_normal() / omega_sqrt[i]
            nrm += w[i] * w[i]
        nrm = math.sqrt(nrm)
        t = 0.0
        for i in range(d):
            w[i] /= nrm
            t += lam[i] * w[i] * w[i]
        log_ratio = -t + half_d * math.log1p(2.0 * t / b) - log_m
        if math.log(rng.random()) < log_ratio:
            return tries
    return max_tries + 1


@jit
def _envelope(lam):
    d = lam.shape[0]
    b = acg_b(lam)
    omega_sqrt = np.empty(d)
    for i in range(d):
        omega_sqrt[i] = math.sqrt(1.0 + 2.0 * lam[i] / b)
    log_m = -(d - b) / 2.0 + 0.5 * d * math.log(d / b)
    return b, omega_sqrt, log_m


@jit
def bingham_draws(rng, lam, size, max_tries):
    """``size`` exact draws (rows) from the Bingham density ``exp(-sum_i lam_i w_i^2)`` on the
    unit sphere of ``R^d`` (``lam >= 0`` with minimum 0), and the total number of proposals.
    Raises if a draw needs more than ``max_tries`` proposals."""
    d = lam.shape[0]
    b, omega_sqrt, log_m = _envelope(lam)
    out = np.empty((size, d))
    w = np.empty(d)
    total = 0
    for s in range(size):
        tries = _bingham_one(rng, lam, b, omega_sqrt, log_m, w, max_tries)
        if tries > max_tries:
            raise RuntimeError("Bingham rejection sampler: no proposal accepted within max_tries")
        total += tries
        out[s, :] = w
    return out, total


@jit
def bingham_vector(rng, C, max_tries):
    """One exact draw ``x`` from ``∝ exp(x^T C x)`` on the unit sphere (``C`` symmetric, C-contiguous)
    and the number of proposals it took: :func:`bingham_sphere` for one draw, in one compiled call."""
    d = C.shape[0]
    c, Q = np.linalg.eigh(C)
    lam = np.empty(d)
    for i in range(d):
        lam[i] = c[d - 1] - c[i]
    lam[d - 1] = 0.0
    b, omega_sqrt, log_m = _envelope(lam)
    w = np.empty(d)
    tries = _bingham_one(rng, lam, b, omega_sqrt, log_m, w, max_tries)
    if tries > max_tries:
        raise RuntimeError("Bingham rejection sampler: no proposal accepted within max_tries")
    return Q @ w, tries


def bingham_sphere(C: np.ndarray, rng: np.random.Generator, size: int, max_tries: int = 1_000_000):
    """``size`` exact draws (rows) from the density ``∝ exp(x^T C x)`` on the unit sphere of ``R^d``
    (``C`` symmetric), and the number of proposals they took."""
    c, Q = np.linalg.eigh(np.asarray(C, dtype=np.float64))
    lam = np.ascontiguousarray(c[-1] - c)
    lam[-1] = 0.0
    w, tries = bingham_draws(rng, lam, int(size), int(max_tries))
    return w @ Q.T, int(tries)


@jit
def _complement(V, j):
    """Orthonormal basis (columns) of the orthogonal complement of the columns of ``V`` but ``j``.

    Gram–Schmidt (two passes) of ``e_1, e_2, ...`` against those columns and the basis kept so
    far, keeping residuals above 1e-6.  All ``m = d - k + 1`` are found: a unit ``u`` left in the
    complement would satisfy ``1 = u^T u = sum_e u_e (u^T r_e)`` with every ``|u^T r_e| < 1e-6``
    (kept ``e`` contribute 0), impossible for ``d < 10^12``.
    """
    d, k = V.shape
    m = d - k + 1
    N = np.zeros((d, m))
    r = np.empty(d)
    kept = 0
    for e in range(d):
        if kept == m:
            break
        for a in range(d):
            r[a] = 0.0
        r[e] = 1.0
        for _ in range(2):
            for l in range(k):
                if l == j:
                    continue
                s = 0.0
                for a in range(d):
                    s += V[a, l] * r[a]
                for a in range(d):
                    r[a] -= s * V[a, l]
            for q in range(kept):
                s = 0.0
                for a in range(d):
                    s += N[a, q] * r[a]
                for a in range(d):
                    r[a] -= s * N[a, q]
        nr = 0.0
        for a in range(d):
            nr += r[a] * r[a]
        nr = math.sqrt(nr)
        if nr > 1e-6:
            for a in range(d):
                N[a, kept] = r[a] / nr
            kept += 1
    return N


@jit
def bingham_gibbs(rng, C, V0, sweeps, max_tries):
    """Hoff's column-wise Gibbs sampler for ``exp(tr(V^T C V))`` on the Stiefel manifold, from
    ``V0`` (``d x k`` orthonormal), ``sweeps`` sweeps over the columns, each conditional drawn
    exactly (module docstring).  Returns the final ``V`` and the total number of proposals."""
    d, k = V0.shape
    V = V0.copy()
    m = d - k + 1
    w = np.empty(m)
    total = 0
    for _ in range(sweeps):
        for j in range(k):
            N = _complement(V, j)
            M = N.T @ C @ N
            M = 0.5 * (M + M.T)
            c, Q = np.linalg.eigh(M)
            lam = np.empty(m)
            for i in range(m):
                lam[i] = c[m - 1] - c[i]
            lam[m - 1] = 0.0
            b, omega_sqrt, log_m = _envelope(lam)
            tries = _bingham_one(rng, lam, b, omega_sqrt, log_m, w, max_tries)
            if tries > max_tries:
                raise RuntimeError("Bingham rejection sampler: no proposal accepted within max_tries")
            total += tries
            z = Q @ w
            v = N @ z
            nv = math.sqrt(np.sum(v * v))
            for a in range(d):
                V[a, j] = v[a] / nv
    return V, total


def haar_stiefel(d: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """A uniform (Haar) random ``d x k`` orthonormal matrix: QR of a Gaussian matrix, signs fixed."""
    q, r = np.linalg.qr(rng.standard_normal((d, k)))
    return np.ascontiguousarray(q * np.sign(np.diag(r)))

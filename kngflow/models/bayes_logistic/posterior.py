r"""The tempered posterior of Bayesian logistic regression on a ball, and its samplers (no privacy here).

The target (``t`` the temperature, ``s`` the prior scale, ``R`` the ball's radius)::

    f_t(theta)  ∝  exp(-U_t(theta)) 1{||theta||_2 <= R},
    U_t(theta)  =  ||theta||^2 / (2 s^2) + t sum_i rho(y_i x_i'theta),   rho(z) = log(1 + e^-z) = -log sigma(z),

``t = 1`` the posterior itself.  ``U_t`` is smooth and strictly convex on ``R^m``, with

    grad U_t(theta) = theta / s^2 - t sum_i y_i x_i sigma(-y_i x_i'theta),
    hess U_t(theta) = I / s^2 + t sum_i sigma'(x_i'theta) x_i x_i',   sigma' = sigma (1 - sigma).

The exact sampler: rejection from a Gaussian envelope (:func:`envelope`, :func:`rejection`)
---------------------------------------------------------------------------------------------
On the ball ``|x_i'theta| <= ||x_i||_2 R``, and ``sigma'`` is even and decreasing in ``|z|``,
so the Hessian has a floor that holds on all of ``Theta``:

    hess U_t(theta)  ⪰  A = I / s^2 + t sum_i sigma'(||x_i||_2 R) x_i x_i'      (||theta||_2 <= R).

For any ``m`` in the ball (``Theta`` is convex, so the segment from ``m`` to ``theta`` stays in
it), Taylor's theorem with the integral remainder gives, with ``g = grad U_t(m)``,

    U_t(theta)  >=  U_t(m) + g'(theta - m) + (theta - m)' A (theta - m) / 2.           (*)

The proposal is ``theta = c + k M z``, ``z ~ N(0, I)``, with ``M`` the lower Cholesky factor
of ``A^-1``, ``k = 1 + 2^-20`` (a margin: the proposal's precision ``Q = (k^2 M M')^-1``
must satisfy ``Q ⪯ A``, checked through the smallest singular value of ``k L' M``, ``L L' = A``)
and ``c ≈ m - A^-1 g``.  Replacing ``A`` by ``Q ⪯ A`` in (*) and completing the square,

    U_t(theta) - (theta - c)'Q(theta - c) / 2  >=  U_t(m) - g'm - (c - m)'Q(m + c) / 2 + v'theta,
    v = g + Q(c - m),

an affine function of ``theta`` whose minimum over the ball is at ``-R v / ||v||``: so

    K0 = U_t(m) - g'm - (c - m)'Q(m + c) / 2 - R ||v||_2

bounds ``U_t(theta) - ||z||^2 / 2`` from below on ``Theta`` whatever ``c`` and ``m`` are (``v = 0``
when ``c = m - Q^-1 g`` exactly; the term ``R ||v||`` pays for an inexact centre), and
``f_t(theta) <= exp(-K0) exp(-||z||^2 / 2)``: the envelope is the proposal's density times a
constant.  A proposal outside the ball is rejected; one inside is accepted with probability
``exp(-U_t(theta) + ||z||^2 / 2 + K0) <= 1``.  Accepted draws have the law ``f_t`` exactly
(``Q`` is computed as ``A / k^2``, and ``K0`` is lowered by a margin of
``8 (n + m) u (|U_t(m)| + |g'm| + |(c - m)'Q(m + c)| / 2 + 1)`` for the rounding of ``U_t``: the
sampler's decisions are modelled as those of exact arithmetic, as everywhere in the package).

Its acceptance rate is ``Z_f / Z_envelope``, about ``sqrt(det A / det hess U_t(mode))`` when
the mode is inside the ball and the likelihood dominates the prior: the ratio of
``sigma'(||x_i|| R)`` to ``sigma'(x_i' theta_mode)``, per dimension.  With ``R = 4`` on the
unit ℓ2 ball and Algorithm 3's design in two dimensions it is 0.4–0.9 at every ``n`` and ``t``
of the study (the curvature floor scales with the data as the Hessian does); it falls with
``R ||x||`` (0.13 at ``R = 6``, 0.06 at ``R = 8``, ``n = 10^4``): ``sigma'(8) / sigma'(0) = 1.3e-3``.  ``m`` is the minimiser of
``U_t`` on ``R^m`` by Newton's method (:func:`mode`), pulled onto the ball when it lies
outside (any ``m`` in the ball is valid; a good one only raises the acceptance rate).
Every try costs one ``U_t``, ``O(n m)``.

The Metropolis fallback (:func:`energy`)
-----------------------------------------
The same law as ``exp(-energy(theta))`` against the Gaussian base ``N(0, s^2 I)``:
``energy = t sum_i rho(y_i x_i'theta)`` inside the ball and ``+inf`` outside, for the
package's one random-walk Metropolis kernel (:func:`kngflow.kernels.generic.metropolis_chains`:
the chain starts at 0, data independent, adapts its scales in the first half and is a
time-homogeneous Metropolis chain with ``f_t`` as its stationary law in the second).  A
chain of finitely many steps is not an exact draw.

The non-private posterior mean (:func:`envelope_weights`)
---------------------------------------------------------
Self-normalised importance sampling from the same envelope: ``K`` proposals ``theta_k`` with
weights ``w_k = exp(-U_1(theta_k) + ||z_k||^2 / 2 + K0) 1{theta_k in Theta}`` (the acceptance
probabilities), and ``sum w_k theta_k / sum w_k``.  Consistent as ``K`` grows, with bias
``O(1 / K)`` and Monte Carlo error about ``sd / sqrt(ESS)``, ``ESS = (sum w)^2 / sum w^2``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from kngflow._jit import jit
from kngflow.kernels.dd import UNIT, affine_dd
from kngflow.problems.linear_terms import add_outer_lower, mirror_lower, row_dot

__all__ = ["Envelope", "potential", "potential_terms", "curvature_floor", "mode", "envelope", "rejection",
           "envelope_weights", "energy", "ENVELOPE_MARGIN", "log_density"]

#: ``k = 1 + 2^-20``: the proposal's covariance is ``k^2 A^-1`` (module docstring)
ENVELOPE_MARGIN = 1.0 + 2.0**-20


@jit
def _rho(z):
    """``log(1 + e^-z) = -log sigma(z)``, without overflow."""
    if z > 0.0:
        return math.log1p(math.exp(-z))
    return -z + math.log1p(math.exp(z))


@jit
def potential(theta, X, y, t, inv_s2):
    """``U_t(theta) = ||theta||^2 inv_s2 / 2 + t sum_i rho(y_i x_i'theta)`` in ``O(n m)``."""
    n, m = X.shape
    q = 0.0
    for j in range(m):
        q += theta[j] * theta[j]
    s = 0.0
    for i in range(n):
        s += _rho(y[i] * row_dot(X, i, theta))
    return 0.5 * inv_s2 * q + t * s


@jit
def potential_terms(theta, X, y, t, inv_s2, g, H):
    """``U_t(theta)``, with its gradient into ``g`` (m,) and Hessian into ``H`` (m, m)."""
    n, m = X.shape
    for a in range(m):
        g[a] = inv_s2 * theta[a]
        for b in range(m):
            H[a, b] = inv_s2 if a == b else 0.0
    q = 0.0
    for j in range(m):
        q += theta[j] * theta[j]
    s = 0.0
    for i in range(n):
        yz = y[i] * row_dot(X, i, theta)
        s += _rho(yz)
        e = math.exp(-abs(yz))
        w = t * e / ((1.0 + e) * (1.0 + e))  # t sigma'(z)
        r = (1.0 / (1.0 + e) if yz < 0.0 else e / (1.0 + e)) * t * y[i]  # t y sigma(-y z)
        for a in range(m):
            g[a] -= r * X[i, a]
        add_outer_lower(H, X, i, w)
    mirror_lower(H)
    return 0.5 * inv_s2 * q + t * s


@jit
def curvature_floor(X, t, inv_s2, R, A):
    """``A = inv_s2 I + t sum_i sigma'(||x_i||_2 R) x_i x_i'`` (module docstring) into ``A``."""
    n, m = X.shape
    for a in range(m):
        for b in range(m):
            A[a, b] = inv_s2 if a == b else 0.0
    for i in range(n):
        e = math.exp(-math.sqrt(row_dot(X, i, X[i])) * R)
        add_outer_lower(A, X, i, t * e / ((1.0 + e) * (1.0 + e)))
    mirror_lower(A)


def mode(X, y, t: float, inv_s2: float, *, tol: float = 1e-15, max_iter: int = 100) -> tuple[np.ndarray, int]:
    """The minimiser of ``U_t`` on ``R^m`` by Newton's method with step halving from 0:
    ``(theta, iterations)``.  Stops when the Newton decrement ``g'H^-1 g`` is below
    ``tol (1 + |U_t|)``; ``U_t`` is ``inv_s2``-strongly convex, so it converges.  Once the
    decrement is below ``1e-8 (1 + |U_t|)`` full steps are taken (the decrease is then at the
    rounding of ``U_t``, which the step-halving test cannot see)."""
    m = X.shape[1]
    theta = np.zeros(m)
    g = np.empty(m)
    H = np.empty((m, m))
    u = potential_terms(theta, X, y, t, inv_s2, g, H)
    it = 0
    for it in range(1, max_iter + 1):
        step = np.linalg.solve(H, g)
        dec = float(g @ step)
        if not (np.all(np.isfinite(step)) and dec > tol * (1.0 + abs(u))):
            break
        if dec < 1e-8 * (1.0 + abs(u)):  # near the minimum U moves by its rounding: take the full step
            theta = theta - step
        else:
            a = 1.0
            while a > 1e-12:
                new = theta - a * step
                if potential(new, X, y, t, inv_s2) <= u:
                    break
                a /= 2.0
            else:
                break
            theta = new
        u = potential_terms(theta, X, y, t, inv_s2, g, H)
    return theta, it


class Envelope(NamedTuple):
    """The Gaussian envelope of :func:`envelope`: proposals ``c + k M z``, the bound ``K0``;
    ``m`` the expansion point, ``iterations`` Newton's, ``ok`` whether ``Q ⪯ A`` was verified."""

    c: np.ndarray
    M: np.ndarray
    k: float
    K0: float
    m: np.ndarray
    iterations: int
    ok: bool


def envelope(X, y, t: float, inv_s2: float, R: float) -> Envelope:
    """The envelope of the rejection sampler for ``f_t`` on ``{||theta||_2 <= R}`` (module docstring).

    ``ok`` is False when the factorisations fail or ``Q ⪯ A`` cannot be verified (then the
    envelope must not be used; the mechanisms fall back to the Metropolis chain)."""
    m_dim = X.shape[1]
    theta, it = mode(X, y, t, inv_s2)
    r = float(np.linalg.norm(theta))
    if not r <= R * (1.0 - 1e-6):  # pull the expansion point into the ball (any point of it is valid)
        theta = theta * (R * (1.0 - 1e-6) / r)
    g = np.empty(m_dim)
    H = np.empty((m_dim, m_dim))
    u_m = potential_terms(theta, X, y, t, inv_s2, g, H)
    A = np.empty((m_dim, m_dim))
    curvature_floor(X, t, inv_s2, R, A)
    k = ENVELOPE_MARGIN
    bad = Envelope(theta, np.eye(m_dim), k, -np.inf, theta, it, False)
    try:
        L = np.linalg.cholesky(A)
        M = np.ascontiguousarray(np.linalg.cholesky(np.linalg.inv(A)))
    except np.linalg.LinAlgError:
        return bad
    # Q = (k^2 M M')^-1 ⪯ A  <=>  every singular value of k L'M is >= 1 (checked with a margin)
    if not (np.all(np.isfinite(M)) and k * np.linalg.svd(L.T @ M, compute_uv=False).min() >= 1.0 + 2.0**-22):
        return bad
    c = theta - np.linalg.solve(A, g)
    Q = A / (k * k)
    v = g + Q @ (c - theta)
    quad = 0.5 * float((c - theta) @ Q @ (theta + c))
    gm = float(g @ theta)
    n = X.shape[0]
    margin = 8.0 * (n + m_dim) * UNIT * (abs(u_m) + abs(gm) + abs(quad) + 1.0)
    K0 = u_m - gm - quad - R * float(np.linalg.norm(v)) - margin
    ok = bool(np.isfinite(K0) and np.all(np.isfinite(c)))
    return Envelope(np.ascontiguousarray(c), M, k, K0, theta, it, ok)


@jit
def rejection(rng, X, y, t, inv_s2, R, c, M, k, K0, max_tries, z, vh, vl):
    """Rejection sampling from the envelope (module docstring): ``(tries, err)``.

    On acceptance the draw is ``vh + vl`` (double-double, :func:`~kngflow.kernels.dd.affine_dd`)
    with ``err`` a bound on its ℓ2 rounding; ``tries`` is negative (``-max_tries``) when
    none of ``max_tries`` proposals was accepted.  Each try draws ``m`` standard normals,
    and one uniform when the proposal lies in the ball and its log acceptance
    probability is negative."""
    m = c.shape[0]
    R2 = R * R
    for tries in range(1, max_tries + 1):
        zz = 0.0
        for j in range(m):
            z[j] = rng.standard_normal()
            zz += z[j] * z[j]
        err = affine_dd(c, M, z, k, vh, vl)
        r2 = 0.0
        for j in range(m):
            r2 += vh[j] * vh[j]
        if r2 > R2:
            continue
        logr = -potential(vh, X, y, t, inv_s2) + 0.5 * zz + K0
        if logr >= 0.0 or rng.random() < math.exp(logr):
            return tries, err
    return -max_tries, 0.0


@jit
def envelope_weights(rng, X, y, t, inv_s2, R, c, M, k, K0, thetas, logw):
    """``K = thetas.shape[0]`` proposals of the envelope into ``thetas`` and their log
    weights (log acceptance probabilities; ``-inf`` outside the ball) into ``logw``."""
    K, m = thetas.shape
    R2 = R * R
    z = np.empty(m)
    vh = np.empty(m)
    vl = np.empty(m)
    for q in range(K):
        zz = 0.0
        for j in range(m):
            z[j] = rng.standard_normal()
            zz += z[j] * z[j]
        affine_dd(c, M, z, k, vh, vl)
        r2 = 0.0
        for j in range(m):
            thetas[q, j] = vh[j]
            r2 += vh[j] * vh[j]
        if r2 > R2:
            logw[q] = -np.inf
        else:
            logw[q] = min(0.0, -potential(vh, X, y, t, inv_s2) + 0.5 * zz + K0)


@jit
def energy(theta, data):
    """``t sum_i rho(y_i x_i'theta)`` inside ``{||theta||_2^2 <= R2}``, ``+inf`` outside;
    ``data = (X, y, t, R2)``.  With the Gaussian base ``N(0, s^2 I)`` of the Metropolis
    kernel its law is ``f_t``."""
    X, y, t, R2 = data
    q = 0.0
    for j in range(theta.shape[0]):
        q += theta[j] * theta[j]
    if q > R2:
        return np.inf
    return potential(theta, X, y, t, 0.0)


def log_density(X, y, t: float, inv_s2: float, R: float, theta) -> np.ndarray:
    """``-U_t(theta)`` at the rows of ``theta`` (..., m), ``-inf`` outside the ball (vectorised
    numpy, for audits and tests on small data sets).  Repeated records are evaluated once and
    counted (the audits' data sets are a few distinct records, many times over)."""
    theta = np.asarray(theta, dtype=np.float64)
    flat = theta.reshape(-1, theta.shape[-1])
    out = np.empty(flat.shape[0])
    rows, counts = np.unique(np.column_stack([X, y]), axis=0, return_counts=True)
    X, y, counts = rows[:, :-1], rows[:, -1], counts.astype(np.float64)
    step = max(1, 4_000_000 // max(1, X.shape[0]))
    for a in range(0, flat.shape[0], step):
        T = flat[a:a + step]
        Z = (T @ X.T) * y  # (k, distinct records): y_i x_i'theta
        rho = np.logaddexp(0.0, -Z) @ counts
        q = (T * T).sum(axis=1)
        inside = q <= R * R
        out[a:a + step] = np.where(inside, -(0.5 * inv_s2 * q + t * rho), -np.inf)
    return out.reshape(theta.shape[:-1])

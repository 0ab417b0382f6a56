r"""Posterior computations for Bayesian linear regression with a NIG prior (no privacy here; the mechanisms call these).

All in the response's original units: ``G = X'X`` (d x d, ``G[0, 0] = n``), ``c = X'y``,
``yy = y'y``.

Conjugate posterior (:func:`nig_posterior`, :func:`student_summary`)
-------------------------------------------------------------------
With ``beta | sigma^2 ~ N(mu0, sigma^2 Lambda0^-1)``, ``sigma^2 ~ InvGamma(a0, b0)`` and the
Gaussian likelihood ``sigma^-n exp(-(yy - 2 beta'c + beta'G beta) / (2 sigma^2))``:

    Lambda_n = Lambda0 + G,   mu_n = Lambda_n^-1 (Lambda0 mu0 + c),
    a_n = a0 + n/2,           b_n = b0 + (yy + mu0'Lambda0 mu0 - mu_n'Lambda_n mu_n) / 2,

and ``beta_j`` is marginally Student t with ``2 a_n`` degrees of freedom, location
``mu_n[j]`` and scale ``sqrt(b_n / a_n (Lambda_n^-1)_jj)``: its mean and equal-tailed quantiles
are closed-form (``scipy.special.stdtrit``).  The bracket of ``b_n`` equals
``R + (mu_n - mu0)' Lambda0 (...)`` -type non-negative terms for exact statistics
(``R = yy - c'G^-1 c`` the residual sum of squares); for noisy ones it is clamped at 0.

Projection of a noisy ``X'X`` (:func:`project_statistics`, used by the naive posterior)
--------------------------------------------------------------------------------------
Entries are clamped to what the domain allows (``|G_0j|, |G_jk| <= n``, ``0 <= G_jj <= n``,
``|c_j| <= n y_bound``, ``0 <= yy <= n y_bound^2``); then, keeping ``G[0, 0] = n`` and the
first row exact as released, the Schur complement ``S = G_11 - g g' / n`` (the centred
scatter of the covariates; ``G`` is positive definite iff ``S`` is) is symmetrised and its
eigenvalues are raised to at least ``floor`` (the mechanism passes the Laplace scale of
the entries, a public number: an eigenvalue below the noise is indistinguishable from 0),
and ``G_11 = S + g g' / n``.

The noise-aware posterior (:func:`noise_aware_draws`, :func:`mixture_summary`)
-----------------------------------------------------------------------------
The release is ``T~ = T + L`` (Laplace noise of scale ``s_k`` on entry ``k``).  The latent
statistics are modelled exactly, given ``G``: for a design ``X`` with Gram matrix ``G``
(``n > d``), ``c = X'y ~ N(G beta, sigma^2 G)`` and the residual sum of squares
``R = yy - c'G^-1 c ~ sigma^2 chi^2_{n-d}``, independent — both depend on ``X`` through
``G`` alone, so this holds whatever the law of the covariates.  The covariates' law is
not modelled: ``G`` gets a flat prior on ``F``, the positive definite ``G`` with
``G[0, 0] = n`` and the domain's bounds (box: ``|G_0j|, |G_jk| <= n``, ``0 <= G_jj <= n``; ℓ2
ball: also ``sum_{j >= 1} G_jj <= n``); ``(c, yy)`` are truncated to the domain's bounds
(``|c_j| <= n y_bound``, ``yy <= n y_bound^2``).  So the joint law is

    p(beta, sigma^2, G, c, yy) ∝ NIG(beta, sigma^2) 1_F(G) N(c; G beta, sigma^2 G) Gamma(R; k, 2 sigma^2) 1_B(c, yy),

``k = (n - d) / 2``.  Integrating ``(beta, sigma^2)`` out (the Gaussian likelihood in
``(c, R)`` is the usual one, so the NIG evidence applies) leaves the collapsed density of
the latent statistics,

    log p(T) = -1/2 log|Lambda_n| - a_n log b_n - 1/2 log|G| + (k - 1) log R + const   on F x B, R > 0,

and the target ``p(T | T~) ∝ p(T) prod_k exp(-|T~_k - T_k| / s_k)``.  Given ``T`` the
posterior of ``beta_j`` is the conjugate Student t above, so

    p(beta_j | T~) = E[ t_{2 a_n}(beta_j; mu_n[j](T), scale_j(T)) | T~ ]:

a mixture of Student t laws over draws of ``T`` (Rao–Blackwellised: its mean is the mean of
the ``mu_n[j]``, its quantiles roots of the mixture CDF, :func:`mixture_summary`).

This is Bernstein & Sheldon's noise-aware inference (2018; for linear regression 2019)
with two changes, both exact rather than approximate: the conditional law of ``(c, R)``
given ``G`` replaces their central-limit normal approximation of the statistics' law, and
``(beta, sigma^2)`` is integrated out instead of being a block of the Gibbs sampler (a
block that mixes slowly where the noise dominates the sampling spread).

The sampler (:func:`noise_aware_draws`, kernel :func:`_chains`): Metropolis–Hastings on ``T``
(``d_T`` entries), each sweep

1. an independence proposal ``T' = T~ + L'`` (fresh Laplace noise of the release's scales):
   its density is the likelihood factor, so it is accepted with probability
   ``min(1, p(T') / p(T))`` — nearly always where ``p`` is flat on the noise's scale (large n);
2. one random-walk move per entry, ``T'_k = T_k + h_k N(0, 1)``, accepted with the target's
   ratio; ``h_k`` starts at ``s_k`` and is adapted towards acceptance 0.44 during the burn-in
   only (Robbins–Monro on ``log h_k``), then fixed.

Proposals outside ``F x B`` or with ``R <= 0`` have density 0 and are rejected.  Chains
start from the projected ``T~`` (a function of the release only; never the non-private
statistic), or where that is outside the support from the public point ``G = diag(n, n,
...)`` (box; ``n / p`` on the ball's diagonal), ``c = 0``, ``yy = n y_bound^2 / 2``.
``tests/models/bayes_linear`` checks the law against exact rejection sampling from the joint
prior (accept a prior draw of ``T`` with probability ``prod exp(-|T~_k - T_k| / s_k)``).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln, stdtr, stdtrit

from kngflow._jit import jit
from kngflow.kernels.newton import cholesky_logdet, forward_solve
from kngflow.models.bayes_linear.problem import augmented, t_layout

__all__ = ["nig_posterior", "student_summary", "project_statistics", "noise_aware_draws", "mixture_summary",
           "mixture_quantile", "collapsed_log_density", "support_start"]


def nig_posterior(G: np.ndarray, c: np.ndarray, yy: float, n: int, prior) -> tuple:
    """``(mu_n, Lambda_n, a_n, b_n)`` of the conjugate NIG posterior (module docstring); the
    bracket of ``b_n`` is clamped at 0 (it is non-negative for exact statistics)."""
    lam = prior.precision + G
    r = prior.precision @ prior.mu0 + c
    L = np.linalg.cholesky(lam)
    v = np.linalg.solve(L, r)
    mu = np.linalg.solve(L.T, v)
    bracket = yy + float(prior.mu0 @ prior.precision @ prior.mu0) - float(v @ v)
    return mu, lam, prior.a0 + n / 2.0, prior.b0 + max(bracket, 0.0) / 2.0


def student_summary(mu: np.ndarray, lam: np.ndarray, a: float, b: float, j: int,
                    level: float) -> tuple[float, float, float]:
    """``(mean, lower, upper)`` of ``beta_j``, Student t with ``2a`` degrees of freedom, location
    ``mu[j]``, scale ``sqrt(b / a (lam^-1)_jj)``."""
    scale = math.sqrt(b / a * np.linalg.inv(lam)[j, j])
    t = float(stdtrit(2.0 * a, (1.0 + level) / 2.0))
    return float(mu[j]), float(mu[j] - t * scale), float(mu[j] + t * scale)


def project_statistics(G: np.ndarray, c: np.ndarray, yy: float, n: int, y_bound: float,
                       floor: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Noisy ``(G, c, yy)`` clamped to the domain's bounds and ``G`` made positive definite (the
    Schur complement's eigenvalues raised to ``floor``; module docstring)."""
    n = float(n)
    G = (np.asarray(G, dtype=np.float64) + np.asarray(G, dtype=np.float64).T) / 2.0
    d = G.shape[0]
    G = np.clip(G, -n, n)
    G[0, 0] = n
    idx = np.arange(1, d)
    G[idx, idx] = np.clip(G[idx, idx], 0.0, n)
    g = G[0, 1:].copy()
    S = G[1:, 1:] - np.outer(g, g) / n
    w, V = np.linalg.eigh((S + S.T) / 2.0)
    S = (V * np.maximum(w, floor)) @ V.T
    G[1:, 1:] = S + np.outer(g, g) / n
    G[1:, 1:] = (G[1:, 1:] + G[1:, 1:].T) / 2.0
    c = np.clip(np.asarray(c, dtype=np.float64), -n * y_bound, n * y_bound)
    yy = float(min(max(yy, 0.0), n * y_bound * y_bound))
    return G, c, yy


# ----------------------------------------------------------------------------- the sampler
@jit
def _log_evidence(t, I, J, n, d, box, B, lam0, r0, m0, a0, b0, A, G, L, M, Lm, w, v, post, j):
    """``log p(T)`` of the collapsed model (module docstring), -inf outside the support.  With
    ``post[0] < 0`` on entry, also writes ``post = (mu_n[j], scale_j)`` for the state."""
    nf = float(n)
    dt = t.shape[0]
    A[0, 0] = nf
    trace = 0.0
    for k in range(dt):
        i, jj, x = I[k], J[k], t[k]
        if i == jj:
            top = nf * B * B if i == d else nf
            if not (0.0 <= x <= top):
                return -np.inf
            if i < d:
                trace += x
        else:
            top = nf * B if jj == d else nf
            if not (abs(x) <= top):
                return -np.inf
        A[i, jj] = x
        A[jj, i] = x
    if not box and trace > nf:
        return -np.inf
    for a in range(d):
        for b in range(d):
            G[a, b] = A[a, b]
            M[a, b] = A[a, b] + lam0[a, b]
    logdet_g = cholesky_logdet(G, L)
    if math.isnan(logdet_g):
        return -np.inf
    for a in range(d):
        v[a] = A[a, d]
    forward_solve(L, v, w)
    q = 0.0
    for a in range(d):
        q += w[a] * w[a]
    yy = A[d, d]
    R = yy - q
    if not R > 0.0:
        return -np.inf
    logdet_m = cholesky_logdet(M, Lm)
    if math.isnan(logdet_m):
        return -np.inf
    for a in range(d):
        v[a] = r0[a] + A[a, d]
    forward_solve(Lm, v, w)
    vv = 0.0
    for a in range(d):
        vv += w[a] * w[a]
    an = a0 + nf / 2.0
    bn = b0 + (yy + m0 - vv) / 2.0
    if not bn > 0.0:
        return -np.inf
    k_half = (nf - d) / 2.0
    if post[0] < 0.0:
        # mu_n = Lm^-T w (back substitution), (Lambda_n^-1)_jj = ||Lm^-1 e_j||^2
        for a in range(d - 1, -1, -1):
            s = w[a]
            for b in range(a + 1, d):
                s -= Lm[b, a] * v[b]
            v[a] = s / Lm[a, a]
        mu_j = v[j]
        for a in range(d):
            v[a] = 1.0 if a == j else 0.0
        forward_solve(Lm, v, w)
        diag = 0.0
        for a in range(d):
            diag += w[a] * w[a]
        post[0] = mu_j
        post[1] = math.sqrt(bn / an * diag)
    return -0.5 * logdet_m - an * math.log(bn) - 0.5 * logdet_g + (k_half - 1.0) * math.log(R)


@jit
def _chains(rng, t0, tn, sc, I, J, n, d, box, B, lam0, r0, m0, a0, b0, j, burn, per, chains, loc, scale, stats):
    """``chains`` chains of ``burn + per`` sweeps (module docstring); writes the kept states'
    ``(mu_n[j], scale_j)`` into ``loc``, ``scale`` (``chains * per``) and ``stats = (random-walk
    acceptance, independence acceptance)`` over the kept sweeps."""
    dt = t0.shape[0]
    A = np.zeros((d + 1, d + 1))
    G = np.zeros((d, d))
    L = np.zeros((d, d))
    M = np.zeros((d, d))
    Lm = np.zeros((d, d))
    w = np.zeros(d)
    v = np.zeros(d)
    post = np.zeros(2)
    t = np.empty(dt)
    tp = np.empty(dt)
    h = np.empty(dt)
    rw_acc = 0.0
    ind_acc = 0.0
    out = 0
    for c in range(chains):
        for k in range(dt):
            t[k] = t0[k]
            h[k] = sc[k]
        post[0] = 1.0
        ev = _log_evidence(t, I, J, n, d, box, B, lam0, r0, m0, a0, b0, A, G, L, M, Lm, w, v, post, j)
        nz = 0.0
        for k in range(dt):
            nz -= abs(tn[k] - t[k]) / sc[k]
        for sweep in range(burn + per):
            # 1. independence proposal from the noise's law around the release
            for k in range(dt):
                tp[k] = tn[k] + sc[k] * (rng.standard_exponential() - rng.standard_exponential())
            evp = _log_evidence(tp, I, J, n, d, box, B, lam0, r0, m0, a0, b0, A, G, L, M, Lm, w, v, post, j)
            u = rng.random()
            if evp > -np.inf and (ev == -np.inf or math.log(u) < evp - ev):
                for k in range(dt):
                    t[k] = tp[k]
                ev = evp
                nz = 0.0
                for k in range(dt):
                    nz -= abs(tn[k] - t[k]) / sc[k]
                if sweep >= burn:
                    ind_acc += 1.0
            # 2. one random-walk move per entry
            gain = 1.0 / (1.0 + sweep) ** 0.6
            for k in range(dt):
                old = t[k]
                t[k] = old + h[k] * rng.standard_normal()
                evp = _log_evidence(t, I, J, n, d, box, B, lam0, r0, m0, a0, b0, A, G, L, M, Lm, w, v, post, j)
                nzp = nz + (abs(tn[k] - old) - abs(tn[k] - t[k])) / sc[k]
                u = rng.random()
                acc = evp > -np.inf and (ev == -np.inf or math.log(u) < (evp + nzp) - (ev + nz))
                if acc:
                    ev = evp
                    nz = nzp
                else:
                    t[k] = old
                if sweep < burn:
                    h[k] *= math.exp(((1.0 if acc else 0.0) - 0.44) * gain)
                elif acc:
                    rw_acc += 1.0
            if sweep >= burn:
                post[0] = -1.0
                _log_evidence(t, I, J, n, d, box, B, lam0, r0, m0, a0, b0, A, G, L, M, Lm, w, v, post, j)
                loc[out] = post[0]
                scale[out] = post[1]
                out += 1
    stats[0] = rw_acc / max(1.0, float(chains * per * dt))
    stats[1] = ind_acc / max(1.0, float(chains * per))


def _setup(d: int, prior, data_norm: str):
    i, j = np.triu_indices(d + 1)
    I, J = np.ascontiguousarray(i[1:]), np.ascontiguousarray(j[1:])
    lam0 = np.ascontiguousarray(prior.precision, dtype=np.float64)
    r0 = lam0 @ prior.mu0
    m0 = float(prior.mu0 @ r0)
    return I, J, lam0, r0, m0, data_norm == "linf"


def collapsed_log_density(t: np.ndarray, n: int, d: int, y_bound: float, prior, data_norm: str = "linf",
                          coef: int = 1) -> tuple[float, float, float]:
    """``(log p(T), mu_n[coef], scale_coef)`` of the collapsed model at the latent statistic ``t``
    (original units, layout of :func:`~kngflow.models.bayes_linear.problem.t_layout`); ``-inf``
    (and NaN) outside the support.  For tests and diagnostics."""
    I, J, lam0, r0, m0, box = _setup(d, prior, data_norm)
    post = np.array([-1.0, np.nan])
    work = [np.zeros((d + 1, d + 1))] + [np.zeros((d, d)) for _ in range(4)] + [np.zeros(d), np.zeros(d)]
    lp = _log_evidence(np.ascontiguousarray(t, dtype=np.float64), I, J, int(n), d, box, float(y_bound), lam0, r0, m0,
                       float(prior.a0), float(prior.b0), *work, post, int(coef))
    return (float(lp), float(post[0]), float(post[1])) if lp > -np.inf else (-math.inf, math.nan, math.nan)


def support_start(t_noisy: np.ndarray, n: int, d: int, y_bound: float, prior, data_norm: str,
                  floor: float) -> np.ndarray:
    """The chains' start (module docstring): the projected release where it lies in the support,
    else the public point ``G = diag(n, n, ...)`` (``n / p`` on the ball), ``c = 0``, ``yy = n y_bound^2 / 2``."""
    A = augmented(t_noisy, n, d)
    G, c, yy = project_statistics(A[:d, :d], A[:d, d], A[d, d], n, y_bound, floor)
    L = np.linalg.cholesky(G)
    q = float(np.sum(np.linalg.solve(L, c) ** 2))
    A[:d, :d], A[:d, d], A[d, :d] = G, c, c
    A[d, d] = q + 0.5 * (n * y_bound * y_bound - q) if yy <= q else yy  # R > 0 (outside B if q is too large)
    i, j = t_layout(d)
    t = A[i, j].copy()
    if math.isfinite(collapsed_log_density(t, n, d, y_bound, prior, data_norm)[0]):
        return t
    A = np.zeros((d + 1, d + 1))
    A[0, 0] = n
    for k in range(1, d):
        A[k, k] = n if data_norm == "linf" else n / (d - 1)
    A[d, d] = n * y_bound * y_bound / 2.0
    return A[i, j].copy()


def noise_aware_draws(rng: np.random.Generator, t_noisy: np.ndarray, scales: np.ndarray, n: int, d: int,
                      y_bound: float, prior, data_norm: str, coef: int, *, burn_in: int, draws: int, chains: int = 1,
                      floor: float | None = None, start: np.ndarray | None = None) -> tuple:
    """``(loc, scale, dof, acceptance)``: the kept states' Student t laws of ``beta_coef``
    (``chains * ceil(draws / chains)`` of them, sharing ``dof = 2 a_n``) and the sampler's
    acceptance rates ``(random walk, independence)``; module docstring.

    ``t_noisy`` is the release in original units, ``scales`` the Laplace scale of each of its
    entries; ``floor`` (default the smallest scale) the eigenvalue floor of the start's
    projection; ``start`` overrides the start (tests).
    """
    t_noisy = np.ascontiguousarray(t_noisy, dtype=np.float64)
    scales = np.ascontiguousarray(scales, dtype=np.float64)
    I, J, lam0, r0, m0, box = _setup(d, prior, data_norm)
    if start is None:
        start = support_start(t_noisy, n, d, y_bound, prior, data_norm,
                              float(scales.min()) if floor is None else floor)
    per = -(-int(draws) // int(chains))
    loc, scale, stats = np.empty(per * chains), np.empty(per * chains), np.zeros(2)
    _chains(rng, np.ascontiguousarray(start, dtype=np.float64), t_noisy, scales, I, J, int(n), int(d), box,
            float(y_bound), lam0, r0, m0, float(prior.a0), float(prior.b0), int(coef), int(burn_in), per, int(chains),
            loc, scale, stats)
    return loc, scale, 2.0 * prior.a0 + n, (float(stats[0]), float(stats[1]))


def mixture_quantile(q: float, dof: float, loc: np.ndarray, scale: np.ndarray) -> float:
    """The ``q``-quantile of the equal-weight mixture of Student t laws ``t_dof(loc_m, scale_m)``.

    Safeguarded Newton on the mixture's CDF (its density is closed-form): the root lies
    between the components' own quantiles, which bracket it; each step shrinks the bracket,
    a Newton step that leaves it is replaced by bisection, and the iteration stops when a
    step moves less than ``1e-13`` relative (or the CDF is within ``1e-14`` of ``q``).  The
    start is the quantile of one Student t with the mixture's mean and variance.
    """
    tq = float(stdtrit(dof, q))
    lo = float(np.min(loc + scale * tq))
    hi = float(np.max(loc + scale * tq))
    if hi - lo <= 1e-15 * max(1.0, abs(lo)):
        return lo
    log_norm = gammaln((dof + 1.0) / 2.0) - gammaln(dof / 2.0) - 0.5 * math.log(dof * math.pi)
    x = float(np.mean(loc)) + tq * math.sqrt(float(np.mean(scale * scale) + np.var(loc)))
    x = min(max(x, lo), hi)
    for _ in range(200):
        z = (x - loc) / scale
        F = float(np.mean(stdtr(dof, z))) - q
        if abs(F) <= 1e-14:
            return x
        if F < 0.0:
            lo = x
        else:
            hi = x
        pdf = float(np.mean(np.exp(log_norm - (dof + 1.0) / 2.0 * np.log1p(z * z / dof)) / scale))
        step = F / pdf if pdf > 0.0 else math.inf
        xn = x - step
        if not lo < xn < hi:
            xn = 0.5 * (lo + hi)
        if abs(xn - x) <= 1e-13 * max(1.0, abs(x)) or hi - lo <= 1e-13 * max(1.0, abs(x)):
            return xn
        x = xn
    return x


def mixture_summary(dof: float, loc: np.ndarray, scale: np.ndarray, level: float) -> tuple[float, float, float]:
    """``(mean, lower, upper)`` of the mixture: the mean of the locations and the equal-tailed quantiles."""
    q = (1.0 - level) / 2.0
    return float(np.mean(loc)), mixture_quantile(q, dof, loc, scale), mixture_quantile(1.0 - q, dof, loc, scale)

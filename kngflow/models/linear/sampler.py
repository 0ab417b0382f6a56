"""Numba samplers for the linear-regression KNG and exponential-mechanism targets.

All targets live on ``Theta = {||theta||_1 <= B}`` and are written through the residual
``r = G theta - c`` (scaled sufficient statistics, see :mod:`kngflow.models.linear.problem`):

* ``KIND_KNG_L1 / KIND_KNG_L2 / KIND_KNG_LINF``: density ``exp(-a ||G theta - c||_K)``
  with ``a = epsilon / Delta_K`` (KNG: ``eps/(2 Delta) * ||2 (G theta - c)||``).
* ``KIND_EXP``: density ``exp(-a (theta'G theta - 2 c'theta))`` with
  ``a = epsilon / (2 (1+B)^2)`` — a Gaussian truncated to ``Theta``.

Three samplers, best first:

1. exact i.i.d. draws (:func:`kng_exact`, :func:`exp_exact`): KNG after the affine map
   ``u = G theta - c`` (constant Jacobian ``|det G|``) is K-norm noise with scale
   ``1/a`` restricted to the image of ``Theta``; draw ``u``, map back with ``G^{-1}``,
   keep it when ``||theta||_1 <= B``.  The exponential mechanism is
   ``N(G^{-1}c, G^{-1}/(2a))`` accepted inside the ball.  Exact, but the acceptance
   probability collapses at small ``n``; tries are bounded.
2. exact coordinate Gibbs (:func:`gibbs_chains`): along coordinate ``j`` the KNG
   exponent ``a ||r_{-j} + t G_j||_K`` is convex piecewise linear in ``t`` (ℓ∞: the
   upper envelope of ``2d`` lines; ℓ1: ``d`` kinks), so the conditional on
   ``|t| <= B - sum_{k != j} |theta_k|`` is piecewise exponential and drawn exactly by
   inversion; the exponential mechanism's conditional is a truncated normal.
3. one-at-a-time random-walk Metropolis (:func:`metropolis_chains`): the KNG paper's
   method; Gaussian proposals per coordinate whose scales adapt in burn-in only
   (batches of 25 sweeps toward acceptance 0.44), frozen afterwards.  The adaptation
   reads the data, so the chain's finite-step law is an approximation of the target.

The exact draws need ``G^{-1}``; the Gibbs and Metropolis kernels need no inverse and
accept a singular ``G`` (a coordinate with ``G[j, j] = 0`` has a flat or exponential
conditional), so mechanisms route singular or ill-conditioned data sets to them.

Every chain starts from ``theta = 0`` (data independent).  A "step" is one sweep over
all ``d`` coordinates; each coordinate update costs ``O(d)`` through the residual, so a
step is ``O(d^2)`` whatever ``n``.
"""

from __future__ import annotations

import math

import numpy as np

from kngflow._jit import jit
from kngflow.noise import draw_l1_into, draw_l2_into, draw_linf_into
from kngflow.kernels.piecewise import draw_seg, l1_chord, lattice_accept, log_seg_mass
from kngflow.kernels.metropolis import (
    LINEAR,
    accept,
    end_sweep,
    new_tuner,
    propose_coordinate,
    reset_tuner,
    run_chains,
    settle,
)
from kngflow.kernels.truncnorm import truncnorm

KIND_KNG_L1 = 0
KIND_KNG_L2 = 1
KIND_KNG_LINF = 2
KIND_EXP = 3

KNG_KINDS = {"l1": KIND_KNG_L1, "l2": KIND_KNG_L2, "linf": KIND_KNG_LINF}


@jit
def _norm(r, kind):
    s = 0.0
    if kind == KIND_KNG_L1:
        for i in range(r.shape[0]):
            s += abs(r[i])
    elif kind == KIND_KNG_L2:
        for i in range(r.shape[0]):
            s += r[i] * r[i]
        s = math.sqrt(s)
    else:
        for i in range(r.shape[0]):
            v = abs(r[i])
            if v > s:
                s = v
    return s


@jit
def _l1(x):
    s = 0.0
    for i in range(x.shape[0]):
        s += abs(x[i])
    return s


# --------------------------------------------------------------------------- exact


@jit
def kng_exact(rng, Ginv, c, scale, B, kind, max_tries, out, uout, factor):
    """Fill each row of ``out`` with an exact KNG draw; return total tries or -1.

    ``u`` ~ density ∝ exp(-||u||_K / scale) (``scale = 1/a``), ``theta = G^{-1}(c + u)``,
    accepted when ``||theta||_1 <= B``.  ``max_tries`` bounds the tries *per draw*;
    -1 means a draw exhausted them (the caller falls back to Gibbs).  The accepted
    draw's ``u`` (``z`` for ``KIND_EXP``) goes to the same row of ``uout`` (a hardened
    release refines and certifies the solve from it).  ``kind = KIND_EXP`` draws the exponential mechanism
    the same way: ``u = scale L z`` with ``z`` standard normal and ``L`` the Cholesky
    factor of ``G`` (``scale = 1/sqrt(2a)``), so that ``G^{-1}(c + u)`` is
    ``N(G^{-1}c, G^{-1}/(2a))``; a try computes it as ``G^{-1}c + scale L^{-T} z``
    (``G^{-1} L = L^{-T}``), with ``factor`` the upper-triangular ``L^{-T}``: half the
    work of a full solve.  ``factor`` is not read for the KNG kinds.
    """
    d = c.shape[0]
    u = np.empty(d)
    z = np.empty(d)
    v = np.empty(d)
    mean = np.zeros(d)
    if kind == KIND_EXP:
        for i in range(d):
            for k in range(d):
                mean[i] += Ginv[i, k] * c[k]
    total = 0
    for row in range(out.shape[0]):
        ok = False
        for _ in range(max_tries):
            total += 1
            if kind == KIND_KNG_L1:
                draw_l1_into(rng, scale, u)
            elif kind == KIND_KNG_L2:
                draw_l2_into(rng, scale, u)
            elif kind == KIND_KNG_LINF:
                draw_linf_into(rng, scale, u)
            l1 = 0.0
            if kind == KIND_EXP:
                for i in range(d):
                    z[i] = rng.standard_normal()
                for i in range(d):
                    t = 0.0
                    for k in range(i, d):
                        t += factor[i, k] * z[k]
                    t = mean[i] + scale * t
                    out[row, i] = t
                    l1 += abs(t)
            else:
                for i in range(d):
                    v[i] = c[i] + u[i]
                for i in range(d):
                    t = 0.0
                    for k in range(d):
                        t += Ginv[i, k] * v[k]
                    out[row, i] = t
                    l1 += abs(t)
            if l1 <= B:
                ok = True
                for i in range(d):
                    uout[row, i] = u[i] if kind != KIND_EXP else z[i]
                break
        if not ok:
            return -1
    return total


@jit
def exp_exact(rng, chol, mean, B, max_tries, out):
    """Exact exponential-mechanism draws: ``mean + chol z`` accepted in the ℓ1 ball.

    ``chol`` is the lower Cholesky factor of the covariance ``G^{-1}/(2a)``.
    Returns total tries, or -1 if one draw exhausted ``max_tries``.
    """
    d = mean.shape[0]
    z = np.empty(d)
    total = 0
    for row in range(out.shape[0]):
        ok = False
        for _ in range(max_tries):
            total += 1
            for i in range(d):
                z[i] = rng.standard_normal()
            l1 = 0.0
            for i in range(d):
                t = mean[i]
                for k in range(i + 1):
                    t += chol[i, k] * z[k]
                out[row, i] = t
                l1 += abs(t)
            if l1 <= B:
                ok = True
                break
        if not ok:
            return -1
    return total




@jit
def _pieces_linf(r0, g, L, t0s, f0s, slopes):
    """Upper envelope of the 2d lines ±(r0_i + t g_i) on [-L, L] (convex, piecewise linear).

    Walk from ``-L``: the active line is the maximum there (ties to the steeper); the
    next kink is the nearest crossing with a steeper line.  Fills piece starts,
    values at the starts and slopes; returns the number of pieces (<= 2d).
    """
    d = r0.shape[0]
    t = -L
    cur_s = 0.0
    cur_b = 0.0
    best = -np.inf
    for i in range(d):
        for sgn in (-1.0, 1.0):
            s = sgn * g[i]
            b = sgn * r0[i]
            v = s * t + b
            if v > best or (v == best and s > cur_s):
                best = v
                cur_s = s
                cur_b = b
    npieces = 0
    while True:
        t0s[npieces] = t
        f0s[npieces] = cur_s * t + cur_b
        slopes[npieces] = cur_s
        npieces += 1
        nxt_x = L
        nxt_s = cur_s
        nxt_b = cur_b
        found = False
        for i in range(d):
            for sgn in (-1.0, 1.0):
                s = sgn * g[i]
                if s > cur_s:
                    b = sgn * r0[i]
                    x = (cur_b - b) / (s - cur_s)
                    if x < t:
                        x = t
                    if x < nxt_x or (x == nxt_x and found and s > nxt_s):
                        nxt_x = x
                        nxt_s = s
                        nxt_b = b
                        found = True
        if not found or nxt_x >= L or npieces >= t0s.shape[0]:
            break
        t = nxt_x
        cur_s = nxt_s
        cur_b = nxt_b
    return npieces


@jit
def _pieces_l1(r0, g, L, t0s, f0s, slopes, kinks):
    """Pieces of f(t) = sum_i |r0_i + t g_i| on [-L, L]: kinks at -r0_i/g_i."""
    d = r0.shape[0]
    nk = 0
    for i in range(d):
        if g[i] != 0.0:
            x = -r0[i] / g[i]
            if -L < x < L:
                kinks[nk] = x
                nk += 1
    ks = np.sort(kinks[:nk])
    t = -L
    f = 0.0
    for i in range(d):
        f += abs(r0[i] + t * g[i])
    npieces = 0
    for k in range(nk + 1):
        t0s[npieces] = t
        f0s[npieces] = f
        # slope on (t, next), read off at the midpoint
        nxt = ks[k] if k < nk else L
        mid = 0.5 * (t + nxt)
        s = 0.0
        for i in range(d):
            if r0[i] + mid * g[i] >= 0.0:
                s += g[i]
            else:
                s -= g[i]
        slopes[npieces] = s
        npieces += 1
        f += s * (nxt - t)
        t = nxt
    return npieces


@jit
def _draw_piecewise(rng, a, L, t0s, f0s, slopes, npieces, logm):
    """Draw t on [-L, L] from exp(-a f(t)) given the pieces of convex piecewise-linear f."""
    mx = -np.inf
    for k in range(npieces):
        t1 = t0s[k + 1] if k + 1 < npieces else L
        logm[k] = -a * f0s[k] + log_seg_mass(a * slopes[k], t1 - t0s[k])
        if logm[k] > mx:
            mx = logm[k]
    tot = 0.0
    for k in range(npieces):
        logm[k] = math.exp(logm[k] - mx)
        tot += logm[k]
    u = rng.random() * tot
    k = 0
    acc = logm[0]
    while acc < u and k < npieces - 1:
        k += 1
        acc += logm[k]
    t1 = t0s[k + 1] if k + 1 < npieces else L
    return t0s[k] + draw_seg(rng, a * slopes[k], t1 - t0s[k])


@jit
def _exp_conditional(rng, gjj, rj, a, L):
    """Draw t on [-L, L] with density ∝ exp(-a (gjj t^2 + 2 rj t)) (``gjj >= 0``).

    A truncated normal ``N(-rj/gjj, 1/(2 a gjj))`` when ``gjj > 0`` and its mean and
    standard deviation are finite; otherwise (``G[j, j] = 0``: a singular ``G``, every
    ``x_ij = 0``; or ``gjj`` so small that the normal's parameters overflow) the
    quadratic term vanishes and the law is exponential with rate ``2 a rj`` on
    ``[-L, L]`` (uniform when ``rj = 0``), drawn exactly by inversion.
    """
    if gjj > 0.0:
        mu = -rj / gjj
        sd = 1.0 / math.sqrt(2.0 * a * gjj)
        if math.isfinite(mu) and math.isfinite(sd) and sd > 0.0:
            return truncnorm(rng, mu, sd, -L, L)
    return -L + draw_seg(rng, 2.0 * a * rj, 2.0 * L)


def gibbs_chains(rng, G, c, a, B, kind, steps, out, lattice=0.0):
    """Run ``out.shape[0]`` independent exact coordinate-Gibbs chains of ``steps`` sweeps.

    Each chain starts at ``theta = 0`` and writes its final state to a row of ``out``
    (the chain loop :func:`~kngflow.kernels.metropolis.run_chains`).
    ``kind`` is ``KIND_KNG_L1``, ``KIND_KNG_LINF`` or ``KIND_EXP`` (the ℓ2 conditional
    is not piecewise linear; ℓ2 KNG uses the exact or Metropolis samplers).  With
    ``lattice > 0`` (a power of two; hardened releases) the chains live on that lattice:
    each coordinate is drawn from the target's conditional restricted to the lattice
    points of its chord (in :func:`_gibbs_sweeps`), so every position is an exact sum
    and the chain targets the density restricted to the lattice.
    """
    d = c.shape[0]
    cap = 2 * d + 2
    state = (np.empty(d), new_tuner(d), G, c, float(a), float(B), int(kind), float(lattice), np.empty(d),
             np.empty(d), np.empty(cap), np.empty(cap), np.empty(cap), np.empty(cap), np.empty(d), np.zeros(1))
    run_chains(_gibbs_start, _gibbs_sweeps, rng, None, None, state, int(steps), out, np.empty(out.shape[0]))


@jit
def _gibbs_start(rng, f, g, state, ch):
    """A chain of :func:`gibbs_chains` starts at 0 (residual ``-c``, ℓ1 norm ``x[0] = 0``)."""
    theta, c, r, x = state[0], state[3], state[8], state[15]
    x[0] = 0.0
    for i in range(c.shape[0]):
        theta[i] = 0.0
        r[i] = -c[i]


@jit
def _conditional(rng, r0, G, j, a, L, kind, t0s, f0s, slopes, logm, kinks):
    """Draw ``t`` on ``[-L, L]`` from coordinate ``j``'s exact conditional (``r0``: the
    residual without coordinate ``j``)."""
    if kind == KIND_EXP:
        return _exp_conditional(rng, G[j, j], r0[j], a, L)
    if kind == KIND_KNG_LINF:
        npc = _pieces_linf(r0, G[j], L, t0s, f0s, slopes)
    else:
        npc = _pieces_l1(r0, G[j], L, t0s, f0s, slopes, kinks)
    return _draw_piecewise(rng, a, L, t0s, f0s, slopes, npc, logm)


@jit
def _shifted_norm(r0, g, t, kind):
    """``||r0 + t g||_K`` (ℓ1 or ℓ∞)."""
    s = 0.0
    for i in range(r0.shape[0]):
        v = abs(r0[i] + t * g[i])
        if kind == KIND_KNG_L1:
            s += v
        elif v > s:
            s = v
    return s


@jit
def _slope_bound(r0, G, j, L, kind):
    """A bound on ``|E'|`` on ``[-L, L]`` for coordinate ``j``'s conditional energy ``E``:
    ``||G_j||_1`` (ℓ1), ``max_i |G_ji|`` (ℓ∞), ``2 (|G_jj| L + |r0_j|)`` (the exponential
    mechanism's quadratic)."""
    if kind == KIND_EXP:
        return 2.0 * (abs(G[j, j]) * L + abs(r0[j]))
    slope = 0.0
    for i in range(G.shape[1]):
        if kind == KIND_KNG_L1:
            slope += abs(G[j, i])
        elif abs(G[j, i]) > slope:
            slope = abs(G[j, i])
    return slope


@jit
def _energy_step(r0, G, j, x, t, kind):
    """``E(x) - E(t)`` for coordinate ``j``'s conditional energy (without the rate)."""
    if kind == KIND_EXP:
        return (x - t) * (G[j, j] * (x + t) + 2.0 * r0[j])
    return _shifted_norm(r0, G[j], x, kind) - _shifted_norm(r0, G[j], t, kind)


@jit
def _gibbs_sweeps(rng, f, g, state, steps):
    """The sweeps of a chain of :func:`gibbs_chains`: each coordinate drawn from its exact conditional."""
    theta, tuner, G, c, a, B, kind, lattice, r, r0, t0s, f0s, slopes, logm, kinks, x = state
    d = c.shape[0]
    l1 = x[0]
    top = math.floor(B / lattice) if lattice > 0.0 else 0.0  # the lattice index of B
    half = 0.5 * lattice
    inverse = 1.0 / lattice if lattice > 0.0 else 0.0  # exact: a power of two
    for _ in range(steps):
        for j in range(d):
            tj = theta[j]
            L = l1_chord(B, l1, tj)
            for i in range(d):
                r0[i] = r[i] - tj * G[j, i]
            if lattice > 0.0:
                # a lattice point k lattice, |k| <= K, with probability ∝ the conditional density there:
                # rejection from the continuous conditional on [-(K + 1/2) lattice, (K + 1/2) lattice],
                # its draw t rounded to the nearest lattice point x and accepted with probability
                # exp(-a (E(x) - E(t)) - M), M = a S lattice / 2 >= a |E(x) - E(t)| (S: _slope_bound,
                # E(x) - E(t): _energy_step).  The accepted x has probability ∝ lattice exp(-a E(x) - M): the restriction of the
                # conditional to the lattice, exactly.  M is about 2^-47 of the conditional's
                # log-density range, so a rejection is rare.  K is exact, the positions being lattice points.
                K = top - (l1 - abs(tj)) / lattice
                t = 0.0
                if K > 0.0:
                    Lk = (2.0 * K + 1.0) * half  # exact: 2K + 1 < 2^53
                    bound = a * _slope_bound(r0, G, j, Lk, kind) * half * (1.0 + 2.0**-20)
                    accepted = False
                    while not accepted:
                        t = _conditional(rng, r0, G, j, a, Lk, kind, t0s, f0s, slopes, logm, kinks)
                        point = min(max(math.floor(t * inverse + 0.5), -K), K) * lattice
                        accepted = lattice_accept(rng, a * _energy_step(r0, G, j, point, t, kind) + bound)
                    t = point
            elif L == 0.0:
                t = 0.0
            else:
                t = _conditional(rng, r0, G, j, a, L, kind, t0s, f0s, slopes, logm, kinks)
            theta[j] = t
            l1 += abs(t) - abs(tj)
            for i in range(d):
                r[i] = r0[i] + t * G[j, i]


# --------------------------------------------------------------------------- Metropolis


def metropolis_chains(rng, G, c, a, B, kind, steps, out, acc_out, lattice=0.0):
    """Run ``out.shape[0]`` independent one-at-a-time random-walk Metropolis chains.

    ``steps`` sweeps per chain; the first half is burn-in, during which each
    coordinate's proposal scale is adapted every 25 sweeps toward acceptance 0.44
    (the shared kernel of :mod:`kngflow.kernels.metropolis` with its schedule
    :data:`~kngflow.kernels.metropolis.LINEAR`: gain 1, scales at most ``2 B``);
    scales are frozen afterwards, so the second half is a valid Metropolis chain.
    Final states go to ``out``; post-burn-in acceptance rates to ``acc_out``.  With
    ``lattice > 0`` (hardened releases) every step is a multiple of ``lattice``, so the
    positions are exact (:func:`~kngflow.kernels.metropolis.propose_coordinate`).
    """
    d = c.shape[0]
    state = (np.empty(d), new_tuner(d), G, c, float(a), float(B), int(kind), float(lattice), int(steps) // 2,
             np.empty(d), np.empty(d), np.zeros(2))
    run_chains(_metropolis_start, _metropolis_sweeps, rng, None, None, state, int(steps), out, acc_out)


@jit
def _metropolis_start(rng, f, g, state, ch):
    """A chain of :func:`metropolis_chains` starts at 0 with scales the conditionals' widths
    (``x`` holds its ℓ1 norm and its energy's norm)."""
    theta, tuner, G, c, a, B, kind, lattice, burn, r, rp, x = state
    sig = tuner[0]
    d = c.shape[0]
    x[0] = 0.0
    reset_tuner(tuner, 0.5 * B)
    for i in range(d):
        theta[i] = 0.0
        r[i] = -c[i]
        gmax = 0.0
        for k in range(d):
            if abs(G[i, k]) > gmax:
                gmax = abs(G[i, k])
        # initial scale: the conditional's width (a singular G can make it infinite)
        s0 = 0.5 * B
        if kind == KIND_EXP:
            if G[i, i] > 0.0:
                s0 = 1.0 / math.sqrt(2.0 * a * G[i, i])
        elif gmax > 0.0:
            s0 = 1.0 / (a * gmax)
        sig[i] = min(0.5 * B, s0)
    x[1] = _norm(r, kind) if kind != KIND_EXP else 0.0


@jit
def _metropolis_sweeps(rng, f, g, state, steps):
    """The sweeps of a chain of :func:`metropolis_chains`: each coordinate moved through the residual."""
    theta, tuner, G, c, a, B, kind, lattice, burn, r, rp, x = state
    sig = tuner[0]
    d = c.shape[0]
    l1 = x[0]
    e = x[1]
    for s in range(steps):
        for j in range(d):
            tj, delta, _, l1n, inside = propose_coordinate(rng, theta, j, sig[j], 0.0, l1, B, False, 0.0, lattice)
            ok = False
            en = e
            if inside:
                if kind == KIND_EXP:
                    de = a * (2.0 * delta * r[j] + delta * delta * G[j, j])
                else:
                    for i in range(d):
                        rp[i] = r[i] + delta * G[j, i]
                    en = _norm(rp, kind)
                    de = a * (en - e)
                ok = accept(rng, de)
            if ok:
                l1 = l1n
                if kind == KIND_EXP:
                    for i in range(d):
                        r[i] += delta * G[j, i]
                else:
                    for i in range(d):
                        r[i] = rp[i]
                    e = en
            settle(tuner, theta, j, tj, ok, s < burn)
        end_sweep(tuner, LINEAR, s, burn, B)

"""Banded Metropolis for quantile regression (:func:`qr_metropolis_chains`): the generic
kernel's chain (:mod:`kngflow.kernels.metropolis`) with the energy evaluated on a band of
residuals near zero (``O(band d)`` per proposal once the proposal scales are tuned), for
the KNG and exponential-mechanism targets of :mod:`kngflow.models.quantreg.gibbs`.
"""

from __future__ import annotations

import numpy as np

from kngflow._jit import jit
from kngflow.kernels.generic import norm_by_code
from kngflow.kernels.metropolis import (
    GENERIC,
    accept,
    base_measure,
    end_sweep,
    new_tuner,
    propose_coordinate,
    run_chains,
    settle,
    start_chain,
)
from kngflow.kernels.piecewise import TARGET_KNG
from kngflow.models.quantreg.gradients import qr_gradient, qr_loss

__all__ = ["qr_metropolis_chains"]

#: band half-width in units of the current proposal scales' sum (see qr_metropolis_chains)
BAND_WIDTH = 2.0


@jit
def _qr_rebuild(X, y, tau, theta, W, cap, target, idx, rb, out_g, out_h):
    """One ``O(n d)`` pass at ``theta``: the band ``{i : |r_i| <= W}`` and the energy parts.

    Band rows (at most ``cap``) go to ``idx``/``rb`` (their residuals); every other row
    adds its fixed-sign contribution to ``out_g`` (KNG: ``sum x_i (1{r_i <= 0} - tau)``)
    or, for the exponential target, to ``out_h`` (``sum (tau - 1{r_i <= 0}) x_i``) and to
    the returned constant ``c0 = sum rho(r_i)``.  Returns ``(m, c0)``; ``m = -1`` when more
    than ``cap`` rows fall in the band: the band is dropped and every row is then in the
    out-of-band parts (exact at ``theta`` only).
    """
    n, d = X.shape
    kng = target == TARGET_KNG
    for k in range(d):
        out_g[k] = 0.0
        out_h[k] = 0.0
    c0 = 0.0
    m = 0
    for i in range(n):
        r = y[i]
        for k in range(d):
            r -= X[i, k] * theta[k]
        if abs(r) <= W and m < cap:
            idx[m] = i
            rb[m] = r
            m += 1
            continue
        neg = r <= 0.0
        if kng:
            w = (1.0 - tau) if neg else -tau
            for k in range(d):
                out_g[k] += w * X[i, k]
        else:
            w = (tau - 1.0) if neg else tau
            c0 += w * r
            for k in range(d):
                out_h[k] += w * X[i, k]
    if m == cap and cap < n:  # the band may have overflowed: count it, drop it if so
        over = False
        for i in range(idx[cap - 1] + 1, n):
            r = y[i]
            for k in range(d):
                r -= X[i, k] * theta[k]
            if abs(r) <= W:
                over = True
                break
        if over:
            for q in range(m):
                i = idx[q]
                r = rb[q]
                neg = r <= 0.0
                if kng:
                    w = (1.0 - tau) if neg else -tau
                    for k in range(d):
                        out_g[k] += w * X[i, k]
                else:
                    w = (tau - 1.0) if neg else tau
                    c0 += w * r
                    for k in range(d):
                        out_h[k] += w * X[i, k]
            m = -1
    return m, c0


@jit
def _qr_band_energy(X, tau, a, target, code, idx, rb, m, j, delta, rs, g, out_g, out_h, c0, dref):
    """Energy with coordinate ``j`` moved by ``delta`` from the band's current state.

    Band residuals ``rb[:m]`` are the current ones; the moved ones go to ``rs``.
    ``dref = theta' - theta_ref`` (d,) for the exponential target's linear part.
    """
    d = X.shape[1]
    if target == TARGET_KNG:
        for k in range(d):
            g[k] = out_g[k]
        for q in range(m):
            i = idx[q]
            r = rb[q] - X[i, j] * delta
            rs[q] = r
            w = (1.0 - tau) if r <= 0.0 else -tau
            for k in range(d):
                g[k] += w * X[i, k]
        return a * norm_by_code(g, code)
    s = c0
    for k in range(d):
        s -= out_h[k] * dref[k]
    for q in range(m):
        r = rb[q] - X[idx[q], j] * delta
        rs[q] = r
        s += r * (tau - 1.0) if r <= 0.0 else r * tau
    return a * s


@jit
def _qr_full_energy(X, tau, a, target, code, g, out_g, c0):
    """Energy from a rebuild pass that dropped its band (all rows out of band, at ``theta``)."""
    if target == TARGET_KNG:
        for k in range(X.shape[1]):
            g[k] = out_g[k]
        return a * norm_by_code(g, code)
    return a * c0


@jit
def _qr_build(X, y, tau, a, target, code, theta, W, cap, o, idx, rb, out_g, out_h, ms, c0s, Ws, ref, rs, g, dref):
    """Rebuild band buffer ``o`` at ``theta`` with half-width ``W``; return the energy there."""
    m, c0 = _qr_rebuild(X, y, tau, theta, W, cap, target, idx[o], rb[o], out_g[o], out_h[o])
    ms[o] = m
    c0s[o] = c0
    Ws[o] = W
    ref[o, :] = theta
    if m < 0:
        return _qr_full_energy(X, tau, a, target, code, g, out_g[o], c0)
    dref[:] = 0.0
    return _qr_band_energy(X, tau, a, target, code, idx[o], rb[o], m, 0, 0.0, rs, g, out_g[o], out_h[o], c0, dref)


def qr_metropolis_chains(rng, X, y, tau, a, center, B, base_scale, target, code, steps, out, acc_out, lattice=0.0):
    """The generic random-walk Metropolis kernel for quantile regression, on a residual band.

    Same chain, draw for draw, as :func:`kngflow.kernels.generic.metropolis_chains` with
    the energy ``a ||g||_K`` (``target`` KNG) or ``a l_n`` (exponential): same start,
    proposals, tuning and acceptance tests (the shared kernel of
    :mod:`kngflow.kernels.metropolis`, schedule :data:`~kngflow.kernels.metropolis.GENERIC`);
    only the energy is evaluated faster (equal up to floating-point rounding).  Rows whose residual at a reference point ``theta_ref``
    exceeds ``W`` in absolute value keep their sign while ``||theta - theta_ref||_1 < W``
    (``|x_ij| <= 1``), so their part of ``g`` is constant and their part of ``l_n`` is
    linear in ``theta``; only the band ``|r_i(theta_ref)| <= W`` is revisited per proposal
    (``O(|band| d)``).  ``W = BAND_WIDTH * sum_j sigma_j`` is set from the proposal scales
    when the band is rebuilt: at a proposal leaving the ball (one ``O(n d)`` pass, which is
    also that proposal's energy), and at burn-in batch ends when the scales have shrunk
    fourfold.  A band of more than ``n / 4`` rows is not kept (full passes instead).
    Uniform ℓ1-ball base (``base_scale <= 0``) or Gaussian base, as the generic kernel.
    ``lattice > 0`` (hardened releases): every step a multiple of it, so the positions are
    exact (:func:`~kngflow.kernels.metropolis.propose_coordinate`).
    """
    n, d = X.shape
    cap = max(n // 4, 1)
    state = (np.empty(d), new_tuner(d), X, y, float(tau), float(a), np.asarray(center, dtype=np.float64),
             float(B), base_measure(B, base_scale), int(target), int(code), float(lattice), int(steps) // 2, cap,
             np.empty((2, cap), dtype=np.int64), np.empty((2, cap)), np.empty(cap), np.empty((2, d)),
             np.empty((2, d)), np.empty((2, d)), np.zeros(2), np.zeros(2, dtype=np.int64), np.zeros(2),
             np.empty(d), np.empty(d), np.zeros(2), np.zeros(1, dtype=np.int64))
    run_chains(_metropolis_start, _metropolis_sweeps, rng, None, None, state, int(steps), out, acc_out)


@jit
def _metropolis_start(rng, f, g_, state, ch):
    """A chain of :func:`qr_metropolis_chains` starts at ``center`` with band buffer 0 built
    there (``x`` holds its energy and ℓ1 distance, ``cur[0]`` the current buffer)."""
    (theta, tuner, X, y, tau, a, center, B, base, target, code, lattice, burn, cap,
     idx, rb, rs, out_g, out_h, ref, c0s, ms, Ws, dref, g, x, cur) = state
    sig = tuner[0]
    start_chain(theta, center, tuner, 0.5 * base[1])
    cur[0] = 0
    x[0] = _qr_build(X, y, tau, a, target, code, theta, BAND_WIDTH * sig.sum(), cap, 0,
                     idx, rb, out_g, out_h, ms, c0s, Ws, ref, rs, g, dref)
    x[1] = 0.0


@jit
def _metropolis_sweeps(rng, f, g_, state, steps):
    """The sweeps of a chain of :func:`qr_metropolis_chains`."""
    (theta, tuner, X, y, tau, a, center, B, base, target, code, lattice, burn, cap,
     idx, rb, rs, out_g, out_h, ref, c0s, ms, Ws, dref, g, x, cur_) = state
    gauss, radius, inv2s2 = base
    sig = tuner[0]
    d = theta.shape[0]
    args = (X, y, tau)
    e = x[0]
    l1 = x[1]
    cur = cur_[0]
    for s in range(steps):
        for j in range(d):
            tj, _, dbase, l1n, inside = propose_coordinate(rng, theta, j, sig[j], center[j], l1, B, gauss, inv2s2,
                                                           lattice)
            ok = False
            if inside:
                dist = 0.0
                for k in range(d):
                    dref[k] = theta[k] - ref[cur, k]
                    dist += abs(dref[k])
                inband = ms[cur] >= 0 and dist < Ws[cur]
                if ms[cur] < 0:  # no band (too many rows near zero): a plain pass
                    if target == TARGET_KNG:
                        qr_gradient(theta, args, g)
                        en = a * norm_by_code(g, code)
                    else:
                        en = a * qr_loss(theta, args)
                elif inband:
                    en = _qr_band_energy(X, tau, a, target, code, idx[cur], rb[cur], ms[cur], j, theta[j] - tj, rs,
                                         g, out_g[cur], out_h[cur], c0s[cur], dref)
                else:  # rebuild at the proposal into the other buffer
                    en = _qr_build(X, y, tau, a, target, code, theta, BAND_WIDTH * sig.sum(), cap, 1 - cur,
                                   idx, rb, out_g, out_h, ms, c0s, Ws, ref, rs, g, dref)
                ok = accept(rng, en - e + dbase)
                if ok:
                    e = en
                    l1 = l1n
                    if inband:
                        m = ms[cur]
                        rb[cur, :m] = rs[:m]
                    elif ms[cur] >= 0:
                        cur = 1 - cur
            settle(tuner, theta, j, tj, ok, s < burn)
        if end_sweep(tuner, GENERIC, s, burn, radius):
            W = BAND_WIDTH * sig.sum()
            if ms[cur] < 0 or Ws[cur] > 4.0 * W:  # scales shrank: a narrower band
                cur = 1 - cur
                _qr_build(X, y, tau, a, target, code, theta, W, cap, cur, idx, rb, out_g, out_h, ms, c0s, Ws,
                          ref, rs, g, dref)

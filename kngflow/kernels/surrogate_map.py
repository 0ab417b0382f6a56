"""The surrogate map: KNG whose gradient is not smooth, proposing through a smooth surrogate.

KNG's density ``f(theta) ∝ exp(-a ||grad L(theta)||_K) base(theta)`` needs no smooth
gradient, but the gradient map (:mod:`kngflow.kernels.gradient_map`) does: it inverts
``grad L`` by Newton's method and weighs each root by ``det H``.  Where the gradient is
piecewise constant (quantile regression, the SVM's hinge), :func:`surrogate_map_chain`
takes the map of a smooth, strictly convex surrogate of the loss instead, frozen at its
minimiser (one Newton solve per call, :mod:`kngflow.kernels.newton`), as a fixed
independence-Metropolis proposal, mixed with the base measure
(:mod:`kngflow.kernels.map_proposals`), and accepts on the exact density.  A fixed
proposal leaves ``f`` invariant whatever the surrogate is; the surrogate only sets the
acceptance rate.
"""

from __future__ import annotations

import math

import numpy as np

from kngflow._jit import jit
from kngflow.kernels.generic import norm_by_code
from kngflow.kernels.map_proposals import (BASE_SHARE, _draw_base_dd, _draw_u, _log_base_normaliser,
                                           _log_knorm_normaliser)
from kngflow.kernels.newton import _chol_solve, _inf_norm, _solve, cholesky_logdet

__all__ = ["surrogate_map_chain", "SURROGATE_TEMPER", "SURROGATE_REFINE"]

#: the surrogate map's proposal rate, as a fraction of the target's: a wider proposal, so
#: that the target-to-proposal ratio stays bounded where the gradient departs from its
#: linearisation (piecewise-constant gradients jump by one row's term at a time)
SURROGATE_TEMPER = 0.75
#: chord steps on the exact gradient that move the proposal's centre from the surrogate's
#: minimiser to where the exact gradient is near zero
SURROGATE_REFINE = 5


@jit
def surrogate_map_chain(gradient, s_gradient, s_hessian, rng, args, sargs, a, code, center, B, base_scale, proposals,
                        max_iter, out, acc_out, steps_out, route_out, u_out, lo_out, fit_out):
    """Independence-Metropolis steps for KNG whose gradient is not smooth, proposing through a
    smooth surrogate's gradient map frozen at its minimiser, from the states in ``out``.

    The target is KNG's ``f(theta) ∝ exp(-a ||gradient(theta)||_K) base(theta)`` with the
    exact (e.g. piecewise-constant) ``gradient(theta, args, g)``.  A smooth, strictly convex
    surrogate of the loss (``s_gradient(theta, sargs, g)``, ``s_hessian(theta, sargs, H)``)
    gives, once per call (deterministic, no random numbers):

    1. ``theta_s``: the surrogate's minimiser, by the Newton solve of ``s_gradient = 0`` started
       at the data-independent ``center``; ``M``: the surrogate Hessian there;
    2. ``theta_c``: :data:`SURROGATE_REFINE` chord steps ``theta <- theta - M^-1 gradient(theta)``
       on the exact gradient from ``theta_s`` (the surrogate's minimiser is off the exact
       gradient's zero by its smoothing bias, which at large ``n`` exceeds the target's spread).

    Near ``theta_c`` the exact gradient is ``M (theta - theta_c)`` up to the jumps of a few
    rows, so the law of ``u = M (theta - theta_c)`` is close to K-norm noise of rate ``a``.
    The proposal law ``q`` is a mixture: with probability :data:`BASE_SHARE` a draw of the
    base measure ``pi_0`` (uniform on ``Theta``, or the Gaussian base), otherwise
    ``theta' = theta_c + M^-1 u`` with ``u`` drawn exactly as K-norm noise of rate
    ``a' = SURROGATE_TEMPER a`` (a little wider than the target), of density
    ``det M a'^d / (d! vol K) exp(-a' ||M (theta' - theta_c)||_K)``.  A proposal is accepted
    with probability ``min(1, w(theta') / w(theta))``, ``w = f / q``::

        log w(theta) = log base(theta) - a ||gradient(theta)||_K - log q(theta),

    and rejected outside ``Theta``.  This is independence Metropolis with a fixed proposal,
    so it leaves ``f`` invariant whatever ``theta_c`` and ``M`` are (they only set the
    acceptance rate; both depend on the data, as the gradient map's Newton solves do).  The
    base component keeps ``w`` small wherever the surrogate's proposal has no mass, so a
    state far from the mode is left at the first proposal near it.

    Each row of ``out`` (in ``Theta``; the end of a random-walk Metropolis chain in
    :class:`~kngflow.mechanisms.generic.GenericKNG`) is the start of one chain and is
    replaced by its state after ``proposals`` proposals; the schedule is data independent.
    Cost: ``O(n d^2)`` per surrogate Newton iteration once per call, then one exact gradient
    (``O(n d)``) per proposal; the chains share the fit.

    Returns 0, or -1 (``out`` unchanged) when the surrogate's Hessian at ``center`` or its
    Newton solve fails.  ``acc_out[ch]``: the fraction of proposals accepted;
    ``steps_out[ch]``: ``proposals``.  For the rounding bound of a hardened release (not
    private, like every diagnostic): ``route_out[ch]`` says where the final state came from
    (0: the start, 1: the map, 2: the base measure), ``u_out[ch]`` the noise ``u`` a map
    state was computed from (``theta = theta_c + M^-1 u``), and ``fit_out`` holds ``L``, the
    Cholesky factor of ``M``, in its first ``d`` columns and ``theta_c`` in the last.
    """
    d = center.shape[0]
    gauss = base_scale > 0.0
    inv2s2 = 0.5 / (base_scale * base_scale) if gauss else 0.0
    u = np.zeros(d)
    xc = np.empty(d)
    L = np.empty((d, d))
    H = np.empty((d, d))
    g = np.empty(d)
    r = np.empty(d)
    step = np.empty(d)
    xn = np.empty(d)
    rn = np.empty(d)
    for i in range(d):
        xc[i] = center[i]
    s_hessian(xc, sargs, H)
    if math.isnan(cholesky_logdet(H, L)):
        return -1
    logdet = _solve(s_gradient, s_hessian, sargs, u, xc, L, H, g, r, step, xn, rn, max_iter, center, math.inf)
    if math.isnan(logdet):
        return -1
    for _ in range(SURROGATE_REFINE):  # L is the factor of M (the Hessian at the minimiser)
        gradient(xc, args, g)
        _chol_solve(L, g, step)
        if not math.isfinite(_inf_norm(step)):
            return -1
        for i in range(d):
            xc[i] += step[i]
    for i in range(d):
        for k in range(d):
            fit_out[i, k] = L[i, k]
        fit_out[i, d] = xc[i]
    ap = SURROGATE_TEMPER * a
    log_map = math.log(1.0 - BASE_SHARE) + logdet + _log_knorm_normaliser(code, d, ap)
    log_base = math.log(BASE_SHARE) + _log_base_normaliser(d, B, base_scale)
    theta = np.empty(d)
    prop = np.empty(d)
    plo = np.zeros(d)
    minus_u = np.empty(d)
    dl = np.empty(d)
    for ch in range(out.shape[0]):
        for i in range(d):
            theta[i] = out[ch, i]
        logw = -math.inf
        accepted = 0
        route = 0
        for it in range(proposals + 1):  # it = 0: the start's weight
            kind = 0
            if it == 0:
                for i in range(d):
                    prop[i] = theta[i]
            elif rng.random() < BASE_SHARE:
                kind = 2
                _draw_base_dd(rng, center, B, base_scale, prop, plo)
            else:
                kind = 1
                _draw_u(rng, code, 1.0 / ap, u)
                for i in range(d):
                    minus_u[i] = -u[i]
                _chol_solve(L, minus_u, prop)  # prop = M^-1 u
                for i in range(d):
                    prop[i] += xc[i]
            s = 0.0
            for i in range(d):
                t = prop[i] - center[i]
                s += t * t if gauss else abs(t)
            if gauss:
                logbase = -s * inv2s2
                log_pi0 = log_base - s * inv2s2
            elif not s <= B:
                continue
            else:
                logbase = 0.0
                log_pi0 = log_base
            for i in range(d):  # u = M (prop - theta_c) = L (L' (prop - theta_c))
                t = 0.0
                for k in range(i, d):
                    t += L[k, i] * (prop[k] - xc[k])
                dl[i] = t
            for i in range(d - 1, -1, -1):
                t = 0.0
                for k in range(i + 1):
                    t += L[i, k] * dl[k]
                u[i] = t
            lq = log_map - ap * norm_by_code(u, code)
            lq = max(lq, log_pi0) + math.log1p(math.exp(-abs(lq - log_pi0)))
            gradient(prop, args, g)
            logw_new = logbase - a * norm_by_code(g, code) - lq
            if not math.isfinite(logw_new):
                continue
            if it > 0:
                la = logw_new - logw
                if la < 0.0 and not math.log(rng.random()) < la:
                    continue
                accepted += 1
            logw = logw_new
            for i in range(d):
                theta[i] = prop[i]
            route = kind
            if kind == 1:
                for i in range(d):
                    u_out[ch, i] = -minus_u[i]
            elif kind == 2:
                for i in range(d):
                    lo_out[ch, i] = plo[i]
        out[ch, :] = theta
        acc_out[ch] = accepted / proposals
        steps_out[ch] = proposals
        route_out[ch] = route
    return 0

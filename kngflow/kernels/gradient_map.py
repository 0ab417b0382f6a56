"""The gradient-map sampler for KNG with a smooth, strictly convex loss.

KNG's density on ``Theta`` is ``f(theta) ∝ exp(-a ||grad L(theta)||_K) base(theta)``.  When
``L`` is smooth and strictly convex, ``theta -> u = grad L(theta)`` is a bijection of
``R^d`` onto its image with Jacobian ``H(theta) = hess L(theta)``, so the law of ``u`` is

    ∝ exp(-a ||u||_K) base(theta(u)) / det H(theta(u))   on grad L(Theta).

:func:`gradient_map_chain` draws ``u`` exactly as K-norm noise (scale ``1/a``,
:mod:`kngflow.noise`), solves ``grad L(theta) = u`` by Newton's method (the
objective-perturbation solve without the ridge), and uses the root as an
independence-Metropolis proposal: its density is ``exp(-a ||grad L(theta)||_K) det
H(theta)`` (change of variables), so the target-to-proposal ratio is ``base(theta) /
det H(theta)`` and the proposal is accepted with probability

    min(1, base(theta') det H(theta) / (base(theta) det H(theta')))

when ``theta'`` is in ``Theta``; it is rejected when it leaves ``Theta`` or the solve fails
(``u`` outside the image of the gradient, a non-positive-definite Hessian, no
convergence).  The chain has no data-dependent start: its state is the first proposal
inside ``Theta`` (always accepted); after it, independence-Metropolis steps follow until
``proposals`` proposals have been made in all.

The Newton start.  Independence Metropolis leaves the target invariant only if the
proposal's law does not depend on the state and the density in the ratio is that law's.
A failed solve is a rejection, so the proposal's law is ``q_map`` restricted to the roots
that the solve reaches: where Newton's convergence depends on its start, a start at the
chain's state makes the proposal depend on the state.  Logistic regression at small
``n`` is such a case: from a state near the edge of ``Theta`` (an intercept of 6 when
``B = 10``) the solve fails for many ``u`` whose root it finds from 0, so the chain stays
longer near the edge (20 records, ε = 1, ℓ∞: the intercept's SD 9.7 % too large, KS
p = 0.002 on 6000 releases against the grid density; 500 proposals instead of 50 changed
nothing).  So every solve of a Hessian that varies (``warm=False``) starts at one
state-independent point ``theta_0``, computed once per call: the root of ``grad L = 0``
(Newton from ``center``); the
proposal's density is ``q_map`` times ``C(theta)``, 1 where the solve of
``grad L = grad L(theta)`` from ``theta_0`` converges and 0 elsewhere, and a base-measure
draw evaluates ``C`` (below).

Where that root is not found inside ``Theta`` (separated data: the loss has no minimiser;
or a minimiser outside ``Theta``) the chain does not run: the target's mass then lies in a
thin ridge running to the edge of ``Theta``, where the gradient is small and saturates, so
``det H`` is tiny and the map proposes there hardly ever, and 50 proposals from a start
drawn from the proposal leave the chain far from the target (separated logistic data,
``n = 1000``, ``m = 2``, ε = 1: mean slope 4.07 against the law's 4.55, KS p = 1e-17 on
400 releases; random-walk Metropolis matches).  The mechanism's policy then hands over to
its next sampler.  ``warm=True`` starts each solve at the chain's state, which
only saves work and is valid where the solve converges from every start: a constant
Hessian (linear regression, the mean), whose Newton step lands on the root.  With a constant Hessian (quadratic loss:
linear regression, the mean) every proposal inside ``Theta`` is accepted, so the state is
the last proposal inside ``Theta``: an exact draw of the target, as soon as one proposal
falls inside.  At large ``n``, ``det H`` hardly varies over the target's spread and nearly
every proposal is accepted.

Newton's method: the step ``-H^-1 r``, ``r = grad L(theta) - u``, through a Cholesky factor
of ``H``; the Hessian is kept between iterations (a chord step, one gradient per
iteration) while the residual's ℓ2 norm contracts at least fourfold, and recomputed
otherwise; a step that does not decrease ``||r||_2`` (Armijo, on the merit function
``||r||^2 / 2``, for which the Newton step is a descent direction) is first retried with a
fresh Hessian, then halved.  Converged when a step is below ``XTOL (1 + ||theta||_inf)``
in ℓ∞ (``XTOL = 1e-10``: far below the target's spread at every ``n``), or when the
residual can no longer be decreased and the step is below ``1e-7 (1 + ||theta||_inf)``
(rounding of the summed gradient).  The root is unique (strict convexity), so a
converged solve does not depend on its start (but whether it converges may).  The Hessian at the root gives
``log det H`` and the next solve's first factor.

The kernel takes the problem's jitted ``gradient(theta, args, g)`` and ``hessian(theta,
args, H)`` as first-class functions (:func:`~kngflow._jit.first_class`), so numba caches
it on disk: compiled once per machine and signature, not once per process.

:func:`surrogate_map_chain` carries the idea to losses whose gradient is not smooth
(quantile regression's is piecewise constant): the map of a smooth surrogate, frozen at its
minimiser, proposes; the exact density accepts.
"""

from __future__ import annotations

import math

import numpy as np

from kngflow._jit import jit
from kngflow.kernels.dd import dd_add, two_prod, two_sum
from kngflow.kernels.generic import norm_by_code
from kngflow.noise import draw_l1_into, draw_l2_into, draw_linf_into

__all__ = ["gradient_map_chain", "surrogate_map_chain", "cholesky_logdet", "XTOL", "MAX_ITER", "SURROGATE_TEMPER",
           "SURROGATE_REFINE", "BASE_SHARE", "REACH"]

#: Newton's step tolerance, relative to ``1 + ||theta||_inf``
XTOL = 1e-10
#: Newton iterations per solve before it counts as failed
MAX_ITER = 60
#: Armijo constant of the backtracking on ``||r||_2``
_ARMIJO = 1e-4
#: a solve of the gradient map (``warm=False``) fails once an iterate is farther than
#: ``REACH B`` from the centre in ℓ1: its root would most likely be outside ``Theta``, a
#: rejection anyway, and a ``u`` outside the gradient's image (no root) costs ``max_iter``
#: iterations otherwise.  The rule is a function of ``u`` alone, as the proposal's law must be.
REACH = 2.0


@jit
def cholesky_logdet(H, L):
    """Lower Cholesky factor of the symmetric ``H`` into ``L``; returns ``log det H``, or
    ``nan`` when ``H`` is not (numerically) positive definite or not finite."""
    d = H.shape[0]
    logdet = 0.0
    for j in range(d):
        s = H[j, j]
        for k in range(j):
            s -= L[j, k] * L[j, k]
        if not (s > 0.0 and math.isfinite(s)):
            return math.nan
        ljj = math.sqrt(s)
        L[j, j] = ljj
        logdet += 2.0 * math.log(ljj)
        for i in range(j + 1, d):
            t = H[i, j]
            for k in range(j):
                t -= L[i, k] * L[j, k]
            L[i, j] = t / ljj
        for i in range(j):
            L[i, j] = 0.0
    return logdet


@jit
def _chol_solve(L, r, out):
    """``out = -(L L')^-1 r``."""
    d = r.shape[0]
    for i in range(d):
        s = r[i]
        for k in range(i):
            s -= L[i, k] * out[k]
        out[i] = s / L[i, i]
    for i in range(d - 1, -1, -1):
        s = out[i]
        for k in range(i + 1, d):
            s -= L[k, i] * out[k]
        out[i] = s / L[i, i]
    for i in range(d):
        out[i] = -out[i]


@jit
def _residual(g, u, r):
    """``r = g - u``; returns ``||r||_2`` (``inf`` if not finite)."""
    s = 0.0
    for i in range(g.shape[0]):
        r[i] = g[i] - u[i]
        s += r[i] * r[i]
    return math.sqrt(s) if math.isfinite(s) else math.inf


@jit
def _inf_norm(x):
    s = 0.0
    for i in range(x.shape[0]):
        s = max(s, abs(x[i]))
    return s


@jit
def _solve(gradient, hessian, args, u, x, L, H, g, r, step, xn, rn_vec, max_iter, center, reach):
    """Solve ``gradient(x) = u`` in place from ``x``, ``L`` the Cholesky factor of the Hessian
    at ``x``.  On success returns ``log det H`` at the root (``x``), with ``L`` its factor;
    on failure returns ``nan`` (``x`` and ``L`` are then scratch).  The solve fails as soon
    as an iterate is farther than ``reach`` from ``center`` in ℓ1 (``inf``: never)."""
    d = x.shape[0]
    gradient(x, args, g)
    rn = _residual(g, u, r)
    if not math.isfinite(rn):
        return math.nan
    fresh = True  # L is the Hessian at x
    converged = False
    for _ in range(max_iter):
        if rn == 0.0:
            converged = True
            break
        _chol_solve(L, r, step)
        size = _inf_norm(step)
        scale = 1.0 + _inf_norm(x)
        if not math.isfinite(size):
            return math.nan
        if size <= XTOL * scale:
            for i in range(d):
                x[i] += step[i]
            converged = True
            break
        t = 1.0
        moved = False
        while True:
            for i in range(d):
                xn[i] = x[i] + t * step[i]
            gradient(xn, args, g)
            rn_new = _residual(g, u, rn_vec)
            if rn_new <= (1.0 - _ARMIJO * t) * rn:
                moved = True
                break
            if not fresh:  # a chord step from a stale Hessian: refresh it and retry
                hessian(x, args, H)
                if math.isnan(cholesky_logdet(H, L)):
                    return math.nan
                fresh = True
                _chol_solve(L, r, step)
                size = _inf_norm(step)
                if not math.isfinite(size):
                    return math.nan
                if size <= XTOL * scale:
                    for i in range(d):
                        x[i] += step[i]
                    moved = False
                    break
                t = 1.0
                continue
            t *= 0.5
            if t < 1e-10:
                break
        if not moved:
            if size <= 1e-7 * scale:  # converged on the refreshed step, or the residual
                converged = True  # is at the rounding of the summed gradient
                break
            return math.nan
        contracted = rn_new <= 0.25 * rn
        far = 0.0
        for i in range(d):
            x[i] = xn[i]
            r[i] = rn_vec[i]
            far += abs(x[i] - center[i])
        if far > reach:
            return math.nan
        rn = rn_new
        if contracted:
            fresh = False  # keep the factor: a chord step next
        else:
            hessian(x, args, H)
            if math.isnan(cholesky_logdet(H, L)):
                return math.nan
            fresh = True
    if not converged:
        return math.nan
    for i in range(d):
        if not math.isfinite(x[i]):
            return math.nan
    hessian(x, args, H)
    return cholesky_logdet(H, L)


@jit
def _draw_u(rng, code, scale, u):
    if code == 0:
        draw_l1_into(rng, scale, u)
    elif code == 1:
        draw_l2_into(rng, scale, u)
    else:
        draw_linf_into(rng, scale, u)


@jit
def _log_knorm_normaliser(code, d, rate):
    """``log`` of ``rate^d / (d! vol(K))``, the normalising constant of ``exp(-rate ||u||_K)`` on ``R^d``."""
    if code == 0:
        logvol = d * math.log(2.0) - math.lgamma(d + 1.0)
    elif code == 1:
        logvol = 0.5 * d * math.log(math.pi) - math.lgamma(0.5 * d + 1.0)
    else:
        logvol = d * math.log(2.0)
    return d * math.log(rate) - math.lgamma(d + 1.0) - logvol


@jit
def _log_base_normaliser(d, B, base_scale):
    """``log`` of the base measure's density constant: ``N(center, base_scale^2 I)``
    (``base_scale > 0``) or uniform on the ℓ1 ball of radius ``B`` (volume ``(2B)^d / d!``)."""
    if base_scale > 0.0:
        return -0.5 * d * math.log(2.0 * math.pi * base_scale * base_scale)
    return math.lgamma(d + 1.0) - d * math.log(2.0 * B)


@jit
def _draw_base(rng, center, B, base_scale, out):
    """One draw of the base measure: uniform on the ℓ1 ball ``||theta - center||_1 <= B``
    (``base_scale <= 0``; normalised exponential spacings give a uniform point of the
    simplex, then fair signs) or ``N(center, base_scale^2 I)``."""
    d = center.shape[0]
    if base_scale > 0.0:
        for i in range(d):
            out[i] = center[i] + base_scale * rng.standard_normal()
        return
    total = 0.0
    for i in range(d):
        out[i] = rng.standard_exponential()
        total += out[i]
    total += rng.standard_exponential()
    for i in range(d):
        v = B * out[i] / total
        out[i] = center[i] + (v if rng.random() < 0.5 else -v)


@jit
def _draw_base_dd(rng, center, B, base_scale, out, lo):
    """:func:`_draw_base` (the same random numbers and the same ``out``), with ``lo`` the
    low part of the exact draw on the uniform base: ``out + lo`` equals
    ``center ± B E_i / T``, ``T = sum_j E_j`` (the exponentials as drawn, the sum exact),
    within ``(8 d + 24) u^2 (|center_i| + B)`` (``u = 2^-53``).  The sum is carried in
    double-double (within ``2 (d + 1) u^2 T``); the plain quotient ``v`` errs by at most
    ``(d + 3) u v``, so its remainder ``B E_i - v T``, computed from exact products
    (``p - q`` exact by Sterbenz's lemma), is at most ``(d + 3) u v T`` and errs by at most
    ``(4 d + 11) u^2 v T``; the low part ``remainder / T`` then errs by at most
    ``(6 d + 17) u^2 v``, and the centre is added exactly (:func:`two_sum`) with one
    rounding of the low parts' sum.  ``lo`` is 0 for the Gaussian base."""
    d = center.shape[0]
    if base_scale > 0.0:
        _draw_base(rng, center, B, base_scale, out)
        for i in range(d):
            lo[i] = 0.0
        return
    total = 0.0
    th = 0.0
    tl = 0.0
    for i in range(d):
        out[i] = rng.standard_exponential()
        total += out[i]
        th, tl = dd_add(th, tl, out[i])
    e = rng.standard_exponential()
    total += e
    th, tl = dd_add(th, tl, e)
    for i in range(d):
        v = B * out[i] / total
        p, pe = two_prod(B, out[i])
        q, qe = two_prod(v, th)
        rest = ((p - q) + (pe - qe)) - v * tl  # B E_i - v T, p - q exact (Sterbenz)
        vl = rest / (th + tl)
        sign = 1.0 if rng.random() < 0.5 else -1.0
        h, hl = two_sum(center[i], sign * v)
        out[i] = h
        lo[i] = hl + sign * vl


#: a base-measure draw skips the check of ``C`` (module docstring) where the map's term of the
#: mixture density is below ``e^-40`` times the base measure's (it changes ``log q`` by less
#: than ``4e-18``): far from the data at large ``n``, where the check's solve would be long
_NEGLIGIBLE = 40.0


@jit
def gradient_map_chain(gradient, hessian, rng, args, a, code, center, B, base_scale, proposals, max_tries, max_iter,
                       base_share, warm, out, acc_out, steps_out):
    """Run ``out.shape[0]`` independent gradient-map chains (see the module docstring).

    Parameters
    ----------
    gradient, hessian : the problem's jitted ``gradient(theta, args, g)`` and
        ``hessian(theta, args, H)`` (the Jacobian of ``gradient``, symmetric positive definite).
    rng : numpy.random.Generator
    args : the tuple passed through to ``gradient`` and ``hessian``.
    a : float, the rate (the density is ``exp(-a ||gradient||_K)``); ``u`` has scale ``1/a``.
    code : norm code (0 ℓ1, 1 ℓ2, 2 ℓ∞; :data:`kngflow.kernels.generic.NORM_CODES`).
    center : (d,) float64, the base measure's centre and the first solve's Newton start.
    B : float, ℓ1 radius of ``Theta`` around ``center`` (``inf``: ``R^d``); ignored when
        ``base_scale > 0`` (Gaussian base ``N(center, base_scale^2 I)`` on ``R^d``).
    proposals : int >= 1, proposals per chain (more while none has fallen inside ``Theta``).
    max_tries : int, proposals allowed before the first one inside ``Theta``.
    max_iter : Newton iterations per solve.
    base_share : float in [0, 1), the share of proposals drawn from the base measure
        instead (uniform on ``Theta``, finite ``B``, or the Gaussian base).  With it the
        proposal law is the mixture ``q = s pi_0 + (1 - s) q_map``, ``q_map(theta) =
        k_a exp(-a ||gradient(theta)||_K) det H(theta)`` (``k_a = a^d / (d! vol K)``; 0 where
        ``H`` is singular), and a proposal is accepted with probability
        ``min(1, w(theta') / w(theta))``, ``w = f / q``: ``w`` stays bounded by
        ``1 / (s pi_0)`` where ``det H`` is small (a gradient that saturates, as logistic
        regression's far from the data, or one of low rank, as on a tiny data set), where
        the map alone proposes too rarely.  ``0``: the map alone, ``w = base / det H`` (exact
        for a constant Hessian).
    warm : bool, start each Newton solve at the chain's state (valid only where the solve
        converges from every start: a constant Hessian); ``False``: at the fixed
        ``theta_0`` (module docstring), and a base-measure draw ``theta`` counts the map's
        term of ``q`` only where the solve of ``gradient = gradient(theta)`` from
        ``theta_0`` converges (skipped where that term is below ``e^-40`` of the base's).
    out : (chains, d) final states; acc_out : (chains,) accepted fraction of all
        proposals (the first accepted one included); steps_out : (chains,) int64
        proposals made.

    Returns 0, -1 when a chain found no proposal inside ``Theta`` in ``max_tries`` (its
    row of ``out`` is then undefined), or -2 (``warm=False``, nothing drawn) when the
    data's minimiser ``theta_0`` is not found inside ``Theta`` (module docstring).
    """
    d = center.shape[0]
    gauss = base_scale > 0.0
    inv2s2 = 0.5 / (base_scale * base_scale) if gauss else 0.0
    u = np.empty(d)
    x = np.empty(d)
    theta = np.empty(d)
    L = np.empty((d, d))
    Lcur = np.empty((d, d))
    H = np.empty((d, d))
    g = np.empty(d)
    r = np.empty(d)
    step = np.empty(d)
    xn = np.empty(d)
    rn = np.empty(d)
    L0 = np.empty((d, d))
    hessian(center, args, H)
    ok0 = not math.isnan(cholesky_logdet(H, L0))
    if not ok0:  # no usable Hessian at the centre: start Newton on the identity
        for i in range(d):
            for k in range(d):
                L0[i, k] = 1.0 if i == k else 0.0
    reach = math.inf if (warm or gauss) else REACH * B
    x0 = np.empty(d)  # the state-independent Newton start theta_0 (warm: the centre)
    for i in range(d):
        x0[i] = center[i]
        u[i] = 0.0
        x[i] = center[i]
        for k in range(d):
            L[i, k] = L0[i, k]
    if not warm:
        if math.isnan(_solve(gradient, hessian, args, u, x, L, H, g, r, step, xn, rn, max_iter, center, reach)):
            return -2  # no minimiser (separated data), or none the solve reaches
        s = 0.0
        for i in range(d):
            s += abs(x[i] - center[i])
        if not (gauss or s <= B):
            return -2  # the minimiser outside Theta
        for i in range(d):  # the root of gradient = 0 (the data's minimiser) inside Theta
            x0[i] = x[i]
            for k in range(d):
                L0[i, k] = L[i, k]
    uc = np.empty(d)  # scratch of the check of C at a base-measure draw
    xc = np.empty(d)
    Lc = np.empty((d, d))
    gc = np.empty(d)
    mixed = base_share > 0.0
    if mixed:
        log_map = math.log(1.0 - base_share) + _log_knorm_normaliser(code, d, a)
        log_pi0 = math.log(base_share) + _log_base_normaliser(d, B, base_scale)
    status = 0
    xs = np.empty(d)  # the Newton start: theta_0 (warm: the state, or the centre where its Hessian is singular)
    for ch in range(out.shape[0]):
        for i in range(d):
            theta[i] = center[i]
            xs[i] = x0[i]
            for k in range(d):
                Lcur[i, k] = L0[i, k]
        have = False
        logw = 0.0
        made = 0
        accepted = 0
        while True:
            if have and made >= proposals:
                break
            if not have and made >= max_tries:
                status = -1
                break
            made += 1
            base = mixed and rng.random() < base_share
            if base:  # a draw of the base measure
                _draw_base(rng, center, B, base_scale, x)
                hessian(x, args, H)
                logdet = cholesky_logdet(H, L)  # nan: singular, q_map(x) = 0
                gradient(x, args, g)
                energy = a * norm_by_code(g, code)
            else:
                _draw_u(rng, code, 1.0 / a, u)
                for i in range(d):
                    x[i] = xs[i]
                    for k in range(d):
                        L[i, k] = Lcur[i, k]
                logdet = _solve(gradient, hessian, args, u, x, L, H, g, r, step, xn, rn, max_iter, center, reach)
                if math.isnan(logdet):
                    continue
                energy = a * norm_by_code(u, code)  # gradient(x) = u
            s = 0.0
            if gauss:
                for i in range(d):
                    t = x[i] - center[i]
                    s += t * t
                logbase = -s * inv2s2
            else:
                for i in range(d):
                    s += abs(x[i] - center[i])
                if not s <= B:
                    continue
                logbase = 0.0
            if not mixed:
                logw_new = logbase - logdet
            else:  # log w = log base - energy - log(s pi_0 + (1 - s) q_map)
                lq = log_pi0 - s * inv2s2 if gauss else log_pi0
                if not math.isnan(logdet):
                    lm = log_map - energy + logdet
                    if base and not warm and lm > lq - _NEGLIGIBLE:
                        # C(x): does the map propose x?  The solve of gradient = gradient(x) from theta_0
                        for i in range(d):
                            uc[i] = g[i]
                            xc[i] = x0[i]
                            for k in range(d):
                                Lc[i, k] = L0[i, k]
                        if math.isnan(_solve(gradient, hessian, args, uc, xc, Lc, H, gc, r, step, xn, rn, max_iter, center, reach)):
                            lm = -math.inf
                    if lm > -math.inf:
                        lq = max(lq, lm) + math.log1p(math.exp(-abs(lq - lm)))
                logw_new = logbase - energy - lq
                if not math.isfinite(logw_new):
                    continue
            if have:
                la = logw_new - logw
                if la < 0.0 and not math.log(rng.random()) < la:
                    continue
            have = True
            accepted += 1
            logw = logw_new
            for i in range(d):
                theta[i] = x[i]
            if warm:
                singular = math.isnan(logdet)  # no factor at the new state: Newton starts at the centre
                for i in range(d):
                    xs[i] = center[i] if singular else x[i]
                    for k in range(d):
                        Lcur[i, k] = L0[i, k] if singular else L[i, k]
        out[ch, :] = theta
        acc_out[ch] = accepted / made
        steps_out[ch] = made
    return status


# ------------------------------------------------------------ the surrogate map

#: the surrogate map's proposal rate, as a fraction of the target's: a wider proposal, so
#: that the target-to-proposal ratio stays bounded where the gradient departs from its
#: linearisation (piecewise-constant gradients jump by one row's term at a time)
SURROGATE_TEMPER = 0.75
#: chord steps on the exact gradient that move the proposal's centre from the surrogate's
#: minimiser to where the exact gradient is near zero
SURROGATE_REFINE = 5
#: the share of proposals drawn from the base measure (uniform on ``Theta`` or the Gaussian
#: base) by the surrogate map, and by the gradient map of a KNG whose Hessian varies: they
#: bound the target-to-proposal ratio where the map's proposal has little mass (a target
#: much wider than the map's, a saturating or low-rank gradient)
BASE_SHARE = 0.2


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

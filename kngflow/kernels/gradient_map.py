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
(Newton from ``center``), or ``center`` where that solve fails near it (a loss that is
not smooth at its minimiser: the geometric median at a record); the
proposal's density is ``q_map`` times ``C(theta)``, 1 where the solve of
``grad L = grad L(theta)`` from ``theta_0`` converges and 0 elsewhere, and a base-measure
draw evaluates ``C`` (below).

Where the solve runs off beyond ``REACH B`` (separated data: the loss has no minimiser)
or its root lies outside ``Theta``, a chain asked for ``need_root`` does not run (logistic
regression's, :attr:`~kngflow.mechanisms.generic.GenericKNG.needs_minimiser`): the target's mass then lies in a
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

Newton's method (:mod:`kngflow.kernels.newton`): chord steps on a Cholesky factor of
``H``, refreshed where the residual stops contracting, with Armijo backtracking.  The
root is unique (strict convexity), so a converged solve does not depend on its start (but
whether it converges may).  The Hessian at the root gives ``log det H`` and the next
solve's first factor.  The proposals' laws and their normalising constants:
:mod:`kngflow.kernels.map_proposals`.

The kernel takes the problem's jitted ``gradient(theta, args, g)`` and ``hessian(theta,
args, H)`` as first-class functions (:func:`~kngflow._jit.first_class`), so numba caches
it on disk: compiled once per machine and signature, not once per process.

:func:`~kngflow.kernels.surrogate_map.surrogate_map_chain` carries the idea to losses whose
gradient is not smooth (quantile regression's is piecewise constant): the map of a smooth
surrogate, frozen at its minimiser, proposes; the exact density accepts.
"""

from __future__ import annotations

import math

import numpy as np

from kngflow._jit import jit
from kngflow.kernels.generic import norm_by_code
from kngflow.kernels.map_proposals import _draw_base, _draw_u, _log_base_normaliser, _log_knorm_normaliser
from kngflow.kernels.newton import _solve, cholesky_logdet

__all__ = ["gradient_map_chain", "REACH"]

#: a solve of the gradient map (``warm=False``) fails once an iterate is farther than
#: ``REACH B`` from the centre in ℓ1: its root would most likely be outside ``Theta``, a
#: rejection anyway, and a ``u`` outside the gradient's image (no root) costs ``max_iter``
#: iterations otherwise.  The rule is a function of ``u`` alone, as the proposal's law must be.
REACH = 2.0

#: a base-measure draw skips the check of ``C`` (module docstring) where the map's term of the
#: mixture density is below ``e^-40`` times the base measure's (it changes ``log q`` by less
#: than ``4e-18``): far from the data at large ``n``, where the check's solve would be long
_NEGLIGIBLE = 40.0


@jit
def gradient_map_chain(gradient, hessian, rng, args, a, code, center, B, base_scale, proposals, max_tries, max_iter,
                       base_share, warm, need_root, out, acc_out, steps_out):
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
    need_root : bool (with ``warm=False``), return -2 without drawing where the solve for
        ``theta_0`` runs off or ends outside ``Theta`` (module docstring); otherwise
        ``theta_0`` is then ``center``.
    warm : bool, start each Newton solve at the chain's state (valid only where the solve
        converges from every start: a constant Hessian); ``False``: at the fixed
        ``theta_0`` (module docstring), and a base-measure draw ``theta`` counts the map's
        term of ``q`` only where the solve of ``gradient = gradient(theta)`` from
        ``theta_0`` converges (skipped where that term is below ``e^-40`` of the base's).
    out : (chains, d) final states; acc_out : (chains,) accepted fraction of all
        proposals (the first accepted one included); steps_out : (chains,) int64
        proposals made.

    Returns 0, -1 when a chain found no proposal inside ``Theta`` in ``max_tries`` (its
    row of ``out`` is then undefined), or -2 (``warm=False`` and ``need_root``, nothing
    drawn) when the solve for the data's minimiser ``theta_0`` runs off beyond ``REACH B``
    or ends outside ``Theta`` (module docstring).
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
        failed = math.isnan(_solve(gradient, hessian, args, u, x, L, H, g, r, step, xn, rn, max_iter, center, reach))
        s = 0.0
        for i in range(d):
            s += abs(x[i] - center[i])
        inside = not failed and (gauss or s <= B)
        if need_root and not inside and (s > reach or not failed):
            return -2  # the solve ran off (no minimiser: separated data) or the minimiser is outside Theta
        if inside:  # the root of gradient = 0 (the data's minimiser) inside Theta
            for i in range(d):
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


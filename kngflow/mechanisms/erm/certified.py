"""The hardened objective perturbation's minimiser, certified in double-double."""

from __future__ import annotations

import math

import numpy as np

from kngflow.mechanisms.hardening import UNIT_ROUNDOFF


def certified_ridge_minimiser(theta, ridge: float, V, eta: float, gradient_dd, hessian,
                              refinements: int = 8) -> tuple[np.ndarray, np.ndarray, int]:
    """The minimiser of ``F(w) = loss(w) + ridge/2 |w|^2 + V'w`` (``ridge``-strongly convex) in
    double-double with a certificate of its rounding: ``(hi, lo, refinements used)``.

    ``theta`` is the float64 minimiser (the unhardened release's solve); up to ``refinements``
    Newton steps refine ``hi + lo`` on the loss's gradient computed in double-double by
    ``gradient_dd(hi, lo, gh, gl)`` (which returns a bound on its error per coordinate;
    ``ridge w + V`` is added from exact products) until ``(||g||_2 (1 + 4 m u) + sqrt(m) e) /
    ridge``, an upper bound on ``||w - w*||_2`` by strong convexity, is at most ``eta / 2``.
    ``hessian(hi)`` is ``F``'s Hessian (or a generalised one) at ``hi``: it only steers the
    refinement, the certificate measures it.  Logistic regression's
    :func:`kngflow.models.logistic.mechanisms.certified_minimiser` and the SVM call it.  RuntimeError (one line)
    if the certificate is never met.
    """
    from kngflow.kernels.dd import dd_add, two_prod

    m = theta.shape[0]
    hi, lo = np.array(theta, dtype=np.float64), np.zeros(m)
    gh, gl = np.empty(m), np.empty(m)
    u = UNIT_ROUNDOFF
    for extra in range(refinements + 1):
        err = gradient_dd(hi, lo, gh, gl)
        g = np.empty(m)
        for j in range(m):
            p, e = two_prod(ridge, hi[j])
            a, b = dd_add(gh[j], gl[j], p)
            a, b = dd_add(a, b, e + ridge * lo[j])
            a, b = dd_add(a, b, V[j])
            g[j] = a + b
            err += 8.0 * u * u * (abs(gh[j]) + abs(p) + abs(V[j])) + 2.0 * u * abs(ridge * lo[j])  # every j's, summed
        cert = (float(np.linalg.norm(g)) * (1.0 + 4.0 * m * u) + math.sqrt(m) * err) / ridge
        if cert <= 0.5 * eta:
            return hi, lo, extra
        if extra == refinements:
            break
        step = np.linalg.solve(hessian(hi), g)
        for j in range(m):
            hi[j], lo[j] = dd_add(hi[j], lo[j], -step[j])
    raise RuntimeError(f"hardened release: the solver could not certify its rounding below eta = {eta:.3g} "
                       "(an ill-conditioned problem); use hardened=false")

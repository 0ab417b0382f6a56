"""Gradient, smoothed gradient and Hessian, and loss of quantile regression, for the generic
kernels (:mod:`kngflow.kernels.generic`; ``args = (X, y, tau)``, ``O(n d)`` per evaluation).

Check loss ``rho_tau(r) = r (tau - 1{r <= 0})``, residuals ``r_i = y_i - x_i'theta``,
gradient of ``l_n(theta) = sum_i rho_tau(r_i)`` (almost everywhere)

    g(theta) = sum_i x_i (1{r_i <= 0} - tau).
"""

from __future__ import annotations

import math

from kngflow._jit import jit

__all__ = ["qr_gradient", "qr_loss", "qr_smooth_gradient", "qr_smooth_hessian", "smooth_bandwidth", "SMOOTH_BANDWIDTH"]

@jit
def qr_gradient(theta, args, g):
    """``g = sum_i x_i (1{y_i <= x_i'theta} - tau)`` in ``O(n d)``; ``args = (X, y, tau)``."""
    X, y, tau = args
    n, d = X.shape
    for j in range(d):
        g[j] = 0.0
    for i in range(n):
        f = y[i]
        for j in range(d):
            f -= X[i, j] * theta[j]
        w = (1.0 - tau) if f <= 0.0 else -tau
        for j in range(d):
            g[j] += w * X[i, j]


#: the smooth surrogate's bandwidth ``h = SMOOTH_BANDWIDTH n^(-1/3)`` (responses scaled to [-1, 1])
SMOOTH_BANDWIDTH = 0.5


def smooth_bandwidth(n: int) -> float:
    """The surrogate's bandwidth at sample size ``n`` (public: depends on ``n`` only)."""
    return SMOOTH_BANDWIDTH * float(n) ** (-1.0 / 3.0)


@jit
def _smooth_step(r, h):
    """``1 / (1 + exp(r / h))``, the logistic smoothing of ``1{r <= 0}``, and its derivative in
    ``-r``: ``(s, s (1 - s) / h)``, without overflow."""
    t = r / h
    if t > 0.0:
        e = math.exp(-t)
        s = e / (1.0 + e)
    else:
        s = 1.0 / (1.0 + math.exp(t))
    return s, s * (1.0 - s) / h


@jit
def qr_smooth_gradient(theta, args, g):
    """Gradient of the smoothed check loss: ``sum_i x_i (S((x_i'theta - y_i) / h) - tau)``, ``S`` the
    logistic function; ``args = (X, y, tau, h)`` (``O(n d)``)."""
    X, y, tau, h = args
    n, d = X.shape
    for j in range(d):
        g[j] = 0.0
    for i in range(n):
        r = y[i]
        for j in range(d):
            r -= X[i, j] * theta[j]
        w = _smooth_step(r, h)[0] - tau
        for j in range(d):
            g[j] += w * X[i, j]


@jit
def qr_smooth_hessian(theta, args, H):
    """Hessian of the smoothed check loss: ``sum_i x_i x_i' S'(r_i / h) / h`` (positive definite
    for a design of full rank; ``O(n d^2)``); ``args = (X, y, tau, h)``."""
    X, y, tau, h = args
    n, d = X.shape
    for j in range(d):
        for k in range(d):
            H[j, k] = 0.0
    for i in range(n):
        r = y[i]
        for j in range(d):
            r -= X[i, j] * theta[j]
        w = _smooth_step(r, h)[1]
        for j in range(d):
            for k in range(j + 1):
                H[j, k] += w * X[i, j] * X[i, k]
    for j in range(d):
        for k in range(j + 1, d):
            H[j, k] = H[k, j]


@jit
def qr_loss(theta, args):
    """``sum_i rho_tau(y_i - x_i'theta)`` in ``O(n d)``; ``args = (X, y, tau)``."""
    X, y, tau = args
    n, d = X.shape
    s = 0.0
    for i in range(n):
        f = y[i]
        for j in range(d):
            f -= X[i, j] * theta[j]
        s += f * (tau - 1.0) if f <= 0.0 else f * tau
    return s



"""A generic one-at-a-time random-walk Metropolis kernel (the KNG paper's sampler).

:func:`metropolis_chains` samples any density on ``R^d`` of the form

    f(theta) ∝ exp(-energy(theta, data)) * base(theta),

where ``energy`` is a jitted function ``energy(theta, data) -> float`` (``data`` is a
tuple of arrays and scalars, opaque to the kernel; the energy includes the mechanism's
rate ``eps / (2 Delta)``), and the base measure is either

* uniform on the ℓ1 ball ``{||theta - center||_1 <= B}`` (``base_scale <= 0``), or
* Gaussian ``N(center, base_scale^2 I)`` on ``R^d`` (``base_scale > 0``).

Each chain starts at ``center`` (data independent, never at the non-private estimate).
A step is one sweep over the ``d`` coordinates; each coordinate proposal
``theta_j + sigma_j Z`` costs one energy evaluation (``O(n d)`` for problems that keep
their data).  The first half of the steps is burn-in: every :data:`BATCH` sweeps each
``sigma_j`` is multiplied by ``exp(2 (rate_j - 0.44))`` (target acceptance 0.44 of
one-dimensional random-walk proposals), clipped to ``[1e-12, 2 B]`` (``B`` = ball radius
or ``4 base_scale``).  The scales are frozen for the second half, so the second half is a
time-homogeneous Metropolis chain with the target as its stationary law.  Initial scales
are ``B / 2`` (data independent).

Caching: the kernel is specialised on the energy *function object*; numba cannot cache
such specialisations on disk (the key is the object's identity), so it is compiled with
``cache=False`` once per process and energy (about a second), like the gauge kernels of
:mod:`kngflow.norms`.  Energies themselves cache normally.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .._jit import jit

__all__ = ["metropolis_chains", "energies", "kng_energy", "loss_energy", "knorm", "NORM_CODES", "BATCH", "TARGET_ACCEPTANCE"]

BATCH = 20
TARGET_ACCEPTANCE = 0.44
NORM_CODES = {"l1": 0, "l2": 1, "linf": 2}


@jit
def knorm(g, code):
    """``||g||_K`` for ``code`` in :data:`NORM_CODES`."""
    s = 0.0
    if code == 0:
        for i in range(g.shape[0]):
            s += abs(g[i])
    elif code == 1:
        for i in range(g.shape[0]):
            s += g[i] * g[i]
        s = math.sqrt(s)
    else:
        for i in range(g.shape[0]):
            s = max(s, abs(g[i]))
    return s


@functools.cache
def kng_energy(gradient):
    """KNG energy ``a ||grad l_n(theta)||_K`` from a problem's jitted ``gradient(theta, args, g)``.

    The returned energy takes ``data = (args, a, norm_code, g)`` with ``g`` a (d,)
    scratch array that ``gradient`` fills.
    """

    @jit(cache=False)
    def energy(theta, data):
        args, a, code, g = data
        gradient(theta, args, g)
        return a * knorm(g, code)

    return energy


@functools.cache
def loss_energy(loss):
    """Exponential-mechanism energy ``a l_n(theta)`` from a problem's jitted ``loss(theta, args)``.

    The returned energy takes the same ``data = (args, a, norm_code, g)`` as
    :func:`kng_energy` (``norm_code`` and ``g`` unused).
    """

    @jit(cache=False)
    def energy(theta, data):
        args, a, code, g = data
        return a * loss(theta, args)

    return energy


@jit(cache=False)
def energies(energy, thetas, data, out):
    """``out[m] = energy(thetas[m], data)`` for the rows of ``thetas`` (m, d)."""
    for m in range(thetas.shape[0]):
        out[m] = energy(thetas[m], data)


@jit(cache=False)
def metropolis_chains(energy, rng, data, center, B, base_scale, steps, out, acc_out):
    """Run ``out.shape[0]`` independent chains of ``steps`` sweeps; final states to ``out``.

    Parameters
    ----------
    energy : jitted ``energy(theta, data) -> float`` (``+inf`` allowed).
    rng : numpy.random.Generator
    data : tuple passed through to ``energy``.
    center : (d,) float64, the start and the centre of the base measure.
    B : float, radius of the ℓ1 ball (uniform base) — ignored with a Gaussian base.
    base_scale : float, ``<= 0`` for the uniform ℓ1-ball base, else the Gaussian sd.
    steps : int >= 2, sweeps per chain (first half burn-in).
    out : (chains, d) float64; acc_out : (chains,) post-burn-in acceptance rates.
    """
    d = center.shape[0]
    theta = np.empty(d)
    sig = np.empty(d)
    nacc = np.empty(d)
    burn = steps // 2
    gauss = base_scale > 0.0
    radius = 4.0 * base_scale if gauss else B
    inv2s2 = 0.5 / (base_scale * base_scale) if gauss else 0.0
    for ch in range(out.shape[0]):
        for i in range(d):
            theta[i] = center[i]
            sig[i] = 0.5 * radius
            nacc[i] = 0.0
        l1 = 0.0
        e = energy(theta, data)
        accepted = 0
        proposed = 0
        for s in range(steps):
            for j in range(d):
                tj = theta[j]
                tn = tj + sig[j] * rng.standard_normal()
                ok = False
                if gauss:
                    dbase = ((tn - center[j]) ** 2 - (tj - center[j]) ** 2) * inv2s2
                    l1n = 0.0
                else:
                    dbase = 0.0
                    l1n = l1 - abs(tj - center[j]) + abs(tn - center[j])
                if gauss or l1n <= B:
                    theta[j] = tn
                    en = energy(theta, data)
                    de = en - e + dbase
                    if de <= 0.0 or rng.random() < math.exp(-de):
                        ok = True
                        e = en
                        l1 = l1n
                    else:
                        theta[j] = tj
                if s < burn:
                    if ok:
                        nacc[j] += 1.0
                else:
                    proposed += 1
                    if ok:
                        accepted += 1
            if s < burn and (s + 1) % BATCH == 0:
                for j in range(d):
                    sig[j] *= math.exp(2.0 * (nacc[j] / BATCH - TARGET_ACCEPTANCE))
                    sig[j] = min(max(sig[j], 1e-12), 2.0 * radius)
                    nacc[j] = 0.0
        for i in range(d):
            out[ch, i] = theta[i]
        acc_out[ch] = accepted / proposed if proposed > 0 else np.nan

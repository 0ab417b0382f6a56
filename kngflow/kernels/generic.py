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
are ``B / 2`` (data independent).  The proposal, the acceptance test and the tuning are
the shared kernel of :mod:`kngflow.kernels.metropolis` with its schedule
:data:`~kngflow.kernels.metropolis.GENERIC` (:data:`~kngflow.kernels.metropolis.PRECOND`
for the preconditioned variant).

Preconditioned directions (opt in): :func:`precond_metropolis_chains` runs the same
one-at-a-time scheme along ``d`` directions ``v_1, ..., v_d`` as well as the axes,
``theta' = theta + sigma_k Z v_k``: even sweeps along the ``v_j``, odd sweeps along the
axes.  The ``v_j`` are the columns of ``J^-1`` normalised to unit ℓ2 length, ``J`` the
Jacobian of the gradient (the Hessian of the loss) at the chain's current state: along
``v_j`` the gradient moves (to first order) in its ``j``-th coordinate only, so a KNG
energy ``a ||grad l_n||_K`` decouples coordinate by coordinate in gradient space.  Axis
moves alone stall at a corner of the ℓ∞ ball when the Hessian couples the coordinates:
with every ``|gradient coordinate|`` at the maximum, any axis move raises one of them,
and the tuned steps collapse (for logistic regression at ``n = 10^5``, 1000 sweeps from
0 end ~2 away from the mode).  The axis sweeps keep the chain mixing where the
linearisation fails: a wide target (small ``n``) truncated by ``Theta`` along a direction
the likelihood hardly sees, where the ``v_j`` are nearly parallel and cannot combine into
short moves across it.  ``J`` is computed at the start and at every adaptation point of
the burn-in (every :data:`BATCH` sweeps), and the directions and the ``2 d`` scales are
frozen for the second half: the second half is a time-homogeneous Metropolis chain
(deterministic scan of symmetric random-walk proposals along fixed directions, the axes
among them) with the exact target as its stationary law.  The directions depend on the data
through the chain's own states, as the adapted scales do; the chain still starts at the
data-independent ``center``.  A Jacobian whose directions would be nearly dependent
(``|det V| <`` :data:`MIN_DIRECTION_DET` for the unit directions ``V``; singular or
non-finite ``J``) is skipped and the previous directions kept (initially the axes).

Caching: the chains take the energy (and the Jacobian) as first-class functions
(:func:`~kngflow._jit.first_class`), so numba caches them on disk like every other
kernel: the key is the functions' signatures, not the function objects, which a new
process does not share.  Energies built from a problem's function
(:func:`kng_energy`, :func:`loss_energy`) are closures, compiled once per process and
problem (a small function; the problem's own functions cache normally).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from kngflow._jit import MATRIX, VECTOR, first_class, jit
from kngflow.kernels.metropolis import (
    GENERIC,
    PRECOND,
    TARGET_ACCEPTANCE,
    accept,
    base_measure,
    end_sweep,
    new_tuner,
    propose_coordinate,
    record,
    reset_tuner,
    run_chains,
    settle,
    start_chain,
)

__all__ = ["metropolis_chains", "precond_metropolis_chains", "energies", "energy_call", "gradient_call", "hessian_call",
           "kng_energy", "loss_energy", "kng_jacobian", "gradient_jacobian", "unit_inverse_columns", "norm_by_code",
           "NORM_CODES", "BATCH", "TARGET_ACCEPTANCE", "MIN_DIRECTION_DET"]

#: sweeps between the burn-in's adaptations (:data:`kngflow.kernels.metropolis.GENERIC`)
BATCH = GENERIC.every
#: smallest ``|det|`` of the unit preconditioned directions accepted (1 for orthogonal ones)
MIN_DIRECTION_DET = 1e-3
NORM_CODES = {"l1": 0, "l2": 1, "linf": 2}


@jit
def norm_by_code(g, code):
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
        return a * norm_by_code(g, code)

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


def energies(energy, thetas, data, out):
    """``out[m] = energy(thetas[m], data)`` for the rows of ``thetas`` (m, d)."""
    entry, call = first_class(_energies, (energy, thetas, data, out), {0: energy_call(data)})
    entry(*call)


@jit
def _energies(energy, thetas, data, out):
    for m in range(thetas.shape[0]):
        out[m] = energy(thetas[m], data)


def energy_call(data):
    """The arguments of a kernel's call ``energy(theta, data)`` (:func:`~kngflow._jit.first_class`)."""
    return VECTOR, data


def gradient_call(args):
    """The arguments of a kernel's call ``gradient(theta, args, g)``."""
    return VECTOR, args, VECTOR


def hessian_call(args):
    """The arguments of a kernel's call ``hessian(theta, args, H)`` (or ``jacobian(theta, data, J)``)."""
    return VECTOR, args, MATRIX


def metropolis_chains(energy, rng, data, center, B, base_scale, steps, out, acc_out, lattice=0.0):
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
    lattice : float, > 0 for steps on that dyadic lattice (exact positions; hardened releases).
    """
    d = center.shape[0]
    B = float(B)
    state = (np.empty(d), new_tuner(d), data, center, B, base_measure(B, float(base_scale)), float(lattice),
             int(steps) // 2, np.zeros(2))
    calls = {1: energy_call(data)}
    start, _ = first_class(_start, (rng, energy, None, state, 0), calls)
    sweeps, (_, f, _, _, _) = first_class(_sweeps, (rng, energy, None, state, int(steps)), calls)
    run_chains(start, sweeps, rng, f, None, state, int(steps), out, acc_out)


@jit
def _start(rng, energy, _, state, ch):
    """A chain of :func:`metropolis_chains` starts at ``center``; its ℓ1 distance and energy there."""
    theta, tuner, data, center, B, base, lattice, burn, x = state
    start_chain(theta, center, tuner, 0.5 * base[1])
    x[0] = 0.0
    x[1] = energy(theta, data)


@jit
def _sweeps(rng, energy, _, state, steps):
    """The sweeps of a chain of :func:`metropolis_chains` (from the ℓ1 distance and energy in ``x``)."""
    theta, tuner, data, center, B, base, lattice, burn, x = state
    gauss, radius, inv2s2 = base
    sig = tuner[0]
    l1 = x[0]
    e = x[1]
    for s in range(steps):
        for j in range(theta.shape[0]):
            tj, _, dbase, l1n, inside = propose_coordinate(rng, theta, j, sig[j], center[j], l1, B, gauss, inv2s2,
                                                           lattice)
            ok = False
            if inside:
                en = energy(theta, data)
                ok = accept(rng, en - e + dbase)
                if ok:
                    e = en
                    l1 = l1n
            settle(tuner, theta, j, tj, ok, s < burn)
        end_sweep(tuner, GENERIC, s, burn, radius)


@functools.cache
def kng_jacobian(hessian):
    """Jacobian of the gradient from a problem's jitted ``hessian(theta, args, H)``.

    The returned ``jacobian(theta, data, J)`` takes the energies' ``data = (args, ...)``.
    """

    @jit(cache=False)
    def jacobian(theta, data, J):
        hessian(theta, data[0], J)

    return jacobian


@functools.cache
def gradient_jacobian(gradient):
    """Jacobian of a problem's jitted ``gradient(theta, args, g)`` by central differences.

    Steps ``1e-5 max(1, |theta_j|)``; the returned ``jacobian(theta, data, J)`` takes the
    energies' ``data = (args, ...)``.  For problems without an analytic Hessian.
    """

    @jit(cache=False)
    def jacobian(theta, data, J):
        args = data[0]
        d = theta.shape[0]
        t = theta.copy()
        gp = np.empty(d)
        gm = np.empty(d)
        for j in range(d):
            h = 1e-5 * max(1.0, abs(theta[j]))
            t[j] = theta[j] + h
            gradient(t, args, gp)
            t[j] = theta[j] - h
            gradient(t, args, gm)
            t[j] = theta[j]
            for i in range(d):
                J[i, j] = (gp[i] - gm[i]) / (2.0 * h)

    return jacobian


@jit
def unit_inverse_columns(J, V):
    """``V[j] =`` column ``j`` of ``J^-1`` over its ℓ2 norm; returns ``|det V|`` (0 if ``J`` is singular).

    Gauss–Jordan elimination with partial pivoting on a copy; ``V`` is written only when
    ``J`` is finite and numerically invertible and the result is finite, else left as is.
    """
    d = J.shape[0]
    A = np.empty((d, 2 * d))
    scale = 0.0
    for i in range(d):
        for k in range(d):
            x = J[i, k]
            if not math.isfinite(x):
                return 0.0
            A[i, k] = x
            A[i, d + k] = 1.0 if i == k else 0.0
            scale = max(scale, abs(x))
    if scale == 0.0:
        return 0.0
    logdet = 0.0  # log |det J|
    for c in range(d):
        p = c
        for r in range(c + 1, d):
            if abs(A[r, c]) > abs(A[p, c]):
                p = r
        piv = A[p, c]
        if abs(piv) <= 1e-13 * scale:
            return 0.0
        if p != c:
            for k in range(2 * d):
                A[c, k], A[p, k] = A[p, k], A[c, k]
        logdet += math.log(abs(piv))
        for k in range(2 * d):
            A[c, k] /= piv
        for r in range(d):
            if r != c:
                f = A[r, c]
                if f != 0.0:
                    for k in range(2 * d):
                        A[r, k] -= f * A[c, k]
    # det V = det(J^-1) / prod_j ||J^-1 e_j||
    lognorms = 0.0
    for j in range(d):
        s = 0.0
        for i in range(d):
            s += A[i, d + j] * A[i, d + j]
        if not (s > 0.0 and math.isfinite(s)):
            return 0.0
        lognorms += 0.5 * math.log(s)
    for j in range(d):
        s = 0.0
        for i in range(d):
            s += A[i, d + j] * A[i, d + j]
        s = math.sqrt(s)
        for i in range(d):
            V[j, i] = A[i, d + j] / s
    return math.exp(-logdet - lognorms)


@jit
def _update_directions(jacobian, theta, data, J, V, W):
    """Recompute the directions at ``theta`` into ``V``; keep ``V`` when they would be degenerate."""
    jacobian(theta, data, J)
    if unit_inverse_columns(J, W) >= MIN_DIRECTION_DET:
        for j in range(V.shape[0]):
            for i in range(V.shape[1]):
                V[j, i] = W[j, i]


def precond_metropolis_chains(energy, jacobian, rng, data, center, B, base_scale, steps, out, acc_out, dir_out):
    """:func:`metropolis_chains` along preconditioned directions (see the module docstring).

    Even sweeps (0, 2, ...) move along the ``d`` preconditioned directions, odd sweeps
    along the ``d`` axes, each of the ``2 d`` directions with its own scale, adapted every
    :data:`BATCH` sweeps of the burn-in from its acceptance over its ``BATCH / 2``
    proposals.  ``jacobian(theta, data, J)`` fills ``J`` (d, d) with the Jacobian of the
    gradient; ``dir_out`` (chains, d, d) receives each chain's frozen preconditioned
    directions (rows; chain ``ch`` works in ``dir_out[ch]``).  Other parameters and returns
    as :func:`metropolis_chains`; initial scales ``B / 2`` (or ``2 base_scale``) along unit
    directions.
    """
    d = center.shape[0]
    B = float(B)
    state = (np.empty(d), new_tuner(2 * d), data, center, B, base_measure(B, float(base_scale)), int(steps) // 2,
             dir_out, np.empty(d), np.empty((d, d)), np.empty((d, d)), np.zeros(2), np.zeros(1, dtype=np.int64))
    calls = {1: energy_call(data), 2: hessian_call(data)}
    start, _ = first_class(_precond_start, (rng, energy, jacobian, state, 0), calls)
    sweeps, (_, f, g, _, _) = first_class(_precond_sweeps, (rng, energy, jacobian, state, int(steps)), calls)
    run_chains(start, sweeps, rng, f, g, state, int(steps), out, acc_out)


@jit
def _precond_start(rng, energy, jacobian, state, ch):
    """A chain of :func:`precond_metropolis_chains` starts at ``center`` along the axes, then
    takes the directions there; ``x`` holds ``||theta - center||_2^2`` and the energy."""
    theta, tuner, data, center, B, base, burn, dirs, prop, J, W, x, chain = state
    reset_tuner(tuner, 0.5 * base[1])
    chain[0] = ch
    V = dirs[ch]
    d = theta.shape[0]
    for i in range(d):
        theta[i] = center[i]
        for k in range(d):
            V[i, k] = 1.0 if i == k else 0.0
    _update_directions(jacobian, theta, data, J, V, W)
    x[0] = 0.0
    x[1] = energy(theta, data)


@jit
def _precond_sweeps(rng, energy, jacobian, state, steps):
    """The sweeps of a chain of :func:`precond_metropolis_chains`."""
    theta, tuner, data, center, B, base, burn, dirs, prop, J, W, x, chain = state
    gauss, radius, inv2s2 = base
    sig = tuner[0]
    V = dirs[chain[0]]
    d = theta.shape[0]
    q = x[0]
    e = x[1]
    for s in range(steps):
        axes = s % 2 == 1
        for j in range(d):
            k = d + j if axes else j
            z = sig[k] * rng.standard_normal()
            l1n = 0.0
            qn = 0.0
            for i in range(d):
                if axes:
                    prop[i] = theta[i] + z if i == j else theta[i]
                else:
                    prop[i] = theta[i] + z * V[j, i]
                u = prop[i] - center[i]
                l1n += abs(u)
                qn += u * u
            ok = False
            if gauss or l1n <= B:
                dbase = (qn - q) * inv2s2 if gauss else 0.0
                en = energy(prop, data)
                ok = accept(rng, en - e + dbase)
                if ok:
                    e = en
                    q = qn
                    theta[:] = prop
            record(tuner, k, ok, s < burn)
        if end_sweep(tuner, PRECOND, s, burn, radius):
            _update_directions(jacobian, theta, data, J, V, W)

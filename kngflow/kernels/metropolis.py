"""The one adaptive random-walk Metropolis kernel: acceptance test, tally and scale tuning.

Every one-at-a-time random-walk Metropolis sampler of the package
(:func:`kngflow.kernels.generic.metropolis_chains` and its preconditioned variant,
:func:`kngflow.models.linear.sampler.metropolis_chains`,
:func:`kngflow.models.quantreg.metropolis.qr_metropolis_chains`) runs the same scheme; they
differ only in how a proposal's energy is computed (a callback, a residual update, a
band of residuals) and in the numbers of their adaptation schedule.  The scheme is
written here once, as small jitted pieces that the samplers' loops call:

* :func:`base_measure` — the numbers of the base measure (uniform on an ℓ1 ball around
  ``center``, or Gaussian around it);
* a *tuner* ``(sig, nacc, counts)`` (:func:`new_tuner`; :func:`start_chain`,
  :func:`reset_tuner` at the start of a chain): per-direction proposal scales, accepted
  proposals per direction in the current burn-in batch, and the post-burn-in
  ``(accepted, proposed)`` counts;
* a coordinate move: :func:`propose_coordinate` draws ``theta_j + sigma_j Z``, computes the
  change of the base measure and writes the proposal into ``theta`` when it lies in the
  support; the sampler computes the proposal's energy (its only part of the scheme);
  :func:`accept` is the Metropolis test ``U < exp(-de)`` for the energy increase ``de``
  (one uniform drawn only when ``de > 0``); :func:`settle` undoes a rejected move and
  books it (:func:`record`);
* :func:`end_sweep` adapts the scales at the end of a batch of the burn-in
  (:func:`adapt_scales`); :func:`acceptance_rate` reads the post-burn-in acceptance rate;
* :func:`run_chains`, the chain loop every sampler of the package runs (the Metropolis
  samplers and the exact coordinate-Gibbs ones alike): start a chain, run its sweeps,
  write its final state and its acceptance rate, for each chain.  A sampler supplies its
  start and its sweeps as jitted functions of a state tuple.

A chain of ``steps`` sweeps adapts during its first half (burn-in) only: after every
``every``-th sweep each scale is multiplied by ``exp(rate (acc - target))`` with
``acc = nacc / batch`` its acceptance rate over the batch, and clipped to
``[lo, hi radius]``.  The scales are frozen for the second half, which is therefore a
time-homogeneous Metropolis chain with the target as its stationary law.  The numbers
of a schedule are an :class:`Adaptation`; the samplers' schedules are
:data:`GENERIC`, :data:`PRECOND` and :data:`LINEAR`.

In the style of emcee's moves and blackjax's ``(rng, state) -> (state, info)`` kernels,
the pieces are pure functions of an explicit ``numpy.random.Generator`` and of arrays
they update in place; they draw exactly the random numbers, and perform exactly the
floating-point operations, of the loops they replaced, so every sampler's output is
bit-identical to what it was before the pieces were shared.  All but :func:`run_chains` (plain
Python: its loop over chains calls the samplers' jitted pieces) are compiled once
(``cache=True``) with a single signature each.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from kngflow._jit import jit

__all__ = [
    "GENERIC",
    "LINEAR",
    "MIN_SCALE",
    "PRECOND",
    "TARGET_ACCEPTANCE",
    "Adaptation",
    "accept",
    "acceptance_rate",
    "adapt_scales",
    "base_measure",
    "end_sweep",
    "new_tuner",
    "propose_coordinate",
    "record",
    "reset_tuner",
    "run_chains",
    "settle",
    "start_chain",
]

#: acceptance rate the burn-in steers every scale to (optimal for 1-D random-walk proposals)
TARGET_ACCEPTANCE = 0.44
#: floor of the generic kernels' scales
MIN_SCALE = 1e-12


class Adaptation(NamedTuple):
    """The numbers of a burn-in adaptation schedule (see the module docstring).

    ``every``: sweeps between adaptations; ``batch``: proposals each scale receives in
    that many sweeps (the denominator of its acceptance rate); ``rate``: gain of the
    log-scale update ``sig *= exp(rate (nacc / batch - target))``; ``target``: the
    acceptance rate aimed at; ``lo``: floor of the scales; ``hi``: ceiling of the scales
    as a multiple of the sampler's radius.  Keep the field types (int, int, float, float,
    float, float): every schedule then shares one compiled signature.
    """

    every: int
    batch: int
    rate: float
    target: float
    lo: float
    hi: float


#: :func:`~kngflow.kernels.generic.metropolis_chains` and
#: :func:`~kngflow.models.quantreg.metropolis.qr_metropolis_chains`: every 20 sweeps, gain 2,
#: scales in ``[1e-12, 2 radius]``
GENERIC = Adaptation(every=20, batch=20, rate=2.0, target=TARGET_ACCEPTANCE, lo=MIN_SCALE, hi=2.0)
#: :func:`~kngflow.kernels.generic.precond_metropolis_chains`: as :data:`GENERIC`, but each
#: of the ``2 d`` directions is proposed in every other sweep (10 proposals a batch)
PRECOND = Adaptation(every=20, batch=10, rate=2.0, target=TARGET_ACCEPTANCE, lo=MIN_SCALE, hi=2.0)
#: :func:`~kngflow.models.linear.sampler.metropolis_chains`: every 25 sweeps, gain 1, scales at
#: most ``2 B`` (the floor 0 never binds: the scales stay positive)
LINEAR = Adaptation(every=25, batch=25, rate=1.0, target=TARGET_ACCEPTANCE, lo=0.0, hi=2.0)


@jit
def accept(rng, de):
    """The Metropolis test for an energy increase ``de = -log(f(proposal) / f(current))``.

    True when ``de <= 0``; else draws one uniform ``U`` and returns ``U < exp(-de)``
    (so a NaN ``de`` is rejected after its draw).
    """
    return de <= 0.0 or rng.random() < math.exp(-de)


@jit
def base_measure(B, base_scale):
    """The base measure's numbers: ``(gauss, radius, inv2s2)``.

    Gaussian ``N(center, base_scale^2 I)`` when ``base_scale > 0`` (``radius = 4 base_scale``,
    ``inv2s2 = 1 / (2 base_scale^2)``), else uniform on the ℓ1 ball of radius ``B``
    (``radius = B``, ``inv2s2 = 0``).  ``radius`` sets the initial scales (``radius / 2``) and
    their ceiling.
    """
    gauss = base_scale > 0.0
    radius = 4.0 * base_scale if gauss else B
    inv2s2 = 0.5 / (base_scale * base_scale) if gauss else 0.0
    return gauss, radius, inv2s2


@jit
def propose_coordinate(rng, theta, j, sj, cj, l1, B, gauss, inv2s2, lattice=0.0):
    """Propose ``theta_j + sj Z`` (one standard normal drawn), written into ``theta[j]`` when
    it lies in the support; :func:`settle` keeps or undoes it.

    With ``lattice > 0`` (a power of two) the step is rounded to a multiple of it, so a
    chain started on the lattice stays on it and its positions are exact sums (no
    rounding while ``|theta_j| < 2^52 lattice``): the proposal is still symmetric, and the
    chain targets the restriction of the density to the lattice.

    Base measure centred at ``cj`` (coordinate ``j`` of the centre): Gaussian (``gauss``;
    ``inv2s2 = 1 / (2 base_scale^2)``) or uniform on the ℓ1 ball
    ``{||theta - center||_1 <= B}``, of which the current state's ℓ1 distance is ``l1``.
    Returns ``(tj, delta, dbase, l1n, inside)``: the current value, the step ``sj Z``, the
    change of ``-log base``, the proposal's ℓ1 distance (0 with a Gaussian base) and
    whether it lies in the support (else ``theta`` is left as it was).
    """
    tj = theta[j]
    delta = sj * rng.standard_normal()
    if lattice > 0.0:
        delta = math.floor(delta / lattice + 0.5) * lattice
    tn = tj + delta
    if gauss:
        dbase = ((tn - cj) ** 2 - (tj - cj) ** 2) * inv2s2
        l1n = 0.0
    else:
        dbase = 0.0
        l1n = l1 - abs(tj - cj) + abs(tn - cj)
    inside = gauss or l1n <= B
    if inside:
        theta[j] = tn
    return tj, delta, dbase, l1n, inside


@jit
def settle(tuner, theta, j, tj, ok, burnin):
    """End a coordinate move of :func:`propose_coordinate`: restore ``theta[j] = tj`` unless
    the proposal was accepted (``ok``), and :func:`record` it."""
    if not ok:
        theta[j] = tj
    record(tuner, j, ok, burnin)


@jit
def adapt_scales(sig, nacc, batch, rate, target, lo, hi):
    """``sig_k *= exp(rate (nacc_k / batch - target))``, clipped to ``[lo, hi]``; zero ``nacc``."""
    for k in range(sig.shape[0]):
        sig[k] *= math.exp(rate * (nacc[k] / batch - target))
        sig[k] = min(max(sig[k], lo), hi)
        nacc[k] = 0.0


@jit
def new_tuner(k):
    """A tuner for ``k`` directions: ``(sig, nacc, counts)``, reset by :func:`reset_tuner` per chain."""
    return np.empty(k), np.zeros(k), np.zeros(2, dtype=np.int64)


@jit
def reset_tuner(tuner, scale):
    """Start a chain: every scale ``scale``, no acceptances booked."""
    sig, nacc, counts = tuner
    for k in range(sig.shape[0]):
        sig[k] = scale
        nacc[k] = 0.0
    counts[0] = 0
    counts[1] = 0


@jit
def start_chain(theta, center, tuner, scale):
    """Start a chain at ``center`` with every scale ``scale`` (:func:`reset_tuner`)."""
    theta[:] = center
    reset_tuner(tuner, scale)


@jit
def record(tuner, k, ok, burnin):
    """Book a proposal along direction ``k``: toward its scale's batch in the burn-in
    (``burnin``), toward the acceptance rate after it."""
    nacc, counts = tuner[1], tuner[2]
    if burnin:
        if ok:
            nacc[k] += 1.0
    else:
        counts[1] += 1
        if ok:
            counts[0] += 1


@jit
def end_sweep(tuner, adapt, s, burn, radius):
    """After sweep ``s`` (of which the first ``burn`` are burn-in): adapt the scales when a
    batch of :class:`Adaptation` ``adapt`` ends there; returns whether they were adapted."""
    if s < burn and (s + 1) % adapt.every == 0:
        adapt_scales(tuner[0], tuner[1], adapt.batch, adapt.rate, adapt.target, adapt.lo, adapt.hi * radius)
        return True
    return False


@jit
def acceptance_rate(tuner):
    """Post-burn-in acceptance rate (NaN when nothing was proposed after the burn-in)."""
    counts = tuner[2]
    return counts[0] / counts[1] if counts[1] > 0 else np.nan


def run_chains(start, sweeps, rng, f, g, state, steps, out, acc_out):
    """The chain loop: ``out.shape[0]`` independent chains of ``steps`` sweeps each.

    ``state`` is a tuple whose first two entries are the chain's position ``theta`` (d,) and
    its tuner (:func:`new_tuner`); the rest is the sampler's own (data, scratch arrays,
    numbers; a value carried from one call to the next lives in an array).  For chain
    ``ch``, the jitted ``start(rng, f, g, state, ch)`` sets its start and ``sweeps(rng, f,
    g, state, steps)`` runs its ``steps`` sweeps, drawing from the
    ``numpy.random.Generator`` ``rng``; its final ``theta`` goes to ``out[ch]`` and its
    post-burn-in acceptance rate (:func:`acceptance_rate`; NaN for a sampler that books no
    proposals, such as exact Gibbs) to ``acc_out[ch]``.  ``f`` and ``g`` are passed through
    untouched: the functions the step functions call (an energy, a Jacobian; first-class,
    :func:`~kngflow._jit.first_class`) or None.

    The loop over chains runs in Python (two calls a chain), so every sampler's jitted
    pieces keep their own compiled code: a jitted loop taking them as arguments cannot be
    cached on disk and relinks (recompiles) them in every process, seconds per sampler.
    The generator is an argument of its own, not an entry of ``state``: numba types a tuple
    of arrays and numbers in C (about 2 µs a call), but a tuple holding a generator in
    Python (about 200 µs, more than a short chain at small n).
    """
    theta, tuner = state[0], state[1]
    for ch in range(out.shape[0]):
        start(rng, f, g, state, ch)
        sweeps(rng, f, g, state, steps)
        out[ch, :] = theta
        acc_out[ch] = acceptance_rate(tuner)

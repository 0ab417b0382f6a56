"""The entry points of the map samplers: ``size`` chains of a numba kernel on a problem's
jitted gradient and its Hessian or smooth surrogate.

:func:`gradient_map_draws` runs :func:`~kngflow.kernels.gradient_map.gradient_map_chain`
(KNG with a smooth strictly convex loss: exact K-norm noise on the gradient, Newton's
method back to ``theta``, independence Metropolis on ``det H``);
:func:`surrogate_map_draws` runs :func:`~kngflow.kernels.surrogate_map.surrogate_map_chain`
(KNG whose gradient is not smooth: a smooth surrogate's map frozen at its minimiser
proposes, the exact density accepts).  Both hand the problem's jitted functions to the
kernel as first-class functions (:func:`~kngflow._jit.first_class`), so that the kernel is
compiled once per machine and signature, and turn the kernel's failure codes into
RuntimeError, on which a mechanism's ``"auto"`` policy hands over to its next sampler.
:class:`~kngflow.mechanisms.generic.GenericKNG` and the models' own KNGs call them with
their own gradient/Hessian pairs.
"""

from __future__ import annotations

import numpy as np

from kngflow._jit import first_class
from kngflow.kernels.generic import NORM_CODES, gradient_call, hessian_call
from kngflow.kernels.gradient_map import gradient_map_chain
from kngflow.kernels.newton import MAX_ITER
from kngflow.kernels.surrogate_map import surrogate_map_chain

__all__ = ["gradient_map_draws", "surrogate_map_draws", "GRADIENT_MAP_PROPOSALS"]

#: default proposals of a gradient-map chain (option ``proposals``)
GRADIENT_MAP_PROPOSALS = 50


def gradient_map_draws(gradient, hessian, args, a, norm, domain, base_scale, rng, size, proposals, max_tries,
                       base_share=0.0, warm=None, need_root=False):
    """``size`` gradient-map chains on a problem's jitted ``gradient`` / ``hessian``
    (:func:`~kngflow.kernels.gradient_map.gradient_map_chain`): returns the final states
    (size, d), the accepted fractions (size,) and the proposals made (size,).

    ``a`` is the rate (density ``exp(-a ||gradient||_norm)``), ``domain = (center, B)``
    the ℓ1 ball ``Theta`` (``B = inf``: ``R^d``), ``base_scale > 0`` a Gaussian base
    ``N(center, base_scale^2 I)`` instead.  ``base_share``: the share of proposals drawn
    from the base measure (0: the map alone, exact for a constant Hessian; needs a finite
    ``B`` or a Gaussian base otherwise).  ``warm``: start each Newton solve at the chain's
    state, valid only for a constant Hessian (the solve then converges from every start);
    ``False`` starts every solve at one state-independent point, so that the proposal's law
    does not depend on the state (:mod:`kngflow.kernels.gradient_map`); ``None`` (default):
    warm for the map alone (``base_share = 0``: linear regression, the mean), not warm with
    a base-measure share (a Hessian that varies).  ``need_root``: raise RuntimeError (the
    policy's hand-over) where the loss's minimiser is not found inside ``Theta``, before any
    draw.  The one entry point of the sampler: KNGs
    of every model call it with their own gradient/Hessian pair.
    """
    center, B = domain
    center = np.ascontiguousarray(center, dtype=np.float64)
    out = np.empty((size, center.shape[0]))
    acc = np.empty(size)
    steps = np.empty(size, dtype=np.int64)
    warm = base_share == 0.0 if warm is None else bool(warm)
    call = (gradient, hessian, rng, args, float(a), NORM_CODES[norm], center, float(B), float(base_scale),
            int(proposals), int(max_tries), MAX_ITER, float(base_share), warm, bool(need_root), out, acc, steps)
    entry, call = first_class(gradient_map_chain, call, {0: gradient_call(args), 1: hessian_call(args)})
    status = entry(*call)
    if status == -2:
        raise RuntimeError("gradient-map sampler: the loss has no minimiser inside Theta (separated data?), where "
                           "the map cannot reach the law's mass; use sampler='metropolis'")
    if status < 0:
        raise RuntimeError(f"gradient-map sampler: no proposal inside Theta in max_tries={max_tries} proposals "
                           "(the gradient's image hardly meets the noise); use sampler='metropolis'")
    return out, acc, steps


def surrogate_map_draws(gradient, surrogate, args, sargs, a, norm, domain, base_scale, rng, start, proposals,
                        details=False):
    """Surrogate-map steps (:func:`~kngflow.kernels.surrogate_map.surrogate_map_chain`) for KNG
    on a problem's exact jitted ``gradient`` (on ``args``) with the smooth surrogate
    ``surrogate = (gradient, hessian)`` (on ``sargs``), one chain from each row of ``start``
    (size, d; in ``Theta``): returns the final states (size, d), the accepted fractions
    (size,) and the proposals made (size,); other arguments as :func:`gradient_map_draws`.
    With ``details``, also the final states' routes, noises, base-draw low parts and the fit
    (``route_out``, ``u_out``, ``lo_out``, ``fit_out`` of the kernel).  Raises RuntimeError when the surrogate's fit fails."""
    center, B = domain
    center = np.ascontiguousarray(center, dtype=np.float64)
    out = np.array(start, dtype=np.float64, order="C")
    size, d = out.shape
    acc = np.empty(size)
    steps = np.empty(size, dtype=np.int64)
    routes = np.zeros(size, dtype=np.int64)
    us = np.zeros((size, d))
    los = np.zeros((size, d))
    fit = np.zeros((d, d + 1))
    call = (gradient, surrogate[0], surrogate[1], rng, args, sargs, float(a), NORM_CODES[norm], center, float(B),
            float(base_scale), int(proposals), MAX_ITER, out, acc, steps, routes, us, los, fit)
    calls = {0: gradient_call(args), 1: gradient_call(sargs), 2: hessian_call(sargs)}
    entry, call = first_class(surrogate_map_chain, call, calls)
    status = entry(*call)
    if status < 0:
        raise RuntimeError("surrogate-map sampler: the smooth surrogate's Newton fit failed; use sampler='metropolis'")
    return (out, acc, steps, routes, us, los, fit) if details else (out, acc, steps)

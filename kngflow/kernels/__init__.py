"""Numba sampler kernels: exact draws, exact coordinate Gibbs, the gradient map, random-walk Metropolis.

Kernels are pure functions of an explicit ``numpy.random.Generator`` and arrays; the
mechanisms validate inputs and choose among them (exact first, MCMC as the fallback).
"""

#: Integer codes of the sampler that produced a release, as stored in result stores
#: (existing codes never change; new samplers get new codes).
SAMPLER_CODES = {"none": 0, "exact": 1, "gibbs": 2, "metropolis": 3, "gradient_map": 4, "surrogate_map": 5,
                 "frozen_map": 6}

__all__ = ["SAMPLER_CODES"]

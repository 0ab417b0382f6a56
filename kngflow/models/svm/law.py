"""The SVM's synthetic law and its fixed samples.

A linearly separable law with label noise: ``x`` uniform in the unit ball of ``R^d``
(direction uniform on the sphere, radius ``U^{1/d}``: :func:`unit_ball`), ``y = sign(x'u)``
for the unit vector ``u`` (``direction``, default alternating signs
:func:`default_direction`), flipped with probability ``flip``.  Under another declared
domain ``x`` is that draw scaled by ``r / c``, ``c = sup{||x||_D : ||x||_2 <= 1}``
(``sqrt(d)`` for ℓ1, 1 for ℓ2 and ℓ∞): uniform in the largest Euclidean ball inside the
domain (the same random numbers; labels, the Bayes rate and the misclassification formula
are unchanged by the scaling, ``theta_star`` follows it).

The error measures read two fixed samples of the law, drawn once per process from public
seeds (:func:`law_sample`): the :data:`HELD_OUT` records of the misclassification rate and
the :data:`REFERENCE` records of the excess risk, whose regularised minimiser
(:func:`reference_minimiser`) is ``theta_star``: the population minimiser to Monte Carlo
error.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from kngflow.models.svm.loss import regularised_minimiser

__all__ = ["HELD_OUT", "REFERENCE", "HELD_OUT_SEED", "REFERENCE_SEED", "unit_ball", "labels", "law_sample",
           "reference_minimiser", "default_direction"]

#: records of the held-out sample of the misclassification rate
HELD_OUT = 200_000
#: records of the reference sample of ``theta_star`` and the excess risk
REFERENCE = 200_000
#: seeds of the held-out and reference samples (public constants)
HELD_OUT_SEED = 20_110_101
REFERENCE_SEED = 20_110_102


def unit_ball(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    """``n`` points uniform in the unit ℓ2 ball of ``R^d``: a uniform direction times ``U^{1/d}``."""
    X = rng.standard_normal((n, d))
    norms = np.sqrt(np.einsum("ij,ij->i", X, X))
    radius = rng.random(n) ** (1.0 / d)
    X *= (radius / np.maximum(norms, 1e-300))[:, None]
    return X


def labels(rng: np.random.Generator, X: np.ndarray, u: np.ndarray, flip: float) -> np.ndarray:
    """``y_i = sign(x_i'u)`` (``+1`` on the hyperplane), each flipped with probability ``flip``."""
    y = np.where(X @ u >= 0.0, 1.0, -1.0)
    y[rng.random(X.shape[0]) < flip] *= -1.0
    return y


@functools.lru_cache(maxsize=16)
def law_sample(d: int, u: tuple, flip: float, size: int, seed: int, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """A fixed sample of the law, covariates scaled by ``scale`` (read-only arrays, cached per process)."""
    rng = np.random.default_rng(seed)
    X = unit_ball(rng, size, d)
    if scale != 1.0:
        X *= scale
    y = labels(rng, X, np.array(u), flip)
    X.setflags(write=False)
    y.setflags(write=False)
    return X, y


@functools.lru_cache(maxsize=16)
def reference_minimiser(d: int, u: tuple, flip: float, h: float, reg: float, scale: float = 1.0) -> np.ndarray:
    """The minimiser of ``J`` (ridge ``reg``) on the :data:`REFERENCE`-record sample: ``theta_star``
    (read-only, cached per process)."""
    X, y = law_sample(d, u, flip, REFERENCE, REFERENCE_SEED, scale)
    w, _, ok = regularised_minimiser(X, y, h, REFERENCE * reg, tol_abs=1e-9 * REFERENCE)
    if not ok:  # not observed: the objective is strongly convex and piecewise quadratic
        raise RuntimeError("the reference minimiser did not converge")
    w.setflags(write=False)
    return w


def default_direction(d: int) -> tuple:
    """``(1, -1, 1, ...) / sqrt(d)``: the default Bayes direction ``u``."""
    u = np.array([(-1.0) ** j for j in range(d)]) / math.sqrt(d)
    return tuple(float(t) for t in u)

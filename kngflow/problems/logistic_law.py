"""The simulated law of logistic regression (Awan & Slavković, Algorithm 3) in a record domain.

Algorithm 3 draws every covariate ``u_ij ~ U[-1, 1]`` and a label

    Y_i = 1{U_i < sigma(x_i'beta)},   U_i ~ U[0, 1],   sigma(t) = 1 / (1 + e^-t),

so that ``P(Y_i = 1 | x_i) = sigma(x_i'beta)``.  Under a declared record domain
``{||x||_D <= r}`` other than the box ``[-1, 1]^m`` the covariates are the box draw scaled
onto the largest cube inside the ball,

    x = (r / c) u,   c = sup{||u||_D : u in [-1, 1]^m}   (:func:`~kngflow.problems.domains.norm_factor`),

``c = sqrt(m)`` for ℓ2, ``m`` for ℓ1 and 1 for ℓ∞: the same random numbers as the box
draw, so a study's data sets under two domains differ only by that factor, and the signal
``x'beta`` shrinks by ``r / c``.  The draws are taken in this order from the generator: the
``n x m`` covariates (row-major), then the ``n`` uniforms of the labels.

:func:`box_design` draws the covariates, :func:`logistic_labels` the event ``Y_i = 1`` (a
boolean array: the logistic model stores it as ``{0, 1}``, the Bayesian one as ``±1``).
"""

from __future__ import annotations

import numpy as np

from kngflow.problems.domains import RecordDomain, norm_factor

__all__ = ["BOX", "box_design", "logistic_labels"]

#: Algorithm 3's record domain: the box ``[-1, 1]^m``
BOX = RecordDomain("linf", 1.0)


def box_design(rng: np.random.Generator, n: int, m: int, domain: RecordDomain = BOX) -> np.ndarray:
    """``X`` (n, m): ``u ~ U[-1, 1]^m`` per row (``2 U - 1`` from ``rng.random``), scaled by
    ``r / c`` onto the largest cube inside ``domain`` unless it is the box (module docstring)."""
    X = rng.random((n, m))
    X *= 2.0
    X -= 1.0
    if domain != BOX:
        X *= domain.radius / norm_factor("linf", domain.data_norm, m)
    return X


def logistic_labels(rng: np.random.Generator, X: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """``U_i < sigma(x_i'beta)`` (boolean, (n,)) with ``U_i ~ U[0, 1]`` drawn from ``rng``."""
    u = rng.random(X.shape[0])
    return u < 1.0 / (1.0 + np.exp(-(X @ beta)))

"""The mean of records in a public ball over the registered mechanisms: :class:`Mean` (problem ``"mean"``)."""

from __future__ import annotations

import numpy as np

from kngflow import api
from kngflow.estimators._base import DPEstimator, validate_data

__all__ = ["Mean"]


class Mean(DPEstimator):
    """Differentially private mean of records in the public ball ``{||x||_data_norm <= radius}``.

    One release of :func:`kngflow.api.get_mechanism` ``("mean", mechanism)`` on
    :func:`kngflow.api.mean_data` (a record outside the ball raises ValueError).

    Parameters
    ----------
    epsilon : float > 0
    mechanism : str, default "kng"
        A registered kind of problem ``"mean"`` ("kng": the K-norm mechanism, "exponential",
        "nonprivate").
    data_norm : {"linf", "l2", "l1"}, default "linf"; radius : float > 0, default 1
    random_state, hardened, accountant, options
        As for :class:`~kngflow.estimators.LogisticRegression`.

    Attributes
    ----------
    mean_ : (d,); n_features_in_; hardened_; privacy_guarantee_.
    """

    _problem = "mean"

    def __init__(self, *, epsilon=1.0, mechanism="kng", data_norm="linf", radius=1.0, random_state=None,
                 hardened=None, accountant=None, options=None):
        self.epsilon = epsilon
        self.mechanism = mechanism
        self.data_norm = data_norm
        self.radius = radius
        self.random_state = random_state
        self.hardened = hardened
        self.accountant = accountant
        self.options = options

    def fit(self, X, y=None):
        """Release the mean of ``X`` (n, d); ``y`` is ignored."""
        epsilon = self._check_params()
        X = validate_data(self, X, dtype=np.float64)
        data = api.mean_data(X, self.radius, self.data_norm)
        mechanism = self._mechanism(X.shape[0])
        self.mean_ = self._release(mechanism, data, epsilon)
        return self

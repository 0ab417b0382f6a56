"""Linear regression over the registered mechanisms: :class:`LinearRegression` (problem ``"linear"``)."""

from __future__ import annotations

import numpy as np
from sklearn.base import RegressorMixin
from sklearn.utils.validation import check_is_fitted

from kngflow import api
from kngflow.estimators._base import DPEstimator, check_domain, validate_data

__all__ = ["LinearRegression"]


class LinearRegression(RegressorMixin, DPEstimator):
    """Differentially private least squares over the registered ``"linear"`` mechanisms.

    The fit is one release of :func:`kngflow.api.get_mechanism` ``("linear", mechanism)`` on the
    sufficient statistics :func:`kngflow.api.stats_from_arrays` of the records.  The linear
    model's covariates lie in the box ``[-1, 1]^d``: the declared ball
    ``{||x||_data_norm <= radius}`` lies in the box ``[-radius, radius]^d`` (for every norm),
    so the rows are divided by ``radius`` (a public constant) and, with ``fit_intercept``, a
    column of ones is put first; coefficients come back in the user's units.

    Parameters
    ----------
    epsilon : float > 0
    mechanism : str, default "ss"
        Any registered kind of problem ``"linear"`` ("ss", "kng", "exponential", "objective",
        "objective_ext", "output", "noisy_gd", "nonprivate").  "ss" (K-norm noise on the
        sufficient statistics, Awan & Slavković §6; pure ε-DP, unconstrained, needs the
        intercept) by default.  The sampled kinds ("kng", "exponential", objective
        perturbation) release ``theta`` in ``{||theta||_1 <= bound}`` of the scaled problem
        (``options={"bound": ...}``, default 1): ``y / y_bound`` against ``x / radius``.
    data_norm : {"linf", "l2", "l1"}, default "linf"; radius : float > 0, default 1
        The declared public domain of the covariate rows; rows outside raise ValueError.
    y_bound : float > 0 or None, default None
        A public bound on ``|y|`` (values outside raise ValueError).  None scales ``y`` by
        ``max|y|`` of the data, which is not private: :func:`~kngflow.api.stats_from_arrays`
        warns with :class:`~kngflow.warnings.PrivacyLeakWarning`.
    fit_intercept : bool, default True
    random_state, hardened, accountant, options
        As for :class:`~kngflow.estimators.LogisticRegression`.  (No ``C``: the ridge of
        "output", "noisy_gd", "objective", "objective_ext" and "ss" with ``estimator="ridge"``
        is ``options={"reg": ...}``, ``J = (1/n) sum (y - x'theta)^2 + (reg/2) ||theta||^2``,
        so scikit-learn's ``Ridge(alpha)`` is ``reg = 2 alpha / n``.)

    Attributes
    ----------
    coef_ : (d,); intercept_ : float; n_features_in_; hardened_; privacy_guarantee_.
    """

    _problem = "linear"

    def __init__(self, *, epsilon=1.0, mechanism="ss", data_norm="linf", radius=1.0, y_bound=None,
                 fit_intercept=True, random_state=None, hardened=None, accountant=None, options=None):
        self.epsilon = epsilon
        self.mechanism = mechanism
        self.data_norm = data_norm
        self.radius = radius
        self.y_bound = y_bound
        self.fit_intercept = fit_intercept
        self.random_state = random_state
        self.hardened = hardened
        self.accountant = accountant
        self.options = options

    def fit(self, X, y):
        """Fit on ``X`` (n, d) with rows in the declared ball and ``y`` (n,) in
        ``[-y_bound, y_bound]``.  Spends ``epsilon`` from ``accountant`` before the release."""
        epsilon = self._check_params()
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True, ensure_min_samples=2)
        domain = check_domain(X, self.data_norm, self.radius)
        if self.mechanism == "ss" and not self.fit_intercept:
            raise ValueError("fit_intercept must be True with mechanism 'ss' (its statistics need the column of ones)")
        scale = domain.reach("linf", X.shape[1])
        Xm = X / scale
        if self.fit_intercept:
            Xm = np.column_stack([np.ones(X.shape[0]), Xm])
        stats = api.stats_from_arrays(Xm, y, y_bound=self.y_bound)
        mechanism = self._mechanism(X.shape[0])
        theta = self._release(mechanism, stats, epsilon)
        if self.fit_intercept:
            self.intercept_, self.coef_ = float(theta[0]), theta[1:] / scale
        else:
            self.intercept_, self.coef_ = 0.0, theta / scale
        return self

    def predict(self, X):
        """``X coef_ + intercept_``."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return X @ self.coef_ + self.intercept_

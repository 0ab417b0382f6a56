"""Principal components over the registered mechanisms: :class:`PCA` (problem ``"pca"``)."""

from __future__ import annotations

from numbers import Integral

import numpy as np
from sklearn.base import TransformerMixin
from sklearn.utils.validation import check_is_fitted

from kngflow import api
from kngflow.estimators._base import DPEstimator, check_domain, validate_data

__all__ = ["PCA"]


class PCA(TransformerMixin, DPEstimator):
    """Differentially private principal subspace over the registered ``"pca"`` mechanisms.

    The fit is one release of :func:`kngflow.api.get_mechanism` ``("pca", mechanism)`` on
    :func:`kngflow.api.pca_data` (the second moment ``X'X / n`` of records in a public ℓ2 ball),
    turned into a basis by the problem's declared parametrisation
    (:meth:`~kngflow.models.pca.problem.PCAProblem.as_basis`).  The subspace is that of the
    uncentred second moment, as in the mechanisms' papers: centre the records with a public
    centre first (scikit-learn's ``PCA`` centres on the data's mean, which is not private).

    Parameters
    ----------
    n_components : int, default 1
        ``k``, the dimension of the released subspace, ``1 <= k < d``.
    epsilon : float > 0
    mechanism : str, default "exponential"
        Any registered kind of problem ``"pca"`` ("exponential", "analyze_gauss", "mod_sulq",
        "sulq", "nonprivate"): the exponential mechanism on the subspace (pure ε-DP) by
        default.  The Gaussian kinds are (ε, δ)-DP and spend their δ (``options={"delta": ...}``).
    data_norm : {"l2", "l1", "linf"}, default "l2"; radius : float > 0, default 1
        The declared public ball of the records; rows outside raise ValueError.  The mechanisms
        need an ℓ2 bound: the ball's ``sup ||x||_2`` (``radius``, or ``radius sqrt(d)`` for the box).
    random_state, hardened, accountant, options
        As for :class:`~kngflow.estimators.LogisticRegression`.  No private PCA kind declares
        a hardening, so ``fit`` refuses (one-line ValueError naming ``hardened=False``, nothing
        spent) unless ``hardened=False`` is passed: then ``hardened_`` is False and the release
        is the float64 one; ``hardened=True`` raises.

    Attributes
    ----------
    components_ : (k, d) orthonormal rows spanning the released subspace (canonical basis);
    n_components_ : int; n_features_in_; hardened_; privacy_guarantee_.
    """

    _problem = "pca"

    def __init__(self, n_components=1, *, epsilon=1.0, mechanism="exponential", data_norm="l2", radius=1.0,
                 random_state=None, hardened=None, accountant=None, options=None):
        self.n_components = n_components
        self.epsilon = epsilon
        self.mechanism = mechanism
        self.data_norm = data_norm
        self.radius = radius
        self.random_state = random_state
        self.hardened = hardened
        self.accountant = accountant
        self.options = options

    def fit(self, X, y=None):
        """Fit on ``X`` (n, d), every row in the declared ball; ``y`` is ignored."""
        epsilon = self._check_params()
        X = validate_data(self, X, dtype=np.float64)
        n, d = X.shape
        k = self.n_components
        if d < 2:
            raise ValueError(f"X has n_features = {d}: PCA needs at least 2 features")
        if isinstance(k, bool) or not isinstance(k, Integral) or not 1 <= k < d:
            raise ValueError(f"n_components must be an integer in [1, d - 1 = {d - 1}], got {k!r}")
        domain = check_domain(X, self.data_norm, self.radius)
        data = api.pca_data(X, int(k), bound=domain.reach("l2", d))
        mechanism = self._mechanism(n)
        estimate = self._release(mechanism, data, epsilon)
        basis = api.get_problem("pca", d=d, k=int(k)).as_basis(estimate)  # (d, k)
        self.components_ = np.ascontiguousarray(basis.T)
        self.n_components_ = int(k)
        return self

    def transform(self, X):
        """``X components_'`` (n, k): the coordinates of the records in the released subspace."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return X @ self.components_.T

    def inverse_transform(self, X):
        """``X components_`` (n, d): the projection back into the original space."""
        check_is_fitted(self)
        return np.asarray(X, dtype=np.float64) @ self.components_

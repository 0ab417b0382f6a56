"""Binary classifiers over the registered mechanisms: :class:`LogisticRegression` (problem
``"logistic"``) and :class:`LinearSVC` (problem ``"svm"``, the Huber hinge)."""

from __future__ import annotations

import numpy as np
from scipy.special import expit
from sklearn.base import ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from kngflow import api
from kngflow.estimators._base import DPEstimator, add_intercept, check_domain, validate_data

__all__ = ["LogisticRegression", "LinearSVC"]


class _LinearClassifier(ClassifierMixin, DPEstimator):
    """Shared ``fit`` / ``decision_function`` / ``predict`` of the binary linear classifiers."""

    #: the model's labels for (classes_[0], classes_[1])
    _labels: tuple = (0.0, 1.0)

    def _data(self, X, y, domain):
        raise NotImplementedError

    def fit(self, X, y):
        """Fit on ``X`` (n, d), every row in the declared ball ``{||x||_data_norm <= radius}``
        (ValueError otherwise), and ``y`` holding exactly two classes.  Spends ``epsilon`` (and
        the mechanism's δ) from ``accountant`` before the one private release."""
        epsilon = self._check_params()
        X, y = validate_data(self, X, y, dtype=np.float64, ensure_min_samples=2)
        check_classification_targets(y)
        classes = np.unique(y)
        if classes.size != 2:
            raise ValueError(f"Only binary classification is supported: y must hold exactly two classes, got {classes.size} class(es)")
        domain = check_domain(X, self.data_norm, self.radius)
        lo, hi = self._labels
        labels = np.where(y == classes[1], hi, lo).astype(np.float64)
        if self.fit_intercept:
            Xm, s = add_intercept(X, domain)
        else:
            Xm, s = np.ascontiguousarray(X), 1.0
        data = self._data(Xm, labels, domain)
        mechanism = self._mechanism(X.shape[0], C=self.C)
        beta = self._release(mechanism, data, epsilon)
        d = X.shape[1]
        self.classes_ = classes
        self.coef_ = (beta[:d] / s).reshape(1, d)
        self.intercept_ = np.array([beta[d] * domain.radius / s if self.fit_intercept else 0.0])
        return self

    def decision_function(self, X):
        """``X coef_' + intercept_`` (n,): positive for ``classes_[1]``."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return X @ self.coef_[0] + self.intercept_[0]

    def predict(self, X):
        """``classes_[1]`` where :meth:`decision_function` is positive, else ``classes_[0]``."""
        scores = self.decision_function(X)  # checks the fit first
        return self.classes_[(scores > 0).astype(int)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def _more_tags(self):  # scikit-learn < 1.6
        return {"binary_only": True}


class LogisticRegression(_LinearClassifier):
    """Differentially private binary logistic regression over the registered ``"logistic"`` mechanisms.

    The fit is one release of :func:`kngflow.api.get_mechanism` ``("logistic", mechanism)`` on
    :func:`kngflow.api.logistic_data` of the records; nothing is re-implemented here.

    Parameters
    ----------
    epsilon : float > 0
        The privacy level of the release.
    mechanism : str, default "objective_chaudhuri"
        Any registered kind of problem ``"logistic"`` ("objective_chaudhuri", "kng", "objective",
        "objective_ext", "output", "noisy_gd", "dpsgd", "nonprivate").  The default, Chaudhuri,
        Monteleoni & Sarwate's objective perturbation (pure ε-DP, ``reg`` = 0.01 unless ``C``;
        with ``slack_rule="larger"`` unless ``options`` says otherwise: Algorithm 2's slack
        branch wherever it leaves the noise more of ε, both rules ε-DP — as printed, ε = 0.5
        at n = 398, ``C = 1`` leaves the noise ε' = 0.054 and held-out accuracy 0.51, against 0.67),
        was the most accurate pure-ε kind on unit-ball rows of breast cancer at ε = 0.5 and 2,
        and a release takes about 0.1 s; "kng" (K-norm gradient) takes about 1.2 s on
        separable data (Metropolis, hardened or not: its law's mass is then at the edge of
        the parameter ball, out of the gradient map's reach).  (ε, δ) kinds ("noisy_gd", "dpsgd") spend their δ.
    data_norm : {"l2", "l1", "linf"}, default "l2"; radius : float > 0, default 1
        The declared public record domain ``{||x||_data_norm <= radius}`` of the covariates.
        Rows outside it raise ValueError (rescale with public bounds first; nothing is clipped).
        Every sensitivity follows it (:mod:`kngflow.models.logistic.problem`).
    fit_intercept : bool, default True
        Fit an intercept: the rows ``[x, radius] / s`` (``s`` = 1, sqrt(2), 2 for ℓ∞, ℓ2, ℓ1)
        stay in the declared ball, so the mechanism's constants are unchanged; the signal is
        divided by ``s``.
    C : float > 0 or None, default None
        scikit-learn's inverse regularisation, for the ERM kinds with option ``reg``
        ("output", "objective_chaudhuri", "objective", "objective_ext", "noisy_gd", "dpsgd"):
        they minimise ``(1/n) sum_i l(x_i, y_i) + (reg/2) ||beta||^2``, scikit-learn
        ``C sum_i l + ||beta||^2 / 2``, so ``reg = 1 / (C n)``.  None keeps the mechanism's
        default (``reg`` = 0.01; for "objective" and "objective_ext" the ridge their privacy
        proof needs, which is also the least ridge they accept: a smaller ``reg`` is raised to it).
        KNG has no ridge; C raises there.
    random_state : None, int, numpy Generator or RandomState
        The noise's source; an int makes ``fit`` reproducible.
    hardened : None, True or False, default None
        None: as :func:`kngflow.api.get_mechanism` does, hardened (snapped to a public grid,
        :mod:`kngflow.mechanisms.hardening`) where the mechanism declares a hardening, and a
        one-line ValueError naming ``hardened=False`` (before anything is spent) where it does
        not: no silent float64 release.  True requires it; False releases the float64 value.
    accountant : BudgetAccountant or None
        ``fit`` spends ``(epsilon, delta of the mechanism's claim)`` from it before releasing,
        and fits nothing when it refuses.
    options : dict or None
        Further options of the mechanism (e.g. ``{"bound": 20}`` for KNG's ``||beta||_1`` bound).

    Attributes
    ----------
    classes_ : (2,) array; coef_ : (1, d); intercept_ : (1,); n_features_in_ : int;
    hardened_ : bool (whether the release was hardened);
    privacy_guarantee_ : (ε, δ) the release holds (for a hardened release the snapped
        release's guarantee, :meth:`~kngflow.mechanisms.base.Mechanism.hardened_guarantee`).
    """

    _problem = "logistic"
    _labels = (0.0, 1.0)
    _mechanism_defaults = {"objective_chaudhuri": {"slack_rule": "larger"}}

    def __sklearn_tags__(self):  # beside _more_tags, as scikit-learn >= 1.6 asks
        return super().__sklearn_tags__()

    def _more_tags(self):  # scikit-learn < 1.6
        # its check_classifiers_classes also asks that a fit on 20 rows of two blobs predicts
        # both classes; at radius 200 the privacy noise and the ridge leave one (later
        # versions dropped that assertion, and the check passes there)
        return {**super()._more_tags(), "_xfail_checks": {
            "check_classifiers_classes": "a private fit on 20 rows in a ball of radius 200 predicts one class"}}

    def __init__(self, *, epsilon=1.0, mechanism="objective_chaudhuri", data_norm="l2", radius=1.0, fit_intercept=True, C=None,
                 random_state=None, hardened=None, accountant=None, options=None):
        self.epsilon = epsilon
        self.mechanism = mechanism
        self.data_norm = data_norm
        self.radius = radius
        self.fit_intercept = fit_intercept
        self.C = C
        self.random_state = random_state
        self.hardened = hardened
        self.accountant = accountant
        self.options = options

    def _data(self, X, y, domain):
        return api.logistic_data(X, y, radius=domain.radius, data_norm=domain.data_norm)

    def predict_proba(self, X):
        """``[1 - p, p]`` (n, 2) with ``p = sigma(decision_function(X))``, columns in ``classes_`` order."""
        p = expit(self.decision_function(X))
        return np.column_stack([1.0 - p, p])

    def predict_log_proba(self, X):
        """``log`` of :meth:`predict_proba`."""
        t = self.decision_function(X)
        return np.column_stack([-np.logaddexp(0.0, t), -np.logaddexp(0.0, -t)])


class LinearSVC(_LinearClassifier):
    """Differentially private linear support vector classifier over the registered ``"svm"`` mechanisms.

    The loss is the Huber hinge of smoothing ``smoothing`` (``h``; the hinge as ``h -> 0``), the
    model of :mod:`kngflow.models.svm.problem`; the fit is one release of
    :func:`kngflow.api.get_mechanism` ``("svm", mechanism)`` on :func:`kngflow.api.svm_data`.
    Labels are mapped to ``{-1, +1}`` (``classes_[1]`` is +1).

    Parameters are those of :class:`LogisticRegression`, with

    mechanism : str, default "kng_hinge"
        Any registered kind of problem ``"svm"`` ("kng_hinge", "kng", "output", "objective",
        "objective_ext", "noisy_gd", "dpsgd", "nonprivate"); "kng_hinge" (KNG on the hinge's
        subgradient, pure ε-DP, hardened) by default: the most accurate pure-ε kind on unit-ball
        rows of breast cancer at ε = 0.5 and 2 ((ε, δ) "noisy_gd" was better still).  Every private
        kind is hardened by default ("objective" and "objective_ext" by the coupling route:
        ``privacy_guarantee_`` carries a δ of about 10⁻¹³).  "objective" runs with
        ``slack_rule="larger"`` unless ``options`` says otherwise (as for LogisticRegression).
    C : float > 0 or None
        ``reg = 1 / (C n)``: every SVM kind minimises ``(1/n) sum_i l_h + (reg/2) ||w||^2`` with
        option ``reg``; None keeps the mechanism's default.
    smoothing : float in (0, 1), default 0.5
        ``h`` of the Huber hinge.
    """

    _problem = "svm"
    _labels = (-1.0, 1.0)
    _mechanism_defaults = {"objective": {"slack_rule": "larger"}}

    def __init__(self, *, epsilon=1.0, mechanism="kng_hinge", data_norm="l2", radius=1.0, fit_intercept=True, C=None,
                 smoothing=0.5, random_state=None, hardened=None, accountant=None, options=None):
        self.epsilon = epsilon
        self.mechanism = mechanism
        self.data_norm = data_norm
        self.radius = radius
        self.fit_intercept = fit_intercept
        self.C = C
        self.smoothing = smoothing
        self.random_state = random_state
        self.hardened = hardened
        self.accountant = accountant
        self.options = options

    def _data(self, X, y, domain):
        return api.svm_data(X, y, self.smoothing, radius=domain.radius, data_norm=domain.data_norm)

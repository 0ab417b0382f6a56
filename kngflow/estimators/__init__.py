"""scikit-learn estimators over kngflow's registered mechanisms (needs scikit-learn:
``pip install kngflow[estimators]``).

Each estimator's ``fit`` validates the records against a declared public record domain
(rows outside raise ValueError; nothing is clipped), builds the registered mechanism with
:func:`kngflow.api.get_mechanism`, spends its privacy from an optional
:class:`BudgetAccountant` and makes ONE private release with the model's own data helper
(:func:`~kngflow.api.logistic_data`, :func:`~kngflow.api.svm_data`,
:func:`~kngflow.api.stats_from_arrays`, :func:`~kngflow.api.pca_data`,
:func:`~kngflow.api.mean_data`): no mechanism is implemented twice.

* :class:`LinearRegression` (problem ``"linear"``, default mechanism ``"ss"``)
* :class:`LogisticRegression` (``"logistic"``, default ``"objective_chaudhuri"``)
* :class:`LinearSVC` (``"svm"``, default ``"kng_hinge"``)
* :class:`PCA` (``"pca"``, default ``"exponential"``)
* :class:`Mean` (``"mean"``, default ``"kng"``)

scikit-learn's ``C`` maps to the mechanisms' ``reg`` as ``reg = 1 / (C n)`` (with an
intercept the rows are divided by ``s`` = sqrt(2) for the ℓ2 ball, so the ridge acts on
coefficients ``s`` times smaller: at equal ``C`` the slopes are penalised ``s^2`` times
scikit-learn's, and the intercept is penalised too).
This is the only package of kngflow that imports scikit-learn.  See ``docs/estimators.md``.
"""

from __future__ import annotations

from kngflow.accountant import BudgetAccountant
from kngflow.estimators.classification import LinearSVC, LogisticRegression
from kngflow.estimators.decomposition import PCA
from kngflow.estimators.mean import Mean
from kngflow.estimators.regression import LinearRegression
from kngflow.warnings import PrivacyLeakWarning

__all__ = ["LinearRegression", "LogisticRegression", "LinearSVC", "PCA", "Mean", "BudgetAccountant",
           "PrivacyLeakWarning"]

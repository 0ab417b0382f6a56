"""kngflow.estimators: scikit-learn's estimator checks, pipelines, reproducibility, the budget
accountant, the privacy-leak warning and the declared record domains."""

from __future__ import annotations

import ast
import math
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

sklearn = pytest.importorskip("sklearn")

from sklearn.base import clone  # noqa: E402
from sklearn.model_selection import cross_val_score  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import FunctionTransformer, Normalizer, StandardScaler  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from kngflow import api  # noqa: E402
from kngflow.accountant import BudgetAccountant  # noqa: E402
from kngflow.estimators import PCA, LinearRegression, LinearSVC, LogisticRegression, Mean  # noqa: E402
from kngflow.warnings import PrivacyLeakWarning  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


# -- scikit-learn's checks ---------------------------------------------------------------------
#
# Every check of ``check_estimator`` runs, and passes, on the instances below; none is skipped
# (on scikit-learn < 1.6, the floor CI installs, LogisticRegression declares one expected
# failure: that version's check_classifiers_classes also asks a 20-row fit to predict both classes).
# Two things a private estimator cannot do for arbitrary data are set per instance instead:
# * the checks feed records far outside any unit ball (entries up to about 100), and a DP
#   estimator must declare its record domain publicly and refuse rows outside it, so the
#   instances declare a wide ball (``radius`` 200 or 1000);
# * the accuracy checks (``check_classifiers_train``: accuracy > 0.83, ``check_regressors_train``:
#   R^2 > 0.5, on 100-200 rows) need the privacy noise at that radius to be small, so ε is large
#   (100; 1e8 for linear regression, whose sufficient statistics at radius 1000 need it).
# ``random_state`` is fixed by the checks themselves (``set_random_state``), which makes every
# fit deterministic, as the idempotence and invariance checks require.  Hardening is on
# (the default) wherever the mechanism declares it; PCA's kinds declare none, so it says hardened=False.
CHECKED = [
    LinearRegression(epsilon=1e8, radius=1000.0, y_bound=1e4, random_state=0),
    LogisticRegression(epsilon=100.0, radius=200.0, random_state=0),
    LinearSVC(epsilon=100.0, radius=200.0, random_state=0),
    PCA(epsilon=100.0, radius=200.0, random_state=0, hardened=False),  # no PCA kind declares a hardening
    Mean(epsilon=100.0, radius=200.0, random_state=0),
]


@parametrize_with_checks(CHECKED)
def test_sklearn_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sklearn.exceptions.ConvergenceWarning)
        check(estimator)


# -- data ----------------------------------------------------------------------------------------

def _classification(n=300, d=4, seed=0):
    """Rows in the unit ℓ2 ball, labels from a logistic model."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None] * 1.01
    p = 1.0 / (1.0 + np.exp(-X @ np.linspace(4.0, -4.0, d)))
    y = np.where(rng.random(n) < p, "yes", "no")
    return X, y


def _regression(n=400, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, size=(n, d))
    y = np.clip(0.5 + X @ np.array([1.0, -1.0, 0.5]) + 0.1 * rng.normal(size=n), -3.0, 3.0)
    return X, y


def _to_unit_ball(X):
    """A public, data-independent map into the unit ℓ2 ball (radial squashing)."""
    X = np.asarray(X, dtype=float)
    return X / (1.0 + np.linalg.norm(X, axis=1))[:, None]


# -- pipelines and cross-validation -------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda: LogisticRegression(epsilon=2.0, random_state=0),
    lambda: LinearSVC(epsilon=2.0, random_state=0),
])
def test_classifier_pipeline_cross_val_score(make):
    X, y = _classification(n=400)
    pipe = make_pipeline(FunctionTransformer(_to_unit_ball), make())
    scores = cross_val_score(pipe, 3.0 * X, y, cv=3)
    assert scores.shape == (3,) and np.all((scores >= 0) & (scores <= 1))
    assert scores.mean() > 0.55  # better than the majority class (about 0.5)


def test_regression_pipeline_cross_val_score():
    X, y = _regression()
    pipe = make_pipeline(FunctionTransformer(lambda Z: np.clip(Z, -1.0, 1.0)),  # a public clip, spelled out
                         LinearRegression(epsilon=5.0, y_bound=3.0, random_state=0))
    scores = cross_val_score(pipe, X, y, cv=3)  # R^2
    assert scores.shape == (3,) and scores.mean() > 0.5


def test_pca_pipeline_cross_val_score():
    """Standardise, squash into the unit ball (public map), private PCA, then a classifier."""
    X, y = _classification(n=300, d=5)
    pipe = make_pipeline(StandardScaler(), FunctionTransformer(_to_unit_ball), PCA(2, epsilon=2.0, random_state=0, hardened=False),
                         LogisticRegression(epsilon=2.0, random_state=0))
    scores = cross_val_score(pipe, X, y, cv=3)
    assert scores.shape == (3,)


def test_normalizer_pipeline_declares_unit_ball():
    """``Normalizer`` puts rows on the unit sphere: the default domain (ℓ2, radius 1) accepts them."""
    X, y = _classification()
    model = make_pipeline(StandardScaler(), Normalizer(), LogisticRegression(epsilon=1.0, random_state=0)).fit(X, y)
    assert model.predict(X).shape == (len(X),)


# -- fitted attributes, reproducibility, C ------------------------------------------------------

def test_classifier_attributes_and_labels():
    X, y = _classification()
    for est in (LogisticRegression(random_state=1), LinearSVC(random_state=1)):
        est.fit(X, y)
        assert list(est.classes_) == ["no", "yes"]
        assert est.coef_.shape == (1, X.shape[1]) and est.intercept_.shape == (1,)
        assert est.n_features_in_ == X.shape[1]
        assert set(est.predict(X)) <= {"no", "yes"}
        assert est.decision_function(X).shape == (len(X),)
        assert est.hardened_ is True
    proba = LogisticRegression(random_state=1).fit(X, y).predict_proba(X)
    assert proba.shape == (len(X), 2) and np.allclose(proba.sum(axis=1), 1.0)


def test_pca_attributes():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(500, 4)) * np.array([3.0, 1.0, 0.5, 0.2])
    X /= np.linalg.norm(X, axis=1).max()
    pca = PCA(2, epsilon=5.0, random_state=0, hardened=False).fit(X)
    assert pca.components_.shape == (2, 4) and pca.n_components_ == 2
    assert np.allclose(pca.components_ @ pca.components_.T, np.eye(2), atol=1e-9)
    assert pca.transform(X).shape == (500, 2)
    energy = api.captured_energy(pca.components_.T, X.T @ X / len(X))
    assert 0.5 < energy <= 1.0 + 1e-12


@pytest.mark.parametrize("make", [
    lambda **kw: LogisticRegression(**kw),
    lambda **kw: LinearSVC(**kw),
    lambda **kw: LinearRegression(y_bound=3.0, **kw),
    lambda **kw: PCA(hardened=False, **kw),
    lambda **kw: Mean(**kw),
])
def test_random_state_makes_fit_reproducible(make):
    X, y = _regression() if make().__class__ in (LinearRegression, Mean, PCA) else _classification()
    if make().__class__ is PCA:
        X = X / math.sqrt(X.shape[1])
    attr = {"LinearRegression": "coef_", "PCA": "components_", "Mean": "mean_"}.get(make().__class__.__name__, "coef_")
    a = getattr(make(random_state=7).fit(X, y), attr)
    b = getattr(make(random_state=7).fit(X, y), attr)
    c = getattr(make(random_state=8).fit(X, y), attr)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_C_maps_to_reg():
    """``C`` sets the mechanism's ``reg = 1 / (C n)``: the release equals the direct API call's."""
    X, y = _classification(n=200)
    est = LogisticRegression(mechanism="output", C=0.5, fit_intercept=False, random_state=4).fit(X, y)
    data = api.logistic_data(X, (y == "yes").astype(float), radius=1.0, data_norm="l2")
    mech = api.get_mechanism("logistic", "output", reg=1.0 / (0.5 * 200))
    direct = mech.release(data, 1.0, np.random.default_rng(4)).estimate
    assert np.array_equal(est.coef_[0], direct)
    with pytest.raises(ValueError, match="C: mechanism 'kng'"):
        LogisticRegression(mechanism="kng", C=1.0).fit(X, y)


def test_linear_regression_matches_direct_api():
    """The estimator is the registered mechanism on ``stats_from_arrays`` of ``[1, x]``: no second implementation."""
    X, y = _regression()
    est = LinearRegression(epsilon=1.0, y_bound=3.0, random_state=5).fit(X, y)
    stats = api.stats_from_arrays(np.column_stack([np.ones(len(X)), X]), y, y_bound=3.0)
    theta = api.get_mechanism("linear", "ss").release(stats, 1.0, np.random.default_rng(5)).estimate
    assert est.intercept_ == theta[0] and np.array_equal(est.coef_, theta[1:])


# -- the declared record domain -----------------------------------------------------------------

@pytest.mark.parametrize("est, field", [
    (LogisticRegression(), "X"),
    (LinearSVC(), "X"),
    (LinearRegression(y_bound=3.0), "X"),
    (PCA(), "X"),
])
def test_rows_outside_the_domain_raise_one_line(est, field):
    X, y = _classification()
    X = X.copy()
    X[3] *= 5.0
    with pytest.raises(ValueError, match=rf"^{field}: every row must lie in the declared record domain") as info:
        est.fit(X, np.zeros(len(X)) if isinstance(est, LinearRegression) else y)
    assert "\n" not in str(info.value) and "radius=1.0" in str(info.value)
    assert not hasattr(est, "coef_") and not hasattr(est, "components_")


def test_y_outside_its_bound_and_bad_domain_options_raise():
    X, y = _regression()
    with pytest.raises(ValueError, match=r"y must lie in \[-y_bound, y_bound\]"):
        LinearRegression(y_bound=1.0).fit(X, y)
    X2, y2 = _classification()
    with pytest.raises(ValueError, match="data_norm must be one of"):
        LogisticRegression(data_norm="l3").fit(X2, y2)
    with pytest.raises(ValueError, match="radius must be a finite number > 0"):
        LogisticRegression(radius=-1.0).fit(X2, y2)
    with pytest.raises(ValueError, match="mechanism"):
        LogisticRegression(mechanism="nope").fit(X2, y2)


def test_box_domain_for_logistic():
    X, y = _classification()
    box = LogisticRegression(data_norm="linf", radius=1.0, random_state=0).fit(X, y)
    assert box.coef_.shape == (1, X.shape[1])


# -- the accountant -----------------------------------------------------------------------------

def test_accountant_composes_and_refuses_in_one_line():
    acc = BudgetAccountant(epsilon=1.0)
    for _ in range(10):
        acc.spend(0.1)
    assert acc.total() == pytest.approx((1.0, 0.0))
    with pytest.raises(ValueError, match="^privacy budget exceeded") as info:
        acc.spend(0.01)
    assert "\n" not in str(info.value)
    assert len(acc.spent_budget) == 10  # nothing written
    with pytest.raises(ValueError, match="delta"):
        BudgetAccountant(epsilon=5.0).spend(0.1, 1e-6)  # pure budget refuses (ε, δ)
    assert BudgetAccountant(epsilon=5.0, delta=1e-5).spend(0.1, 1e-6).remaining() == pytest.approx((4.9, 9e-6))


def test_accountant_refuses_an_over_budget_fit_and_nothing_is_fitted():
    X, y = _classification()
    acc = BudgetAccountant(epsilon=1.0)
    LogisticRegression(epsilon=0.6, accountant=acc, random_state=0).fit(X, y)
    est = LogisticRegression(epsilon=0.6, accountant=acc, random_state=0)
    with pytest.raises(ValueError, match="^privacy budget exceeded"):
        est.fit(X, y)
    assert not hasattr(est, "coef_") and not hasattr(est, "classes_")
    assert acc.total() == pytest.approx((0.6, 0.0))
    refused = PCA(epsilon=0.4, accountant=acc, random_state=0)
    with pytest.raises(ValueError, match="hardened=False") as info:  # no silent leak: it declares no hardening
        refused.fit(X / 2.0)
    assert "\n" not in str(info.value) and not hasattr(refused, "components_")
    assert acc.total() == pytest.approx((0.6, 0.0))  # nothing spent on a refusal
    PCA(epsilon=0.4, accountant=acc, random_state=0, hardened=False).fit(X / 2.0)  # what is left still fits
    assert acc.remaining()[0] == pytest.approx(0.0, abs=1e-12)


def test_accountant_spends_the_mechanisms_delta():
    X, y = _classification()
    acc = BudgetAccountant(epsilon=3.0, delta=1e-4)
    est = LogisticRegression(mechanism="noisy_gd", epsilon=1.0, accountant=acc, random_state=0).fit(X, y)
    delta = api.get_mechanism("logistic", "noisy_gd").privacy_claim().delta
    assert delta > 0 and acc.total() == pytest.approx((1.0, delta))
    assert est.privacy_guarantee_[0] >= 1.0
    with pytest.raises(ValueError, match="delta"):
        LogisticRegression(mechanism="noisy_gd", accountant=BudgetAccountant(epsilon=3.0)).fit(X, y)


def test_nonprivate_mechanism_warns_and_cannot_spend():
    X, y = _classification()
    with pytest.warns(PrivacyLeakWarning, match="not differentially private"):
        LogisticRegression(mechanism="nonprivate").fit(X, y)
    with pytest.raises(ValueError, match="not private"):
        LogisticRegression(mechanism="nonprivate", accountant=BudgetAccountant(1.0)).fit(X, y)


# -- the leak warning ---------------------------------------------------------------------------

def test_stats_from_arrays_without_bound_warns_and_keeps_its_numbers():
    X, y = _regression()
    X1 = np.column_stack([np.ones(len(X)), X])
    with pytest.warns(PrivacyLeakWarning, match="y_bound"):
        stats = api.stats_from_arrays(X1, y)
    assert stats.scale == np.max(np.abs(y))
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)  # negative control: a public bound is silent
        bounded = api.stats_from_arrays(X1, y, y_bound=float(np.max(np.abs(y))))
    assert np.array_equal(stats.G, bounded.G) and np.array_equal(stats.c, bounded.c) and stats.yy == bounded.yy


def test_quantreg_data_without_bound_warns():
    X, y = _regression()
    X1 = np.column_stack([np.ones(len(X)), X])
    with pytest.warns(PrivacyLeakWarning):
        api.quantreg_data(X1, y, 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        api.quantreg_data(X1, y, 0.5, y_bound=3.0)


def test_linear_regression_without_y_bound_warns():
    X, y = _regression()
    with pytest.warns(PrivacyLeakWarning):
        LinearRegression(random_state=0).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        LinearRegression(y_bound=3.0, random_state=0).fit(X, y)


def test_leak_warning_is_public():
    assert issubclass(api.PrivacyLeakWarning, UserWarning)
    assert api.PrivacyLeakWarning is PrivacyLeakWarning


# -- api exports and the import rule ------------------------------------------------------------

def test_api_exports_every_models_helpers():
    for name in ("pca_data", "svm_data", "captured_energy", "projection_distance", "logistic_data", "mean_data",
                 "stats_from_arrays", "quantreg_data", "quantile_data", "geomedian_data"):
        assert name in api.__all__ and callable(getattr(api, name))


#: modules of kngflow allowed to import scikit-learn: the estimators, and the PCA model's
#: optional loader of scikit-learn's digits (imported inside the function, never on import)
SKLEARN_ALLOWED = ("kngflow.estimators", "kngflow.models.pca.problem")


def test_only_the_estimators_import_sklearn():
    offenders = []
    for path in sorted((ROOT / "kngflow").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "sklearn" or n.startswith("sklearn.") for n in names) and not module.startswith(
                    SKLEARN_ALLOWED):
                offenders.append(f"{module}:{node.lineno}")
    assert not offenders, f"only kngflow.estimators may import scikit-learn: {offenders}"
    code = ("import sys, kngflow.api as a; a.logistic_data; a.pca_data; a.svm_data; a.stats_from_arrays; "
            "import kngflow.accountant; sys.exit('sklearn' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_clone_keeps_parameters():
    acc = BudgetAccountant(2.0)
    est = LogisticRegression(epsilon=0.5, accountant=acc, options={"tol": 1e-8})
    twin = clone(est)
    assert twin.get_params()["epsilon"] == 0.5 and twin.get_params()["options"] == {"tol": 1e-8}


def test_objective_perturbation_takes_the_better_slack_branch_by_default():
    """The classifiers run CMS objective perturbation with ``slack_rule="larger"`` unless the
    options say otherwise; at C = 1, ε = 0.5, n = 400 the printed rule leaves the noise
    ε' = 0.5 - 2 log(1 + 1/4) = 0.054, the larger-ε' rule ε/2 (control: options restore it)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    X /= np.linalg.norm(X, axis=1, keepdims=True) * np.sqrt(2)  # with the intercept, still in the ball
    y = (X[:, 0] > 0).astype(int)
    for est, kind in ((LogisticRegression, "objective_chaudhuri"), (LinearSVC, "objective")):
        default = est(mechanism=kind, C=1.0, epsilon=0.5)._mechanism(400, C=1.0)
        printed = est(mechanism=kind, C=1.0, epsilon=0.5, options={"slack_rule": "cms"})._mechanism(400, C=1.0)
        assert default.slack_rule == "larger" and printed.slack_rule == "cms"
        est(mechanism=kind, C=1.0, epsilon=0.5, random_state=0).fit(X, y)
    mech = api.get_mechanism("logistic", "objective_chaudhuri", reg=1 / 400)
    assert mech.slack_rule == "cms"  # the mechanism's own default: the paper's rule
    eps_cms = mech.constants(400, 2, 0.5, api.get_problem("logistic", data_norm="l2").domain)[0]
    assert eps_cms == pytest.approx(0.5 - 2 * np.log1p(0.25 / (400 * (1 / 400))))
    larger = api.get_mechanism("logistic", "objective_chaudhuri", reg=1 / 400, slack_rule="larger")
    assert larger.constants(400, 2, 0.5, api.get_problem("logistic", data_norm="l2").domain)[0] == 0.25

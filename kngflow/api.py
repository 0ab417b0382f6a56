"""The public façade: build problems and mechanisms by name, and the models' data helpers.

What a user imports to run a mechanism on their own data::

    from kngflow.api import get_mechanism, get_problem, stats_from_arrays, private_quantile

(scikit-learn users: :mod:`kngflow.estimators` wraps the same mechanisms as estimators.)
A data helper that takes a bound from the data (``stats_from_arrays`` or ``quantreg_data``
without ``y_bound``) warns with :class:`PrivacyLeakWarning`, re-exported here.

It sits above :mod:`kngflow.registry` (which resolves names) and the model packages
(which define the helpers), so that the contract packages :mod:`kngflow.problems` and
:mod:`kngflow.mechanisms` import nothing above them.  Importing this module imports no
model: the data helpers, ``private_quantile`` and the built-in tables ``PROBLEMS`` /
``MECHANISMS`` are loaded on first use.
"""

from __future__ import annotations

import importlib
import inspect

from kngflow import registry
from kngflow.problems.base import check_problem
from kngflow.warnings import PrivacyLeakWarning

__all__ = [
    "get_problem",
    "get_mechanism",
    "problem_options",
    "allowed_options",
    "private_quantile",
    "load_dataset",
    "DATASETS",
    "PROBLEMS",
    "MECHANISMS",
    "PrivacyLeakWarning",
    # the data helpers: a user's own records -> a mechanism's input
    "stats_from_arrays",
    "logistic_data",
    "mean_data",
    "quantile_data",
    "quantreg_data",
    "geomedian_data",
    "pca_data",
    "svm_data",
    "GeoMedianData",
    "LinearStats",
    "LogisticData",
    "MeanData",
    "QuantileData",
    "QuantRegData",
    "GeoMedianProblem",
    "LinearProblem",
    "LogisticProblem",
    "MeanProblem",
    "QuantileProblem",
    "QuantRegProblem",
    "PCAData",
    "PCAProblem",
    "SVMData",
    "SVMProblem",
    # the models' error measures (functions of a release and the data or the truth)
    "captured_energy",
    "projection_distance",
]

#: public names defined by the built-in models: name -> module (imported on first use)
_HELPERS = {
    "stats_from_arrays": "kngflow.models.linear.problem",
    "LinearStats": "kngflow.models.linear.problem",
    "LinearProblem": "kngflow.models.linear.problem",
    "logistic_data": "kngflow.models.logistic.problem",
    "LogisticData": "kngflow.models.logistic.problem",
    "LogisticProblem": "kngflow.models.logistic.problem",
    "mean_data": "kngflow.models.mean.problem",
    "MeanData": "kngflow.models.mean.problem",
    "MeanProblem": "kngflow.models.mean.problem",
    "quantile_data": "kngflow.models.quantile.problem",
    "QuantileData": "kngflow.models.quantile.problem",
    "QuantileProblem": "kngflow.models.quantile.problem",
    "quantreg_data": "kngflow.models.quantreg.problem",
    "QuantRegData": "kngflow.models.quantreg.problem",
    "QuantRegProblem": "kngflow.models.quantreg.problem",
    "geomedian_data": "kngflow.models.geomedian.problem",
    "GeoMedianData": "kngflow.models.geomedian.problem",
    "GeoMedianProblem": "kngflow.models.geomedian.problem",
    "pca_data": "kngflow.models.pca.problem",
    "PCAData": "kngflow.models.pca.problem",
    "PCAProblem": "kngflow.models.pca.problem",
    "captured_energy": "kngflow.models.pca.problem",
    "projection_distance": "kngflow.models.pca.problem",
    "svm_data": "kngflow.models.svm.problem",
    "SVMData": "kngflow.models.svm.problem",
    "SVMProblem": "kngflow.models.svm.problem",
    "private_quantile": "kngflow.models.quantile.mechanisms",
}

#: the real data sets the built-in models serve: name -> the problem that serves it (its model's
#: ``datasets`` module preprocesses it)
DATASETS = {"randhie": "linear", "fair": "logistic"}


def load_dataset(name: str):
    """The preprocessed real data set ``name`` (one of :data:`DATASETS`), read once per process
    by the ``datasets`` module of the model that serves it."""
    if name not in DATASETS:
        raise ValueError(f"dataset must be one of {sorted(DATASETS)}, got {name!r}")
    return importlib.import_module(f"{registry.BUILTIN_MODELS[DATASETS[name]]}.datasets").load_dataset(name)


def __getattr__(name: str):
    """The data helpers, ``private_quantile``, ``PROBLEMS`` (name -> class) and ``MECHANISMS``
    (problem -> kind -> class) of the built-in models, imported on first use."""
    if name == "PROBLEMS":
        value = {m: registry.load_model(m).PROBLEM for m in registry.BUILTIN_MODELS}
    elif name == "MECHANISMS":
        value = {m: dict(registry.load_model(m).MECHANISMS) for m in registry.BUILTIN_MODELS}
    elif name in _HELPERS:
        value = getattr(importlib.import_module(_HELPERS[name]), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


def problem_options(cls) -> list[str]:
    """Names of the options (keyword arguments of the constructor) of problem class ``cls``."""
    fields = getattr(cls, "__dataclass_fields__", None)
    if fields is not None:
        return [f for f, spec in fields.items() if spec.init]
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    return [p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]


def get_problem(name: str, **options):
    """Return the problem ``name`` built with keyword ``options``.

    Raises ValueError (:class:`kngflow.registry.PluginError`) naming ``problem`` and the
    allowed names for an unknown problem, TypeError naming the option for an unknown
    option, and TypeError naming what is missing when the built problem lacks ``d`` or
    ``theta_star`` (:func:`kngflow.problems.base.check_problem`).
    """
    cls = registry.problem_class(name)
    try:
        problem = cls(**options)
    except TypeError as exc:
        allowed = problem_options(cls)
        raise TypeError(f"unknown option for problem {name!r}: {exc}; allowed options: {allowed}") from None
    return check_problem(problem, name)


def allowed_options(problem: str, kind: str) -> list[str]:
    """Names of the keyword options of mechanism ``kind`` for ``problem``."""
    return registry.mechanism_class(problem, kind).option_names()


def get_mechanism(problem: str, kind: str, **options):
    """Build mechanism ``kind`` for ``problem`` with keyword ``options``.

    No silent leak on the default path: ``hardened`` defaults to True here (the API a user
    calls on their own data) for every private mechanism that declares a hardening, whose
    release is then snapped to a public grid (:mod:`kngflow.mechanisms.hardening`); options
    it cannot honour raise a one-line error naming them.  A private mechanism that declares
    no hardening is not built unless the call says ``hardened=False``: without it,
    :class:`~kngflow.mechanisms.hardening.HardeningError` (a ValueError), one line naming
    the mechanism and ``hardened=False``.  Pass ``hardened=False`` for the unhardened
    floating-point release of any mechanism (its low bits can depend on the data).
    Non-private mechanisms have nothing to harden.

    Built-in mechanisms that declare no hardening (so need ``hardened=False``): PCA's
    ``analyze_gauss``, ``mod_sulq``, ``sulq`` and ``exponential``, and the Bayesian model's
    ``naive``, ``noise_aware`` and ``ops`` (``tests/mechanisms/test_hardened_default.py`` walks the
    registry and lists them); every other built-in private mechanism is hardened by default.

    Raises ValueError (:class:`kngflow.registry.PluginError`) naming ``kind`` and the
    allowed values, and TypeError naming an unknown option and the allowed ones.
    """
    if not registry.is_reference(problem) and problem not in registry.problem_names():
        raise ValueError(f"problem must be one of {registry.problem_names()} or a 'package.module:Class' "
                         f"reference, got {problem!r}")
    cls = registry.mechanism_class(problem, kind)
    allowed = cls.option_names()
    # every class takes `hardened` (listed only where it can be honoured; the class refuses
    # hardened=True in one line where it cannot)
    unknown = sorted(set(options) - set(allowed) - {"hardened"})
    if unknown:
        raise TypeError(f"unknown option(s) {unknown} for mechanism {kind!r}; allowed options: {allowed}")
    if "hardened" not in options and cls.private:
        if not cls.declares_hardening():
            from kngflow.mechanisms.hardening import HardeningError  # here: it imports numba

            raise HardeningError(_unhardenable_message(problem, kind, cls))
        options = {**options, "hardened": True}
    return cls(**options)


def _unhardenable_message(problem: str, kind: str, cls: type) -> str:
    """The one line :func:`get_mechanism` raises for a private mechanism that declares no
    hardening, built without an explicit ``hardened`` option."""
    return (f"hardened: mechanism {kind!r} ({cls.__name__}) of problem {problem!r} declares no hardening "
            "(kngflow.mechanisms.hardening), so its float64 release can leak through its low bits; pass "
            "hardened=False to build it unhardened (a spec: hardened = false)")

"""Where problems and mechanisms come from: models, entry points and references.

The unit of registration is a **model**: a module exposing ``PROBLEM`` (its problem class)
and ``MECHANISMS`` (``{kind: mechanism class}``).  A spec (or :func:`kngflow.api.get_problem`
/ :func:`kngflow.api.get_mechanism`) names a problem in one of three ways:

1. a model name: a built-in model (:data:`BUILTIN_MODELS`, module strings imported on first
   use, as xarray's ``BACKEND_ENTRYPOINTS``) or a model an installed package registers in
   the entry-point group ``kngflow.models``
   (``[project.entry-points."kngflow.models"] beta_mean = "mypkg.beta_model"``);
2. a name in the older entry-point group ``kngflow.problems`` (one problem class);
3. a reference ``"package.module:Class"`` to any importable problem class.

Mechanism kinds are looked up **per problem**: the kinds of a model are its own
``MECHANISMS`` (so an outside model can offer its own ``"kng"``); a problem that is not a
model lends the kinds of its ``family`` model.  Names in the older group
``kngflow.mechanisms`` and ``"package.module:Class"`` references apply to every problem.

The module must be importable wherever the study runs -- on the client and on every Dask
worker -- as an installed package or on ``PYTHONPATH``.  A name that cannot be resolved
raises :class:`PluginError`, one line naming it and what is wrong.

Listing names (:func:`problem_names`) imports no model module and no numba: it reads
:data:`BUILTIN_MODELS` and the installed distributions' entry-point metadata.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import re
import sys
from importlib import metadata

__all__ = ["PluginError", "ContractError", "BUILTIN_MODELS", "MODEL_GROUP", "ENTRY_POINT_GROUPS", "is_reference", "load_reference",
           "load_model", "model_names", "mechanism_class", "kind_names", "problem_class", "problem_names",
           "provenance"]

#: the built-in models: problem name -> module exposing PROBLEM and MECHANISMS (imported on first use)
BUILTIN_MODELS = {
    "linear": "kngflow.models.linear",
    "quantile": "kngflow.models.quantile",
    "quantreg": "kngflow.models.quantreg",
    "mean": "kngflow.models.mean",
    "geomedian": "kngflow.models.geomedian",
    "logistic": "kngflow.models.logistic",
    "pca": "kngflow.models.pca",
    "svm": "kngflow.models.svm",
    "kmeans": "kngflow.models.kmeans",
    "bayes": "kngflow.models.bayes",
    "bayes_linear": "kngflow.models.bayes_linear",
    "bayes_logistic": "kngflow.models.bayes_logistic",
}

#: the entry-point group of outside models (name -> module exposing PROBLEM and MECHANISMS)
MODEL_GROUP = "kngflow.models"
#: the older entry-point groups: one problem class, or one mechanism kind for every problem
ENTRY_POINT_GROUPS = {"problem": "kngflow.problems", "mechanism": "kngflow.mechanisms"}

_REF = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")
_MODULE = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


class PluginError(ValueError):
    """A model, problem or mechanism name that cannot be resolved (the message is one line)."""


class ContractError(PluginError, TypeError):
    """A class found by name that breaks its contract (a problem without ``d``, ...); also a TypeError."""


def is_reference(name) -> bool:
    """Whether ``name`` is a ``package.module:Class`` reference."""
    return isinstance(name, str) and ":" in name


def _import(module_name: str, what: str):
    try:
        return importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the plug-in's
        why = f"{type(exc).__name__}: {exc}".replace("\n", " ")
        raise PluginError(f"{what}: cannot import module {module_name!r} ({why}); install it, or put "
                          "its folder on PYTHONPATH, on the client and on every worker") from None


def load_reference(ref: str, what: str = "plug-in"):
    """The object ``ref = "package.module:Name"`` points to; :class:`PluginError` otherwise."""
    if not isinstance(ref, str) or not _REF.match(ref):
        raise PluginError(f"{what} reference must look like 'package.module:Class', got {ref!r}")
    module_name, _, attr = ref.partition(":")
    obj = _import(module_name, f"{what} {ref!r}")
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise PluginError(f"{what} {ref!r}: module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


@functools.lru_cache(maxsize=None)
def _entry_points(group: str) -> dict:
    return {ep.name: ep for ep in metadata.entry_points(group=group)}


def _load_entry_point(group: str, name: str, what: str):
    ep = _entry_points(group)[name]
    return load_reference(ep.value.replace(" ", ""), f"{what} {name!r} (entry point of {group})")


def _model_modules() -> dict:
    """``{model name: module string}``: the built-in models, then the ``kngflow.models`` entry points."""
    outside = {name: ep.value.replace(" ", "") for name, ep in _entry_points(MODEL_GROUP).items()}
    return {**outside, **BUILTIN_MODELS}


def model_names() -> list[str]:
    """Names of the built-in models and of those registered in the ``kngflow.models`` group."""
    return sorted(_model_modules())


def problem_names() -> list[str]:
    """Problem names: every model and every ``kngflow.problems`` entry point (imports no model)."""
    return sorted(set(_model_modules()) | set(_entry_points(ENTRY_POINT_GROUPS["problem"])))


@functools.lru_cache(maxsize=None)
def load_model(name: str):
    """The model module ``name`` (built-in or ``kngflow.models`` entry point), checked:
    it exposes a problem class ``PROBLEM`` and a ``MECHANISMS`` table of mechanism classes."""
    modules = _model_modules()
    if name not in modules:
        raise PluginError(f"model must be one of {model_names()}, got {name!r}")
    target = modules[name]
    what = f"model {name!r}" + ("" if name in BUILTIN_MODELS else f" (entry point of {MODEL_GROUP})")
    if _REF.match(target):
        module = load_reference(target, what)
    elif _MODULE.match(target):
        module = _import(target, what)
    else:
        raise PluginError(f"{what} must name a module ('package.model'), got {target!r}")
    missing = [m for m in ("PROBLEM", "MECHANISMS") if not hasattr(module, m)]
    if missing:
        raise PluginError(f"{what}: module {getattr(module, '__name__', target)!r} does not define {missing}; "
                          "a model module exposes PROBLEM (its problem class) and MECHANISMS ({kind: class})")
    if not isinstance(module.MECHANISMS, dict):
        raise PluginError(f"{what}: MECHANISMS must be a dict {{kind: mechanism class}}, "
                          f"got {type(module.MECHANISMS).__name__}")
    return module


def _model_of(problem_name: str) -> str | None:
    """The model whose kinds apply to ``problem_name``: itself, or a problem's ``family``."""
    if isinstance(problem_name, str) and problem_name in _model_modules():
        return problem_name
    try:
        family = problem_class(problem_name).family
    except PluginError:
        return None
    return family if family in _model_modules() else None


def _model_kinds(problem_name: str) -> dict:
    model = _model_of(problem_name)
    return dict(load_model(model).MECHANISMS) if model is not None else {}


def kind_names(problem_name: str) -> list[str]:
    """The mechanism kinds ``problem_name`` accepts: its model's (or its family's) kinds and
    the kinds registered in the ``kngflow.mechanisms`` group."""
    return sorted(set(_model_kinds(problem_name)) | set(_entry_points(ENTRY_POINT_GROUPS["mechanism"])))


def problem_class(name: str) -> type:
    """The problem class ``name`` (a model, a ``kngflow.problems`` entry point or ``package.module:Class``),
    checked against the contract (:func:`kngflow.problems.base.check_problem_class`)."""
    if is_reference(name):
        cls = load_reference(name, "problem")
    elif isinstance(name, str) and name in _model_modules():
        cls = load_model(name).PROBLEM
    elif isinstance(name, str) and name in _entry_points(ENTRY_POINT_GROUPS["problem"]):
        cls = _load_entry_point(ENTRY_POINT_GROUPS["problem"], name, "problem")
    else:
        raise PluginError(f"problem must be one of {problem_names()} or a 'package.module:Class' reference, "
                          f"got {name!r}")
    from kngflow.problems.base import check_problem_class

    try:
        return check_problem_class(cls, name)
    except TypeError as exc:
        raise ContractError(str(exc)) from None


def mechanism_class(problem_name: str, kind: str) -> type:
    """The mechanism class ``kind`` for ``problem_name`` (its model's kind, an entry point or a reference)."""
    if is_reference(kind):
        cls = load_reference(kind, "mechanism")
    else:
        own = _model_kinds(problem_name)
        if isinstance(kind, str) and kind in own:
            cls = own[kind]
        elif isinstance(kind, str) and kind in _entry_points(ENTRY_POINT_GROUPS["mechanism"]):
            cls = _load_entry_point(ENTRY_POINT_GROUPS["mechanism"], kind, "mechanism")
        else:
            raise PluginError(f"mechanism kind must be one of {kind_names(problem_name)} for problem "
                              f"{problem_name!r} or a 'package.module:Class' reference, got {kind!r}")
    from kngflow.mechanisms.base import check_mechanism_class

    try:
        return check_mechanism_class(cls, kind)
    except TypeError as exc:
        raise PluginError(str(exc)) from None


def provenance(cls: type) -> dict:
    """Where a plug-in class comes from: its module, the module file's SHA-256 and the
    version of the installed distribution providing it (None when run from a folder)."""
    module = sys.modules.get(cls.__module__)
    path = getattr(module, "__file__", None)
    digest = None
    if path:
        try:
            with open(path, "rb") as fh:
                digest = hashlib.sha256(fh.read()).hexdigest()
        except OSError:
            digest = None
    version = None
    top = cls.__module__.split(".")[0]
    for dist in metadata.packages_distributions().get(top, []):
        try:
            version = metadata.version(dist)
            break
        except metadata.PackageNotFoundError:
            continue
    return {"module": cls.__module__, "class": cls.__qualname__, "file": path, "sha256": digest, "version": version}

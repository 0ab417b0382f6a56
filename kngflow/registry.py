"""Where problems and mechanisms come from: built-in names, entry points, and references.

A spec (or :func:`kngflow.mechanisms.get_mechanism` / :func:`kngflow.problems.get_problem`)
names a problem or a mechanism kind in one of three ways:

1. a built-in name (``"linear"``; ``"kng"`` for a problem that has it);
2. a name an installed package registers in the entry-point group
   ``kngflow.problems`` or ``kngflow.mechanisms``
   (``[project.entry-points."kngflow.mechanisms"] laplace_mean = "mypkg.mech:LaplaceMean"``);
3. a reference ``"package.module:Class"`` to any importable class.

The module must be importable wherever the study runs -- on the client and on every Dask
worker -- as an installed package or on ``PYTHONPATH``.  A reference that cannot be
resolved raises :class:`PluginError`, one line naming the reference and what is wrong.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import re
import sys
from importlib import metadata

__all__ = ["PluginError", "ENTRY_POINT_GROUPS", "is_reference", "load_reference", "mechanism_class",
           "mechanism_kinds", "problem_class", "problem_names", "provenance"]

#: entry-point groups through which installed packages register names
ENTRY_POINT_GROUPS = {"problem": "kngflow.problems", "mechanism": "kngflow.mechanisms"}

_REF = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


class PluginError(ValueError):
    """A problem or mechanism reference that cannot be resolved (the message is one line)."""


def is_reference(name) -> bool:
    """Whether ``name`` is a ``package.module:Class`` reference."""
    return isinstance(name, str) and ":" in name


def load_reference(ref: str, what: str = "plug-in"):
    """The object ``ref = "package.module:Name"`` points to; :class:`PluginError` otherwise."""
    if not isinstance(ref, str) or not _REF.match(ref):
        raise PluginError(f"{what} reference must look like 'package.module:Class', got {ref!r}")
    module_name, _, attr = ref.partition(":")
    try:
        obj = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the plug-in's
        why = f"{type(exc).__name__}: {exc}".replace("\n", " ")
        raise PluginError(f"{what} {ref!r}: cannot import module {module_name!r} ({why}); install it, or put "
                          "its folder on PYTHONPATH, on the client and on every worker") from None
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


def _builtin_mechanisms() -> dict:
    from kngflow.mechanisms import MECHANISMS

    return MECHANISMS


def _builtin_problems() -> dict:
    from kngflow.problems import PROBLEMS

    return PROBLEMS


def problem_names() -> list[str]:
    """Built-in problem names and those registered through entry points."""
    return sorted(set(_builtin_problems()) | set(_entry_points(ENTRY_POINT_GROUPS["problem"])))


def _family(problem_name: str) -> str:
    """The built-in problem whose mechanism kinds apply to ``problem_name`` (itself, or a plug-in's ``family``)."""
    if problem_name in _builtin_problems():
        return problem_name
    try:
        return problem_class(problem_name).family or ""
    except PluginError:
        return ""


def mechanism_kinds(problem_name: str) -> list[str]:
    """Built-in kinds of ``problem_name`` (or of its family) and the kinds registered through entry points."""
    builtin = _builtin_mechanisms().get(_family(problem_name), {})
    return sorted(set(builtin) | set(_entry_points(ENTRY_POINT_GROUPS["mechanism"])))


def problem_class(name: str) -> type:
    """The problem class ``name`` (built-in, entry point or ``package.module:Class``)."""
    if is_reference(name):
        cls = load_reference(name, "problem")
    elif isinstance(name, str) and name in _builtin_problems():
        return _builtin_problems()[name]
    elif isinstance(name, str) and name in _entry_points(ENTRY_POINT_GROUPS["problem"]):
        cls = _load_entry_point(ENTRY_POINT_GROUPS["problem"], name, "problem")
    else:
        raise PluginError(f"problem must be one of {problem_names()} or a 'package.module:Class' reference, "
                          f"got {name!r}")
    from kngflow.problems.base import check_problem_class

    try:
        return check_problem_class(cls, name)
    except TypeError as exc:
        raise PluginError(str(exc)) from None


def mechanism_class(problem_name: str, kind: str) -> type:
    """The mechanism class ``kind`` for ``problem_name`` (built-in, entry point or reference)."""
    if is_reference(kind):
        cls = load_reference(kind, "mechanism")
    else:
        builtin = _builtin_mechanisms().get(_family(problem_name), {})
        if isinstance(kind, str) and kind in builtin:
            return builtin[kind]
        if isinstance(kind, str) and kind in _entry_points(ENTRY_POINT_GROUPS["mechanism"]):
            cls = _load_entry_point(ENTRY_POINT_GROUPS["mechanism"], kind, "mechanism")
        else:
            raise PluginError(f"mechanism kind must be one of {mechanism_kinds(problem_name)} for problem "
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

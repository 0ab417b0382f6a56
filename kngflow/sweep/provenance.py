"""Provenance and preflight of a run: where the code comes from, and whether every process runs the same.

* :func:`package_versions` / :func:`git_revision`: what a store records about the code
  that wrote it;
* :func:`runtime_versions`, :func:`version_mismatch`, :func:`check_workers`: the client,
  every worker and every task run the same kngflow, numpy and numba
  (:data:`MATCHED_PACKAGES`) and the same plug-in files (by SHA-256);
* :func:`plugin_classes` / :func:`plugin_modules` / :func:`preflight`: a spec's plug-ins,
  released once on a trial stream before anything starts;
* the errors a run stops with: :class:`VersionMismatch`, :class:`PluginFailure`,
  :class:`SchedulerLost`, :class:`WorkersLost`.
"""

from __future__ import annotations

import functools
import platform
import re
import traceback
from pathlib import Path

import numpy as np

from .spec import Spec

__all__ = ["plugin_classes", "plugin_modules", "preflight", "PluginFailure", "package_versions", "git_revision",
           "runtime_versions", "MATCHED_PACKAGES", "version_mismatch", "check_workers", "VersionMismatch",
           "SchedulerLost", "WorkersLost", "scheduler_lost"]


def plugin_classes(spec: Spec) -> list[type]:
    """The problem and mechanism classes of ``spec`` that come from outside kngflow."""
    from kngflow.registry import mechanism_class, problem_class

    classes = [problem_class(spec.problem_name)] + [mechanism_class(spec.problem_name, m.kind) for m in spec.mechanisms]
    out = []
    for cls in classes:
        if cls.__module__.split(".")[0] != "kngflow" and cls not in out:
            out.append(cls)
    return out


#: Runtime dependencies recorded when kngflow's own metadata cannot be read (not installed).
_RUNTIME = ("numpy", "scipy", "numba", "dask", "distributed", "xarray", "zarr", "dp-accounting", "statsmodels")


def _runtime_dependencies() -> list[str]:
    """Names of kngflow's runtime dependencies, from its installed metadata."""
    import importlib.metadata as md

    try:
        requires = md.requires("kngflow") or []
    except md.PackageNotFoundError:
        return list(_RUNTIME)
    names = [re.match(r"[A-Za-z0-9_.-]+", r).group(0) for r in requires if "extra ==" not in r]
    return sorted(set(names) | {"distributed"}, key=str.lower)


@functools.lru_cache(maxsize=1)
def git_revision() -> str | None:
    """``git describe``-like revision of the checkout kngflow is imported from (None if not one).

    ``<commit>`` or ``<commit>+dirty`` when tracked files differ from it; None
    when kngflow is installed from a wheel, or git is missing.
    """
    import subprocess

    import kngflow

    root = Path(kngflow.__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+dirty" if dirty else "")


def package_versions() -> dict:
    """Provenance of a store: Python, the platform, kngflow (and its git revision when it is
    imported from a checkout) and every runtime dependency's version."""
    import importlib.metadata as md

    import kngflow

    out = {"python": platform.python_version(), "platform": platform.platform(), "kngflow": kngflow.__version__,
           "kngflow_git": git_revision()}
    for pkg in _runtime_dependencies():
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = None
    return out


#: Packages whose version must be the same on the client and on every worker: they decide
#: the released values (kngflow's code, numpy's generators, numba's compiled kernels).
MATCHED_PACKAGES = ("kngflow", "numpy", "numba")


_MODULE = "module "  # key prefix of a plug-in module in runtime_versions


def _module_state(name: str) -> str:
    """SHA-256 of plug-in module ``name``'s file, or why it cannot be imported here."""
    import hashlib
    import importlib

    try:
        module = importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - reported as the plug-in's problem
        return f"cannot import ({type(exc).__name__}: {exc})".replace("\n", " ")
    try:
        with open(module.__file__, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except (OSError, TypeError):
        return "no file"


def runtime_versions(modules=()) -> dict:
    """The versions of :data:`MATCHED_PACKAGES` in this process (as imported), and the
    state of each plug-in module in ``modules`` (its file's SHA-256, or why it does not import)."""
    import numba

    import kngflow

    out = {"kngflow": kngflow.__version__, "numpy": np.__version__, "numba": numba.__version__}
    for name in modules:
        out[_MODULE + name] = _module_state(name)
    return out


def _message(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" (at {Path(tb[-1].filename).name}:{tb[-1].lineno} in {tb[-1].name})" if tb else ""
    return f"{type(exc).__name__}: {exc}{where}"


class PluginFailure(RuntimeError):
    """A plug-in fails its trial release (the message is one line naming it)."""


#: spawn key of the trial stream of :func:`preflight` (no study stream has it)
_PREFLIGHT_KEY = (0x706C7567,)


def preflight(spec: Spec) -> None:
    """Try every plug-in once, on the client, before anything is written or started.

    A plug-in problem simulates a data set at the smallest n; each plug-in mechanism (every
    mechanism when the problem is a plug-in) releases once on it at the first ε, and the
    release must be a :class:`~kngflow.mechanisms.Release` whose estimate has ``d``
    coefficients and whose declared diagnostics can be stored.  The stream is a trial
    stream, never a study's.  Raises :class:`PluginFailure` naming the plug-in.
    """
    plugins = plugin_classes(spec)
    if not plugins:
        return
    from kngflow.mechanisms.base import release_problem

    problem, mechanisms = spec.problem(), spec.build_mechanisms()
    n, eps, d = int(min(spec.n)), float(spec.epsilon[0]), int(problem.d)
    rng = np.random.default_rng(np.random.SeedSequence(spec.seed, spawn_key=_PREFLIGHT_KEY))
    try:
        data = problem.simulate(n, rng)
    except Exception as exc:  # noqa: BLE001 - the plug-in's failure, named
        raise PluginFailure(f"problem {spec.problem_name!r}: simulate(n={n}) failed: {_message(exc)}") from None
    for m in spec.mechanisms:
        mech = mechanisms[m.label]
        if type(mech) not in plugins and type(problem) not in plugins:
            continue
        where = f"mechanism {m.label!r} ({m.kind})"
        try:
            rel = mech.release(data, epsilon=eps, rng=rng)
        except Exception as exc:  # noqa: BLE001 - the plug-in's failure, named
            raise PluginFailure(f"{where}: release failed on a trial data set (n={n}, epsilon={eps:g}): "
                                f"{_message(exc)}") from None
        why = release_problem(rel, d)
        if why:
            raise PluginFailure(f"{where}: {why}")
        try:
            [dg.value(rel.info) for dg in type(mech).diagnostics]
            float(problem.error(np.asarray(rel.estimate, dtype=np.float64)))
        except Exception as exc:  # noqa: BLE001 - the plug-in's failure, named
            raise PluginFailure(f"{where}: its release cannot be stored: {_message(exc)}") from None


def plugin_modules(spec: Spec) -> tuple:
    """Modules of the spec's plug-ins (classes from outside kngflow), which every worker must import."""
    return tuple(dict.fromkeys(cls.__module__ for cls in plugin_classes(spec)))


def _modules(expected: dict) -> tuple:
    return tuple(k[len(_MODULE):] for k in expected if k.startswith(_MODULE))


class VersionMismatch(RuntimeError):
    """A worker runs another version of kngflow, numpy or numba than the client."""


class SchedulerLost(RuntimeError):
    """The run lost its connection to the Dask scheduler (the cells written so far are kept)."""


class WorkersLost(SchedulerLost):
    """Every worker left the run and none joined within the bound (the cells written so far are kept)."""


def scheduler_lost(exc: BaseException) -> SchedulerLost:
    return SchedulerLost(
        f"lost the Dask scheduler ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
        "the cells done so far are saved: run the same command again, against a running scheduler, to resume"
    )


def version_mismatch(expected: dict, found: dict, where: str) -> str | None:
    """One line naming the first package whose version differs (None if all match)."""
    for pkg in MATCHED_PACKAGES:
        if found.get(pkg) != expected.get(pkg):
            return (
                f"{where} runs {pkg} {found.get(pkg)} but the client runs {pkg} {expected.get(pkg)}; "
                f"install the same {', '.join(MATCHED_PACKAGES)} versions everywhere (the results depend on them)"
            )
    for name in _modules(expected):
        state = found.get(_MODULE + name)
        if state == expected[_MODULE + name]:
            continue
        if state is None or state.startswith("cannot import"):
            return (f"{where} cannot import plug-in module {name!r} {state or ''}; install it, or put its folder on "
                    "PYTHONPATH, on every worker").replace("  ", " ")
        return (f"{where} runs another version of plug-in module {name!r} than the client (its file differs); "
                "use the same file everywhere (the results depend on it)")
    return None


def check_workers(client, expected: dict | None = None, workers=None) -> None:
    """Raise :class:`VersionMismatch` if a worker's :func:`runtime_versions` differ from
    ``expected`` (default: this process's).  ``workers``: addresses to ask (default all)."""
    expected = expected or runtime_versions()
    if workers is not None and not workers:
        return
    try:
        found = client.run(runtime_versions, _modules(expected),
                           workers=list(workers) if workers is not None else None)
    except Exception:  # noqa: BLE001 - a worker that left; every task checks its worker anyway
        return
    for addr, versions in sorted(found.items()):
        why = version_mismatch(expected, versions, f"worker {addr}")
        if why:
            raise VersionMismatch(why)

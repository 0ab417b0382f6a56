"""Run a study on Dask: prepare the store, plan tasks, submit them with bounded concurrency.

Workers never open the store.  A task (:func:`compute_block`, on a worker)
computes the missing cells of a block of replicates of one n and returns them as
a :class:`~kngflow.store.Block` of numpy arrays; the client (:func:`run_sweep`)
hands each block to one :class:`~kngflow.store.StoreWriter`, which writes large,
compact chunks from a background thread, results before ``done`` flags.  Tasks
come lazily from :func:`~kngflow.sweep.plan.iter_tasks` and at most
``max_in_flight`` futures exist at a time (``distributed.as_completed``, topped
up as tasks finish, finished ones gathered in batches), so the client's memory
does not grow with the grid.  How many futures, and how long the tasks, follows
the cluster as workers join and leave (:class:`_Window`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import platform
import re
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kngflow import store as st

from . import seeds
from .plan import (
    CostModel,
    Task,
    count_tasks,
    default_chunks,
    default_task_timeout,
    estimate,
    iter_tasks,
    scaled_cost,
)
from .spec import Spec, parse_spec

__all__ = [
    "check_store",
    "prepare_store",
    "compute_block",
    "run_task",
    "mark_task_failed",
    "run_sweep",
    "RunResult",
    "store_attrs",
    "store_progress",
    "SpecMismatch",
    "VersionMismatch",
    "diagnostics",
    "plugin_classes",
    "plugin_modules",
    "preflight",
    "PluginFailure",
    "SchedulerLost",
    "WorkersLost",
    "check_workers",
    "package_versions",
    "runtime_versions",
]

class SpecMismatch(st.StoreError):
    """The store was made from a spec that the given one does not merely extend."""


def diagnostics(mechanisms: dict) -> dict:
    """``name -> Diagnostic``: the diagnostics the mechanisms declare (their union, in order)."""
    out = {}
    for m in mechanisms.values():
        for diag in type(m).diagnostics:
            out.setdefault(diag.name, diag)
    return out


def _cell_variables(mechanisms: dict) -> dict:
    """The store's per-cell diagnostic variables: ``name -> (dtype, fill)``."""
    return {name: (diag.dtype, diag.fill) for name, diag in diagnostics(mechanisms).items()}


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


def store_attrs(spec: Spec, history: list | None = None) -> dict:
    import kngflow
    from kngflow.registry import provenance

    problem = spec.problem()
    mechs = spec.build_mechanisms()
    return {
        "spec": spec.text,
        "spec_hash": spec.hash,
        "spec_canonical": json.dumps(spec.canonical(), sort_keys=True),
        "spec_history": json.dumps(history or []),
        "versions": json.dumps(package_versions(), sort_keys=True),
        "caveats": _caveats(problem, mechs),
        # what theta_star is (error = the distance to it): "truth" unless the problem says otherwise
        "reference": str(problem.reference),
        # delta of each mechanism's privacy claim (0: pure epsilon-DP), read by the analysis and the report
        "delta": json.dumps({label: float(m.privacy_claim().delta) for label, m in mechs.items()}, sort_keys=True),
        # non-private reference estimators, and the data variable with the reference's standard errors
        "nonprivate_labels": json.dumps([label for label, m in mechs.items() if not m.private]),
        # whether each private mechanism's releases were hardened (snapped to a public grid:
        # kngflow.mechanisms.hardening), read by the report
        "hardened": json.dumps({label: bool(m.hardened) for label, m in mechs.items() if m.private}, sort_keys=True),
        "reference_stderr": str(problem.reference_stderr or ""),
        # where each plug-in (a class from outside kngflow) comes from
        "plugins": json.dumps([provenance(cls) for cls in plugin_classes(spec)], sort_keys=True),
        "problem": spec.problem_name,
        "kngflow_version": kngflow.__version__,
        "seed": spec.seed,
        "title": spec.name,
    }


def _caveats(problem, mechs: dict) -> str:
    """The problem's caveats, then what the floating-point releases cover: which private
    mechanisms' releases were hardened (snapped to a public grid) and which were not."""
    hard = [label for label, m in mechs.items() if m.private and m.hardened]
    soft = [label for label, m in mechs.items() if m.private and not m.hardened]
    parts = [str(problem.caveats).strip()] if str(problem.caveats).strip() else []
    if hard:
        parts.append(f"releases of {', '.join(hard)} were hardened: snapped to a public grid with a uniform dither "
                     "(kngflow.mechanisms.hardening), (epsilon', delta')-DP as kngflow audit prints")
    if soft:
        parts.append(f"releases of {', '.join(soft)} were not hardened: their float64 low bits depend on the data "
                     "(a floating-point attack reads more than epsilon from them; fine for simulation studies, "
                     "not for publishing releases of real data)")
    return "; ".join(parts)


def _data_variables(problem) -> dict:
    """The problem's per-data-set store variables: name -> (dims, dtype, fill)."""
    return st.check_data_variables(problem.data_variables)


#: Variable attribute ``privacy``: only ``estimate`` is a differentially private release.
NOT_PRIVATE = (
    "not private: depends on the data; a diagnostic for simulation studies on synthetic data, "
    "never to be published for real data"
)


def _variable_attrs(problem, mechanisms: dict) -> dict:
    attrs = {
        "done": {"flag_values": [0, 1], "flag_meanings": "missing done"},
        "failed": {"flag_values": [0, 1], "flag_meanings": "ok failed_after_retries"},
        "estimate": {
            "long_name": "released estimate, original units",
            "privacy": "the release: epsilon-DP for every private mechanism (see the mechanism's docstring and caveats)",
        },
        "error": {"long_name": "||estimate - theta_star||_2", "privacy": "uses the true parameter; simulation metric"},
        "seconds": {"long_name": "wall seconds of the release (excludes data simulation)", "units": "s", "privacy": NOT_PRIVATE},
    }
    for name, diag in diagnostics(mechanisms).items():
        attrs[name] = {**diag.attrs(), "privacy": NOT_PRIVATE}
    for name, decl in problem.data_variables.items():
        attrs[name] = {**(dict(decl[3]) if len(decl) > 3 else {}), "privacy": NOT_PRIVATE}
    return attrs


def _diff_specs(old: dict, new: dict) -> list[str]:
    """Reasons why ``new`` is not ``old`` plus extra cells (empty list: it only adds)."""
    why = []
    for key in ("seed", "problem", "sampler"):
        if old.get(key) != new.get(key):
            why.append(f"{key} differs (store: {old.get(key)!r}, spec: {new.get(key)!r})")
    new_mechs = {m["label"]: m for m in new["mechanisms"]}
    for m in old["mechanisms"]:
        nm = new_mechs.get(m["label"])
        if nm is None:
            why.append(f"mechanism {m['label']!r} is in the store but not in the spec")
        elif nm != m:
            why.append(f"mechanism {m['label']!r} differs (store: {m}, spec: {nm})")
    for axis in ("n", "epsilon", "replicates"):
        missing = [v for v in old["grid"][axis] if v not in set(new["grid"][axis])]
        if missing:
            shown = [float.fromhex(v) if isinstance(v, str) else v for v in missing]
            why.append(f"grid.{axis} drops values present in the store: {shown}")
    return why


def _inspect(spec: Spec, path: Path):
    """``(action, meta)``: what the store at ``path`` needs for ``spec``; reads only metadata."""
    if not path.exists():
        return "create", None
    meta = st.read_meta(path)
    if meta.attrs.get("spec_hash") == spec.hash:
        return "resume", meta
    why = _diff_specs(json.loads(meta.attrs["spec_canonical"]), spec.canonical())
    if why:
        raise SpecMismatch(
            f"store {path} was made from a different spec (hash {meta.attrs['spec_hash'][:12]}, "
            f"this spec {spec.hash[:12]}); only adding n, epsilon, mechanisms or replicates is allowed:\n  - "
            + "\n  - ".join(why)
        )
    return "extend", meta


def check_store(spec: Spec, path) -> str:
    """What :func:`prepare_store` would do, without writing anything.

    Returns ``"create"``, ``"resume"`` or ``"extend"``; raises :class:`SpecMismatch`
    (or :class:`~kngflow.store.StoreError` for a path that is no kngflow store)
    exactly when :func:`prepare_store` would, so a caller can refuse bad input
    before it starts a cluster or creates a store.
    """
    return _inspect(spec, Path(path))[0]


def prepare_store(spec: Spec, path, *, replicate_chunk: int | None = None):
    """Create the store for ``spec``, or check (and if needed extend) an existing one.

    A new store gets :func:`~kngflow.sweep.plan.default_chunks` (a few MB of
    ``estimate`` per chunk, whatever the tasks); ``replicate_chunk`` forces the
    replicate chunk length (and one n per chunk).  Returns ``(meta, action)`` with action ``"created"``, ``"resumed"`` or
    ``"extended"``.  Raises :class:`SpecMismatch` when the store holds another
    study (anything but added n, ε, mechanisms or replicates).
    """
    path = Path(path)
    action, meta = _inspect(spec, path)
    if action == "resume":
        return meta, "resumed"
    mechanisms = spec.build_mechanisms()
    if action != "create":
        missing = sorted(set(_cell_variables(mechanisms)) - set(st.cell_variable_names(path)))
        if missing:
            raise SpecMismatch(f"the spec's mechanisms declare diagnostics {missing} that the store {path} lacks; "
                               "write these mechanisms to a new store (--store)")
    if action == "create":
        problem = spec.problem()
        sizes = {"mechanism": len(spec.labels), "n": len(spec.n), "epsilon": len(spec.epsilon),
                 "replicate": len(spec.replicates)}
        chunks = default_chunks(sizes, int(problem.d))
        if replicate_chunk is not None:
            chunks.update(replicate=int(replicate_chunk), n=1)
        meta = st.create_store(
            path,
            coords={
                "mechanism": list(spec.labels),
                "n": list(spec.n),
                "epsilon": list(spec.epsilon),
                "replicate": list(spec.replicates),
                "coef": list(range(problem.d)),
            },
            chunks=chunks,
            theta_star=problem.theta_star,
            attrs=store_attrs(spec),
            variable_attrs=_variable_attrs(problem, mechanisms),
            data_variables=_data_variables(problem),
            cell_variables=_cell_variables(mechanisms),
        )
        return meta, "created"
    have = {d: set(meta.coords[d].tolist()) for d in ("mechanism", "n", "epsilon", "replicate")}
    new = {
        "mechanism": [x for x in spec.labels if x not in have["mechanism"]],
        "n": [x for x in spec.n if x not in have["n"]],
        "epsilon": [x for x in spec.epsilon if x not in have["epsilon"]],
        "replicate": [x for x in spec.replicates if x not in have["replicate"]],
    }
    history = json.loads(meta.attrs.get("spec_history", "[]")) + [meta.attrs["spec_hash"]]
    meta = st.extend_store(path, new, store_attrs(spec, history))
    return meta, "extended"


# --------------------------------------------------------------------------- worker side
@functools.lru_cache(maxsize=8)
def _context(spec_text: str):
    spec = parse_spec(spec_text)
    return spec, spec.problem(), spec.build_mechanisms()


def _message(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" (at {Path(tb[-1].filename).name}:{tb[-1].lineno} in {tb[-1].name})" if tb else ""
    return f"{type(exc).__name__}: {exc}{where}"


def _record(label: str, n: int, eps: float, rep: int, message: str) -> dict:
    return {"mechanism": str(label), "n": int(n), "epsilon": float(eps), "replicate": int(rep), "message": message}


def timeout_message(seconds: float) -> str:
    return f"task timeout: the task exceeded --task-timeout {seconds:g} s; cell not computed"


def _check_here(expect: dict) -> None:
    """Raise :class:`VersionMismatch` if this process runs other versions than ``expect``."""
    why = version_mismatch(expect, runtime_versions(_modules(expect)), "this process")
    if why:
        try:
            from distributed import get_worker

            why = why.replace("this process", f"worker {get_worker().address}", 1)
        except (ImportError, ValueError):
            pass
        raise VersionMismatch(why)


def compute_block(
    spec_text: str, labels, epsilons, task: Task, timeout: float | None = None, expect: dict | None = None
) -> st.Block:
    """Compute the missing cells of ``task`` (on a worker; the store is never opened).

    ``labels`` and ``epsilons`` are the store's mechanism and ε coordinates (their
    order is the store's).  Each replicate's data are simulated once and serve
    every (mechanism, ε); every stream comes from :mod:`kngflow.sweep.seeds`, so
    the values do not depend on the task's extent or on where it runs.  An
    exception in one release (or in the simulation of one replicate) marks those
    cells failed with its message and the task goes on.  Once ``timeout``
    seconds have passed, the cells not yet computed are marked failed with
    :func:`timeout_message`.  Anything else (a killed worker) propagates so that
    Dask retries the task.  With ``expect`` (the client's :func:`runtime_versions`),
    a process running other versions raises :class:`VersionMismatch` before
    computing anything.
    """
    t_start = time.perf_counter()
    if expect is not None:
        _check_here(expect)
    spec, problem, mechanisms = _context(spec_text)
    M, E, R = len(labels), len(epsilons), task.stop - task.start
    d = int(problem.d)
    need = np.ones((M, E, R), dtype=bool) if task.need is None else task.need
    cells = st.empty_cells((M, E, R), d, _cell_variables(mechanisms))
    data_vars = _data_variables(problem)
    data = {v: np.full((R,) + ((d,) if "coef" in dims else ()), fill, dtype=dtype)
            for v, (dims, dtype, fill) in data_vars.items()}
    simulated = np.zeros(R, dtype=bool)
    est, err, sec, done, failed = (cells[k] for k in ("estimate", "error", "seconds", "done", "failed"))
    mechs = [mechanisms[str(lab)] for lab in labels]
    declared = [[(cells[dg.name], dg) for dg in type(m).diagnostics] for m in mechs]
    failures = []
    late = None
    for j in range(R):
        rep = int(task.replicates[j])
        todo = need[:, :, j]
        if not todo.any():
            continue
        if timeout is not None and time.perf_counter() - t_start > timeout:
            late = timeout_message(timeout)
        if late is None:
            try:
                stats = problem.simulate(task.n, seeds.data_rng(spec.seed, spec.problem_name, task.n, rep))
                for v, value in problem.data_summary(stats).items():
                    data[v][j] = value
                simulated[j] = True
            except Exception as exc:  # noqa: BLE001 - recorded per cell
                stats, reason = None, "simulate: " + _message(exc)
        for a in range(M):
            for b in range(E):
                if not todo[a, b]:
                    continue
                if late is None and timeout is not None and time.perf_counter() - t_start > timeout:
                    late = timeout_message(timeout)
                if late is not None or stats is None:
                    failed[a, b, j] = 1
                    failures.append(_record(labels[a], task.n, epsilons[b], rep, late or reason))
                    continue
                label, eps = labels[a], epsilons[b]
                rng = seeds.release_rng(spec.seed, spec.problem_name, task.n, rep, label, eps)
                try:
                    t0 = time.perf_counter()
                    rel = mechs[a].release(stats, epsilon=eps, rng=rng)
                    dt = time.perf_counter() - t0
                    e = np.asarray(rel.estimate, dtype=np.float64)
                    if e.shape != (d,):
                        raise ValueError(f"estimate has shape {e.shape}, expected ({d},)")
                    er = float(problem.error(e))
                    values = [dg.value(rel.info) for _, dg in declared[a]]
                except Exception as exc:  # noqa: BLE001 - recorded per cell
                    failed[a, b, j] = 1
                    failures.append(_record(label, task.n, eps, rep, _message(exc)))
                    continue
                est[a, b, j] = e
                err[a, b, j] = er
                sec[a, b, j] = dt
                for (arr, _), v in zip(declared[a], values):
                    arr[a, b, j] = v
                done[a, b, j] = 1
    return st.Block(
        n_index=task.n_index,
        start=task.start,
        stop=task.stop,
        cells=cells,
        mask=task.need,
        data=data,
        data_mask=None if simulated.all() else simulated,
        failures=failures,
    )


def failed_block(labels, epsilons, d: int, task: Task, message: str) -> st.Block:
    """Client side: a task that did not return marks its missing cells failed with ``message``."""
    M, E, R = len(labels), len(epsilons), task.stop - task.start
    cells = st.empty_cells((M, E, R), d)
    need = np.ones((M, E, R), dtype=bool) if task.need is None else task.need
    cells["failed"][need] = 1
    records = [
        _record(labels[a], task.n, epsilons[b], task.replicates[j], message) for a, b, j in zip(*np.nonzero(need))
    ]
    return st.Block(task.n_index, task.start, task.stop, cells, mask=task.need, failures=records)


def _store_axes(meta):
    return [str(x) for x in meta.coords["mechanism"]], [float(x) for x in meta.coords["epsilon"]]


def mark_task_failed(store_path, meta, task: Task, message: str) -> list[dict]:
    """Flag the missing cells of ``task`` failed with ``message`` in the store (without Dask)."""
    labels, epsilons = _store_axes(meta)
    block = failed_block(labels, epsilons, len(meta.coords["coef"]), task, message)
    st.write_blocks(store_path, [block])
    return block.failures


def run_task(store_path, spec_text: str, meta, task: Task, timeout: float | None = None) -> dict:
    """Compute ``task`` in this process and write it (what a run does, without Dask)."""
    labels, epsilons = _store_axes(meta)
    block = compute_block(spec_text, labels, epsilons, task, timeout)
    st.write_blocks(store_path, [block])
    return _summary(block)


def _summary(block: st.Block) -> dict:
    mask = block.mask if block.mask is not None else np.ones(block.cells["done"].shape, bool)
    return {
        "computed": int(np.count_nonzero(mask)),
        "done": int(np.count_nonzero(block.cells["done"][mask])),
        "failed": int(np.count_nonzero(block.cells["failed"][mask])),
        "failures": block.failures[:20],
    }


# --------------------------------------------------------------------------- client side
@dataclass
class RunResult:
    """What a run did: counts over the whole store after the run, and its failures.

    ``computed`` counts the cells that this run's tasks released.
    """

    action: str
    total: int
    done_before: int
    done: int
    failed: int
    tasks: int
    seconds: float
    failures: list = field(default_factory=list)
    computed: int = 0

    @property
    def ok(self) -> bool:
        return self.failed == 0 and self.done == self.total


def _progress(meta, done: np.ndarray, spec: Spec) -> dict:
    """``{n: (cells done, replicates complete)}`` of a store for :func:`~kngflow.sweep.plan.estimate`."""
    full = set(spec.labels) <= set(meta.coords["mechanism"]) and set(spec.epsilon) <= set(meta.coords["epsilon"])
    out = {}
    for i, n in enumerate(meta.coords["n"]):
        block = done[:, i] != 0
        out[int(n)] = (int(np.count_nonzero(block)), int(np.count_nonzero(block.all(axis=(0, 1)))) if full else 0)
    return out


def store_progress(spec: Spec, path) -> dict | None:
    """What the store at ``path`` already holds of ``spec`` (None: no store yet; reads flags only)."""
    if check_store(spec, path) == "create":
        return None
    return _progress(st.read_meta(path), st.read_flags(path)[0], spec)


class _Window:
    """The run's view of the cluster, re-read every ``every`` seconds while it runs.

    ``threads`` is what the workers present have; ``capacity`` is at least that,
    and the adaptive maximum (in threads) when the client's own cluster adapts,
    so that an adaptive cluster sees enough queued work to grow.  About two
    futures per thread of ``capacity`` are kept in flight, and tasks are cut
    long enough that the scheduler sees at most
    :data:`~kngflow.sweep.plan.MAX_TASK_RATE` tasks per second.  Workers seen
    for the first time are asked for their :func:`runtime_versions`.
    """

    def __init__(self, client, cost: CostModel, *, fixed: int | None = None, every: float = 2.0,
                 expect: dict | None = None, worker_timeout: float | None = None):
        self.client, self.cost, self.fixed, self.every, self.expect = client, cost, fixed, every, expect
        self.worker_timeout = worker_timeout
        self._seen = False  # some worker was present: from then on, no worker at all is a loss
        self._empty_since: float | None = None
        self.known: set = set()
        self.threads = self.capacity = 0
        self._at = -math.inf
        self.refresh(force=True)

    def refresh(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._at < self.every:
            return
        self._at = now
        try:
            nthreads = self.client.nthreads()
        except OSError as exc:  # CommClosedError, connection refused or timed out
            raise scheduler_lost(exc) from None
        self._check_lost(bool(nthreads), now)
        if self.expect is not None:
            check_workers(self.client, self.expect, set(nthreads) - self.known)
        self.known = set(nthreads)
        self.threads = sum(nthreads.values())
        self.capacity = max(self.threads, self._adaptive_threads(len(nthreads)))

    def _check_lost(self, present: bool, now: float) -> None:
        """Raise :class:`WorkersLost` once no worker has been present for ``worker_timeout`` s after
        some were (an adaptive cluster the client owns brings its own workers back: never)."""
        if present or self.worker_timeout is None:
            self._seen = self._seen or present
            self._empty_since = None
            return
        adaptive = getattr(getattr(self.client, "cluster", None), "_adaptive", None)
        if not self._seen or getattr(adaptive, "state", None) in ("starting", "running"):
            return
        if self._empty_since is None:
            self._empty_since = now
        elif now - self._empty_since >= self.worker_timeout:
            raise WorkersLost(
                f"every Dask worker left the run and none joined within {self.worker_timeout:g} s "
                "(--connect-timeout); the cells done so far are saved: start workers, then run the same "
                "command again to resume"
            )

    def _adaptive_threads(self, workers: int) -> int:
        adaptive = getattr(getattr(self.client, "cluster", None), "_adaptive", None)
        maximum = getattr(adaptive, "maximum", None)
        if getattr(adaptive, "state", None) not in ("starting", "running") or not math.isfinite(maximum or math.inf):
            return 0
        return int(maximum * (self.threads / workers if workers else 1))

    @property
    def in_flight(self) -> int:
        return self.fixed or max(4, 2 * self.capacity)

    def sizing(self) -> tuple[CostModel, int]:
        """``(cost model, ramp)`` for the next task (:func:`~kngflow.sweep.plan.iter_tasks`)."""
        return scaled_cost(self.cost, max(1, self.capacity)), self.threads


def run_sweep(
    spec: Spec,
    store_path,
    client,
    *,
    replicate_chunk: int | None = None,
    cost: CostModel | None = None,
    max_in_flight: int | None = None,
    retries: int = 2,
    task_timeout: float | None = None,
    flush_seconds: float = 2.0,
    progress: bool = True,
    log=print,
    prepared=None,
    check_versions: bool = True,
    refresh_seconds: float = 2.0,
    worker_timeout: float | None = None,
) -> RunResult:
    """Compute every missing cell of ``spec`` into ``store_path`` on ``client``'s cluster.

    Re-running with the same spec resumes: only cells whose ``done`` flag is 0
    are computed (failed cells are retried).  Results do not depend on the
    number of workers, their arrival or departure, the batching or the order of
    completion.  The workers only need ``import kngflow``: they never see
    ``store_path``.

    The run follows the cluster (:class:`_Window`): every ``refresh_seconds`` it
    re-reads the workers and threads present (and the adaptive maximum of a
    cluster the client owns), keeps about two futures per thread in flight
    (``max_in_flight`` fixes the number), and cuts longer tasks as the cluster
    grows.  Finished futures are gathered in batches.  A worker that retires
    (``dask worker --lifetime``) or dies hands its tasks back to the scheduler,
    which runs them elsewhere; no cell is lost or written twice.

    ``check_versions``: every worker, present or joining later, must run the
    client's kngflow, numpy and numba (:data:`MATCHED_PACKAGES`); otherwise
    :class:`VersionMismatch` is raised (before anything is computed for a
    worker present at the start; each task also checks its worker before it
    computes).

    ``task_timeout`` (seconds; default :func:`default_task_timeout`) bounds a
    task: a worker stops computing a task past it, and the client cancels a
    task that has not returned ``2 × task_timeout + 10`` s after its submission
    (a task may wait for one other task before it starts; a kernel that never
    returns cannot be interrupted inside the worker).  Either way its cells are
    marked failed with the reason.  ``flush_seconds`` is the longest a finished
    block waits in the client before it is written.  ``prepared`` is the result
    of :func:`prepare_store` when the caller already called it.

    ``worker_timeout`` (seconds; default: wait for ever): once every worker has left
    (killed, or their jobs ended), the run waits this long for one to join, then stops
    with :class:`WorkersLost` (not with a cluster the client owns that adapts: it starts
    workers itself).  A lost scheduler stops the run with :class:`SchedulerLost`.  Either
    way the cells written so far are kept and a rerun resumes.
    """
    from distributed import as_completed

    t0 = time.perf_counter()
    cost = cost or CostModel()
    store_path = str(Path(store_path).resolve())
    expect = runtime_versions(plugin_modules(spec)) if check_versions else None
    window = _Window(client, cost, fixed=max_in_flight, every=refresh_seconds, expect=expect,
                     worker_timeout=worker_timeout)
    if prepared is None:
        prepared = prepare_store(spec, store_path, replicate_chunk=replicate_chunk)
    meta, action = prepared
    labels, epsilons = _store_axes(meta)
    d = len(meta.coords["coef"])
    done, _failed = st.read_flags(store_path)
    total = int(done.size)
    done_before = int(np.count_nonzero(done))
    if task_timeout is None:
        task_timeout = default_task_timeout(estimate(spec, cost, progress=_progress(meta, done, spec)))
    tasks = iter_tasks(meta, done, key_prefix=f"{store_path}{spec.hash}{uuid.uuid4().hex}", sizing=window.sizing)
    if log:
        sized, ramp = window.sizing()
        log(
            f"store {store_path}: {action}; {done_before}/{total} cells done, {total - done_before} to compute "
            f"in {count_tasks(meta, done, cost=sized, ramp=ramp)} tasks (chunks: "
            + ", ".join(f"{k}={meta.chunks[k]}" for k in ("mechanism", "n", "epsilon", "replicate"))
            + f"; task timeout {task_timeout:g} s)"
        )
    del done, _failed
    failures: list[dict] = []
    n_computed = n_failed = n_tasks = 0
    bar = None
    if done_before < total:
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=total, initial=done_before, unit="cell", desc="cells", dynamic_ncols=True, smoothing=0.1)
        futs: dict = {}  # key -> (task, submitted at, future)
        ready = as_completed()

        def submit() -> bool:
            task = next(tasks, None)
            if task is None:
                return False
            fut = client.submit(
                compute_block, spec.text, labels, epsilons, task, task_timeout, expect,
                key=task.key, retries=retries, pure=False,
            )
            futs[fut.key] = (task, time.monotonic(), fut)
            ready.add(fut)
            return True

        def finish(block: st.Block) -> None:
            nonlocal n_computed, n_failed, n_tasks
            writer.put(block)
            s = _summary(block)
            n_tasks += 1
            if len(failures) < 1000:
                failures.extend(block.failures[:20])
            n_failed += s["failed"]
            n_computed += s["done"]
            if bar is not None:
                bar.update(s["done"])
                if n_failed:
                    bar.set_postfix(failed=n_failed, refresh=False)

        def failure(task: Task, fut) -> None:
            try:
                exc = fut.exception()
            except Exception as e:  # noqa: BLE001 - cancelled or lost
                finish(failed_block(labels, epsilons, d, task, f"task failed: {e!r}"))
                return
            if isinstance(exc, VersionMismatch):
                raise VersionMismatch(str(exc))
            msg = f"task failed after {retries} retries: {type(exc).__name__}: {exc}"
            finish(failed_block(labels, epsilons, d, task, msg))

        grace = 2 * task_timeout + 10
        checked = time.monotonic()
        with st.StoreWriter(store_path, interval=flush_seconds) as writer:
            try:
                while True:
                    window.refresh()
                    while len(futs) < window.in_flight and submit():
                        pass
                    if not futs:
                        break
                    batch = [f for f in ready.next_batch(block=False) if futs.get(f.key, (0, 0, None))[2] is f]
                    ok = [f for f in batch if f.status == "finished"]
                    try:
                        blocks = client.gather(ok) if ok else []
                    except Exception:  # noqa: BLE001 - one of them was lost: take them one by one
                        ok, blocks = [], []
                    for fut, block in zip(ok, blocks):
                        futs.pop(fut.key)
                        finish(block)
                        fut.release()
                    for fut in batch:  # errors, cancellations, and results a failed gather left
                        if fut.key in futs:
                            task = futs.pop(fut.key)[0]
                            if fut.status != "finished":
                                failure(task, fut)
                            else:
                                try:
                                    block = fut.result()
                                except Exception as exc:  # noqa: BLE001 - lost with its worker
                                    block = failed_block(labels, epsilons, d, task, f"task result lost: {exc!r}")
                                finish(block)
                            fut.release()
                    now = time.monotonic()
                    if now - checked > 1.0:
                        checked = now
                        for key, (task, since, fut) in list(futs.items()):
                            if now - since > grace:  # a kernel that does not return: give up on the task
                                del futs[key]
                                client.cancel([fut], force=True)
                                finish(failed_block(labels, epsilons, d, task, timeout_message(task_timeout)))
                    if not batch:
                        time.sleep(0.02)
            except BaseException as exc:
                with contextlib.suppress(Exception):
                    client.cancel([f for _, _, f in futs.values()], force=True)
                closed = getattr(client, "status", "running") != "running"  # after the scheduler went away
                if isinstance(exc, Exception) and not isinstance(exc, SchedulerLost) and closed:
                    raise scheduler_lost(exc) from None
                raise
        st.consolidate(store_path)
    done, failed = st.read_flags(store_path)
    if bar is not None:
        bar.n = int(np.count_nonzero(done))
        bar.close()
    return RunResult(
        action=action,
        total=total,
        done_before=done_before,
        done=int(np.count_nonzero(done)),
        failed=int(np.count_nonzero(failed & (done == 0))),
        tasks=n_tasks,
        seconds=time.perf_counter() - t0,
        failures=failures,
        computed=n_computed,
    )

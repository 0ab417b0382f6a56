"""Run a study on Dask: prepare the store, plan tasks, submit them with bounded concurrency.

The client (:func:`run_sweep`) never touches result values: every task computes
its cells on a worker and writes its own chunk-aligned region of the store
(:func:`run_task`), then returns a small summary.  At most ``max_in_flight``
futures exist at a time (``distributed.as_completed``, topped up as tasks
finish), so a study of millions of cells never becomes one giant graph.
"""

from __future__ import annotations

import functools
import json
import platform
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kngflow import store as st

from . import seeds
from .plan import CostModel, Task, default_replicate_chunk, plan_tasks
from .spec import Spec, parse_spec

__all__ = ["check_store", "prepare_store", "run_task", "run_sweep", "RunResult", "store_attrs", "SpecMismatch"]

#: Fallback when kngflow.samplers is not importable (the contract's codes).
_DEFAULT_CODES = {"none": 0, "exact": 1, "gibbs": 2, "metropolis": 3}


class SpecMismatch(st.StoreError):
    """The store was made from a spec that the given one does not merely extend."""


def _sampler_codes() -> dict:
    try:
        from kngflow.samplers import SAMPLER_CODES

        return dict(SAMPLER_CODES)
    except ImportError:  # pragma: no cover - layer below missing
        return dict(_DEFAULT_CODES)


def package_versions() -> dict:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for pkg in ("kngflow", "numpy", "numba", "scipy", "dask", "distributed", "xarray", "zarr"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = None
    return out


def store_attrs(spec: Spec, history: list | None = None) -> dict:
    import kngflow

    problem = spec.problem()
    return {
        "spec": spec.text,
        "spec_hash": spec.hash,
        "spec_canonical": json.dumps(spec.canonical(), sort_keys=True),
        "spec_history": json.dumps(history or []),
        "versions": json.dumps(package_versions(), sort_keys=True),
        "caveats": str(problem.caveats),
        "problem": spec.problem_name,
        "kngflow_version": kngflow.__version__,
        "seed": spec.seed,
        "title": spec.name,
    }


def _data_variables(problem) -> dict:
    """The problem's per-data-set store variables: name -> (dims, dtype, fill)."""
    return st.check_data_variables(getattr(problem, "data_variables", {}))


#: Variable attribute ``privacy``: only ``estimate`` is a differentially private release.
NOT_PRIVATE = (
    "not private: depends on the data; a diagnostic for simulation studies on synthetic data, "
    "never to be published for real data"
)


def _variable_attrs(problem) -> dict:
    codes = _sampler_codes()
    items = sorted(codes.items(), key=lambda kv: kv[1])
    attrs = {
        "sampler": {
            "flag_values": [-1] + [int(v) for _, v in items],
            "flag_meanings": " ".join(["not_computed"] + [k for k, _ in items]),
            "long_name": "sampler that produced the release (kngflow.samplers.SAMPLER_CODES)",
            "privacy": NOT_PRIVATE,
        },
        "done": {"flag_values": [0, 1], "flag_meanings": "missing done"},
        "failed": {"flag_values": [0, 1], "flag_meanings": "ok failed_after_retries"},
        "estimate": {
            "long_name": "released estimate, original units",
            "privacy": "the release: epsilon-DP for every private mechanism (see the mechanism's docstring and caveats)",
        },
        "error": {"long_name": "||estimate - theta_star||_2", "privacy": "uses the true parameter; simulation metric"},
        "seconds": {"long_name": "wall seconds of the release (excludes data simulation)", "units": "s", "privacy": NOT_PRIVATE},
        "acceptance": {"long_name": "sampler acceptance rate", "privacy": NOT_PRIVATE},
        "steps": {"long_name": "sampler steps", "privacy": NOT_PRIVATE},
    }
    for name, decl in getattr(problem, "data_variables", {}).items():
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


def prepare_store(spec: Spec, path, *, replicate_chunk: int | None = None, cost: CostModel | None = None):
    """Create the store for ``spec``, or check (and if needed extend) an existing one.

    Returns ``(meta, action)`` with action ``"created"``, ``"resumed"`` or
    ``"extended"``.  Raises :class:`SpecMismatch` when the store holds another
    study (anything but added n, ε, mechanisms or replicates).
    """
    path = Path(path)
    action, meta = _inspect(spec, path)
    if action == "resume":
        return meta, "resumed"
    if action == "create":
        problem = spec.problem()
        rchunk = replicate_chunk or default_replicate_chunk(
            spec.n, len(spec.replicates), len(spec.mechanisms) * len(spec.epsilon), cost
        )
        meta = st.create_store(
            path,
            coords={
                "mechanism": list(spec.labels),
                "n": list(spec.n),
                "epsilon": list(spec.epsilon),
                "replicate": list(spec.replicates),
                "coef": list(range(problem.d)),
            },
            replicate_chunk=rchunk,
            theta_star=problem.theta_star,
            attrs=store_attrs(spec),
            variable_attrs=_variable_attrs(problem),
            data_variables=_data_variables(problem),
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
    return spec, spec.problem(), spec.build_mechanisms(), _sampler_codes()


def _message(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" (at {Path(tb[-1].filename).name}:{tb[-1].lineno} in {tb[-1].name})" if tb else ""
    return f"{type(exc).__name__}: {exc}{where}"


def run_task(store_path: str, spec_text: str, meta, task: Task) -> dict:
    """Compute the missing cells of ``task`` and write its whole region (on a worker).

    Cells already done in the region are read back and rewritten unchanged, so
    the task can write whole chunks.  An exception in one release (or in the
    simulation of one replicate) marks those cells failed with the message and
    the task goes on; anything else (I/O, a killed worker) propagates so that
    Dask retries the task.
    """
    t_start = time.perf_counter()
    spec, problem, mechanisms, codes = _context(spec_text)
    region = task.region_slices()
    flags = st.read_region(store_path, region, ["done"])
    done = flags["done"].astype(np.int8)
    summary = {"key": task.key, "n": task.n, "computed": 0, "done": 0, "failed": 0, "failures": []}
    if done.all():
        summary["seconds"] = time.perf_counter() - t_start
        return summary
    M, E, R = len(task.labels), len(task.epsilons), len(task.replicates)
    d = int(problem.d)
    data_vars = _data_variables(problem) if task.data_summary else {}
    declared = {**{v: st.VARIABLES[v] for v in st.VARIABLES if v != "done"}, **data_vars}
    names = list(declared)
    if done.any():
        res = st.read_region(store_path, region, names)
    else:
        res = {}
        for v in names:
            dims, dtype, fill = declared[v]
            shape = tuple({"mechanism": M, "n": 1, "epsilon": E, "replicate": R, "coef": d}[x] for x in dims)
            res[v] = np.full(shape, fill, dtype=dtype)
    failures = []
    for j, rep in enumerate(task.replicates):
        need = done[:, 0, :, j] == 0
        if not need.any():
            continue
        try:
            stats = problem.simulate(task.n, seeds.data_rng(spec.seed, spec.problem_name, task.n, rep))
            if task.data_summary:
                summ = problem.data_summary(stats)
                for v in data_vars:
                    res[v][0, j] = summ[v]
        except Exception as exc:  # noqa: BLE001 - recorded per cell
            msg = "simulate: " + _message(exc)
            for a in range(M):
                for b in range(E):
                    if need[a, b]:
                        res["failed"][a, 0, b, j] = 1
                        failures.append(_record(task, a, b, j, msg))
            continue
        for a, label in enumerate(task.labels):
            mech = mechanisms[label]
            for b, eps in enumerate(task.epsilons):
                if not need[a, b]:
                    continue
                rng = seeds.release_rng(spec.seed, spec.problem_name, task.n, rep, label, eps)
                try:
                    t0 = time.perf_counter()
                    rel = mech.release(stats, epsilon=eps, rng=rng)
                    dt = time.perf_counter() - t0
                    est = np.asarray(rel.estimate, dtype=np.float64)
                    if est.shape != (d,):
                        raise ValueError(f"estimate has shape {est.shape}, expected ({d},)")
                    info = rel.info
                    err = float(problem.error(est))
                    sampler = codes[info.get("sampler", "none")]
                except Exception as exc:  # noqa: BLE001 - recorded per cell
                    res["failed"][a, 0, b, j] = 1
                    failures.append(_record(task, a, b, j, _message(exc)))
                    continue
                res["estimate"][a, 0, b, j, :] = est
                res["error"][a, 0, b, j] = err
                res["seconds"][a, 0, b, j] = dt
                res["acceptance"][a, 0, b, j] = float(info.get("acceptance", np.nan))
                res["steps"][a, 0, b, j] = float(info.get("steps", np.nan))
                res["sampler"][a, 0, b, j] = sampler
                res["failed"][a, 0, b, j] = 0
                done[a, 0, b, j] = 1
                summary["done"] += 1
        summary["computed"] += int(need.sum())
    # results first, then the done flags (kngflow.store.write_region)
    st.write_region(store_path, meta, region, res, done)
    if failures:
        st.write_failures(store_path, task.key, failures)
    else:
        st.clear_failures(store_path, task.key)
    summary["failed"] = len(failures)
    summary["failures"] = failures[:20]
    summary["seconds"] = time.perf_counter() - t_start
    return summary


def _record(task: Task, a: int, b: int, j: int, message: str) -> dict:
    return {
        "mechanism": task.labels[a],
        "n": int(task.n),
        "epsilon": float(task.epsilons[b]),
        "replicate": int(task.replicates[j]),
        "message": message,
    }


def mark_task_failed(store_path: str, meta, task: Task, message: str) -> list[dict]:
    """Client side: a task failed after its retries; flag its missing cells failed."""
    region = task.region_slices()
    cur = st.read_region(store_path, region, ["done", "failed"])
    done, failed = cur["done"], cur["failed"].copy()
    failed[done == 0] = 1
    st.write_region(store_path, meta, region, {"failed": failed}, None)
    records = []
    for a, b, j in zip(*np.nonzero(done[:, 0, :, :] == 0)):
        records.append(_record(task, a, b, j, message))
    st.write_failures(store_path, task.key, records)
    return records


# --------------------------------------------------------------------------- client side
@dataclass
class RunResult:
    """What a run did: counts over the whole store after the run, and its failures.

    ``computed`` counts the cells that this run's tasks released (cells already
    done in a task's region are skipped, not recomputed); ``done - done_before``
    can be larger when another process wrote cells meanwhile (a task of a killed
    client finishing on a worker).
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


def run_sweep(
    spec: Spec,
    store_path,
    client,
    *,
    replicate_chunk: int | None = None,
    cost: CostModel | None = None,
    max_in_flight: int | None = None,
    retries: int = 2,
    progress: bool = True,
    log=print,
    prepared=None,
) -> RunResult:
    """Compute every missing cell of ``spec`` into ``store_path`` on ``client``'s cluster.

    Re-running with the same spec resumes: only cells whose ``done`` flag is 0
    are computed (failed cells are retried).  Results do not depend on the
    number of workers, the batching or the order of completion.  ``prepared``
    is the result of :func:`prepare_store` when the caller already called it.
    """
    from distributed import as_completed

    t0 = time.perf_counter()
    cost = cost or CostModel()
    store_path = str(Path(store_path).resolve())
    if prepared is None:
        prepared = prepare_store(spec, store_path, replicate_chunk=replicate_chunk, cost=cost)
    meta, action = prepared
    done, _failed = st.read_flags(store_path)
    total = int(done.size)
    done_before = int(np.count_nonzero(done))
    tasks = plan_tasks(meta, done, cost=cost, key_prefix=store_path + spec.hash)
    if log:
        log(
            f"store {store_path}: {action}; {done_before}/{total} cells done, "
            f"{total - done_before} to compute in {len(tasks)} tasks "
            f"(chunks: replicate={meta.chunks['replicate']}, mechanism={meta.chunks['mechanism']}, "
            f"epsilon={meta.chunks['epsilon']}, n=1)"
        )
    failures: list[dict] = []
    n_computed = 0
    bar = None
    if tasks:
        if max_in_flight is None:
            nthreads = sum(client.nthreads().values()) or 1
            max_in_flight = max(4, 2 * nthreads)
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=total, initial=done_before, unit="cell", desc="cells", dynamic_ncols=True, smoothing=0.1)
        queue = list(tasks)
        queue.reverse()  # pop() from the end: largest n first
        futs = {}

        def submit():
            task = queue.pop()
            fut = client.submit(
                run_task, store_path, spec.text, meta, task, key=task.key, retries=retries, pure=False
            )
            futs[fut.key] = task
            return fut

        ac = as_completed([submit() for _ in range(min(max_in_flight, len(queue)))])
        n_failed = 0
        for fut in ac:
            task = futs.pop(fut.key)
            if fut.status == "finished":
                summary = fut.result()
                failures.extend(summary["failures"])
                n_failed += summary["failed"]
                n_computed += summary["done"]
                if bar is not None:
                    bar.update(summary["done"])
            else:
                try:
                    exc = fut.exception()
                    msg = f"task failed after {retries} retries: {type(exc).__name__}: {exc}"
                except Exception as e:  # noqa: BLE001
                    msg = f"task failed: {e!r}"
                records = mark_task_failed(store_path, meta, task, msg)
                failures.extend(records[:20])
                n_failed += len(records)
            fut.release()
            if bar is not None and n_failed:
                bar.set_postfix(failed=n_failed, refresh=False)
            if queue:
                ac.add(submit())
        st.consolidate(store_path)
    done, failed = st.read_flags(store_path)
    if bar is not None:
        # the store is the truth: a task retried after its worker died may have
        # found its cells already done (and reported none)
        bar.n = int(np.count_nonzero(done))
        bar.close()
    res = RunResult(
        action=action,
        total=total,
        done_before=done_before,
        done=int(np.count_nonzero(done)),
        failed=int(np.count_nonzero(failed & (done == 0))),
        tasks=len(tasks),
        seconds=time.perf_counter() - t0,
        failures=failures,
        computed=n_computed,
    )
    return res

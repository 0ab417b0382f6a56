"""The worker task: compute the missing cells of a block of replicates of one n.

Workers never open the store.  :func:`compute_block` (on a worker) rebuilds the spec from
its text, checks its process's versions, simulates each replicate's data once and
releases every (mechanism, epsilon) on its own stable stream; it returns a
:class:`~kngflow.store.Block` of numpy arrays that the client hands to its one writer.
:func:`run_task` is the same, written straight into a store (tests, single process).
"""

from __future__ import annotations

import functools
import time
from typing import NamedTuple

import numpy as np

from kngflow import store as st

from . import seeds
from .plan import Task
from .prepare import _cell_variables, _data_variables
from .provenance import VersionMismatch, _message, _modules, runtime_versions, version_mismatch
from .spec import parse_spec

__all__ = ["Cell", "simulate_data", "release_cell", "compute_block", "failed_block", "run_task", "mark_task_failed",
           "timeout_message"]


@functools.lru_cache(maxsize=8)
def _spec(spec_text: str):
    return parse_spec(spec_text)


@functools.lru_cache(maxsize=64)
def _context(spec_text: str, point: tuple = ()):
    """``(spec, problem, mechanisms)`` at ``point`` of the problem axes (``()``: a spec without them)."""
    spec = _spec(spec_text)
    point = tuple(point) or None
    return spec, spec.problem(point), spec.build_mechanisms(point)


def _record(label: str, n: int, eps: float, rep: int, message: str, axes: tuple = ()) -> dict:
    return {**{str(k): v for k, v in axes}, "mechanism": str(label), "n": int(n), "epsilon": float(eps),
            "replicate": int(rep), "message": message}


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


class Cell(NamedTuple):
    """One computed cell, as the store holds it (:func:`release_cell`).

    ``estimate`` (float64, shape ``(d,)``: the problem's own ``d``, before any NaN padding of a
    store with problem axes), ``error``, ``seconds`` (wall time of the
    release), ``diagnostics`` (the mechanism's declared diagnostics, ``name -> stored value``,
    in declaration order) and ``release`` (the mechanism's :class:`~kngflow.mechanisms.base.Release`
    itself, with its whole ``info``).
    """

    estimate: np.ndarray
    error: float
    seconds: float
    diagnostics: dict
    release: object


def _axes(spec, point) -> tuple:
    return spec.axis_items(tuple(point)) if point else ()


def simulate_data(spec, problem, n: int, replicate: int, point: tuple = ()):
    """The simulated data set of ``(n, replicate)`` (at ``point`` of the problem axes): the one
    every (mechanism, ε) of that replicate sees, on its stable stream
    (:func:`kngflow.sweep.seeds.data_rng`)."""
    return problem.simulate(n, seeds.data_rng(spec.seed, spec.problem_name, n, replicate, _axes(spec, point)))


def release_cell(spec, problem, mechanism, stats, n: int, replicate: int, label: str, epsilon: float,
                 point: tuple = ()) -> Cell:
    """Release ``mechanism`` (labelled ``label``) at ``epsilon`` on the data ``stats`` of
    ``(n, replicate)``, on the cell's stable stream (:func:`kngflow.sweep.seeds.release_rng`).

    This is the cell of the sweep: :func:`compute_block` stores what it returns, and
    ``kngflow debug`` calls it in the foreground, so both give the same bits.  An exception
    (the mechanism's, a wrong shape, an undeclared diagnostic value) propagates.
    """
    d = int(problem.d)
    rng = seeds.release_rng(spec.seed, spec.problem_name, n, replicate, label, epsilon, _axes(spec, point))
    t0 = time.perf_counter()
    rel = mechanism.release(stats, epsilon=epsilon, rng=rng)
    dt = time.perf_counter() - t0
    e = np.asarray(rel.estimate, dtype=np.float64)
    if e.shape != (d,):
        raise ValueError(f"estimate has shape {e.shape}, expected ({d},)")
    er = float(problem.error(e))
    values = {dg.name: dg.value(rel.info) for dg in type(mechanism).diagnostics}
    return Cell(estimate=e, error=er, seconds=dt, diagnostics=values, release=rel)


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
    point = tuple(getattr(task, "point", ()))
    spec, problem, mechanisms = _context(spec_text, point)
    axes = _axes(spec, point)
    M, E, R = len(labels), len(epsilons), task.stop - task.start
    d = int(spec.coef_width()) if point else int(problem.d)  # the store's coef (NaN-padded past problem.d)
    own = int(problem.d)
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
                stats = simulate_data(spec, problem, task.n, rep, point)
                for v, value in problem.data_summary(stats).items():
                    if np.ndim(value) and own < d:
                        data[v][j, :own] = value
                    else:
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
                    failures.append(_record(labels[a], task.n, epsilons[b], rep, late or reason, axes))
                    continue
                label, eps = labels[a], epsilons[b]
                try:
                    cell = release_cell(spec, problem, mechs[a], stats, task.n, rep, label, eps, point)
                except Exception as exc:  # noqa: BLE001 - recorded per cell
                    failed[a, b, j] = 1
                    failures.append(_record(label, task.n, eps, rep, _message(exc), axes))
                    continue
                est[a, b, j, :own] = cell.estimate
                err[a, b, j] = cell.error
                sec[a, b, j] = cell.seconds
                for (arr, _), v in zip(declared[a], cell.diagnostics.values()):
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
        at=tuple(getattr(task, "at", ())),
    )


def failed_block(labels, epsilons, d: int, task: Task, message: str, axis_names: tuple = ()) -> st.Block:
    """Client side: a task that did not return marks its missing cells failed with ``message``."""
    M, E, R = len(labels), len(epsilons), task.stop - task.start
    cells = st.empty_cells((M, E, R), d)
    need = np.ones((M, E, R), dtype=bool) if task.need is None else task.need
    cells["failed"][need] = 1
    axes = tuple(zip(axis_names, task.point)) if axis_names else ()
    records = [
        _record(labels[a], task.n, epsilons[b], task.replicates[j], message, axes) for a, b, j in zip(*np.nonzero(need))
    ]
    return st.Block(task.n_index, task.start, task.stop, cells, mask=task.need, failures=records, at=tuple(task.at))


def _store_axes(meta):
    return [str(x) for x in meta.coords["mechanism"]], [float(x) for x in meta.coords["epsilon"]]


def mark_task_failed(store_path, meta, task: Task, message: str) -> list[dict]:
    """Flag the missing cells of ``task`` failed with ``message`` in the store (without Dask)."""
    labels, epsilons = _store_axes(meta)
    block = failed_block(labels, epsilons, len(meta.coords["coef"]), task, message, meta.axes)
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

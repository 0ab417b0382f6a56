"""Repair of a damaged store: what ``kngflow run --repair`` (and the damage check of ``plan`` and
``status``) calls.

:func:`damage_problem` verifies a store (:func:`kngflow.store.verify.verify_store`) and says in
one line what is damaged; with ``repair`` it rebuilds damaged metadata from the spec
(:func:`rebuild_metadata_from_spec`: a template store made from the spec, a damaged root
only once the spec recomputes a done cell of each mechanism bit for bit) and clears damaged
chunks, whose cells the run then recomputes.  A store with problem axes is repaired the same
way: the template has the spec's axes (their coordinates are checked like ``n``'s, and
``theta_star`` keeps its ``(*axes, coef)`` chunk), and the cell checked is recomputed at its
own point of the axes.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from kngflow.store import StoreDamaged, StoreError
from kngflow.store.verify import rebuild_metadata, repair_store, stored_spec_text, verify_store

from .overrides import apply_overrides
from .plan import Task
from .prepare import prepare_store
from .spec import SpecError, parse_spec
from .task import compute_block

__all__ = ["damage_problem", "rebuild_metadata_from_spec"]


def damage_problem(store, *, repair: bool = False, spec=None, log=print) -> str | None:
    """One line if the existing store at ``store`` is damaged (None if sound or absent).

    With ``repair``, damaged metadata is rebuilt from ``spec`` where it can be
    (:func:`rebuild_metadata_from_spec`), damaged chunks are cleared (their cells will be recomputed),
    and only damage that cannot be repaired is reported; ``log`` prints what was repaired.
    """
    if not Path(store).exists():
        return None
    damage = verify_store(store)
    if not damage:
        return None
    meta = [d for d in damage if d.variable is None]
    if repair and meta:
        try:
            rebuilt = rebuild_metadata_from_spec(spec, store)
        except StoreDamaged as exc:
            return (f"cannot repair {store}: {exc}; restore that file from a copy of the store, or delete the store "
                    "and run again")
        log(f"repaired {store}: rebuilt {', '.join(rebuilt)} from the spec")
        damage = verify_store(store)
        meta = [d for d in damage if d.variable is None]
        if meta:
            return (f"cannot repair {store}: {meta[0].line()}; restore that file from a copy of the store, or delete "
                    "the store and run again")
        if not damage:
            return None
    if repair:
        cells = repair_store(store, damage)
        log(f"repaired {store}: {len(damage)} damaged chunks cleared, {cells} cells to recompute")
        return None
    return (f"store {store} is damaged ({damage[0].line()}{f' and {len(damage) - 1} more' if len(damage) > 1 else ''}); "
            f"run `kngflow verify {store}`, then `kngflow run SPEC --store {store} --repair`")


def _stored_overrides(store) -> dict:
    """``apply_overrides`` keywords of the grid overrides in the store's root attributes ({}: none)."""
    import json

    from .prepare import stored_overrides

    try:
        attrs = json.loads((Path(store) / "zarr.json").read_text())["attributes"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    out = {}
    for key, value in stored_overrides(attrs if isinstance(attrs, dict) else {}).items():
        if key in ("n", "epsilon") and isinstance(value, list):
            out[key] = ",".join(repr(v) for v in value)
        elif key == "replicates":
            out[key] = str(value)
    return out


def rebuild_metadata_from_spec(spec, store) -> list[str]:
    """Rebuild the damaged metadata of ``store`` from a template made from the store's own spec
    (in its root attributes) or, if the root is what is damaged, from ``spec``; a damaged root
    is rebuilt only once ``spec`` recomputes a done cell of each mechanism bit for bit."""
    text = stored_spec_text(store)
    if text:
        try:  # the store's own spec, with the grid overrides of a reduced run
            spec = apply_overrides(parse_spec(text), **_stored_overrides(store))
        except SpecError:
            pass

    def check(read):  # the spec must reproduce a done cell of each mechanism: same seed, same mechanisms
        done = read("done")  # dims: the problem axes (if any), then mechanism, n, epsilon, replicate
        labels, epsilons = [str(x) for x in read("mechanism")], [float(x) for x in read("epsilon")]
        ns, reps = read("n"), read("replicate")
        axes = tuple(spec.axis_names)  # the template's, whose coordinates the store's equal
        values = [read(name) for name in axes]
        for a in range(len(labels)):
            cells = np.argwhere(np.take(done, a, axis=len(axes)))  # (*axis indices, n, epsilon, replicate)
            if not len(cells):
                continue
            # the first done cell whose estimate reads (a damaged chunk is cleared after the root is
            # rebuilt): cells 0, 1, 3, 7, ... and the last, so a few reads reach other chunks
            for k in sorted({min(2 ** j - 1, len(cells) - 1) for j in range(len(cells).bit_length() + 1)}):
                try:
                    stored = read("estimate", tuple(int(x) for x in cells[k][:len(axes)]) + (a,)
                                  + tuple(int(x) for x in cells[k][len(axes):]))
                except Exception:  # noqa: BLE001 - a damaged chunk: try a cell further on
                    continue
                break
            else:
                raise StoreError(f"no done cell of mechanism {labels[a]} has a readable estimate to check the spec "
                                 "against")
            *at, i, e, r = (int(x) for x in cells[k])
            # the run's point: the store's axis values, as Python values (meta.axis_points)
            point = tuple(v[x].item() if hasattr(v[x], "item") else v[x] for v, x in zip(values, at))
            need = np.zeros((len(labels), len(epsilons), 1), dtype=bool)
            need[a, e, 0] = True
            task = Task(key="rebuild-check", n=int(ns[i]), n_index=i, start=r, stop=r + 1, replicates=reps[r:r + 1],
                        need=need, missing=1, at=tuple(at), point=point)
            got = compute_block(spec.text, labels, epsilons, task).cells["estimate"][a, e, 0]
            if not np.array_equal(got, stored, equal_nan=True):
                where = "".join(f"{name}={v} " for name, v in zip(axes, point))
                raise StoreError(f"the spec does not reproduce the store's cell {where}mechanism={labels[a]} "
                                 f"n={int(ns[i])} eps={epsilons[e]:g} replicate={int(reps[r])}: pass the spec the "
                                 "store was made from")

    with tempfile.TemporaryDirectory(prefix="kngflow-template-") as tmp:
        template = Path(tmp) / "template.zarr"
        prepare_store(spec, template)
        return rebuild_metadata(store, template, check=check)

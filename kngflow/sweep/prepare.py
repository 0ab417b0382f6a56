"""Store preparation: the attributes and variables a store is made with, and whether a spec fits a store.

:func:`prepare_store` creates the store of a spec, or checks that an existing one was made
from the same spec or one it merely extends (:class:`SpecMismatch` otherwise);
:func:`store_progress` says what a store already holds of a spec (flags only).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from kngflow import store as st

from .overrides import describe_overrides
from .plan import default_chunks
from .provenance import package_versions, plugin_classes
from .spec import Spec

__all__ = ["SpecMismatch", "diagnostics", "store_attrs", "check_store", "prepare_store", "store_progress",
           "pilot_problem", "overrides_problem", "stored_overrides"]


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
        # what error measures, in words, and the errors of trivial releases the figures draw
        "error_label": str(problem.error_label),
        "reference_lines": json.dumps([[float(v), str(label)] for v, label in problem.reference_lines]),
        "coefficient_summaries": json.dumps(bool(problem.coefficient_summaries)),
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
        # a reduced run's grid overrides (kngflow run --n/--epsilon/--replicates); {} for the full study
        "overrides": json.dumps(spec.overrides, sort_keys=True),
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
    if old["grid"].get("problem") != new["grid"].get("problem"):
        why.append(f"grid.problem differs (store: {old['grid'].get('problem')!r}, spec: "
                   f"{new['grid'].get('problem')!r}); the problem axes of a store are fixed: use another --store")
    for axis in ("n", "epsilon", "replicates"):
        missing = [v for v in old["grid"][axis] if v not in set(new["grid"][axis])]
        if missing:
            shown = [float.fromhex(v) if isinstance(v, str) else v for v in missing]
            why.append(f"grid.{axis} drops values present in the store: {shown}")
    return why


def stored_overrides(attrs: dict) -> dict:
    """The grid overrides a store was made with (its ``overrides`` attribute; ``{}``: the full study)."""
    try:
        value = json.loads(attrs.get("overrides") or "{}")
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _overrides_line(spec: Spec, path, theirs: dict) -> str:
    return (f"store {path} was made with {describe_overrides(theirs)}, this run has "
            f"{describe_overrides(spec.overrides)}; a reduced run and the full study never share a store: "
            f"use another --store, or the store's own overrides")


def overrides_problem(spec: Spec, path) -> str | None:
    """One line when the existing store at ``path`` was made with other grid overrides than
    ``spec``'s (a reduced run against the full study, or two reduced runs); None otherwise,
    and for a store that does not exist or whose metadata cannot be read (the checks of the
    run say why)."""
    if not Path(path).exists():
        return None
    try:
        attrs = st.read_meta(path).attrs
    except st.StoreError:
        return None
    theirs = stored_overrides(attrs)
    return None if theirs == spec.overrides else _overrides_line(spec, path, theirs)


def _inspect(spec: Spec, path: Path):
    """``(action, meta)``: what the store at ``path`` needs for ``spec``; reads only metadata."""
    if not path.exists():
        return "create", None
    meta = st.read_meta(path)
    theirs = stored_overrides(meta.attrs)
    if theirs != spec.overrides:
        raise SpecMismatch(_overrides_line(spec, path, theirs))
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
        width = spec.coef_width()
        sizes = {"mechanism": len(spec.labels), "n": len(spec.n), "epsilon": len(spec.epsilon),
                 "replicate": len(spec.replicates)}
        chunks = default_chunks(sizes, int(width))
        if replicate_chunk is not None:
            chunks.update(replicate=int(replicate_chunk), n=1)
        meta = st.create_store(
            path,
            coords={
                "mechanism": list(spec.labels),
                "n": list(spec.n),
                "epsilon": list(spec.epsilon),
                "replicate": list(spec.replicates),
                "coef": list(range(width)),
            },
            chunks=chunks,
            theta_star=_theta_star(spec, width),
            attrs=store_attrs(spec),
            variable_attrs=_variable_attrs(problem, mechanisms),
            data_variables=_data_variables(problem),
            cell_variables=_cell_variables(mechanisms),
            axes={name: list(values) for name, values in spec.problem_axes},
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


def _theta_star(spec: Spec, width: int) -> np.ndarray:
    """``theta_star`` of the store: the problem's, or one row per point of the problem axes
    (shape ``(*axis sizes, width)``), NaN past each point's own ``d``."""
    if not spec.problem_axes:
        return np.asarray(spec.problem().theta_star, dtype=np.float64)
    sizes = tuple(len(values) for _, values in spec.problem_axes)
    out = np.full((int(np.prod(sizes)), width), np.nan)
    for k, point in enumerate(spec.axis_points()):
        theta = np.asarray(spec.problem(point).theta_star, dtype=np.float64).ravel()
        out[k, : theta.size] = theta
    return out.reshape(sizes + (width,))


# --------------------------------------------------------------------------- worker side


def _progress(meta, done: np.ndarray, spec: Spec) -> dict:
    """``{n: (cells done, replicates complete)}`` of a store for :func:`~kngflow.sweep.plan.estimate`."""
    full = set(spec.labels) <= set(meta.coords["mechanism"]) and set(spec.epsilon) <= set(meta.coords["epsilon"])
    out = {}
    for i, n in enumerate(meta.coords["n"]):
        block = done[..., i, :, :] != 0  # (problem axes..., mechanism, epsilon, replicate)
        out[int(n)] = (int(np.count_nonzero(block)), int(np.count_nonzero(block.all(axis=(-3, -2)))) if full else 0)
    return out


def store_progress(spec: Spec, path) -> dict | None:
    """What the store at ``path`` already holds of ``spec`` (None: no store yet; reads flags only)."""
    if check_store(spec, path) == "create":
        return None
    return _progress(st.read_meta(path), st.read_flags(path)[0], spec)


def pilot_problem(spec: Spec, pilot) -> str | None:
    """Why ``pilot`` is not a pilot store of ``spec`` (None when it is: the same study up to
    its replicates, n and epsilon values, which may be any subset)."""
    if not Path(pilot).is_dir():
        return f"pilot store {pilot} does not exist"
    try:
        meta = st.read_meta(pilot)
    except st.StoreError as exc:
        return f"pilot store {pilot}: {exc}"
    try:
        theirs = json.loads(meta.attrs["spec_canonical"])
    except (KeyError, TypeError, ValueError):
        return f"pilot store {pilot} records no spec"
    ours = spec.canonical(replicates=False)
    for key in ("seed", "problem", "sampler", "mechanisms"):
        if theirs.get(key) != ours.get(key):
            return (f"pilot store {pilot} was made from another spec (its {key} differs from {spec.name or 'SPEC'}'s); "
                    "the pilot must be SPEC with fewer replicates")
    grid = theirs.get("grid", {})
    for axis, ours_vals, theirs_vals in (("n", list(spec.n), grid.get("n", [])),
                                         ("epsilon", [float(e).hex() for e in spec.epsilon], grid.get("epsilon", []))):
        lacking = [v for v in ours_vals if v not in theirs_vals]
        if lacking:
            shown = lacking[0] if axis == "n" else f"{float.fromhex(lacking[0]):g}"
            return f"pilot store {pilot} has no {axis} = {shown}: the pilot must cover SPEC's grid"
    return None

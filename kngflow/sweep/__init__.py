"""Study sweeps: TOML spec -> validated grid -> stable seeds -> tasks -> Dask -> one store writer.

This is the only layer that imports dask (lazily, inside the functions that need it).
The names below are loaded on first use, so that reading a spec
(``kngflow.sweep.spec``) does not import the store, xarray or zarr.
"""

import importlib

_EXPORTS = {
    "prepare": ("SpecMismatch", "prepare_store"),
    "runner": ("RunResult", "run_sweep"),
    "task": ("compute_block", "run_task"),
    "plan": ("CostModel", "Estimate", "Task", "calibrate", "default_chunks", "estimate", "iter_tasks", "plan_tasks"),
    "seeds": ("data_rng", "data_seed", "release_rng", "release_seed", "stable_key"),
    "spec": ("MechanismSpec", "Spec", "SpecError", "load_spec", "parse_spec"),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_WHERE)


def __getattr__(name):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))

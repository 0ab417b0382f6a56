"""Study sweeps: TOML spec -> validated grid -> stable seeds -> tasks -> Dask -> one store writer.

This is the only layer that imports dask (lazily, inside the functions that need it).
"""

from .engine import RunResult, SpecMismatch, compute_block, prepare_store, run_sweep, run_task
from .plan import CostModel, Estimate, Task, calibrate, default_chunks, estimate, iter_tasks, plan_tasks
from .seeds import data_rng, data_seed, release_rng, release_seed, stable_key
from .spec import MechanismSpec, Spec, SpecError, load_spec, parse_spec

__all__ = [
    "CostModel",
    "Estimate",
    "MechanismSpec",
    "RunResult",
    "Spec",
    "SpecError",
    "SpecMismatch",
    "Task",
    "calibrate",
    "compute_block",
    "data_rng",
    "data_seed",
    "default_chunks",
    "estimate",
    "iter_tasks",
    "load_spec",
    "parse_spec",
    "plan_tasks",
    "prepare_store",
    "release_rng",
    "release_seed",
    "run_sweep",
    "run_task",
    "stable_key",
]

"""Study sweeps: TOML spec -> validated grid -> stable seeds -> chunk-aligned tasks -> Dask.

This is the only layer that imports dask (lazily, inside the functions that need it).
"""

from .engine import RunResult, SpecMismatch, prepare_store, run_sweep, run_task
from .plan import CostModel, Task, default_replicate_chunk, plan_tasks
from .seeds import data_rng, data_seed, release_rng, release_seed, stable_key
from .spec import MechanismSpec, Spec, SpecError, load_spec, parse_spec

__all__ = [
    "CostModel",
    "MechanismSpec",
    "RunResult",
    "Spec",
    "SpecError",
    "SpecMismatch",
    "Task",
    "data_rng",
    "data_seed",
    "default_replicate_chunk",
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

"""The sweep engine's public names, from its four modules.

* :mod:`kngflow.sweep.provenance` -- versions, plug-ins, preflight, the errors a run stops with;
* :mod:`kngflow.sweep.prepare` -- store attributes and variables, :func:`prepare_store`;
* :mod:`kngflow.sweep.task` -- the worker task :func:`compute_block`;
* :mod:`kngflow.sweep.runner` -- the client loop :func:`run_sweep`.
"""

from __future__ import annotations

from .prepare import SpecMismatch, check_store, diagnostics, prepare_store, store_attrs, store_progress
from .provenance import (
    MATCHED_PACKAGES,
    PluginFailure,
    SchedulerLost,
    VersionMismatch,
    WorkersLost,
    check_workers,
    git_revision,
    package_versions,
    plugin_classes,
    plugin_modules,
    preflight,
    runtime_versions,
    scheduler_lost,
    version_mismatch,
)
from .runner import RunResult, run_sweep
from .task import compute_block, failed_block, mark_task_failed, run_task, timeout_message

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
    "git_revision",
    "failed_block",
    "timeout_message",
    "version_mismatch",
    "scheduler_lost",
    "MATCHED_PACKAGES",
]

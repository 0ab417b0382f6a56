"""Where a sweep runs: make or reach the cluster (its deployment file is read by :mod:`kngflow.sweep.deploy`).

* default: :func:`local_cluster`, one single-threaded worker process per core,
  with numba/OpenMP/BLAS limited to one thread in every worker
  (:data:`~kngflow.sweep.deploy.WORKER_ENV`);
* ``--scheduler tcp://host:8786`` or ``--scheduler-file scheduler.json``: an
  existing cluster, reached by :func:`connect`;
* ``--cluster cluster/NAME.yaml``: :func:`cluster_from_config` builds the deployment
  a checked file describes (:func:`~kngflow.sweep.deploy.load_cluster_config`), and
  :func:`adapt_cluster` makes it adaptive, keeping kngflow's own record of the maximum
  it asked for (:func:`adaptive_maximum`, read by the run's window).
"""

from __future__ import annotations

import contextlib
import math
import os
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from distributed import Client, LocalCluster
    from distributed.deploy import Cluster

from .deploy import (  # noqa: F401 - the deployment names, also importable from here
    KINDS,
    LEAN_CONFIG,
    SUBMIT_COMMANDS,
    WORKER_ENV,
    ClusterConfigError,
    _check_factory_options,
    _check_option_names,
    _factory,
    check_submit_command,
    jobqueue_options,
    kubernetes_manifest,
    lifetime_args,
    load_cluster_config,
)
from .targets import check_address, check_dashboard_address, check_scheduler_file  # noqa: F401

__all__ = [
    "WORKER_ENV",
    "LEAN_CONFIG",
    "KINDS",
    "ClusterConfigError",
    "load_cluster_config",
    "jobqueue_options",
    "kubernetes_manifest",
    "cluster_from_config",
    "adapt_cluster",
    "adaptive_maximum",
    "local_cluster",
    "connect",
    "SUBMIT_COMMANDS",
    "check_submit_command",
    "check_address",
    "check_scheduler_file",
    "check_dashboard_address",
    "lifetime_args",
]


def _from_factory(cfg: dict):
    """Call the factory of a python config: a ``Client`` or ``Cluster``, or ClusterConfigError."""
    from distributed import Client
    from distributed.deploy import Cluster

    ref = cfg["factory"]
    if cfg.get("jobs") is not None:
        raise ClusterConfigError("--workers: not used with kind python; size the deployment in cluster.options")
    try:
        made = _factory(ref)(**cfg["options"])
    except ClusterConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - the factory's own failure, in one line
        raise ClusterConfigError(f"cluster.factory: {ref} raised {type(exc).__name__}: {exc}") from None
    if not isinstance(made, (Client, Cluster)):
        with contextlib.suppress(Exception):
            made.close()
        raise ClusterConfigError(
            f"cluster.factory: {ref} returned {type(made).__name__}, not a distributed.Client or a Cluster"
        )
    if cfg.get("adapt") and isinstance(made, Cluster):
        adapt_cluster(made, **cfg["adapt"])
    return made


#: what kngflow asked of each adaptive cluster it made: cluster -> the most workers it may grow to
#: (distributed keeps a cluster's ``Adaptive`` private, so the run keeps its own record)
_ADAPTIVE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def adapt_cluster(cluster, *, minimum: int | None = None, maximum: int | None = None, jobs: bool = False,
                  processes: int = 1) -> None:
    """``cluster.adapt(...)`` between ``minimum`` and ``maximum`` workers (``jobs``: batch jobs of
    ``processes`` workers each, dask-jobqueue), and a record of the maximum for :func:`adaptive_maximum`."""
    if jobs:
        cluster.adapt(minimum_jobs=minimum, maximum_jobs=maximum)
    else:
        cluster.adapt(**{k: v for k, v in (("minimum", minimum), ("maximum", maximum)) if v is not None})
    _ADAPTIVE[cluster] = math.inf if maximum is None else float(maximum) * (max(1, int(processes)) if jobs else 1)


def adaptive_maximum(cluster) -> float | None:
    """The most workers ``cluster`` was asked to adapt up to (:func:`adapt_cluster`; ``inf``: no
    maximum), or None when kngflow did not make it adaptive."""
    try:
        return _ADAPTIVE.get(cluster)
    except TypeError:  # not weak-referenceable: not one of ours
        return None


def cluster_from_config(cfg: dict, *, start: bool = True) -> Cluster:
    """Build the cluster a validated config describes.

    Parameters
    ----------
    cfg : dict
        Result of :func:`load_cluster_config` (``jobs`` may have been changed since).
    start : bool, default True
        Ask for the workers: ``scale(jobs=...)`` or ``adapt(...)`` for slurm
        and pbs. With ``False`` a slurm/pbs cluster submits no job (its
        scheduler runs in this process; ``job_script()`` shows what would be
        submitted). A kubernetes ``DaskCluster`` is created with ``jobs``
        workers as the object is built, and a ``LocalCluster`` starts its
        workers at once; ``start`` then only decides whether ``adapt`` is applied.

    Returns
    -------
    distributed.deploy.Cluster
        ``SLURMCluster``, ``PBSCluster``, ``dask_kubernetes.operator.KubeCluster``
        or ``LocalCluster``; for kind python, the factory's ``Client`` or
        ``Cluster``.  The caller closes it.

    Raises
    ------
    ClusterConfigError
        When the needed package is missing or ``options`` are refused.
    """
    kind = cfg["kind"]
    adapt = cfg.get("adapt")
    if kind == "python":
        return _from_factory(cfg)
    if kind in ("slurm", "pbs"):
        try:
            import dask_jobqueue
        except ImportError:
            raise ClusterConfigError("cluster.kind: slurm/pbs need dask-jobqueue (pip install dask-jobqueue)") from None
        cls = dask_jobqueue.SLURMCluster if kind == "slurm" else dask_jobqueue.PBSCluster
        opts = jobqueue_options(cfg)
        try:
            # unknown keywords and missing cores/memory are raised (as ValueError or
            # TypeError) before any scheduler is started
            cluster = cls(**opts)
        except (TypeError, ValueError) as exc:
            raise ClusterConfigError(f"cluster.options: {exc}") from None
        if start:
            if adapt:
                adapt_cluster(cluster, minimum=adapt.get("minimum"), maximum=adapt.get("maximum"), jobs=True,
                                   processes=opts.get("processes") or 1)
            else:
                cluster.scale(jobs=cfg["jobs"] or 1)
        return cluster
    if kind == "kubernetes":
        manifest = kubernetes_manifest(cfg)
        try:
            from dask_kubernetes.operator import KubeCluster
        except ImportError:
            raise ClusterConfigError(
                "cluster.kind: kubernetes needs dask-kubernetes (pip install 'kngflow[cluster]')"
            ) from None
        try:
            cluster = KubeCluster(custom_cluster_spec=manifest, **cfg["options"])
        except TypeError as exc:
            raise ClusterConfigError(f"cluster.options: {exc}") from None
        if start and adapt:
            adapt_cluster(cluster, minimum=adapt.get("minimum"), maximum=adapt.get("maximum"))
        return cluster
    opts = dict(cfg["options"])
    if cfg.get("jobs") is not None:
        opts.setdefault("n_workers", cfg["jobs"])
    opts.pop("threads_per_worker", None)
    opts.pop("processes", None)
    try:
        cluster = local_cluster(**opts)
    except TypeError as exc:
        raise ClusterConfigError(f"cluster.options: {exc}") from None
    if start and adapt:
        adapt_cluster(cluster, **adapt)
    return cluster


def local_cluster(
    workers: int | None = None,
    *,
    dashboard_address: str | None = ":8787",
    log_file: str | os.PathLike | None = None,
    **kwargs: Any,
) -> LocalCluster:
    """``LocalCluster`` of single-threaded worker processes with :data:`WORKER_ENV` set.

    Every worker process imports :mod:`kngflow.sweep.worker_preload` first:
    Ctrl-C or SIGTERM sent to the whole process group does not make it print
    tracebacks (the client closes the cluster).

    Parameters
    ----------
    workers : int, optional
        Number of worker processes (``n_workers`` in ``kwargs`` wins); default
        one per core.
    dashboard_address : str or None, default ":8787"
        Dashboard address; ``None`` for no dashboard.
    log_file : path, optional
        File that the workers' stderr (logging, warnings) is appended to,
        instead of the terminal.
    **kwargs
        Further ``LocalCluster`` keywords (``memory_limit``, ``local_directory`` ...).

    Returns
    -------
    distributed.LocalCluster
        A started cluster; the caller closes it.
    """
    import dask
    from distributed import LocalCluster

    from .quiet import LOG_FILE_ENV

    n = kwargs.pop("n_workers", None) or workers or os.cpu_count() or 1
    env = dict(dask.config.get("distributed.nanny.pre-spawn-environ", {}) or {})
    env.update(WORKER_ENV)
    # the log file goes to each worker's own environment (the nanny's ``env``): the nanny
    # copies pre-spawn variables into this process's os.environ for good, where they would
    # override the configuration of every later cluster started here
    worker_env = dict(kwargs.pop("env", None) or {})
    worker_env[LOG_FILE_ENV] = str(Path(log_file).resolve()) if log_file is not None else ""
    preload = list(kwargs.pop("preload", None) or []) + ["kngflow.sweep.worker_preload"]
    if dashboard_address is None:  # the scheduler's HTTP server (health, metrics) still starts: on a free port
        kwargs["scheduler_kwargs"] = {"dashboard_address": "127.0.0.1:0", **(kwargs.get("scheduler_kwargs") or {})}
    # the nannies hand this process's configuration to their workers: LEAN_CONFIG goes in here
    with dask.config.set({**LEAN_CONFIG, "distributed.nanny.pre-spawn-environ": env}):
        return LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            dashboard_address=dashboard_address,
            preload=preload,
            env=worker_env,
            **kwargs,
        )


@contextlib.contextmanager
def connect(
    *,
    scheduler: str | None = None,
    scheduler_file: str | None = None,
    cluster_file: str | None = None,
    workers: int | None = None,
    dashboard_address: str | None = ":8787",
    timeout: float = 60,
    log_file: str | os.PathLike | None = None,
) -> Iterator[Client]:
    """A ``distributed.Client`` for the chosen target; closes what it started.

    Parameters
    ----------
    scheduler : str, optional
        Address of a running scheduler (``tcp://host:8786``).
    scheduler_file : str, optional
        Scheduler file written by ``dask scheduler --scheduler-file``.
    cluster_file : str, optional
        Deployment file (:func:`load_cluster_config`); ``workers`` overrides its ``jobs``.
    workers : int, optional
        Local workers (default one per core) or jobs of ``cluster_file``.
    dashboard_address : str or None, default ":8787"
        Dashboard of a local cluster (also for a local ``cluster_file``
        without ``options.dashboard_address``).
    timeout : float, default 60
        Seconds to wait for the scheduler.
    log_file : path, optional
        Log file of the workers of a local cluster (:func:`local_cluster`).

    Yields
    ------
    distributed.Client
    """
    from distributed import Client

    if scheduler:
        with Client(scheduler, timeout=timeout) as client:
            yield client
        return
    if scheduler_file:
        with Client(scheduler_file=scheduler_file, timeout=timeout) as client:
            yield client
        return
    if cluster_file:
        cfg = load_cluster_config(cluster_file)
        if workers:
            cfg["jobs"] = workers
            cfg["options"].pop("n_workers", None)
        check_submit_command(cfg)
        if cfg["kind"] == "local":
            cfg["options"].setdefault("dashboard_address", dashboard_address)
            cfg["options"]["log_file"] = log_file
        cluster = cluster_from_config(cfg)
    else:
        cluster = local_cluster(workers, dashboard_address=dashboard_address, log_file=log_file)
    if isinstance(cluster, Client):  # a python factory's own client: it and its cluster are the run's
        try:
            yield cluster
        finally:
            owned = cluster.cluster
            cluster.close()
            if owned is not None:
                owned.close()
        return
    try:
        with Client(cluster, timeout=timeout) as client:
            yield client
    finally:
        cluster.close()

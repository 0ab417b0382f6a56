"""Where a sweep runs: a local cluster, an existing scheduler, or a deployment file.

* default: :func:`local_cluster`, one single-threaded worker process per core,
  with numba/OpenMP/BLAS limited to one thread in every worker;
* ``--scheduler tcp://host:8786`` or ``--scheduler-file scheduler.json``: an
  existing cluster (``dask scheduler`` / ``dask worker``; see ``cluster/README.md``);
* ``--cluster cluster/NAME.yaml``: a deployment file::

      kind: slurm            # slurm | pbs | kubernetes | local
      jobs: 4                # batch jobs (slurm/pbs) or workers (kubernetes/local)
      options: {...}         # passed to SLURMCluster / PBSCluster / KubeCluster / LocalCluster

  For slurm and pbs the thread-limiting ``export`` lines are added to
  ``job_script_prologue`` unless already there.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = [
    "WORKER_ENV",
    "ClusterConfigError",
    "load_cluster_config",
    "cluster_from_config",
    "local_cluster",
    "connect",
]

#: Environment of every worker: one thread per worker process, whatever the library.
WORKER_ENV = {
    "NUMBA_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}

KINDS = ("slurm", "pbs", "kubernetes", "local")


class ClusterConfigError(ValueError):
    """A bad ``--cluster`` file; the message names the field."""


def _prologue() -> list[str]:
    return [f"export {k}={v}" for k, v in WORKER_ENV.items()]


def load_cluster_config(path) -> dict:
    """Read and validate a cluster YAML file."""
    import yaml

    p = Path(path)
    try:
        cfg = yaml.safe_load(p.read_text())
    except OSError as exc:
        raise ClusterConfigError(f"cluster: cannot read {str(p)!r}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ClusterConfigError(f"cluster: {p} is not valid YAML: {exc}") from None
    if not isinstance(cfg, dict):
        raise ClusterConfigError(f"cluster: {p} must hold a mapping with kind, jobs and options")
    for key in cfg:
        if key not in ("kind", "jobs", "options", "manifest", "adapt"):
            raise ClusterConfigError(f"cluster.{key}: unknown field; allowed fields are kind, jobs, options, manifest, adapt")
    kind = cfg.get("kind")
    if kind not in KINDS:
        raise ClusterConfigError(f"cluster.kind: must be one of {list(KINDS)}, got {kind!r}")
    jobs = cfg.get("jobs", 1)
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ClusterConfigError(f"cluster.jobs: must be an integer >= 1, got {jobs!r}")
    options = cfg.get("options", {}) or {}
    if not isinstance(options, dict):
        raise ClusterConfigError("cluster.options: must be a mapping of keyword arguments")
    adapt = cfg.get("adapt")
    if adapt is not None and not (isinstance(adapt, dict) and set(adapt) <= {"minimum", "maximum"}):
        raise ClusterConfigError("cluster.adapt: must be a mapping with minimum and/or maximum")
    out = {"kind": kind, "jobs": jobs, "options": dict(options), "adapt": adapt}
    if kind == "kubernetes":
        manifest = cfg.get("manifest")
        if not isinstance(manifest, str):
            raise ClusterConfigError("cluster.manifest: kind kubernetes needs the path of a DaskCluster manifest")
        mpath = Path(manifest)
        if not mpath.is_absolute():
            mpath = p.parent / mpath
        out["manifest"] = str(mpath)
    elif "manifest" in cfg:
        raise ClusterConfigError("cluster.manifest: only used with kind kubernetes")
    return out


def jobqueue_options(cfg: dict) -> dict:
    """The keyword arguments for SLURMCluster/PBSCluster, with the worker environment added."""
    opts = dict(cfg["options"])
    prologue = list(opts.get("job_script_prologue") or [])
    for line in _prologue():
        var = line.split()[1].split("=")[0]
        if not any(var in existing for existing in prologue):
            prologue.append(line)
    opts["job_script_prologue"] = prologue
    return opts


def cluster_from_config(cfg: dict, *, start: bool = True):
    """Build (and scale, when ``start``) the cluster a validated config describes."""
    kind = cfg["kind"]
    if kind in ("slurm", "pbs"):
        try:
            import dask_jobqueue
        except ImportError:
            raise ClusterConfigError("cluster.kind: slurm/pbs need dask-jobqueue (pip install dask-jobqueue)") from None
        cls = dask_jobqueue.SLURMCluster if kind == "slurm" else dask_jobqueue.PBSCluster
        try:
            cluster = cls(**jobqueue_options(cfg))
        except TypeError as exc:
            raise ClusterConfigError(f"cluster.options: {exc}") from None
        if start:
            if cfg.get("adapt"):
                cluster.adapt(**cfg["adapt"])
            else:
                cluster.scale(jobs=cfg["jobs"])
        return cluster
    if kind == "kubernetes":
        import yaml

        try:
            from dask_kubernetes.operator import KubeCluster
        except ImportError:
            raise ClusterConfigError("cluster.kind: kubernetes needs dask-kubernetes (pip install dask-kubernetes)") from None
        manifest = yaml.safe_load(Path(cfg["manifest"]).read_text())
        cluster = KubeCluster(custom_cluster_spec=manifest, **cfg["options"])
        if start:
            cluster.scale(cfg["jobs"])
        return cluster
    opts = dict(cfg["options"])
    opts.setdefault("n_workers", cfg["jobs"])
    return local_cluster(**opts)


def local_cluster(workers: int | None = None, *, dashboard_address: str | None = ":8787", **kwargs):
    """``LocalCluster`` with one single-threaded worker process per core (numba threads = 1)."""
    import dask
    from distributed import LocalCluster

    n = kwargs.pop("n_workers", None) or workers or os.cpu_count() or 1
    env = dict(dask.config.get("distributed.nanny.pre-spawn-environ", {}) or {})
    env.update(WORKER_ENV)
    with dask.config.set({"distributed.nanny.pre-spawn-environ": env}):
        return LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            dashboard_address=dashboard_address,
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
):
    """A ``distributed.Client`` for the chosen target; closes what it started."""
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
        if workers and cfg["kind"] != "local":
            cfg["jobs"] = workers
        if workers and cfg["kind"] == "local":
            cfg["options"]["n_workers"] = workers
        cluster = cluster_from_config(cfg)
    else:
        cluster = local_cluster(workers, dashboard_address=dashboard_address)
    try:
        with Client(cluster, timeout=timeout) as client:
            yield client
    finally:
        cluster.close()

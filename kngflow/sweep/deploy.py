"""Deployment files and addresses, read and checked before anything starts.

* default: :func:`kngflow.sweep.cluster.local_cluster`, one single-threaded worker process per core,
  with numba/OpenMP/BLAS limited to one thread in every worker;
* ``--scheduler tcp://host:8786`` or ``--scheduler-file scheduler.json``: an
  existing cluster (``dask scheduler`` / ``dask worker --nthreads 1``; see
  ``cluster/README.md``);
* ``--cluster cluster/NAME.yaml``: a deployment file::

      kind: slurm            # slurm | pbs | kubernetes | local | python
      jobs: 4                # batch jobs (slurm/pbs) or workers (kubernetes/local)
      options: {...}         # passed to SLURMCluster / PBSCluster / KubeCluster / LocalCluster
                             # (python: to the factory)
      manifest: FILE         # kubernetes only: DaskCluster manifest, relative to the file
      factory: "pkg.mod:fn"  # python only: a function returning a Client or a Cluster
      adapt: {minimum: 1, maximum: 8}   # optional, counted like jobs

Every worker runs one thread with :data:`WORKER_ENV` in its environment:

* slurm/pbs: ``processes`` defaults to ``cores`` (one single-threaded worker
  process per core of a job) and must equal it; the ``export`` lines of
  :data:`WORKER_ENV` are added to ``job_script_prologue`` unless already there;
* kubernetes: the manifest's worker container must run ``dask worker`` with
  ``--nthreads 1``; :data:`WORKER_ENV` is added to its ``env`` where missing
  and the worker ``replicas`` are set to ``jobs``;
* local: ``LocalCluster(threads_per_worker=1, processes=True)`` with
  :data:`WORKER_ENV` set in each worker process before it starts;
* python: ``factory(**options)`` builds the deployment (dask-gateway, Coiled,
  a site's own setup) and returns a ``distributed.Client`` or a ``Cluster``;
  its workers are the factory's business (see ``cluster/README.md``).

A file is checked completely when it is read, before anything starts: its
fields, and the names of its ``options`` against the keyword arguments of the
cluster class.  :func:`check_submit_command` refuses a slurm/pbs file where
``sbatch``/``qsub`` is missing; the addresses and paths given on the command line are
checked by :mod:`kngflow.sweep.targets`.
"""

from __future__ import annotations

import copy
import difflib
import importlib
import inspect
import os
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

__all__ = [
    "WORKER_ENV",
    "LEAN_CONFIG",
    "KINDS",
    "ClusterConfigError",
    "load_cluster_config",
    "jobqueue_options",
    "kubernetes_manifest",
    "SUBMIT_COMMANDS",
    "check_submit_command",
    "lifetime_args",
]

#: Dask diagnostics that cost CPU on every worker and on the scheduler whatever the tasks
#: do, off or slowed: the statistical profiler (a thread sampling every 10 ms), the GIL
#: monitor (1 ms), the event-loop tick (20 ms), the system and memory monitors (0.5 s,
#: 0.1 s).  An idle 2-worker local cluster burns 3.05 s of CPU in 20 s with Dask's
#: defaults (8% of a 2-core machine), 0.38 s with these.  kngflow records each release's
#: wall time itself; the dashboard's profile tab stays empty.
LEAN_CONFIG = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.gil.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.worker.memory.monitor-interval": "1s",
}


def _dask_env_name(key: str) -> str:
    """The environment variable Dask reads ``key`` from (``DASK_A__B_C`` for ``a.b-c``)."""
    return "DASK_" + key.upper().replace(".", "__").replace("-", "_")


#: Environment of every worker: one thread per worker process, whatever the library, and
#: :data:`LEAN_CONFIG` (as Dask's environment variables).
WORKER_ENV = {
    "NUMBA_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    **{_dask_env_name(k): str(v) for k, v in LEAN_CONFIG.items()},
}

#: Accepted values of the ``kind`` field.
KINDS = ("slurm", "pbs", "kubernetes", "local", "python")

_FIELDS = ("kind", "jobs", "options", "manifest", "factory", "adapt")
_FACTORY_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")

#: The batch command each dask-jobqueue deployment submits its jobs with.
SUBMIT_COMMANDS = {"slurm": "sbatch", "pbs": "qsub"}



class ClusterConfigError(ValueError):
    """A bad ``--cluster`` file; the message names the field (``cluster.kind`` ...)."""


def _prologue() -> list[str]:
    return [f"export {k}={v}" for k, v in WORKER_ENV.items()]


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _read_yaml(path: Path, field: str):
    """The YAML document at ``path``; ClusterConfigError naming ``field`` if unreadable."""
    import yaml

    try:
        return yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ClusterConfigError(f"{field}: cannot read {str(path)!r}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ClusterConfigError(f"{field}: {path} is not valid YAML: {exc}") from None


def load_cluster_config(path: str | os.PathLike) -> dict:
    """Read and validate a deployment file.

    Parameters
    ----------
    path : str or os.PathLike
        YAML file with the fields ``kind``, ``jobs``, ``options``, ``manifest``
        (kubernetes only), ``factory`` (python only) and ``adapt``.

    Returns
    -------
    dict
        ``kind``, ``jobs`` (``None`` for a local file without ``jobs``: one
        worker per core), ``options`` (a new dict), ``adapt`` (``None`` or a
        dict) and, for kubernetes, ``manifest`` as a path resolved against the
        directory of ``path``; for python, ``factory`` (its module is imported
        and ``options`` are checked against its signature now).

    Raises
    ------
    ClusterConfigError
        When the file cannot be read or a field is invalid; the message starts
        with the field (``cluster.kind: ...``).
    """
    p = Path(path)
    cfg = _read_yaml(p, "cluster")
    if not isinstance(cfg, dict):
        raise ClusterConfigError(f"cluster: {p} must hold a mapping with kind, jobs and options")
    for key in cfg:
        if key not in _FIELDS:
            raise ClusterConfigError(f"cluster.{key}: unknown field; allowed fields are {', '.join(_FIELDS)}")
    kind = cfg.get("kind")
    if kind not in KINDS:
        raise ClusterConfigError(f"cluster.kind: must be one of {list(KINDS)}, got {kind!r}")
    jobs = cfg.get("jobs", None if kind in ("local", "python") else 1)
    if jobs is not None and (not _count(jobs) or jobs < 1):
        raise ClusterConfigError(f"cluster.jobs: must be an integer >= 1, got {jobs!r}")
    options = cfg.get("options") or {}
    if not isinstance(options, dict):
        raise ClusterConfigError("cluster.options: must be a mapping of keyword arguments")
    adapt = cfg.get("adapt")
    if adapt is not None:
        if not (isinstance(adapt, dict) and adapt and set(adapt) <= {"minimum", "maximum"}):
            raise ClusterConfigError("cluster.adapt: must be a mapping with minimum and/or maximum")
        for key, value in adapt.items():
            if not _count(value) or value < 0:
                raise ClusterConfigError(f"cluster.adapt.{key}: must be an integer >= 0, got {value!r}")
        if adapt.get("minimum", 0) > adapt.get("maximum", adapt.get("minimum", 0)):
            raise ClusterConfigError("cluster.adapt: minimum must not exceed maximum")
        adapt = dict(adapt)
    _check_option_names(kind, options)
    out = {"kind": kind, "jobs": jobs, "options": dict(options), "adapt": adapt}
    if kind == "kubernetes":
        manifest = cfg.get("manifest")
        if not isinstance(manifest, str) or not manifest:
            raise ClusterConfigError("cluster.manifest: kind kubernetes needs the path of a DaskCluster manifest")
        mpath = Path(manifest)
        if not mpath.is_absolute():
            mpath = p.parent / mpath
        out["manifest"] = str(mpath)
        for key in ("custom_cluster_spec", "n_workers"):
            if key in options:
                raise ClusterConfigError(
                    f"cluster.options.{key}: set by kngflow from cluster.manifest and cluster.jobs"
                )
        kubernetes_manifest(out)  # fail now, before any store is touched
    elif "manifest" in cfg:
        raise ClusterConfigError("cluster.manifest: only used with kind kubernetes")
    if kind == "python":
        out["factory"] = cfg.get("factory")
        if "jobs" in cfg:
            raise ClusterConfigError("cluster.jobs: not used with kind python; size the deployment in cluster.options")
        _check_factory_options(_factory(out["factory"]), out["factory"], options)
    elif "factory" in cfg:
        raise ClusterConfigError("cluster.factory: only used with kind python")
    if kind in ("slurm", "pbs"):
        jobqueue_options(out)  # cores/processes and job_script_prologue, checked now
    if kind == "local":
        if options.get("threads_per_worker", 1) != 1:
            raise ClusterConfigError("cluster.options.threads_per_worker: workers are single-threaded; must be 1")
        if options.get("processes", True) is not True:
            raise ClusterConfigError("cluster.options.processes: workers are processes; must be true")
    return out


def _factory(ref: Any):
    """The function a ``factory: "package.module:function"`` reference names (imported now)."""
    if not isinstance(ref, str) or not _FACTORY_RE.match(ref):
        raise ClusterConfigError(
            f"cluster.factory: kind python needs \"package.module:function\", got {ref!r}"
        )
    module, _, name = ref.partition(":")
    try:
        mod = importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - any import failure is the file's problem
        raise ClusterConfigError(
            f"cluster.factory: cannot import {module!r} ({type(exc).__name__}: {exc}); "
            "it must be installed or on PYTHONPATH"
        ) from None
    fn = getattr(mod, name, None)
    if not callable(fn):
        raise ClusterConfigError(f"cluster.factory: {module!r} has no function {name!r}")
    return fn


def _check_factory_options(fn, ref: str, options: dict) -> None:
    try:
        inspect.signature(fn).bind(**options)
    except TypeError as exc:
        raise ClusterConfigError(f"cluster.options: {ref} does not accept them: {exc}") from None
    except ValueError:  # no signature (a builtin): the call will tell
        pass


def _option_names(kind: str) -> set[str] | None:
    """Keyword arguments the cluster class of ``kind`` accepts (None: its package is missing)."""
    if kind == "python":
        return None  # the factory's own signature is checked (_check_factory_options)
    if kind == "local":
        from distributed import LocalCluster, Nanny, Worker

        classes = [LocalCluster, Nanny, Worker]
    elif kind in SUBMIT_COMMANDS:
        try:
            import dask_jobqueue
            from dask_jobqueue.core import Job
        except ImportError:
            return None
        cluster = dask_jobqueue.SLURMCluster if kind == "slurm" else dask_jobqueue.PBSCluster
        classes = [cluster, cluster.job_cls, Job]
    else:
        try:
            from dask_kubernetes.operator import KubeCluster
        except ImportError:
            return None
        classes = [KubeCluster]
    names = set()
    for cls in classes:
        params = inspect.signature(cls.__init__).parameters.values()
        names |= {p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD or p.kind is p.KEYWORD_ONLY}
    return names - {"self", "job_cls", "worker_class"}


def _check_option_names(kind: str, options: dict) -> None:
    """Refuse an option that the cluster class of ``kind`` would not accept, before it starts."""
    known = _option_names(kind)
    if known is None:
        return
    for key in options:
        if key not in known:
            close = difflib.get_close_matches(str(key), sorted(known), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise ClusterConfigError(f"cluster.options.{key}: unknown option for kind {kind}{hint}")


def check_submit_command(cfg: dict) -> None:
    """Refuse a slurm/pbs deployment on a machine without its submit command.

    Parameters
    ----------
    cfg : dict
        A validated config (:func:`load_cluster_config`).

    Raises
    ------
    ClusterConfigError
        When ``cfg["kind"]`` is slurm (pbs) and ``sbatch`` (``qsub``) is not on
        ``PATH``: no job could be submitted, the run would wait for ever.
    """
    command = SUBMIT_COMMANDS.get(cfg["kind"])
    if command and shutil.which(command) is None:
        raise ClusterConfigError(
            f"cluster.kind: {cfg['kind']} submits jobs with {command}, which is not on PATH here; "
            f"run kngflow where {command} works (a login node of the cluster)"
        )


def jobqueue_options(cfg: dict) -> dict:
    """Keyword arguments for ``SLURMCluster``/``PBSCluster`` with single-threaded workers.

    Parameters
    ----------
    cfg : dict
        A validated slurm or pbs config (:func:`load_cluster_config`).

    Returns
    -------
    dict
        ``cfg["options"]`` with ``processes`` defaulting to ``cores``, the
        ``export`` lines of :data:`WORKER_ENV` appended to
        ``job_script_prologue`` (unless the variable is already set there) and,
        when a ``walltime`` is set and ``worker_extra_args`` has no
        ``--lifetime``, :func:`lifetime_args` appended to ``worker_extra_args``.

    Raises
    ------
    ClusterConfigError
        When ``processes`` differs from ``cores`` (workers would run several
        threads) or ``job_script_prologue`` is not a list of lines.
    """
    opts = dict(cfg["options"])
    cores = opts.get("cores")
    if cores is not None:
        if not _count(cores) or cores < 1:
            raise ClusterConfigError(f"cluster.options.cores: must be an integer >= 1, got {cores!r}")
        opts.setdefault("processes", cores)
        if opts["processes"] != cores:
            raise ClusterConfigError(
                f"cluster.options.processes: must equal cores ({cores}) so that every worker "
                f"has one thread, got {opts['processes']!r}"
            )
    prologue = opts.get("job_script_prologue") or []
    if isinstance(prologue, str) or not isinstance(prologue, list):
        raise ClusterConfigError("cluster.options.job_script_prologue: must be a list of shell lines")
    prologue = [str(line) for line in prologue]
    for line in _prologue():
        var = line.split()[1].split("=")[0]
        if not any(var in existing for existing in prologue):
            prologue.append(line)
    opts["job_script_prologue"] = prologue
    args = opts.get("worker_extra_args") or []
    if isinstance(args, str) or not isinstance(args, list):
        raise ClusterConfigError("cluster.options.worker_extra_args: must be a list of dask worker arguments")
    args = [str(a) for a in args]
    if opts.get("walltime") is not None and not any(a.startswith("--lifetime") for a in args):
        args += lifetime_args(_walltime_seconds(opts["walltime"], cfg.get("kind")))
    opts["worker_extra_args"] = args
    return opts


def _walltime_seconds(walltime: Any, kind: str | None = None) -> int:
    """Seconds of a batch walltime: ``[D-]HH:MM:SS``, ``MM:SS``, ``D-HH[:MM]``, or one
    number (minutes for SLURM, seconds for PBS)."""
    text = str(walltime).strip()
    m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text)
    if not m:
        raise ClusterConfigError(f"cluster.options.walltime: expected [D-]HH:MM:SS, got {walltime!r}")
    days, *parts = m.groups()
    parts = [int(x) for x in parts if x is not None]
    if days is not None:  # D-HH, D-HH:MM, D-HH:MM:SS
        parts = parts + [0] * (3 - len(parts))
    elif len(parts) == 1:
        parts = [0, 0, parts[0]] if kind == "pbs" else [0, parts[0], 0]
    elif len(parts) == 2:  # MM:SS
        parts = [0] + parts
    hours, minutes, seconds = parts
    return 86400 * int(days or 0) + 3600 * hours + 60 * minutes + seconds


def lifetime_args(walltime: int) -> list[str]:
    """``dask worker`` arguments that retire a worker before its job's walltime.

    A worker killed by the batch system at its walltime loses its tasks as a
    failure (counted against ``distributed.scheduler.allowed-failures``); a worker
    that reaches ``--lifetime`` first retires gracefully: its tasks go back to the
    scheduler and nothing counts as failed.  The lifetime is the walltime less
    twice the stagger and a minute, the stagger a twelfth of the walltime, at most
    5 minutes (so that the workers of one job do not all leave at once).
    """
    stagger = max(1, min(300, walltime // 12))
    lifetime = max(1, walltime - 2 * stagger - 60)
    return ["--lifetime", f"{lifetime}s", "--lifetime-stagger", f"{stagger}s"]


def _worker_container(spec: dict, where: str) -> dict:
    containers = (spec.get("spec") or {}).get("containers") if isinstance(spec, dict) else None
    if not isinstance(containers, list) or not containers or not isinstance(containers[0], dict):
        raise ClusterConfigError(f"cluster.manifest: {where}.spec.containers must list the worker container")
    return containers[0]


def kubernetes_manifest(cfg: dict) -> dict:
    """The ``DaskCluster`` resource of a kubernetes config, ready for ``KubeCluster``.

    Parameters
    ----------
    cfg : dict
        A kubernetes config (:func:`load_cluster_config`); ``cfg["jobs"]`` is
        the number of workers.

    Returns
    -------
    dict
        The manifest with ``spec.worker.replicas`` set to ``cfg["jobs"]`` and
        :data:`WORKER_ENV` added to the worker container's ``env`` where missing.

    Raises
    ------
    ClusterConfigError
        When the manifest cannot be read, is not a ``DaskCluster`` of
        ``kubernetes.dask.org/v1``, its scheduler service selects another
        cluster name, or its worker does not run ``dask worker --nthreads 1``.
    """
    path = Path(cfg["manifest"])
    doc = _read_yaml(path, "cluster.manifest")
    if not isinstance(doc, dict) or doc.get("kind") != "DaskCluster":
        raise ClusterConfigError(f"cluster.manifest: {path} must hold one resource of kind DaskCluster")
    if doc.get("apiVersion") != "kubernetes.dask.org/v1":
        raise ClusterConfigError(
            f"cluster.manifest: apiVersion must be kubernetes.dask.org/v1, got {doc.get('apiVersion')!r}"
        )
    name = (doc.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        raise ClusterConfigError("cluster.manifest: metadata.name (the cluster name) is missing")
    spec = doc.get("spec")
    if not (isinstance(spec, dict) and isinstance(spec.get("worker"), dict) and isinstance(spec.get("scheduler"), dict)):
        raise ClusterConfigError("cluster.manifest: spec must have worker and scheduler")
    _worker_container(spec["scheduler"], "spec.scheduler")
    selector = ((spec["scheduler"].get("service") or {}).get("selector") or {})
    selected = selector.get("dask.org/cluster-name", name)
    if selected != name:
        raise ClusterConfigError(
            f"cluster.manifest: spec.scheduler.service.selector dask.org/cluster-name is {selected!r} "
            f"but metadata.name is {name!r}"
        )
    worker = _worker_container(spec["worker"], "spec.worker")
    words = shlex.split(" ".join(str(w) for w in (worker.get("command") or []) + (worker.get("args") or [])))
    runs_worker = "dask-worker" in words or any(a == "dask" and b == "worker" for a, b in zip(words, words[1:]))
    one_thread = "--nthreads=1" in words or any(a == "--nthreads" and b == "1" for a, b in zip(words, words[1:]))
    if not runs_worker or not one_thread:
        raise ClusterConfigError(
            "cluster.manifest: the worker container (spec.worker.spec.containers[0]) must run "
            "`dask worker --nthreads 1`"
        )
    out = copy.deepcopy(doc)
    if cfg.get("jobs") is not None:
        out["spec"]["worker"]["replicas"] = cfg["jobs"]
    container = out["spec"]["worker"]["spec"]["containers"][0]
    env = container.get("env") or []
    if not isinstance(env, list):
        raise ClusterConfigError("cluster.manifest: spec.worker.spec.containers[0].env must be a list")
    present = {e.get("name") for e in env if isinstance(e, dict)}
    env = list(env) + [{"name": k, "value": v} for k, v in WORKER_ENV.items() if k not in present]
    container["env"] = env
    return out

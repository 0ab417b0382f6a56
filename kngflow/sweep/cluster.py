"""Where a sweep runs: a local cluster, an existing scheduler, or a deployment file.

* default: :func:`local_cluster`, one single-threaded worker process per core,
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
``sbatch``/``qsub`` is missing; :func:`check_address` and
:func:`check_dashboard_address` check addresses given on the command line.
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import importlib
import inspect
import json
import math
import os
import re
import shlex
import shutil
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from distributed import Client, LocalCluster
    from distributed.deploy import Cluster

__all__ = [
    "WORKER_ENV",
    "LEAN_CONFIG",
    "KINDS",
    "ClusterConfigError",
    "load_cluster_config",
    "jobqueue_options",
    "kubernetes_manifest",
    "cluster_from_config",
    "local_cluster",
    "connect",
    "SUBMIT_COMMANDS",
    "check_submit_command",
    "check_address",
    "check_dashboard_address",
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

#: Schemes of Dask scheduler addresses.
_SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")
_HOST_RE = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?)$")


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


def _port_problem(port: str, lowest: int) -> str | None:
    if not port.isdigit() or not lowest <= int(port) <= 65535:
        return f"port must be an integer in {lowest}..65535, got {port!r}"
    return None


def check_address(address: str) -> str | None:
    """Why ``address`` is not a Dask scheduler address ``[SCHEME://]HOST:PORT`` (None if it is).

    Checks the syntax only (nothing is contacted): scheme one of tcp, tls, ws,
    wss, ucx; a host name, IPv4 or bracketed IPv6 address; a port in 1..65535.
    """
    scheme, sep, rest = address.rpartition("://")
    if sep and scheme not in _SCHEMES:
        return f"unknown scheme {scheme!r}; use one of {', '.join(_SCHEMES)}"
    host, sep, port = rest.rpartition(":")
    if not sep or not _HOST_RE.match(host):
        return "expected [tcp://]HOST:PORT, e.g. tcp://10.0.0.5:8786"
    return _port_problem(port, 1)


def check_scheduler_file(path) -> str | None:
    """Why ``path`` is not a usable ``dask scheduler --scheduler-file`` file (None if it is)."""
    p = Path(path)
    if not p.exists():
        return "does not exist"
    try:
        info = json.loads(p.read_text())
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    except ValueError:
        return "is not a scheduler file (not JSON); write it with `dask scheduler --scheduler-file FILE`"
    if not isinstance(info, dict) or not isinstance(info.get("address"), str) or not info["address"]:
        return "is not a scheduler file (no scheduler address); write it with `dask scheduler --scheduler-file FILE`"
    why = check_address(info["address"])
    return f"has a bad address {info['address']!r}: {why}" if why else None


def check_dashboard_address(address: str) -> str | None:
    """Why ``address`` is not a dashboard address ``[HOST]:PORT`` of this machine (None if it is).

    The port may be 0 (any free port); a host must be an address of this
    machine (it is bound to, nothing else is tried).
    """
    host, sep, port = address.rpartition(":")
    if not sep and address.isdigit():
        host, port = "", address
    elif not sep or (host and not _HOST_RE.match(host)):
        return "expected [HOST]:PORT, e.g. :8787 or 127.0.0.1:0"
    problem = _port_problem(port, 0)
    if problem or not host:
        return problem
    import socket

    try:
        infos = socket.getaddrinfo(host.strip("[]"), 0, type=socket.SOCK_STREAM)
        with socket.socket(infos[0][0], socket.SOCK_STREAM) as sock:
            sock.bind(infos[0][4])
    except OSError as exc:
        return f"host {host!r} is not an address of this machine: {exc.strerror or exc}"
    return None


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
    if log_file is not None:
        env[LOG_FILE_ENV] = str(Path(log_file).resolve())
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

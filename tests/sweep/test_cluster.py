"""Deployment files of ``cluster/`` and :mod:`kngflow.sweep.cluster`.

Needs no SLURM, PBS or Kubernetes: the dask-jobqueue clusters are built without
submitting jobs and their job scripts are checked; the DaskCluster manifest is
checked as data (dask-kubernetes is not required); ``local.yaml`` and
``scheduler-file.sh`` start real Dask processes on this machine.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from kngflow.sweep.cluster import (
    KINDS,
    LEAN_CONFIG,
    WORKER_ENV,
    ClusterConfigError,
    check_submit_command,
    cluster_from_config,
    jobqueue_options,
    kubernetes_manifest,
    load_cluster_config,
)

CLUSTER = Path(__file__).resolve().parents[2] / "cluster"
DEPLOYMENTS = ("slurm", "pbs", "kubernetes", "local", "python")
EXPORTS = [f"export {k}={v}" for k, v in WORKER_ENV.items()]


def _yaml(name: str):
    return yaml.safe_load((CLUSTER / name).read_text())


def _write(tmp_path: Path, text: str, name: str = "c.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# --- the ready files -------------------------------------------------------------------


def test_every_yaml_file_is_a_deployment_or_a_kubernetes_resource():
    deployments, resources = set(), set()
    for path in sorted(CLUSTER.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        assert isinstance(doc, dict), path.name
        if "apiVersion" in doc:
            resources.add(path.name)
        else:
            cfg = load_cluster_config(path)
            assert cfg["kind"] == path.stem, path.name
            deployments.add(path.stem)
    assert deployments == set(DEPLOYMENTS) == set(KINDS)
    assert resources == {"daskcluster.yaml", "pvc.yaml"}


@pytest.mark.parametrize("kind", DEPLOYMENTS)
def test_deployment_file_loads(kind):
    cfg = load_cluster_config(CLUSTER / f"{kind}.yaml")
    assert cfg["kind"] == kind
    assert isinstance(cfg["options"], dict)
    if kind == "kubernetes":
        assert Path(cfg["manifest"]) == CLUSTER / "daskcluster.yaml"
    else:
        assert "manifest" not in cfg


def test_readme_gives_the_command_of_every_deployment_file():
    text = (CLUSTER / "README.md").read_text()
    for kind in DEPLOYMENTS:
        assert f"--cluster cluster/{kind}.yaml" in text, kind
    assert "dask scheduler --scheduler-file" in text
    assert re.search(r"dask worker --scheduler-file \S+ --nthreads 1", text)
    assert "--scheduler-file" in text and "pip install -e ." in text
    for var, value in WORKER_ENV.items():
        assert f"{var}={value}" in text, var
    for name in ("scheduler-file.sh", "daskcluster.yaml", "pvc.yaml", "ReadWriteOnce",
                 "Workers need no access to the store"):
        assert name in text, name


# --- SLURM and PBS: real dask-jobqueue clusters, no job submitted ----------------------


@pytest.mark.parametrize("kind", ["slurm", "pbs"])
def test_jobqueue_job_script(kind, tmp_path, monkeypatch):
    pytest.importorskip("dask_jobqueue")
    monkeypatch.chdir(tmp_path)  # log_directory is relative and created on construction
    cfg = load_cluster_config(CLUSTER / f"{kind}.yaml")
    o = cfg["options"]
    assert o["processes"] == o["cores"]
    cfg["options"].setdefault("scheduler_options", {"dashboard_address": ":0"})
    cluster = cluster_from_config(cfg, start=False)
    try:
        assert type(cluster).__name__ == {"slurm": "SLURMCluster", "pbs": "PBSCluster"}[kind]
        assert not cluster.worker_spec  # start=False: nothing submitted
        script = cluster.job_script()
    finally:
        cluster.close()
    lines = script.splitlines()
    if kind == "slurm":
        directives = [
            f"#SBATCH -J {o['job_name']}",
            f"#SBATCH -p {o['queue']}",
            f"#SBATCH -A {o['account']}",
            f"#SBATCH --cpus-per-task={o['cores']}",
            f"#SBATCH -t {o['walltime']}",
            f"#SBATCH -o {o['log_directory']}/",
            "#SBATCH --mem=",
        ]
    else:
        directives = [
            f"#PBS -N {o['job_name']}",
            f"#PBS -q {o['queue']}",
            f"#PBS -A {o['account']}",
            f"#PBS -l select=1:ncpus={o['cores']}:mem=",
            f"#PBS -l walltime={o['walltime']}",
            f"#PBS -o {o['log_directory']}/",
        ]
    for d in directives:
        assert any(line.startswith(d) for line in lines), (d, script)
    command = [line for line in lines if "distributed.cli.dask_worker" in line]
    assert len(command) == 1, script
    command = command[0]
    assert command.startswith(f"{o['python']} -m distributed.cli.dask_worker ")
    assert " --nthreads 1 " in command
    assert f" --nworkers {o['cores']} " in command
    # workers retire before the walltime: lifetime + stagger < walltime
    assert " --lifetime 225m --lifetime-stagger 5m" in command
    assert 225 + 5 < 4 * 60 and o["walltime"] == "04:00:00"
    assert f" --local-directory {o['local_directory']}" in command
    for line in EXPORTS:
        assert line in lines, line
        assert lines.index(line) < lines.index(command)
    assert (tmp_path / o["log_directory"]).is_dir()


def test_jobqueue_options_keeps_user_prologue_and_adds_each_export_once():
    cfg = {
        "kind": "slurm",
        "jobs": 1,
        "options": {"cores": 4, "job_script_prologue": ["module load python", "export OMP_NUM_THREADS=1"]},
    }
    opts = jobqueue_options(cfg)
    prologue = opts["job_script_prologue"]
    assert prologue[:2] == ["module load python", "export OMP_NUM_THREADS=1"]
    assert sum("OMP_NUM_THREADS" in line for line in prologue) == 1
    for line in EXPORTS:
        assert line in prologue
    assert opts["processes"] == 4  # default: one single-threaded worker per core
    assert cfg["options"]["job_script_prologue"] == ["module load python", "export OMP_NUM_THREADS=1"]


@pytest.mark.parametrize(
    "kind, options, match",
    [
        ("slurm", "{cores: 1, memory: 1GiB, no_such_option: 3}", r"^cluster\.options\.no_such_option: unknown option for kind slurm"),
        ("pbs", "{cores: 1, memory: 1GiB, walltme: '1:00:00'}", r"^cluster\.options\.walltme: .*did you mean walltime"),
        ("local", "{memory_limt: 2GiB}", r"^cluster\.options\.memory_limt: unknown option for kind local; did you mean memory_limit"),
    ],
)
def test_unknown_option_is_refused_when_the_file_is_read(kind, options, match, tmp_path):
    """Before any scheduler starts (a local cluster would only fail once its workers start)."""
    if kind != "local":
        pytest.importorskip("dask_jobqueue")
    with pytest.raises(ClusterConfigError, match=match):
        load_cluster_config(_write(tmp_path, f"kind: {kind}\noptions: {options}\n"))


@pytest.mark.parametrize(
    "walltime, lifetime, stagger",
    [("04:00:00", 13740, 300), ("1:00:00", 2940, 300), ("30:00", 1440, 150), ("2-00:00:00", 172140, 300),
     ("10", 10, 50)],
)
def test_lifetime_derived_from_walltime(walltime, lifetime, stagger):
    cfg = {"options": {"cores": 2, "walltime": walltime}}
    args = jobqueue_options(cfg)["worker_extra_args"]
    if walltime == "10":  # 10 minutes
        lifetime, stagger = 600 - 2 * 50 - 60, 50
    assert args == ["--lifetime", f"{lifetime}s", "--lifetime-stagger", f"{stagger}s"]
    seconds = lifetime + stagger
    assert seconds < {"04:00:00": 14400, "1:00:00": 3600, "30:00": 1800, "2-00:00:00": 172800, "10": 600}[walltime]


def test_lifetime_given_is_kept_and_bad_walltime_refused():
    given = ["--lifetime", "50m", "--lifetime-stagger", "2m"]
    assert jobqueue_options({"options": {"walltime": "1:00:00", "worker_extra_args": given}})["worker_extra_args"] == given
    assert jobqueue_options({"options": {}})["worker_extra_args"] == []
    with pytest.raises(ClusterConfigError, match=r"^cluster\.options\.walltime: expected"):
        jobqueue_options({"options": {"walltime": "four hours"}})
    with pytest.raises(ClusterConfigError, match=r"^cluster\.options\.worker_extra_args: "):
        jobqueue_options({"options": {"worker_extra_args": "--lifetime 1h"}})


def test_submit_command_must_be_on_path(tmp_path, monkeypatch):
    slurm = load_cluster_config(CLUSTER / "slurm.yaml")
    local = load_cluster_config(CLUSTER / "local.yaml")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ClusterConfigError, match=r"^cluster\.kind: slurm submits jobs with sbatch, which is not on PATH"):
        check_submit_command(slurm)
    check_submit_command(local)  # nothing to submit
    (tmp_path / "sbatch").write_text("#!/bin/sh\n")
    (tmp_path / "sbatch").chmod(0o755)
    check_submit_command(slurm)


@pytest.mark.parametrize("adapt", [None, {"minimum": 1, "maximum": 3}])
def test_jobqueue_start_scales_or_adapts_in_jobs(adapt, tmp_path, monkeypatch):
    dask_jobqueue = pytest.importorskip("dask_jobqueue")
    calls = []
    monkeypatch.setattr(dask_jobqueue.SLURMCluster, "scale", lambda self, *a, **kw: calls.append(("scale", a, kw)))
    monkeypatch.setattr(dask_jobqueue.SLURMCluster, "adapt", lambda self, *a, **kw: calls.append(("adapt", a, kw)))
    monkeypatch.chdir(tmp_path)
    cfg = load_cluster_config(CLUSTER / "slurm.yaml")
    cfg["jobs"], cfg["adapt"] = 5, adapt
    cfg["options"]["scheduler_options"] = {"dashboard_address": ":0"}
    cluster = cluster_from_config(cfg)
    made, calls[:] = list(calls), []
    cluster.close()
    if adapt is None:
        assert made == [("scale", (), {"jobs": 5})]
    else:
        assert made == [("adapt", (), {"minimum_jobs": 1, "maximum_jobs": 3})]


# --- Kubernetes: the manifest as data ---------------------------------------------------


def _worker_words(container: dict) -> list[str]:
    return [str(w) for w in (container.get("command") or []) + (container.get("args") or [])]


def test_daskcluster_manifest_structure():
    doc = _yaml("daskcluster.yaml")
    assert doc["apiVersion"] == "kubernetes.dask.org/v1"
    assert doc["kind"] == "DaskCluster"
    name = doc["metadata"]["name"]
    spec = doc["spec"]

    worker_pod = spec["worker"]["spec"]
    worker = worker_pod["containers"][0]
    words = _worker_words(worker)
    assert words[:2] == ["dask", "worker"]
    assert words[words.index("--nthreads") + 1] == "1"
    env = {e["name"]: e["value"] for e in worker["env"]}
    assert {k: env.get(k) for k in WORKER_ENV} == WORKER_ENV
    assert worker["resources"]["limits"]["cpu"] == "1"

    # workers never open the store: no volume; the claim is for the pod that runs kngflow
    assert "volumeMounts" not in worker and "volumes" not in worker_pod
    pvc = _yaml("pvc.yaml")
    assert pvc["kind"] == "PersistentVolumeClaim" and pvc["spec"]["accessModes"] == ["ReadWriteOnce"]

    scheduler = spec["scheduler"]["spec"]["containers"][0]
    assert _worker_words(scheduler)[:2] == ["dask", "scheduler"]
    assert scheduler["image"] == worker["image"]
    assert {p["name"]: p["containerPort"] for p in scheduler["ports"]} == {"tcp-comm": 8786, "http-dashboard": 8787}
    service = spec["scheduler"]["service"]
    assert {p["name"]: p["port"] for p in service["ports"]} == {"tcp-comm": 8786, "http-dashboard": 8787}
    assert {p["targetPort"] for p in service["ports"]} == {"tcp-comm", "http-dashboard"}
    assert service["selector"] == {"dask.org/cluster-name": name, "dask.org/component": "scheduler"}

    # coherent with kubernetes.yaml
    assert spec["worker"]["replicas"] == _yaml("kubernetes.yaml")["jobs"]


def test_kubernetes_manifest_sets_replicas_and_env():
    cfg = load_cluster_config(CLUSTER / "kubernetes.yaml")
    cfg["jobs"] = 3  # as --workers 3 does
    m = kubernetes_manifest(cfg)
    assert m["spec"]["worker"]["replicas"] == 3
    assert m["metadata"]["name"] == _yaml("daskcluster.yaml")["metadata"]["name"]
    env = m["spec"]["worker"]["spec"]["containers"][0]["env"]
    assert [e["name"] for e in env].count("NUMBA_NUM_THREADS") == 1
    assert _yaml("daskcluster.yaml")["spec"]["worker"]["replicas"] != 3  # the file is untouched


def _manifest_variant(tmp_path: Path, edit) -> Path:
    doc = _yaml("daskcluster.yaml")
    edit(doc)
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(doc))
    return _write(tmp_path, "kind: kubernetes\njobs: 2\nmanifest: m.yaml\n")


def test_kubernetes_manifest_adds_missing_env(tmp_path):
    def drop_env(doc):
        del doc["spec"]["worker"]["spec"]["containers"][0]["env"]

    m = kubernetes_manifest(load_cluster_config(_manifest_variant(tmp_path, drop_env)))
    env = {e["name"]: e["value"] for e in m["spec"]["worker"]["spec"]["containers"][0]["env"]}
    assert env == WORKER_ENV
    assert m["spec"]["worker"]["replicas"] == 2


def _set_args(args):
    def edit(doc):
        doc["spec"]["worker"]["spec"]["containers"][0]["args"] = args

    return edit


def _rename(doc):
    doc["metadata"]["name"] = "other"


@pytest.mark.parametrize(
    "edit, message",
    [
        (_set_args(["dask", "worker", "--nthreads", "4"]), "dask worker --nthreads 1"),
        (_set_args(["dask", "worker"]), "dask worker --nthreads 1"),
        (_set_args(["sh", "-c", "dask worker --nthreads 1"]), None),  # accepted
        (_rename, "selector"),
        (lambda doc: doc.update(kind="DaskJob"), "kind DaskCluster"),
        (lambda doc: doc.update(apiVersion="kubernetes.dask.org/v2"), "apiVersion"),
        (lambda doc: doc["spec"].pop("scheduler"), "worker and scheduler"),
    ],
)
def test_kubernetes_bad_manifest(tmp_path, edit, message):
    path = _manifest_variant(tmp_path, edit)
    if message is None:
        load_cluster_config(path)
        return
    with pytest.raises(ClusterConfigError, match=r"^cluster\.manifest: .*" + re.escape(message)):
        load_cluster_config(path)


@pytest.mark.skipif(importlib.util.find_spec("dask_kubernetes") is not None, reason="dask-kubernetes is installed")
def test_kubernetes_without_dask_kubernetes_is_a_config_error():
    cfg = load_cluster_config(CLUSTER / "kubernetes.yaml")
    with pytest.raises(ClusterConfigError, match=r"^cluster\.kind: .*dask-kubernetes"):
        cluster_from_config(cfg)


# --- bad files ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, match",
    [
        ("kind: local\nworkers: 2\n", r"^cluster\.workers: unknown field"),
        ("kind: lsf\n", r"^cluster\.kind: must be one of"),
        ("jobs: 2\n", r"^cluster\.kind: "),
        ("kind: slurm\njobs: 0\n", r"^cluster\.jobs: must be an integer >= 1"),
        ("kind: slurm\njobs: '4'\n", r"^cluster\.jobs: "),
        ("kind: slurm\njobs: true\n", r"^cluster\.jobs: "),
        ("kind: kubernetes\njobs: 2\n", r"^cluster\.manifest: kind kubernetes needs"),
        ("kind: kubernetes\nmanifest: missing.yaml\n", r"^cluster\.manifest: cannot read"),
        ("kind: slurm\nmanifest: m.yaml\n", r"^cluster\.manifest: only used with kind kubernetes"),
        ("- kind: local\n", r"^cluster: .* must hold a mapping"),
        ("just text\n", r"^cluster: .* must hold a mapping"),
        ("kind: local\noptions: [1, 2]\n", r"^cluster\.options: must be a mapping"),
        ("kind: local\nadapt: 3\n", r"^cluster\.adapt: "),
        ("kind: local\nadapt: {minimum: 4, maximum: 2}\n", r"^cluster\.adapt: minimum must not exceed"),
        ("kind: local\nadapt: {maximum: -1}\n", r"^cluster\.adapt\.maximum: "),
        ("kind: local\noptions: {threads_per_worker: 2}\n", r"^cluster\.options\.threads_per_worker: "),
        ("kind: local\noptions: {processes: false}\n", r"^cluster\.options\.processes: "),
        ("kind: slurm\noptions: {cores: 8, processes: 2}\n", r"^cluster\.options\.processes: must equal cores"),
        ("kind: pbs\noptions: {cores: 0}\n", r"^cluster\.options\.cores: "),
        ("kind: slurm\noptions: {job_script_prologue: 'module load x'}\n", r"^cluster\.options\.job_script_prologue: "),
        (
            "kind: kubernetes\nmanifest: daskcluster.yaml\noptions: {n_workers: 3}\n",
            r"^cluster\.options\.n_workers: ",
        ),
        ("kind: [local\n", r"^cluster: .* is not valid YAML"),
        ("kind: python\n", r"^cluster\.factory: kind python needs \"package\.module:function\""),
        ("kind: python\nfactory: 'a.b'\n", r"^cluster\.factory: kind python needs"),
        ("kind: python\nfactory: 'kngflow.sweep.cluster:local_cluster'\njobs: 2\n", r"^cluster\.jobs: not used with kind python"),
        ("kind: python\nfactory: 'kngflow.sweep.cluster:nothing'\n", r"^cluster\.factory: 'kngflow\.sweep\.cluster' has no function 'nothing'"),
        ("kind: local\nfactory: 'kngflow.sweep.cluster:local_cluster'\n", r"^cluster\.factory: only used with kind python"),
    ],
)
def test_bad_file(tmp_path, text, match):
    (tmp_path / "daskcluster.yaml").write_text((CLUSTER / "daskcluster.yaml").read_text())
    with pytest.raises(ClusterConfigError, match=match):
        load_cluster_config(_write(tmp_path, text))


def test_missing_file(tmp_path):
    with pytest.raises(ClusterConfigError, match=r"^cluster: cannot read"):
        load_cluster_config(tmp_path / "nope.yaml")


# --- local.yaml: a real LocalCluster ------------------------------------------------------


@pytest.mark.slow
def test_local_file_starts_single_threaded_workers():
    from distributed import Client

    cfg = load_cluster_config(CLUSTER / "local.yaml")
    cfg["jobs"] = 2
    cfg["options"]["dashboard_address"] = None
    cluster = cluster_from_config(cfg)
    try:
        with Client(cluster, timeout=60) as client:
            client.wait_for_workers(2, timeout=60)
            assert sorted(client.nthreads().values()) == [1, 1]
            # lambdas travel by value: the workers need not import this test module
            envs = client.run(lambda: {k: os.environ.get(k) for k in WORKER_ENV})
            assert list(envs.values()) == [WORKER_ENV, WORKER_ENV]
            # Dask's profiler and monitors are off or slowed in the workers (LEAN_CONFIG)
            lean = client.run(lambda: {k: __import__("dask").config.get(k) for k in LEAN_CONFIG})
            assert list(lean.values()) == [LEAN_CONFIG, LEAN_CONFIG]
            numba_threads = client.run(lambda: __import__("numba").config.NUMBA_NUM_THREADS)
            assert list(numba_threads.values()) == [1, 1]
    finally:
        cluster.close()


@pytest.mark.slow
def test_connect_with_local_file_honours_workers():
    from kngflow.sweep.cluster import connect

    with connect(cluster_file=str(CLUSTER / "local.yaml"), workers=1, dashboard_address=None) as client:
        client.wait_for_workers(1, timeout=60)
        assert list(client.nthreads().values()) == [1]


# --- scheduler-file.sh ----------------------------------------------------------------------

SCRIPT = CLUSTER / "scheduler-file.sh"


def test_scheduler_file_script_is_executable_bash():
    assert os.access(SCRIPT, os.X_OK)
    assert SCRIPT.read_text().startswith("#!/usr/bin/env bash\n")
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)
    text = SCRIPT.read_text()
    assert "--nthreads 1" in text and "--scheduler-file" in text
    for var, value in WORKER_ENV.items():
        assert f"{var}={value}" in text, var


def _script_env() -> dict:
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


def test_scheduler_file_script_rejects_bad_worker_count(tmp_path):
    r = subprocess.run(
        [str(SCRIPT), "-n", "0", "-f", str(tmp_path / "s.json")],
        env=_script_env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 2
    assert "-n must be an integer" in r.stderr
    assert not (tmp_path / "s.json").exists()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
def test_scheduler_file_script_runs_a_cluster(tmp_path):
    from distributed import Client

    sfile = tmp_path / "scheduler.json"
    log = open(tmp_path / "script.log", "w")
    proc = subprocess.Popen(
        [str(SCRIPT), "-n", "1", "-f", str(sfile), "-p", "0", "-d", ":0"],
        cwd=tmp_path,
        env=_script_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    pgid = proc.pid
    try:
        deadline = time.monotonic() + 60
        while not (sfile.exists() and sfile.stat().st_size):
            assert proc.poll() is None, (tmp_path / "script.log").read_text()
            assert time.monotonic() < deadline, "no scheduler file"
            time.sleep(0.1)
        with Client(scheduler_file=str(sfile), timeout=60) as client:
            client.wait_for_workers(1, timeout=60)
            assert list(client.nthreads().values()) == [1]
            assert list(client.run(lambda: os.environ.get("NUMBA_NUM_THREADS")).values()) == ["1"]
        # SIGTERM to the script alone: it stops its workers and scheduler
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) != 0
        deadline = time.monotonic() + 15
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _group_alive(pgid), "dask processes left behind"
        assert not sfile.exists()
    finally:
        if _group_alive(pgid):
            os.killpg(pgid, signal.SIGKILL)
        if proc.poll() is None:
            proc.wait(timeout=10)
        log.close()

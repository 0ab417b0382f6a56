"""The black-box audit on Dask: the same bound in one process, on a local cluster of two
workers (``--workers 2``) and on a real ``dask scheduler`` with two ``dask worker``
processes on 127.0.0.1 (``--scheduler``), for the same seed.

Releases are drawn in chunks whose seeds are named by (request, data set, chunk), cut from
the sizes alone (:mod:`kngflow.audit.runner`), so where a chunk runs cannot change it.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from testkit import kngflow_cli
from daskprocs import DaskProcesses
from kngflow.audit import blackbox_audit
from kngflow.audit.calibration import Disc, LaplaceMean
from kngflow.audit.runner import CHUNK_MIN, CHUNKS_MAX, DaskRunner, LocalRunner, chunk_sizes

MECH, PROB = "kngflow.audit.calibration:LaplaceMean", "kngflow.audit.calibration:Interval"
ARGS = ("--option", "factor=0.7", "--draws", "3000", "--seed", "5", "--no-progress")


@pytest.fixture(scope="module")
def dask_procs(tmp_path_factory):
    procs = DaskProcesses(tmp_path_factory.mktemp("dask"), deny=tmp_path_factory.mktemp("denied"))
    try:
        procs.start()
        procs.scale(2)
        yield procs
    finally:
        procs.close()


def test_chunks_depend_on_the_size_alone():
    assert chunk_sizes(0) == [] and chunk_sizes(1) == [1] and chunk_sizes(CHUNK_MIN + 1) == [CHUNK_MIN, 1]
    big = chunk_sizes(10**7)
    assert sum(big) == 10**7 and len(big) <= CHUNKS_MAX and len(set(big[:-1])) == 1


def _bound_line(out) -> tuple[str, str]:
    bound = re.search(r"privacy loss lower bound ([0-9.]+)", out.stdout)
    pair = re.search(r"pair: (.*)", out.stdout)
    assert bound and pair, out.stdout + out.stderr
    return bound.group(1), pair.group(1)


@pytest.mark.slow
def test_same_bound_in_one_process_and_on_two_real_workers(dask_procs):
    kw = dict(draws=3000, pilot=1000, score_draws=200, seed=11)
    local = blackbox_audit(LaplaceMean(factor=0.7), Disc(), 1.0, runner=LocalRunner(), **kw)
    remote = blackbox_audit(LaplaceMean(factor=0.7), Disc(), 1.0, runner=DaskRunner(dask_procs.client), **kw)
    assert str(local.pair) == str(remote.pair)
    assert local.bound == remote.bound and local.details["events"] == remote.details["events"]
    assert local.details["power"] == remote.details["power"]
    # both workers drew releases (the test would also pass on one, but then proves less)
    assert len(dask_procs.worker_names()) == 2
    # a different seed draws other releases: the equality above is not vacuous
    other = blackbox_audit(LaplaceMean(factor=0.7), Disc(), 1.0, runner=LocalRunner(), **{**kw, "seed": 12})
    assert other.details["events"] != local.details["events"]


@pytest.mark.slow
def test_cli_workers_and_scheduler_match_one_process(dask_procs):
    one = kngflow_cli("audit", MECH, "--problem", PROB, *ARGS, timeout=600)
    assert one.returncode in (0, 1), one.stderr
    expected = _bound_line(one)
    two = kngflow_cli("audit", MECH, "--problem", PROB, *ARGS, "--workers", "2", timeout=600)
    assert _bound_line(two) == expected, two.stdout + two.stderr
    remote = kngflow_cli("audit", MECH, "--problem", PROB, *ARGS, "--scheduler", dask_procs.address, timeout=600,
                         env=dask_procs.env)
    assert _bound_line(remote) == expected, remote.stdout + remote.stderr
    assert one.stdout.splitlines()[-1] == two.stdout.splitlines()[-1] == remote.stdout.splitlines()[-1]


@pytest.mark.parametrize("args, message", [
    (["--workers", "0"], "--workers must be >= 1"),
    (["--workers", "2", "--scheduler", "tcp://127.0.0.1:8786"], "--workers and --scheduler exclude each other"),
    (["--scheduler", "nowhere"], "--scheduler 'nowhere': expected [tcp://]HOST:PORT"),
    (["--target-power", "-1"], "--target-power must be > 0"),
    (["--target-power", "1.2", "--draws", "5000", "--max-draws", "1000"], "--max-draws must be >= --draws"),
])
def test_cluster_options_one_line_exit_2(args, message):
    # refused before any cluster starts: in this process
    out = kngflow_cli("audit", MECH, "--problem", PROB, *args, process=False)
    assert out.returncode == 2 and out.stdout == "" and "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kngflow audit: error:") and message in lines[0], lines


@pytest.mark.slow
def test_budgeted_default_draws_give_the_same_bound_on_workers():
    # without --draws the time budget picks the draws (here the fewest) from a timing in the
    # command's own process, whatever the workers: the bound is the same on two of them
    args = ("--option", "factor=0.7", "--seed", "5", "--no-progress", "--time-budget", "0")
    one = kngflow_cli("audit", MECH, "--problem", PROB, *args, timeout=600)
    two = kngflow_cli("audit", MECH, "--problem", PROB, *args, "--workers", "2", timeout=600)
    for out in (one, two):
        assert out.returncode in (0, 1) and out.stdout.startswith("draws: 1000 releases per data set"), out.stderr
    assert _bound_line(two) == _bound_line(one)

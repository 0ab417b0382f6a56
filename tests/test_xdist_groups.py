"""The suite's pytest-xdist scheduling (``tests/xdist_groups.py``): a module that defines a
module-scoped fixture runs in one worker, so the fixture is made once; other tests spread."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SHARED = """
import os
import pytest

@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return os.getpid()

@pytest.mark.parametrize("i", range(6))
def test_shared(made, i):
    with open(os.environ["PIDS"], "a") as f:
        f.write(f"shared {os.getpid()} {made}\\n")
"""

FREE = """
import os
import time
import pytest

@pytest.mark.parametrize("i", range(12))
def test_free(i):
    time.sleep(0.2)
    with open(os.environ["PIDS"], "a") as f:
        f.write(f"free {os.getpid()}\\n")
"""


def _workers(tmp_path: Path, *plugin: str) -> dict[str, set[str]]:
    """``{module: pids of the xdist workers that ran its tests}`` of a 3-worker run."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_a_shared.py").write_text(SHARED)  # first: plain load scheduling splits it
    (tmp_path / "test_b_free.py").write_text(FREE)
    pids = tmp_path / "pids.txt"
    env = {**os.environ, "PIDS": str(pids), "PYTHONPATH": str(Path(__file__).parent)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "3", "-p", "no:cacheprovider",
                           *plugin, str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out: dict[str, set[str]] = {}
    for line in pids.read_text().splitlines():
        module, pid, *made = line.split()
        assert made in ([], [pid])  # a module fixture is made in the worker that uses it
        out.setdefault(module, set()).add(pid)
    return out


@pytest.mark.slow
def test_a_module_with_a_shared_fixture_runs_in_one_worker(tmp_path):
    workers = _workers(tmp_path, "-p", "xdist_groups")
    assert len(workers["shared"]) == 1 and len(workers["free"]) >= 2, workers


@pytest.mark.slow
def test_control_plain_load_scheduling_splits_the_module(tmp_path):
    assert len(_workers(tmp_path)["shared"]) >= 2

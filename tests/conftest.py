"""pytest's hooks and fixtures for this suite; the helpers tests import are in ``testkit.py``."""

from __future__ import annotations

import pytest
from testkit import tiny_spec
from xdist_groups import pytest_xdist_make_scheduler  # noqa: F401  (pytest-xdist's hook)


@pytest.fixture
def spec_text():
    return tiny_spec


@pytest.fixture(scope="session")
def study_cluster(tmp_path_factory):
    """A real ``dask scheduler`` and one ``dask worker --nthreads 1`` on 127.0.0.1, started once per
    test process for the studies whose subject is their result, not the cluster
    (:func:`testkit.study_run`): a study run then costs its compute, not a new interpreter, a
    local cluster and a worker that loads its kernels again.  The worker may touch nothing
    under the tests' temporary root (``deny_paths.py``), where every store is."""
    from daskprocs import DaskProcesses

    procs = DaskProcesses(tmp_path_factory.mktemp("study_cluster"), deny=tmp_path_factory.getbasetemp())
    try:
        procs.start()
        procs.start_worker()
        procs.wait_for_workers(1)
        yield procs
    finally:
        procs.close()


#: Tests collected first: the longest of those that run alone (the docs pages: docs/audits.md
#: takes about 2.5 minutes), so that none of them is still running when the others are done.
FIRST = ("tests/test_docs.py::test_page_runs_as_written",)


def pytest_collection_modifyitems(items):
    """:data:`FIRST` to the front of the collection, which xdist's scheduling follows after
    the modules run whole (``xdist_groups.py``)."""
    items.sort(key=lambda item: not item.nodeid.startswith(FIRST))  # stable: the rest keeps its order


def pytest_terminal_summary(terminalreporter):
    """Each tier's test time (``slow`` marker or not): the time its tests' setup, call and
    teardown took, summed over the workers (the wall time of ``-m "not slow"`` is about this
    sum over the number of workers)."""
    totals = {"fast": [0.0, set()], "slow": [0.0, set()]}
    for reports in terminalreporter.stats.values():
        for rep in reports:
            if getattr(rep, "when", None) in ("setup", "call", "teardown"):
                tier = totals["slow" if "slow" in rep.keywords else "fast"]
                tier[0] += rep.duration
                tier[1].add(rep.nodeid)
    select = {"fast": '-m "not slow"', "slow": "-m slow"}
    if any(t[1] for t in totals.values()):
        terminalreporter.write_line("tiers: " + "; ".join(
            f"{name} ({select[name]}): {len(ids)} tests, {secs:.0f} s of test time"
            for name, (secs, ids) in totals.items() if ids))

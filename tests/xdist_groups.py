"""pytest-xdist scheduling for this suite (a plug-in: ``tests/conftest.py`` imports its hook)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path


@functools.cache
def _shares_fixtures(path: Path) -> bool:
    """Whether the test module at ``path`` defines a module- or class-scoped fixture."""
    if not path.is_file():
        return False
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and any(
            kw.arg == "scope" and isinstance(kw.value, ast.Constant) and kw.value.value in ("module", "class")
            for kw in node.keywords
        ):
            return True
    return False


def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's load scheduling (``-n N``), except that every test of a module defining a
    module- or class-scoped fixture (a study run once, a Dask cluster) runs in one worker, so
    that the fixture is made once, not once in every worker that gets one of its tests.  Those
    modules are sent first, the largest first; the other tests one at a time, as workers free
    up.  (xdist's ``--dist loadgroup`` marks its groups in the test ids, which pytest 9.2 no
    longer lets a plug-in change.)"""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    root = Path(config.rootpath)

    class ModuleFixtureScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if _shares_fixtures(root / module) else nodeid

    return ModuleFixtureScheduling(config, log)

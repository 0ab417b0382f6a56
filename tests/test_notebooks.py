"""The notebooks in notebooks/ run from top to bottom (nbclient), each in a fresh temporary folder.

Each notebook builds the small stores it analyses from small specs; it is stored without
outputs. The kernel is the interpreter running the tests (jupyter_client starts the ``python3``
kernel with ``sys.executable``); the notebooks
are skipped only where nbclient or ipykernel is not installed (CI installs both, the
``docs`` extra).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
TIMEOUT = 600  # seconds per cell


def test_there_are_three_notebooks_stored_without_outputs():
    nbformat = pytest.importorskip("nbformat")
    assert [p.name[:3] for p in NOTEBOOKS] == ["01_", "02_", "03_"]
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, f"{path.name}: stored with outputs"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=TIMEOUT, kernel_name="python3",
                                     resources={"metadata": {"path": str(work)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors, errors

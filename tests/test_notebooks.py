"""The notebooks in notebooks/: stored without outputs, and shown on the docs site executed.

Each notebook builds the small stores it analyses from small specs.  The docs build runs
every one from top to bottom (nbclient, in a fresh temporary folder: docs/hooks/notebooks.py)
into a page with its outputs; ``tests/test_docs.py::test_mkdocs_build_strict`` runs that
build and checks the executed notebooks (no error, the outputs on their pages), once for
the suite.  The kernel is the interpreter running the tests (jupyter_client starts the
``python3`` kernel with ``sys.executable``).  Here: the stored form and the hook's pages.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_three_notebooks_stored_without_outputs():
    nbformat = pytest.importorskip("nbformat")
    assert [p.name[:3] for p in NOTEBOOKS] == ["01_", "02_", "03_"]
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, f"{path.name}: stored with outputs"


def _hook():
    """docs/hooks/notebooks.py, the MkDocs hook that executes the notebooks into pages of the site."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("notebook_pages", ROOT / "docs" / "hooks" / "notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_notebook_page_shows_code_and_outputs():
    """The site's page of an executed notebook: markdown as is, code in Python blocks, text
    outputs in text blocks, a figure as an embedded PNG, ANSI colours stripped."""
    nbformat = pytest.importorskip("nbformat")
    v4 = nbformat.v4
    nb = v4.new_notebook(cells=[
        v4.new_markdown_cell("# Title"),
        v4.new_code_cell("print('hi')", outputs=[v4.new_output("stream", name="stdout", text="\x1b[31mhi\x1b[0m\n")]),
        v4.new_code_cell("x", outputs=[v4.new_output("execute_result", data={"text/plain": "42"}, execution_count=2)]),
        v4.new_code_cell("fig", outputs=[v4.new_output("display_data", data={"image/png": "iVBORw0KGgo=\n",
                                                                               "text/plain": "<Figure>"})]),
        v4.new_code_cell("y = 1"),
    ])
    page = _hook().markdown(nb)
    assert page.startswith("# Title\n")
    assert "```python\nprint('hi')\n```" in page and "```text\nhi\n```" in page and "\x1b" not in page
    assert "```text\n42\n```" in page and 'src="data:image/png;base64,iVBORw0KGgo="' in page
    assert "<Figure>" not in page and page.count('class="nb-output"') == 3  # y = 1 prints nothing

"""An MkDocs hook: the notebooks of ``notebooks/``, executed at build time, as pages of the site.

Each ``notebooks/NAME.ipynb`` is run from top to bottom (nbclient, the ``python3`` kernel,
in a fresh temporary folder, ``MPLBACKEND=Agg``) and becomes the page
``notebooks/NAME.md``: markdown cells as they are, code cells as Python blocks, each
followed by its outputs (streams and plain-text results as text blocks, figures as
embedded PNG images), and a link to the executed notebook, ``notebooks/NAME.ipynb`` on the
site.  A cell that raises stops the build with the notebook's name and
the error.  The notebooks are stored without outputs (``tests/test_notebooks.py``), so the
site always shows what the code of this checkout prints.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
#: seconds a cell may run
TIMEOUT = 600
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class NotebookError(RuntimeError):
    """A notebook's cell raised."""


def execute(path: Path, work: Path):
    """The notebook at ``path`` executed in the folder ``work`` (an ``nbformat`` node);
    raises :class:`NotebookError` naming the notebook and the first error."""
    import nbclient
    import nbformat

    nb = nbformat.read(path, as_version=4)
    previous = os.environ.get("MPLBACKEND")
    os.environ["MPLBACKEND"] = "Agg"
    try:
        nbclient.NotebookClient(nb, timeout=TIMEOUT, kernel_name="python3",
                                resources={"metadata": {"path": str(work)}}).execute()
    except nbclient.exceptions.CellExecutionError as exc:
        raise NotebookError(f"{path.name}: {exc}") from None
    finally:
        if previous is None:
            os.environ.pop("MPLBACKEND", None)
        else:
            os.environ["MPLBACKEND"] = previous
    return nb


def _fence(text: str, lang: str = "text") -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}\n"


def _output(out) -> str:
    if out.output_type == "stream":
        return _fence(_ANSI.sub("", out.text))
    if out.output_type == "error":
        return _fence(_ANSI.sub("", "\n".join(out.traceback)))
    data = out.get("data", {})
    if "image/png" in data:
        png = data["image/png"].replace("\n", "")
        return f'<img alt="figure" src="data:image/png;base64,{png}">\n'
    if "text/plain" in data:
        return _fence(_ANSI.sub("", data["text/plain"]))
    return ""


def markdown(nb) -> str:
    """An executed notebook as a Markdown page (outputs in text blocks under each code block)."""
    parts = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            parts.append(cell.source.rstrip() + "\n")
        elif cell.cell_type == "code" and cell.source.strip():
            parts.append(_fence(cell.source, "python"))
            outputs = [_output(out) for out in cell.outputs]
            if any(outputs):
                parts.append('<div class="nb-output" markdown>\n\n' + "\n".join(o for o in outputs if o) + "\n</div>\n")
    return "\n".join(parts)


def pages() -> dict[str, str]:
    """``{"notebooks/NAME.md": page, "notebooks/NAME.ipynb": the executed notebook}`` for every
    notebook, each executed in its own temporary folder; the page links the executed notebook."""
    import nbformat

    out = {}
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        with tempfile.TemporaryDirectory(prefix=f"kngflow-{path.stem}-") as work:
            nb = execute(path, Path(work))
        out[f"notebooks/{path.stem}.ipynb"] = nbformat.writes(nb)
        out[f"notebooks/{path.stem}.md"] = (markdown(nb) + f"\n[Download the notebook with its outputs]"
                                             f"({path.stem}.ipynb)\n")
    return out


def on_files(files, config):  # the MkDocs hook
    from mkdocs.structure.files import File

    for uri, text in pages().items():
        files.append(File.generated(config, uri, content=text))
    return files

"""The README and the docs pages run as written, and the documentation site builds.

What a fenced code block means to this test (every fence must name a language):

* ``python``: run, in order, in one namespace per page, in a fresh temporary working
  directory per page (the page's commands run there too). A block whose first line is
  ``# file: NAME`` is written to ``NAME`` in that directory instead of being run.
* ``bash`` / ``console``: every command line runs (a ``$ `` prompt is stripped, ``\\``
  continuations are joined, ``&&`` chains are split, comments are dropped). ``kngflow ...``
  and ``python ...`` commands run in the working directory and must exit with status 0, or
  with ``N`` where the line's comment says ``exit N``, and print no traceback: a ``kngflow``
  command that starts no cluster (``audit``, ``report``, ``status`` … without ``--workers``
  or a scheduler) through :func:`kngflow.cli.main` in this process, as
  ``testkit.kngflow_cli`` runs it; ``kngflow run``, a command reaching a cluster and
  ``python ...`` in a subprocess. ``pip install``
  is not run (the test runs in the installed environment) and neither is
  ``python -m pytest`` (the suite this test belongs to). Any other command fails the
  test, so nothing in a code block goes unchecked.
* ``toml``: parsed; a study spec (a ``[grid]`` table) must load with
  :func:`kngflow.sweep.parse_spec`; a ``# file: NAME`` block is written to ``NAME`` and,
  where ``NAME`` is a file of the repository, must equal it.
* ``text``: transcripts, trees and other output; not checked.
* ``r``: R code for readers who analyse in R (an exported table); not run (no R here).

Studies run on reduced copies. The working directory holds copies of ``workflows/`` and
``cluster/``; each study spec ``workflows/*.toml`` (the claims files are copied as they
are) keeps its problem and mechanisms and shrinks its grid to ``replicates = 3``, the
``n`` values up to 10^4 (at least the smallest) and at most three ε (the smallest, a
middle one and the largest); a spec with a claims file
beside it (``workflows/NAME.claims.toml``, checked by ``kngflow report``) keeps its n and ε
axes, so that every claim finds its cells, and only gets 3 replicates. So a block's
``kngflow run workflows/kng_linear.toml --store results/kng_linear.zarr`` runs exactly
as written, in seconds instead of minutes or hours. ``kngflow run`` gets
``--no-dashboard --no-progress``; a shipped study (``workflows/…``) run on a local cluster
(``--workers N`` or no target) runs in this process on the test process's one-worker
cluster (``conftest.study_cluster``): a worker process's start costs more CPU than these
studies, and stores do not depend on it (a local cluster's own start is tested by
``test_cli.py`` and by the README's main job, ``analysis/test_end_to_end.py``).  Any other
``kngflow run`` gets ``--workers 1`` where the line names no target.
Audits are reduced the same way: ``kngflow audit`` gets ``--draws 2000`` (appended, so it
overrides the line's own ``--draws``); every documented exit status (pass 0, flagged 1)
holds at that size, and the results at full size are the tables of docs/audits.md.

Cluster placeholders (docs/cluster.md, docs/audits.md): the address of the test process's
``dask scheduler`` with its one ``dask worker`` (``conftest.study_cluster``; the worker cannot
read the working directory) stands for ``tcp://head:8786``, and its scheduler file for
``/shared/scheduler.json``.

The files of docs/plugins.md's ``# file:`` blocks are written into every working
directory, which is on ``PYTHONPATH`` (docs/audits.md audits that plug-in). docs/plugins.md
itself runs in tests/test_plugins.py, not here; the API pages (``docs/api/``) hold no
examples of their own.

Output shown as comments in a block is not compared.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from testkit import cli_in_process, in_process, kngflow_command

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
NOT_HERE = {DOCS / "plugins.md"}  # tests/test_plugins.py runs it
PAGES = [ROOT / "README.md"] + sorted(p for p in DOCS.rglob("*.md") if p not in NOT_HERE
                                      and DOCS / "api" not in p.parents)
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.S | re.M)
CHECKED = {"python", "bash", "console", "toml", "text", "r"}
SMALL_N = 10_000
#: the study specs of workflows/ (the claims files beside them are copied as they are)
SPECS = sorted(p for p in (ROOT / "workflows").glob("*.toml") if "grid" in tomllib.loads(p.read_text()))
REPLICATES = 3
AUDIT_DRAWS = 2_000


def blocks(path: Path) -> list[tuple[str, str]]:
    """``[(language, body)]`` of the page's fenced blocks, in order (indented ones dedented)."""
    out = []
    for m in FENCE.finditer(path.read_text()):
        indent = len(m["indent"])
        body = "".join(line[indent:] for line in m["body"].splitlines(keepends=True))
        out.append((m["lang"].strip(), body))
    return out


def commands(body: str, lang: str) -> list[tuple[str, int]]:
    """``[(command, expected exit status)]`` of a bash/console block (console: ``$ `` lines only)."""
    lines, current = [], ""
    for raw in body.splitlines():
        if lang == "console" and not current:
            if not raw.startswith("$ "):
                continue  # output
            raw = raw[2:]
        if raw.rstrip().endswith("\\"):
            current += raw.rstrip()[:-1] + " "
            continue
        lines.append((current + raw).strip())
        current = ""
    out = []
    for line in lines:
        code, _, comment = _split_comment(line)
        status = int(m.group(1)) if (m := re.search(r"exit (\d+)", comment)) else 0
        out += [(part.strip(), status) for part in code.split("&&") if part.strip()]
    return out


def _split_comment(line: str) -> tuple[str, str, str]:
    """Split ``line`` at the first ``#`` outside quotes."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), "#", line[i + 1:]
    return line, "", ""


def reduce_spec(text: str, *, keep_axes: bool = False) -> str:
    """A study spec with the reduced grid of this module's docstring (same problem and
    mechanisms); ``keep_axes``: only the replicates are reduced."""
    from kngflow.sweep import parse_spec

    grid = tomllib.loads(text)["grid"]
    eps = sorted(set(grid["epsilon"]))
    small = {"replicates": min(grid["replicates"], REPLICATES)}
    if not keep_axes:
        small |= {"n": sorted(v for v in grid["n"] if v <= SMALL_N) or [min(grid["n"])],
                  "epsilon": sorted({eps[0], eps[len(eps) // 2], eps[-1]})}
    out, in_grid = [], False
    for line in text.splitlines():
        if line.startswith("["):
            in_grid = line.strip() == "[grid]"
        key = line.split("=")[0].strip()
        if in_grid and key in small:
            line = f"{key} = {small[key]!r}"
        out.append(line)
    reduced = "\n".join(out) + "\n"
    spec = parse_spec(reduced)
    assert list(spec.n) == small.get("n", list(spec.n)) and len(spec.replicates) == small["replicates"], reduced
    return reduced


def has_claims(spec: Path) -> bool:
    """Whether the paper's claims ship beside ``spec`` (``NAME.claims.toml``)."""
    return spec.with_name(spec.stem + ".claims.toml").exists()


def plugin_files() -> dict[str, str]:
    from test_plugins import doc_blocks

    return doc_blocks()[0]


def workdir(tmp: Path) -> Path:
    """A working directory with the reduced ``workflows/``, ``cluster/`` and the plug-in files."""
    (tmp / "workflows").mkdir()
    for path in (ROOT / "workflows").glob("*.toml"):
        text = path.read_text()
        (tmp / "workflows" / path.name).write_text(
            reduce_spec(text, keep_axes=has_claims(path)) if path in SPECS else text)
    shutil.copytree(ROOT / "cluster", tmp / "cluster")
    for name, text in plugin_files().items():
        (tmp / name).write_text(text)
    return tmp


def environment(folder: Path) -> dict:
    return {**os.environ, "MPLBACKEND": "Agg",
            "PYTHONPATH": os.pathsep.join([str(folder), str(ROOT), os.environ.get("PYTHONPATH", "")])}


def run_command(command: str, status: int, folder: Path, env: dict, where: str, targets: dict, cluster) -> None:
    for placeholder, value in targets.items():
        command = command.replace(placeholder, value)
    argv = shlex.split(command)
    if argv[0] == "pip" or argv[:3] == ["python", "-m", "pytest"]:
        return
    if argv[0] == "kngflow":
        argv = argv[1:]
        shipped = False
        if argv[:1] == ["run"]:
            remote = {"--scheduler", "--scheduler-file", "--cluster"} & set(argv)
            shipped = argv[1].startswith("workflows/") and not remote
            if shipped:  # on the one-worker cluster, in this process
                if "--workers" in argv:
                    del argv[argv.index("--workers"):argv.index("--workers") + 2]
                argv += ["--scheduler", cluster.address, "--no-progress"]
            else:
                argv += ["--no-dashboard", "--no-progress"]
                if not remote and "--workers" not in argv:
                    argv += ["--workers", "1"]
        elif argv[:1] == ["audit"]:
            argv += ["--draws", str(AUDIT_DRAWS)] + ([] if "--no-progress" in argv else ["--no-progress"])
        if shipped or in_process(argv):  # this process's working directory and path are the page's (the test's chdir)
            proc = cli_in_process(argv)
        else:
            proc = subprocess.run([*kngflow_command(), *argv], cwd=folder, env=env, capture_output=True, text=True,
                                  timeout=600)
    elif argv[0] == "python":
        proc = subprocess.run([sys.executable, *argv[1:]], cwd=folder, env=env, capture_output=True, text=True,
                              timeout=600)
    else:
        pytest.fail(f"{where}: `{command}` is neither a kngflow nor a python command; mark the block `text` "
                    "if it is not meant to run")
    assert proc.returncode == status, (where, command, proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr, (where, command, proc.stderr[-3000:])


def check_toml(body: str, folder: Path, where: str) -> None:
    from kngflow.sweep import parse_spec

    raw = tomllib.loads(body)
    first = body.splitlines()[0]
    if "grid" in raw:
        parse_spec(body)
    if first.startswith("# file: "):
        name = first[len("# file: "):].strip()
        if (ROOT / name).exists():
            assert (ROOT / name).read_text() == body[len(first) + 1:], f"{where}: differs from {name}"
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(body[len(first) + 1:])


def test_every_page_has_its_fences_marked():
    """Every fenced block names one of the languages above (an unmarked block would go unchecked)."""
    for page in PAGES + [DOCS / "plugins.md"]:
        for lang, _ in blocks(page):
            assert lang in CHECKED, f"{page.relative_to(ROOT)}: a ```{lang} block"


def test_reduced_specs_keep_their_design():
    """The reduction touches the grid only: same problem, mechanisms and seed, a smaller grid."""
    from kngflow.sweep import parse_spec

    for path in SPECS:
        full = parse_spec(path.read_text())
        small = parse_spec(reduce_spec(path.read_text(), keep_axes=has_claims(path)))
        assert (small.seed, small.problem_name, small.problem_options) == \
               (full.seed, full.problem_name, full.problem_options)
        assert [m.label for m in small.mechanisms] == [m.label for m in full.mechanisms]
        assert set(small.n) <= set(full.n) and set(small.epsilon) <= set(full.epsilon)
        assert len(small.replicates) <= REPLICATES


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_runs_as_written(page, tmp_path, monkeypatch, study_cluster):
    found = blocks(page)
    if not any(lang in ("python", "bash", "console", "toml") for lang, _ in found):
        pytest.skip("no code on this page")
    folder = workdir(tmp_path)
    env = environment(folder)
    monkeypatch.chdir(folder)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.syspath_prepend(str(folder))
    targets = {"tcp://head:8786": study_cluster.address, "/shared/scheduler.json": str(study_cluster.scheduler_file)}
    namespace = {"__name__": f"docs_{page.stem}"}
    for i, (lang, body) in enumerate(found):
        where = f"{page.relative_to(ROOT)}, block {i + 1} ({lang})"
        if lang == "python":
            first = body.splitlines()[0]
            if first.startswith("# file: "):
                (folder / first[len("# file: "):].strip()).write_text(body)
                continue
            with redirect_stdout(io.StringIO()):
                try:
                    exec(compile(body, where, "exec"), namespace)  # noqa: S102 - the docs' own examples
                except Exception as exc:  # noqa: BLE001 - name the block
                    pytest.fail(f"{where} raised {type(exc).__name__}: {exc}\n{body}")
        elif lang in ("bash", "console"):
            for command, status in commands(body, lang):
                run_command(command, status, folder, env, where, targets, study_cluster)
        elif lang == "toml":
            check_toml(body, folder, where)
    import matplotlib.pyplot as plt

    plt.close("all")


#: The test command: the README's, docs/index.md's and the one .ci/run runs (test and docs extras:
#: the docs build and the notebooks run too).
TEST_COMMAND = 'pip install --no-compile -e ".[test,docs]" && python -m pytest -q -n 3'
#: the fast tier: the suite without the tests marked slow
FAST_COMMAND = 'python -m pytest -q -m "not slow" -n 2'


def test_the_readme_is_a_guide():
    """The README stays short, keeps the test command of .ci/run and links the docs pages."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    block = [body for lang, body in blocks(ROOT / "README.md") if "pytest" in body]
    assert block == [TEST_COMMAND + "\n", FAST_COMMAND + "\n"]  # the full suite first, then the fast tier
    assert f"`{TEST_COMMAND}`" in (DOCS / "index.md").read_text()
    assert f"`{FAST_COMMAND}`" in (DOCS / "index.md").read_text()
    # .ci/run runs exactly that command, its two halves timed as phases, after the setup
    ci = (ROOT / ".ci" / "run").read_text()
    phases = re.findall(r'^phase "([^"]+)" (.+)$', ci, re.M)
    assert [name.split(" ")[0] for name, _ in phases] == ["setup", "installs", "suite", "floors"], phases
    assert " && ".join(cmd for _, cmd in phases[1:3]) == TEST_COMMAND
    for page in ("docs/index.md", "docs/studies.md", "docs/privacy.md", "docs/audits.md", "docs/performance.md",
                 "docs/cluster.md", "docs/plugins.md"):
        assert f"]({page})" in text, page
        assert (ROOT / page).exists(), page


MODEL_ROW = re.compile(r"^\| `(\w+)` \|.*\[[^]]+\]\(([^)]+)\) \|$", re.M)


def test_the_readme_and_the_docs_home_name_every_model():
    """Every registered model has a row of the models table on the README and the docs home,
    linking a page that exists.  Control: the table without its `pca` row misses pca."""
    from kngflow import registry

    models = set(registry.model_names())
    for page, base in ((ROOT / "README.md", ROOT), (DOCS / "index.md", DOCS)):
        text = page.read_text()
        rows = dict(MODEL_ROW.findall(text))
        assert models <= set(rows), (page.name, sorted(models - set(rows)))
        for link in rows.values():
            assert (base / link).exists(), (page.name, link)
        without = re.sub(r"^\| `pca` \|.*\n", "", text, flags=re.M)
        assert models - set(dict(MODEL_ROW.findall(without))) == {"pca"}


def test_the_studies_page_lists_every_shipped_spec():
    """Every ``workflows/*.toml`` study (not a claims file) has a row on docs/studies.md."""
    text = (DOCS / "studies.md").read_text()
    specs = sorted(p.name for p in (ROOT / "workflows").glob("*.toml") if not p.name.endswith(".claims.toml"))
    assert specs and [s for s in specs if f"workflows/{s}" not in text] == []


@pytest.mark.slow
def test_mkdocs_build_strict(tmp_path):
    """``mkdocs build --strict``: warnings (a broken link or anchor, a docstring griffe cannot
    read, a page missing from the nav) are errors.  The build runs every notebook from top
    to bottom (docs/hooks/notebooks.py; a cell that raises fails it): the executed notebook
    on the site has no error output and at least five code cells that printed or returned
    something, and its page shows the outputs of every one of them."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stderr[-5000:]
    assert (tmp_path / "site" / "api" / "mechanisms" / "index.html").read_text().count("get_mechanism") > 0
    nbformat = pytest.importorskip("nbformat")
    for name in ("01_study_from_python", "02_reproduce_a_figure", "03_bring_your_own_mechanism"):
        nb = nbformat.read(tmp_path / "site" / "notebooks" / f"{name}.ipynb", as_version=4)
        errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
        assert not errors, (name, errors)
        printed = sum(1 for c in nb.cells if c.cell_type == "code" and c.outputs)
        page = (tmp_path / "site" / "notebooks" / name / "index.html").read_text()
        assert printed >= 5 and page.count('class="nb-output"') == printed, (name, printed)
        assert f'href="../{name}.ipynb"' in page, name  # the executed notebook, linked


def _help_texts() -> dict[str, str]:
    """``{subcommand: its --help text}`` from kngflow's own argparse parser."""
    from kngflow.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: p.format_help() for name, p in sub.choices.items()}


def kngflow_command_lines(text: str) -> list[str]:
    """Every ``kngflow ...`` command line of a page: in its bash/console blocks and in its
    inline code spans (`` `kngflow plan SPEC --workers N` ``)."""
    found = []
    for m in FENCE.finditer(text):
        lang = m["lang"].strip()
        if lang in ("bash", "console"):
            indent = len(m["indent"])
            body = "".join(line[indent:] for line in m["body"].splitlines(keepends=True))
            found += [c for c, _ in commands(body, lang) if c.startswith("kngflow ")]
    prose = FENCE.sub("", text)
    found += [span for span in re.findall(r"`(kngflow [^`\n]+)`", prose)]
    return found


def unknown_flags(text: str, helps: dict[str, str]) -> list[str]:
    """``"kngflow CMD --flag"`` for every flag a command line of ``text`` gives a subcommand
    whose ``--help`` does not list it (and every unknown subcommand)."""
    bad = []
    for line in kngflow_command_lines(text):
        try:
            argv = shlex.split(line)
        except ValueError:
            argv = line.split()
        if len(argv) < 2 or argv[1].startswith("-"):  # `kngflow --version`
            continue
        cmd = argv[1]
        if cmd not in helps:
            if cmd.isidentifier():  # "kngflow COMMAND" and other placeholders are words in capitals
                bad.append(f"kngflow {cmd}" if not cmd.isupper() else "")
            continue
        for token in argv[2:]:
            flag = token.strip("[]").split("=")[0]  # "[--store PATH]" in a synopsis
            if re.fullmatch(r"--[a-z][a-z0-9-]*", flag) and not re.search(
                    rf"(?<![\w-]){re.escape(flag)}(?![\w-])", helps[cmd]):
                bad.append(f"kngflow {cmd} {flag}")
    return [b for b in bad if b]


FLAG_PAGES = PAGES + [DOCS / "plugins.md", ROOT / "cluster" / "README.md"]


def test_documented_flags_exist_in_help():
    """Every flag a page gives a ``kngflow`` subcommand (code blocks and inline code) is in
    that subcommand's ``--help``; negative controls: a made-up flag, and ``--lifetime`` (an
    option of ``dask worker``, not of ``kngflow run``)."""
    helps = _help_texts()
    assert {"run", "plan", "status", "verify", "report", "audit"} <= set(helps)
    control = ("```bash\nkngflow run workflows/kng_linear.toml --store s.zarr --made-up-flag 3\n```\n"
               "Retire workers with `kngflow run SPEC --store S --lifetime 2h`; `kngflow report S --html` is fine.\n")
    assert unknown_flags(control, helps) == ["kngflow run --made-up-flag", "kngflow run --lifetime"]
    checked = 0
    for page in FLAG_PAGES:
        text = page.read_text()
        checked += len(kngflow_command_lines(text))
        assert unknown_flags(text, helps) == [], page.relative_to(ROOT)
    assert checked > 50


def test_audit_pair_notation_is_explained_where_it_is_printed():
    """``kngflow audit --help`` and docs/audits.md explain the pair notation, with the same example."""
    proc = subprocess.run([*kngflow_command(), "audit", "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    for part in ("'(0,1) + (1,-1) -> (-1,-1)'", "'K*(r)' is K copies of the record r",
                 "the last record before '->' is the one that changes", "A '-0' is a zero"):
        assert part in text, part
    page = " ".join((DOCS / "audits.md").read_text().split())
    assert "`(0,1) + (1,-1) -> (-1,-1)`" in page and "A `-0` is a zero" in page and "`K*(r)` is K copies" in page

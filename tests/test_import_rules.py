"""The import contracts, checked on the source: generic layers name no model, models name no other model.

* sweep/, store/, analysis/ and audit/ (the generic layers) import no model module, and
  no string in their code (docstrings and comments aside) is a built-in problem name, a
  built-in mechanism kind or a model's store variable;
* a model package (``kngflow/models/<model>/``) imports no other model;
* mechanisms, problems, models and kernels never import dask, distributed, zarr or
  xarray (``test_layers.py`` checks the imported modules at run time);
* the import graph of ``kngflow/`` runs one way, down the layers of :data:`LAYER_ORDER`
  (the contract packages ``problems/`` and ``mechanisms/`` import nothing above them: no
  model, no registry, no façade), and has no circle anywhere;
* listing names (``kngflow.registry.problem_names()``) imports no model and no numba.

The graph's edges are the modules an ``import`` statement names (at module level or inside a
function; ``from package import submodule`` is an edge to the submodule, not the package)
and every string constant of the code that names a kngflow module (``"kngflow.api"``,
``"kngflow.models.linear"``, ``"pkg.module:Class"`` references): a lazy import through
``importlib`` counts like a written one.  The parent packages Python imports implicitly
are not edges.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "kngflow"
GENERIC = ("sweep", "store", "analysis", "audit")
#: what the generic layers may import from kngflow: the contract and the registry ...
CONTRACT = ("kngflow", "kngflow.registry", "kngflow.api", "kngflow.mechanisms", "kngflow.mechanisms.base",
            "kngflow.mechanisms.claims", "kngflow.problems", "kngflow.problems.base", "kngflow._jit")
#: ... and each other
LAYERS = tuple(f"kngflow.{layer}" for layer in GENERIC + ("cli",))
#: strings that are a built-in name but mean something else in the generic layers: the
#: statistic "mean" (also the name of the mean problem) and the xarray accessor ``ds.kng``
HOMONYMS = {"mean", "kng"}


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """``(line, absolute module)`` of every import in ``path``, relative imports resolved."""
    tree = ast.parse(path.read_text())
    package = _module_name(path, root) if path.name == "__init__.py" else _module_name(path, root).rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module
            subs = [f"{mod}.{a.name}" for a in node.names if _is_module(f"{mod}.{a.name}", root)]
            if len(subs) < len(node.names):  # names defined in ``mod`` itself
                out.append((node.lineno, mod))
            out += [(node.lineno, sub) for sub in subs]
    return out


def _is_module(name: str, root: Path = ROOT) -> bool:
    """Whether ``name`` is a module or package of the kngflow tree (``from pkg import submodule``)."""
    path = root.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _strings(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """String constants of the code (not docstrings)."""
    tree = ast.parse(path.read_text())
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings]


def _builtin_names() -> set[str]:
    from kngflow.api import MECHANISMS, PROBLEMS, get_problem

    names = set(PROBLEMS)
    for kinds in MECHANISMS.values():
        names |= set(kinds)
    for name in PROBLEMS:
        names |= set(get_problem(name).data_variables)
    return names


def _generic_files():
    return [p for layer in GENERIC for p in sorted((ROOT / layer).rglob("*.py"))]


def _is_model_module(mod: str) -> bool:
    if mod is None or not mod.startswith("kngflow."):
        return False
    if mod in CONTRACT or any(mod == a or mod.startswith(a + ".") for a in LAYERS):
        return False
    # `from kngflow import problems` resolves to kngflow.problems (allowed); anything deeper is a model
    return mod.split(".")[1] in ("models", "problems", "mechanisms", "samplers", "kernels") or mod in (
        "kngflow.noise", "kngflow.norms", "kngflow.kernels.optimize")


@pytest.mark.parametrize("path", _generic_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_generic_layers_import_no_model(path):
    bad = [(line, mod) for line, mod in _imports(path) if _is_model_module(mod)]
    assert not bad, f"{path.relative_to(ROOT)} imports model modules: {bad}"


@pytest.mark.parametrize("path", _generic_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_generic_layers_name_no_model(path):
    names = _builtin_names() - HOMONYMS
    bad = [(line, s) for line, s in _strings(path) if s in names]
    assert not bad, f"{path.relative_to(ROOT)} names built-in problems, kinds or model variables: {bad}"


def test_the_checks_catch_a_model_name(tmp_path):
    """Negative control: a file importing a model and naming a kind is caught by both checks."""
    layer = ROOT / "sweep"
    fake = layer / "_probe_for_test.py"
    fake.write_text('from kngflow.models.linear.problem import BLOCK_ROWS\nKIND = "exponential"\nV = "ols_stderr"\n')
    try:
        assert [m for _, m in _imports(fake) if _is_model_module(m)]
        assert {s for _, s in _strings(fake)} & (_builtin_names() - HOMONYMS) == {"exponential", "ols_stderr"}
        assert "kng" in _builtin_names()
    finally:
        fake.unlink()


def _private_sibling_imports(path: Path) -> list[tuple[int, str]]:
    """``(line, name)`` of every private name (``_x``) ``path`` imports from a sibling
    module of its package (``from .sibling import _x``)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    return out


@pytest.mark.parametrize("path", sorted((ROOT / "audit").glob("*.py")), ids=lambda p: p.name)
def test_audit_modules_import_no_private_name_of_a_sibling(path):
    """What two audit modules share is public, in the module that owns it (result.py: the
    result type, the error level, Clopper-Pearson)."""
    assert not _private_sibling_imports(path), f"{path.name}: {_private_sibling_imports(path)}"


def test_the_private_import_check_catches_one(tmp_path):
    """Negative control: a module importing a sibling's private name is caught."""
    fake = tmp_path / "probe.py"
    fake.write_text("from .search import SMOOTH, _cp_lo\nfrom . import power\n")
    assert _private_sibling_imports(fake) == [(1, "_cp_lo")]


def _model_packages():
    models = ROOT / "models"
    return sorted(p for p in models.iterdir() if p.is_dir() and (p / "__init__.py").exists()) if models.exists() else []


@pytest.mark.skipif(not _model_packages(), reason="no kngflow/models packages")
@pytest.mark.parametrize("package", _model_packages(), ids=lambda p: p.name)
def test_models_import_no_other_model(package):
    others = {p.name for p in _model_packages()} - {package.name}
    bad = [(f.name, line, mod) for f in sorted(package.rglob("*.py")) for line, mod in _imports(f)
           if mod and mod.startswith("kngflow.models.") and mod.split(".")[2] in others]
    assert not bad, f"model {package.name} imports other models: {bad}"


@pytest.mark.parametrize("layer", ["mechanisms", "problems", "models", "kernels", "samplers"])
def test_numerical_layers_never_name_dask_or_zarr(layer):
    files = sorted((ROOT / layer).rglob("*.py")) if (ROOT / layer).exists() else []
    bad = [(f.name, line, mod) for f in files for line, mod in _imports(f)
           if mod and mod.split(".")[0] in ("dask", "distributed", "zarr", "xarray")]
    assert not bad, bad


# --------------------------------------------------------------------------- the import graph
#: the layers of kngflow/, lowest first: a module may import its own layer and those below
LAYER_ORDER = (
    ("kngflow", "kngflow._jit", "kngflow.warnings"),
    ("kngflow.norms", "kngflow.noise", "kngflow.kernels"),
    ("kngflow.problems", "kngflow.mechanisms"),          # the contract
    ("kngflow.models",),
    ("kngflow.registry",),
    ("kngflow.api", "kngflow.accountant"),               # the public façade
    ("kngflow.estimators",),                             # scikit-learn estimators on the façade
    ("kngflow.store",),
    ("kngflow.sweep", "kngflow.analysis", "kngflow.audit"),
    ("kngflow.cli",),
)


def _layer(module: str, order=LAYER_ORDER) -> int:
    """Index in ``order`` of the most specific prefix of ``module``."""
    best, rank = -1, None
    for i, layer in enumerate(order):
        for prefix in layer:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, rank = len(prefix), i
    if rank is None:
        raise AssertionError(f"module {module} is in no layer of LAYER_ORDER: add it")
    return rank


def _resolve(name: str, root: Path) -> str | None:
    """The deepest kngflow module ``name`` (a dotted path or a ``module:Attr`` reference) lies in."""
    name = name.partition(":")[0]
    top = root.name
    if not (name == top or name.startswith(top + ".")):
        return None
    while name and not _is_module(name, root):
        name = name.rpartition(".")[0]
    return name or None


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """``{module: modules it imports}`` over the package at ``root`` (see the module docstring)."""
    graph: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        module = _module_name(path, root)
        named = [m for _, m in _imports(path, root)] + [s for _, s in _strings(path, root)
                                                        if s.startswith(root.name) and " " not in s]
        graph[module] = {t for t in (_resolve(m, root) for m in named if m) if t and t != module}
    return graph


def upward_imports(graph: dict[str, set[str]], order=LAYER_ORDER) -> list[tuple[str, str]]:
    """Edges from a lower layer into a higher one."""
    return sorted((a, b) for a, targets in graph.items() for b in targets if _layer(b, order) > _layer(a, order))


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_every_module_has_a_layer():
    for module in import_graph():
        _layer(module)


def test_no_import_runs_up_the_layers():
    bad = upward_imports(import_graph())
    assert not bad, f"imports from a lower layer into a higher one: {bad}"


def test_the_contract_packages_import_nothing_above_them():
    contract = _layer("kngflow.problems")
    bad = [(a, b) for a, targets in import_graph().items() if a.split(".")[1:2] in (["problems"], ["mechanisms"])
           for b in targets if _layer(b) > contract]
    assert not bad, bad


def test_the_import_graph_has_no_circle():
    found = circles(import_graph())
    assert not found, f"import circles: {found}"


def _fake_package(tmp_path: Path, files: dict) -> Path:
    root = tmp_path / "kngflow"
    for name, text in {"__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(root).parents:
            (root / parent / "__init__.py").touch()
        path.write_text(text)
    return root


def test_the_graph_checks_catch_an_upward_import_and_a_circle(tmp_path):
    """Negative controls: a contract module importing the registry (written, or lazily through
    ``importlib`` and a string), and two modules importing each other, are caught."""
    root = _fake_package(tmp_path, {
        "mechanisms/__init__.py": "def __getattr__(name):\n    import importlib\n"
                                  "    return getattr(importlib.import_module('kngflow.api'), name)\n",
        "mechanisms/base.py": "X = 1\n",
        "problems/__init__.py": "def f():\n    from kngflow.registry import problem_class\n",
        "registry.py": "from kngflow.mechanisms import base\n",
        "api.py": "from kngflow import registry\n",
        "analysis/a.py": "from . import b\n",
        "analysis/b.py": "from .a import x\n",
        "store/__init__.py": "",
    })
    graph = import_graph(root)
    assert graph["kngflow.registry"] == {"kngflow.mechanisms.base"}  # `from pkg import submodule`
    assert upward_imports(graph) == [("kngflow.mechanisms", "kngflow.api"), ("kngflow.problems", "kngflow.registry")]
    assert circles(graph) == [["kngflow.analysis.a", "kngflow.analysis.b"]]
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_listing_names_imports_no_model_and_no_numba():
    code = ("import sys, kngflow.registry as r; names = r.problem_names(); kinds = r.model_names(); "
            "bad = [m for m in sys.modules if m.startswith(('kngflow.models', 'numba', 'kngflow.mechanisms', "
            "'kngflow.problems', 'kngflow.kernels'))]; print(bad); sys.exit(1 if bad or 'linear' not in names else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # negative control: resolving a kind does import the model (and numba), and the check sees it
    code = code.replace("r.model_names()", "r.kind_names('linear')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 1 and "kngflow.models.linear" in proc.stdout, proc.stdout + proc.stderr


def test_loading_every_model_imports_no_optimizer_stats_or_analysis_library():
    """Every Dask worker and CLI process loads the models of its study: scipy.optimize,
    scipy.stats, statsmodels, xarray and matplotlib cost it seconds of start-up (scipy.optimize
    alone ~0.5 s) and are imported only where they are used."""
    heavy = ("scipy.optimize", "scipy.stats", "statsmodels", "xarray", "matplotlib")
    code = ("import sys, kngflow.registry as r\n"
            "for name in r.problem_names():\n"
            "    r.problem_class(name); [r.mechanism_class(name, k) for k in r.kind_names(name)]\n"
            "EXTRA\n"
            f"bad = sorted({{h for h in {heavy!r} for m in sys.modules if m == h or m.startswith(h + '.')}})\n"
            "print(bad); sys.exit(1 if bad else 0)\n")
    proc = subprocess.run([sys.executable, "-c", code.replace("EXTRA", "")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # negative control: a module-level import of scipy.optimize is seen
    proc = subprocess.run([sys.executable, "-c", code.replace("EXTRA", "import scipy.optimize")],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "scipy.optimize" in proc.stdout, proc.stdout + proc.stderr

"""The import contracts, checked on the source: generic layers name no model, models name no other model.

* sweep/, store/, analysis/ and audit/ (the generic layers) import no model module, and
  no string in their code (docstrings and comments aside) is a built-in problem name, a
  built-in mechanism kind or a model's store variable;
* a model package (``kngflow/models/<model>/``) imports no other model;
* mechanisms, problems, models and kernels never import dask, distributed, zarr or
  xarray (``test_layers.py`` checks the imported modules at run time).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "kngflow"
GENERIC = ("sweep", "store", "analysis", "audit")
#: what the generic layers may import from kngflow: the contract and the registry ...
CONTRACT = ("kngflow", "kngflow.registry", "kngflow.mechanisms", "kngflow.mechanisms.base",
            "kngflow.mechanisms.claims", "kngflow.problems", "kngflow.problems.base", "kngflow._jit")
#: ... and each other
LAYERS = tuple(f"kngflow.{layer}" for layer in GENERIC + ("cli",))
#: strings that are a built-in name but mean something else in the generic layers: the
#: statistic "mean" (also the name of the mean problem) and the xarray accessor ``ds.kng``
HOMONYMS = {"mean", "kng"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """``(line, absolute module)`` of every import in ``path``, relative imports resolved."""
    tree = ast.parse(path.read_text())
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
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
            out.append((node.lineno, mod))
            out += [(node.lineno, f"{mod}.{a.name}") for a in node.names if _is_module(f"{mod}.{a.name}")]
    return out


def _is_module(name: str) -> bool:
    """Whether ``name`` is a module or package of the kngflow tree (``from pkg import submodule``)."""
    path = ROOT.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _strings(path: Path) -> list[tuple[int, str]]:
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
    from kngflow.mechanisms import MECHANISMS
    from kngflow.problems import PROBLEMS, get_problem

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

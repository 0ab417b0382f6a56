"""The registry and the contract: models as the unit of registration, kinds per problem, the
façade, and the one-line errors for a problem or a model that does not state what it must."""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest

from kngflow import registry
from kngflow.api import get_mechanism, get_problem
from kngflow.problems import Problem, check_problem
from kngflow.sweep import SpecError, parse_spec


def test_builtin_models_are_module_strings_and_kinds_are_per_problem():
    assert all(isinstance(m, str) and m.startswith("kngflow.models.") for m in registry.BUILTIN_MODELS.values())
    assert set(registry.BUILTIN_MODELS) <= set(registry.problem_names())
    # each model its own kinds: linear has 'ss', the mean has not
    assert "ss" in registry.kind_names("linear") and "ss" not in registry.kind_names("mean")
    assert registry.mechanism_class("mean", "kng") is not registry.mechanism_class("linear", "kng")
    with pytest.raises(registry.PluginError, match=r"^mechanism kind must be one of .* for problem 'mean'"):
        registry.mechanism_class("mean", "ss")


def test_the_contract_packages_point_to_the_facade():
    import kngflow.mechanisms
    import kngflow.problems

    with pytest.raises(AttributeError, match=r"from kngflow.api import get_problem"):
        kngflow.problems.get_problem  # noqa: B018
    with pytest.raises(AttributeError, match=r"from kngflow.api import private_quantile"):
        kngflow.mechanisms.private_quantile  # noqa: B018
    with pytest.raises(AttributeError, match=r"has no attribute 'nothing'"):
        kngflow.problems.nothing  # noqa: B018


class _NoThetaStar(Problem):
    def __init__(self, *, d=2):
        self.d = d

    def simulate(self, n, rng):
        return rng.standard_normal((n, self.d))


class _Complete(_NoThetaStar):
    def __init__(self, *, d=2):
        super().__init__(d=d)
        self.theta_star = np.zeros(d)


def test_a_problem_states_d_and_theta_star():
    ref = f"{__name__}:_NoThetaStar"
    with pytest.raises(TypeError) as err:
        get_problem(ref)
    assert str(err.value).count("\n") == 0 and "does not declare theta_star" in str(err.value)
    # already when the class is looked up (registered), before anything is built
    with pytest.raises(TypeError, match="does not declare theta_star"):
        registry.problem_class(ref)
    assert registry.problem_class(f"{__name__}:_Complete") is _Complete  # negative control
    with pytest.raises(TypeError, match=r"d must be an integer >= 1, got 0"):
        check_problem(_Complete(d=0))
    with pytest.raises(TypeError, match=r"theta_star must have shape \(d,\) = \(3,\)"):
        bad = _Complete(d=3)
        bad.theta_star = np.zeros(2)
        check_problem(bad)
    # negative control: the same problem with theta_star passes
    assert get_problem(f"{__name__}:_Complete", d=3).theta_star.shape == (3,)


def test_a_spec_naming_a_problem_without_theta_star_fails_in_validation():
    text = textwrap.dedent(f'''
        seed = 1
        [problem]
        name = "{__name__}:_NoThetaStar"
        [grid]
        n = [10]
        epsilon = [1.0]
        replicates = 1
        [[mechanisms]]
        label = "k"
        kind = "kng"
    ''')
    with pytest.raises(SpecError, match="theta_star"):
        parse_spec(text)


def test_a_model_module_must_expose_problem_and_mechanisms(tmp_path, monkeypatch):
    (tmp_path / "halfmodel.py").write_text("from kngflow.problems import Problem\nPROBLEM = Problem\n")
    (tmp_path / "halfmodel-0.1.dist-info").mkdir()
    (tmp_path / "halfmodel-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: halfmodel\nVersion: 0.1\n")
    (tmp_path / "halfmodel-0.1.dist-info" / "entry_points.txt").write_text("[kngflow.models]\nhalf = halfmodel\n")
    try:
        with monkeypatch.context() as mp:
            mp.syspath_prepend(str(tmp_path))
            registry._entry_points.cache_clear()
            registry.load_model.cache_clear()
            assert "half" in registry.problem_names() and "halfmodel" not in sys.modules
            with pytest.raises(registry.PluginError, match=r"does not define \['MECHANISMS'\]"):
                registry.load_model("half")
    finally:
        registry._entry_points.cache_clear()
        registry.load_model.cache_clear()
    assert "half" not in registry.problem_names()  # negative control: gone with its folder


def test_an_outside_model_whose_problem_lacks_d_and_theta_star(tmp_path, monkeypatch):
    """A model package registered by entry point, its problem stating neither d nor theta_star:
    building it by name is one line naming both; the same model with both builds."""
    body = ("from kngflow.problems import Problem\n"
            "class Bare(Problem):\n"
            "    def simulate(self, n, rng):\n"
            "        return rng.standard_normal((n, 2))\n"
            "class Stated(Bare):\n"
            "    d = 2\n"
            "    theta_star = (0.0, 0.0)\n"
            "PROBLEM = {cls}\nMECHANISMS = {{}}\n")
    (tmp_path / "baremodel.py").write_text(body.format(cls="Bare"))
    (tmp_path / "statedmodel.py").write_text(body.format(cls="Stated"))
    info = tmp_path / "baremodel-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: baremodel\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[kngflow.models]\nbare = baremodel\nstated = statedmodel\n")
    try:
        with monkeypatch.context() as mp:
            mp.syspath_prepend(str(tmp_path))
            registry._entry_points.cache_clear()
            registry.load_model.cache_clear()
            with pytest.raises(TypeError) as err:
                get_problem("bare")
            assert "\n" not in str(err.value) and "does not declare d, theta_star" in str(err.value)
            assert get_problem("stated").d == 2  # negative control
    finally:
        registry._entry_points.cache_clear()
        registry.load_model.cache_clear()


def test_an_outside_model_declares_a_hook_and_a_misspelt_one_fails_in_one_line(tmp_path, monkeypatch):
    """The optional hooks are listed in the contract (``kngflow.problems.base.HOOKS``) and checked
    at lookup: an outside model's problem that declares ``error_label`` and ``audit_record``
    (for ``audit_records``) is refused in one line naming the misspelt member and the hook;
    spelt right, the same model builds and its declared hook is used."""
    from kngflow.problems.base import HOOKS

    assert "audit_records" in HOOKS["audit"] and "error_label" in HOOKS["error"]
    body = ("import numpy as np\n"
            "from kngflow.problems import Problem\n"
            "class Box(Problem):\n"
            "    d = 1\n"
            "    theta_star = np.zeros(1)\n"
            "    error_label = 'distance to zero'\n"
            "    def simulate(self, n, rng):\n"
            "        return rng.uniform(-1, 1, (n, 1))\n"
            "    def {member}(self):\n"
            "        return np.array([[1.0]]), np.array([[0.0]])\n"
            "PROBLEM = Box\nMECHANISMS = {{}}\n")
    (tmp_path / "typomodel.py").write_text(body.format(member="audit_record"))
    (tmp_path / "rightmodel.py").write_text(body.format(member="audit_records"))
    try:
        with monkeypatch.context() as mp:
            mp.syspath_prepend(str(tmp_path))
            with pytest.raises(TypeError) as err:
                registry.problem_class("typomodel:Box")
            msg = str(err.value)
            assert "\n" not in msg and "'audit_record', which is not a problem hook" in msg, msg
            assert "did you mean 'audit_records'?" in msg, msg
            problem = get_problem("rightmodel:Box")  # negative control: spelt right, it builds
            assert problem.error_label == "distance to zero"
            assert problem.audit_records()[0].shape == (1, 1)
    finally:
        for mod in ("typomodel", "rightmodel"):
            sys.modules.pop(mod, None)


def test_the_facade_builds_what_the_docs_show():
    from kngflow.api import DATASETS, MECHANISMS, PROBLEMS, load_dataset

    assert set(PROBLEMS) == set(registry.BUILTIN_MODELS) and set(MECHANISMS["linear"]) >= {"kng", "ss"}
    assert DATASETS == {"randhie": "linear", "fair": "logistic"} and load_dataset("fair").problem == "logistic"
    assert get_mechanism("mean", "kng", hardened=False).private

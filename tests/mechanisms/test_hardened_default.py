"""No silent leak on the default path (issue #48, item 4).

Every mechanism of the registry, built by :func:`kngflow.api.get_mechanism` with its defaults,
is hardened (its release snapped to a public grid: :mod:`kngflow.mechanisms.hardening`) or
refuses to build in one line naming ``hardened=False``; a non-private reference estimator has
nothing to harden.  Spelling out ``hardened=False`` builds every one of them.  The negative
control: a throwaway plug-in that declares no hardening refuses the same way, so the walk
cannot pass vacuously; a real-data spec naming a mechanism that cannot be hardened fails
validation in one line naming the field.
"""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest

from kngflow import registry
from kngflow.api import get_mechanism
from kngflow.mechanisms import Mechanism, Release
from kngflow.mechanisms.hardening import HardeningError

#: every (problem, kind) pair of the registry (built-in models and installed entry points)
PAIRS = [(p, k) for p in registry.problem_names() for k in registry.kind_names(p)]


def _outcome(problem: str, kind: str) -> str:
    """``"hardened"``, ``"non-private"`` or ``"refused"``; fails on anything else."""
    try:
        mech = get_mechanism(problem, kind)
    except HardeningError as exc:
        msg = str(exc)
        assert "\n" not in msg and "hardened=False" in msg and repr(kind) in msg, msg
        return "refused"
    if not mech.private:
        assert not mech.hardened
        return "non-private"
    assert mech.hardened, f"{problem}/{kind}: a private mechanism built with its defaults is not hardened"
    assert type(mech).declares_hardening()
    return "hardened"


def test_the_registry_is_walked_whole():
    assert len(PAIRS) >= 40 and {p for p, _ in PAIRS} >= set(registry.BUILTIN_MODELS)


@pytest.mark.parametrize("problem, kind", PAIRS)
def test_every_mechanism_built_with_its_defaults_is_hardened_or_refuses_in_one_line(problem, kind):
    outcome = _outcome(problem, kind)
    cls = registry.mechanism_class(problem, kind)
    assert outcome == ("non-private" if not cls.private else "hardened" if cls.declares_hardening() else "refused")
    # hardened=False, spelled out, always builds the float64 release
    assert not get_mechanism(problem, kind, hardened=False).hardened


def test_which_built_in_mechanisms_refuse():
    """The built-in private mechanisms that declare no hardening (documented in
    ``get_mechanism``'s docstring, README, docs/privacy.md and docs/pca.md): all others are hardened."""
    refused = sorted((p, k) for p, k in PAIRS if p in registry.BUILTIN_MODELS and _outcome(p, k) == "refused")
    pca = [("pca", k) for k in ("analyze_gauss", "exponential", "mod_sulq", "sulq")]
    # k-means and the naive-Bayes model are being written elsewhere: their refusals are theirs to list
    assert [pk for pk in refused if pk[0] not in ("kmeans", "bayes")] == pca
    assert ("svm", "objective") not in refused and ("svm", "objective_ext") not in refused


class Throwaway(Mechanism):
    """The negative control: a private plug-in that declares no hardening."""

    def release(self, data, epsilon, rng):
        return Release(data.xbar + rng.laplace(size=data.d) * 2.0 / (data.n * epsilon))


def test_a_plug_in_without_a_hardening_refuses_by_default():
    ref = f"{__name__}:Throwaway"
    assert _outcome("mean", ref) == "refused"  # the walk's own check, on a class that must refuse
    with pytest.raises(HardeningError, match="hardened=False") as info:
        get_mechanism("mean", ref)
    msg = str(info.value)
    assert "\n" not in msg and "Throwaway" in msg and "'mean'" in msg, msg
    assert isinstance(info.value, ValueError)
    mech = get_mechanism("mean", ref, hardened=False)
    assert not mech.hardened and isinstance(mech, Throwaway)


def test_the_walk_catches_a_default_that_is_silently_unhardened(monkeypatch):
    """Control of the walk itself: were ``get_mechanism`` to build the plug-in unhardened
    (the old silent default), ``_outcome`` would fail."""
    ref = f"{__name__}:Throwaway"
    real = get_mechanism
    monkeypatch.setattr(sys.modules[__name__], "get_mechanism",
                        lambda p, k, **kw: real(p, k, **{"hardened": False, **kw}))
    with pytest.raises(AssertionError, match="not hardened"):
        _outcome("mean", ref)


def test_a_real_data_spec_with_a_mechanism_that_cannot_be_hardened_fails_in_one_line():
    from kngflow.sweep.spec import SpecError, parse_spec

    text = textwrap.dedent("""
        name = "digits_small"
        seed = 1
        [problem]
        name = "kngflow.models.pca.problem:DigitsPCAProblem"
        k = 2
        [grid]
        n = [1797]
        epsilon = [1.0]
        replicates = 1
        [[mechanisms]]
        label = "gauss"
        kind = "kngflow.models.pca.mechanisms:AnalyzeGauss"
    """)
    with pytest.raises(SpecError) as info:
        parse_spec(text)
    msg = str(info.value)
    assert "\n" not in msg and "mechanisms[0].hardened" in msg and "hardened" in msg, msg
    spec = parse_spec(text.replace('AnalyzeGauss"', 'AnalyzeGauss"\nhardened = false'))
    assert not spec.mechanisms[0].options["hardened"]


def test_a_synthetic_spec_keeps_the_unhardened_path_without_saying_so():
    """Simulation sweeps on synthetic data pass ``hardened = false`` themselves (bit-identical
    stores): a PCA spec needs no ``hardened`` field."""
    from kngflow.sweep.spec import parse_spec

    spec = parse_spec(textwrap.dedent("""
        name = "pca_small"
        seed = 1
        [problem]
        name = "pca"
        [grid]
        n = [100]
        epsilon = [1.0]
        replicates = 1
        [[mechanisms]]
        label = "gauss"
        kind = "analyze_gauss"
    """))
    assert not spec.build_mechanisms()["gauss"].hardened
    data = registry.problem_class("pca")().simulate(100, np.random.default_rng(0))
    rel = get_mechanism("pca", "analyze_gauss", hardened=False).release(data, 1.0, np.random.default_rng(1))
    assert rel.estimate.shape == (5,)

"""Hardened releases (kngflow.mechanisms.hardening): dithered snapping to a public grid.

The float attack's reproducer (D1 = {(1, 1), (0, 0)}, D2 = {(-1, -1), (0, 0)}, radius 1,
l-infinity data ball, epsilon = 1) finds no impossible event in 200 000 hardened releases
under either data set (the unhardened ones, its control, are flagged in 20 000); the
bit-level audit passes every hardened additive-noise release (its unhardened twin is
flagged where the float leak is visible: tests/audit/test_bit_audit.py);
the guarantee is printed by `kngflow audit`; options a mechanism cannot honour fail in one
line naming them.
"""

from __future__ import annotations

import math
import os
import re
import textwrap
from pathlib import Path

import numpy as np
import pytest

from testkit import TESTS, kngflow_cli
from kngflow.audit import bit_audit
from kngflow.audit.pairs import AdjacentPair
from kngflow.mechanisms import Mechanism, Release
from kngflow.api import get_mechanism, private_quantile
from kngflow.mechanisms.hardening import Hardening, HardeningError, coupling_hardening, guarantee, snap
from kngflow.api import get_problem

#: the path a child process imports this module (and testkit) from
_HERE = os.pathsep.join([str(Path(__file__).parent), str(TESTS)])

PAIR = AdjacentPair(np.array([[0.0, 0.0]]), np.array([1.0, 1.0]), np.array([-1.0, -1.0]))


def _on_grid(x, grid):
    return np.all(np.asarray(x) / grid == np.round(np.asarray(x) / grid))


@pytest.mark.slow
def test_the_reproducer_finds_nothing_in_200000_hardened_releases_and_the_unhardened_one_is_flagged():
    problem = get_problem("mean", d=2)
    hard = bit_audit(get_mechanism("mean", "kng", norm="linf"), problem, 1.0, pair=PAIR, draws=200_000)
    assert hard.passed and hard.bound == 0.0, hard.summary()
    assert not any(hard.details["counts"]) and not any(hard.details["counts_other"]), hard.summary()
    # negative control: the same mechanism unhardened, same check, on a tenth of the draws (fewer
    # draws flag a leak less easily): about 3 % of its releases are impossible events, the bound
    # reads 3.5 (2.8 with 10 000 draws, 4.6 with 50 000)
    plain = bit_audit(get_mechanism("mean", "kng", norm="linf", hardened=False), problem, 1.0, pair=PAIR,
                      draws=20_000)
    assert not plain.passed and plain.bound > 1.0, plain.summary()


@pytest.mark.parametrize("norm", ["l1", "l2"])
@pytest.mark.slow
def test_hardened_knorm_means_pass_the_bit_level_audit(norm):
    res = bit_audit(get_mechanism("mean", "kng", norm=norm), get_problem("mean", d=2), 1.0, pair=PAIR, draws=50_000)
    assert res.passed and not any(res.details["counts"] + res.details["counts_other"]), res.summary()


@pytest.mark.parametrize("problem, kind, options, draws", [
    ("quantile", "kng", {}, 50_000),          # private_quantile's path
    ("quantile", "exponential", {}, 50_000),
    ("linear", "ss", {"norm": "linf"}, 20_000),
    ("linear", "ss", {"norm": "l1"}, 20_000),
    ("logistic", "output", {}, 10_000),
    ("logistic", "objective_ext", {"norm": "linf"}, 5_000),
])
@pytest.mark.slow
def test_other_hardened_additive_noise_releases_pass_the_bit_level_audit(problem, kind, options, draws):
    from kngflow.registry import problem_class

    prob = get_problem(problem, **problem_class(problem).audit_options({}))
    mech = get_mechanism(problem, kind, **options)
    assert mech.hardened
    res = bit_audit(mech, prob, 1.0, draws=draws, seed=3)
    assert res.passed and res.bound == 0.0, res.summary()


def test_hardened_releases_lie_on_the_grid_and_move_by_less_than_one_cell():
    rng = np.random.default_rng(0)
    x = rng.uniform(0.0, 5000.0, 235)
    grid = 2.0**-0  # 2^(floor(log2 5000) - 12)
    for seed in range(200):
        plain = private_quantile(np.random.default_rng(seed), x, 0.5, 1.0, 0.0, 5000.0, hardened=False)
        hard = private_quantile(np.random.default_rng(seed), x, 0.5, 1.0, 0.0, 5000.0)
        assert _on_grid(hard, grid) and abs(hard - plain) < grid and 0.0 <= hard <= 5000.0
    data = get_problem("mean", d=3).simulate(1000, rng)
    mech = get_mechanism("mean", "kng", norm="l2")
    h = mech.hardening(data, 1.0)
    for seed in range(200):
        plain = get_mechanism("mean", "kng", norm="l2", hardened=False).release(data, 1.0, np.random.default_rng(seed))
        hard = mech.release(data, 1.0, np.random.default_rng(seed))
        assert _on_grid(hard.estimate, h.grid) and np.all(np.abs(hard.estimate - plain.estimate) < h.grid)


def test_snapping_is_unbiased_and_rounding_without_the_dither_is_not():
    h = Hardening(grid=2.0**-4, bound=1.0, eta=0.0, lipschitz=None, size=1)
    x = np.full(400_000, 0.3 * h.grid)
    y = snap(x, h, np.random.default_rng(1))
    # y - x takes two values; its SD is grid * sqrt(0.21), so 6 SE is far beyond chance (p < 1e-8)
    se = h.grid * math.sqrt(0.21 / x.size)
    assert abs(y.mean() - x[0]) < 6 * se and _on_grid(y, h.grid)
    undithered = np.floor(x / h.grid) * h.grid  # negative control: plain rounding down
    assert abs(undithered.mean() - x[0]) > 6 * se


def test_the_guarantee_grows_with_the_rounding_and_the_coupling_route_pays_in_delta():
    base = dict(grid=2.0**-10, bound=1.0, lipschitz=100.0, size=3)
    small = guarantee(Hardening(eta=1e-15, **base), 1.0)
    large = guarantee(Hardening(eta=1e-9, **base), 1.0)
    assert 1.0 < small[0] < large[0] < 1.01 and small[1] == large[1] == 0.0
    with pytest.raises(HardeningError, match="too large"):
        guarantee(Hardening(eta=1e-2, **base), 1.0)
    eps, delta = guarantee(coupling_hardening(1.0, 1e-12, 2), 1.0, 1e-5)
    assert eps == 1.0 and 1e-5 < delta < 1e-5 + (1 + math.e) * 4 * 1e-12 * 2**12 * 1.0001


def test_every_mechanism_accepts_hardened_and_get_mechanism_defaults_to_it():
    from kngflow.registry import kind_names

    for problem in ("mean", "quantile", "quantreg", "geomedian", "linear", "logistic"):
        for kind in kind_names(problem):
            m = get_mechanism(problem, kind)
            assert m.hardened == m.private, (problem, kind)
            assert "hardened" in type(m).option_names()
            assert not get_mechanism(problem, kind, hardened=False).hardened


@pytest.mark.parametrize("problem, kind, options, field", [
    ("linear", "kng", {"sampler": "gradient_map"}, "sampler"),
    ("linear", "kng", {"norm": "l2", "sampler": "gibbs"}, "sampler"),
    ("quantreg", "kng", {"base": "gaussian"}, "base"),
    ("quantile", "exponential", {"hardened": "yes"}, "hardened"),
])
def test_options_a_hardened_release_cannot_honour_fail_in_one_line_naming_them(problem, kind, options, field):
    with pytest.raises((TypeError, ValueError)) as info:
        get_mechanism(problem, kind, **options)
    msg = str(info.value)
    assert "\n" not in msg and field in msg, msg
    if field != "hardened":  # the same options unhardened are fine
        get_mechanism(problem, kind, **{**options, "hardened": False})


@pytest.mark.parametrize("problem, kind", [("linear", "kng"), ("linear", "exponential"), ("quantreg", "kng"),
                                           ("quantreg", "exponential")])
def test_coordinate_gibbs_is_hardenable_where_it_exists(problem, kind):
    mech = get_mechanism(problem, kind, sampler="gibbs")
    assert mech.hardened and mech.sampler == "gibbs"
    if problem == "quantreg":
        assert "gibbs" in mech.hardenable_samplers()


class NoHardening(Mechanism):
    """A plug-in that declares no hardening."""

    def release(self, data, epsilon, rng):
        return Release(data.xbar + rng.laplace(size=data.d) * 2.0 / (data.n * epsilon))


def test_a_plug_in_without_a_hardening_refuses_by_default_and_refuses_hardened_true():
    ref = f"{__name__}:NoHardening"
    with pytest.raises(HardeningError, match="hardened=False") as info:  # no silent float64 release
        get_mechanism("mean", ref)
    assert "\n" not in str(info.value) and "NoHardening" in str(info.value)
    assert not get_mechanism("mean", ref, hardened=False).hardened
    with pytest.raises(HardeningError, match="hardened: mechanism NoHardening cannot be hardened"):
        get_mechanism("mean", ref, hardened=True)


@pytest.mark.slow
def test_kngflow_audit_prints_the_guarantee_of_the_hardened_release():
    out = kngflow_cli("audit", "kng", "--problem", "mean", "--option", "norm=l1", "--draws", "5000",
                      "--pair", "(0,0) + (1,1) -> (-1,-1)", "--no-progress")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "hardened: estimate snapped to the grid 2^-" in out.stdout and "-DP at declared (ε, δ) = (1, 0)" in out.stdout
    out = kngflow_cli("audit", "ss", "--problem", "linear", "--draws", "2000", "--no-progress")
    assert out.returncode == 0 and "hardened: noisy statistic (1 per release)" in out.stdout, out.stdout + out.stderr
    out = kngflow_cli("audit", "kng", "--problem", "quantile", "--draws", "2000", "--no-progress")
    assert out.returncode == 0 and "hardened: estimate snapped" in out.stdout, out.stdout + out.stderr
    assert re.search(r"\(1, \d\.\de-\d\d\)-DP at declared \(ε, δ\) = \(1, 0\)", out.stdout), out.stdout  # δ′ > 0
    out = kngflow_cli("audit", "kng", "--problem", "quantile", "--option", "hardened=false", "--draws", "2000",
                      "--no-progress")
    assert "not hardened: the float64 release itself" in out.stdout, out.stdout + out.stderr


@pytest.mark.slow
def test_a_real_data_spec_runs_hardened_and_the_store_says_so(tmp_path):
    spec = tmp_path / "fair.toml"
    spec.write_text(textwrap.dedent("""
        name = "fair_small"
        seed = 5
        [problem]
        name = "logistic"
        dataset = "fair"
        [grid]
        n = [6366]
        epsilon = [1.0]
        replicates = 2
        [[mechanisms]]
        label = "nonprivate"
        kind = "nonprivate"
        [[mechanisms]]
        label = "Linf"
        kind = "objective_ext"
        [[mechanisms]]
        label = "Linf_plain"
        kind = "objective_ext"
        hardened = false
    """))
    store = tmp_path / "s.zarr"
    out = kngflow_cli("run", spec, "--store", store, "--workers", 1, "--no-dashboard", "--no-progress")
    assert out.returncode == 0, out.stdout + out.stderr
    import json

    import xarray as xr

    ds = xr.open_zarr(store)
    assert json.loads(ds.attrs["hardened"]) == {"Linf": True, "Linf_plain": False}
    assert "releases of Linf were hardened" in ds.attrs["caveats"]
    assert "releases of Linf_plain were not hardened" in ds.attrs["caveats"]
    rep = kngflow_cli("report", store, "--out", tmp_path / "report")
    assert rep.returncode == 0, rep.stdout + rep.stderr
    md = next((tmp_path / "report").glob("*.md")).read_text()
    assert "releases of Linf were hardened" in md and "Linf_plain were not hardened" in md
    est = ds["estimate"].sel(mechanism="Linf").values
    h = get_mechanism("logistic", "objective_ext").hardening(get_problem("logistic", dataset="fair").simulate(
        6366, np.random.default_rng(0)), 1.0)
    assert _on_grid(est[np.isfinite(est)], h.grid)
    # a plug-in that cannot be hardened on real data: one line naming the field, exit 2, nothing written
    bad = tmp_path / "bad.toml"
    text = spec.read_text()
    assert 'kind = "objective_ext"\nhardened = false' in text
    bad.write_text(text.replace('kind = "objective_ext"\nhardened = false', f'kind = "{__name__}:NoHardening"'))
    store2 = tmp_path / "bad.zarr"
    env = {**os.environ, "PYTHONPATH": _HERE}
    out = kngflow_cli("run", bad, "--store", store2, "--workers", 1, "--no-dashboard", "--no-progress", env=env)
    assert out.returncode == 2 and not store2.exists(), out.stdout + out.stderr
    lines = [ln for ln in out.stderr.strip().splitlines() if ln]
    assert len(lines) == 1 and "hardened" in lines[0] and "mechanisms[2]" in lines[0], out.stderr


@pytest.mark.slow
def test_hardened_is_listed_only_where_it_can_be_honoured_and_a_declared_box_hardens_a_plug_in():
    ref = f"{__name__}:NoHardening"
    assert "hardened" not in type(get_mechanism("mean", ref, hardened=False)).option_names()
    assert not get_mechanism("mean", ref, hardened=False).hardened
    assert "hardened" in type(get_mechanism("mean", "kng")).option_names()
    out = kngflow_cli("audit", ref, "--problem", "mean", "--draws", "2000", "--option", "hardened=false",
                      "--no-progress", env={**os.environ, "PYTHONPATH": _HERE})
    assert "--option hardened=true" not in out.stdout and "declares no hardening" in out.stdout, out.stdout + out.stderr
    boxed = get_mechanism("mean", f"{__name__}:BoxHardened")
    assert boxed.hardened and "hardened" in type(boxed).option_names()
    data = get_problem("mean", d=2).simulate(50, np.random.default_rng(0))
    rel = boxed.release(data, 1.0, np.random.default_rng(1))
    h = boxed.hardening(data, 1.0)
    assert np.array_equal(rel.estimate / h.grid, np.round(rel.estimate / h.grid))


class BoxHardened(NoHardening):
    """The plug-in of docs/plugins.md ("Hardening a plug-in"): a declared output box and
    rounding bound, the coupling route."""

    def hardening(self, data, epsilon):
        # the release is clipped to [-2, 2]^d; its float64 evaluation errs by at most 8 ulps of 2
        return coupling_hardening(2.0, 8 * 2.0**-53 * 2.0, data.d)

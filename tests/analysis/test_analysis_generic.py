"""The analysis layer and the planner work from the plug-in contract alone.

Stores whose mechanisms have made-up kinds and labels and whose problem is a made-up plug-in:
the report finds the non-private reference from the ``nonprivate`` attribute, the coverage's
standard errors from ``reference_stderr``, draws every figure and tabulates every private
mechanism's ratio to the reference, with no built-in kind present; a store with no reference
still reports.  Older stores without those attributes derive them through the registry.  The
planner's worker memory comes from ``Problem.data_bytes``.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import kngflow.analysis  # noqa: F401  (registers ds.kng)
from kngflow.analysis import declared, figures, summaries
from kngflow.analysis.report import write_report
from synthetic import SyntheticMechanism as SM
from synthetic import synthetic_dataset, write_store
from kngflow.problems.base import Problem

#: names the generic layers must not rely on; none of them is in these stores
BUILT_IN = ("nonprivate", "kng", "exponential", "objective", "objective_ext", "linear", "ols_stderr")
PLUGIN_PROBLEM = "acme.widgets:WidgetProblem"  # not importable here: resolving it fails


def _mechanisms():
    return [
        SM("laplace_a", "acme.mech:Laplace", lambda n, e: 1.0 / (e * np.sqrt(n))),
        SM("truth_ref", "acme.mech:Oracle", private=False),
        SM("gauss_b", "my_gauss", lambda n, e: 3.0 / (e * n), base="truth"),
        SM("hist_c", "acme.mech:Histogram", lambda n, e: 0.5 / np.sqrt(n)),
    ]


def _words(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_]+", text))


@pytest.fixture(scope="module")
def plugin_store(tmp_path_factory):
    raw = synthetic_dataset(_mechanisms(), n=[100, 1000], epsilon=[0.5, 1.0], replicates=30, d=3, seed=11,
                            problem=PLUGIN_PROBLEM, stderr="widget_se")
    path = tmp_path_factory.mktemp("generic") / "plugin.zarr"
    return raw, path, write_store(raw, path)


def test_synthetic_store_declares_reference_and_standard_errors(plugin_store):
    raw, _, ds = plugin_store
    assert json.loads(ds.attrs["nonprivate_labels"]) == ["truth_ref"]
    assert ds.attrs["reference_stderr"] == "widget_se" and "widget_se" in ds
    assert declared.nonprivate_labels(ds) == ["truth_ref"] == ds.kng.nonprivate
    assert summaries.reference_label(ds) == "truth_ref" == ds.kng.reference
    assert declared.reference_stderr(ds) == "widget_se" == ds.kng.reference_stderr
    # the reference releases the non-private estimate itself; the private ones add noise
    est = raw["estimate"].sel(n=100, epsilon=1.0)
    assert not np.allclose(est.sel(mechanism="laplace_a"), est.sel(mechanism="truth_ref"))
    assert int(raw["sampler"].sel(mechanism="truth_ref").max()) == 0
    # a subset of the mechanisms keeps only the labels it holds
    assert declared.nonprivate_labels(ds.sel(mechanism=["laplace_a", "gauss_b"])) == []


def test_report_with_made_up_kinds(plugin_store, tmp_path):
    _, path, ds = plugin_store
    out = tmp_path / "report"
    md = write_report(path, out)
    assert sorted(p.name for p in out.iterdir()) == ["coverage_vs_epsilon.png", "error_vs_epsilon.png",
                                                     "error_vs_n.png", "report.md"]
    assert "- non-private reference: truth_ref" in md
    assert "- mechanisms: laplace_a (acme.mech:Laplace, ε-DP), truth_ref (acme.mech:Oracle), " in md
    # the non-private reference ignores ε: "any" in one row per n (error table) and one slope row
    rows = [r for r in md.splitlines() if r.startswith("| truth_ref |")]
    assert len(rows) == 3 and all("| any |" in r for r in rows)
    # every private mechanism's ratio to the reference, none for the reference itself
    section = md.split("## Private mechanisms: mean-error ratio to truth_ref")[1].split("\n## ")[0]
    header = [line for line in section.splitlines() if line.startswith("| n |")][0]
    assert header == "| n | ε | laplace_a (acme.mech:Laplace) | gauss_b (my_gauss) | hist_c (acme.mech:Histogram) |"
    assert len([r for r in section.splitlines() if r.startswith("| 10^")]) == 4
    # coverage from the declared standard errors, named in the text
    cov = md.split("## Coverage of the non-private 95% CI")[1]
    assert "1.96·widget_se" in cov
    assert len([r for r in cov.splitlines() if r.startswith("| laplace_a |")]) == 4
    assert not [r for r in cov.splitlines() if r.startswith("| truth_ref |")]
    # nothing built in shows up
    assert not _words(md) & set(BUILT_IN), _words(md) & set(BUILT_IN)


def test_coverage_reads_the_declared_variable(plugin_store):
    raw, _, ds = plugin_store
    cov = ds.kng.coverage(how="per_coef").compute()
    est, se = raw["estimate"], raw["widget_se"]
    ref = est.sel(mechanism="truth_ref")
    inside = (abs(est - ref) <= 1.959963984540054 * se).sel(mechanism="hist_c", n=1000, epsilon=0.5)
    np.testing.assert_allclose(cov["coverage"].sel(mechanism="hist_c", n=1000, epsilon=0.5),
                               inside.mean("replicate"), rtol=1e-12)
    # an explicit variable wins; a missing one is named
    assert float(ds.kng.coverage(stderr="widget_se")["coverage"].sel(mechanism="hist_c", n=1000, epsilon=0.5)) >= 0
    with pytest.raises(ValueError, match="no variable 'nope'"):
        ds.kng.coverage(stderr="nope")


def test_figure_styles_by_position_reference_black(plugin_store):
    _, _, ds = plugin_store
    styles = figures._styles(ds)
    assert styles["truth_ref"]["color"] == "black"
    private = [styles[m]["color"] for m in ("laplace_a", "gauss_b", "hist_c")]
    assert private == [figures._PALETTE[0], figures._PALETTE[2], figures._PALETTE[3]]
    assert len({s["marker"] for s in styles.values()}) == 4
    fig = figures.figure_coverage_vs_epsilon(ds, n=1000)
    drawn = {ln.get_label(): ln.get_color() for ln in fig.axes[0].get_lines() if not ln.get_label().startswith("_")}
    assert drawn["hist_c"] == figures._PALETTE[3] and "truth_ref" not in drawn


def test_report_without_reference(tmp_path):
    mechs = [SM("p1", "acme.mech:Laplace", lambda n, e: 1 / (e * np.sqrt(n))), SM("p2", "my_gauss", lambda n, e: 1 / n)]
    raw = synthetic_dataset(mechs, n=[100, 1000], epsilon=[0.5, 1.0], replicates=8, d=2, seed=3,
                            problem=PLUGIN_PROBLEM, stderr=None)
    assert raw.attrs["nonprivate_labels"] == "[]" and raw.attrs["reference_stderr"] == ""
    write_store(raw, tmp_path / "s.zarr")
    md = write_report(tmp_path / "s.zarr", tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["error_vs_epsilon.png", "error_vs_n.png", "report.md"]
    assert "- non-private reference: none" in md
    assert "- coverage_vs_epsilon.png: skipped, no non-private reference mechanism in the study" in md
    assert "ratio to" not in md and "Coverage" not in md and "## Private mechanisms" not in md
    assert "| p1 | 10^2 | 1/2 |" in md
    assert not _words(md) & set(BUILT_IN)


def test_report_with_reference_but_no_standard_errors(tmp_path):
    mechs = [SM("base", "acme.mech:Oracle", private=False), SM("p1", "acme.mech:Laplace", lambda n, e: 1 / (e * n))]
    raw = synthetic_dataset(mechs, n=[100, 1000], epsilon=[0.5, 1.0], replicates=8, d=2, seed=4,
                            problem=PLUGIN_PROBLEM, stderr=None)
    ds = write_store(raw, tmp_path / "s.zarr")
    with pytest.raises(ValueError, match="no reference standard errors"):
        ds.kng.coverage()
    md = write_report(tmp_path / "s.zarr", tmp_path / "out")
    assert (f"- coverage_vs_epsilon.png: skipped, the {PLUGIN_PROBLEM} problem stores no non-private standard "
            "errors (it declares no reference_stderr)") in md
    assert "## Private mechanisms: mean-error ratio to base" in md and "Coverage" not in md


def test_store_without_declarations_derives_them_through_the_registry(plugin_store):
    """Stores older than the attributes: built-in kinds resolve, unimportable plug-ins read "no reference"."""
    old = synthetic_dataset([SM("np", "nonprivate"), SM("k", "kng", lambda n, e: 1 / n)], n=[100], replicates=4, d=2)
    assert json.loads(old.attrs["nonprivate_labels"]) == ["np"]  # the registry's answer for the built-in kinds
    for key in ("nonprivate_labels", "reference_stderr"):
        del old.attrs[key]
    assert declared.nonprivate_labels(old) == ["np"] and declared.reference_stderr(old) == "ols_stderr"
    raw, _, _ = plugin_store
    bare = raw.copy()
    for key in ("nonprivate_labels", "reference_stderr"):
        del bare.attrs[key]
    assert declared.nonprivate_labels(bare) == [] and declared.reference_stderr(bare) is None
    assert bare.kng.reference is None


class WidgetProblem(Problem):
    """A plug-in problem that adds a section to the report (options from the spec's [problem])."""

    def __init__(self, *, d: int = 2, note: str = "none"):
        self.d, self.note = d, note
        self.theta_star = np.zeros(d)

    def simulate(self, n, rng):
        return rng.standard_normal((n, self.d))

    def report_sections(self, ds):
        from kngflow.analysis.report import ratio_section

        gauss = [label for label, kind in summaries.kinds_by_label(ds).items() if kind == "my_gauss"]
        return [f"## Widget notes\n\nnote = {self.note}; {ds.sizes['mechanism']} mechanisms.",
                ratio_section(ds, gauss, title="Gaussian baseline")]


def test_problem_adds_report_sections(tmp_path):
    problem = f"{__name__}:WidgetProblem"
    raw = synthetic_dataset(_mechanisms(), n=[100, 1000], replicates=5, d=2, seed=5, problem=problem)
    spec = raw.attrs["spec"].replace(f'problem = "{problem}"\n', "")
    raw.attrs["spec"] = spec + f'\n[problem]\nname = "{problem}"\nd = 2\nnote = "from the spec"\n'
    write_store(raw, tmp_path / "w.zarr")
    md = write_report(tmp_path / "w.zarr", tmp_path / "out")
    notes, own = md.split("## Widget notes\n\n")[1].split("\n\n## ")[:2]  # then the glossary
    assert notes == "note = from the spec; 4 mechanisms."
    # the problem's own ratio table (computed from the store alone) repeats the generic one's column
    assert own.startswith("Gaussian baseline: mean-error ratio to truth_ref")
    generic = md.split("## Private mechanisms: mean-error ratio to truth_ref")[1].split("\n## ")[0]
    col = [r.split("|")[3].strip() for r in generic.splitlines() if r.startswith("| 10^")]
    assert [r.split("|")[2].strip() for r in own.splitlines() if r.startswith("| 10^")] == col
    assert "| n | gauss_b (my_gauss) |" in own
    # a problem that cannot be built where the report runs costs its sections, not the report
    raw.attrs["spec"] = spec + f'\n[problem]\nname = "{problem}"\nunknown_option = 1\n'
    write_store(raw, tmp_path / "w2.zarr")
    md = write_report(tmp_path / "w2.zarr", tmp_path / "out2")
    assert "Widget notes" not in md and "## Error per (mechanism, n, ε)" in md


def test_plan_worker_memory_from_problem_data_bytes():
    from testkit import tiny_spec

    from kngflow.sweep import plan
    from kngflow.sweep.spec import parse_spec

    spec = parse_spec(tiny_spec(n=(20, 50)))
    cost = plan.CostModel()
    d = int(spec.problem().d)
    base = plan.estimate(spec, cost)
    # the default of Problem.data_bytes is the formula the planner used before
    assert plan._data_set_bytes(spec.problem(), spec.n) == 4 * plan.DEFAULT_BLOCK_ROWS * (d + 1) * 8

    class Big:  # the same problem, declaring 1000 bytes per row
        def __init__(self, inner):
            self._inner = inner

        def __getattr__(self, name):
            return getattr(self._inner, name)

        def data_bytes(self, n):
            return 1000 * n

    object.__setattr__(spec, "_problem", Big(spec.problem()))
    bigger = plan.estimate(spec, cost)
    assert bigger.worker_bytes - base.worker_bytes == 1000 * 50 - 4 * plan.DEFAULT_BLOCK_ROWS * (d + 1) * 8

    from kngflow.problems import Problem

    class OldStyle(Problem):  # declares no data_bytes: the contract's default
        pass

    old = OldStyle()
    old.d = 5
    assert plan._data_set_bytes(old, [10, 10**6]) == 4 * plan.DEFAULT_BLOCK_ROWS * 6 * 8

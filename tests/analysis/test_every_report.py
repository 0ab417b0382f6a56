"""Every shipped study's report, from a reduced run, in headless Chromium at 1280 and 800 px.

Each spec of ``workflows/`` (claims files aside) runs through the real CLI reduced to its two
smallest n and 2 replicates (``kngflow run SPEC --n N1,N2 --replicates 2`` on the test
process's one-worker cluster, ``testkit.study_run``), and
``kngflow report --html`` reports it with the study's claims file.  The report must open
with its title, ``## Summary`` and ``## Contents``; its sections follow the problem: no
log–log slopes for a problem whose ``loglog_slopes`` is False (an error that bottoms out),
no per-coefficient bias and RMSE for one whose ``coefficient_summaries`` is False (a
release that is not a coefficient vector), and slopes wherever they apply (two n or more
and a problem that declares them: the negative control of that check).  Every figure the
report saves has every text inside its PNG (``test_report.py``'s check, whose negative
control is a figure shrunk and saved without the tight box).  In Chromium (``test_report_html``'s
probe) the page raises no error, fetches nothing, fits the window with no column hidden
behind a table's scroll, and decodes every figure at its PNG size; the probe's own negative
controls are ``test_report_html.py::test_browser_harness_flags_a_broken_page``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_report import checked_figures
from test_report_html import _check_self_contained, _probe, needs_chromium
from testkit import kngflow_cli, study_run

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"
SPECS = sorted(p for p in WORKFLOWS.glob("*.toml") if not p.name.endswith(".claims.toml"))
SLOPES, COEFFICIENTS = "Log–log slopes", "Bias and RMSE per coefficient"


def _reduced_report(spec: Path, tmp: Path, monkeypatch, cluster) -> tuple[Path, str, object, int]:
    """``(report folder, report.md, problem, number of n)`` of ``spec`` run reduced and
    reported by the real CLI, no text of its figures cut off."""
    from kngflow.sweep.spec import load_spec

    loaded = load_spec(spec)
    sizes = ",".join(str(n) for n in sorted(loaded.n)[:2])
    run = study_run(cluster, spec, tmp / "s.zarr", "--n", sizes, "--replicates", 2)
    assert run.returncode == 0, run.stdout + run.stderr
    figures, cut = checked_figures(monkeypatch)
    report = kngflow_cli("report", tmp / "s.zarr", "--out", tmp / "report", "--html")
    assert report.returncode == 0, report.stdout + report.stderr
    assert figures and cut == [], cut
    return (tmp / "report", (tmp / "report" / "report.md").read_text(encoding="utf-8"), loaded.problem(),
            len(sizes.split(",")))


@needs_chromium
@pytest.mark.slow
@pytest.mark.parametrize("spec", SPECS, ids=[p.stem for p in SPECS])
def test_report_of_every_shipped_study(spec, tmp_path, monkeypatch, study_cluster):
    out, md, problem, sizes = _reduced_report(spec, tmp_path, monkeypatch, study_cluster)
    headings = [line for line in md.splitlines() if line.startswith("#")]
    assert headings[0].startswith("# kngflow report") and headings[1:3] == ["## Summary", "## Contents"], headings[:4]
    titles = {h.lstrip("#").strip() for h in headings}  # a study with problem axes: "###" per point
    # slopes need two n (a real data set's study has one: its size)
    assert (SLOPES in titles) == (bool(problem.loglog_slopes) and sizes >= 2), (problem.loglog_slopes, headings)
    if not problem.coefficient_summaries:
        assert COEFFICIENTS not in titles, headings
    page = out / "report.html"
    text = page.read_text(encoding="utf-8")
    figures = len(list(out.rglob("*.png")))
    shown = re.findall(r"<img[^>]*\ssrc=\"([^\"]*)\"", text)  # the headline figure twice with problem axes
    assert figures >= 1 and len(set(shown)) == figures
    _check_self_contained(text, figures=len(shown))
    assert not re.search(r"(?<![\w/])/(tmp|home|work)/", text), "an absolute path"
    for width in (1280, 800):
        probe, console = _probe(page, tmp_path, width)
        assert probe["errors"] == [] and console == [], (width, probe["errors"], console)
        scroll_width, client_width = probe["width"]
        assert scroll_width <= client_width and client_width > width - 40, (width, probe["width"])
        assert probe["hidden_columns"] == [], (width, probe["hidden_columns"])
        assert probe["fetched"] == []
        assert len(probe["images"]) == len(shown)
        for complete, w, h in probe["images"]:
            assert complete and w > 300 and h > 200, (width, probe["images"])

"""Tests of kngflow.analysis.report.write_report on synthetic contract-schema zarr stores."""

from __future__ import annotations

import re

import numpy as np
import pytest

from kngflow.analysis.report import write_report
from synthetic import SyntheticMechanism as SM
from synthetic import synthetic_dataset, write_store

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _is_png(path):
    data = path.read_bytes()
    return data[:8] == PNG_MAGIC and len(data) > 10_000


def _rows(md, first_cell):
    return [line for line in md.splitlines() if line.startswith(f"| {first_cell} |")]


@pytest.fixture(scope="module")
def n_grid_store(tmp_path_factory):
    """KNG §4.3-shaped partial store: n = 10^2..10^5 finished, 10^6 unfinished."""
    mechs = [
        SM("NonPrivate", "nonprivate"),
        SM("ExpMech", "exponential", lambda n, e: 2.0 / np.sqrt(n)),
        SM("ObjPert", "objective", lambda n, e: 0.3 / np.sqrt(n) + 10.0 / n),
        SM("KNG", "kng", lambda n, e: 0.3 / np.sqrt(n) + 10.0 / n),
    ]
    raw = synthetic_dataset(mechs, n=[10**2, 10**3, 10**4, 10**5, 10**6], replicates=50, d=12, seed=2, done=lambda lab, n, e, r: n < 10**6)
    path = tmp_path_factory.mktemp("stores") / "kng_linear.zarr"
    write_store(raw, path, replicate_chunk=50)
    return path


def test_report_on_partial_n_grid(n_grid_store, tmp_path):
    out = tmp_path / "report"
    md = write_report(n_grid_store, out)
    assert (out / "report.md").read_text(encoding="utf-8") == md
    assert sorted(p.name for p in out.iterdir()) == ["error_vs_n.png", "report.md"]
    assert _is_png(out / "error_vs_n.png")
    assert "](error_vs_n.png)" in md
    # the caption states the statistic, the bars and the partial-point marker; skipped figures are listed
    caption = [line for line in md.splitlines() if line.startswith("*Log10 of the mean")][0]
    assert "±1 Monte Carlo SE" in caption and "open markers: partial points" in caption
    assert "- error_vs_epsilon.png: skipped, the grid has a single ε" in md
    assert "- coverage_vs_epsilon.png: skipped, the grid has a single ε" in md
    # how complete the store is, and what is missing
    assert "800 of 1000 cells finished (80.0%)" in md
    assert "missing: n=10^6 (0/50 replicates)" in md
    # per (mechanism, n, ε) table: finished, mean error, log10 mean ± SE; the ratio to the
    # non-private is its own table (one table per question: no column repeats it here)
    kng_rows = _rows(md, "KNG")
    assert len(kng_rows) == 5 + 1 + 5  # error table, slope table, coverage table
    cell = [c.strip() for c in kng_rows[0].strip("|").split("|")]
    assert cell[:4] == ["KNG", "10^2", "1", "50/50"] and len(cell) == 7
    assert re.fullmatch(r"-?\d\.\d{3} ± 0\.\d{3}", cell[6])
    assert "| KNG | 10^6 | 1 | 0/50 | — | — | — |" in md
    ratio = md.split("## Private mechanisms: mean-error ratio to NonPrivate")[1].split("\n## ")[0]
    assert re.search(r"^\| 10\^2 \| \d\.\d{3} ± 0\.\d{3} \|", ratio, re.M)
    # slopes per mechanism ± SE, with the non-private one near −1/2
    assert "## Log–log slopes" in md
    np_slope = [r for r in _rows(md, "NonPrivate") if "±" in r and "/50" not in r][0]
    slope = float(np_slope.split("|")[3].split("±")[0])
    assert abs(slope + 0.5) < 0.05
    # χ²/dof per fit; KNG's C/√n + K/n curve is no straight line over n = 10^2..10^5: flagged
    assert "χ²/dof" in md
    kng_slope = [r for r in kng_rows if "±" in r and "/50" not in r][0]
    assert "†" in kng_slope.split("|")[3] and "†" not in np_slope
    # every private mechanism's ratio to the non-private at each n, in ONE table: the problem's
    # "KNG and exponential mechanism" comparison is named under it, its rows not repeated
    assert "KNG (kng)" in ratio and "ExpMech (exponential)" in ratio and "ObjPert (objective)" in ratio
    assert all(f"| 10^{k} |" in ratio for k in range(2, 7))
    assert "## KNG and exponential mechanism" not in md
    assert 'The problem\'s comparison "KNG and exponential mechanism" is the ExpMech, KNG columns of this table.' in md
    # 50 replicates: no small-sample banner
    assert "Small sample" not in md
    # a single-ε store gets no ε figures; coverage still tabulated
    assert "Coverage of the non-private 95% CI" in md


def test_a_large_store_is_reported_lazily_and_says_the_same(n_grid_store, tmp_path, monkeypatch):
    """A store above ``IN_MEMORY_BYTES`` stays dask-backed (its summaries computed chunk by
    chunk); its report equals the in-memory one, the figure included."""
    from kngflow.analysis import report

    lazy = []
    summary = report._s.error_summary
    monkeypatch.setattr(report._s, "error_summary", lambda ds: lazy.append(ds["error"].chunks is not None) or summary(ds))
    small = write_report(n_grid_store, tmp_path / "memory")
    monkeypatch.setattr(report, "IN_MEMORY_BYTES", 0)
    assert write_report(n_grid_store, tmp_path / "lazy") == small
    assert lazy == [False, True]  # a small store is read into memory, a large one is not
    assert (tmp_path / "lazy" / "error_vs_n.png").read_bytes() == (tmp_path / "memory" / "error_vs_n.png").read_bytes()


def test_report_on_epsilon_grid(tmp_path):
    mechs = [
        SM("MLE", "nonprivate"),
        SM("l1", "objective_ext", lambda n, e: 2.5 / (e * np.sqrt(n))),
        SM("linf", "objective_ext", lambda n, e: 1.0 / (e * np.sqrt(n))),
    ]
    eps = [1 / 16, 1 / 8, 1 / 4, 1 / 2, 1, 2, 4]
    raw = synthetic_dataset(mechs, n=[10**4], epsilon=eps, replicates=40, d=6, seed=4)
    write_store(raw, tmp_path / "as.zarr", replicate_chunk=40)
    out = tmp_path / "out"
    md = write_report(tmp_path / "as.zarr", out)
    names = sorted(p.name for p in out.iterdir())
    assert names == ["coverage_vs_epsilon.png", "error_vs_epsilon.png", "report.md"]
    assert all(_is_png(out / n) for n in names if n.endswith(".png"))
    assert "- error_vs_n.png: skipped, the grid has a single n" in md
    # proportions get Wilson intervals, never a zero-width "1.000 ± 0.000"
    cov_rows = md.split("## Coverage")[1].splitlines()
    assert any(re.search(r"\| 1\.000 \[0\.9\d\d, 1\.000\] \|", r) for r in cov_rows)
    assert "± 0.000" not in md.split("## Coverage")[1]
    assert "the store is complete." in md
    assert "## Log–log slopes" not in md  # one n: no slope
    assert len(_rows(md, "l1")) == 7 + 7  # error table + coverage table
    assert "| l1 | 10^4 | 1/16 |" in md
    # the non-private estimator ignores ε: one error-table row per n, marked "any"
    assert _rows(md, "MLE") == [r for r in _rows(md, "MLE") if "| any |" in r] and len(_rows(md, "MLE")) == 1


def test_report_on_two_axes_and_without_nonprivate(tmp_path):
    mechs = [SM("k", "kng", lambda n, e: 1 / (e * n)), SM("e", "exponential", lambda n, e: 1 / np.sqrt(n))]
    raw = synthetic_dataset(mechs, n=[100, 1000], epsilon=[0.5, 1.0], replicates=10, d=2, seed=6)
    write_store(raw, tmp_path / "s.zarr")
    md = write_report(tmp_path / "s.zarr", tmp_path / "out")
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    # one faceted figure per kind (a panel per n or per ε), not one file per panel
    assert names == ["error_vs_epsilon.png", "error_vs_n.png", "report.md"]
    assert "- coverage_vs_epsilon.png: skipped, no non-private reference mechanism in the study" in md
    assert "none (no mechanism declares private = False)" in md
    assert "ratio to" not in md and "Coverage" not in md


def test_report_titles_and_problems_without_standard_errors(tmp_path):
    """A study name titles the report; a problem without ols_stderr gets no coverage, and says why."""
    mechs = [SM("np", "nonprivate"), SM("k", "kng", lambda n, e: 1 / (e * np.sqrt(n)))]
    raw = synthetic_dataset(mechs, n=[100, 1000], epsilon=[0.5, 1.0], replicates=10, d=1, seed=8)
    raw = raw.drop_vars("ols_stderr")
    raw.attrs.update(title="median_study", problem="quantile")
    write_store(raw, tmp_path / "q.zarr")
    md = write_report(tmp_path / "q.zarr", tmp_path / "out")
    assert md.startswith("# kngflow report: median_study") and "- data: problem quantile" in md
    assert "- coverage_vs_epsilon.png: skipped, the quantile problem stores no non-private standard errors" in md
    assert "Coverage" not in md
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["error_vs_epsilon.png", "error_vs_n.png", "report.md"]


def test_report_on_empty_store(tmp_path):
    raw = synthetic_dataset([SM("np", "nonprivate"), SM("k", "kng", lambda n, e: 1 / n)], n=[100, 1000], replicates=5, d=2, done=lambda *a: False)
    write_store(raw, tmp_path / "empty.zarr")
    md = write_report(tmp_path / "empty.zarr", tmp_path / "out")
    assert "0 of 20 cells finished (0.0%)" in md
    assert "missing: n=10^2 (0/5 replicates); n=10^3 (0/5 replicates)" in md
    assert "error_vs_n.png: skipped, no finished replicates" in md
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["report.md"]


def test_cli_entry_point_is_importable_lazily():
    """``kngflow report`` imports write_report from kngflow.analysis.report (and the package re-exports it)."""
    import kngflow.analysis as ka
    from kngflow.analysis import report

    assert report.write_report is write_report
    assert callable(ka.write_report)


@pytest.mark.parametrize("replicates", [3, 12])
def test_few_replicates_get_a_banner_and_no_bias_flag(replicates, tmp_path):
    """A mechanism biased by 0.5 on coef 0: flagged (‡) at 12 replicates; at 3 every numeric
    section carries the small-sample banner and nothing is flagged (negative control: 12)."""
    mechs = [SM("np", "nonprivate"), SM("shifted", "kng", lambda n, e: 0.05)]
    raw = synthetic_dataset(mechs, n=[100, 1000], replicates=replicates, d=3, seed=5)
    est = raw["estimate"].values.copy()
    est[1, ..., 0] += 0.5
    raw["estimate"] = (raw["estimate"].dims, est)
    write_store(raw, tmp_path / "s.zarr")
    md = write_report(tmp_path / "s.zarr", tmp_path / "out", claims=False)
    bias = md.split("## Bias and RMSE per coefficient")[1].split("\n## ")[0]
    shifted = bias.split("### shifted")[1]
    row0 = [r for r in shifted.splitlines() if r.startswith("| 10^3 | 0 |")][0]
    sections = [s.split("\n")[0] for s in md.split("\n## ")[1:] if "> **Small sample:**" in s]
    if replicates == 3:
        tables = "\n".join(r for r in bias.splitlines() if r.startswith("|"))
        assert "‡" not in tables and float(row0.split("|")[5]) > 3  # |bias/MCSE| > 3, yet not flagged
        assert "no bias is flagged (‡) on them" in bias
        assert sections == ["Completeness", "Error per (mechanism, n, ε)", "Log–log slopes",
                            "Private mechanisms: mean-error ratio to np", "Bias and RMSE per coefficient",
                            "Coverage of the non-private 95% CI"], sections
        assert "as few as 3 finished replicates (fewer than 10)" in md
    else:
        assert "‡" in row0 and sections == [] and "Small sample" not in md


# ---------------------------------------------------------------------------
# layout: summary, contents and glossary; sections that follow the problem; plain text
# ---------------------------------------------------------------------------
def _two_n_store(tmp_path, problem="linear", d=2, mechs=None, name="s"):
    mechs = mechs or [SM("nonprivate", "nonprivate"), SM("kng", "kng", lambda n, e: 1 / (e * np.sqrt(n)))]
    raw = synthetic_dataset(mechs, n=[100, 1000, 10_000], epsilon=[0.5, 1.0], replicates=12, d=d, seed=9,
                            problem=problem)
    path = tmp_path / f"{name}.zarr"
    write_store(raw, path)
    return path


def test_summary_and_contents_come_first_and_link_every_section(tmp_path):
    from kngflow.analysis.html import anchor

    md = write_report(_two_n_store(tmp_path), tmp_path / "out", html=True, claims=False)
    headings = [line for line in md.splitlines() if line.startswith("#")]
    assert headings[0].startswith("# kngflow report") and headings[1:3] == ["## Summary", "## Contents"]
    summary = md.split("## Summary\n")[1].split("\n## ")[0]
    for what in ("- data: problem linear", "- grid: n = 10^2, 10^3, 10^4", "- mechanisms: nonprivate, kng (ε-DP)",
                 "- completeness: 144 of 144 cells finished", "](error_vs_n.png)"):
        assert what in summary, what
    # the headline figure is shown once, in the summary
    assert md.count("](error_vs_n.png)") == 1
    # the contents link every later section, in order, with the ids report.html gives them
    contents = md.split("## Contents\n\n")[1].split("\n\n")[0].splitlines()
    later = [h[3:] for h in headings if h.startswith("## ")][2:]
    assert [re.match(r"- \[(.*)\]\(#(.*)\)$", c).group(1) for c in contents] == later
    seen = {}
    ids = {anchor(h.lstrip("#").strip(), seen) for h in headings}
    assert {re.match(r"- \[.*\]\(#(.*)\)$", c).group(1) for c in contents} <= ids
    assert later[-1] == "Glossary" and "Log–log slopes" in later
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    links = re.findall(r'<a href="#([^"]+)">', page)
    assert len(links) == len(contents)
    assert all(f'id="{link}"' in page for link in links), [x for x in links if f'id="{x}"' not in page]


def test_glossary_defines_every_term_the_report_uses_and_no_other(tmp_path):
    from kngflow.analysis.sections import GLOSSARY

    for problem, d in (("linear", 2), ("svm", 2)):
        md = write_report(_two_n_store(tmp_path, problem, d, name=problem), tmp_path / f"out_{problem}", claims=False)
        body, glossary = md.split("\n## Glossary\n")
        assert "\n## " not in glossary  # the last section
        defined = re.findall(r"^- \*\*(.+?)\*\*: ", glossary, re.M)
        used = [term for term, pattern, _text in GLOSSARY if re.search(pattern, body)]
        assert defined == used
        for must in ("Monte Carlo SE (MCSE)", "bias", "RMSE", "diagnosands", "Wilson interval", "coverage"):
            assert must in defined, (problem, must)
        assert ("χ²/dof" in defined) == (problem == "linear") and ("log–log slope" in defined) == (problem == "linear")
    # a term the report does not use is not defined (a report without claims: no Bonferroni)
    assert "Bonferroni" not in defined


def test_bounded_error_has_no_slope_section_and_only_a_declared_rate_is_stated(tmp_path):
    """SVM (misclassification rate: bounded, floor at the Bayes rate) declares loglog_slopes =
    False: no slope section, no "should be"; negative control: linear (declares n^-1/2) shows
    both; a problem declaring slopes but no rate (pca) shows slopes without an expected value."""
    svm = write_report(_two_n_store(tmp_path, "svm", 2, name="svm"), tmp_path / "svm", claims=False)
    assert "## Log–log slopes" not in svm and "should be" not in svm and "χ²/dof" not in svm
    assert "No slopes of the log error on log n: the problem declares" in svm
    assert not re.search(r"Figure \d|Awan|KNG paper", svm)  # captions in the problem's words, no other paper's
    # the headline figure of an error that does not fall as a power of n is the one against ε
    assert svm.split("## Summary")[1].split("\n## ")[0].count("](error_vs_epsilon.png)") == 1
    linear = write_report(_two_n_store(tmp_path, "linear", name="lin"), tmp_path / "lin", claims=False)
    assert "## Log–log slopes" in linear and "the non-private slope should be about −0.5" in linear
    assert "No slopes of the log error" not in linear
    pca = write_report(_two_n_store(tmp_path, "pca", 5, name="pca"), tmp_path / "pca", claims=False)
    assert "## Log–log slopes" in pca and "should be" not in pca
    assert not re.search(r"Figure \d|Awan|KNG paper", pca)


def test_no_doubled_labels_and_no_absolute_paths(tmp_path):
    mechs = [SM("nonprivate", "nonprivate"), SM("kng", "kng", lambda n, e: 1 / (e * np.sqrt(n))),
             SM("KNG_inf", "kng", lambda n, e: 2 / (e * np.sqrt(n)))]
    store = _two_n_store(tmp_path, mechs=mechs)
    md = write_report(store, tmp_path / "out", claims=False)
    doubled = re.findall(r"\b([\w.:]+) \(\1[,)]", md)
    assert doubled == [], doubled
    assert "kng (ε-DP)" in md and "KNG_inf (kng, ε-DP)" in md and "| kng | KNG_inf (kng) |" in md
    # paths are relative to the store's folder: the store by its name, nothing absolute
    assert "store `s.zarr`" in md
    assert str(tmp_path) not in md and not re.search(r"`/|\s/(tmp|home|work|Users)/", md)


def test_shown_path_is_relative_to_the_store_folder(tmp_path):
    from kngflow.analysis.sections import shown_path

    store = tmp_path / "results" / "x.zarr"
    assert shown_path(store, store) == "x.zarr"
    assert shown_path(tmp_path / "results" / "claims" / "x.claims.toml", store) == "claims/x.claims.toml"
    assert shown_path("/elsewhere/workflows/x.claims.toml", store) == "x.claims.toml"


# ---------------------------------------------------------------------------
# figures: no text drawn outside the PNG
# ---------------------------------------------------------------------------
def texts_cut_off(fig, save) -> list[str]:
    """The texts ``save(fig)`` draws outside the PNG it returns (more than half a pixel out).

    Every text the save really draws is recorded with its extent in the saved image's
    pixels (``Text.draw`` wrapped for the save; a tick label outside the view is not
    drawn, so not recorded): the last renderer's draw is the one written to the file."""
    import io

    import matplotlib.image as mpimg
    from matplotlib.text import Text

    drawn, draw = [], Text.draw

    def recording(self, renderer):
        draw(self, renderer)
        if self.get_visible() and self.get_text().strip():
            drawn.append((renderer, self.get_text(), self.get_window_extent(renderer)))

    Text.draw = recording
    try:
        png = save(fig)
    finally:
        Text.draw = draw
    height, width = mpimg.imread(io.BytesIO(png)).shape[:2]
    last = drawn[-1][0]
    return [text for renderer, text, box in drawn if renderer is last and (
        box.x0 < -0.5 or box.y0 < -0.5 or box.x1 > width + 0.5 or box.y1 > height + 0.5)]


def checked_figures(monkeypatch) -> tuple[list, list]:
    """Make the report's PNG writer check each figure it saves: ``(figures, texts cut off)``,
    filled as the report draws."""
    from kngflow.analysis import report

    figures, cut, png = [], [], report._png

    def checked(fig):
        saved = []
        cut.extend(texts_cut_off(fig, lambda f: saved.append(png(f)) or saved[0]))
        figures.append(fig)
        return saved[0]

    monkeypatch.setattr(report, "_png", checked)
    return figures, cut


def test_no_figure_text_is_cut_off_and_a_cut_one_is_caught(tmp_path, monkeypatch):
    """Every figure of a report (PCA's three-line error label, facets with the legend
    outside) has every text inside its PNG.  Negative control: the same figure shrunk to
    3 × 2 in and saved without the tight box loses its axis labels; the report's own save
    keeps them even then."""
    import io

    from kngflow.analysis import report

    figures, cut = checked_figures(monkeypatch)
    write_report(_two_n_store(tmp_path, "pca", 5, name="pca"), tmp_path / "pca", claims=False)
    assert len(figures) >= 2 and cut == []

    def plain(fig):
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=120)
        return buf.getvalue()

    fig = figures[0]
    fig.set_size_inches(3, 2)
    lost = texts_cut_off(fig, plain)
    assert any(text.startswith("log10(") for text in lost), lost
    monkeypatch.undo()
    assert texts_cut_off(fig, report._png) == []

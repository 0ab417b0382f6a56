"""The sections of ``kngflow report``: one function per section, each returning its Markdown.

:func:`kngflow.analysis.report.report_markdown` puts them in this order:

* :func:`title_block` — the study's name and description;
* :func:`summary_section` — what was run (study, problem, mechanisms, grid, completeness), the
  claims' verdicts in one line each, and the headline figure;
* :func:`contents_section` — links to every section (anchors that work in report.html and
  on GitHub);
* :func:`completeness_section`, :func:`caveats_section`, :func:`claims_section`,
  :func:`figures_section` (the figures but the headline one, and the ones not drawn);
* :func:`error_table_section`, :func:`slopes_section` (only where the problem declares that
  log–log slopes mean something: ``Problem.loglog_slopes``), :func:`ratio_sections`,
  :func:`diagnosand_section`, :func:`coverage_section`, then the problem's own sections;
* :func:`glossary_section` — every statistical term the report uses (:data:`GLOSSARY`), and
  only those.

This module writes the sections about the study as a whole (the top, completeness, caveats,
claims, figures, glossary) and is where every section is imported from; the sections on the
error are in :mod:`kngflow.analysis.error_sections`, those on the estimates (diagnosands,
coverage) in :mod:`kngflow.analysis.diagnosand_sections`, and what they all share
(:class:`ReportContext`, number formatting) in :mod:`kngflow.analysis.report_context`.

The text names no problem and no mechanism kind: what the error measures, its declared rate
in n, the lines drawn and the problem's sections come from the store's declarations
(:mod:`kngflow.analysis.declared`).  Paths are shown relative to the store's folder.
"""

from __future__ import annotations

import datetime
import os
import re
from pathlib import Path

import xarray as xr

from . import declared as _declared
from . import summaries as _s
from .declared import error_label
from .diagnosand_sections import BIAS_FLAG_Z, coverage_section, diagnosand_section, diagnosand_table
from .error_sections import error_table_section, ratio_section, ratio_sections, slopes_section
from .figures import study_name
from .html import anchor
from .report_context import SMALL_SAMPLE, ReportContext, mechanism_name, small_sample_banner, smallest_count

__all__ = ["ReportContext", "title_block", "summary_section", "summary_tail", "contents_section", "completeness_section",
           "caveats_section", "claims_section", "figures_section", "error_table_section", "slopes_section",
           "ratio_section", "ratio_sections", "diagnosand_section", "diagnosand_table", "coverage_section",
           "glossary_section", "GLOSSARY", "glossary_terms", "mechanism_name", "shown_path",
           "small_sample_banner", "caveat_items", "run_date", "grid_words", "SMALL_SAMPLE", "BIAS_FLAG_Z"]


# --------------------------------------------------------------------------
# what the summary says about the run
# --------------------------------------------------------------------------
def caveat_items(text: str) -> list[str]:
    """The store's ``caveats`` attribute as sentences: its parts are joined by ``"; "`` after
    a problem's own caveat that may end in a full stop (``"only.; releases"``)."""
    items = []
    for part in re.split(r"(?<=\.);\s+", str(text or "").strip()):
        part = part.strip()
        if part:
            items.append(part + ("" if part.endswith(".") else "."))
    return items


def run_date(store_path: str | os.PathLike | None) -> str | None:
    """When the run last wrote results into the store (UTC, to the minute): the newest file of
    its ``done`` array; None when the store is not a local directory with one."""
    if store_path is None:
        return None
    newest = 0.0
    for root, _dirs, files in os.walk(Path(store_path) / "done"):
        for f in files:
            try:
                newest = max(newest, os.stat(os.path.join(root, f)).st_mtime)
            except OSError:
                continue
    if not newest:
        return None
    return datetime.datetime.fromtimestamp(newest, datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _data_line(ds: xr.Dataset) -> str:
    """The study's data in words: the problem and the options of the spec's ``[problem]`` table."""
    name = _declared.problem_name(ds) or "unknown"
    table = _declared._spec(ds).get("problem")
    options = {k: v for k, v in table.items() if k != "name"} if isinstance(table, dict) else {}
    shown = ", ".join(f"{k} = {v}" for k, v in options.items())
    return (f"problem {name}" + (f" ({shown})" if shown else "")
            + "; one data set per (n, replicate), shared by every mechanism and ε")


def grid_words(n_vals, eps_vals, R: int, n_mech: int) -> str:
    """The grid in words: ``n = 10^2, 10^3; ε = 1; 3 replicates of each of 4 mechanisms: 24 cells``."""
    cells = n_mech * len(n_vals) * len(eps_vals) * R
    return (f"n = {', '.join(_s.format_n(n) for n in n_vals)}; ε = {', '.join(_s.format_epsilon(e) for e in eps_vals)}; "
            f"{R} replicate{'s' if R != 1 else ''} of each of {n_mech} mechanism{'s' if n_mech != 1 else ''}: "
            f"{cells} cells")


def shown_path(path: str | os.PathLike, store_path: str | os.PathLike | None) -> str:
    """``path`` as the report prints it: relative to the folder holding the store when it lies
    under it (``"fig1.zarr"``, ``"workflows/x.claims.toml"``), else its file name — never an
    absolute local path."""
    p = Path(os.path.abspath(os.fspath(path)))
    if store_path is not None:
        base = Path(os.path.abspath(os.fspath(store_path))).parent
        try:
            return p.relative_to(base).as_posix()
        except ValueError:
            pass
    return p.name


# --------------------------------------------------------------------------
# the top: title, summary, contents
# --------------------------------------------------------------------------
def title_block(ctx: ReportContext) -> str:
    """``# kngflow report: <study>`` and the study's description (the spec's ``description``)."""
    study = study_name(ctx.ds)
    md = [f"# kngflow report{': ' + study if study else ''}"]
    description = str(_declared._spec(ctx.ds).get("description") or "").strip()
    if description:
        md += ["", description]
    return "\n".join(md)


def _verdict_counts(verdicts: list) -> dict[str, int]:
    return {v: sum(1 for x in verdicts if x.verdict == v) for v in ("agrees", "disagrees", "inconclusive")}


def summary_section(ctx: ReportContext) -> str:
    """``## Summary``: what was run (the run, the data, the grid, the mechanisms, the reference,
    how complete the store is), the claims' verdicts one line each, and the headline figure."""
    ds = ctx.ds
    meta = []
    when = run_date(ctx.store_path)
    if when or ctx.store_path is not None:
        meta.append("- run: " + ", ".join(x for x in (
            f"results last written {when}" if when else "",
            f"store `{shown_path(ctx.store_path, ctx.store_path)}`" if ctx.store_path is not None else "") if x))
    if ds.attrs.get("kngflow_version"):
        meta.append(f"- kngflow {ds.attrs['kngflow_version']}")
    meta.append(f"- data: {_data_line(ds)}")
    meta.append(f"- grid: {grid_words(ctx.n_vals, ctx.eps_vals, ctx.R, len(ctx.mechs))}")
    meta.append(f"- error: {error_label(ds)}")
    meta.append(f"- mechanisms: {', '.join(ctx.described(m) for m in ctx.mechs)}")
    if ctx.mixed:
        meta.append(
            "- privacy: this study mixes ε-DP and (ε, δ)-DP mechanisms; rows of the latter are marked "
            "(ε, δ); at equal ε they promise less, so do not compare them as equals"
        )
    meta.append(f"- non-private reference: {ctx.ref if ctx.ref is not None else 'none (no mechanism declares private = False)'}")
    completeness = _s.describe_completeness(ds, ctx.info).split("; missing:")[0].rstrip(".")
    meta.append(f"- completeness: {completeness}" + ("" if "complete" in completeness else " (see Completeness)"))
    meta.append("- provenance: the spec, its hash, the seed and the package versions are in the store's attributes "
                "(and folded at the end of report.html)")
    return "\n".join(["## Summary", ""] + meta + summary_tail(ctx.verdicts, ctx.headline))


def summary_tail(verdicts: list | None, headline: tuple[str, str] | None) -> list[str]:
    """The summary's last lines: the claims' verdicts (counts, then one line each) and the
    headline figure ``(file, caption)`` with its caption."""
    md = []
    if verdicts:
        counts = _verdict_counts(verdicts)
        md += ["", f"Claims: {len(verdicts)} checked: " + ", ".join(f"{k} {v}" for k, v in counts.items())
               + " (details under Paper claims)."]
        md += [""] + [f"- **{v.verdict}** `{v.id}`: {str(v.statement).strip()}" for v in verdicts]
    if headline is not None:
        fname, caption = headline
        md += ["", f"![{Path(fname).stem}]({fname})", "", f"*{caption}*"]
    return md


def _headings(md: str) -> list[tuple[int, str]]:
    """``[(level, text)]`` of the Markdown headings outside fenced code, in order."""
    out, fenced = [], False
    for line in md.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        m = None if fenced else re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if m:
            out.append((len(m.group(1)), m.group(2)))
    return out


def contents_section(md: str, after: str = "Contents") -> str:
    """``## Contents``: a link to every ``##`` section of ``md`` after the heading ``after``;
    the anchors follow every heading of ``md`` in order, as report.html's (and GitHub's) ids do."""
    seen: dict[str, int] = {}
    links, started = [], False
    for level, text in _headings(md):
        slug = anchor(text, seen)
        if level == 2 and started:
            links.append(f"- [{text}](#{slug})")
        started = started or (level == 2 and text == after)
    return "\n".join(["## Contents", ""] + links)


# --------------------------------------------------------------------------
# completeness, caveats, claims, figures
# --------------------------------------------------------------------------
def completeness_section(ctx: ReportContext) -> str:
    """``## Completeness``: how many cells finished, which are missing, what the ± mean."""
    md = ["## Completeness", "", _s.describe_completeness(ctx.ds, ctx.info).rstrip(".") + ".", ""]
    md += small_sample_banner(smallest_count(ctx.info["per_group"].values), "some cells",
                              f"claims need at least {SMALL_SAMPLE} and no bias is flagged below")
    md.append(
        "Only finished cells (`done == 1`) enter the numbers below; groups without finished "
        "replicates show —. Monte Carlo standard errors (± 1 SE) are over replicates; the SE of "
        "log10(mean error) is the delta-method SE sd/(√k·mean·ln 10)."
    )
    return "\n".join(md)


def caveats_section(ctx: ReportContext) -> str | None:
    """``## Caveats``: the store's caveats, one sentence each; None when it has none."""
    caveats = caveat_items(ctx.ds.attrs.get("caveats", ""))
    return "\n".join(["## Caveats", ""] + [f"- {c}" for c in caveats]) if caveats else None


def claims_section(verdicts: list, claims_path: str | None = None) -> str:
    """The "Paper claims" Markdown section: a count of the verdicts and their table.
    ``claims_path`` is printed as given (:func:`shown_path` makes it relative)."""
    from .claims import verdict_table

    counts = _verdict_counts(verdicts)
    md = ["## Paper claims", ""]
    md.append(
        f"{len(verdicts)} claims" + (f" from `{claims_path}`" if claims_path else "") + ": "
        + ", ".join(f"{k} {v}" for k, v in counts.items()) + ". Each comparison is a paired ratio of the statistic "
        "between two cells (same data sets, replicate by replicate) with a z-interval from the Monte Carlo SE, "
        "Bonferroni-split over the claim's comparisons (95% per claim): agrees when every interval lies on the "
        "claimed side, disagrees when one lies wholly on the other, inconclusive otherwise."
    )
    md += ["", verdict_table(verdicts)]
    return "\n".join(md)


def figures_section(ctx: ReportContext) -> str | None:
    """``## Figures``: every figure but the headline one (in the summary), with its caption, and
    the figures not drawn with the reason; None when there is nothing to show."""
    others = ctx.figures[1:]
    if not (others or ctx.notes):
        return None
    md = ["## Figures", ""]
    if ctx.headline is not None:
        md += [f"The headline figure ({ctx.headline[0]}) is in the summary. Click a figure in report.html "
               "to open it at full size.", ""]
    for fname, caption in others:
        md += [f"![{Path(fname).stem}]({fname})", "", f"*{caption}*", ""]
    md += [f"- {note}" for note in ctx.notes]
    return "\n".join(md).rstrip("\n")


# --------------------------------------------------------------------------
# glossary
# --------------------------------------------------------------------------
#: ``(term, pattern, definition)``: every statistical term the report may use; the glossary
#: lists those whose pattern (a regular expression) occurs in the rest of the report.
GLOSSARY: tuple[tuple[str, str, str], ...] = (
    ("ε (epsilon), ε-DP, (ε, δ)-DP", r"ε",
     "the privacy level of a differentially private (DP) mechanism: the smaller ε, the stronger the "
     "privacy and the more noise. (ε, δ)-DP also allows a small probability δ that the promise fails."),
    ("replicate", r"\breplicates?\b",
     "one independent repetition of the simulation: a fresh data set, given to every mechanism at every ε."),
    ("cell", r"\bcells?\b",
     "one (mechanism, n, ε, replicate) combination of the grid; a summary pools the replicates of a "
     "(mechanism, n, ε)."),
    ("non-private reference", r"non-private",
     "the estimator computed without privacy; the private mechanisms are measured against it."),
    ("paired", r"\b[Pp]aired\b",
     "compared replicate by replicate on the same data sets, so that the data's own variation cancels out."),
    ("Monte Carlo SE (MCSE)", r"MCSE|Monte Carlo SE|MC SE|Monte Carlo standard error",
     "the standard error of a number estimated from a finite number of replicates: how much it would move "
     "if the study were run again with other seeds. Numbers are shown ± 1 SE; differences smaller than about "
     "2 SE may be chance."),
    ("delta method", r"delta[- ]method",
     "a first-order approximation of the SE of a transformed statistic, e.g. SE(log10 mean) ≈ "
     "SE(mean) / (mean · ln 10)."),
    ("McKean–Schrader SE", r"McKean",
     "a standard error of the median computed from order statistics."),
    ("log–log slope", r"[Ll]og–log slope",
     "the slope of log10(mean error) against log10 n: an error that falls like n^r has slope r "
     "(r = −0.5: a hundred times more data, a tenth of the error)."),
    ("χ²/dof", r"χ²/dof",
     "chi-squared per degree of freedom of a fitted line: about 1 when the points lie on the line within "
     "their SEs; much more than 1 when the relation is curved."),
    ("mean-error ratio", r"mean-error ratio",
     "a private mechanism's mean error divided by the non-private reference's on the same data sets: "
     "1 means privacy costs nothing in accuracy, 2 that it doubles the error."),
    ("diagnosands", r"[Dd]iagnosand",
     "the properties of an estimator a simulation measures — bias, SD, RMSE, MAE, coverage — each with "
     "its Monte Carlo SE."),
    ("bias", r"\b[Bb]ias\b",
     "the mean of estimate − θ* over replicates: a systematic error that more replicates do not remove."),
    ("SD", r"\bSD\b", "the standard deviation of the estimate over replicates: its noise."),
    ("RMSE", r"\bRMSE\b",
     "root mean squared error, √mean((estimate − θ*)²): bias and noise together (RMSE² ≈ bias² + SD²)."),
    ("MAE", r"\bMAE\b", "mean absolute error, mean |estimate − θ*|."),
    ("confidence interval (CI)", r"\bCI\b|confidence interval",
     "a range computed from the data that contains the true value with a stated probability (95%)."),
    ("coverage", r"[Cc]overage(?!_vs)",
     "the share of replicates whose interval contains the target; a 95% interval should cover about 95% "
     "of the time."),
    ("Wilson interval", r"Wilson",
     "a confidence interval for a proportion (a share of replicates) that stays inside [0, 1] and keeps a "
     "width when the share is 0 or 1, where p ± SE would read ± 0."),
    ("Bonferroni", r"Bonferroni",
     "a correction for making m comparisons at once: each interval is drawn at level 1 − 0.05/m, so that "
     "all of them hold together with 95% confidence."),
)


def glossary_terms(md: str) -> list[tuple[str, str]]:
    """``[(term, definition)]`` of :data:`GLOSSARY` whose pattern occurs in ``md``."""
    return [(term, text) for term, pattern, text in GLOSSARY if re.search(pattern, md)]


def glossary_section(md: str) -> str | None:
    """``## Glossary``: the terms of :data:`GLOSSARY` that ``md`` (the rest of the report) uses;
    None when it uses none."""
    terms = glossary_terms(md)
    if not terms:
        return None
    return "\n".join(["## Glossary", ""] + [f"- **{term}**: {text}" for term, text in terms])

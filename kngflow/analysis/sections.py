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

The text names no problem and no mechanism kind: what the error measures, its declared rate
in n, the lines drawn and the problem's sections come from the store's declarations
(:mod:`kngflow.analysis.declared`).  Paths are shown relative to the store's folder.
"""

from __future__ import annotations

import datetime
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from . import declared as _declared
from . import summaries as _s
from .declared import error_label
from .figures import study_name
from .html import anchor

__all__ = ["ReportContext", "title_block", "summary_section", "contents_section", "completeness_section",
           "caveats_section", "claims_section", "figures_section", "error_table_section", "slopes_section",
           "ratio_section", "ratio_sections", "diagnosand_section", "diagnosand_table", "coverage_section",
           "glossary_section", "GLOSSARY", "glossary_terms", "mechanism_name", "shown_path",
           "small_sample_banner", "caveat_items", "run_date", "grid_words", "SMALL_SAMPLE", "BIAS_FLAG_Z"]

_NA = "—"


# --------------------------------------------------------------------------
# number and text formatting
# --------------------------------------------------------------------------
def _finite(v: Any) -> bool:
    try:
        return math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def _g(v: Any, digits: int = 4) -> str:
    return f"{float(v):.{digits}g}" if _finite(v) else _NA


def _pm(v: Any, se: Any, fmt: str = ".3f") -> str:
    if not _finite(v):
        return _NA
    if not _finite(se):
        return f"{float(v):{fmt}}"
    return f"{float(v):{fmt}} ± {float(se):{fmt}}"


def _pmg(v: Any, se: Any) -> str:
    """``0.0427 ± 0.025`` — 3 significant digits, the SE with 2 (values of any scale)."""
    if not _finite(v):
        return _NA
    return f"{float(v):.3g}" + (f" ± {float(se):.2g}" if _finite(se) else "")


def _interval(v: Any, lo: Any, hi: Any) -> str:
    """``0.950 [0.912, 0.973]`` — a proportion with its interval, never a zero-width ``± 0.000``."""
    return f"{float(v):.3f} [{float(lo):.3f}, {float(hi):.3f}]" if _finite(v) else _NA


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _eps_tag(eps: float) -> str:
    return f"{float(eps):g}".replace(".", "p").replace("-", "m")


#: Fewer finished replicates than this behind a statistic: the report says so where it is shown
#: and flags no bias there (a Monte Carlo SE from a handful of replicates is itself noise).
SMALL_SAMPLE = 10


def small_sample_banner(k_min: int, what: str = "these numbers", more: str = "") -> list[str]:
    """Markdown lines of the small-sample banner (a ``>`` block), or ``[]`` when ``k_min`` is
    0 (nothing finished) or at least :data:`SMALL_SAMPLE`."""
    if not 0 < int(k_min) < SMALL_SAMPLE:
        return []
    return [f"> **Small sample:** {what} rest on as few as {int(k_min)} finished replicate"
            f"{'s' if int(k_min) != 1 else ''} (fewer than {SMALL_SAMPLE}): their Monte Carlo SEs are rough"
            + (f"; {more}" if more else "") + ".", ""]


def _k_min(counts) -> int:
    """The smallest positive count (0 when every count is 0)."""
    c = np.asarray(counts, dtype=float).ravel()
    c = c[np.isfinite(c) & (c > 0)]
    return int(c.min()) if c.size else 0


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


def mechanism_name(label: str, kind: str | None, *tags: str) -> str:
    """``"KNG (kng, ε-DP)"``: a label with its kind and tags in brackets; the kind is left out
    when it is the label itself (``"kng (ε-DP)"``, never ``"kng (kng)"``)."""
    inner = [str(kind)] if kind is not None and str(kind) != str(label) else []
    inner += [t for t in tags if t]
    return f"{label} ({', '.join(inner)})" if inner else str(label)


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


def _mechanism_cell(m: str, deltas: dict[str, float], mixed: bool) -> str:
    """A table's mechanism cell: marked when ε-DP and (ε, δ)-DP rows share the table."""
    return f"{m} (ε, δ={deltas[m]:g})" if mixed and deltas.get(m, 0.0) > 0 else m


def _slope_coefs(ds: xr.Dataset) -> slice | None:
    """The coefficients the coverage scores: the slopes (coef 0 is the intercept), or all if d = 1."""
    return slice(1, None) if ds.sizes.get("coef", 1) > 1 else None


def coverage_unavailable(ds: xr.Dataset) -> str | None:
    """Why the coverage of the non-private CI cannot be computed, or None when it can."""
    if _s.reference_label(ds, required=False) is None:
        return "no non-private reference mechanism in the study"
    problem = ds.attrs.get("problem", "study")
    name = _s.reference_stderr(ds)
    if not name:
        return f"the {problem!s} problem stores no non-private standard errors (it declares no reference_stderr)"
    if name not in ds:
        return f"the {problem!s} problem stores no non-private standard errors ({name} is not in the store)"
    if "estimate" not in ds:
        return "the store has no estimate variable"
    return None


def _signed(x: float) -> str:
    """``-0.5 -> "−0.5"`` (a typographic minus)."""
    return f"{x:g}".replace("-", "−")


# --------------------------------------------------------------------------
# what every section reads
# --------------------------------------------------------------------------
@dataclass
class ReportContext:
    """What the sections of one report share: the store, its computed summaries and what
    was drawn, plus the mechanisms' kinds and privacy tags, computed once."""

    ds: xr.Dataset
    summary: xr.Dataset
    info: dict[str, Any]
    figures: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    store_path: str | None = None
    diagnosands: xr.Dataset | None = None
    verdicts: list | None = None
    claims_path: str | None = None

    def __post_init__(self):
        ds = self.ds
        self.kinds = _s.kinds_by_label(ds)
        self.deltas = _s.mechanism_deltas(ds)
        self.mixed = any(self.deltas.values()) and not all(self.deltas.values())
        self.nonprivate = set(_s.nonprivate_labels(ds))
        self.ref = _s.reference_label(ds, required=False)
        self.R = self.info["n_replicates"]
        self.mechs = [str(m) for m in self.summary["mechanism"].values]
        self.n_vals = self.summary["n"].values
        self.eps_vals = self.summary["epsilon"].values

    def name(self, m: str) -> str:
        """The mechanism's table cell (marked (ε, δ) when the study mixes both kinds of DP)."""
        return _mechanism_cell(m, self.deltas, self.mixed)

    def described(self, m: str) -> str:
        """``"label (kind, ε-DP)"``: the mechanism with its kind and privacy."""
        tag = "" if m in self.nonprivate else _s.privacy_tag(self.deltas.get(m, 0.0))
        return mechanism_name(m, self.kinds.get(m, m), tag)

    def eps_rows(self, m: str) -> list[tuple[float, str]]:
        """``[(ε, ε text)]`` of a mechanism's rows: a non-private estimator ignores ε (the same
        data serve every ε): one row, "any"."""
        if m in self.nonprivate and self.eps_vals.size > 1:
            return [(self.eps_vals[0], "any")]
        return [(e, _s.format_epsilon(e)) for e in self.eps_vals]

    @property
    def headline(self) -> tuple[str, str] | None:
        """The figure shown in the summary: the first drawn (error against n, else against ε)."""
        return self.figures[0] if self.figures else None


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
    md = ["## Summary", ""] + meta
    if ctx.verdicts:
        counts = _verdict_counts(ctx.verdicts)
        md += ["", f"Claims: {len(ctx.verdicts)} checked: " + ", ".join(f"{k} {v}" for k, v in counts.items())
               + " (details under Paper claims)."]
        md += [""] + [f"- **{v.verdict}** `{v.id}`: {str(v.statement).strip()}" for v in ctx.verdicts]
    if ctx.headline is not None:
        fname, caption = ctx.headline
        md += ["", f"![{Path(fname).stem}]({fname})", "", f"*{caption}*"]
    return "\n".join(md)


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
    md += small_sample_banner(_k_min(ctx.info["per_group"].values), "some cells",
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
# the tables
# --------------------------------------------------------------------------
def error_table_section(ctx: ReportContext) -> str:
    """``## Error per (mechanism, n, ε)``: finished replicates, mean, median ± SE and
    log10 mean ± MC SE of every cell group."""
    summ = ctx.summary
    md = ["## Error per (mechanism, n, ε)", "", f"Error: {error_label(ctx.ds)}.", ""]
    md += small_sample_banner(_k_min(summ["n_done"].values))
    header = ["mechanism", "n", "ε", "finished", "mean error", "median error ± SE", "log10 mean error ± MC SE"]
    rows = []
    for m in ctx.mechs:
        for n in ctx.n_vals:
            for e, e_text in ctx.eps_rows(m):
                c = summ.sel(mechanism=m, n=n, epsilon=e)
                rows.append([
                    ctx.name(m),
                    _s.format_n(n),
                    e_text,
                    f"{int(c['n_done'])}/{ctx.R}",
                    _g(c["mean_error"]),
                    _g(c["median_error"]) + (f" ± {_g(c['median_error_se'], 2)}" if _finite(c["median_error_se"]) else ""),
                    _pm(c["log10_mean_error"], c["log10_mean_error_se"]),
                ])
    md.append(_table(header, rows))
    if ctx.n_vals.size >= 2 and not _declared.loglog_slopes(ctx.ds):
        md += ["", f"No slopes of the log error on log n: the problem declares that its error ({error_label(ctx.ds)}) "
                   "does not fall as a power of n (it is bounded, with a floor above zero)."]
    return "\n".join(md)


def slopes_section(ctx: ReportContext) -> str | None:
    """``## Log–log slopes``: weighted fits of log10(mean error) on log10 n with χ²/dof, over
    all n and (with ≥ 4 n) over the larger half.  None with fewer than two n, or when the
    problem declares that slopes mean nothing for its error (``Problem.loglog_slopes``).  The
    expected non-private slope is stated only where the problem declares it
    (``Problem.error_rate_in_n``)."""
    ds, summ, n_vals = ctx.ds, ctx.summary, ctx.n_vals
    if n_vals.size < 2 or not _declared.loglog_slopes(ds):
        return None
    all_fit = _s.slope_fit(ds, summary=summ)
    tail = None
    if n_vals.size >= 4:
        n_tail = float(np.sort(n_vals)[-max(3, n_vals.size // 2)])
        tail = _s.slope_fit(ds, summary=summ, n_min=n_tail)
    rate = _declared.error_rate_in_n(ds)
    expected = ""
    if rate is not None and ctx.nonprivate:
        expected = (f"; the problem declares that the non-private error falls like n^({_signed(rate)}), so the "
                    f"non-private slope should be about {_signed(rate)}")
    md = ["## Log–log slopes", ""]
    md.append(
        "Weighted least squares of log10(mean error) on log10 n (weights 1/SE²): a slope r means the error "
        f"falls like n^r{expected}. χ²/dof says whether a straight line fits; † marks fits where it does not "
        f"(p < {_s.CURVED_P:g}): their SE is inflated by √(χ²/dof) and the slope is only an average over a "
        "curved range."
    )
    md.append("")
    md += small_sample_banner(_k_min(summ["n_done"].values), "the points of these fits")

    def _fit_cells(f: xr.Dataset) -> list[str]:
        mark = " †" if bool(f["curved"]) else ""
        return [_pm(f["slope"], f["slope_se_inflated"]) + mark, _g(f["chi2_dof"], 3), str(int(f["n_points"]))]

    header = ["mechanism", "ε", "slope ± SE (all n)", "χ²/dof", "n used"]
    if tail is not None:
        header += [f"slope ± SE (n ≥ {_s.format_n(n_tail)})", "χ²/dof", "n used"]
    rows = []
    for m in ctx.mechs:
        for e, e_text in ctx.eps_rows(m):
            row = [ctx.name(m), e_text] + _fit_cells(all_fit.sel(mechanism=m, epsilon=e))
            if tail is not None:
                row += _fit_cells(tail.sel(mechanism=m, epsilon=e))
            rows.append(row)
    md.append(_table(header, rows))
    return "\n".join(md)


def ratio_section(
    ds: xr.Dataset,
    mechanisms: list[str],
    *,
    title: str = "Private mechanisms",
    summary: xr.Dataset | None = None,
) -> str | None:
    """A Markdown section: the paired mean-error ratio of each of ``mechanisms`` to the
    non-private reference, one row per (n, ε), one column per mechanism (``label (kind)``,
    the kind left out when it is the label).

    The report's "Private mechanisms" section; a problem's ``report_sections(ds)`` may call it
    for the mechanisms it wants compared on their own (under its own ``title``).  None when
    the store has no non-private reference or ``mechanisms`` is empty.  ``summary``: a
    computed :func:`~kngflow.analysis.summaries.error_summary` of ``ds`` to reuse.
    """
    ref = _s.reference_label(ds, required=False)
    labels = [str(m) for m in ds["mechanism"].values]
    focus = [m for m in mechanisms if m in labels and m != ref]
    if ref is None or not focus:
        return None
    if summary is None:
        summary = _s.ratio_to_reference(ds.sel(mechanism=focus + [ref]), ref).compute()
        summary = summary.rename(ratio="ratio_to_reference", ratio_se="ratio_to_reference_se")
    kinds = _s.kinds_by_label(ds)
    deltas = _s.mechanism_deltas(ds)
    mixed = any(deltas.values()) and not all(deltas.values())
    n_vals, eps_vals = summary["n"].values, summary["epsilon"].values
    several_eps = eps_vals.size > 1
    md = [f"## {title}: mean-error ratio to {ref}", ""]
    md.append("Paired over replicates finished for both; ratio → 1 means no asymptotic cost of privacy.")
    md.append("")
    if "n_done" in summary:
        md += small_sample_banner(_k_min(summary["n_done"].sel(mechanism=focus).values))
    header = ["n"] + (["ε"] if several_eps else []) + [
        mechanism_name(_mechanism_cell(m, deltas, mixed), kinds.get(m, m)) for m in focus
    ]
    rows = []
    for n in n_vals:
        for e in eps_vals:
            row = [_s.format_n(n)] + ([_s.format_epsilon(e)] if several_eps else [])
            for m in focus:
                c = summary.sel(mechanism=m, n=n, epsilon=e)
                row.append(_pm(c["ratio_to_reference"], c["ratio_to_reference_se"]))
            rows.append(row)
    md.append(_table(header, rows))
    return "\n".join(md)


def ratio_sections(ctx: ReportContext) -> list[str]:
    """Every private mechanism against the non-private reference in one table (:func:`ratio_section`);
    a problem's comparison (``report_comparisons``) whose mechanisms are columns of that table is
    named under it, not repeated; another gets a table of its own."""
    ds, mechs, kinds, nonprivate = ctx.ds, ctx.mechs, ctx.kinds, ctx.nonprivate
    private = [m for m in mechs if m not in nonprivate]
    block = ratio_section(ds, private, summary=ctx.summary)
    blocks = [] if block is None else [block]
    for title, group in _declared.problem_comparisons(ds).items():
        members = [m for m in mechs if kinds.get(m) in group and m not in nonprivate]
        if block is not None and members and set(members) <= set(private):
            blocks[0] += (f"\n\nThe problem's comparison \"{title}\" is the {', '.join(members)} "
                          f"column{'s' if len(members) > 1 else ''} of this table.")
            continue
        extra = ratio_section(ds, members, title=title, summary=ctx.summary)
        if extra is not None:
            blocks.append(extra)
    return blocks


#: A bias is flagged (‡) when it lies more than this many Monte Carlo SEs from zero.
BIAS_FLAG_Z = 3.0
_MAX_EPS_SHOWN = 3


def _diagnosable(ds: xr.Dataset) -> str | None:
    """Why the diagnosands cannot be computed, or None when they can."""
    for name in ("estimate", "theta_star", "done"):
        if name not in ds.variables:
            return f"the store has no {name} variable"
    if not _declared.coefficient_summaries(ds):
        return "the problem declares that its estimates' entries are not coefficients (coefficient_summaries = False)"
    return None


def _shown_epsilons(eps_vals: np.ndarray) -> list[float]:
    """Every ε, or the smallest, a middle and the largest when there are more than three."""
    eps = sorted(float(e) for e in eps_vals)
    if len(eps) <= _MAX_EPS_SHOWN:
        return eps
    return [eps[0], eps[len(eps) // 2], eps[-1]]


def _diagnosand_cells(ds: xr.Dataset, diag: xr.Dataset) -> dict[str, list[tuple[float, str, Any]]]:
    """The cells :func:`diagnosand_section` shows: ``{mechanism: [(ε, ε text, n)]}``."""
    nonprivate = set(_s.nonprivate_labels(ds))
    eps_vals = diag["epsilon"].values
    shown = _shown_epsilons(eps_vals)
    cells: dict[str, list[tuple[float, str, Any]]] = {}
    for m in [str(x) for x in diag["mechanism"].values]:
        eps_rows = ([(shown[0], "any")] if m in nonprivate and eps_vals.size > 1
                    else [(e, _s.format_epsilon(e)) for e in shown])
        cells[m] = []
        for e, e_text in eps_rows:
            have = diag["n_valid"].sel(mechanism=m, epsilon=e).max("coef").values > 0
            if have.any():
                cells[m].append((e, e_text, diag["n"].values[np.flatnonzero(have)[-1]]))
    return cells


def diagnosand_section(ds: xr.Dataset, diag: xr.Dataset) -> str | None:
    """A Markdown section: per-coefficient bias, SD and RMSE (± Monte Carlo SE) of each mechanism.

    One table per mechanism, at the largest n with finished replicates for each ε (every ε
    when there are at most three, else the smallest, a middle and the largest; a non-private
    mechanism once, ε "any").  ``diag``: a computed :func:`~kngflow.analysis.diagnosands.diagnose`
    of ``ds``.  None when no cell has a finished replicate.
    """
    if int(diag["n_valid"].sum()) == 0:
        return None
    kinds = _s.kinds_by_label(ds)
    deltas = _s.mechanism_deltas(ds)
    nonprivate = set(_s.nonprivate_labels(ds))
    eps_vals = diag["epsilon"].values
    shown = _shown_epsilons(eps_vals)
    several_eps = eps_vals.size > 1
    theta = diag["theta_star"].values if "theta_star" in diag.coords else None
    md = ["## Bias and RMSE per coefficient", ""]
    md.append(
        "The diagnosands of each mechanism's estimates. "
        "e = estimate − θ* over the finished replicates of a cell: bias = mean(e), SD = sd(e), "
        "RMSE = √mean(e²) (RMSE² = bias² + SD² up to (k−1)/k). ± 1 Monte Carlo SE: SD/√k for the bias, the "
        "delta method with the fourth moment for the SD and on the MSE for the RMSE. bias/MCSE says whether "
        f"a mechanism is biased or just noisy: ‡ marks |bias| > {BIAS_FLAG_Z:g} MCSE. Shown at the largest n "
        "with finished replicates"
        + (" for each ε" if several_eps else "")
        + (f" (ε = {', '.join(_s.format_epsilon(e) for e in shown)} of the grid's {eps_vals.size})"
           if len(shown) < eps_vals.size else "")
        + "; `kngflow.analysis.diagnose(ds)` holds every cell, with the MAE"
        + (" and the coverage of θ* by estimate ± z·" + str(diag.attrs.get("stderr")) if diag.attrs.get("stderr") else "")
        + "."
    )
    md.append("")
    k_shown = []
    for m, cells in _diagnosand_cells(ds, diag).items():
        tag = "" if m in nonprivate else _s.privacy_tag(deltas.get(m, 0.0))
        rows = []
        for e, e_text, n in cells:
            c = diag.sel(mechanism=m, epsilon=e, n=n)
            for j, coef in enumerate(diag["coef"].values):
                cj = c.isel(coef=j)
                k = int(cj["n_valid"].values)
                k_shown.append(k)
                b, b_se = cj["bias"].values, cj["bias_se"].values
                zscore = float(b) / float(b_se) if _finite(b) and _finite(b_se) and float(b_se) > 0 else math.nan
                flag = " ‡" if _finite(zscore) and abs(zscore) > BIAS_FLAG_Z and k >= SMALL_SAMPLE else ""
                rows.append(
                    ([e_text] if several_eps else [])
                    + [_s.format_n(n), str(int(coef)), _g(theta[j], 3) if theta is not None else _NA,
                       _pmg(b, b_se), (f"{zscore:.1f}" if _finite(zscore) else _NA) + flag,
                       _pmg(cj["sd"].values, cj["sd_se"].values), _pmg(cj["rmse"].values, cj["rmse_se"].values)]
                )
        md += [f"### {mechanism_name(m, kinds.get(m, m), tag)}", ""]
        if not rows:
            md += ["No finished replicates.", ""]
            continue
        header = (["ε"] if several_eps else []) + ["n", "coef", "θ*", "bias ± MCSE", "bias/MCSE", "SD ± MCSE",
                                                   "RMSE ± MCSE"]
        md += [_table(header, rows), ""]
    banner = small_sample_banner(_k_min(k_shown), more="no bias is flagged (‡) on them")
    if banner:  # under the section's paragraph, above the first table
        at = md.index("", 2) + 1
        md[at:at] = banner
    return "\n".join(md).rstrip("\n")


def diagnosand_table(ds: xr.Dataset, diag: xr.Dataset, max_rows: int = 20_000,
                     skip: set | frozenset = frozenset()) -> tuple[list[str], list[list[str]]]:
    """Every (mechanism, n, ε, coef) cell with finished replicates, but those of the
    (mechanism, n, ε) in ``skip``: header and rows (text)."""
    deltas = _s.mechanism_deltas(ds)
    mixed = any(deltas.values()) and not all(deltas.values())
    cover = "coverage" in diag
    header = ["mechanism", "n", "ε", "coef", "k", "bias ± MCSE", "bias/MCSE", "SD ± MCSE", "RMSE ± MCSE",
              "MAE ± MCSE"]
    if cover:
        header.append(f"coverage of θ* by estimate ± {diag.attrs.get('z', 1.96):.2f}·{diag.attrs.get('stderr')} ± MCSE")
    flat = diag.transpose("mechanism", "n", "epsilon", "coef")
    arrays = {k: flat[k].values for k in flat.data_vars if flat[k].dims == ("mechanism", "n", "epsilon", "coef")}
    rows = []
    for a, m in enumerate(flat["mechanism"].values):
        for b, n in enumerate(flat["n"].values):
            for c, e in enumerate(flat["epsilon"].values):
                if (str(m), int(n), float(e)) in skip:
                    continue
                for d, coef in enumerate(flat["coef"].values):
                    k = int(arrays["n_valid"][a, b, c, d])
                    if k == 0:
                        continue
                    if len(rows) >= max_rows:
                        return header, rows
                    g = {name: arr[a, b, c, d] for name, arr in arrays.items()}
                    z = g["bias"] / g["bias_se"] if _finite(g["bias_se"]) and g["bias_se"] > 0 else math.nan
                    row = [_mechanism_cell(str(m), deltas, mixed), _s.format_n(n), _s.format_epsilon(e), str(int(coef)),
                           str(k), _pmg(g["bias"], g["bias_se"]), f"{z:.1f}" if _finite(z) else _NA,
                           _pmg(g["sd"], g["sd_se"]), _pmg(g["rmse"], g["rmse_se"]), _pmg(g["mae"], g["mae_se"])]
                    if cover:
                        row.append(_pm(g["coverage"], g["coverage_se"]))
                    rows.append(row)
    return header, rows


def diagnosands_or_reason(ctx: ReportContext) -> str | None:
    """:func:`diagnosand_section` of the context's diagnosands, or a ``## Bias and RMSE per
    coefficient`` section saying why they were not computed; None when nothing finished."""
    reason = _diagnosable(ctx.ds)
    if reason is not None:
        return f"## Bias and RMSE per coefficient\n\nNot computed: {reason}."
    if ctx.diagnosands is None:
        from .diagnosands import diagnose

        ctx.diagnosands = diagnose(ctx.ds).compute()
    return diagnosand_section(ctx.ds, ctx.diagnosands)


def coverage_section(ctx: ReportContext) -> str | None:
    """``## Coverage of the non-private 95% CI``: how often each private estimate lies inside the
    non-private reference's 95% CI (every slope, and the average over slopes), with Wilson
    intervals; None when the store declares no standard errors (:func:`coverage_unavailable`)."""
    ds, ref = ctx.ds, ctx.ref
    if coverage_unavailable(ds) is not None:
        return None
    cov_all = _s.coverage(ds, reference=ref, how="all", coefs=_slope_coefs(ds))
    cov_mean = _s.coverage(ds, reference=ref, how="mean", coefs=_slope_coefs(ds))
    both = xr.Dataset({
        "all": cov_all["coverage"], "all_lo": cov_all["coverage_lo"], "all_hi": cov_all["coverage_hi"],
        "mean": cov_mean["coverage"], "mean_lo": cov_mean["coverage_lo"], "mean_hi": cov_mean["coverage_hi"],
        "k": cov_all["n_valid"],
    }).compute()
    md = ["## Coverage of the non-private 95% CI", ""]
    md.append(
        f"A DP estimate is inside when |estimate − {ref}| ≤ 1.96·{_s.reference_stderr(ds)}, for the slopes (every "
        "coefficient but the intercept, coef 0). \"all\": every slope inside; \"average\": mean fraction of "
        "slopes inside (C_DP). Brackets: 95% Wilson intervals (conservative for the average)."
    )
    md.append("")
    md += small_sample_banner(_k_min(both["k"].sel(mechanism=[m for m in ctx.mechs if m != ref]).values))
    header = ["mechanism", "n", "ε", "replicates", "all slopes [95% CI]", "average over slopes [95% CI]"]
    rows = []
    for m in ctx.mechs:
        if m == ref:
            continue
        for n in ctx.n_vals:
            for e in ctx.eps_vals:
                c = both.sel(mechanism=m, n=n, epsilon=e)
                rows.append([ctx.name(m), _s.format_n(n), _s.format_epsilon(e), str(int(c["k"])),
                             _interval(c["all"], c["all_lo"], c["all_hi"]),
                             _interval(c["mean"], c["mean_lo"], c["mean_hi"])])
    md.append(_table(header, rows))
    return "\n".join(md)


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

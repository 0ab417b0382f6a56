"""``kngflow report``: the study's tables and figures from a (possibly partial) store.

:func:`write_report` opens a store with :func:`xarray.open_zarr`, computes the reduced
summaries (never the full replicate arrays), writes PNG figures that fit the grid and a
``report.md``, and returns the Markdown; with ``html=True`` also ``report.html``, one
self-contained file (:mod:`kngflow.analysis.html`).  This module draws and assembles;
each section of the text is a function of :mod:`kngflow.analysis.sections`:

a summary at the top (what was run, the claims' verdicts, the headline figure), a contents
list, the sections that apply to the study's problem, and a glossary of the statistical
terms the report uses.

A store with problem axes (``[grid.problem]`` in its spec, e.g. ``d``) gets its own summary
(the axes and their values, the grid, the claims' verdicts, the first point's headline
figure) and contents, a table of the mean error along those axes and the claims (evaluated
on the whole store), then
the usual sections once per point of the axes (:func:`point_view`: that point's cells, its
``coef`` cut to the point's own estimate), each under a heading naming the point, its
figures in a folder of their own (``d=16/error_vs_n.png``).

The report names no problem and no mechanism kind: the non-private reference, the
standard errors behind the coverage tables, whether log–log slopes mean anything for the
error and any problem-specific sections come from what the store and its plug-ins declare
(:mod:`kngflow.analysis.declared`).
"""

from __future__ import annotations

import io
import os
import warnings
from pathlib import Path
from typing import Any

import xarray as xr

from . import declared as _declared
from . import summaries as _s
from .declared import error_label, reference_lines
from .diagnosands import diagnose
from .figures import figure_coverage_vs_epsilon, figure_error_vs_epsilon, figure_error_vs_n, figure_facets, study_name
from .diagnosand_sections import (BIAS_FLAG_Z, coverage_section, coverage_unavailable, diagnosable, diagnosand_cells,
                                  diagnosand_section, diagnosand_table, diagnosands_or_reason, slope_coefs)
from .error_sections import error_table_section, ratio_section, ratio_sections, slopes_section
from .report_context import SMALL_SAMPLE, ReportContext, small_sample_banner
from .sections import (caveat_items, caveats_section, claims_section, completeness_section, contents_section,
                       figures_section, glossary_section, grid_words, run_date, shown_path, summary_section,
                       summary_tail, title_block)

__all__ = ["write_report", "make_report", "problem_axes", "point_view", "report_markdown", "open_store", "ratio_section", "diagnosand_section",
           "diagnosand_table", "claims_section", "resolve_claims", "REQUIRED_VARIABLES", "missing_variable",
           "small_sample_banner", "caveat_items", "run_date", "grid_words", "SMALL_SAMPLE", "BIAS_FLAG_Z"]

#: What the report's diagnosands and summaries read from a store.
REQUIRED_VARIABLES = ("error", "estimate", "theta_star", "done")


def missing_variable(ds: xr.Dataset) -> str | None:
    """One line naming the first of :data:`REQUIRED_VARIABLES` the store lacks, or None."""
    for name in REQUIRED_VARIABLES:
        if name not in ds.variables:
            return (f"the store has no variable {name!r}: the report needs "
                    + ", ".join(repr(v) for v in REQUIRED_VARIABLES))
    return None


#: a store of at most this many bytes is reported from memory (read once); a larger one stays
#: lazy, its summaries computed chunk by chunk
IN_MEMORY_BYTES = 256 * 2**20


def open_store(store_path: str | os.PathLike) -> xr.Dataset:
    """``xr.open_zarr`` without the consolidated-metadata chatter of zarr v3."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.filterwarnings("ignore", message=".*[Cc]onsolidated.*")
        return xr.open_zarr(os.fspath(store_path))


# --------------------------------------------------------------------------
# figures
# --------------------------------------------------------------------------
_PARTIAL = "open markers: partial points (fewer finished replicates than the grid's {R})"


def _figure_plan(ds: xr.Dataset, summ: xr.Dataset) -> list[tuple[str, str, Any, dict, str, str | None]]:
    """``(file, axis, figure, kwargs, caption, why not)`` of every figure kind, headline first
    (error against n, or against ε where the problem declares no log–log slopes).
    Captions say what is drawn in the problem's own words (its error label, its reference
    lines, its declared rate in n), never another paper's figure numbers."""
    partial = _PARTIAL.format(R=ds.sizes["replicate"])
    label = error_label(ds)
    lines = reference_lines(ds)
    drawn = ("; the grey lines: " + ", ".join(f"{name} = {value:.4g}" for value, name in lines)) if lines else ""
    rate = _declared.error_rate_in_n(ds) if _declared.loglog_slopes(ds) else None
    r = None if rate is None else f"{rate:g}".replace("-", "−")
    slope = f"; the problem declares that the non-private error falls like n^({r}), a line of slope {r}" if r else ""
    plan = [
        ("error_vs_n.png", "n", figure_error_vs_n, {"summary": summ},
         f"log10 of the mean error ({label}) over replicates against log10 n, one panel per ε; bars ±1 Monte "
         "Carlo SE (delta method); " + partial + slope, None),
        ("error_vs_epsilon.png", "epsilon", figure_error_vs_epsilon, {"summary": summ},
         f"median error ({label}) over replicates against ε (log2 axis), one panel per n; bars ±1 SE of the "
         "median (McKean–Schrader); " + partial + drawn, None),
        ("coverage_vs_epsilon.png", "epsilon", figure_coverage_vs_epsilon, {"coefs": slope_coefs(ds)},
         "average fraction of slopes whose DP estimate lies in the non-private 95% CI against ε, one panel per n; "
         "bars: 68% Wilson interval (±1 SE); " + partial, coverage_unavailable(ds)),
    ]
    if not _declared.loglog_slopes(ds):  # an error that does not fall as a power of n: ε leads
        plan[0], plan[1] = plan[1], plan[0]
    return plan


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, bbox_inches="tight")
    return buf.getvalue()


#: CSS media of report.html's stacked versions of a multi-panel figure (two panels a row, one)
NARROW, NARROWEST = "screen and (max-width: 900px)", "screen and (max-width: 560px)"


def _write_figures(ds: xr.Dataset, summ: xr.Dataset, out: Path, *, narrow: dict[str, list] | None = None,
                   ) -> tuple[list[tuple[str, str]], list[str]]:
    """Write the faceted PNGs that fit the grid; return ``[(file, caption)]`` and why others were
    skipped.  ``narrow``: filled with ``{file: [(media, PNG bytes)]}``, the versions of every
    multi-panel figure with its panels stacked (two a row, then one) that report.html shows on
    narrow screens."""
    files: list[tuple[str, str]] = []
    notes: list[str] = []
    empty = int(summ["n_valid"].sum()) == 0
    for fname, along, figure, kwargs, caption, unavailable in _figure_plan(ds, summ):
        if summ.sizes[along] < 2:
            notes.append(f"{fname}: skipped, the grid has a single {'ε' if along == 'epsilon' else 'n'}")
        elif unavailable:
            notes.append(f"{fname}: skipped, {unavailable}")
        elif empty:
            notes.append(f"{fname}: skipped, no finished replicates")
        else:
            (out / fname).write_bytes(_png(figure_facets(ds, figure, **kwargs)))
            files.append((fname, caption[0].upper() + caption[1:] + "."))
            panels = ds.sizes["epsilon" if along == "n" else "n"]
            if narrow is not None and panels > 1:  # panels stacked: two columns, one on the narrowest
                one = _png(figure_facets(ds, figure, ncols=1, legend_at="bottom", **kwargs))
                two = _png(figure_facets(ds, figure, ncols=2, legend_at="bottom", **kwargs)) if panels > 2 else one
                narrow[fname] = [(NARROWEST, one), (NARROW, two)]
    return files, notes


# --------------------------------------------------------------------------
# markdown
# --------------------------------------------------------------------------
def report_markdown(
    ds: xr.Dataset,
    *,
    summary: xr.Dataset | None = None,
    info: dict[str, Any] | None = None,
    figures: list[tuple[str, str]] = (),
    notes: list[str] = (),
    store_path: str | None = None,
    diagnosands: xr.Dataset | None = None,
    verdicts: list | None = None,
    claims_path: str | None = None,
) -> str:
    """The Markdown report for ``ds`` (computes only reduced summaries), section by section
    (:mod:`kngflow.analysis.sections`): the title, the summary (with the first of ``figures``,
    the headline figure), the contents, then completeness, caveats, the claims (``verdicts``,
    evaluated from ``claims_path``), the other figures, the error table, the log–log slopes
    (where the problem's error has them), the ratios to the non-private reference, the
    diagnosands (``diagnosands``: a computed :func:`~kngflow.analysis.diagnosands.diagnose` of
    ``ds`` to reuse), the coverage, the problem's own sections and the glossary."""
    summ = (_s.error_summary(ds) if summary is None else summary).compute()
    info = _s.completeness(ds) if info is None else info
    ctx = ReportContext(ds, summ, info, figures=list(figures), notes=list(notes), store_path=store_path,
                        diagnosands=diagnosands, verdicts=verdicts,
                        claims_path=None if claims_path is None else shown_path(claims_path, store_path))
    head = [title_block(ctx), summary_section(ctx)]
    body = [completeness_section(ctx), caveats_section(ctx),
            claims_section(verdicts, ctx.claims_path) if verdicts else None,
            figures_section(ctx), error_table_section(ctx), slopes_section(ctx), *ratio_sections(ctx),
            diagnosands_or_reason(ctx), coverage_section(ctx),
            *(block.rstrip("\n") for block in _declared.problem_sections(ds))]
    body = [b for b in body if b]
    glossary = glossary_section("\n\n".join(head + body))
    if glossary:
        body.append(glossary)
    contents = contents_section("\n\n".join(head + ["## Contents"] + body))
    return "\n\n".join(head + [contents] + body) + "\n"


def resolve_claims(ds: xr.Dataset, store_path, claims) -> tuple[list | None, str | None]:
    """``(verdicts, path)`` for the report: ``claims`` is a path, None (the study's own claims
    file if there is one) or False (none).  ClaimsError when the file is bad or does not fit."""
    from .claims import default_claims_path, evaluate_claims, load_claims

    if claims is False:
        return None, None
    path = default_claims_path(ds, store_path) if claims is None else Path(claims)
    if path is None:
        return None, None
    study, parsed = load_claims(path)
    return evaluate_claims(ds, parsed, study=study), os.fspath(path)


def write_report(store_path: str | os.PathLike, out_dir: str | os.PathLike, *, html: bool = False,
                 claims: str | os.PathLike | bool | None = None) -> str:
    """Write PNG figures and ``report.md`` for a kngflow store (and ``report.html`` when
    ``html``); return the Markdown.

    Figures, each one faceted PNG: ``error_vs_n.png`` when the n axis has
    ≥ 2 values (a panel per ε); ``error_vs_epsilon.png`` and, when the store
    has a non-private reference mechanism and the standard errors its problem
    declares (``reference_stderr``), ``coverage_vs_epsilon.png`` when the ε
    axis has ≥ 2 values (a panel per n); the first drawn is the headline
    figure of the summary.  The Markdown opens with a summary and a
    contents list; the problem's own sections (``report_sections``) and a
    glossary of the statistical terms used close it
    (:mod:`kngflow.analysis.sections`).  Every figure not drawn is listed
    with the reason.  Works on a partial store and says how complete it is.

    Parameters
    ----------
    store_path : path
        A zarr store written by ``kngflow run``.
    out_dir : path
        Output directory (created if needed).
    html : bool
        Also write ``report.html``: ONE self-contained file (figures inline as data URIs,
        sortable tables that wrap to the page, a print stylesheet, the diagnosands of the
        other cells and the provenance folded; nothing is fetched when it is viewed;
        :mod:`kngflow.analysis.html`).
    claims : path, None or False
        A claims file to evaluate (:mod:`kngflow.analysis.claims`); None (default): the
        study's own ``NAME.claims.toml`` when one is found
        (:func:`~kngflow.analysis.claims.default_claims_path`); False: none.  A bad file
        raises :class:`~kngflow.analysis.claims.ClaimsError` before anything is written.

    Returns
    -------
    str
        The Markdown text written to ``out_dir/report.md``.
    """
    return make_report(store_path, out_dir, html=html, claims=claims)[0]


def problem_axes(ds: xr.Dataset) -> tuple[str, ...]:
    """The store's problem axes: the dims of ``done`` before ``mechanism`` (``()`` for none)."""
    return tuple(str(d) for d in ds["done"].dims if d not in ("mechanism", "n", "epsilon", "replicate"))


def point_view(ds: xr.Dataset, point: dict) -> xr.Dataset:
    """The cells of ``ds`` at one point of its problem axes (``{axis: value}``), as a store
    without problem axes: the axes dropped, ``coef`` cut to the coefficients the point's
    ``theta_star`` has (the store pads shorter estimates with NaN)."""
    import numpy as np

    sub = ds.sel(point).drop_vars(list(point))
    if "theta_star" in sub and "coef" in sub.dims:
        keep = np.flatnonzero(np.isfinite(np.asarray(sub["theta_star"].values, dtype=float)))
        sub = sub.isel(coef=keep)
    return sub


def _axes_table(ds: xr.Dataset, axes: tuple[str, ...]) -> str:
    """Markdown: the mean error over finished replicates, one row per (mechanism, ε, n), one
    column per point of the problem axes."""
    import itertools

    import numpy as np

    err = ds["error"].where(ds["done"] == 1).mean("replicate").compute()
    points = list(itertools.product(*(list(ds[a].values) for a in axes)))
    head = " | ".join(", ".join(f"{a}={_plain(v)}" for a, v in zip(axes, p)) for p in points)
    lines = [f"## Along the problem axes ({', '.join(axes)})", "",
             "Mean error over finished replicates at each point of the study's problem axes "
             f"({error_label(ds)}).", "",
             f"| mechanism | ε | n | {head} |", "|---|---|---|" + "---|" * len(points)]
    for m, e, n in itertools.product(ds["mechanism"].values, ds["epsilon"].values, ds["n"].values):
        row = []
        for p in points:
            v = float(err.sel({"mechanism": m, "epsilon": e, "n": n, **dict(zip(axes, p))}))
            row.append(f"{v:.4g}" if np.isfinite(v) else "—")
        lines.append(f"| {m} | {_s.format_epsilon(float(e))} | {_s.format_n(int(n))} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def _plain(v):
    return v.item() if hasattr(v, "item") else v


def _axes_summary(ds: xr.Dataset, axes: tuple[str, ...], verdicts, headline) -> str:
    """``## Summary`` of a store with problem axes: the axes and their values, the grid at
    every point, the claims' verdicts, and the first point's headline figure."""
    values = "; ".join(f"{a} = {', '.join(str(_plain(v)) for v in ds[a].values)}" for a in axes)
    md = ["## Summary", "",
          f"- problem axes: {values} (each point simulates its own data sets; its report is below, under its "
          "own heading)",
          f"- grid at every point: n = {', '.join(_s.format_n(int(n)) for n in ds['n'].values)}; "
          f"ε = {', '.join(_s.format_epsilon(float(e)) for e in ds['epsilon'].values)}; "
          f"{ds.sizes['replicate']} replicates; mechanisms {', '.join(map(str, ds['mechanism'].values))}",
          f"- error: {error_label(ds)}"]
    return "\n".join(md + summary_tail(verdicts, headline))


def _axes_report(ds: xr.Dataset, store_path, out: Path, html: bool, verdicts, claims_path):
    """:func:`make_report` of a store with problem axes (see the module docstring)."""
    import itertools

    axes = problem_axes(ds)
    parts, written, headline = [], [], None
    for values in itertools.product(*(list(ds[a].values) for a in axes)):
        point = {a: _plain(v) for a, v in zip(axes, values)}
        name = ",".join(f"{a}={v}" for a, v in point.items())
        sub = point_view(ds, point)
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        summ = _s.error_summary(sub).compute()
        figures, notes = _write_figures(sub, summ, folder)
        figures = [(f"{name}/{f}", caption) for f, caption in figures]
        headline = headline or (figures[0] if figures else None)
        diag = diagnose(sub).compute() if diagnosable(sub) is None else None
        md = report_markdown(sub, summary=summ, info=_s.completeness(sub), figures=figures, notes=notes,
                             store_path=os.fspath(store_path), diagnosands=diag)
        written += [out / f for f, _c in figures]
        body = []
        skip = False
        for line in md.splitlines()[1:]:  # the point's title becomes a heading below
            if line.startswith("## "):
                skip = line.strip() == "## Contents"
            if skip:
                continue
            body.append("#" + line if line.startswith("#") else line)
        parts.append(f"## {', '.join(f'{a} = {v}' for a, v in point.items())}\n" + "\n".join(body).strip())
    study = study_name(ds)
    head = [f"# kngflow report{': ' + study if study else ''}", _axes_summary(ds, axes, verdicts, headline)]
    body = [_axes_table(ds, axes)]
    if verdicts:
        body.append(claims_section(verdicts, None if claims_path is None else shown_path(claims_path, store_path)))
    body += parts
    md = "\n\n".join(head + [contents_section("\n\n".join(head + ["## Contents"] + body))] + body) + "\n"
    (out / "report.md").write_text(md, encoding="utf-8")
    written.append(out / "report.md")
    if html:
        (out / "report.html").write_text(report_html(ds, md, out, None, None), encoding="utf-8")
        written.append(out / "report.html")
    return md, written, verdicts


def make_report(store_path: str | os.PathLike, out_dir: str | os.PathLike, *, html: bool = False,
                claims: str | os.PathLike | bool | None = None) -> tuple[str, list[Path], list | None]:
    """:func:`write_report`, returning ``(markdown, files written, verdicts)``: the files in the
    order written (figures, ``report.md``, ``report.html``), the evaluated claims or None."""
    ds = open_store(store_path)
    if ds.nbytes <= IN_MEMORY_BYTES:  # a dask graph's overhead would outweigh its work
        ds = ds.load()
    verdicts, claims_path = resolve_claims(ds, store_path, claims)  # bad claims: nothing written
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if problem_axes(ds):
        return _axes_report(ds, store_path, out, html, verdicts, claims_path)
    summ = _s.error_summary(ds).compute()
    info = _s.completeness(ds)
    narrow: dict[str, list] | None = {} if html else None
    figures, notes = _write_figures(ds, summ, out, narrow=narrow)
    diag = diagnose(ds).compute() if diagnosable(ds) is None else None
    md = report_markdown(ds, summary=summ, info=info, figures=figures, notes=notes, store_path=os.fspath(store_path),
                         diagnosands=diag, verdicts=verdicts, claims_path=claims_path)
    (out / "report.md").write_text(md, encoding="utf-8")
    written = [out / f for f, _caption in figures] + [out / "report.md"]
    if html:
        (out / "report.html").write_text(report_html(ds, md, out, diag, narrow), encoding="utf-8")
        written.append(out / "report.html")
    return md, written, verdicts


def report_html(ds: xr.Dataset, md: str, out_dir: str | os.PathLike, diag: xr.Dataset | None = None,
                narrow: dict[str, list] | None = None) -> str:
    """The self-contained HTML of the report ``md`` (figures read from ``out_dir``; ``narrow``:
    ``{file: [(media, PNG bytes)]}``, stacked versions of the multi-panel figures shown on
    narrow screens)."""
    from .html import render_html, table_html

    extra = []
    if diag is not None and int(diag["n_valid"].sum()) > 0:
        shown = {(m, int(n), float(e)) for m, cells in diagnosand_cells(ds, diag).items() for e, _t, n in cells}
        header, rows = diagnosand_table(ds, diag, skip=shown)
        if rows:
            extra.append((
                "Diagnosands of the other cells",
                "<p>Bias, SD, RMSE and MAE of every (mechanism, n, ε, coefficient) cell with finished replicates "
                "that the per-coefficient tables above do not show; k: replicates used; click a column header to "
                "sort.</p>\n<details><summary>"
                f"{len(rows)} rows</summary>\n" + table_html(header, rows, table_id="all-diagnosands") + "</details>",
            ))
    study = study_name(ds)
    return render_html(md, image_dir=out_dir, attrs=dict(ds.attrs),
                       title="kngflow report" + (f": {study}" if study else ""), extra_sections=extra,
                       narrow_images=narrow)

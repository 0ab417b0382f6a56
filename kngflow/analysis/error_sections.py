"""The report's sections on the error itself: the table of every cell group
(:func:`error_table_section`), the log–log slopes of the mean error on n
(:func:`slopes_section`, only where the problem declares that they mean something) and the
paired mean-error ratios to the non-private reference (:func:`ratio_section`,
:func:`ratio_sections`).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from . import declared as _declared
from . import summaries as _s
from .declared import error_label
from .report_context import (ReportContext, fmt_g, fmt_pm, is_finite, md_table, mechanism_cell, mechanism_name,
                             small_sample_banner, smallest_count)

__all__ = ["error_table_section", "slopes_section", "ratio_section", "ratio_sections"]


def _signed(x: float) -> str:
    """``-0.5 -> "−0.5"`` (a typographic minus)."""
    return f"{x:g}".replace("-", "−")


def error_table_section(ctx: ReportContext) -> str:
    """``## Error per (mechanism, n, ε)``: finished replicates, mean, median ± SE and
    log10 mean ± MC SE of every cell group."""
    summ = ctx.summary
    md = ["## Error per (mechanism, n, ε)", "", f"Error: {error_label(ctx.ds)}.", ""]
    md += small_sample_banner(smallest_count(summ["n_done"].values))
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
                    fmt_g(c["mean_error"]),
                    fmt_g(c["median_error"]) + (f" ± {fmt_g(c['median_error_se'], 2)}" if is_finite(c["median_error_se"]) else ""),
                    fmt_pm(c["log10_mean_error"], c["log10_mean_error_se"]),
                ])
    md.append(md_table(header, rows))
    if ctx.n_vals.size >= 2 and not _declared.loglog_slopes(ctx.ds):
        md += ["", f"No slopes of the log error on log n: the problem declares that its error ({error_label(ctx.ds)}) "
                   "does not fall as a power of n (it is bounded, with a floor above zero)."]
    if not _declared.coefficient_summaries(ctx.ds):
        md += ["", "No per-coefficient bias and RMSE: the problem declares that its estimates' entries are not "
                   "coefficients (coefficient_summaries = False)."]
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
    md += small_sample_banner(smallest_count(summ["n_done"].values), "the points of these fits")

    def _fit_cells(f: xr.Dataset) -> list[str]:
        mark = " †" if bool(f["curved"]) else ""
        return [fmt_pm(f["slope"], f["slope_se_inflated"]) + mark, fmt_g(f["chi2_dof"], 3), str(int(f["n_points"]))]

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
    md.append(md_table(header, rows))
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
        md += small_sample_banner(smallest_count(summary["n_done"].sel(mechanism=focus).values))
    header = ["n"] + (["ε"] if several_eps else []) + [
        mechanism_name(mechanism_cell(m, deltas, mixed), kinds.get(m, m)) for m in focus
    ]
    rows = []
    for n in n_vals:
        for e in eps_vals:
            row = [_s.format_n(n)] + ([_s.format_epsilon(e)] if several_eps else [])
            for m in focus:
                c = summary.sel(mechanism=m, n=n, epsilon=e)
                row.append(fmt_pm(c["ratio_to_reference"], c["ratio_to_reference_se"]))
            rows.append(row)
    md.append(md_table(header, rows))
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

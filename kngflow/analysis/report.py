"""``kngflow report``: the papers' tables and figures from a (possibly partial) store.

:func:`write_report` opens a store with :func:`xarray.open_zarr`, computes the
reduced summaries (never the full replicate arrays), writes PNG figures that
fit the grid and a ``report.md`` with the numbers, and returns the Markdown.

The report names no problem and no mechanism kind: the non-private reference, the
standard errors behind the coverage tables and any problem-specific sections come from
what the store and its plug-ins declare (:mod:`kngflow.analysis.declared`).
"""

from __future__ import annotations

import math
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from . import declared as _declared
from . import summaries as _s
from .figures import figure_coverage_vs_epsilon, figure_error_vs_epsilon, figure_error_vs_n, figure_facets, study_name

__all__ = ["write_report", "report_markdown", "open_store", "ratio_section"]

_NA = "—"


def open_store(store_path: str | os.PathLike) -> xr.Dataset:
    """``xr.open_zarr`` without the consolidated-metadata chatter of zarr v3."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.filterwarnings("ignore", message=".*[Cc]onsolidated.*")
        return xr.open_zarr(os.fspath(store_path))


# --------------------------------------------------------------------------
# number formatting
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


def _interval(v: Any, lo: Any, hi: Any) -> str:
    """``0.950 [0.912, 0.973]`` — a proportion with its interval, never a zero-width ``± 0.000``."""
    return f"{float(v):.3f} [{float(lo):.3f}, {float(hi):.3f}]" if _finite(v) else _NA


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _eps_tag(eps: float) -> str:
    return f"{float(eps):g}".replace(".", "p").replace("-", "m")


# --------------------------------------------------------------------------
# figures
# --------------------------------------------------------------------------
def _slopes(ds: xr.Dataset) -> slice | None:
    """Coefficients Algorithm 4 scores: the slopes (coef 0 is the intercept), or all if d = 1."""
    return slice(1, None) if ds.sizes.get("coef", 1) > 1 else None


def _coverage_unavailable(ds: xr.Dataset) -> str | None:
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


_PARTIAL = "open markers: partial points (fewer finished replicates than the grid's {R})"


def _write_figures(ds: xr.Dataset, summ: xr.Dataset, out: Path) -> tuple[list[tuple[str, str]], list[str]]:
    """Write the faceted PNGs that fit the grid; return ``[(file, caption)]`` and why others were skipped."""
    files: list[tuple[str, str]] = []
    notes: list[str] = []
    partial = _PARTIAL.format(R=ds.sizes["replicate"])
    empty = int(summ["n_valid"].sum()) == 0
    plan = [
        ("error_vs_n.png", "n", figure_error_vs_n, {"summary": summ},
         "log10 of the mean ℓ2 error over replicates against log10 n, one panel per ε; bars ±1 Monte Carlo SE "
         "(delta method); " + partial + " (KNG Figures 1–2)", None),
        ("error_vs_epsilon.png", "epsilon", figure_error_vs_epsilon, {"summary": summ},
         "median ℓ2 error over replicates against ε (log2 axis), one panel per n; bars ±1 SE of the median "
         "(McKean–Schrader); " + partial + "; the grey line is ‖θ*‖₂, the error of the zero estimate "
         "(Awan–Slavković Figure 2)", None),
        ("coverage_vs_epsilon.png", "epsilon", figure_coverage_vs_epsilon, {"coefs": _slopes(ds)},
         "average fraction of slopes whose DP estimate lies in the non-private 95% CI against ε, one panel per n; "
         "bars: 68% Wilson interval (±1 SE); " + partial + " (Awan–Slavković Figure 3)", _coverage_unavailable(ds)),
    ]
    for fname, along, figure, kwargs, caption, unavailable in plan:
        if summ.sizes[along] < 2:
            notes.append(f"{fname}: skipped, the grid has a single {'ε' if along == 'epsilon' else 'n'}")
        elif unavailable:
            notes.append(f"{fname}: skipped, {unavailable}")
        elif empty:
            notes.append(f"{fname}: skipped, no finished replicates")
        else:
            figure_facets(ds, figure, **kwargs).savefig(out / fname, dpi=120)
            files.append((fname, caption[0].upper() + caption[1:] + "."))
    return files, notes


# --------------------------------------------------------------------------
# markdown
# --------------------------------------------------------------------------
def _mechanism_cell(m: str, deltas: dict[str, float], mixed: bool) -> str:
    """A table's mechanism cell: marked when ε-DP and (ε, δ)-DP rows share the table."""
    return f"{m} (ε, δ={deltas[m]:g})" if mixed and deltas.get(m, 0.0) > 0 else m


def ratio_section(
    ds: xr.Dataset,
    mechanisms: list[str],
    *,
    title: str = "Private mechanisms",
    summary: xr.Dataset | None = None,
) -> str | None:
    """A Markdown section: the paired mean-error ratio of each of ``mechanisms`` to the
    non-private reference, one row per (n, ε), one column per mechanism (``label (kind)``).

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
    kinds = _s.mechanism_kinds(ds)
    deltas = _s.mechanism_deltas(ds)
    mixed = any(deltas.values()) and not all(deltas.values())
    n_vals, eps_vals = summary["n"].values, summary["epsilon"].values
    several_eps = eps_vals.size > 1
    md = [f"## {title}: mean-error ratio to {ref}", ""]
    md.append("Paired over replicates finished for both; ratio → 1 means no asymptotic cost of privacy.")
    md.append("")
    header = ["n"] + (["ε"] if several_eps else []) + [
        f"{_mechanism_cell(m, deltas, mixed)} ({kinds.get(m, m)})" for m in focus
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


def report_markdown(
    ds: xr.Dataset,
    *,
    summary: xr.Dataset | None = None,
    info: dict[str, Any] | None = None,
    figures: list[tuple[str, str]] = (),
    notes: list[str] = (),
    store_path: str | None = None,
) -> str:
    """The Markdown report for ``ds`` (computes only reduced summaries)."""
    summ = (_s.error_summary(ds) if summary is None else summary).compute()
    info = _s.completeness(ds) if info is None else info
    kinds = _s.mechanism_kinds(ds)
    deltas = _s.mechanism_deltas(ds)
    mixed = any(deltas.values()) and not all(deltas.values())
    nonprivate = set(_s.nonprivate_labels(ds))
    ref = _s.reference_label(ds, required=False)
    R = info["n_replicates"]
    mechs = [str(m) for m in summ["mechanism"].values]
    n_vals = summ["n"].values
    eps_vals = summ["epsilon"].values
    problem = ds.attrs.get("problem", "")
    study = study_name(ds)

    md: list[str] = [f"# kngflow report{': ' + study if study else ''}", ""]
    meta = []
    if store_path is not None:
        meta.append(f"- store: `{store_path}`")
    if problem:
        meta.append(f"- problem: {problem}")
    for key in ("spec_hash", "kngflow_version"):
        if key in ds.attrs:
            meta.append(f"- {key}: `{ds.attrs[key]}`")
    meta.append(
        f"- grid: {len(mechs)} mechanisms × {n_vals.size} n ({', '.join(_s.format_n(n) for n in n_vals)}) × "
        f"{eps_vals.size} ε ({', '.join(_s.format_epsilon(e) for e in eps_vals)}) × {R} replicates"
    )
    def _tag(m: str) -> str:
        return "" if m in nonprivate else ", " + _s.privacy_tag(deltas.get(m, 0.0))

    meta.append(f"- mechanisms: {', '.join(f'{m} ({kinds.get(m, m)}{_tag(m)})' for m in mechs)}")
    if mixed:
        meta.append(
            "- privacy: this study mixes ε-DP and (ε, δ)-DP mechanisms; rows of the latter are marked "
            "(ε, δ); at equal ε they promise less, so do not compare them as equals"
        )
    meta.append(f"- non-private reference: {ref if ref is not None else 'none (no mechanism declares private = False)'}")
    if ds.attrs.get("caveats"):
        meta.append(f"- caveats: {ds.attrs['caveats']}")
    md += meta + ["", "## Completeness", "", _s.describe_completeness(ds, info).rstrip(".") + ".", ""]
    md.append(
        "Only finished cells (`done == 1`) enter the numbers below; groups without finished "
        "replicates show —. Monte Carlo standard errors (± 1 SE) are over replicates; the SE of "
        "log10(mean error) is the delta-method SE sd/(√k·mean·ln 10), the paper's \"log-scale\" SE."
    )
    md.append("")

    if figures or notes:
        md += ["## Figures", ""]
        for fname, caption in figures:
            md += [f"![{Path(fname).stem}]({fname})", "", f"*{caption}*", ""]
        for note in notes:
            md.append(f"- {note}")
        if notes:
            md.append("")

    def _name(m: str) -> str:
        return _mechanism_cell(m, deltas, mixed)

    def _eps_rows(m: str) -> list[tuple[float, str]]:
        # a non-private estimator ignores ε (the same data serve every ε): one row, "any"
        if m in nonprivate and eps_vals.size > 1:
            return [(eps_vals[0], "any")]
        return [(e, _s.format_epsilon(e)) for e in eps_vals]

    # -- per-cell table ------------------------------------------------------
    md += ["## Error per (mechanism, n, ε)", ""]
    header = ["mechanism", "n", "ε", "finished", "mean error", "median error ± SE", "log10 mean error ± MC SE"]
    if ref is not None:
        header.append(f"ratio to {ref} ± SE")
    rows = []
    for m in mechs:
        for n in n_vals:
            for e, e_text in _eps_rows(m):
                c = summ.sel(mechanism=m, n=n, epsilon=e)
                row = [
                    _name(m),
                    _s.format_n(n),
                    e_text,
                    f"{int(c['n_done'])}/{R}",
                    _g(c["mean_error"]),
                    _g(c["median_error"]) + (f" ± {_g(c['median_error_se'], 2)}" if _finite(c["median_error_se"]) else ""),
                    _pm(c["log10_mean_error"], c["log10_mean_error_se"]),
                ]
                if ref is not None:
                    row.append(_pm(c["ratio_to_reference"], c["ratio_to_reference_se"]))
                rows.append(row)
    md += [_table(header, rows), ""]

    # -- slopes --------------------------------------------------------------
    if n_vals.size >= 2:
        all_fit = _s.slope_fit(ds, summary=summ)
        tail = None
        if n_vals.size >= 4:
            n_tail = float(np.sort(n_vals)[-max(3, n_vals.size // 2)])
            tail = _s.slope_fit(ds, summary=summ, n_min=n_tail)
        md += ["## Log–log slopes", ""]
        md.append(
            "Weighted least squares of log10(mean error) on log10 n (weights 1/SE²); the non-private "
            "estimator's error is C·n^(−1/2), so its slope should be −0.5. χ²/dof says whether a straight "
            f"line fits; † marks fits where it does not (p < {_s.CURVED_P:g}): their SE is inflated by "
            "√(χ²/dof) and the slope is only an average over a curved range."
        )
        md.append("")

        def _fit_cells(f: xr.Dataset) -> list[str]:
            mark = " †" if bool(f["curved"]) else ""
            return [_pm(f["slope"], f["slope_se_inflated"]) + mark, _g(f["chi2_dof"], 3), str(int(f["n_points"]))]

        header = ["mechanism", "ε", "slope ± SE (all n)", "χ²/dof", "n used"]
        if tail is not None:
            header += [f"slope ± SE (n ≥ {_s.format_n(n_tail)})", "χ²/dof", "n used"]
        rows = []
        for m in mechs:
            for e, e_text in _eps_rows(m):
                row = [_name(m), e_text] + _fit_cells(all_fit.sel(mechanism=m, epsilon=e))
                if tail is not None:
                    row += _fit_cells(tail.sel(mechanism=m, epsilon=e))
                rows.append(row)
        md += [_table(header, rows), ""]

    # -- every private mechanism vs the non-private reference ---------------------
    block = ratio_section(ds, [m for m in mechs if m not in nonprivate], summary=summ)
    if block is not None:
        md += [block, ""]
    for title, group in _declared.problem_comparisons(ds).items():
        block = ratio_section(ds, [m for m in mechs if kinds.get(m) in group], title=title, summary=summ)
        if block is not None:
            md += [block, ""]

    # -- coverage --------------------------------------------------------------
    if _coverage_unavailable(ds) is None:
        cov_all = _s.coverage(ds, reference=ref, how="all", coefs=_slopes(ds))
        cov_mean = _s.coverage(ds, reference=ref, how="mean", coefs=_slopes(ds))
        both = xr.Dataset(
            {
                "all": cov_all["coverage"],
                "all_lo": cov_all["coverage_lo"],
                "all_hi": cov_all["coverage_hi"],
                "mean": cov_mean["coverage"],
                "mean_lo": cov_mean["coverage_lo"],
                "mean_hi": cov_mean["coverage_hi"],
                "k": cov_all["n_valid"],
            }
        ).compute()
        md += ["## Coverage of the non-private 95% CI (Awan–Slavković Algorithm 4)", ""]
        md.append(
            f"A DP estimate is inside when |estimate − {ref}| ≤ 1.96·{_s.reference_stderr(ds)}, for the slopes (every "
            "coefficient but the intercept, coef 0). \"all\": every slope inside; \"average\": mean fraction of "
            "slopes inside (Algorithm 4's C_DP). Brackets: 95% Wilson intervals (conservative for the average)."
        )
        md.append("")
        header = ["mechanism", "n", "ε", "replicates", "all slopes [95% CI]", "average over slopes [95% CI]"]
        rows = []
        for m in mechs:
            if m == ref:
                continue
            for n in n_vals:
                for e in eps_vals:
                    c = both.sel(mechanism=m, n=n, epsilon=e)
                    rows.append(
                        [
                            _name(m),
                            _s.format_n(n),
                            _s.format_epsilon(e),
                            str(int(c["k"])),
                            _interval(c["all"], c["all_lo"], c["all_hi"]),
                            _interval(c["mean"], c["mean_lo"], c["mean_hi"]),
                        ]
                    )
        md += [_table(header, rows), ""]

    # -- what the problem adds -------------------------------------------------
    for block in _declared.problem_sections(ds):
        md += [block.rstrip("\n"), ""]
    return "\n".join(md)


def write_report(store_path: str | os.PathLike, out_dir: str | os.PathLike) -> str:
    """Write PNG figures and ``report.md`` for a kngflow store; return the Markdown.

    Figures, each one faceted PNG: ``error_vs_n.png`` when the n axis has
    ≥ 2 values (a panel per ε); ``error_vs_epsilon.png`` and, when the store
    has a non-private reference mechanism and the standard errors its problem
    declares (``reference_stderr``), ``coverage_vs_epsilon.png`` when the ε
    axis has ≥ 2 values (a panel per n).  The problem's own sections
    (``report_sections``) close the Markdown.  Every figure not drawn
    is listed with the reason.  Works on a partial store and says how
    complete it is.

    Parameters
    ----------
    store_path : path
        A zarr store written by ``kngflow run``.
    out_dir : path
        Output directory (created if needed).

    Returns
    -------
    str
        The Markdown text written to ``out_dir/report.md``.
    """
    ds = open_store(store_path)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summ = _s.error_summary(ds).compute()
    info = _s.completeness(ds)
    figures, notes = _write_figures(ds, summ, out)
    md = report_markdown(ds, summary=summ, info=info, figures=figures, notes=notes, store_path=os.fspath(store_path))
    (out / "report.md").write_text(md, encoding="utf-8")
    return md

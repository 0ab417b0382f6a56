"""``kngflow report``: the papers' tables and figures from a (possibly partial) store.

:func:`write_report` opens a store with :func:`xarray.open_zarr`, computes the
reduced summaries (never the full replicate arrays), writes PNG figures that
fit the grid and a ``report.md`` with the numbers (among them the per-coefficient bias,
SD and RMSE with their Monte Carlo SEs, :mod:`kngflow.analysis.diagnosands`), and returns the
Markdown; with ``html=True`` also ``report.html``, one self-contained file
(:mod:`kngflow.analysis.html`).

The report names no problem and no mechanism kind: the non-private reference, the
standard errors behind the coverage tables and any problem-specific sections come from
what the store and its plug-ins declare (:mod:`kngflow.analysis.declared`).
"""

from __future__ import annotations

import datetime
import math
import os
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from . import declared as _declared
from .declared import error_label, reference_lines
from . import summaries as _s
from .diagnosands import diagnose
from .figures import figure_coverage_vs_epsilon, figure_error_vs_epsilon, figure_error_vs_n, figure_facets, study_name

__all__ = ["write_report", "make_report", "report_markdown", "open_store", "ratio_section", "diagnosand_section", "diagnosand_table",
           "claims_section", "resolve_claims", "REQUIRED_VARIABLES", "missing_variable"]

_NA = "—"

#: What the report's diagnosands and summaries read from a store.
REQUIRED_VARIABLES = ("error", "estimate", "theta_star", "done")


def missing_variable(ds: xr.Dataset) -> str | None:
    """One line naming the first of :data:`REQUIRED_VARIABLES` the store lacks, or None."""
    for name in REQUIRED_VARIABLES:
        if name not in ds.variables:
            return (f"the store has no variable {name!r}: the report needs "
                    + ", ".join(repr(v) for v in REQUIRED_VARIABLES))
    return None


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
    label = error_label(ds)
    lines = reference_lines(ds)
    drawn = ("; the grey lines: " + ", ".join(f"{name} = {value:.4g}" for value, name in lines)) if lines else ""
    plan = [
        ("error_vs_n.png", "n", figure_error_vs_n, {"summary": summ},
         f"log10 of the mean error ({label}) over replicates against log10 n, one panel per ε; bars ±1 Monte "
         "Carlo SE (delta method); " + partial + " (KNG Figures 1–2)", None),
        ("error_vs_epsilon.png", "epsilon", figure_error_vs_epsilon, {"summary": summ},
         f"median error ({label}) over replicates against ε (log2 axis), one panel per n; bars ±1 SE of the "
         "median (McKean–Schrader); " + partial + drawn + " (Awan–Slavković Figure 2)", None),
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
        tag = "" if m in nonprivate else ", " + _s.privacy_tag(deltas.get(m, 0.0))
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
        md += [f"### {m} ({kinds.get(m, m)}{tag})", ""]
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
    """The Markdown report for ``ds`` (computes only reduced summaries).  ``diagnosands``: a
    computed :func:`~kngflow.analysis.diagnosands.diagnose` of ``ds`` to reuse; ``verdicts``:
    evaluated claims (:func:`~kngflow.analysis.claims.evaluate_claims`) from ``claims_path``,
    shown as the "Paper claims" section after the completeness line."""
    summ = (_s.error_summary(ds) if summary is None else summary).compute()
    info = _s.completeness(ds) if info is None else info
    kinds = _s.kinds_by_label(ds)
    deltas = _s.mechanism_deltas(ds)
    mixed = any(deltas.values()) and not all(deltas.values())
    nonprivate = set(_s.nonprivate_labels(ds))
    ref = _s.reference_label(ds, required=False)
    R = info["n_replicates"]
    mechs = [str(m) for m in summ["mechanism"].values]
    n_vals = summ["n"].values
    eps_vals = summ["epsilon"].values
    study = study_name(ds)

    md: list[str] = [f"# kngflow report{': ' + study if study else ''}", ""]
    description = str(_declared._spec(ds).get("description") or "").strip()
    if description:
        md += [description, ""]
    meta = []
    when = run_date(store_path)
    if when or store_path is not None:
        meta.append("- run: " + ", ".join(x for x in (
            f"results last written {when}" if when else "",
            f"store `{store_path}`" if store_path is not None else "") if x))
    if ds.attrs.get("kngflow_version"):
        meta.append(f"- kngflow {ds.attrs['kngflow_version']}")
    meta.append(f"- data: {_data_line(ds)}")
    meta.append(f"- grid: {grid_words(n_vals, eps_vals, R, len(mechs))}")

    def _tag(m: str) -> str:
        return "" if m in nonprivate else ", " + _s.privacy_tag(deltas.get(m, 0.0))

    meta.append(f"- mechanisms: {', '.join(f'{m} ({kinds.get(m, m)}{_tag(m)})' for m in mechs)}")
    if mixed:
        meta.append(
            "- privacy: this study mixes ε-DP and (ε, δ)-DP mechanisms; rows of the latter are marked "
            "(ε, δ); at equal ε they promise less, so do not compare them as equals"
        )
    meta.append(f"- non-private reference: {ref if ref is not None else 'none (no mechanism declares private = False)'}")
    meta.append("- provenance: the spec, its hash, the seed and the package versions are in the store's attributes "
                "(and folded at the end of report.html)")
    md += meta + ["", "## Completeness", "", _s.describe_completeness(ds, info).rstrip(".") + ".", ""]
    md += small_sample_banner(_k_min(info["per_group"].values), "some cells",
                              f"claims need at least {SMALL_SAMPLE} and no bias is flagged below")
    md.append(
        "Only finished cells (`done == 1`) enter the numbers below; groups without finished "
        "replicates show —. Monte Carlo standard errors (± 1 SE) are over replicates; the SE of "
        "log10(mean error) is the delta-method SE sd/(√k·mean·ln 10), the paper's \"log-scale\" SE."
    )
    md.append("")
    caveats = caveat_items(ds.attrs.get("caveats", ""))
    if caveats:
        md += ["## Caveats", ""] + [f"- {c}" for c in caveats] + [""]
    if verdicts:
        md += [claims_section(verdicts, claims_path), ""]

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
    md += ["## Error per (mechanism, n, ε)", "", f"Error: {error_label(ds)}.", ""]
    md += small_sample_banner(_k_min(summ["n_done"].values))
    header = ["mechanism", "n", "ε", "finished", "mean error", "median error ± SE", "log10 mean error ± MC SE"]
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
        md += small_sample_banner(_k_min(summ["n_done"].values), "the points of these fits")

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
    # one table per question: a problem's comparison whose mechanisms are columns of this table
    # is named under it, not repeated
    private = [m for m in mechs if m not in nonprivate]
    block = ratio_section(ds, private, summary=summ)
    blocks = [] if block is None else [block]
    for title, group in _declared.problem_comparisons(ds).items():
        members = [m for m in mechs if kinds.get(m) in group and m not in nonprivate]
        if block is not None and members and set(members) <= set(private):
            blocks[0] += (f"\n\nThe problem's comparison \"{title}\" is the {', '.join(members)} "
                          f"column{'s' if len(members) > 1 else ''} of this table.")
            continue
        extra = ratio_section(ds, members, title=title, summary=summ)
        if extra is not None:
            blocks.append(extra)
    for b in blocks:
        md += [b, ""]

    # -- diagnosands: bias, SD, RMSE per coefficient ---------------------------------
    if diagnosands is None and _diagnosable(ds) is None:
        diagnosands = diagnose(ds).compute()
    block = diagnosand_section(ds, diagnosands) if diagnosands is not None else None
    if block is not None:
        md += [block, ""]
    elif _diagnosable(ds) is not None:
        md += ["## Bias and RMSE per coefficient", "", f"Not computed: {_diagnosable(ds)}.", ""]

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
        md += small_sample_banner(_k_min(both["k"].sel(mechanism=[m for m in mechs if m != ref]).values))
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


def claims_section(verdicts: list, claims_path: str | None = None) -> str:
    """The "Paper claims" Markdown section: a count of the verdicts and their table."""
    from .claims import verdict_table

    counts = {v: sum(1 for x in verdicts if x.verdict == v) for v in ("agrees", "disagrees", "inconclusive")}
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


def make_report(store_path: str | os.PathLike, out_dir: str | os.PathLike, *, html: bool = False,
                claims: str | os.PathLike | bool | None = None) -> tuple[str, list[Path], list | None]:
    """:func:`write_report`, returning ``(markdown, files written, verdicts)``: the files in the
    order written (figures, ``report.md``, ``report.html``), the evaluated claims or None."""
    ds = open_store(store_path)
    verdicts, claims_path = resolve_claims(ds, store_path, claims)  # bad claims: nothing written
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summ = _s.error_summary(ds).compute()
    info = _s.completeness(ds)
    figures, notes = _write_figures(ds, summ, out)
    diag = diagnose(ds).compute() if _diagnosable(ds) is None else None
    md = report_markdown(ds, summary=summ, info=info, figures=figures, notes=notes, store_path=os.fspath(store_path),
                         diagnosands=diag, verdicts=verdicts, claims_path=claims_path)
    (out / "report.md").write_text(md, encoding="utf-8")
    written = [out / f for f, _caption in figures] + [out / "report.md"]
    if html:
        (out / "report.html").write_text(report_html(ds, md, out, diag), encoding="utf-8")
        written.append(out / "report.html")
    return md, written, verdicts


def report_html(ds: xr.Dataset, md: str, out_dir: str | os.PathLike, diag: xr.Dataset | None = None) -> str:
    """The self-contained HTML of the report ``md`` (figures read from ``out_dir``)."""
    from .html import render_html, table_html

    extra = []
    if diag is not None and int(diag["n_valid"].sum()) > 0:
        shown = {(m, int(n), float(e)) for m, cells in _diagnosand_cells(ds, diag).items() for e, _t, n in cells}
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
                       title="kngflow report" + (f": {study}" if study else ""), extra_sections=extra)

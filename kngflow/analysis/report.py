"""``kngflow report``: the papers' tables and figures from a (possibly partial) store.

:func:`write_report` opens a store with :func:`xarray.open_zarr`, computes the
reduced summaries (never the full replicate arrays), writes PNG figures that
fit the grid and a ``report.md`` with the numbers, and returns the Markdown.
"""

from __future__ import annotations

import math
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from . import summaries as _s
from .figures import figure_coverage_vs_epsilon, figure_error_vs_epsilon, figure_error_vs_n

__all__ = ["write_report", "report_markdown", "open_store"]

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


def _write_figures(ds: xr.Dataset, summ: xr.Dataset, out: Path, has_coverage: bool) -> tuple[list[tuple[str, str]], list[str]]:
    """Write the PNGs that fit the grid; return ``[(file, caption)]`` and notes on skipped ones."""
    files: list[tuple[str, str]] = []
    notes: list[str] = []
    n_vals = summ["n"].values
    eps_vals = summ["epsilon"].values
    if n_vals.size >= 2:
        for eps in eps_vals:
            fname = "error_vs_n.png" if eps_vals.size == 1 else f"error_vs_n_eps{_eps_tag(eps)}.png"
            if int(summ["n_valid"].sel(epsilon=eps).sum()) == 0:
                notes.append(f"{fname}: skipped, no finished replicates at ε={_s.format_epsilon(eps)}")
                continue
            fig = figure_error_vs_n(ds, epsilon=eps, summary=summ)
            fig.savefig(out / fname, dpi=120)
            files.append((fname, f"log10 average ℓ2 error vs log10 n, ε = {_s.format_epsilon(eps)} (KNG Figures 1–2)"))
    if eps_vals.size >= 2:
        for n in n_vals:
            tag = "" if n_vals.size == 1 else f"_n{int(n)}"
            if int(summ["n_valid"].sel(n=n).sum()) == 0:
                notes.append(f"error_vs_epsilon{tag}.png: skipped, no finished replicates at n={_s.format_n(n)}")
                continue
            fname = f"error_vs_epsilon{tag}.png"
            fig = figure_error_vs_epsilon(ds, n=n, summary=summ)
            fig.savefig(out / fname, dpi=120)
            files.append((fname, f"median ℓ2 error vs ε, n = {_s.format_n(n)} (Awan–Slavković Figure 2)"))
            if has_coverage:
                fname = f"coverage_vs_epsilon{tag}.png"
                fig = figure_coverage_vs_epsilon(ds, n=n, coefs=_slopes(ds))
                fig.savefig(out / fname, dpi=120)
                files.append((fname, f"share of DP estimates in the non-private 95% CI vs ε, n = {_s.format_n(n)} (Awan–Slavković Figure 3)"))
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
) -> str:
    """The Markdown report for ``ds`` (computes only reduced summaries)."""
    summ = (_s.error_summary(ds) if summary is None else summary).compute()
    info = _s.completeness(ds) if info is None else info
    kinds = _s.mechanism_kinds(ds)
    ref = _s.reference_label(ds, required=False)
    R = info["n_replicates"]
    mechs = [str(m) for m in summ["mechanism"].values]
    n_vals = summ["n"].values
    eps_vals = summ["epsilon"].values
    problem = ds.attrs.get("problem", "")

    md: list[str] = [f"# kngflow report{': ' + problem if problem else ''}", ""]
    meta = []
    if store_path is not None:
        meta.append(f"- store: `{store_path}`")
    for key in ("spec_hash", "kngflow_version"):
        if key in ds.attrs:
            meta.append(f"- {key}: `{ds.attrs[key]}`")
    meta.append(
        f"- grid: {len(mechs)} mechanisms × {n_vals.size} n ({', '.join(_s.format_n(n) for n in n_vals)}) × "
        f"{eps_vals.size} ε ({', '.join(_s.format_epsilon(e) for e in eps_vals)}) × {R} replicates"
    )
    meta.append(f"- mechanisms: {', '.join(f'{m} ({kinds.get(m, m)})' for m in mechs)}")
    meta.append(f"- non-private reference: {ref if ref is not None else 'none (no mechanism of kind nonprivate)'}")
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
            md += [f"![{caption}]({fname})", "", f"*{caption}*", ""]
        for note in notes:
            md.append(f"- {note}")
        if notes:
            md.append("")

    def _eps_rows(m: str) -> list[tuple[float, str]]:
        # the non-private estimator ignores ε (the same data serve every ε): one row, "any"
        if kinds.get(m) == "nonprivate" and eps_vals.size > 1:
            return [(eps_vals[0], "any")]
        return [(e, _s.format_epsilon(e)) for e in eps_vals]

    # -- per-cell table ------------------------------------------------------
    md += ["## Error per (mechanism, n, ε)", ""]
    header = ["mechanism", "n", "ε", "finished", "mean error", "median error", "log10 mean error ± MC SE"]
    if ref is not None:
        header.append(f"ratio to {ref} ± SE")
    rows = []
    for m in mechs:
        for n in n_vals:
            for e, e_text in _eps_rows(m):
                c = summ.sel(mechanism=m, n=n, epsilon=e)
                row = [
                    m,
                    _s.format_n(n),
                    e_text,
                    f"{int(c['n_done'])}/{R}",
                    _g(c["mean_error"]),
                    _g(c["median_error"]),
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
            "estimator's error is C·n^(−1/2), so its slope should be −0.5."
        )
        md.append("")
        header = ["mechanism", "ε", "slope ± SE (all n)", "n used"]
        if tail is not None:
            header += [f"slope ± SE (n ≥ {_s.format_n(n_tail)})", "n used"]
        rows = []
        for m in mechs:
            for e, e_text in _eps_rows(m):
                f = all_fit.sel(mechanism=m, epsilon=e)
                row = [m, e_text, _pm(f["slope"], f["slope_se"]), str(int(f["n_points"]))]
                if tail is not None:
                    t = tail.sel(mechanism=m, epsilon=e)
                    row += [_pm(t["slope"], t["slope_se"]), str(int(t["n_points"]))]
                rows.append(row)
        md += [_table(header, rows), ""]

    # -- KNG and exponential vs non-private ------------------------------------
    focus = [m for m in mechs if kinds.get(m) in ("kng", "exponential")]
    if ref is not None and focus:
        md += [f"## KNG and exponential mechanism: mean-error ratio to {ref}", ""]
        md.append("Paired over replicates finished for both; ratio → 1 means no asymptotic cost of privacy.")
        md.append("")
        several_eps = eps_vals.size > 1
        header = ["n"] + (["ε"] if several_eps else []) + [f"{m} ({kinds[m]})" for m in focus]
        rows = []
        for n in n_vals:
            for e in eps_vals:
                row = [_s.format_n(n)] + ([_s.format_epsilon(e)] if several_eps else [])
                for m in focus:
                    c = summ.sel(mechanism=m, n=n, epsilon=e)
                    row.append(_pm(c["ratio_to_reference"], c["ratio_to_reference_se"]))
                rows.append(row)
        md += [_table(header, rows), ""]

    # -- coverage --------------------------------------------------------------
    if ref is not None and "estimate" in ds and "ols_stderr" in ds:
        cov_all = _s.coverage(ds, reference=ref, how="all", coefs=_slopes(ds))
        cov_mean = _s.coverage(ds, reference=ref, how="mean", coefs=_slopes(ds))
        both = xr.Dataset(
            {
                "all": cov_all["coverage"],
                "all_se": cov_all["coverage_se"],
                "mean": cov_mean["coverage"],
                "mean_se": cov_mean["coverage_se"],
                "k": cov_all["n_valid"],
            }
        ).compute()
        md += ["## Coverage of the non-private 95% CI (Awan–Slavković Algorithm 4)", ""]
        md.append(
            f"A DP estimate is inside when |estimate − {ref}| ≤ 1.96·ols_stderr, for the slopes (every "
            "coefficient but the intercept, coef 0). \"all\": every slope inside; \"average\": mean fraction of "
            "slopes inside (Algorithm 4's C_DP)."
        )
        md.append("")
        header = ["mechanism", "n", "ε", "replicates", "all slopes ± SE", "average over slopes ± SE"]
        rows = []
        for m in mechs:
            if m == ref:
                continue
            for n in n_vals:
                for e in eps_vals:
                    c = both.sel(mechanism=m, n=n, epsilon=e)
                    rows.append(
                        [
                            m,
                            _s.format_n(n),
                            _s.format_epsilon(e),
                            str(int(c["k"])),
                            _pm(c["all"], c["all_se"]),
                            _pm(c["mean"], c["mean_se"]),
                        ]
                    )
        md += [_table(header, rows), ""]
    return "\n".join(md)


def write_report(store_path: str | os.PathLike, out_dir: str | os.PathLike) -> str:
    """Write PNG figures and ``report.md`` for a kngflow store; return the Markdown.

    Figures: ``error_vs_n*.png`` when the n axis has ≥ 2 values (one per ε);
    ``error_vs_epsilon*.png`` and, when the store has ``estimate``,
    ``ols_stderr`` and a non-private mechanism, ``coverage_vs_epsilon*.png``
    when the ε axis has ≥ 2 values (one per n).  Works on a partial store and
    says how complete it is.

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
    has_coverage = (
        "estimate" in ds and "ols_stderr" in ds and _s.reference_label(ds, required=False) is not None
    )
    figures, notes = _write_figures(ds, summ, out, has_coverage)
    md = report_markdown(ds, summary=summ, info=info, figures=figures, notes=notes, store_path=os.fspath(store_path))
    (out / "report.md").write_text(md, encoding="utf-8")
    return md

"""The report's sections on the estimates themselves: the diagnosands (bias, SD, RMSE per
coefficient, ± Monte Carlo SE: :func:`diagnosand_section`, every cell in
:func:`diagnosand_table`) and the coverage of the non-private 95% CI
(:func:`coverage_section`), each with the reason it is left out where the store cannot give
it (:func:`diagnosable`, :func:`coverage_unavailable`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import xarray as xr

from . import declared as _declared
from . import summaries as _s
from .report_context import (NA, SMALL_SAMPLE, ReportContext, fmt_g, fmt_pm, is_finite, md_table, mechanism_cell,
                             mechanism_name, small_sample_banner, smallest_count)

__all__ = ["BIAS_FLAG_Z", "diagnosable", "diagnosand_cells", "diagnosand_section", "diagnosand_table",
           "diagnosands_or_reason", "slope_coefs", "coverage_unavailable", "coverage_section"]


def _pmg(v: Any, se: Any) -> str:
    """``0.0427 ± 0.025`` — 3 significant digits, the SE with 2 (values of any scale)."""
    if not is_finite(v):
        return NA
    return f"{float(v):.3g}" + (f" ± {float(se):.2g}" if is_finite(se) else "")


def _interval(v: Any, lo: Any, hi: Any) -> str:
    """``0.950 [0.912, 0.973]`` — a proportion with its interval, never a zero-width ``± 0.000``."""
    return f"{float(v):.3f} [{float(lo):.3f}, {float(hi):.3f}]" if is_finite(v) else NA


def slope_coefs(ds: xr.Dataset) -> slice | None:
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


#: A bias is flagged (‡) when it lies more than this many Monte Carlo SEs from zero.
BIAS_FLAG_Z = 3.0
_MAX_EPS_SHOWN = 3


def diagnosable(ds: xr.Dataset) -> str | None:
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


def diagnosand_cells(ds: xr.Dataset, diag: xr.Dataset) -> dict[str, list[tuple[float, str, Any]]]:
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
    for m, cells in diagnosand_cells(ds, diag).items():
        tag = "" if m in nonprivate else _s.privacy_tag(deltas.get(m, 0.0))
        rows = []
        for e, e_text, n in cells:
            c = diag.sel(mechanism=m, epsilon=e, n=n)
            for j, coef in enumerate(diag["coef"].values):
                cj = c.isel(coef=j)
                k = int(cj["n_valid"].values)
                k_shown.append(k)
                b, b_se = cj["bias"].values, cj["bias_se"].values
                zscore = float(b) / float(b_se) if is_finite(b) and is_finite(b_se) and float(b_se) > 0 else math.nan
                flag = " ‡" if is_finite(zscore) and abs(zscore) > BIAS_FLAG_Z and k >= SMALL_SAMPLE else ""
                rows.append(
                    ([e_text] if several_eps else [])
                    + [_s.format_n(n), str(int(coef)), fmt_g(theta[j], 3) if theta is not None else NA,
                       _pmg(b, b_se), (f"{zscore:.1f}" if is_finite(zscore) else NA) + flag,
                       _pmg(cj["sd"].values, cj["sd_se"].values), _pmg(cj["rmse"].values, cj["rmse_se"].values)]
                )
        md += [f"### {mechanism_name(m, kinds.get(m, m), tag)}", ""]
        if not rows:
            md += ["No finished replicates.", ""]
            continue
        header = (["ε"] if several_eps else []) + ["n", "coef", "θ*", "bias ± MCSE", "bias/MCSE", "SD ± MCSE",
                                                   "RMSE ± MCSE"]
        md += [md_table(header, rows), ""]
    banner = small_sample_banner(smallest_count(k_shown), more="no bias is flagged (‡) on them")
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
                    z = g["bias"] / g["bias_se"] if is_finite(g["bias_se"]) and g["bias_se"] > 0 else math.nan
                    row = [mechanism_cell(str(m), deltas, mixed), _s.format_n(n), _s.format_epsilon(e), str(int(coef)),
                           str(k), _pmg(g["bias"], g["bias_se"]), f"{z:.1f}" if is_finite(z) else NA,
                           _pmg(g["sd"], g["sd_se"]), _pmg(g["rmse"], g["rmse_se"]), _pmg(g["mae"], g["mae_se"])]
                    if cover:
                        row.append(fmt_pm(g["coverage"], g["coverage_se"]))
                    rows.append(row)
    return header, rows


def diagnosands_or_reason(ctx: ReportContext) -> str | None:
    """:func:`diagnosand_section` of the context's diagnosands, or a ``## Bias and RMSE per
    coefficient`` section saying why they were not computed; None when nothing finished or
    the problem declares no coefficients (the error table says so)."""
    if not _declared.coefficient_summaries(ctx.ds):
        return None
    reason = diagnosable(ctx.ds)
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
    cov_all = _s.coverage(ds, reference=ref, how="all", coefs=slope_coefs(ds))
    cov_mean = _s.coverage(ds, reference=ref, how="mean", coefs=slope_coefs(ds))
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
    md += small_sample_banner(smallest_count(both["k"].sel(mechanism=[m for m in ctx.mechs if m != ref]).values))
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
    md.append(md_table(header, rows))
    return "\n".join(md)

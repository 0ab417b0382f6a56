"""Figures of the papers' simulation studies, drawn from a kngflow store.

* :func:`figure_error_vs_n` — KNG (NeurIPS 2019) Figures 1–2: the base-10 log
  of both axes, i.e. x = log10 n, y = log10(average ℓ2 distance to truth), one
  line with markers per mechanism and ±1 Monte Carlo SE bars (delta method, in
  the plot's log scale).  The axes are *linear axes of log10-transformed
  values*, labelled ``log10(n)`` and ``log10(average ℓ2 distance to truth)``,
  exactly as in the paper, so that slopes can be read off directly (−1/2 for
  the non-private estimator).
* :func:`figure_error_vs_epsilon` — Awan–Slavković Figure 2: error against ε
  on a log2 x-axis (median over replicates by default, as in the paper), with
  the solid horizontal line at ‖θ*‖₂, the error of the zero estimate.
* :func:`figure_coverage_vs_epsilon` — Awan–Slavković Figure 3: proportion of
  DP estimates inside the non-private 95% CI against ε (log2 x-axis), with the
  nominal level as a dashed line and the empirical coverage of θ* by the
  non-private CI as a solid line.

The figures are :class:`matplotlib.figure.Figure` objects built without
pyplot (rendered with Agg by ``savefig``), so no global state is touched and
nothing needs closing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import xarray as xr
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from . import summaries as _s

__all__ = ["figure_error_vs_n", "figure_error_vs_epsilon", "figure_coverage_vs_epsilon"]

_KIND_COLORS = {
    "nonprivate": "black",
    "exponential": "tab:red",
    "kng": "tab:blue",
    "objective": "tab:green",
    "objective_ext": "tab:olive",
}
_CYCLE = ["tab:purple", "tab:orange", "tab:brown", "tab:pink", "tab:cyan", "tab:gray", "tab:olive", "tab:green"]
_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "<", ">"]

XLABEL_N = "log10(n)"
YLABEL_N = "log10(average ℓ2 distance to truth)"


def _styles(ds: xr.Dataset) -> dict[str, dict[str, Any]]:
    kinds = _s.mechanism_kinds(ds)
    styles: dict[str, dict[str, Any]] = {}
    used: set[str] = set()
    spare = iter(_CYCLE * 4)
    for i, (label, kind) in enumerate(kinds.items()):
        color = _KIND_COLORS.get(kind)
        if color is None or color in used:
            color = next(c for c in spare if c not in used)
        used.add(color)
        styles[label] = {"color": color, "marker": _MARKERS[i % len(_MARKERS)]}
    return styles


def _new_axes(ax: Axes | None, figsize: tuple[float, float] = (6.4, 4.8)) -> tuple[Figure, Axes]:
    if ax is not None:
        return ax.figure, ax
    fig = Figure(figsize=figsize, layout="constrained")
    return fig, fig.add_subplot()


def _pick(ds: xr.Dataset, dim: str, value: float | None, fmt) -> Any:
    values = ds[dim].values
    if value is None:
        if values.size == 1:
            return values[0]
        raise ValueError(f"{dim}=... is required: the store has {dim} in {[fmt(v) for v in values]}")
    if value not in values:
        close = np.isclose(values.astype(float), float(value))
        if not close.any():
            raise ValueError(f"{dim}={value!r} is not in the store; values are {[fmt(v) for v in values]}")
        return values[np.flatnonzero(close)[0]]
    return value


def _mechanisms(ds: xr.Dataset, mechanisms: Sequence[str] | None, exclude: Sequence[str] = ()) -> list[str]:
    labels = [str(m) for m in ds["mechanism"].values]
    if mechanisms is not None:
        bad = [m for m in mechanisms if m not in labels]
        if bad:
            raise ValueError(f"mechanisms {bad} are not in the store; labels are {labels}")
        labels = list(mechanisms)
    return [m for m in labels if m not in exclude]


def _tex_n(n: float) -> str:
    """``1000 -> '$10^{3}$'`` for titles; other values as integers."""
    text = _s.format_n(n)
    return f"$10^{{{text[3:]}}}$" if text.startswith("10^") else text


def _log2_epsilon_axis(ax: Axes, eps: np.ndarray) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(eps)
    ax.set_xticklabels([_s.format_epsilon(e) for e in eps])
    ax.minorticks_off()


def figure_error_vs_n(
    ds: xr.Dataset,
    epsilon: float | None = None,
    *,
    mechanisms: Sequence[str] | None = None,
    errorbars: bool = True,
    summary: xr.Dataset | None = None,
    ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """KNG Figures 1–2: log10 average ℓ2 error against log10 n, one line per mechanism.

    Parameters
    ----------
    ds : xarray.Dataset
        A store (e.g. from :func:`xarray.open_zarr`).
    epsilon : float, optional
        Privacy level to plot; required when the store has several.
    mechanisms : sequence of str, optional
        Labels to draw (default: all, in store order).
    errorbars : bool
        Draw ±1 Monte Carlo SE (delta method, log10 scale).
    summary : xarray.Dataset, optional
        A precomputed :func:`~kngflow.analysis.summaries.error_summary`.
    ax : matplotlib Axes, optional
        Draw into this axes instead of a new figure.

    Returns
    -------
    matplotlib.figure.Figure
        x data of every line are ``log10(n)``, y data ``log10(mean error)``;
        both axes are linear axes of log10 values.
    """
    eps = _pick(ds, "epsilon", epsilon, _s.format_epsilon)
    summ = _s.error_summary(ds) if summary is None else summary
    summ = summ[["log10_mean_error", "log10_mean_error_se", "n_valid"]].sel(epsilon=eps).compute()
    x = np.log10(summ["n"].values.astype(float))
    styles = _styles(ds)
    fig, ax = _new_axes(ax)
    for label in _mechanisms(ds, mechanisms):
        row = summ.sel(mechanism=label)
        y = row["log10_mean_error"].values
        st = styles.get(label, {})
        ax.plot(x, y, marker=st.get("marker", "o"), color=st.get("color"), label=label, linewidth=1.5, markersize=5)
        if errorbars:
            ax.errorbar(x, y, yerr=row["log10_mean_error_se"].values, fmt="none", ecolor=st.get("color"), capsize=0, elinewidth=1)
    ax.set_xticks(x)
    ax.set_xticklabels([f"{v:g}" for v in np.round(x, 2)])
    ax.set_xlabel(XLABEL_N)
    ax.set_ylabel(YLABEL_N)
    R = ds.sizes["replicate"]
    problem = ds.attrs.get("problem", "")
    ax.set_title(title if title is not None else f"{problem} error vs n (ε = {_s.format_epsilon(eps)}, mean of ≤{R} replicates)".strip())
    ax.grid(True, alpha=0.3)
    ax.legend(frameon=False)
    return fig


def figure_error_vs_epsilon(
    ds: xr.Dataset,
    n: int | None = None,
    *,
    statistic: str = "median",
    mechanisms: Sequence[str] | None = None,
    logy: bool = False,
    zero_line: bool = True,
    summary: xr.Dataset | None = None,
    ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """Awan–Slavković Figure 2: ℓ2 error against ε (log2 x-axis), one line per mechanism.

    Parameters
    ----------
    n : int, optional
        Sample size to plot; required when the store has several.
    statistic : {"median", "mean"}
        Summary over replicates (the paper uses the median); the mean gets
        ±1 Monte Carlo SE bars.
    logy : bool
        Log10 y-axis (default linear, as in the paper).
    zero_line : bool
        Solid horizontal line at ‖θ*‖₂ (the error of the zero estimate) when
        the store has ``theta_star``.
    """
    if statistic not in ("median", "mean"):
        raise ValueError(f"statistic={statistic!r}; allowed values are ('median', 'mean')")
    n_val = _pick(ds, "n", n, _s.format_n)
    summ = _s.error_summary(ds) if summary is None else summary
    var = f"{statistic}_error"
    summ = summ[[var, "mean_error_se"]].sel(n=n_val).compute()
    eps = summ["epsilon"].values.astype(float)
    styles = _styles(ds)
    fig, ax = _new_axes(ax)
    for label in _mechanisms(ds, mechanisms):
        row = summ.sel(mechanism=label)
        y = row[var].values
        st = styles.get(label, {})
        ax.plot(eps, y, marker=st.get("marker", "o"), color=st.get("color"), label=label, linewidth=1.5, markersize=5)
        if statistic == "mean":
            ax.errorbar(eps, y, yerr=row["mean_error_se"].values, fmt="none", ecolor=st.get("color"), capsize=0, elinewidth=1)
    if zero_line and "theta_star" in ds:
        norm = float(np.sqrt((ds["theta_star"].values.astype(float) ** 2).sum()))
        ax.axhline(norm, color="0.3", linewidth=1, label="‖θ*‖₂ (zero estimate)")
    _log2_epsilon_axis(ax, eps)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel("ε (log2 scale)")
    ax.set_ylabel(f"{statistic} ℓ2 distance to truth")
    problem = ds.attrs.get("problem", "")
    ax.set_title(title if title is not None else f"{problem} error vs ε (n = {_tex_n(n_val)})".strip())
    ax.grid(True, alpha=0.3)
    ax.legend(frameon=False)
    return fig


def figure_coverage_vs_epsilon(
    ds: xr.Dataset,
    n: int | None = None,
    *,
    level: float = 0.95,
    how: str = "mean",
    coefs: Sequence[int] | slice | None = None,
    reference: str | None = None,
    mechanisms: Sequence[str] | None = None,
    errorbars: bool = True,
    reference_line: bool = True,
    ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """Awan–Slavković Figure 3: proportion of DP estimates in the non-private CI against ε.

    One line per private mechanism (the non-private reference is its own CI
    centre and is not drawn), the nominal ``level`` as a dashed line, and —
    when ``reference_line`` and the store has ``theta_star`` — the empirical
    coverage of θ* by the non-private CI as a solid line.

    Parameters
    ----------
    n : int, optional
        Sample size to plot; required when the store has several.
    level : float
        Confidence level of the non-private CI (z = Φ⁻¹((1+level)/2)).
    how : {"mean", "all"}
        ``"mean"`` (default): Algorithm 4's average fraction of coefficients
        inside; ``"all"``: every coefficient inside.  See
        :func:`kngflow.analysis.summaries.coverage`.
    coefs : list of int or slice, optional
        Coefficients used (Algorithm 4 uses the slopes only: ``slice(1, None)``).
    """
    if how not in ("mean", "all"):
        raise ValueError(f"how={how!r}; allowed values are ('mean', 'all')")
    n_val = _pick(ds, "n", n, _s.format_n)
    ref = _s.reference_label(ds, reference)
    cov = _s.coverage(ds, reference=ref, level=level, how=how, coefs=coefs).sel(n=n_val).compute()
    eps = cov["epsilon"].values.astype(float)
    styles = _styles(ds)
    fig, ax = _new_axes(ax)
    for label in _mechanisms(ds, mechanisms, exclude=(ref,)):
        row = cov.sel(mechanism=label)
        y = row["coverage"].values
        st = styles.get(label, {})
        ax.plot(eps, y, marker=st.get("marker", "o"), color=st.get("color"), label=label, linewidth=1.5, markersize=5)
        if errorbars:
            ax.errorbar(eps, y, yerr=row["coverage_se"].values, fmt="none", ecolor=st.get("color"), capsize=0, elinewidth=1)
    ax.axhline(level, color="black", linestyle="--", linewidth=1, label=f"nominal {level:g}")
    if reference_line and "theta_star" in ds:
        rc = _s.reference_coverage(ds, reference=ref, level=level, how=how, coefs=coefs).sel(n=n_val).compute()
        ax.plot(eps, rc["coverage"].values, color="0.3", linewidth=1.2, label="non-private CI covers θ*")
    _log2_epsilon_axis(ax, eps)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("ε (log2 scale)")
    pct = f"{100 * level:g}%"
    what = "average fraction of coefficients" if how == "mean" else "proportion of estimates (all coefficients)"
    ax.set_ylabel(f"{what} in non-private {pct} CI")
    problem = ds.attrs.get("problem", "")
    ax.set_title(title if title is not None else f"{problem} CI coverage vs ε (n = {_tex_n(n_val)})".strip())
    ax.grid(True, alpha=0.3)
    ax.legend(frameon=False, loc="best")
    return fig

"""Figures of the papers' simulation studies, drawn from a kngflow store.

* :func:`figure_error_vs_n` — KNG (NeurIPS 2019) Figures 1–2: the base-10 log
  of both axes, i.e. x = log10 n, y = log10(average error), one
  line with markers per mechanism and ±1 Monte Carlo SE bars (delta method, in
  the plot's log scale).  The axes are *linear axes of log10-transformed
  values*, labelled ``log10(n)`` and ``log10(average <error label>)`` — for a
  coefficient vector ``log10(average ℓ2 distance to truth)``, exactly as in the
  paper — so that slopes can be read off directly (−1/2 for the non-private
  estimator).
* :func:`figure_error_vs_epsilon` — Awan–Slavković Figure 2: error against ε
  on a log2 x-axis (median over replicates by default, as in the paper), with
  solid horizontal lines at the errors of trivial releases the problem declares
  (for a coefficient vector ‖θ*‖₂, the error of the zero estimate).

What the error measures (the axis label) and those lines come from the problem's
declarations (``Problem.error_label``, ``Problem.reference_lines``, through
:mod:`kngflow.analysis.declared`), never from the kind of release.
* :func:`figure_coverage_vs_epsilon` — Awan–Slavković Figure 3: proportion of
  DP estimates inside the non-private 95% CI against ε (log2 x-axis), with the
  nominal level as a dashed line and the empirical coverage of θ* by the
  non-private CI as a solid line.

Each draws one stated statistic with ±1 SE bars (delta-method SE of
log10 mean error; McKean–Schrader SE of the median; 68 % Wilson interval of a
proportion), marks partial points — groups with fewer finished replicates
than the grid asks for — with open markers, and takes its title from the
study's name (the spec's ``name``).  :func:`figure_facets` puts one of them
per value of n (or ε) side by side in a single figure.

The figures are :class:`matplotlib.figure.Figure` objects built without
pyplot (rendered with Agg by ``savefig``), so no global state is touched and
nothing needs closing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import math
import textwrap

import numpy as np
import xarray as xr
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from . import summaries as _s
from .declared import error_label, reference_lines

__all__ = ["figure_error_vs_n", "figure_error_vs_epsilon", "figure_coverage_vs_epsilon", "figure_facets", "study_name"]

#: Colour of the non-private reference mechanisms (classes with ``private = False``).
_REFERENCE_COLOR = "black"
#: Colours of the other mechanisms, by position in the store's ``mechanism`` coordinate
#: (matplotlib's tab10 without its grey, which the reference lines of the figures use).
_PALETTE = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan"]
_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "<", ">"]

XLABEL_N = "log10(n)"


#: longest axis label kept on one line (a problem's declared error label can be long)
_LABEL_WIDTH = 56
#: the same in a facet's panel, so that a wrapped label fits its height
_FACET_LABEL_WIDTH = 40


def _axis_label(text: str) -> str:
    """``text`` broken into lines of at most :data:`_LABEL_WIDTH` characters."""
    return textwrap.fill(text, _LABEL_WIDTH)


def _styles(ds: xr.Dataset) -> dict[str, dict[str, Any]]:
    """``{label: style}``: colour and marker by the mechanism's position in the ``mechanism``
    coordinate (so a mechanism keeps its colour in every figure of a store); the non-private
    reference mechanisms are black.  With more mechanisms than colours the palette repeats and
    the markers tell the lines apart."""
    labels = [str(m) for m in ds["mechanism"].values]
    nonprivate = set(_s.nonprivate_labels(ds))
    deltas = _s.mechanism_deltas(ds)
    mixed = any(deltas.values()) and not all(deltas.values())
    styles: dict[str, dict[str, Any]] = {}
    for i, label in enumerate(labels):
        color = _REFERENCE_COLOR if label in nonprivate else _PALETTE[i % len(_PALETTE)]
        styles[label] = {"color": color, "marker": _MARKERS[i % len(_MARKERS)]}
        if mixed and deltas.get(label, 0.0) > 0:  # ε-DP and (ε, δ)-DP in one legend: say which is which
            styles[label]["legend"] = f"{label} (ε, δ={deltas[label]:g})"
    return styles


def study_name(ds: xr.Dataset) -> str:
    """The study's name for titles: the spec's ``name``, else the problem's."""
    return str(ds.attrs.get("title") or ds.attrs.get("problem") or "").strip()


def _titled(ds: xr.Dataset, what: str) -> str:
    study = study_name(ds)
    return f"{study}: {what}" if study else what


def _draw_series(ax: Axes, x, y, yerr, partial, style: dict[str, Any], label: str) -> None:
    """One mechanism's line with ±1 SE bars; open markers at partial points."""
    color, marker = style.get("color"), style.get("marker", "o")
    ax.plot(x, y, marker=marker, color=color, label=style.get("legend", label), linewidth=1.5, markersize=5)
    if yerr is not None:
        ax.errorbar(x, y, yerr=yerr, fmt="none", ecolor=color, capsize=0, elinewidth=1)
    partial = np.asarray(partial, dtype=bool) & np.isfinite(np.asarray(y, dtype=float))
    if partial.any():
        ax.plot(np.asarray(x)[partial], np.asarray(y)[partial], linestyle="none", marker=marker,
                markersize=6, markerfacecolor="white", markeredgecolor=color, label="_partial")


def _legend_entries(axes: Sequence[Axes], ds: xr.Dataset) -> tuple[list, list[str]]:
    """The labelled lines of ``axes`` (each label once), plus a key for open (partial) markers if any."""
    entries: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
    if any(ln.get_label() == "_partial" for ax in axes for ln in ax.get_lines()):
        key = f"open: partial (< {ds.sizes['replicate']} replicates)"
        entries[key] = Line2D([], [], linestyle="none", marker="o", markerfacecolor="white", markeredgecolor="0.3")
    return list(entries.values()), list(entries)


def _legend(ax: Axes, ds: xr.Dataset, **kwargs: Any) -> None:
    ax.legend(*_legend_entries([ax], ds), frameon=False, **kwargs)


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


def _log10_n_ticks(ax: Axes, x: np.ndarray) -> None:
    """Ticks of a log10(n) axis at whole powers of ten (labelled 2, 3, ... : log10 of 100,
    1000, ...), never at the grid's own log10 values (2.48, 3.48 for n = 300, 3000); when the
    grid spans less than two powers of ten, at its values, to two decimals."""
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return
    whole = np.arange(math.ceil(x.min() - 1e-9), math.floor(x.max() + 1e-9) + 1)
    if whole.size >= 2:
        ax.set_xticks(whole)
        ax.set_xticklabels([f"{int(v)}" for v in whole])
    else:
        ax.set_xticks(x)
        ax.set_xticklabels([f"{v:.2f}".rstrip("0").rstrip(".") for v in x])
    ax.minorticks_off()


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
    legend: bool = True,
) -> Figure:
    """KNG Figures 1–2: log10 average error against log10 n, one line per mechanism.

    Parameters
    ----------
    ds : xarray.Dataset
        A store (e.g. from :func:`xarray.open_zarr`).
    epsilon : float, optional
        Privacy level to plot; required when the store has several.
    mechanisms : sequence of str, optional
        Labels to draw (default: all, in store order).
    errorbars : bool
        Draw ±1 Monte Carlo SE (delta method, log10 scale).  Points with
        fewer finished replicates than the grid's are drawn open.
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
    summ = summ[["log10_mean_error", "log10_mean_error_se", "n_done"]].sel(epsilon=eps).compute()
    x = np.log10(summ["n"].values.astype(float))
    R = ds.sizes["replicate"]
    styles = _styles(ds)
    fig, ax = _new_axes(ax)
    for label in _mechanisms(ds, mechanisms):
        row = summ.sel(mechanism=label)
        yerr = row["log10_mean_error_se"].values if errorbars else None
        _draw_series(ax, x, row["log10_mean_error"].values, yerr, row["n_done"].values < R, styles.get(label, {}), label)
    _log10_n_ticks(ax, x)
    ax.set_xlabel(XLABEL_N)
    ax.set_ylabel(_axis_label(f"log10(average {error_label(ds)})"))
    ax.set_title(title if title is not None else _titled(ds, f"error vs n, ε = {_s.format_epsilon(eps)}"))
    ax.grid(True, alpha=0.3)
    if legend:
        _legend(ax, ds)
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
    legend: bool = True,
) -> Figure:
    """Awan–Slavković Figure 2: error against ε (log2 x-axis), one line per mechanism.

    Parameters
    ----------
    n : int, optional
        Sample size to plot; required when the store has several.
    statistic : {"median", "mean"}
        Summary over replicates (the paper uses the median), drawn with ±1
        Monte Carlo SE bars (McKean–Schrader SE for the median).
    logy : bool
        Log10 y-axis (default linear, as in the paper).
    zero_line : bool
        Solid horizontal lines at the errors of the trivial releases the
        problem declares (:func:`~kngflow.analysis.declared.reference_lines`;
        for a coefficient vector ‖θ*‖₂, the error of the zero estimate).
    """
    if statistic not in ("median", "mean"):
        raise ValueError(f"statistic={statistic!r}; allowed values are ('median', 'mean')")
    n_val = _pick(ds, "n", n, _s.format_n)
    summ = _s.error_summary(ds) if summary is None else summary
    var = f"{statistic}_error"
    summ = summ[[var, f"{var}_se", "n_done"]].sel(n=n_val).compute()
    eps = summ["epsilon"].values.astype(float)
    R = ds.sizes["replicate"]
    styles = _styles(ds)
    fig, ax = _new_axes(ax)
    for label in _mechanisms(ds, mechanisms):
        row = summ.sel(mechanism=label)
        _draw_series(ax, eps, row[var].values, row[f"{var}_se"].values, row["n_done"].values < R, styles.get(label, {}), label)
    if zero_line:
        for i, (value, label) in enumerate(reference_lines(ds)):
            ax.axhline(value, color="0.3", linewidth=1, linestyle=("-", "--", ":", "-.")[i % 4], label=label)
    _log2_epsilon_axis(ax, eps)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel("ε (log2 scale)")
    ax.set_ylabel(_axis_label(f"{statistic} {error_label(ds)}"))
    ax.set_title(title if title is not None else _titled(ds, f"error vs ε, n = {_tex_n(n_val)}"))
    ax.grid(True, alpha=0.3)
    if legend:
        _legend(ax, ds)
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
    legend: bool = True,
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
    errorbars : bool
        Draw the 68 % Wilson interval (the ±1 SE equivalent of a proportion,
        which does not collapse at 0 or 1).
    """
    if how not in ("mean", "all"):
        raise ValueError(f"how={how!r}; allowed values are ('mean', 'all')")
    n_val = _pick(ds, "n", n, _s.format_n)
    ref = _s.reference_label(ds, reference)
    cov = _s.coverage(ds, reference=ref, level=level, how=how, coefs=coefs).sel(n=n_val).compute()
    eps = cov["epsilon"].values.astype(float)
    R = ds.sizes["replicate"]
    styles = _styles(ds)
    fig, ax = _new_axes(ax)
    for label in _mechanisms(ds, mechanisms, exclude=(ref,)):
        row = cov.sel(mechanism=label)
        y, k = row["coverage"].values, row["n_valid"].values
        yerr = None
        if errorbars:
            lo, hi = _s.wilson_interval(y, k, 1.0)
            yerr = np.clip(np.vstack([y - lo, hi - y]), 0.0, None)  # rounding at p = 0 or 1
        _draw_series(ax, eps, y, yerr, k < R, styles.get(label, {}), label)
    ax.axhline(level, color="black", linestyle="--", linewidth=1, label=f"nominal {level:g}")
    if reference_line and "theta_star" in ds:
        rc = _s.reference_coverage(ds, reference=ref, level=level, how=how, coefs=coefs).sel(n=n_val).compute()
        ax.plot(eps, rc["coverage"].values, color="0.3", linewidth=1.2, label="non-private CI covers θ*")
    _log2_epsilon_axis(ax, eps)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("ε (log2 scale)")
    pct = f"{100 * level:g}%"
    what = "mean fraction of coefficients" if how == "mean" else "share with all coefficients"
    ax.set_ylabel(f"{what} in non-private {pct} CI")
    ax.set_title(title if title is not None else _titled(ds, f"CI coverage vs ε, n = {_tex_n(n_val)}"))
    ax.grid(True, alpha=0.3)
    if legend:
        _legend(ax, ds, loc="best")
    return fig


_PANEL_OF = {figure_error_vs_n: "epsilon", figure_error_vs_epsilon: "n", figure_coverage_vs_epsilon: "n"}


def figure_facets(ds: xr.Dataset, figure=figure_error_vs_epsilon, *, ncols: int = 3, legend_at: str = "right",
                  **kwargs: Any) -> Figure:
    """One panel of ``figure`` per value of the axis it fixes, in a single figure.

    ``figure`` is :func:`figure_error_vs_epsilon` or
    :func:`figure_coverage_vs_epsilon` (a panel per n) or
    :func:`figure_error_vs_n` (a panel per ε); ``kwargs`` go to every panel.
    One legend for all panels, at the right (``legend_at="bottom"``: under the
    panels, for a one-column figure on a narrow screen); the y label on the
    first column only; the figure's title is the study's name.  Save with
    ``bbox_inches="tight"`` so that no label is cut.
    """
    if legend_at not in ("right", "bottom"):
        raise ValueError(f"legend_at={legend_at!r}; allowed values are ('right', 'bottom')")
    if figure not in _PANEL_OF:
        raise ValueError(f"figure={getattr(figure, '__name__', figure)!r}; allowed: {[f.__name__ for f in _PANEL_OF]}")
    dim = _PANEL_OF[figure]
    values = ds[dim].values
    ncols = max(1, min(ncols, values.size))
    nrows = math.ceil(values.size / ncols)
    ncols = math.ceil(values.size / nrows)  # rows as full as they can be: 4 panels 2 + 2, not 3 + 1
    width = 4.6 * ncols + (2.2 if legend_at == "right" else 0.0)
    fig = Figure(figsize=(width, 3.8 * nrows + (0.9 if legend_at == "bottom" else 0.0)), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for i, (ax, value) in enumerate(zip(axes, values)):
        panel = f"ε = {_s.format_epsilon(value)}" if dim == "epsilon" else f"n = {_tex_n(value)}"
        figure(ds, value, ax=ax, legend=False, title=panel, **kwargs)
        if i % ncols:
            ax.set_ylabel("")
        else:
            ax.set_ylabel(textwrap.fill(ax.get_ylabel().replace("\n", " "), _FACET_LABEL_WIDTH))
    for ax in axes[values.size:]:
        ax.set_visible(False)
    handles, labels = _legend_entries(axes[: values.size], ds)
    if legend_at == "right":
        fig.legend(handles, labels, loc="outside right upper", frameon=False)
    else:
        fig.legend(handles, labels, loc="outside lower center", ncols=min(2, max(1, len(labels))), frameon=False)
    if study_name(ds):
        fig.suptitle(study_name(ds))
    return fig

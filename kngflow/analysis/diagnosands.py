"""Diagnosands of the estimates — bias, SD, RMSE, MAE, coverage — each with its Monte Carlo SE.

:func:`diagnose` reduces a store over ``replicate`` per (mechanism, n, epsilon, coef), lazily
(a dask-backed store stays dask-backed until the caller computes the small result).  Only
cells with ``done == 1`` count.  With ``e = estimate − theta_star`` over the ``k`` finished
replicates of a cell that hold a finite estimate (``n_valid``; ``n_done`` counts the
finished ones):

==========  ==============================  ==============================================
diagnosand  estimate                        Monte Carlo SE (closed form)
==========  ==============================  ==============================================
bias        ``mean(e)``                     ``sd(e)/√k``
sd          ``sd(e)`` (divisor k − 1)       delta method with the 4th central moment m4:
                                            ``√((m4 − s⁴(k−3)/(k−1))/k) / (2s)``
rmse        ``√mean(e²)``                   delta method on the MSE: ``sd(e²)/(√k·2·rmse)``
mae         ``mean|e|``                     ``sd(|e|)/√k``
coverage    fraction of ``|e| ≤ z·se``      binomial ``√(p(1−p)/k)`` (0 at p = 0 or 1: read
                                            ``coverage_lo/hi``, the 95 % Wilson interval)
==========  ==============================  ==============================================

Coverage needs standard errors: the variable the problem declares (its ``reference_stderr``,
dims n, replicate, coef; :func:`~kngflow.analysis.declared.reference_stderr`).  The interval
of a mechanism is its own estimate ± z·se with the non-private standard errors: for the
non-private reference this is its confidence interval (what
:func:`~kngflow.analysis.summaries.reference_coverage` reports with ``how="per_coef"``); for a
private mechanism it is the naive interval that ignores the privacy noise, whose coverage of
``theta_star`` falls below the level as the noise grows.  Without declared standard errors
(or without the variable) the result has no coverage variables.

``mcse="bootstrap"`` replaces the closed-form SEs of bias, sd, rmse and mae by the SD of
``n_boot`` bootstrap replicates (resampling replicates with a fixed seed) — a cross-check of
the closed forms, and the fallback for statistics without one.
"""

from __future__ import annotations

import warnings

import numpy as np
import xarray as xr
from scipy import special

from .declared import reference_stderr
from .summaries import _moments, _safe_div, finished, wilson_interval

__all__ = ["diagnose", "DIAGNOSANDS", "require_variables"]

#: The diagnosands :func:`diagnose` returns (each ``name`` with its ``name_se``).
DIAGNOSANDS = ("bias", "sd", "rmse", "mae", "coverage")
_BOOTSTRAPPED = ("bias", "sd", "rmse", "mae")
_MCSE = ("closed", "bootstrap")


def require_variables(ds: xr.Dataset, names, what: str = "diagnose()") -> None:
    """ValueError naming the first of ``names`` that ``ds`` lacks."""
    for name in names:
        if name not in ds.variables:
            raise ValueError(f"the store has no variable {name!r}: {what} needs {', '.join(repr(n) for n in names)}")


def _bootstrap_last(a: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """Bootstrap SDs of (bias, sd, rmse, mae) over the last axis of ``a`` (NaN = not finished).

    Resamples the replicate positions (shared by all cells, fixed seed); NaN entries drop out
    of each resample.  Returns ``a.shape[:-1] + (4,)``.
    """
    a = np.asarray(a, dtype=float)
    R = a.shape[-1]
    out = np.full(a.shape[:-1] + (len(_BOOTSTRAPPED),), np.nan)
    if R < 2:
        return out
    rng = np.random.default_rng(seed)
    stats = np.empty((n_boot,) + a.shape[:-1] + (len(_BOOTSTRAPPED),))
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for b in range(n_boot):
            x = a[..., rng.integers(0, R, R)]
            ok = ~np.isnan(x)
            k = ok.sum(-1)
            x0 = np.where(ok, x, 0.0)
            mean = x0.sum(-1) / np.where(k > 0, k, np.nan)
            ss = np.where(ok, (x - mean[..., None]) ** 2, 0.0).sum(-1)
            stats[b, ..., 0] = mean
            stats[b, ..., 1] = np.sqrt(ss / np.where(k > 1, k - 1, np.nan))
            stats[b, ..., 2] = np.sqrt((x0**2).sum(-1) / np.where(k > 0, k, np.nan))
            stats[b, ..., 3] = np.abs(x0).sum(-1) / np.where(k > 0, k, np.nan)
        finite = np.isfinite(stats).sum(0)
        se = np.nanstd(np.where(np.isfinite(stats), stats, np.nan), axis=0, ddof=1) if n_boot > 1 else out
    k_all = (~np.isnan(a)).sum(-1)
    return np.where((finite >= 2) & (k_all >= 2)[..., None], se, np.nan)


def diagnose(
    ds: xr.Dataset,
    *,
    level: float = 0.95,
    stderr: str | None = None,
    mcse: str = "closed",
    n_boot: int = 200,
    seed: int = 0,
) -> xr.Dataset:
    """Bias, SD, RMSE, MAE and coverage of ``estimate`` around ``theta_star``, with MC SEs.

    Parameters
    ----------
    ds : xarray.Dataset
        A store (dims mechanism, n, epsilon, replicate, coef) with ``estimate``,
        ``theta_star`` and ``done``.
    level : float
        Level of the intervals whose coverage is estimated (z = Φ⁻¹((1+level)/2)).
    stderr : str, optional
        Standard-error variable for coverage (default: the problem's ``reference_stderr``;
        no coverage when there is none).  ValueError when named here but absent.
    mcse : {"closed", "bootstrap"}
        Closed-form Monte Carlo SEs (default), or bootstrap SEs for bias, sd, rmse and mae.
    n_boot, seed : int
        Bootstrap replicates and seed (``mcse="bootstrap"`` only).

    Returns
    -------
    xarray.Dataset
        Lazy on a dask-backed store, over (mechanism, n, epsilon, coef): ``bias``, ``sd``,
        ``rmse``, ``mae`` each with ``<name>_se``; ``n_valid`` (replicates used per
        coefficient) and ``n_done`` (finished replicates per cell, no ``coef``); with
        standard errors also ``coverage``, ``coverage_se``, ``coverage_lo``,
        ``coverage_hi`` (95 % Wilson).  ``theta_star`` is a coordinate along ``coef``.

    Raises
    ------
    ValueError
        When the store lacks ``estimate``, ``theta_star`` or ``done`` (the message names it),
        or ``mcse``/``level`` are not allowed values.
    """
    require_variables(ds, ("estimate", "theta_star", "done"))
    if mcse not in _MCSE:
        raise ValueError(f"mcse={mcse!r}; allowed values are {_MCSE}")
    if not 0 < level < 1:
        raise ValueError(f"level={level!r} must lie in (0, 1)")
    done = finished(ds)
    theta = ds["theta_star"]
    e = ds["estimate"].where(done) - theta
    e = e.where(np.isfinite(e))
    k, bias, sd = _moments(e)
    kf = k.where(k > 0)
    c = e - bias
    m4 = _safe_div((c**4).sum("replicate", skipna=True), k)
    var_s2 = _safe_div(m4 - sd**4 * _safe_div(k - 3, k - 1), k)
    sd_se = _safe_div(np.sqrt(var_s2.clip(min=0.0)), 2 * sd).where(k > 3)
    _, mse, sd_sq = _moments(e**2)
    rmse = np.sqrt(mse)
    _, mae, sd_abs = _moments(abs(e))
    out = xr.Dataset(
        {
            "bias": bias,
            "bias_se": sd / np.sqrt(kf),
            "sd": sd,
            "sd_se": sd_se,
            "rmse": rmse,
            "rmse_se": _safe_div(sd_sq / np.sqrt(kf), 2 * rmse),
            "mae": mae,
            "mae_se": sd_abs / np.sqrt(kf),
            "n_valid": k.astype(np.int64),
            "n_done": done.sum("replicate").astype(np.int64),
        }
    )
    if mcse == "bootstrap":
        x = e.chunk({"replicate": -1}) if e.chunks is not None else e
        boot = xr.apply_ufunc(
            _bootstrap_last, x, kwargs={"n_boot": int(n_boot), "seed": int(seed)},
            input_core_dims=[["replicate"]], output_core_dims=[["diagnosand"]],
            dask="parallelized", output_dtypes=[float],
            dask_gufunc_kwargs={"output_sizes": {"diagnosand": len(_BOOTSTRAPPED)}},
        )
        for i, name in enumerate(_BOOTSTRAPPED):
            out[f"{name}_se"] = boot.isel(diagnosand=i, drop=True)
    z = float(special.ndtri(0.5 + level / 2))
    name = reference_stderr(ds) if stderr is None else stderr
    if stderr is not None and name not in ds:
        raise ValueError(f"the store has no variable {name!r} (the standard errors for coverage)")
    if name and name in ds:
        se = ds[name]
        valid = e.notnull() & se.notnull()
        hit = xr.where(valid, (abs(e) <= z * se).astype(float), np.nan)
        kc, p, _ = _moments(hit)
        lo, hi = wilson_interval(p, kc, float(special.ndtri(0.975)))
        out["coverage"] = p
        out["coverage_se"] = np.sqrt((p * (1 - p)).clip(min=0.0) / kc.where(kc > 0))
        out["coverage_lo"] = np.minimum(lo.clip(min=0.0), p)  # never above p̂ by rounding
        out["coverage_hi"] = np.maximum(hi.clip(max=1.0), p)
    out = out.assign_coords(theta_star=theta)
    out.attrs.update(
        level=level,
        z=z,
        mcse=mcse,
        stderr=name if name and name in ds else "",
        definition="e = estimate - theta_star over finished replicates; bias = mean(e); sd = sd(e); "
        "rmse = sqrt(mean(e^2)); mae = mean(|e|); coverage = P(|e| <= z*stderr)",
    )
    if mcse == "bootstrap":
        out.attrs.update(n_boot=int(n_boot), seed=int(seed))
    return out

"""Monte Carlo summaries of a kngflow store, reduced over ``replicate``.

Every function here takes a dataset with the store schema of
``docs/contracts.md`` (dims ``mechanism``, ``n``, ``epsilon``, ``replicate``,
``coef``) and returns xarray objects that stay dask-backed when the input is:
nothing is loaded until the caller computes the *reduced* result, so a store
opened with :func:`xarray.open_zarr` is never materialised replicate by
replicate.  Only cells with ``done == 1`` count; a (mechanism, n, epsilon)
group without finished replicates gives NaN (and no warnings).

Monte Carlo standard errors
---------------------------
With ``k`` finished replicates of the error ``e``:

* mean error: ``sd(e) / sqrt(k)``;
* mean of ``log10 e``: ``sd(log10 e) / sqrt(k)``;
* ``log10(mean e)`` — the scale of KNG Figures 1–2, where the paper quotes
  its Monte Carlo SEs "in terms of the log-scale used in the plot" — by the
  delta method: ``sd(e) / (sqrt(k) * mean(e) * ln 10)``;
* ratio of mean errors to the non-private reference, computed on the
  replicates finished for both (the comparison is paired: every mechanism sees
  the same simulated data set in a replicate): with ``r = mean(a)/mean(b)``,
  ``var(r) ≈ (var a − 2 r cov(a, b) + r² var b) / (k mean(b)²)``.

* median error: the McKean–Schrader (1984) order-statistic SE,
  ``(e_(k−c+1) − e_(c)) / (2·1.96)`` with ``c = round((k+1)/2 − 1.96·√(k/4))``
  — distribution free, no density estimate;
* proportions (coverage): Wilson score intervals (:func:`wilson_interval`),
  which never collapse to zero width at 0 or 1 ("1.000 ± 0.000").

Slope fits regress ``log10(mean error)`` on ``log10 n`` by weighted least
squares with weights ``1 / SE²`` (the delta-method SEs above), and say how
well a straight line fits: ``chi2_dof`` and its p-value ``p_fit``; when the
line does not fit (``p_fit < 0.01``, e.g. a ``C/√n + K/n`` curve) the SE is
inflated by ``√(χ²/dof)`` (Birge ratio) and the fit is flagged ``curved``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import xarray as xr
from scipy import special  # not scipy.stats: its import alone costs ~0.7 s of every report

from .declared import nonprivate_labels, reference_stderr
from .storemeta import kinds_by_label, mechanism_deltas

__all__ = [
    "kinds_by_label",
    "nonprivate_labels",
    "reference_stderr",
    "mechanism_deltas",
    "privacy_tag",
    "reference_label",
    "finished",
    "masked",
    "error_summary",
    "ratio_to_reference",
    "slope_fit",
    "CURVED_P",
    "wilson_interval",
    "coverage",
    "reference_coverage",
    "completeness",
    "describe_completeness",
    "format_n",
    "format_epsilon",
]

_LN10 = math.log(10.0)
_Z975 = float(special.ndtri(0.975))
CURVED_P = 0.01
"""A slope fit with ``p_fit`` below this is flagged ``curved`` and its SE inflated."""


# --------------------------------------------------------------------------
# mechanisms: labels, kinds and deltas (read by .storemeta)
# --------------------------------------------------------------------------
def privacy_tag(delta: float) -> str:
    """``"ε-DP"`` or ``"(ε, δ=1e-05)-DP"``."""
    return "ε-DP" if delta == 0 else f"(ε, δ={delta:g})-DP"


def reference_label(ds: xr.Dataset, reference: str | None = None, *, required: bool = True) -> str | None:
    """Label of the non-private reference mechanism.

    ``reference`` (a mechanism label) wins; otherwise the first of
    :func:`~kngflow.analysis.declared.nonprivate_labels` — the mechanisms whose
    class declares ``private = False`` (the store's ``nonprivate`` attribute, or
    the spec's kinds resolved through the registry for older stores).  Raises
    ``ValueError`` when there is none and ``required`` is true; returns ``None``
    otherwise.
    """
    labels = [str(m) for m in ds["mechanism"].values]
    if reference is not None:
        if reference not in labels:
            raise ValueError(f"reference={reference!r} is not a mechanism label; labels are {labels}")
        return reference
    found = nonprivate_labels(ds)
    if found:
        return found[0]
    if required:
        raise ValueError(
            "no non-private reference mechanism (a mechanism class with private = False) in the store; "
            f"pass reference=<label> (labels are {labels})"
        )
    return None


def _stderr_variable(ds: xr.Dataset, stderr: str | None) -> xr.DataArray:
    """The reference's standard errors: ``ds[stderr]``, by default the variable the problem
    declares (:func:`~kngflow.analysis.declared.reference_stderr`); ValueError naming it when absent."""
    name = reference_stderr(ds) if stderr is None else stderr
    if not name:
        raise ValueError(
            f"the {ds.attrs.get('problem', 'study')!s} problem stores no reference standard errors "
            "(it declares no reference_stderr); pass stderr=<variable>"
        )
    if name not in ds:
        raise ValueError(f"the store has no variable {name!r} (the reference standard errors)")
    return ds[name]


# --------------------------------------------------------------------------
# masking and lazy moments
# --------------------------------------------------------------------------
def finished(ds: xr.Dataset) -> xr.DataArray:
    """Boolean mask of finished cells (``done == 1``), dims mechanism, n, epsilon, replicate."""
    return ds["done"] == 1


def masked(ds: xr.Dataset, name: str = "error") -> xr.DataArray:
    """``ds[name]`` with every unfinished cell set to NaN (lazy)."""
    return ds[name].where(finished(ds))


def _safe_div(num: xr.DataArray, den: xr.DataArray) -> xr.DataArray:
    """``num / den`` with NaN where ``den <= 0`` — without divide-by-zero warnings."""
    return num / den.where(den > 0)


def _moments(x: xr.DataArray, dim: str = "replicate") -> tuple[xr.DataArray, xr.DataArray, xr.DataArray]:
    """Count of non-NaN values, mean and sample SD along ``dim`` (two-pass, lazy, quiet)."""
    k = x.count(dim)
    mean = _safe_div(x.sum(dim, skipna=True), k)
    ss = ((x - mean) ** 2).sum(dim, skipna=True)
    sd = np.sqrt(_safe_div(ss, k - 1))
    return k, mean, sd


def _nanmedian_last(a: np.ndarray) -> np.ndarray:
    """``nanmedian`` over the last axis; NaN (without a warning) for all-NaN slices."""
    a = np.asarray(a, dtype=float)
    if a.shape[-1] == 0:
        return np.full(a.shape[:-1], np.nan)
    empty = np.isnan(a).all(axis=-1)
    out = np.nanmedian(np.where(empty[..., None], 0.0, a), axis=-1)
    return np.where(empty, np.nan, out)


def _median_se_last(a: np.ndarray) -> np.ndarray:
    """McKean–Schrader SE of the median over the last axis, ignoring NaN (NaN when < 3 values)."""
    a = np.sort(np.asarray(a, dtype=float), axis=-1)  # NaN sort last
    k = (~np.isnan(a)).sum(axis=-1)
    c = np.clip(np.round((k + 1) / 2 - _Z975 * np.sqrt(k / 4)), 1, np.maximum(k, 1)).astype(np.intp)
    lo = np.take_along_axis(a, (c - 1)[..., None], axis=-1)[..., 0]
    hi = np.take_along_axis(a, np.maximum(k - c, 0)[..., None], axis=-1)[..., 0]
    return np.where(k >= 3, (hi - lo) / (2 * _Z975), np.nan)


def _over_replicates(func, x: xr.DataArray, dim: str = "replicate") -> xr.DataArray:
    if x.chunks is not None:
        x = x.chunk({dim: -1})
    return xr.apply_ufunc(func, x, input_core_dims=[[dim]], dask="parallelized", output_dtypes=[float])


def wilson_interval(p_hat, k, z: float = 1.0):
    """Wilson score interval for a proportion ``p_hat`` estimated from ``k`` trials.

    Works elementwise on numbers, numpy arrays and xarray objects; ``z = 1``
    gives the ±1-SE-equivalent (68.3 %) interval drawn in figures, ``z = 1.96``
    the 95 % interval of the report's tables.  For an average of ``k``
    per-replicate fractions in [0, 1] (coverage "averaged over coefficients")
    the interval is conservative: such an average has variance at most
    ``p(1 − p)/k``.  NaN where ``k == 0``.

    Returns
    -------
    (lower, upper)
    """
    k = k * 1.0
    k = k.where(k > 0) if hasattr(k, "where") else np.where(np.asarray(k) > 0, k, np.nan)
    z2 = z * z
    centre = (p_hat + z2 / (2 * k)) / (1 + z2 / k)
    half = z / (1 + z2 / k) * np.sqrt(p_hat * (1 - p_hat) / k + z2 / (4 * k * k))
    return centre - half, centre + half


# --------------------------------------------------------------------------
# error summaries
# --------------------------------------------------------------------------
def ratio_to_reference(
    ds: xr.Dataset, reference: str | None = None, name: str = "error"
) -> xr.Dataset:
    """Paired ratio of mean ``name`` to the non-private reference, with its delta-method SE.

    Returns a lazy dataset with ``ratio``, ``ratio_se`` and ``n_paired`` over
    (mechanism, n, epsilon); only replicates finished for both the mechanism and
    the reference count.
    """
    ref = reference_label(ds, reference)
    a = masked(ds, name)
    b = a.sel(mechanism=ref, drop=True)
    both = a.notnull() & b.notnull()
    a = a.where(both)
    b = b.where(both)
    k, ma, sa = _moments(a)
    _, mb, sb = _moments(b)
    cov = _safe_div(((a - ma) * (b - mb)).sum("replicate", skipna=True), k - 1)
    r = _safe_div(ma, mb)
    var_r = (sa**2 - 2 * r * cov + r**2 * sb**2) / (k.where(k > 0) * mb**2)
    se = np.sqrt(var_r.clip(min=0.0))
    out = xr.Dataset({"ratio": r, "ratio_se": se, "n_paired": k})
    out.attrs["reference"] = ref
    return out


def error_summary(
    ds: xr.Dataset, reference: str | None = None, name: str = "error"
) -> xr.Dataset:
    """Summaries of the error over ``replicate`` per (mechanism, n, epsilon), lazily.

    Variables: ``n_replicates`` (size of the replicate axis), ``n_done``
    (finished cells), ``n_failed`` (when the store has ``failed``),
    ``n_valid`` (finished with a finite error), ``mean_error``,
    ``mean_error_se``, ``sd_error``, ``median_error`` and
    ``median_error_se`` (McKean–Schrader), ``mean_log10_error``
    and ``mean_log10_error_se``, ``log10_mean_error`` and
    ``log10_mean_error_se`` (delta method; the KNG paper's plotting scale),
    ``mean_seconds`` (when the store has ``seconds``), and — when a non-private
    reference exists (see :func:`reference_label`) — ``ratio_to_reference``,
    ``ratio_to_reference_se`` (paired; :func:`ratio_to_reference`).
    """
    done = finished(ds)
    err = masked(ds, name)
    k, mean, sd = _moments(err)
    lerr = np.log10(err.where(err > 0))
    kl, lmean, lsd = _moments(lerr)
    out = xr.Dataset(
        {
            "n_replicates": xr.full_like(k, ds.sizes["replicate"], dtype=np.int64),
            "n_done": done.sum("replicate").astype(np.int64),
            "n_valid": k.astype(np.int64),
            "mean_error": mean,
            "mean_error_se": _safe_div(sd, np.sqrt(k)),
            "sd_error": sd,
            "median_error": _over_replicates(_nanmedian_last, err),
            "median_error_se": _over_replicates(_median_se_last, err),
            "mean_log10_error": lmean,
            "mean_log10_error_se": _safe_div(lsd, np.sqrt(kl)),
            "log10_mean_error": np.log10(mean.where(mean > 0)),
            "log10_mean_error_se": _safe_div(sd, np.sqrt(k) * mean * _LN10),
        }
    )
    if "failed" in ds:
        out["n_failed"] = (ds["failed"] == 1).sum("replicate").astype(np.int64)
    if "seconds" in ds:
        out["mean_seconds"] = _moments(masked(ds, "seconds"))[1]
    ref = reference_label(ds, reference, required=False)
    if ref is not None:
        rat = ratio_to_reference(ds, ref, name)
        out["ratio_to_reference"] = rat["ratio"]
        out["ratio_to_reference_se"] = rat["ratio_se"]
        out.attrs["reference"] = ref
    out.attrs["kinds"] = ",".join(f"{k}={v}" for k, v in kinds_by_label(ds).items())
    return out


# --------------------------------------------------------------------------
# slope fits
# --------------------------------------------------------------------------
#: the smallest SE (log10 units) a slope fit weighs a cell by: below it an SE is rounding
SE_FLOOR = 1e-6

_FIT_FLOATS = (
    "slope", "slope_se", "slope_se_inflated", "intercept", "intercept_se",
    "chi2", "chi2_dof", "p_fit", "curved", "n_min_used", "n_max_used",
)


def _wls_line(x: np.ndarray, y: np.ndarray, se: np.ndarray, absolute_sigma: bool) -> dict[str, float]:
    ok = np.isfinite(x) & np.isfinite(y) & np.isfinite(se) & (se > 0)
    x, y, se = x[ok], y[ok], se[ok]
    m = int(x.size)
    res = dict.fromkeys(_FIT_FLOATS, np.nan)
    res["n_points"] = m
    res["dof"] = max(m - 2, 0)
    if m < 2 or np.ptp(x) == 0:
        return res
    # an SE below SE_FLOOR is rounding (every replicate of the cell gave the same release up
    # to the last bits, e.g. a data-independent one): floored, so that its weight stays
    # finite against the other cells' (1/SE^2 of 1e34 made X'WX singular)
    w = 1.0 / np.maximum(se, SE_FLOOR) ** 2
    X = np.column_stack([np.ones(m), x])
    XtW = X.T * w
    cov = np.linalg.inv(XtW @ X)
    beta = cov @ (XtW @ y)
    chi2 = float(np.sum(w * (y - X @ beta) ** 2))
    if not absolute_sigma and m > 2:
        cov = cov * (chi2 / (m - 2))
    slope_se = float(np.sqrt(cov[1, 1]))
    if m > 2:
        res.update(chi2_dof=chi2 / (m - 2), p_fit=float(special.chdtrc(m - 2, chi2)))
        curved = res["p_fit"] < CURVED_P
        res.update(curved=float(curved), slope_se_inflated=slope_se * math.sqrt(max(1.0, res["chi2_dof"])) if curved else slope_se)
    else:
        res.update(curved=0.0, slope_se_inflated=slope_se)
    res.update(
        slope=float(beta[1]),
        slope_se=slope_se,
        intercept=float(beta[0]),
        intercept_se=float(np.sqrt(cov[0, 0])),
        chi2=chi2,
        n_min_used=float(10 ** x.min()),
        n_max_used=float(10 ** x.max()),
    )
    return res


def slope_fit(
    ds: xr.Dataset,
    *,
    n_min: float | None = None,
    n_max: float | None = None,
    summary: xr.Dataset | None = None,
    absolute_sigma: bool = True,
) -> xr.Dataset:
    """Log–log slope of the mean error in n, per mechanism and epsilon.

    Fits ``log10(mean error) = a + b log10 n`` by weighted least squares with
    weights ``1/SE²`` (``log10_mean_error_se``, the delta-method Monte Carlo
    SE), over the n values with at least two finished replicates and
    ``n_min <= n <= n_max``.

    Parameters
    ----------
    ds : xarray.Dataset
        A store (ignored when ``summary`` is given).
    n_min, n_max : float, optional
        Restrict the fit to this range of n (e.g. the asymptotic regime).
    summary : xarray.Dataset, optional
        A result of :func:`error_summary` to reuse.
    absolute_sigma : bool
        True (default): the SEs are the Monte Carlo SEs taken as known, so
        ``slope_se = sqrt((XᵀWX)⁻¹)₁₁``.  False: scale the covariance by the
        reduced chi-square (as :func:`scipy.optimize.curve_fit` does), which
        also absorbs curvature of a non-linear curve.

    Returns
    -------
    xarray.Dataset
        Computed (small) dataset over (mechanism, epsilon) with ``slope``,
        ``slope_se``, ``intercept``, ``intercept_se``, ``n_points``, ``dof``,
        ``chi2`` (weighted residual sum of squares), ``chi2_dof`` and
        ``p_fit`` (``P(χ²_dof ≥ chi2)``; NaN with two points: a line through
        two points cannot be tested), ``curved`` (``p_fit < CURVED_P``),
        ``slope_se_inflated`` (``slope_se·√(χ²/dof)`` when curved, else
        ``slope_se``), ``n_min_used``, ``n_max_used``.  Series with fewer
        than two usable n give NaN.
    """
    if summary is None:
        summary = error_summary(ds)
    y_da = summary["log10_mean_error"]
    se_da = summary["log10_mean_error_se"]
    n = summary["n"]
    keep = np.ones(n.size, dtype=bool)
    if n_min is not None:
        keep &= n.values >= n_min
    if n_max is not None:
        keep &= n.values <= n_max
    y_da, se_da = xr.Dataset({"y": y_da, "se": se_da}).isel(n=np.flatnonzero(keep)).compute().data_vars.values()
    x = np.log10(y_da["n"].values.astype(float))
    y_da = y_da.transpose("mechanism", "epsilon", "n")
    se_da = se_da.transpose("mechanism", "epsilon", "n")
    names = _FIT_FLOATS + ("n_points", "dof")
    shape = (y_da.sizes["mechanism"], y_da.sizes["epsilon"])
    arrays = {name: np.full(shape, np.nan) for name in names}
    for i in range(shape[0]):
        for j in range(shape[1]):
            fit = _wls_line(x, y_da.values[i, j], se_da.values[i, j], absolute_sigma)
            for name in names:
                arrays[name][i, j] = fit[name]
    coords = {"mechanism": y_da["mechanism"].values, "epsilon": y_da["epsilon"].values}
    out = xr.Dataset({name: (("mechanism", "epsilon"), arr) for name, arr in arrays.items()}, coords=coords)
    for name in ("n_points", "dof"):
        out[name] = out[name].astype(np.int64)
    out["curved"] = out["curved"] == 1
    out.attrs.update(
        model="log10(mean error) = intercept + slope * log10(n); WLS, weights 1/SE^2 (delta-method MC SE)",
        absolute_sigma=int(absolute_sigma),
    )
    if n_min is not None:
        out.attrs["n_min"] = n_min
    if n_max is not None:
        out.attrs["n_max"] = n_max
    return out


# --------------------------------------------------------------------------
# coverage (Awan–Slavković Algorithm 4)
# --------------------------------------------------------------------------
_HOWS = ("all", "per_coef", "mean")


def _select_coefs(da: xr.DataArray, coefs: Iterable[int] | slice | None) -> xr.DataArray:
    if coefs is None:
        return da
    if isinstance(coefs, slice):
        return da.isel(coef=coefs)
    return da.sel(coef=list(coefs))


def _hit_rate(inside_c: xr.DataArray, valid_c: xr.DataArray, how: str) -> xr.Dataset:
    """Per-replicate hits -> fraction over replicates, its MC SE and 95 % Wilson interval."""
    if how not in _HOWS:
        raise ValueError(f"how={how!r}; allowed values are {_HOWS}")
    if how == "per_coef":
        hit = xr.where(valid_c, inside_c.astype(float), np.nan)
    else:
        valid = valid_c.all("coef")
        if how == "all":
            per_rep = inside_c.all("coef").astype(float)
        else:
            per_rep = inside_c.astype(float).mean("coef")
        hit = xr.where(valid, per_rep, np.nan)
    k, mean, sd = _moments(hit)
    lo, hi = wilson_interval(mean, k, _Z975)
    return xr.Dataset(
        {
            "coverage": mean,
            "coverage_se": _safe_div(sd, np.sqrt(k)),
            "coverage_lo": lo,
            "coverage_hi": hi,
            "n_valid": k.astype(np.int64),
        }
    )


def coverage(
    ds: xr.Dataset,
    *,
    reference: str | None = None,
    level: float = 0.95,
    how: str = "all",
    coefs: Iterable[int] | slice | None = None,
    stderr: str | None = None,
) -> xr.Dataset:
    """How often a DP estimate falls inside the non-private confidence interval.

    Awan–Slavković Algorithm 4: the non-private ``level`` CI of coefficient j
    is ``reference_j ± z·se_j`` with ``z = Φ⁻¹((1+level)/2)`` (1.96 at 0.95),
    where ``se`` is the variable holding the reference's standard errors (the
    problem's ``reference_stderr``); a DP estimate is inside when
    ``|dp_j − reference_j| <= z·se_j``.  Only replicates finished for both the
    mechanism and the reference count.

    Parameters
    ----------
    reference : str, optional
        Label of the non-private mechanism (default: :func:`reference_label`).
    level : float
        Confidence level of the interval.
    how : {"all", "per_coef", "mean"}
        ``"all"``: fraction of replicates with every selected coefficient
        inside; ``"per_coef"``: the fraction per coefficient (keeps ``coef``);
        ``"mean"``: the fraction of coefficients inside, averaged over
        replicates — Algorithm 4's ``C_DP`` (which uses the slopes only:
        pass ``coefs=slice(1, None)`` to drop an intercept in coef 0).
    coefs : list of int or slice, optional
        Coefficients to use (labels, or positions when a slice).
    stderr : str, optional
        Name of the standard-error variable, dims (n, replicate, coef); default:
        :func:`~kngflow.analysis.declared.reference_stderr`.  ValueError when
        the problem declares none or the store lacks it.

    Returns
    -------
    xarray.Dataset
        Lazy, with ``coverage``, ``coverage_se`` (Monte Carlo SE over
        replicates; zero when every replicate agrees — use the interval),
        ``coverage_lo``/``coverage_hi`` (95 % Wilson interval,
        :func:`wilson_interval`) and ``n_valid`` over (mechanism, n,
        epsilon[, coef]).
    """
    if not 0 < level < 1:
        raise ValueError(f"level={level!r} must lie in (0, 1)")
    ref = reference_label(ds, reference)
    se = _select_coefs(_stderr_variable(ds, stderr), coefs)
    z = float(special.ndtri(0.5 + level / 2))
    est = _select_coefs(masked(ds, "estimate"), coefs)
    ref_est = est.sel(mechanism=ref, drop=True)
    diff = abs(est - ref_est)
    valid_c = diff.notnull() & se.notnull()
    inside_c = diff <= z * se
    out = _hit_rate(inside_c, valid_c, how)
    out.attrs.update(reference=ref, level=level, z=z, how=how)
    return out


def reference_coverage(
    ds: xr.Dataset,
    *,
    reference: str | None = None,
    level: float = 0.95,
    how: str = "all",
    coefs: Iterable[int] | slice | None = None,
    stderr: str | None = None,
) -> xr.Dataset:
    """Empirical coverage of ``theta_star`` by the non-private CI, over (n, epsilon[, coef]).

    The solid line of Awan–Slavković Figure 3 ("how often the true β falls in
    the confidence intervals"); it should be close to ``level``.  ``stderr`` as
    in :func:`coverage`.
    """
    ref = reference_label(ds, reference)
    se = _select_coefs(_stderr_variable(ds, stderr), coefs)
    z = float(special.ndtri(0.5 + level / 2))
    est = _select_coefs(masked(ds, "estimate").sel(mechanism=ref, drop=True), coefs)
    truth = _select_coefs(ds["theta_star"], coefs)
    diff = abs(est - truth)
    valid_c = diff.notnull() & se.notnull()
    out = _hit_rate(diff <= z * se, valid_c, how)
    out.attrs.update(reference=ref, level=level, z=z, how=how)
    return out


# --------------------------------------------------------------------------
# completeness
# --------------------------------------------------------------------------
def format_n(n: float) -> str:
    """``100 -> '10^2'``; other values as integers."""
    n = int(n)
    if n > 0:
        e = round(math.log10(n))
        if e >= 1 and 10**e == n:
            return f"10^{e}"
    return str(n)


def format_epsilon(eps: float) -> str:
    """``0.0625 -> '1/16'``, ``4.0 -> '4'``, others with ``%g``."""
    eps = float(eps)
    if eps > 0 and eps < 1:
        inv = 1.0 / eps
        if abs(inv - round(inv)) < 1e-9:
            return f"1/{int(round(inv))}"
    return f"{eps:g}"


def completeness(ds: xr.Dataset) -> dict[str, Any]:
    """Counts of finished cells (computes only the per-group counts).

    Returns a dict with ``total`` and ``finished`` cells (one cell = one
    mechanism, n, epsilon, replicate), ``failed``, ``n_replicates`` and
    ``per_group`` — a computed DataArray of finished replicates per
    (mechanism, n, epsilon).
    """
    per_group = finished(ds).sum("replicate").astype(np.int64)
    failed = (ds["failed"] == 1).sum() if "failed" in ds else xr.DataArray(0)
    per_group, failed = xr.Dataset({"g": per_group, "f": failed}).compute().data_vars.values()
    return {
        "total": int(ds["done"].size),
        "finished": int(per_group.sum()),
        "failed": int(failed),
        "n_replicates": int(ds.sizes["replicate"]),
        "per_group": per_group,
    }


def describe_completeness(ds: xr.Dataset, info: dict[str, Any] | None = None) -> str:
    """One line such as ``"412 of 1800 cells finished; missing: n=10^7 (0/100 replicates)"``.

    Incomplete (n, epsilon) groups are listed; when the mechanisms differ in
    how far they got, each one is named with its count.
    """
    info = completeness(ds) if info is None else info
    total, fin, R = info["total"], info["finished"], info["n_replicates"]
    pct = 100.0 * fin / total if total else 100.0
    head = f"{fin} of {total} cells finished ({pct:.1f}%)"
    if info["failed"]:
        head += f"; {info['failed']} failed after retries"
    if fin == total:
        return head + "; the store is complete."
    g = info["per_group"].transpose("mechanism", "n", "epsilon")
    several_eps = g.sizes["epsilon"] > 1
    mechs = [str(m) for m in g["mechanism"].values]
    parts = []
    for n in g["n"].values:
        for eps in g["epsilon"].values:
            counts = g.sel(n=n, epsilon=eps).values
            if (counts == R).all():
                continue
            where = f"n={format_n(n)}" + (f", ε={format_epsilon(eps)}" if several_eps else "")
            if (counts == counts[0]).all():
                parts.append(f"{where} ({int(counts[0])}/{R} replicates)")
            else:
                detail = ", ".join(f"{m} {int(c)}/{R}" for m, c in zip(mechs, counts) if c < R)
                parts.append(f"{where} ({detail} replicates)")
    return head + "; missing: " + "; ".join(parts)

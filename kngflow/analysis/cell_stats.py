"""A claim's statistics of the store's cells, each with its Monte Carlo SE.

Every statistic is a smooth functional of the replicates of a cell, so it has an influence
value ``psi_i`` per replicate (mean: ``x_i - mean``; RMSE: ``(x_i^2 - mse) / (2 rmse)``;
median: ``sign(x_i - median)`` times the McKean-Schrader SE times ``sqrt(k)``; coverage: the
replicate's fraction minus the mean).  The Monte Carlo SE of the statistic is
``sd(psi)/sqrt(k)`` (:func:`monte_carlo_se`); keeping the influence values, not just the SE,
lets a contrast between two cells be paired over the replicates finished for both (every
mechanism and every epsilon of a replicate sees the same data set).  What the claims'
evaluation and ``kngflow plan --target-mcse`` both read.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import xarray as xr

from . import summaries as _s
from .claims_file import STATISTICS, ClaimsError

__all__ = ["MIN_REPLICATES", "StoreStatistics", "cell_statistic", "monte_carlo_se"]

#: A comparison needs at least this many (paired) finished replicates; with fewer its
#: Monte Carlo SE is too rough for a z-interval and the comparison stays undecided.
MIN_REPLICATES = 10


class StoreStatistics:
    """The store's arrays a claim needs, loaded once: per (mechanism, n, epsilon, replicate)."""

    def __init__(self, ds: xr.Dataset) -> None:
        for name in ("error", "done"):
            if name not in ds.variables:
                raise ClaimsError(f"the store has no variable {name!r}: claims need 'error' and 'done'")
        self.ds = ds
        self.labels = [str(m) for m in ds["mechanism"].values]
        self.n = [int(v) for v in ds["n"].values]
        self.eps = [float(v) for v in ds["epsilon"].values]
        #: the store's problem axes (dims of ``done`` before mechanism) and their values
        self.axes = tuple(str(d) for d in ds["done"].dims if d not in _CELLS)
        self.axis_values = {a: [_plain(v) for v in ds[a].values] for a in self.axes}
        self.dims = self.axes + _CELLS
        done = (ds["done"] == 1).transpose(*self.dims).values
        err = ds["error"].transpose(*self.dims).values.astype(float)
        self.error = np.where(done & np.isfinite(err), err, np.nan)
        self._coverage: np.ndarray | None = None

    def values(self, statistic: str) -> np.ndarray:
        if statistic != "coverage":
            return self.error
        if self._coverage is None:
            ds = self.ds
            ref = _s.reference_label(ds, required=False)
            se_name = _s.reference_stderr(ds)
            if ref is None or not se_name or se_name not in ds or "estimate" not in ds:
                raise ClaimsError("statistic 'coverage' needs a non-private reference mechanism, 'estimate' and the "
                                  "problem's standard-error variable in the store; allowed here: "
                                  + ", ".join(s for s in STATISTICS if s != "coverage"))
            slopes = slice(1, None) if ds.sizes.get("coef", 1) > 1 else None
            est = _s.masked(ds, "estimate")
            if slopes is not None:
                est = est.isel(coef=slopes)
            se = ds[se_name].isel(coef=slopes) if slopes is not None else ds[se_name]
            diff = abs(est - est.sel(mechanism=ref, drop=True))
            valid = (diff.notnull() & se.notnull()).all("coef")
            frac = (diff <= 1.959963984540054 * se).astype(float).mean("coef")
            frac = xr.where(valid, frac, np.nan).transpose(*self.dims)
            self._coverage = np.asarray(frac.values, dtype=float)
        return self._coverage

    def index(self, label: str, n: int, eps: float, at: tuple = ()) -> tuple[int, ...]:
        return tuple(at) + (self.labels.index(label), self.n.index(n), self.eps.index(eps))

    def points(self) -> list[tuple[tuple, tuple]]:
        """``(indices, values)`` of every point of the problem axes (``[((), ())]`` without axes)."""
        return [(tuple(i), tuple(self.axis_values[a][k] for a, k in zip(self.axes, i)))
                for i in itertools.product(*(range(len(self.axis_values[a])) for a in self.axes))]


_CELLS = ("mechanism", "n", "epsilon", "replicate")


def _plain(v):
    v = v.item() if hasattr(v, "item") else v
    return v


def cell_statistic(x: np.ndarray, statistic: str) -> tuple[float, np.ndarray]:
    """``(value, psi)`` of ``statistic`` over the replicates ``x`` (NaN = missing): the value and
    the per-replicate influence values (NaN where ``x`` is), whose SD over ``sqrt(k)`` is the
    Monte Carlo SE."""
    x = np.asarray(x, dtype=float)
    ok = np.isfinite(x)
    k = int(ok.sum())
    psi = np.full(x.shape, np.nan)
    if k == 0:
        return math.nan, psi
    v = x[ok]
    if statistic in ("mean_error", "coverage"):
        value = float(v.mean())
        psi[ok] = v - value
    elif statistic == "rmse":
        mse = float(np.mean(v**2))
        value = math.sqrt(mse)
        psi[ok] = (v**2 - mse) / (2 * value) if value > 0 else 0.0
    elif statistic == "median_error":
        value = float(np.median(v))
        se = float(_s._median_se_last(v[None, :])[0]) if k >= 3 else math.nan
        psi[ok] = np.sign(v - value) * se * math.sqrt(k)
    else:
        raise ClaimsError(f"unknown statistic {statistic!r}; allowed: {', '.join(STATISTICS)}")
    return value, psi


def monte_carlo_se(psi: np.ndarray) -> float:
    """The Monte Carlo SE of a statistic from its influence values ``psi`` (NaN = missing): their
    SD over ``sqrt(k)``; NaN with fewer than two."""
    ok = np.isfinite(psi)
    k = int(ok.sum())
    return float(np.std(psi[ok], ddof=1) / math.sqrt(k)) if k >= 2 else math.nan

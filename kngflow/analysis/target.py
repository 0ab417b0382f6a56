"""The replicates a target precision needs: :func:`replicates_for_target` from a pilot store,
and ``kngflow plan SPEC --target-mcse X --pilot STORE``'s text (:func:`target_plan`)."""

from __future__ import annotations

import math

import numpy as np
import xarray as xr

from .cell_stats import MIN_REPLICATES, StoreStatistics, cell_statistic
from .claims_file import STATISTICS, ClaimsError
from .report import open_store
from .summaries import format_epsilon, format_n

__all__ = ["MIN_PILOT", "replicates_for_target", "target_plan"]

#: Fewer finished pilot replicates than this in a cell: its SD is too rough to plan from.
MIN_PILOT = MIN_REPLICATES


def replicates_for_target(ds: xr.Dataset, target: float, statistic: str = "mean_error") -> xr.Dataset:
    """Replicates per (mechanism, n, epsilon) that bring the Monte Carlo SE of ``statistic`` to at
    most ``target``, from a pilot store: ``r = ceil((sd/target)^2)`` with ``sd`` the SD of the
    statistic's influence values over the pilot's finished replicates (for ``mean_error`` the SD
    of the error).

    Returns a dataset over (mechanism, n, epsilon) with ``value``, ``sd``, ``mcse`` (the
    pilot's), ``k`` (finished pilot replicates) and ``needed``; ``rule`` says how the count
    was made: ``"sd"``; ``"no spread"`` (sd = 0: the pilot's k is kept, the SE cannot be
    estimated from it); ``"too few"`` (k < :data:`MIN_PILOT`: ``needed`` is NaN).
    """
    if statistic not in STATISTICS:
        raise ClaimsError(f"unknown statistic {statistic!r}; allowed: {', '.join(STATISTICS)}")
    if not target > 0:
        raise ClaimsError(f"the target Monte Carlo SE must be > 0, got {target!r}")
    data = StoreStatistics(ds)
    x = data.values(statistic)
    shape = x.shape[:3]
    out = {name: np.full(shape, np.nan) for name in ("value", "sd", "mcse", "k", "needed")}
    rule = np.full(shape, "sd", dtype=object)
    for idx in np.ndindex(*shape):
        v, psi = cell_statistic(x[idx], statistic)
        ok = np.isfinite(psi)
        k = int(ok.sum())
        sd = float(np.std(psi[ok], ddof=1)) if k >= 2 else math.nan
        out["value"][idx], out["sd"][idx], out["k"][idx] = v, sd, k
        out["mcse"][idx] = sd / math.sqrt(k) if k >= 2 else math.nan
        if k < MIN_PILOT:
            rule[idx] = "too few"
        elif sd == 0:
            rule[idx], out["needed"][idx] = "no spread", k
        else:
            out["needed"][idx] = max(2, math.ceil((sd / target) ** 2))
    coords = {"mechanism": data.labels, "n": data.n, "epsilon": data.eps}
    dims = ("mechanism", "n", "epsilon")
    res = xr.Dataset({k: (dims, v) for k, v in out.items()}, coords=coords)
    res["rule"] = (dims, rule.astype(str))
    res.attrs.update(statistic=statistic, target=float(target))
    return res



def target_plan(pilot, spec, have: int, target: float, statistic: str) -> tuple[list[str], str | None]:
    """``(lines, short)``: the table of replicates needed per cell for a Monte Carlo SE of
    ``statistic`` at most ``target`` (:func:`replicates_for_target` on the
    pilot store ``pilot``), and what the spec file ``spec`` (now ``have`` replicates) should say;
    ``short`` is one line when the pilot has too few finished replicates (then the table only).
    Raises :class:`~kngflow.analysis.claims.ClaimsError` for an unknown statistic or a bad target."""
    res = replicates_for_target(open_store(pilot), target, statistic)
    X = target
    out = []
    out.append(f"target: Monte Carlo SE of {statistic} <= {X:g} in every cell; r = ceil((sd/X)^2) from the pilot "
               f"{pilot} (sd: SD of the statistic's influence values over the finished pilot replicates)")
    rows = []
    flat = res.to_dataframe().reset_index()
    header = f"{'mechanism':<16} {'n':>10} {'epsilon':>8} {'k':>5} {statistic:>12} {'sd':>10} {'MCSE':>10} {'needed':>8}  rule"
    out.append(header)
    for r in flat.itertuples(index=False):
        needed = "—" if r.needed != r.needed else str(int(r.needed))
        out.append(f"{str(r.mechanism):<16} {format_n(r.n):>10} {format_epsilon(r.epsilon):>8} {int(r.k):>5} "
                   f"{r.value:>12.4g} {r.sd:>10.4g} {r.mcse:>10.4g} {needed:>8}  {r.rule}")
        rows.append(r)
    few = [r for r in rows if r.rule == "too few"]
    if few:
        cells = "; ".join(f"{r.mechanism} n={format_n(r.n)} ε={format_epsilon(r.epsilon)} ({int(r.k)})" for r in few[:5])
        return out, (f"the pilot has fewer than 10 finished replicates in {len(few)} cells ({cells}): "
                     "run the pilot further first")
    R = int(max(r.needed for r in rows))
    drivers = sorted((r for r in rows if r.needed == R), key=lambda r: (str(r.mechanism), r.n, r.epsilon))
    names = "; ".join(f"{r.mechanism} n={format_n(r.n)} ε={format_epsilon(r.epsilon)}" for r in drivers[:5])
    names += f"; … {len(drivers) - 5} more" if len(drivers) > 5 else ""
    out.append(f"needed: replicates = {R} (the largest over the grid, which is a product), driven by {names}")
    if R <= have:
        out.append(f"spec: {spec} already has replicates = {have} >= {R}: no change needed")
    else:
        out.append(f"spec: in [grid] of {spec} set  replicates = {R}  (now {have}); then "
                   f"`kngflow run {spec} --store {pilot}` extends the pilot store")
    return out, None

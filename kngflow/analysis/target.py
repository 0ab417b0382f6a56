"""``kngflow plan SPEC --target-mcse X --pilot STORE``: the replicates a target precision needs, as text."""

from __future__ import annotations

from .claims import replicates_for_target
from .report import open_store
from .summaries import format_epsilon, format_n

__all__ = ["target_plan"]


def target_plan(pilot, spec, have: int, target: float, statistic: str) -> tuple[list[str], str | None]:
    """``(lines, short)``: the table of replicates needed per cell for a Monte Carlo SE of
    ``statistic`` at most ``target`` (:func:`~kngflow.analysis.claims.replicates_for_target` on the
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

"""CSS 2013's sample-complexity result, measured: the n that the exponential mechanism (PPCA)
needs for a captured energy q >= 0.9 grows about linearly in d, MOD-SULQ's faster.

Chaudhuri, Sarwate & Sinha (JMLR 2013), Theorems 5-7, for the top eigenvector (k = 1) at a
fixed eigengap: PPCA needs ``n = O(d / (eps alpha gap))`` (up to logarithms), MOD-SULQ needs
``n = Omega(d^(3/2) sqrt(log d) / (eps ...))``.

The claim now lives in a study: ``workflows/pca_dimension.toml`` makes ``d`` a grid axis
(``[grid.problem] d = [8, 16, 32, 64]``, the same data through ``spike_shares = [0.5]``) and
``workflows/pca_dimension.claims.toml`` states it in the claims language (the log-log slopes
of the energy loss along d at fixed n and along n at fixed d; ``kngflow report`` decides it).
This script stays as an independent check of the same law by another route: it measures
the crossing points ``n*`` themselves.

Data: :class:`kngflow.models.pca.problem.PCAProblem` with ``k = 1`` and ``spikes = [d - 1]``, so
that the top eigenvalue ``lambda_1 = 1/6`` and the gap ``lambda_1 - lambda_2 = (1/6)(1 - 1/(d-1))``
stay fixed as ``d`` grows (records in the unit ball: CSS's setting).  Error: the population energy
loss ``1 - q``.  For each ``d`` and each n of the grid ``2^(j/2)``, ``R`` replicates (a fresh
data set each, shared by the two mechanisms) give the mean loss; ``n*`` is where the mean loss
crosses 0.1, interpolated linearly in ``(log n, log loss)`` between the grid points around it.
The slope of ``log n*`` on ``log d`` is fitted by least squares; its standard error is the
standard deviation of the slope over ``B`` bootstrap resamples of the replicates (within each
``(d, n)`` cell).

The claim holds when the exponential mechanism's slope lies in [0.7, 1.3] and MOD-SULQ's
exceeds it by more than three bootstrap SEs of the difference.

    nice -n 10 python benchmarks/pca_sample_complexity.py --reps 40
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from kngflow.api import get_mechanism, get_problem

KINDS = ("exponential", "mod_sulq")
TARGET = 0.1  # energy loss 1 - q at q = 0.9


def losses(d: int, reps: int, epsilon: float, seed: int) -> tuple[np.ndarray, dict]:
    """The n grid and ``{kind: (len(grid), reps)}`` losses, up to the first n where every mean is
    below half the target."""
    problem = get_problem("pca", d=d, k=1, spikes=[float(d - 1)], error_measure="energy_loss")
    mechs = {kind: get_mechanism("pca", kind, hardened=False) for kind in KINDS}  # no PCA kind hardens
    grid, out = [], {kind: [] for kind in KINDS}
    ss = np.random.SeedSequence([seed, d])
    j = 10  # n = 2^5 = 32
    while j <= 44:  # n <= 2^22
        n = int(round(2 ** (j / 2)))
        rows = {kind: np.empty(reps) for kind in KINDS}
        for r, child in enumerate(ss.spawn(reps)):
            data_rng, *mech_rngs = [np.random.default_rng(s) for s in child.spawn(1 + len(KINDS))]
            data = problem.simulate(n, data_rng)
            for kind, rng in zip(KINDS, mech_rngs):
                rows[kind][r] = problem.error(mechs[kind].release(data, epsilon, rng).estimate)
        grid.append(n)
        for kind in KINDS:
            out[kind].append(rows[kind])
        if all(rows[kind].mean() < TARGET / 2 for kind in KINDS):
            break
        j += 1
    return np.array(grid), {kind: np.array(v) for kind, v in out.items()}


def crossing(grid: np.ndarray, means: np.ndarray) -> float:
    """``n*``: the first crossing of TARGET from above, interpolated in (log n, log loss)."""
    for i in range(1, len(grid)):
        if means[i - 1] >= TARGET > means[i]:
            x0, x1 = math.log(grid[i - 1]), math.log(grid[i])
            y0, y1 = math.log(means[i - 1]), math.log(max(means[i], 1e-300))
            return math.exp(x0 + (math.log(TARGET) - y0) * (x1 - x0) / (y1 - y0))
    return math.nan


def slope(ds: list[int], nstar: list[float]) -> float:
    x, y = np.log(np.array(ds, float)), np.log(np.array(nstar, float))
    return float(np.polyfit(x, y, 1)[0])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dims", type=int, nargs="+", default=[4, 8, 16, 32])
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--boot", type=int, default=200)
    ap.add_argument("--seed", type=int, default=20130913)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    runs = {d: losses(d, args.reps, args.epsilon, args.seed) for d in args.dims}
    nstar = {kind: [crossing(runs[d][0], runs[d][1][kind].mean(axis=1)) for d in args.dims] for kind in KINDS}
    print(f"epsilon = {args.epsilon:g}, {args.reps} replicates per (d, n), n on the grid 2^(j/2); "
          f"n* where the mean energy loss 1 - q crosses {TARGET:g}")
    print("| d | " + " | ".join(f"n* {kind}" for kind in KINDS) + " |")
    print("|---|" + "---|" * len(KINDS))
    for i, d in enumerate(args.dims):
        print(f"| {d} | " + " | ".join(f"{nstar[kind][i]:.0f}" for kind in KINDS) + " |")
    rng = np.random.default_rng(args.seed)
    boot = {kind: [] for kind in KINDS}
    for _ in range(args.boot):
        for kind in KINDS:
            ns = []
            for d in args.dims:
                grid, L = runs[d][0], runs[d][1][kind]
                idx = rng.integers(0, L.shape[1], size=(L.shape[0], L.shape[1]))
                ns.append(crossing(grid, np.take_along_axis(L, idx, axis=1).mean(axis=1)))
            boot[kind].append(slope(args.dims, ns) if all(np.isfinite(ns)) else math.nan)
    est = {kind: slope(args.dims, nstar[kind]) for kind in KINDS}
    se = {kind: float(np.nanstd(boot[kind], ddof=1)) for kind in KINDS}
    diff = np.array(boot["mod_sulq"]) - np.array(boot["exponential"])
    se_diff = float(np.nanstd(diff, ddof=1))
    for kind in KINDS:
        print(f"slope of log n* on log d, {kind}: {est[kind]:.2f} ± {se[kind]:.2f} (bootstrap SE, {args.boot} resamples)")
    gap = est["mod_sulq"] - est["exponential"]
    holds = 0.7 <= est["exponential"] <= 1.3 and gap > 3 * se_diff
    print(f"MOD-SULQ's slope minus the exponential mechanism's: {gap:.2f} ± {se_diff:.2f}")
    print(f"claim (exponential slope in [0.7, 1.3], MOD-SULQ's steeper by > 3 SE): {'agrees' if holds else 'disagrees'}")
    print(f"wall time {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

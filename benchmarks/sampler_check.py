"""Sampler check: do the MCMC- and independence-based KNG samplers release their law?

For each 2-D KNG whose release comes from a chain (quantile regression: its default, the
paper's 1000 banded random-walk Metropolis sweeps followed by 50 surrogate-map proposals,
and the Metropolis sweeps alone; logistic regression: the gradient map; the geometric
median: Metropolis and the gradient map) and each ``--n``, one data set is drawn,
``--releases`` releases are made
with the mechanism's sampler (scaled units, as the store keeps them before
``output_scale``), and they are compared with a reference that is exact up to
discretisation: the KNG density ``exp(-a ||grad l_n(theta)||_inf)`` (the mechanism's own
``log_density``) on an 801 × 801 grid around the releases' median (±12 robust SDs per
coordinate), sampled with a uniform jitter inside each cell.  Printed per row:

* seconds per release (one core; the first release, which compiles, is not timed);
* the two-sample KS p-value per coordinate against 20 000 reference draws;
* the SD ratio per coordinate (releases / reference), stuck releases excluded;
* the stuck fraction: releases whose energy exceeds the grid's minimum by more than 60,
  ``(eps / 2 Delta)(||g(theta)|| - min ||g||) > 60``, an event of probability below
  ``e^-35`` under the law (the energy excess of a KNG release is Gamma(d + 1)-like);
* the reference mass within one cell of the grid's edge (the box holds the law when ~0).

The check is only as good as its box: a box that misses the law's mass shows in the edge
mass.  Chains that are stuck far from the mode are outside the box and count as stuck.

Above ``--grid-max`` (default 10^5) the grid's 641 601 exact energies cost too much
(``O(n)`` each): only the seconds and the stuck fraction are printed, with the energy's
lower bound 0 in place of the grid's minimum (``||g|| >= 0``; this counts more releases as
stuck, never fewer).  The releases of a row share one data set and, for the surrogate map,
one surrogate fit (the chains are independent given the data).  Quantile regression's
Metropolis row is skipped with ``--no-metropolis``.

    python benchmarks/sampler_check.py [--n 1000 10000 100000] [--releases 200] [--which quantreg logistic geomedian]
    python benchmarks/sampler_check.py --which quantreg --n 1000000 10000000 --releases 200
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats

STUCK = 60.0
GRID = 801


def grid_reference(mech, data, epsilon, draws, rng, size=20_000):
    """``size`` draws from the grid-normalised log density around ``draws``; also the grid's
    minimum energy and the reference mass on the box's edge cells."""
    centre = np.median(draws, axis=0)
    mad = 1.4826 * np.median(np.abs(draws - centre), axis=0)
    half = 12.0 * np.maximum(mad, 1e-12)
    axes = [c + np.linspace(-1.0, 1.0, GRID) * h for c, h in zip(centre, half)]
    th = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1)
    logp = mech.log_density(data, epsilon, th)
    finite = np.isfinite(logp)
    emin = -float(logp[finite].max())
    p = np.where(finite, np.exp(logp + emin), 0.0)
    p /= p.sum()
    edge = float(p[0].sum() + p[-1].sum() + p[:, 0].sum() + p[:, -1].sum())
    flat = rng.choice(p.size, size=size, p=p.ravel())
    i, j = np.unravel_index(flat, p.shape)
    step = 2.0 * half / (GRID - 1)
    ref = np.column_stack([axes[0][i], axes[1][j]]) + (rng.random((size, 2)) - 0.5) * step
    return ref, emin, edge


def check(name, mech, data, epsilon, draw, releases, seed, grid_max):
    t = time.perf_counter()
    draw(mech, data, epsilon, np.random.default_rng(seed + 2), 1)  # compiles the kernels
    first = time.perf_counter() - t
    t = time.perf_counter()
    out = draw(mech, data, epsilon, np.random.default_rng(seed), releases)
    per = (time.perf_counter() - t) / releases
    rng = np.random.default_rng(seed + 1)
    energy = -mech.log_density(data, epsilon, out)
    if data_n(data) > grid_max:
        stuck = energy > STUCK
        print(f"{name:34s} n={data_n(data):>8d}  {per:7.3f} s  (one release, fit and compile included: "
              f"{first:.2f} s)  energy median {np.median(energy):.2f} max {energy.max():.2f}  "
              f"stuck {int(stuck.sum())}/{releases}", flush=True)
        return
    ref, emin, edge = grid_reference(mech, data, epsilon, out, rng)
    stuck = energy - emin > STUCK
    ok = out[~stuck]
    ks = [stats.ks_2samp(ok[:, k], ref[:, k]).pvalue for k in range(2)]
    sd = [float(np.std(ok[:, k]) / np.std(ref[:, k])) for k in range(2)]
    print(f"{name:34s} n={data_n(data):>8d}  {per:7.3f} s  KS p {ks[0]:.3f} {ks[1]:.3f}  "
          f"SD ratio {sd[0]:.3f} {sd[1]:.3f}  stuck {int(stuck.sum())}/{releases}  edge mass {edge:.1e}", flush=True)


def data_n(data) -> int:
    for attr in ("n",):
        if hasattr(data, attr):
            return int(getattr(data, attr))
    return int(data.X.shape[0])


def metropolis(mech, data, eps, rng, size):
    return mech.draw_metropolis(data, eps, rng, size)[0]


def gradient_map(mech, data, eps, rng, size):
    return mech.draw_gradient_map(data, eps, rng, size)[0]


def surrogate_map(mech, data, eps, rng, size):
    return mech.draw_surrogate_map(data, eps, rng, size)[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    ap.add_argument("--releases", type=int, default=200)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--which", nargs="+", default=["quantreg", "logistic", "geomedian"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--grid-max", type=int, default=100_000, help="largest n checked against the grid")
    ap.add_argument("--no-metropolis", action="store_true", help="skip quantile regression's Metropolis row")
    args = ap.parse_args()
    from kngflow.api import get_mechanism, get_problem

    for n in args.n:
        rng = np.random.default_rng(args.seed + n)
        if "quantreg" in args.which:  # the Figure 2 spec's settings: tau = 1/2, l_inf, ||theta||_1 <= 1, 1000 steps
            prob = get_problem("quantreg", tau=0.5, theta_star=[0.0, -1.0], protocol="paper")
            mech = get_mechanism("quantreg", "kng", norm="linf", bound=1.0, steps=1000, hardened=False)
            data = prob.simulate(n, rng)
            check("quantreg KNG, Metropolis + surrogate map", mech, data, args.epsilon, surrogate_map, args.releases, args.seed,
                  args.grid_max)
            if not args.no_metropolis:
                check("quantreg KNG, Metropolis 1000 steps", mech, data, args.epsilon, metropolis, args.releases,
                      args.seed, args.grid_max)
        if "logistic" in args.which:  # m = 2 (intercept + one covariate)
            prob = get_problem("logistic", beta=[0.5, -1.0])
            mech = get_mechanism("logistic", "kng", norm="linf", hardened=False)
            check("logistic KNG, gradient map", mech, prob.simulate(n, rng), args.epsilon, gradient_map,
                  args.releases, args.seed, args.grid_max)
        if "geomedian" in args.which:
            prob = get_problem("geomedian", d=2)
            data = prob.simulate(n, rng)
            for label, draw, opts in (("Metropolis", metropolis, {}), ("gradient map", gradient_map,
                                                                        {"sampler": "gradient_map"})):
                mech = get_mechanism("geomedian", "kng", norm="linf", hardened=False, **opts)
                check(f"geomedian KNG, {label}", mech, data, args.epsilon, draw, args.releases, args.seed,
                      args.grid_max)


if __name__ == "__main__":
    main()

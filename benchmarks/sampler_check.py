"""Sampler check: do the MCMC- and independence-based KNG samplers release their law?

For each 2-D KNG whose release comes from a chain (quantile regression: its default, the
paper's 1000 banded random-walk Metropolis sweeps followed by 50 surrogate-map proposals,
and the Metropolis sweeps alone; logistic regression: the gradient map; the geometric
median: Metropolis and the gradient map), each ``--n`` and each ``--epsilon``, one data set
is drawn, ``--releases`` releases are made with the mechanism's sampler (scaled units, as
the store keeps them before ``output_scale``, all from one call: the chains are
independent), and they are compared with a reference that is exact up to discretisation:
the KNG density ``exp(-a ||grad l_n(theta)||_inf)`` (the mechanism's own ``log_density``)
on an 801 × 801 grid of cells around the releases' median (±12 robust SDs per coordinate,
cut to the box holding ``Theta``; the whole box when ``Theta``'s radius is below 100
robust SDs, as at small n, where the law has tails across ``Theta``).  Printed per row:

* seconds per release (one core; the first release, which compiles, is not timed);
* the one-sample KS p-value per coordinate against the grid density's marginal CDF
  (piecewise linear across each cell);
* the SD ratio per coordinate (releases / grid marginal), stuck releases excluded;
* with ``--control``, the smaller KS p-value of releases made at 2ε against the same
  grid (the negative control: it must be small);
* the stuck fraction: releases whose energy exceeds the grid's minimum by more than 60,
  ``(eps / 2 Delta)(||g(theta)|| - min ||g||) > 60``, an event of probability below
  ``e^-35`` under the law (the energy excess of a KNG release is Gamma(d + 1)-like);
* the reference mass within one cell of the grid's edge (the box holds the law when ~0;
  at small n the box is ``Theta``'s and its edge cells hold the law's mass there).

The check is only as good as its box: a box that misses the law's mass shows in the edge
mass.  Chains that are stuck far from the mode are outside the box and count as stuck.

Logistic data: below n = 1000 (``--small``), an intercept and one covariate on a grid of
41 levels in [-1, 1] with ``P(y = 1) = sigma(0.5 - x)`` (the design of issue 32's defect:
the gradient map's intercept SD was 9.7 % too large at n = 20); from n = 1000, the
problem's ``beta = (0.5, -1)`` without intercept.

Above ``--grid-max`` (default 10^5) the grid's 641 601 exact energies cost too much
(``O(n)`` each): only the seconds and the stuck fraction are printed, with the energy's
lower bound 0 in place of the grid's minimum (``||g|| >= 0``; this counts more releases as
stuck, never fewer).  The releases of a row share one data set and, for the surrogate map,
one surrogate fit (the chains are independent given the data).  Quantile regression's
Metropolis row is skipped with ``--no-metropolis``.

    python benchmarks/sampler_check.py [--n 1000 10000 100000] [--releases 200] [--which quantreg logistic geomedian]
    python benchmarks/sampler_check.py --which quantreg --n 1000000 10000000 --releases 200
    python benchmarks/sampler_check.py --small   # n = 10 20 50, eps = 1/4 1 4, 4000 releases, 2 eps control
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats

STUCK = 60.0
GRID = 801


def grid_reference(mech, data, epsilon, draws):
    """The grid-normalised density around ``draws``: per coordinate the marginal CDF
    ``(edges, cdf)`` and SD; also the grid's minimum energy and the mass on the box's edge
    cells."""
    centre = np.median(draws, axis=0)
    mad = 1.4826 * np.median(np.abs(draws - centre), axis=0)
    half = 12.0 * np.maximum(mad, 1e-12)
    c0, B = mech.domain(data)
    c0 = np.asarray(c0, dtype=float)
    if B <= 100.0 * float(np.min(mad)):  # a law as wide as Theta (small n): Theta's box, tails and all,
        lo, hi = c0 - B, c0 + B  # its cells still below a quarter of the MAD
    else:  # the robust box, cut to Theta's (B = inf: the robust box)
        lo, hi = np.maximum(centre - half, c0 - B), np.minimum(centre + half, c0 + B)
    edges = [np.linspace(a, b, GRID + 1) for a, b in zip(lo, hi)]
    mids = [0.5 * (e[1:] + e[:-1]) for e in edges]
    th = np.stack(np.meshgrid(*mids, indexing="ij"), axis=-1)
    logp = mech.log_density(data, epsilon, th)
    finite = np.isfinite(logp)
    emin = -float(logp[finite].max())
    p = np.where(finite, np.exp(logp + emin), 0.0)
    p /= p.sum()
    edge = float(p[0].sum() + p[-1].sum() + p[:, 0].sum() + p[:, -1].sum())
    cdfs, sds = [], []
    for j in range(2):
        marg = p.sum(axis=1 - j)
        mean = float(marg @ mids[j])
        width = edges[j][1] - edges[j][0]
        sds.append(np.sqrt(float(marg @ (mids[j] - mean) ** 2) + width**2 / 12.0))  # uniform within a cell
        cdfs.append((edges[j], np.concatenate([[0.0], np.cumsum(marg)])))
    return cdfs, np.array(sds), emin, edge


def ks_pvalues(draws, cdfs):
    """One-sample KS p-value per coordinate against the grid marginals."""
    return [stats.kstest(draws[:, k], lambda v, c=cdfs[k]: np.interp(v, c[0], c[1])).pvalue for k in range(2)]


def check(name, mech, data, epsilon, draw, releases, seed, grid_max, control=False):
    t = time.perf_counter()
    draw(mech, data, epsilon, np.random.default_rng(seed + 2), 1)  # compiles the kernels
    first = time.perf_counter() - t
    t = time.perf_counter()
    out = draw(mech, data, epsilon, np.random.default_rng(seed), releases)
    per = (time.perf_counter() - t) / releases
    energy = -mech.log_density(data, epsilon, out)
    label = f"{name:34s} n={data_n(data):>8d} eps={epsilon:<5g}"
    if data_n(data) > grid_max:
        stuck = energy > STUCK
        print(f"{label}  {per:7.3f} s  (one release, fit and compile included: "
              f"{first:.2f} s)  energy median {np.median(energy):.2f} max {energy.max():.2f}  "
              f"stuck {int(stuck.sum())}/{releases}", flush=True)
        return
    cdfs, sds, emin, edge = grid_reference(mech, data, epsilon, out)
    stuck = energy - emin > STUCK
    ok = out[~stuck]
    ks = ks_pvalues(ok, cdfs)
    sd = np.std(ok, axis=0) / sds
    extra = ""
    if control:
        wrong = draw(mech, data, 2.0 * epsilon, np.random.default_rng(seed + 3), releases)
        extra = f"  2eps control KS p {min(ks_pvalues(wrong, cdfs)):.1e}"
    print(f"{label}  {per:7.4f} s  KS p {ks[0]:.3f} {ks[1]:.3f}  SD ratio {sd[0]:.3f} {sd[1]:.3f}  "
          f"stuck {int(stuck.sum())}/{releases}  edge mass {edge:.1e}{extra}", flush=True)


def logistic_small(n, rng):
    """An intercept and one covariate on a grid of 41 levels in [-1, 1], ``P(y = 1) = sigma(0.5 - x)``."""
    from kngflow.models.logistic.problem import logistic_data

    x = rng.choice(np.linspace(-1.0, 1.0, 41), n)
    X = np.column_stack([np.ones(n), x])
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(0.5 - x)))).astype(np.float64)
    return logistic_data(X, y)


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
    ap.add_argument("--epsilon", type=float, nargs="+", default=[1.0])
    ap.add_argument("--which", nargs="+", default=["quantreg", "logistic", "geomedian"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--grid-max", type=int, default=100_000, help="largest n checked against the grid")
    ap.add_argument("--no-metropolis", action="store_true", help="skip quantile regression's Metropolis row")
    ap.add_argument("--control", action="store_true", help="also release at 2 eps (the negative control)")
    ap.add_argument("--small", action="store_true",
                    help="n = 10 20 50, eps = 1/4 1 4, 4000 releases, the control, no Metropolis-only row")
    args = ap.parse_args()
    if args.small:
        args.n, args.epsilon, args.releases, args.control, args.no_metropolis = [10, 20, 50], [0.25, 1.0, 4.0], 4000, True, True
    from kngflow.api import get_mechanism, get_problem

    for n in args.n:
        rng = np.random.default_rng(args.seed + n)
        rows = []
        if "quantreg" in args.which:  # the Figure 2 spec's settings: tau = 1/2, l_inf, ||theta||_1 <= 1, 1000 steps
            prob = get_problem("quantreg", tau=0.5, theta_star=[0.0, -1.0], protocol="paper")
            mech = get_mechanism("quantreg", "kng", norm="linf", bound=1.0, steps=1000, hardened=False)
            data = prob.simulate(n, rng)
            rows.append(("quantreg KNG, Metropolis + surrogate map", mech, data, surrogate_map))
            if not args.no_metropolis:
                rows.append(("quantreg KNG, Metropolis 1000 steps", mech, data, metropolis))
        if "logistic" in args.which:  # m = 2
            mech = get_mechanism("logistic", "kng", norm="linf", hardened=False)
            data = logistic_small(n, rng) if n < 1000 else get_problem("logistic", beta=[0.5, -1.0]).simulate(n, rng)
            rows.append(("logistic KNG, gradient map", mech, data, gradient_map))
        if "geomedian" in args.which:
            data = get_problem("geomedian", d=2).simulate(n, rng)
            for label, draw, opts in (("Metropolis", metropolis, {}), ("gradient map", gradient_map,
                                                                        {"sampler": "gradient_map"})):
                if label == "Metropolis" and args.no_metropolis:
                    continue
                mech = get_mechanism("geomedian", "kng", norm="linf", hardened=False, **opts)
                rows.append((f"geomedian KNG, {label}", mech, data, draw))
        for name, mech, data, draw in rows:
            for epsilon in args.epsilon:
                check(name, mech, data, epsilon, draw, args.releases, args.seed, args.grid_max, args.control)


if __name__ == "__main__":
    main()

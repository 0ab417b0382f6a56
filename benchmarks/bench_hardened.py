"""Hardened against unhardened releases, measured in one run.

For linear-regression KNG and the exponential mechanism (Figure 1's data, d = 12, ε = 1)
at n = 10^2 ... 10^7: the sampler each release uses, the time of a release (the data's
sufficient statistics computed once; both mechanisms in alternating blocks, the fastest
block of each), the ratio hardened / unhardened, the grid Λ against
the release's public spread, and the variance the snapping adds measured as the ratio
of the releases' per-coordinate variances (hardened / unhardened, same seeds).

    python benchmarks/bench_hardened.py [--releases 400] [--n 100 10000 10000000]

With ``--quantreg``: hardened quantile-regression KNG (Figure 2's data, ε = 1) at each
``--n``, ``--releases`` releases one at a time: seconds per release, the samplers that ran
and the stuck releases (energy ``a ||g(theta)||_inf`` above 60, an event of probability
below e^-35 under the law; the energy's minimum taken as 0, which counts more as stuck).

    python benchmarks/bench_hardened.py --quantreg --n 100000 --releases 2000
    python benchmarks/bench_hardened.py --quantreg --n 1000000 --releases 200

With ``--quantreg-exponential``: the quantile-regression exponential mechanism (Figure 2's
data and settings: exact coordinate Gibbs, 10 sweeps, ε = 1), hardened (Gibbs on the
dyadic lattice) against unhardened, as in the default mode.

    python benchmarks/bench_hardened.py --quantreg-exponential --n 100 10000 100000 --releases 200

With ``--logistic``: logistic-regression KNG (Algorithm 3, m = 7, ε = 1, ℓ∞) at each
``--n``, hardened (the frozen map) and unhardened (the gradient map), against extended
objective perturbation hardened and unhardened (ℓ∞, q = 1/2), ``--releases`` releases of
each in alternating blocks (the fastest block's time per release); ratios to both objective
perturbations, the error ``||release - MLE||_2`` (median) of each, and the guarantee.

    python benchmarks/bench_hardened.py --logistic --n 100000 1000000 --releases 10
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from kngflow.api import get_mechanism, get_problem
from kngflow.mechanisms.hardening import HardeningError


BLOCKS = 10


def releases(mech, data, count: int, seed: int, block: int):
    """Releases ``block * count/BLOCKS ...`` of seed stream ``seed`` and their time per release."""
    out = []
    per = count // BLOCKS
    t0 = time.perf_counter()
    for r in range(block * per, (block + 1) * per):
        out.append(mech.release(data, 1.0, np.random.default_rng([seed, r])))
    return (time.perf_counter() - t0) / per, out


def interleaved(plain, hard, data, count: int):
    """Both mechanisms in alternating blocks (the machine's load hits both alike); the
    fastest block's time per release of each, and all releases."""
    tp, th, rp, rh = [], [], [], []
    for block in range(BLOCKS):
        t, r = releases(plain, data, count, 1, block)
        tp.append(t)
        rp += r
        t, r = releases(hard, data, count, 1, block)
        th.append(t)
        rh += r
    return min(tp), min(th), rp, rh


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--releases", type=int, default=400)
    p.add_argument("--n", type=int, nargs="+", default=[100, 10_000, 1_000_000, 10_000_000])
    p.add_argument("--quantreg", action="store_true", help="stuck releases of hardened quantile-regression KNG")
    p.add_argument("--logistic", action="store_true", help="hardened logistic KNG against objective perturbation")
    p.add_argument("--quantreg-exponential", action="store_true",
                   help="the quantile-regression exponential mechanism (lattice Gibbs hardened)")
    args = p.parse_args(argv)
    if args.quantreg:
        return stuck_quantreg(args.n, args.releases)
    if args.quantreg_exponential:
        return quantreg_exponential(args.n, args.releases)
    if args.logistic:
        return logistic(args.n, args.releases)
    problem = get_problem("linear")
    print(f"{'n':>9} {'mechanism':>11} {'sampler (plain/hard)':>22} {'plain ms':>9} {'hard ms':>8} {'ratio':>6} "
          f"{'grid/spread':>11} {'var ratio':>9}  guarantee")
    for n in args.n:
        data = problem.simulate(n, np.random.default_rng(n))
        for kind in ("kng", "exponential"):
            plain = get_mechanism("linear", kind, hardened=False)
            hard = get_mechanism("linear", kind, hardened=True)
            for m in (plain, hard):  # compile and warm the caches
                m.release(data, 1.0, np.random.default_rng(0))
            tp, th, rp, rh = interleaved(plain, hard, data, args.releases)
            h = hard.hardening(data, 1.0)
            spread = hard.spread(n, data.d, 1.0) * abs(data.scale)
            vp = np.var([r.estimate for r in rp], axis=0)
            vh = np.var([r.estimate for r in rh], axis=0)
            samplers = f"{rp[0].info['sampler']}/{rh[0].info['sampler']}"
            print(f"{n:>9} {kind:>11} {samplers:>22} {tp * 1e3:>9.3f} {th * 1e3:>8.3f} {th / tp:>6.2f} "
                  f"{h.grid / spread:>11.4f} {np.median(vh / vp):>9.4f}  {h.describe(1.0).split(': ')[-1]}")


def quantreg_exponential(ns, count: int) -> None:
    problem = get_problem("quantreg", tau=0.5, theta_star=[0.0, -1.0])
    plain = get_mechanism("quantreg", "exponential", hardened=False, gibbs_sweeps=10)
    hard = get_mechanism("quantreg", "exponential", gibbs_sweeps=10)
    print(f"{'n':>9} {'sampler (plain/hard)':>22} {'plain ms':>9} {'hard ms':>8} {'ratio':>6} {'var ratio':>9}  guarantee")
    for n in ns:
        data = problem.simulate(n, np.random.default_rng(n))
        for m in (plain, hard):  # compile and warm the caches
            m.release(data, 1.0, np.random.default_rng(0))
        tp, th, rp, rh = interleaved(plain, hard, data, count)
        vp = np.var([r.estimate for r in rp], axis=0)
        vh = np.var([r.estimate for r in rh], axis=0)
        samplers = f"{rp[0].info['sampler']}/{rh[0].info['sampler']}"
        print(f"{n:>9} {samplers:>22} {tp * 1e3:>9.3f} {th * 1e3:>8.3f} {th / tp:>6.2f} {np.median(vh / vp):>9.4f}  "
              f"{hard.hardening(data, 1.0).describe(1.0).split(': ')[-1]}", flush=True)


def logistic(ns, count: int) -> None:
    from kngflow.models.logistic.problem import logistic_mle

    problem = get_problem("logistic")
    every = {"kng hardened": get_mechanism("logistic", "kng"),
             "kng": get_mechanism("logistic", "kng", hardened=False),
             "op_ext hardened": get_mechanism("logistic", "objective_ext"),
             "op_ext": get_mechanism("logistic", "objective_ext", hardened=False)}
    for n in ns:
        data = problem.simulate(n, np.random.default_rng(n))
        mle = logistic_mle(data)
        mechs = dict(every)
        for k, m in list(mechs.items()):  # compile and warm the caches
            try:
                m.release(data, 1.0, np.random.default_rng(0))
            except HardeningError as err:
                print(f"logistic n={n:>8d} {k:>16}: cannot release: {err}", flush=True)
                del mechs[k]
        times = {k: [] for k in mechs}
        errors = {k: [] for k in mechs}
        samplers = {k: set() for k in mechs}
        for block in range(BLOCKS):
            for k, m in mechs.items():
                t, rels = releases(m, data, count, 1, block)
                times[k].append(t)
                errors[k] += [float(np.linalg.norm(r.estimate - mle)) for r in rels]
                samplers[k] |= {r.info["sampler"] for r in rels}
        best = {k: min(v) for k, v in times.items()}
        for k in mechs:
            print(f"logistic n={n:>8d} {k:>16}: {best[k]:8.4f} s/release  sampler {sorted(samplers[k])}  "
                  f"error median {np.median(errors[k]):.3e}", flush=True)
        h = mechs["kng hardened"].hardening(data, 1.0)
        ratios = ", ".join(f"/ {k} {best['kng hardened'] / best[k]:.2f}" for k in best if k != "kng hardened")
        print(f"logistic n={n:>8d} hardened KNG {ratios}; {h.describe(1.0).split(': ')[-1]}", flush=True)


def stuck_quantreg(ns, count: int) -> None:
    problem = get_problem("quantreg", tau=0.5, theta_star=[0.0, -1.0])
    mech = get_mechanism("quantreg", "kng", steps=1000)
    for n in ns:
        data = problem.simulate(n, np.random.default_rng(n))
        mech.release(data, 1.0, np.random.default_rng(0))  # compile
        t0 = time.perf_counter()
        rels = [mech.release(data, 1.0, np.random.default_rng([7, r])) for r in range(count)]
        per = (time.perf_counter() - t0) / count
        theta = np.array([r.estimate for r in rels]) / mech.output_scale(data)
        energy = -mech.log_density(data, 1.0, theta)
        samplers = {s: sum(r.info["sampler"] == s for r in rels) for s in {r.info["sampler"] for r in rels}}
        print(f"quantreg KNG hardened n={n:>8d}  {per:7.3f} s/release  samplers {samplers}  "
              f"energy median {np.median(energy):.2f} max {energy.max():.2f}  stuck {int((energy > 60).sum())}/{count}  "
              f"{mech.hardening(data, 1.0).describe(1.0).split(': ')[-1]}", flush=True)


if __name__ == "__main__":
    main()

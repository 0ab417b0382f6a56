"""Benchmark: logistic KNG by the gradient map against extended objective perturbation.

One logistic-regression data set (Algorithm 3, m = 7 unless ``--m``) of ``--n`` records
(default 10^6), ε = 1 (``--epsilon``), ℓ∞, on one core (numba's threading layer is not
used by these kernels; run with ``taskset -c 0`` to pin it).  Prints, per release:

* KNG's wall time with the default sampler (the gradient map, ``--proposals`` proposals),
  its acceptance rate, proposals, and ``||release - MLE||_2``;
* extended objective perturbation's (ℓ∞, q = 1/2) time on the same data and error;
* their ratio, and the time of one gradient and one Hessian pass for scale.

The first release of each mechanism compiles the kernels and is not timed.  With
``--metropolis S`` it also times one preconditioned Metropolis release of ``S`` sweeps
(today's studies use 1000: minutes at n = 10^6).

    python benchmarks/bench_gradient_map.py [--n 1000000] [--m 7] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--m", type=int, default=7)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--proposals", type=int, default=None, help="gradient-map proposals (default: the mechanism's)")
    ap.add_argument("--metropolis", type=int, default=0, help="also time a Metropolis release of this many sweeps")
    args = ap.parse_args()

    from kngflow.api import get_mechanism
    from kngflow.models.logistic.problem import PAPER_BETA, logistic_gradient, logistic_hessian, logistic_mle
    from kngflow.api import get_problem

    beta = list(PAPER_BETA) if args.m == 7 else list(np.linspace(-1.0, 1.0, args.m))
    p = get_problem("logistic", beta=beta)
    data = p.simulate(args.n, np.random.default_rng(1))
    mle = logistic_mle(data)
    eps = args.epsilon
    g, H = np.empty(args.m), np.empty((args.m, args.m))
    logistic_gradient(mle, (data.X, data.y), g)
    logistic_hessian(mle, data.X, H)
    t = time.perf_counter()
    for _ in range(5):
        logistic_gradient(mle, (data.X, data.y), g)
    t_grad = (time.perf_counter() - t) / 5
    t = time.perf_counter()
    for _ in range(5):
        logistic_hessian(mle, data.X, H)
    t_hess = (time.perf_counter() - t) / 5
    print(f"logistic n={args.n} m={args.m} eps={eps}: one gradient pass {t_grad * 1e3:.1f} ms, "
          f"one Hessian pass {t_hess * 1e3:.1f} ms")

    opts = {"hardened": False}  # as a spec on synthetic data (hardened KNG runs Metropolis)
    if args.proposals is not None:
        opts["proposals"] = args.proposals
    mechs = [("kng (gradient map)", get_mechanism("logistic", "kng", **opts)),
             ("objective_ext linf q=0.5", get_mechanism("logistic", "objective_ext", norm="linf", q=0.5, hardened=False))]
    if args.metropolis:
        mechs.append((f"kng (metropolis, {args.metropolis} sweeps)",
                      get_mechanism("logistic", "kng", sampler="metropolis", steps=args.metropolis, hardened=False)))
    times = {}
    for label, mech in mechs:
        mech.release(data, eps, np.random.default_rng(0))  # compile
        reps = 1 if "metropolis" in label else args.repeats
        ts, errs, accs, steps = [], [], [], []
        for r in range(reps):
            t = time.perf_counter()
            rel = mech.release(data, eps, np.random.default_rng(100 + r))
            ts.append(time.perf_counter() - t)
            errs.append(float(np.linalg.norm(rel.estimate - mle)))
            accs.append(rel.info["acceptance"])
            steps.append(rel.info["steps"])
        times[label] = float(np.median(ts))
        print(f"  {label:34s} {times[label]:8.3f} s/release (median of {reps}; min {min(ts):.3f})  "
              f"sampler={rel.info['sampler']} acceptance={np.mean(accs):.3f} steps={np.mean(steps):.0f}  "
              f"|release - MLE|_2={np.mean(errs):.2e}")
    kng, op = times["kng (gradient map)"], times["objective_ext linf q=0.5"]
    print(f"  ratio KNG / objective_ext = {kng / op:.2f}; KNG target <= 5 s: {'met' if kng <= 5.0 else 'NOT met'}")


if __name__ == "__main__":
    main()

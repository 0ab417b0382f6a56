"""One KNG-paper cell (linear regression, d = 12) against the RNG floor and naive numpy.

Prints, measured in this one run:

* wall time and peak RSS of one cell at n = 10^7: data generation into sufficient
  statistics plus the non-private, KNG (ℓ∞), exponential-mechanism and objective-
  perturbation releases at ε = 1 (the process's peak RSS includes Python, numpy and
  numba themselves, measured in a fresh subprocess);
* the RNG floor for the same draws (11·n uniforms + n normals with numpy);
* at n = 10^6, the speed ratio against a straightforward numpy implementation of the
  same cell: materialised X, OLS by lstsq, KNG and the exponential mechanism by the
  paper's one-at-a-time Metropolis (10 000 sweeps) evaluating the gradient / loss over
  the data at every step, objective perturbation by scipy.optimize.  The naive
  Metropolis is timed over a few sweeps and scaled to 10 000 (its cost per sweep is
  constant); everything else is timed in full.

Usage: ``python benchmarks/bench_cell.py [--n 10000000] [--naive-n 1000000]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import numpy as np

D = 12
STEPS = 10_000


def run_cell(n: int, seed: int = 0, sampler: str = "auto") -> dict:
    from kngflow.api import get_mechanism, get_problem

    problem = get_problem("linear", d=D)
    mechs = {
        "nonprivate": get_mechanism("linear", "nonprivate"),
        "kng": get_mechanism("linear", "kng", norm="linf", sampler=sampler, steps=STEPS),
        "exponential": get_mechanism("linear", "exponential", sampler=sampler, steps=STEPS),
        "objective": get_mechanism("linear", "objective"),
    }
    ss = np.random.SeedSequence(seed)
    t0 = time.perf_counter()
    stats = problem.simulate(n, np.random.default_rng(ss.spawn(1)[0]))
    t_data = time.perf_counter() - t0
    out = {"data_s": t_data, "mechanisms": {}}
    for i, (name, mech) in enumerate(mechs.items()):
        t = time.perf_counter()
        rel = mech.release(stats, 1.0, np.random.default_rng([seed, i]))
        out["mechanisms"][name] = {
            "seconds": time.perf_counter() - t,
            "sampler": rel.info["sampler"],
            "error": problem.error(rel.estimate),
        }
    out["total_s"] = time.perf_counter() - t0
    return out


def child(n: int) -> None:
    """Run one cell in this (fresh) process after warming the jit cache; print JSON."""
    import resource

    run_cell(1000)  # load compiled kernels from the cache (or compile once)
    res = run_cell(n)
    res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(res))


def rng_floor(n: int, chunk: int = 1 << 16, uniforms: int = D - 1) -> float:
    """Seconds numpy needs, on one core, for ``n`` rows of ``uniforms`` uniforms and one normal."""
    rng = np.random.default_rng(0)
    U = np.empty((chunk, uniforms))
    t = time.perf_counter()
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        rng.random(out=U[:m])
        rng.standard_normal(m)
    return time.perf_counter() - t


def naive_cell(n: int, sweeps_timed: int = 3) -> dict:
    """The same cell written directly in numpy, as one would without kngflow."""
    from scipy.optimize import minimize

    rng = np.random.default_rng(0)
    theta_star = np.concatenate([[0.0], -1 + 2 * np.arange(D - 1) / (D - 1)])
    t0 = time.perf_counter()
    X = np.column_stack([np.ones(n), rng.uniform(-1, 1, (n, D - 1))])
    Y = X @ theta_star + rng.standard_normal(n)
    Y = Y / np.max(np.abs(Y))
    t_data = time.perf_counter() - t0

    t = time.perf_counter()
    np.linalg.lstsq(X, Y, rcond=None)
    t_ols = time.perf_counter() - t

    eps, B = 1.0, 1.0

    def kng_energy(th):
        return eps / (2 * 4 * (1 + B)) * np.max(np.abs(-2 * X.T @ (Y - X @ th)))

    def exp_energy(th):
        return eps / (2 * (1 + B) ** 2) * np.sum((Y - X @ th) ** 2)

    def metropolis_time(energy):
        th = np.zeros(D)
        e = energy(th)
        t = time.perf_counter()
        for _ in range(sweeps_timed):
            for j in range(D):
                prop = th.copy()
                prop[j] += 0.01 * rng.standard_normal()
                if np.abs(prop).sum() <= B:
                    ep = energy(prop)
                    if np.log(rng.random()) < e - ep:
                        th, e = prop, ep
        return (time.perf_counter() - t) / sweeps_timed * STEPS

    t_kng = metropolis_time(kng_energy)
    t_exp = metropolis_time(exp_energy)

    t = time.perf_counter()
    gamma = 2 * D / np.expm1(eps / 2)
    b = rng.standard_normal(D)
    b *= rng.gamma(D, 8 * (1 + B) / eps) / np.abs(b).max()
    cons = {"type": "ineq", "fun": lambda th: B - np.abs(th).sum()}
    minimize(
        lambda th: np.sum((Y - X @ th) ** 2) + gamma / 2 * th @ th + b @ th,
        np.zeros(D),
        constraints=[cons],
        method="SLSQP",
    )
    t_obj = time.perf_counter() - t
    total = t_data + t_ols + t_kng + t_exp + t_obj
    return {"data_s": t_data, "ols_s": t_ols, "kng_metropolis_s": t_kng, "exp_metropolis_s": t_exp,
            "objective_s": t_obj, "total_s": total}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10**7)
    ap.add_argument("--naive-n", type=int, default=10**6)
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(args.child)
        return

    out = subprocess.run([sys.executable, __file__, "--child", str(args.n)], capture_output=True, text=True,
                         check=True)
    cell = json.loads(out.stdout.strip().splitlines()[-1])
    floor = rng_floor(args.n)
    print(f"one cell, n = {args.n:.0e}, d = {D}, all four mechanisms, one process")
    print(f"  data -> sufficient statistics : {cell['data_s']:8.3f} s")
    for name, m in cell["mechanisms"].items():
        print(f"  {name:<12} ({m['sampler']:<10}): {m['seconds']:8.4f} s   error {m['error']:.4f}")
    print(f"  total wall time               : {cell['total_s']:8.3f} s")
    print(f"  RNG floor (same draws, numpy) : {floor:8.3f} s   ratio total/floor = {cell['total_s'] / floor:.2f}")
    print(f"  peak RSS of the process       : {cell['peak_rss_mb']:8.1f} MB (budget 400 MB)")

    n2 = args.naive_n
    ours = min((run_cell(n2) for _ in range(3)), key=lambda r: r["total_s"])
    ours_mcmc = run_cell(n2, sampler="metropolis")
    naive = naive_cell(n2)
    print(f"\nsame cell at n = {n2:.0e} against straightforward numpy (materialised X, loss over the data"
          f" at every Metropolis step, {STEPS} sweeps)")
    print(f"  naive numpy                   : {naive['total_s']:10.2f} s  "
          f"(data {naive['data_s']:.2f}, KNG MH {naive['kng_metropolis_s']:.1f}, "
          f"EM MH {naive['exp_metropolis_s']:.1f}, objective {naive['objective_s']:.2f})")
    print(f"  kngflow, default samplers     : {ours['total_s']:10.3f} s   speed-up {naive['total_s'] / ours['total_s']:8.0f}x")
    print(f"  kngflow, forced Metropolis    : {ours_mcmc['total_s']:10.3f} s   speed-up "
          f"{naive['total_s'] / ours_mcmc['total_s']:8.0f}x")


if __name__ == "__main__":
    main()

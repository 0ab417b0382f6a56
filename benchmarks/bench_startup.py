"""What a new process pays before its first release, and what a short chain pays per call.

Every Dask worker and every ``kngflow`` command is a new process.  For each mechanism
below, a fresh Python process builds it, simulates a small data set and times its first
release (numba loads the kernels from its disk cache, or compiles what it cannot cache)
and its second; once with the disk cache warm, once with an empty one (``NUMBA_CACHE_DIR``
set to a new folder: everything compiled).  "warm / steady" is what start-up costs a worker
in units of a release; "cold / warm" what the disk cache saves.

Then the chain loop: one linear-regression Gibbs chain of one sweep (n = 30, d = 3, the
audits' workload: tens of thousands of short chains) through
:func:`kngflow.models.linear.sampler.gibbs_chains`, against the same sweeps run from one
jitted loop (no Python between chains): the ratio is the per-call overhead.

    python benchmarks/bench_startup.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

CASES = [
    ("linear", "kng", {}),
    ("quantreg", "kng", {}),
    ("logistic", "kng", {}),
    ("logistic", "kng", {"sampler": "metropolis"}),
    ("svm", "kng", {}),
    ("geomedian", "kng", {}),
]

CHILD = """
import json, sys, time
t0 = time.perf_counter()
import numpy as np
from kngflow.api import get_mechanism, get_problem
problem, kind, options = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
data = get_problem(problem).simulate(200, np.random.default_rng(0))
mech = get_mechanism(problem, kind, hardened=False, **options)
t1 = time.perf_counter()
mech.release(data, 1.0, np.random.default_rng(1))
t2 = time.perf_counter()
mech.release(data, 1.0, np.random.default_rng(2))
t3 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "first": t2 - t1, "second": t3 - t2}))
"""


def child(problem, kind, options, env):
    out = subprocess.run([sys.executable, "-c", CHILD, problem, kind, json.dumps(options)], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def startup():
    print("first release in a new process (s): warm disk cache, empty disk cache; steady = second release")
    print(f"{'mechanism':38s} {'warm':>7s} {'cold':>7s} {'steady':>8s} {'warm/steady':>12s} {'cold/warm':>10s}")
    for problem, kind, options in CASES:
        env = dict(os.environ)
        child(problem, kind, options, env)  # fill the disk cache
        warm = child(problem, kind, options, env)
        with tempfile.TemporaryDirectory() as empty:
            cold = child(problem, kind, options, {**env, "NUMBA_CACHE_DIR": empty})
        name = f"{problem} {kind} {options or ''}".strip()
        print(f"{name:38s} {warm['first']:7.2f} {cold['first']:7.2f} {warm['second']:8.4f} "
              f"{warm['first'] / warm['second']:12.0f} {cold['first'] / warm['first']:10.1f}")


def chain_loop(chains=20_000):
    import numba

    from kngflow.api import get_problem
    from kngflow.kernels.metropolis import new_tuner
    from kngflow.models.linear.sampler import KIND_KNG_LINF, _gibbs_start, _gibbs_sweeps, gibbs_chains

    @numba.njit
    def in_one_loop(rng, G, c, a, B, kind, out):
        d = c.shape[0]
        cap = 2 * d + 2
        state = (np.empty(d), new_tuner(d), G, c, a, B, kind, 0.0, np.empty(d), np.empty(d), np.empty(cap),
                 np.empty(cap), np.empty(cap), np.empty(cap), np.empty(d), np.zeros(1))
        for k in range(out.shape[0]):
            _gibbs_start(rng, None, None, state, k)
            _gibbs_sweeps(rng, None, None, state, 1)
            out[k] = state[0]

    stats = get_problem("linear", d=3, theta_star=[0.1, -0.2, 0.3]).simulate(30, np.random.default_rng(0))
    out = np.empty((chains, 3))
    one = np.empty((1, 3))
    in_one_loop(np.random.default_rng(0), stats.G, stats.c, 1.0, 1.0, KIND_KNG_LINF, out[:10])
    gibbs_chains(np.random.default_rng(0), stats.G, stats.c, 1.0, 1.0, KIND_KNG_LINF, 1, one)
    t = time.perf_counter()
    in_one_loop(np.random.default_rng(1), stats.G, stats.c, 1.0, 1.0, KIND_KNG_LINF, out)
    jitted = (time.perf_counter() - t) / chains
    rng = np.random.default_rng(1)
    t = time.perf_counter()
    for _ in range(chains):
        gibbs_chains(rng, stats.G, stats.c, 1.0, 1.0, KIND_KNG_LINF, 1, one)
    called = (time.perf_counter() - t) / chains
    print(f"\none-sweep Gibbs chain (n = 30, d = 3), {chains} chains: {called * 1e6:.1f} µs a call of gibbs_chains, "
          f"{jitted * 1e6:.2f} µs inside one jitted loop; ratio {called / jitted:.1f}")


if __name__ == "__main__":
    startup()
    chain_loop()

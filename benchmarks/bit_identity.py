"""Every shipped spec, reduced, run by this tree and by another revision: are the stores identical?

For each ``workflows/*.toml`` (claims files aside) of this tree, ``kngflow run`` of a reduced
grid — the spec's first ``--replicates`` replicates at its ``--sizes`` smallest sample sizes,
every mechanism and ε — writes one store with this tree's code and one with the code of
``--base`` (a git revision, checked out into a temporary worktree), each on ``--workers``
local workers.  Every variable of the two stores but the wall-clock ``seconds`` must be equal
element for element (NaN equal to NaN), with the same coordinates.  A spec that ``--base``
does not have is reported as new and skipped.  Prints one line per spec and exits 1 when
any store differs or a run fails.

    python benchmarks/bit_identity.py [--base HEAD] [--only smoke pca] [--replicates 2] [--sizes 2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
#: variables that measure the machine, not the result
TIMINGS = ("seconds",)


def run(tree: Path, spec: Path, store: Path, replicates: int, sizes: int, workers: int) -> subprocess.CompletedProcess:
    """``kngflow run`` of ``spec`` reduced, with the code of ``tree``."""
    sys.path.insert(0, str(ROOT))
    try:
        from kngflow.sweep.spec import load_spec
    finally:
        sys.path.pop(0)
    ns = sorted(load_spec(spec).n)[:sizes]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, "-m", "kngflow.cli", "run", str(spec), "--store", str(store), "--workers", str(workers),
           "--replicates", str(replicates), "--n", ",".join(str(n) for n in ns), "--no-dashboard", "--no-progress"]
    return subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)


def differences(a: Path, b: Path) -> list[str]:
    """Names of the variables or coordinates in which the stores at ``a`` and ``b`` differ."""
    import xarray as xr

    x, y = xr.open_zarr(a), xr.open_zarr(b)
    bad = [f"coordinate {c}" for c in set(x.coords) | set(y.coords)
           if c not in x.coords or c not in y.coords or not np.array_equal(x[c].values, y[c].values)]
    for v in sorted(set(x.data_vars) | set(y.data_vars)):
        if v in TIMINGS:
            continue
        if v not in x or v not in y:
            bad.append(f"{v} (in one store only)")
            continue
        p, q = x[v].values, y[v].values
        if p.shape != q.shape or not np.array_equal(p, q, equal_nan=p.dtype.kind == "f"):
            bad.append(v)
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="HEAD", help="git revision to compare with (default HEAD)")
    ap.add_argument("--only", nargs="*", help="spec names (default: every shipped spec)")
    ap.add_argument("--replicates", type=int, default=2)
    ap.add_argument("--sizes", type=int, default=2, help="the spec's smallest sample sizes to run")
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    specs = sorted(p for p in (ROOT / "workflows").glob("*.toml") if not p.name.endswith(".claims.toml"))
    if args.only:
        specs = [p for p in specs if p.stem in args.only]
    failed = 0
    with tempfile.TemporaryDirectory(prefix="kngflow-bitid-") as tmp:
        base = Path(tmp) / "base"
        subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(base), args.base], cwd=ROOT, check=True)
        try:
            for spec in specs:
                if not (base / "workflows" / spec.name).exists():
                    print(f"{spec.stem:28s} new (not in {args.base})")
                    continue
                started = time.perf_counter()
                stores = {}
                for name, tree in (("base", base), ("tree", ROOT)):
                    stores[name] = Path(tmp) / f"{spec.stem}.{name}.zarr"
                    proc = run(tree, tree / "workflows" / spec.name, stores[name], args.replicates, args.sizes,
                               args.workers)
                    if proc.returncode:
                        last = (proc.stdout + proc.stderr).strip().splitlines()[-1:]
                        print(f"{spec.stem:28s} run failed with the {name}'s code: {last}")
                        failed += 1
                        break
                else:
                    bad = differences(stores["base"], stores["tree"])
                    failed += bool(bad)
                    print(f"{spec.stem:28s} {'identical' if not bad else 'DIFFER: ' + ', '.join(bad)} "
                          f"({time.perf_counter() - started:.0f} s)", flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, check=False)
    print(f"{len(specs) - failed} of {len(specs)} specs: identical stores or new" if failed else
          f"all {len(specs)} specs: identical stores (or new)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Full privacy-audit table of every shipped linear-regression mechanism (README table).

For each mechanism: the exact audit where the law is computable (KNG and the exponential
mechanism: grid-normalised density, pair search over 1000 candidates; objective
perturbation: the K-norm noise in closed form), the black-box audit of the estimate at ε,
and negative controls — the exact audit at 2ε (3ε where 2ε stays within ε, see the
README), the closed-form audit at 2ε, and the black-box audit at 2ε repeated over
several seeds (its power is the share of seeds flagged).  Then the non-private estimator,
the paper protocol and the side-channel audit on a pair where exact KNG's tries differ.

    python benchmarks/audit_full.py [--draws 20000] [--seeds 3] [--d 2]

Prints a Markdown table; takes tens of minutes on one core.
"""

from __future__ import annotations

import argparse
import time

from kngflow.audit import blackbox_audit, exact_audit, knorm_audit, parse_pair, side_channel_audit
from kngflow.api import get_mechanism, get_problem

EPS = 1.0
CONFIGS = (
    [("kng", {"norm": n}) for n in ("l1", "l2", "linf")]
    + [("exponential", {}), ("objective", {})]
    + [("objective_ext", {"norm": n, "q": q}) for n in ("l1", "l2", "linf") for q in (0.25, 0.5, 0.75)]
)


def label(kind, opts):
    return kind + ("" if not opts else "(" + ", ".join(f"{k}={v}" for k, v in opts.items()) + ")")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=20_000)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--d", type=int, default=2)
    args = ap.parse_args()
    prob = get_problem("linear", d=args.d, protocol="public_bound", y_bound=1.0)
    paper = get_problem("linear", d=args.d, protocol="paper")
    bb = dict(draws=args.draws, pilot=args.draws // 10, candidates=8, score_draws=200)
    print(f"d = {args.d}, declared epsilon = {EPS}, black-box: {args.draws} releases per data set, "
          f"alpha = 1e-5, power over {args.seeds} seeds\n")
    print("| mechanism | audit | loss at ε (exact / lower bound) | negative control | caught | black-box bound at ε "
          "| black-box at 2ε: bounds (power) | seconds |")
    print("|---|---|---|---|---|---|---|---|")
    for kind, opts in CONFIGS:
        t0 = time.perf_counter()
        mech = get_mechanism("linear", kind, **opts)
        if hasattr(mech, "log_density") and args.d <= 2:
            ok = exact_audit(mech, prob, EPS)
            neg = exact_audit(mech, prob, EPS, run_epsilon=2 * EPS, pairs=[ok.pair])
            control = "exact, run at 2ε"
            if neg.passed:
                neg = exact_audit(mech, prob, EPS, run_epsilon=3 * EPS, pairs=[ok.pair])
                control = f"exact, run at 2ε: {exact_audit(mech, prob, EPS, run_epsilon=2 * EPS, pairs=[ok.pair]).bound:.3f}; at 3ε"
            audit = f"exact (±{ok.tolerance:.1e})"
        else:
            ok = knorm_audit(mech, prob, EPS)
            neg = knorm_audit(mech, prob, EPS, run_epsilon=2 * EPS)
            control = "closed form, run at 2ε"
            audit = (f"closed form (noise {ok.details['noise_max']:.3f} ≤ {ok.details['noise_limit']:g}, "
                     f"Jacobian {ok.details['jacobian_max']:.3f} ≤ {ok.details['jacobian_limit']:g})")
        bb_ok = blackbox_audit(mech, prob, EPS, seed=0, **bb)
        bb_neg = [blackbox_audit(mech, prob, EPS, run_epsilon=2 * EPS, seed=s, **bb) for s in range(args.seeds)]
        power = sum(not r.passed for r in bb_neg) / len(bb_neg)
        print(f"| {label(kind, opts)} | {audit} | {ok.bound:.3f} ({'pass' if ok.passed else 'FLAGGED'}) "
              f"| {control}: {neg.bound:.3f} | {'yes' if not neg.passed else 'no'} "
              f"| {bb_ok.bound:.3f} ({'pass' if bb_ok.passed else 'FLAGGED'}) "
              f"| {', '.join(f'{r.bound:.2f}' for r in bb_neg)} ({power:.0%}) | {time.perf_counter() - t0:.0f} |",
              flush=True)
    t0 = time.perf_counter()
    res = blackbox_audit(get_mechanism("linear", "nonprivate"), prob, EPS, seed=0, **bb)
    print(f"| nonprivate | black-box | {res.bound:.3f} ({'pass' if res.passed else 'FLAGGED'}) | — | — | — | — "
          f"| {time.perf_counter() - t0:.0f} |")
    for kind in ("kng", "exponential", "objective"):
        t0 = time.perf_counter()
        res = blackbox_audit(get_mechanism("linear", kind), paper, EPS, seed=0, **{**bb, "candidates": 12})
        print(f"| {kind}, paper protocol | black-box | {res.bound:.3f} ({'pass' if res.passed else 'FLAGGED'}) "
              f"| — | — | — | — | {time.perf_counter() - t0:.0f} |")
    print()
    pair = parse_pair("14*(1,-0.5,-1) + (1,-1,1) -> (1,1,-1)", 3)
    if args.d == 2:
        for kind in ("kng", "exponential"):
            res = side_channel_audit(get_mechanism("linear", kind), prob, EPS, pair=pair, draws=args.draws // 2,
                                     pilot=args.draws // 20)
            print(res.summary() + "\n", flush=True)


if __name__ == "__main__":
    main()

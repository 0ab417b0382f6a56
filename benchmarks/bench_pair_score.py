"""Time of one score of the black-box audit's pair search, against its reference form.

The search scores every swap of declared records from two small samples of releases
(:func:`kngflow.audit.events.best_predicted`).  The score is the predicted bound of the
best event that :func:`~kngflow.audit.events.select_events` would choose on those samples
(one event, ``SCORE_THRESHOLDS`` thresholds a statistic); ``best_predicted`` computes it for
every statistic and orientation in one call.  On Laplace samples of ``--size`` releases per side in
1, 2, 6 and 8 dimensions this checks that both give the same score, to the bit, and
prints the time of each and their ratio, measured in this run.

    python benchmarks/bench_pair_score.py [--size 100] [--repeat 300]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from kngflow.audit.events import SCORE_THRESHOLDS, best_predicted, select_events, statistics


def reference(a, b, n, level):
    events = select_events(statistics(a, b, cheap=True), a, b, n, level, keep=1, thresholds=SCORE_THRESHOLDS)
    return events[0].predicted if events else 0.0


def per_call(fn, repeat, *args) -> float:
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn(*args)
    return (time.perf_counter() - t0) / repeat


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=100, help="releases per side (the search's smallest samples: 100)")
    ap.add_argument("--repeat", type=int, default=300)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    n, level = 2_000, 0.05 / 8
    print("d | reference (ms) | best_predicted (ms) | ratio")
    for d in (1, 2, 6, 8):
        a = rng.laplace(size=(args.size, d))
        b = rng.laplace(size=(args.size, d)) + 0.3
        assert best_predicted(a, b, n, level) == reference(a, b, n, level)
        t_ref = per_call(reference, args.repeat, a, b, n, level)
        t_new = per_call(best_predicted, args.repeat, a, b, n, level)
        print(f"{d} | {t_ref * 1e3:.3f} | {t_new * 1e3:.3f} | {t_ref / t_new:.2f}")


if __name__ == "__main__":
    main()

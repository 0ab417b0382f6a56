"""kngflow's estimators against diffprivlib's: the same records, the same ε, measured in one run.

Both libraries calibrate these releases to neighbouring data sets of the same size that
differ in one record (replace-one), and both are given the same declared record domain
(rows in the unit ℓ2 ball).  Sections:

* ``logistic``: scikit-learn's breast-cancer data (n = 569, m = 30).  A repetition is one
  stratified 70/30 split (seed ``r``; columns standardised with the training part's means
  and deviations, rows scaled to unit ℓ2 norm) on which every row makes ``--fits`` fits
  (seeds ``r * fits + j``), their held-out accuracies averaged: the split is shared by
  every row (the comparison is paired on it), the fits average the mechanisms' noise.  At
  each ε, ``--reps`` repetitions of diffprivlib's
  ``LogisticRegression(epsilon=ε, data_norm=1, C=C)`` and of
  ``kngflow.estimators.LogisticRegression(epsilon=ε, mechanism=K, data_norm="l2", radius=1)``
  for every registered kind ``K`` of problem ``"logistic"`` (the ERM kinds with option
  ``reg`` get the same ``C``, i.e. ``reg = 1 / (C n)``; KNG and Kifer et al.'s objective
  perturbation have no ``reg``), each with its default hardening: held-out accuracy
  (mean ± standard error over the repetitions) and the CPU time of one fit (one release;
  CPU time, since the 2-core machine is shared).  Pure ε-DP
  kinds form the verdict; (ε, δ) kinds are printed apart and take no part in it, and so
  does one diagnostic row: ``objective_chaudhuri`` taking Algorithm 2's second branch
  (``eps' = eps/2`` with the extra ridge) wherever that leaves the noise more budget than
  the first, which diffprivlib does and kngflow's mechanism, following the algorithm to
  the letter, does not by default (its option ``slack_rule="larger"`` where the package has
  it, otherwise emulated through ``C``: :func:`chaudhuri_delta_branch_C`).
* ``pca``: scikit-learn's digits (rows centred on the data's mean, then scaled to unit ℓ2
  norm; k = 1 and 2) and a spiked model (:class:`kngflow.models.pca.problem.PCAProblem`,
  n = 5000, d = 20, k = 1, records in the unit ball): the captured-energy ratio
  ``q = tr(V'AV) / tr(V_k'AV_k)`` (``A = X'X / n``, ``V_k`` its top-k eigenvectors) of
  kngflow's ``PCA`` (every kind; ``hardened=False``, since no PCA kind declares a
  hardening) and of diffprivlib's ``PCA(epsilon=ε, data_norm=1, centered=True)``, and the
  CPU time of one fit.  Each
  diffprivlib fit runs under a ``--timeout`` (SIGALRM: its Bingham sampler's acceptance
  collapses at larger ``ε n``); a cell stops at its first fit over the limit.
* ``separable``: linearly separable records (n = 1000 and 10000, m = 5, in the box
  ``[-1, 1]^5`` and in the unit ℓ2 ball), logistic KNG (``kngflow.api.get_mechanism``)
  hardened (the default) against ``hardened=False`` at ε = 1: releases in 10 alternating
  blocks, the fastest block's time per release of each, and their ratio.

Verdict rule: with ``D = mean_kngflow - mean_diffprivlib``, kngflow "matches or beats
within one SE" when ``D >= -SE``, and it is "ahead" when ``D > SE``; ``SE`` is the standard
error of ``D``: for logistic regression that of the mean of the paired per-split
differences, for PCA (fits independent) ``sqrt(SE_kngflow^2 + SE_diffprivlib^2)``.  For logistic regression kngflow's side is its best pure ε-DP kind at that
ε (the most accurate of several, which favours kngflow a little); for PCA it is the
exponential mechanism (the only pure ε-DP kind).  A diffprivlib cell that did not finish
counts as kngflow ahead.

    python benchmarks/bench_vs_diffprivlib.py [--reps 10] [--fits 5] [--pca-reps REPS] \\
        [--epsilon 0.1 0.5 1 2] [--sections logistic pca separable] [--C 1.0] [--timeout 10]

The numbers of docs/performance.md: ``--sections pca separable --reps 30 --pca-reps 100
--timeout 20``, then ``--sections logistic --reps 30 --fits 5`` at ``--C 1`` and ``--C 0.25``.  Needs diffprivlib
(``pip install -e ".[bench]"``); without it the script says so in one line and exits with
status 2.  diffprivlib 0.6.6, its newest release, does not import with scikit-learn >= 1.8
(the extra pins scikit-learn below 1.8): the script exits with status 2 there too.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import platform
import signal
import sys
import time
import warnings
from datetime import date
from typing import NoReturn

import numpy as np

SECTIONS = ("logistic", "pca", "separable")
BLOCKS = 10


class FitTimeout(Exception):
    """A fit ran past its time limit."""


def load_diffprivlib():
    """The ``diffprivlib`` package, or exit with status 2 and a one-line reason."""
    import sklearn

    try:
        import diffprivlib
        from diffprivlib import models
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] == "diffprivlib":
            _exit2('diffprivlib is not installed: pip install -e ".[bench]"')
        raise
    except ImportError as exc:
        _exit2(f"diffprivlib does not import with scikit-learn {sklearn.__version__} ({exc}); "
               'diffprivlib 0.6.6 needs scikit-learn < 1.8: pip install -e ".[bench]" in its own environment')
    try:
        models.LogisticRegression(epsilon=1.0, data_norm=1.0)
    except TypeError as exc:
        _exit2(f"diffprivlib {diffprivlib.__version__} does not run with scikit-learn {sklearn.__version__} ({exc}); "
               'it needs scikit-learn < 1.8: pip install -e ".[bench]" in its own environment')
    return diffprivlib


def _exit2(message: str) -> NoReturn:
    print(f"bench_vs_diffprivlib: {message}", file=sys.stderr)
    sys.exit(2)


@contextlib.contextmanager
def time_limit(seconds: float):
    """Raise :class:`FitTimeout` in the main thread after ``seconds`` (SIGALRM)."""
    def handler(signum, frame):
        raise FitTimeout

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def summary(values) -> tuple[float, float]:
    """``(mean, standard error)`` of ``values``."""
    v = np.asarray(values, dtype=np.float64)
    se = float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else math.nan
    return float(v.mean()), se


def verdict(k: tuple[float, float], d: tuple[float, float]) -> tuple[str, bool]:
    """The module docstring's rule: ``(label, matches or beats within one SE)``."""
    diff, se = k[0] - d[0], math.hypot(k[1], d[1])
    if diff > se:
        return f"kngflow ahead (D = {diff:+.3f}, SE {se:.3f})", True
    if diff >= -se:
        return f"within one SE (D = {diff:+.3f}, SE {se:.3f})", True
    return f"diffprivlib ahead (D = {diff:+.3f}, SE {se:.3f})", False


def cell(mean_se: tuple[float, float], seconds: float) -> str:
    return f"{mean_se[0]:.3f} ± {mean_se[1]:.3f} {seconds * 1e3:6.0f} ms"


def kinds(problem: str) -> tuple[list[str], list[str]]:
    """``(pure ε-DP kinds, (ε, δ) kinds)`` of ``problem``, from the registry (non-private left out)."""
    from kngflow import api, registry

    pure, approx = [], []
    for kind in registry.kind_names(problem):
        mech = api.get_mechanism(problem, kind, hardened=False)
        if mech.private:
            (pure if mech.privacy_claim().delta == 0 else approx).append(kind)
    return pure, approx


# ----------------------------------------------------------------------------- logistic
def breast_cancer(seed: int = 0):
    """``(X_train, X_test, y_train, y_test)`` of the stratified 70/30 split ``seed``:
    columns standardised with the training part's statistics, rows on the unit sphere."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import Normalizer, StandardScaler

    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=seed, stratify=y)
    scaler = StandardScaler().fit(X_train)
    unit = Normalizer()
    return unit.transform(scaler.transform(X_train)), unit.transform(scaler.transform(X_test)), y_train, y_test


def paired_verdict(k, d) -> tuple[str, bool]:
    """:func:`verdict` on per-repetition accuracies paired by split: ``D`` and the standard
    error of the mean of the differences."""
    diff, se = summary(np.asarray(k) - np.asarray(d))
    if diff > se:
        return f"kngflow ahead (D = {diff:+.3f}, SE {se:.3f})", True
    if diff >= -se:
        return f"within one SE (D = {diff:+.3f}, SE {se:.3f})", True
    return f"diffprivlib ahead (D = {diff:+.3f}, SE {se:.3f})", False


def chaudhuri_delta_branch_C(C: float, epsilon: float) -> float:
    """The ``C`` with which ``objective_chaudhuri`` (rows in the unit ℓ2 ball, ``c = 1/4``) runs
    Algorithm 2's second branch (``eps' = eps/2``, total ridge ``c / (n (e^{eps/4} - 1))``)
    wherever that leaves the noise more than the first branch's ``eps - 2 log(1 + c C)``:
    ``min(C, (e^{eps/4} - 1) / c)`` (at the minimum the two branches coincide)."""
    return min(C, math.expm1(epsilon / 4.0) / 0.25)


def logistic(dpl, epsilons, reps: int, fits: int, C: float) -> bool:
    from kngflow import registry
    from kngflow.estimators import LogisticRegression

    splits = [breast_cancer(r) for r in range(reps)]
    n, m = splits[0][0].shape
    pure, approx = kinds("logistic")
    with_reg = {k for k in pure + approx if "reg" in registry.mechanism_class("logistic", k).option_names()}
    y_test = splits[0][3]
    print(f"\n## Logistic regression, breast cancer: n = {n} train / {y_test.size} test, m = {m}, "
          f"rows in the unit l2 ball; {reps} stratified splits (seeds 0-{reps - 1}), {fits} fits per split and row")
    print(f"C = {C:g} for diffprivlib and for kngflow's kinds with a ridge ({', '.join(sorted(with_reg))}: "
          f"reg = 1/(C n) = {1 / (C * n):.4g}); majority class {max(y_test.mean(), 1 - y_test.mean()):.3f} of the test set")
    print("cells: held-out accuracy mean ± standard error over the splits (each split's accuracy the mean of its fits), "
          "CPU time of one fit (one release); [hardened]: every fit's release was hardened")

    def run(make, eps):
        acc, secs, hardened = [], [], set()
        for r, (X_train, X_test, y_train, y_test) in enumerate(splits):
            split = []
            for j in range(fits):
                model = make(eps, r * fits + j)
                t0 = time.process_time()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # diffprivlib's notes (none expected with data_norm given)
                    model.fit(X_train, y_train)
                secs.append(time.process_time() - t0)
                split.append(model.score(X_test, y_test))
                hardened.add(getattr(model, "hardened_", None))
            acc.append(float(np.mean(split)))
        return acc, float(np.mean(secs)), hardened

    def kng(kind, c_of=lambda eps: C, options=None):
        return lambda eps, r: LogisticRegression(epsilon=eps, mechanism=kind, data_norm="l2", radius=1.0,
                                                 C=c_of(eps) if kind in with_reg else None, random_state=r,
                                                 options=options)

    if "slack_rule" in registry.mechanism_class("logistic", "objective_chaudhuri").option_names():
        better = ("option slack_rule='larger'", kng("objective_chaudhuri", options={"slack_rule": "larger"}))
    else:  # the same law: at C = min(C, (e^(eps/4) - 1) / c) the first branch's eps' is eps/2
        better = ("emulated by C = min(C, (e^(eps/4) - 1) / c)",
                  kng("objective_chaudhuri", lambda eps: chaudhuri_delta_branch_C(C, eps)))
    groups = {
        "": {"diffprivlib": lambda eps, r: dpl.models.LogisticRegression(
            epsilon=eps, data_norm=1.0, C=C, random_state=r, accountant=dpl.BudgetAccountant())}
            | {f"kngflow {k}": kng(k) for k in pure},
        "(eps, delta) kinds, not in the verdict:": {f"kngflow {k} (delta 1e-5)": kng(k) for k in approx},
        f"diagnostic, not in the verdict: Algorithm 2's second branch wherever it is better ({better[0]}):": {
            "kngflow objective_chaudhuri, better branch": better[1]},
    }
    rows = {name: make for group in groups.values() for name, make in group.items()}
    for name, make in rows.items():  # compile the kernels and warm the caches
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            make(1.0, 0).fit(splits[0][0], splits[0][2])
    results = {name: {} for name in rows}
    states = {}
    for eps in epsilons:
        for name, make in rows.items():
            accuracy, seconds, states[name] = run(make, eps)
            results[name][eps] = (accuracy, seconds)
    labels = {name: name + (" [hardened]" if states[name] == {True} else "") for name in rows}
    width = max(len(label) for label in labels.values()) + 1
    print(f"{'':{width}}" + "".join(f"{f'eps = {e:g}':>25}" for e in epsilons))
    for heading, group in groups.items():
        if heading:
            print(heading)
        for name in group:
            print(f"{labels[name]:{width}}" + "".join(f"{cell(summary(results[name][e][0]), results[name][e][1]):>25}"
                                                      for e in epsilons))
    ok = True
    pure_rows = [f"kngflow {k}" for k in pure]
    for eps in epsilons:
        best = max(pure_rows, key=lambda name: np.mean(results[name][eps][0]))
        text, passed = paired_verdict(results[best][eps][0], results["diffprivlib"][eps][0])
        ok &= passed
        print(f"eps = {eps:g}: best pure eps-DP kngflow kind {best.split(' ', 1)[1]} "
              f"{np.mean(results[best][eps][0]):.3f} vs diffprivlib {np.mean(results['diffprivlib'][eps][0]):.3f}: "
              f"{'PASS' if passed else 'FAIL'}, {text}")
    print(f"logistic verdict: kngflow's best pure eps-DP kind matches or beats diffprivlib within one SE at every eps: "
          f"{'yes' if ok else 'no'}")
    return ok


# ----------------------------------------------------------------------------- PCA
def digits_rows() -> np.ndarray:
    from sklearn.datasets import load_digits

    X = load_digits().data.astype(np.float64)
    X -= X.mean(axis=0)
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def spiked_rows(n: int = 5000, d: int = 20) -> np.ndarray:
    """``n`` records ``x = Q (a * t)`` of :class:`~kngflow.models.pca.problem.PCAProblem` (d, k = 1,
    its default spike), every one in the unit ball."""
    from kngflow.api import get_problem

    problem = get_problem("pca", d=d, k=1)
    t = np.random.default_rng(20).uniform(-1.0, 1.0, size=(n, d))
    return t @ (problem.rotation * problem.scales).T


def captured(components: np.ndarray, X: np.ndarray) -> float:
    """``q = tr(V'AV) / tr(V_k'AV_k)`` with ``A = X'X / n`` and ``V`` = ``components.T``."""
    A = X.T @ X / X.shape[0]
    k = components.shape[0]
    return float(np.trace(components @ A @ components.T) / np.linalg.eigvalsh(A)[::-1][:k].sum())


def pca(dpl, epsilons, reps: int, timeout: float) -> bool:
    """The PCA section; ``reps`` fits per cell (``--pca-reps``)."""
    from kngflow.estimators import PCA

    pure, approx = kinds("pca")
    sets = [("digits", digits_rows(), 1), ("digits", digits_rows(), 2), ("spiked", spiked_rows(), 1)]
    print(f"\n## PCA: captured energy q (mean ± SE over {reps} fits) and CPU time of one fit; rows in the unit l2 ball")
    print("kngflow: PCA(k, epsilon=eps, mechanism=K, hardened=False) -- no PCA kind declares a hardening, so the "
          "estimator refuses unless hardened=False is given")
    print(f"diffprivlib: PCA(k, epsilon=eps, data_norm=1, centered=True), each fit limited to {timeout:g} s "
          "(a cell stops at its first fit over the limit)")
    names = ["diffprivlib"] + [f"kngflow {k}" for k in pure] + [f"kngflow {k} (delta 1e-5)" for k in approx]
    width = max(len(name) for name in names) + 1
    for kind in pure + approx:  # compile
        PCA(1, epsilon=1.0, mechanism=kind, hardened=False, random_state=0).fit(sets[-1][1])
    ok = True
    verdicts = []
    for label, X, k in sets:
        n, d = X.shape
        print(f"\n{label}: n = {n}, d = {d}, k = {k}")
        print(f"{'':{width}}" + "".join(f"  {f'eps = {e:g}':>31}" for e in epsilons))
        out = {name: {} for name in names}
        for eps in epsilons:
            qs, secs, finished = [], [], True
            for r in range(reps):
                model = dpl.models.PCA(k, epsilon=eps, data_norm=1.0, centered=True, random_state=r,
                                       accountant=dpl.BudgetAccountant())
                t0 = time.process_time()
                try:
                    with time_limit(timeout), warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        model.fit(X.copy())
                except FitTimeout:
                    finished = False
                    break
                secs.append(time.process_time() - t0)
                qs.append(captured(model.components_, X))
            out["diffprivlib"][eps] = (summary(qs), float(np.mean(secs))) if finished else (None, len(qs))
            for kind in pure + approx:
                name = f"kngflow {kind}" + ("" if kind in pure else " (delta 1e-5)")
                qs, secs = [], []
                for r in range(reps):
                    model = PCA(k, epsilon=eps, mechanism=kind, hardened=False, random_state=r)
                    t0 = time.process_time()
                    model.fit(X)
                    secs.append(time.process_time() - t0)
                    qs.append(captured(model.components_, X))
                out[name][eps] = (summary(qs), float(np.mean(secs)))
        for name in names:
            cells = []
            for eps in epsilons:
                value = out[name][eps]
                cells.append(cell(*value) if value[0] is not None else
                             f"did not finish in {timeout:g} s" + (f" ({value[1]} done)" if value[1] else ""))
            print(f"{name:{width}}" + "".join(f"  {c:>31}" for c in cells))
        for eps in epsilons:
            kq, dq = out[f"kngflow {pure[0]}"][eps][0], out["diffprivlib"][eps][0]
            if dq is None:
                text, passed = f"diffprivlib did not finish in {timeout:g} s", True
            else:
                text, passed = verdict(kq, dq)
            ahead = dq is None or (kq[0] - dq[0]) > math.hypot(kq[1], dq[1])
            verdicts.append(ahead)
            ok &= passed
            print(f"{label} k = {k}, eps = {eps:g}: {pure[0]} {kq[0]:.3f}"
                  f"{'' if dq is None else f' vs diffprivlib {dq[0]:.3f}'}: {text}")
    print(f"pca verdict: kngflow's {pure[0]} mechanism leads (ahead by more than one SE, or diffprivlib did not "
          f"finish) in {sum(verdicts)} of {len(verdicts)} cells; matches or beats within one SE in every cell: "
          f"{'yes' if ok else 'no'}")
    return ok


# ----------------------------------------------------------------------------- separable
def separable(reps: int, epsilon: float = 1.0) -> None:
    from kngflow.api import get_mechanism, logistic_data

    per = max(1, reps // BLOCKS)
    print(f"\n## Separable data, logistic KNG hardened vs hardened=False: m = 5, y = 1{{x'b > 0}}, eps = {epsilon:g}, "
          f"{BLOCKS} alternating blocks of {per} release(s), the fastest block")
    print(f"{'domain':>8} {'n':>6} {'hardened s':>11} {'float64 s':>10} {'ratio':>7}  samplers")
    beta = np.array([1.0, -1.0, 0.5, 0.0, 2.0])
    hard, plain = get_mechanism("logistic", "kng"), get_mechanism("logistic", "kng", hardened=False)
    for data_norm in ("linf", "l2"):
        for n in (1000, 10000):
            X = np.random.default_rng(n).uniform(-1.0, 1.0, size=(n, 5))
            if data_norm == "l2":
                X /= math.sqrt(5.0)  # the box [-1, 1]^5 scaled into the unit ball
            data = logistic_data(X, (X @ beta > 0).astype(np.float64), data_norm=data_norm)
            for m in (hard, plain):  # compile and warm the caches
                m.release(data, epsilon, np.random.default_rng(0))
            best = {"hard": math.inf, "plain": math.inf}
            samplers = {"hard": set(), "plain": set()}
            for block in range(BLOCKS):
                for key, m in (("hard", hard), ("plain", plain)):
                    t0 = time.perf_counter()
                    for r in range(block * per, (block + 1) * per):
                        samplers[key].add(m.release(data, epsilon, np.random.default_rng([1, r])).info.get("sampler"))
                    best[key] = min(best[key], (time.perf_counter() - t0) / per)
            print(f"{data_norm:>8} {n:>6} {best['hard']:>11.4f} {best['plain']:>10.4f} "
                  f"{best['hard'] / best['plain']:>6.2f}x  {'/'.join(sorted(map(str, samplers['hard'])))} vs "
                  f"{'/'.join(sorted(map(str, samplers['plain'])))}", flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=10,
                   help="splits per cell (logistic), fits per cell (pca), releases (separable)")
    p.add_argument("--fits", type=int, default=5, help="fits per split and row (logistic)")
    p.add_argument("--epsilon", type=float, nargs="+", default=[0.1, 0.5, 1.0, 2.0])
    p.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    p.add_argument("--C", type=float, default=1.0, help="inverse regularisation of both libraries (diffprivlib's default)")
    p.add_argument("--pca-reps", type=int, default=None, help="fits per PCA cell (default: --reps)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds allowed to one diffprivlib PCA fit")
    args = p.parse_args(argv)
    if args.pca_reps is None:
        args.pca_reps = args.reps
    if min(args.reps, args.pca_reps) < 2:
        p.error("--reps and --pca-reps must be at least 2 (a standard error needs two fits)")
    if args.fits < 1:
        p.error("--fits must be at least 1")
    dpl = load_diffprivlib() if {"logistic", "pca"} & set(args.sections) else None
    import sklearn

    import kngflow

    print(f"# kngflow vs diffprivlib, {date.today().isoformat()}, {platform.node() or 'this machine'}: "
          f"{os.cpu_count()} cores, Python {platform.python_version()}, numpy {np.__version__}, "
          f"scikit-learn {sklearn.__version__}, diffprivlib {getattr(dpl, '__version__', '-')}, "
          f"kngflow {getattr(kngflow, '__version__', '?')}")
    ok = True
    if "logistic" in args.sections:
        ok &= logistic(dpl, args.epsilon, args.reps, args.fits, args.C)
    if "pca" in args.sections:
        ok &= pca(dpl, args.epsilon, args.pca_reps, args.timeout)
    if "separable" in args.sections:
        separable(args.reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())

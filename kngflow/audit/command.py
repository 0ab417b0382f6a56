"""``kngflow audit MECHANISM --problem PROBLEM``: audit a mechanism's privacy from the command line.

MECHANISM is a built-in kind of the problem, a name registered through the
``kngflow.mechanisms`` entry points, or a ``package.module:Class`` reference; PROBLEM
likewise (:mod:`kngflow.registry`).  The problem is built with its ``audit_options`` (its
``audit_defaults`` under the ``--problem-option`` values), the mechanism with its
``--option`` values.  Which audits run follows from the mechanism's privacy claim
(:func:`kngflow.audit.exact.audit_plan`; ``docs/contracts.md``, "Audits"): the exact audit
where the law is computable (a ``Density`` in 1-D/2-D, ``StatisticNoise`` or
``GradientNoise`` in closed form), the accountant audit of a ``Composed`` claim, then always
the black-box audit of the released record, and with ``--side-channel`` the side-channel
audit of the other outputs.  Prints, per audit, the privacy loss (exact, or a lower
confidence bound), the adjacent pair used and a verdict; the black-box audit adds its
power statement (the smallest loss on its pair and events it flags w.p. >= 0.9).
``--target-power L`` draws until a loss of L would be flagged; ``--workers N`` (a local
Dask cluster) and ``--scheduler ADDRESS`` draw the black-box releases as Dask tasks, with
the same bound as in one process.
Exit status: 0 every audit passed, 1 a privacy violation was flagged, 2 bad input (one line
on stderr: an unknown or broken plug-in, a problem without an audit record domain, a
mechanism whose release fails or returns something other than a ``Release`` of ``d``
coefficients).
"""

from __future__ import annotations

import contextlib
import math
import sys
import time

__all__ = ["add_parser", "run"]

EXIT_OK, EXIT_FLAGGED, EXIT_BAD_INPUT = 0, 1, 2
#: Releases per data set of the black-box and bit-level audits when ``--draws`` is not given.
DEFAULT_DRAWS = 50_000
#: The draws a time budget may lower the default to, largest first: steps of 2 to 2.5, so
#: that the timing's variation from one run to the next (10-20 %) seldom changes the step.
BUDGET_DRAWS = (50_000, 20_000, 10_000, 5_000, 2_000, 1_000)


def add_parser(subparsers) -> None:
    """Register the ``audit`` subcommand on an argparse ``subparsers`` object."""
    p = subparsers.add_parser(
        "audit",
        help="privacy audit of a mechanism (exact, black-box, side-channel)",
        description="Audit MECHANISM on adjacent data sets of the problem's declared domain: the exact "
        "privacy loss where the law is computable, the accountant's epsilon of an (epsilon, delta) "
        "mechanism's calibrated noise, a Clopper-Pearson lower bound on the loss from releases. "
        "Exit 0: passed, 1: flagged, 2: bad input.",
        allow_abbrev=False,  # "--d 3" (an option it once had) must not be read as "--draws 3"
    )
    p.add_argument("mechanism", metavar="MECHANISM",
                   help="mechanism: a kind of the problem, an entry-point name or a 'package.module:Class' reference")
    p.add_argument("--problem", required=True, metavar="NAME",
                   help="problem: a built-in name, an entry-point name or a 'package.module:Class' reference")
    p.add_argument("--problem-option", action="append", default=[], metavar="KEY=VALUE",
                   help="an option of the problem, the value in TOML syntax (e.g. d=3 or data_norm=l2; default: "
                   "the problem's audit defaults); repeatable")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="an option of the mechanism, the value in TOML syntax (e.g. norm=linf, bound=2 or "
                   "steps=1000); repeatable")
    p.add_argument("--epsilon", default="1.0", metavar="E", help="declared epsilon (default 1)")
    p.add_argument("--run-epsilon", metavar="E", help="epsilon the mechanism runs at (negative control; default --epsilon)")
    p.add_argument("--draws", metavar="N", help="releases per data set for the black-box and bit-level audits (default "
                   "50000, fewer where a slow mechanism would not fit --time-budget)")
    p.add_argument("--time-budget", default="240", metavar="SECONDS", help="without --draws: the CPU seconds the "
                   "audit should take (its wall time on cores of its own); the default draws are lowered (to 1000 "
                   "at least) where releases timed on an audit data set say 50000 would take longer (default 240)")
    p.add_argument("--target-power", metavar="L", help="draw until a privacy loss of L on the chosen pair and events "
                   "would be flagged with probability >= 0.9 (at least --draws, at most --max-draws releases per data set)")
    p.add_argument("--max-draws", default="10000000", metavar="N", help="most releases per data set --target-power may "
                   "draw (default 10000000)")
    p.add_argument("--workers", metavar="N", help="draw the black-box audit's releases on a local Dask cluster of N "
                   "worker processes (the bound does not depend on N)")
    p.add_argument("--scheduler", metavar="ADDRESS", help="draw them on the Dask cluster of this scheduler "
                   "(tcp://host:port); its workers must import the mechanism's module")
    p.add_argument("--pair", metavar="PAIR", help="adjacent pair, e.g. '14*(1,-0.5,-1) + (1,-1,1) -> (1,1,-1)' (default: searched)")
    p.add_argument("--side-channel", action="store_true", help="also audit every output besides the estimate")
    p.add_argument("--seed", default="0", metavar="S", help="seed of the audit (default 0)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


class _BadInput(Exception):
    pass


def _number(name: str, text, kind=float, minimum=None):
    try:
        value = kind(text)
    except (TypeError, ValueError):
        raise _BadInput(f"--{name} must be {'an integer' if kind is int else 'a number'}, got {text!r}") from None
    if kind is float and not math.isfinite(value):
        raise _BadInput(f"--{name} must be finite, got {text!r}")
    if minimum is not None and not value >= minimum:
        raise _BadInput(f"--{name} must be >= {minimum}, got {text!r}")
    return value


def _key_values(name: str, items: list[str]) -> dict:
    """``KEY=VALUE`` strings as a dict; a value that is not TOML is taken as a string."""
    import tomllib

    out = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip().isidentifier():
            raise _BadInput(f"--{name} must be KEY=VALUE, got {item!r}")
        try:
            value = tomllib.loads(f"v = {text}")["v"]
        except tomllib.TOMLDecodeError:
            value = text.strip()
        out[key.strip()] = value
    return out


def _line(exc: BaseException) -> str:
    return str(exc).replace("\n", " ").strip()


def _failure(exc: BaseException) -> str:
    """``Type: message`` of an exception, on one line."""
    text = _line(exc)
    return type(exc).__name__ + (f": {text}" if text else "")


def _setup(args):
    from kngflow.api import get_mechanism, get_problem
    from kngflow.mechanisms.claims import PrivacyClaim
    from kngflow.registry import problem_class

    from .pairs import audit_view, parse_pair

    epsilon = _number("epsilon", args.epsilon)
    if not epsilon > 0:
        raise _BadInput(f"--epsilon must be > 0, got {args.epsilon!r}")
    run_eps = epsilon if args.run_epsilon is None else _number("run-epsilon", args.run_epsilon)
    if not run_eps > 0:
        raise _BadInput(f"--run-epsilon must be > 0, got {args.run_epsilon!r}")
    args.draws_given = args.draws is not None
    draws = _number("draws", args.draws, int, 100) if args.draws_given else DEFAULT_DRAWS
    args.budget = _number("time-budget", args.time_budget, float, 0)
    seed = _number("seed", args.seed, int, 0)
    _cluster_arguments(args, draws)
    opts = _key_values("option", args.option)
    given = _key_values("problem-option", args.problem_option)
    kind, name = args.mechanism, args.problem
    try:
        problem = get_problem(name, **problem_class(name).audit_options(given))
    except (TypeError, ValueError) as exc:  # unknown problem (PluginError), bad or unknown option
        raise _BadInput(_line(exc)) from None
    except Exception as exc:  # noqa: BLE001 - a plug-in problem failing to build, named
        raise _BadInput(f"problem {name!r} cannot be built: {_failure(exc)}") from None
    try:
        mechanism = get_mechanism(name, kind, **opts)
    except (TypeError, ValueError) as exc:  # unknown kind, broken plug-in (PluginError), bad or unknown option
        raise _BadInput(_line(exc)) from None
    except Exception as exc:  # noqa: BLE001 - a plug-in mechanism failing to build, named
        raise _BadInput(f"mechanism {kind!r} cannot be built: {_failure(exc)}") from None
    try:
        claim = mechanism.privacy_claim()
    except Exception as exc:  # noqa: BLE001 - the plug-in's failure, named
        raise _BadInput(f"mechanism {kind!r}: privacy_claim() failed: {_failure(exc)}") from None
    if not isinstance(claim, PrivacyClaim):
        raise _BadInput(f"mechanism {kind!r}: privacy_claim() must return a kngflow.mechanisms.claims.PrivacyClaim, "
                        f"got {type(claim).__name__}")
    try:
        width = problem.audit_records()[0].shape[1]
        boundary, fill = audit_view(mechanism, problem).audit_records()
    except NotImplementedError:
        raise _BadInput(f"problem {name!r} declares no audit record domain: it must implement audit_records() and "
                        "audit_data(records) to be audited") from None
    except Exception as exc:  # noqa: BLE001 - the problem's failure, named
        raise _BadInput(f"problem {name!r}: audit_records() failed: {_failure(exc)}") from None
    try:
        pair = parse_pair(args.pair, width) if args.pair else None
    except ValueError as exc:
        raise _BadInput(_line(exc)) from None
    if pair is not None and len(pair.rest) + 1 < problem.d:
        raise _BadInput(f"--pair: a data set needs at least d={problem.d} records, got {len(pair.rest) + 1}")
    data = _trial_release(mechanism, kind, audit_view(mechanism, problem), name, pair, boundary, fill, run_eps, seed)
    return problem, mechanism, pair, epsilon, run_eps, draws, seed, data


def _cluster_arguments(args, draws) -> None:
    """Check --target-power, --max-draws, --workers and --scheduler (syntax only); set
    ``args.target``, ``args.max_draws_n``, ``args.workers_n``."""
    args.target = None if args.target_power is None else _number("target-power", args.target_power)
    if args.target is not None and not args.target > 0:
        raise _BadInput(f"--target-power must be > 0, got {args.target_power!r}")
    args.max_draws_n = _number("max-draws", args.max_draws, int, 100)
    if args.max_draws_n < draws:
        raise _BadInput(f"--max-draws must be >= --draws ({draws}), got {args.max_draws!r}")
    args.workers_n = None if args.workers is None else _number("workers", args.workers, int, 1)
    if args.scheduler is not None:
        from kngflow.sweep.cluster import check_address

        if args.workers is not None:
            raise _BadInput("--workers and --scheduler exclude each other: a scheduler brings its own workers")
        why = check_address(args.scheduler)
        if why:
            raise _BadInput(f"--scheduler {args.scheduler!r}: {why}")


def _trial_release(mechanism, kind, problem, name, pair, boundary, fill, epsilon, seed) -> None:
    """One release on an audit data set (the pair's first, else ``d`` records), checked as
    the audits need it: a :class:`~kngflow.mechanisms.Release` whose estimate has ``d``
    coefficients.  Its stream is its own; the audits' are not touched."""
    import numpy as np

    from kngflow.mechanisms.base import release_problem

    d = int(problem.d)
    if pair is not None:
        rows = pair.datasets()[0]
    else:
        rows = np.vstack([np.tile(fill[0], (max(d, 2) - 1, 1)), boundary[:1]])
    try:
        data = problem.audit_data(rows)
    except NotImplementedError:
        raise _BadInput(f"problem {name!r} declares no audit record domain: it must implement audit_data(records) "
                        "to be audited") from None
    except Exception as exc:  # noqa: BLE001 - the problem's failure, named
        raise _BadInput(f"problem {name!r}: audit_data() failed: {_failure(exc)}") from None
    where = f"mechanism {kind!r}"
    try:
        rel = mechanism.release(data, epsilon, np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(7,))))
    except Exception as exc:  # noqa: BLE001 - the mechanism's failure, named
        raise _BadInput(f"{where}: release failed on an audit data set of {len(rows)} records (epsilon={epsilon:g}): "
                        f"{_failure(exc)}") from None
    why = release_problem(rel, d)
    if why:
        raise _BadInput(f"{where}: {why}")
    return data


def run(args) -> int:
    """Handler of ``kngflow audit``; returns the exit status."""
    args.started = time.process_time()
    try:
        problem, mechanism, pair, epsilon, run_eps, draws, seed, data = _setup(args)
    except _BadInput as exc:
        print(f"kngflow audit: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        with _runner(args) as runner:
            results = _audits(args, problem, mechanism, pair, epsilon, run_eps, draws, seed, runner, data)
    except _BadInput as exc:
        print(f"kngflow audit: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as exc:  # noqa: BLE001 - the mechanism's (or plug-in problem's) failure, named
        print(f"kngflow audit: error: mechanism {args.mechanism!r} failed during the audit: {_failure(exc)}",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    for res in results:
        print(res.summary())
    if mechanism.hardened:
        # the guarantee of the hardened release, derived in kngflow.mechanisms.hardening
        print(mechanism.hardening(data, run_eps).describe(run_eps, mechanism.privacy_claim().delta))
    elif mechanism.private:
        print("not hardened: the float64 release itself, whose low bits depend on the data"
              + (" (--option hardened=true snaps it to a public grid)" if type(mechanism).hardenable() else
                 " (the mechanism declares no hardening; see docs/plugins.md, 'Hardening a plug-in')"))
    flagged = [r.kind for r in results if not r.passed]
    print(f"verdict: {'FLAGGED by ' + ', '.join(flagged) + ' audit' if flagged else 'PASS'}"
          f" (declared epsilon={epsilon:g})")
    return EXIT_FLAGGED if flagged else EXIT_OK


@contextlib.contextmanager
def _runner(args):
    """Where the black-box releases are drawn: this process, a local Dask cluster
    (``--workers``) or the cluster of ``--scheduler``."""
    if args.workers_n is None and args.scheduler is None:
        yield None
        return
    from kngflow.sweep.cluster import connect

    from .runner import DaskRunner

    where = f"scheduler {args.scheduler}" if args.scheduler else f"a local cluster of {args.workers_n} workers"
    with contextlib.ExitStack() as stack:
        try:
            client = stack.enter_context(connect(scheduler=args.scheduler, workers=args.workers_n,
                                                 dashboard_address=None, timeout=30))
        except Exception as exc:  # noqa: BLE001 - unreachable scheduler, cluster failing to start
            raise _BadInput(f"cannot connect to {where}: {_failure(exc)}") from None
        yield DaskRunner(client)


def _release_seconds(mechanism, data, epsilon: float, seed: int, *, at_least: int = 5, most: int = 500,
                     seconds: float = 1.0) -> float:
    """CPU seconds of one release on ``data`` (``time.process_time``: what else the machine
    runs does not change it much): after one release to warm up, releases timed until
    ``seconds`` have passed (at least ``at_least``, at most ``most`` of them), from a
    stream of their own."""
    import numpy as np

    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(8,)))
    mechanism.release(data, epsilon, rng)
    t0 = time.process_time()
    k = 0
    while k < most and (k < at_least or time.process_time() - t0 < seconds):
        mechanism.release(data, epsilon, rng)
        k += 1
    return (time.process_time() - t0) / k


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _budgeted_draws(args, mechanism, data, run_eps, seed, plan, pair, records) -> int:
    """The draws per data set without ``--draws``: the largest of :data:`BUDGET_DRAWS` whose
    releases, at the CPU time per release measured on the trial data set, fit what is left
    of ``--time-budget`` CPU seconds after the command's own so far (1000 where none fits);
    a line says so where it is fewer than the default.  CPU seconds, not wall time: the
    choice does not follow the machine's load, and in one process on a core of its own the
    audit's wall time is its CPU time.  The draws do not depend on ``--workers`` or
    ``--scheduler``, so neither does the bound (workers make the audit faster, not larger)."""
    from .blackbox import planned_releases

    def count(n):
        total = planned_releases(n, pair_given=pair is not None, records=records)
        if "bit-level" in plan:
            total += 2 * n
        if args.side_channel:
            total += planned_releases(n, max(100, n // 10), pair_given=pair is not None, score_draws=200,
                                      records=records)
        return total

    per = _release_seconds(mechanism, data, run_eps, seed)
    left = args.budget - (time.process_time() - args.started)
    draws = next((n for n in BUDGET_DRAWS if count(n) * per <= left), BUDGET_DRAWS[-1])
    if draws < DEFAULT_DRAWS:
        over = "" if count(draws) * per <= left else f"; {draws} take about {_duration(count(draws) * per)}"
        full = _duration(count(DEFAULT_DRAWS) * per)
        print(f"draws: {draws} releases per data set, not {DEFAULT_DRAWS}: at {per * 1e3:.3g} ms of CPU per release "
              f"{DEFAULT_DRAWS} would take about {full}, over the {_duration(max(0, left))} left of the time budget "
              f"of {args.budget:g} s{over} (--time-budget S; --draws N draws N)", flush=True)
    return draws


def _progress(total: int, unit: str, disable: bool):
    """A tqdm bar on stderr when stderr is a terminal; off a terminal (a log file) plain
    lines, one every 30 seconds, with no carriage return."""
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):
        tty = False
    if disable or tty:
        from tqdm import tqdm

        return tqdm(total=total, unit=unit, disable=disable, file=sys.stderr, leave=False)
    return _Lines(total, unit)


class _Lines(contextlib.AbstractContextManager):
    """Progress for a log: ``audit: 12000/170000 releases (7%), 80 s elapsed`` every
    ``interval`` seconds (the part of tqdm's interface the audits use: ``update``)."""

    def __init__(self, total: int, unit: str, interval: float = 30.0):
        self.total, self.unit, self.interval = int(total), unit, float(interval)
        self.n = 0
        self.t0 = self.last = time.monotonic()

    def update(self, k: int = 1) -> None:
        self.n += int(k)
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            pct = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
            try:
                print(f"audit: {self.n}/{self.total} {self.unit}s{pct}, {now - self.t0:.0f} s elapsed",
                      file=sys.stderr, flush=True)
            except (OSError, ValueError):  # a closed log: progress is not worth failing the audit for
                pass

    def __exit__(self, *exc) -> None:
        return None


def _audits(args, problem, mechanism, pair, epsilon, run_eps, draws, seed, runner=None, data=None) -> list:
    """The audits of :func:`~kngflow.audit.exact.audit_plan`, in its order; their results."""
    import numpy as np

    from .accountant import accountant_audit
    from .blackbox import blackbox_audit, planned_releases, side_channel_audit
    from .exact import audit_plan, exact_audit, knorm_audit, statistic_audit
    from .pairs import audit_view

    plan = audit_plan(mechanism, problem, pair)
    results = []
    if "exact" in plan:
        with _progress(0 if pair else 1000, "pair", args.no_progress or pair is not None) as bar:
            results.append(exact_audit(mechanism, problem, epsilon, run_epsilon=run_eps, seed=seed,
                                       pairs=[pair] if pair else None, candidates=1000, progress=bar.update))
    if "statistic" in plan:
        results.append(statistic_audit(mechanism, problem, epsilon, run_epsilon=run_eps, seed=seed,
                                       pairs=[pair] if pair else None))
    if "knorm" in plan:
        results.append(knorm_audit(mechanism, problem, epsilon, run_epsilon=run_eps, seed=seed))
    if "accountant" in plan:
        results.append(accountant_audit(mechanism, problem, epsilon, run_epsilon=run_eps, pair=pair))
    records = len(np.unique(np.vstack(audit_view(mechanism, problem).audit_records()), axis=0))
    if data is not None and not args.draws_given:
        draws = _budgeted_draws(args, mechanism, data, run_eps, seed, plan, pair, records)
    if "bit-level" in plan:
        from .bits import bit_audit

        with _progress(2 * draws, "release", args.no_progress) as bar:
            results.append(bit_audit(mechanism, problem, epsilon, run_epsilon=run_eps, pair=pair, draws=draws,
                                     seed=seed, progress=bar.update))
    total = (2 if args.side_channel else 1) * planned_releases(draws, pair_given=pair is not None, records=records)
    with _progress(total, "release", args.no_progress) as bar:
        results.append(blackbox_audit(mechanism, problem, epsilon, run_epsilon=run_eps, pair=pair, draws=draws,
                                      seed=seed, target_power=args.target, max_draws=args.max_draws_n,
                                      runner=runner, progress=bar.update))
        if args.side_channel:
            results.append(side_channel_audit(mechanism, problem, epsilon, pair=pair, draws=draws,
                                              pilot=max(100, draws // 10), seed=seed, runner=runner,
                                              progress=bar.update))
    return results

"""``kngflow audit MECHANISM --problem PROBLEM``: audit a mechanism's privacy from the command line.

MECHANISM is a built-in kind of the problem, a name registered through the
``kngflow.mechanisms`` entry points, or a ``package.module:Class`` reference; PROBLEM
likewise (:mod:`kngflow.registry`).  The problem is built with its ``audit_options`` (its
``audit_defaults`` under the ``--problem-option`` values), the mechanism with its
``--option`` values.  Which audits run follows from the mechanism's privacy claim
(:mod:`kngflow.audit.pipeline`: options -> context -> plan of steps -> verdict;
``docs/contracts.md``, "Audits"): the exact audit where the law is computable (a ``Density``
in 1-D/2-D, ``StatisticNoise`` or ``GradientNoise`` in closed form), the accountant audit of
a ``Composed`` claim, the bit-level audit of a claim naming an additive centre, then always
the black-box audit of the released record (its pair and the rest of the data set
searched), and with ``--side-channel`` the side-channel audit of the other outputs on the
same pair.  Prints, per audit, the privacy loss (exact, or a lower confidence bound), the
adjacent pair used and a verdict; the black-box audit adds what it searched and its power
statement (the smallest loss on its pair and events it flags w.p. >= 0.9: a statement
about that pair only).  ``--target-power L`` draws until a loss of L would be flagged;
``--workers N`` (a local Dask cluster) and ``--scheduler ADDRESS`` draw the sampled
releases as Dask tasks, with the same bound as in one process.
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
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .pipeline import AuditOptions

__all__ = ["add_parser", "run"]

EXIT_OK, EXIT_FLAGGED, EXIT_BAD_INPUT = 0, 1, 2


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
    p.add_argument("--draws", metavar="N", help="releases per data set for the sampled audits (default: the most of "
                   "500000, 200000, 100000, 50000, ... 1000 that fit --time-budget)")
    p.add_argument("--time-budget", default="240", metavar="SECONDS", help="without --draws: the CPU seconds the "
                   "audit should take (its wall time on cores of its own): the draws are the most that releases timed "
                   "on an audit data set say fit in it, between 1000 and 500000 (default 240)")
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


def _number(name: str, text, kind=float, minimum=None):
    from .pipeline import AuditInputError

    try:
        value = kind(text)
    except (TypeError, ValueError):
        raise AuditInputError(f"--{name} must be {'an integer' if kind is int else 'a number'}, got {text!r}") from None
    if kind is float and not math.isfinite(value):
        raise AuditInputError(f"--{name} must be finite, got {text!r}")
    if minimum is not None and not value >= minimum:
        raise AuditInputError(f"--{name} must be >= {minimum}, got {text!r}")
    return value


def _key_values(name: str, items: list[str]) -> dict:
    """``KEY=VALUE`` strings as a dict; a value that is not TOML is taken as a string."""
    import tomllib

    from .pipeline import AuditInputError

    out = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip().isidentifier():
            raise AuditInputError(f"--{name} must be KEY=VALUE, got {item!r}")
        try:
            value = tomllib.loads(f"v = {text}")["v"]
        except tomllib.TOMLDecodeError:
            value = text.strip()
        out[key.strip()] = value
    return out


def options_from_args(args) -> AuditOptions:
    """The :class:`~kngflow.audit.pipeline.AuditOptions` of parsed command-line arguments
    (numbers and ``KEY=VALUE`` lists read here; ranges checked by the pipeline)."""
    from .pipeline import AuditOptions

    draws = None if args.draws is None else _number("draws", args.draws, int, 100)
    return AuditOptions(
        mechanism=args.mechanism, problem=args.problem,
        problem_options=_key_values("problem-option", args.problem_option), options=_key_values("option", args.option),
        epsilon=_number("epsilon", args.epsilon),
        run_epsilon=None if args.run_epsilon is None else _number("run-epsilon", args.run_epsilon),
        draws=draws, time_budget=_number("time-budget", args.time_budget, float, 0),
        target_power=None if args.target_power is None else _number("target-power", args.target_power),
        max_draws=_number("max-draws", args.max_draws, int, 100),
        workers=None if args.workers is None else _number("workers", args.workers, int, 1),
        scheduler=args.scheduler, pair=args.pair, side_channel=bool(args.side_channel),
        seed=_number("seed", args.seed, int, 0), progress=not args.no_progress)


def run(args) -> int:
    """Handler of ``kngflow audit``; returns the exit status."""
    from .pipeline import AuditContext, AuditInputError, one_line, run_audit

    started = time.process_time()
    try:
        ctx = AuditContext.build(options_from_args(args))
    except AuditInputError as exc:
        print(f"kngflow audit: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    disable = not ctx.options.progress

    def progress(total, unit, off):
        return _progress(total, unit, disable or off)

    try:
        with _runner(ctx.options) as runner:
            verdict = run_audit(ctx, runner=runner, progress=progress, started=started,
                                say=lambda line: print(line, flush=True))
    except AuditInputError as exc:
        print(f"kngflow audit: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as exc:  # noqa: BLE001 - the mechanism's (or plug-in problem's) failure, named
        print(f"kngflow audit: error: mechanism {args.mechanism!r} failed during the audit: {one_line(exc)}",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    print(verdict.render())
    return EXIT_OK if verdict.passed else EXIT_FLAGGED


@contextlib.contextmanager
def _runner(options):
    """Where the sampled steps' releases are drawn: this process, a local Dask cluster
    (``workers``) or the cluster of ``scheduler``."""
    if options.workers is None and options.scheduler is None:
        yield None
        return
    from kngflow.sweep.cluster import connect

    from .pipeline import AuditInputError, one_line
    from .runner import DaskRunner

    where = f"scheduler {options.scheduler}" if options.scheduler else f"a local cluster of {options.workers} workers"
    with contextlib.ExitStack() as stack:
        try:
            client = stack.enter_context(connect(scheduler=options.scheduler, workers=options.workers,
                                                 dashboard_address=None, timeout=30))
        except Exception as exc:  # noqa: BLE001 - unreachable scheduler, cluster failing to start
            raise AuditInputError(f"cannot connect to {where}: {one_line(exc)}") from None
        yield DaskRunner(client)


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

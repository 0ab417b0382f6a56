"""``kngflow audit MECHANISM``: audit a mechanism's privacy from the command line.

Runs the exact audit where the law is computable (``log_density`` in 1-D/2-D, or the
K-norm or Gaussian noise in closed form), the accountant audit of an (ε, δ) mechanism whose
calibration rests on a privacy accountant, then the black-box audit of the released record,
and with ``--side-channel`` the side-channel audit of the other outputs.  Which audits run
follows from the hooks the mechanism provides (``docs/contracts.md``, "Audits").  Prints, per audit, the
privacy loss (exact, or a lower confidence bound), the adjacent pair used and a verdict.
Exit status: 0 every audit passed, 1 a privacy violation was flagged, 2 bad input.
"""

from __future__ import annotations

import math
import sys

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
    )
    p.add_argument("mechanism", metavar="MECHANISM", help="mechanism kind, e.g. kng, exponential, objective")
    p.add_argument("--problem", default="linear", help="problem name (default linear)")
    p.add_argument("--d", default="2", metavar="D", help="number of coefficients, for problems with a dimension option (default 2)")
    p.add_argument("--protocol", help="data protocol of the linear problem: public_bound (default) or paper")
    p.add_argument("--problem-option", action="append", default=[], metavar="KEY=VALUE",
                   help="another option of the problem, the value in TOML syntax (e.g. data_norm=l2); repeatable")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="another option of the mechanism (e.g. bound=2 or steps=1000); repeatable")
    p.add_argument("--epsilon", default="1.0", metavar="E", help="declared epsilon (default 1)")
    p.add_argument("--run-epsilon", metavar="E", help="epsilon the mechanism runs at (negative control; default --epsilon)")
    p.add_argument("--norm", help="norm option of the mechanism (kng, objective_ext)")
    p.add_argument("--q", metavar="Q", help="q option of objective_ext")
    p.add_argument("--draws", default="20000", metavar="N", help="releases per data set for the black-box audit (default 20000)")
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


def _problem_options(name: str) -> set[str]:
    """Names of the options of problem ``name`` (empty for an unknown problem)."""
    from kngflow.problems import PROBLEMS

    fields = getattr(PROBLEMS.get(name), "__dataclass_fields__", {})
    return {k for k, f in fields.items() if f.init}


def _setup(args):
    from kngflow.mechanisms import get_mechanism
    from kngflow.problems import get_problem

    from .pairs import parse_pair

    epsilon = _number("epsilon", args.epsilon)
    if not epsilon > 0:
        raise _BadInput(f"--epsilon must be > 0, got {args.epsilon!r}")
    run_eps = epsilon if args.run_epsilon is None else _number("run-epsilon", args.run_epsilon)
    if not run_eps > 0:
        raise _BadInput(f"--run-epsilon must be > 0, got {args.run_epsilon!r}")
    draws = _number("draws", args.draws, int, 100)
    seed = _number("seed", args.seed, int, 0)
    d = _number("d", args.d, int, 1)
    opts = _key_values("option", args.option)
    if args.norm is not None:
        opts["norm"] = args.norm
    if args.q is not None:
        opts["q"] = _number("q", args.q)
    prob_opts = _key_values("problem-option", args.problem_option)
    fields = _problem_options(args.problem)
    if "d" in fields:
        prob_opts.setdefault("d", d)
    if "protocol" in fields:
        prob_opts.setdefault("protocol", args.protocol or "public_bound")
        if prob_opts["protocol"] == "public_bound":
            prob_opts.setdefault("y_bound", 1.0)
    elif args.protocol is not None:
        raise _BadInput(f"--protocol: problem {args.problem!r} has no data protocol option")
    try:
        problem = get_problem(args.problem, **prob_opts)
        mechanism = get_mechanism(args.problem, args.mechanism, **opts)
        width = problem.audit_records()[0].shape[1]
        pair = parse_pair(args.pair, width) if args.pair else None
    except (TypeError, ValueError) as exc:
        raise _BadInput(str(exc).replace("\n", " ")) from None
    if pair is not None and len(pair.rest) + 1 < problem.d:
        raise _BadInput(f"--pair: a data set needs at least d={problem.d} records, got {len(pair.rest) + 1}")
    return problem, mechanism, pair, epsilon, run_eps, draws, seed


def run(args) -> int:
    """Handler of ``kngflow audit``; returns the exit status."""
    try:
        problem, mechanism, pair, epsilon, run_eps, draws, seed = _setup(args)
    except _BadInput as exc:
        print(f"kngflow audit: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    from tqdm import tqdm

    from .accountant import accountant_audit, accountant_audit_applies
    from .blackbox import blackbox_audit, side_channel_audit
    from .exact import exact_audit, exact_audit_applies, knorm_audit, statistic_audit, statistic_audit_applies

    results = []
    if exact_audit_applies(mechanism, problem):
        with tqdm(total=0 if pair else 1000, unit="pair", disable=args.no_progress or pair is not None,
                  file=sys.stderr, leave=False) as bar:
            results.append(exact_audit(mechanism, problem, epsilon, run_epsilon=run_eps, seed=seed,
                                       pairs=[pair] if pair else None, candidates=1000, progress=bar.update))
    elif statistic_audit_applies(mechanism, problem, pair):
        results.append(statistic_audit(mechanism, problem, epsilon, run_epsilon=run_eps, seed=seed,
                                       pairs=[pair] if pair else None))
    elif hasattr(mechanism, "noise_law"):
        results.append(knorm_audit(mechanism, problem, epsilon, run_epsilon=run_eps, seed=seed))
    if accountant_audit_applies(mechanism):
        results.append(accountant_audit(mechanism, problem, epsilon, run_epsilon=run_eps, pair=pair))
    pilot = max(100, draws // 10)
    total = (2 if args.side_channel else 1) * (2 * (draws + pilot) + (0 if pair else 2 * 8 * 200))
    with tqdm(total=total, unit="release", disable=args.no_progress,
              file=sys.stderr, leave=False) as bar:
        results.append(blackbox_audit(mechanism, problem, epsilon, run_epsilon=run_eps, pair=pair, draws=draws,
                                      pilot=pilot, seed=seed, progress=bar.update))
        if args.side_channel:
            results.append(side_channel_audit(mechanism, problem, epsilon, pair=pair, draws=draws, pilot=pilot,
                                              seed=seed, progress=bar.update))
    for res in results:
        print(res.summary())
    flagged = [r.kind for r in results if not r.passed]
    print(f"verdict: {'FLAGGED by ' + ', '.join(flagged) + ' audit' if flagged else 'PASS'}"
          f" (declared epsilon={epsilon:g})")
    return EXIT_FLAGGED if flagged else EXIT_OK

"""The problem contract: :class:`Problem`, the base class of every problem, built in or plug-in.

A problem has ``d`` (the number of coefficients), ``theta_star`` (the reference the
error is measured against) and ``simulate(n, rng)`` (one data set of size ``n`` from an
explicit generator).  Everything else has a default here and may be declared:

* ``check_n(n)``: which sample sizes are allowed (default n >= 1);
* ``error(estimate)``: the study's metric (default ``||estimate - theta_star||_2``);
* ``caveats`` and ``reference`` (what ``theta_star`` is, for labels);
* ``data_variables`` / ``data_summary(data)``: per-data-set store variables
  (``name -> (dims, dtype, fill[, attrs])``, dims ``("n", "replicate"[, "coef"])``);
* ``reference_stderr``: the name of the data variable holding the non-private
  reference's standard errors (coverage in the report), or None;
* ``data_bytes(n)``: worker memory of one data set (the planner's estimate);
* ``audit_records()`` / ``audit_data(records)`` / ``parameter_box()``: the declared
  record domain that privacy audits draw adjacent data sets from; ``audit_defaults``:
  the options ``kngflow audit`` builds the problem with unless told otherwise;
* ``report_sections(ds)``: Markdown blocks the problem adds to ``kngflow report``;
* ``loglog_slopes`` and ``error_rate_in_n``: whether the report's log–log slopes of the error
  on n mean something (False for a bounded error that does not decay as a power of n, such
  as a misclassification rate bottoming out at the Bayes rate), and the exponent the
  non-private error is known to decay with (``-0.5``: a √n-consistent estimator), or None;
* ``family``: a built-in problem whose data this one's ``simulate`` returns, so that
  its mechanism kinds (``"kng"``, ...) can be named in a spec.

Options are keyword arguments of the constructor (the ``[problem]`` table of a spec).
"""

from __future__ import annotations

import inspect
import math
from numbers import Real
from typing import ClassVar

import numpy as np

__all__ = ["Problem", "SimulatedProblem", "HOOKS", "check_problem_class", "check_problem", "check_dimension", "check_vector", "check_tau",
           "check_finite_positive", "DEFAULT_BLOCK_ROWS"]

#: rows per streamed block of the built-in simulations; the default worker memory of a data set
DEFAULT_BLOCK_ROWS = 1 << 16


def check_dimension(d) -> int:
    """``d`` as an int; ValueError naming ``d`` unless an integer >= 1."""
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError(f"d must be an integer >= 1, got {d!r}")
    return int(d)


def check_finite_positive(name: str, value) -> float:
    """``value`` as a float; ValueError naming ``name`` unless finite and > 0."""
    if isinstance(value, bool) or not isinstance(value, Real) or not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def check_vector(name: str, value, d: int) -> tuple:
    """``value`` (list or tuple of ``d`` finite reals; None: zeros) as a tuple of floats."""
    value = (0.0,) * d if value is None else value
    if not isinstance(value, (list, tuple)) or len(value) != d or not all(
        isinstance(t, Real) and not isinstance(t, bool) and math.isfinite(t) for t in value
    ):
        raise ValueError(f"{name} must be a list of {d} finite numbers, got {value!r}")
    return tuple(float(t) for t in value)


def check_tau(tau) -> float:
    """Return ``tau`` as float; TypeError/ValueError naming ``tau`` unless in ``(0, 1)``."""
    if isinstance(tau, bool) or not isinstance(tau, Real):
        raise TypeError(f"tau must be a real number in (0, 1), got {type(tau).__name__}")
    if not (0.0 < tau < 1.0):
        raise ValueError(f"tau must be in (0, 1), got {tau!r}")
    return float(tau)


class Problem:
    """Base class of every problem (see the module docstring for the contract).

    Subclasses provide ``d``, ``theta_star`` and ``simulate(n, rng)`` (as class attributes,
    properties, dataclass fields or attributes set by ``__init__``: :func:`check_problem`
    checks a built problem, :func:`check_problem_class` the class); ``name`` defaults to
    the class's ``package.module:Class`` reference.
    """

    #: the number of coefficients (declared by every problem)
    d: int
    #: ``(d,)`` the reference the error is measured against (declared by every problem)
    theta_star: np.ndarray

    reference_stderr: ClassVar[str | None] = None
    #: ``{title: kinds}``: groups of mechanism kinds the report compares with the non-private
    #: reference in a section of their own (the paper's comparison), besides all private ones
    report_comparisons: ClassVar[dict] = {}
    #: a built-in problem whose data this problem's ``simulate`` returns (same type and
    #: fields): that problem's mechanism kinds then apply to this one (``"mean"``)
    family: ClassVar[str | None] = None
    #: options ``kngflow audit`` gives the problem unless the user sets them (small, public-bound data sets)
    audit_defaults: ClassVar[dict] = {}
    #: whether the entries of an estimate are coefficients whose bias, SD and RMSE around
    #: ``theta_star`` mean something (the report's per-coefficient tables); False for a
    #: release such as a subspace basis, whose entries are defined only up to sign or rotation
    coefficient_summaries: ClassVar[bool] = True
    #: whether the report's log–log slopes of the mean error on n mean something; False for an
    #: error that is bounded or does not decay as a power of n (a misclassification rate,
    #: whose floor is the Bayes rate), which drops the report's slope section
    loglog_slopes: ClassVar[bool] = True
    #: the exponent r of the non-private reference's mean error, E error ∝ n^r (-0.5 for a
    #: √n-consistent estimator measured by its ℓ2 distance to the truth); the report's slope
    #: section states it as the expected slope; None (default): no rate is declared
    error_rate_in_n: ClassVar[float | None] = None

    @property
    def name(self) -> str:
        cls = type(self)
        return f"{cls.__module__}:{cls.__qualname__}"

    def simulate(self, n: int, rng: np.random.Generator):
        """One data set of size ``n`` drawn with ``rng``."""
        raise NotImplementedError(f"{type(self).__name__} must implement simulate(n, rng)")

    @classmethod
    def audit_options(cls, given: dict) -> dict:
        """Options to build the problem with for ``kngflow audit``: ``audit_defaults`` under ``given``."""
        return {**cls.audit_defaults, **given}

    def data_bytes(self, n: int) -> int:
        """Worker memory of one simulated data set of size ``n`` (default: four streamed
        blocks of :data:`DEFAULT_BLOCK_ROWS` rows of ``d + 1`` float64)."""
        return 4 * DEFAULT_BLOCK_ROWS * (int(self.d) + 1) * 8

    def report_sections(self, ds) -> list[str]:
        """Markdown blocks this problem adds to the report of store ``ds`` (default none)."""
        return []

    def parameter_box(self):
        """``(lo, hi)`` of a box holding ``Theta`` for the audits, or None (default: none)."""
        return None

    def audit_records(self) -> tuple[np.ndarray, np.ndarray]:
        """``(boundary, fill)`` rows of the declared record domain, for the privacy audits."""
        raise NotImplementedError(f"problem {self.name!r} declares no audit record domain (audit_records)")

    def audit_data(self, records: np.ndarray):
        """The data set made of ``records`` (rows of :meth:`audit_records`)."""
        raise NotImplementedError(f"problem {self.name!r} declares no audit record domain (audit_data)")

    @property
    def caveats(self) -> str:
        return ""

    @property
    def reference(self) -> str:
        """What ``theta_star`` is, for labels: the true parameter of the simulation."""
        return "truth"

    @property
    def real_data(self) -> bool:
        """Whether ``simulate`` returns a fixed real data set rather than synthetic draws
        (default: whenever ``reference`` is not the truth).  A spec's mechanisms are then
        hardened unless it says ``hardened = false`` (:mod:`kngflow.mechanisms.hardening`)."""
        return self.reference != "truth"

    def check_n(self, n: int) -> None:
        """Raise TypeError/ValueError naming ``n`` unless an integer ``>= 1``."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
            raise TypeError(f"n must be an integer, got {type(n).__name__}")
        if n < 1:
            raise ValueError(f"n must be at least 1, got n={n}")

    def error(self, estimate) -> float:
        """``||estimate - theta*||_2``."""
        return float(np.linalg.norm(np.asarray(estimate, float) - self.theta_star))

    @property
    def error_label(self) -> str:
        """What ``error`` measures, in words, for the report's axis labels and captions (stored
        as the store attribute ``error_label``; default: ``"ℓ2 distance to <reference>"``)."""
        return f"ℓ2 distance to {self.reference}"

    @property
    def reference_lines(self) -> list:
        """``[(value, label)]``: errors of trivial, data-independent releases, drawn as
        horizontal lines in the error-against-ε figure (store attribute ``reference_lines``,
        JSON).  Default: ``||theta*||_2``, the error of the zero estimate; ``[]`` where no such
        release is meaningful."""
        return [(float(np.linalg.norm(np.asarray(self.theta_star, float))), "‖θ*‖₂ (zero estimate)")]

    @property
    def data_variables(self) -> dict:
        """No per-data-set store variables."""
        return {}

    def data_summary(self, data) -> dict:
        return {}


#: The earlier name of :class:`Problem`.
SimulatedProblem = Problem


def check_problem_class(cls, name: str | None = None) -> type:
    """``cls`` if it is a usable problem class; TypeError naming it and what is wrong."""
    if name is None:
        name = f"{cls.__module__}:{cls.__qualname__}" if isinstance(cls, type) else repr(cls)
    if not (isinstance(cls, type) and issubclass(cls, Problem)):
        raise TypeError(f"problem {name} must be a class deriving from kngflow.problems.Problem")
    if cls.simulate is Problem.simulate:
        raise TypeError(f"problem {name} must implement simulate(self, n, rng)")
    params = [] if cls.__init__ is object.__init__ else list(inspect.signature(cls.__init__).parameters.values())[1:]
    bad = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.VAR_POSITIONAL)]
    if bad:
        raise TypeError(f"problem {name}: options must be keyword arguments, got positional-only {bad}")
    missing = [m for m in REQUIRED_MEMBERS if not _declares(cls, m)]
    if missing:
        raise TypeError(_missing_message(name, missing))
    _check_hooks(cls, name)
    return cls


#: every optional hook of the contract, by role: what a problem may declare beside ``d``,
#: ``theta_star`` and ``simulate`` (each has its default on :class:`Problem`, documented
#: there and in the module docstring).  A class member named one letter or two away from a
#: hook is refused at lookup (:func:`check_problem_class`): a misspelt hook would otherwise
#: be ignored in silence and its default used.
HOOKS = {
    "simulation": ("check_n", "data_bytes", "data_variables", "data_summary", "family", "real_data"),
    "error": ("error", "error_label", "reference", "reference_stderr", "reference_lines"),
    "report": ("caveats", "report_sections", "report_comparisons", "coefficient_summaries", "loglog_slopes",
               "error_rate_in_n"),
    "audit": ("audit_records", "audit_data", "parameter_box", "audit_defaults", "audit_options"),
}
_HOOK_NAMES = frozenset(h for hooks in HOOKS.values() for h in hooks)


def _edit_distance(a: str, b: str, cap: int = 3) -> int:
    """Levenshtein distance of ``a`` and ``b`` (``cap`` when it is at least ``cap``)."""
    if abs(len(a) - len(b)) >= cap:
        return cap
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return min(row[-1], cap)


def _check_hooks(cls: type, name: str) -> None:
    """TypeError (one line) when a member the class declares looks like a misspelt hook."""
    known = _HOOK_NAMES | set(REQUIRED_MEMBERS) | set(vars(Problem))
    for klass in cls.__mro__:
        if klass is Problem or not issubclass(klass, Problem):
            continue
        members = set(vars(klass)) | set(getattr(klass, "__dataclass_fields__", {}))
        for member in sorted(members):
            if member.startswith("_") or member in known or len(member) < 6:
                continue
            near = sorted(h for h in _HOOK_NAMES if _edit_distance(member, h) <= 2)
            if near:
                raise TypeError(f"problem {name} declares {member!r}, which is not a problem hook: did you mean "
                                f"{near[0]!r}? (the hooks: {', '.join(sorted(_HOOK_NAMES))})")


#: what every problem declares (see :class:`Problem`)
REQUIRED_MEMBERS = ("d", "theta_star")


def _missing_message(name: str, missing: list) -> str:
    return (f"problem {name} does not declare {', '.join(missing)} (every problem sets d, the number "
            "of coefficients, and theta_star, the reference the error is measured against)")


def _declares(cls: type, member: str) -> bool:
    """Whether a class below :class:`Problem` can provide ``member``: a class attribute, a
    property or dataclass field of that name, or a method whose code names it (an
    assignment ``self.member = ...`` in ``__init__`` or a helper).  A static check for the
    clear omission; the built problem is checked in full by :func:`check_problem`."""

    def names(code) -> bool:
        return member in code.co_names or any(names(c) for c in code.co_consts if hasattr(c, "co_names"))

    for klass in cls.__mro__:
        if klass is Problem or not issubclass(klass, Problem):
            continue
        if member in vars(klass) or member in getattr(klass, "__dataclass_fields__", {}):
            return True
        for value in vars(klass).values():
            func = getattr(value, "__func__", getattr(value, "fget", value))
            code = getattr(func, "__code__", None)
            if code is not None and names(code):
                return True
    return False


def check_problem(problem, name: str | None = None):
    """``problem`` if it declares :data:`REQUIRED_MEMBERS` (``d`` an integer >= 1,
    ``theta_star`` of length ``d``); TypeError in one line naming what is missing otherwise.

    ``d`` and ``theta_star`` are often set by the constructor from its options, so their
    values are checked on the built problem, when a problem is first built by name (their
    presence already when its class is looked up: :func:`check_problem_class`).
    """
    name = name or getattr(problem, "name", type(problem).__qualname__)
    missing = [m for m in REQUIRED_MEMBERS if getattr(problem, m, None) is None]
    if missing:
        raise TypeError(_missing_message(name, missing))
    d = problem.d
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise TypeError(f"problem {name}: d must be an integer >= 1, got {d!r}")
    if np.shape(problem.theta_star) != (int(d),):
        raise TypeError(f"problem {name}: theta_star must have shape (d,) = ({int(d)},), "
                        f"got {np.shape(problem.theta_star)}")
    return problem

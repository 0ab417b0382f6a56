"""The mechanism contract: :class:`Mechanism`, :class:`Release`, :class:`Diagnostic`, and parameter checks.

A mechanism is a class deriving from :class:`Mechanism` whose ``__init__`` takes keyword-only
options and whose ``release(data, epsilon, rng)`` returns a :class:`Release`.  That is all a
plug-in needs; it may also declare

* ``diagnostics``: a tuple of :class:`Diagnostic` -- the store keeps one variable per
  declared diagnostic, read from ``Release.info`` (undeclared keys are not stored);
* :meth:`Mechanism.privacy_claim`: what an audit can check (:mod:`kngflow.mechanisms.claims`;
  default: ε-DP, or (ε, ``delta``)-DP, checked black-box);
* ``private = False`` for a non-private reference estimator (the report's reference line).
"""

from __future__ import annotations

import functools
import inspect
import math
import threading
from numbers import Real
from typing import ClassVar, NamedTuple

import numpy as np

from kngflow.mechanisms.claims import BlackBox, PrivacyClaim
from kngflow.mechanisms.hardening import Hardening, HardeningError, guarantee, snap

__all__ = ["Mechanism", "Release", "Diagnostic", "SAMPLER_DIAGNOSTICS", "check_mechanism_class", "release_problem",
           "check_epsilon", "check_rng", "check_positive", "check_probability", "check_choice", "check_int"]


class Release(NamedTuple):
    """One release: the private ``estimate`` and NON-PRIVATE sampler diagnostics ``info``.

    The released record — the only output covered by the mechanism's ε-DP guarantee —
    is ``estimate`` alone (:meth:`record`).  ``info`` describes how the sampler got
    there and is a function of the data: the number of rejection tries, a Metropolis
    acceptance rate, which fallback ran and a solver's iteration count all differ
    between adjacent data sets (a black-box audit reads a privacy loss of about 5 at
    ε = 1 from the tries of exact KNG).  It exists for simulation studies on synthetic
    data; never publish it, or anything derived from it (run times included), for real
    data.  :func:`kngflow.audit.side_channel_audit` measures exactly this.

    For kngflow's built-in mechanisms ``info`` holds ``sampler`` ("exact", "gibbs", "metropolis" or "none"),
    ``acceptance`` (accepted fraction of exact tries or Metropolis proposals) and
    ``steps`` (exact tries, sweeps of the chain, or solver iterations).
    """

    estimate: np.ndarray
    info: dict = {}  # noqa: RUF012 - never mutated: diagnostics() copies it

    #: Names of the fields in the released record (the private output).
    RECORD_FIELDS = ("estimate",)

    def record(self) -> dict:
        """The released record: ``{"estimate": estimate}``, the only private output."""
        return {name: getattr(self, name) for name in self.RECORD_FIELDS}

    def diagnostics(self) -> dict:
        """Every other output: the non-private ``info`` fields (a copy)."""
        return dict(self.info)


class Diagnostic(NamedTuple):
    """A non-private per-release diagnostic a mechanism declares (one store variable).

    ``name``: the key in ``Release.info`` and the store variable's name (an identifier);
    ``long_name``: its description; ``dtype``: ``"float64"`` (fill NaN) or an integer
    dtype for a coded value (fill -1); ``codes``: for a coded value, the names a release
    may give and the integers stored (``info[name]`` is one of the names); ``default``:
    the value stored when a release's ``info`` lacks the key (None: the fill).
    """

    name: str
    long_name: str
    dtype: str = "float64"
    codes: tuple = ()
    default: object = None

    @property
    def fill(self):
        return np.nan if self.dtype.startswith("float") else -1

    def value(self, info: dict):
        """The stored value of this diagnostic for a release's ``info``."""
        v = info.get(self.name, self.default)
        if v is None:
            return self.fill
        if self.codes:
            table = dict(self.codes)
            if v not in table:
                raise ValueError(f"diagnostic {self.name!r} must be one of {list(table)}, got {v!r}")
            return table[v]
        return float(v)

    def attrs(self) -> dict:
        """Store attributes of the variable (CF flags for a coded value)."""
        out = {"long_name": self.long_name}
        if self.codes:
            items = sorted(self.codes, key=lambda kv: kv[1])
            out = {"flag_values": [-1] + [int(v) for _, v in items],
                   "flag_meanings": " ".join(["not_computed"] + [k for k, _ in items]), **out}
        return out


def _sampler_diagnostics() -> tuple:
    from kngflow.kernels import SAMPLER_CODES

    return (
        Diagnostic("acceptance", "sampler acceptance rate"),
        Diagnostic("steps", "sampler steps"),
        Diagnostic("sampler", "sampler that produced the release (kngflow.kernels.SAMPLER_CODES)", "int8",
                   tuple(SAMPLER_CODES.items()), "none"),
    )


#: The diagnostics of kngflow's built-in mechanisms: acceptance rate, steps and sampler code.
SAMPLER_DIAGNOSTICS = _sampler_diagnostics()


_RELEASING = threading.local()  # depth of nested release calls (super().release) per thread


def _accept_hardened(init):
    """``__init__`` taking the contract's option ``hardened`` besides the class's own."""

    @functools.wraps(init)
    def __init__(self, *args, hardened=None, **kw):
        init(self, *args, **kw)
        if hardened is not None:
            self._set_hardened(hardened)

    __init__._kngflow_hardened = True
    return __init__


def _hardened_release(release):
    """``release`` followed, for a hardened mechanism, by the snapping of its estimate."""

    @functools.wraps(release)
    def wrapped(self, data, epsilon, rng):
        depth = getattr(_RELEASING, "depth", 0)
        if depth or not self.hardened:
            return release(self, data, epsilon, rng)
        _RELEASING.depth = 1
        try:
            rel = release(self, data, epsilon, rng)
        finally:
            _RELEASING.depth = 0
        if self.snaps_itself or not isinstance(rel, Release):
            return rel
        h = self.hardening(data, epsilon)
        if h.site != "estimate":
            return rel
        return Release(snap(rel.estimate, h, rng), rel.info)

    wrapped._kngflow_hardened = True
    return wrapped


class Mechanism:
    """Base class of every mechanism, built in or plug-in.

    Subclasses take their options as keyword-only arguments of ``__init__`` (validated
    there, once) and implement :meth:`release`.  Class attributes: ``kind`` (the name it is
    registered under, informational), ``diagnostics`` (tuple of :class:`Diagnostic`),
    ``private`` (False for a non-private reference estimator).  δ is part of the privacy
    claim: an (ε, δ) mechanism returns e.g. ``BlackBox(delta=1e-5)`` from :meth:`privacy_claim`.

    Every mechanism also takes the keyword option ``hardened`` (default False when the
    class is constructed directly; :func:`kngflow.api.get_mechanism` defaults to
    True, and refuses a private class that declares no hardening unless ``hardened=False``
    is spelled out).  A hardened release is snapped to a public grid
    (:mod:`kngflow.mechanisms.hardening`) as declared by :meth:`hardening`; a mechanism that
    declares none cannot be hardened (one-line :class:`~kngflow.mechanisms.hardening.HardeningError`).
    The contract adds ``hardened`` to every subclass's ``__init__`` and applies the
    snapping after every subclass's ``release``: nothing to write in a plug-in but
    :meth:`hardening`.
    """

    kind: ClassVar[str] = ""
    diagnostics: ClassVar[tuple] = ()
    private: ClassVar[bool] = True
    hardened: bool = False
    #: True when a hardened ``release`` snaps its own estimate (its hardening's site is
    #: ``"sampler"``), so the contract does not ask :meth:`hardening` again after it
    snaps_itself: ClassVar[bool] = False

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        init = cls.__dict__.get("__init__")
        if init is not None and not getattr(init, "_kngflow_hardened", False):
            cls.__init__ = _accept_hardened(init)
        elif init is None and not any("__init__" in k.__dict__ for k in cls.__mro__[1:-1]):
            cls.__init__ = _accept_hardened(lambda self: None)
        rel = cls.__dict__.get("release")
        if rel is not None and not getattr(rel, "_kngflow_hardened", False):
            cls.release = _hardened_release(rel)

    @classmethod
    def declares_hardening(cls) -> bool:
        """Whether the class declares :meth:`hardening` (so ``hardened=True`` can be honoured)."""
        return cls.hardening is not Mechanism.hardening

    def _set_hardened(self, hardened) -> None:
        if not isinstance(hardened, (bool, np.bool_)):
            raise TypeError(f"hardened must be true or false, got {hardened!r}")
        if hardened and self.private and not self.declares_hardening():
            raise HardeningError(f"hardened: mechanism {type(self).__name__} cannot be hardened: it declares no "
                                 "hardening(data, epsilon) (kngflow.mechanisms.hardening); pass hardened=false")
        self.hardened = bool(hardened) and self.private
        if self.hardened:
            self.check_hardenable()

    def check_hardenable(self) -> None:
        """Raise :class:`~kngflow.mechanisms.hardening.HardeningError` naming the option that
        keeps these options from being hardened (default: none does)."""

    def hardening(self, data, epsilon: float) -> Hardening:
        """How this mechanism's release is hardened on ``data`` at ``epsilon``.

        Reads only public facts of ``data`` (its size, dimension and declared domain).
        Mechanisms that can be hardened override it; the default declares nothing.
        """
        raise HardeningError(f"hardened: mechanism {type(self).__name__} declares no hardening(data, epsilon)")

    def hardened_guarantee(self, data, epsilon: float) -> tuple[float, float]:
        """``(ε′, δ′)`` of the hardened release on data like ``data`` (public facts only) at ``epsilon``."""
        return guarantee(self.hardening(data, epsilon), epsilon, self.privacy_claim().delta)

    def release(self, data, epsilon: float, rng: np.random.Generator) -> Release:
        """Release a private estimate of shape ``(d,)`` from ``data`` at ``epsilon``."""
        raise NotImplementedError(f"{type(self).__name__} must implement release(data, epsilon, rng)")

    def privacy_claim(self) -> PrivacyClaim:
        """What the mechanism promises and how it can be audited (default: ε-DP, black-box only)."""
        return BlackBox()

    @classmethod
    def option_names(cls) -> list[str]:
        """Names of the keyword-only options of ``__init__`` (following ``**kw`` up the hierarchy)."""
        names = []
        for klass in cls.__mro__:
            if klass is object:
                break
            if "__init__" in klass.__dict__:
                params = inspect.signature(klass.__init__).parameters.values()
                names += [p.name for p in params if p.kind is p.KEYWORD_ONLY and p.name not in names]
                if not any(p.kind is p.VAR_KEYWORD for p in params):
                    break  # options passed on with **kw continue up the hierarchy
        return names + (["hardened"] if cls.hardenable() else [])

    @classmethod
    def hardenable(cls) -> bool:
        """Whether ``hardened=True`` can be honoured: by a private mechanism that declares
        :meth:`hardening`, and trivially by a non-private one (nothing to harden).  Only
        then is ``hardened`` listed among the options (:meth:`option_names`); every class
        still accepts ``hardened=False``."""
        return not cls.private or cls.declares_hardening()

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def release_problem(rel, d: int) -> str | None:
    """Why ``rel`` is not a usable release for a problem with ``d`` coefficients (None: it is)."""
    if not isinstance(rel, Release):
        return f"release must return kngflow.mechanisms.Release(estimate, info), got {type(rel).__name__}"
    shape = np.shape(rel.estimate)
    if shape != (d,):
        return (f"release returned an estimate of shape {shape}; the problem has d={d} coefficients, "
                f"so it must have shape ({d},)")
    return None


def check_mechanism_class(cls, name: str | None = None) -> type:
    """``cls`` if it is a usable mechanism class; TypeError naming it and what is wrong.

    A mechanism derives from :class:`Mechanism`, implements ``release`` and takes only
    keyword-only options (``def __init__(self, *, scale=1.0)``).
    """
    if name is None:
        name = f"{cls.__module__}:{cls.__qualname__}" if isinstance(cls, type) else repr(cls)
    if not (isinstance(cls, type) and issubclass(cls, Mechanism)):
        raise TypeError(f"mechanism {name} must be a class deriving from kngflow.mechanisms.Mechanism")
    if cls.release is Mechanism.release:
        raise TypeError(f"mechanism {name} must implement release(self, data, epsilon, rng)")
    params = [] if cls.__init__ is object.__init__ else list(inspect.signature(cls.__init__).parameters.values())[1:]
    bad = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    if bad:
        raise TypeError(f"mechanism {name}: options must be keyword-only (def __init__(self, *, ...)); "
                        f"__init__ takes {bad} positionally")
    for diag in cls.diagnostics:
        if not isinstance(diag, Diagnostic) or not diag.name.isidentifier():
            raise TypeError(f"mechanism {name}: diagnostics must be kngflow.mechanisms.Diagnostic with "
                            f"identifier names, got {diag!r}")
    return cls


def _is_real(x) -> bool:
    return isinstance(x, Real) and not isinstance(x, bool)


def check_epsilon(epsilon) -> float:
    """Return ``epsilon`` as float; ValueError unless finite and > 0."""
    if not _is_real(epsilon):
        raise TypeError(f"epsilon must be a real number, got {type(epsilon).__name__}")
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be finite and > 0, got {epsilon!r}")
    return float(epsilon)


def check_positive(name: str, value) -> float:
    if not _is_real(value):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be finite and > 0, got {value!r}")
    return float(value)


def check_probability(name: str, value) -> float:
    """Return ``value`` as float; TypeError/ValueError unless a real number in the open (0, 1)."""
    if not _is_real(value):
        raise TypeError(f"{name} must be a real number in (0, 1), got {type(value).__name__}")
    if not 0.0 < value < 1.0:  # also rejects NaN
        raise ValueError(f"{name} must lie in the open interval (0, 1), got {value!r}")
    return float(value)


def check_int(name: str, value, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_choice(name: str, value, allowed) -> str:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}; got {value!r}")
    return value


def check_rng(rng) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng

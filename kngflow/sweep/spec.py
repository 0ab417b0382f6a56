"""Study specifications: TOML in, a validated :class:`Spec` out.

A spec names one problem (with its options and data protocol), the mechanisms
to compare (each with a unique ``label``), the grid axes and the root seed::

    name = "smoke"               # optional, cosmetic
    description = "..."          # optional, cosmetic
    seed = 20190611              # root seed of every random stream (int >= 0)

    [problem]
    name = "linear"              # kngflow.api.get_problem(name, **options)
    d = 12
    protocol = "paper"           # data protocol: "paper" or "public_bound"

    [grid]
    n = [100, 1_000, 10_000]
    epsilon = [0.5, 1.0]
    replicates = 20              # a count (0..19) or an explicit list of ints
    allow_extreme = false        # optional: lift the limits below

    [grid.problem]               # optional: problem options as grid axes (store dims)
    # d = [8, 16, 32]            # one list per option, each value a new problem

    [sampler]                    # defaults merged into every mechanism that accepts them
    steps = 10_000

    [[mechanisms]]
    label = "kng"                # unique; the ``mechanism`` coordinate of the store
    kind = "kng"                 # a kind of the problem, or "package.module:Class"
    norm = "linf"                # every other key is a keyword option of the mechanism
    bound = 1.0

Grid values beyond what any study can mean are refused unless the grid says
``allow_extreme = true``: n above :data:`LIMITS` ``["n"]`` (10^9), more than
10^8 replicates, ε outside [10^-6, 10^6].  ``allow_extreme`` is not part of the
spec's hash (it changes no result).  A replicate count stays a ``range``, so a
huge count costs no memory before it is refused.

A ``[grid.problem]`` table turns problem options into grid axes: each key is a
keyword option of the problem (not also set in ``[problem]``), its value a non-empty
list of distinct values; the problem is built once per point of their cross product
(:meth:`Spec.axis_points`), every point is checked when the spec is parsed, and each
option becomes a store dimension named after it (before ``mechanism``).  A spec
without the table has exactly the hash and the seeds it had before the table existed.

Everything is checked before anything runs (:func:`parse_spec`); the first
problem found raises :class:`SpecError` whose message starts with the offending
field (``mechanisms[2].kind``) and says what is allowed.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["SpecError", "Spec", "MechanismSpec", "parse_spec", "load_spec", "LIMITS"]

TOP_LEVEL = ("name", "description", "seed", "problem", "grid", "sampler", "hardened", "mechanisms")
GRID_KEYS = ("n", "epsilon", "replicates")
GRID_OPTIONAL = ("allow_extreme", "problem")
#: Names a problem axis may not take (they are the store's other dims and variables).
RESERVED_AXES = ("mechanism", "n", "epsilon", "replicate", "coef", "name", "estimate", "error", "seconds", "done",
                 "failed", "theta_star")

#: Largest n, most replicates and the ε range accepted without ``[grid] allow_extreme = true``.
LIMITS = {"n": 10**9, "replicates": 10**8, "epsilon": (1e-6, 1e6)}
#: What a limit's message adds when the spec does not say ``allow_extreme``.
EXTREME_HINT = "; set allow_extreme = true in [grid] to run it anyway"
_LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:+-]*$")


class SpecError(ValueError):
    """An invalid study spec; ``field`` names the offending entry."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(f"{field}: {message}")


@dataclass(frozen=True)
class MechanismSpec:
    """One mechanism of a study: label, kind and its effective options."""

    label: str
    kind: str
    options: dict  # effective options (own options + accepted sampler defaults)


@dataclass(frozen=True)
class Spec:
    """A validated study spec (build it with :func:`parse_spec`)."""

    text: str
    name: str
    description: str
    seed: int
    problem_name: str
    problem_options: dict
    sampler: dict
    mechanisms: tuple[MechanismSpec, ...]
    n: tuple[int, ...]
    epsilon: tuple[float, ...]
    replicates: tuple[int, ...] | range  # a count stays a range
    _problem: Any = field(default=None, repr=False, compare=False)
    #: ``[grid] allow_extreme`` of the spec (not part of its hash: it changes no result)
    allow_extreme: bool = field(default=False, compare=False)
    #: the grid axes a reduced run replaced (:func:`~kngflow.sweep.overrides.apply_overrides`): ``{"n": [...],
    #: "epsilon": [...], "replicates": K}``, each key only where it differs from the spec's own
    overrides: dict = field(default_factory=dict)
    #: ``[grid.problem]``: ``((option, (value, ...)), ...)`` in the spec's order; ``()`` for none
    problem_axes: tuple = ()
    _problems: dict = field(default_factory=dict, repr=False, compare=False)

    # ------------------------------------------------------------------ helpers
    @property
    def axis_names(self) -> tuple[str, ...]:
        """The problem options that are grid axes (store dims), in the spec's order."""
        return tuple(name for name, _ in self.problem_axes)

    def axis_points(self) -> list[tuple]:
        """Every point of the problem axes (the cross product, first axis slowest); ``[()]`` without axes."""
        import itertools

        return [tuple(p) for p in itertools.product(*(values for _, values in self.problem_axes))]

    def axis_items(self, point: tuple) -> tuple:
        """``((option, value), ...)`` of ``point`` (what :mod:`kngflow.sweep.seeds` keys on)."""
        return tuple(zip(self.axis_names, point))

    def coef_width(self) -> int:
        """Length of the store's ``coef`` axis: the largest ``problem(point).d`` over the points
        (shorter estimates are padded with NaN)."""
        return max(int(self.problem(p).d) for p in self.axis_points())

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(m.label for m in self.mechanisms)

    def canonical(self, replicates: bool = True) -> dict:
        """The scientific content of the spec as plain JSON-able data.

        Cosmetic fields (``name``, ``description``, comments, key order,
        ``allow_extreme``) are left out, so reformatting a spec does not change
        its hash.  With ``replicates=False`` the replicate list is left empty.
        """
        return {
            "seed": self.seed,
            "problem": {"name": self.problem_name, "options": _jsonable(self.problem_options)},
            "sampler": _jsonable(self.sampler),
            "mechanisms": [
                {"label": m.label, "kind": m.kind, "options": _jsonable(m.options)} for m in self.mechanisms
            ],
            "grid": {
                "n": list(self.n),
                "epsilon": [float(e).hex() for e in self.epsilon],
                "replicates": list(self.replicates) if replicates else [],
                # only where the spec has problem axes: the hash of a spec without them is unchanged
                **({"problem": {name: _jsonable(list(values)) for name, values in self.problem_axes}}
                   if self.problem_axes else {}),
            },
        }

    @property
    def hash(self) -> str:
        """sha256 of :meth:`canonical` (sorted-key JSON).

        The replicate list is fed to the hash in pieces, so a huge count is
        hashed in constant memory; the digest is that of the whole JSON text.
        """
        canonical = self.canonical(replicates=False)
        canonical["grid"]["replicates"] = _HOLE
        parts = _dumps(canonical).split(json.dumps(_HOLE))
        if len(parts) != 2:  # the placeholder also occurs in an option value
            return hashlib.sha256(_dumps(self.canonical()).encode()).hexdigest()
        head, tail = parts
        h = hashlib.sha256(head.encode())
        h.update(b"[")
        reps = self.replicates
        for start in range(0, len(reps), 1 << 16):
            if start:
                h.update(b",")
            h.update(",".join(map(str, reps[start : start + (1 << 16)])).encode())
        h.update(b"]" + tail.encode())
        return h.hexdigest()

    def problem(self, point: tuple | None = None):
        """The problem object (built once per Spec and point of the problem axes).

        ``point`` is a tuple of problem-axis values (:meth:`axis_points`); None: the first
        point (the only one of a spec without problem axes)."""
        if point is None or not self.problem_axes:
            if self._problem is None:
                from kngflow import api

                options = {**self.problem_options, **dict(self.axis_items(self.axis_points()[0]))}
                object.__setattr__(self, "_problem", api.get_problem(self.problem_name, **options))
            if point is None or tuple(point) == self.axis_points()[0]:
                return self._problem
        point = tuple(point)
        if point not in self._problems:
            from kngflow import api

            self._problems[point] = api.get_problem(self.problem_name,
                                                    **{**self.problem_options, **dict(self.axis_items(point))})
        return self._problems[point]

    def build_mechanisms(self, point: tuple | None = None) -> dict:
        """``{label: mechanism}`` built with ``kngflow.api.get_mechanism``."""
        from kngflow import api

        problem = self.problem(point)
        return {
            m.label: api.get_mechanism(self.problem_name, m.kind, **mechanism_options(problem, m.options))
            for m in self.mechanisms
        }


_HOLE = "\0replicates\0"  # placeholder for the replicate list in the hashed JSON text


def _dumps(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in sorted(obj.items())}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, float):
        return float(obj).hex() if not obj.is_integer() else obj
    return obj


#: Longest spec file read (its text is stored in the store's attributes and sent to workers).
MAX_SPEC_BYTES = 1 << 20


def load_spec(path: str | Path) -> Spec:
    """Read and validate the TOML spec at ``path`` (at most :data:`MAX_SPEC_BYTES`)."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            data = f.read(MAX_SPEC_BYTES + 1)
    except OSError as exc:
        raise SpecError("spec", f"cannot read {str(p)!r}: {exc.strerror or exc}") from None
    if len(data) > MAX_SPEC_BYTES:
        raise SpecError("spec", f"{str(p)!r} is larger than {MAX_SPEC_BYTES >> 20} MB; a spec is a short TOML file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(
            "spec", f"{str(p)!r} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); save it as UTF-8"
        ) from None
    return parse_spec(text)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_table(value, where: str) -> dict:
    if not isinstance(value, dict):
        raise SpecError(where, f"must be a table, got {type(value).__name__}")
    return value


def _unknown(table: dict, allowed, where: str):
    for key in table:
        if key not in allowed:
            prefix = f"{where}." if where else ""
            raise SpecError(f"{prefix}{key}", f"unknown field; allowed fields are {list(allowed)}")


def _field_in_message(exc: Exception, options: dict, where: str) -> str:
    """Best guess of which option an exception complains about."""
    msg = re.split(r"allowed", str(exc), maxsplit=1, flags=re.IGNORECASE)[0]
    for key in sorted(options, key=len, reverse=True):
        if re.search(rf"\b{re.escape(key)}\b", msg):
            return f"{where}.{key}"
    return where


def mechanism_options(problem, options: dict) -> dict:
    """A spec mechanism's options with ``hardened`` defaulting to ``problem.real_data``:
    releases on a real data set are hardened unless the spec says ``hardened = false``,
    simulation sweeps on synthetic data keep the unhardened (bit-identical) path."""
    return {"hardened": bool(problem.real_data), **options}


def _accepts_option(cls, key: str) -> bool:
    """Whether mechanism class ``cls`` takes keyword ``key`` (sampler defaults go only there)."""
    return key in cls.option_names()


def parse_spec(text: str) -> Spec:
    """Parse and validate a TOML spec; raise :class:`SpecError` naming the field."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError("spec", f"not valid TOML: {exc}") from None
    _unknown(raw, TOP_LEVEL, "")

    name = raw.get("name", "")
    if not isinstance(name, str):
        raise SpecError("name", "must be a string")
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise SpecError("description", "must be a string")

    if "seed" not in raw:
        raise SpecError("seed", "missing; give the root seed as an integer >= 0 (e.g. seed = 20190611)")
    seed = raw["seed"]
    if not _is_int(seed) or seed < 0:
        raise SpecError("seed", f"must be an integer >= 0, got {seed!r}")

    # ---------------------------------------------------------------- grid
    if "grid" not in raw:
        raise SpecError("grid", "missing table with n, epsilon and replicates")
    grid = _check_table(raw["grid"], "grid")
    _unknown(grid, GRID_KEYS + GRID_OPTIONAL, "grid")
    for key in GRID_KEYS:
        if key not in grid:
            raise SpecError(f"grid.{key}", "missing")
    extreme = grid.get("allow_extreme", False)
    if not isinstance(extreme, bool):
        raise SpecError("grid.allow_extreme", f"must be true or false, got {extreme!r}")
    hint = "" if extreme else EXTREME_HINT

    ns = grid["n"]
    if _is_int(ns):
        ns = [ns]
    if not isinstance(ns, list) or not ns:
        raise SpecError("grid.n", "must be a non-empty list of integers (write 10_000_000, not 1e7)")
    for i, n in enumerate(ns):
        if not _is_int(n):
            raise SpecError(f"grid.n[{i}]", f"must be an integer (write 10_000_000, not 1e7), got {n!r}")
        if n > LIMITS["n"] and not extreme:
            raise SpecError(f"grid.n[{i}]", f"n = {n} is beyond the limit {LIMITS['n']:.0e}{hint}")
    if len(set(ns)) != len(ns):
        raise SpecError("grid.n", f"values must be distinct, got {ns}")

    eps = grid["epsilon"]
    if isinstance(eps, (int, float)) and not isinstance(eps, bool):
        eps = [eps]
    if not isinstance(eps, list) or not eps:
        raise SpecError("grid.epsilon", "must be a non-empty list of finite numbers > 0")
    epsilons = []
    lo, hi = LIMITS["epsilon"]
    for i, e in enumerate(eps):
        if isinstance(e, bool) or not isinstance(e, (int, float)) or not math.isfinite(e) or e <= 0:
            raise SpecError(f"grid.epsilon[{i}]", f"must be a finite number > 0, got {e!r}")
        if not (lo <= e <= hi or extreme):
            raise SpecError(f"grid.epsilon[{i}]", f"epsilon = {e!r} is outside [{lo:g}, {hi:g}]{hint}")
        epsilons.append(float(e))
    if len(set(epsilons)) != len(epsilons):
        raise SpecError("grid.epsilon", f"values must be distinct, got {eps}")

    reps = grid["replicates"]
    if _is_int(reps):
        if reps < 1:
            raise SpecError("grid.replicates", f"must be a count >= 1 or a non-empty list of integers >= 0, got {reps}")
        replicates = range(reps)
    elif isinstance(reps, list) and reps:
        for i, r in enumerate(reps):
            if not _is_int(r) or r < 0:
                raise SpecError(f"grid.replicates[{i}]", f"must be an integer >= 0, got {r!r}")
        if len(set(reps)) != len(reps):
            raise SpecError("grid.replicates", "values must be distinct")
        replicates = tuple(reps)
    else:
        raise SpecError("grid.replicates", f"must be a count >= 1 or a non-empty list of integers >= 0, got {reps!r}")
    if len(replicates) > LIMITS["replicates"] and not extreme:
        raise SpecError(
            "grid.replicates", f"{len(replicates)} replicates is beyond the limit {LIMITS['replicates']:.0e}{hint}"
        )

    # ---------------------------------------------------------------- problem
    if "problem" not in raw:
        raise SpecError("problem", 'missing table; e.g. [problem] name = "linear"')
    ptable = dict(_check_table(raw["problem"], "problem"))
    from kngflow import api, registry

    known_problems = registry.problem_names()
    pname = ptable.pop("name", None)
    if pname is None:
        raise SpecError("problem.name", f"missing; allowed values are {known_problems} or 'package.module:Class'")
    if not isinstance(pname, str):
        raise SpecError("problem.name", f"unknown problem {pname!r}; allowed values are {known_problems}")
    if not registry.is_reference(pname) and pname not in known_problems:
        raise SpecError("problem.name", f"unknown problem {pname!r}; allowed values are {known_problems} or "
                        "'package.module:Class'")
    try:
        registry.problem_class(pname)
    except registry.PluginError as exc:
        raise SpecError("problem.name", str(exc)) from None
    axis_table = grid.get("problem")
    first = {}
    if isinstance(axis_table, dict):  # the problem at the first point of the axes (checked below)
        first = {k: v[0] for k, v in axis_table.items() if isinstance(v, list) and v and k not in ptable}
    try:
        problem = api.get_problem(pname, **ptable, **first)
    except (TypeError, ValueError) as exc:
        if first:  # let the axes' own checks name the field
            problem = None
        else:
            raise SpecError(_field_in_message(exc, ptable, "problem"), str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - a plug-in's constructor
        raise SpecError("problem", f"problem {pname!r} failed to build: {type(exc).__name__}: {exc}") from None

    if problem is not None:
        for i, n in enumerate(ns):
            try:
                problem.check_n(n)
            except (TypeError, ValueError) as exc:
                raise SpecError(f"grid.n[{i}]", str(exc)) from None

    axes, problems = _problem_axes(grid.get("problem"), ptable, pname, problem)
    if axes:
        problem = problems[next(iter(problems))]
    for point, built in problems.items():
        for i, n in enumerate(ns):
            try:
                built.check_n(n)
            except (TypeError, ValueError) as exc:
                raise SpecError(f"grid.n[{i}]", f"{exc} (at {_point_text(axes, point)})") from None

    # ---------------------------------------------------------------- sampler
    sampler = dict(_check_table(raw.get("sampler", {}), "sampler"))
    # the study-level switch: every mechanism's default for `hardened` (its own field wins)
    hardened = raw.get("hardened")
    if hardened is not None and not isinstance(hardened, bool):
        raise SpecError("hardened", f"must be true or false, got {hardened!r}")

    # ---------------------------------------------------------------- mechanisms
    kinds = registry.kind_names(pname)
    mlist = raw.get("mechanisms")
    if mlist is None:
        raise SpecError("mechanisms", "missing; add at least one [[mechanisms]] table with label and kind")
    if not isinstance(mlist, list) or not mlist:
        raise SpecError("mechanisms", "must be a non-empty array of tables ([[mechanisms]])")
    mechs: list[MechanismSpec] = []
    seen: dict[str, int] = {}
    sampler_used = {k: False for k in sampler}
    for i, entry in enumerate(mlist):
        where = f"mechanisms[{i}]"
        entry = dict(_check_table(entry, where))
        label = entry.pop("label", None)
        if label is None:
            raise SpecError(f"{where}.label", "missing; every mechanism needs a unique label")
        if not isinstance(label, str) or not _LABEL_RE.match(label):
            raise SpecError(
                f"{where}.label", f"must be a string of letters, digits and _.:+- (not starting with a symbol), got {label!r}"
            )
        if label in seen:
            raise SpecError(f"{where}.label", f"duplicate label {label!r} (also mechanisms[{seen[label]}].label)")
        seen[label] = i
        kind = entry.pop("kind", None)
        if kind is None:
            raise SpecError(f"{where}.kind", f"missing; allowed values are {kinds}")
        if not isinstance(kind, str) or not (kind in kinds or registry.is_reference(kind)):
            raise SpecError(f"{where}.kind", f"unknown mechanism kind {kind!r}; allowed values are {kinds} or "
                            "'package.module:Class'")
        try:
            cls = registry.mechanism_class(pname, kind)
        except registry.PluginError as exc:
            raise SpecError(f"{where}.kind", str(exc)) from None
        options = {}
        for key, value in sampler.items():
            if key not in entry and _accepts_option(cls, key):
                options[key] = value
                sampler_used[key] = True
            elif key in entry:
                sampler_used[key] = True
        options.update(entry)
        if hardened is not None and "hardened" not in options:
            options["hardened"] = hardened
        built = mechanism_options(problem, options)
        try:
            api.get_mechanism(pname, kind, **built)
        except (TypeError, ValueError) as exc:
            raise SpecError(_field_in_message(exc, built, where), str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - a plug-in's constructor
            raise SpecError(where, f"mechanism {kind!r} failed to build: {type(exc).__name__}: {exc}") from None
        mechs.append(MechanismSpec(label=label, kind=kind, options=options))
    for key, used in sampler_used.items():
        if not used:
            raise SpecError(f"sampler.{key}", "no mechanism of this spec accepts this option")

    return Spec(
        text=text,
        name=name,
        description=description,
        seed=seed,
        problem_name=pname,
        problem_options=ptable,
        sampler=sampler,
        mechanisms=tuple(mechs),
        n=tuple(int(n) for n in ns),
        epsilon=tuple(epsilons),
        replicates=replicates,
        _problem=problems[next(iter(problems))] if axes else problem,
        allow_extreme=extreme,
        problem_axes=axes,
        _problems=dict(problems) if axes else {},
    )


def _point_text(axes: tuple, point: tuple) -> str:
    return ", ".join(f"{name} = {value!r}" for (name, _), value in zip(axes, point))


def _problem_axes(table, ptable: dict, pname: str, problem) -> tuple[tuple, dict]:
    """Validate ``[grid.problem]``: ``(axes, {point: problem})`` (``((), {})`` without the table)."""
    import itertools

    from kngflow import api, registry

    if table is None:
        return (), {}
    table = _check_table(table, "grid.problem")
    if not table:
        raise SpecError("grid.problem", "is empty; give one list of values per problem option, e.g. d = [8, 16, 32]")
    allowed = [o for o in api.problem_options(registry.problem_class(pname)) if o not in ptable]
    axes = []
    for key, values in table.items():
        where = f"grid.problem.{key}"
        if key in ptable:
            raise SpecError(where, f"is also set in [problem] ({key} = {ptable[key]!r}); give it in one place "
                            f"(grid axes allowed here: {allowed})")
        if key in RESERVED_AXES:
            raise SpecError(where, f"{key!r} is a store dimension or variable, not a problem option; allowed: {allowed}")
        if key not in api.problem_options(registry.problem_class(pname)):
            raise SpecError(where, f"unknown option of problem {pname!r}; allowed options: {allowed}")
        if not isinstance(values, list) or not values:
            raise SpecError(where, f"must be a non-empty list of values of option {key!r}, got {values!r}")
        seen = []
        for i, v in enumerate(values):
            if isinstance(v, dict):
                raise SpecError(f"{where}[{i}]", f"must be a value of option {key!r}, not a table")
            canon = json.dumps(_jsonable(v), sort_keys=True)
            if canon in seen:
                raise SpecError(where, f"values must be distinct, got {values!r}")
            seen.append(canon)
        axes.append((key, tuple(values)))
    # each value on its own (the other axes at their first value): the error names the value
    base = {name: vals[0] for name, vals in axes}
    for name, vals in axes:
        for i, v in enumerate(vals):
            try:
                api.get_problem(pname, **ptable, **{**base, name: v})
            except (TypeError, ValueError) as exc:
                raise SpecError(f"grid.problem.{name}[{i}]", f"{name} = {v!r} is rejected by problem {pname!r}: "
                                f"{exc}") from None
            except Exception as exc:  # noqa: BLE001 - a plug-in's constructor
                raise SpecError(f"grid.problem.{name}[{i}]", f"problem {pname!r} failed to build with {name} = "
                                f"{v!r}: {type(exc).__name__}: {exc}") from None
    problems = {}
    for point in itertools.product(*(vals for _, vals in axes)):
        options = {**ptable, **dict(zip((n for n, _ in axes), point))}
        try:
            problems[tuple(point)] = api.get_problem(pname, **options)
        except Exception as exc:  # noqa: BLE001 - a combination the problem rejects
            raise SpecError("grid.problem", f"problem {pname!r} rejects the combination "
                            f"{_point_text(tuple(axes), point)}: {exc}") from None
    return tuple(axes), problems

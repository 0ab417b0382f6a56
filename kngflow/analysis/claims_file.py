"""The claims file: a paper's claims about a study, in TOML, and where a study's file lies.

A study may ship its paper's claims beside its spec (``workflows/NAME.claims.toml`` next to
``workflows/NAME.toml``).  Each claim is one table of ``[[claims]]``::

    study = "knorm_randhie"          # optional: the spec's name the claims are about
                                     # (or a list: the study and its variants, e.g. hardened)

    [[claims]]
    id = "fig4-order"
    type = "ordering"                # ordering | ratio | reaches | epsilon_factor | slope | value
    source = "Awan & Slavkovic, Figure 4"
    statement = "Linf beats L1 at every epsilon >= 1/4"
    statistic = "median_error"       # see STATISTICS
    mechanisms = ["Linf", "L1"]      # best first
    epsilon = [0.25, 0.5, 1.0]       # optional selections (default: the whole grid)
    at = { d = [16, 32] }            # optional: values of the store's problem axes ([grid.problem])

:func:`parse_claims` and :func:`load_claims` check the file on its own, before any store is
read: a bad file is one line of :class:`ClaimsError` naming the claim, the field and what is
allowed.  Whether the claims fit a store (its mechanism labels, its grid) is checked when
they are evaluated (:mod:`kngflow.analysis.claims`).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import xarray as xr

__all__ = ["CLAIM_TYPES", "STATISTICS", "Claim", "ClaimsError", "default_claims_path", "load_claims", "parse_claims"]

#: statistic -> (which direction is better, its contrast scale, what it is)
STATISTICS: dict[str, tuple[str, str]] = {
    "mean_error": ("lower", "mean of the error over replicates"),
    "median_error": ("lower", "median of the error over replicates (McKean-Schrader SE)"),
    "rmse": ("lower", "root mean square of the error over replicates"),
    "coverage": ("higher", ("average fraction of slopes (coef >= 1) inside the non-private 95% CI "
                            "(Awan-Slavkovic Algorithm 4)")),
}

_COMMON = {"id", "type", "source", "statement", "statistic", "n", "epsilon", "level", "at"}
#: claim type -> (required fields, optional fields, what it checks)
CLAIM_TYPES: dict[str, tuple[tuple[str, ...], tuple[str, ...], str]] = {
    "ordering": (("mechanisms",), (), "mechanisms[0] better than mechanisms[1] better than ... at every selected cell"),
    "ratio": (("numerator", "denominator"), ("min", "max"),
              "statistic(numerator) / statistic(denominator) within [min, max] at every selected cell"),
    "reaches": (("mechanism",), ("target", "tolerance"),
                ("mechanism no worse than target (default: the non-private reference) by more than "
                 "the relative tolerance (default 0.1) at every selected cell")),
    "epsilon_factor": (("mechanism", "target"), ("factor", "tolerance"),
                       ("mechanism at epsilon at least as good as target at factor*epsilon (default 2), "
                        "within the relative tolerance (default 0.1)")),
    "slope": (("mechanism",), ("min", "max", "along"),
              ("log-log slope of the statistic against n, or against the problem axis `along` at fixed n "
               "(WLS, weights 1/SE^2), within [min, max] per epsilon (and n, point of the other axes)")),
    "value": (("mechanism",), ("min", "max"),
              ("the statistic of the mechanism itself within [min, max] at every selected cell (an absolute "
               "band: a miss rate near its nominal level)")),
}


class ClaimsError(ValueError):
    """A claims file that cannot be read or does not fit the store (one line)."""


@dataclass(frozen=True)
class Claim:
    """One validated claim (see the module docstring for the fields)."""

    id: str
    type: str
    source: str
    statement: str
    statistic: str
    fields: dict[str, Any] = field(default_factory=dict)
    n: tuple[int, ...] | None = None
    epsilon: tuple[float, ...] | None = None
    level: float = 0.95
    #: selection on the store's problem axes: ``{axis: (value, ...)}`` (empty: every point)
    at: dict = field(default_factory=dict)


def _num_list(value, what: str, where: str, integer: bool = False) -> tuple:
    vals = value if isinstance(value, list) else [value]
    out = []
    for v in vals:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and float(v) != int(v)):
            raise ClaimsError(f"{where}: {what} must be {'an integer' if integer else 'a number'} or a list of them, "
                              f"got {v!r}")
        out.append(int(v) if integer else float(v))
    if not out:
        raise ClaimsError(f"{where}: {what} is an empty list")
    return tuple(out)


def parse_claims(text: str, source: str = "claims") -> tuple[str | None, list[Claim]]:
    """Validate the TOML text of a claims file: ``(study or None, claims)``; :class:`ClaimsError` otherwise."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ClaimsError(f"{source}: not valid TOML ({exc})") from None
    unknown = sorted(set(raw) - {"study", "claims", "level"})
    if unknown:
        raise ClaimsError(f"{source}: unknown top-level field {unknown[0]!r}; allowed: claims, level, study")
    study = raw.get("study")
    if isinstance(study, list) and study and all(isinstance(x, str) for x in study):
        study = tuple(study)
    elif study is not None and not isinstance(study, str):
        raise ClaimsError(f"{source}: study must be a string or a list of strings (the study and its variants)")
    entries = raw.get("claims")
    if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
        raise ClaimsError(f"{source}: no [[claims]] tables")
    default_level = raw.get("level", 0.95)
    claims, seen = [], set()
    for i, e in enumerate(entries, 1):
        cid = e.get("id")
        where = f"{source}: claim {cid!r}" if isinstance(cid, str) and cid else f"{source}: claim #{i}"
        if not isinstance(cid, str) or not cid:
            raise ClaimsError(f"{where}: id is required (a string)")
        if cid in seen:
            raise ClaimsError(f"{where}: duplicate id")
        seen.add(cid)
        ctype = e.get("type")
        if ctype not in CLAIM_TYPES:
            raise ClaimsError(f"{where}: unknown claim type {ctype!r}; allowed: {', '.join(CLAIM_TYPES)}")
        required, optional, _ = CLAIM_TYPES[ctype]
        allowed = _COMMON | set(required) | set(optional)
        extra = sorted(set(e) - allowed)
        if extra:
            raise ClaimsError(f"{where}: unknown field {extra[0]!r} for type {ctype!r}; allowed: "
                              f"{', '.join(sorted(allowed))}")
        missing = [f for f in required + ("source", "statement", "statistic") if f not in e]
        if missing:
            raise ClaimsError(f"{where}: missing field {missing[0]!r} (type {ctype!r} needs "
                              f"{', '.join(required + ('source', 'statement', 'statistic'))})")
        stat = e["statistic"]
        if stat not in STATISTICS:
            raise ClaimsError(f"{where}: unknown statistic {stat!r}; allowed: {', '.join(STATISTICS)}")
        for key in ("source", "statement"):
            if not isinstance(e[key], str):
                raise ClaimsError(f"{where}: {key} must be a string")
        fields = {k: e[k] for k in set(required) | set(optional) if k in e}
        if "along" in fields and (not isinstance(fields["along"], str) or fields["along"] in
                                  ("mechanism", "epsilon", "replicate", "coef")):
            raise ClaimsError(f"{where}: along must be 'n' or the name of a problem axis of the store (a string)")
        at = e.get("at", {})
        if not isinstance(at, dict) or any(isinstance(v, (dict, bool)) or v == [] for v in at.values()):
            raise ClaimsError(f"{where}: at must be a table of problem-axis values, e.g. at = {{ d = [16, 32] }}")
        at = {str(k): tuple(v if isinstance(v, list) else [v]) for k, v in at.items()}
        for key in ("mechanism", "target", "numerator", "denominator"):
            if key in fields and not isinstance(fields[key], str):
                raise ClaimsError(f"{where}: {key} must be a mechanism label (a string)")
        if "mechanisms" in fields:
            m = fields["mechanisms"]
            if not isinstance(m, list) or len(m) < 2 or not all(isinstance(x, str) for x in m):
                raise ClaimsError(f"{where}: mechanisms must be a list of at least two labels, best first")
        for key in ("min", "max", "tolerance", "factor"):
            if key in fields:
                fields[key] = _num_list(fields[key], key, where)[0]
        if ctype in ("ratio", "slope", "value") and "min" not in fields and "max" not in fields:
            raise ClaimsError(f"{where}: type {ctype!r} needs min, max or both")
        if fields.get("tolerance", 0.0) < 0 or fields.get("factor", 1.0) <= 0:
            raise ClaimsError(f"{where}: tolerance must be >= 0 and factor > 0")
        level = e.get("level", default_level)
        if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
            raise ClaimsError(f"{where}: level must lie in (0, 1), got {level!r}")
        claims.append(Claim(
            id=cid, type=ctype, source=e["source"], statement=e["statement"], statistic=stat, fields=fields,
            n=_num_list(e["n"], "n", where, integer=True) if "n" in e else None,
            epsilon=_num_list(e["epsilon"], "epsilon", where) if "epsilon" in e else None,
            level=float(level),
            at=at,
        ))
    return study, claims


def load_claims(path: str | os.PathLike) -> tuple[str | None, list[Claim]]:
    """Read and validate a claims file: ``(study or None, claims)``."""
    p = Path(path)
    if not p.is_file():
        raise ClaimsError(f"claims file {p} does not exist")
    return parse_claims(p.read_text(encoding="utf-8"), source=str(p))


def default_claims_path(ds: xr.Dataset, store_path: str | os.PathLike | None = None) -> Path | None:
    """The claims file of the study a store came from, if there is one.

    The store records its spec's ``name`` (attribute ``title``); the file is ``NAME.claims.toml``
    looked for in ``workflows/`` under the current directory, beside the store, and in the
    ``workflows/`` directory beside the installed package's source tree (in that order), or
    else a claims file there whose ``study`` list names the study (a variant of a study,
    such as its hardened run, shares the study's claims).
    """
    name = str(ds.attrs.get("title") or "").strip()
    if not name:
        return None
    fname = f"{name}.claims.toml"
    places = [Path.cwd() / "workflows" / fname]
    if store_path is not None:
        places.append(Path(store_path).resolve().parent / fname)
    places.append(Path(__file__).resolve().parents[2] / "workflows" / fname)
    for p in places:
        if p.is_file():
            return p
    for folder in dict.fromkeys(p.parent for p in places):  # a variant named by another study's file
        for p in sorted(folder.glob("*.claims.toml")) if folder.is_dir() else ():
            try:
                study = tomllib.loads(p.read_text(encoding="utf-8")).get("study")
            except (OSError, tomllib.TOMLDecodeError):
                continue
            if isinstance(study, list) and name in study:
                return p
    return None

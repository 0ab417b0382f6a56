"""A paper's claims as executable checks on a store, with Monte Carlo uncertainty.

A study may ship its paper's claims beside its spec (``workflows/NAME.claims.toml``, one
``[[claims]]`` table each: the file's language is :mod:`kngflow.analysis.claims_file`).

A store with problem axes (``[grid.problem] d = [...]`` in its spec) has more cell dims; a
claim holds at every selected point of them (``at`` selects, by default every value).  A
``slope`` claim fits along ``n`` by default; ``along = "d"`` fits the log-log slope of the
statistic along that problem axis instead, one fit per selected (n, ε) and point of the
other axes: if the statistic behaves like ``d^a / n^b``, the slope along ``d`` at fixed n is
``a``, the one along n is ``-b``, and the n needed for a fixed statistic grows like
``d^(a/b)`` (``workflows/pca_dimension.claims.toml``).

:func:`load_claims` validates a file (one-line :class:`ClaimsError` naming the claim, the
field and what is allowed); :func:`evaluate_claims` checks the claims against a store and
returns one :class:`Verdict` per claim; :func:`verdict_table` renders them as Markdown.  The
file's language lives in :mod:`kngflow.analysis.claims_file`, the statistics of a cell with
their influence values in :mod:`kngflow.analysis.cell_stats`; this module decides the verdicts.

Uncertainty.  Every statistic is a smooth functional of the replicates of a cell, so it has
an influence value ``psi_i`` per replicate (mean: ``x_i - mean``; RMSE: ``(x_i^2 - mse) /
(2 rmse)``; median: ``sign(x_i - median)`` times the McKean-Schrader SE times ``sqrt(k)``;
coverage: the replicate's fraction minus the mean).  The Monte Carlo SE of the statistic is
``sd(psi)/sqrt(k)``, and because every mechanism (and every epsilon) of a replicate sees
the same data set, contrasts between two cells are paired: the SE of ``log(A/B)`` is
``sd(psi_A/A - psi_B/B)/sqrt(k)`` over the replicates finished for both.  A claim over
``m`` comparisons uses z-intervals at ``level`` with a Bonferroni split
(``z = Phi^-1(1 - (1 - level)/(2m))``), so a claim's verdict is wrong with probability at
most ``1 - level`` (one-sided, per direction).  Verdicts:

* ``agrees``: every comparison's interval lies on the claimed side (inside the claimed band);
* ``disagrees``: some comparison's interval lies wholly on the wrong side (outside the band);
* ``inconclusive``: otherwise (more replicates would decide: see ``kngflow plan --target-mcse``).

A comparison with fewer than :data:`MIN_REPLICATES` finished (paired) replicates stays
undecided: its SE is too rough for a z-interval.

The module names no problem and no mechanism: mechanism labels come from the claims file
and are checked against the store's.
"""

from __future__ import annotations

import itertools
import math
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr
from scipy import special

from . import summaries as _s
from .cell_stats import MIN_REPLICATES, StoreStatistics, cell_statistic, monte_carlo_se
from .claims_file import (CLAIM_TYPES, STATISTICS, Claim, ClaimsError, default_claims_path, load_claims,
                          parse_claims)

__all__ = [
    "CLAIM_TYPES",
    "STATISTICS",
    "VERDICTS",
    "Claim",
    "ClaimsError",
    "Verdict",
    "cell_statistic",
    "check_claims",
    "default_claims_path",
    "evaluate_claims",
    "load_claims",
    "parse_claims",
    "verdict_table",
    "MIN_REPLICATES",
    "StoreStatistics",
]

VERDICTS = ("agrees", "disagrees", "inconclusive")


class _NotInStore(Exception):
    """A claim's n or epsilon is not in the store's grid (a reduced run): inconclusive there."""


@dataclass
class Verdict:
    """The outcome of one claim: ``verdict`` is one of :data:`VERDICTS`; ``numbers`` holds one
    dict per comparison (cell, value, se, interval lo/hi, and whether it holds)."""

    id: str
    source: str
    statement: str
    verdict: str
    statistic: str
    summary: str
    numbers: list[dict[str, Any]] = field(default_factory=list)
    z: float = float("nan")

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "source": self.source, "statement": self.statement, "verdict": self.verdict,
                "statistic": self.statistic, "summary": self.summary, "z": self.z, "numbers": self.numbers}


def _same_value(a, b) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(float(a) - float(b)) <= 1e-12 * max(1.0, abs(float(b)))
    return str(a) == str(b)


def _fmt_n(n: int) -> str:
    return _s.format_n(n)


def _fmt_e(e: float) -> str:
    return _s.format_epsilon(e)


def _z(level: float, m: int) -> float:
    return float(special.ndtri(1 - (1 - level) / (2 * max(m, 1))))


class _Evaluator:
    def __init__(self, ds: xr.Dataset) -> None:
        self.data = StoreStatistics(ds)
        self.ds = ds

    # -- selections ------------------------------------------------------------
    def _labels(self, claim: Claim) -> list[str]:
        f = claim.fields
        names = list(f.get("mechanisms", [])) + [f[k] for k in ("mechanism", "target", "numerator", "denominator")
                                                  if k in f]
        for label in names:
            if label not in self.data.labels:
                raise ClaimsError(f"claim {claim.id!r}: unknown mechanism label {label!r}; the store's labels are "
                                  f"{', '.join(self.data.labels)}")
        return names

    def _cells(self, claim: Claim) -> tuple[list[int], list[float]]:
        ns = list(claim.n) if claim.n is not None else list(self.data.n)
        eps = list(claim.epsilon) if claim.epsilon is not None else list(self.data.eps)
        for n in ns:
            if n not in self.data.n:
                raise _NotInStore(f"n = {_fmt_n(n)} not in this store (its n: {', '.join(map(_fmt_n, self.data.n))})")
        for e in eps:
            if not any(abs(e - g) <= 1e-12 * max(1.0, abs(g)) for g in self.data.eps):
                raise _NotInStore(f"ε = {e:g} not in this store (its ε: {', '.join(f'{g:g}' for g in self.data.eps)})")
        eps = [min(self.data.eps, key=lambda g: abs(g - e)) for e in eps]
        return ns, eps

    def _points(self, claim: Claim) -> list[tuple[tuple, tuple]]:
        """The selected points of the store's problem axes (``at``; default all)."""
        for axis in claim.at:
            if axis not in self.data.axes:
                raise ClaimsError(f"claim {claim.id!r}: at names {axis!r}, not a problem axis of the store (its "
                                  f"problem axes: {', '.join(self.data.axes) or 'none'})")
        pts = []
        for idx, values in self.data.points():
            named = dict(zip(self.data.axes, values))
            if all(any(_same_value(named[a], v) for v in vals) for a, vals in claim.at.items()):
                pts.append((idx, values))
        for axis, vals in claim.at.items():
            for v in vals:
                if not any(_same_value(x, v) for x in self.data.axis_values[axis]):
                    raise _NotInStore(f"{axis} = {v} not in this store (its {axis}: "
                                      f"{', '.join(map(str, self.data.axis_values[axis]))})")
        return pts

    def _where(self, values: tuple) -> str:
        return "".join(f", {a}={v}" for a, v in zip(self.data.axes, values))

    def _stat(self, claim: Claim, label: str, n: int, e: float, at: tuple = ()) -> tuple[float, np.ndarray]:
        return cell_statistic(self.data.values(claim.statistic)[self.data.index(label, n, e, at)], claim.statistic)

    def _log_contrast(self, claim: Claim, a: tuple, b: tuple) -> tuple[float, float, float, float]:
        """``(A, B, log(A/B), SE)`` for cells a = (label, n, eps), b likewise, paired over replicates."""
        va, pa = self._stat(claim, *a)
        vb, pb = self._stat(claim, *b)
        if not (va > 0 and vb > 0):
            return va, vb, math.nan, math.nan
        both = np.isfinite(pa) & np.isfinite(pb)
        self._paired = int(both.sum())
        if int(both.sum()) < MIN_REPLICATES:
            return va, vb, math.log(va / vb), math.nan
        d = np.where(both, pa / va - pb / vb, np.nan)
        return va, vb, math.log(va / vb), monte_carlo_se(d)

    # -- claim types -------------------------------------------------------------
    def evaluate(self, claim: Claim) -> Verdict:
        self._labels(claim)
        better = STATISTICS[claim.statistic][0]
        sign = 1.0 if better == "lower" else -1.0  # log(A/B) * sign < 0: A better than B
        try:
            ns, eps = self._cells(claim)
            pts = self._points(claim)
            along = claim.fields.get("along", "n")
            if along != "n" and along not in self.data.axes:
                raise ClaimsError(f"claim {claim.id!r}: along = {along!r} is not n or a problem axis of the store "
                                  f"(its problem axes: {', '.join(self.data.axes) or 'none'})")
        except _NotInStore as exc:  # a reduced run of the study: the claim cannot be decided here
            return Verdict(id=claim.id, source=claim.source, statement=claim.statement, verdict="inconclusive",
                           statistic=claim.statistic, summary=f"not decidable: {exc}")
        f = claim.fields
        comps: list[dict[str, Any]] = []  # each: what, value, lo/hi bounds of claim, log-scale est + se
        if claim.type == "ordering":
            mechs = f["mechanisms"]
            for n, e, p in itertools.product(ns, eps, pts):
                for a, b in itertools.pairwise(mechs):
                    comps.append(self._ratio_comp(claim, (a, n, e, p), (b, n, e, p), hi=1.0 if sign > 0 else None,
                                                  lo=1.0 if sign < 0 else None, strict=True))
        elif claim.type == "ratio":
            for n, e, p in itertools.product(ns, eps, pts):
                comps.append(self._ratio_comp(claim, (f["numerator"], n, e, p), (f["denominator"], n, e, p),
                                              lo=f.get("min"), hi=f.get("max")))
        elif claim.type == "reaches":
            target = f.get("target") or _s.reference_label(self.ds, required=False)
            if target is None:
                raise ClaimsError(f"claim {claim.id!r}: no target given and the store has no non-private reference; "
                                  f"the store's labels are {', '.join(self.data.labels)}")
            tol = f.get("tolerance", 0.1)
            for n, e, p in itertools.product(ns, eps, pts):
                comps.append(self._ratio_comp(claim, (f["mechanism"], n, e, p), (target, n, e, p),
                                              hi=1 + tol if sign > 0 else None,
                                              lo=1 / (1 + tol) if sign < 0 else None))
        elif claim.type == "epsilon_factor":
            factor, tol = f.get("factor", 2.0), f.get("tolerance", 0.1)
            for n, e, p in itertools.product(ns, eps, pts):
                e2 = [g for g in self.data.eps if abs(g - factor * e) <= 1e-9 * max(1.0, factor * e)]
                if not e2:
                    continue
                comps.append(self._ratio_comp(claim, (f["mechanism"], n, e, p), (f["target"], n, e2[0], p),
                                              hi=1 + tol if sign > 0 else None,
                                              lo=1 / (1 + tol) if sign < 0 else None))
            if not comps:
                return Verdict(id=claim.id, source=claim.source, statement=claim.statement, verdict="inconclusive",
                               statistic=claim.statistic,
                               summary=f"not decidable on this store: no selected epsilon has {factor:g}*epsilon in "
                                       f"the grid ({', '.join(f'{g:g}' for g in self.data.eps)})")
        elif claim.type == "slope" and along == "n":
            for e, p in itertools.product(eps, pts):
                comps.append(self._slope_comp(claim, f["mechanism"], ns, e, f.get("min"), f.get("max"), p))
        elif claim.type == "slope":  # along a problem axis, at fixed n, epsilon and other axes
            k = self.data.axes.index(along)
            groups: dict[tuple, list] = {}
            for p in pts:
                groups.setdefault(p[1][:k] + p[1][k + 1:], []).append(p)
            for n, e, group in itertools.product(ns, eps, groups.values()):
                comps.append(self._axis_slope_comp(claim, f["mechanism"], n, e, group, k, f.get("min"), f.get("max")))
        elif claim.type == "value":
            for n, e, p in itertools.product(ns, eps, pts):
                comps.append(self._value_comp(claim, f["mechanism"], n, e, f.get("min"), f.get("max"), p))
        z = _z(claim.level, len(comps))
        return self._decide(claim, comps, z)

    def _ratio_comp(self, claim: Claim, a, b, *, lo=None, hi=None, strict=False) -> dict[str, Any]:
        self._paired = 0
        pa, pb = (a[3] if len(a) > 3 else ((), ())), (b[3] if len(b) > 3 else ((), ()))
        va, vb, lr, se = self._log_contrast(claim, a[:3] + (pa[0],), b[:3] + (pb[0],))
        where = f"{a[0]}" + (f" vs {b[0]}" if a[0] != b[0] else "") + f", n={_fmt_n(a[1])}, ε={_fmt_e(a[2])}" + (
            f" vs {_fmt_e(b[2])}" if b[2] != a[2] else "") + self._where(pa[1])
        return {"cell": where, "a": va, "b": vb, "value": math.exp(lr) if math.isfinite(lr) else math.nan,
                "log": lr, "se_log": se, "min": lo, "max": hi, "strict": strict, "form": "ratio",
                "k": self._paired}

    def _value_comp(self, claim: Claim, label: str, n: int, e: float, lo, hi, p=((), ())) -> dict[str, Any]:
        """The statistic of one cell against an absolute band, with its Monte Carlo SE."""
        v, psi = self._stat(claim, label, n, e, p[0])
        k = int(np.isfinite(psi).sum())
        se = monte_carlo_se(psi) if k >= MIN_REPLICATES else math.nan
        return {"cell": f"{label}, n={_fmt_n(n)}, ε={_fmt_e(e)}{self._where(p[1])}", "value": v, "se": se, "min": lo, "max": hi,
                "strict": False, "form": "level", "k": k}

    def _axis_slope_comp(self, claim: Claim, label: str, n: int, e: float, group: list, k: int, lo,
                         hi) -> dict[str, Any]:
        """The log-log slope of the statistic along problem axis ``k`` over the points ``group``
        (which differ only there), at fixed ``n`` and ``e``: WLS with weights 1/SE^2, as along n."""
        xs, ys, ses, ks = [], [], [], []
        for idx, values in group:
            x = values[k]
            v, psi = self._stat(claim, label, n, e, idx)
            ks.append(int(np.isfinite(psi).sum()))
            se = monte_carlo_se(psi) if ks[-1] >= MIN_REPLICATES else math.nan
            if not (isinstance(x, (int, float)) and x > 0):
                raise ClaimsError(f"claim {claim.id!r}: along = {self.data.axes[k]!r} needs positive numbers, "
                                  f"got {x!r}")
            if v > 0 and math.isfinite(se) and se > 0:
                xs.append(math.log10(x))
                ys.append(math.log10(v))
                ses.append(se / (v * math.log(10)))
        res = _s._wls_line(np.array(xs), np.array(ys), np.array(ses), True)
        axis = self.data.axes[k]
        vals = [p[1][k] for p in group]
        others = "".join(f", {a}={v}" for j, (a, v) in enumerate(zip(self.data.axes, group[0][1])) if j != k)
        return {"cell": f"{label}, n={_fmt_n(n)}, ε={_fmt_e(e)}{others}, {axis}={min(vals)}…{max(vals)}",
                "value": res["slope"], "se": res["slope_se_inflated"], "min": lo, "max": hi, "strict": False,
                "form": "level", "points": int(res["n_points"]), "k": min(ks) if ks else 0}

    def _slope_comp(self, claim: Claim, label: str, ns: list[int], e: float, lo, hi, p=((), ())) -> dict[str, Any]:
        xs, ys, ses, ks = [], [], [], []
        for n in ns:
            v, psi = self._stat(claim, label, n, e, p[0])
            ks.append(int(np.isfinite(psi).sum()))
            se = monte_carlo_se(psi) if ks[-1] >= MIN_REPLICATES else math.nan
            if v > 0 and math.isfinite(se) and se > 0:
                xs.append(math.log10(n))
                ys.append(math.log10(v))
                ses.append(se / (v * math.log(10)))
        res = _s._wls_line(np.array(xs), np.array(ys), np.array(ses), True)
        return {"cell": f"{label}, ε={_fmt_e(e)}{self._where(p[1])}, n={_fmt_n(min(ns))}…{_fmt_n(max(ns))}",
                "value": res["slope"],
                "se": res["slope_se_inflated"], "min": lo, "max": hi, "strict": False, "form": "level",
                "points": int(res["n_points"]), "k": min(ks) if ks else 0}

    def _decide(self, claim: Claim, comps: list[dict[str, Any]], z: float) -> Verdict:
        holds, fails = [], []
        for c in comps:
            if c["form"] == "ratio":
                est, se = c["log"], c["se_log"]
                lo_b = math.log(c["min"]) if c["min"] is not None and c["min"] > 0 else (
                    -math.inf if c["min"] is None else math.nan)
                hi_b = math.log(c["max"]) if c["max"] is not None and c["max"] > 0 else (
                    math.inf if c["max"] is None else math.nan)
                to_value = math.exp
            else:
                est, se = c["value"], c["se"]
                lo_b = -math.inf if c["min"] is None else c["min"]
                hi_b = math.inf if c["max"] is None else c["max"]
                to_value = float
            if not (math.isfinite(est) and math.isfinite(se)):
                c.update(lo=math.nan, hi=math.nan, holds=None)
                holds.append(False)
                continue
            lo, hi = est - z * se, est + z * se
            c.update(lo=to_value(lo), hi=to_value(hi))
            ok = lo >= lo_b and hi <= hi_b and not (c["strict"] and (lo == lo_b or hi == hi_b))
            bad = hi < lo_b or lo > hi_b
            c["holds"] = True if ok else (False if bad else None)
            c["needed"] = _replicates_to_decide(est, z * se, (lo_b, hi_b), c["k"]) if c["holds"] is None else None
            holds.append(ok)
            fails.append(bad)
        verdict = "disagrees" if any(fails) else ("agrees" if all(holds) and holds else "inconclusive")
        numbers = []
        for c in comps:
            row = {k: c.get(k) for k in ("cell", "value", "lo", "hi", "min", "max", "holds", "k", "needed")}
            if c["form"] == "ratio":
                row.update(a=c["a"], b=c["b"], se=c["value"] * c["se_log"] if math.isfinite(c["se_log"]) else math.nan)
            else:
                row.update(se=c["se"], points=c.get("points"))
            numbers.append(row)
        return Verdict(id=claim.id, source=claim.source, statement=claim.statement, verdict=verdict,
                       statistic=claim.statistic, summary=_summary(claim, numbers, verdict), numbers=numbers, z=z)


def _replicates_to_decide(est: float, half: float, bounds: tuple[float, float], k: int) -> int | None:
    """Replicates per cell at which an interval of half-width ``half`` (from ``k`` replicates)
    around ``est`` would clear the bound it straddles, if the estimate stays: the half-width
    shrinks like ``1 / sqrt(k)``, so ``k (half / gap)^2`` with ``gap`` the distance to that
    bound.  None when no finite bound is straddled or the estimate sits on it."""
    gaps = [abs(est - b) for b in bounds if math.isfinite(b) and est - half < b < est + half]
    if not gaps or not min(gaps) > 0 or not k:
        return None
    return math.ceil(k * (half / min(gaps)) ** 2)


def _finite_num(v: Any) -> bool:
    return v is not None and math.isfinite(float(v))


def _num(v: Any) -> str:
    return f"{float(v):.3g}" if v is not None and math.isfinite(float(v)) else "—"


def _summary(claim: Claim, numbers: list[dict[str, Any]], verdict: str) -> str:
    """One line: the comparisons that decide the verdict (the failing ones, else the weakest)."""
    if not numbers:
        return "no comparison"
    key = {"disagrees": lambda r: r["holds"] is False, "inconclusive": lambda r: r["holds"] is None}.get(verdict)
    shown = [r for r in numbers if key(r)] if key else list(numbers)
    what = {"slope": "slope", "value": "value"}.get(claim.type, "ratio")
    parts = []
    for r in shown[:3]:
        if not _finite_num(r["lo"]) and r.get("k", MIN_REPLICATES) < MIN_REPLICATES:  # no interval: say why
            k = r["k"]
            why = (f"{k} replicate{'s' if k != 1 else ''}" if k else "no finished replicates") + (
                " paired" if what == "ratio" and k else "")
            shown_value = f"{what} {_num(r['value'])}, no interval" if _finite_num(r["value"]) else f"no {what}"
            part = f"{r['cell']}: {shown_value} ({why}; needs ≥ {MIN_REPLICATES})"
        else:
            part = f"{r['cell']}: {what} {_num(r['value'])} [{_num(r['lo'])}, {_num(r['hi'])}]"
        if what == "ratio":
            part += f" ({_num(r['a'])} / {_num(r['b'])})"
        parts.append(part)
    more = f"; … {len(shown) - 3} more" if len(shown) > 3 else ""
    band = what + " claimed " + (
        f"in [{_num(numbers[0]['min'])}, {_num(numbers[0]['max'])}]" if numbers[0]["min"] is not None
        and numbers[0]["max"] is not None else (f"< {_num(numbers[0]['max'])}" if numbers[0]["max"] is not None
                                                else f"> {_num(numbers[0]['min'])}"))
    head = {"agrees": f"all {len(numbers)} hold", "disagrees": f"{len(shown)} of {len(numbers)} fail",
            "inconclusive": f"{len(shown)} of {len(numbers)} undecided"}[verdict]
    needed = [r["needed"] for r in shown if r.get("needed")]
    if verdict == "inconclusive" and needed:  # the next step: how many replicates would decide it
        more += (f"; about {max(needed):,} replicates per cell would decide "
                 f"{'it' if len(needed) == len(shown) else f'{len(needed)} of them'} if the estimates hold")
    return f"{head} ({band}); " + "; ".join(parts) + more


def evaluate_claims(ds: xr.Dataset, claims: list[Claim], *, study: str | None = None) -> list[Verdict]:
    """Check ``claims`` against the store ``ds``: one :class:`Verdict` per claim.

    Every claim is checked against the store before any is evaluated (unknown mechanism
    labels, a statistic the store cannot give): :class:`ClaimsError` names the first
    problem.  A claim about n or epsilon values the store's grid lacks (a reduced run of
    the study) is ``inconclusive``, its summary naming them.  ``study``: the claims file's ``study``;
    when given it must equal the store's spec name.
    """
    title = str(ds.attrs.get("title") or "")
    studies = (study,) if isinstance(study, str) else study
    if studies is not None and title and title not in studies:
        named = repr(studies[0]) if len(studies) == 1 else f"one of {list(studies)}"
        raise ClaimsError(f"the claims are about study {named}, the store holds study {title!r}")
    ev = _Evaluator(ds)
    for claim in claims:
        ev._labels(claim)
        ev.data.values(claim.statistic)
    return [ev.evaluate(c) for c in claims]


def check_claims(ds: xr.Dataset, path: str | os.PathLike | None = None,
                 store_path: str | os.PathLike | None = None) -> list[Verdict]:
    """Load the claims file ``path`` (default: :func:`default_claims_path`) and evaluate it on ``ds``."""
    if path is None:
        path = default_claims_path(ds, store_path)
        if path is None:
            name = ds.attrs.get("title") or "?"
            raise ClaimsError(f"no claims file found for study {name!r} (looked for workflows/{name}.claims.toml); "
                              "pass path=")
    study, claims = load_claims(path)
    return evaluate_claims(ds, claims, study=study)


def verdict_table(verdicts: list[Verdict]) -> str:
    """The verdicts as a Markdown table: id, verdict, statement, statistic, numbers, source."""
    lines = ["| claim | verdict | statement | statistic | numbers (95% intervals, Bonferroni) | source |",
             "|---|---|---|---|---|---|"]
    for v in verdicts:
        cells = [v.id, f"**{v.verdict}**", v.statement, v.statistic, v.summary, v.source]
        lines.append("| " + " | ".join(str(c).replace("|", "/").replace("\n", " ") for c in cells) + " |")
    return "\n".join(lines)

"""What every section of ``kngflow report`` writes with: the :class:`ReportContext` the
sections share (the store, its summaries and what was drawn, the mechanisms' kinds and privacy
computed once) and the few text helpers all of them use, so that every table prints numbers,
missing values, small samples and mechanism names the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr

from . import summaries as _s

__all__ = ["ReportContext", "NA", "is_finite", "fmt_g", "fmt_pm", "md_table", "SMALL_SAMPLE", "small_sample_banner",
           "smallest_count", "mechanism_name", "mechanism_cell"]

#: What a table shows for a missing or non-finite number.
NA = "—"


def is_finite(v: Any) -> bool:
    """Whether ``v`` is a finite number (False for None, text and NaN)."""
    try:
        return math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def fmt_g(v: Any, digits: int = 4) -> str:
    """``v`` to ``digits`` significant digits, :data:`NA` when it is not finite."""
    return f"{float(v):.{digits}g}" if is_finite(v) else NA


def fmt_pm(v: Any, se: Any, fmt: str = ".3f") -> str:
    """``0.512 ± 0.031``: ``v`` with its SE (``v`` alone when the SE is not finite)."""
    if not is_finite(v):
        return NA
    if not is_finite(se):
        return f"{float(v):{fmt}}"
    return f"{float(v):{fmt}} ± {float(se):{fmt}}"


def md_table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table of ``header`` and ``rows`` (text cells)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


#: Fewer finished replicates than this behind a statistic: the report says so where it is shown
#: and flags no bias there (a Monte Carlo SE from a handful of replicates is itself noise).
SMALL_SAMPLE = 10


def small_sample_banner(k_min: int, what: str = "these numbers", more: str = "") -> list[str]:
    """Markdown lines of the small-sample banner (a ``>`` block), or ``[]`` when ``k_min`` is
    0 (nothing finished) or at least :data:`SMALL_SAMPLE`."""
    if not 0 < int(k_min) < SMALL_SAMPLE:
        return []
    return [f"> **Small sample:** {what} rest on as few as {int(k_min)} finished replicate"
            f"{'s' if int(k_min) != 1 else ''} (fewer than {SMALL_SAMPLE}): their Monte Carlo SEs are rough"
            + (f"; {more}" if more else "") + ".", ""]


def smallest_count(counts) -> int:
    """The smallest positive count (0 when every count is 0)."""
    c = np.asarray(counts, dtype=float).ravel()
    c = c[np.isfinite(c) & (c > 0)]
    return int(c.min()) if c.size else 0


def mechanism_name(label: str, kind: str | None, *tags: str) -> str:
    """``"KNG (kng, ε-DP)"``: a label with its kind and tags in brackets; the kind is left out
    when it is the label itself (``"kng (ε-DP)"``, never ``"kng (kng)"``)."""
    inner = [str(kind)] if kind is not None and str(kind) != str(label) else []
    inner += [t for t in tags if t]
    return f"{label} ({', '.join(inner)})" if inner else str(label)


def mechanism_cell(m: str, deltas: dict[str, float], mixed: bool) -> str:
    """A table's mechanism cell: marked when ε-DP and (ε, δ)-DP rows share the table."""
    return f"{m} (ε, δ={deltas[m]:g})" if mixed and deltas.get(m, 0.0) > 0 else m


@dataclass
class ReportContext:
    """What the sections of one report share: the store, its computed summaries and what
    was drawn, plus the mechanisms' kinds and privacy tags, computed once."""

    ds: xr.Dataset
    summary: xr.Dataset
    info: dict[str, Any]
    figures: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    store_path: str | None = None
    diagnosands: xr.Dataset | None = None
    verdicts: list | None = None
    claims_path: str | None = None

    def __post_init__(self):
        ds = self.ds
        self.kinds = _s.kinds_by_label(ds)
        self.deltas = _s.mechanism_deltas(ds)
        self.mixed = any(self.deltas.values()) and not all(self.deltas.values())
        self.nonprivate = set(_s.nonprivate_labels(ds))
        self.ref = _s.reference_label(ds, required=False)
        self.R = self.info["n_replicates"]
        self.mechs = [str(m) for m in self.summary["mechanism"].values]
        self.n_vals = self.summary["n"].values
        self.eps_vals = self.summary["epsilon"].values

    def name(self, m: str) -> str:
        """The mechanism's table cell (marked (ε, δ) when the study mixes both kinds of DP)."""
        return mechanism_cell(m, self.deltas, self.mixed)

    def described(self, m: str) -> str:
        """``"label (kind, ε-DP)"``: the mechanism with its kind and privacy."""
        tag = "" if m in self.nonprivate else _s.privacy_tag(self.deltas.get(m, 0.0))
        return mechanism_name(m, self.kinds.get(m, m), tag)

    def eps_rows(self, m: str) -> list[tuple[float, str]]:
        """``[(ε, ε text)]`` of a mechanism's rows: a non-private estimator ignores ε (the same
        data serve every ε): one row, "any"."""
        if m in self.nonprivate and self.eps_vals.size > 1:
            return [(self.eps_vals[0], "any")]
        return [(e, _s.format_epsilon(e)) for e in self.eps_vals]

    @property
    def headline(self) -> tuple[str, str] | None:
        """The figure shown in the summary: the first drawn (error against n, else against ε)."""
        return self.figures[0] if self.figures else None

"""A store's progress and current failures, read from its flags and failure log (``kngflow status``)."""

from __future__ import annotations

import json

from .zarrstore import read_failures, read_flags, read_meta

__all__ = ["status_data", "status_text"]


def status_data(path, max_messages: int = 20) -> dict:
    """What ``kngflow status --json`` prints: the store's counts and its current failures.

    Keys: ``store``, ``title``, ``spec_hash``, ``problem``, ``dims`` (size of
    each coordinate), ``done``, ``failed``, ``total``, ``groups`` (one entry
    per (n, mechanism) with ``n``, ``mechanism``, ``done``, ``failed``,
    ``total``, by n then mechanism in spec order; a store with problem axes has one entry per
    point of the axes, n and mechanism, with the axis values as more keys, by point first)
    and ``failures`` (at most
    ``max_messages`` records ``mechanism, n, epsilon, replicate, message`` of
    cells failed and not done since).
    """
    meta = read_meta(path)
    done, failed = read_flags(path)
    failed = failed.astype(bool) & (done == 0)
    done = done.astype(bool)
    labels = [str(x) for x in meta.coords["mechanism"]]
    ns = [int(x) for x in meta.coords["n"]]
    axes = meta.axes
    groups = [
        {
            **dict(zip(axes, values)),
            "n": ns[i],
            "mechanism": lab,
            "done": int(done[at + (a, i)].sum()),
            "failed": int(failed[at + (a, i)].sum()),
            "total": int(done[at + (a, i)].size),
        }
        for at, values in meta.axis_points()
        for i in sorted(range(len(ns)), key=lambda k: ns[k])
        for a, lab in enumerate(labels)
    ]
    current = []
    if failed.any():
        idx = {
            "mechanism": {v: k for k, v in enumerate(labels)},
            "n": {v: k for k, v in enumerate(ns)},
            "epsilon": {float(v): k for k, v in enumerate(meta.coords["epsilon"])},
            "replicate": {int(v): k for k, v in enumerate(meta.coords["replicate"])},
            **{a: {_key(v): k for k, v in enumerate(meta.coords[a])} for a in axes},
        }
        for r in read_failures(path):
            if len(current) >= max_messages:
                break
            try:
                cell = tuple(idx[a][_key(r[a])] for a in axes) + (
                    idx["mechanism"][r["mechanism"]],
                    idx["n"][int(r["n"])],
                    idx["epsilon"][float(r["epsilon"])],
                    idx["replicate"][int(r["replicate"])],
                )
            except (KeyError, ValueError, TypeError):
                continue
            if failed[cell]:
                current.append({k: r[k] for k in axes + ("mechanism", "n", "epsilon", "replicate", "message")})
    return {
        "store": str(path),
        "title": meta.attrs.get("title") or None,
        "spec_hash": str(meta.attrs.get("spec_hash", "")),
        "problem": meta.attrs.get("problem"),
        "dims": {k: len(v) for k, v in meta.coords.items()},
        "overrides": _overrides(meta.attrs),
        "done": int(done.sum()),
        "failed": int(failed.sum()),
        "total": int(done.size),
        "groups": groups,
        "failures": current,
    }


def _key(value):
    """A problem-axis value as a dict key (numpy scalars and JSON values alike)."""
    v = value.item() if hasattr(value, "item") else value
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)


def _overrides(attrs: dict) -> dict:
    """The grid overrides of a reduced run (``overrides`` attribute; ``{}``: the full study)."""
    try:
        value = json.loads(attrs.get("overrides") or "{}")
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _overrides_text(overrides: dict) -> str:
    parts = []
    for key in ("n", "epsilon", "replicates"):
        if key in overrides:
            v = overrides[key]
            parts.append(f"--{key} " + (",".join(f"{x:g}" if key == "epsilon" else str(x) for x in v)
                                        if isinstance(v, list) else str(v)))
    return " ".join(parts)


def status_text(path, max_messages: int = 20, data: dict | None = None) -> str:
    """The ``kngflow status`` table as text (of ``data``, default :func:`status_data`)."""
    d = data or status_data(path, max_messages)
    width = max([len("mechanism")] + [len(g["mechanism"]) for g in d["groups"]])
    fixed = ("n", "mechanism", "done", "failed", "total")
    axes = [k for k in (d["groups"][0] if d["groups"] else {}) if k not in fixed]
    lines = [
        f"store {path}",
        f"study {d['title'] or '-'} (spec {d['spec_hash'][:12]}), problem {d['problem']}, dims "
        + ", ".join(f"{k}={v}" for k, v in d["dims"].items()),
        *([f"reduced run: {_overrides_text(d['overrides'])}"] if d.get("overrides") else []),
        f"overall: {d['done']} done, {d['failed']} failed, {d['total']} total",
        "",
        "".join(f"{a:>8}  " for a in axes)
        + f"{'n':>10}  {'mechanism':<{width}}  {'done':>7}  {'failed':>7}  {'total':>7}",
    ]
    for g in d["groups"]:
        lines.append("".join(f"{g[a]!s:>8}  " for a in axes)
                     + f"{g['n']:>10}  {g['mechanism']:<{width}}  {g['done']:>7}  {g['failed']:>7}  {g['total']:>7}")
    if d["failed"]:
        lines.append("")
        lines.append(f"failures ({d['failed']} cells; showing {len(d['failures'])} messages):")
        for r in d["failures"]:
            at = "".join(f"{a}={r[a]} " for a in axes)
            lines.append(f"  {at}{r['mechanism']} n={r['n']} eps={r['epsilon']} rep={r['replicate']}: {r['message']}")
    return "\n".join(lines)

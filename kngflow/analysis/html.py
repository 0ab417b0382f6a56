"""The report as ONE self-contained HTML file: nothing is fetched when it is viewed.

:func:`render_html` turns the report's Markdown (the subset :mod:`kngflow.analysis.report`
and the problems' ``report_sections`` write: headings, paragraphs, lists, pipe tables,
images, fenced code, ``code``, ``*emphasis*``, ``**strong**``) into HTML, with

* every figure inline as a ``data:image/png;base64`` URI (read from the report's directory);
  a click opens it at full size over the page (a CSS ``:target`` overlay: no script, no
  second copy of the image), and a multi-panel figure given stacked versions
  (``narrow_images``: two panels a row, one) shows them on narrow screens;
* every heading with an id (GitHub's rule: :func:`anchor`), so that the contents' links
  ``[text](#id)`` work in the browser and on GitHub alike;
* every table sortable by clicking a column header (a few lines of inline JavaScript, no
  library; numbers such as ``10^4``, ``1/16``, ``0.123 ± 0.004`` sort by value, ``—`` last);
* a banner (``> `` lines of the Markdown) where a statistic rests on few replicates;
* extra sections: the diagnosands of the cells the tables do not show (sortable), then the
  provenance folded in a ``<details>``: the store's spec (the ``spec`` attribute), its history
  and ``versions``, ``plugins`` and the other run attributes;
* a print stylesheet: every table wraps to the page's width, so a PDF printed from the
  browser keeps every column and every figure.

Links into the page (``#id``) are links; other links are kept as text (the file holds no
``href``/``src`` to the network).
"""

from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path
from typing import Any

__all__ = ["render_html", "markdown_to_html", "anchor", "SORT_SCRIPT"]

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:2em auto;
max-width:1150px;padding:0 1em;color:#1b1b1b;line-height:1.45;overflow-wrap:break-word}
h1{border-bottom:2px solid #444;padding-bottom:.2em}h2{border-bottom:1px solid #bbb;margin-top:1.8em}
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:.86em;max-width:100%}
th,td{border:1px solid #ccc;padding:.25em .55em;text-align:left;vertical-align:top}
td.long{min-width:11em}td.words{min-width:6em}.anywhere td,th{overflow-wrap:anywhere}
th{background:#eef1f5;cursor:pointer;user-select:none;position:sticky;top:0}
th[aria-sort=ascending]::after{content:" \\25B2"}th[aria-sort=descending]::after{content:" \\25BC"}
tbody tr:nth-child(even){background:#f8f9fb}.scroll{overflow-x:auto}
img{max-width:100%;height:auto;border:1px solid #ddd}figure{margin:1em 0}
figcaption{font-style:italic;font-size:.9em;color:#333}
a.zoom{cursor:zoom-in;display:inline-block;max-width:100%}figure .close{display:none}
figure.fig:target{position:fixed;inset:0;z-index:10;margin:0;padding:2.6em 1em 1em;background:#fff;overflow:auto}
figure.fig:target a.zoom{cursor:auto;max-width:none}figure.fig:target img{max-width:none;border:none}
figure.fig:target .close{display:block;position:fixed;top:.4em;right:1.2em;font-weight:600;background:#fff;
padding:.2em .6em;border:1px solid #888;border-radius:4px;text-decoration:none;color:#1b1b1b}
nav.contents ul{columns:2 18em}
pre{background:#f4f4f4;padding:.8em;overflow-x:auto;font-size:.85em;white-space:pre-wrap}
code{background:#f4f4f4;padding:0 .2em;overflow-wrap:anywhere}
.banner{border-left:4px solid #c98a00;background:#fff7e0;padding:.4em .8em;margin:.6em 0}
.mark{color:#a00;font-weight:bold}.agrees{color:#1a7f37}.disagrees{color:#b00}.inconclusive{color:#8a6d00}
details{margin:.8em 0}summary{cursor:pointer;font-weight:600}
@media (max-width:900px){body{padding:0 .5em}table{font-size:.78em}th,td{padding:.2em .3em}
td{overflow-wrap:anywhere}td.long{min-width:7em}}
@page{size:A4;margin:12mm}
@media print{
body{max-width:none;margin:0;padding:0;font-size:10pt;line-height:1.3}
table{font-size:7.5pt;width:100%}th,td{padding:.15em .3em}
th{position:static;cursor:auto}th[aria-sort]::after{content:none}
.scroll{overflow:visible}tr,figure,img,.banner{break-inside:avoid}h1,h2,h3{break-after:avoid}
img{max-height:120mm;width:auto;border:none}pre{font-size:7pt}figure .close{display:none}a{color:inherit}
}
"""

#: The inline sorting script: click a header to sort (again to reverse).
SORT_SCRIPT = r"""
(function(){
  function key(text){
    var t=text.replace(/\u2212/g,'-').trim();
    if(t===''||t==='\u2014')return null;
    var m=t.match(/^(-?\d+(?:\.\d+)?)\^(-?\d+)/);
    if(m)return Math.pow(parseFloat(m[1]),parseInt(m[2],10));
    m=t.match(/^(-?\d+(?:\.\d+)?)\/(\d+(?:\.\d+)?)(?!\d)/);
    if(m)return parseFloat(m[1])/parseFloat(m[2]);
    var x=parseFloat(t);
    return isNaN(x)?t.toLowerCase():x;
  }
  function compare(a,b){
    if(a===null&&b===null)return 0;if(a===null)return 1;if(b===null)return -1;
    var na=typeof a==='number',nb=typeof b==='number';
    if(na&&nb)return a-b;if(na)return -1;if(nb)return 1;
    return a<b?-1:(a>b?1:0);
  }
  function sortBy(table,th,col){
    var body=table.tBodies[0];if(!body)return;
    var desc=th.getAttribute('aria-sort')==='ascending';
    var rows=Array.prototype.slice.call(body.rows).map(function(r,i){
      var c=r.cells[col];return {row:r,i:i,k:key(c?c.textContent:'')};});
    rows.sort(function(a,b){var c=compare(a.k,b.k);if(desc&&a.k!==null&&b.k!==null)c=-c;return c||a.i-b.i;});
    rows.forEach(function(x){body.appendChild(x.row);});
    Array.prototype.forEach.call(table.tHead.rows[0].cells,function(h){h.removeAttribute('aria-sort');});
    th.setAttribute('aria-sort',desc?'descending':'ascending');
  }
  Array.prototype.forEach.call(document.querySelectorAll('table.sortable'),function(table){
    if(!table.tHead)return;
    Array.prototype.forEach.call(table.tHead.rows[0].cells,function(th,col){
      th.title='click to sort';
      th.addEventListener('click',function(){sortBy(table,th,col);});
    });
  });
})();
"""

_IMAGE = re.compile(r"^!\[([^\]]*)\]\(([^)\s]+)\)\s*$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_LIST = re.compile(r"^\s*[-*+]\s+(.*)$")
_SEP = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")


def anchor(text: str, seen: dict[str, int] | None = None) -> str:
    """The id of a heading, as GitHub makes it: lower case, punctuation dropped (letters, digits,
    ``_``, ``-`` and spaces kept), spaces turned into ``-``; the n-th repeat of an id gets
    ``-n`` (``seen`` counts the ids given so far in the page, headings of every level in order)."""
    base = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-") or "section"
    if seen is None:
        return base
    n = seen.get(base, 0)
    seen[base] = n + 1
    return base if n == 0 else f"{base}-{n}"


_slug = anchor


def _inline(text: str) -> str:
    """Escape ``text`` and render ``code``, **strong**, *emphasis*; links stay text."""
    parts = re.split(r"(`[^`]+`)", text)
    out = []
    for part in parts:
        if len(part) >= 2 and part.startswith("`") and part.endswith("`"):
            out.append(f"<code>{html.escape(part[1:-1])}</code>")
            continue
        s = html.escape(part, quote=False)
        s = re.sub(r"\[([^\]]+)\]\((#[^)\s\"'<>]+)\)", r'<a href="\2">\1</a>', s)
        s = re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", r"\1 (\2)", s)
        s = re.sub(r"\*\*(\S(?:.*?\S)?)\*\*", r"<strong>\1</strong>", s)
        s = re.sub(r"(?<![\w*])\*(\S(?:[^*]*?\S)?)\*(?![\w*])", r"<em>\1</em>", s)
        s = s.replace("†", '<span class="mark">†</span>').replace("‡", '<span class="mark">‡</span>')
        for verdict in ("agrees", "disagrees", "inconclusive"):  # the claims table's verdicts
            s = s.replace(f"<strong>{verdict}</strong>", f'<strong class="{verdict}">{verdict}</strong>')
        out.append(s)
    return "".join(out)


def _cells(line: str) -> list[str]:
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|"):
        line = line[:-1]
    return [c.strip() for c in line.split("|")]


def _td(text: str, cell: str) -> str:
    """A cell; text of many words gets a floor width so that it wraps into a readable column."""
    size = len(str(text))
    cls = ' class="long"' if size > 80 else (' class="words"' if size > 30 and " " in str(text) else "")
    return f"<td{cls}>{cell}</td>"


def table_html(header: list[str], rows: list[list[str]], *, table_id: str | None = None, raw: bool = False,
               anywhere: bool = False) -> str:
    """A sortable ``<table>``; cells are Markdown-inline text (or plain text when ``raw``).  Cells
    wrap, so the table fits the page (on screen and in print); ``anywhere``: long words may
    break anywhere too (hashes, JSON values)."""
    fmt = (lambda c: html.escape(str(c), quote=False)) if raw else _inline
    ident = f' id="{html.escape(table_id)}"' if table_id else ""
    cls = "sortable anywhere" if anywhere else "sortable"
    head = "".join(f"<th>{fmt(h)}</th>" for h in header)
    body = "\n".join("<tr>" + "".join(_td(c, fmt(c)) for c in r) + "</tr>" for r in rows)
    return f'<div class="scroll"><table class="{cls}"{ident}>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody></table></div>'


def _image(alt: str, src: str, base: Path | None, caption: str | None, narrow=None) -> str:
    """A figure: the image inline, a click opening it at full size (``:target``), a close link,
    the caption; ``narrow``: ``[(media, PNG bytes)]`` shown instead where the CSS media query
    matches (the first that does)."""
    path = Path(src) if base is None else base / src
    if src.startswith(("http://", "https://", "//")) or not path.is_file():
        return f"<p>[figure {html.escape(alt)}: {html.escape(src)} not available]</p>"
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    mime = "image/svg+xml" if src.lower().endswith(".svg") else "image/png"
    cap = f"<figcaption>{_inline(caption)}</figcaption>" if caption else ""
    ident = "fig-" + (re.sub(r"[^\w-]+", "-", Path(src).stem) or "figure")
    source = ""
    for media, png in narrow or ():
        small = base64.b64encode(png).decode("ascii")
        source += f'<source media="{html.escape(media)}" srcset="data:image/png;base64,{small}">'
    return (f'<span id="{ident}-at"></span><figure class="fig" id="{ident}">'
            f'<a class="close" href="#{ident}-at">close ✕</a>'
            f'<a class="zoom" href="#{ident}" title="open at full size"><picture>{source}'
            f'<img alt="{html.escape(alt)}" src="data:{mime};base64,{data}"></picture></a>{cap}</figure>')


def markdown_to_html(md: str, image_dir: str | Path | None = None, narrow_images: dict[str, list] | None = None) -> str:
    """HTML for the Markdown subset the report writes; images inlined from ``image_dir``
    (``narrow_images``: ``{file: [(CSS media, PNG bytes)]}`` shown instead where the media match)."""
    base = None if image_dir is None else Path(image_dir)
    lines = md.splitlines()
    out: list[str] = []
    seen: dict[str, int] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        if line.lstrip().startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].lstrip().startswith("```"):
                j += 1
            out.append("<pre>" + html.escape("\n".join(lines[i + 1 : j])) + "</pre>")
            i = j + 1
            continue
        if line.startswith(">"):  # a block quote: the report's banners
            quote = []
            while i < len(lines) and lines[i].startswith(">"):
                quote.append(lines[i][1:].strip())
                i += 1
            out.append(f'<div class="banner" role="note">{_inline(" ".join(quote))}</div>')
            continue
        m = _HEADING.match(line)
        if m:
            level, text = len(m.group(1)), m.group(2)
            out.append(f'<h{level} id="{_slug(text, seen)}">{_inline(text)}</h{level}>')
            i += 1
            continue
        m = _IMAGE.match(line.strip())
        if m:
            caption = None
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            nxt = lines[j].strip() if j < len(lines) else ""
            if len(nxt) > 2 and nxt.startswith("*") and nxt.endswith("*") and not nxt.startswith("**"):
                caption, i = nxt[1:-1], j + 1
            else:
                i += 1
            out.append(_image(m.group(1), m.group(2), base, caption, (narrow_images or {}).get(m.group(2))))
            continue
        if line.lstrip().startswith("|") and i + 1 < len(lines) and _SEP.match(lines[i + 1].strip()):
            header = _cells(line)
            j = i + 2
            rows = []
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                rows.append(_cells(lines[j]))
                j += 1
            out.append(table_html(header, rows))
            i = j
            continue
        if _LIST.match(line):
            items = []
            while i < len(lines) and lines[i].strip():
                m = _LIST.match(lines[i])
                if m:
                    items.append(m.group(1))
                elif items:
                    items[-1] += " " + lines[i].strip()
                i += 1
            listed = "<ul>" + "".join(f"<li>{_inline(t)}</li>" for t in items) + "</ul>"
            contents = bool(out) and out[-1].startswith('<h2 id="contents">')
            out.append(f'<nav class="contents">{listed}</nav>' if contents else listed)
            continue
        para = []
        while i < len(lines) and lines[i].strip() and not (
            _HEADING.match(lines[i]) or _LIST.match(lines[i]) or lines[i].lstrip().startswith(("|", "```", "![", ">"))
        ):
            para.append(lines[i].strip())
            i += 1
        if not para:  # a line no block claimed (e.g. a lone "|"): keep it as text
            para.append(lines[i].strip())
            i += 1
        text = " ".join(para)
        if len(text) > 2 and text.startswith("*") and text.endswith("*") and not text.startswith("**"):
            out.append(f"<p><em>{_inline(text[1:-1])}</em></p>")
        else:
            out.append(f"<p>{_inline(text)}</p>")
    return "\n".join(out)


def _provenance_rows(attrs: dict[str, Any]) -> list[list[str]]:
    rows = []
    for key in ("title", "problem", "spec_hash", "overrides", "seed", "kngflow_version", "kngflow_store_format",
                "reference_stderr", "nonprivate_labels", "delta"):
        if key == "overrides" and str(attrs.get(key, "{}")) in ("", "{}"):
            continue  # the full study (a reduced run's grid overrides are shown)
        if key in attrs and str(attrs[key]) != "":
            rows.append([key, str(attrs[key])])
    versions = attrs.get("versions")
    if versions:
        try:
            parsed = json.loads(versions) if isinstance(versions, str) else dict(versions)
        except (TypeError, ValueError):
            parsed = None
        if isinstance(parsed, dict):
            for k, v in _flatten(parsed):
                rows.append([f"versions: {k}", v])
        else:
            rows.append(["versions", str(versions)])
    plugins = attrs.get("plugins")
    if plugins:
        rows.append(["plugins", str(plugins)])
    return rows


def _flatten(d: dict, prefix: str = "") -> list[tuple[str, str]]:
    out = []
    for k, v in d.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            out += _flatten(v, name + ".")
        else:
            out.append((name, v if isinstance(v, str) else json.dumps(v)))
    return out


def render_html(
    md: str,
    *,
    image_dir: str | Path | None,
    attrs: dict[str, Any],
    title: str = "kngflow report",
    extra_sections: list[tuple[str, str]] = (),
    narrow_images: dict[str, list] | None = None,
) -> str:
    """The whole HTML document: the report's Markdown (its header, caveats and tables), then
    ``extra_sections`` (``(heading, html)``), then the provenance folded in a ``<details>``: the
    spec, its history, its hash and the package versions; CSS (screen and print) and the sorting
    script inline."""
    body = [markdown_to_html(md, image_dir, narrow_images)]
    for heading, block in extra_sections:
        body.append(f"<h2>{html.escape(heading)}</h2>\n{block}")
    body.append("<h2 id=\"provenance\">Provenance</h2>")
    spec, history, rows = attrs.get("spec"), attrs.get("spec_history"), _provenance_rows(attrs)
    if not (spec or rows):
        body.append("<p>The store records no spec and no provenance.</p>")
    else:
        inner = []
        if spec:
            inner.append(f"<h3 id=\"spec\">Spec</h3>\n<pre>{html.escape(str(spec), quote=False)}</pre>")
        if history and str(history) not in ("[]", ""):
            inner.append(f"<h3>Spec history</h3>\n<pre>{html.escape(str(history), quote=False)}</pre>")
        if rows:
            inner.append(table_html(["attribute", "value"], rows, raw=True, anywhere=True))
        body.append("<details><summary>the spec, its hash, the seed and the package versions</summary>\n"
                    + "\n".join(inner) + "\n</details>")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + f"\n<script>{SORT_SCRIPT}</script>\n</body>\n</html>\n"
    )

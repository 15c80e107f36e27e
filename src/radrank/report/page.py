"""HTML and Markdown building blocks of the report: escaped tables (sortable in the page),
collapsible sections, and the page shell with its style, its one small script and a
content security policy that forbids every fetch.

Every text the report shows may come from the people being ranked (display names,
institutions, URLs, case ids, report texts, judges' answers), so:

* control characters (NUL, BEL, ESC, … and DEL, C1 controls; not tab, newline or carriage
  return) never reach either file: :func:`visible` shows each as its Unicode control picture
  (NUL → ␀, ESC → ␛, BEL → ␇) or U+FFFD, in the text and, as a last pass, in the whole page,
  its Markdown and its figures;
* HTML: every text is HTML-escaped (:func:`esc`);
* Markdown: every text is escaped (:func:`md_text`): a ``<`` that would open a tag, a comment or an
  autolink (no raw HTML, no ``<javascript:…>``), an ``&`` that would start an entity, backslashes,
  backticks and table bars, and the ``](`` / ``][`` of link syntax, so a text never becomes HTML,
  a link or an image;
  the only links are the report's own (:func:`md_link`), to http(s) URLs only — any other URL
  (``javascript:``, ``data:``, ``file:``) is shown as text, unlinked.
"""

from __future__ import annotations

import html
import math
import re

# Nothing may be fetched: no network, no file; inline style and script only; images only as data: URIs
# (large heat maps embed one PNG inside their SVG).
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

STYLE = """
:root{--ink:#1d2733;--muted:#5b6775;--line:#d8dee6;--bg:#f7f9fb;--accent:#c0392b;--link:#1f5f99}
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--ink);margin:0;
 line-height:1.45;font-size:15px}
.layout{display:grid;grid-template-columns:250px minmax(0,1fr);max-width:1680px;margin:0 auto}
nav.toc{position:sticky;top:0;align-self:start;max-height:100vh;overflow:auto;padding:1.2em 1em;
 border-right:1px solid var(--line);background:var(--bg);font-size:13.5px}
nav.toc ul{list-style:none;padding-left:.9em;margin:.2em 0}nav.toc>ul{padding-left:0}
nav.toc a{color:var(--link);text-decoration:none}nav.toc a:hover{text-decoration:underline}
main{padding:1em 2.2em 4em;min-width:0}
h1{font-size:1.7em;margin:.4em 0}h2{font-size:1.35em;border-bottom:2px solid var(--line);padding-bottom:.2em;
 margin-top:2.2em}h3{font-size:1.1em;margin-top:1.8em}
p.note,.muted{color:var(--muted);font-size:.92em}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;margin:.6em 0;font-size:13.5px}
th,td{border-bottom:1px solid var(--line);padding:4px 8px;text-align:right;vertical-align:top;white-space:nowrap}
td.t{white-space:normal}
th{background:var(--bg);position:sticky;top:0}
td.t,th.t{text-align:left}
table.sortable th{cursor:pointer;user-select:none}table.sortable th:hover{background:#e9eef4}
th[aria-sort=ascending]::after{content:" ▲"}th[aria-sort=descending]::after{content:" ▼"}
tr.accent td{background:#fdf1ef}
td.text{text-align:left;min-width:15em;max-width:30em;white-space:pre-wrap;word-break:break-word}
td.text.ctx{min-width:8em;max-width:13em;font-size:12.5px}
td.text.judge{min-width:17em;white-space:normal;font-size:12.5px}
td.nm{white-space:nowrap;font-weight:500}
td.kv{text-align:left;font-size:12.5px;color:var(--muted);white-space:nowrap}
td.sig{font-weight:600}
figure{margin:1em 0}svg.figure{max-width:100%;height:auto}
figcaption{color:var(--muted);font-size:.92em;max-width:70em}
details{margin:.4em 0}details>summary{cursor:pointer;color:var(--link)}
details.model{border:1px solid var(--line);border-radius:6px;padding:.3em .8em;margin:.5em 0}
pre{white-space:pre-wrap;word-break:break-word;background:var(--bg);padding:.6em;border-radius:4px;font-size:12.5px}
.badge{display:inline-block;padding:0 .5em;border-radius:1em;background:#e7edf3;font-size:.85em}
.err{color:var(--accent)}
@media (max-width:1100px){.layout{grid-template-columns:1fr}nav.toc{position:static;max-height:none;
 border-right:0;border-bottom:1px solid var(--line)}main{padding:1em}}
"""

# Click a header to sort its table; cells sort by data-v when they have one (numbers), else by text.
SCRIPT = """
document.querySelectorAll('table.sortable').forEach(function(t){
 t.querySelectorAll('th').forEach(function(th,i){th.addEventListener('click',function(){
  var asc=th.getAttribute('aria-sort')!=='ascending';
  t.querySelectorAll('th').forEach(function(o){o.removeAttribute('aria-sort')});
  th.setAttribute('aria-sort',asc?'ascending':'descending');
  var b=t.tBodies[0],rows=Array.prototype.slice.call(b.rows);
  function key(r){var c=r.cells[i];var v=c.getAttribute('data-v');return v===null?c.textContent:parseFloat(v)}
  rows.sort(function(x,y){var a=key(x),c=key(y);if(typeof a==='number'&&typeof c==='number'){
   if(isNaN(a))return 1;if(isNaN(c))return -1;return asc?a-c:c-a}
   return asc?String(a).localeCompare(String(c)):String(c).localeCompare(String(a))});
  rows.forEach(function(r){b.appendChild(r)});});});});
"""


# C0 controls but tab, newline and carriage return; DEL; C1 controls; lone surrogates (not UTF-8)
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def _picture(match) -> str:
    code = ord(match.group(0))
    if code < 0x20:
        return chr(0x2400 + code)  # U+2400 SYMBOL FOR NULL ... U+241F
    return "\u2421" if code == 0x7F else "\ufffd"


def visible(text) -> str:
    """``text`` with every control character (see the module docstring) replaced by a visible symbol."""
    return _CONTROL.sub(_picture, "" if text is None else str(text))


def esc(text) -> str:
    return html.escape(visible(text), quote=True)


# a backslash, backtick or table bar; a < that would open a tag, comment or autolink (<img, </, <!, <?,
# <javascript:…>); an & that would start an entity; the ] of ]( and ][ (a link or image)
_MD_SPECIAL = re.compile(r"[\\`|]|<(?=[A-Za-z/!?])|&(?=#?\w+;)|\](?=[(\[])")
_MD_LABEL = re.compile(r"[\\`|\[\]]|<(?=[A-Za-z/!?])|&(?=#?\w+;)")  # inside a link's label: every bracket
_MD_ESCAPES = {"<": "&lt;", "&": "&amp;"}


def md_text(text, *, label: bool = False) -> str:
    """``text`` for a Markdown file, shown as written: no HTML, no link, one line (see the module docstring);
    ``label``: for the label of a link, where every bracket is escaped."""
    out = visible(text).replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    return (_MD_LABEL if label else _MD_SPECIAL).sub(lambda m: _MD_ESCAPES.get(m.group(0), "\\" + m.group(0)), out)


def safe_url(url) -> str | None:
    """``url`` when it is an absolute http(s) URL with a host (spaces, quotes, brackets and parentheses
    percent-encoded, so it cannot end a Markdown link or an HTML attribute early); None for anything else."""
    from urllib.parse import quote, urlsplit

    text = "" if is_missing(url) else str(url).strip()
    if not text or _CONTROL.search(text) or any(c in text for c in "\t\n\r"):
        return None
    try:
        parts = urlsplit(text)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return None
    return quote(text, safe="/:?#[]@!$&*+,;=%-._~")


def md_link(text, url) -> str:
    """A Markdown link from ``text`` to ``url`` when ``url`` is http(s) (:func:`safe_url`); otherwise ``text``,
    followed by the URL as plain text in parentheses when there is one."""
    href = safe_url(url)
    if href is not None:
        return f"[{md_text(text, label=True)}]({href})"
    shown = "" if is_missing(url) else str(url).strip()
    return f"{md_text(text)} ({md_text(shown)})" if shown else md_text(text)


def slug(*parts) -> str:
    return "-".join(re.sub(r"[^A-Za-z0-9]+", "-", str(p)).strip("-").lower() for p in parts)


def is_missing(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def num(x, decimals: int = 3) -> str:
    if is_missing(x):
        return "–"
    x = float(x)
    if not math.isfinite(x):
        return "–"
    return f"{x:.{decimals}f}"


def pval(p) -> str:
    if is_missing(p):
        return "–"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


class Cell:
    """A table cell: its text (escaped unless ``raw``), an optional numeric sort key, a class; ``md``: its
    Markdown when that is not the escaped text (e.g. a :func:`md_link`)."""

    def __init__(self, text, sort=None, cls: str = "", raw: bool = False, md: str | None = None):
        self.text, self.sort, self.cls, self.raw, self.md = text, sort, cls, raw, md

    def html(self) -> str:
        attrs = ""
        if self.sort is not None:
            v = float(self.sort)
            attrs += f' data-v="{v:.17g}"' if math.isfinite(v) else ' data-v="NaN"'
        if self.cls:
            attrs += f' class="{self.cls}"'
        return f"<td{attrs}>{self.text if self.raw else esc(self.text)}</td>"

    def markdown(self) -> str:
        if self.md is not None:
            return self.md
        if self.raw:  # the report's own HTML, its texts escaped by esc(): the tags go, the entities stay
            text = visible(re.sub(r"<[^>]+>", "", str(self.text)))
            return text.replace("|", "\\|").replace("\r", " ").replace("\n", " ")
        return md_text(self.text)


def cell(x) -> Cell:
    return x if isinstance(x, Cell) else Cell(x)


class Table:
    def __init__(self, header, rows, *, sortable=True, text_columns=(), row_classes=None):
        self.header = list(header)
        self.rows = [[cell(c) for c in r] for r in rows]
        self.sortable, self.text_columns = sortable, set(text_columns)
        self.row_classes = row_classes or [""] * len(self.rows)

    def html(self) -> str:
        def th(i, h):
            return f'<th class="t">{esc(h)}</th>' if i in self.text_columns else f"<th>{esc(h)}</th>"

        head = "".join(th(i, h) for i, h in enumerate(self.header))
        body = []
        for cls, row in zip(self.row_classes, self.rows):
            cells = []
            for i, c in enumerate(row):
                if i in self.text_columns and "t" not in c.cls.split():
                    c = Cell(c.text, c.sort, (c.cls + " t").strip(), c.raw, c.md)
                cells.append(c.html())
            body.append(f'<tr class="{cls}">' if cls else "<tr>")
            body.append("".join(cells) + "</tr>")
        kind = ' class="sortable"' if self.sortable else ""
        return (f'<div class="scroll"><table{kind}><thead><tr>{head}</tr></thead>'
                f'<tbody>{"".join(body)}</tbody></table></div>')

    def markdown(self) -> str:
        lines = ["| " + " | ".join(md_text(h) for h in self.header) + " |",
                 "|" + "---|" * len(self.header)]
        lines += ["| " + " | ".join(c.markdown() for c in r) + " |" for r in self.rows]
        return "\n".join(lines)


def details(summary: str, body: str, cls: str = "", open_: bool = False) -> str:
    attrs = (f' class="{cls}"' if cls else "") + (" open" if open_ else "")
    return f"<details{attrs}><summary>{summary}</summary>{body}</details>"


def figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{caption}</figcaption></figure>"


def shell(title: str, toc: str, body: str) -> str:
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{esc(title)}</title><style>{STYLE}</style></head>\n<body><div class=\"layout\">"
            f"<nav class=\"toc\" aria-label=\"Contents\">{toc}</nav>\n<main>{body}</main></div>"
            f"<script>{SCRIPT}</script></body></html>\n")

"""HTML and Markdown building blocks of the report: escaped tables (sortable in the page; long ones
paged in the page, their rows kept as data in the page's one script), collapsible sections, and the
page shell with its style, that script and a content security policy that forbids every fetch.

Every text the report shows may come from the people being ranked (display names,
institutions, URLs, case ids, report texts, judges' answers), so:

* control characters (NUL, BEL, ESC, … and DEL, C1 controls; not tab, newline or carriage
  return) never reach either file: :func:`visible` shows each as its Unicode control picture
  (NUL → ␀, ESC → ␛, BEL → ␇) or U+FFFD, in the text and, as a last pass, in the whole page,
  its Markdown and its figures; so do the bidirectional controls (U+202A–U+202E, U+2066–U+2069,
  U+200E, U+200F, U+061C: a right-to-left override in a name would reverse what follows it), each
  shown as its escape, e.g. ``\\u202e``;
* HTML: every text is HTML-escaped (:func:`esc`); the rows of a paged table are data in the page's
  script (:func:`script_json`: JSON with every ``<``, ``>`` and ``&`` written as a ``\\u`` escape, so
  no text can end the script), put in the page as text (``textContent``), never as markup;
* Markdown: every text is escaped (:func:`md_text`): a ``<`` that would open a tag, a comment or an
  autolink (no raw HTML, no ``<javascript:…>``), an ``&`` that would start an entity, backslashes,
  backticks and table bars, and the ``](`` / ``][`` of link syntax, so a text never becomes HTML,
  a link or an image;
  the only links are the report's own (:func:`md_link`, and in the HTML :func:`html_link`: a model's
  name to its URL, ``rel="noopener noreferrer"``), to http(s) URLs only — any other URL
  (``javascript:``, ``data:``, ``file:``) is shown as text, unlinked.
"""

from __future__ import annotations

import html
import math
import numbers
import re

# Nothing may be fetched: no network, no file; inline style and script only; images only as data: URIs
# (large heat maps embed one PNG inside their SVG).
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

STYLE = """
:root{--ink:#1d2733;--muted:#5b6775;--line:#d8dee6;--bg:#f7f9fb;--accent:#c0392b;--link:#1f5f99;--flag:#9a5b00}
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--ink);margin:0;
 line-height:1.45;font-size:15px}
.layout{display:grid;grid-template-columns:250px minmax(0,1fr);max-width:1680px;margin:0 auto}
nav.toc{position:sticky;top:0;align-self:start;max-height:100vh;overflow:auto;padding:1.2em 1em;
 border-right:1px solid var(--line);background:var(--bg);font-size:13.5px}
nav.toc ul{list-style:none;padding-left:.9em;margin:.2em 0}nav.toc>ul{padding-left:0}
nav.toc a{color:var(--link);text-decoration:none}nav.toc a:hover{text-decoration:underline}
nav.toc .here{font-weight:600}
main{padding:1em 2.2em 4em;min-width:0}
h1{font-size:1.7em;margin:.4em 0}h2{font-size:1.35em;border-bottom:2px solid var(--line);padding-bottom:.2em;
 margin-top:2.2em}h3{font-size:1.1em;margin-top:1.8em}
p.note,.muted{color:var(--muted);font-size:.92em}
.scroll{overflow-x:auto;max-width:100%;
 background:linear-gradient(to right,#fff 30%,rgba(255,255,255,0)),
 linear-gradient(to left,#fff 30%,rgba(255,255,255,0)) 100% 0,
 radial-gradient(farthest-side at 0 50%,rgba(0,0,0,.22),rgba(0,0,0,0)),
 radial-gradient(farthest-side at 100% 50%,rgba(0,0,0,.22),rgba(0,0,0,0)) 100% 0;
 background-repeat:no-repeat;background-size:40px 100%,40px 100%,14px 100%,14px 100%;
 background-attachment:local,local,scroll,scroll}
p.scroll-hint{margin:.4em 0 0;font-size:12.5px;color:var(--flag)}
table{border-collapse:collapse;margin:.6em 0;font-size:13.5px}
th,td{border-bottom:1px solid var(--line);padding:4px 8px;text-align:right;vertical-align:top;white-space:nowrap}
td.t{white-space:normal}
th{background:var(--bg);position:sticky;top:0}
td.t,th.t{text-align:left}
table.sortable th,table.paged th{cursor:pointer;user-select:none}
table.sortable th:hover,table.paged th:hover{background:#e9eef4}
th[aria-sort=ascending]::after{content:" ▲"}th[aria-sort=descending]::after{content:" ▼"}
tr.accent td{background:#fdf1ef}
table.board{border-collapse:separate;border-spacing:0}
table.board th{white-space:normal;vertical-align:bottom;max-width:7.5em}
table.board td,table.board th{padding:4px 6px}
table.board .ci{display:block;font-size:11.5px;color:var(--muted);white-space:nowrap;font-weight:400}
table.board .s0{position:sticky;left:0;z-index:1;background:#fff;width:3.3em;min-width:3.3em;max-width:3.3em}
table.board .s1{position:sticky;left:3.3em;z-index:1;background:#fff;box-shadow:inset -1px 0 var(--line)}
table.board th.s0,table.board th.s1{z-index:3;background:var(--bg)}
table.board tr.tier-even td{background:#f3f6fa}
p.demo{border-left:4px solid var(--flag);padding:6px 10px;background:#fff8ec}
table.board tr.flagged td{background:#fff8ec}
td.nm{white-space:normal;font-weight:500;min-width:10.5em;max-width:16em;overflow-wrap:anywhere}
td.tied{min-width:12em;max-width:15em;font-size:12.5px}
.mono{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:12px}
.flag{display:block;font-weight:400;font-size:12px;color:var(--flag);max-width:22em;overflow-wrap:break-word}
.fails{font-size:12px;min-width:18em;max-width:30em;white-space:normal}
td.text{text-align:left;min-width:15em;max-width:30em;white-space:pre-wrap;word-break:break-word}
td.text.ctx{min-width:8em;max-width:13em;font-size:12.5px}
td.text.judge{min-width:17em;white-space:normal;font-size:12.5px}
td.kv{text-align:left;font-size:12.5px;color:var(--muted);white-space:nowrap}
td.wrap{white-space:normal;overflow-wrap:anywhere;min-width:6em;max-width:26em;font-size:12.5px}
td.sig{font-weight:600}
.pager{display:flex;gap:.6em;align-items:center;font-size:13px;margin:.1em 0 .8em;color:var(--muted)}
.pager button{font:inherit;padding:1px 8px;border:1px solid var(--line);border-radius:4px;background:var(--bg);
 color:var(--link);cursor:pointer}.pager button:disabled{color:var(--muted);cursor:default}
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
# A paged table (class "paged") shows PAGE_ROWS rows at a time from its rows in RR (the page's data), sorted as a
# whole; every text is set as textContent. A table wider than its box says so above it.
SCRIPT = """
(function(){
var D=typeof RR==='undefined'?{}:RR;
function cmp(a,c,asc){if(typeof a==='number'&&typeof c==='number'){
 if(isNaN(a))return isNaN(c)?0:1;if(isNaN(c))return -1;return asc?a-c:c-a}
 a=String(a);c=String(c);return asc?a.localeCompare(c):c.localeCompare(a)}
function sorting(t,sort){var hs=t.tHead.rows[0].cells;Array.prototype.forEach.call(hs,function(th,i){
 th.addEventListener('click',function(){var asc=th.getAttribute('aria-sort')!=='ascending';
  Array.prototype.forEach.call(hs,function(o){o.removeAttribute('aria-sort')});
  th.setAttribute('aria-sort',asc?'ascending':'descending');sort(i,asc)})})}
document.querySelectorAll('table.sortable').forEach(function(t){sorting(t,function(i,asc){
 var b=t.tBodies[0],rows=Array.prototype.slice.call(b.rows);
 function key(r){var c=r.cells[i];var v=c.getAttribute('data-v');return v===null?c.textContent:parseFloat(v)}
 rows.sort(function(x,y){return cmp(key(x),key(y),asc)});rows.forEach(function(r){b.appendChild(r)})})});
document.querySelectorAll('table.paged').forEach(function(t){
 var d=D[t.id];if(!d)return;var rows=d.rows.slice(),size=+t.getAttribute('data-page-size'),page=0;
 var pages=Math.max(1,Math.ceil(rows.length/size));
 function key(c){return Array.isArray(c)?(c[1]===null?NaN:c[1]):c}
 function button(text){var b=document.createElement('button');b.type='button';b.textContent=text;return b}
 var bar=document.createElement('div');bar.className='pager';
 var prev=button('\\u2039 Previous'),next=button('Next \\u203a');
 var info=document.createElement('span');bar.appendChild(prev);bar.appendChild(info);bar.appendChild(next);
 function show(){var b=t.tBodies[0];b.textContent='';
  rows.slice(page*size,(page+1)*size).forEach(function(r){var tr=document.createElement('tr');
   r.forEach(function(c,i){var td=document.createElement('td');var cls=[d.cls[i]];
    if(Array.isArray(c)){td.textContent=c[0];td.setAttribute('data-v',c[1]===null?'NaN':String(c[1]));
     if(c[2])cls.push(c[2])}
    else td.textContent=c;cls=cls.join(' ').trim();if(cls)td.className=cls;tr.appendChild(td)});b.appendChild(tr)});
  var first=rows.length?page*size+1:0,last=Math.min(rows.length,(page+1)*size);
  info.textContent='rows '+first+'\\u2013'+last+' of '+rows.length+' (page '+(page+1)+' of '+pages+')';
  prev.disabled=page===0;next.disabled=page>=pages-1}
 prev.addEventListener('click',function(){if(page>0){page--;show()}});
 next.addEventListener('click',function(){if(page<pages-1){page++;show()}});
 sorting(t,function(i,asc){rows.sort(function(x,y){return cmp(key(x[i]),key(y[i]),asc)});page=0;show()});
 var box=t.parentNode;box.parentNode.insertBefore(bar,box.nextSibling);show()});
function cues(){document.querySelectorAll('.scroll').forEach(function(s){
 var over=s.scrollWidth>s.clientWidth+1,h=s.previousElementSibling,has=h&&h.className==='scroll-hint';
 if(over&&!has){h=document.createElement('p');h.className='scroll-hint';
  h.textContent='Wider than the window: scroll the table sideways for more columns \\u2192';
  s.parentNode.insertBefore(h,s)}
 else if(!over&&has)h.parentNode.removeChild(h)})}
cues();window.addEventListener('resize',cues);document.addEventListener('toggle',cues,true);
})();
"""


# bidirectional controls (embeddings, overrides, isolates, marks): a U+202E in a name reverses the rest of its
# cell, or of the line, in a viewer
BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
# C0 controls but tab, newline and carriage return; DEL; C1 controls; lone surrogates (not UTF-8); bidi controls
_CONTROL = re.compile(f"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff{BIDI}]")
_BIDI = re.compile(f"[{BIDI}]")


def _picture(match) -> str:
    code = ord(match.group(0))
    if _BIDI.match(match.group(0)):
        return f"\\u{code:04x}"  # shown as its escape, e.g. \u202e: it has no control picture
    if code < 0x20:
        return chr(0x2400 + code)  # U+2400 SYMBOL FOR NULL ... U+241F
    return "\u2421" if code == 0x7F else "\ufffd"


def visible(text) -> str:
    """``text`` with every control character (see the module docstring) replaced by a visible symbol."""
    text = "" if text is None else str(text)
    # every character the pattern replaces is one str.isprintable() refuses (tests/test_untrusted_outputs.py), so a
    # printable text is returned without a scan: a page at 100 models shows 125,000 cells
    return text if text.isprintable() else _CONTROL.sub(_picture, text)


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


def html_link(inner: str, url) -> str:
    """``inner`` (HTML, already escaped) as a link to ``url`` when it is http(s) (:func:`safe_url`), opened
    without the report as its opener or referrer; ``inner`` alone otherwise. Navigating is the only way the
    page reaches out: the content security policy still forbids every fetch."""
    href = safe_url(url)
    return inner if href is None else f'<a href="{esc(href)}" rel="noopener noreferrer">{inner}</a>'


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


MISSING = "—"  # a value that does not apply or is not known


def is_missing(x) -> bool:
    """None, NaN, pandas' NA / NaT: no value."""
    if x is None:
        return True
    if isinstance(x, (str, bytes, int)):
        return False
    if isinstance(x, float):
        return math.isnan(x)
    if isinstance(x, numbers.Integral):  # numpy's integers: a page's counts (no pandas call for each)
        return False
    import pandas as pd

    try:
        return bool(pd.isna(x))
    except (TypeError, ValueError):  # a container
        return False


def num(x, decimals: int = 3) -> str:
    if is_missing(x):
        return MISSING
    x = float(x)
    if not math.isfinite(x):
        return MISSING
    return f"{x:.{decimals}f}"


def _as_number(x):
    """(float, None) for a finite number; (None, text to show) otherwise: :data:`MISSING`, or ``x`` as written
    when it is no number."""
    if is_missing(x):
        return None, MISSING
    try:
        value = float(x)
    except (TypeError, ValueError):
        return None, str(x)
    return (value, None) if math.isfinite(value) else (None, MISSING)


def count(x) -> str:
    """A count as an integer (3, not 3.0); :data:`MISSING` when there is none."""
    value, shown = _as_number(x)
    if value is None:
        return shown
    return f"{int(value)}" if value == int(value) else num(value)


def percent(x) -> str:
    """A share (0–1) as a percentage: 40%, 99.5% (rounded down, so that only all of it reads 100%)."""
    value, shown = _as_number(x)
    if value is None:
        return shown
    tenths = math.floor(round(value * 1000, 6)) / 10
    return f"{tenths:.0f}%" if tenths == int(tenths) else f"{tenths:.1f}%"


def pval(p) -> str:
    if is_missing(p):
        return MISSING
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _short(x: float):
    """A sort key for the page's data: 7 significant digits, None when not finite (JSON has no NaN)."""
    return float(f"{x:.7g}") if math.isfinite(x) else None


class Cell:
    """A table cell: its text (escaped unless ``raw``), an optional numeric sort key, a class; ``md``: its
    Markdown when that is not the escaped text (e.g. a :func:`md_link`); ``title``: a tooltip (escaped)."""

    def __init__(self, text, sort=None, cls: str = "", raw: bool = False, md: str | None = None,
                 title: str | None = None):
        self.text, self.sort, self.cls, self.raw, self.md, self.title = text, sort, cls, raw, md, title

    def sort_key(self):
        if self.sort is None:
            return None
        if type(self.sort) is float:  # the usual number: no further checks
            return self.sort
        return float("nan") if is_missing(self.sort) else float(self.sort)

    def html(self) -> str:
        attrs = ""
        key = self.sort_key()
        if key is not None:
            attrs += f' data-v="{key:.17g}"' if math.isfinite(key) else ' data-v="NaN"'
        if self.cls:
            attrs += f' class="{self.cls}"'
        if self.title:
            attrs += f' title="{esc(self.title)}"'
        return f"<td{attrs}>{self.text if self.raw else esc(self.text)}</td>"

    def data(self, column_cls: str):
        """The cell in a paged table's data: its text, or [text, sort key(, class)]."""
        if self.raw:
            raise ValueError("a paged table's cells are text, not markup")
        text = visible(self.text)
        extra = " ".join(c for c in self.cls.split() if c not in column_cls.split()) if self.cls else ""
        key = self.sort_key()
        if key is None and not extra:
            return text
        out = [text, None if key is None else _short(key)]
        return out + [extra] if extra else out

    def markdown(self) -> str:
        if self.md is not None:
            return self.md
        if self.raw:  # the report's own HTML, its texts escaped by esc(): the tags go, the entities stay
            text = visible(re.sub(r"<[^>]+>", "", str(self.text)))
            return text.replace("|", "\\|").replace("\r", " ").replace("\n", " ")
        return md_text(self.text)


def cell(x) -> Cell:
    return x if isinstance(x, Cell) else Cell(x)


PAGE_ROWS = 50  # rows a paged table shows at a time


class Table:
    """``cls``: the table's class (``board``: the leaderboard's compact layout); ``header_cls``: a class per header
    cell (e.g. the frozen columns), also given to that column's cells."""

    def __init__(self, header, rows, *, sortable=True, text_columns=(), row_classes=None, cls: str = "",
                 header_cls: dict | None = None):
        self.header = list(header)
        # each row's values as given: a text becomes a Cell where it is drawn (a paged table's data takes it as it
        # is: 5,050 rows of 8 cells at 100 models)
        self.rows = [list(r) for r in rows]
        self.sortable, self.text_columns = sortable, set(text_columns)
        self.row_classes = row_classes or [""] * len(self.rows)
        self.cls, self.header_cls = cls, dict(header_cls or {})

    def _column_cls(self, i: int) -> str:
        return " ".join(c for c in (self.header_cls.get(i, ""), "t" if i in self.text_columns else "") if c)

    def _body(self, rows, classes) -> str:
        body = []
        for cls, row in zip(classes, rows):
            cells = []
            for i, c in enumerate(row):
                c = cell(c)
                wanted = [k for k in self._column_cls(i).split() if k not in c.cls.split()]
                if wanted:
                    c = Cell(c.text, c.sort, " ".join([*c.cls.split(), *wanted]), c.raw, c.md, c.title)
                cells.append(c.html())
            body.append((f'<tr class="{cls}">' if cls else "<tr>") + "".join(cells) + "</tr>")
        return "".join(body)

    def html(self, *, page_id: str | None = None) -> str:
        """The table; with ``page_id`` and more than :data:`PAGE_ROWS` rows, a paged table of that id showing its
        first page (the page's script pages through :meth:`data`, which the page must carry under that id)."""
        def th(i, h):
            cls = self._column_cls(i)
            return f'<th class="{cls}">{esc(h)}</th>' if cls else f"<th>{esc(h)}</th>"

        head = "".join(th(i, h) for i, h in enumerate(self.header))
        paged = page_id is not None and len(self.rows) > PAGE_ROWS
        rows = self.rows[:PAGE_ROWS] if paged else self.rows
        kind = " ".join(k for k in (self.cls, "paged" if paged else ("sortable" if self.sortable else "")) if k)
        attrs = (f' class="{kind}"' if kind else "") + (f' id="{esc(page_id)}" data-page-size="{PAGE_ROWS}"'
                                                         if paged else "")
        return (f'<div class="scroll"><table{attrs}><thead><tr>{head}</tr></thead>'
                f'<tbody>{self._body(rows, self.row_classes)}</tbody></table></div>')

    def is_paged(self) -> bool:
        return len(self.rows) > PAGE_ROWS

    def data(self) -> dict:
        """Every row as the page's script pages through it (see :meth:`html`)."""
        classes = [self._column_cls(i) for i in range(len(self.header))]
        # a value that is no Cell is a plain cell's text: its data is the text (Cell.data with no key and no class)
        return {"cls": classes, "rows": [[c.data(classes[i]) if isinstance(c, Cell) else visible(c)
                                          for i, c in enumerate(r)] for r in self.rows]}

    def markdown(self) -> str:
        lines = ["| " + " | ".join(md_text(h) for h in self.header) + " |",
                 "|" + "---|" * len(self.header)]
        lines += ["| " + " | ".join(cell(c).markdown() for c in r) + " |" for r in self.rows]
        return "\n".join(lines)


def details(summary: str, body: str, cls: str = "", open_: bool = False) -> str:
    attrs = (f' class="{cls}"' if cls else "") + (" open" if open_ else "")
    return f"<details{attrs}><summary>{summary}</summary>{body}</details>"


def figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{caption}</figcaption></figure>"


_SCRIPT_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def script_json(data) -> str:
    """``data`` as a JavaScript literal for the page's script: JSON (no NaN), with ``<``, ``>``, ``&`` and the line
    separators written as escapes, so that no text in it can end the script or open a comment."""
    import json

    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    text = re.sub("[<>&\u2028\u2029]", lambda m: _SCRIPT_ESCAPES[m.group(0)], text)
    # a bidi control left in a string (texts are visible() already) is shown as its escape's text (\\u202e in
    # the JSON, \u202e on the page), never turned into a JavaScript escape by the page's last pass
    return _BIDI.sub(lambda m: f"\\\\u{ord(m.group(0)):04x}", text)


def shell(title: str, toc: str, body: str, data: dict | None = None) -> str:
    """The page; ``data``: the rows of its paged tables by table id (:meth:`Table.data`)."""
    script = (f"var RR={script_json(data)};" if data else "") + SCRIPT
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{esc(title)}</title><style>{STYLE}</style></head>\n<body><div class=\"layout\">"
            f"<nav class=\"toc\" aria-label=\"Contents\">{toc}</nav>\n<main>{body}</main></div>"
            f"<script>{script}</script></body></html>\n")

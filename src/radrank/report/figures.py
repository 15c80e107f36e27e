"""The report's figures, written as SVG text: the same bytes on every run.

Why not a plotting library: these figures are a few kinds of marks (lines, dots, cells, violins, text) on
panels placed in inches, and matplotlib, which drew them before, spent most of the report job's CPU building
and saving its artists (at 100 models x 10,000 cases, 0.9 CPU-s of a page's 2.5, plus 0.4 s to import it in
every run that builds a page; benchmarks/report_scale.py). What a plotting library decides is kept as
matplotlib decides it, and tests/test_figures.py compares them with matplotlib: the tick positions
(:func:`nice_ticks`, MaxNLocator's choice), the colour maps (:func:`colormap_lut`, its Blues, RdBu and PuOr
from the ColorBrewer anchors) and where a value lands in a panel (:class:`Panel`, as an Axes' transData).

Coordinates are points (1/72 in) from the top left corner, rounded to 0.01; text stays text; every id is
prefixed with the figure's name so figures inlined in one page never share one; untrusted text (model names,
labels) is escaped. Large heat maps are one embedded PNG (a data: URI), one pixel per cell.
"""

from __future__ import annotations

import math
import re
from html import escape

import numpy as np

ACCENT = "#c0392b"  # the leaf that ranks the table
INK = "#1f3b57"
BAND = "#9fb7cc"
MUTED = "#555"
GRID = "#ddd"
MAX_ANNOTATED = 12  # heat maps with more rows than this show colour only
MAX_VECTOR_CELLS = 1600  # larger heat maps are one embedded PNG (data: URI), not a rectangle per cell

PT = 72.0  # points per inch
FONT = "DejaVu Sans, Bitstream Vera Sans, Verdana, sans-serif"
FONT_PT, TITLE_PT, SMALL_PT, CELL_PT = 9, 10, 8, 7
ASCENT = 0.76  # a digit's height over the font size: where a line of text whose top is known has its baseline
TICK_PT = 3.5  # a tick mark's length
TICK_PAD_PT = 3.5  # the gap between a tick (or the axis) and its label
TITLE_PAD_PT = 6.0  # between a panel's top and its title
LABEL_PAD_PT = 4.0  # between the tick labels and the axis label
SPINE_PT = 0.8

# Colour maps: ColorBrewer's sequential and diverging schemes (Cynthia A. Brewer, colorbrewer2.org; Apache
# License 2.0), interpolated linearly into a table of LUT_SIZE colours, as matplotlib's maps of the same names are.
COLORMAPS = {
    "Blues": ("#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#08306b"),
    "RdBu": ("#67001f", "#b2182b", "#d6604d", "#f4a582", "#fddbc7", "#f7f7f7", "#d1e5f0", "#92c5de", "#4393c3",
             "#2166ac", "#053061"),
    "PuOr": ("#7f3b08", "#b35806", "#e08214", "#fdb863", "#fee0b6", "#f7f7f7", "#d8daeb", "#b2abd2", "#8073ac",
             "#542788", "#2d004b"),
}
LUT_SIZE = 256
# the steps a tick interval is made of (times a power of ten): MaxNLocator's default, and AutoLocator's
STEPS = (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10)
AUTO_STEPS = (1, 2, 2.5, 5, 10)


# --- numbers and colours ----------------------------------------------------------------------------------


def _n(x: float) -> str:
    """A coordinate: at most two decimals, no trailing zeros, never "-0"."""
    text = f"{x:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def nice_ticks(lo: float, hi: float, nbins: int, steps=STEPS) -> np.ndarray:
    """The ticks inside [lo, hi]: the multiples of the smallest step (one of ``steps`` times a power of ten) that
    cuts the range into at most ``nbins`` intervals; a smaller step while fewer than two ticks fall inside
    (matplotlib's MaxNLocator, as tests/test_figures.py checks)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return np.array([lo]) if math.isfinite(lo) else np.zeros(0)
    raw = (hi - lo) / max(nbins, 1)
    scale = 10.0 ** math.floor(math.log10(raw))
    # a range far from zero for its width is ticked from a round offset (its mean's power of ten), as
    # matplotlib does: the ticks are offset + multiples of the step
    mean = (lo + hi) / 2
    offset = math.copysign(10.0 ** math.floor(math.log10(abs(mean))), mean) if abs(mean) / (hi - lo) >= 100 else 0.0
    lo, hi = lo - offset, hi - offset
    steps = np.asarray(steps, dtype="float64")
    candidates = np.concatenate([0.1 * steps[:-1], steps, [10 * steps[1]]]) * scale
    first = int(np.nonzero(candidates >= raw * (1 - 1e-10))[0][0])
    ticks = np.zeros(0)
    for step in candidates[:first + 1][::-1]:
        # a tick on an end of the range counts as inside, whatever the rounding of its multiple
        tolerance = max(1e-10 * step, 8 * np.finfo(float).eps * max(abs(lo), abs(hi)))
        start, stop = math.ceil((lo - tolerance) / step), math.floor((hi + tolerance) / step)
        ticks = np.arange(start, stop + 1) * step
        ticks = ticks[(ticks >= lo - tolerance) & (ticks <= hi + tolerance)]
        if len(ticks) >= 2:
            break
    return ticks + offset


def tick_labels(ticks) -> list[str]:
    """The ticks as text, each with the decimals their step needs (0.25 steps: two; 0.5: one; 1: none), with a
    true minus sign."""
    ticks = np.asarray(ticks, dtype="float64")
    if len(ticks) > 1:
        step = float(np.min(np.diff(ticks)))
        decimals = next((d for d in range(8) if abs(round(step, d) - step) <= 1e-9 * step), 8)
    else:
        decimals = 0 if len(ticks) == 0 or float(ticks[0]).is_integer() else 3
    if decimals > 6 or (len(ticks) and np.max(np.abs(ticks)) >= 1e6):
        out = [f"{t:.3g}" for t in ticks]
    else:
        out = [f"{t:.{decimals}f}" for t in ticks]
    return [("0" + t[2:] if t.startswith("-0") and float(t) == 0 else t).replace("-", "−") for t in out]


_LUTS: dict = {}


def colormap_lut(name: str) -> np.ndarray:
    """The colour map ``name`` (:data:`COLORMAPS`) as LUT_SIZE RGB rows in [0, 1]."""
    lut = _LUTS.get(name)
    if lut is None:
        anchors = np.array([[int(h[i:i + 2], 16) for i in (1, 3, 5)] for h in COLORMAPS[name]], dtype="float64")
        at = np.linspace(0.0, 1.0, len(anchors))
        x = np.linspace(0.0, 1.0, LUT_SIZE)
        lut = _LUTS[name] = np.column_stack([np.interp(x, at, anchors[:, c] / 255.0) for c in range(3)])
    return lut


def colors_of(values, name: str, vmin: float, vmax: float) -> np.ndarray:
    """RGB bytes (…, 3) of ``values`` on the colour map, [vmin, vmax] spanning it (outside: its ends); NaN rows
    are for values that are not finite (left undrawn)."""
    v = np.asarray(values, dtype="float64")
    scaled = (v - vmin) / (vmax - vmin) if vmax > vmin else np.zeros_like(v)
    index = np.clip(np.floor(np.nan_to_num(scaled, nan=0.0, posinf=2.0, neginf=-1.0) * LUT_SIZE), 0,
                    LUT_SIZE - 1).astype(int)
    rgb = np.round(colormap_lut(name)[index] * 255.0)
    rgb[~np.isfinite(v)] = np.nan
    return rgb


def import_for_drawing() -> None:
    """Import what drawing may import later (Pillow and its PNG encoder, for a large heat map): a report job that
    forks its page builders calls it first, so that they do not each import it."""
    from PIL import Image

    Image.preinit()


def _hex(rgb) -> str:
    return "#%02x%02x%02x" % tuple(int(c) for c in rgb)


# --- the canvas -------------------------------------------------------------------------------------------


def _attrs(**attrs) -> str:
    out = []
    for key, value in attrs.items():
        if value is None:
            continue
        name = key.rstrip("_").replace("_", "-")
        out.append(f' {name}="{_n(value) if isinstance(value, float) else escape(str(value))}"')
    return "".join(out)


class Canvas:
    """One figure: ``width_in`` × ``height_in`` inches; marks are appended as SVG elements, in drawing order."""

    def __init__(self, width_in: float, height_in: float, name: str):
        self.width, self.height = width_in * PT, height_in * PT
        self.prefix = re.sub(r"[^A-Za-z0-9_-]", "-", name)
        self.defs: list[str] = []
        self.body: list[str] = []

    def segments(self, x1, y1, x2, y2, *, color: str, width: float, dash: str | None = None) -> None:
        """Straight lines from (x1, y1) to (x2, y2), one path; pairs with a coordinate that is not finite are
        left out."""
        parts = [f"M{_n(a)} {_n(b)}L{_n(c)} {_n(d)}" for a, b, c, d in zip(*map(_flat, (x1, y1, x2, y2)))
                 if math.isfinite(a + b + c + d)]
        if parts:
            style = _attrs(fill="none", stroke=color, stroke_width=float(width), stroke_dasharray=dash)
            self.body.append(f'<path d="{"".join(parts)}"{style}/>')

    def dots(self, x, y, *, radius: float, color) -> None:
        """Filled circles; ``color`` one for all or one per dot."""
        xs, ys = _flat(x), _flat(y)
        colors = [color] * len(xs) if isinstance(color, str) else list(color)
        for a, b, c in zip(xs, ys, colors):
            if math.isfinite(a + b):
                self.body.append(f'<circle cx="{_n(a)}" cy="{_n(b)}" r="{_n(radius)}" fill="{c}"/>')

    def polygons(self, polygons, *, color: str) -> None:
        """Filled polygons (each an (n, 2) array of points), one path."""
        parts = ["M" + "L".join(f"{_n(px)} {_n(py)}" for px, py in poly) + "Z" for poly in polygons if len(poly)]
        if parts:
            self.body.append(f'<path d="{"".join(parts)}" fill="{color}"/>')

    def rect(self, x, y, width, height, **style) -> None:
        self.body.append(f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(width)}" height="{_n(height)}"'
                         + _attrs(**style) + "/>")

    def text(self, x, y, text, *, size=FONT_PT, anchor="start", middle=False, color=None, bold=False,
             rotate=None) -> None:
        """``text`` with its baseline at ``y`` (``middle``: its middle), starting, centred or ending at ``x``
        (``anchor``: start, middle, end); ``rotate``: degrees anticlockwise about (x, y)."""
        transform = f"rotate({_n(-rotate)} {_n(x)} {_n(y)})" if rotate else None
        self.body.append(f'<text x="{_n(x)}" y="{_n(y)}"'
                         + _attrs(font_size=size, text_anchor=None if anchor == "start" else anchor,
                                  dominant_baseline="central" if middle else None, fill=color,
                                  font_weight="bold" if bold else None, transform=transform)
                         + f">{escape(str(text), quote=False)}</text>")

    def image(self, rgba: np.ndarray, x, y, width, height) -> None:
        """An RGBA image (rows top first), one pixel per cell stretched over the box, not smoothed."""
        import base64
        import io

        from PIL import Image

        buf = io.BytesIO()
        Image.fromarray(np.ascontiguousarray(rgba, dtype=np.uint8), "RGBA").save(buf, format="PNG")
        uri = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
        self.body.append(f'<image x="{_n(x)}" y="{_n(y)}" width="{_n(width)}" height="{_n(height)}" '
                         f'preserveAspectRatio="none" style="image-rendering:pixelated" href="{uri}"/>')

    def gradient(self, cmap: str) -> str:
        """The id of a vertical gradient of the colour map (its start at the bottom), defined once."""
        gid = f"{self.prefix}-{cmap}"
        if not any(f'id="{gid}"' in d for d in self.defs):
            stops = "".join(f'<stop offset="{_n(i / (len(COLORMAPS[cmap]) - 1))}" stop-color="{c}"/>'
                            for i, c in enumerate(COLORMAPS[cmap]))
            self.defs.append(f'<linearGradient id="{gid}" x1="0" y1="1" x2="0" y2="0">{stops}</linearGradient>')
        return gid

    def title(self, text: str) -> None:
        """The figure's title, top left."""
        self.text(0.08 * PT, 0.08 * PT + ASCENT * TITLE_PT, text, size=TITLE_PT)

    def svg(self, title: str) -> str:
        """The figure as an inline ``<svg>`` element; ``title`` is its accessible name."""
        defs = f"<defs>{''.join(self.defs)}</defs>\n" if self.defs else ""
        return (f'<svg role="img" aria-label="{escape(title)}" class="figure" xmlns="http://www.w3.org/2000/svg" '
                f'width="{_n(self.width)}pt" height="{_n(self.height)}pt" '
                f'viewBox="0 0 {_n(self.width)} {_n(self.height)}" font-family="{FONT}" font-size="{FONT_PT}">\n'
                + defs + "\n".join(self.body) + "\n</svg>\n")


def _flat(values) -> list:
    return np.asarray(values, dtype="float64").ravel().tolist()


class Panel:
    """A plotting area: ``left``, ``top``, ``width``, ``height`` in points on its canvas; ``xlim``: the values at
    its left and right edges; ``ylim``: at its top and bottom edges (rows count downwards: (-0.5, n - 0.5))."""

    def __init__(self, canvas: Canvas, left, top, width, height, xlim=(0.0, 1.0), ylim=(0.0, 1.0)):
        self.canvas, self.left, self.top, self.width, self.height = canvas, left, top, width, height
        self.xlim, self.ylim = tuple(map(float, xlim)), tuple(map(float, ylim))

    @property
    def right(self) -> float:
        return self.left + self.width

    @property
    def bottom(self) -> float:
        return self.top + self.height

    def x(self, values) -> np.ndarray:
        a, b = self.xlim
        return self.left + (np.asarray(values, dtype="float64") - a) / (b - a) * self.width

    def y(self, values) -> np.ndarray:
        a, b = self.ylim
        return self.top + (np.asarray(values, dtype="float64") - a) / (b - a) * self.height

    # -- axes --

    def spines(self, left=True, bottom=True) -> None:
        c = self.canvas
        if left:
            c.segments([self.left], [self.top], [self.left], [self.bottom], color="#000", width=SPINE_PT)
        if bottom:
            c.segments([self.left], [self.bottom], [self.right], [self.bottom], color="#000", width=SPINE_PT)

    def x_ticks(self, ticks, labels=None, *, marks=True, grid=False) -> None:
        """Ticks on the bottom edge at data values ``ticks`` (marks below the edge, labels under them);
        ``grid``: a light vertical line at each across the panel (drawn first: call before the data)."""
        ticks = np.asarray(ticks, dtype="float64")
        xs = self.x(ticks)
        c = self.canvas
        if grid:
            c.segments(xs, np.full(len(xs), self.top), xs, np.full(len(xs), self.bottom), color=GRID, width=0.6)
            return
        if marks:
            c.segments(xs, np.full(len(xs), self.bottom), xs, np.full(len(xs), self.bottom + TICK_PT), color="#000",
                       width=SPINE_PT)
        baseline = self.bottom + (TICK_PT if marks else 0) + TICK_PAD_PT + ASCENT * FONT_PT
        for x, label in zip(xs, labels if labels is not None else tick_labels(ticks)):
            c.text(x, baseline, label, anchor="middle")

    def x_label(self, text, *, size=FONT_PT, color=None, marks=True) -> None:
        """The axis label, centred under the tick labels."""
        top = self.bottom + (TICK_PT if marks else 0) + TICK_PAD_PT + FONT_PT * 1.2 + LABEL_PAD_PT
        self.canvas.text(self.left + self.width / 2, top + ASCENT * size, text, size=size, anchor="middle",
                         color=color)

    def title(self, text, *, color=None, bold=False) -> None:
        """The panel's title, over its left end."""
        self.canvas.text(self.left, self.top - TITLE_PAD_PT - 0.2 * FONT_PT, text, color=color, bold=bold)

    def row_labels(self, labels, rows, *, colors=None, bold=None) -> None:
        """``labels`` beside the left edge at data rows ``rows``, as tick labels stand."""
        ys = self.y(rows)
        for i, (label, y) in enumerate(zip(labels, ys)):
            self.canvas.text(self.left - TICK_PAD_PT, y, label, anchor="end", middle=True,
                             color=colors[i] if colors else None, bold=bool(bold[i]) if bold else False)

    def column_labels(self, labels, columns, rotation: int) -> None:
        """``labels`` under the bottom edge at data columns ``columns``, turned by ``rotation`` degrees (45 or 90),
        ending at the edge."""
        y = self.bottom + TICK_PAD_PT
        for label, x in zip(labels, self.x(columns)):
            self.canvas.text(x, y, label, anchor="end", middle=True, rotate=rotation)

    # -- marks --

    def cells(self, matrix, *, cmap: str, vmin: float, vmax: float, x0=0.0, y0=0.0) -> None:
        """A heat map, cell (i, j) centred on (x0 + j, y0 + i): rectangles with a thin white edge when few, else
        one image; cells that are not finite are left empty."""
        m = np.asarray(matrix, dtype="float64")
        ny, nx = m.shape
        rgb = colors_of(m, cmap, vmin, vmax)
        xs, ys = self.x(np.arange(nx + 1) - 0.5 + x0), self.y(np.arange(ny + 1) - 0.5 + y0)
        c = self.canvas
        if nx * ny <= MAX_VECTOR_CELLS:
            c.body.append('<g stroke="#fff" stroke-width="0.5">')
            for i in range(ny):
                for j in range(nx):
                    if np.isfinite(m[i, j]):
                        left, top = min(xs[j], xs[j + 1]), min(ys[i], ys[i + 1])
                        c.rect(left, top, abs(xs[j + 1] - xs[j]), abs(ys[i + 1] - ys[i]), fill=_hex(rgb[i, j]))
            c.body.append("</g>")
            return
        rgba = np.zeros((ny, nx, 4), dtype=np.uint8)
        finite = np.isfinite(m)
        rgba[finite, :3] = rgb[finite]
        rgba[finite, 3] = 255
        if ys[0] > ys[-1]:
            rgba = rgba[::-1]
        if xs[0] > xs[-1]:
            rgba = rgba[:, ::-1]
        c.image(rgba, min(xs[0], xs[-1]), min(ys[0], ys[-1]), abs(xs[-1] - xs[0]), abs(ys[-1] - ys[0]))

    def annotate(self, cells, dark) -> None:
        """Cell texts (x, y, text), centred; ``dark`` says which sit on a dark cell."""
        for (x, y, text), d in zip(cells, dark):
            self.canvas.text(float(self.x(x)), float(self.y(y)), text, size=CELL_PT, anchor="middle", middle=True,
                             color="#fff" if d else "#222")

    def colorbar(self, cmap: str, vmin: float, vmax: float, label: str) -> None:
        """A colour bar right of the panel: the map from vmin (bottom) to vmax, ticks and ``label`` beside it."""
        c = self.canvas
        bar = Panel(c, self.right + 0.15 * PT, self.top + 0.1 * self.height, 0.14 * PT, 0.8 * self.height,
                    ylim=(vmax, vmin))
        c.rect(bar.left, bar.top, bar.width, bar.height, fill=f"url(#{c.gradient(cmap)})", stroke="#000",
               stroke_width=SPINE_PT)
        nbins = int(np.clip(math.floor(bar.height / (2 * FONT_PT)), 1, 9))
        ticks = nice_ticks(vmin, vmax, nbins, AUTO_STEPS)
        ys = bar.y(ticks)
        c.segments(np.full(len(ys), bar.right), ys, np.full(len(ys), bar.right + TICK_PT), ys, color="#000",
                   width=SPINE_PT)
        labels = tick_labels(ticks)
        for y, text in zip(ys, labels):
            c.text(bar.right + TICK_PT + TICK_PAD_PT, y, text, middle=True)
        widest = max((_text_width(t) for t in labels), default=0.0)
        x = bar.right + TICK_PT + TICK_PAD_PT + widest + LABEL_PAD_PT + ASCENT * FONT_PT
        c.text(x, bar.top + bar.height / 2, label, anchor="middle", rotate=90)


CHAR_IN = 0.066  # width of one 9 pt DejaVu Sans character, inches (margins are estimated, not measured)
UPPER_IN = 0.092  # an upper-case letter or a digit is wider (ROUGE-1 would be clipped at CHAR_IN)


def _text_width(text: str) -> float:
    """An estimate of ``text``'s width at 9 pt, in points."""
    return PT * sum(UPPER_IN if c.isupper() or c.isdigit() else CHAR_IN for c in str(text))


def _label_width(labels) -> float:
    """Left margin for row labels, in inches; 10 % more for the bold label of the rank metric."""
    return 0.15 + 1.1 * max((_text_width(t) / PT for t in labels), default=CHAR_IN)


class Grid:
    """A figure of equal panels placed in inches: ``cols`` per row, a label margin on the left of each row."""

    def __init__(self, n_panels, panel_w, panel_h, *, name, left, bottom=0.5, top=0.5, gap=0.25, right=0.25,
                 max_cols=4, extra_right=0.0):
        self.cols = max(1, min(n_panels, max_cols))
        self.rows = max(1, -(-n_panels // self.cols))
        width = left + self.cols * panel_w + (self.cols - 1) * gap + right + extra_right
        height = top + self.rows * panel_h + (self.rows - 1) * (top + bottom) + bottom
        self.canvas = Canvas(width, height, name)
        self.panels = []
        for i in range(n_panels):
            r, c = divmod(i, self.cols)
            self.panels.append(Panel(self.canvas, (left + c * (panel_w + gap)) * PT,
                                     (top + r * (panel_h + top + bottom)) * PT, panel_w * PT, panel_h * PT))


def _data_limits(*arrays) -> tuple[float, float]:
    """The range of the finite values, widened by 5 % on each side (a single value by 5 % of itself, or 0.05);
    (0, 1) when there is none."""
    values = np.concatenate([np.asarray(a, dtype="float64").ravel() for a in arrays]) if arrays else np.zeros(0)
    values = values[np.isfinite(values)]
    if not values.size:
        return 0.0, 1.0
    lo, hi = float(values.min()), float(values.max())
    if hi - lo <= 1e-12 * max(abs(lo), abs(hi), 1e-300):
        pad = 0.05 * abs(lo) if lo else 0.05
        lo, hi = lo - pad, hi + pad
    pad = 0.05 * (hi - lo)
    return lo - pad, hi + pad


def _cell_size(n: int) -> float:
    return 0.34 if n <= MAX_ANNOTATED else max(0.09, min(0.2, 6.0 / max(n, 1)))


# --- rank uncertainty ---------------------------------------------------------------------------------


def rank_figure(names: list, distribution: np.ndarray, point: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                *, name: str, title: str) -> str:
    """P(rank = k) as a heat map (models best first × ranks), the point rank as a dot and the rank
    interval as a line over it."""
    n = len(names)
    cell = _cell_size(n)
    grid = Grid(1, cell * n, cell * n, name=name, left=_label_width(names), bottom=0.55, top=0.45, extra_right=1.0)
    ax = grid.panels[0]
    ax.xlim, ax.ylim = (0.5, n + 0.5), (0.5, n + 0.5)
    rows = np.arange(1, n + 1)
    dist = np.asarray(distribution, dtype="float64")
    ax.cells(dist, cmap="Blues", vmin=0, vmax=1, x0=1.0, y0=1.0)
    ax.canvas.segments(ax.x(lower), ax.y(rows), ax.x(upper), ax.y(rows), color=ACCENT, width=2)
    ax.canvas.dots(ax.x(point), ax.y(rows), radius=2, color=ACCENT)
    if n <= MAX_ANNOTATED:
        cells = [(k + 1, i + 1 - 0.24, f"{dist[i, k]:.2f}") for i in range(n) for k in range(n) if dist[i, k] >= 0.005]
        ax.annotate(cells, [float(t) > 0.6 for _, _, t in cells])
    ax.spines()
    ax.row_labels(names, rows)
    ticks = rows if n <= 20 else np.unique(np.linspace(1, n, 10).round().astype(int))
    ax.x_ticks(ticks, [str(int(t)) for t in ticks], marks=False)
    ax.x_label("rank on a bootstrap resample", marks=False)
    ax.colorbar("Blues", 0.0, 1.0, "P(rank = k)")
    grid.canvas.title(title)
    return grid.canvas.svg(title)


# --- forest plot and distributions ---------------------------------------------------------------------


PANEL_GAP_IN = 0.5  # between panels of a row: room for the outer tick labels of both (0.3 let them touch)


def _model_panels(names, n_panels, row_h, name):
    return Grid(n_panels, 2.3, row_h * max(len(names), 1) + 0.2, name=name, left=_label_width(names), bottom=0.5,
                top=0.5, gap=PANEL_GAP_IN)


def _model_axes(ax: Panel, n: int, xlim, *, grid_lines=False) -> np.ndarray:
    """A panel of ``n`` model rows (the first on top) over ``xlim``: its ticks (four intervals at most), and
    their grid lines (under the data: drawn first) when asked."""
    ax.xlim, ax.ylim = xlim, (-0.5, n - 0.5)
    ticks = nice_ticks(*xlim, 4)
    if grid_lines:
        ax.x_ticks(ticks, grid=True)
    return ticks


def _finish_model_axes(grid, panel_index, ax, names, ticks, xlabel):
    """Over the data: the spines, the ticks, the axis label, and the model names on each row's first panel."""
    ax.spines()
    ax.x_ticks(ticks)
    ax.x_label(xlabel, size=SMALL_PT, color=MUTED)
    if panel_index % grid.cols == 0:  # the row's first panel names the models
        ax.row_labels(names, np.arange(len(names)))


def forest_figure(names: list, panels: list, *, name: str, title: str) -> str:
    """One panel per leaf: point estimate and interval per model, models best first (shared).

    ``panels``: dicts with label, estimate, lower, upper (arrays in ``names`` order), higher_is_better,
    accent (the rank leaf).
    """
    y = np.arange(len(names))
    grid = _model_panels(names, len(panels), 0.22, name)
    for i, (ax, p) in enumerate(zip(grid.panels, panels)):
        color = ACCENT if p["accent"] else INK
        est, lo, hi = (np.asarray(p[k], dtype="float64") for k in ("estimate", "lower", "upper"))
        ticks = _model_axes(ax, len(names), _data_limits(est, lo, hi), grid_lines=True)
        ax.canvas.segments(ax.x(lo), ax.y(y), ax.x(hi), ax.y(y), color=color, width=1.6)
        ax.canvas.dots(ax.x(est), ax.y(y), radius=2, color=color)
        ax.title(p["label"] + (" (ranks the table)" if p["accent"] else ""), color=color, bold=p["accent"])
        _finish_model_axes(grid, i, ax, names, ticks, "higher is better" if p["higher_is_better"] else
                           "lower is better")
    grid.canvas.title(title)
    return grid.canvas.svg(title)


def _histogram(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """``np.histogram(values, edges)``'s counts (each bin half-open, the last closed) for the evenly spaced ``edges``
    the figure draws (``np.linspace``): numpy's equal-width path, one pass over the values, which it takes for a
    bin count and a range and checks against the same edges. Given the edges as an array, numpy sorts every array
    (at 100 models x 10,000 cases, a page's sorts cost 0.2 CPU-s)."""
    return np.histogram(values, bins=len(edges) - 1, range=(edges[0], edges[-1]))[0]


def _density(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Histogram density of the values on ``edges``, lightly smoothed (1-2-1), scaled to a maximum of 1."""
    counts = _histogram(values, edges)
    smooth = np.convolve(np.pad(counts.astype("float64"), 1, mode="edge"), [0.25, 0.5, 0.25], mode="valid")
    top = smooth.max()
    return smooth / top if top > 0 else smooth


def distribution_figure(names: list, panels: list, *, name: str, title: str, bins: int | None = None) -> str:
    """One panel per per-sample value: a violin (binned density) per model with its median and quartiles.

    ``panels``: dicts with label, values (list of arrays in ``names`` order), higher_is_better, accent.
    All violins of a panel are one path, so the figure stays small at 100 models.
    """
    bins = bins or (24 if len(names) <= 40 else 14)  # coarser violins when there are many
    grid = _model_panels(names, len(panels), 0.26, name)
    for i, (ax, p) in enumerate(zip(grid.panels, panels)):
        color = ACCENT if p["accent"] else INK
        finite = [v[np.isfinite(v)] for v in p["values"]]  # unsorted: the bins and quartiles need no sort
        bounds = [(v.min(), v.max()) for v in finite if v.size]
        lo, hi = (float(min(b[0] for b in bounds)), float(max(b[1] for b in bounds))) if bounds else (0.0, 1.0)
        if hi <= lo:
            lo, hi = lo - 0.5, hi + 0.5
        edges = np.linspace(lo, hi, bins + 1)
        mids = (edges[:-1] + edges[1:]) / 2
        pad = 0.04 * (hi - lo)  # the outer ticks' labels inside the panel's width
        ticks = _model_axes(ax, len(names), (lo - pad, hi + pad))
        polygons, rows, q1s, meds, q3s = [], [], [], [], []
        for j, v in enumerate(finite):
            if v.size == 0:
                continue
            half = 0.42 * _density(v, edges)
            polygons.append(np.column_stack([ax.x(np.concatenate([mids, mids[::-1]])),
                                             ax.y(np.concatenate([j - half, (j + half)[::-1]]))]))
            q1, med, q3 = np.quantile(v, [0.25, 0.5, 0.75])
            rows.append(j)
            q1s.append(q1)
            meds.append(med)
            q3s.append(q3)
        ax.canvas.polygons(polygons, color="#e6a59c" if p["accent"] else BAND)
        ax.canvas.segments(ax.x(q1s), ax.y(rows), ax.x(q3s), ax.y(rows), color=color, width=2.2)
        ax.canvas.segments(ax.x(meds), ax.y(rows) - 3.5, ax.x(meds), ax.y(rows) + 3.5, color="#fff", width=1.6)
        ax.title(p["label"], color=color, bold=p["accent"])
        _finish_model_axes(grid, i, ax, names, ticks,
                           "per sample, " + ("higher is better" if p["higher_is_better"] else "lower is better"))
    grid.canvas.title(title)
    return grid.canvas.svg(title)


# --- heat maps ------------------------------------------------------------------------------------------


def _heatmap(ax: Panel, matrix, labels_y, labels_x, *, cmap, vmin, vmax, annotate):
    m = np.asarray(matrix, dtype="float64")
    ny, nx = m.shape
    ax.xlim, ax.ylim = (-0.5, nx - 0.5), (-0.5, ny - 0.5)
    ax.cells(m, cmap=cmap, vmin=vmin, vmax=vmax)
    ax.column_labels(labels_x, np.arange(nx), 45 if nx <= MAX_ANNOTATED else 90)  # steep when the cells are narrow
    ax.row_labels(labels_y, np.arange(ny))
    if annotate is not None:
        limit = 0.6 * max(abs(vmin), abs(vmax))
        cells = [(j, i, annotate(i, j)) for i in range(ny) for j in range(nx)]
        cells = [c for c in cells if c[2]]
        ax.annotate(cells, [bool(np.isfinite(m[i, j]) and abs(m[i, j]) > limit) for j, i, _ in cells])


def _rotated_labels_height(labels, n: int) -> float:
    return 0.25 + (0.72 if n <= MAX_ANNOTATED else 1.0) * CHAR_IN * max((len(str(t)) for t in labels), default=1)


def comparison_figure(names: list, advantage: np.ndarray, delta: np.ndarray, significant: np.ndarray, *,
                      label: str, name: str, title: str) -> str:
    """Δ for every pair on the rank leaf: cell (row, column) is row − column; colour = how much better the
    row model is (blue) or worse (red); a star marks a difference significant after Holm's correction."""
    n = len(names)
    finite = np.abs(advantage[np.isfinite(advantage)])
    vmax = float(finite.max()) if finite.size and finite.max() > 0 else 1.0

    def annotate(i, j):
        if i == j or not np.isfinite(delta[i, j]):
            return ""
        star = "*" if significant[i, j] else ""
        return f"{delta[i, j]:+.3f}{star}" if n <= MAX_ANNOTATED else ("•" if star else "")

    cell = 0.5 if n <= MAX_ANNOTATED else _cell_size(n)
    grid = Grid(1, cell * n, cell * n, name=name, left=_label_width(names), bottom=_rotated_labels_height(names, n),
                top=0.45, extra_right=1.2)
    ax = grid.panels[0]
    _heatmap(ax, advantage, names, names, cmap="RdBu", vmin=-vmax, vmax=vmax, annotate=annotate if n <= 40 else None)
    ax.colorbar("RdBu", -vmax, vmax, f"{label}: row better (+) / worse (−)")
    grid.canvas.title(title)
    return grid.canvas.svg(title)


def agreement_figure(panels: list, *, name: str, title: str) -> str:
    """Kendall τ heat maps, side by side. ``panels``: dicts with title, labels, tau (square matrix)."""
    k = max((len(p["labels"]) for p in panels), default=1)
    labels = [t for p in panels for t in p["labels"]]
    cell = 0.36 if k <= MAX_ANNOTATED else 0.22
    grid = Grid(len(panels), cell * k, cell * k, name=name, left=_label_width(labels),
                bottom=_rotated_labels_height(labels, k), top=0.55, gap=_label_width(labels) + 0.1, extra_right=1.0,
                max_cols=2)
    for ax, p in zip(grid.panels, panels):
        tau = np.asarray(p["tau"], dtype="float64")
        annotate = (lambda i, j, t=tau: "" if not np.isfinite(t[i, j]) else f"{t[i, j]:.2f}") \
            if len(p["labels"]) <= MAX_ANNOTATED else None
        _heatmap(ax, tau, p["labels"], p["labels"], cmap="PuOr", vmin=-1, vmax=1, annotate=annotate)
        ax.title(p["title"])
    if grid.panels:
        grid.panels[-1].colorbar("PuOr", -1.0, 1.0, "Kendall τ-b")
    grid.canvas.title(title)
    return grid.canvas.svg(title)


# --- meta-evaluation -------------------------------------------------------------------------------------


def metaeval_figure(labels: list, estimate, lower, upper, accent: list, ceiling, *, measure: str, name: str,
                    title: str) -> str:
    """Agreement with human judgement per metric (best first) with intervals; the human ceiling as a
    dashed line (one tick per metric when they differ); the leaderboard's rank metric in the accent colour."""
    n = len(labels)
    y = np.arange(n)
    est, lo, hi, ceil = (np.asarray(a, dtype="float64") for a in (estimate, lower, upper, ceiling))
    grid = Grid(1, 5.0, 0.3 * max(n, 1) + 0.4, name=name, left=_label_width(labels), bottom=0.55, top=0.5)
    ax = grid.panels[0]
    known = ceil[np.isfinite(ceil)]
    one_ceiling = bool(known.size) and bool(np.allclose(known, known[0]))
    ax.xlim, ax.ylim = _data_limits(est, lo, hi, known), (-1.0, n - 0.5)  # the ceiling inside the panel too
    nbins = int(np.clip(math.floor(ax.width / (3 * FONT_PT)), 1, 9))
    ticks = nice_ticks(*ax.xlim, nbins, AUTO_STEPS)
    ax.x_ticks(ticks, grid=True)
    colors = [ACCENT if a else INK for a in accent]
    c = ax.canvas
    for color in dict.fromkeys(colors):
        rows = [i for i in range(n) if colors[i] == color]
        c.segments(ax.x(lo[rows]), ax.y(y[rows]), ax.x(hi[rows]), ax.y(y[rows]), color=color, width=1.8)
    c.dots(ax.x(est), ax.y(y), radius=math.sqrt(18) / 2, color=colors)
    if one_ceiling:
        x = float(ax.x(known[0]))
        c.segments([x], [ax.top], [x], [ax.bottom], color=MUTED, width=1.0, dash="3.7 1.6")
        flip = (x - ax.left) / ax.width > 0.7  # the label on the line's left when the line is near the right edge
        c.text(x - 4 if flip else x + 4, float(ax.y(-0.7)), "human ceiling", size=SMALL_PT,
               anchor="end" if flip else "start", color=MUTED)
    elif known.size:
        half = math.sqrt(120) / 2
        c.segments(ax.x(ceil), ax.y(y) - half, ax.x(ceil), ax.y(y) + half, color=MUTED, width=1.0)
        # the legend, lower right inside the panel
        lx, ly = ax.right - 0.1 * PT - _text_width("human ceiling") * SMALL_PT / FONT_PT, ax.bottom - 0.12 * PT
        c.segments([lx - 10], [ly - 4], [lx - 10], [ly + 4], color=MUTED, width=1.0)
        c.text(lx - 4, ly, "human ceiling", size=SMALL_PT, middle=True)
    ax.spines()
    ax.x_ticks(ticks)
    ax.x_label(measure)
    ax.row_labels(labels, y, colors=[ACCENT if a else None for a in accent], bold=list(accent))
    grid.canvas.title(title)
    return grid.canvas.svg(title)

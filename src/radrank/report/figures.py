"""The report's figures: matplotlib → SVG text, the same bytes on every run.

Determinism: a fixed ``svg.hashsalt`` (matplotlib derives clip-path and marker ids
from it), no date or creator metadata, text kept as text (``svg.fonttype: none``),
and every id prefixed with the figure's name so figures inlined in one page never
share an id. Figures are built on :class:`matplotlib.figure.Figure` directly (no
pyplot state); heat maps are drawn as vector cells, so nothing is rasterised.
"""

from __future__ import annotations

import io
import re

import numpy as np

RC = {
    "svg.hashsalt": "radrank",
    "svg.fonttype": "none",
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "path.simplify": True,
}
ACCENT = "#c0392b"  # the leaf that ranks the table
INK = "#1f3b57"
BAND = "#9fb7cc"
MAX_ANNOTATED = 12  # heat maps with more rows than this show colour only
MAX_VECTOR_CELLS = 1600  # larger heat maps are one embedded PNG (data: URI), not a path per cell


# What drawing the figures imports (the SVG and, for a large heat map, the PNG backend): a report job that forks
# its page builders imports them first, once, instead of once in every builder (0.5 CPU-s each).
MATPLOTLIB_MODULES = ("matplotlib.figure", "matplotlib.backends.backend_svg", "matplotlib.backends.backend_agg",
                      "matplotlib.collections", "matplotlib.ticker", "matplotlib.transforms")


def import_matplotlib() -> None:
    import importlib

    for name in MATPLOTLIB_MODULES:
        importlib.import_module(name)
    from PIL import Image

    Image.preinit()  # the image formats Pillow loads at its first save (the heat map's PNG)


CHAR_IN = 0.066  # width of one 9 pt DejaVu Sans character, inches (margins are computed, not measured:
#                  matplotlib's constrained layout measures every label and costs more than the drawing)


UPPER_IN = 0.092  # an upper-case letter or a digit is wider (ROUGE-1 would be clipped at CHAR_IN)


def _label_width(labels) -> float:
    """Left margin for tick labels, in inches; 10 % more for the bold label of the rank metric."""
    def width(text: str) -> float:
        return sum(UPPER_IN if c.isupper() or c.isdigit() else CHAR_IN for c in text)

    return 0.15 + 1.1 * max((width(str(t)) for t in labels), default=CHAR_IN)


class Grid:
    """A figure of equal panels placed in inches: ``cols`` per row, a label margin on the left of each row."""

    def __init__(self, n_panels, panel_w, panel_h, *, left, bottom=0.5, top=0.5, gap=0.25, right=0.25,
                 max_cols=4, extra_right=0.0):
        from matplotlib.figure import Figure

        self.cols = max(1, min(n_panels, max_cols))
        self.rows = max(1, -(-n_panels // self.cols))
        self.width = left + self.cols * panel_w + (self.cols - 1) * gap + right + extra_right
        self.height = top + self.rows * panel_h + (self.rows - 1) * (top + bottom) + bottom
        self.fig = Figure(figsize=(self.width, self.height))
        self.axes = []
        for i in range(n_panels):
            r, c = divmod(i, self.cols)
            x0 = left + c * (panel_w + gap)
            y0 = self.height - top - (r + 1) * panel_h - r * (top + bottom)
            self.axes.append(self.fig.add_axes((x0 / self.width, y0 / self.height, panel_w / self.width,
                                                panel_h / self.height)))

    def title(self, text):
        self.fig.text(0.08 / self.width, 1 - 0.08 / self.height, text, ha="left", va="top", fontsize=10)

    def colorbar(self, mappable, ax, label):
        box = ax.get_position()
        cax = self.fig.add_axes((box.x1 + 0.15 / self.width, box.y0 + box.height * 0.1, 0.14 / self.width,
                                 box.height * 0.8))
        self.fig.colorbar(mappable, cax=cax, label=label)


def to_svg(fig, name: str, title: str) -> str:
    """The figure as an inline ``<svg>`` element: ids prefixed with ``name``, ``title`` for screen readers."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context(RC):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    return clean_svg(buf.getvalue(), name, title)


_ID = re.compile(r'\bid="([^"]+)"')
_REF = re.compile(r'url\(#([^)]+)\)|href="#([^"]+)"')
_GEOMETRY = re.compile(r'\b(d|x|y|x1|x2|y1|y2|transform|points)="([^"]*)"')
_DECIMAL = re.compile(r"-?\d+\.\d{3,}")


def _round(match) -> str:
    text = f"{float(match.group(0)):.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def clean_svg(svg: str, name: str, title: str) -> str:
    """Inline-ready SVG: no prolog, doctype or metadata; coordinates to 0.01 pt, one line per element;
    ids kept only where referenced, prefixed with ``name``; ``title`` as its accessible name."""
    from html import escape

    svg = re.sub(r"<\?xml[^>]*\?>\s*", "", svg)
    svg = re.sub(r"<!DOCTYPE[^>]*>\s*", "", svg)
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
    svg = _GEOMETRY.sub(lambda m: f'{m.group(1)}="{_DECIMAL.sub(_round, " ".join(m.group(2).split()))}"', svg)
    svg = re.sub(r">\s*\n\s*<", ">\n<", svg)
    referenced = {a or b for a, b in _REF.findall(svg)}
    prefix = re.sub(r"[^A-Za-z0-9_-]", "-", name)
    svg = _ID.sub(lambda m: f'id="{prefix}-{m.group(1)}"' if m.group(1) in referenced else "", svg)
    svg = re.sub(r"<(\w+) >", r"<\1>", svg)
    svg = _REF.sub(lambda m: f"url(#{prefix}-{m.group(1)})" if m.group(1) else f'href="#{prefix}-{m.group(2)}"', svg)
    svg = re.sub(r"<svg ", f'<svg role="img" aria-label="{escape(title)}" class="figure" ', svg, count=1)
    return svg.strip() + "\n"


def _fmt(x: float) -> str:
    return "–" if not np.isfinite(x) else f"{x:.3g}"


def _cells(ax, matrix, *, cmap, vmin, vmax, x0=0.0, y0=0.0):
    """A heat map's cells centred on (x0 + j, y0 + i): vector cells when few, else one image."""
    m = np.ma.masked_invalid(np.asarray(matrix, dtype="float64"))
    ny, nx = m.shape
    if nx * ny <= MAX_VECTOR_CELLS:
        return ax.pcolormesh(np.arange(nx + 1) - 0.5 + x0, np.arange(ny + 1) - 0.5 + y0, m, cmap=cmap, vmin=vmin,
                             vmax=vmax, edgecolors="white", linewidth=0.5)
    return ax.imshow(m, cmap=cmap, vmin=vmin, vmax=vmax, interpolation="nearest", aspect="auto",
                     extent=(x0 - 0.5, x0 + nx - 0.5, y0 + ny - 0.5, y0 - 0.5))


def _annotate(ax, texts: list, dark: list):
    """Cell texts (x, y, text) in one pass; ``dark`` says which sit on a dark cell."""
    for (x, y, text), d in zip(texts, dark):
        ax.text(x, y, text, ha="center", va="center", fontsize=7, color="white" if d else "#222")


def _cell_size(n: int) -> float:
    return 0.34 if n <= MAX_ANNOTATED else max(0.09, min(0.2, 6.0 / max(n, 1)))


TICK_PAD_PT = 3.5  # matplotlib's default gap between an axis and its tick labels


def _row_labels(ax, labels, rows):
    """``labels`` beside the left edge of ``ax`` at data rows ``rows``, as tick labels would stand, but one text
    each: a tick is five artists, each label measured for the layout (at 100 models most of a figure's time)."""
    from matplotlib.transforms import offset_copy

    ax.set_yticks([])
    at = offset_copy(ax.get_yaxis_transform(), fig=ax.figure, x=-TICK_PAD_PT, units="points")
    for label, y in zip(labels, rows):
        ax.text(0, y, str(label), transform=at, ha="right", va="center", fontsize=9)


def _column_labels(ax, labels, columns, rotation):
    """``labels`` under the bottom edge of ``ax`` at data columns ``columns``, turned by ``rotation`` degrees (45 or
    90), anchored at their right end as rotated tick labels are; one text each (see :func:`_row_labels`)."""
    from matplotlib.transforms import offset_copy

    ax.set_xticks([])
    at = offset_copy(ax.get_xaxis_transform(), fig=ax.figure, y=-TICK_PAD_PT, units="points")
    for label, x in zip(labels, columns):
        ax.text(x, 0, str(label), transform=at, rotation=rotation, rotation_mode="anchor", ha="right",
                va="center" if rotation == 90 else "top", fontsize=9)


# --- rank uncertainty ---------------------------------------------------------------------------------


def rank_figure(names: list, distribution: np.ndarray, point: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                *, name: str, title: str) -> str:
    """P(rank = k) as a heat map (models best first × ranks), the point rank as a dot and the rank
    interval as a line over it."""
    import matplotlib

    n = len(names)
    cell = _cell_size(n)
    with matplotlib.rc_context(RC):
        grid = Grid(1, cell * n, cell * n, left=_label_width(names), bottom=0.55, top=0.45, extra_right=1.0)
        ax = grid.axes[0]
        im = _cells(ax, distribution, cmap="Blues", vmin=0, vmax=1, x0=1.0, y0=1.0)
        ax.hlines(np.arange(1, n + 1), lower, upper, color=ACCENT, linewidth=2)
        ax.plot(point, np.arange(1, n + 1), "o", color=ACCENT, markersize=4)
        if n <= MAX_ANNOTATED:
            cells = [(k + 1, i + 1 - 0.24, f"{distribution[i, k]:.2f}") for i in range(n) for k in range(n)
                     if distribution[i, k] >= 0.005]
            _annotate(ax, cells, [float(t) > 0.6 for _, _, t in cells])
        _row_labels(ax, names, np.arange(1, n + 1))
        ticks = np.arange(1, n + 1) if n <= 20 else np.unique(np.linspace(1, n, 10).round().astype(int))
        ax.set_xticks(ticks)
        ax.set_xlim(0.5, n + 0.5)
        ax.set_ylim(n + 0.5, 0.5)
        ax.set_xlabel("rank on a bootstrap resample")
        ax.tick_params(length=0)
        grid.colorbar(im, ax, "P(rank = k)")
        grid.title(title)
    return to_svg(grid.fig, name, title)


# --- forest plot and distributions ---------------------------------------------------------------------


PANEL_GAP_IN = 0.5  # between panels of a row: room for the outer tick labels of both (0.3 let them touch)


def _model_panels(names, n_panels, row_h):
    return Grid(n_panels, 2.3, row_h * max(len(names), 1) + 0.2, left=_label_width(names), bottom=0.5, top=0.5,
                gap=PANEL_GAP_IN)


def _shared_rows(grid, names):
    from matplotlib.ticker import MaxNLocator

    n = len(names)
    for i, ax in enumerate(grid.axes):
        ax.set_ylim(n - 0.5, -0.5)
        if i % grid.cols == 0:
            _row_labels(ax, names, np.arange(n))
        else:
            ax.set_yticks([])  # the row's first panel names the models
        ax.xaxis.set_major_locator(MaxNLocator(4))


def forest_figure(names: list, panels: list, *, name: str, title: str) -> str:
    """One panel per leaf: point estimate and interval per model, models best first (shared).

    ``panels``: dicts with label, estimate, lower, upper (arrays in ``names`` order), higher_is_better,
    accent (the rank leaf).
    """
    import matplotlib

    y = np.arange(len(names))
    with matplotlib.rc_context(RC):
        grid = _model_panels(names, len(panels), 0.22)
        _shared_rows(grid, names)
        for ax, p in zip(grid.axes, panels):
            color = ACCENT if p["accent"] else INK
            est, lo, hi = (np.asarray(p[k], dtype="float64") for k in ("estimate", "lower", "upper"))
            ax.hlines(y, lo, hi, color=color, linewidth=1.6)
            ax.plot(est, y, "o", color=color, markersize=4)
            ax.set_title(p["label"] + (" (ranks the table)" if p["accent"] else ""), loc="left",
                         color=color, fontsize=9, fontweight="bold" if p["accent"] else "normal")
            ax.set_xlabel("higher is better" if p["higher_is_better"] else "lower is better", fontsize=8,
                          color="#555")
            ax.grid(axis="x", color="#ddd", linewidth=0.6)
            ax.set_axisbelow(True)
        grid.title(title)
    return to_svg(grid.fig, name, title)


def _histogram(ordered: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """``np.histogram(ordered, edges)``'s counts (each bin half-open, the last closed) of values sorted ascending:
    the bins' bounds found by bisection. np.histogram sorts every array again for edges given as an array, and the
    violins' values are sorted once for their quartiles too (at 100 models x 10,000 cases, a page's sorts cost
    0.2 CPU-s)."""
    bounds = np.append(np.searchsorted(ordered, edges[:-1], side="left"),
                       np.searchsorted(ordered, edges[-1], side="right"))
    return np.diff(bounds)


def _density(ordered: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Histogram density of sorted values on ``edges``, lightly smoothed (1-2-1), scaled to a maximum of 1."""
    counts = _histogram(ordered, edges)
    smooth = np.convolve(np.pad(counts.astype("float64"), 1, mode="edge"), [0.25, 0.5, 0.25], mode="valid")
    top = smooth.max()
    return smooth / top if top > 0 else smooth


def distribution_figure(names: list, panels: list, *, name: str, title: str, bins: int | None = None) -> str:
    """One panel per per-sample value: a violin (binned density) per model with its median and quartiles.

    ``panels``: dicts with label, values (list of arrays in ``names`` order), higher_is_better, accent.
    All violins of a panel are one polygon collection, so the figure stays small and fast at 100 models.
    """
    import matplotlib
    from matplotlib.collections import PolyCollection

    bins = bins or (24 if len(names) <= 40 else 14)  # coarser violins when there are many

    with matplotlib.rc_context(RC):
        grid = _model_panels(names, len(panels), 0.26)
        _shared_rows(grid, names)
        for ax, p in zip(grid.axes, panels):
            color = ACCENT if p["accent"] else INK
            finite = [np.sort(v[np.isfinite(v)]) for v in p["values"]]  # sorted once: bins and quartiles
            everything = np.concatenate(finite) if finite else np.zeros(0)
            lo, hi = (float(everything.min()), float(everything.max())) if everything.size else (0.0, 1.0)
            if hi <= lo:
                lo, hi = lo - 0.5, hi + 0.5
            edges = np.linspace(lo, hi, bins + 1)
            mids = (edges[:-1] + edges[1:]) / 2
            polygons, rows, q1s, meds, q3s = [], [], [], [], []
            for j, v in enumerate(finite):
                if v.size == 0:
                    continue
                half = 0.42 * _density(v, edges)
                polygons.append(np.column_stack([np.concatenate([mids, mids[::-1]]),
                                                 np.concatenate([j - half, (j + half)[::-1]])]))
                q1, med, q3 = np.quantile(v, [0.25, 0.5, 0.75])
                rows.append(j)
                q1s.append(q1)
                meds.append(med)
                q3s.append(q3)
            ax.add_collection(PolyCollection(polygons, facecolors="#e6a59c" if p["accent"] else BAND,
                                             edgecolors="none"))
            ax.hlines(rows, q1s, q3s, color=color, linewidth=2.2)
            ax.plot(meds, rows, "|", color="white", markersize=7, markeredgewidth=1.6)
            ax.set_title(p["label"], loc="left", color=color, fontsize=9,
                         fontweight="bold" if p["accent"] else "normal")
            ax.set_xlabel("per sample, " + ("higher is better" if p["higher_is_better"] else "lower is better"),
                          fontsize=8, color="#555")
            pad = 0.04 * (hi - lo)  # the outer ticks' labels inside the panel's width
            ax.set_xlim(lo - pad, hi + pad)
        grid.title(title)
    return to_svg(grid.fig, name, title)


# --- heat maps ------------------------------------------------------------------------------------------


def _heatmap(ax, matrix, labels_y, labels_x, *, cmap, vmin, vmax, annotate):
    m = np.ma.masked_invalid(np.asarray(matrix, dtype="float64"))
    ny, nx = m.shape
    im = _cells(ax, m, cmap=cmap, vmin=vmin, vmax=vmax)
    rotation = 45 if nx <= MAX_ANNOTATED else 90  # steep labels when the cells are narrow
    _column_labels(ax, labels_x, np.arange(nx), rotation)
    _row_labels(ax, labels_y, np.arange(ny))
    ax.set_xlim(-0.5, nx - 0.5)
    ax.set_ylim(ny - 0.5, -0.5)
    ax.spines[:].set_visible(False)
    ax.tick_params(length=0)
    if annotate is not None:
        limit = 0.6 * max(abs(vmin), abs(vmax))
        cells = [(j, i, annotate(i, j)) for i in range(ny) for j in range(nx)]
        cells = [c for c in cells if c[2]]
        _annotate(ax, cells, [m[i, j] is not np.ma.masked and abs(m[i, j]) > limit for j, i, _ in cells])
    return im


def _rotated_labels_height(labels, n: int) -> float:
    return 0.25 + (0.72 if n <= MAX_ANNOTATED else 1.0) * CHAR_IN * max((len(str(t)) for t in labels), default=1)


def comparison_figure(names: list, advantage: np.ndarray, delta: np.ndarray, significant: np.ndarray, *,
                      label: str, name: str, title: str) -> str:
    """Δ for every pair on the rank leaf: cell (row, column) is row − column; colour = how much better the
    row model is (blue) or worse (red); a star marks a difference significant after Holm's correction."""
    import matplotlib

    n = len(names)
    finite = np.abs(advantage[np.isfinite(advantage)])
    vmax = float(finite.max()) if finite.size and finite.max() > 0 else 1.0

    def annotate(i, j):
        if i == j or not np.isfinite(delta[i, j]):
            return ""
        star = "*" if significant[i, j] else ""
        return f"{delta[i, j]:+.3f}{star}" if n <= MAX_ANNOTATED else ("•" if star else "")

    cell = 0.5 if n <= MAX_ANNOTATED else _cell_size(n)
    with matplotlib.rc_context(RC):
        grid = Grid(1, cell * n, cell * n, left=_label_width(names), bottom=_rotated_labels_height(names, n), top=0.45,
                    extra_right=1.2)
        ax = grid.axes[0]
        im = _heatmap(ax, advantage, names, names, cmap="RdBu", vmin=-vmax, vmax=vmax,
                      annotate=annotate if n <= 40 else None)
        grid.colorbar(im, ax, f"{label}: row better (+) / worse (−)")
        grid.title(title)
    return to_svg(grid.fig, name, title)


def agreement_figure(panels: list, *, name: str, title: str) -> str:
    """Kendall τ heat maps, side by side. ``panels``: dicts with title, labels, tau (square matrix)."""
    import matplotlib

    k = max((len(p["labels"]) for p in panels), default=1)
    labels = [t for p in panels for t in p["labels"]]
    cell = 0.36 if k <= MAX_ANNOTATED else 0.22
    with matplotlib.rc_context(RC):
        grid = Grid(len(panels), cell * k, cell * k, left=_label_width(labels), bottom=_rotated_labels_height(labels, k),
                    top=0.55, gap=_label_width(labels) + 0.1, extra_right=1.0, max_cols=2)
        im = None
        for ax, p in zip(grid.axes, panels):
            tau = np.asarray(p["tau"], dtype="float64")
            annotate = (lambda i, j, t=tau: "" if not np.isfinite(t[i, j]) else f"{t[i, j]:.2f}") \
                if len(p["labels"]) <= MAX_ANNOTATED else None
            im = _heatmap(ax, tau, p["labels"], p["labels"], cmap="PuOr", vmin=-1, vmax=1, annotate=annotate)
            ax.set_title(p["title"], loc="left", fontsize=9)
        grid.colorbar(im, grid.axes[-1], "Kendall τ-b")
        grid.title(title)
    return to_svg(grid.fig, name, title)


# --- meta-evaluation -------------------------------------------------------------------------------------


def metaeval_figure(labels: list, estimate, lower, upper, accent: list, ceiling, *, measure: str, name: str,
                    title: str) -> str:
    """Agreement with human judgement per metric (best first) with intervals; the human ceiling as a
    dashed line (one tick per metric when they differ); the leaderboard's rank metric in the accent colour."""
    import matplotlib

    n = len(labels)
    y = np.arange(n)
    est, lo, hi, ceil = (np.asarray(a, dtype="float64") for a in (estimate, lower, upper, ceiling))
    with matplotlib.rc_context(RC):
        grid = Grid(1, 5.0, 0.3 * max(n, 1) + 0.4, left=_label_width(labels), bottom=0.55, top=0.5)
        ax = grid.axes[0]
        colors = [ACCENT if a else INK for a in accent]
        ax.hlines(y, lo, hi, colors=colors, linewidth=1.8)
        ax.scatter(est, y, c=colors, s=18, zorder=3)
        known = ceil[np.isfinite(ceil)]
        if known.size and np.allclose(known, known[0]):
            ax.axvline(known[0], color="#555", linestyle="--", linewidth=1)
            left, right = ax.get_xlim()
            lo_x, hi_x = min(left, known[0]), max(right, known[0])
            ax.set_xlim(lo_x, hi_x)
            # the label beside the line, a few points off it: on its left when the line is near the right edge
            flip = hi_x > lo_x and (known[0] - lo_x) / (hi_x - lo_x) > 0.7
            ax.annotate("human ceiling", (known[0], -0.7), xytext=(-4 if flip else 4, 0), textcoords="offset points",
                        color="#555", fontsize=8, va="bottom", ha="right" if flip else "left")
        elif known.size:
            ax.scatter(ceil, y, marker="|", s=120, color="#555", zorder=4, label="human ceiling")
            ax.legend(loc="lower right", fontsize=8, frameon=False)
        ax.set_yticks(y, labels=labels)
        for tick, a in zip(ax.get_yticklabels(), accent):
            if a:
                tick.set_color(ACCENT)
                tick.set_fontweight("bold")
        ax.set_ylim(n - 0.5, -1)
        ax.set_xlabel(measure)
        ax.grid(axis="x", color="#ddd", linewidth=0.6)
        ax.set_axisbelow(True)
        grid.title(title)
    return to_svg(grid.fig, name, title)

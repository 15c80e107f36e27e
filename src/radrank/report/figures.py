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


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


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


def _rows_height(n: int, per_row: float = 0.28, base: float = 1.3) -> float:
    return base + per_row * max(n, 1)


def _fmt(x: float) -> str:
    return "–" if not np.isfinite(x) else f"{x:.3g}"


# --- rank uncertainty ---------------------------------------------------------------------------------


def rank_figure(names: list, distribution: np.ndarray, point: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                *, name: str, title: str) -> str:
    """P(rank = k) as a heat map (models best first × ranks), the point rank as a dot and the rank
    interval as a line over it."""
    import matplotlib

    n = len(names)
    with matplotlib.rc_context(RC):
        fig = _figure(min(2.8 + 0.32 * n, 11), _rows_height(n))
        ax = fig.add_subplot()
        im = _cells(ax, distribution, cmap="Blues", vmin=0, vmax=1, x0=1.0, y0=1.0)
        ax.hlines(np.arange(1, n + 1), lower, upper, color=ACCENT, linewidth=2)
        ax.plot(point, np.arange(1, n + 1), "o", color=ACCENT, markersize=4)
        if n <= MAX_ANNOTATED:
            for i in range(n):
                for k in range(n):
                    p = distribution[i, k]
                    if p >= 0.005:
                        ax.text(k + 1, i + 1 - 0.22, f"{p:.2f}", ha="center", va="center", fontsize=7,
                                color="white" if p > 0.6 else "#222")
        ax.set_yticks(np.arange(1, n + 1), labels=names)
        ax.set_xticks(np.arange(1, n + 1))
        ax.set_xlim(0.5, n + 0.5)
        ax.set_ylim(n + 0.5, 0.5)
        ax.set_xlabel("rank on a bootstrap resample")
        fig.colorbar(im, ax=ax, label="P(rank = k)", shrink=0.8)
        ax.set_title(title, loc="left")
    return to_svg(fig, name, title)


# --- forest plot and distributions ---------------------------------------------------------------------


def _grid(k: int, max_cols: int = 4):
    cols = min(k, max_cols)
    return (k + cols - 1) // cols, cols


def forest_figure(names: list, panels: list, *, name: str, title: str) -> str:
    """One panel per leaf: point estimate and interval per model, models best first (shared).

    ``panels``: dicts with label, estimate, lower, upper (arrays in ``names`` order), higher_is_better,
    accent (the rank leaf).
    """
    import matplotlib

    n = len(names)
    rows, cols = _grid(len(panels))
    with matplotlib.rc_context(RC):
        fig = _figure(2.4 + 2.6 * cols, rows * _rows_height(n, 0.26, 0.9))
        axes = fig.subplots(rows, cols, squeeze=False, sharey=True)
        y = np.arange(n)
        for i, ax in enumerate(axes.ravel()):
            if i >= len(panels):
                ax.set_visible(False)
                continue
            p = panels[i]
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
        axes[0, 0].set_yticks(y, labels=names)
        axes[0, 0].set_ylim(n - 0.5, -0.5)
        for r in range(rows):
            axes[r, 0].tick_params(labelleft=True)
        fig.suptitle(title, x=0.01, ha="left", fontsize=10)
    return to_svg(fig, name, title)


def _density(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Histogram density on ``edges``, lightly smoothed (1-2-1), scaled to a maximum of 1."""
    counts, _ = np.histogram(values, bins=edges)
    smooth = np.convolve(np.pad(counts.astype("float64"), 1, mode="edge"), [0.25, 0.5, 0.25], mode="valid")
    top = smooth.max()
    return smooth / top if top > 0 else smooth


def distribution_figure(names: list, panels: list, *, name: str, title: str, bins: int = 40) -> str:
    """One panel per per-sample value: a violin (binned density) per model with its median and quartiles.

    ``panels``: dicts with label, values (list of arrays in ``names`` order), higher_is_better, accent.
    """
    import matplotlib

    n = len(names)
    rows, cols = _grid(len(panels))
    with matplotlib.rc_context(RC):
        fig = _figure(2.4 + 2.6 * cols, rows * _rows_height(n, 0.3, 0.9))
        axes = fig.subplots(rows, cols, squeeze=False, sharey=True)
        for i, ax in enumerate(axes.ravel()):
            if i >= len(panels):
                ax.set_visible(False)
                continue
            p = panels[i]
            color = ACCENT if p["accent"] else INK
            finite = [v[np.isfinite(v)] for v in p["values"]]
            everything = np.concatenate(finite) if finite else np.zeros(0)
            lo, hi = (float(everything.min()), float(everything.max())) if everything.size else (0.0, 1.0)
            if hi <= lo:
                lo, hi = lo - 0.5, hi + 0.5
            edges = np.linspace(lo, hi, bins + 1)
            mids = (edges[:-1] + edges[1:]) / 2
            for j, v in enumerate(finite):
                if v.size == 0:
                    continue
                half = 0.42 * _density(v, edges)
                ax.fill_between(mids, j - half, j + half, color=BAND if not p["accent"] else "#e6a59c",
                                linewidth=0)
                q1, med, q3 = np.quantile(v, [0.25, 0.5, 0.75])
                ax.hlines(j, q1, q3, color=color, linewidth=2.2)
                ax.plot([med], [j], "|", color="white", markersize=7, markeredgewidth=1.6)
            ax.set_title(p["label"], loc="left", color=color, fontsize=9,
                         fontweight="bold" if p["accent"] else "normal")
            ax.set_xlabel("per-sample value, " + ("higher is better" if p["higher_is_better"] else
                                                  "lower is better"), fontsize=8, color="#555")
            ax.set_xlim(lo, hi)
        axes[0, 0].set_yticks(np.arange(n), labels=names)
        axes[0, 0].set_ylim(n - 0.5, -0.5)
        for r in range(rows):
            axes[r, 0].tick_params(labelleft=True)
        fig.suptitle(title, x=0.01, ha="left", fontsize=10)
    return to_svg(fig, name, title)


# --- heat maps ------------------------------------------------------------------------------------------


def _cells(ax, matrix, *, cmap, vmin, vmax, x0=0.0, y0=0.0):
    """A heat map's cells centred on (x0 + j, y0 + i): vector cells when few, else one image."""
    m = np.ma.masked_invalid(np.asarray(matrix, dtype="float64"))
    ny, nx = m.shape
    if nx * ny <= MAX_VECTOR_CELLS:
        return ax.pcolormesh(np.arange(nx + 1) - 0.5 + x0, np.arange(ny + 1) - 0.5 + y0, m, cmap=cmap, vmin=vmin,
                             vmax=vmax, edgecolors="white", linewidth=0.5)
    return ax.imshow(m, cmap=cmap, vmin=vmin, vmax=vmax, interpolation="nearest", aspect="auto",
                     extent=(x0 - 0.5, x0 + nx - 0.5, y0 + ny - 0.5, y0 - 0.5))


def _heatmap(ax, matrix, labels_y, labels_x, *, cmap, vmin, vmax, annotate):
    m = np.ma.masked_invalid(np.asarray(matrix, dtype="float64"))
    ny, nx = m.shape
    im = _cells(ax, m, cmap=cmap, vmin=vmin, vmax=vmax)
    ax.set_xticks(np.arange(nx), labels=labels_x, rotation=45, ha="right", rotation_mode="anchor")
    ax.set_yticks(np.arange(ny), labels=labels_y)
    ax.set_xlim(-0.5, nx - 0.5)
    ax.set_ylim(ny - 0.5, -0.5)
    ax.spines[:].set_visible(False)
    ax.tick_params(length=0)
    if annotate is not None:
        for i in range(ny):
            for j in range(nx):
                text = annotate(i, j)
                if text:
                    v = m[i, j]
                    dark = v is not np.ma.masked and abs(v) > 0.6 * max(abs(vmin), abs(vmax))
                    ax.text(j, i, text, ha="center", va="center", fontsize=7, color="white" if dark else "#222")
    return im


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

    with matplotlib.rc_context(RC):
        side = min(2.6 + 0.55 * n, 14) if n <= MAX_ANNOTATED else min(2.6 + 0.2 * n, 22)
        fig = _figure(side + 1.4, side)
        ax = fig.add_subplot()
        im = _heatmap(ax, advantage, names, names, cmap="RdBu", vmin=-vmax, vmax=vmax, annotate=annotate)
        fig.colorbar(im, ax=ax, label=f"{label}: row better (+) / worse (−)", shrink=0.7)
        ax.set_title(title, loc="left")
    return to_svg(fig, name, title)


def agreement_figure(panels: list, *, name: str, title: str) -> str:
    """Kendall τ heat maps, side by side. ``panels``: dicts with title, labels, tau (square matrix)."""
    import matplotlib

    k = max((len(p["labels"]) for p in panels), default=1)
    with matplotlib.rc_context(RC):
        side = min(2.4 + 0.42 * k, 9)
        fig = _figure(side * len(panels) + 1.2, side)
        axes = fig.subplots(1, len(panels), squeeze=False)[0]
        im = None
        for ax, p in zip(axes, panels):
            tau = np.asarray(p["tau"], dtype="float64")
            labels = p["labels"]
            annotate = (lambda i, j, t=tau: "" if not np.isfinite(t[i, j]) else f"{t[i, j]:.2f}") \
                if len(labels) <= MAX_ANNOTATED else None
            im = _heatmap(ax, tau, labels, labels, cmap="PuOr", vmin=-1, vmax=1, annotate=annotate)
            ax.set_title(p["title"], loc="left", fontsize=9)
        fig.colorbar(im, ax=list(axes), label="Kendall τ-b (agreement on which is better)", shrink=0.7)
        fig.suptitle(title, x=0.01, ha="left", fontsize=10)
    return to_svg(fig, name, title)


# --- meta-evaluation -------------------------------------------------------------------------------------


def metaeval_figure(labels: list, estimate, lower, upper, accent: list, ceiling, *, measure: str, name: str,
                    title: str) -> str:
    """Agreement with human judgement per metric (best first) with intervals; the human ceiling as a
    dashed line (one per metric when they differ); the leaderboard's rank metric in the accent colour."""
    import matplotlib

    n = len(labels)
    y = np.arange(n)
    est, lo, hi, ceil = (np.asarray(a, dtype="float64") for a in (estimate, lower, upper, ceiling))
    with matplotlib.rc_context(RC):
        fig = _figure(7.5, _rows_height(n, 0.3, 1.2))
        ax = fig.add_subplot()
        colors = [ACCENT if a else INK for a in accent]
        ax.hlines(y, lo, hi, colors=colors, linewidth=1.8)
        ax.scatter(est, y, c=colors, s=18, zorder=3)
        known = ceil[np.isfinite(ceil)]
        if known.size and np.allclose(known, known[0]):
            ax.axvline(known[0], color="#555", linestyle="--", linewidth=1)
            ax.text(known[0], -0.6, " human ceiling", color="#555", fontsize=8, va="bottom")
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
        ax.set_title(title, loc="left")
    return to_svg(fig, name, title)

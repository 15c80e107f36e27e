"""The report's figures are written as SVG text (radrank.report.figures); what a plotting library decides is checked
against matplotlib, which drew them before: tick positions (MaxNLocator, AutoLocator's steps), the colour maps
(Blues, RdBu, PuOr), where a value lands in a panel (an Axes' transData at the same place and limits), and the
pixels of a heat map drawn as an image. Then what the page needs of an SVG: escaped text, prefixed ids, the same
bytes twice."""

from __future__ import annotations

import base64
import io
import re

import numpy as np
import pytest
from _strict import reference

from radrank.report import figures

matplotlib = reference("matplotlib", "the figures' reference (envs/core.yaml)")


def _inside(ticks, lo, hi):
    ticks = np.asarray(ticks, dtype="float64")
    tolerance = 1e-9 * (hi - lo) + 1e-12 * max(abs(lo), abs(hi))
    return ticks[(ticks >= lo - tolerance) & (ticks <= hi + tolerance)]


@pytest.mark.parametrize("nbins, steps", [(4, None), (9, [1, 2, 2.5, 5, 10]), (5, [1, 2, 2.5, 5, 10]), (3, None)])
def test_ticks_are_matplotlibs_max_n_locator_ticks_inside_the_range(nbins, steps):
    from matplotlib.ticker import MaxNLocator

    rng = np.random.default_rng(nbins)
    ranges = [(0.0, 1.0), (-1.0, 1.0), (0.12, 0.31), (0.9, 1.8), (-1.6, 0.0), (0.0, 0.85), (-0.47, 0.47),
              (1e-4, 3e-4), (120.0, 4700.0), (0.5, 0.5000001)]
    for _ in range(300):
        centre, span = rng.normal() * 10 ** rng.uniform(-3, 3), 10 ** rng.uniform(-4, 3)
        ranges.append((centre - span * rng.random(), centre + span * rng.random()))
    locator = MaxNLocator(nbins=nbins, steps=steps)
    for lo, hi in ranges:
        ours = figures.nice_ticks(lo, hi, nbins, figures.AUTO_STEPS if steps else figures.STEPS)
        theirs = _inside(locator.tick_values(lo, hi), lo, hi)
        atol = 1e-9 * (hi - lo) + 1e-12 * max(abs(lo), abs(hi))
        assert len(ours) == len(theirs) and np.allclose(ours, theirs, rtol=0, atol=atol), (lo, hi, ours, theirs)


def test_tick_labels_have_the_decimals_of_their_step_and_a_true_minus():
    assert figures.tick_labels([0.0, 0.25, 0.5, 0.75, 1.0]) == ["0.00", "0.25", "0.50", "0.75", "1.00"]
    assert figures.tick_labels([-1.5, -1.0, -0.5, 0.0]) == ["−1.5", "−1.0", "−0.5", "0.0"]
    assert figures.tick_labels([0.12, 0.18, 0.24, 0.30]) == ["0.12", "0.18", "0.24", "0.30"]
    assert figures.tick_labels([-0.2, 0.0, 0.2]) == ["−0.2", "0.0", "0.2"]
    assert figures.tick_labels([1000.0, 2000.0]) == ["1000", "2000"]


@pytest.mark.parametrize("name", sorted(figures.COLORMAPS))
def test_colour_maps_are_matplotlibs(name):
    """Every colour of the table, and values across and beyond [vmin, vmax], as matplotlib's map gives them (to
    the byte: the SVG holds #rrggbb)."""
    from matplotlib.colors import Normalize

    cmap = matplotlib.colormaps[name]
    assert cmap.N == figures.LUT_SIZE
    theirs = np.round(cmap(np.arange(cmap.N))[:, :3] * 255)
    assert np.array_equal(np.round(figures.colormap_lut(name) * 255), theirs)
    values = np.concatenate([np.linspace(-0.7, 0.9, 2001), [-5.0, 5.0, -0.7, 0.9]])
    ours = figures.colors_of(values, name, -0.7, 0.9)
    expected = np.round(cmap(Normalize(-0.7, 0.9)(values))[:, :3] * 255)
    assert np.array_equal(ours, expected)
    assert np.isnan(figures.colors_of([np.nan, np.inf], name, 0, 1)).all()


def test_a_value_lands_where_matplotlibs_axes_puts_it():
    """A panel placed as an Axes (same figure size, same box, same limits, rows counting downwards) maps data to
    the same points: matplotlib's display coordinates at 72 dpi, y flipped."""
    from matplotlib.figure import Figure

    width_in, height_in = 6.0, 4.0
    canvas = figures.Canvas(width_in, height_in, "t")
    panel = figures.Panel(canvas, 90.0, 30.0, 200.0, 150.0, xlim=(-0.3, 1.7), ylim=(-0.5, 9.5))
    fig = Figure(figsize=(width_in, height_in), dpi=72)
    ax = fig.add_axes((90.0 / (width_in * 72), 1 - (30.0 + 150.0) / (height_in * 72), 200.0 / (width_in * 72),
                       150.0 / (height_in * 72)))
    ax.set_xlim(-0.3, 1.7)
    ax.set_ylim(9.5, -0.5)
    rng = np.random.default_rng(0)
    x, y = rng.uniform(-0.3, 1.7, 50), rng.uniform(-0.5, 9.5, 50)
    display = ax.transData.transform(np.column_stack([x, y]))
    assert np.allclose(panel.x(x), display[:, 0], atol=1e-9)
    assert np.allclose(panel.y(y), height_in * 72 - display[:, 1], atol=1e-9)


def _circles(svg: str) -> np.ndarray:
    return np.array([(float(a), float(b)) for a, b in re.findall(r'<circle cx="([-\d.]+)" cy="([-\d.]+)"', svg)])


def test_a_forest_plots_dots_stand_at_the_estimates_and_rows():
    """The dots of a forest plot's panel, read back from the SVG, are the estimates in rank order, one row each,
    mapped through the panel's limits (the data's range and 5 % on each side, as matplotlib autoscales)."""
    names = ["a", "b", "c", "d"]
    est = np.array([0.2, 0.5, 0.1, 0.4])
    svg = figures.forest_figure(names, [{"label": "X", "estimate": est, "lower": est - 0.05, "upper": est + 0.1,
                                         "higher_is_better": True, "accent": True}], name="f", title="t")
    dots = _circles(svg)
    assert len(dots) == 4
    lo, hi = 0.05, 0.6
    pad = 0.05 * (hi - lo)
    scale = (dots[1, 0] - dots[0, 0]) / (est[1] - est[0])
    assert np.allclose((dots[:, 0] - dots[0, 0]) / scale + est[0], est, atol=0.01)
    assert np.allclose(np.diff(dots[:, 1]), dots[1, 1] - dots[0, 1])  # equal row spacing, first row on top
    assert dots[1, 1] > dots[0, 1]
    left = dots[0, 0] - (est[0] - (lo - pad)) * scale
    right = left + (hi - lo + 2 * pad) * scale
    assert np.isclose(right - left, 2.3 * 72, atol=0.05)  # the panel's width: the limits span it


def test_a_large_heat_map_is_one_image_of_the_colour_maps_pixels():
    """More cells than MAX_VECTOR_CELLS: one PNG, a pixel per cell, rows top first, empty (transparent) where the
    value is not finite; the pixels are matplotlib's colours of the values."""
    from PIL import Image

    n = 45
    assert n * n > figures.MAX_VECTOR_CELLS
    rng = np.random.default_rng(1)
    dist = rng.random((n, n))
    dist[3, 7] = np.nan
    svg = figures.rank_figure([f"m{i}" for i in range(n)], dist, np.arange(1, n + 1), np.arange(1, n + 1),
                              np.arange(1, n + 1), name="big", title="big")
    uris = re.findall(r'href="data:image/png;base64,([^"]+)"', svg)
    assert len(uris) == 1 and "<rect" not in svg.split("<image")[0].split("</defs>")[-1]
    pixels = np.asarray(Image.open(io.BytesIO(base64.b64decode(uris[0]))).convert("RGBA"))
    assert pixels.shape == (n, n, 4)
    expected = np.round(matplotlib.colormaps["Blues"](np.nan_to_num(dist))[:, :, :3] * 255)
    finite = np.isfinite(dist)
    assert np.array_equal(pixels[finite][:, :3], expected[finite])
    assert (pixels[finite][:, 3] == 255).all() and pixels[3, 7, 3] == 0


def test_a_small_heat_map_is_a_cell_per_value_and_its_annotations():
    n = 4
    dist = np.full((n, n), 0.25)
    dist[0, 0] = np.nan  # not drawn
    svg = figures.rank_figure(list("abcd"), dist, np.arange(1, n + 1), np.arange(1, n + 1), np.arange(1, n + 1),
                              name="small", title="small")
    assert svg.count("<rect") == n * n - 1 + 1  # the cells and the colour bar
    assert len(re.findall(r'font-size="7"[^>]*>0.25</text>', svg)) == n * n - 1  # not the colour bar's 0.25
    assert "<image" not in svg


def test_text_is_escaped_ids_are_prefixed_and_the_bytes_are_the_same_twice():
    names = ["<script>alert(1)</script>", "a&b", 'q"uote']
    n = len(names)
    args = (names, np.full((n, n), 1 / n), np.arange(1, n + 1), np.arange(1, n + 1), np.arange(1, n + 1))
    svg = figures.rank_figure(*args, name="grp one", title='Ranks of "x" & y')
    assert svg == figures.rank_figure(*args, name="grp one", title='Ranks of "x" & y')
    assert "<script>" not in svg and "&lt;script&gt;alert(1)&lt;/script&gt;" in svg and "a&amp;b" in svg
    assert 'aria-label="Ranks of &quot;x&quot; &amp; y"' in svg
    ids = re.findall(r'id="([^"]+)"', svg)
    assert ids and all(i.startswith("grp-one-") for i in ids)
    assert all(ref in ids for ref in re.findall(r"url\(#([^)]+)\)", svg))
    comparison = figures.comparison_figure(names, np.zeros((n, n)), np.zeros((n, n)), np.zeros((n, n), bool),
                                           label="L", name="other", title="t")
    assert not set(re.findall(r'id="([^"]+)"', comparison)) & set(ids)  # two figures on one page share no id


def test_every_figure_draws_with_missing_values_and_one_model():
    """Models without an estimate, a rank or any per-sample value, and a board of one model, still draw."""
    nan = np.array([np.nan])
    assert "<svg" in figures.rank_figure(["a"], np.array([[np.nan]]), nan, nan, nan, name="r", title="t")
    assert "<svg" in figures.forest_figure(["a", "b"], [{"label": "X", "estimate": [np.nan, 0.3],
                                                         "lower": [np.nan, 0.2], "upper": [np.nan, 0.4],
                                                         "higher_is_better": False, "accent": False}],
                                           name="f", title="t")
    assert "<svg" in figures.distribution_figure(["a", "b"], [{"label": "X", "values": [np.zeros(0), np.ones(5)],
                                                               "higher_is_better": True, "accent": True}],
                                                 name="d", title="t")
    assert "<svg" in figures.metaeval_figure(["X", "Y"], [0.5, 0.4], [0.4, 0.3], [0.6, 0.5], [True, False],
                                             [np.nan, np.nan], measure="τ", name="m", title="t")

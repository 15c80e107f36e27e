"""The report people open first: results/report/report.html (and a Markdown summary).

One self-contained page — inline SVG figures (matplotlib), inline style and a few
lines of script, a content security policy that forbids every fetch — so it works
offline and is byte-identical on rerun. Per dataset × split:

* the leaderboard with intervals, rank intervals, P(rank = 1) and "tied with";
* rank uncertainty: each model's rank distribution over the shared bootstrap resamples;
* a forest plot per headline metric (the rank leaf, ReXrank's columns, then the rest; at most 8);
* every pair's difference on the rank metric (heat map; Holm's correction over all pairs);
* metric agreement: Kendall τ-b across models and across (model, case) pairs;
* per-sample distributions;
* the drill-down: per model its N worst and N best cases on the rank metric with reference,
  hypothesis, context, every metric's per-sample value and the judges' explanations (GREEN
  counts and analysis, CRIMSON's false / missing findings and attribute errors);
* the drop lists, linked;

then the meta-evaluation section (when given) and the provenance of every number.
"""

from __future__ import annotations

from radrank.report import sections
from radrank.report.data import Group, load_group
from radrank.report.page import esc, md_text, shell, visible

__all__ = ["Group", "load_group", "render_report"]


def _toc(parts) -> str:
    items = ["<li><a href=\"#overview\">Overview</a></li>"]
    for part in parts:
        for anchor, title, sub in part.toc:
            inner = "".join(f"<li><a href=\"#{a}\">{esc(t)}</a></li>" for a, t in sub)
            items.append(f"<li><a href=\"#{anchor}\">{esc(title)}</a>" + (f"<ul>{inner}</ul>" if inner else "")
                         + "</li>")
    return "<b>radrank report</b><ul>" + "".join(items) + "</ul>"


def render_report(groups: list, *, bootstrap: dict, empty_hypothesis: str, cases: int = 5,
                  metaeval: dict | None = None, link_base: str | None = None,
                  config_hash: str | None = None):
    """(markdown, html, figures) for the loaded ``groups`` (:func:`load_group`, in page order).

    ``bootstrap``: the config's ``n``, ``seed`` and ``level``. ``figures`` maps a relative file name
    (``{dataset}/{split}/{figure}.svg``, ``metaeval/{set}.svg``) to the SVG text inlined in the page.
    ``link_base``: the folder the page is written to, so links to the drop files are relative to it.

    ``metaeval`` (optional) maps a meta-evaluation set name to its agreement table, one row per
    (metric, measure, group) with columns:

    ============== ===============================================================================
    set            the set's name
    metric         the leaf name (e.g. ``radcliq_v1``)
    label          the leaf's display label
    measure        the agreement measure (e.g. ``Kendall tau-b``)
    group          ``all``, or a category of cases
    estimate       the measure's value; ``ci_lower``, ``ci_upper``: its interval
    n              cases it rests on; ``n_ties``: tied pairs
    human_ceiling  agreement between human raters on the same measure (float, NaN when unknown)
    headline       bool: the measure plotted for this set
    ============== ===============================================================================

    Each set gets a table of every row and a plot of its headline measure over the ``all`` group,
    with the human ceiling drawn as a line and the leaderboards' rank leaf highlighted.
    """
    level = float(bootstrap["level"])
    parts = [sections.group_part(g, level=level, n_cases=cases, link_base=link_base) for g in groups]
    if metaeval:
        parts.append(sections.metaeval_part(metaeval, {g.rank_leaf for g in groups}))
    parts.append(sections.provenance_part(groups, config_hash))

    intro = (f"Every number is computed from the per-sample scores in results/scores. Intervals come from an "
             f"exact paired bootstrap over cases ({bootstrap['n']} resamples shared by every model and metric, "
             f"seed {bootstrap['seed']}, {level:.0%} percentile intervals); no metric is re-run per resample. "
             "Ranks on each resample give the rank intervals; comparisons between all pairs are corrected with "
             "Holm's step-down method. Samples listed in the drop files were removed or scored as empty reports "
             f"as the config says (empty_hypothesis: {empty_hypothesis}).")
    overview = ("<section id=\"overview\"><h1>radrank report</h1>"
                f"<p>{esc(intro)}</p><ul>"
                + "".join(f"<li><a href=\"#{sections.slug(g.dataset, g.split)}\">{esc(g.dataset)} — "
                          f"{esc(g.split)}</a>: {len(g.order)} models, ranked by {esc(g.board['Ranked by'].iloc[0])}"
                          "</li>" for g in groups)
                + "</ul></section>")
    body = overview + "".join("".join(p.html) for p in parts)
    markdown = ["# radrank report", "", md_text(intro), "",
                "The full report with plots, rank distributions, every pairwise comparison, the worst and best "
                "cases per model and the provenance is report.html beside this file.", ""]
    for p in parts:
        markdown += p.markdown
    # Texts were escaped where they were placed; this last pass keeps any control character that came in some
    # other way (a figure's label, a judge's answer) out of every file (radrank.report.page.visible).
    figures = {name: visible(svg) for p in parts for name, svg in p.figures.items()}
    return (visible("\n".join(markdown).rstrip() + "\n"), visible(shell("radrank report", _toc(parts), body)),
            figures)

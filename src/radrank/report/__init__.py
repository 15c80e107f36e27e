"""The report people open first: results/report/report.html, one page per dataset × split beside it,
a Markdown summary (report.md) and the reporting appendix in Markdown (appendix.md).

Every page is self-contained — inline SVG figures (written as text: :mod:`radrank.report.figures`), inline
style and one small script, a content security policy that forbids every fetch — so it works offline, and is
byte-identical on rerun.

**report.html** (the index): how the numbers are made; per dataset × split its leaderboard at a glance
(the first ranked models and any the leaderboard does not rank, the rank metric with its interval) and
a link to its page; the meta-evaluation section (when given); the provenance of the statistics and
metrics; the reporting appendix (:mod:`radrank.report.appendix`: what the run answers of TRIPOD-LLM and
CLAIM 2024, the rest left for the authors).

**<dataset>_<split>.html** (:func:`page_name`), one per dataset × split:

* the leaderboard with intervals, rank intervals, P(rank = 1) and "tied with" (rank and model frozen when
  it scrolls sideways; a flagged model marked, with the leaderboard's reason);
* rank uncertainty: each model's rank distribution over the shared bootstrap resamples;
* a forest plot per headline metric (the rank leaf, ReXrank's columns, then the rest; at most 8);
* every pair's difference on the rank metric (heat map; Holm's correction over all pairs), the table of all
  pairs paged in the page (50 rows at a time, sorted as a whole);
* metric agreement: Kendall τ-b across models and across (model, case) pairs;
* per-sample distributions;
* the drill-down: per model (folded) its N worst and N best cases on the rank metric with reference,
  hypothesis, context, every metric's per-sample value and the judges' explanations (GREEN counts and
  analysis, CRIMSON's false / missing findings and attribute errors);
* the drop lists, linked; the provenance of the group's numbers and submissions.

The groups' pages are built independently (:func:`build_group`: read, render, forget), so the job can
build them in parallel processes and holds one group at a time in each.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from radrank.report import appendix, sections
from radrank.report.data import Group, load_group
from radrank.report.page import esc, md_text, shell, slug, visible

__all__ = ["Group", "GroupPage", "Rendered", "build_group", "load_group", "page_name", "render_group",
           "render_index", "render_report"]

INDEX = "report.html"


def page_name(dataset: str, split: str) -> str:
    """The file name of a dataset × split's page, beside report.html (as the leaderboard CSV is named)."""
    return f"{dataset}_{split}.html"


@dataclass
class GroupPage:
    """One dataset × split, rendered: its page, its figures, its part of report.md, and what the index shows."""

    dataset: str
    split: str
    page: str  # file name, beside the index
    html: str
    figures: dict  # relative file name -> SVG text
    markdown: list
    glance_parts: tuple  # the index's section for this group (HTML): before, "ranked by …" and after it
    overview: list  # the index's overview row: models, ranked by, best
    rank_leaf: str
    stats_row: list
    metric_rows: dict
    log: str = ""  # a line for the job's log
    facts: appendix.GroupFacts | None = None  # its part of the reporting appendix

    @property
    def title(self) -> str:
        return f"{self.dataset} — {self.split}"

    @property
    def glance(self) -> str:
        return "".join(self.glance_parts)

    def glance_html(self, ranking_said: bool) -> str:
        """The section, without its "ranked by …" when the index says it once for every leaderboard."""
        before, ranked, after = self.glance_parts
        return before + ("" if ranking_said else ranked) + after


@dataclass
class Rendered:
    """The whole report: report.md, report.html (the index), the group pages by file name, every figure, and the
    reporting appendix in Markdown (appendix.md)."""

    markdown: str
    html: str
    pages: dict = field(default_factory=dict)
    figures: dict = field(default_factory=dict)
    appendix: str = ""


def _intro(bootstrap: dict, empty_hypothesis: str) -> str:
    level = float(bootstrap["level"])
    return (f"Every number is computed from the per-sample scores in results/scores. Intervals come from an "
            f"exact paired bootstrap over cases ({bootstrap['n']} resamples shared by every model and metric, "
            f"seed {bootstrap['seed']}, {level:.0%} percentile intervals); no metric is re-run per resample. "
            "Ranks on each resample give the rank intervals; comparisons between all pairs are corrected with "
            "Holm's step-down method. Samples listed in the drop files were removed or scored as empty reports "
            f"as the config says (empty_hypothesis: {empty_hypothesis}).")


def _nav(nav: list, current: str | None, sub: list, metaeval: bool) -> str:
    """The contents of a group page: the index, every group's page (this one's sections under it), the
    index's meta-evaluation and provenance."""
    items = []
    for title, page, anchor in nav:
        if page == current:
            inner = "".join(f"<li><a href=\"#{a}\">{esc(t)}</a></li>" for a, t in sub)
            items.append(f"<li><a class=\"here\" href=\"#{anchor}\">{esc(title)}</a><ul>{inner}</ul></li>")
        else:
            items.append(f"<li><a href=\"{esc(page)}\">{esc(title)}</a></li>")
    return (f"<b><a href=\"{INDEX}\">radrank report</a></b><ul><li><a href=\"{INDEX}#overview\">Overview</a></li>"
            f"<li><a href=\"{INDEX}#leaderboards\">Leaderboards</a><ul>{''.join(items)}</ul></li>"
            + (f"<li><a href=\"{INDEX}#metaeval\">Can these metrics be trusted?</a></li>" if metaeval else "")
            + f"<li><a href=\"{INDEX}#provenance\">Provenance</a></li></ul>")


def _glance(group: Group, page: str) -> tuple:
    """(before, the "ranked by …" clause, after) of the index's section: the index leaves the clause out when one
    sentence above the tables says it for every leaderboard (:func:`render_index`)."""
    table, left_out = sections.glance_table(group)
    base = slug(group.dataset, group.split)
    more = (f" {left_out} more models on its page." if left_out else "")
    return (f"<section id=\"{base}\"><h3>{esc(group.dataset)} — {esc(group.split)}</h3>"
            f"<p>{len(group.order)} models",
            f", ranked by {esc(group.board['Ranked by'].iloc[0])}",
            f".{esc(more)} <a href=\"{esc(page)}\">Open the full page</a>: every model and metric, rank uncertainty, "
            "estimates, every paired comparison, metric agreement, distributions, the worst and best cases, "
            "drop lists and provenance.</p>" + table.html() + "</section>")


def render_group(group: Group, *, level: float, n_cases: int = 5, link_base: str | None = None,
                 nav: list | None = None, metaeval: bool = False, config_hash: str | None = None) -> GroupPage:
    """The page of one loaded group (:func:`load_group`). ``nav``: (title, page file, anchor) of every group, in
    page order, for the contents; ``link_base``: the folder the pages are written to (drop-list links are relative
    to it); ``metaeval``: whether the index has a meta-evaluation section."""
    page = page_name(group.dataset, group.split)
    base = slug(group.dataset, group.split)
    nav = nav or [(f"{group.dataset} — {group.split}", page, base)]
    part = sections.group_part(group, level=level, n_cases=n_cases, link_base=link_base, config_hash=config_hash)
    toc = _nav(nav, page, part.toc[0][2], metaeval)
    back = (f"<p class=\"note\"><a href=\"{INDEX}\">← radrank report</a> (overview, every leaderboard at a glance, "
            "meta-evaluation).</p>")
    html = visible(shell(f"radrank report: {group.dataset} — {group.split}", toc, back + "".join(part.html),
                         data=part.data))
    board = group.board
    rank = sections._column(board, "Rank")
    best = [group.names[m] for m, r in zip(group.order, rank) if r == 1]
    stats_row, metric_rows, _ = sections.provenance_rows(group, config_hash)
    names = group.names
    log = (f"{group.dataset}/{group.split}: {len(group.order)} models ({', '.join(names[m] for m in group.order)}), "
           f"{len(group.values)} per-sample rows, {len(group.cases)} drill-down cases; {page}: "
           f"{len(html.encode()) / 1e6:.2f} MB")
    return GroupPage(dataset=group.dataset, split=group.split, page=page, html=html,
                     figures={name: visible(svg) for name, svg in part.figures.items()},
                     markdown=part.markdown, glance_parts=_glance(group, page),
                     overview=[len(group.order), str(board["Ranked by"].iloc[0]), "; ".join(best)],
                     rank_leaf=group.rank_leaf, stats_row=stats_row, metric_rows=metric_rows, log=log,
                     facts=appendix.group_facts(group))


def build_group(entry: dict, options: dict, drill_down=None) -> GroupPage:
    """Read and render one group (a process of the job's pool runs this): ``entry`` as :func:`load_group` takes
    it; ``options``: cases, level, link_base, nav, metaeval, config_hash (:func:`render_group`); ``drill_down``:
    the group's :class:`radrank.report.reuse.DrillDownMemo`, if any."""
    group = load_group(entry, cases=options["cases"], drill_down=drill_down)
    page = render_group(group, level=options["level"], n_cases=options["cases"], link_base=options.get("link_base"),
                        nav=options.get("nav"), metaeval=options.get("metaeval", False),
                        config_hash=options.get("config_hash"))
    if drill_down is not None:
        page.log += f"; drill-down rows of {drill_down.hits} of {len(group.order)} models from the memo"
    return page


def render_index(pages: list, *, bootstrap: dict, empty_hypothesis: str, metaeval: dict | None = None,
                 config_hash: str | None = None):
    """(markdown, index html, figures, appendix markdown) over the rendered groups (:class:`GroupPage`, in page
    order). The index ends with the reporting appendix (:mod:`radrank.report.appendix`), whose Markdown is written
    beside it as :data:`radrank.report.appendix.APPENDIX`.

    ``bootstrap``: the config's ``n``, ``seed`` and ``level``. ``figures`` maps a relative file name
    (``metaeval/{set}/agreement.svg``) to the SVG text inlined in the index; each group's figures are in its
    :class:`GroupPage`.

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
    from radrank.report.page import Cell, Table

    intro = _intro(bootstrap, empty_hypothesis)
    parts = []
    if metaeval:
        parts.append(sections.metaeval_part(metaeval, {p.rank_leaf for p in pages}))
    metric_rows = {}
    for p in pages:
        for key, files in p.metric_rows.items():
            metric_rows.setdefault(key, []).extend(files)
    parts.append(sections.provenance_part([p.stats_row for p in pages], metric_rows))
    facts = appendix.gather([p.facts for p in pages], bootstrap=bootstrap, empty_hypothesis=empty_hypothesis,
                            config_hash=config_hash)
    parts.append(sections.Part(html=[appendix.html(facts)], toc=appendix.toc(facts)))

    # The ranking sentence once: when every leaderboard is ranked alike, one line under the overview says it
    # (not a column repeating it in each row, and again above each table at a glance)
    rankings = list(dict.fromkeys(p.overview[1] for p in pages))
    one_ranking = len(rankings) == 1
    rows = [[p.dataset, p.split, Cell(p.overview[0], p.overview[0]),
             *([] if one_ranking else [Cell(p.overview[1], cls="wrap")]), Cell(p.overview[2] or "—", cls="wrap"),
             Cell(f"<a href=\"{esc(p.page)}\">{esc(p.page)}</a>", raw=True)] for p in pages]
    overview = (Table(["Dataset", "Split", "Models", "Rank 1", "Page"], rows, text_columns=(0, 1, 3, 4))
                if one_ranking else
                Table(["Dataset", "Split", "Models", "Ranked by", "Rank 1", "Page"], rows, text_columns=(0, 1, 3, 4, 5)))
    ranking = (f"<p>Every leaderboard is ranked by {esc(rankings[0])}.</p>" if one_ranking else "")
    body = ("<section id=\"overview\"><h1>radrank report</h1>"
            f"<p>{esc(intro)}</p><p>One page per dataset × split holds its plots, every paired comparison, the worst "
            "and best cases per model, the drop lists and its provenance; this page shows each leaderboard at a "
            "glance.</p>" + overview.html() + ranking + "</section>"
            "<section id=\"leaderboards\"><h2>Leaderboards at a glance</h2>"
            + "".join(p.glance_html(one_ranking) for p in pages) + "</section>"
            + "".join("".join(part.html) for part in parts))
    items = ["<li><a href=\"#overview\">Overview</a></li>",
             "<li><a href=\"#leaderboards\">Leaderboards</a><ul>"
             + "".join(f"<li><a href=\"#{slug(p.dataset, p.split)}\">{esc(p.title)}</a> "
                       f"<a class=\"muted\" href=\"{esc(p.page)}\">(page)</a></li>" for p in pages) + "</ul></li>"]
    for part in parts:
        for anchor, title, sub in part.toc:
            inner = "".join(f"<li><a href=\"#{a}\">{esc(t)}</a></li>" for a, t in sub)
            items.append(f"<li><a href=\"#{anchor}\">{esc(title)}</a>" + (f"<ul>{inner}</ul>" if inner else "")
                         + "</li>")
    toc = "<b>radrank report</b><ul>" + "".join(items) + "</ul>"

    markdown = ["# radrank report", "", md_text(intro), "",
                "The full report is report.html beside this file: each leaderboard at a glance, the meta-evaluation "
                "and the provenance, and one page per dataset × split (" + md_text(", ".join(p.page for p in pages))
                + ") with its plots, rank distributions, every pairwise comparison, the worst and best cases per "
                "model, the drop lists and its provenance. The reporting appendix (data, metrics, statistics, "
                f"failures and software, under the items of TRIPOD-LLM and CLAIM 2024) is {appendix.APPENDIX}.", ""]
    for p in pages:
        markdown += p.markdown
    for part in parts:
        markdown += part.markdown
    # Texts were escaped where they were placed; this last pass keeps any control character that came in some
    # other way (a figure's label, a judge's answer) out of every file (radrank.report.page.visible).
    figures = {name: visible(svg) for part in parts for name, svg in part.figures.items()}
    return (visible("\n".join(markdown).rstrip() + "\n"), visible(shell("radrank report", toc, body)), figures,
            visible(appendix.markdown(facts)))


def navigation(groups) -> list:
    """(title, page file, anchor) of each (dataset, split), in page order."""
    return [(f"{d} — {s}", page_name(d, s), slug(d, s)) for d, s in groups]


def render_report(groups: list, *, bootstrap: dict, empty_hypothesis: str, cases: int = 5,
                  metaeval: dict | None = None, link_base: str | None = None,
                  config_hash: str | None = None) -> Rendered:
    """The whole report of the loaded ``groups`` (:func:`load_group`, in page order), in this process; see
    :func:`render_index` for ``metaeval``."""
    nav = navigation([(g.dataset, g.split) for g in groups])
    pages = [render_group(g, level=float(bootstrap["level"]), n_cases=cases, link_base=link_base, nav=nav,
                          metaeval=bool(metaeval), config_hash=config_hash) for g in groups]
    markdown, html, figures, appendix_md = render_index(pages, bootstrap=bootstrap, empty_hypothesis=empty_hypothesis,
                                                        metaeval=metaeval, config_hash=config_hash)
    for p in pages:
        figures.update(p.figures)
    return Rendered(markdown=markdown, html=html, pages={p.page: p.html for p in pages}, figures=figures,
                    appendix=appendix_md)

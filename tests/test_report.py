"""The report from synthetic workflow outputs: an index page and one page per dataset × split; content,
determinism (also when the pages are built in parallel processes), offline-ness, drill-down, judges'
explanations, paged long tables, the leaderboard's coverage and flags, provenance, the meta-evaluation slot."""

from __future__ import annotations

import json
import multiprocessing
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synthetic import write_workflow_outputs  # noqa: E402

from radrank import io, jobs  # noqa: E402
from radrank.report import load_group, render_group, render_report, reuse  # noqa: E402
from radrank.report.data import SampleColumn, sample_columns, select_cases  # noqa: E402
from radrank.report.page import PAGE_ROWS, script_json  # noqa: E402
from radrank.metrics.crimson import crimson_errors  # noqa: E402
from radrank.report.sections import kendall_matrix, per_sample_rows  # noqa: E402

METRICS = ("bleu2", "bleu4", "rouge", "radcliq", "green", "crimson")
BOOT = {"n": 200, "seed": 0, "level": 0.95}
FIGURES_PER_GROUP = 5  # ranks, forest, comparisons, agreement, distributions
SPLITS = ("findings", "reports")
PAGES = tuple(f"synthetic_{s}.html" for s in SPLITS)


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    return write_workflow_outputs(root, n_models=5, n_cases=60, splits=SPLITS, metric_names=METRICS, n_boot=BOOT["n"])


@pytest.fixture(scope="module")
def rendered(layout, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    write_report(layout, out)
    return out


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    """A leaderboard of 12 models: 66 pairs, more than a page of the all-pairs table."""
    root = tmp_path_factory.mktemp("many")
    return write_workflow_outputs(root, n_models=12, n_cases=30, metric_names=("bleu2", "rouge"), n_boot=50)


def write_report(layout, out, processes=1):
    """The workflow's report job on an explicit layout, its files in ``out``."""
    job = jobs.Report.of_layout(layout, bootstrap=BOOT, empty_hypothesis="score", cases=3, processes=processes)
    job.write(layout, [], job.outputs(out))
    return job


def read(out, name) -> str:
    return (out / name).read_text()


def test_the_report_reads_its_inputs_by_name(layout):
    """The rule's input as rules/common.smk names it (jobs.Report.inputs) read back by the job (Report.layout): each
    group's files under its own names, every model's pairs, drops and score files where the layout has them."""
    job = jobs.Report.of_layout(layout, bootstrap=BOOT, empty_hypothesis="score", cases=3)
    named = jobs.Report.inputs(layout, ["a/agreement.csv"])
    assert named["group1_leaderboard"] == str(layout[1]["leaderboard"])
    assert named["group0_pairs"] == [str(m["pairs"]) for m in layout[0]["models"].values()]
    assert named["metaeval"] == ["a/agreement.csv"]
    kinds = ("leaderboard", "ranks", "summary", "comparisons", "pairs", "drops", "score_dirs")
    assert set(named) == {"metaeval", *(f"group{i}_{kind}" for i in range(len(layout)) for kind in kinds)}
    keys = ("dataset", "split", "leaderboard", "ranks", "summary", "comparisons")
    read = job.layout(jobs.Files(named))
    assert [{k: str(e[k]) for k in keys} for e in layout] == [{k: e[k] for k in keys} for e in read]
    assert [{m: {"pairs": str(f["pairs"]), "drops": str(f["drops"]), "scores": {x: str(p) for x, p in f["scores"].items()}}
             for m, f in e["models"].items()} for e in layout] == [e["models"] for e in read]
    # the score files by their metric folders: a layout whose files are elsewhere cannot be named so
    first = next(iter(layout[0]["models"].values()))["scores"]
    assert named["group0_score_dirs"] == [str(Path(path).parent) for path in first.values()]
    moved = [{**layout[0], "models": {m: {**f, "scores": {**f["scores"]}} for m, f in layout[0]["models"].items()}}]
    next(iter(moved[0]["models"].values()))["scores"][next(iter(first))] = "elsewhere/model.parquet"
    with pytest.raises(ValueError, match="<metric folder>/<model>.parquet"):
        jobs.Report.inputs(moved)


def metaeval_table(name="rexval"):
    rows = []
    for metric, label, est in (("radcliq_v1", "RadCliQ-v1", 0.52), ("bleu2", "BLEU", 0.31), ("green", "GREEN", 0.6)):
        for group in ("all", "normal"):
            rows.append({"set": name, "metric": metric, "label": label, "measure": "Kendall tau-b", "group": group,
                         "estimate": est, "ci_lower": est - 0.1, "ci_upper": est + 0.1, "n": 200, "n_ties": 3,
                         "human_ceiling": 0.7, "headline": True})
            rows.append({"set": name, "metric": metric, "label": label, "measure": "Pearson r", "group": group,
                         "estimate": est + 0.05, "ci_lower": est - 0.05, "ci_upper": est + 0.15, "n": 200,
                         "n_ties": np.nan, "human_ceiling": np.nan, "headline": False})  # no ties for Pearson's r
    return pd.DataFrame(rows)


def test_index_and_one_page_per_group_with_their_figures(rendered):
    assert sorted(p.name for p in rendered.glob("*.html")) == sorted(("report.html", *PAGES))
    figures = sorted(str(p.relative_to(rendered / "figures")) for p in (rendered / "figures").rglob("*.svg"))
    assert figures == sorted(f"synthetic/{s}/{f}.svg" for s in SPLITS
                             for f in ("ranks", "forest", "comparisons", "agreement", "distributions"))
    index = read(rendered, "report.html")
    assert index.count("<svg ") == 0  # the groups' figures are on their pages
    for split, page in zip(SPLITS, PAGES):
        html = read(rendered, page)
        assert html.count("<svg ") == FIGURES_PER_GROUP
        for name in (f for f in figures if f.startswith(f"synthetic/{split}/")):  # each page inlines its own
            assert (rendered / "figures" / name).read_text() in html
        assert f'href="{page}"' in index  # the index links every page
        assert 'href="report.html"' in html  # and every page the index
    assert "Worst and best cases" not in index and "Drop lists" not in index  # the long parts are on the pages


def test_pages_are_self_contained_offline_and_linked(rendered):
    pages = {p.name: p.read_text() for p in rendered.glob("*.html")}
    ids = {name: re.findall(r'\bid="([^"]+)"', html) for name, html in pages.items()}
    for name, html in pages.items():
        assert html.startswith("<!doctype html>")
        assert "Content-Security-Policy" in html and "default-src 'none'" in html
        assert not re.search(r"\bsrc\s*=", html, re.I)  # nothing embedded by reference
        # the only links out are the models' names to their http(s) URLs (navigation, never a fetch), each
        # opened without the report as opener or referrer
        out = re.findall(r"""<a href="https://[^"]*" rel="noopener noreferrer">""", html)
        assert not re.search(r"""\b(?:href|xlink:href)\s*=\s*["']?(?:https?:)?//""",
                             re.sub(r"""<a href="https://[^"]*" rel="noopener noreferrer">""", "", html), re.I)
        assert len(out) == (0 if name == "report.html" else 5) or name == "report.html" and len(out) == 10
        assert "<link" not in html and "@import" not in html and "url(http" not in html
        assert len(ids[name]) == len(set(ids[name]))  # no id twice (figures are prefixed)
        for target in re.findall(r'href="([^"]*)"', html):  # every link to a page of the report has its target
            if target.startswith("https://example.org/") or target.endswith(".csv") or target.startswith("data:image/png;base64,"):  # drop lists; a heat map
                continue
            page, _, anchor = target.partition("#")
            if page == "appendix.md":  # the reporting appendix in Markdown, written beside the index
                assert name == "report.html" and (rendered / page).is_file() and not anchor
                continue
            assert page in ("", *pages), (name, target)
            assert not anchor or anchor in ids[page or name], (name, target)


def _content_files(root: Path) -> list:
    """The report's files under ``root``, less the page reuse's bookkeeping (its keys name the output folder)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and not reuse.is_bookkeeping(p.relative_to(root)))


@pytest.mark.parametrize("fork", [False, True], ids=["spawned", "forked"])
def test_rerender_is_byte_identical_also_in_parallel_processes(layout, rendered, tmp_path, monkeypatch, fork):
    """Two processes even for this small report: spawned (as in Snakemake's own process) or forked (as in a
    radrank worker)."""
    monkeypatch.setattr(jobs.Report, "PARALLEL_MIN_ENTRIES", 0)
    monkeypatch.setattr(jobs, "FORK_SAFE", fork)
    started = []
    real = multiprocessing.get_context
    monkeypatch.setattr(multiprocessing, "get_context", lambda method=None: started.append(method) or real(method))
    write_report(layout, tmp_path, processes=2)
    assert started == ["fork" if fork else "spawn"]
    files = _content_files(rendered)
    assert files == _content_files(tmp_path)
    for name in files:
        assert (tmp_path / name).read_bytes() == (rendered / name).read_bytes(), name


def test_a_rerun_builds_only_what_changed_and_keeps_nothing_stale(layout, tmp_path, monkeypatch):
    """radrank.report.reuse in the job: the same layout again builds no page and writes the same files (a stray file
    in the figures folder goes); a damaged stored page state is built again, not trusted; a report of one group
    builds that page again (the contents changed) and drops the other group's figures and state."""
    import radrank.report

    built, real = [], radrank.report.build_group
    monkeypatch.setattr(radrank.report, "build_group",
                        lambda entry, options, *memo: built.append(entry["split"]) or real(entry, options, *memo))
    out = tmp_path / "out"
    write_report(layout, out)
    assert built == list(SPLITS)
    first = {name: (out / name).read_bytes() for name in _content_files(out)}
    (out / "figures" / "stray.svg").write_text("<svg/>")
    built.clear()
    write_report(layout, out)
    assert built == []
    assert {name: (out / name).read_bytes() for name in _content_files(out)} == first
    state = out / "figures" / reuse.STATE_DIR / f"{PAGES[0]}.pickle"
    state.write_bytes(state.read_bytes()[:20])  # truncated
    write_report(layout, out)
    assert built == [SPLITS[0]]
    assert {name: (out / name).read_bytes() for name in _content_files(out)} == first
    built.clear()
    write_report(layout[:1], out)
    assert built == [SPLITS[0]]
    figures = {p.relative_to(out / "figures").parts[:2] for p in (out / "figures").rglob("*.svg")}
    assert figures == {("synthetic", SPLITS[0])}
    assert sorted(p.name for p in (out / "figures" / reuse.STATE_DIR).iterdir()) == [f"{PAGES[0]}.pickle"]
    assert list(json.loads((out / "figures" / reuse.KEYS_FILE).read_text())) == [PAGES[0]]


def test_a_rebuilt_page_reads_only_the_changed_models_texts_and_shows_them(layout, rendered, tmp_path,
                                                                             monkeypatch):
    """radrank.report.reuse.DrillDownMemo: a model resubmits other reports; its page is built again and its drill-down
    shows the new texts, read from its own pairs file alone (every other model's rows come from the memo), and every
    file equals a report built from scratch. A damaged memo entry is chosen again, not trusted."""
    import copy

    from radrank.report import data

    out = tmp_path / "out"
    write_report(layout, out)
    memo = out / "figures" / reuse.DRILL_DOWN_DIR
    assert len(list(memo.iterdir())) == sum(len(entry["models"]) for entry in layout)
    changed = copy.deepcopy(layout)
    model = sorted(changed[0]["models"])[1]
    pairs = pd.read_parquet(changed[0]["models"][model]["pairs"])
    pairs["hypothesis"] = "Resubmitted: " + pairs["hypothesis"].astype(str)
    path = tmp_path / "resubmitted.parquet"
    io.write_parquet(pairs, path, io.read_provenance(changed[0]["models"][model]["pairs"]))
    changed[0]["models"][model]["pairs"] = str(path)
    texts_read = []
    real = data._read_arrow
    monkeypatch.setattr(data, "_read_arrow", lambda p, columns=None, filters=None, shared=None: (
        texts_read.append(str(p)) if "hypothesis" in (columns or ()) else None) or real(p, columns, filters, shared))
    write_report(changed, out)
    assert texts_read == [str(path)]  # the other group's page is kept; this group's other models served
    assert "Resubmitted: " in read(out, PAGES[0])
    fresh = tmp_path / "fresh"
    write_report(changed, fresh)
    files = _content_files(fresh)
    assert files == _content_files(out)
    for name in files:
        assert (out / name).read_bytes() == (fresh / name).read_bytes(), name
    # only the entries of the models now in the report stay: the resubmitted model's old rows are gone
    assert len(list(memo.iterdir())) == sum(len(entry["models"]) for entry in layout)
    for entry in memo.iterdir():
        entry.write_bytes(entry.read_bytes()[:30])  # truncated
    texts_read.clear()
    (out / "figures" / reuse.KEYS_FILE).unlink()  # every page built again
    write_report(changed, out)
    assert sorted(texts_read) == sorted(str(m["pairs"]) for entry in changed for m in entry["models"].values())
    for name in files:
        assert (out / name).read_bytes() == (fresh / name).read_bytes(), name


def test_content_names_and_corrections(layout, rendered):
    index, html, md = read(rendered, "report.html"), read(rendered, PAGES[0]), read(rendered, "report.md")
    board = pd.read_csv(layout[0]["leaderboard"])
    names = list(board["Model Name"])
    assert "Holm" in html and "Kendall" in html
    assert f"{names[0]} vs {names[1]}" in md and f"{names[0]} vs {names[1]}" in html
    # display names, never ids, where the leaderboard shows names (a name links to its Model URL, which may hold one)
    assert "model_00" not in re.sub(r"\]\(https://example\.org/model_\d+\)", "]", md)
    assert "Ranked by RadCliQ-v1 (radcliq_v1) mean, lower is better" in md
    assert "All 10 pairs with Holm-adjusted p-values" in html
    for column in ("Rank", "P(rank=1)", "Tied with", "Coverage"):
        assert re.search(rf"<th[^>]*>{re.escape(column)}</th>", html), column
    assert "Provenance" in html and "Provenance" in index and "exact paired bootstrap" in index
    for name in names:  # the index shows every leaderboard at a glance (5 models: all of them)
        assert name in index
    assert all(page in md for page in PAGES)  # the summary names the pages


def test_drill_down_cases_are_each_models_extremes_with_judges(layout, rendered):
    group = load_group(layout[0], cases=3)
    rank_col = group.rank_column()
    assert rank_col.column == "radcliq_v1" and not rank_col.higher_is_better
    html = read(rendered, PAGES[0])
    for model in group.order:
        values = group.values[group.values["model"] == model].dropna(subset=["radcliq_v1"])
        ordered = values.sort_values(["radcliq_v1", "sample_id"], ascending=[False, True])
        chosen = group.cases[group.cases["model"] == model]
        assert list(chosen[chosen["kind"] == "worst"]["sample_id"]) == list(ordered["sample_id"].iloc[:3])
        assert list(chosen[chosen["kind"] == "best"]["sample_id"]) == list(ordered["sample_id"].iloc[::-1].iloc[:3])
        pairs = pd.read_parquet(layout[0]["models"][model]["pairs"]).set_index("sample_id")
        worst = chosen.iloc[0]
        if worst["sample_id"] in pairs.index:
            assert worst["hypothesis"] == pairs.loc[worst["sample_id"], "hypothesis"]
            assert worst["reference"] == pairs.loc[worst["sample_id"], "reference"]
        else:  # a case of the set the model has no pair for: scored as an empty report, no text of its own
            assert pd.isna(worst["hypothesis"])
        assert worst["radcliq_v1"] == values.set_index("sample_id").loc[worst["sample_id"], "radcliq_v1"]
    assert "<b>GREEN</b> matched findings" in html and "judge's analysis" in html
    assert "<b>CRIMSON</b> false findings: pneumothorax (urgent)" in html
    assert "missing findings: left basilar atelectasis (not_actionable)" in html
    assert html.count('<details class="model">') >= len(group.order)  # every model's cases folded


def test_drop_lists_are_linked_and_listed(layout, rendered):
    html = read(rendered, PAGES[0])
    link = re.search(r'href="([^"]*model_001\.drops\.csv)"', html).group(1)
    assert link.startswith("../")  # relative to the page's folder, so the folder can be moved as a whole
    assert (rendered / link).resolve() == Path(layout[0]["models"]["model_001"]["drops"]).resolve()
    assert "empty_reference" in html and "scored_as_empty" in html


class _Rows(HTMLParser):
    """Rows of the table with a given id, and the page's scripts."""

    def __init__(self, table_id):
        super().__init__()
        self.table_id, self.inside, self.rows, self.scripts, self._script = table_id, False, 0, [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table" and attrs.get("id") == self.table_id:
            self.inside = True
        elif tag == "tr" and self.inside:
            self.rows += 1
        elif tag == "script":
            self._script = ""

    def handle_endtag(self, tag):
        if tag == "table":
            self.inside = False
        elif tag == "script":
            self.scripts.append(self._script)
            self._script = None

    def handle_data(self, data):
        if self._script is not None:
            self._script += data


def test_long_tables_are_paged_in_the_page_with_their_rows_as_escaped_data(many):
    """66 pairs: the page shows the first PAGE_ROWS as HTML; all 66 are data in the page's one script, every
    text escaped so that none can end the script."""
    group = load_group(many[0], cases=1)
    first = group.board.index[0]
    group.board.loc[first, "Model Name"] = "</script><b>x</b><!--"  # an untrusted display name
    page = render_group(group, level=0.95, n_cases=1)
    table_id = "synthetic-findings-allpairs"
    parser = _Rows(table_id)
    parser.feed(page.html)
    assert parser.rows == 1 + PAGE_ROWS  # the header and the first page
    assert len(parser.scripts) == 1  # the page's own script: the rows are data inside it
    script = parser.scripts[0]
    data = json.loads(re.match(r"var RR=(\{.*?\});\n", script, re.S).group(1))
    assert len(data[table_id]["rows"]) == 66 == len(group.order) * (len(group.order) - 1) // 2
    assert data[table_id]["rows"][0][0] == "</script><b>x</b><!--"  # the name, as text
    assert "</script" not in script and "<!--" not in script and "<b>" not in script
    assert "&lt;/script&gt;&lt;b&gt;x&lt;/b&gt;" in page.html  # escaped where it is HTML
    assert f'data-page-size="{PAGE_ROWS}"' in page.html and "66 rows, 50 at a time" in page.html
    assert script_json({"a": "\u2028<&>"}) == '{"a":"\\u2028\\u003c\\u0026\\u003e"}'


def test_leaderboard_shows_coverage_flags_and_models_without_a_rank(layout, tmp_path):
    """A flagged model has no rank and no rank interval, is listed last with a visible flag; coverage is a
    percentage; a ReXrank column of a metric that was not run is simply absent."""
    group = load_group(layout[0], cases=1)
    board = group.board.copy()
    last = board.index[-1]
    flag = "coverage 40% of 200 cases, below leaderboard.min_coverage 90%: not ranked"
    board["Rank"] = board["Rank"].astype("Float64")
    board.loc[last, ["Rank", "Rank CI low", "Rank CI high"]] = np.nan
    board.loc[last, "Rank CI"] = np.nan
    board["Coverage"] = 1.0
    board.loc[last, "Coverage"] = 0.4
    board["Flag"] = [np.nan] * (len(board) - 1) + [flag]
    board = board.drop(columns=[c for c in board.columns if c.startswith("BLEU-4")])
    path = tmp_path / "board.csv"
    io.write_csv(board, path)  # as the leaderboard job writes it, read back as the report reads it
    group.board = io.read_csv(path, keep_default_na=True)
    page = render_group(group, level=0.95, n_cases=1)
    html = page.html
    name = group.names[group.order[-1]]
    row = re.search(r'<tr class="flagged[^"]*">(.*?)</tr>', html).group(1)
    assert name in row and f"\u2691 {flag}" in row and "40%" in row
    assert row.startswith('<td data-v="NaN" class="s0">—</td>')  # no rank, sorted last
    assert len(re.findall(r'<tr class="flagged[^"]*">', html)) == 1 and html.count("\u2691") == 1
    assert "100%" in html and "BLEU-4</th>" not in html
    assert page.glance.count('<tr class="flagged">') == 1 and f"\u2691 {flag}" in page.glance  # also at a glance
    md = "\n".join(page.markdown)
    assert "| Flag |" in md and flag in md and "| — | " in md and "40%" in md


def test_provenance_abbreviates_hashes_and_shows_no_raw_nulls(rendered):
    html = read(rendered, PAGES[0])
    assert f'title="{"0" * 64}">{"0" * 12}…</td>' in html  # the source's sha256: abbreviated, whole in its tooltip
    assert not re.search(r">\s*(null|\{\}|None|nan)\s*<", html)
    assert "<h3>Submissions</h3>" in html and "<h3>Submissions</h3>" not in read(rendered, "report.html")


def test_metaeval_section(layout):
    groups = [load_group(entry, cases=2) for entry in layout]
    report = render_report(groups, bootstrap=BOOT, empty_hypothesis="score", cases=2,
                           metaeval={"rexval": metaeval_table()})
    html, figures = report.html, report.figures
    assert "Can these metrics be trusted?" in html and 'href="#metaeval-rexval"' in html
    assert "metaeval/rexval/agreement.svg" in figures
    svg = figures["metaeval/rexval/agreement.svg"]
    assert "human ceiling" in svg and "RadCliQ-v1" in svg
    assert html.count("<svg ") == 1  # the index: the meta-evaluation's plot; the groups' figures are on their pages
    assert all(p.count("<svg ") == FIGURES_PER_GROUP for p in report.pages.values())
    assert 'report.html#metaeval' in report.pages[PAGES[0]]  # the pages' contents lead to it
    assert '<td class="sig t">RadCliQ-v1</td>' in html  # the rank metric is highlighted in the table
    ties = re.findall(r'<td data-v="[^"]*">(3|3\.0|nan|—)</td><td data-v="[^"]*">(?:0\.700|—)</td>', html)
    assert set(ties) == {"3", "—"}  # tied pairs an integer count; none for a measure without ties
    bad = metaeval_table().drop(columns=["human_ceiling"])
    with pytest.raises(ValueError, match="human_ceiling"):
        render_report(groups, bootstrap=BOOT, empty_hypothesis="score", metaeval={"rexval": bad})


def test_per_sample_columns_of_the_metrics():
    assert sample_columns("bleu4") == [SampleColumn("bleu4_sentence", "BLEU-4 (per sample)", True, None)]
    assert [c.column for c in sample_columns("green")] == ["green"]  # the unparsed count is no score
    assert [c.column for c in sample_columns("radcliq")] == ["radcliq_v0", "radcliq_v1"]
    assert not sample_columns("radcliq")[1].higher_is_better


def test_select_cases_skips_missing_values_and_breaks_ties_by_id():
    values = pd.DataFrame({"model": ["m"] * 6, "sample_id": ["e", "d", "c", "b", "a", "z"],
                           "v": [0.5, 0.1, 0.1, 0.9, np.nan, 0.7]})
    chosen = select_cases(values, SampleColumn("v", "V", True, "v"), 2)
    assert list(chosen["sample_id"]) == ["c", "d", "b", "z"]
    assert list(chosen["kind"]) == ["worst", "worst", "best", "best"]
    few = select_cases(values.iloc[:2], SampleColumn("v", "V", True, "v"), 5)
    assert sorted(few["sample_id"]) == ["d", "e"]  # a case is never both worst and best


def test_kendall_orientation_missing_values_and_the_per_sample_subset():
    x = np.array([0.1, 0.4, 0.3, 0.9, np.nan])
    tau = kendall_matrix([x, -x, x[::-1]], [1, -1, 1])
    assert tau[0, 1] == pytest.approx(1.0)  # a lower-is-better copy agrees once oriented
    assert np.isfinite(tau[0, 2])
    rows, title = per_sample_rows(10, limit=20)
    assert list(rows) == list(range(10)) and "10 model × case pairs" in title
    rows, title = per_sample_rows(100, limit=20)
    assert len(rows) == len(set(rows)) == 20 and list(rows) == sorted(rows) and "20 of 100" in title
    assert list(per_sample_rows(100, limit=20)[0]) == list(rows)  # the same subset on every run


def test_crimson_errors_from_a_judge_answer():
    answer = json.dumps({
        "reference_findings": [{"id": "R1", "finding": "small left apical pneumothorax",
                                "clinical_significance": "actionable_not_urgent"}],
        "predicted_findings": [{"id": "P1", "finding": "large right pleural effusion",
                                "clinical_significance": "urgent"}],
        "matched_findings": [],
        "errors": {"false_findings": ["P1"], "missing_findings": ["R1"],
                   "attribute_errors": [{"pred_id": "P1", "error_types": ["location"], "severity": "significant"}]}})
    false, missing, attribute = crimson_errors("```json\n" + answer + "\n```")
    assert false == ["large right pleural effusion (urgent)"]
    assert missing == ["small left apical pneumothorax (actionable_not_urgent)"]
    assert attribute == ["large right pleural effusion (urgent): location (significant)"]
    assert crimson_errors("not json at all") is None


def test_a_leaderboard_without_rank_columns_or_any_ranked_model_still_renders(layout):
    """No model ranked (every Rank empty, no rank distribution) and no rank-uncertainty, coverage or ReXrank columns
    of metrics that were not run: the page renders, every rank shown as —."""
    group = load_group(layout[1], cases=1)
    board = group.board.drop(columns=[c for c in group.board.columns if c.startswith(("Rank CI", "P(rank", "Tied",
                                                                                       "Coverage", "Flag", "GREEN"))])
    group.board = board.assign(Rank=np.nan)
    group.ranks = group.ranks.iloc[0:0]
    page = render_group(group, level=0.95, n_cases=1)
    assert page.html.count("<svg ") == FIGURES_PER_GROUP
    ranks = re.findall(r'<td data-v="NaN" class="s0">(.*?)</td>', page.html)
    assert ranks.count("—") == len(group.order)
    assert "Coverage" not in page.html.split('id="synthetic-reports-ranks"')[0]
    assert page.overview[2] == ""  # no model has rank 1


# --- what each table says once (issue 28) ---------------------------------------------------------------------


def test_the_ranking_is_said_once_per_table(layout):
    """The index says how the leaderboards are ranked once when they are all ranked alike, and per row of its
    overview (once per glance table) when they differ; a group page says it once above its table."""
    groups = [load_group(entry, cases=2) for entry in layout]
    ranked_by = str(groups[0].board["Ranked by"].iloc[0])
    assert all(str(g.board["Ranked by"].iloc[0]) == ranked_by for g in groups)
    report = render_report(groups, bootstrap=BOOT, empty_hypothesis="score", cases=2)
    assert report.html.count(ranked_by) == 1, report.html.count(ranked_by)
    assert f"<p>Every leaderboard is ranked by {ranked_by}.</p>" in report.html
    assert "<th>Ranked by</th>" not in report.html and "ranked by" not in report.html.replace(
        f"Every leaderboard is ranked by {ranked_by}", "")
    for page in report.pages.values():
        assert page.count(ranked_by) == 1
    other = groups[1].board.copy()
    other["Ranked by"] = "BLEU (bleu2) mean, higher is better"
    groups[1].board = other
    report = render_report(groups, bootstrap=BOOT, empty_hypothesis="score", cases=2)
    assert "Every leaderboard is ranked by" not in report.html and re.search(r"<th[^>]*>Ranked by</th>", report.html)
    assert report.html.count(ranked_by) == 2 and report.html.count("BLEU (bleu2) mean, higher is better") == 2
    assert f"models, ranked by {ranked_by}." in report.html  # each glance table says its own, once


def test_a_models_url_is_a_link_on_the_page_when_it_is_http(layout):
    group = load_group(layout[0], cases=2)
    board = group.board.copy()
    first, second = board["model"].iloc[0], board["model"].iloc[1]
    assert board["Model URL"].iloc[0] == f"https://example.org/{first}"  # from the models sheet
    board.loc[board["model"] == second, "Model URL"] = "javascript:alert(1)"
    board.loc[board["model"] == board["model"].iloc[2], "Model URL"] = 'https://example.org/a"b<c>'
    group.board = board
    html = render_group(group, level=0.95, n_cases=2).html
    name = group.names[first]
    assert (f'<a href="https://example.org/{first}" rel="noopener noreferrer">{name}</a>') in html
    assert "javascript:" not in html and f">{group.names[second]}</td>" in html  # not http(s): text, unlinked
    assert '<a href="https://example.org/a%22b%3Cc%3E" rel="noopener noreferrer">' in html  # quoted, never raw


def test_dropped_and_coverage_say_what_they_count(layout):
    """A model with a drop and 100% coverage: the page says a case without a usable reference leaves the
    dataset's cases, and links the drop lists; with no drop it says nothing."""
    group = load_group(layout[0], cases=2)
    board = group.board.copy()
    group.board = board.assign(Dropped=0)
    html = render_group(group, level=0.95, n_cases=2).html
    assert "Dropped 1 and Coverage 100%" not in html and "listed as dropped" not in html
    board["Dropped"] = [1] + [0] * (len(board) - 1)
    board["Coverage"] = 1.0
    group.board = board
    html = render_group(group, level=0.95, n_cases=2).html
    base = f"{group.dataset}-{group.split}"
    assert ("a case without a usable reference (dropped for every model) is not one of the dataset's cases, so a "
            "model can show Dropped 1 and Coverage 100%.") in html
    assert f'<a href="#{base}-drops">Drop lists</a>' in html and f'id="{base}-drops"' in html
    assert html.count('title="share of the dataset&#x27;s cases this model was scored on') == len(board)
    assert html.count('title="cases of this submission listed as dropped') == 1


def test_a_metric_scored_with_demo_weights_is_said_first_on_its_page(layout):
    """make mrscore-demo's random models put a column in the real report: the page and report.md say first that
    its numbers mean nothing; a page without demo weights says nothing of the kind."""
    group = load_group(layout[0], cases=1)
    assert "Demo weights" not in render_group(group, level=0.95, n_cases=1).html
    (model, metric), prov = next(iter(group.provenance["scores"].items()))
    group.provenance["scores"][model, metric] = {**prov, "models": {**(prov.get("models") or {}), "demo": True}}
    page = render_group(group, level=0.95, n_cases=1)
    intro = page.html.split('<h2 id="')[0]  # before the first section: above the leaderboard
    assert '<p class="note demo"><strong>Demo weights: ' in intro and "numbers are meaningless" in intro
    assert page.markdown[2].startswith("**Demo weights: ") and "make mrscore-demo" in page.markdown[2]


IMPORTS_WHILE_DRAWING = r"""
import json, sys
import numpy as np
from radrank import jobs
from radrank.report import figures

layout, out, boot = json.loads(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
figures.import_for_drawing()
def drawing_modules():
    return {m for m in sys.modules if m.split(".")[0] in ("matplotlib", "PIL", "fontTools", "kiwisolver")}
assert not any(m.startswith("matplotlib") for m in sys.modules)
before = drawing_modules()
job = jobs.Report.of_layout(layout, bootstrap=boot, empty_hypothesis="score", cases=3, processes=1)
job.write(layout, [], job.outputs(out))
n = 45  # a heat map of more than MAX_VECTOR_CELLS cells: an embedded PNG
assert n * n > figures.MAX_VECTOR_CELLS
names = [f"m{i}" for i in range(n)]
figures.rank_figure(names, np.full((n, n), 1 / n), np.arange(1, n + 1), np.arange(1, n + 1), np.arange(1, n + 1),
                    name="big", title="big")
print(json.dumps(sorted(drawing_modules() - before) + sorted(m for m in sys.modules if m.startswith("matplotlib"))
                 + sorted(m for m in sys.modules if m.startswith("scipy.stats"))))
"""


def test_what_drawing_imports_is_imported_before_page_builders_fork(layout, tmp_path):
    """jobs.Report forks its page builders after figures.import_for_drawing(): drawing every figure of a report, and
    a heat map large enough to be an image, imports nothing more (else each builder would import it again), no
    plotting library at all (the figures are written as SVG text), and not scipy.stats (1.2 CPU-s to import: the
    agreement panels' τ is radrank.stats.ranks.kendall_tau_b)."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", IMPORTS_WHILE_DRAWING, json.dumps(layout, default=str),
                           str(tmp_path), json.dumps(BOOT)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.splitlines()[-1]) == []


def test_the_violins_bins_count_as_numpys_histogram_of_the_same_edges():
    """The distribution figure counts each violin's values with numpy's equal-width path (a bin count and a range):
    the counts equal np.histogram's of the same edges given as an array (half-open bins, the last one closed) for
    values on the edges, ties, one value, values outside the edges (not counted) and the panel's own edges (its
    values' range)."""
    from radrank.report.figures import _histogram

    rng = np.random.default_rng(3)
    edges = np.linspace(0.0, 1.0, 15)
    cases = [rng.random(1000), np.round(rng.random(1000), 1), edges.copy(), np.repeat(edges, 3), np.array([1.0]),
             np.array([0.0]), np.concatenate([rng.random(50), [-0.1, 1.1, 1.0 + 1e-12]]), np.zeros(0)]
    for values in cases:
        assert np.array_equal(_histogram(values, edges), np.histogram(values, bins=edges)[0]), values
    skewed = rng.exponential(size=5000)
    own = np.linspace(skewed.min(), skewed.max(), 25)
    assert np.array_equal(_histogram(skewed, own), np.histogram(skewed, bins=own)[0])


def test_a_pages_per_sample_values_are_every_score_file_as_pandas_reads_it_one_model_after_another(tmp_path):
    """report.data._per_sample_values (ids decoded once, the model column built from codes) against pandas: each
    model's score files read with pd.read_parquet, joined, a model column added, concatenated in model order."""
    from radrank.report.data import _per_sample_values

    rng = np.random.default_rng(5)
    ids = [f"case-{i:03d}" for i in range(40)]
    models = {}
    for k, model in enumerate(["zeta", "alpha", "=m", "mid"]):
        mine = ids if k != 3 else ids[::2]  # one model with other cases
        entry = {}
        for metric, columns in (("bleu2", ["bleu2"]), ("rouge", ["rouge1", "rouge2", "rougeL"])):
            frame = pd.DataFrame({"sample_id": mine, **{c: rng.random(len(mine)) for c in columns}})
            frame.loc[1, columns[0]] = np.nan
            path = tmp_path / f"{model}-{metric}.parquet"
            io.write_parquet(frame, path, {"metric": metric, "model": model})
            entry[metric] = str(path)
        models[model] = {"scores": entry}
    frame, _, prov = _per_sample_values(models, ["bleu2", "rouge"])
    want = pd.concat([pd.read_parquet(e["scores"]["bleu2"]).merge(pd.read_parquet(e["scores"]["rouge"]), on="sample_id")
                      .assign(model=m) for m, e in models.items()], ignore_index=True)
    want = want[["model", "sample_id", "bleu2", "rouge1", "rouge2", "rougeL"]]
    pd.testing.assert_frame_equal(frame[want.columns], want, check_exact=True)
    assert prov["mid", "rouge"] == {"metric": "rouge", "model": "mid"}


def test_a_frames_rows_by_model_are_grouped_once_per_frame_and_the_frame_is_not_kept():
    """The sections ask for each model's rows of a page's per-sample values several times: grouped once per frame,
    never served for another frame (even one at a freed frame's address), and the frame itself is not kept."""
    import gc
    import weakref

    from radrank.report.data import rows_by_model

    values = pd.DataFrame({"model": ["b", "a", "b"], "sample_id": ["1", "1", "2"]})
    at = rows_by_model(values)
    assert {m: list(r) for m, r in at.items()} == {"b": [0, 2], "a": [1]} and list(at) == ["b", "a"]
    assert rows_by_model(values) is at
    other = pd.DataFrame({"model": ["c", "c"], "sample_id": ["1", "2"]})
    assert {m: list(r) for m, r in rows_by_model(other).items()} == {"c": [0, 1]}
    assert {m: list(r) for m, r in rows_by_model(values).items()} == {"b": [0, 2], "a": [1]}
    held = weakref.ref(values)
    del values, at
    gc.collect()
    assert held() is None

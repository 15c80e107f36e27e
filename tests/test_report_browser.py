"""The example report in a real browser (headless Chromium): the index and a dataset × split page render,
every figure is in the DOM, nothing is fetched, the leaderboard fits a 1400 px window (and a wider one says it
scrolls, its rank and model columns staying in view), the all-pairs table pages; and `snakemake --report`
packs the leaderboards, the pages and their figures."""

from __future__ import annotations

import zipfile

import pytest

from _browser import render
from _workflow import make_workdir, snakemake

pytestmark = pytest.mark.workflow

FIGURES_PER_GROUP = 5  # ranks, forest, comparisons, agreement, distributions
GROUPS = ("demo_clinic_findings", "demo_cxr_findings", "demo_cxr_reports")  # the example's dataset × split pages
METAEVAL_FIGURES = 2  # the bundled meta-evaluation sets (RadPref, RadJudge): one agreement plot each, on the index
WIDTH = 1400

# Where every leaderboard (table.board) and its scroll box lie in the window, once laid out.
BOARDS = """Array.prototype.map.call(document.querySelectorAll('table.board'),function(t){
 var box=t.parentNode,r=t.getBoundingClientRect(),cells=t.tHead.rows[0].cells;
 return {right:r.right,scroll:box.scrollWidth,client:box.clientWidth,viewport:document.documentElement.clientWidth,
  hint:!!(box.previousElementSibling&&box.previousElementSibling.className==='scroll-hint'),
  last:cells[cells.length-1].getBoundingClientRect().right,columns:cells.length}})"""


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    workdir = make_workdir(tmp_path_factory.mktemp("example"))
    snakemake(workdir, "results/report/report.html")
    return workdir


def _not_blank(screenshot):
    from PIL import Image

    image = Image.open(screenshot).convert("L")
    assert image.size == (WIDTH, 900)
    histogram = image.histogram()
    dark = sum(histogram[:160]) / (image.size[0] * image.size[1])  # text, table rules, plots
    assert dark > 0.01, f"the screenshot is (nearly) blank: {dark:.4f} of pixels are dark"
    assert len([h for h in histogram if h]) > 20  # more than a flat page


def _fits(boards):
    assert boards
    for b in boards:  # the whole table, its last column included, inside its box and the window: nothing cut
        assert b["scroll"] <= b["client"] and b["right"] <= b["viewport"] and b["last"] <= b["viewport"], b
        assert not b["hint"], b


def test_request_detection_catches_a_page_that_fetches(tmp_path):
    """The net-log check is not vacuous: a page with remote images is caught."""
    page = tmp_path / "fetching.html"
    page.write_text('<html><body><img src="http://127.0.0.1:9/x.png"><img src="https://example.invalid/y.png">'
                    "</body></html>")
    assert render(page, tmp_path / "chromium")["requests"] == ["http://127.0.0.1:9/x.png",
                                                               "https://example.invalid/y.png"]


def test_index_renders_offline_links_every_page_and_its_leaderboards_fit(example, tmp_path):
    result = render(example / "results/report/report.html", tmp_path / "chromium", measure=BOARDS)
    assert result["requests"] == []
    dom = result["dom"]
    assert dom.count("<svg ") == METAEVAL_FIGURES
    assert "Careful-CXR (fictional)" in dom and "Leaderboards at a glance" in dom
    for page in GROUPS:
        assert f'href="{page}.html"' in dom
    _fits(result["measured"])
    assert len(result["measured"]) == len(GROUPS)
    _not_blank(result["screenshot"])


def test_group_page_renders_offline_with_every_figure_and_a_leaderboard_that_fits(example, tmp_path):
    result = render(example / "results/report/demo_cxr_findings.html", tmp_path / "chromium", measure=BOARDS)
    assert result["requests"] == []
    dom = result["dom"]
    assert dom.count("<svg ") == FIGURES_PER_GROUP
    assert "Careful-CXR (fictional)" in dom and "Rank uncertainty" in dom and "Worst and best cases" in dom
    (board,) = result["measured"]
    _fits([board])
    # every column of the leaderboard, ROUGE-L and the counts and coverage included
    # rank, model, tier, P(rank=1), tied; 5 metrics; n, dropped, empty; coverage
    assert board["columns"] == 5 + 5 + 3 + 1
    assert ">Tier</th>" in dom and 'class="tier-even"' in dom  # the second tier shaded as a band
    _not_blank(result["screenshot"])


WIDE = """(function(){var t=document.querySelector('table.board'),box=t.parentNode,name=t.tBodies[0].rows[0].cells[1];
 var before=name.getBoundingClientRect().left;box.scrollLeft=box.scrollWidth;
 var pairs=document.querySelector('table.paged'),pager=pairs.parentNode.nextElementSibling;
 var shown=pairs.tBodies[0].rows.length;pager.querySelectorAll('button')[1].click();
 return {over:box.scrollWidth>box.clientWidth,hint:box.previousElementSibling.className,
  position:getComputedStyle(name).position,moved:name.getBoundingClientRect().left-before,scrolled:box.scrollLeft,
  shown:shown,next:pairs.tBodies[0].rows.length,pager:pager.textContent}})()"""


def test_a_wide_leaderboard_says_it_scrolls_and_keeps_rank_and_model_in_view(tmp_path):
    """The full ReXrank panel on 12 models: wider than the window, so a visible cue, the model column frozen
    while the metrics scroll; the 66 pairs page 50 at a time."""
    from synthetic import write_workflow_outputs

    from radrank import jobs

    panel = ("bleu2", "bleu4", "rouge", "bertscore", "semb", "radgraph", "radcliq", "green")
    layout = write_workflow_outputs(tmp_path / "wide", n_models=12, n_cases=20, metric_names=panel, n_boot=50)
    job = jobs.Report.of_layout(layout, bootstrap={"n": 50, "seed": 0, "level": 0.95}, empty_hypothesis="score",
                                cases=1)
    job.write(layout, [], job.outputs(tmp_path / "out"))
    result = render(tmp_path / "out/synthetic_findings.html", tmp_path / "chromium", measure=WIDE)
    assert result["requests"] == []
    m = result["measured"]
    assert m["over"] and m["hint"] == "scroll-hint" and m["scrolled"] > 0
    assert m["position"] == "sticky" and abs(m["moved"]) < 1  # the model column did not move with the metrics
    assert m["shown"] == 50 and m["next"] == 16 and "rows 51–66 of 66" in m["pager"]


def test_snakemake_report_zip_has_leaderboards_pages_and_figures(example):
    snakemake(example, "--report", "report.zip")
    with zipfile.ZipFile(example / "report.zip") as z:
        names = z.namelist()
    for expected in ("demo_cxr_findings.csv", "demo_clinic_findings.csv", "report.html", "ranks.svg",
                     "forest.svg", "comparisons.svg", "agreement.svg", "distributions.svg",
                     *(f"{page}.html" for page in GROUPS)):
        assert any(n.endswith(expected) for n in names), (expected, names[:50])
    assert sum(n.endswith(".svg") for n in names) >= len(GROUPS) * FIGURES_PER_GROUP

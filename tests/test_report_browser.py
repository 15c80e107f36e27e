"""The example report in a real browser (headless Chromium): it renders, every figure is in the DOM,
nothing is fetched; and `snakemake --report` packs the leaderboards, the page and its figures."""

from __future__ import annotations

import zipfile

import pytest

from _browser import render
from _workflow import make_workdir, snakemake

pytestmark = pytest.mark.workflow

FIGURES_PER_GROUP = 5  # ranks, forest, comparisons, agreement, distributions
GROUPS = 3  # the example: demo_clinic/findings, demo_cxr/findings, demo_cxr/reports
METAEVAL_FIGURES = 2  # the bundled meta-evaluation sets (RadPref, RadJudge): one agreement plot each


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    workdir = make_workdir(tmp_path_factory.mktemp("example"))
    snakemake(workdir, "results/report/report.html")
    return workdir


def test_request_detection_catches_a_page_that_fetches(tmp_path):
    """The net-log check is not vacuous: a page with remote images is caught."""
    page = tmp_path / "fetching.html"
    page.write_text('<html><body><img src="http://127.0.0.1:9/x.png"><img src="https://example.invalid/y.png">'
                    "</body></html>")
    assert render(page, tmp_path / "chromium")["requests"] == ["http://127.0.0.1:9/x.png",
                                                               "https://example.invalid/y.png"]


def test_example_report_renders_offline_with_every_figure(example, tmp_path):
    from PIL import Image

    result = render(example / "results/report/report.html", tmp_path / "chromium")
    assert result["requests"] == []
    dom = result["dom"]
    assert dom.count("<svg ") == GROUPS * FIGURES_PER_GROUP + METAEVAL_FIGURES
    assert "Careful-CXR (fictional)" in dom and "Rank uncertainty" in dom
    image = Image.open(result["screenshot"]).convert("L")
    assert image.size == (1400, 900)
    histogram = image.histogram()
    dark = sum(histogram[:160]) / (image.size[0] * image.size[1])  # text, table rules, plots
    assert dark > 0.01, f"the screenshot is (nearly) blank: {dark:.4f} of pixels are dark"
    assert len([h for h in histogram if h]) > 20  # more than a flat page


def test_snakemake_report_zip_has_leaderboards_page_and_figures(example):
    snakemake(example, "--report", "report.zip")
    with zipfile.ZipFile(example / "report.zip") as z:
        names = z.namelist()
    for expected in ("demo_cxr_findings.csv", "demo_clinic_findings.csv", "report.html", "ranks.svg",
                     "forest.svg", "comparisons.svg", "agreement.svg", "distributions.svg"):
        assert any(n.endswith(expected) for n in names), (expected, names[:50])
    assert sum(n.endswith(".svg") for n in names) >= GROUPS * FIGURES_PER_GROUP

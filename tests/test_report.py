"""The report page from synthetic workflow outputs: content, determinism, offline-ness, drill-down,
judges' explanations, the meta-evaluation slot."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synthetic import write_workflow_outputs  # noqa: E402

from radrank import jobs  # noqa: E402
from radrank.report import load_group, render_report  # noqa: E402
from radrank.report.data import SampleColumn, sample_columns, select_cases  # noqa: E402
from radrank.metrics.crimson import crimson_errors  # noqa: E402
from radrank.report.sections import kendall_matrix  # noqa: E402

METRICS = ("bleu2", "bleu4", "rouge", "radcliq", "green", "crimson")
BOOT = {"n": 200, "seed": 0, "level": 0.95}
FIGURES_PER_GROUP = 5  # ranks, forest, comparisons, agreement, distributions


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    return write_workflow_outputs(root, n_models=5, n_cases=60, splits=("findings", "reports"),
                                  metric_names=METRICS, n_boot=BOOT["n"])


@pytest.fixture(scope="module")
def rendered(layout, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    write_report(layout, out / "report.md", out / "report.html", out / "figures")
    return out


def write_report(layout, markdown, html, figures):
    """The workflow's report job on an explicit layout."""
    job = jobs.Report.of_layout(layout, bootstrap=BOOT, empty_hypothesis="score", cases=3)
    job.write(layout, [], jobs.Files(markdown=markdown, html=html, figures=figures))


def metaeval_table(name="rexval"):
    rows = []
    for metric, label, est in (("radcliq_v1", "RadCliQ-v1", 0.52), ("bleu2", "BLEU", 0.31), ("green", "GREEN", 0.6)):
        for group in ("all", "normal"):
            rows.append({"set": name, "metric": metric, "label": label, "measure": "Kendall tau-b", "group": group,
                         "estimate": est, "ci_lower": est - 0.1, "ci_upper": est + 0.1, "n": 200, "n_ties": 3,
                         "human_ceiling": 0.7, "headline": True})
            rows.append({"set": name, "metric": metric, "label": label, "measure": "Pearson r", "group": group,
                         "estimate": est + 0.05, "ci_lower": est - 0.05, "ci_upper": est + 0.15, "n": 200,
                         "n_ties": 0, "human_ceiling": np.nan, "headline": False})
    return pd.DataFrame(rows)


def test_outputs_and_figure_files(rendered):
    html = (rendered / "report.html").read_text()
    figures = sorted(str(p.relative_to(rendered / "figures")) for p in (rendered / "figures").rglob("*.svg"))
    assert figures == sorted(f"synthetic/{s}/{f}.svg" for s in ("findings", "reports")
                             for f in ("ranks", "forest", "comparisons", "agreement", "distributions"))
    assert html.count("<svg ") == 2 * FIGURES_PER_GROUP
    for name in figures:  # the page inlines exactly the SVG written beside it
        assert (rendered / "figures" / name).read_text() in html


def test_page_is_self_contained_and_offline(rendered):
    html = (rendered / "report.html").read_text()
    assert html.startswith("<!doctype html>")
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    assert not re.search(r"\bsrc\s*=", html, re.I)  # nothing embedded by reference
    assert not re.search(r"""\b(?:href|xlink:href)\s*=\s*["']?(?:https?:)?//""", html, re.I)
    assert "<link" not in html and "@import" not in html and "url(http" not in html
    # every in-page link has a target
    ids = set(re.findall(r'\bid="([^"]+)"', html))
    assert {a for a in re.findall(r'href="#([^"]+)"', html)} <= ids
    assert len(ids) == len(re.findall(r'\bid="([^"]+)"', html))  # no id twice (figures are prefixed)


def test_rerender_is_byte_identical(layout, rendered, tmp_path):
    write_report(layout, tmp_path / "r.md", tmp_path / "r.html", tmp_path / "figures")
    assert (tmp_path / "r.html").read_bytes() == (rendered / "report.html").read_bytes()
    assert (tmp_path / "r.md").read_bytes() == (rendered / "report.md").read_bytes()


def test_content_names_and_corrections(layout, rendered):
    html = (rendered / "report.html").read_text()
    md = (rendered / "report.md").read_text()
    board = pd.read_csv(layout[0]["leaderboard"])
    names = list(board["Model Name"])
    assert "Holm" in html and "Kendall" in html
    assert f"{names[0]} vs {names[1]}" in md and f"{names[0]} vs {names[1]}" in html
    # display names, never ids, where the leaderboard shows names (a name links to its Model URL, which may hold one)
    assert "model_00" not in re.sub(r"\]\(https://example\.org/model_\d+\)", "]", md)
    assert "Ranked by RadCliQ-v1 (radcliq_v1) mean, lower is better" in md
    assert "All 10 pairs with Holm-adjusted p-values" in html
    for column in ("Rank CI", "P(rank=1)", "Tied with"):
        assert f"<th>{column}</th>" in html or f'<th class="t">{column}</th>' in html
    assert "Provenance" in html and "exact paired bootstrap" in html


def test_drill_down_cases_are_each_models_extremes_with_judges(layout, rendered):
    group = load_group(layout[0], cases=3)
    rank_col = group.rank_column()
    assert rank_col.column == "radcliq_v1" and not rank_col.higher_is_better
    html = (rendered / "report.html").read_text()
    for model in group.order:
        values = group.values[group.values["model"] == model].dropna(subset=["radcliq_v1"])
        ordered = values.sort_values(["radcliq_v1", "sample_id"], ascending=[False, True])
        chosen = group.cases[group.cases["model"] == model]
        assert list(chosen[chosen["kind"] == "worst"]["sample_id"]) == list(ordered["sample_id"].iloc[:3])
        assert list(chosen[chosen["kind"] == "best"]["sample_id"]) == list(ordered["sample_id"].iloc[::-1].iloc[:3])
        pairs = pd.read_parquet(layout[0]["models"][model]["pairs"]).set_index("sample_id")
        worst = chosen.iloc[0]
        assert worst["hypothesis"] == pairs.loc[worst["sample_id"], "hypothesis"]
    assert "<b>GREEN</b> matched findings" in html and "judge's analysis" in html
    assert "<b>CRIMSON</b> false findings: pneumothorax (urgent)" in html
    assert "missing findings: left basilar atelectasis (not_actionable)" in html


def test_drop_lists_are_linked_and_listed(layout, rendered):
    html = (rendered / "report.html").read_text()
    link = re.search(r'href="([^"]*model_001\.drops\.csv)"', html).group(1)
    assert link.startswith("../")  # relative to the page's folder, so the folder can be moved as a whole
    assert (rendered / link).resolve() == Path(layout[0]["models"]["model_001"]["drops"]).resolve()
    assert "empty_reference" in html and "scored_as_empty" in html


def test_metaeval_section(layout, tmp_path):
    groups = [load_group(entry, cases=2) for entry in layout]
    _, html, figures = render_report(groups, bootstrap=BOOT, empty_hypothesis="score", cases=2,
                                     metaeval={"rexval": metaeval_table()})
    assert "Can these metrics be trusted?" in html and 'href="#metaeval-rexval"' in html
    assert "metaeval/rexval/agreement.svg" in figures
    svg = figures["metaeval/rexval/agreement.svg"]
    assert "human ceiling" in svg and "RadCliQ-v1" in svg
    assert html.count("<svg ") == 2 * FIGURES_PER_GROUP + 1
    assert '<td class="sig t">RadCliQ-v1</td>' in html  # the rank metric is highlighted in the table
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


def test_kendall_orientation_and_missing_values():
    x = np.array([0.1, 0.4, 0.3, 0.9, np.nan])
    tau = kendall_matrix([x, -x, x[::-1]], [1, -1, 1])
    assert tau[0, 1] == pytest.approx(1.0)  # a lower-is-better copy agrees once oriented
    assert np.isfinite(tau[0, 2])


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

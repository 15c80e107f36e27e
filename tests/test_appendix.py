"""The reporting appendix (radrank.report.appendix): every configured metric with the version and model revision
its score files record, the config's resamples and seed, case counts equal to the pairs, unscored cases counted
from the score files, prompts' digests, hostile texts escaped in HTML and Markdown, and the items a run cannot
answer left for the authors. Expected values are read from the fixture's files, not from the appendix."""

from __future__ import annotations

import hashlib
import re

import pandas as pd
import pytest

from synthetic import write_workflow_outputs  # noqa: E402

from radrank import io, jobs, metrics  # noqa: E402
from radrank.report import appendix, load_group, render_report  # noqa: E402

METRICS = ("bleu2", "rouge", "green", "mrscore_rubric")
BOOT = {"n": 60, "seed": 7, "level": 0.9}
SPLITS = ("findings", "reports")
GREEN_MODEL = {"id": "StanfordAIMI/GREEN-radllama2-7b", "revision": "4f1c9e0aa1d2", "weights_sha256": "e" * 64}
RUBRIC_SHA = "ab" * 32
HOSTILE = "<script>alert(1)</script>"


def _record_models(layout):
    """What the judges' score files record of their models, as the metrics write it (attrs["models"])."""
    from radrank.metrics.mrscore_rubric import PROMPT_VERSION

    for group in layout:
        for model, entry in group["models"].items():
            for metric, models in (("green", {"radeval": "2.2.1", "model": dict(GREEN_MODEL), "device": "cuda:0"}),
                                   ("mrscore_rubric", {"backend": "openai", "model": {"id": "judge-x",
                                                                                     "api": "openai-compatible"},
                                                       "prompt": PROMPT_VERSION, "prompt_sha256": RUBRIC_SHA})):
                path = entry["scores"][metric]
                prov = io.read_provenance(path)
                io.write_parquet(pd.read_parquet(path), path, {**prov, "models": models})


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    root = tmp_path_factory.mktemp("appendix")
    out = write_workflow_outputs(root, n_models=4, n_cases=40, splits=SPLITS, metric_names=METRICS,
                                 n_boot=BOOT["n"], seed=BOOT["seed"], level=BOOT["level"])
    _record_models(out)
    return out


@pytest.fixture(scope="module")
def written(layout, tmp_path_factory):
    """The report job's files, with its appendix."""
    out = tmp_path_factory.mktemp("out")
    job = jobs.Report.of_layout(layout, bootstrap=BOOT, empty_hypothesis="score", cases=1, config_hash="c0ffee")
    job.write(layout, [], job.outputs(out))
    return out


@pytest.fixture(scope="module")
def facts(layout):
    groups = [load_group(entry, cases=1) for entry in layout]
    return appendix.gather([appendix.group_facts(g) for g in groups], bootstrap=BOOT, empty_hypothesis="score")


def _section(md: str, heading: str) -> str:
    return md.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_every_configured_metric_with_its_recorded_version_and_model_revision(layout, facts, written):
    md = (written / "appendix.md").read_text()
    section = _section(md, "Evaluation metrics and their implementation")
    assert sorted(r.metric for r in facts.metrics) == sorted(METRICS)  # one record each: every file alike
    for name in METRICS:
        recorded = io.read_provenance(layout[0]["models"]["model_001"]["scores"][name])
        version = metrics.get(name).identity(metrics.get(name).settings())["version"]
        assert recorded["metric_version"] == version
        (row,) = [line for line in section.splitlines() if line.startswith(f"| {name} |")]
        assert row.startswith(f"| {name} | {version} | ")
        assert row.endswith("| synthetic/findings, synthetic/reports |")
    green = next(line for line in section.splitlines() if line.startswith("| green |"))
    assert f"{GREEN_MODEL['id']} @ {GREEN_MODEL['revision']}" in green
    assert "judge-x (openai-compatible endpoint; no revision recorded)" in section
    assert "| bleu2 | 1 | none (no model weights) | none |" in section
    # the settings that change scores, as the identity records them
    settings = metrics.get("green").identity(metrics.get("green").settings())["settings"]
    assert f"max_new_tokens: {settings['max_new_tokens']}" in green and f"model: {settings['model']}" in green
    html = (written / "report.html").read_text()
    assert f"{GREEN_MODEL['id']} @ {GREEN_MODEL['revision']}" in html
    assert "cuda:0" in _section(md, "Software and hardware")  # the device the judge recorded


def test_resamples_seed_level_and_corrections_come_from_the_config(layout, facts, written):
    md = (written / "appendix.md").read_text()
    stats = _section(md, "Statistical methods and uncertainty")
    assert f"- **Resamples**: {BOOT['n']}\n" in stats and f"- **Seed**: {BOOT['seed']}\n" in stats
    assert "- **Level**: 0.9\n" in stats and "90% percentile bootstrap interval" in stats
    assert "Holm" in stats and "in the statistics files" not in stats  # the files agree with the config
    recorded = io.read_provenance(layout[0]["summary"])
    assert recorded["n_bootstrap"] == BOOT["n"] and recorded["seed"] == BOOT["seed"]
    assert f"- **Method**: {recorded['method']}\n" in stats
    # a config that differs from what the statistics files record says so
    other = appendix.gather([appendix.group_facts(load_group(e, cases=1)) for e in layout],
                            bootstrap={**BOOT, "seed": BOOT["seed"] + 1}, empty_hypothesis="score")
    assert ("Seed in the statistics files", str(BOOT["seed"])) in other.statistics
    html = (written / "report.html").read_text()
    assert f"<td class=\"t\">Seed</td><td class=\"t\">{BOOT['seed']}</td>" in html


def test_case_counts_equal_the_pairs_and_the_drop_lists(layout, facts, written):
    md = (written / "appendix.md").read_text()
    flow = _section(md, "Flow of cases and missing data")
    for entry, data in zip(layout, facts.data):
        assert (data.dataset, data.split) == (entry["dataset"], entry["split"])
        assert data.case_set == len(pd.read_parquet(entry["cases"]))
        board = pd.read_csv(entry["leaderboard"])
        assert [m.model for m in data.models] == list(board["model"])
        for m in data.models:
            files = entry["models"][m.model]
            drops = pd.read_csv(files["drops"])
            n_pairs = len(pd.read_parquet(files["pairs"]))
            dropped = int((drops["action"] == "dropped").sum())
            empty = int((drops["action"] == "scored_as_empty").sum())
            assert (m.pairs, m.dropped, m.scored_as_empty) == (n_pairs, dropped, empty)
            name = board.set_index("model").loc[m.model, "Model Name"]
            assert f"| {entry['dataset']} / {entry['split']} | {name} | {n_pairs} | {dropped} | {empty} | 0 |" in flow
    assert "- **Cases a model has no answer for**: score_as_empty" in flow
    assert "- **Empty answers**: score" in flow


def test_failures_count_the_unscored_cases_of_the_score_files(layout, facts, written):
    expected = {}
    for entry in layout:
        for model, files in entry["models"].items():
            scores = pd.read_parquet(files["scores"]["green"])
            expected[entry["split"], model] = (int(scores["green"].isna().sum()), int(scores["green_unparsed"].sum()),
                                               int((scores["green_attempts"] > 1).sum()))
    got = {(x.split, x.model): (x.unscored, dict(x.counts).get("GREEN unparsed"), dict(x.counts).get("GREEN retried"))
           for x in facts.failures if x.metric == "green"}
    assert got == expected
    assert any(u for u, _, _ in expected.values())  # the fixture has unparsed answers
    md = _section((written / "appendix.md").read_text(), "Failures")
    for (split, model), (unscored, unparsed, retried) in expected.items():
        if unscored:
            board = pd.read_csv(layout[SPLITS.index(split)]["leaderboard"]).set_index("model")
            name, policy = board.loc[model, "Model Name"], board.loc[model, "Failure policy"]
            policy = policy if isinstance(policy, str) and policy else "—"
            assert (f"| synthetic / {split} | green | {name} | 40 | {unscored} | GREEN unparsed {unparsed}; "
                    f"GREEN retried {retried} | {policy} |") in md
    assert "| bleu2 |" not in md  # every case scored


def test_prompts_are_named_and_digested_as_recorded(facts, written):
    from radrank.metrics import mrscore_rubric

    rubric = next(r for r in facts.metrics if r.metric == "mrscore_rubric")
    assert ("prompt", mrscore_rubric.PROMPT_VERSION) in rubric.prompt and ("prompt_sha256", RUBRIC_SHA) in rubric.prompt
    section = _section((written / "appendix.md").read_text(), "Judge prompts")
    assert f"prompt_sha256: {RUBRIC_SHA}" in section
    green = next(line for line in section.splitlines() if line.startswith("| green |"))
    assert "no prompt digest recorded" in green
    template = "Compare {reference} with {hypothesis}. " * 10  # a reward model's template, recorded whole
    assert appendix.prompt_of({"prompt_template": template, "max_length": 512}, {}) == (
        ("prompt_template sha256", hashlib.sha256(template.encode()).hexdigest()),)


def test_the_rubric_digest_is_of_its_prompt_template():
    from radrank.metrics.mrscore_rubric import build_prompt, prompt_sha256

    template = build_prompt("{reference}", "{hypothesis}", None)
    reference, hypothesis = "No acute findings.", "Small left effusion."
    assert template.replace("{reference}", reference).replace("{hypothesis}", hypothesis) == \
        build_prompt(reference, hypothesis, None)
    assert prompt_sha256() == hashlib.sha256(template.encode("utf-8")).hexdigest()


def test_hostile_texts_are_escaped_in_the_index_and_the_markdown(layout, tmp_path):
    groups = [load_group(entry, cases=1) for entry in layout]
    for g in groups:
        g.board.loc[g.board.index[0], "Model Name"] = HOSTILE
        key = next(k for k in g.provenance["scores"] if k[1] == "green")
        g.provenance["scores"][key] = {**g.provenance["scores"][key],
                                       "models": {"model": {"id": "<img src=x onerror=alert(1)>", "revision": "|x]("}}}
    rendered = render_report(groups, bootstrap=BOOT, empty_hypothesis="score", cases=1)
    section = rendered.html.split('<section id="appendix">', 1)[1].split("</section>", 1)[0]
    assert HOSTILE not in section and "<img" not in section
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in section and "&lt;img src=x onerror=alert(1)&gt;" in section
    md = rendered.appendix
    assert "<script" not in md and "<img" not in md and not re.search(r"(?<!\\)\]\(", md)  # no tag, no link
    assert "&lt;script>alert(1)&lt;/script>" in md and "\\|x\\](" in md


def test_markdown_has_each_item_and_leaves_the_rest_for_the_authors(written):
    md = (written / "appendix.md").read_text()
    for topic in ("Data sources, splits and sample size", "Flow of cases and missing data", "Models evaluated",
                  "Evaluation metrics and their implementation", "Judge prompts", "Statistical methods and uncertainty",
                  "Failures", "Software and hardware"):
        section = _section(md, topic)
        assert section.startswith("\nTRIPOD-LLM: ") and "; CLAIM 2024: " in section, topic
    authors = _section(md, "For the authors")
    rows = [line for line in authors.splitlines() if line.startswith("| ") and not line.startswith("| Item |")]
    assert rows and all(line.endswith("| for the authors |") for line in rows)
    for topic in ("Title and abstract", "Reference standard", "De-identification", "Hardware",
                  "How the sample size was chosen"):
        assert any(line.startswith(f"| {topic} |") for line in rows), topic
    assert not any("Statistical methods" in line for line in rows)
    assert "- **Config hash (the settings that decide the numbers)**: c0ffee" in md


def test_the_index_shows_and_links_the_appendix(written):
    html = (written / "report.html").read_text()
    assert html.count('<section id="appendix">') == 1 and '<a href="#appendix">Reporting appendix</a>' in html
    assert '<a href="appendix.md">appendix.md</a>' in html
    for anchor in re.findall(r'href="#(appendix[^"]*)"', html):
        assert f'id="{anchor}"' in html
    assert "appendix.md" in (written / "report.md").read_text()


def test_the_appendix_is_written_beside_the_index_only(layout, tmp_path):
    job = jobs.Report.of_layout(layout, bootstrap=BOOT, empty_hypothesis="score", cases=1)
    wrong = jobs.Files(**{**job.outputs(tmp_path), "appendix": str(tmp_path / "elsewhere.md")})
    with pytest.raises(RuntimeError, match="appendix must be"):
        job.write(layout, [], wrong)

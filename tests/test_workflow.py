"""The workflow end to end on the bundled example: lint, dry-run, a real run whose
leaderboards are checked, byte-identical reruns, and failures that leave no
complete-looking output."""

from __future__ import annotations

import filecmp
import json
import subprocess
import sys

import pandas as pd
import pytest

from _workflow import REPO, make_workdir, snakemake

pytestmark = pytest.mark.workflow


@pytest.fixture(scope="module")
def example_run(tmp_path_factory):
    workdir = make_workdir(tmp_path_factory.mktemp("example"))
    snakemake(workdir)
    return workdir


def test_lint_is_clean():
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--lint"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Congratulations" in proc.stdout + proc.stderr


def test_dry_run_lists_every_stage(tmp_path):
    proc = snakemake(make_workdir(tmp_path), "-n")
    out = proc.stdout + proc.stderr
    # 3 models x (2 JSON splits + 1 CSV split) = 9 ingests; each metric (bleu2, bleu4, rouge) scores each of the 3
    # dataset x split groups and the 2 meta-evaluation sets in one job across their models (15 jobs);
    # the bootstrap job of each dataset x split writes its models' summary files; one cases job per dataset x split
    # checks its submissions' references before any of its pairs is scored.
    for rule, count in [("ingest", 9), ("cases", 3), ("score_bleu2_demo_cxr_findings", 1),
                        ("score_rouge_metaeval_radjudge_metaeval", 1), ("bootstrap", 3), ("leaderboard", 3),
                        ("report", 1), ("metaeval_pairs", 2), ("metaeval_agreement", 2),
                        ("total", 9 + 3 + 15 + 3 + 3 + 1 + 2 + 2 + 1)]:
        assert any(line.split() == [rule, str(count)] for line in out.splitlines()), (rule, out[-2000:])


def test_example_leaderboards(example_run):
    boards = sorted(p.name for p in (example_run / "results/leaderboard").iterdir())
    assert boards == ["demo_clinic_findings.csv", "demo_cxr_findings.csv", "demo_cxr_reports.csv"]
    for name in boards:
        board = pd.read_csv(example_run / "results/leaderboard" / name)
        assert list(board["model"]) == ["careful", "hasty", "template"]  # the example's built-in quality order
        assert list(board["Rank"]) == [1, 2, 3]
        assert board["BLEU"].is_monotonic_decreasing
        assert (board["BLEU CI low"] <= board["BLEU"]).all() and (board["BLEU"] <= board["BLEU CI high"]).all()
        assert board["Ranked by"].str.contains("radcliq_v1 was not computed, so the table is ranked by bleu2").all()
        for col in ["Rank", "Date", "Model Name", "Institution", "Model URL", "BLEU", "BLEU-4", "ROUGE-L",
                    "Coverage", "Rank CI cases", "Flag"]:
            assert col in board.columns
        # the metrics that were run only (leaderboard.columns: rexrank keeps ReXrank's whole set)
        assert not {"BertScore", "SembScore", "RadGraph", "1/RadCliQ-v1", "RaTEScore", "GREEN"} & set(board.columns)
        # every model is scored on the whole case set; coverage is the share it answered: demo_clinic's template
        # CSV lacks one prediction (scored as empty, counted as missing), every other model answers every case
        missing = {"demo_clinic_findings.csv": [0, 0, 1]}.get(name, [0, 0, 0])
        assert list(board["Missing"]) == missing and (board["n"] == board["n"].iloc[0]).all()
        assert list(board["Coverage"]) == [round(1 - k / board["n"].iloc[0], 3) for k in missing]
        assert board["Flag"].isna().all() and (board["Outside set"] == 0).all()
        assert board["Case set"].str.contains("the canonical references").all()
        assert board.loc[0, "Model Name"] == "Careful-CXR (fictional)"
        # three decimals, as ReXrank prints
        assert all(len(str(v).split(".")[-1]) <= 3 for v in board["BLEU"])


def test_example_leaderboard_matches_scores(example_run):
    """Every leaderboard number is the rounded point estimate recomputed from the per-sample files."""
    from radrank.metrics import bleu4

    board = pd.read_csv(example_run / "results/leaderboard/demo_cxr_findings.csv").set_index("model")
    for model in board.index:
        scores = example_run / "results/scores/demo_cxr/findings"
        bleu2 = pd.read_parquet(scores / f"bleu2/{model}.parquet")["bleu2"].mean()
        assert board.loc[model, "BLEU"] == round(bleu2, 3)
        stats = pd.read_parquet(scores / f"bleu4/{model}.parquet")[list(bleu4.STATS)].sum().to_numpy()
        assert board.loc[model, "BLEU-4"] == round(float(bleu4.corpus_bleu(stats)), 3)


def test_example_drop_files_and_summaries(example_run):
    drops = pd.read_csv(example_run / "results/pairs/demo_cxr/findings/hasty.drops.csv")
    assert set(zip(drops["sample_id"], drops["reason"], drops["action"])) == {
        ("demo-0007", "empty_reference", "dropped"),
        ("demo-0011", "empty_hypothesis", "scored_as_empty"),
    }
    clinic = pd.read_csv(example_run / "results/pairs/demo_clinic/findings/template.drops.csv")
    assert list(clinic["reason"]) == ["missing_prediction"] and list(clinic["action"]) == ["scored_as_empty"]

    summary_dir = example_run / "results/summary/demo_cxr/findings/hasty"
    results = pd.read_csv(summary_dir / "results.csv")
    assert list(results.columns[:4]) == ["label", "fold", "seed", "bootstrap"]
    assert list(results["bootstrap"]) == list(range(-1, 200))
    assert (results["label"] == "report").all() and (results["fold"] == -1).all() and (results["seed"] == -1).all()
    assert {"bleu2", "bleu4", "rouge1", "rouge2", "rougeL"} <= set(results.columns)
    summary = pd.read_csv(summary_dir / "results_summary.csv").set_index("metric")
    assert summary.loc["bleu2", "estimate"] == pytest.approx(results.loc[0, "bleu2"])
    assert summary.loc["bleu2", "std"] == pytest.approx(results["bleu2"].iloc[1:].std(ddof=1))
    # a model's generations are its canonical pairs (results/pairs/), not copied into its summary folder
    assert sorted(p.name for p in summary_dir.iterdir()) == ["drops.csv", "results.csv", "results_summary.csv"]
    generations = pd.read_parquet(example_run / "results/pairs/demo_cxr/findings/hasty.parquet")
    assert {"sample_id", "reference", "hypothesis"} <= set(generations.columns)
    assert len(generations) == 47 and "demo-0007" not in set(generations["sample_id"])
    assert generations.set_index("sample_id").loc["demo-0011", "hypothesis"] == ""


def test_example_report(example_run):
    md = (example_run / "results/report/report.md").read_text()
    # display names, as on the leaderboard, never model ids
    assert "## demo_cxr — findings" in md and "Careful-CXR (fictional) vs Hasty-RRG (fictional)" in md
    assert "careful vs hasty" not in md
    html = (example_run / "results/report/report.html").read_text()
    # the index: the leaderboards at a glance and one figure per meta-evaluation set; a page per dataset x split
    assert html.startswith("<!doctype html>") and "<table" in html and html.count("<svg ") == 2
    for page in ("demo_cxr_findings.html", "demo_cxr_reports.html", "demo_clinic_findings.html"):
        assert f'href="{page}"' in html
        text = (example_run / "results/report" / page).read_text()
        assert text.startswith("<!doctype html>") and text.count("<svg ") == 5, page
    log = (example_run / "logs/report.log").read_text()
    assert "Careful-CXR (fictional)" in log


def test_example_report_appendix(example_run):
    """The reporting appendix beside the index: every configured metric with its version, the run's seed and
    resamples, as the run's config (not the appendix) says."""
    import re

    import yaml

    from radrank import metrics

    config = yaml.safe_load((example_run / "config/config.yaml").read_text())
    appendix = (example_run / "results/report/appendix.md").read_text()
    for name in config["metrics"]:
        version = metrics.get(name).identity(metrics.get(name).settings())["version"]
        assert re.search(rf"^\| {name} \| {version} \| none \(no model weights\) \|", appendix, re.M), name
    assert f"- **Resamples**: {config['bootstrap']['n']}\n" in appendix
    assert f"- **Seed**: {config['bootstrap']['seed']}\n" in appendix
    assert "| Careful-CXR (fictional) |" in appendix and "for the authors" in appendix
    html = (example_run / "results/report/report.html").read_text()
    assert '<section id="appendix">' in html and '<a href="appendix.md">' in html


def test_provenance_in_outputs(example_run):
    from radrank.io import read_provenance

    prov = read_provenance(example_run / "results/scores/demo_cxr/findings/rouge/careful.parquet")
    assert prov["metric"] == "rouge" and prov["stage"] == "scores"
    assert prov["environment"]["packages"]["rouge-score"] == "0.1.2"
    assert prov["pairs"]["sources"]["sha256"]
    assert prov["metric_version"] == "1" and prov["settings"] == {} and prov["shard"] is None
    assert "config_hash" not in prov  # a score depends on its metric's own settings, recorded above
    text = json.dumps(prov)
    assert "Nov" not in text and "2026-" not in text  # nothing time-dependent


def test_rerun_is_byte_identical(example_run, tmp_path):
    again = make_workdir(tmp_path)
    snakemake(again)
    first, second = example_run / "results", again / "results"
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert len(files) > 50
    assert sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file()) == files
    differing = [str(f) for f in files if not filecmp.cmp(first / f, second / f, shallow=False)]
    assert differing == []


def test_bad_submission_fails_with_clear_error_and_no_complete_output(tmp_path):
    workdir = make_workdir(tmp_path)
    bad = workdir / "example/demo_cxr/hasty.json"
    data = json.loads(bad.read_text())
    del data["demo-0003"]["model_prediction"]
    bad.write_text(json.dumps(data))
    proc = snakemake(workdir, "--keep-going", check=False)
    assert proc.returncode != 0
    log = (workdir / "logs/ingest/demo_cxr/findings/hasty.log").read_text()
    assert "example/demo_cxr/hasty.json" in log and "demo-0003" in log and "model_prediction" in log
    assert not (workdir / "results/pairs/demo_cxr/findings/hasty.parquet").exists()
    assert not list((workdir / "results/pairs/demo_cxr/findings").glob(".*.part"))
    assert not (workdir / "results/leaderboard/demo_cxr_findings.csv").exists()
    assert not (workdir / "results/report/report.md").exists()
    # the other dataset is unaffected and complete
    assert (workdir / "results/leaderboard/demo_clinic_findings.csv").exists()

"""The snakemake-workflow-catalog's conventions: .snakemake-workflow-catalog.yml (the "standardized usage"
listing), config/README.md, and the test configuration .test/ that CI runs as the catalog's users will:
`snakemake --cores 2 --directory .test` from the checkout."""

from __future__ import annotations

import json
import shutil
import zipfile

import pandas as pd
import pytest
import yaml

from _workflow import REPO, make_workdir, snakemake

TEST_MODELS = ["careful", "hasty", "template"]


def test_catalog_file_declares_the_deployment_the_workflow_supports():
    usage = yaml.safe_load((REPO / ".snakemake-workflow-catalog.yml").read_text())["usage"]
    assert set(usage) == {"mandatory-flags", "software-stack-deployment", "report"}
    # every rule outside Snakemake's own process names a conda env file: --sdm conda works
    assert usage["software-stack-deployment"] == {"conda": True}
    assert usage["report"] is True and (REPO / "report/workflow.rst").is_file()
    assert set(usage["mandatory-flags"]) == {"desc", "flags"} and usage["mandatory-flags"]["desc"].strip()
    # the catalog shows configuration instructions from config/README.md
    assert (REPO / "config/README.md").read_text().startswith("#")


@pytest.mark.workflow
def test_the_catalogs_entry_point_plans_the_same_jobs(tmp_path):
    """workflow/Snakefile (what the catalog's standardized usage and a module import run) is the top-level
    workflow: a dry run through it plans exactly the jobs of a dry run through ./Snakefile, but its target."""
    from _workflow import planned_jobs

    workdir = make_workdir(tmp_path)
    top = planned_jobs(snakemake(workdir, "-n").stdout)
    entry = planned_jobs(snakemake(workdir, "-n", "--snakefile", "workflow/Snakefile").stdout)
    work = sorted(repr(job) for job in top if job[0] != "all")
    assert len(work) > 20 and sorted(repr(job) for job in entry if job[0] != "catalog_all") == work
    assert ("catalog_all", {}) in entry  # its own default target, which asks for what rule all asks for


def test_test_config_is_small_and_self_contained():
    config = yaml.safe_load((REPO / ".test/config/config.yaml").read_text())
    assert set(config["metrics"]) == {"bleu2", "rouge"}  # lexical only: CPU, no weights, seconds
    sheet = pd.read_csv(REPO / ".test/config/submissions.tsv", sep="\t")
    assert list(sheet["model"]) == TEST_MODELS
    for path in sheet["path"]:
        assert (REPO / ".test/config" / path).resolve().is_relative_to(REPO / ".test")
    truth = json.loads((REPO / ".test/data/ground_truth.json").read_text())
    assert len(truth) == 8
    assert sum(p.stat().st_size for p in (REPO / ".test").rglob("*") if p.is_file()) < 50_000


@pytest.mark.workflow
def test_test_config_runs_to_complete_outputs(tmp_path):
    workdir = make_workdir(tmp_path)
    shutil.copytree(REPO / ".test", workdir / ".test")
    run = snakemake(workdir, "--directory", ".test")
    assert "steps (100%) done" in run.stdout + run.stderr
    results = workdir / ".test/results"
    cases = sorted(json.loads((workdir / ".test/data/ground_truth.json").read_text()))

    board = pd.read_csv(results / "leaderboard/tiny_cxr_findings.csv")
    assert sorted(board["model"]) == TEST_MODELS and sorted(board["Rank"]) == [1, 2, 3]
    assert (board["n"] == len(cases)).all() and (board["Missing"] == 0).all()
    assert board[["BLEU", "ROUGE-L"]].notna().all().all()
    for model in TEST_MODELS:
        for metric in ("bleu2", "rouge"):
            scores = pd.read_parquet(results / f"scores/tiny_cxr/findings/{metric}/{model}.parquet")
            assert sorted(scores["sample_id"]) == cases, (model, metric)
        summary = pd.read_csv(results / f"summary/tiny_cxr/findings/{model}/results.csv")
        assert list(summary["bootstrap"]) == list(range(-1, 200))
        # the leaderboard's point estimate is the mean of the model's per-case scores
        mean = pd.read_parquet(results / f"scores/tiny_cxr/findings/bleu2/{model}.parquet")["bleu2"].mean()
        assert board.set_index("model").loc[model, "BLEU"] == round(mean, 3)
    html = (results / "report/report.html").read_text()
    assert html.startswith("<!doctype html>") and 'href="tiny_cxr_findings.html"' in html
    assert (results / "report/report.md").read_text().count("## tiny_cxr — findings") == 1
    # the catalog's `report: true`: Snakemake's own report of the run
    snakemake(workdir, "--directory", ".test", "--report", "report.zip")
    with zipfile.ZipFile(workdir / ".test/report.zip") as archive:
        assert any(name.endswith("report.html") for name in archive.namelist())

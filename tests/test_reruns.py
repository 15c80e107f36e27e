"""What a change reruns: each rule's params hold only what changes its output, so changing the
bootstrap or leaderboard settings re-scores nothing, and adding a model reruns only its own jobs
plus its groups' statistics, leaderboards and the report (checked with Snakemake's dry run)."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import yaml

from _workflow import make_workdir, planned_jobs, snakemake

pytestmark = pytest.mark.workflow


def _planned(workdir):
    """[(rule, wildcards dict)] of every job a dry run plans."""
    return planned_jobs(snakemake(workdir, "-n").stdout)


def _set_config(workdir, **changes):
    path = workdir / "config/config.yaml"
    config = yaml.safe_load(path.read_text())
    for key, value in changes.items():
        config[key] = {**config[key], **value} if isinstance(value, dict) else value
    path.write_text(yaml.safe_dump(config))


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    workdir = make_workdir(tmp_path_factory.mktemp("reruns"))
    snakemake(workdir)
    assert _planned(workdir) == []
    return workdir


def test_bootstrap_settings_rerun_statistics_only(finished):
    original = (finished / "config/config.yaml").read_text()
    try:
        _set_config(finished, bootstrap={"n": 150})
        rules = sorted({rule for rule, _ in _planned(finished)})
        assert rules == ["all", "bootstrap", "leaderboard", "report"]
    finally:
        (finished / "config/config.yaml").write_text(original)


def test_leaderboard_settings_rerun_no_score_or_statistics(finished):
    original = (finished / "config/config.yaml").read_text()
    try:
        _set_config(finished, leaderboard={"decimals": 4})
        rules = {rule for rule, _ in _planned(finished)}
        assert rules and not any(r.startswith("score") or r in ("ingest", "bootstrap") for r in rules), rules
    finally:
        (finished / "config/config.yaml").write_text(original)


def test_an_unrelated_trust_remote_code_id_plans_no_job(finished):
    """The allow-list enters an identity only as whether the job's own model is on it."""
    original = (finished / "config/config.yaml").read_text()
    try:
        _set_config(finished, trust_remote_code=["someone/unrelated-model"])
        assert _planned(finished) == []
    finally:
        (finished / "config/config.yaml").write_text(original)


DEMO_CXR_SCORES = {f"score_{m}_demo_cxr_{s}" for m in ("bleu2", "bleu4", "rouge") for s in ("findings", "reports")}


def test_adding_a_model_reruns_its_jobs_and_its_groups_only(finished):
    """Its ingest jobs, its dataset's scoring jobs (one per metric and split: each scores only the pairs it has
    not scored before), and its dataset's statistics and leaderboards, plus the report."""
    sheet = finished / "config/submissions.tsv"
    original = sheet.read_text()
    shutil.copy(finished / "example/demo_cxr/careful.json", finished / "example/demo_cxr/newcomer.json")
    try:
        sheet.write_text(original + "newcomer\tdemo_cxr\t../example/demo_cxr/newcomer.json\t\t\n")
        jobs = _planned(finished)
        assert {w["model"] for rule, w in jobs if rule == "ingest"} == {"newcomer"}
        assert {rule for rule, _ in jobs if rule.startswith("score")} == DEMO_CXR_SCORES
        groups = {(w["dataset"], w["split"]) for rule, w in jobs if rule in ("bootstrap", "leaderboard")}
        assert groups == {("demo_cxr", "findings"), ("demo_cxr", "reports")}
        assert {(w["dataset"], w["split"]) for rule, w in jobs if rule == "cases"} == groups  # references checked
        assert len(jobs) == 2 + 2 + 6 + 2 + 2 + 2, jobs  # ingest, cases, score, bootstrap, leaderboard, report, all
    finally:
        sheet.write_text(original)
        (finished / "example/demo_cxr/newcomer.json").unlink()


def test_removing_a_metric_rescores_nothing(finished):
    original = (finished / "config/config.yaml").read_text()
    try:
        _set_config(finished, metrics=["bleu2", "bleu4"])
        rules = {rule for rule, _ in _planned(finished)}
        assert rules and not any(r.startswith("score") or r == "ingest" for r in rules), rules
    finally:
        (finished / "config/config.yaml").write_text(original)


def test_adding_a_metric_scores_only_it(tmp_path):
    workdir = make_workdir(tmp_path, metrics=["bleu2", "bleu4"])
    snakemake(workdir)
    _set_config(workdir, metrics=["bleu2", "bleu4", "rouge"])
    scored = {rule for rule, _ in _planned(workdir) if rule.startswith("score")}
    assert scored and all(rule.startswith("score_rouge_") for rule in scored), scored


def test_a_touched_submission_reruns_nothing_an_edited_one_its_chain(finished):
    """Content, not modification time: a submission touched (a copy, a checkout) plans no job; an edited one its
    own ingest jobs, its dataset's scoring jobs, statistics and leaderboards, and the report."""
    path = finished / "example/demo_cxr/hasty.json"
    original = path.read_bytes()
    os.utime(path)  # a newer modification time, the same bytes
    assert _planned(finished) == []
    data = json.loads(original)
    data["demo-0003"]["model_prediction"] = "An edited prediction."
    try:
        path.write_text(json.dumps(data))
        jobs = _planned(finished)
        assert {(rule, w.get("model")) for rule, w in jobs if rule == "ingest"} == {("ingest", "hasty")}
        assert {rule for rule, _ in jobs if rule.startswith("score")} == DEMO_CXR_SCORES
        assert {w["dataset"] for rule, w in jobs if rule in ("bootstrap", "leaderboard")} == {"demo_cxr"}
    finally:
        path.write_bytes(original)

"""What a change reruns: each rule's params hold only what changes its output, so changing the
bootstrap or leaderboard settings re-scores nothing, and adding a model reruns only its own jobs
plus its groups' statistics, leaderboards and the report (checked with Snakemake's dry run)."""

from __future__ import annotations

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


def test_adding_a_model_reruns_its_jobs_and_its_groups_only(finished):
    sheet = finished / "config/submissions.tsv"
    original = sheet.read_text()
    shutil.copy(finished / "example/demo_cxr/careful.json", finished / "example/demo_cxr/newcomer.json")
    try:
        sheet.write_text(original + "newcomer\tdemo_cxr\texample/demo_cxr/newcomer.json\t\t\n")
        jobs = _planned(finished)
        per_model = [(rule, w) for rule, w in jobs if "model" in w]
        assert {w["model"] for _, w in per_model} == {"newcomer"}
        assert sorted(rule for rule, _ in per_model) == ["ingest", "ingest", "score_core_batch", "score_core_batch"]
        groups = {(w["dataset"], w["split"]) for rule, w in jobs if rule in ("bootstrap", "leaderboard")}
        assert groups == {("demo_cxr", "findings"), ("demo_cxr", "reports")}
        assert len(jobs) == 10, jobs  # 2 ingest, 2 score, 2 bootstrap, 2 leaderboard, report, all
    finally:
        sheet.write_text(original)
        (finished / "example/demo_cxr/newcomer.json").unlink()

"""What a change reruns: each rule's params hold only what changes its output, so changing the
bootstrap or leaderboard settings re-scores nothing, and adding a model reruns only its own jobs
plus its groups' statistics, leaderboards and the report (checked with Snakemake's dry run)."""

from __future__ import annotations

import json
import os
import re
import shutil

import pandas as pd
import pytest
import yaml

from _workflow import REPO, make_workdir, planned_jobs, snakemake

pytestmark = pytest.mark.workflow


def _planned(workdir):
    """[(rule, wildcards dict)] of every job a dry run plans."""
    return planned_jobs(snakemake(workdir, "-n").stdout)


def _set_config(workdir, **changes):
    path = workdir / "config/config.yaml"
    config = yaml.safe_load(path.read_text())
    for key, value in changes.items():
        config[key] = {**(config.get(key) or {}), **value} if isinstance(value, dict) else value
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


def test_an_added_model_is_the_only_one_scored_and_summarised_and_the_rerun_is_a_no_op(tmp_path):
    """Run for real: the scoring jobs keep the other models' score files (the same bytes; their log says so), the
    bootstrap job rewrites the new model's summary folder only, and afterwards nothing is planned (the kept files
    are newer than their inputs)."""
    workdir = make_workdir(tmp_path, metrics=["bleu2", "rouge"], metaeval={"sets": []})
    snakemake(workdir)
    group = workdir / "results/scores/demo_cxr/findings"
    kept = {p: p.read_bytes() for p in group.glob("*/*.parquet")}
    summaries = workdir / "results/summary/demo_cxr/findings"
    summary_mtimes = {p: p.stat().st_mtime_ns for p in summaries.glob("*/results.csv")}
    shutil.copy(workdir / "example/demo_cxr/careful.json", workdir / "example/demo_cxr/newcomer.json")
    sheet = workdir / "config/submissions.tsv"
    sheet.write_text(sheet.read_text() + "newcomer\tdemo_cxr\t../example/demo_cxr/newcomer.json\t\t\n")
    snakemake(workdir)
    assert {p: p.read_bytes() for p in kept} == kept
    log = (workdir / "logs/score/demo_cxr/findings/bleu2.log").read_text()
    assert "4 models (3 kept unchanged, 1 scored)" in log, log
    assert (group / "bleu2/newcomer.parquet").is_file()
    assert {p: p.stat().st_mtime_ns for p in summary_mtimes} == summary_mtimes
    assert (summaries / "newcomer/results.csv").is_file()
    # the bootstrap resamples no model it has seen (radrank.stats.bootstrap.ReplicateMemo); the memo is keyed by
    # what the numbers are computed from, not by name: the newcomer's reports are careful's, and so are its numbers
    log = (workdir / "logs/stats/demo_cxr/findings.log").read_text()
    assert "4 models' replicates from the memo, 0 resampled" in log, log
    assert len(list((workdir / "results/stats/demo_cxr/findings/replicate-memo").glob("*.npy"))) == 3
    assert _planned(workdir) == []


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


def test_every_run_keeps_the_score_cache_bounded(finished, tmp_path):
    """score_cache.max_gb is kept at the end of a successful run (the Snakefile's onsuccess), and small packs are
    compacted: the bound holds without anyone running `radrank cache prune`."""
    import numpy as np
    import pandas as pd

    from radrank import score_cache as sc

    original = (finished / "config/config.yaml").read_text()
    root = tmp_path / "shared-cache"
    cache = sc.ScoreCache(root)
    old, busy = cache.namespace({"metric": "old"}), cache.namespace({"metric": "busy"})
    old.store(pd.DataFrame({"digest": [f"{i:032x}" for i in range(2000)], "f1": np.arange(2000.0)}), {})
    for pack in old.dir.glob("pack-*.parquet"):
        os.utime(pack, (1, 1))  # unused for decades: the first to go
    for i in range(sc.COMPACT_MIN_PACKS):
        busy.store(pd.DataFrame({"digest": [f"{i:016x}{j:016x}" for j in range(50)], "f1": [float(i)] * 50}), {})
    keep = sum(p.stat().st_size for p in busy.dir.glob("pack-*.parquet")) + 1000
    try:
        _set_config(finished, leaderboard={"decimals": 5},  # a cheap real run: the leaderboards and the report
                    score_cache={"dir": str(root), "max_gb": keep / 1e9})
        snakemake(finished)
        assert old.packs() == [] and not old.dir.exists()  # least recently used, over the bound: removed
        assert len(busy.packs()) == 1  # compacted: one lookup reads one pack
        assert len(busy.lookup([f"{i:016x}{j:016x}" for i in range(sc.COMPACT_MIN_PACKS) for j in range(50)])) == 400
    finally:
        (finished / "config/config.yaml").write_text(original)


def _report_files(workdir) -> dict:
    """Relative path -> bytes of every file of the report (Snakemake's timestamp marker aside)."""
    root = workdir / "results/report"
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != ".snakemake_timestamp"}


def test_a_worse_resubmission_rebuilds_its_groups_pages_and_the_kept_page_is_what_a_fresh_build_writes(tmp_path):
    """The report keeps a group page only while everything it is built from is unchanged (radrank.report.reuse).
    The leader, careful, resubmits the template's worse reports for demo_cxr: both demo_cxr pages are built again
    (a kept page would still show careful first), demo_clinic's page is kept, and every report file is what a
    run from scratch on the same inputs writes."""
    config = {"metrics": ["bleu2", "rouge"], "metaeval": {"sets": []}}
    workdir = make_workdir(tmp_path / "reused", **config)
    snakemake(workdir)
    before = _report_files(workdir)
    shutil.copy(workdir / "example/demo_cxr/template.json", workdir / "example/demo_cxr/careful.json")
    snakemake(workdir)
    log = (workdir / "logs/report.log").read_text()
    assert "1 of 3 pages kept (their inputs, options and code unchanged): demo_clinic_findings.html" in log, log
    after = _report_files(workdir)
    assert after["demo_clinic_findings.html"] == before["demo_clinic_findings.html"]
    assert after["demo_cxr_findings.html"] != before["demo_cxr_findings.html"]
    # the bootstrap's memo serves careful the numbers of what it now submitted (the template's reports, whose
    # numbers it holds), not those of its better submission: every statistic equals the fresh run's (below)
    log = (workdir / "logs/stats/demo_cxr/findings.log").read_text()
    assert "3 models' replicates from the memo, 0 resampled" in log, log
    fresh = make_workdir(tmp_path / "fresh", **config)
    shutil.copy(fresh / "example/demo_cxr/template.json", fresh / "example/demo_cxr/careful.json")
    snakemake(fresh)
    assert _report_files(fresh) == after
    for name in ("replicates", "summary", "comparisons", "rank_replicates"):
        for split in ("findings", "reports"):
            path = f"results/stats/demo_cxr/{split}/{name}.parquet"
            assert pd.read_parquet(workdir / path).equals(pd.read_parquet(fresh / path)), path
    assert _planned(workdir) == []  # the kept page is newer than its inputs

    # A score file rewritten with other bytes and its date set back: Snakemake sees no change, but a report run
    # for another reason (here forced) must not keep the page built from the old bytes.
    score = workdir / "results/scores/demo_clinic/findings/bleu2/careful.parquet"
    stat = score.stat()
    shutil.copy(workdir / "results/scores/demo_clinic/findings/bleu2/template.parquet", score)
    os.utime(score, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    snakemake(workdir, "--forcerun", "report")
    log = (workdir / "logs/report.log").read_text()
    assert "2 of 3 pages kept" in log and "demo_clinic_findings.html" not in log.split("pages kept")[1].split("\n")[0]
    rebuilt = _report_files(workdir)
    assert rebuilt["demo_clinic_findings.html"] != after["demo_clinic_findings.html"]
    (workdir / "results/report/figures/.content-keys.json").unlink()  # nothing kept: every page built again
    snakemake(workdir, "--forcerun", "report")
    assert "pages kept" not in (workdir / "logs/report.log").read_text()
    assert _report_files(workdir) == rebuilt


def test_scoring_jobs_wait_least_and_the_longest_first(tmp_path):
    """Where jobs wait for cores, every scoring job goes before any bootstrap (which would leave the last group's
    bootstrap, then the report, alone on one core at the end), the metric that takes longest first; the local
    profile's greedy scheduler orders by these priorities."""
    priorities = {}
    for block in re.split(r"\n(?=rule \w+:)", snakemake(make_workdir(tmp_path), "-n").stdout):
        head = re.match(r"rule (\w+):", block.strip())
        if head:
            found = re.search(r"^\s+priority: (\d+)$", block, re.M)
            priorities.setdefault(head.group(1), int(found.group(1)) if found else 0)
    scoring = {rule: p for rule, p in priorities.items() if rule.startswith("score_")}
    others = {rule: p for rule, p in priorities.items() if not rule.startswith("score_")}
    assert {"bootstrap", "report", "ingest"} <= set(others) and scoring
    assert min(scoring.values()) > max(others.values())
    by_metric = {rule.split("_")[1]: p for rule, p in scoring.items()}
    assert by_metric["rouge"] > by_metric["bleu2"] and by_metric["rouge"] > by_metric["bleu4"]
    assert yaml.safe_load((REPO / "profiles/default/config.yaml").read_text())["scheduler"] == "greedy"

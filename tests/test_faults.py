"""Faults: a run killed with SIGKILL at three points and rerun gives byte-identical
outputs; a failed shard is the only scoring job redone."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _workflow import make_workdir, result_files, snakemake

pytestmark = pytest.mark.workflow

FAULT_CONFIG = {"splits": ["findings"]}  # 6 submissions: enough stages to kill, quick to rerun


@pytest.fixture(scope="module")
def reference_results(tmp_path_factory):
    workdir = make_workdir(tmp_path_factory.mktemp("uninterrupted"), **FAULT_CONFIG)
    snakemake(workdir)
    return result_files(workdir)


def _kill_when(workdir: Path, ready) -> bool:
    """Start the workflow, SIGKILL its whole process group once ``ready()`` holds; True if it was killed."""
    proc = subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "2"], cwd=workdir,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        if ready():
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return True
        time.sleep(0.02)
    proc.wait()
    return False


def _count(workdir: Path, pattern: str) -> int:
    return len(list((workdir / "results").glob(pattern))) if (workdir / "results").exists() else 0


@pytest.mark.parametrize(
    "point",
    [
        "after the first pairs",
        "in the middle of scoring",
        "after statistics, before the report",
    ],
)
def test_sigkill_then_rerun_is_byte_identical(tmp_path, reference_results, point):
    workdir = make_workdir(tmp_path, **FAULT_CONFIG)
    ready = {
        "after the first pairs": lambda: _count(workdir, "pairs/*/*/*.parquet") >= 1,
        "in the middle of scoring": lambda: _count(workdir, "scores/*/*/*/*.parquet") >= 8,
        "after statistics, before the report": lambda: _count(workdir, "stats/*/*/summary.parquet") >= 1,
    }[point]
    assert _kill_when(workdir, ready), "the run finished before it could be killed"
    assert not (workdir / "results/report/report.md").exists()
    snakemake(workdir, "--unlock")
    snakemake(workdir)  # profiles/default sets rerun-incomplete
    assert result_files(workdir) == reference_results
    leftovers = [p for p in (workdir / "results").rglob("*.part")]
    assert leftovers == []


def test_failed_shard_is_the_only_scoring_job_redone(tmp_path):
    workdir = make_workdir(tmp_path, shards={"rouge": 3})
    snakemake(workdir)
    group = workdir / "results/scores/demo_cxr/findings"
    merged = [group / "rouge" / f"{model}.parquet" for model in ("careful", "hasty", "template")]
    lost = group / ".shards/rouge/1-of-3.parquet"
    before = [p.read_bytes() for p in merged]
    # As after a failed shard job: that shard and everything downstream of it are missing (the metric's folder of
    # score files, the collect job's output, included).
    results = workdir / "results"
    downstream = [lost, group / "rouge", *results.glob("stats/demo_cxr/findings/*"),
                  *results.glob("summary/demo_cxr/findings/*/*"), results / "leaderboard/demo_cxr_findings.csv",
                  *results.glob("report/*")]
    for path in downstream:
        shutil.rmtree(path) if path.is_dir() else path.unlink()  # report/figures is a directory output
    plan = snakemake(workdir, "-n").stdout
    counts = {line.split()[0]: int(line.split()[1]) for line in plan.splitlines()
              if len(line.split()) == 2 and line.split()[1].isdigit()}
    assert counts["score_rouge_demo_cxr_findings_shard"] == 1  # the lost shard only
    assert counts["score_rouge_demo_cxr_findings_collect"] == 1
    scored = {rule for rule in counts if rule.startswith("score")}
    assert scored == {"score_rouge_demo_cxr_findings_shard", "score_rouge_demo_cxr_findings_collect"}
    assert "ingest" not in counts  # and bleu2, bleu4 and the other groups are not redone
    assert counts["bootstrap"] == 1 and counts["leaderboard"] == 1
    snakemake(workdir)
    assert [p.read_bytes() for p in merged] == before


def test_two_work_directories_run_at_once_without_touching_each_other(tmp_path, reference_results):
    """Two runs at the same time, in two work directories: each completes with its own,
    complete outputs (nothing is shared but the read-only checkout files each copy holds)."""
    dirs = [make_workdir(tmp_path / name, **FAULT_CONFIG) for name in ("a", "b")]
    procs = [subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "1"], cwd=d,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for d in dirs]
    for proc in procs:
        _, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, err[-3000:]
    for d in dirs:
        assert result_files(d) == reference_results

"""benchmarks/device_bertscore.py and device_group.py run here on the CPU at their tiny sizes (tests/envs/
device_benchmark.py): the numbers they exist for are there, and radrank's values agree with the library's and the
grouped job's with the per-submission jobs'."""

from __future__ import annotations

from device_benchmark import run_device_benchmark


def test_device_bertscore_runs_and_agrees_with_the_library(tmp_path):
    result = run_device_benchmark("device_bertscore.py", tmp_path, "--n", "40", "--dtypes", "fp32")
    assert result["device"] == "cpu" and result["n_pairs"] == 40
    assert {run["metric"] for run in result["runs"]} >= {"bertscore", "semb"}
    assert all(run["pairs"] == 40 and run["pairs_per_s"] > 0 for run in result["runs"])
    assert result["library"]["max_abs_diff_vs_radrank"] < 1e-5


def test_device_group_runs_and_the_grouped_job_agrees_with_per_submission_jobs(tmp_path):
    result = run_device_benchmark("device_group.py", tmp_path, "--tiny", json_flag="--out")
    for metric in ("bertscore", "semb", "chexbert"):
        part = result["parts"][metric]
        assert part["group"]["loads"] == 1  # one model load for the whole group
        assert part["agreement"]["rows_differing"] == 0 and part["agreement"]["rows"] == part["rows"]
        assert part["add_model"]["counts"]["cached"] == part["distinct"]  # a new model pays for its own pairs only

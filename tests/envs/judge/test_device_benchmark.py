"""benchmarks/device_judge.py runs here on the CPU at its tiny size (tests/envs/device_benchmark.py): every part it
measures on the GPU (GREEN's eager and engine generation, the reward model, CRIMSON's engine) has its numbers."""

from __future__ import annotations

from device_benchmark import run_device_benchmark


def test_device_judge_runs_every_part(tmp_path):
    result = run_device_benchmark("device_judge.py", tmp_path, "--tiny")
    parts = result["parts"]
    assert set(parts) == {"green", "reward", "crimson"}
    assert parts["green"]["eager"] and parts["green"]["engine"]
    assert parts["reward"]["pairs_per_s"] > 0 and parts["crimson"]["pairs_per_s"] > 0

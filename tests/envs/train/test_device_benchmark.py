"""benchmarks/device_mrscore_train.py runs here on the CPU at its tiny size (tests/envs/device_benchmark.py): the
LoRA reward model is built with the expected trainable parameters, trains its timed steps and scores pairs."""

from __future__ import annotations

from device_benchmark import run_device_benchmark


def test_device_mrscore_train_builds_trains_and_scores(tmp_path):
    result = run_device_benchmark("device_mrscore_train.py", tmp_path, "--tiny")
    parts = result["parts"]
    assert parts["build"]["trainable_parameters"] == parts["build"]["expected_trainable_parameters"] > 0
    assert parts["train"]["timed_steps"] > 0 and parts["train"]["pairs_per_s"] > 0
    assert parts["reward"]["pairs"] > 0 and parts["reward"]["pairs_per_s"] > 0

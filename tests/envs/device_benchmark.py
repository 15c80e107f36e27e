"""Runs a device benchmark (benchmarks/device_*.py) in this family's environment on the CPU, at its tiny size (the
same code paths as on the GPU, with tiny random models): a script the GPU machine is lent for must not first fail
there. Returns the JSON it writes; no timing is asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_device_benchmark(script: str, tmp_path: Path, *args: str, json_flag: str | None = "--json") -> dict:
    out = tmp_path / "out"
    out.mkdir()
    written = out / f"{Path(script).stem}.json"
    command = [sys.executable, str(ROOT / "benchmarks" / script), "--device", "cpu", *args]
    if json_flag:
        command += [json_flag, str(written)]
    env = {**os.environ, "OUT": str(out), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    run = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert run.returncode == 0, f"{script}:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    assert written.is_file(), f"{script} wrote no {written.name}:\n{run.stdout[-3000:]}"
    return json.loads(written.read_text())

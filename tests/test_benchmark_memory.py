"""benchmarks/memory.py runs the scoring and bootstrap jobs as they are now (its bootstrap part once built inputs the
job no longer took, and failed): run at a tiny size, every measurement it prints is there."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_memory_benchmark_measures_every_job_it_names():
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks/memory.py"), "--pairs", "300", "--cases", "60",
                          "--models", "3", "6", "--n-boot", "20"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    for metric in ("bleu2", "bleu4", "rouge"):
        assert re.search(rf"{metric}\s+in chunks of [\d,]+ pairs\s+peak\s+\d+ MB", run.stdout), run.stdout
    for models in (3, 6):
        assert re.search(rf"\b{models} models: peak\s+\d+ MB", run.stdout), run.stdout
    assert "growth:" in run.stdout

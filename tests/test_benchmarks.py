"""Every benchmark script of the core environment runs as the code is now, at a tiny size, and prints the
measurement it exists for: a benchmark is evidence for a goal in docs/benchmarks.md, and one that no longer runs
(benchmarks/memory.py's bootstrap part once failed for months unseen) is evidence of nothing. The sizes say nothing
about speed; no timing is asserted. (benchmarks/memory.py: tests/test_benchmark_memory.py. The device scripts run
on the CPU in their families' environments: tests/envs/<family>/test_device_benchmark*.py. benchmarks/arrow_pool.py
and cache_filter.py have no size to make small, and envs.py builds environments.)"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

NUMBER = r"[\d.,]+"
# script, its tiny arguments, lines its output must have (each a regex, searched line by line)
SMOKE = [
    ("lexical.py", ["--n", "200", "--models", "2"],
     [rf"^numbers agree: corpus BLEU-4 {NUMBER} \(library {NUMBER}\)",
      rf"^panel: radrank {NUMBER} s, libraries {NUMBER} s for 200 pairs"]),
    ("lexical_cache.py", ["--pairs", "200", "--others", "0", "1000"],
     [rf"^{m}\s+200 pairs,\s+1,000 other entries: scoring\s+{NUMBER} s, digests \+ cold lookup\s+{NUMBER} s: x{NUMBER}$"
      for m in ("bleu2", "bleu4", "rouge")]),
    ("bootstrap.py", ["--n-boot", "20", "--cases", "50", "--models", "3", "--sample", "2", "--lib-sample", "1"],
     [rf"^metric evaluations: recompute / exact = {NUMBER} / {NUMBER} = {NUMBER}x fewer",
      rf"^exactness on the sampled resamples: max \|exact - recompute\| = \S+ \(radrank metrics\), \S+ \(reference "
      rf"libraries\)"]),
    ("score_cache.py", ["--entries", "2000", "--judge-entries", "1000", "--pack-rows", "1000", "--lookup", "500"],
     [rf"^\s+lookup\s+500 digests \({NUMBER} found\): cold {NUMBER} s", rf"^\s+compact {NUMBER} packs -> 1"]),
    ("ingest.py", ["--repeat", "1"], [rf"-> {NUMBER} characters: parser x{NUMBER}, ingest x{NUMBER} \(linear: x4\)"]),
    ("report.py", ["--models", "3", "--pairs", "50", "--n-boot", "20", "--repeat", "1"],
     [rf"^report job \(fresh process, 2 cores\): best {NUMBER} s wall, {NUMBER} s CPU",
      rf"^targets: time {NUMBER} s / 10 s = {NUMBER}; size {NUMBER} MB / 5 MB"]),
    ("report_scale.py", ["--models", "3", "--datasets", "1", "--pairs", "30", "--skip-old"],
     [rf"^\s+new, 2 processes\s+{NUMBER} s wall\s+{NUMBER} s CPU", rf"^\s+targets: wall {NUMBER} s / 60 s"]),
    ("collector.py", ["--pairs", "500", "--models", "2", "--repeats", "1"],
     [rf"^{m}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}$" for m in ("bleu2", "bleu4", "rouge")]),
    ("dag.py", ["--models", "3", "--datasets", "1", "--repeats", "1"],
     [rf"^CPU seconds:\s+median {NUMBER}", rf"^cluster jobs after the SLURM profile's grouping: {NUMBER}"]),
    ("cache_bound.py", ["--runs", "2", "--new", "2", "--cases", "20"],
     [rf"^after 2 runs, bounded / unbounded: size x{NUMBER}, packs {NUMBER} / {NUMBER}, cold lookup x{NUMBER}"]),
    ("noop_rerun.py", ["--models", "2", "--cases", "20", "--repeat", "1"],
     [rf"^\s+this checkout\s+{NUMBER} CPU-s", rf"goal <= 2 s: (met|NOT met)"]),
    ("add_model.py", ["--models", "2", "--cases", "20", "--full-repeats", "2"],
     [rf"^\s+add one model = {NUMBER} % of the full run's CPU", rf"^\s+floor: the no-op rerun's {NUMBER} s CPU",
      rf"^this checkout: 2 full runs of 2 models, each from scratch: CPU {NUMBER}, {NUMBER} s"]),
    ("teardown.py", ["--repeat", "1"],
     [r"^Snakemake's process \(", rf"^\s+ratio: wall x{NUMBER}, CPU x{NUMBER} \(-?{NUMBER} CPU-s less per process\)"]),
    ("score_files.py", ["--models", "2", "--cases", "50", "--repeats", "1"],
     [r"the score files' codec: lz4$", rf"^\s+lz4\s+{NUMBER} kB a file\s+read\s+{NUMBER} ms\s+write\s+{NUMBER} ms"]),
    ("overhead.py", ["--models", "3", "--cases", "20"],
     [rf"^wall --cores 1 / --cores 2: {NUMBER}", rf"^work, replayed in one process: {NUMBER} s CPU"]),
]


@pytest.mark.parametrize("script, args, lines", SMOKE, ids=[s for s, _, _ in SMOKE])
def test_the_benchmark_runs_and_prints_its_measurement(script, args, lines):
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], capture_output=True, text=True,
                         timeout=600, cwd=ROOT)
    assert run.returncode == 0, f"{script}:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    for line in lines:
        assert re.search(line, run.stdout, re.M), f"{script}: no line matching {line!r} in:\n{run.stdout[-3000:]}"


def test_every_benchmark_is_smoke_tested_or_said_why_not():
    """A new benchmark script joins SMOKE (or the docstring's list of those that cannot); a new device script gets a
    test in its family's folder."""
    covered = {s for s, _, _ in SMOKE} | {"memory.py", "arrow_pool.py", "cache_filter.py", "envs.py"}
    scripts = {p.name for p in (ROOT / "benchmarks").glob("*.py") if not p.name.startswith(("_", "device_"))}
    assert scripts <= covered, f"benchmarks without a smoke test: {sorted(scripts - covered)}"
    family_tests = "".join(p.read_text() for p in (ROOT / "tests" / "envs").glob("*/test_device_benchmark*.py"))
    devices = {p.name for p in (ROOT / "benchmarks").glob("device_*.py")}
    untested = sorted(d for d in devices if f'"{d}"' not in family_tests)
    assert not untested, f"device benchmarks no family test runs: {untested}"

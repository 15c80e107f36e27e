"""A no-op rerun (nothing changed, no job runs): its CPU and wall time, against another revision in the same run.

A copy of the workflow per revision gets ``--models`` synthetic ReXrank JSON submissions of ``--cases`` cases (one
dataset, both splits; lexical panel bleu2 bleu4 rouge, meta-evaluation off, one score cache per copy), is run once
in full, then rerun ``--repeat`` times with nothing changed, the revisions taking turns (so that a busy machine
slows both alike). Per rerun: CPU (snakemake and everything it started: getrusage of the waited-for child) and
wall. Printed per revision: the median and the spread, and the ratio of the medians. Goal: at most 2 s.

Also measured, for this checkout: the same rerun with no bytecode for the interpreter's packages (as from a venv
installed without it, where bytecode is not written: PYTHONDONTWRITEBYTECODE, a read-only shared venv; simulated
with PYTHONPYCACHEPREFIX pointing at an empty folder), and the floor no Snakefile can go under: a process that
only imports Snakemake's command line and its executor plugins.

    python benchmarks/noop_rerun.py [--models 20] [--cases 590] [--repeat 5] [--against REV]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _workdir  # noqa: E402

GOAL_S = 2.0
SNAKEMAKE_IMPORT = ("import snakemake.cli, snakemake.api; "
                    "from snakemake_interface_executor_plugins.registry import ExecutorPluginRegistry; "
                    "ExecutorPluginRegistry()")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(cmd: list, cwd: Path, env: dict) -> tuple[float, float, str]:
    """(wall s, CPU s, output) of ``cmd``; exits with its output if it fails."""
    before, start = children_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    wall, cpu = time.perf_counter() - start, children_cpu() - before
    if proc.returncode != 0:
        sys.exit(proc.stdout[-3000:] + proc.stderr[-3000:])
    return wall, cpu, proc.stdout + proc.stderr


# bytecode is written by the full run, as in any checkout after its first run (the other benchmarks do the same)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def snakemake(work: Path, **env) -> tuple[float, float, str]:
    return timed([sys.executable, "-m", "snakemake", "--cores", "2", "all"], work,
                 {**ENV, "RADRANK_SCORE_CACHE": str(work / "score-cache"), **env})


def prepare(tmp: str, repo: Path, models: int, cases: int) -> Path:
    """A copy of ``repo``'s workflow, run once in full."""
    work = _workdir.make(Path(tmp), models=models, datasets=1, cases=cases, metrics=["bleu2", "bleu4", "rouge"],
                         repo=repo)
    config_path = work / "config/config.yaml"
    config_path.write_text(yaml.safe_dump({**yaml.safe_load(config_path.read_text()), "metaeval": {"sets": []}}))
    snakemake(work)
    return work


def noop(work: Path, **env) -> tuple[float, float]:
    wall, cpu, out = snakemake(work, **env)
    if "Nothing to be done" not in out:
        sys.exit(f"{work}: the rerun ran jobs:\n{out[-3000:]}")
    return wall, cpu


def summary(runs: list) -> str:
    walls, cpus = [r[0] for r in runs], [r[1] for r in runs]
    return (f"{statistics.median(cpus):5.2f} CPU-s (range {min(cpus):.2f}-{max(cpus):.2f}), "
            f"{statistics.median(walls):5.2f} s wall (range {min(walls):.2f}-{max(walls):.2f})")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", type=int, default=20)
    p.add_argument("--cases", type=int, default=590)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--against", help="a git revision measured in turn with this checkout, as the reference")
    args = p.parse_args()
    with ExitStack() as stack:
        revisions = {"this checkout": _workdir.REPO}
        if args.against:
            revisions = {args.against: stack.enter_context(_workdir.revision(args.against)), **revisions}
        works = {label: prepare(stack.enter_context(tempfile.TemporaryDirectory()), repo, args.models, args.cases)
                 for label, repo in revisions.items()}
        no_bytecode = stack.enter_context(tempfile.TemporaryDirectory())  # stays empty: nothing is written there
        runs = {label: [] for label in [*works, "this checkout, no bytecode", "import Snakemake only"]}
        for _ in range(args.repeat):
            for label, work in works.items():
                runs[label].append(noop(work))
            runs["this checkout, no bytecode"].append(
                noop(works["this checkout"], PYTHONPYCACHEPREFIX=no_bytecode, PYTHONDONTWRITEBYTECODE="1"))
            runs["import Snakemake only"].append(timed([sys.executable, "-c", SNAKEMAKE_IMPORT],
                                                       works["this checkout"], ENV)[:2])
    print(f"no-op rerun, {args.models} models x {args.cases} cases (1 dataset x 2 splits, lexical panel), "
          f"median of {args.repeat}, load average {os.getloadavg()[0]:.1f}:")
    for label, measured in runs.items():
        print(f"  {label:28s} {summary(measured)}")
    this = statistics.median(r[1] for r in runs["this checkout"])
    if args.against:
        ref = statistics.median(r[1] for r in runs[args.against])
        print(f"  ratio this / {args.against}: CPU x{this / ref:.2f}")
    bare = statistics.median(r[1] for r in runs["this checkout, no bytecode"])
    print(f"  bytecode: x{bare / this:.2f} the CPU without it; goal <= {GOAL_S:.0f} s: "
          f"{'met' if this <= GOAL_S else 'NOT met'} ({this:.2f} CPU-s, of which importing Snakemake "
          f"{statistics.median(r[1] for r in runs['import Snakemake only']):.2f})", flush=True)


if __name__ == "__main__":
    main()

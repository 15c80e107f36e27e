"""What a new submission costs: the CPU of the run that adds one model to a leaderboard of N, against the run
that built the N from scratch, and a no-op rerun's wall time.

For each N (``--models``, default 20 and 100) a copy of the workflow gets N + 1 synthetic ReXrank JSON submissions
of ``--cases`` cases (IU-Xray's 590; one dataset, both splits; lexical panel bleu2 bleu4 rouge, meta-evaluation
off, one score cache per copy). Three runs, ``--cores 2``:
1. the sheet without the last model, from scratch (the full run);
2. the last model added to the sheet (the new submission);
3. nothing changed (a no-op rerun: its wall time).
Printed per run: wall and CPU (snakemake and everything it started: getrusage of the waited-for child), the
jobs by rule, and the scoring jobs' own account of their pairs (scored, from the cache). Goal: run 2 costs at
most 15 % of run 1's CPU at 20 models, 5 % at 100; run 3 at most 2 s. Run 3's CPU share of run 1 is printed as the
floor: what run 2 costs before any job starts.
With --against REV the same three runs are made first for that git revision (the reference in the same run).
Bytecode is written by the first run, as in any checkout after its first run; --without-bytecode makes the three
runs once more with none for the interpreter's packages either (as from a venv installed without it where none is
written: PYTHONDONTWRITEBYTECODE, a read-only shared venv; simulated with PYTHONPYCACHEPREFIX pointing at an empty
folder), so that every process compiles what it imports.

    python benchmarks/add_model.py [--models 20 100] [--cases 590] [--against REV] [--without-bytecode]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _workdir  # noqa: E402

GOALS = {20: 0.15, 100: 0.05}
NOOP_GOAL_S = 2.0


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(work: Path, env: dict) -> tuple:
    """(wall s, CPU s, jobs by rule, the scoring jobs' pair lines) of one ``snakemake --cores 2`` in ``work``."""
    before, start = children_cpu(), time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "all"], cwd=work, capture_output=True,
                          text=True, env={**env, "RADRANK_SCORE_CACHE": str(work / "score-cache")})
    wall, cpu = time.perf_counter() - start, children_cpu() - before
    if proc.returncode != 0:
        sys.exit(proc.stdout[-3000:] + proc.stderr[-3000:])
    out = proc.stdout + proc.stderr
    jobs = Counter(re.findall(r"^(?:local)?rule (\w+):", out, re.M))
    pairs = []
    for log in sorted((work / "logs/score").rglob("*.log")):
        pairs += [line.split("] ", 1)[-1] for line in log.read_text().splitlines() if " distinct" in line]
    return wall, cpu, jobs, pairs


def measure(label: str, repo: Path, models: int, cases: int, env: dict) -> dict:
    tmp = tempfile.TemporaryDirectory()
    work = _workdir.make(Path(tmp.name), models=models + 1, datasets=1, cases=cases,
                         metrics=["bleu2", "bleu4", "rouge"], repo=repo)
    config_path = work / "config/config.yaml"
    config_path.write_text(yaml.safe_dump({**yaml.safe_load(config_path.read_text()), "metaeval": {"sets": []}}))
    sheet = work / "config/submissions.tsv"
    rows = sheet.read_text().splitlines()
    sheet.write_text("\n".join(rows[:-1]) + "\n")  # the N models
    full = run(work, env)
    sheet.write_text("\n".join(rows) + "\n")  # + the new one
    added = run(work, env)
    noop = run(work, env)
    tmp.cleanup()
    share = added[1] / full[1]
    print(f"{label}, {models} models x {cases} cases (1 dataset x 2 splits, lexical panel):")
    for name, (wall, cpu, jobs, _) in (("full run", full), ("add one model", added), ("no-op rerun", noop)):
        print(f"  {name:14s} {wall:6.1f} s wall {cpu:7.1f} s CPU  {sum(jobs.values()):4d} jobs "
              f"({', '.join(f'{k} {v}' for k, v in sorted(jobs.items()))})")
    for line in added[3][:6]:
        print(f"    add-one scoring: {line}")
    goal = GOALS.get(models)
    print(f"  add one model = {100 * share:.1f} % of the full run's CPU"
          + (f" (goal <= {100 * goal:.0f} %: {'met' if share <= goal else 'NOT met'})" if goal else "")
          + f"; no-op rerun {noop[0]:.1f} s (goal <= {NOOP_GOAL_S:.0f} s: "
            f"{'met' if noop[0] <= NOOP_GOAL_S else 'NOT met'})", flush=True)
    # a run that adds a model does everything a no-op rerun does (Snakemake's start, the Snakefile, the DAG,
    # every output's date) before its first job: the no-op's share is the floor no job-side change goes below
    print(f"  floor: the no-op rerun's {noop[1]:.1f} s CPU = {100 * noop[1] / full[1]:.1f} % of the full run's; "
          f"the jobs and their bookkeeping add {100 * (added[1] - noop[1]) / full[1]:.1f} %", flush=True)
    return {"share": share, "noop": noop[0], "full_cpu": full[1], "added_cpu": added[1]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", type=int, nargs="+", default=[20, 100])
    p.add_argument("--cases", type=int, default=590)
    p.add_argument("--against", help="a git revision measured first, as the reference")
    p.add_argument("--without-bytecode", action="store_true",
                   help="also measure this checkout with no bytecode for any module")
    args = p.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for n in args.models:
        ref = None
        if args.against:
            with _workdir.revision(args.against) as repo:
                ref = measure(f"{args.against}", repo, n, args.cases, env)
        this = measure("this checkout", _workdir.REPO, n, args.cases, env)
        if args.without_bytecode:
            with tempfile.TemporaryDirectory() as empty:  # stays empty: nothing is written there
                bare = measure("this checkout, no bytecode", _workdir.REPO, n, args.cases,
                               {**env, "PYTHONPYCACHEPREFIX": empty, "PYTHONDONTWRITEBYTECODE": "1"})
            print(f"  no bytecode / bytecode: full run CPU x{bare['full_cpu'] / this['full_cpu']:.2f}, add-one CPU "
                  f"x{bare['added_cpu'] / this['added_cpu']:.2f}, share {100 * bare['share']:.1f} % -> "
                  f"{100 * this['share']:.1f} %, no-op {bare['noop']:.1f} -> {this['noop']:.1f} s", flush=True)
        if ref:
            print(f"  ratio this / {args.against}: add-one CPU x{this['added_cpu'] / ref['added_cpu']:.2f}, "
                  f"share {100 * ref['share']:.1f} % -> {100 * this['share']:.1f} %, no-op "
                  f"{ref['noop']:.1f} -> {this['noop']:.1f} s", flush=True)


if __name__ == "__main__":
    main()

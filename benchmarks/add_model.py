"""What a new submission costs: the CPU of the run that adds one model to a leaderboard of N, against the run
that built the N from scratch, and a no-op rerun's wall time.

For each N (``--models``, default 20 and 100) a copy of the workflow gets N + 1 synthetic ReXrank JSON submissions
of ``--cases`` cases (IU-Xray's 590) for each of ``--datasets`` datasets (default 1; both splits; lexical panel bleu2
bleu4 rouge, meta-evaluation off, one score cache per copy). Three runs, ``--cores 2``:
1. the sheet without the last row — the last model on the last dataset — from scratch (the full run);
2. that row added to the sheet (the new submission; with ``--datasets 4``, a submission to one of four leaderboards);
3. nothing changed (a no-op rerun: its wall time).
Printed per run: wall and CPU (snakemake and everything it started: getrusage of the waited-for child), the
jobs by rule, and the scoring jobs' own account of their pairs (scored, from the cache); for run 2 the CPU each rule's
jobs logged (their own and their processes'). Goal: run 2 costs at most 15 % of run 1's CPU at 20 models, 5 % at
100; run 3 at most 2 s. The floor is printed too: what run 2 costs before any job does its work — run 3's CPU
(Snakemake's start, the Snakefile, the DAG, every output's date) plus the start of the worker pool the jobs run in
(an interpreter importing ``radrank.workers.PRELOAD``, measured here in a process of its own; where the server is a
fork of Snakemake's process, what it imports beyond what that process has).
With --against REV the same three runs are made first for that git revision (the reference in the same run).
With --full-repeats K the full run is made K times, each from scratch in a copy of its own, and the median is the
share's denominator (the full run's CPU varied by a fifth between two runs of the same code on this host).
With --repeats K, K submissions are added one run each (the N+1st, N+2nd, ...; one host's noise is ±20 % on a
single add-one run): each share is printed, and the median run is the one reported.
Bytecode is written by the first run, as in any checkout after its first run; --without-bytecode makes the three
runs once more with none for the interpreter's packages either (as from a venv installed without it where none is
written: PYTHONDONTWRITEBYTECODE, a read-only shared venv; simulated with PYTHONPYCACHEPREFIX pointing at an empty
folder), so that every process compiles what it imports.

    python benchmarks/add_model.py [--models 20 100] [--cases 590] [--datasets 1] [--against REV]
                                   [--repeats K] [--full-repeats K] [--without-bytecode]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
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


JOB_LINE = re.compile(r"rule (\w+) done in [\d.]+ s, ([\d.]+) CPU-s \(([\d.]+) in its own processes\)")


def job_cpu(work: Path, since: float) -> Counter:
    """CPU-s per rule (score_* as score) that the jobs of the run started at ``since`` logged."""
    out = Counter()
    for log in (work / "logs").rglob("*.log"):
        if log.stat().st_mtime >= since:
            for rule, own, children in JOB_LINE.findall(log.read_text()):
                out["score" if rule.startswith("score_") else rule] += float(own) + float(children)
    return out


def worker_start_cpu(repo: Path, env: dict) -> float:
    """CPU-s the worker pool's server costs before its first worker: an interpreter that imports what the pool
    preloads, less one that imports nothing; where the revision forks the server from Snakemake's process
    (``workers._fork_ready``), less one that imports what that process has as it reads the Snakefile."""
    forked = "_fork_ready" in (repo / "src" / "radrank" / "workers.py").read_text()
    before = "import snakemake.api, radrank.workflow, radrank.jobs" if forked else "pass"
    code = f"{before}; from radrank import workers; workers._preload(workers.PRELOAD)"
    cost = []
    for argv in ([sys.executable, "-c", code], [sys.executable, "-c", before]):
        before = children_cpu()
        subprocess.run(argv, check=True, env={**env, "PYTHONPATH": str(repo / "src")})
        cost.append(children_cpu() - before)
    return max(cost[0] - cost[1], 0.0)


def run(work: Path, env: dict) -> tuple:
    """(wall s, CPU s, jobs by rule, the scoring jobs' pair lines, CPU-s by rule as the jobs logged it) of one
    ``snakemake --cores 2`` in ``work``."""
    since = time.time() - 1
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
    return wall, cpu, jobs, pairs, job_cpu(work, since)


def measure(label: str, repo: Path, models: int, cases: int, env: dict, datasets: int = 1, repeats: int = 1,
            full_repeats: int = 1) -> dict:
    tmp = tempfile.TemporaryDirectory()
    work = _workdir.make(Path(tmp.name), models=models + repeats, datasets=datasets, cases=cases,
                         metrics=["bleu2", "bleu4", "rouge"], repo=repo)
    config_path = work / "config/config.yaml"
    config_path.write_text(yaml.safe_dump({**yaml.safe_load(config_path.read_text()), "metaeval": {"sets": []}}))
    sheet = work / "config/submissions.tsv"
    rows = sheet.read_text().splitlines()
    sheet.write_text("\n".join(rows[:-repeats]) + "\n")  # the N models
    # more full runs, each from scratch in a copy of its own (the same files): the median is the one compared
    copies = [tempfile.TemporaryDirectory() for _ in range(full_repeats - 1)]
    for copy in copies:
        shutil.copytree(work, copy.name, dirs_exist_ok=True, symlinks=True)
    fulls = [run(work, env)] + [run(Path(copy.name), env) for copy in copies]
    for copy in copies:
        copy.cleanup()
    full = sorted(fulls, key=lambda f: f[1])[(full_repeats - 1) // 2]  # the median full run (the lower of two)
    if full_repeats > 1:
        print(f"{label}: {full_repeats} full runs of {models} models, each from scratch: CPU "
              + ", ".join(f"{f[1]:.1f}" for f in fulls) + " s; median shown below")
    adds = []
    for k in range(repeats):  # each run one new submission more: the N+1st, then the N+2nd ...
        sheet.write_text("\n".join(rows[:len(rows) - repeats + k + 1]) + "\n")
        adds.append(run(work, env))
    noop = run(work, env)
    tmp.cleanup()
    pool = worker_start_cpu(repo, env)
    added = sorted(adds, key=lambda a: a[1])[(repeats - 1) // 2]  # the median add-one run (the lower one of two)
    share = added[1] / full[1]
    if repeats > 1:
        print(f"{label}: {repeats} submissions added one run at a time to {models} models: add-one CPU "
              + ", ".join(f"{a[1]:.1f}" for a in adds) + " s; shares " + ", ".join(f"{100 * a[1] / full[1]:.1f}"
                                                                          for a in adds) + " %; median shown below")
    print(f"{label}, {models} models x {cases} cases ({datasets} dataset{'s' if datasets > 1 else ''} x 2 splits, "
          "lexical panel; the new model on one dataset):")
    for name, (wall, cpu, jobs, *_) in (("full run", full), ("add one model", added), ("no-op rerun", noop)):
        print(f"  {name:14s} {wall:6.1f} s wall {cpu:7.1f} s CPU  {sum(jobs.values()):4d} jobs "
              f"({', '.join(f'{k} {v}' for k, v in sorted(jobs.items()))})")
    for line in added[3][:6]:
        print(f"    add-one scoring: {line}")
    print("    full run's jobs' CPU as they logged it: " + ", ".join(f"{rule} {cpu:.2f}" for rule, cpu in
                                                             sorted(full[4].items(), key=lambda kv: -kv[1]))
          + f" (sum {sum(full[4].values()):.2f} s)")
    print("    add-one jobs' CPU as they logged it: " + ", ".join(f"{rule} {cpu:.2f}" for rule, cpu in
                                                             sorted(added[4].items(), key=lambda kv: -kv[1]))
          + f" (sum {sum(added[4].values()):.2f} s)")
    goal = GOALS.get(models)
    print(f"  add one model = {100 * share:.1f} % of the full run's CPU"
          + (f" (goal <= {100 * goal:.0f} %: {'met' if share <= goal else 'NOT met'})" if goal else "")
          + f"; no-op rerun {noop[0]:.1f} s (goal <= {NOOP_GOAL_S:.0f} s: "
            f"{'met' if noop[0] <= NOOP_GOAL_S else 'NOT met'})", flush=True)
    # a run that adds a model does everything a no-op rerun does (Snakemake's start, the Snakefile, the DAG,
    # every output's date) before its first job: the no-op's share is the floor no job-side change goes below
    floor = noop[1] + pool
    print(f"  floor: the no-op rerun's {noop[1]:.1f} s CPU + the worker pool's start {pool:.1f} s = {floor:.1f} s = "
          f"{100 * floor / full[1]:.1f} % of the full run's; the jobs and their bookkeeping add "
          f"{100 * (added[1] - floor) / full[1]:.1f} %", flush=True)
    return {"share": share, "noop": noop[0], "full_cpu": full[1], "added_cpu": added[1], "floor": floor,
            "shares": [a[1] / full[1] for a in adds]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", type=int, nargs="+", default=[20, 100])
    p.add_argument("--cases", type=int, default=590)
    p.add_argument("--datasets", type=int, default=1, help="datasets (leaderboards of two splits); the new model "
                                                          "submits to the last one only")
    p.add_argument("--against", help="a git revision measured first, as the reference")
    p.add_argument("--full-repeats", type=int, default=1,
                   help="run the full run this many times, each from scratch: the median is the share's denominator")
    p.add_argument("--repeats", type=int, default=1,
                   help="add this many submissions, one run each (the N+1st, N+2nd, ...): the median add-one run is "
                        "the one reported, against the full run of N")
    p.add_argument("--without-bytecode", action="store_true",
                   help="also measure this checkout with no bytecode for any module")
    args = p.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for n in args.models:
        ref = None
        if args.against:
            with _workdir.revision(args.against) as repo:
                ref = measure(f"{args.against}", repo, n, args.cases, env, args.datasets, args.repeats,
                              args.full_repeats)
        this = measure("this checkout", _workdir.REPO, n, args.cases, env, args.datasets, args.repeats,
                       args.full_repeats)
        if args.without_bytecode:
            with tempfile.TemporaryDirectory() as empty:  # stays empty: nothing is written there
                bare = measure("this checkout, no bytecode", _workdir.REPO, n, args.cases,
                               {**env, "PYTHONPYCACHEPREFIX": empty, "PYTHONDONTWRITEBYTECODE": "1"}, args.datasets,
                               args.repeats)
            print(f"  no bytecode / bytecode: full run CPU x{bare['full_cpu'] / this['full_cpu']:.2f}, add-one CPU "
                  f"x{bare['added_cpu'] / this['added_cpu']:.2f}, share {100 * bare['share']:.1f} % -> "
                  f"{100 * this['share']:.1f} %, no-op {bare['noop']:.1f} -> {this['noop']:.1f} s", flush=True)
        if ref:
            print(f"  ratio this / {args.against}: add-one CPU x{this['added_cpu'] / ref['added_cpu']:.2f}, "
                  f"share {100 * ref['share']:.1f} % -> {100 * this['share']:.1f} %, no-op "
                  f"{ref['noop']:.1f} -> {this['noop']:.1f} s", flush=True)


if __name__ == "__main__":
    main()

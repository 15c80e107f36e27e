"""Per-job overhead of a real run: CPU of the whole Snakemake run vs CPU of the work its jobs do.

Runs the workflow (lexical panel, local, `--cores 2`) on a synthetic leaderboard — 20 models x 500
cases, one dataset, both splits — and measures the CPU of snakemake and everything it started
(getrusage of the waited-for child). Then replays every job's own work in ONE Python process, after
a first untimed pass has done the imports:
* a `script:` job (a process of its own): Snakemake keeps the script it generated for each job
  (--skip-script-cleanup: the rule's script with the job's pickled inputs, params and outputs), which
  is executed again;
* a `run:` job (the core environment's rules, run in Snakemake's own process): the run is started
  from a Snakefile that includes the workflow's and records each job's call of radrank.jobs (the
  function and its arguments, pickled) when radrank.jobs.run_logged is called; the call is made again.
Both replay the same thing: the radrank.jobs function of each job with that job's arguments, in job
order. The replay's CPU is the work; the rest of the run is per-job start-up (interpreter, imports,
Snakemake's own bookkeeping; the recording's pickling counts as run CPU too). The meta-evaluation
is switched off: the run is the leaderboard's. Goal: work >= 50 % of the run's CPU.
With --against REV, the same measurement is made first for that git revision of the workflow
(e.g. the commit before the scoring jobs were batched), as the reference.

    python benchmarks/overhead.py [--models 20] [--cases 500] [--against REV]
"""

from __future__ import annotations

import argparse
import os
import pickle
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _workdir  # noqa: E402

GOAL = 0.5


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# Started instead of the workflow's Snakefile: the same workflow, and every in-process job's call of
# radrank.jobs pickled to .snakemake/overhead_calls/ (a revision without in-process jobs records none).
RECORDING_SNAKEFILE = """
import pickle, sys, time
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir) / "src"))
from radrank import jobs as _jobs

if hasattr(_jobs, "run_logged"):
    _CALLS = Path(".snakemake/overhead_calls")
    _CALLS.mkdir(parents=True, exist_ok=True)
    _run_logged = _jobs.run_logged

    def _recorded(job, **kwargs):
        with open(_CALLS / f"{time.time_ns()}.{job.__name__}.pkl", "wb") as f:
            pickle.dump((job.__name__, kwargs), f)
        return _run_logged(job, **kwargs)

    _jobs.run_logged = _recorded


include: "Snakefile"
"""


def replay(jobs: list, work: Path) -> dict:
    """CPU seconds of each job's work done again in this process, by job function (script name or
    radrank.jobs function)."""
    cpu = defaultdict(float)
    os.chdir(work)
    for path in jobs:
        if path.suffix == ".pkl":  # an in-process job: its radrank.jobs call
            from radrank import jobs as radrank_jobs

            name, kwargs = pickle.loads(path.read_bytes())
            start = time.process_time()
            radrank_jobs.run_logged(getattr(radrank_jobs, name), **kwargs)  # as the job did, log included
            cpu[name] += time.process_time() - start
            continue
        code = compile(path.read_text(), str(path), "exec")
        start = time.process_time()
        try:
            exec(code, {"__name__": "__main__", "__file__": str(path)})
        except SystemExit as e:
            if e.code:
                sys.exit(f"replaying {path.name} failed (exit {e.code})")
        cpu[path.name.split(".", 1)[1]] += time.process_time() - start
    return cpu


def measure(label: str, repo: Path, args):
    with tempfile.TemporaryDirectory() as tmp:
        work = _workdir.make(Path(tmp), models=args.models, datasets=1, cases=args.cases,
                             metrics=["bleu2", "bleu4", "rouge"], repo=repo)
        config_path = work / "config/config.yaml"  # no meta-evaluation: the run is the leaderboard's
        config_path.write_text(yaml.safe_dump({**yaml.safe_load(config_path.read_text()), "metaeval": {"sets": []}}))
        (work / "Snakefile.overhead").write_text(RECORDING_SNAKEFILE)
        before, wall = children_cpu(), time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", "Snakefile.overhead", "--cores", "2",
                               "--skip-script-cleanup", "all"], cwd=work, capture_output=True, text=True)
        run_cpu, wall = children_cpu() - before, time.perf_counter() - wall
        if proc.returncode != 0:
            sys.exit(proc.stdout[-3000:] + proc.stderr[-3000:])
        jobs = Counter(re.findall(r"^(?:local)?rule (\w+):", proc.stdout + proc.stderr, re.M))
        # job order: a script is written, and a call recorded, when its job starts
        replayed = sorted([*(work / ".snakemake/scripts").glob("tmp*.py"),
                           *(work / ".snakemake/overhead_calls").glob("*.pkl")], key=lambda p: p.stat().st_mtime_ns)
        here = os.getcwd()
        sys.path.insert(0, str(work / "src"))
        for name in [m for m in sys.modules if m == "radrank" or m.startswith("radrank.")]:
            del sys.modules[name]  # this revision's package, not another's
        try:
            replay(replayed, work)  # imports and file-system caches warm
            work_cpu = replay(replayed, work)
        finally:
            os.chdir(here)
            sys.path.remove(str(work / "src"))
    total_work = sum(work_cpu.values())
    print(f"{label}: {args.models} models x {args.cases} cases, 1 dataset x 2 splits, lexical panel "
          f"(bleu2 bleu4 rouge), --cores 2")
    print(f"jobs: {sum(jobs.values())}  ({', '.join(f'{r} {n}' for r, n in sorted(jobs.items()))})")
    print(f"snakemake run: {wall:.1f} s wall, {run_cpu:.1f} s CPU (snakemake and every job)")
    for name, cpu in sorted(work_cpu.items()):
        print(f"  work of {name:<20} {cpu:7.2f} s CPU")
    share = total_work / run_cpu
    print(f"work, replayed in one process: {total_work:.1f} s CPU = {100 * share:.0f} % of the run's CPU "
          f"(goal >= {100 * GOAL:.0f} %); start-up and bookkeeping {run_cpu - total_work:.1f} s, "
          f"{(run_cpu - total_work) / max(sum(jobs.values()) - 1, 1):.2f} s per job")
    return sum(jobs.values()), run_cpu, total_work, wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=20)
    ap.add_argument("--cases", type=int, default=500)
    ap.add_argument("--against", metavar="REV", help="git revision measured first, as the reference")
    args = ap.parse_args()
    reference = None
    if args.against:
        with _workdir.revision(args.against) as repo:
            reference = measure(f"reference ({args.against})", repo, args)
        print()
    jobs, run_cpu, work, wall = measure("this checkout", _workdir.REPO, args)
    if reference:
        ref_jobs, ref_cpu, ref_work, ref_wall = reference
        print(f"\nvs reference: jobs {ref_jobs} -> {jobs}, run CPU {ref_cpu:.1f} -> {run_cpu:.1f} s "
              f"(x{ref_cpu / run_cpu:.1f} less), wall {ref_wall:.1f} -> {wall:.1f} s, work share "
              f"{100 * ref_work / ref_cpu:.0f} % -> {100 * work / run_cpu:.0f} %")


if __name__ == "__main__":
    main()

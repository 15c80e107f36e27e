"""Per-job overhead and use of the cores of a real local run: the run's CPU vs the work its jobs do, and
its wall time with ``--cores 1`` vs ``--cores 2``.

Runs the workflow (lexical panel, local) on a synthetic leaderboard — 50 models x 590 cases (IU-Xray's
size), one dataset, both splits — twice: with ``--cores 1`` and with ``--cores 2``, each from scratch, and
measures the wall time and the CPU of snakemake and everything it started (getrusage of the waited-for
child: its worker processes, which it waits for when it exits, included). Then replays every job's own work
of the ``--cores 2`` run in ONE Python process, after a first untimed pass over one job of each kind has
done the imports:
* a `script:` job (a process of its own): Snakemake keeps the script it generated for each job
  (--skip-script-cleanup: the rule's script with the job's pickled inputs, params and outputs), which
  is executed again;
* a `run:` job (the core environment's rules): the run is started from a Snakefile that includes the
  workflow's and records each job's call of radrank.workers.run_in_process (radrank.jobs.run_in_process
  before the worker processes; its arguments, pickled); the call
  is made again, in this process (RADRANK_WORKERS=0). A revision from before run_in_process recorded
  radrank.jobs.run_logged's job function and keyword arguments instead.
Before a job is replayed, what it would keep from its own first run (score files, the group's pairs digests, the
bootstrap's memo and summary keys, the report's page keys and drill-down rows) is removed, and the replay scores
into an empty score cache: the run was from scratch, and so is the replay. The replay's CPU is the work; the rest
of the run is per-job start-up (interpreter, imports, Snakemake's own bookkeeping, the workers' start and the jobs'
trips to them; the recording's pickling counts as run CPU too). The meta-evaluation is switched off: the run is the leaderboard's. Goals: wall(--cores 1) /
wall(--cores 2) >= 1.6, work >= 50 % of the run's CPU.
Wall times are the machine's: the benchmark first times two CPU-bound processes against one (2.0 on two idle
cores; less on a shared machine, which caps the ratio), and also prints a bound that does not depend on the
machine: the recording Snakefile writes the CPU of Snakemake's own process (at its first job and in all), which
one GIL runs one thread at a time, so that on two free cores the wall time is at least that CPU and at least
the start plus half the rest of the run's CPU.
With --against REV, the same measurement is made first for that git revision of the workflow
(e.g. HEAD: the jobs as threads of Snakemake's process), as the reference.

    python benchmarks/overhead.py [--models 50] [--cases 590] [--against REV]
"""

from __future__ import annotations

import argparse
import os
import pickle
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _workdir  # noqa: E402

WORK_SHARE_GOAL = 0.5
WALL_RATIO_GOAL = 1.6


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# Started instead of the workflow's Snakefile: the same workflow, and every in-process job's call of
# radrank.jobs pickled to .snakemake/overhead_calls/ (a revision without in-process jobs records none).
RECORDING_SNAKEFILE = """
import atexit, pickle, resource, sys, time
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir) / "src"))
from radrank import jobs as _jobs
try:
    from radrank import workers as _workers
except ImportError:  # a revision before the worker processes
    _workers = None

_CALLS = Path(".snakemake/overhead_calls")
_CALLS.mkdir(parents=True, exist_ok=True)


def _own_cpu(path):  # the CPU of Snakemake's process alone, all its threads: what one GIL serialises
    usage = resource.getrusage(resource.RUSAGE_SELF)
    Path(path).write_text(str(usage.ru_utime + usage.ru_stime))


atexit.register(_own_cpu, ".snakemake/overhead_own_cpu")


def _record(kind, name, call):
    if not Path(".snakemake/overhead_startup_cpu").exists():  # the first job: Snakemake's start is done
        _own_cpu(".snakemake/overhead_startup_cpu")
    with open(_CALLS / f"{time.time_ns()}.{name}.pkl", "wb") as f:
        pickle.dump((kind, name, call), f)


if _workers is not None and hasattr(_workers, "run_in_process"):
    _run_in_workers = _workers.run_in_process

    def _recorded(job_type, rule, params, input, output, log, config, workflow):
        _record("run_in_process", job_type.__name__, (rule, params, input, output, log, config))
        return _run_in_workers(job_type, rule, params, input, output, log, config, workflow)

    _workers.run_in_process = _recorded
elif hasattr(_jobs, "run_in_process"):
    _run_in_process = _jobs.run_in_process

    def _recorded(job_type, *args):  # this frame's globals are the Snakefile's, as the run: block's are
        _record("run_in_process", job_type.__name__, args)
        return _run_in_process(job_type, *args)

    _jobs.run_in_process = _recorded
elif hasattr(_jobs, "run_logged"):
    _run_logged = _jobs.run_logged

    def _recorded(job, **kwargs):
        _record("run_logged", job.__name__, kwargs)
        return _run_logged(job, **kwargs)

    _jobs.run_logged = _recorded


include: "Snakefile"
"""


def _forget_kept(name: str, output) -> None:
    """The run was from scratch: what a job would keep from its own first run is removed, so that its replay does
    the work the run did — score files (radrank.score_reuse), the bootstrap's memo (ReplicateMemo) and summary
    folders' keys (radrank.summaries), the report's page keys and drill-down rows (radrank.report.reuse)."""
    if name == "ScoreGroup":
        for out in getattr(output, "scores", None) or ():
            Path(out).unlink(missing_ok=True)
        folder = getattr(output, "score_dir", None)  # the metric's folder of the group's score files (a rule's)
        for out in Path(str(folder)).glob("*.parquet") if folder else ():
            out.unlink()
        shutil.rmtree(".snakemake/radrank/file-digests", ignore_errors=True)  # the pairs files' digests (jobs.py)
    elif name == "Bootstrap":  # the replay runs in the workflow's folder: the workflow's layout (docs/outputs.md)
        for memo in Path("results/stats").glob("*/*/replicate-memo"):
            shutil.rmtree(memo, ignore_errors=True)
        for keys in Path("results/summary").glob("*/*/.content-keys.json"):
            keys.unlink(missing_ok=True)
    elif name == "Report":
        Path("results/report/figures/.content-keys.json").unlink(missing_ok=True)
        shutil.rmtree("results/report/figures/.drill-down", ignore_errors=True)


def replay_one(path: Path) -> str:
    """Do one recorded job's work again in this process; its name (job class, function or script)."""
    if path.suffix == ".pkl":  # an in-process job: its radrank.jobs call, as the job made it, log included
        from radrank import jobs as radrank_jobs

        kind, name, call = pickle.loads(path.read_bytes())
        if kind == "run_in_process":
            _forget_kept(name, call[3])
            try:
                from radrank.workers import run_in_process
            except ImportError:  # a revision before the worker processes: the call ran in jobs
                radrank_jobs.run_in_process(getattr(radrank_jobs, name), *call)
            else:
                run_in_process(getattr(radrank_jobs, name), *call, None)  # RADRANK_WORKERS=0: here
        else:
            radrank_jobs.run_logged(getattr(radrank_jobs, name), **call)
        return name
    code = compile(path.read_text(), str(path), "exec")
    try:
        exec(code, {"__name__": "__main__", "__file__": str(path)})
    except SystemExit as e:
        if e.code:
            sys.exit(f"replaying {path.name} failed (exit {e.code})")
    return path.name.split(".", 1)[1]


def replay(calls: list) -> dict:
    """CPU seconds of each job's work done again in this process, by job name (the jobs' records, which go to
    their log files and stderr, to their log files only)."""
    cpu = defaultdict(float)
    stderr = sys.stderr
    with open(os.devnull, "w") as sys.stderr:
        try:
            for path in calls:
                # the job's processes too (the report builds its pages in a pool it waits for)
                start = time.process_time() + children_cpu()
                name = replay_one(path)
                cpu[name] += time.process_time() + children_cpu() - start
        finally:
            sys.stderr = stderr
    return cpu


SPIN = "s = 0\nfor i in range(20_000_000):\n    s += i"


def parallel_capacity() -> float:
    """How many times one CPU-bound process's speed two such processes reach together on this machine now
    (2.0 on two idle cores): the most the wall ratio --cores 1 / --cores 2 can be here."""
    def wall(n):
        start = time.perf_counter()
        for proc in [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(n)]:
            proc.wait()
        return time.perf_counter() - start

    return 2 * min(wall(1) for _ in range(3)) / min(wall(2) for _ in range(3))  # the best of three: others' load


def run_workflow(repo: Path, args, cores: int, record: bool):
    """One run from scratch in a new copy: (wall s, CPU s, Snakemake's own process's CPU s: until its first job and
    in all, jobs by rule, recorded calls in job order, copy)."""
    tmp = tempfile.TemporaryDirectory()
    work = _workdir.make(Path(tmp.name), models=args.models, datasets=1, cases=args.cases,
                         metrics=["bleu2", "bleu4", "rouge"], repo=repo)
    config_path = work / "config/config.yaml"  # no meta-evaluation: the run is the leaderboard's
    config_path.write_text(yaml.safe_dump({**yaml.safe_load(config_path.read_text()), "metaeval": {"sets": []}}))
    snakefile = ["-s", "Snakefile.overhead", "--skip-script-cleanup"] if record else []
    if record:
        (work / "Snakefile.overhead").write_text(RECORDING_SNAKEFILE)
    before, wall = children_cpu(), time.perf_counter()
    # a score cache of its own: "from scratch" (the user's cache would serve a later run what an earlier one scored)
    proc = subprocess.run([sys.executable, "-m", "snakemake", *snakefile, "--cores", str(cores), "all"], cwd=work,
                          capture_output=True, text=True,
                          env={**os.environ, "RADRANK_SCORE_CACHE": str(Path(tmp.name) / "score-cache")})
    run_cpu, wall = children_cpu() - before, time.perf_counter() - wall
    if proc.returncode != 0:
        sys.exit(proc.stdout[-3000:] + proc.stderr[-3000:])
    jobs = Counter(re.findall(r"^(?:local)?rule (\w+):", proc.stdout + proc.stderr, re.M))
    # job order: a script is written, and a call recorded, when its job starts
    calls = sorted([*(work / ".snakemake/scripts").glob("tmp*.py"),
                    *(work / ".snakemake/overhead_calls").glob("*.pkl")], key=lambda p: p.stat().st_mtime_ns)
    own_cpu = [float((work / f".snakemake/overhead_{part}_cpu").read_text()) if record else None
               for part in ("startup", "own")]
    return wall, run_cpu, own_cpu, jobs, calls, work, tmp


def measure(label: str, repo: Path, args):
    capacity = parallel_capacity()
    print(f"{label}: {args.models} models x {args.cases} cases, 1 dataset x 2 splits, lexical panel "
          f"(bleu2 bleu4 rouge); this machine now runs two CPU-bound processes at {capacity:.2f}x one "
          f"(load average {os.getloadavg()[0]:.2f})", flush=True)
    wall1, cpu1, _, _, _, _, tmp1 = run_workflow(repo, args, cores=1, record=True)
    tmp1.cleanup()
    print(f"--cores 1: {wall1:.1f} s wall, {cpu1:.1f} s CPU (snakemake, its workers and every job)", flush=True)
    wall2, cpu2, (startup, own2), jobs, calls, work, tmp2 = run_workflow(repo, args, cores=2, record=True)
    # With one core the wall time is the run's CPU. With two free ones it is at least the CPU of Snakemake's
    # process (one GIL runs it one thread at a time), and at least its start (before any job) plus half the rest.
    bound = cpu2 / max(own2, startup + (cpu2 - startup) / 2)
    print(f"--cores 2: {wall2:.1f} s wall, {cpu2:.1f} s CPU, {own2:.1f} s of it in Snakemake's own process "
          f"({100 * own2 / cpu2:.0f} %; {startup:.1f} s before its first job): on two free cores the wall ratio "
          f"--cores 1 / --cores 2 can reach {bound:.2f}", flush=True)
    here = os.getcwd()
    sys.path.insert(0, str(work / "src"))
    for name in [m for m in sys.modules if m == "radrank" or m.startswith("radrank.")]:
        del sys.modules[name]  # this revision's package, not another's
    workers_setting = os.environ.get("RADRANK_WORKERS")
    os.environ["RADRANK_WORKERS"] = "0"
    try:
        os.chdir(work)
        first_of_each = {}
        for path in calls:
            first_of_each.setdefault(path.name.split(".", 1)[1], path)
        replay(list(first_of_each.values()))  # imports and file-system caches warm
        # the run scored into an empty score cache: so does the replay (else its scoring jobs only look pairs up)
        shutil.rmtree(Path(tmp2.name) / "score-cache", ignore_errors=True)
        work_cpu = replay(calls)
    finally:
        os.chdir(here)
        sys.path.remove(str(work / "src"))
        if workers_setting is None:
            del os.environ["RADRANK_WORKERS"]
        else:
            os.environ["RADRANK_WORKERS"] = workers_setting
        tmp2.cleanup()
    total_work = sum(work_cpu.values())
    print(f"jobs: {sum(jobs.values())}  ({', '.join(f'{r} {n}' for r, n in sorted(jobs.items()))})")
    for name, cpu in sorted(work_cpu.items()):
        print(f"  work of {name:<20} {cpu:7.2f} s CPU")
    share, ratio = total_work / cpu2, wall1 / wall2
    print(f"wall --cores 1 / --cores 2: {ratio:.2f} (goal >= {WALL_RATIO_GOAL}; this machine's ceiling "
          f"{capacity:.2f}); work per wall-second at --cores 2: {total_work / wall2:.2f} CPU-s")
    print(f"work, replayed in one process: {total_work:.1f} s CPU = {100 * share:.0f} % of the --cores 2 run's CPU "
          f"(goal >= {100 * WORK_SHARE_GOAL:.0f} %); start-up and bookkeeping {cpu2 - total_work:.1f} s, "
          f"{(cpu2 - total_work) / max(sum(jobs.values()) - 1, 1):.2f} s per job", flush=True)
    return {"jobs": sum(jobs.values()), "cpu": cpu2, "work": total_work, "wall1": wall1, "wall2": wall2,
            "capacity": capacity, "own": own2, "bound": bound}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=50)
    ap.add_argument("--cases", type=int, default=590)
    ap.add_argument("--against", metavar="REV", help="git revision measured first, as the reference")
    args = ap.parse_args()
    reference = None
    if args.against:
        with _workdir.revision(args.against) as repo:
            reference = measure(f"reference ({args.against})", repo, args)
        print()
    this = measure("this checkout", _workdir.REPO, args)
    if reference:
        ref = reference
        print(f"\nvs reference: jobs {ref['jobs']} -> {this['jobs']}; --cores 2 wall {ref['wall2']:.1f} -> "
              f"{this['wall2']:.1f} s, run CPU {ref['cpu']:.1f} -> {this['cpu']:.1f} s, in Snakemake's own process "
              f"{ref['own']:.1f} -> {this['own']:.1f} s; wall ratio --cores 1 / 2 {ref['wall1'] / ref['wall2']:.2f} -> "
              f"{this['wall1'] / this['wall2']:.2f} (the machine's ceiling {ref['capacity']:.2f} and "
              f"{this['capacity']:.2f}; on two free cores at most {ref['bound']:.2f} -> {this['bound']:.2f}); "
              f"work share {100 * ref['work'] / ref['cpu']:.0f} % -> {100 * this['work'] / this['cpu']:.0f} %; "
              f"work per wall-second {ref['work'] / ref['wall2']:.2f} -> {this['work'] / this['wall2']:.2f} CPU-s")

if __name__ == "__main__":
    main()

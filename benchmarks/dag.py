"""The DAG of a leaderboard-sized workflow: 100 models x 4 datasets x 2 splits, full panel.

Builds a throw-away copy of the workflow with a synthetic submissions sheet (every submission a
small ReXrank JSON) and times `snakemake -n` with the full panel (the README's ReXrank panel plus
chexbert and crimson). Prints the jobs per rule, and wall and CPU seconds per dry run (CPU is what
a machine of its own would take as wall time; on a shared one, wall time also counts waiting).
Goal: <= 20 s on 2 cores. Then, from one more dry run with the SLURM profile's job grouping
(its `groups` / `group-components`), the jobs that reach the cluster, the GPU jobs (jobs that
request a GPU: each loads its model once) and the model-metric jobs (goals: <= 500 cluster jobs,
<= 300 model-metric jobs). With --against REV, that git revision of the workflow is measured first
on the same sheet, as the reference.

    python benchmarks/dag.py [--models 100] [--datasets 4] [--metrics bleu2 bleu4 rouge ...] [--against REV]
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
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _workdir  # noqa: E402

FULL_PANEL = ["bleu2", "bleu4", "rouge", "bertscore", "semb", "chexbert", "radgraph", "radcliq", "ratescore",
              "green", "crimson"]
GOAL = 20.0
CLUSTER_GOAL = 500
MODEL_JOB_GOAL = 300


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=100)
    ap.add_argument("--datasets", type=int, default=4)
    ap.add_argument("--metrics", nargs="+", default=FULL_PANEL)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--against", metavar="REV", help="git revision timed first, as the reference")
    args = ap.parse_args()
    reference = None
    if args.against:
        with _workdir.revision(args.against) as repo:
            reference = timed(f"reference ({args.against})", repo, args)
    cpu = timed("this checkout", _workdir.REPO, args)
    if reference:
        print(f"vs reference: CPU seconds {reference:.1f} -> {cpu:.1f} (x{reference / cpu:.1f} less)")


def timed(label: str, repo: Path, args) -> float:
    """Median CPU seconds of the dry run of ``repo``'s workflow; prints jobs and times."""
    with tempfile.TemporaryDirectory() as tmp:
        work = _workdir.make(Path(tmp), models=args.models, datasets=args.datasets, cases=5, metrics=args.metrics,
                             repo=repo)
        cmd = [sys.executable, "-m", "snakemake", "-n", "--cores", "2", "--quiet", "rules", "all"]
        times, cpus = [], []
        for _ in range(args.repeats):
            t0, cpu0 = time.perf_counter(), children_cpu()
            # no weights here: the load-time weights check (milliseconds when they are there) is skipped
            proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True,
                                  env={**os.environ, "RADRANK_WEIGHTS_CHECK": "off"})
            times.append(time.perf_counter() - t0)
            cpus.append(children_cpu() - cpu0)
            if proc.returncode != 0:
                sys.exit(proc.stdout[-3000:] + proc.stderr[-3000:])
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", proc.stdout, re.M))
    total = counts.pop("total", "?")
    counts = by_metric(counts, args.metrics)
    times.sort()
    cpus.sort()
    print(f"{label}: dry-run, {args.models} models x {args.datasets} datasets x 2 splits, "
          f"metrics {' '.join(args.metrics)}")
    print(f"jobs in DAG: {total}  ({', '.join(f'{rule} {n}' for rule, n in counts.items())})")
    print(f"wall seconds: median {times[len(times) // 2]:.2f}  min {times[0]:.2f}  max {times[-1]:.2f}")
    print(f"CPU seconds:  median {cpus[len(cpus) // 2]:.2f}  min {cpus[0]:.2f}  max {cpus[-1]:.2f}  "
          f"(goal <= {GOAL:.0f})")
    cluster, gpu, model = cluster_jobs(work_copy(repo, args))
    print(f"cluster jobs after the SLURM profile's grouping: {cluster} (goal <= {CLUSTER_GOAL}); GPU jobs, each "
          f"loading its model once: {gpu}; model-metric jobs: {model} (goal <= {MODEL_JOB_GOAL})")
    return cpus[len(cpus) // 2]


def by_metric(counts: dict, metric_names) -> dict:
    """Job counts with the per-group scoring rules (score_<metric>_<dataset>_<split>) added up per metric."""
    out: dict = {}
    for rule, n in counts.items():
        metric = next((m for m in sorted(metric_names, key=len, reverse=True) if rule.startswith(f"score_{m}_")),
                      None)
        key = f"score_{metric} (per group)" if metric and rule != f"score_{metric}_batch" else rule
        out[key] = out.get(key, 0) + int(n)
    return out


def work_copy(repo: Path, args):
    return lambda tmp: _workdir.make(Path(tmp), models=args.models, datasets=args.datasets, cases=5,
                                     metrics=args.metrics, repo=repo)


def grouping(profile: Path) -> list[str]:
    """The SLURM profile's job-grouping arguments (none in a revision without them)."""
    import yaml

    config = yaml.safe_load(profile.read_text()) if profile.is_file() else {}
    out = []
    for key in ("groups", "group-components"):
        values = config.get(key) or []
        if values:
            out += [f"--{key}", *values]
    return out


def cluster_jobs(make) -> tuple[int, int, int]:
    """(jobs submitted to the cluster, jobs requesting a GPU, model-metric jobs) of a dry run with the SLURM
    profile's grouping: a group job is one cluster job; `localrules` run on the login node."""
    with tempfile.TemporaryDirectory() as tmp:
        work = make(tmp)
        cmd = [sys.executable, "-m", "snakemake", "all", "-n", "--cores", "2",
               *grouping(work / "profiles/slurm/config.yaml")]
        proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True,
                              env={**os.environ, "RADRANK_WEIGHTS_CHECK": "off"})
        if proc.returncode != 0:
            sys.exit(proc.stdout[-3000:] + proc.stderr[-3000:])
    out = proc.stdout
    groups = len(re.findall(r"^\[.*\] Group job ", out, re.M))
    grouped = sum(len(re.findall(r"^    rule \w+:", block, re.M))
                  for block in re.split(r"^\[.*\] Group job ", out, flags=re.M)[1:])
    jobs = re.findall(r"^\s*(?:local)?rule (\w+):\n(.*?)(?=^\s*$)", out, re.M | re.S)
    local = {"all", "metaeval"}
    submitted = [(rule, body) for rule, body in jobs if rule not in local]
    gpu = sum(1 for _, body in submitted if re.search(r"\bgpu=[1-9]", body))
    model = sum(1 for rule, body in submitted if rule.startswith("score") and re.search(r"\bgpu=[1-9]", body))
    return len(submitted) - grouped + groups, gpu, model


if __name__ == "__main__":
    main()

"""Report build time, memory and page size at leaderboard scale.

Writes synthetic workflow outputs (``tests/synthetic.py``'s ``write_workflow_outputs``: pairs, drop lists, per-sample
score files for the ReXrank panel plus GREEN with its judge's analysis, then statistics, rank
distributions and leaderboards computed by radrank's own jobs) for M models × S splits × N pairs,
then runs the report job (``radrank.jobs.report``) in a fresh Python process pinned to 2 cores, as
the workflow runs it (its groups' pages two at a time, in processes of their own, from 60 (model, group)
entries). Reported: wall time, peak memory, page sizes (the index and the largest dataset × split page);
ratios against the targets (10 s, 5 MB a page) and against a reference measured in the same run — a fresh
process that only imports what the report job imports (the fixed cost every job pays).
benchmarks/report_scale.py measures 20 and 100 models × 8 groups against the previous revision.

Usage: python benchmarks/report.py [--models 20] [--splits 2] [--pairs 2000] [--cases 5] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
TESTS = HERE.parent / "tests"
sys.path[:0] = [str(TESTS), str(SRC)]

PANEL = ("bleu2", "bleu4", "rouge", "bertscore", "semb", "radgraph", "radcliq", "green")
SPLITS = ("findings", "reports", "vqa")
IMPORTS = "import pandas, pyarrow.parquet, scipy.stats, PIL.Image; import radrank.report, radrank.jobs"
TARGET_S, TARGET_MB = 10.0, 5.0


def _pinned(cmd: list) -> list:
    """``cmd`` on 2 cores where taskset exists (the benchmark's stated budget)."""
    cores = sorted(os.sched_getaffinity(0))[:2] if hasattr(os, "sched_getaffinity") else []
    return (["taskset", "-c", ",".join(map(str, cores))] + cmd) if shutil.which("taskset") and cores else cmd


def _child(code: str, env: dict) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak MB of its largest process) of ``code`` in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    code += ("; import resource; print(max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "
             "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))")  # its largest process
    out = subprocess.run(_pinned([sys.executable, "-c", code]), check=True, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return wall, cpu, int(out.stdout.split()[-1]) / 1024


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--splits", type=int, default=2, choices=(1, 2, 3))
    parser.add_argument("--pairs", type=int, default=2000, help="pairs per model and split (default 2000)")
    parser.add_argument("--cases", type=int, default=5, help="drill-down: worst and best cases per model")
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of the report job (best is reported)")
    parser.add_argument("--keep", help="write the synthetic outputs and the report here (kept)")
    args = parser.parse_args(argv)

    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="radrank-report-bench-"))
    try:
        start = time.perf_counter()
        # written by a child process, so that this one stays small: a forked child's peak memory would
        # otherwise count this process's pages
        write = (f"import json, sys; sys.path[:0] = [{str(TESTS)!r}, {str(SRC)!r}]; "
                 f"from synthetic import write_workflow_outputs; "
                 f"layout = write_workflow_outputs({str(root)!r}, n_models={args.models}, n_cases={args.pairs}, "
                 f"splits={SPLITS[:args.splits]!r}, metric_names={PANEL!r}, n_boot={args.n_boot}); "
                 f"open({str(root / 'layout.json')!r}, 'w').write(json.dumps(layout))")
        root.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-c", write], check=True)
        layout = json.loads((root / "layout.json").read_text())
        print(f"synthetic outputs: {args.models} models x {args.splits} split(s) x {args.pairs:,} pairs, "
              f"{len(PANEL)} metrics ({', '.join(PANEL)}), {args.n_boot} resamples "
              f"[{time.perf_counter() - start:.0f} s to write]")
        job = {"layout": layout, "bootstrap": {"n": args.n_boot, "seed": 0, "level": 0.95},
               "empty_hypothesis": "score", "cases": args.cases, "out": str(root / "report")}
        (root / "job.json").write_text(json.dumps(job))
        # bytecode is written by the warm-up run, as on any installed environment after its first job
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPATH"] = str(SRC) + os.pathsep + env.get("PYTHONPATH", "")
        run = (f"import json, logging; from radrank import jobs; logging.disable(logging.INFO); "
               f"j = json.load(open({str(root / 'job.json')!r})); "
               f"job = jobs.Report.of_layout(j['layout'], bootstrap=j['bootstrap'], "
               f"empty_hypothesis=j['empty_hypothesis'], cases=j['cases'], processes=2); "
               f"job.write(j['layout'], [], job.outputs(j['out']))")
        _child(run, env)  # warm-up
        imports = min(_child(IMPORTS, env) for _ in range(args.repeat))
        runs = [_child(run, env) for _ in range(args.repeat)]
        times = [r[0] for r in runs]
        peak_mb = max(r[2] for r in runs)
        pages = sorted((root / "report").glob("*.html"))
        index_mb = (root / "report/report.html").stat().st_size / 1e6
        size_mb = max(p.stat().st_size for p in pages) / 1e6  # the largest page
        n_svg = sum(p.read_text().count("<svg ") for p in pages)
        best, cpu, _ = min(runs)
        print(f"report job (fresh process, 2 cores): best {best:.2f} s wall, {cpu:.2f} s CPU, of {args.repeat} "
              f"({', '.join(f'{t:.2f}' for t in times)} s wall); peak memory {peak_mb:.0f} MB; "
              f"load average {os.getloadavg()[0]:.1f}")
        print(f"reference, same run: a process that only imports the report's libraries: {imports[0]:.2f} s wall, "
              f"{imports[1]:.2f} s CPU -> the report's own work {cpu - imports[1]:.2f} s CPU "
              f"({cpu / imports[1]:.1f}x the import cost)")
        print(f"pages: {len(pages)} (index {index_mb:.2f} MB), the largest {size_mb:.2f} MB, {n_svg} inline SVG "
              f"figures; markdown "
              f"{(root / 'report/report.md').stat().st_size / 1e3:.0f} kB")
        print(f"targets: time {best:.2f} s / {TARGET_S:.0f} s = {best / TARGET_S:.2f}; "
              f"size {size_mb:.2f} MB / {TARGET_MB:.0f} MB = {size_mb / TARGET_MB:.2f}")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

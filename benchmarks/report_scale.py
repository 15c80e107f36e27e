"""Report build time and page sizes at leaderboard scale — 20 and 100 models × 8 groups (dataset × split) —
this checkout against a previous revision measured in the same run.

Inputs: synthetic workflow outputs (``tests/synthetic.py``'s ``write_workflow_outputs``: pairs, drop lists,
per-sample score files of the ReXrank panel plus GREEN with its judge's analysis, then statistics, rank
distributions and leaderboards computed by this checkout's jobs) for M models × 2 splits × N pairs. The 8 groups
are D = 4 datasets × 2 splits; by default the datasets' layout entries share one dataset's files (the report
reads each group as if it were its own: the same work, a quarter of the writing); ``--distinct`` writes each
dataset's own.

Each report is built by the report job in a fresh Python process pinned to 2 cores (``taskset``), bytecode
compiled beforehand for both trees:

* ``new, 2 processes``: this checkout as the workflow runs it (rules/report.smk: ``threads: 2``);
* ``new, 1 process``: this checkout building the groups one after the other;
* ``old``: the previous revision (``git archive REV``, default HEAD: the committed report, one page).

Printed per scale: wall and CPU seconds, peak memory (the largest process), pages, the largest page, all pages
together; then new / old ratios and the targets (60 s, 5 MB a page).

Usage: python benchmarks/report_scale.py [--models 20 100] [--datasets 4] [--pairs 500] [--rev HEAD]
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
REPO = HERE.parent
SRC, TESTS = REPO / "src", REPO / "tests"
sys.path[:0] = [str(HERE)]

PANEL = ("bleu2", "bleu4", "rouge", "bertscore", "semb", "radgraph", "radcliq", "green")
SPLITS = ("findings", "reports")
TARGET_S, TARGET_PAGE_MB = 60.0, 5.0
BOOT = {"n": 1000, "seed": 0, "level": 0.95}


def _pinned(cmd: list) -> list:
    """``cmd`` on 2 cores where taskset exists (the benchmark's stated budget)."""
    cores = sorted(os.sched_getaffinity(0))[:2] if hasattr(os, "sched_getaffinity") else []
    return (["taskset", "-c", ",".join(map(str, cores))] + cmd) if shutil.which("taskset") and cores else cmd


def _child(code: str, src: Path) -> dict:
    """Wall and CPU seconds (its processes included) and peak MB (its largest process) of ``code`` run in a fresh
    process with ``src`` first on its path."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(src)
    code += ("\nimport resource, json\nprint(json.dumps(max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "
             "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)))")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(_pinned([sys.executable, "-c", code]), env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"the report failed:\n{proc.stderr[-4000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {"wall": wall, "cpu": cpu, "peak_mb": int(proc.stdout.split()[-1]) / 1024}


def _inputs(root: Path, models: int, pairs: int, datasets: int, distinct: bool) -> list:
    """The report layout of ``datasets`` × 2 splits (written by a child process: this one stays small)."""
    written = datasets if distinct else 1
    code = (f"import json, sys; sys.path[:0] = [{str(TESTS)!r}, {str(SRC)!r}]\n"
            "from synthetic import write_workflow_outputs\n"
            f"out = [write_workflow_outputs({str(root)!r} + f'/ds{{d}}', n_models={models}, n_cases={pairs}, "
            f"splits={SPLITS!r}, metric_names={PANEL!r}, n_boot={BOOT['n']}, dataset=f'ds{{d}}', seed=d) "
            f"for d in range({written})]\n"
            f"open({str(root / 'layout.json')!r}, 'w').write(json.dumps(out))")
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": str(SRC)})
    written_layouts = json.loads((root / "layout.json").read_text())
    layout = []
    for d in range(datasets):
        for entry in written_layouts[d if distinct else 0]:
            layout.append({**entry, "dataset": f"ds{d}"})
    return layout


def _build(variant: str, src: Path, layout_path: Path, out: Path, processes: int) -> dict:
    """One report build in a fresh process: this checkout's job (``processes``) or the old revision's."""
    if variant == "old":  # the committed job: one page, its figures and the summary
        write = ("job = jobs.Report.of_layout(layout, bootstrap=boot, empty_hypothesis='score', cases=5)\n"
                 f"job.write(layout, [], jobs.Files(markdown={str(out / 'report.md')!r}, "
                 f"html={str(out / 'report.html')!r}, figures={str(out / 'figures')!r}))")
    else:
        write = (f"job = jobs.Report.of_layout(layout, bootstrap=boot, empty_hypothesis='score', cases=5, "
                 f"processes={processes})\njob.write(layout, [], job.outputs({str(out)!r}))")
    code = ("import json, logging\nfrom radrank import jobs\nlogging.disable(logging.INFO)\n"
            f"layout = json.load(open({str(layout_path)!r}))\nboot = {BOOT!r}\n" + write)
    result = _child(code, src)
    pages = sorted(out.glob("*.html"))
    sizes = [p.stat().st_size / 1e6 for p in pages]
    result.update(pages=len(pages), largest_mb=max(sizes), total_mb=sum(sizes),
                  svg=sum(p.read_text().count("<svg ") for p in pages))
    return result


def _row(name: str, r: dict) -> str:
    return (f"  {name:<18} {r['wall']:7.1f} s wall {r['cpu']:7.1f} s CPU {r['peak_mb']:7.0f} MB peak "
            f"{r['pages']:3d} page(s), largest {r['largest_mb']:6.2f} MB, all {r['total_mb']:6.2f} MB, "
            f"{r['svg']} figures")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, nargs="+", default=[20, 100])
    parser.add_argument("--datasets", type=int, default=4, help="datasets (x 2 splits = groups; default 4)")
    parser.add_argument("--pairs", type=int, default=500, help="pairs per model and split (default 500)")
    parser.add_argument("--rev", default="HEAD", help="the previous revision (default HEAD)")
    parser.add_argument("--distinct", action="store_true", help="write every dataset's own files")
    parser.add_argument("--skip-old", action="store_true", help="this checkout only")
    parser.add_argument("--keep", help="keep the inputs and reports here")
    args = parser.parse_args(argv)

    from _workdir import revision

    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="radrank-report-scale-"))
    root.mkdir(parents=True, exist_ok=True)
    print(f"machine: {os.cpu_count()} CPUs (nproc {len(os.sched_getaffinity(0))}), builds pinned to 2 cores; "
          f"load average {os.getloadavg()[0]:.1f}")
    try:
        with revision(args.rev) as old:
            for tree in (SRC, old / "src"):  # bytecode for both trees first, as any installed environment has
                subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree)], check=True,
                               capture_output=True)
            for models in args.models:
                work = root / f"m{models}"
                work.mkdir(exist_ok=True)
                start = time.perf_counter()
                layout = _inputs(work / "inputs", models, args.pairs, args.datasets, args.distinct)
                layout_path = work / "layout.json"
                layout_path.write_text(json.dumps(layout))
                groups = len(layout)
                print(f"\n{models} models x {groups} groups ({args.datasets} datasets x {len(SPLITS)} splits) x "
                      f"{args.pairs} pairs, {len(PANEL)} metrics, {BOOT['n']} resamples "
                      f"[inputs written in {time.perf_counter() - start:.0f} s]")
                results = {}
                for name, src, processes in (("new, 2 processes", SRC, 2), ("new, 1 process", SRC, 1),
                                             *([] if args.skip_old else [("old", old / "src", 1)])):
                    out = work / name.replace(", ", "-").replace(" ", "")
                    shutil.rmtree(out, ignore_errors=True)
                    results[name] = _build("old" if name == "old" else "new", src, layout_path, out, processes)
                    print(_row(name, results[name]), flush=True)
                new = results["new, 2 processes"]
                if "old" in results:
                    o = results["old"]
                    print(f"  new (2 processes) / old: wall {new['wall'] / o['wall']:.2f}, CPU "
                          f"{new['cpu'] / o['cpu']:.2f}, peak memory {new['peak_mb'] / o['peak_mb']:.2f}, largest "
                          f"page {new['largest_mb'] / o['largest_mb']:.2f}, all pages "
                          f"{new['total_mb'] / o['total_mb']:.2f}")
                print(f"  targets: wall {new['wall']:.1f} s / {TARGET_S:.0f} s = {new['wall'] / TARGET_S:.2f}; "
                      f"largest page {new['largest_mb']:.2f} MB / {TARGET_PAGE_MB:.0f} MB = "
                      f"{new['largest_mb'] / TARGET_PAGE_MB:.2f}")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

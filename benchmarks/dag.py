"""Dry-run time of a leaderboard-sized workflow: 50 models x 4 datasets x 2 splits, CPU metrics.

Builds a throw-away copy of the workflow with a synthetic submissions sheet
(every submission a small ReXrank JSON) and times `snakemake -n`. Goal: <= 20 s.

    python benchmarks/dag.py [--models 50] [--datasets 4]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COPY = ("Snakefile", "rules", "scripts", "src", "config", "schemas", "envs", "profiles")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=50)
    ap.add_argument("--datasets", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name in COPY:
            (shutil.copytree if (REPO / name).is_dir() else shutil.copy2)(REPO / name, work / name)
        rows = ["model\tdataset\tpath\treference_path\tsplit"]
        for d in range(args.datasets):
            for m in range(args.models):
                path = work / "subs" / f"ds{d}" / f"m{m:02d}.json"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps({f"c{i}": {"model_prediction": "No effusion.",
                                                      "section_findings": "No pleural effusion."} for i in range(5)}))
                rows.append(f"m{m:02d}\tds{d}\t{path.relative_to(work)}\t\t")
        (work / "config/submissions.tsv").write_text("\n".join(rows) + "\n")
        cmd = [sys.executable, "-m", "snakemake", "-n", "--cores", "2", "--quiet", "all"]
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
            times.append(time.perf_counter() - t0)
            if proc.returncode != 0:
                sys.exit(proc.stdout[-3000:] + proc.stderr[-3000:])
        jobs = next((line.split()[-1] for line in proc.stdout.splitlines() if line.startswith("total")), "?")
        times.sort()
        print(f"dry-run, {args.models} models x {args.datasets} datasets x 2 splits, metrics bleu2 bleu4 rouge")
        print(f"jobs in DAG: {jobs}")
        print(f"seconds: median {times[len(times) // 2]:.2f}  min {times[0]:.2f}  max {times[-1]:.2f}  (goal <= 20)")


if __name__ == "__main__":
    main()

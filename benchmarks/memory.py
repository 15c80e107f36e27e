"""Peak memory (RSS) of the two jobs whose memory grows with the input: lexical scoring and the bootstrap.

Each measurement runs the job's own code (radrank.jobs.ScoreGroup, radrank.jobs.Bootstrap) on
synthetic files in a fresh subprocess and reads that process's peak RSS (getrusage ru_maxrss); the
same process's RSS just before the job (imports done, nothing read) is printed as the reference.

* Lexical: BLEU-2, BLEU-4 and ROUGE of N distinct pairs, each in its scoring job (default 100,000), scored
  in chunks of radrank.metrics.base.PAIR_CHUNK pairs — and, as the reference in the same run, in
  one chunk (what the metrics did before chunking). Goal: <= 1 GB, within the metrics' mem_mb.
* Bootstrap: M models x C cases (default 2,347, ReXrank's MIMIC-CXR findings), lexical panel
  (5 leaves), 1,000 resamples, a third of the models each missing its own 1-3 % of the cases (so
  most pairs are compared on their own common cases); M = 25, 50, 100. Memory must grow linearly
  with M and stay under what the bootstrap rule declares (radrank.stats.bootstrap.memory_mb).

    python benchmarks/memory.py [--pairs 100000] [--cases 2347] [--models 25 50 100] [--skip-lexical]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
LEXICAL = ("bleu2", "bleu4", "rouge")
LEAVES = 5  # bleu2, bleu4, rouge1, rouge2, rougeL

CHILD = r'''
import json, resource, sys
args = json.loads(sys.argv[1])
from radrank import jobs, metrics
import pandas as pd  # noqa: F401  (the job's imports, before the reference RSS)
for name in args.get("metrics", []):
    metrics.get(name)
if args.get("chunk"):
    from radrank.metrics import base
    base.PAIR_CHUNK = args["chunk"]
with open("/proc/self/status") as f:
    before = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024
if args["job"] == "score":
    (metric,) = args["metrics"]
    jobs.ScoreGroup.of(metric, ["m"]).run(jobs.Files(pairs=[args["pairs"]]),
                                          jobs.Files(scores=[f"{args['out']}/{metric}.parquet"]))
else:
    jobs.Bootstrap(**args["job_params"]).run(jobs.Files(args["input"]), jobs.Files(args["output"]))
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"before_mb": before, "peak_mb": peak}))
'''


def measure(args: dict) -> dict:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(args)], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.exit(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def lexical(tmp: Path, n_pairs: int):
    sys.path.insert(0, str(HERE.parent / "tests"))
    sys.path.insert(0, str(SRC))
    from synthetic import pairs_table

    from radrank import io, metrics, provenance
    from radrank.metrics.base import PAIR_CHUNK

    pairs = pairs_table(n_pairs, n_models=1, seed=0)[["sample_id", "reference", "hypothesis"]]
    path = tmp / "pairs.parquet"
    io.write_parquet(pairs, path, provenance.record("pairs", dataset="synthetic", split="findings", model="m",
                                                    n_pairs=len(pairs)))
    print(f"lexical scoring jobs (one per metric), {n_pairs:,} pairs "
          f"({pairs['reference'].nunique():,} distinct references, {pairs['hypothesis'].nunique():,} hypotheses)")
    for metric in LEXICAL:
        declared = metrics.get(metric).resources(metrics.get(metric).settings()).mem_mb
        for label, chunk in ((f"in chunks of {PAIR_CHUNK:,} pairs", None), ("in one chunk (reference)", n_pairs + 1)):
            out = tmp / f"scores-{metric}-{chunk or 0}"
            out.mkdir()
            got = measure({"job": "score", "pairs": str(path), "metrics": [metric], "out": str(out), "chunk": chunk})
            print(f"  {metric:<6} {label:<32} peak {got['peak_mb']:6.0f} MB  (before the job {got['before_mb']:.0f} "
                  f"MB; declared mem_mb {declared})")


def bootstrap_files(tmp: Path, n_models: int, n_cases: int) -> dict:
    """Score, pairs and drop files of ``n_models`` models, the group's cases and its accounting, as the bootstrap
    job reads them (its input lists). Every score file covers the case set, as the scoring jobs write it; a third
    of the models have no value on their own 1-3 % of the cases (benchmarks/_case_sets.py: NaN, as a judge's
    failed answer is), so most pairs of models are compared on their own common cases."""
    import numpy as np
    import pandas as pd

    from radrank import io
    from radrank.ingest import casesets

    sys.path.insert(0, str(HERE))
    from _case_sets import case_masks, lexical_scores

    rng = np.random.default_rng(n_models)
    every = np.ones(n_cases, dtype=bool)
    ids = [f"case{i:05d}" for i in range(n_cases)]
    text = "Findings: the lungs are clear. No pleural effusion or pneumothorax."
    pairs = pd.DataFrame({"sample_id": ids, "reference": text, "hypothesis": text})
    drops = pd.DataFrame(columns=["sample_id", "study_id", "reason", "action", "row", "detail"])
    scores, pairs_paths, drops_paths, models = [], [], [], {}
    for m, keep in enumerate(case_masks(n_models, n_cases, distinct=True, seed=n_models)):
        folder = tmp / f"m{m:03d}"
        folder.mkdir()
        for name, frame in lexical_scores(every, rng).items():
            values = [c for c in frame.columns if c != "sample_id"]
            frame[values] = frame[values].astype("float64").where(np.repeat(keep[:, None], len(values), axis=1))
            io.write_parquet(frame, folder / f"{name}.parquet", {"metric": name})
            scores.append(str(folder / f"{name}.parquet"))
        io.write_parquet(pairs, folder / "pairs.parquet")
        pairs_paths.append(str(folder / "pairs.parquet"))
        io.write_csv(drops, folder / "drops.csv")
        drops_paths.append(str(folder / "drops.csv"))
        models[f"m{m:03d}"] = pairs
    cases = pd.DataFrame({"sample_id": ids, "n_submissions": n_models})
    io.write_parquet(cases, tmp / "cases.parquet")  # the dataset's cases (rule cases)
    accounting = casesets.account(models, {m: drops for m in models}, cases, canonical=False)
    io.write_parquet(accounting, tmp / "accounting.parquet")
    return {"scores": scores, "pairs": pairs_paths, "drops": drops_paths, "cases": str(tmp / "cases.parquet"),
            "accounting": str(tmp / "accounting.parquet")}


def bootstrap(tmp: Path, models: list, n_cases: int, n_boot: int):
    sys.path.insert(0, str(SRC))
    from radrank.stats.bootstrap import memory_mb

    print(f"bootstrap job, {n_cases:,} cases, {LEAVES} leaves, {n_boot} resamples, a third of the models "
          f"each missing its own 1-3 % of the cases")
    rows = []
    for n_models in models:
        folder = tmp / f"boot{n_models}"
        folder.mkdir()
        params = {"dataset": "synthetic", "split": "findings", "models": [f"m{m:03d}" for m in range(n_models)],
                  "metrics": list(LEXICAL), "n": n_boot, "seed": 0, "level": 0.95}
        output = {name: str(folder / file) for name, file in (
            ("replicates", "replicates.parquet"), ("summary", "summary.parquet"),
            ("comparisons", "comparisons.parquet"), ("comparisons_csv", "comparisons.csv"),
            ("coverage", "coverage.parquet"), ("rank_replicates", "rank_replicates.parquet"),
            ("failures", "failures.parquet"), ("model_files", "summary"))}
        got = measure({"job": "bootstrap", "job_params": params, "input": bootstrap_files(folder, n_models, n_cases),
                       "output": output, "metrics": list(LEXICAL)})
        declared = memory_mb(n_models, LEAVES, n_boot)
        rows.append((n_models, got["peak_mb"] - got["before_mb"]))
        print(f"  {n_models:4d} models: peak {got['peak_mb']:6.0f} MB (before the job {got['before_mb']:.0f} MB), "
              f"declared mem_mb {declared} ({got['peak_mb'] / declared:.0%} of it)")
    if len(rows) > 1:
        (m0, r0), (m1, r1) = rows[0], rows[-1]
        print(f"  growth: {(r1 - r0) / (m1 - m0):.1f} MB per model ({(r1 - r0) / (m1 - m0) / LEAVES:.2f} MB per "
              f"model x leaf) between {m0} and {m1} models; x{m1 / m0:.0f} models -> x{r1 / max(r0, 1):.1f} job memory")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=100_000)
    ap.add_argument("--cases", type=int, default=2347)
    ap.add_argument("--models", type=int, nargs="+", default=[25, 50, 100])
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--skip-lexical", action="store_true")
    ap.add_argument("--skip-bootstrap", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_lexical:
            (Path(tmp) / "lexical").mkdir()
            lexical(Path(tmp) / "lexical", args.pairs)
        if not args.skip_bootstrap:
            bootstrap(Path(tmp), args.models, args.cases, args.n_boot)


if __name__ == "__main__":
    main()

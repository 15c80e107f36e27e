"""The garbage collector's thresholds (radrank.garbage_collector) against CPython's own, on what a full run's workers
spend most of their CPU on: the lexical panel over a leaderboard's pairs.

Each measurement is a fresh interpreter (as a worker is: imports done, then frozen) that scores ``--pairs`` synthetic
pairs of ``--models`` models with BLEU-2, BLEU-4 and ROUGE through ``radrank.metrics.score``, once with CPython's
thresholds (700, 10, 10) and once with :data:`radrank.garbage_collector.THRESHOLDS`, alternating, ``--repeats``
times; per metric the median CPU-s of each and their ratio are printed, and the two settings' values must be equal.

    python benchmarks/collector.py [--pairs 500000] [--models 50] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
METRICS = ("bleu2", "bleu4", "rouge")

# one measurement, in a process of its own: {metric: [CPU-s, sha256 of its values]}
MEASURE = """
import gc, hashlib, json, sys, time
sys.path[:0] = [{tests!r}, {src!r}]
from synthetic import pairs_table
from radrank import garbage_collector, metrics
pairs = pairs_table({pairs}, n_models={models}, seed=0)
metrics.score("bleu2", pairs.iloc[:10])  # first-call imports outside the timings
if {tuned}:
    garbage_collector.tune()
gc.freeze()  # as a worker's server does after its imports
out = {{}}
for name in {metrics!r}:
    start = time.process_time()
    values = metrics.score(name, pairs)
    spent = time.process_time() - start
    out[name] = [spent, hashlib.sha256(values.to_csv(index=False).encode()).hexdigest()]
print(json.dumps(out))
"""


def measure(tuned: bool, pairs: int, models: int) -> dict:
    code = MEASURE.format(tests=os.path.join(ROOT, "tests"), src=os.path.join(ROOT, "src"), pairs=pairs,
                          models=models, tuned=tuned, metrics=METRICS)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=500_000)
    parser.add_argument("--models", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    sys.path.insert(0, os.path.join(ROOT, "src"))
    from radrank.garbage_collector import THRESHOLDS

    runs = {False: [], True: []}
    for _ in range(args.repeats):
        for tuned in (False, True):
            runs[tuned].append(measure(tuned, args.pairs, args.models))
    print(f"{args.pairs:,} pairs of {args.models} models, {args.repeats} fresh processes each, alternating; "
          f"median CPU-s")
    print(f"{'metric':<8} {'(700, 10, 10)':>14} {str(THRESHOLDS):>18} {'ratio':>7}")
    for name in METRICS:
        digests = {run[name][1] for side in runs.values() for run in side}
        assert len(digests) == 1, f"{name}: the values differ between the two settings"
        default, tuned = (statistics.median(run[name][0] for run in runs[side]) for side in (False, True))
        print(f"{name:<8} {default:>14.2f} {tuned:>18.2f} {tuned / default:>7.2f}")


if __name__ == "__main__":
    main()

"""The score cache over many runs, with and without the bound kept at the end of every run.

Ten runs of a leaderboard that grows by ``--new`` models a run (``--cases`` cases, both splits: each run stores
its new pairs for one model metric, as two concurrent jobs that both missed the same pairs would: each new pair
stored twice). After every run the cache is either left alone (the previous revision: no automatic bound) or
kept by :func:`radrank.score_cache.keep_bounded` with ``score_cache.max_gb`` = ``--max-gb`` (what the Snakefile's
onsuccess does now). Printed after each run: size on disk, packs, distinct entries, and a cold lookup of the last
run's pairs (a new process: memos cleared); and the ratios bounded / unbounded after the last run.

    python benchmarks/cache_bound.py [--runs 10] [--new 10] [--cases 590] [--max-gb 0.002]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
from radrank import score_cache as sc  # noqa: E402

KEY = {"metric": "bertscore-like", "identity": {"version": 1}, "weights": {}}


def run_pairs(run: int, args) -> np.ndarray:
    n = args.new * args.cases * 2
    return np.array([f"{run:08x}{i:024x}" for i in range(n)])


def one_run(root: Path, run: int, args, bounded: bool) -> dict:
    ns = sc.ScoreCache(root).namespace(KEY, columns=("precision", "recall", "f1"))
    digests = run_pairs(run, args)
    rng = np.random.default_rng(run)
    frame = pd.DataFrame({"digest": digests, "precision": rng.random(len(digests)),
                          "recall": rng.random(len(digests)), "f1": rng.random(len(digests))})
    for half in (frame.iloc[: len(frame) // 2], frame.iloc[len(frame) // 2:]):
        ns.store(half, {})  # job 1
        ns.store(half, {})  # job 2 missed the same pairs at the same time
    if bounded:
        sc.keep_bounded({"score_cache": {"dir": str(root), "max_gb": args.max_gb}})
    for memo in (sc._INDEXES, sc._PACKS):
        memo.clear()
    start = time.perf_counter()
    found = ns.lookup(digests)
    lookup_s = time.perf_counter() - start
    [space] = sc.info(root)
    return {"bytes": space.bytes, "packs": len(space.packs), "entries": space.entries, "lookup_s": lookup_s,
            "found": len(found)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--new", type=int, default=10, help="models added per run")
    p.add_argument("--cases", type=int, default=590)
    p.add_argument("--max-gb", type=float, default=0.002)
    args = p.parse_args()
    last = {}
    for bounded in (False, True):
        label = f"bounded (max_gb {args.max_gb})" if bounded else "unbounded (previous revision)"
        print(f"{label}: {args.runs} runs, {args.new} new models x {args.cases} cases x 2 splits a run, each new "
              "pair stored twice")
        with tempfile.TemporaryDirectory() as tmp:
            for run in range(args.runs):
                r = one_run(Path(tmp), run, args, bounded)
                print(f"  run {run + 1:2d}: {r['bytes'] / 1e6:7.2f} MB in {r['packs']:3d} packs, {r['entries']:8,d} "
                      f"entries; cold lookup of this run's {len(run_pairs(run, args)):,d} pairs {r['lookup_s']:.3f} s "
                      f"({r['found']:,d} found)")
            last[bounded] = r
    b, u = last[True], last[False]
    print(f"after {args.runs} runs, bounded / unbounded: size x{b['bytes'] / u['bytes']:.2f}, packs "
          f"{b['packs']} / {u['packs']}, cold lookup x{b['lookup_s'] / u['lookup_s']:.2f}")


if __name__ == "__main__":
    main()

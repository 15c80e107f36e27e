"""Is a cache lookup cheaper than counting n-grams? The lexical metrics' scoring of a group against what the
score cache costs for the same pairs (their digests, and a cold lookup — a new job's process), measured in one run.

For each group size (``--pairs``: a leaderboard's distinct pairs of one dataset × split, e.g. 20 × 590 and
100 × 590) and each amount of other entries in the same namespace (``--others``: what other datasets, splits
and leaderboards stored; a cold lookup reads every entry's digest), per metric (bleu2, bleu4, rouge):
scoring s, digest + cold lookup s, and the ratio. The cache pays where the ratio is below 1.

    python benchmarks/lexical_cache.py [--pairs 11800 59000] [--others 0 1000000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
from synthetic import pairs_table  # noqa: E402

from radrank import metrics  # noqa: E402
from radrank import score_cache as sc  # noqa: E402
from radrank.scoring import pair_keys  # noqa: E402


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", type=int, nargs="+", default=[11_800, 59_000])
    p.add_argument("--others", type=int, nargs="+", default=[0, 1_000_000])
    args = p.parse_args()
    for n in args.pairs:
        pairs = pairs_table(n, n_models=max(1, n // 590), seed=0).reset_index(drop=True)
        for name in ("bleu2", "bleu4", "rouge"):
            metric = metrics.get(name)
            settings = metric.settings()
            score_s, scored = timed(lambda: metrics.score(name, pairs, settings))
            for others in args.others:
                with tempfile.TemporaryDirectory() as tmp:
                    ns = sc.ScoreCache(Path(tmp)).namespace({"metric": name}, columns=metric.columns)
                    keys = pair_keys(metric, settings, pairs)
                    rows = scored.drop(columns=["sample_id"]).assign(digest=keys)
                    if others:
                        filler = rows.sample(n=others, replace=True, random_state=0).reset_index(drop=True)
                        filler["digest"] = [f"{i:032x}" for i in range(others)]
                        for start in range(0, others, 100_000):
                            ns.store(filler.iloc[start:start + 100_000], {})
                    ns.store(rows, {})
                    for memo in (sc._INDEXES, sc._PACKS):
                        memo.clear()
                    cache_s, found = timed(lambda: ns.lookup(pair_keys(metric, settings, pairs)))
                    assert len(found) == len(set(keys))
                print(f"{name:6s} {n:7,d} pairs, {others:9,d} other entries: scoring {score_s:6.2f} s, digests + "
                      f"cold lookup {cache_s:6.2f} s: x{cache_s / score_s:.2f}", flush=True)


if __name__ == "__main__":
    main()

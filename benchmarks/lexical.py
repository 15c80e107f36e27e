"""Lexical panel (BLEU-2, corpus BLEU-4, ROUGE-1/2/L): radrank vs the reference libraries.

radrank's metrics (through the registry, ``radrank.metrics.score``) are timed
against a plain per-pair loop over the libraries they reproduce:

* BLEU-2: fast-bleu 0.0.90, a ``BLEU([ref_tokens], {"bigram": (1/2, 1/2)})`` built per pair,
  as ReXrank does, with ReXrank's tokenisation;
* BLEU-4: pycocoevalcap's ``BleuScorer(n=4)``, one ``+=`` per pair, ``compute_score(option="closest")``;
* ROUGE: ``rouge_score.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True).score`` per pair.

The numbers must agree (BLEU-2 to 1e-9 — fast-bleu takes its logarithms in long
double —, BLEU-4 and ROUGE to 1e-12) before any time is printed.

Usage: python benchmarks/lexical.py [--n 10000] [--models 4] [--seed 0] [--repeat 1]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

# fast-bleu scores each hypothesis in an OpenMP loop; with one hypothesis per call the threads only add
# start-up and contention costs, so the library side gets its best case: one thread (override by setting
# OMP_NUM_THREADS yourself).
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from synthetic import pairs_table  # noqa: E402

from radrank import metrics  # noqa: E402

GOAL = 3.0


def rexrank_tokens(text) -> list[str]:
    """ReXrank's BLEU tokens: lower-case, "." -> " .", split on the space character, drop empties."""
    return [t for t in str(text).lower().replace(".", " .").split(" ") if t]


def library_bleu2(refs, hyps):
    from fast_bleu import BLEU

    return np.array([BLEU([rexrank_tokens(r)], {"bigram": (1 / 2, 1 / 2)}).get_score([rexrank_tokens(h)])["bigram"][0]
                     for r, h in zip(refs, hyps)])


def library_bleu4(refs, hyps):
    from pycocoevalcap.bleu.bleu_scorer import BleuScorer

    scorer = BleuScorer(n=4)
    for r, h in zip(refs, hyps):
        scorer += (h, [r])
    corpus, per_sample = scorer.compute_score(option="closest")
    return corpus[3], np.array(per_sample[3])


def library_rouge(refs, hyps):
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    rows = []
    for r, h in zip(refs, hyps):
        s = scorer.score(r, h)
        rows.append((s["rouge1"].fmeasure, s["rouge2"].fmeasure, s["rougeL"].fmeasure))
    return np.array(rows).reshape(len(rows), 3)


def ours_bleu4_corpus(frame) -> float:
    (leaf,) = metrics.leaves("bleu4")
    return float(leaf.value(leaf.statistics(frame).sum(axis=0)))


def timed(fn, repeat):
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="number of report pairs (default 10000)")
    parser.add_argument("--models", type=int, default=4, help="models sharing each reference (default 4)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=1, help="time each side this many times, keep the best")
    args = parser.parse_args(argv)

    pairs = pairs_table(args.n, n_models=args.models, seed=args.seed)
    refs, hyps = pairs["reference"].tolist(), pairs["hypothesis"].tolist()
    words = pairs["reference"].str.split().str.len().tolist() + pairs["hypothesis"].str.split().str.len().tolist()
    print(f"{len(pairs):,} synthetic pairs, {args.models} models, {pairs['reference'].nunique():,} distinct "
          f"references, {min(words)}-{max(words)} words per report (seed {args.seed})")

    # Warm-up: imports and first-call costs on both sides, outside the timings.
    warm = pairs.iloc[:10]
    for name in ("bleu2", "bleu4", "rouge"):
        metrics.score(name, warm)
    library_bleu2(refs[:10], hyps[:10]), library_bleu4(refs[:10], hyps[:10]), library_rouge(refs[:10], hyps[:10])

    ours_t, ours = {}, {}
    for name in ("bleu2", "bleu4", "rouge"):
        ours_t[name], ours[name] = timed(lambda name=name: metrics.score(name, pairs), args.repeat)
    lib_t, lib = {}, {}
    lib_t["bleu2"], lib["bleu2"] = timed(lambda: library_bleu2(refs, hyps), args.repeat)
    lib_t["bleu4"], lib["bleu4"] = timed(lambda: library_bleu4(refs, hyps), args.repeat)
    lib_t["rouge"], lib["rouge"] = timed(lambda: library_rouge(refs, hyps), args.repeat)

    # Identical numbers first.
    diffs = {
        "bleu2": np.abs(ours["bleu2"]["bleu2"].to_numpy() - lib["bleu2"]).max(),
        "bleu4": max(np.abs(ours["bleu4"]["bleu4_sentence"].to_numpy() - lib["bleu4"][1]).max(),
                     abs(ours_bleu4_corpus(ours["bleu4"]) - lib["bleu4"][0])),
        "rouge": np.abs(ours["rouge"][["rouge1", "rouge2", "rougeL"]].to_numpy() - lib["rouge"]).max(),
    }
    tolerance = {"bleu2": 1e-9, "bleu4": 1e-12, "rouge": 1e-12}
    for name, diff in diffs.items():
        assert diff <= tolerance[name], f"{name}: radrank differs from the library by {diff:.3g}"
    assert (ours["bleu2"]["sample_id"] == pairs["sample_id"]).all()
    print(f"numbers agree: corpus BLEU-4 {ours_bleu4_corpus(ours['bleu4']):.6f} (library {lib['bleu4'][0]:.6f}); "
          f"mean BLEU-2 {ours['bleu2']['bleu2'].mean():.6f}; mean ROUGE-L {ours['rouge']['rougeL'].mean():.6f}")
    print()

    n = len(pairs)
    header = (f"{'metric':<8} {'radrank ms/pair':>16} {'library ms/pair':>16} {'speed-up':>9} {'max |diff|':>11}"
              "  library loop")
    print(header)
    print("-" * len(header))
    loops = {"bleu2": "fast-bleu BLEU per pair", "bleu4": "BleuScorer += per pair",
             "rouge": "RougeScorer.score per pair"}
    for name in ("bleu2", "bleu4", "rouge"):
        print(f"{name:<8} {1e3 * ours_t[name] / n:>16.4f} {1e3 * lib_t[name] / n:>16.4f} "
              f"{lib_t[name] / ours_t[name]:>8.1f}x {diffs[name]:>11.2e}  {loops[name]}")
    ours_total, lib_total = sum(ours_t.values()), sum(lib_t.values())
    ratio = lib_total / ours_total
    print(f"{'panel':<8} {1e3 * ours_total / n:>16.4f} {1e3 * lib_total / n:>16.4f} {ratio:>8.1f}x")
    print()
    print(f"panel: radrank {ours_total:.2f} s, libraries {lib_total:.2f} s for {n:,} pairs; "
          f"goal >= {GOAL:.0f}x faster: {'met' if ratio >= GOAL else 'NOT met'} ({ratio:.1f}x)")
    return 0 if ratio >= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())

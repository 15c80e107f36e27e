"""Corpus BLEU-4, as RadEval's default ``bleu`` (pycocoevalcap's BleuScorer) computes it.

Tokens: whitespace split, case kept. One reference per sample, so the
"closest" reference length is that reference's length. The corpus value is
computed from totals of per-sample statistics — clipped n-gram matches
(``correct``), hypothesis n-gram counts (``guess``), hypothesis and reference
lengths — with BleuScorer's constants (tiny = 1e-15, small = 1e-9). These
per-sample statistics are stored, so the corpus value is recomputed exactly for
any subset or bootstrap resample. It is not the mean of per-sample values;
``bleu4_sentence`` (BleuScorer's per-sample list) is kept for inspection only.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from radrank.metrics.base import (Leaf, Metric, ReferenceGrams, Resources, in_pair_chunks, match_pairs,
                                  prepared_references)

N = 4
TINY = 1e-15
SMALL = 1e-9

CORRECT = tuple(f"bleu4_correct_{k}" for k in range(1, N + 1))
GUESS = tuple(f"bleu4_guess_{k}" for k in range(1, N + 1))
STATS = CORRECT + GUESS + ("bleu4_testlen", "bleu4_reflen")


def corpus_bleu(totals: np.ndarray, order: int = N) -> np.ndarray:
    """BLEU-``order`` from totals of :data:`STATS` (last axis); BleuScorer's arithmetic."""
    totals = np.asarray(totals, dtype="float64")
    correct, guess = totals[..., :N], totals[..., N: 2 * N]
    testlen, reflen = totals[..., 2 * N], totals[..., 2 * N + 1]
    bleu = np.ones(totals.shape[:-1])
    for k in range(order):  # grouped as BleuScorer's ``bleu *= (c + tiny) / (g + small)``
        bleu = bleu * ((correct[..., k] + TINY) / (guess[..., k] + SMALL))
    value = bleu ** (1.0 / order)
    ratio = (testlen + TINY) / (reflen + SMALL)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        penalty = np.where(ratio < 1, np.exp(1 - 1 / ratio), 1.0)
    return value * penalty


def _counts(text: str):
    words = text.split()
    grams = Counter()
    for k in range(1, N + 1):
        for i in range(len(words) - k + 1):
            grams[tuple(words[i: i + k])] += 1
    return len(words), grams


def statistics(reference: str, hypothesis: str, cache: dict | None = None) -> list[float]:
    cache = {} if cache is None else cache
    ref = cache.get(reference) or cache.setdefault(reference, _counts(reference))
    hyp = cache.get(hypothesis) or cache.setdefault(hypothesis, _counts(hypothesis))
    reflen, ref_grams = ref
    testlen, hyp_grams = hyp
    correct = [0] * N
    for gram, count in hyp_grams.items():
        ref_count = ref_grams.get(gram)
        if ref_count:
            correct[len(gram) - 1] += min(ref_count, count)
    guess = [max(0, testlen - k + 1) for k in range(1, N + 1)]
    return correct + guess + [testlen, reflen]


def sentence_bleu(stats: np.ndarray) -> np.ndarray:
    """BleuScorer's per-sample BLEU-4 (its ``bleu_list[3]``) from per-sample statistics."""
    return corpus_bleu(stats)


def prepare(texts) -> ReferenceGrams:
    """References split on whitespace, their 1- to 4-grams numbered (:class:`radrank.metrics.base.ReferenceGrams`)."""
    return ReferenceGrams([t.split() for t in texts], N)


def statistics_table(references, hypotheses, prepared=None) -> np.ndarray:
    """Per-sample :data:`STATS` of all pairs, int64 (n, len(STATS)).

    Each distinct text is split once (a reference, once per group when ``prepared``) and the clipped matches of all
    pairs are counted together (:func:`radrank.metrics.base.match_pairs`); row by row this equals :func:`statistics`.
    """
    matched = match_pairs(references, hypotheses, prepared, prepare, str.split)
    testlen, reflen, correct = matched.hyp_len, matched.ref_len, matched.matches
    guess = np.maximum(0, testlen[:, None] - np.arange(N)[None, :])
    return np.column_stack([correct, guess, testlen, reflen]).astype("int64").reshape(len(testlen), len(STATS))


class BLEU4(Metric):
    name = "bleu4"
    description = "Corpus BLEU-4 (RadEval / pycocoevalcap BleuScorer), recomputed from per-sample n-gram statistics"
    family = "core"
    seconds_per_pair = 5e-5  # 20,000 pairs of tests/synthetic.py on the 2-core host of docs/benchmarks.md
    prepares_references = True
    columns = ("bleu4_sentence",) + STATS
    leaves = (Leaf(name="bleu4", label="BLEU-4", stats=STATS, corpus=corpus_bleu),)
    # Measured (benchmarks/memory.py): the core batch job (bleu2, bleu4, rouge) on 100,000 distinct pairs
    # peaks at 643 MB (work bounded by base.PAIR_CHUNK; the pair table and results add ~5 MB per 1,000 pairs).
    default_resources = Resources(mem_mb=1000, runtime_min=10)

    def score(self, pairs, settings, inputs, runtime):
        import pandas as pd

        prepared = prepared_references(inputs, self.name, prepare)
        stats = in_pair_chunks(lambda refs, hyps: statistics_table(refs, hyps, prepared), pairs["reference"].tolist(),
                               pairs["hypothesis"].tolist())
        out = pd.DataFrame(stats, columns=list(STATS))
        out.insert(0, "bleu4_sentence", sentence_bleu(stats))
        out.insert(0, "sample_id", pairs["sample_id"].to_numpy())
        return out


METRIC = BLEU4()

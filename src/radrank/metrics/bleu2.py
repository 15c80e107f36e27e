"""BLEU-2 as ReXrank computes it (sentence level, fast-bleu 0.0.90 semantics).

Tokens: ``str(x).lower()``, "." → " .", split on the space character only
(newlines and tabs stay inside tokens), empty tokens dropped. Score with weights
(1/2, 1/2) and fast-bleu's defaults: smoothing method 1 (a zero n-gram match
count becomes 0.1), precision denominator max(1, #hypothesis n-grams), score 0
when no unigram matches, brevity penalty 1 if c > r, 0 if c = 0, else
exp(1 − r/c). One reference per sample.

Written here rather than calling fast-bleu per pair because building a fast-bleu
object per sample dominates its cost: each distinct text is tokenised once and
the clipped matches of all pairs are counted together
(:class:`radrank.metrics.base.ReferenceGrams`). :func:`sentence_bleu2` is
the same arithmetic for one pair. tests/test_lexical.py checks equality with
fast-bleu to 1e-9.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from radrank.metrics.base import (BoardColumn, Metric, ReferenceGrams, Resources, in_pair_chunks, match_pairs,
                                  mean_leaf, prepared_references)

_EPSILON = 0.1  # fast-bleu smoothing method 1
_WEIGHTS = (0.5, 0.5)


def tokens(text) -> list[str]:
    return [t for t in str(text).lower().replace(".", " .").split(" ") if t]


def _ngrams(toks: list[str], n: int) -> Counter:
    if n == 1:
        return Counter(toks)
    return Counter(zip(*(toks[i:] for i in range(n))))


class _Prepared:
    __slots__ = ("length", "grams")

    def __init__(self, text):
        toks = tokens(text)
        self.length = len(toks)
        self.grams = [_ngrams(toks, n) for n in (1, 2)]


def sentence_bleu2(ref: _Prepared, hyp: _Prepared) -> float:
    c, r = hyp.length, ref.length
    if c == 0:
        return 0.0
    log_sum = 0.0
    for n, weight in zip((1, 2), _WEIGHTS):
        hyp_grams, ref_grams = hyp.grams[n - 1], ref.grams[n - 1]
        matches = sum(min(count, ref_grams[g]) for g, count in hyp_grams.items() if g in ref_grams)
        denominator = max(1, c - n + 1)
        if matches == 0:
            if n == 1:
                return 0.0
            precision = _EPSILON / denominator
        else:
            precision = matches / denominator
        log_sum += weight * math.log(precision)
    bp = 1.0 if c > r else math.exp(1.0 - r / c)
    return bp * math.exp(log_sum)


def score_arrays(ref_len, hyp_len, matches) -> np.ndarray:
    """BLEU-2 per sample from token counts and clipped unigram / bigram matches (shape (n, 2))."""
    c = np.asarray(hyp_len, dtype="float64")
    r = np.asarray(ref_len, dtype="float64")
    matches = np.asarray(matches, dtype="float64").reshape(len(c), 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_sum = np.zeros(len(c))
        for n, weight in zip((1, 2), _WEIGHTS):
            denominator = np.maximum(1.0, c - n + 1)
            m = matches[:, n - 1]
            precision = np.where(m == 0, _EPSILON / denominator, m / denominator)
            log_sum = log_sum + weight * np.log(precision)
        bp = np.where(c > r, 1.0, np.exp(1.0 - r / c))
        value = bp * np.exp(log_sum)
    return np.where((c == 0) | (matches[:, 0] == 0), 0.0, value)


def prepare(texts) -> ReferenceGrams:
    """References' tokens, unigrams and bigrams, numbered (:class:`radrank.metrics.base.ReferenceGrams`)."""
    return ReferenceGrams([tokens(t) for t in texts], 2)


def score_texts(references, hypotheses, prepared=None) -> list[float]:
    """BLEU-2 of each (reference, hypothesis) pair.

    Each distinct text is tokenised once (a reference, once per group when ``prepared``); clipped matches of all
    pairs come from :func:`radrank.metrics.base.match_pairs` (no per-pair Python work).
    """
    matched = match_pairs(references, hypotheses, prepared, prepare, tokens)
    return score_arrays(matched.ref_len, matched.hyp_len, matched.matches).tolist()


class BLEU2(Metric):
    name = "bleu2"
    description = "BLEU-2 per report, ReXrank's bleu_score (fast-bleu semantics), mean over reports"
    family = "core"
    seconds_per_pair = 4e-5  # 20,000 pairs of tests/synthetic.py on the 2-core host of docs/benchmarks.md
    prepares_references = True
    columns = ("bleu2",)
    leaves = (mean_leaf("bleu2", "BLEU"),)
    # Measured (benchmarks/memory.py): the core batch job (bleu2, bleu4, rouge) on 100,000 distinct pairs
    # peaks at 643 MB (work bounded by base.PAIR_CHUNK; the pair table and results add ~5 MB per 1,000 pairs).
    default_resources = Resources(mem_mb=1000, runtime_min=10)
    board = (BoardColumn("BLEU", "bleu2", 1),)

    def score(self, pairs, settings, inputs, runtime):
        import pandas as pd

        prepared = prepared_references(inputs, self.name, prepare)
        values = in_pair_chunks(lambda refs, hyps: score_texts(refs, hyps, prepared), pairs["reference"].tolist(),
                                pairs["hypothesis"].tolist())
        return pd.DataFrame({"sample_id": pairs["sample_id"].to_numpy(),
                             "bleu2": np.asarray(values, dtype="float64")})


METRIC = BLEU2()

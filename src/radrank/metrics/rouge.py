"""ROUGE-1, ROUGE-2 and ROUGE-L F-measures, as rouge-score computes them (use_stemmer=True).

Tokenisation is rouge-score's own ``tokenize`` with nltk's Porter stemmer,
through a per-word cache (the stemmer is the cost, and report vocabularies are
small); each distinct text is tokenised once per job. ROUGE-1/2 use rouge-score's
n-gram scorer. ROUGE-L needs only the LCS length, computed here with a
bit-parallel algorithm (Allison–Dix / Hyyrö) instead of rouge-score's
O(n·m) Python table; tests/test_lexical.py checks equality with
``RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)``.
"""

from __future__ import annotations

from radrank.metrics.base import MetricSpec, Resources, mean_leaf

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")

SPEC = MetricSpec(
    name="rouge",
    description="ROUGE-1/2/L F-measure (rouge-score, Porter stemming), mean over reports",
    env="core",
    columns=ROUGE_TYPES,
    leaves=(mean_leaf("rouge1", "ROUGE-1"), mean_leaf("rouge2", "ROUGE-2"), mean_leaf("rougeL", "ROUGE-L")),
    resources=Resources(mem_mb=1000, runtime_min=20),
    packages=("rouge-score", "nltk"),
)


class CachedStemmer:
    """nltk's PorterStemmer with a memo per word (same output, stemmed once)."""

    def __init__(self):
        from nltk.stem import porter

        self._stem = porter.PorterStemmer().stem
        self._memo: dict[str, str] = {}

    def stem(self, word: str) -> str:
        out = self._memo.get(word)
        if out is None:
            out = self._memo[word] = self._stem(word)
        return out


def lcs_length(a: list, b: list) -> int:
    """Length of the longest common subsequence of two token lists (bit-parallel)."""
    if len(a) < len(b):
        a, b = b, a
    masks: dict = {}
    for i, tok in enumerate(a):
        masks[tok] = masks.get(tok, 0) | (1 << i)
    row = (1 << len(a)) - 1
    for tok in b:
        m = masks.get(tok)
        if m:
            u = row & m
            row = (row + u) | (row - u)
    return len(a) - (row & ((1 << len(a)) - 1)).bit_count()


class RougeScorer:
    """Scores (reference, hypothesis) pairs; keeps tokenised texts across calls."""

    def __init__(self):
        from rouge_score import rouge_scorer, scoring, tokenize

        self._tokenize = tokenize.tokenize
        self._ngrams = rouge_scorer._create_ngrams
        self._score_ngrams = rouge_scorer._score_ngrams
        self._fmeasure = scoring.fmeasure
        self._stemmer = CachedStemmer()
        self._cache: dict[str, tuple] = {}

    def _prepare(self, text: str):
        got = self._cache.get(text)
        if got is None:
            toks = self._tokenize(text, self._stemmer)
            got = self._cache[text] = (toks, self._ngrams(toks, 1), self._ngrams(toks, 2))
        return got

    def score(self, reference: str, hypothesis: str) -> tuple[float, float, float]:
        ref_toks, ref1, ref2 = self._prepare(reference)
        hyp_toks, hyp1, hyp2 = self._prepare(hypothesis)
        r1 = self._score_ngrams(ref1, hyp1).fmeasure
        r2 = self._score_ngrams(ref2, hyp2).fmeasure
        if not ref_toks or not hyp_toks:
            rl = 0.0
        else:
            lcs = lcs_length(ref_toks, hyp_toks)
            rl = self._fmeasure(lcs / len(hyp_toks), lcs / len(ref_toks))
        return r1, r2, rl


def score(pairs, settings, inputs):
    import pandas as pd

    scorer = RougeScorer()
    rows = [scorer.score(r, h) for r, h in zip(pairs["reference"], pairs["hypothesis"])]
    out = pd.DataFrame(rows, columns=list(ROUGE_TYPES), dtype="float64")
    out.insert(0, "sample_id", pairs["sample_id"].to_numpy())
    return out

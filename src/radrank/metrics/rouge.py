"""ROUGE-1, ROUGE-2 and ROUGE-L F-measures, as rouge-score computes them (use_stemmer=True).

Tokenisation is rouge-score's ``tokenize`` with nltk's Porter stemmer, each
token's outcome memoised (:func:`tokenizer`: the stemmer is the cost, and report
vocabularies are small); each distinct text is tokenised once per job. ROUGE-1/2 overlaps of all
pairs are counted together (:class:`radrank.metrics.base.ReferenceGrams`)
and turned into F-measures with rouge-score's arithmetic. ROUGE-L needs only
the LCS length, computed here with a bit-parallel algorithm (Allison–Dix /
Hyyrö) instead of rouge-score's O(n·m) Python table; tests/test_lexical.py checks equality with
``RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)``.
"""

from __future__ import annotations

import threading

import numpy as np

from radrank.metrics.base import (Metric, ReferenceGrams, Resources, in_pair_chunks, match_pairs, mean_leaf,
                                  prepared_references, sequences)

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")

# Imports are inside the functions: rouge-score's scorer module imports nltk whole (~2 s); the metric
# needs only rouge_score.tokenize and nltk's Porter stemmer (:func:`porter_module`).


_PORTER_LOCK = threading.Lock()
_porter = None  # the module, once loaded
_NLTK_PORTER = ("nltk", "nltk.stem", "nltk.redos", "nltk.termsec", "nltk.stem.api", "nltk.stem.porter")


def porter_module():
    """nltk's ``nltk.stem.porter`` module, imported without running nltk's package ``__init__``.

    ``import nltk`` imports most of nltk and scipy.stats: about 2 s of CPU, ten times a ROUGE job's own
    work on 500 pairs. The Porter stemmer needs none of it (porter.py imports only nltk.redos,
    nltk.termsec and nltk.stem.api), so its source file is loaded under bare ``nltk`` and ``nltk.stem``
    packages, which are taken out of ``sys.modules`` again at once: a later ``import nltk`` anywhere
    gets the real package. Same file, same stems (tests/test_lexical.py compares with nltk's own).
    Loaded once per process, under a lock: the workflow's core-environment jobs run in threads of one
    process, and two threads swapping the bare packages in and out would see half-loaded modules.
    """
    global _porter
    with _PORTER_LOCK:
        if _porter is None:
            _porter = _load_porter()
        return _porter


def _load_porter():
    import importlib
    import importlib.util
    import sys
    import types

    if "nltk.stem.porter" in sys.modules:  # nltk already imported: use it
        return sys.modules["nltk.stem.porter"]
    spec = importlib.util.find_spec("nltk")  # locates the package without executing it
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("nltk is not installed (needed for ROUGE's Porter stemming)")
    root = spec.submodule_search_locations[0]
    saved = {name: sys.modules.pop(name) for name in _NLTK_PORTER if name in sys.modules}
    try:
        for name, path in (("nltk", root), ("nltk.stem", f"{root}/stem")):
            package = types.ModuleType(name)
            package.__path__ = [path]
            sys.modules[name] = package
        return importlib.import_module("nltk.stem.porter")
    finally:
        for name in _NLTK_PORTER:
            sys.modules.pop(name, None)
        sys.modules.update(saved)


def _masks(a: list) -> dict:
    """Per token of ``a``, the bit set of its positions (bit i = position i)."""
    masks: dict = {}
    for i, tok in enumerate(a):
        masks[tok] = masks.get(tok, 0) | (1 << i)
    return masks


def _lcs_bits(masks: dict, n_a: int, b: list) -> int:
    """LCS length of a sequence ``a`` (given by its :func:`_masks` and length) and ``b``.

    Hyyrö's bit-vector recurrence V' = (V + U) | (V − U), U = V & M[token]:
    carries and borrows only move upwards, so bits above ``n_a`` never disturb
    the low ones and are masked off at the end.
    """
    row = (1 << n_a) - 1
    get = masks.get
    for tok in b:
        m = get(tok)
        if m:
            u = row & m
            row = (row + u) | (row - u)
    return n_a - (row & ((1 << n_a) - 1)).bit_count()


def lcs_length(a: list, b: list) -> int:
    """Length of the longest common subsequence of two token lists (bit-parallel)."""
    if len(a) < len(b):
        a, b = b, a
    return _lcs_bits(_masks(a), len(a), b)


def _fmeasure(precision: np.ndarray, recall: np.ndarray) -> np.ndarray:
    """rouge-score's ``scoring.fmeasure``, elementwise, with the same arithmetic."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(precision + recall > 0, 2 * precision * recall / (precision + recall), 0.0)


class RougeScorer:
    """Scores (reference, hypothesis) pairs; keeps tokenised texts across calls."""

    def __init__(self):
        from rouge_score import rouge_scorer, scoring

        self._tokenize = tokenizer()
        self._ngrams = rouge_scorer._create_ngrams
        self._score_ngrams = rouge_scorer._score_ngrams
        self._fmeasure = scoring.fmeasure
        self._cache: dict[str, tuple] = {}

    def _prepare(self, text: str):
        got = self._cache.get(text)
        if got is None:
            toks = self._tokenize(text)
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


def tokenizer():
    """rouge-score's ``tokenize(text, PorterStemmer)``, its tokens memoised: text -> tokens.

    rouge-score lower-cases the text, replaces every run of characters outside [a-z0-9] with a space, splits on
    whitespace, stems each token longer than 3 characters and keeps the results that match ``^[a-z0-9]+$``. After
    the replacement a text holds only [a-z0-9] and spaces, so ``str.split()`` gives the same tokens less the empty
    ones, which the last check would drop; what becomes of each token (stemmed or kept, then kept or dropped)
    depends on the token alone and is memoised. Same tokens as rouge-score's (tests/test_lexical.py), in half the
    time: its per-token stemming call and regular-expression check were 60 % of a ROUGE job.
    """
    from rouge_score import tokenize

    replace = tokenize.NON_ALPHANUM_RE.sub
    valid = tokenize.VALID_TOKEN_RE.match
    stem = porter_module().PorterStemmer().stem  # once per token: the memo below is per token
    memo: dict = {}

    def becomes(token: str):
        out = stem(token) if len(token) > 3 else token
        out = memo[token] = out if valid(out) else None
        return out

    def tokenize_text(text: str) -> list:
        out = []
        for token in replace(" ", text.lower()).split():
            got = memo.get(token, False)
            if got is False:
                got = becomes(token)
            if got is not None:
                out.append(got)
        return out

    return tokenize_text


def prepare(texts, tokenize=None) -> ReferenceGrams:
    """References tokenised as rouge-score does, their unigrams and bigrams numbered
    (:class:`radrank.metrics.base.ReferenceGrams`)."""
    tokenize = tokenize or tokenizer()
    return ReferenceGrams([tokenize(t) for t in texts], 2, keep_sequences=True)  # ROUGE-L reads them


def score_texts(references, hypotheses, tokenize=None, prepared=None) -> np.ndarray:
    """(n, 3) array of ROUGE-1, ROUGE-2 and ROUGE-L F-measures of each (reference, hypothesis) pair.

    Each distinct text is tokenised once (a reference, once per group when ``prepared``); ROUGE-1/2 overlaps of all
    pairs come from :func:`radrank.metrics.base.match_pairs` (the multiset intersection rouge-score sums), and the LCS
    of each distinct pair of texts is computed once, on token ids, reusing the bit masks of the longer text (a
    hypothesis token no reference has is -1: it matches none of the reference's).
    """
    tokenize = tokenize or tokenizer()
    matched = match_pairs(references, hypotheses, prepared, lambda texts: prepare(texts, tokenize), tokenize)
    grams, ref_index, hyps, hyp_index = matched.grams, matched.ref_index, matched.hyps, matched.hyp_index
    ref_len, hyp_len, overlap = matched.ref_len, matched.hyp_len, matched.matches
    out = np.zeros((len(ref_index), 3))
    for n in (1, 2):
        # rouge_score._score_ngrams: precision = overlap / max(#hyp n-grams, 1), recall likewise.
        hyp_count = np.maximum(np.maximum(hyp_len - n + 1, 0), 1)
        ref_count = np.maximum(np.maximum(ref_len - n + 1, 0), 1)
        out[:, n - 1] = _fmeasure(overlap[:, n - 1] / hyp_count, overlap[:, n - 1] / ref_count)

    # ROUGE-L: LCS per distinct (reference, hypothesis) pair; 0 when either side has no token.
    lcs = np.zeros(len(ref_index), dtype="int64")
    used = np.unique(ref_index)
    ref_docs = dict(zip(used.tolist(), grams.reference_sequences(used)))
    hyp_docs = sequences(*hyps)
    masks: dict[tuple, dict] = {}
    done: dict[tuple, int] = {}
    ref_lens, hyp_lens = grams.lengths.tolist(), hyps[1].tolist()
    for p, (r, h) in enumerate(zip(ref_index.tolist(), hyp_index.tolist())):
        n_r, n_h = ref_lens[r], hyp_lens[h]
        if not n_r or not n_h:
            continue
        got = done.get((r, h))
        if got is None:  # the bit masks of the longer side, made once per text
            key, a, b = (("r", r), ref_docs[r], hyp_docs[h]) if n_r >= n_h else (("h", h), hyp_docs[h], ref_docs[r])
            m = masks.get(key)
            if m is None:
                m = masks[key] = _masks(a)
            got = done[(r, h)] = _lcs_bits(m, len(a), b)
        lcs[p] = got
    valid = (ref_len > 0) & (hyp_len > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rl = _fmeasure(lcs / hyp_len, lcs / ref_len)
    out[:, 2] = np.where(valid, rl, 0.0)
    return out


class ROUGE(Metric):
    name = "rouge"
    description = "ROUGE-1/2/L F-measure (rouge-score, Porter stemming), mean over reports"
    family = "core"
    seconds_per_pair = 7e-5  # 20,000 pairs of tests/synthetic.py on the 2-core host of docs/benchmarks.md
    prepares_references = True
    columns = ROUGE_TYPES
    leaves = (mean_leaf("rouge1", "ROUGE-1"), mean_leaf("rouge2", "ROUGE-2"), mean_leaf("rougeL", "ROUGE-L"))
    # Measured (benchmarks/memory.py): the core batch job (bleu2, bleu4, rouge) on 100,000 distinct pairs
    # peaks at 643 MB (work bounded by base.PAIR_CHUNK; the pair table and results add ~5 MB per 1,000 pairs).
    default_resources = Resources(mem_mb=1000, runtime_min=20)
    packages = ("rouge-score", "nltk")

    def score(self, pairs, settings, inputs, runtime):
        import pandas as pd

        tokenize = tokenizer()  # one stemmer memo for every chunk
        prepared = prepared_references(inputs, self.name, lambda texts: prepare(texts, tokenize))
        values = in_pair_chunks(lambda refs, hyps: score_texts(refs, hyps, tokenize, prepared),
                                pairs["reference"].tolist(), pairs["hypothesis"].tolist())
        out = pd.DataFrame(values, columns=list(ROUGE_TYPES), dtype="float64")
        out.insert(0, "sample_id", pairs["sample_id"].to_numpy())
        return out


METRIC = ROUGE()

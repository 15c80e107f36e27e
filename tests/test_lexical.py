"""BLEU-2, corpus BLEU-4 and ROUGE against the reference libraries they reproduce.

* bleu2 == fast-bleu 0.0.90 ``BLEU([ref], {"bigram": (1/2, 1/2)})`` with ReXrank's tokens (1e-9);
* bleu4 per-sample statistics, per-sample values and corpus value == pycocoevalcap's
  ``BleuScorer(n=4).compute_score(option="closest")`` (1e-12), on all pairs and on subsets;
* rouge == ``rouge_score.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)`` F-measures (1e-12);
* the bit-parallel LCS == a plain dynamic programme;
* the same values with the group's references prepared once and kept between runs
  (radrank.metrics.prepared.PreparedReferences), which never serves another group's, another code's or a damaged
  preparation.
"""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from _strict import reference as reference_package

from radrank import metrics
from radrank.metrics import bleu2, bleu4, rouge
from radrank.metrics.base import ReferenceGrams, distinct_texts
from radrank.metrics.prepared import PreparedReferences

fast_bleu = reference_package("fast_bleu")
bleu_scorer = reference_package("pycocoevalcap.bleu.bleu_scorer")
rouge_scorer = reference_package("rouge_score.rouge_scorer")

LONG_REF = " ".join(
    ["The lungs are clear without focal consolidation, effusion or pneumothorax."] * 22
    + ["Heart size is normal.", "Mediastinal contours are unremarkable."] * 10
)  # ~300 words
LONG_HYP = " ".join(
    ["Lungs are clear; no focal consolidation or effusion."] * 18
    + ["Heart size is mildly enlarged.", "No pneumothorax."] * 12
)

HANDWRITTEN = [
    ("No acute cardiopulmonary process.", "No acute findings."),
    ("Small bilateral pleural effusions with bibasilar atelectasis.",
     "Bilateral pleural effusions and basilar atelectasis."),
    ("Mild cardiomegaly. No pleural effusion.", "Mild cardiomegaly with clear lungs."),
    ("a b c d", "e f g"),
    ("no pneumothorax .", "no effusion"),
    ("Lungs are clear.", ""),  # empty hypothesis
    ("", "Lungs are clear."),  # empty reference
    ("", ""),
    ("   ", "\n\t"),  # whitespace only
    ("Effusion", "Effusion"),  # one word, identical
    ("Effusion", "effusion."),  # one word, case and a full stop
    ("Effusion", "Pneumothorax"),
    ("Heart size is normal. Lungs are clear.", "Heart size is normal. Lungs are clear."),  # identical
    ("the the the the the", "the the the"),  # repeated words, clipping
    ("the the", "the the the the the the the"),
    ("no effusion no effusion no effusion", "no effusion"),
    ("No.  5 ... sizes:3.5cm,4cm", "No. 5... sizes: 3.5 cm, 4 cm"),  # punctuation, double space
    ("FINDINGS:\nNo focal consolidation.\nIMPRESSION:\tNormal.",
     "Findings: no focal consolidation. Impression: normal."),
    ("no\teffusion\nseen.", "no effusion seen."),  # tabs and newlines stay inside ReXrank tokens
    ("Pleural effusión — small; café-au-lait lesion.", "pleural effusion - small; cafe au lait lesion"),
    ("İstanbul ﬁndings: straße", "istanbul findings strasse"),  # unicode lower-casing edge cases
    ("肺 炎 🙂 no acute", "肺 炎 no acute 🙂"),
    ("a\u00a0b c", "a\u00a0b c d"),  # no-break space: one ReXrank token, two whitespace tokens
    ("Running runs ran; studies studying studied.", "run running studies study"),  # stemming
    ("x-ray of the chest (PA/lateral) 2024-01-01", "chest x ray PA lateral 2024 01 01"),
    ("The cat sat on the mat.", "The mat sat on the cat."),  # same bag, different order
    ("a b a b a b a b", "b a b a b a b a"),
    ("one", "one two three four five six seven eight nine ten"),  # long hypothesis, short reference
    ("one two three four five six seven eight nine ten", "one"),
    ("Stable. Stable. Stable.", "Stable."),
    ("...", "..."),
    (".", "no"),
    ("NO ACUTE PROCESS", "no acute process"),
    ("Tube tip 4 cm above carina.", "Tube tip 4.5 cm above the carina."),
    (LONG_REF, LONG_HYP),
    (LONG_HYP, LONG_REF),
    (LONG_REF, LONG_REF),
]

_VOCAB = (
    "no acute cardiopulmonary process lungs are clear pleural effusion effusions pneumothorax "
    "mild moderate severe cardiomegaly heart size is normal enlarged atelectasis bibasilar left right "
    "lower upper lobe opacity consolidation tube tip cm 4 3.5 unchanged stable seen the a of with and"
).split() + ["No", "NO", "Effusion.", "effusion,", "clear.", "(PA)", "x-ray", "café", "naïve", "🙂", "肺",
             ";", ":", "-", "...", "\n", "\t", "seen.\nNo", "lung\tbase"]


def _generated(n: int, seed: int) -> list[tuple[str, str]]:
    """Seeded reference / hypothesis pairs: the hypothesis is an edit of the reference."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        ref = [rng.choice(_VOCAB) for _ in range(rng.randint(1, 40))]
        hyp = [w for w in ref if rng.random() < 0.7]
        for _ in range(rng.randint(0, 6)):
            hyp.insert(rng.randint(0, len(hyp)), rng.choice(_VOCAB))
        if rng.random() < 0.2:
            rng.shuffle(hyp)
        sep = rng.choice([" ", " ", " ", "  ", "\n"])
        out.append((" ".join(ref), sep.join(hyp)))
    return out


VARIED_PAIRS = HANDWRITTEN + _generated(40, seed=20240601)


def _frame(pairs):
    return pd.DataFrame({
        "sample_id": [f"s{i:03d}" for i in range(len(pairs))],
        "reference": [r for r, _ in pairs],
        "hypothesis": [h for _, h in pairs],
    })


def _fast_bleu2(reference: str, hypothesis: str) -> float:
    scorer = fast_bleu.BLEU([bleu2.tokens(reference)], {"bigram": (1 / 2, 1 / 2)})
    return scorer.get_score([bleu2.tokens(hypothesis)])["bigram"][0]


def _bleu_scorer(pairs):
    scorer = bleu_scorer.BleuScorer(n=4)
    for reference, hypothesis in pairs:
        scorer += (hypothesis, [reference])
    corpus, per_sample = scorer.compute_score(option="closest")
    return scorer, corpus, per_sample


def test_varied_pairs_are_varied():
    assert len(VARIED_PAIRS) >= 50
    assert len(set(VARIED_PAIRS)) == len(VARIED_PAIRS)
    assert 290 <= len(LONG_REF.split()) <= 320


@pytest.mark.parametrize("name", ["bleu2", "bleu4", "rouge"])
def test_scoring_in_chunks_equals_one_pass(name, monkeypatch):
    """Chunks of pairs (bounded memory) give exactly the values of one pass over all pairs,
    in order, also when a text recurs in several chunks."""
    from radrank.metrics import base

    frame = _frame(VARIED_PAIRS + [(LONG_REF, LONG_HYP)] + VARIED_PAIRS[:5])
    whole = metrics.score(name, frame)
    monkeypatch.setattr(base, "PAIR_CHUNK", 7)
    chunked = metrics.score(name, frame)
    pd.testing.assert_frame_equal(chunked, whole, check_exact=True)
    monkeypatch.setattr(base, "PAIR_CHUNK", len(frame) + 1)
    pd.testing.assert_frame_equal(metrics.score(name, frame), whole, check_exact=True)


def test_chunks_take_the_pairs_reference_by_reference():
    """A leaderboard's pairs come model after model. Each chunk gets a reference's pairs together, so a reference
    is tokenised and counted once per chunk it falls in, not once per model; the values come back in the pairs'
    order."""
    from radrank.metrics.base import in_pair_chunks

    refs = [f"reference {case}" for _model in range(4) for case in range(3)]
    hyps = [f"hypothesis {model} {case}" for model in range(4) for case in range(3)]
    chunks = []

    def fn(r, h):
        chunks.append(list(r))
        return [f"{a}|{b}" for a, b in zip(r, h)]

    out = in_pair_chunks(fn, refs, hyps, size=4)
    assert [sorted(set(c)) for c in chunks] == [["reference 0"], ["reference 1"], ["reference 2"]]
    assert list(out) == [f"{a}|{b}" for a, b in zip(refs, hyps)]


@pytest.mark.parametrize("name", ["bleu2", "bleu4", "rouge"])
def test_a_worse_model_gets_no_better_models_values_when_the_chunks_regroup_the_pairs(name, monkeypatch):
    """A leaderboard's pairs, model after model: a model that copies each reference and one that answers one
    boilerplate line, on the same references, in chunks smaller than a model. Regrouped by reference, every pair
    still gets its own value: the copier's equal the one-pass values of perfect answers and the boilerplate model's
    those of its own line, so the boilerplate model's mean stays below the copier's."""
    from radrank.metrics import base

    refs = [r for r, _ in VARIED_PAIRS[:12]]
    copier = [(r, r) for r in refs]
    boilerplate = [(r, "No acute cardiopulmonary process.") for r in refs]
    frame = _frame(boilerplate + copier)  # the worse model first: it would win any swap
    monkeypatch.setattr(base, "PAIR_CHUNK", 5)
    chunked = metrics.score(name, frame)
    monkeypatch.setattr(base, "PAIR_CHUNK", len(frame) + 1)
    worse, better = metrics.score(name, _frame(boilerplate)), metrics.score(name, _frame(copier))
    n = len(refs)
    for column in chunked.columns.drop("sample_id"):
        np.testing.assert_array_equal(chunked[column].to_numpy()[:n], worse[column].to_numpy())
        np.testing.assert_array_equal(chunked[column].to_numpy()[n:], better[column].to_numpy())
    value = {"bleu2": "bleu2", "bleu4": "bleu4_sentence", "rouge": "rougeL"}[name]
    assert chunked[value].to_numpy()[n:].mean() > chunked[value].to_numpy()[:n].mean()


def test_porter_stemmer_loads_without_nltk_package_and_stems_as_nltk():
    """ROUGE's stemmer comes from nltk's own porter.py without importing nltk (and scipy) whole,
    leaves no half-loaded nltk behind, and stems a report vocabulary exactly as nltk does."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    code = ("import sys; from radrank.metrics import rouge; s = rouge.porter_module().PorterStemmer();"
            "words = sys.stdin.read().split(); print(' '.join(map(s.stem, words)));"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('nltk', 'scipy')))")
    words = sorted({w.strip(".,;:").lower() for pair in VARIED_PAIRS for text in pair for w in text.split()} |
                   {"effusions", "opacities", "consolidation", "generalizations", "atelectatic", "running"})
    proc = subprocess.run([sys.executable, "-c", code], input=" ".join(words), capture_output=True, text=True,
                          check=True, env=env)
    stems, loaded = proc.stdout.splitlines()
    assert loaded == "[]"
    from nltk.stem import porter

    assert stems.split() == [porter.PorterStemmer().stem(w) for w in words if w]


# --- BLEU-2 -----------------------------------------------------------------------------------------


def test_bleu2_tokens_follow_rexrank():
    assert bleu2.tokens("No acute.\nEffusion\tseen.") == ["no", "acute", ".\neffusion\tseen", "."]
    assert bleu2.tokens("  a  b. ") == ["a", "b", "."]
    assert bleu2.tokens("a\u00a0b") == ["a\u00a0b"]
    assert bleu2.tokens("") == []
    assert bleu2.tokens(None) == ["none"]


def test_bleu2_equals_fast_bleu_on_varied_pairs():
    frame = _frame(VARIED_PAIRS)
    ours = metrics.score("bleu2", frame)
    assert list(ours.columns) == ["sample_id", "bleu2"]
    assert ours["sample_id"].tolist() == frame["sample_id"].tolist()
    expected = np.array([_fast_bleu2(r, h) for r, h in VARIED_PAIRS])
    np.testing.assert_allclose(ours["bleu2"].to_numpy(), expected, rtol=0, atol=1e-9)
    np.testing.assert_allclose(bleu2.score_texts(frame["reference"], frame["hypothesis"]), expected,
                               rtol=0, atol=1e-9)
    # The single-pair arithmetic agrees too.
    single = [bleu2.sentence_bleu2(bleu2._Prepared(r), bleu2._Prepared(h)) for r, h in VARIED_PAIRS]
    np.testing.assert_allclose(single, expected, rtol=0, atol=1e-9)
    # The set is not degenerate: zeros, ones and values in between all occur.
    assert (expected == 0).sum() >= 5 and (expected == 1).sum() >= 3 and ((expected > 0) & (expected < 1)).sum() >= 30


@pytest.mark.parametrize("reference, hypothesis, value, places", [
    ("No acute cardiopulmonary process.", "No acute findings.", 0.3894, 4),
    ("Small bilateral pleural effusions with bibasilar atelectasis.",
     "Bilateral pleural effusions and basilar atelectasis.", 0.518059, 6),
    ("a b c d", "e f g", 0.0, 12),
    ("no pneumothorax .", "no effusion", 0.135624, 6),
])
def test_bleu2_golden_values(reference, hypothesis, value, places):
    ours = bleu2.score_texts([reference], [hypothesis])[0]
    assert round(ours, places) == value
    assert ours == pytest.approx(_fast_bleu2(reference, hypothesis), abs=1e-9)


def test_bleu2_smoothing_and_brevity_rules():
    # one matching word: p1 = 1, p2 = 0.1 / max(1, 0) (smoothing method 1), bp = 1 (c == r)
    assert bleu2.score_texts(["effusion"], ["effusion"])[0] == pytest.approx(0.1 ** 0.5, abs=1e-15)
    # no unigram match -> 0 even though the bigram precision is smoothed
    assert bleu2.score_texts(["a b"], ["c d"]) == [0.0]
    # empty hypothesis -> 0; brevity penalty exp(1 - r/c) when c <= r
    assert bleu2.score_texts(["a b c d"], [""]) == [0.0]
    assert bleu2.score_texts(["a b c d"], ["a b"])[0] == pytest.approx(np.exp(1 - 4 / 2), abs=1e-15)


# --- corpus BLEU-4 ----------------------------------------------------------------------------------


def test_bleu4_statistics_and_values_equal_bleu_scorer():
    frame = _frame(VARIED_PAIRS)
    ours = metrics.score("bleu4", frame)
    assert ours["sample_id"].tolist() == frame["sample_id"].tolist()
    scorer, corpus, per_sample = _bleu_scorer(VARIED_PAIRS)
    stats = ours[list(bleu4.STATS)].to_numpy()
    for i, comps in enumerate(scorer.ctest):
        assert stats[i, :4].tolist() == comps["correct"], i
        assert stats[i, 4:8].tolist() == comps["guess"], i
        assert stats[i, 8] == comps["testlen"] and [stats[i, 9]] == comps["reflen"], i
        # the row-by-row helper gives the same statistics
        assert bleu4.statistics(*VARIED_PAIRS[i]) == stats[i].tolist()
    np.testing.assert_allclose(ours["bleu4_sentence"].to_numpy(), per_sample[3], rtol=0, atol=1e-12)
    (leaf,) = bleu4.METRIC.leaves
    value = leaf.value(leaf.statistics(ours).sum(axis=0))
    assert abs(value - corpus[3]) <= 1e-12
    # BLEU-1..3 from the same totals
    for order in (1, 2, 3):
        assert abs(bleu4.corpus_bleu(stats.sum(axis=0), order=order) - corpus[order - 1]) <= 1e-12
    # the corpus value is not the mean of per-sample values
    assert abs(value - ours["bleu4_sentence"].mean()) > 0.01


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_bleu4_corpus_on_subsets_equals_bleu_scorer(seed):
    ours = metrics.score("bleu4", _frame(VARIED_PAIRS))
    (leaf,) = bleu4.METRIC.leaves
    stats = leaf.statistics(ours)
    rng = np.random.default_rng(seed)
    subset = np.sort(rng.choice(len(VARIED_PAIRS), size=rng.integers(1, len(VARIED_PAIRS)), replace=False))
    _, corpus, _ = _bleu_scorer([VARIED_PAIRS[i] for i in subset])
    assert abs(leaf.value(stats[subset].sum(axis=0)) - corpus[3]) <= 1e-12
    # with repetitions (a bootstrap resample), through counts
    draw = rng.integers(0, len(VARIED_PAIRS), size=len(VARIED_PAIRS))
    _, corpus, _ = _bleu_scorer([VARIED_PAIRS[i] for i in draw])
    counts = np.bincount(draw, minlength=len(VARIED_PAIRS)).astype(float)
    assert abs(leaf.value(counts @ stats) - corpus[3]) <= 1e-12


def test_bleu4_empty_corpus_matches_bleu_scorer():
    _, corpus, _ = _bleu_scorer([("", "")])
    assert bleu4.corpus_bleu(np.zeros(len(bleu4.STATS))) == corpus[3] == 0.0


# --- ROUGE ------------------------------------------------------------------------------------------


def test_rouge_equals_rouge_score_on_varied_pairs():
    frame = _frame(VARIED_PAIRS)
    ours = metrics.score("rouge", frame)
    assert list(ours.columns) == ["sample_id", "rouge1", "rouge2", "rougeL"]
    assert ours["sample_id"].tolist() == frame["sample_id"].tolist()
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    expected = [scorer.score(r, h) for r, h in VARIED_PAIRS]
    for rouge_type in ("rouge1", "rouge2", "rougeL"):
        want = np.array([e[rouge_type].fmeasure for e in expected])
        np.testing.assert_allclose(ours[rouge_type].to_numpy(), want, rtol=0, atol=1e-12, err_msg=rouge_type)
    # the single-pair scorer agrees as well
    single = rouge.RougeScorer()
    for (r, h), e in zip(VARIED_PAIRS, expected):
        assert single.score(r, h) == pytest.approx(
            (e["rouge1"].fmeasure, e["rouge2"].fmeasure, e["rougeL"].fmeasure), abs=1e-12)


def test_rouge_tokenizer_gives_rouge_scores_tokens():
    """The memoised tokenizer against rouge-score's own tokenize with nltk's PorterStemmer, text by text: upper case,
    accents and other scripts, digits, punctuation inside and around words, tabs, newlines and non-breaking
    spaces, words of 3 letters or fewer (not stemmed), empty and blank texts, and the same text twice (memo)."""
    from nltk.stem import porter
    from rouge_score import tokenize

    stemmer = porter.PorterStemmer()
    texts = [t for pair in VARIED_PAIRS for t in pair] + [
        "", "   ", "\t\n", "İstanbul CAFÉ naïve résumé", "3.5mm x-ray, 10-12 cm; T2/FLAIR (hyperintense)",
        "Tabs\tand\nnewlines\r\nhere", "\u00a0no-break\u2003em space", "a an the is was has its bus runs running ran",
        "___ *** ...", "ÆØÅ straße ŒUVRE", "Ⅻ ① ２ fullwidth ｆｏｏ", "effusion effusions EFFUSION", "No acute disease."]
    texts += texts  # a second time: from the memo
    ours = rouge.tokenizer()
    for text in texts:
        assert ours(text) == tokenize.tokenize(text, stemmer), repr(text)


def test_rouge_known_values():
    values = rouge.score_texts(["The cat sat on the mat.", "", "runs"], ["The mat sat on the cat.", "x", "running"])
    # same bag of words: rouge1 = 1; bigrams "the cat/cat sat/sat on/on the/the mat" vs
    # "the mat/mat sat/sat on/on the/the cat": 4 of 5 shared; LCS "the sat on the" = 4 of 6
    assert values[0].tolist() == pytest.approx([1.0, 0.8, 4 / 6], abs=1e-15)
    assert values[1].tolist() == [0.0, 0.0, 0.0]
    assert values[2].tolist() == [1.0, 0.0, 1.0]  # "runs" and "running" both stem to "run"


def _lcs_dp(a, b) -> int:
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


@pytest.mark.parametrize("len_a, len_b, alphabet", [
    (0, 5, 3), (1, 1, 1), (5, 0, 3), (7, 9, 2), (30, 40, 5), (63, 64, 4), (64, 64, 3), (65, 63, 6),
    (64, 130, 8), (100, 97, 20), (200, 150, 2), (1024, 5, 4), (1100, 1050, 12), (1500, 40, 30),
])
def test_lcs_length_equals_plain_dp(len_a, len_b, alphabet):
    rng = random.Random(len_a * 7919 + len_b * 31 + alphabet)
    words = [f"w{i}" for i in range(alphabet)]
    a = [rng.choice(words) for _ in range(len_a)]
    b = [rng.choice(words) for _ in range(len_b)]
    expected = _lcs_dp(a, b)
    assert rouge.lcs_length(a, b) == expected
    assert rouge.lcs_length(b, a) == expected


def test_lcs_length_edge_cases():
    assert rouge.lcs_length([], []) == 0
    assert rouge.lcs_length(list("abcdef" * 20), list("abcdef" * 20)) == 120
    assert rouge.lcs_length(list("ab" * 50), list("ba" * 50)) == 99
    assert rouge.lcs_length(["x"] * 70, ["y"] * 70) == 0


# --- shared machinery -------------------------------------------------------------------------------


def _naive_matches(ref, hyp, max_n):
    out = []
    for n in range(1, max_n + 1):
        r = Counter(tuple(ref[i:i + n]) for i in range(len(ref) - n + 1))
        h = Counter(tuple(hyp[i:i + n]) for i in range(len(hyp) - n + 1))
        out.append(sum(min(c, r[g]) for g, c in h.items()))
    return out


def clipped_ngram_matches(docs, ref_index, hyp_index, max_n, chunk=1 << 22):
    """ReferenceGrams' matches of pairs of ``docs`` (a document may be a reference and a hypothesis)."""
    refs, ref_local = np.unique(np.asarray(ref_index, dtype="int64"), return_inverse=True)
    hyps, hyp_local = np.unique(np.asarray(hyp_index, dtype="int64"), return_inverse=True)
    grams = ReferenceGrams([docs[i] for i in refs], max_n)
    return grams.matches(ref_local, [docs[i] for i in hyps], hyp_local, chunk)


@pytest.mark.parametrize("chunk", [1, 7, 1 << 22])
def test_clipped_ngram_matches_equals_counters(chunk):
    rng = random.Random(chunk)
    docs = [[rng.choice("abcde") for _ in range(rng.randint(0, 12))] for _ in range(25)] + [[], ["a"], ["ab", "a"]]
    ref_index = [rng.randrange(len(docs)) for _ in range(120)] + [25, 26, 27, 26]
    hyp_index = [rng.randrange(len(docs)) for _ in range(120)] + [26, 25, 26, 27]
    got = clipped_ngram_matches(docs, ref_index, hyp_index, 4, chunk=chunk)
    assert got.shape == (124, 4) and got.dtype == np.int64
    for p, (r, h) in enumerate(zip(ref_index, hyp_index)):
        assert got[p].tolist() == _naive_matches(docs[r], docs[h], 4), p
    assert clipped_ngram_matches([[], []], [0], [1], 2).tolist() == [[0, 0]]
    assert clipped_ngram_matches([["a"]], [], [], 2).shape == (0, 2)
    # hypothesis tokens and n-grams that no reference has match nothing, however often they repeat
    grams = ReferenceGrams([["a", "b", "c"]], 3)
    assert grams.matches([0, 0], [["x", "y", "x", "y"], ["a", "x", "b", "c", "a", "b"]], [0, 1]).tolist() == [
        [0, 0, 0], [3, 2, 0]]


def _library_values(name: str, pairs: list) -> np.ndarray:
    """The reference library's per-sample values of metric ``name`` (columns as :func:`_our_values`)."""
    if name == "bleu2":
        return np.array([[_fast_bleu2(r, h)] for r, h in pairs])
    if name == "bleu4":
        _, _, per_sample = _bleu_scorer(pairs)
        return np.array(per_sample[3])[:, None]
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    return np.array([[s[t].fmeasure for t in ("rouge1", "rouge2", "rougeL")] for s in (scorer.score(r, h)
                                                                                      for r, h in pairs)])


def _our_values(name: str, frame, references=None) -> np.ndarray:
    columns = {"bleu2": ["bleu2"], "bleu4": ["bleu4_sentence"], "rouge": ["rouge1", "rouge2", "rougeL"]}[name]
    inputs = {} if references is None else {"references": references}
    return metrics.score(name, frame, inputs=inputs)[columns].to_numpy()


# a group: every reference paired with several hypotheses (the varied pairs' and others'), as a leaderboard has
GROUP_PAIRS = VARIED_PAIRS + [(r, VARIED_PAIRS[(i * 7 + 3) % len(VARIED_PAIRS)][1])
                              for i, (r, _) in enumerate(VARIED_PAIRS)]


@pytest.mark.parametrize("name", ["bleu2", "bleu4", "rouge"])
def test_references_prepared_once_and_kept_give_the_librarys_values(name, tmp_path):
    """The group's references are prepared in the first run, kept in its folder and served to the next run (a new
    PreparedReferences, as a new job has); both runs' values are the reference library's. A pair whose reference
    is not the group's is scored with its own, prepared on the spot."""
    group = [r for r, _ in VARIED_PAIRS] + ["Reference of a case no model here answered."]
    expected = _library_values(name, GROUP_PAIRS)
    first = PreparedReferences(group, tmp_path)
    np.testing.assert_allclose(_our_values(name, _frame(GROUP_PAIRS), first), expected, rtol=0, atol=1e-12)
    assert first.made == [name] and first.served == [] and (tmp_path / f"{name}.pickle").exists()
    again = PreparedReferences(group, tmp_path)
    np.testing.assert_allclose(_our_values(name, _frame(GROUP_PAIRS), again), expected, rtol=0, atol=1e-12)
    assert again.served == [name] and again.made == []
    outside = GROUP_PAIRS[:5] + [("A reference outside the group's case set.", GROUP_PAIRS[0][1])]
    np.testing.assert_allclose(_our_values(name, _frame(outside), PreparedReferences(group, tmp_path)),
                               _library_values(name, outside), rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ["bleu2", "rouge"])
def test_a_preparation_of_other_references_or_damaged_is_never_served(name, tmp_path, caplog):
    """A worse model's hypotheses are the references of another group. That group's preparation, copied into this
    group's folder (or one prepared by other code, or a damaged file), is not served: the worse model keeps its
    lower values, the library's, and the better model ranks first."""
    group = [r for r, _ in VARIED_PAIRS[:30]]
    better = [(r, r + " Stable.") for r in group]
    worse = [(r, VARIED_PAIRS[(i + 11) % 30][0]) for i, r in enumerate(group)]  # another case's report
    other = PreparedReferences([h for _, h in worse], tmp_path / "other")
    _our_values(name, _frame([(h, h) for _, h in worse]), other)  # prepares the other group's references
    folder = tmp_path / "group"
    folder.mkdir()
    (folder / f"{name}.pickle").write_bytes((tmp_path / "other" / f"{name}.pickle").read_bytes())
    for attempt in ("copied", "other code", "damaged"):
        if attempt == "other code":
            (folder / f"{name}.pickle").write_bytes((tmp_path / "other" / f"{name}.pickle").read_bytes())
            prepared = PreparedReferences(group, folder)
            prepared.key = lambda metric: "a key of other code"  # what this code would not compute
        else:
            if attempt == "damaged":
                (folder / f"{name}.pickle").write_bytes(b"\x80\x05 not a pickle")
            prepared = PreparedReferences(group, folder)
        values = {model: _our_values(name, _frame(pairs), prepared)[:, 0].mean()
                  for model, pairs in (("worse", worse), ("better", better))}
        assert prepared.served == [] and prepared.made == [name], attempt
        assert values["worse"] == pytest.approx(_library_values(name, worse)[:, 0].mean(), abs=1e-12)
        assert values["better"] > values["worse"], attempt
    assert any("unreadable" in r.message for r in caplog.records)


def test_distinct_texts_indexes_each_text_once():
    texts, ref_index, hyp_index = distinct_texts(["r1", "r2", "r1"], ["h", "r1", "h"])
    assert texts == ["r1", "r2", "h"]
    assert ref_index.tolist() == [0, 1, 0] and hyp_index.tolist() == [2, 0, 2]
    with pytest.raises(ValueError):
        distinct_texts(["a"], [])

"""VQA answer scores as RadHarmony computes them (the MedGemma technical report's protocol).

In VQA pairs the reference is the dataset's answer, the hypothesis the model's
answer and the context the question.

* normalise: lower case, every character outside ``[a-z0-9 ]`` becomes a space,
  split on whitespace, drop the articles a / an / the;
* tokenized F1: multiset overlap of prediction and reference tokens,
  F1 = 2PR / (P + R); both empty → 1.0, exactly one empty → 0.0;
* token recall: overlap / number of reference tokens (0 for an empty reference);
* closed subset: the reference is exactly "yes" or "no" after strip and lower
  case; closed accuracy: the first yes / no token of the normalised prediction
  equals the reference (no yes / no token → wrong).

Per-sample columns (NaN outside a sample's subset, so mean leaves, which skip
NaN, average over the subset only):

* ``vqa_token_f1`` — every sample;
* ``vqa_closed_accuracy``, ``vqa_closed_token_f1`` — closed questions;
* ``vqa_open_token_f1``, ``vqa_open_token_recall`` — open questions.

RadHarmony's result rows map onto the leaves (:data:`RESULT_ROWS`): overall
(token_f1), closed (accuracy, token_f1), open (token_f1, token_recall). A leaf
whose subset is empty is NaN (RadHarmony leaves that row out). The functions
take (prediction, reference), RadHarmony's argument order.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

from radrank.metrics.base import Metric, Resources, mean_leaf

COLUMNS = ("vqa_token_f1", "vqa_closed_accuracy", "vqa_closed_token_f1", "vqa_open_token_f1", "vqa_open_token_recall")

# leaf -> (RadHarmony row label, column in that row)
RESULT_ROWS = {
    "vqa_token_f1": ("overall", "token_f1"),
    "vqa_closed_accuracy": ("closed", "accuracy"),
    "vqa_closed_token_f1": ("closed", "token_f1"),
    "vqa_open_token_f1": ("open", "token_f1"),
    "vqa_open_token_recall": ("open", "token_recall"),
}

_ARTICLES = frozenset({"a", "an", "the"})
_OUTSIDE = re.compile(r"[^a-z0-9 ]")
_YES_NO = ("yes", "no")


def normalize_answer(text) -> list[str]:
    """Lower case, characters outside [a-z0-9 ] to spaces, split, articles dropped."""
    return [t for t in _OUTSIDE.sub(" ", str(text).lower()).split() if t not in _ARTICLES]


def _overlap(pred: list[str], ref: list[str]) -> int:
    return sum((Counter(pred) & Counter(ref)).values())


def _f1(pred: list[str], ref: list[str]) -> float:
    if not pred or not ref:
        return float(pred == ref)
    common = _overlap(pred, ref)
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def _recall(pred: list[str], ref: list[str]) -> float:
    return _overlap(pred, ref) / len(ref) if ref else 0.0


def tokenized_f1(pred, ref) -> float:
    """Token-overlap F1 of a predicted and a reference answer."""
    return _f1(normalize_answer(pred), normalize_answer(ref))


def token_recall(pred, ref) -> float:
    """Share of the reference's tokens found in the prediction (multiset)."""
    return _recall(normalize_answer(pred), normalize_answer(ref))


def extract_yes_no(text) -> str | None:
    """The first "yes" / "no" token of the normalised text, else None."""
    return next((t for t in normalize_answer(text) if t in _YES_NO), None)


def is_yes_no_answer(ref) -> bool:
    """True when the reference answer is exactly "yes" or "no" (MedGemma's closed subset)."""
    return str(ref).strip().lower() in _YES_NO


def score_texts(references, hypotheses, closed=None) -> dict[str, np.ndarray]:
    """Per-sample columns for each (reference, hypothesis) pair.

    ``closed`` is a boolean per pair marking the closed subset; default
    :func:`is_yes_no_answer` of the reference. Each distinct text is normalised once.
    """
    refs, hyps = list(references), list(hypotheses)
    if len(refs) != len(hyps):
        raise ValueError(f"{len(refs)} references but {len(hyps)} hypotheses")
    n = len(refs)
    closed = np.array([is_yes_no_answer(r) for r in refs] if closed is None else list(closed), dtype=bool)
    if closed.shape != (n,):
        raise ValueError(f"closed has {closed.size} values for {n} pairs")
    tokens: dict = {}

    def toks(text):
        got = tokens.get(text)
        if got is None:
            got = tokens[text] = normalize_answer(text)
        return got

    f1 = np.empty(n)
    recall = np.empty(n)
    accuracy = np.empty(n)
    for i, (r, h) in enumerate(zip(refs, hyps)):
        rt, ht = toks(r), toks(h)
        f1[i] = _f1(ht, rt)
        recall[i] = _recall(ht, rt)
        accuracy[i] = float(next((t for t in ht if t in _YES_NO), None) == str(r).strip().lower())
    nan = np.full(n, np.nan)
    return {
        "vqa_token_f1": f1,
        "vqa_closed_accuracy": np.where(closed, accuracy, nan),
        "vqa_closed_token_f1": np.where(closed, f1, nan),
        "vqa_open_token_f1": np.where(closed, nan, f1),
        "vqa_open_token_recall": np.where(closed, nan, recall),
    }


def score_frame(pairs, closed=None):
    """``sample_id`` plus the per-sample columns for a pairs table (reference = answer, hypothesis = prediction)."""
    import pandas as pd

    cols = score_texts(pairs["reference"].tolist(), pairs["hypothesis"].tolist(), closed)
    out = pd.DataFrame({c: cols[c] for c in COLUMNS}, dtype="float64")
    out.insert(0, "sample_id", pairs["sample_id"].to_numpy())
    return out


class VQA(Metric):
    name = "vqa"
    description = "VQA tokenized F1, closed (yes/no) accuracy and open token recall (MedGemma / RadHarmony protocol)"
    family = "core"
    seconds_per_pair = 7e-5  # 20,000 pairs of tests/synthetic.py on the 2-core host of docs/benchmarks.md
    columns = COLUMNS
    leaves = (
        mean_leaf("vqa_token_f1", "VQA token F1"),
        mean_leaf("vqa_closed_accuracy", "VQA closed accuracy"),
        mean_leaf("vqa_closed_token_f1", "VQA closed token F1"),
        mean_leaf("vqa_open_token_f1", "VQA open token F1"),
        mean_leaf("vqa_open_token_recall", "VQA open token recall"),
    )
    # NaN outside a sample's subset (closed / open question), by design: mean leaves skip them.
    nan_columns = ("vqa_closed_accuracy", "vqa_closed_token_f1", "vqa_open_token_f1", "vqa_open_token_recall")
    default_resources = Resources(mem_mb=1000, runtime_min=10)

    def score(self, pairs, settings, inputs, runtime):
        return score_frame(pairs)


METRIC = VQA()


def result_rows(wide):
    """RadHarmony's row layout from one wide row per bootstrap (columns = leaves).

    Returns rows ``label, fold, seed, bootstrap, token_f1, accuracy, token_recall``
    with label overall / closed / open, in that order within each bootstrap.
    """
    import pandas as pd

    frames = []
    for label in ("overall", "closed", "open"):
        leaves = {leaf: col for leaf, (lab, col) in RESULT_ROWS.items() if lab == label and leaf in wide.columns}
        if not leaves:
            continue
        part = wide[["fold", "seed", "bootstrap", *leaves]].rename(columns=leaves)
        part.insert(0, "label", label)
        part["_order"] = ("overall", "closed", "open").index(label)
        frames.append(part)
    if not frames:
        return pd.DataFrame(columns=["label", "fold", "seed", "bootstrap", "token_f1", "accuracy", "token_recall"])
    out = pd.concat(frames, ignore_index=True).sort_values(["bootstrap", "_order"], kind="stable")
    cols = ["label", "fold", "seed", "bootstrap"] + [c for c in ("token_f1", "accuracy", "token_recall")
                                                       if c in out.columns]
    return out[cols].reset_index(drop=True)

"""Synthetic per-sample scores of the lexical panel (BLEU-2, BLEU-4, ROUGE: 5 leaves) for a leaderboard
whose models have equal case sets, or many distinct ones; shared by benchmarks/bootstrap.py and
benchmarks/memory.py (and run against older revisions of radrank, so only numpy, pandas and
radrank.metrics.bleu4.STATS are used)."""

from __future__ import annotations

import numpy as np

LEXICAL = ("bleu2", "bleu4", "rouge")
LEAVES = 5  # bleu2, bleu4, rouge1, rouge2, rougeL


def case_masks(n_models: int, n_cases: int, distinct: bool = True, seed: int = 0) -> list:
    """Per model, the cases it has (a boolean mask). ``distinct``: every third model (the 2nd, 5th, ...)
    misses its own 1–3 % of the cases, drawn at random, so nearly every pair of them is compared on a
    case set of its own."""
    rng = np.random.default_rng(seed)
    masks = []
    for m in range(n_models):
        keep = np.ones(n_cases, dtype=bool)
        if distinct and m % 3 == 1:
            keep[rng.choice(n_cases, int(round(rng.uniform(0.01, 0.03) * n_cases)), replace=False)] = False
        masks.append(keep)
    return masks


def lexical_scores(keep: np.ndarray, rng: np.random.Generator) -> dict:
    """{metric: per-sample score frame} of a model that has the cases in ``keep`` (random values)."""
    import pandas as pd

    from radrank.metrics import bleu4

    ids = [f"case{i:05d}" for i in np.flatnonzero(keep)]
    k = len(ids)
    return {
        "bleu2": pd.DataFrame({"sample_id": ids, "bleu2": rng.random(k)}),
        "bleu4": pd.DataFrame({"sample_id": ids, "bleu4_sentence": rng.random(k),
                               **{c: rng.integers(0, 40, k) for c in bleu4.STATS}}),
        "rouge": pd.DataFrame({"sample_id": ids, **{c: rng.random(k) for c in ("rouge1", "rouge2", "rougeL")}}),
    }


def leaderboard_scores(n_models: int, n_cases: int, distinct: bool, seed: int = 0) -> dict:
    """{model: one frame of its lexical scores}, models m000, m001, ..."""
    rng = np.random.default_rng(seed + 1)
    out = {}
    for m, keep in enumerate(case_masks(n_models, n_cases, distinct, seed)):
        frames = list(lexical_scores(keep, rng).values())
        merged = frames[0]
        for frame in frames[1:]:
            merged = merged.merge(frame, on="sample_id")
        out[f"m{m:03d}"] = merged
    return out

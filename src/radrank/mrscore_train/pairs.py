"""Preference pairs: every (better, worse) pair of graded candidates of the same reference.

A pair (w, l) is kept when ``score_w > score_l + δ`` (``min_gap``); its margin is
``(score_w − score_l) / margin_scale``, the ``m`` of the paper's loss −log σ(r_w − r_l − m). The split
into train and validation is by reference id — a seeded permutation of the references, the first
``round(validation_fraction × n)`` held out — so no reference, and none of its candidates, is on both
sides.
"""

from __future__ import annotations

import numpy as np

PAIR_COLUMNS = ("pair_id", "reference_id", "reference", "chosen_id", "rejected_id", "chosen", "rejected",
                "score_chosen", "score_rejected", "margin", "split")


def validation_references(reference_ids, fraction: float, seed: int) -> set:
    """The references held out: a seeded choice of ``round(fraction × n)`` of the distinct ids (at least one
    when ``fraction`` > 0 and there are two or more)."""
    ids = sorted(set(reference_ids))
    n = int(round(fraction * len(ids)))
    if fraction > 0 and len(ids) >= 2:
        n = min(max(n, 1), len(ids) - 1)
    order = np.random.default_rng(seed).permutation(len(ids))
    return {ids[i] for i in order[:n]}


def build_pairs(graded, references, *, min_gap: float, margin_scale: float, validation_fraction: float,
                seed: int):
    """The pairs table (:data:`PAIR_COLUMNS`), in reference order then candidate order."""
    import pandas as pd

    text_of = dict(zip(references["reference_id"], references["reference"]))
    rows = []
    for rid, group in graded.groupby("reference_id", sort=False):
        ids = group["candidate_id"].tolist()
        texts = group["candidate"].tolist()
        scores = group["score"].to_numpy(dtype="float64")
        better, worse = np.nonzero(scores[:, None] > scores[None, :] + min_gap)
        for w, l in zip(better.tolist(), worse.tolist()):
            rows.append({"pair_id": f"{ids[w]}>{ids[l]}", "reference_id": rid, "reference": text_of[rid],
                         "chosen_id": ids[w], "rejected_id": ids[l], "chosen": texts[w], "rejected": texts[l],
                         "score_chosen": float(scores[w]), "score_rejected": float(scores[l]),
                         "margin": float((scores[w] - scores[l]) / margin_scale)})
    out = pd.DataFrame(rows, columns=list(PAIR_COLUMNS))
    held_out = validation_references(out["reference_id"], validation_fraction, seed)
    out["split"] = np.where(out["reference_id"].isin(held_out), "validation", "train")
    return out

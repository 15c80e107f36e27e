"""Judge-failure accounting: how often each model's LLM-judge answers gave no score, and whether that moves ranks.

For every LLM-judge metric (a metric with :attr:`radrank.metrics.base.Metric.failures`) and every model of a
dataset × split, from its per-sample scores:

* ``judged``: the pairs the judge was asked about (the model's scored cases);
* ``failed`` and one count per kind of :data:`radrank.judge_failures.FAILURE_KINDS` (disjoint; they sum to
  ``failed``), and ``retried``: the pairs asked more than once, whatever the last answer gave; each with its
  share of ``judged``;
* the **failure policies**: the models' competition ranks by the judge's leaf with failed pairs *excluded*
  (what the leaf does: its mean over the pairs that have a score), scored as the *worst* value of its scale and
  as the *best* (among the ranked models, on each model's own cases — the same values as the leaf's estimate
  under ``excluded``). ``policy_sensitive`` is true for a model whose rank is not the same under all three: a
  ranking a failure policy can flip.

Config ``leaderboard.judge_failures: worst`` scores the failed pairs as the worst value in the statistics themselves
(:func:`score_failures`), so the leaderboard's judge columns, intervals and ranks carry that policy; the counts and
the three policy ranks are the same either way. A failure policy changes only the failed pairs' values; a pair without a score for another reason (RadFact-CT's
side without phrases) stays out of every mean, as it does on the leaderboard.
"""

from __future__ import annotations

import numpy as np

from radrank.judge_failures import FAILURE_KINDS

POLICIES = ("excluded", "worst", "best")
COUNTS = ("failed", *FAILURE_KINDS, "retried")
COLUMNS = ("model", "metric", "label", "leaf", "judged", *COUNTS, *(f"{c}_share" for c in COUNTS),
           *(f"rank_{p}" for p in POLICIES), *(f"value_{p}" for p in POLICIES), "policy_sensitive")


def policy_values(values: np.ndarray, failed: np.ndarray, worst: float, best: float) -> dict:
    """The leaf's mean under each policy: failed pairs left out, scored ``worst``, scored ``best``."""
    values = np.asarray(values, dtype="float64")
    out = {}
    for policy, fill in (("excluded", np.nan), ("worst", worst), ("best", best)):
        v = np.where(failed, fill, values)
        finite = np.isfinite(v)
        out[policy] = float(v[finite].mean()) if finite.any() else float("nan")
    return out


def failure_accounting(scores: dict, judges: list, ranked: list):
    """The accounting table (:data:`COLUMNS`), one row per (model, judge metric) — ``judges``: the metric objects
    with ``failures`` among those scored; ``scores``: model -> its merged per-sample scores; ``ranked``: the models
    the leaderboard ranks (the others get counts, no policy ranks)."""
    import pandas as pd

    from radrank import metrics
    from radrank.stats.ranks import competition_ranks

    rows = []
    for metric in judges:
        acc = metric.failures
        leaf = next((x for x in metrics.leaves(metric.name) if x.name == acc.leaf and x.is_mean), None)
        block = []
        for model in sorted(scores):
            frame = scores[model]
            kinds = frame[acc.kind_column].fillna("").astype(str).to_numpy()
            failed = kinds != ""
            unknown = set(kinds[failed]) - set(FAILURE_KINDS)
            if unknown:
                raise ValueError(f"model {model!r}, column {acc.kind_column}: unknown failure kinds {sorted(unknown)}")
            judged = len(frame)
            counts = {"failed": int(failed.sum()), **{k: int((kinds == k).sum()) for k in FAILURE_KINDS},
                      "retried": int((frame[acc.attempts_column].to_numpy(dtype="int64") > 1).sum())}
            row = {"model": model, "metric": metric.name, "label": acc.label, "leaf": leaf.name if leaf else "",
                   "judged": judged, **counts,
                   **{f"{c}_share": (counts[c] / judged if judged else float("nan")) for c in COUNTS}}
            values = (policy_values(frame[leaf.column].to_numpy(dtype="float64"), failed, acc.worst, acc.best)
                      if leaf else dict.fromkeys(POLICIES, float("nan")))
            row.update({f"value_{p}": values[p] for p in POLICIES})
            block.append(row)
        in_rank = [r for r in block if r["model"] in set(ranked)]
        for policy in POLICIES:
            if leaf is None or not in_rank:
                continue
            ranks = competition_ranks(np.array([r[f"value_{policy}"] for r in in_rank]), leaf.higher_is_better)
            for r, rank in zip(in_rank, ranks):
                r[f"rank_{policy}"] = int(rank)
        for r in block:
            known = [r.get(f"rank_{p}") for p in POLICIES]
            r.update({f"rank_{p}": k for p, k in zip(POLICIES, known)})
            r["policy_sensitive"] = None not in known and len(set(known)) > 1
        rows.extend(block)
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    for p in POLICIES:
        table[f"rank_{p}"] = table[f"rank_{p}"].astype("Int64")
    table["policy_sensitive"] = table["policy_sensitive"].astype(bool)
    return table


def score_failures(frame, judges: list, policy: str):
    """``frame`` (a model's per-sample scores) with every judge's failed pairs scored as ``policy`` ("worst" or
    "best" of the judge's scale) on its leaf's column — config ``leaderboard.judge_failures``."""
    if policy not in ("worst", "best"):
        raise ValueError(f"policy must be worst or best, got {policy!r}")
    frame = frame.copy()
    for metric in judges:
        acc = metric.failures
        if acc.leaf is None:
            continue
        column = next(x.column for x in metric.leaves if x.name == acc.leaf)
        failed = frame[acc.kind_column].fillna("").astype(str).ne("")
        frame.loc[failed, column] = acc.worst if policy == "worst" else acc.best
    return frame


def judges_of(metric_names) -> list:
    """The LLM-judge metrics among ``metric_names`` (those that account for failures), in order."""
    from radrank import metrics

    return [metrics.get(n) for n in metric_names if metrics.get(n).failures is not None]

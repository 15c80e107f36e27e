"""Honest coverage: a rank never claims more certainty than the cases the models share allow.

A model's coverage is the share of the dataset's cases (:mod:`radrank.ingest.references`: the canonical
file's, or the union of every submission's) it was scored on. Then, per dataset × split:

* a model below ``leaderboard.min_coverage`` is not ranked: it is listed after the ranked models, without a
  rank, rank interval or P(rank = 1), and flagged with its coverage — a model that answered only its easy
  cases is not put first;
* rank intervals rest on the cases **every ranked model** has (:func:`radrank.stats.bootstrap.on_common_cases`),
  so all of them are ranked on the same cases on every resample; how many is said beside them
  (``Rank CI cases``); fewer than ``leaderboard.min_common_cases`` and no rank interval is given (flagged);
* a comparison of two models rests on the cases both have (``n_common``); fewer than
  ``leaderboard.min_common_cases`` and it is flagged, and it tells no model apart in "Tied with".
"""

from __future__ import annotations

COVERAGE_COLUMNS = ("model", "n_cases", "n_dataset_cases", "coverage", "ranked", "n_rank_cases", "flag")


def model_coverage(scores_by_model: dict, dataset_cases, *, min_coverage: float):
    """One row per model (sorted): its cases among the dataset's, the share, and whether it is ranked."""
    import pandas as pd

    dataset = set(dataset_cases)
    n_dataset = len(dataset)
    rows = []
    for model in sorted(scores_by_model):
        n = len(dataset.intersection(scores_by_model[model]["sample_id"]))
        share = n / n_dataset if n_dataset else 0.0
        ranked = share >= min_coverage and n > 0
        flag = "" if ranked else (f"coverage {share:.0%} of the dataset's {n_dataset} cases, below "
                                  f"leaderboard.min_coverage {min_coverage:.0%}: not ranked")
        rows.append({"model": model, "n_cases": n, "n_dataset_cases": n_dataset, "coverage": share,
                     "ranked": ranked, "n_rank_cases": None, "flag": flag})
    table = pd.DataFrame(rows, columns=list(COVERAGE_COLUMNS))
    table["ranked"] = table["ranked"].astype(bool)
    return table


def flag_ranking(coverage, n_rank_cases: int | None, min_common_cases: int):
    """``coverage`` with the number of cases the ranked models share, and a flag on each ranked model when they
    are too few for a rank interval."""
    table = coverage.copy()
    ranked = table["ranked"]
    table["n_rank_cases"] = table["n_rank_cases"].astype("Int64")
    table.loc[ranked, "n_rank_cases"] = n_rank_cases
    if n_rank_cases is not None and n_rank_cases < min_common_cases:
        table.loc[ranked, "flag"] = (f"only {n_rank_cases} cases common to every ranked model (below "
                                     f"leaderboard.min_common_cases {min_common_cases}): no rank interval")
    return table


def too_few_common(n_common, min_common_cases: int):
    """A boolean mask: comparisons resting on fewer than ``min_common_cases`` common cases."""
    import numpy as np

    return np.asarray(n_common) < min_common_cases


def comparison_flags(n_common, min_common_cases: int):
    """The comparisons table's ``flag``: why a comparison tells nothing, else ""."""
    return [f"only {n} common cases (below leaderboard.min_common_cases {min_common_cases})" if few else ""
            for n, few in zip(n_common, too_few_common(n_common, min_common_cases))]

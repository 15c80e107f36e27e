"""Honest coverage: a rank never claims more certainty than the cases the models share allow.

Every model is scored on the dataset's case set (:mod:`radrank.ingest.casesets`: the canonical file's cases, or
those more than half of the submissions have), a case it has no answer for as an empty report. A model's coverage
is the share of the set's cases it answered. Then, per dataset × split:

* with ``leaderboard.missing_cases: score_as_empty`` (the default) a model below ``leaderboard.min_coverage`` is
  not ranked; with ``not_ranked`` a model missing any case is not (its numbers are then on its own cases). An
  unranked model is listed after the ranked ones, without a rank, rank interval or P(rank = 1), and flagged —
  a model that answered only its easy cases is never put first;
* rank intervals rest on the cases **every ranked model** has (:func:`radrank.stats.bootstrap.on_common_cases`),
  so all of them are ranked on the same cases on every resample; how many is said beside them
  (``Rank CI cases``); fewer than ``leaderboard.min_common_cases`` and no rank interval is given (flagged);
* a comparison of two models rests on the cases both have (``n_common``); fewer than
  ``leaderboard.min_common_cases`` and it is flagged, and it tells no model apart in "Tied with".
"""

from __future__ import annotations

COVERAGE_COLUMNS = ("model", "n_cases", "n_dataset_cases", "coverage", "ranked", "n_rank_cases", "flag", "n_missing",
                    "n_outside", "missing_reasons", "case_set")


def _reason_counts(reasons) -> str:
    """'not_submitted 10; reference_mismatch 2': why a model lacks cases of the set, most frequent first."""
    counts: dict = {}
    for reason in reasons:
        counts[reason] = counts.get(reason, 0) + 1
    return "; ".join(f"{r} {n}" for r, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def model_coverage(models, n_dataset: int, accounting, *, min_coverage: float, missing_cases: str = "score_as_empty",
                   case_set: str = ""):
    """One row per model (sorted): how many of the set's ``n_dataset`` cases it answered (the set's cases less its
    ``missing`` accounting rows, :func:`radrank.ingest.casesets.account`), the share, why the rest are missing, how
    many it submitted outside the set, and whether it is ranked: with ``missing_cases`` "score_as_empty" a model
    answering less than ``min_coverage`` of the set is not ranked; with "not_ranked" one missing any case is not."""
    import pandas as pd

    from radrank.ingest import casesets

    if missing_cases not in casesets.MISSING_POLICIES:
        raise ValueError(f"missing_cases must be one of {casesets.MISSING_POLICIES}, got {missing_cases!r}")
    rows = []
    for model in sorted(models):
        own = accounting[accounting["model"] == model]
        missing = own[own["status"] == casesets.MISSING]
        n = n_dataset - len(missing)
        share = n / n_dataset if n_dataset else 0.0
        if missing_cases == "not_ranked":
            ranked = len(missing) == 0 and n > 0
            flag = "" if ranked else (f"no answer for {len(missing)} of the set's {n_dataset} cases "
                                      "(leaderboard.missing_cases: not_ranked): not ranked")
        else:
            ranked = share >= min_coverage and n > 0
            flag = "" if ranked else (f"coverage {share:.0%} of the dataset's {n_dataset} cases (the rest scored as "
                                      f"empty), below leaderboard.min_coverage {min_coverage:.0%}: not ranked")
        rows.append({"model": model, "n_cases": n, "n_dataset_cases": n_dataset, "coverage": share,
                     "ranked": ranked, "n_rank_cases": None, "flag": flag, "n_missing": len(missing),
                     "n_outside": int((own["status"] == casesets.OUTSIDE).sum()),
                     "missing_reasons": _reason_counts(missing["reason"]), "case_set": case_set})
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

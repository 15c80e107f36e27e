"""Leaderboard per dataset × split: ReXrank's columns, intervals beside each metric.

Ranked by the mean of RadCliQ-v1 (ascending: lower is better). ReXrank ranks by
1/mean(RadCliQ-v1), which is only monotone while the mean is positive — a
perfect report scores about −1.44 — so we rank by the mean and show 1/mean
beside it for familiarity. When RadCliQ-v1 was not computed, the configured
fallback leaf ranks the table and the ``Ranked by`` column says so.

Metric columns: those of the metrics that were run, in ReXrank's order and names
(``columns="computed"``), or ReXrank's whole set, empty where a metric was not run
(``columns="rexrank"``, for tools that expect it).

Coverage (:mod:`radrank.stats.coverage`): ``Coverage`` is the share of the dataset's cases
the model was scored on; a model below ``leaderboard.min_coverage`` has no ``Rank`` and is
listed after the ranked models; ``Flag`` says why a model has no rank or rank interval.

Rank uncertainty (:mod:`radrank.stats.ranks`), appended after ReXrank's and the
existing columns when the bootstrap replicates and comparisons are given:
``Rank CI`` (the rank interval at the bootstrap level, "[lo, hi]", on the ``Rank CI cases``
every ranked model has), ``Rank CI low``, ``Rank CI high``, ``P(rank=1)``, ``Rank set`` / ``Rank set low`` /
``Rank set high`` (the simultaneous rank set: every model's holds at once), ``Tier`` and ``Tied with``
(display names of the neighbouring models whose paired difference from this one is not
significant, best first, joined by "; "; a comparison on too few common cases tells none apart).

Judge failures (:mod:`radrank.stats.failures`), for each LLM-judge metric computed, under its label ``J``:
``J judged``, ``J failed``, ``J failed share``, one count per kind (``J unparsed``, ``J refusals``,
``J truncated``, ``J empty``, ``J request errors``), ``J retried``, and the model's rank by the judge's leaf
with failed pairs excluded / scored worst / scored best (``J rank, failures excluded`` …); ``Failure policy``
names the judges whose ranking of this model a failure policy flips (and says so in ``Flag`` when that judge's
leaf ranks the table).
"""

from __future__ import annotations

import math

import numpy as np

META_COLUMNS = ("Date", "Model Name", "Institution", "Model URL")


def rexrank_columns() -> list:
    """ReXrank's metric columns in its order: every registered metric's board columns
    (:class:`radrank.metrics.base.BoardColumn`), by position."""
    from radrank import metrics

    return sorted((col for name in metrics.names() for col in metrics.get(name).board), key=lambda c: c.position)


def rank_leaf_of(leaves, rank_by: str, fallback_rank_by: str) -> tuple[str, str]:
    """(the leaf that ranks the table, a note saying why when it is the fallback)."""
    if rank_by in leaves:
        return rank_by, ""
    if fallback_rank_by in leaves:
        return fallback_rank_by, f"; {rank_by} was not computed, so the table is ranked by {fallback_rank_by}"
    raise ValueError(f"cannot rank: neither {rank_by!r} nor {fallback_rank_by!r} among computed leaves {list(leaves)}")


COLUMN_SETS = ("computed", "rexrank")
# leaderboard column -> coverage table field (radrank.stats.coverage): the set's cases a model has no answer for,
# why, what it submitted outside the set, and the rule that made the set
CASE_SET_COLUMNS = {"Missing": "n_missing", "Missing reasons": "missing_reasons", "Outside set": "n_outside",
                    "Case set": "case_set"}
# leaderboard column suffix -> failure table field (radrank.stats.failures)
FAILURE_COLUMNS = {"judged": "judged", "failed": "failed", "failed share": "failed_share", "unparsed": "unparsed",
                   "refusals": "refusal", "truncated": "truncated", "empty": "empty", "request errors": "error",
                   "retried": "retried"}
POLICY_COLUMNS = {"excluded": "rank, failures excluded", "worst": "rank, failures worst",
                  "best": "rank, failures best"}


def failure_cells(failures, model: str, decimals: int) -> tuple[dict, list]:
    """(the model's judge-failure columns, the judges whose failure policy flips its rank, as sentences)."""
    import pandas as pd

    cells, flipped = {}, []
    if failures is None or not len(failures):
        return cells, flipped
    for _, r in failures[failures["model"] == model].iterrows():
        label = r["label"]
        for suffix, field in FAILURE_COLUMNS.items():
            value = r[field]
            cells[f"{label} {suffix}"] = (round(float(value), decimals + 2) if field.endswith("_share")
                                          else int(value))
        for policy, suffix in POLICY_COLUMNS.items():
            rank = r[f"rank_{policy}"]
            cells[f"{label} {suffix}"] = None if pd.isna(rank) else int(rank)
        if bool(r["policy_sensitive"]):
            flipped.append(f"{label} rank {int(r['rank_excluded'])} with failures excluded, {int(r['rank_worst'])} "
                           f"scored worst, {int(r['rank_best'])} scored best ({int(r['failed'])} failed)")
    return cells, flipped


def build_leaderboard(summary, drops: dict, meta: dict | None, *, rank_by="radcliq_v1", fallback_rank_by="bleu2",
                      decimals=3, rank_summary=None, tied=None, coverage=None, columns="computed", failures=None):
    """The leaderboard table, best first (ranked models, then the unranked ones, best first).

    ``rank_summary`` (from :func:`radrank.stats.ranks.rank_uncertainty`) and ``tied`` (from
    :func:`radrank.stats.ranks.tied_with`) add the rank-uncertainty columns; ``coverage`` (from
    :func:`radrank.stats.coverage.flag_ranking`) the coverage columns and which models are ranked; ``failures``
    (from :func:`radrank.stats.failures.failure_accounting`) the judge-failure columns.
    """
    if columns not in COLUMN_SETS:
        raise ValueError(f"columns must be one of {COLUMN_SETS}, got {columns!r}")
    import pandas as pd

    from radrank.stats.ranks import competition_ranks

    leaves = list(dict.fromkeys(summary["metric"]))
    info = summary.drop_duplicates("metric").set_index("metric")
    rank_leaf, note = rank_leaf_of(leaves, rank_by, fallback_rank_by)
    ascending = not bool(info.loc[rank_leaf, "higher_is_better"])
    ranked_by = (f"{info.loc[rank_leaf, 'label']} ({rank_leaf}) mean, "
                 f"{'lower' if ascending else 'higher'} is better{note}")

    # rows as dicts, looked up per model and column (a pandas .loc per cell cost 0.2 CPU-s at 100 models)
    by = {(r["model"], r["metric"]): r for r in summary.to_dict("records")}
    models = sorted(summary["model"].unique())
    covered = coverage.set_index("model").to_dict("index") if coverage is not None else None
    ranked = [m for m in models if covered is None or bool(covered[m]["ranked"])]
    if rank_summary is not None and len(rank_summary):
        # the rank its interval qualifies: the ranked models' point estimates on the cases they all rest on
        ranks = {m: int(r) for m, r in zip(rank_summary["model"], rank_summary["rank"])}
    else:
        # NaN estimates rank last; ties share the best rank (the same rule ranks every resample).
        key = [by[m, rank_leaf]["estimate"] for m in ranked]
        ranks = dict(zip(ranked, competition_ranks(key, higher_is_better=not ascending)))
    # the unranked ones in the same order among themselves, after every ranked model
    unranked = [m for m in models if m not in ranks]
    order_unranked = dict(zip(unranked, competition_ranks([by[m, rank_leaf]["estimate"] for m in unranked],
                                                          higher_is_better=not ascending)))
    names = {m: (meta or {}).get(m, {}).get("name") or m for m in models}
    uncertainty = rank_summary.set_index("model").to_dict("index") if rank_summary is not None else None

    def rounded(x):
        return round(float(x), decimals) if x is not None and math.isfinite(float(x)) else None

    rows = []
    board = [col for col in rexrank_columns() if columns == "rexrank" or col.leaf in leaves]
    shown = {col.leaf for col in rexrank_columns() if not col.reciprocal}
    extra = [leaf for leaf in leaves if leaf not in shown]
    for m in models:
        md = (meta or {}).get(m, {})
        row = {"Rank": int(ranks[m]) if m in ranks else None, "Date": md.get("date", ""), "Model Name": names[m],
               "Institution": md.get("institution", ""), "Model URL": md.get("url", "")}

        def put(column, leaf):
            if (m, leaf) in by:
                r = by[m, leaf]
                row[column] = rounded(r["estimate"])
                row[f"{column} CI low"] = rounded(r["ci_lower"])
                row[f"{column} CI high"] = rounded(r["ci_upper"])
            else:
                row[column] = row[f"{column} CI low"] = row[f"{column} CI high"] = None

        for col in board:
            if col.reciprocal:  # ReXrank's 1/RadCliQ-v1: 1 / the mean, no interval
                mean = by[m, col.leaf]["estimate"] if (m, col.leaf) in by else None
                row[col.title] = rounded(1.0 / mean) if mean not in (None, 0.0) and math.isfinite(mean) else None
            else:
                put(col.title, col.leaf)
        for leaf in extra:
            put(str(info.loc[leaf, "label"]), leaf)
        listed = drops.get(m)
        row["n"] = int(by[m, rank_leaf]["n"])
        if covered is not None:
            row["Coverage"] = rounded(covered[m]["coverage"])
            for column, field in CASE_SET_COLUMNS.items():
                if field in coverage.columns:
                    value = covered[m][field]
                    row[column] = int(value) if field.startswith("n_") else value
        row["Dropped"] = int((listed["action"] == "dropped").sum()) if listed is not None else 0
        row["Scored as empty"] = int((listed["action"] == "scored_as_empty").sum()) if listed is not None else 0
        row["Ranked by"] = ranked_by
        row["rank_metric"] = rank_leaf
        row["model"] = m
        if uncertainty is not None:
            u = uncertainty[m] if m in uncertainty else {"rank_lower": np.nan, "rank_upper": np.nan, "p_rank1": np.nan}
            known = bool(np.isfinite(u["rank_lower"]))
            row["Rank CI"] = f"[{int(u['rank_lower'])}, {int(u['rank_upper'])}]" if known else ""
            row["Rank CI low"] = int(u["rank_lower"]) if known else None
            row["Rank CI high"] = int(u["rank_upper"]) if known else None
            row["P(rank=1)"] = rounded(u["p_rank1"])
            joint = bool(np.isfinite(u.get("set_lower", np.nan)))
            row["Rank set"] = f"[{int(u['set_lower'])}, {int(u['set_upper'])}]" if joint else ""
            row["Rank set low"] = int(u["set_lower"]) if joint else None
            row["Rank set high"] = int(u["set_upper"]) if joint else None
            row["Tier"] = int(u["tier"]) if joint else None
        if uncertainty is not None and covered is not None:
            cases = covered[m]["n_rank_cases"]
            row["Rank CI cases"] = int(cases) if m in ranks and not pd.isna(cases) else None
        if tied is not None:
            row["Tied with"] = "; ".join(names[t] for t in tied.get(m, []))
        if covered is not None:
            row["Flag"] = covered[m]["flag"]
        judged, flipped = failure_cells(failures, m, decimals)
        if failures is not None and len(failures):
            row.update(judged)
            row["Failure policy"] = "; ".join(flipped)
            ranking = set(failures.loc[(failures["model"] == m) & failures["policy_sensitive"]
                                       & (failures["leaf"] == rank_leaf), "label"])
            if ranking:  # the judge that ranks the table: its failure policy moves this model's Rank
                note = f"its rank depends on how failed {', '.join(sorted(ranking))} answers are scored"
                row["Flag"] = "; ".join(x for x in (row.get("Flag") or "", note) if x)
        row["_order"] = (0, ranks[m]) if m in ranks else (1, order_unranked[m])
        rows.append(row)
    table = pd.DataFrame(rows)
    counted = [f"{label} {suffix}" for label in (failures["label"].unique() if failures is not None else ())
               for suffix in (*POLICY_COLUMNS.values(), *(k for k in FAILURE_COLUMNS if k != "failed share"))]
    for column in ("Rank", "Rank CI low", "Rank CI high", "Rank CI cases", "Rank set low", "Rank set high", "Tier",
                   *counted):
        if column in table.columns:
            table[column] = table[column].astype("Int64")
    return table.sort_values(["_order", "model"], kind="stable").drop(columns="_order").reset_index(drop=True)


def rank_uncertainty(summary, replicates, comparisons, *, rank_by="radcliq_v1", fallback_rank_by="bleu2",
                     level=0.95, coverage=None, min_common_cases=1):
    """(rank summary, rank distribution, tied) on the leaf that ranks the leaderboard.

    ``replicates`` and ``comparisons`` are the statistics stage's tables (with ``coverage``: the ranked
    models' replicates on the cases they share, :func:`radrank.stats.bootstrap.on_common_cases`); the three
    results are the inputs of :func:`build_leaderboard`'s ``rank_summary`` and ``tied`` and the report's rank
    plot (:mod:`radrank.stats.ranks`). With ``coverage`` only its ranked models are ranked, and no rank interval
    is given when they share fewer than ``min_common_cases`` cases; a comparison on fewer common cases than that
    tells no two models apart.
    """
    import pandas as pd

    from radrank.stats import coverage as coverage_rules
    from radrank.stats import ranks

    leaves = list(dict.fromkeys(summary["metric"]))
    rank_leaf, _ = rank_leaf_of(leaves, rank_by, fallback_rank_by)
    higher = bool(summary.loc[summary["metric"] == rank_leaf, "higher_is_better"].iloc[0])
    models = sorted(summary["model"].unique())
    if coverage is not None:
        ranked = coverage[coverage["ranked"]]
        models = sorted(ranked["model"])
        if len(ranked) and ranked["n_rank_cases"].iloc[0] < min_common_cases:
            replicates = replicates[replicates["bootstrap"] == -1]  # the point ranks only: no interval
    if not models:
        return (pd.DataFrame(columns=["model", "metric", "rank", "rank_lower", "rank_upper", "p_rank1", "rank_mean",
                                      "n_bootstrap", "level"]),
                pd.DataFrame(columns=["model", "metric", "rank", "probability"]), {})
    rank_summary, distribution = ranks.rank_uncertainty(replicates, rank_leaf, models, higher, level)
    order = list(rank_summary.sort_values(["rank", "model"], kind="stable")["model"])
    few = coverage_rules.too_few_common(comparisons["n_common"], min_common_cases)
    comparisons = comparisons.assign(p_value=comparisons["p_value"].where(~few))  # too few cases: not significant
    return rank_summary, distribution, ranks.tied_with(order, comparisons, rank_leaf, level)

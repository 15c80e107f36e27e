"""Leaderboard per dataset × split: ReXrank's columns, intervals beside each metric.

Ranked by the mean of RadCliQ-v1 (ascending: lower is better). ReXrank ranks by
1/mean(RadCliQ-v1), which is only monotone while the mean is positive — a
perfect report scores about −1.44 — so we rank by the mean and show 1/mean
beside it for familiarity. When RadCliQ-v1 was not computed, the configured
fallback leaf ranks the table and the ``Ranked by`` column says so.

Rank uncertainty (:mod:`radrank.stats.ranks`), appended after ReXrank's and the
existing columns when the bootstrap replicates and comparisons are given:
``Rank CI`` (the rank interval at the bootstrap level, "[lo, hi]"), ``Rank CI low``,
``Rank CI high``, ``P(rank=1)`` and ``Tied with`` (display names of the neighbouring
models whose paired difference from this one is not significant, best first,
joined by "; ").
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


def build_leaderboard(summary, drops: dict, meta: dict | None, *, rank_by="radcliq_v1", fallback_rank_by="bleu2",
                      decimals=3, rank_summary=None, tied=None):
    """The leaderboard table, best first.

    ``rank_summary`` (from :func:`radrank.stats.ranks.rank_uncertainty`) and ``tied`` (from
    :func:`radrank.stats.ranks.tied_with`) add the rank-uncertainty columns.
    """
    import pandas as pd

    from radrank.stats.ranks import competition_ranks

    leaves = list(dict.fromkeys(summary["metric"]))
    info = summary.drop_duplicates("metric").set_index("metric")
    rank_leaf, note = rank_leaf_of(leaves, rank_by, fallback_rank_by)
    ascending = not bool(info.loc[rank_leaf, "higher_is_better"])
    ranked_by = (f"{info.loc[rank_leaf, 'label']} ({rank_leaf}) mean, "
                 f"{'lower' if ascending else 'higher'} is better{note}")

    by = summary.set_index(["model", "metric"])
    models = sorted(summary["model"].unique())
    key = [by.loc[(m, rank_leaf), "estimate"] for m in models]
    # NaN estimates rank last; ties share the best rank (the same rule ranks every resample).
    ranks = dict(zip(models, competition_ranks(key, higher_is_better=not ascending)))
    names = {m: (meta or {}).get(m, {}).get("name") or m for m in models}
    uncertainty = rank_summary.set_index("model") if rank_summary is not None else None

    def rounded(x):
        return round(float(x), decimals) if x is not None and math.isfinite(float(x)) else None

    rows = []
    board = rexrank_columns()
    shown = {col.leaf for col in board if not col.reciprocal}
    extra = [leaf for leaf in leaves if leaf not in shown]
    for m in models:
        md = (meta or {}).get(m, {})
        row = {"Rank": int(ranks[m]), "Date": md.get("date", ""), "Model Name": names[m],
               "Institution": md.get("institution", ""), "Model URL": md.get("url", "")}

        def put(column, leaf):
            if (m, leaf) in by.index:
                r = by.loc[(m, leaf)]
                row[column] = rounded(r["estimate"])
                row[f"{column} CI low"] = rounded(r["ci_lower"])
                row[f"{column} CI high"] = rounded(r["ci_upper"])
            else:
                row[column] = row[f"{column} CI low"] = row[f"{column} CI high"] = None

        for col in board:
            if col.reciprocal:  # ReXrank's 1/RadCliQ-v1: 1 / the mean, no interval
                mean = by.loc[(m, col.leaf), "estimate"] if (m, col.leaf) in by.index else None
                row[col.title] = rounded(1.0 / mean) if mean not in (None, 0.0) and math.isfinite(mean) else None
            else:
                put(col.title, col.leaf)
        for leaf in extra:
            put(str(info.loc[leaf, "label"]), leaf)
        listed = drops.get(m)
        row["n"] = int(by.loc[(m, rank_leaf), "n"])
        row["Dropped"] = int((listed["action"] == "dropped").sum()) if listed is not None else 0
        row["Scored as empty"] = int((listed["action"] == "scored_as_empty").sum()) if listed is not None else 0
        row["Ranked by"] = ranked_by
        row["rank_metric"] = rank_leaf
        row["model"] = m
        if uncertainty is not None:
            u = uncertainty.loc[m]
            known = bool(np.isfinite(u["rank_lower"]))
            row["Rank CI"] = f"[{int(u['rank_lower'])}, {int(u['rank_upper'])}]" if known else ""
            row["Rank CI low"] = int(u["rank_lower"]) if known else None
            row["Rank CI high"] = int(u["rank_upper"]) if known else None
            row["P(rank=1)"] = rounded(u["p_rank1"])
        if tied is not None:
            row["Tied with"] = "; ".join(names[t] for t in tied.get(m, []))
        rows.append(row)
    table = pd.DataFrame(rows)
    for column in ("Rank CI low", "Rank CI high"):
        if column in table.columns:
            table[column] = table[column].astype("Int64")
    return table.sort_values(["Rank", "model"], kind="stable").reset_index(drop=True)


def rank_uncertainty(summary, replicates, comparisons, *, rank_by="radcliq_v1", fallback_rank_by="bleu2",
                     level=0.95):
    """(rank summary, rank distribution, tied) on the leaf that ranks the leaderboard.

    ``replicates`` and ``comparisons`` are the statistics stage's tables; the three results
    are the inputs of :func:`build_leaderboard`'s ``rank_summary`` and ``tied`` and the
    report's rank plot (:mod:`radrank.stats.ranks`).
    """
    from radrank.stats import ranks

    leaves = list(dict.fromkeys(summary["metric"]))
    rank_leaf, _ = rank_leaf_of(leaves, rank_by, fallback_rank_by)
    higher = bool(summary.loc[summary["metric"] == rank_leaf, "higher_is_better"].iloc[0])
    models = sorted(summary["model"].unique())
    rank_summary, distribution = ranks.rank_uncertainty(replicates, rank_leaf, models, higher, level)
    order = list(rank_summary.sort_values(["rank", "model"], kind="stable")["model"])
    return rank_summary, distribution, ranks.tied_with(order, comparisons, rank_leaf, level)

"""Leaderboard per dataset × split: ReXrank's columns, intervals beside each metric.

Ranked by the mean of RadCliQ-v1 (ascending: lower is better). ReXrank ranks by
1/mean(RadCliQ-v1), which is only monotone while the mean is positive — a
perfect report scores about −1.44 — so we rank by the mean and show 1/mean
beside it for familiarity. When RadCliQ-v1 was not computed, the configured
fallback leaf ranks the table and the ``Ranked by`` column says so.
"""

from __future__ import annotations

import math

from radrank.workflow import MODEL_COLUMNS, read_sheet

# ReXrank's columns and the leaf each one shows (None: derived).
REXRANK_COLUMNS = (
    ("BLEU", "bleu2"),
    ("BertScore", "bertscore"),
    ("SembScore", "semb_score"),
    ("RadGraph", "radgraph_combined"),
    ("1/RadCliQ-v1", None),
    ("RaTEScore", "ratescore"),
    ("GREEN", "green"),
)
META_COLUMNS = ("Date", "Model Name", "Institution", "Model URL")


def read_model_metadata(path):
    sheet = read_sheet(path, ("model",), MODEL_COLUMNS[1:])
    return {row["model"]: row for row in sheet.to_dict("records")}


def build_leaderboard(summary, drops: dict, meta: dict | None, *, rank_by="radcliq_v1", fallback_rank_by="bleu2",
                      decimals=3):
    import pandas as pd

    leaves = list(dict.fromkeys(summary["metric"]))
    info = summary.drop_duplicates("metric").set_index("metric")
    if rank_by in leaves:
        rank_leaf, note = rank_by, ""
    elif fallback_rank_by in leaves:
        rank_leaf = fallback_rank_by
        note = f"; {rank_by} was not computed, so the table is ranked by {fallback_rank_by}"
    else:
        raise ValueError(f"cannot rank: neither {rank_by!r} nor {fallback_rank_by!r} among computed leaves {leaves}")
    ascending = not bool(info.loc[rank_leaf, "higher_is_better"])
    ranked_by = (f"{info.loc[rank_leaf, 'label']} ({rank_leaf}) mean, "
                 f"{'lower' if ascending else 'higher'} is better{note}")

    by = summary.set_index(["model", "metric"])
    models = sorted(summary["model"].unique())
    key = pd.Series({m: by.loc[(m, rank_leaf), "estimate"] for m in models})
    # NaN estimates rank last; ties share the best rank.
    ranks = key.rank(method="min", ascending=ascending, na_option="bottom").astype(int)

    def rounded(x):
        return round(float(x), decimals) if x is not None and math.isfinite(float(x)) else None

    rows = []
    shown = {leaf for _, leaf in REXRANK_COLUMNS if leaf}
    extra = [leaf for leaf in leaves if leaf not in shown]
    for m in models:
        md = (meta or {}).get(m, {})
        row = {"Rank": int(ranks[m]), "Date": md.get("date", ""), "Model Name": md.get("name") or m,
               "Institution": md.get("institution", ""), "Model URL": md.get("url", "")}

        def put(column, leaf):
            if (m, leaf) in by.index:
                r = by.loc[(m, leaf)]
                row[column] = rounded(r["estimate"])
                row[f"{column} CI low"] = rounded(r["ci_lower"])
                row[f"{column} CI high"] = rounded(r["ci_upper"])
            else:
                row[column] = row[f"{column} CI low"] = row[f"{column} CI high"] = None

        for column, leaf in REXRANK_COLUMNS:
            if leaf is None:
                v1 = by.loc[(m, "radcliq_v1"), "estimate"] if (m, "radcliq_v1") in by.index else None
                row[column] = rounded(1.0 / v1) if v1 not in (None, 0.0) and math.isfinite(v1) else None
            else:
                put(column, leaf)
        for leaf in extra:
            put(str(info.loc[leaf, "label"]), leaf)
        listed = drops.get(m)
        row["n"] = int(by.loc[(m, rank_leaf), "n"])
        row["Dropped"] = int((listed["action"] == "dropped").sum()) if listed is not None else 0
        row["Scored as empty"] = int((listed["action"] == "scored_as_empty").sum()) if listed is not None else 0
        row["Ranked by"] = ranked_by
        row["rank_metric"] = rank_leaf
        row["model"] = m
        rows.append(row)
    table = pd.DataFrame(rows)
    return table.sort_values(["Rank", "model"], kind="stable").reset_index(drop=True)

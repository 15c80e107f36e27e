"""Leaderboard ranking and columns, from hand-made statistics summaries."""

from __future__ import annotations

import pandas as pd
import pytest

from radrank.leaderboard import build_leaderboard
from radrank.sheets import read_models_sheet


def summary(rows):
    """rows: (model, metric, estimate, higher_is_better)."""
    return pd.DataFrame([
        {"model": m, "metric": metric, "label": {"radcliq_v1": "RadCliQ-v1", "bleu2": "BLEU"}.get(metric, metric),
         "higher_is_better": hib, "estimate": est, "mean": est, "std": 0.01, "ci_lower": est - 0.05,
         "ci_upper": est + 0.05, "n": 100, "n_bootstrap": 1000, "level": 0.95, "seed": 0}
        for m, metric, est, hib in rows
    ])


def drops(n_dropped=0, n_empty=0):
    return pd.DataFrame({"action": ["dropped"] * n_dropped + ["scored_as_empty"] * n_empty})


def test_ranks_by_mean_radcliq_v1_ascending_even_below_zero():
    # ReXrank's 1/mean ordering would put b (1/0.2 = 5) above a (1/−0.5 = −2): wrong.
    s = summary([("a", "radcliq_v1", -0.5, False), ("b", "radcliq_v1", 0.2, False), ("c", "radcliq_v1", 1.1, False),
                 ("a", "bleu2", 0.3, True), ("b", "bleu2", 0.4, True), ("c", "bleu2", 0.1, True)])
    board = build_leaderboard(s, {"a": drops(1, 2)}, None)
    assert list(board["model"]) == ["a", "b", "c"]
    assert list(board["Rank"]) == [1, 2, 3]
    assert list(board["1/RadCliQ-v1"]) == [-2.0, 5.0, round(1 / 1.1, 3)]
    assert board.loc[0, "Dropped"] == 1 and board.loc[0, "Scored as empty"] == 2
    assert board.loc[1, "Dropped"] == 0
    assert board["Ranked by"].iloc[0] == "RadCliQ-v1 (radcliq_v1) mean, lower is better"
    assert board.loc[0, "RadCliQ-v1 CI low"] == -0.55 and board.loc[0, "RadCliQ-v1 CI high"] == -0.45


def test_fallback_ranking_is_stated_and_ties_share_a_rank():
    s = summary([("a", "bleu2", 0.3, True), ("b", "bleu2", 0.5, True), ("c", "bleu2", 0.3, True)])
    board = build_leaderboard(s, {}, None, rank_by="radcliq_v1", fallback_rank_by="bleu2")
    assert list(board["model"]) == ["b", "a", "c"]
    assert list(board["Rank"]) == [1, 2, 2]
    assert "radcliq_v1 was not computed, so the table is ranked by bleu2" in board["Ranked by"].iloc[0]
    # the metrics that were run, by default; ReXrank's whole column set on request, empty where not run
    assert "BLEU" in board.columns and "1/RadCliQ-v1" not in board.columns and "BertScore" not in board.columns
    full = build_leaderboard(s, {}, None, rank_by="radcliq_v1", fallback_rank_by="bleu2", columns="rexrank")
    assert full["1/RadCliQ-v1"].isna().all() and full["BertScore"].isna().all()
    assert [c for c in full.columns if c in board.columns] == list(board.columns)


def test_unrankable_without_either_metric():
    with pytest.raises(ValueError, match="cannot rank"):
        build_leaderboard(summary([("a", "rougeL", 0.3, True)]), {}, None, rank_by="radcliq_v1",
                          fallback_rank_by="bleu2")


def test_rounding_to_configured_decimals_ranks_on_unrounded_values():
    s = summary([("a", "bleu2", 0.30049, True), ("b", "bleu2", 0.30041, True)])
    board = build_leaderboard(s, {}, None, rank_by="bleu2", decimals=3)
    assert list(board["model"]) == ["a", "b"] and list(board["Rank"]) == [1, 2]
    assert list(board["BLEU"]) == [0.3, 0.3]


def test_model_metadata_sheet(tmp_path):
    sheet = tmp_path / "models.tsv"
    sheet.write_text("model\tname\tdate\tinstitution\turl\na\tModel A\t2026-01-02\tLab\thttps://example.org/a\n")
    meta = read_models_sheet(sheet)
    board = build_leaderboard(summary([("a", "bleu2", 0.3, True), ("z", "bleu2", 0.2, True)]), {}, meta,
                              rank_by="bleu2")
    first, second = board.iloc[0], board.iloc[1]
    assert (first["Model Name"], first["Date"], first["Institution"], first["Model URL"]) == \
        ("Model A", "2026-01-02", "Lab", "https://example.org/a")
    assert second["Model Name"] == "z" and second["Institution"] == ""


def test_rank_uncertainty_columns_are_appended_after_rexranks(tmp_path):
    import numpy as np

    from radrank import metrics
    from radrank.leaderboard import rank_uncertainty
    from radrank.stats import bootstrap

    rng = np.random.default_rng(0)
    base = rng.uniform(0, 1, 60)
    scores = {m: pd.DataFrame({"sample_id": range(60), "bleu2": np.clip(base + shift + rng.normal(0, 0.1, 60), 0, 1)})
              for m, shift in (("a", 0.3), ("b", 0.0), ("c", 0.01))}
    result = bootstrap(scores, metrics.leaves("bleu2"), n_boot=200, seed=1, level=0.95)
    rank_summary, distribution, tied = rank_uncertainty(result.summary, result.replicates, result.comparisons,
                                                        rank_by="radcliq_v1", fallback_rank_by="bleu2", level=0.95)
    meta = {"b": {"name": "Model B"}, "c": {"name": "Model C"}}
    board = build_leaderboard(result.summary, {}, meta, rank_summary=rank_summary, tied=tied)
    plain = build_leaderboard(result.summary, {}, meta)
    assert list(board.columns[:len(plain.columns)]) == list(plain.columns)  # ReXrank's and the old columns first
    assert list(board.columns[len(plain.columns):]) == ["Rank CI", "Rank CI low", "Rank CI high", "P(rank=1)",
                                                        "Rank set", "Rank set low", "Rank set high", "Tier",
                                                        "Tied with"]
    first = board.iloc[0]
    assert (first["model"], first["Rank CI"], first["P(rank=1)"], first["Tied with"]) == ("a", "[1, 1]", 1.0, "")
    # b and c are indistinguishable: each is tied with the other, by display name, and their intervals overlap
    rows = board.set_index("model")
    assert rows.loc["b", "Tied with"] == "Model C" and rows.loc["c", "Tied with"] == "Model B"
    assert rows.loc["b", "Rank CI low"] == 2 and rows.loc["b", "Rank CI high"] == 3
    # a is separated from both even jointly; b and c share tier 2 and a joint set [2, 3]
    assert rows["Tier"].tolist() == [1, 2, 2] and rows.loc["a", "Rank set"] == "[1, 1]"
    assert rows.loc["b", "Rank set"] == rows.loc["c", "Rank set"] == "[2, 3]"
    assert distribution.groupby("model")["probability"].sum().round(12).eq(1).all()
    path = tmp_path / "board.csv"
    board.to_csv(path, index=False)
    again = pd.read_csv(path)
    assert str(again["Rank CI low"].dtype) == "int64"  # whole ranks, not 2.0

"""Group scoring (radrank.scoring, the ScoreGroup job): one metric over every model of a dataset × split,
each distinct pair scored once, equal to scoring each submission on its own; shards and the score cache
change no number and no byte."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from radrank import io, jobs, metrics, provenance
from radrank.metrics import base
from radrank.score_cache import ScoreCache
from radrank.scoring import score_group

REFS = ["No acute cardiopulmonary process.", "Small bilateral pleural effusions with bibasilar atelectasis.",
        "Mild cardiomegaly. No pleural effusion.", "Right lower lobe opacity, concerning for pneumonia.",
        "Stable cardiomediastinal silhouette; no pneumothorax."]


def group_pairs(n_models: int = 4) -> dict:
    """Models that share references (as every leaderboard does) and sometimes hypotheses (a template model)."""
    rng = np.random.default_rng(0)
    out = {}
    for m in range(n_models):
        hyps = ["No acute findings." if (m == 0 or rng.random() < 0.3) else f"{r} Model {m} adds {i}."
                for i, r in enumerate(REFS * 3)]
        out[f"model{m}"] = pd.DataFrame({"sample_id": [f"c{i:02d}" for i in range(len(hyps))],
                                         "reference": REFS * 3, "hypothesis": hyps,
                                         "age": [float(60 + m)] * len(hyps), "indication": ["cough"] * len(hyps)})
    out["model1"] = out["model1"].iloc[::-1].reset_index(drop=True)  # rows in another order
    out["model2"] = out["model2"].iloc[:-4]  # a model that misses some cases
    return out


@pytest.mark.parametrize("metric", ["bleu2", "bleu4", "rouge", "vqa"])
def test_group_equals_each_submission_scored_alone(metric):
    pairs = group_pairs()
    result = score_group(metric, None, pairs)
    for model, frame in pairs.items():
        pd.testing.assert_frame_equal(result.by_model[model], metrics.score(metric, frame), check_exact=True)
    assert result.counts["distinct"] < result.counts["rows"]  # the shared pairs were scored once


def test_requirements_are_scored_model_by_model():
    pairs = group_pairs()
    rng = np.random.default_rng(1)
    required = {name: {m: pd.DataFrame({"sample_id": f["sample_id"], column: rng.random(len(f))})
                       for m, f in pairs.items()}
                for name, column in (("radgraph", "radgraph_combined"), ("bertscore", "bertscore"),
                                     ("semb", "semb_score"), ("bleu2", "bleu2"))}
    result = score_group("radcliq", None, pairs, required=required)
    for model, frame in pairs.items():
        alone = metrics.score("radcliq", frame, inputs={k: v[model] for k, v in required.items()})
        pd.testing.assert_frame_equal(result.by_model[model], alone, check_exact=True)


@pytest.fixture
def cached_rouge():
    """ROUGE: its scores are cached like every metric's but RadCliQ's, so the cache path runs in this env."""
    assert metrics.get("rouge").cache_scores
    return "rouge"


def test_cached_and_uncached_give_the_same_tables_and_a_new_model_scores_only_its_pairs(cached_rouge, tmp_path):
    pairs = group_pairs()
    cache = ScoreCache(tmp_path / "cache")
    fresh = score_group(cached_rouge, None, pairs, cache=cache)
    assert fresh.counts["cached"] == 0 and fresh.counts["scored"] == fresh.counts["distinct"]
    again = score_group(cached_rouge, None, pairs, cache=cache)
    assert again.counts["scored"] == 0 and again.counts["cached"] == again.counts["distinct"]
    for model in pairs:
        pd.testing.assert_frame_equal(again.by_model[model], fresh.by_model[model], check_exact=True)
    assert again.models == fresh.models
    newcomer = {**pairs, "newcomer": pairs["model3"].assign(hypothesis=lambda f: f["hypothesis"] + " New.")}
    grown = score_group(cached_rouge, None, newcomer, cache=cache)
    assert grown.counts["scored"] == len(newcomer["newcomer"]["hypothesis"].unique())  # its pairs only
    pd.testing.assert_frame_equal(grown.by_model["newcomer"], metrics.score("rouge", newcomer["newcomer"]),
                                  check_exact=True)


def test_shards_partition_the_distinct_pairs_and_join_to_the_whole(cached_rouge):
    pairs = group_pairs()
    whole = score_group(cached_rouge, None, pairs)
    parts = [score_group(cached_rouge, None, pairs, shard=(i, 3)).keys for i in range(3)]
    keys = [set(p["_key"]) for p in parts]
    assert sum(map(len, keys)) == whole.counts["distinct"] and not (keys[0] & keys[1] or keys[1] & keys[2])
    assert all(len(k) for k in keys)  # balanced enough that no shard of this group is empty


def _write_group(root, pairs: dict):
    paths = []
    for model, frame in pairs.items():
        path = root / f"pairs/{model}.parquet"
        io.write_parquet(frame, path, provenance.record("pairs", dataset="d", split="findings", model=model,
                                                        n_pairs=len(frame)))
        paths.append(str(path))
    return paths


def test_the_job_writes_byte_identical_files_cached_or_not_and_sharded_or_not(cached_rouge, tmp_path):
    pairs = group_pairs()
    pair_paths = _write_group(tmp_path, pairs)
    models = tuple(pairs)

    def run(folder, cache=None, shards=None):
        outs = [str(tmp_path / folder / f"{m}.parquet") for m in models]
        if shards is None:
            jobs.ScoreGroup.of(cached_rouge, models, cache=cache).run(jobs.Files(pairs=pair_paths),
                                                                      jobs.Files(scores=outs))
        else:
            shard_files = [str(tmp_path / folder / f"shard{i}.parquet") for i in range(shards)]
            for i, path in enumerate(shard_files):
                jobs.ScoreGroup.of(cached_rouge, models, shard=(i, shards), cache=cache).run(
                    jobs.Files(pairs=pair_paths), jobs.Files(shard=path))
            job = jobs.CollectShards(metric=cached_rouge, identity=jobs.ScoreGroup.of(cached_rouge, models).identity,
                                     models=models, settings=metrics.get(cached_rouge).settings())
            job.run(jobs.Files(pairs=pair_paths, shards=shard_files), jobs.Files(scores=outs))
        return [open(p, "rb").read() for p in outs]

    plain = run("plain")
    cache = ScoreCache(tmp_path / "cache")
    assert run("first", cache) == plain
    assert run("cached", cache) == plain  # every row from the cache
    assert run("sharded", shards=3) == plain
    assert run("sharded-cached", cache, shards=2) == plain


def test_failed_requests_are_not_kept():
    class Judge(base.Metric):
        name, reason_column, columns = "judge", "why", ("why",)

    scores = pd.DataFrame({"why": ["", "first answer: request failed (503); retry: request failed (503)",
                                   "api_error: Timeout", "first answer: no JSON object"]})
    assert Judge().cacheable(scores).tolist() == [True, False, False, True]


def test_a_pair_without_a_score_or_scored_twice_fails_the_assembly():
    """The models' tables are built from the group's scored rows by key: a key with no row is an error naming the
    model and how many pairs (never a row of NaN), and so is a key scored twice (never a table with extra rows)."""
    from radrank.scoring import KEY, assemble

    metric = metrics.get("bleu2")
    pairs = {"m": pd.DataFrame({"sample_id": ["a", "b", "c"], "reference": ["x"] * 3, "hypothesis": ["y"] * 3})}
    rows = pd.DataFrame({KEY: ["k1", "k2", "k3"], **{c: [0.1, 0.2, 0.3] for c in metric.columns}})
    got = assemble(metric, rows, {"m": np.array(["k3", "k1", "k1"], dtype=object)}, pairs)["m"]
    assert got["sample_id"].tolist() == ["a", "b", "c"]
    assert got[metric.columns[0]].tolist() == [0.3, 0.1, 0.1]
    with pytest.raises(RuntimeError, match=r"2 pair\(s\) of model 'm' have no score"):
        assemble(metric, rows, {"m": np.array(["k1", "k9", "k8"], dtype=object)}, pairs)
    with pytest.raises(RuntimeError, match="scored twice"):
        assemble(metric, pd.concat([rows, rows.iloc[:1]]), {"m": np.array(["k1", "k2", "k3"], dtype=object)}, pairs)

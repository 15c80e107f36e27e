"""The metric contract (tests/contract.py) for the judge family: GREEN, MRScore and the MRScore rubric on tiny
random models built here, and the rubric's openai backend on a local fake endpoint.

The response cache is off, so every scoring call of the contract really generates (a speed setting compared
with the defaults is not answered from the cache of the first call).
"""

from __future__ import annotations

import json

import pytest

from contract import MetricContract
from fake_openai import FakeOpenAI, user_text


class TestJudgeMetrics(MetricContract):
    metrics = ("green", "mrscore", "mrscore_rubric")

    @pytest.fixture
    def contract_settings(self, metric_name, request):
        if metric_name == "green":  # GREEN's shape; random answers: every pair NaN with its reason
            return {"model": str(request.getfixturevalue("green_dir")), "max_new_tokens": 4, "batch_size": 4,
                    "device": "cpu", "cache_dir": "off"}
        if metric_name == "mrscore":
            return {"model": str(request.getfixturevalue("llama_dir")), "adapter": str(request.getfixturevalue(
                "lora_dir")), "head": str(request.getfixturevalue("head_file")), "batch_size": 4, "device": "cpu",
                "cache_dir": "off"}
        return {"backend": "local", "model": str(request.getfixturevalue("gemma_dir")), "max_new_tokens": 4,
                "max_total_tokens": 1024, "batch_size": 4, "device": "cpu", "cache_dir": "off"}


KEY_VARIABLE = "RADRANK_CONTRACT_JUDGE_KEY"


def _rubric_answer(body: dict) -> str:
    """A verdict that depends on the pair only (so shards and concurrency cannot change it): none for the
    French candidate, an error of completeness for an empty one, else no error."""
    from radrank.metrics import mrscore_rubric

    text = user_text(body)
    candidate = text.split("CANDIDATE report:\n", 1)[1].split("\n\nFor each criterion", 1)[0]
    if "Opacité" in candidate:
        return "Je ne sais pas."
    flags = {k: 0 for k in mrscore_rubric.KEYS} | ({"completeness": 1} if not candidate.strip() else {})
    return json.dumps({**flags, "explanation": "fake judge"})


class TestRubricOnEndpoint(MetricContract):
    """The rubric's openai backend: nothing to load (weights are empty), the key from the environment."""

    metrics = ("mrscore_rubric",)

    @pytest.fixture
    def endpoint(self):
        with FakeOpenAI(_rubric_answer) as fake:
            yield fake

    @pytest.fixture
    def contract_settings(self, metric_name, endpoint, monkeypatch):
        monkeypatch.setenv(KEY_VARIABLE, "sk-contract-test")
        return {"backend": "openai", "model": "judge-model", "api_base": endpoint.base_url,
                "api_key_env": KEY_VARIABLE, "api_max_retries": 0, "cache_dir": "off"}

    @pytest.fixture
    def speed_variants(self, metric_name):
        return [{"api_concurrency": 1, "api_timeout": 30.0}]

    def test_every_pair_was_asked(self, metric_name, contract_settings, endpoint):
        """The endpoint answered each distinct pair (and the retries of the unparsable one): not a cache."""
        from contract import CASES
        from radrank import metrics

        out = metrics.score(metric_name, CASES, contract_settings)
        distinct = len(set(zip(CASES["reference"], CASES["hypothesis"])))
        assert len(endpoint.requests) == distinct + 1  # the French candidate is asked again once
        assert out["mrscore_rubric_unparsed"].sum() == 1 and out["mrscore_rubric"].max() == 100.0

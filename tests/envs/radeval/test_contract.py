"""The metric contract (tests/contract.py) for the radeval family: the four model extras on tiny random
models (tiny_radeval.py; temporal with the recorded stanza stand-in), the two API judges against the fake
OpenAI-compatible server (judges.py on ../fake_openai.py)."""

from __future__ import annotations

import pytest
from _strict import reference
from contract import MetricContract
from fake_openai import FakeOpenAI
from judges import KEY, KEY_ENV, mammo_responder, radfact_responder, write_prompts


@pytest.fixture(autouse=True)
def radeval_package():
    return reference("radeval")


class TestRadEvalModelMetrics(MetricContract):
    metrics = ("radeval_bertscore", "f1radbert_ct", "srrbert", "temporal")

    @pytest.fixture
    def contract_settings(self, metric_name, tiny, request):
        if metric_name == "temporal":
            return {"stanza_dir": str(request.getfixturevalue("fake_stanza"))}
        return {
            "radeval_bertscore": {"model": tiny["modernbert"], "num_layers": 2, "device": "cpu"},
            "f1radbert_ct": {"model": tiny["radbert_ct"], "device": "cpu"},
            "srrbert": {"model": tiny["srr_model"], "tokenizer": tiny["srr_tokenizer"],
                        "nltk_data": tiny["nltk_data"], "device": "cpu"},
        }[metric_name]

    @pytest.fixture
    def speed_variants(self, metric_name):
        # temporal: stanza runs on its device, and the stand-in has none to change.
        return [] if metric_name == "temporal" else [{"batch_size": 1}]


@pytest.fixture(scope="module")
def servers():
    with FakeOpenAI(mammo_responder) as mammo, FakeOpenAI(radfact_responder) as radfact:
        yield {"mammo_green": mammo, "radfact_ct": radfact}


class TestRadEvalJudges(MetricContract):
    metrics = ("mammo_green", "radfact_ct")

    @pytest.fixture
    def contract_settings(self, metric_name, servers, monkeypatch, tmp_path):
        reference("openai"), reference("yaml")
        monkeypatch.setenv(KEY_ENV, KEY)
        settings = {"base_url": servers[metric_name].base_url, "api_key_env": KEY_ENV, "max_retries": 0}
        if metric_name == "radfact_ct":
            settings["prompts_dir"] = str(write_prompts(tmp_path / "radfact_prompts"))
        return settings

    @pytest.fixture
    def speed_variants(self, metric_name):
        return [{"concurrency": 1}, {"request_timeout": 30.0}]

"""The metric contract (tests/contract.py) for CRIMSON, once per way it runs here.

* backend hf through radrank's judge engine, on a tiny Gemma-3 of the CRIMSON model's class that
  answers one evaluation to every prompt (tiny_crimson.py);
* backend hf through the package's own pipeline (``hf_engine: false``), on the same model;
* backend openai against a fake OpenAI-compatible server on 127.0.0.1 (../fake_openai.py), whose
  answers depend on the prompt: an evaluation, a fenced one, prose (NaN with a reason) or an
  HTTP 500 (NaN with the API error).

The response cache is off (conftest.py), so every scoring call generates: the speed-setting
comparisons compare two generations, not a generation with its cached copy.
"""

from __future__ import annotations

import json

import pytest
from contract import CASES, MetricContract
from fake_openai import FakeOpenAI, user_text

# One urgent finding matched with a significant severity error, one actionable finding missed, one
# incidental false finding: CRIMSON 0.2778 (crimson-score's published vector).
EVALUATION = {
    "reference_findings": [{"id": "R1", "finding": "large right pneumothorax", "clinical_significance": "urgent"},
                           {"id": "R2", "finding": "small left pleural effusion",
                            "clinical_significance": "actionable_not_urgent"}],
    "predicted_findings": [{"id": "P1", "finding": "small right pneumothorax", "clinical_significance": "urgent"},
                           {"id": "P2", "finding": "degenerative changes of the spine",
                            "clinical_significance": "not_actionable_not_urgent"}],
    "matched_findings": [{"ref_id": "R1", "pred_id": "P1"}],
    "errors": {"false_findings": ["P2"], "missing_findings": ["R2"],
               "attribute_errors": [{"ref_id": "R1", "pred_id": "P1", "error_types": ["severity"],
                                     "severity": "significant"}]},
}
NO_FINDINGS = {"reference_findings": [], "predicted_findings": [], "matched_findings": [],
               "errors": {"false_findings": [], "missing_findings": [], "attribute_errors": []}}
KEY = "sk-radrank-contract-0b9e2d4c6a8f1e3d5b7a"
KEY_ENV = "RADRANK_TEST_CRIMSON_CONTRACT_KEY"


def _candidate(text: str) -> str:
    return text.split("Predicted Findings (Candidate):\n", 1)[1].split("\n\nTask:", 1)[0]


def _answer(body):
    """An answer that depends on the candidate report only (so a pair's answer is the same in every shard)."""
    candidate = _candidate(user_text(body)).strip()
    if not candidate:
        return "I cannot evaluate an empty report."  # prose: unparsed_json
    if "pneumonia?" in candidate:
        return 500, "the judge is overloaded"  # an API error (max_retries 0: not retried)
    if "clear" in candidate.lower():
        return "```json\n" + json.dumps(NO_FINDINGS) + "\n```"
    return json.dumps(EVALUATION)


@pytest.fixture(scope="module")
def server():
    with FakeOpenAI(_answer) as fake:
        yield fake


def _outcome(answer) -> str:
    if isinstance(answer, tuple):
        return "failed"
    return "unparsed" if answer.startswith("I cannot") else "fenced" if answer.startswith("```") else "scored"


def test_the_fake_answers_cover_every_outcome():
    """The openai contract runs on scored, fenced, unparsed and failed answers alike."""
    from radrank.metrics.crimson import METRIC, build_prompts

    prompts = build_prompts(CASES, METRIC.settings({"backend": "openai"}))
    outcomes = [_outcome(_answer({"messages": [{"role": "user", "content": p}]})) for p in prompts]
    assert set(outcomes) == {"unparsed", "failed", "fenced", "scored"}


class TestCRIMSONEngine(MetricContract):
    metrics = ("crimson",)

    @pytest.fixture
    def contract_settings(self, metric_name, tiny_model):
        return {"model": tiny_model(json.dumps(EVALUATION)), "device": "cpu"}


class TestCRIMSONPackagePipeline(MetricContract):
    metrics = ("crimson",)

    @pytest.fixture
    def contract_settings(self, metric_name, tiny_model):
        return {"model": tiny_model(json.dumps(EVALUATION)), "hf_engine": False}


class TestCRIMSONOpenAI(MetricContract):
    metrics = ("crimson",)

    @pytest.fixture
    def contract_settings(self, metric_name, server, monkeypatch):
        monkeypatch.setenv(KEY_ENV, KEY)
        return {"backend": "openai", "api_model": "judge-test", "base_url": server.base_url, "api_key_env": KEY_ENV,
                "max_retries": 0}

    @pytest.fixture
    def speed_variants(self, metric_name):
        return [{"concurrency": 1}, {"request_timeout": 30.0}]

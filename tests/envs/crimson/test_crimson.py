"""radrank's crimson metric against the crimson-score package (0.2.0) itself.

* the formula: the package's ``_calculate_crimson`` on evaluations that give the published
  test vectors 0.2778, −0.3333, 1.0, −0.6, 1.0 (cases rebuilt from CRIMSON's RadJudge suite
  and RadEval's reward-divergence examples) and RadEval's own mock pair [1.0, −0.5];
* JSON repair on fixture texts (fixtures/responses.json): fences, prose, the package's
  repairs; unparseable or structurally wrong evaluations give NaN with a reason;
* the prompt: identical to the package's ``_build_evaluation_prompt`` for both backends;
  patient context from the pairs' age and indication;
* the hf backend end to end on a tiny random Gemma-3 of the CRIMSON model's class through the
  package's own pipeline (tiny_crimson.py);
* the openai backend against a fake OpenAI-compatible server on 127.0.0.1, with the key read
  from the environment and found nowhere in outputs, logs or provenance;
* the contract answers: settings refused at load, env / GPUs / weights per backend (a missing
  model is refused by the load-time check for hf and vllm alike), the report's explanation.

The metric contract itself (tests/contract.py) runs in test_contract.py.
"""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from fake_openai import FakeOpenAI, user_text

from radrank import metrics
from radrank.errors import ConfigError
from radrank.metrics import crimson
from radrank.runtime import Runtime, available

FIXTURES = Path(__file__).resolve().parent / "fixtures"
REPO = Path(__file__).resolve().parents[3]
METRIC = crimson.METRIC


def F(i, finding, significance):
    return {"id": i, "finding": finding, "clinical_significance": significance}


def evaluation(refs, preds, matched=(), false=(), missing=(), attribute=()):
    return {"reference_findings": list(refs), "predicted_findings": list(preds),
            "matched_findings": [{"ref_id": r, "pred_id": p} for r, p in matched],
            "errors": {"false_findings": list(false), "missing_findings": list(missing),
                       "attribute_errors": list(attribute)}}


# The five published vectors. Each case is (reference, candidate, evaluation, score).
VECTORS = [
    # An urgent finding found with a significant severity error (credit 1·1/(1+0.5) = 2/3), an
    # actionable one missed, an incidental false finding: (2/3 − 1/4) / 1.5 = 5/18.
    ("Large right pneumothorax. Small left pleural effusion.",
     "Small right pneumothorax. Mild degenerative changes of the spine.",
     evaluation([F("R1", "large right pneumothorax", "urgent"),
                 F("R2", "small left pleural effusion", "actionable_not_urgent")],
                [F("P1", "small right pneumothorax", "urgent"),
                 F("P2", "mild degenerative changes of the spine", "not_actionable_not_urgent")],
                matched=[("R1", "P1")], false=["P2"], missing=["R2"],
                attribute=[{"ref_id": "R1", "pred_id": "P1", "error_types": ["severity"],
                            "severity": "significant"}]),
     0.2778),
    # RadEval's headline negation flip: nothing in the reference, one actionable false finding:
    # N_G = 0, x = 0.5, −0.5/1.5.
    ("No pleural effusion.", "Pleural effusion.",
     evaluation([], [F("P1", "pleural effusion", "actionable_not_urgent")], false=["P1"]),
     -0.3333),
    # RadEval's exact-match sanity row: no finding on either side.
    ("No acute cardiopulmonary process.", "No acute cardiopulmonary process.", evaluation([], []), 1.0),
    # RadJudge 1c-like: the urgent reference finding missed, urgent + actionable false findings
    # (the benign one weighs 0): x = 1.5, −1.5/2.5.
    ("Right lower lobe pneumonia.", "Pneumothorax. Left pleural effusion. Cardiomegaly.",
     evaluation([F("R1", "right lower lobe pneumonia", "urgent")],
                [F("P1", "pneumothorax", "urgent"), F("P2", "left pleural effusion", "actionable_not_urgent"),
                 F("P3", "cardiomegaly", "benign_expected")],
                false=["P1", "P2", "P3"], missing=["R1"]),
     -0.6),
    # RadEval's paraphrase row: matched with a negligible descriptor error — full credit.
    ("Mild cardiomegaly.", "The cardiac silhouette is mildly enlarged.",
     evaluation([F("R1", "mild cardiomegaly", "not_actionable_not_urgent")],
                [F("P1", "mildly enlarged cardiac silhouette", "not_actionable_not_urgent")],
                matched=[("R1", "P1")],
                attribute=[{"ref_id": "R1", "pred_id": "P1", "error_types": ["descriptor"],
                            "severity": "negligible"}]),
     1.0),
]
# RadEval's tests/test_crimson.py mock pair: a perfect match, and a weighted false finding.
RADEVAL_MOCK = [
    (evaluation([F("R1", "moderate right pleural effusion", "actionable_not_urgent")],
                [F("P1", "moderate right pleural effusion", "actionable_not_urgent")], matched=[("R1", "P1")]), 1.0),
    (evaluation([F("R1", "small left apical pneumothorax", "actionable_not_urgent")],
                [F("P1", "large right pleural effusion", "urgent")], false=["P1"], missing=["R1"]), -0.5),
]


def _pairs(refs, hyps, ages=None, indications=None):
    n = len(refs)
    return pd.DataFrame({
        "sample_id": [f"s{i}" for i in range(n)], "study_id": list(range(n)), "reference": refs, "hypothesis": hyps,
        "context": [None] * n, "age": [math.nan] * n if ages is None else ages, "sex": [None] * n,
        "indication": [None] * n if indications is None else indications, "comparison": [None] * n,
    })


# --- formula -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", VECTORS, ids=[f"v{i}" for i in range(len(VECTORS))])
def test_published_vectors(case):
    _, _, ev, expected = case
    result = crimson.calculate(ev)
    assert result["crimson_score"] == expected
    row = crimson.score_response(json.dumps(ev))
    assert row["crimson"] == expected and row["crimson_reason"] == ""


def test_vector_columns():
    row = crimson.score_response(json.dumps(VECTORS[0][2]))
    assert row["crimson_false_findings"] == 1 and row["crimson_missing_findings"] == 1
    assert row["crimson_attribute_errors"] == 1 and row["crimson_severity_errors"] == 1
    assert row["crimson_location_errors"] == 0
    assert row["crimson_weighted_false_findings"] == 0.25
    assert row["crimson_weighted_missing_findings"] == 0.5
    assert row["crimson_weighted_attribute_errors"] == 0.5
    assert row["crimson_n_g"] == 1.5 and row["crimson_correct"] == pytest.approx(2 / 3)
    row = crimson.score_response(json.dumps(VECTORS[3][2]))
    assert row["crimson_false_findings"] == 3 and row["crimson_weighted_false_findings"] == 1.5


def test_radeval_mock_pair():
    assert [crimson.calculate(ev)["crimson_score"] for ev, _ in RADEVAL_MOCK] == [s for _, s in RADEVAL_MOCK]


# --- JSON repair ---------------------------------------------------------------------------------------------

RESPONSES = json.loads((FIXTURES / "responses.json").read_text())


@pytest.mark.parametrize("fx", RESPONSES, ids=[f["name"] for f in RESPONSES])
def test_response_fixtures(fx):
    row = crimson.score_response(fx["text"])
    assert row["crimson_response"] == fx["text"]
    if fx["expect_reason"] is None:
        assert row["crimson_reason"] == ""
        assert row["crimson"] == fx["expect_score"]
    else:
        assert row["crimson_reason"].startswith(fx["expect_reason"])
        assert all(math.isnan(row[c]) for c in crimson.NUMBER_COLUMNS)


def test_repair_fixtures_really_need_repair():
    by_name = {f["name"]: f["text"] for f in RESPONSES}
    for name in ("json_fence", "bare_fence", "prose_around", "unclosed_fence", "invalid_escape", "orphan_key",
                 "unescaped_quotes", "missing_open_quote", "array_object_hybrid"):
        with pytest.raises(json.JSONDecodeError):
            json.loads(by_name[name])
    # The package alone does not strip fences; radrank does before calling it.
    from CRIMSON.utils import parse_json_response

    with pytest.raises(ValueError):
        parse_json_response(by_name["json_fence"])


# --- prompts ------------------------------------------------------------------------------------------------


def test_patient_context_from_columns():
    assert crimson.patient_context(82.0, "Chest pain.") == {"age": "82", "indication": "Chest pain."}
    assert crimson.patient_context(4.5, None) == {"age": "4.5"}
    assert crimson.patient_context(math.nan, "nan") is None
    assert crimson.patient_context(None, " Post open heart surgery ") == {"indication": "Post open heart surgery"}


def _package_prompt(api, model_name, ref, hyp, ctx):
    from CRIMSON import CRIMSONScore

    scorer = CRIMSONScore.__new__(CRIMSONScore)  # no model load: only the prompt logic
    scorer.api, scorer.model_name = api, model_name
    return scorer._build_evaluation_prompt(ref, hyp, ctx)


@pytest.mark.parametrize("backend", ["hf", "openai"])
def test_prompts_equal_package(backend):
    refs = [VECTORS[0][0], VECTORS[1][0], VECTORS[2][0]]
    hyps = [VECTORS[0][1], VECTORS[1][1], VECTORS[2][1]]
    pairs = _pairs(refs, hyps, ages=[82.0, math.nan, 25.0], indications=["Routine preoperative evaluation", None, None])
    s = METRIC.settings({"backend": backend})
    ours = crimson.build_prompts(pairs, s)
    api, name = ("hf", crimson.DEFAULT_MODEL) if backend == "hf" else ("openai", "gpt-5.2")
    ctxs = [{"age": "82", "indication": "Routine preoperative evaluation"}, None, {"age": "25"}]
    assert ours == [_package_prompt(api, name, r, h, c) for r, h, c in zip(refs, hyps, ctxs)]
    assert "Patient Context:\n    age: 82\n    indication: Routine preoperative evaluation" in ours[0]
    assert "Patient Context" not in ours[1]
    without = crimson.build_prompts(pairs, s.replace(patient_context=False))
    assert all("Patient Context" not in p for p in without)


def test_guidelines_rule():
    def uses(**values):
        return crimson.uses_guidelines(METRIC.settings(values))

    assert not uses()  # the fine-tuned model was trained without them
    assert not uses(model="/models/rajpurkarlab/medgemma-4b-it-crimson")
    assert uses(model="/models/some-other-llm")
    assert uses(backend="openai")
    assert not uses(backend="openai", include_guidelines=False)
    assert uses(include_guidelines=True)
    for wrong in ("sometimes", "true", 1):  # a string or a number is not a switch: refused at load
        with pytest.raises(ConfigError, match=r"metric_settings\.crimson\.include_guidelines"):
            METRIC.settings({"include_guidelines": wrong})


# --- hf backend on a tiny Gemma-3 ---------------------------------------------------------------------------

FENCED = "```json\n" + json.dumps(VECTORS[0][2]) + "\n```"


@pytest.fixture(scope="module")
def tiny(tiny_model):
    return {"fenced": tiny_model(FENCED), "plain": tiny_model(json.dumps(RADEVAL_MOCK[1][0])),
            "junk": tiny_model(None)}


@pytest.mark.parametrize("hf_engine", [True, False])
def test_hf_end_to_end(tiny, monkeypatch, hf_engine, tmp_path):
    from CRIMSON import CRIMSONScore

    from radrank.runtime.generators import LocalGenerator

    seen = []
    if hf_engine:
        real = LocalGenerator.generate

        def spy(self, prompts, *, params=None):
            seen.extend(prompts)
            return real(self, prompts, params=params)

        monkeypatch.setattr(LocalGenerator, "generate", spy)
    else:
        real = CRIMSONScore._chat_completion_batch

        def spy(self, prompts, batch_size=1):
            seen.extend(prompts)
            return real(self, prompts, batch_size=batch_size)

        monkeypatch.setattr(CRIMSONScore, "_chat_completion_batch", spy)
    refs = [c[0] for c in VECTORS] + [VECTORS[0][0]]
    hyps = [c[1] for c in VECTORS] + [VECTORS[0][1]]  # the last pair repeats the first
    pairs = _pairs(refs, hyps, ages=[82.0] * 6, indications=["Chest pain."] * 6)
    settings = {"model": tiny["fenced"], "batch_size": 2, "hf_engine": hf_engine, "cache_dir": str(tmp_path / "cache")}
    out = metrics.score("crimson", pairs, settings)
    assert out["sample_id"].tolist() == pairs["sample_id"].tolist()
    assert out["crimson"].tolist() == [0.2778] * 6
    assert (out["crimson_reason"] == "").all()
    assert out["crimson_response"].iloc[0] == FENCED
    assert len(seen) == 5  # each distinct prompt generated once
    assert all("Patient Context:\n    age: 82\n    indication: Chest pain." in p for p in seen)
    prov = out.attrs["models"]
    assert prov["crimson"]["generation"].get("do_sample", False) is False
    assert prov["include_guidelines"] is True
    assert prov["crimson"]["model"]["weights_sha256"]
    if hf_engine:
        seen.clear()
        again = metrics.score("crimson", pairs, settings)  # every answer now comes from the response cache
        assert seen == [] and again["crimson"].tolist() == out["crimson"].tolist()


def test_engine_prompts_tokenise_as_the_package_pipeline(tiny):
    import inspect

    from CRIMSON import CRIMSONScore
    from transformers import AutoTokenizer

    prompt = crimson.build_prompts(_pairs([VECTORS[0][0]], [VECTORS[0][1]], ages=[82.0], indications=["Dyspnea"]),
                                   METRIC.settings())[0]
    messages = crimson.package_messages(prompt)
    assert [m["role"] for m in messages] == ["system", "user"] and messages[1]["content"] == prompt
    assert repr(messages[0]["content"])[1:-1] in inspect.getsource(CRIMSONScore._chat_completion_batch)
    tok = AutoTokenizer.from_pretrained(tiny["fenced"])
    loaded = crimson.load_generator(METRIC.settings({"model": tiny["fenced"], "device": "cpu"}), Runtime())
    expected = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                       return_dict=True)["input_ids"]
    assert loaded.generator.encode([crimson.render(tok, prompt)])[0] == list(expected)


def test_hf_matches_package_evaluate_batch(tiny):
    from CRIMSON import CRIMSONScore

    refs, hyps = [VECTORS[1][0], VECTORS[3][0]], [VECTORS[1][1], VECTORS[3][1]]
    pairs = _pairs(refs, hyps)
    ours = metrics.score("crimson", pairs, {"model": tiny["plain"], "batch_size": 2})
    package = CRIMSONScore(api="hf", model_name=tiny["plain"]).evaluate_batch(refs, hyps, batch_size=2)
    assert ours["crimson"].tolist() == [r["crimson_score"] for r in package] == [-0.5, -0.5]
    assert ours["crimson_false_findings"].tolist() == [r["error_counts"]["false_findings"] for r in package]
    # The package cannot parse the fenced answer (it does not strip fences): every result is None.
    fenced = CRIMSONScore(api="hf", model_name=tiny["fenced"]).evaluate_batch(refs, hyps, batch_size=2)
    assert fenced == [None, None]


def test_hf_junk_gives_nan_with_reason(tiny):
    pairs = _pairs([c[0] for c in VECTORS[:2]], [c[1] for c in VECTORS[:2]])
    out = metrics.score("crimson", pairs, {"model": tiny["junk"], "max_new_tokens": 6})
    assert out["crimson"].isna().all()
    assert out["crimson_reason"].str.contains("unparsed_json|empty_response").all()
    assert out["crimson_reason"].str.startswith("first answer:").all()  # asked twice (the engine's retry)
    assert len(out) == 2
    single = metrics.score("crimson", pairs, {"model": tiny["junk"], "max_new_tokens": 6, "retry": False})
    assert single["crimson_reason"].str.match(r"(unparsed_json|empty_response)( \(answer cut|$)").all()


# A job whose model is missing: it must fail in resolution, before torch or transformers is imported
# and without a connection (the hub is off), for each local backend.
MISSING_WEIGHTS_JOB = """
import json, socket, sys
import pandas as pd

def refuse(*args, **kwargs):
    raise AssertionError("a connection was attempted")

socket.socket.connect = refuse
from radrank import metrics
from radrank.errors import MissingWeightsError

pairs = pd.DataFrame({"sample_id": ["s0"], "reference": ["a"], "hypothesis": ["b"]})
errors = []
for settings in json.loads(sys.argv[1]):
    try:
        metrics.score("crimson", pairs, settings)
        errors.append(None)
    except MissingWeightsError as e:
        errors.append(str(e))
print(json.dumps({"errors": errors, "imported": sorted(m for m in ("torch", "transformers", "vllm")
                                                       if m in sys.modules)}))
"""


def test_missing_weights_fail_before_anything_loads():
    cases = [{"model": "radrank-test/not-in-any-cache"}, {"model": "/nonexistent/crimson-model"},
             {"model": "radrank-test/not-in-any-cache", "hf_engine": False},
             {"model": "radrank-test/not-in-any-cache", "backend": "vllm"}]
    done = subprocess.run([sys.executable, "-c", MISSING_WEIGHTS_JOB, json.dumps(cases)], cwd=REPO, text=True,
                          capture_output=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["imported"] == []
    for case, error in zip(cases, result["errors"]):
        assert error is not None, case
        assert case["model"] in error and "metric_settings.crimson.model" in error, error


@pytest.mark.parametrize("backend", ["hf", "vllm"])
def test_load_time_check_refuses_a_missing_model(backend):
    """What the workflow checks when it loads: the same references the job resolves, for vllm as for hf."""
    (ref,) = METRIC.weights(METRIC.settings({"backend": backend, "model": "org/absent"}))
    why = available(ref)
    assert why is not None
    message = str(ref.missing(why))
    assert "org/absent" in message and "metric_settings.crimson.model" in message


def test_env_gpus_and_weights_follow_the_backend():
    hf, vllm, api = (METRIC.settings({"backend": b, "tensor_parallel_size": 2}) for b in ("hf", "vllm", "openai"))
    assert [METRIC.env(s) for s in (hf, vllm, api)] == ["crimson", "vllm", "crimson"]
    assert [METRIC.gpus(s) for s in (hf, vllm, api)] == [1, 2, 0]
    assert [METRIC.resources(s).gpu for s in (hf, vllm, api)] == [1, 2, 0]
    assert [r.ref for r in METRIC.weights(hf)] == [r.ref for r in METRIC.weights(vllm)] == [crimson.DEFAULT_MODEL]
    assert METRIC.weights(api) == ()
    revision = METRIC.weights(METRIC.settings({"revision": "abc123"}))[0]
    assert revision.revision == "abc123" and revision.need == "model"


def test_settings_are_checked_at_load():
    with pytest.raises(ConfigError, match=r"metric_settings\.crimson\.max_new_tokens"):
        METRIC.settings({"max_new_tokens": None})  # the engine needs a budget
    assert METRIC.settings({"max_new_tokens": None, "hf_engine": False}).max_new_tokens is None
    with pytest.raises(ConfigError, match=r"metric_settings\.crimson\.model"):
        METRIC.settings({"model": " "})
    assert METRIC.settings({"model": "", "backend": "openai"}).backend == "openai"  # no model for an API
    with pytest.raises(ConfigError, match=r"metric_settings\.crimson\.api_model"):
        METRIC.settings({"backend": "openai", "api_model": ""})
    with pytest.raises(ConfigError, match=r"metric_settings\.crimson\.concurrency"):
        METRIC.settings({"concurrency": 0})
    with pytest.raises(ConfigError, match=r"metric_settings\.crimson\.device"):
        METRIC.settings({"device": "gpu0"})
    identity = METRIC.identity(METRIC.settings())
    for speed_only in ({"batch_size": 1}, {"concurrency": 1}, {"request_timeout": 5.0}, {"max_retries": 0},
                       {"api_key_env": "OTHER_KEY"}, {"tensor_parallel_size": 2}, {"cache_dir": "off"}):
        assert METRIC.identity(METRIC.settings(speed_only)) == identity, speed_only
    for scoring in ({"backend": "vllm"}, {"base_url": "http://127.0.0.1:1/v1"}, {"include_guidelines": True},
                    {"hf_engine": False}, {"max_new_tokens": 512}, {"retry": False}, {"max_model_len": 4096}):
        assert METRIC.identity(METRIC.settings(scoring)) != identity, scoring


def test_package_pipeline_loaded_once_and_configured_per_call(tiny, monkeypatch):
    """hf_engine false: the package's pipeline is loaded once per process; each call's generation settings
    start from the model's generation_config as loaded (none carried over from an earlier call)."""
    from CRIMSON import CRIMSONScore

    from radrank.runtime import clear_models

    clear_models()
    built = []
    real = CRIMSONScore.__init__

    def counting(self, *args, **kwargs):
        built.append(kwargs.get("model_name"))
        real(self, *args, **kwargs)

    monkeypatch.setattr(CRIMSONScore, "__init__", counting)
    pairs = _pairs([VECTORS[0][0]], [VECTORS[0][1]])
    runs = [{"max_new_tokens": 5}, {"max_new_tokens": None}, {"greedy": False, "max_new_tokens": 7}]
    generation = []
    for extra in runs:
        out = metrics.score("crimson", pairs, {"model": tiny["fenced"], "hf_engine": False, **extra})
        assert out["crimson"].tolist() == [0.2778]
        generation.append(out.attrs["models"]["crimson"]["generation"])
    assert built == [tiny["fenced"]]  # one pipeline for the three calls
    assert [g["max_new_tokens"] for g in generation] == [5, 12, 7]  # 12: the tiny model's generation_config
    assert [g["do_sample"] for g in generation] == [False, False, False]  # the tiny model's own is greedy


# --- the report's explanation ---------------------------------------------------------------------------------


def test_explain_a_scored_answer():
    answer = "```json\n" + json.dumps(VECTORS[0][2]) + "\n```"
    shown = METRIC.explain(crimson.score_response(answer))
    assert shown.label == "CRIMSON" and shown.failure is None
    assert shown.summary == ("false findings: mild degenerative changes of the spine (not_actionable_not_urgent)",
                             "missing findings: small left pleural effusion (actionable_not_urgent)",
                             "attribute errors: small right pneumothorax (urgent): severity (significant)")
    assert shown.details_title == "judge's answer" and shown.details == answer
    perfect = METRIC.explain(crimson.score_response(json.dumps(RADEVAL_MOCK[0][0])))
    assert perfect.summary == ("false findings: none", "missing findings: none", "attribute errors: none")


def test_explain_an_unscored_answer():
    shown = METRIC.explain(pd.Series(crimson.score_response("I cannot evaluate these reports.")))
    assert shown.failure == "not scored (unparsed_json)" and shown.summary == ()
    assert shown.details == "I cannot evaluate these reports."
    # A row without a reason whose answer is not the JSON object the judge was asked for.
    assert METRIC.explain({"crimson_response": "[1, 2]", "crimson_reason": ""}).failure == "not scored (unparsed)"
    for empty in ({"crimson_response": "", "crimson_reason": "api_error: x"}, {"crimson_response": math.nan},
                  {}):
        assert METRIC.explain(empty) is None


# --- openai backend against a fake server -------------------------------------------------------------------

KEY = "sk-radrank-test-7f3a9c1e5b2d4f6a8c0e"
KEY_ENV = "RADRANK_TEST_CRIMSON_KEY"


def _responder(body):
    text = user_text(body)
    for ref, _, ev, _ in VECTORS:
        if f"Reference Findings (Ground Truth):\n{ref}\n" in text:
            if ref == VECTORS[2][0]:
                return "```json\n" + json.dumps(ev) + "\n```"  # fenced, as chat models often answer
            return json.dumps(ev)
    if "Reference Findings (Ground Truth):\nGARBLED\n" in text:
        return "I cannot evaluate these reports."
    return (500, f"server exploded (auth was {body.get('model')})")


def _write_pairs(tmp_path, pairs):
    from radrank import io

    path = tmp_path / "pairs.parquet"
    io.write_parquet(pairs, path, {"stage": "pairs", "dataset": "t", "split": "findings", "model": "m"})
    return path


OPENAI_REFS = [c[0] for c in VECTORS] + ["GARBLED", "NO ANSWER"]
OPENAI_HYPS = [c[1] for c in VECTORS] + ["x", "y"]


def _openai_settings(server) -> dict:
    return {"backend": "openai", "api_model": "judge-test", "base_url": server.base_url, "api_key_env": KEY_ENV,
            "concurrency": 3, "max_retries": 0, "request_timeout": 20}


def test_openai_backend_fake_server(monkeypatch, caplog, capsys):
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    pairs = _pairs(OPENAI_REFS, OPENAI_HYPS, ages=[60.0] + [math.nan] * 6, indications=["Dyspnea"] + [None] * 6)
    with FakeOpenAI(_responder) as server, caplog.at_level(logging.DEBUG):
        out = metrics.score("crimson", pairs, _openai_settings(server))
    assert out["crimson"].iloc[:5].tolist() == [c[3] for c in VECTORS]
    assert out["crimson_reason"].iloc[5] == "unparsed_json"
    assert out["crimson_reason"].iloc[6].startswith("api_error: InternalServerError")
    assert math.isnan(out["crimson"].iloc[5]) and math.isnan(out["crimson"].iloc[6])
    # What the package sent: its system message, temperature 0, seed 42, JSON mode, our key.
    req = server.requests[0]
    assert req["headers"]["authorization"] == f"Bearer {KEY}"
    body = req["body"]
    assert body["model"] == "judge-test" and body["temperature"] == 0.0 and body["seed"] == 42
    assert body["response_format"] == {"type": "json_object"}
    assert body["messages"][0]["role"] == "system"
    assert out.attrs["models"]["crimson"]["base_url"] == server.base_url
    first = next(r["body"] for r in server.requests if VECTORS[0][0] in user_text(r["body"]))
    assert "Patient Context:\n    age: 60\n    indication: Dyspnea" in user_text(first)
    assert "Examples of typical classifications" in user_text(first)  # guidelines on for API models
    # The key is nowhere: not in the scores, their provenance, the logs or the console.
    captured = capsys.readouterr()
    assert KEY not in json.dumps(out.attrs, default=str)
    assert KEY not in out.to_json()
    assert KEY not in caplog.text
    assert KEY not in captured.out + captured.err


def test_openai_key_not_in_the_written_scores(tmp_path, monkeypatch):
    """The scoring job writes the scores and their provenance: the key is in neither."""
    from radrank import io, jobs

    monkeypatch.setenv(KEY_ENV, KEY)
    pairs = _pairs(OPENAI_REFS, OPENAI_HYPS)
    out_path = tmp_path / "scores.parquet"
    with FakeOpenAI(_responder) as server:
        config = {"metric_settings": {"crimson": _openai_settings(server)},
                  "score_cache": {"dir": str(tmp_path / "scores")}}
        identity = METRIC.identity(metrics.configured("crimson", config))
        job = jobs.ScoreGroup.from_params({"metric": "crimson", "identity": identity, "dataset": "d",
                                           "split": "findings", "models": ("m",)}, config)
        job.run(jobs.Files(pairs=[_write_pairs(tmp_path, pairs)]), jobs.Files(scores=[out_path]))
    written = pd.read_parquet(out_path)
    assert written["crimson"].iloc[:5].tolist() == [c[3] for c in VECTORS]
    assert KEY not in out_path.read_bytes().decode("latin-1")
    assert KEY not in json.dumps(io.read_provenance(out_path))
    cached = [f for f in (tmp_path / "scores").rglob("*") if f.is_file()]
    assert cached and all(KEY not in f.read_bytes().decode("latin-1") for f in cached)


def test_openai_missing_key_is_a_config_error(monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(ConfigError, match=KEY_ENV):
        metrics.score("crimson", _pairs(["a"], ["b"]), {"backend": "openai", "api_key_env": KEY_ENV,
                                                        "base_url": "http://127.0.0.1:9/v1"})


def test_unknown_backend():
    with pytest.raises(ConfigError, match=r"metric_settings\.crimson\.backend"):
        metrics.score("crimson", _pairs(["a"], ["b"]), {"backend": "tgi"})


def test_openai_dead_endpoint_fails_the_job(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    with FakeOpenAI(lambda body: (401, "invalid api key")) as server:
        with pytest.raises(RuntimeError, match="all 2 API requests failed") as err:
            metrics.score("crimson", _pairs(["a", "b"], ["c", "d"]), {
                "backend": "openai", "base_url": server.base_url, "api_key_env": KEY_ENV, "max_retries": 0})
    assert "AuthenticationError" in str(err.value) and KEY not in str(err.value)

"""MRScore: the reward-model path (tiny Llama + peft LoRA + linear head) and the rubric judge (parser,
formula, local engine, OpenAI-compatible endpoint with the key from the environment)."""

from __future__ import annotations

import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from radrank import metrics
from radrank.runtime import Runtime

# --- rubric: formula and parser ------------------------------------------------------------------------------


def test_rubric_weights_and_formula():
    from radrank.metrics import mrscore_rubric as mr

    assert [w for _, w, *_ in mr.CRITERIA] == [30, 20, 20, 10, 10, 5, 5]
    assert mr.rubric_score({k: 0 for k in mr.KEYS}) == 100.0
    assert mr.rubric_score({k: 1 for k in mr.KEYS}) == 0.0
    flags = {k: 0 for k in mr.KEYS} | {"impression_consistency": 1, "grammar": 1}
    assert mr.rubric_score(flags) == 65.0
    flags = {k: 0 for k in mr.KEYS} | {"lesion_description": 1, "completeness": 1, "terminology": 1}
    assert mr.rubric_score(flags) == 65.0


def _answer(flags: dict, fence=False, extra="") -> str:
    body = json.dumps({**flags, "explanation": "brief"})
    return f"{extra}```json\n{body}\n```" if fence else extra + body


def test_rubric_parser_accepts():
    from radrank.metrics import mrscore_rubric as mr

    zero = {k: 0 for k in mr.KEYS}
    assert mr.parse(_answer(zero))["score"] == 100.0
    v = mr.parse(_answer(zero | {"impression_organ": 1}, fence=True, extra="Here is my grading:\n"))
    assert v["score"] == 80.0 and v["flags"]["impression_organ"] == 1
    loose = {k: "no" for k in mr.KEYS} | {"grammar": True, "terminology": "1", "completeness": 1.0}
    assert mr.parse(json.dumps(loose))["score"] == 100 - 5 - 5 - 10
    # the last complete object wins over an earlier partial one
    text = '{"impression_consistency": 1} then ' + _answer(zero | {"clinical_history": 1})
    assert mr.parse(text)["score"] == 90.0


@pytest.mark.parametrize("text,reason", [
    ("I think the report is good.", "no JSON object"),
    ('{"impression_consistency": 0}', "missing keys"),
    (json.dumps({k: 2 for k in ("impression_consistency", "impression_organ", "lesion_description",
                                "clinical_history", "completeness", "grammar", "terminology")}), "not 0/1"),
    ('{"impression_consistency": 0, "impression_organ": ', "no JSON object"),
])
def test_rubric_parser_rejects(text, reason):
    from radrank.engine import ParseError
    from radrank.metrics import mrscore_rubric as mr

    with pytest.raises(ParseError, match=reason):
        mr.parse(text)


def test_rubric_prompt():
    from radrank.metrics import mrscore_rubric as mr

    p = mr.build_prompt("Reference text here.", "Candidate " * 400, 300)
    assert "Reference text here." in p and p.count("Candidate") == 300
    assert all(k in p for k in mr.KEYS) and "weight 30" in p


def test_rubric_with_scripted_judge(pairs, scripted, tmp_path):
    """Per-criterion columns, the retry, and NaN with a reason when the retry does not parse either."""
    from radrank.metrics import mrscore_rubric as mr

    zero = {k: 0 for k in mr.KEYS}

    def answer(req, params):
        content = req[0]["content"]
        if "Left effusion." in content:
            return _answer(zero | {"completeness": 1})
        if "Normal heart size." in content:  # garbage first, fine on the retry
            return "hmm" if params["attempt"] == 0 else _answer(zero | {"grammar": 1})
        if "Cardiomegaly." in content:
            return "never a verdict"
        return _answer(zero)

    out = metrics.score("mrscore_rubric", pairs, {"cache_dir": str(tmp_path)},
                        runtime=Runtime(supplied={"mrscore_rubric": scripted(answer)}))
    assert list(out.columns) == ["sample_id", *mr.METRIC.columns]
    got = out.set_index("sample_id")
    assert got.loc["s0", "mrscore_rubric"] == 100.0 and got.loc["s1", "mrscore_rubric"] == 90.0
    assert got.loc["s1", "mrscore_rubric_completeness"] == 1.0 and got.loc["s1", "mrscore_rubric_grammar"] == 0.0
    assert got.loc["s2", "mrscore_rubric"] == 95.0 and got.loc["s2", "mrscore_rubric_unparsed"] == 0.0
    assert math.isnan(got.loc["s4", "mrscore_rubric"]) and got.loc["s4", "mrscore_rubric_unparsed"] == 1.0
    assert "no JSON object" in got.loc["s4", "mrscore_rubric_unparsed_reason"]
    assert got.loc["s4", "mrscore_rubric_analysis"] == "never a verdict"
    leaves = {leaf.name: leaf for leaf in metrics.leaves("mrscore_rubric")}
    assert leaves["mrscore_rubric_unparsed"].value(leaves["mrscore_rubric_unparsed"].statistics(out).sum(0)) == 1


def test_rubric_on_tiny_gemma(gemma_dir, pairs, tmp_path):
    """The local backend through the registry: Gemma chat template, greedy engine, random answers → NaN."""
    settings = {"backend": "local", "model": str(gemma_dir), "max_new_tokens": 5, "batch_size": 4,
                "cache_dir": str(tmp_path)}
    out = metrics.score("mrscore_rubric", pairs, settings)
    assert out["mrscore_rubric"].isna().all() and (out["mrscore_rubric_unparsed"] == 1).all()
    assert out["mrscore_rubric_unparsed_reason"].str.startswith("first answer:").all()


# --- rubric: OpenAI-compatible endpoint ----------------------------------------------------------------------

SECRET = "sk-test-radrank-0123456789abcdefSECRET"


class _FakeAPI(BaseHTTPRequestHandler):
    calls: list = []
    fail_first: set = set()

    def log_message(self, *a):  # keep the test output clean
        pass

    def do_POST(self):
        from radrank.metrics import mrscore_rubric as mr

        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        auth = self.headers.get("Authorization")
        content = body["messages"][-1]["content"]
        type(self).calls.append({"auth": auth, "temperature": body["temperature"], "model": body["model"]})
        if auth != f"Bearer {SECRET}":
            return self._send(401, {"error": {"message": f"Incorrect API key provided: {auth}"}})
        if "Left effusion." in content and content not in type(self).fail_first:
            type(self).fail_first.add(content)
            return self._send(503, {"error": {"message": f"overloaded; your key was {auth}"}})
        if "Cardiomegaly." in content:
            text = "I refuse to answer in JSON."
        else:
            flags = {k: 0 for k in mr.KEYS} | ({"grammar": 1} if "No acute process." in content else {})
            text = json.dumps(flags)
        return self._send(200, {"id": "x", "object": "chat.completion", "model": body["model"],
                                "choices": [{"index": 0, "finish_reason": "stop",
                                             "message": {"role": "assistant", "content": text}}],
                                "usage": {"completion_tokens": 12}})

    def _send(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def fake_api():
    _FakeAPI.calls, _FakeAPI.fail_first = [], set()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeAPI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()
    thread.join(5)


def test_rubric_via_endpoint_never_leaks_the_key(fake_api, pairs, tmp_path, monkeypatch):
    """A whole scoring job (jobs.ScoreGroup: parquet + provenance + log + score cache) against a fake endpoint."""
    from radrank import io, jobs

    monkeypatch.setenv("RADRANK_TEST_JUDGE_KEY", SECRET)
    pairs_path = tmp_path / "pairs.parquet"
    io.write_parquet(pairs, pairs_path, {"dataset": "d", "split": "findings", "model": "m", "n_pairs": len(pairs)})
    settings = {"backend": "openai", "model": "judge-model", "api_base": fake_api,
                "api_key_env": "RADRANK_TEST_JUDGE_KEY", "api_max_retries": 2, "cache_dir": str(tmp_path / "cache")}
    config = {"metric_settings": {"mrscore_rubric": settings}, "score_cache": {"dir": str(tmp_path / "scores")}}
    identity = metrics.get("mrscore_rubric").identity(metrics.configured("mrscore_rubric", config))
    job = jobs.ScoreGroup.from_params({"metric": "mrscore_rubric", "identity": identity, "dataset": "d",
                                       "split": "findings", "models": ("m",)}, config)
    log_path = tmp_path / "job.log"
    with jobs.job_log(log_path):  # the records of every thread (the judge requests run in a pool)
        from radrank.runtime import generators

        monkeypatch.setattr(generators.OpenAIGenerator, "__init__",
                            _fast_backoff(generators.OpenAIGenerator.__init__))
        out = tmp_path / "scores.parquet"
        job.run(jobs.Files(pairs=[pairs_path]), jobs.Files(scores=[out]))
        scores = io.read_parquet(out).set_index("sample_id")
        assert scores.loc["s0", "mrscore_rubric"] == 95.0  # grammar flagged by the fake judge
        assert scores.loc["s1", "mrscore_rubric"] == 100.0  # after one HTTP 503 (retried)
        assert math.isnan(scores.loc["s4", "mrscore_rubric"])
        assert scores.loc["s4", "mrscore_rubric_unparsed"] == 1.0
        assert all(c["auth"] == f"Bearer {SECRET}" for c in _FakeAPI.calls)
        assert {c["temperature"] for c in _FakeAPI.calls} == {0.0, 0.7}  # greedy, then the sampled retry
        prov = io.read_provenance(out)
        assert prov["models"]["api_key_env"] == "RADRANK_TEST_JUDGE_KEY" and prov["models"]["backend"] == "openai"
        for f in [out, log_path, *tmp_path.joinpath("cache").rglob("*"), *tmp_path.joinpath("scores").rglob("*")]:
            if f.is_file():
                assert SECRET.encode() not in f.read_bytes(), f
        assert SECRET not in json.dumps(prov)
        n_requests = len(_FakeAPI.calls)
        job.run(jobs.Files(pairs=[pairs_path]), jobs.Files(scores=[out]))  # the score file is kept
        out.unlink()
        job.run(jobs.Files(pairs=[pairs_path]), jobs.Files(scores=[out]))  # the pair cache answers
        assert len(_FakeAPI.calls) == n_requests  # neither rerun asked the judge
    text = log_path.read_text()
    # the group job asked the judge each distinct pair once (6 pairs, one repeated); then the file was kept
    # (radrank.score_reuse); then, without it, the score cache answered
    assert "mrscore_rubric: 5 requests (5 distinct)" in text and "1 models (1 kept unchanged, 0 scored)" in text
    assert "6 pairs, 5 distinct, 5 from the cache" in text
    assert SECRET not in text


def _fast_backoff(init):
    def wrapped(self, *a, **k):
        init(self, *a, **k)
        self.backoff = 0.01

    return wrapped


def test_endpoint_errors_mask_the_key(fake_api, pairs, monkeypatch, tmp_path):
    """A wrong key: the endpoint echoes what it got; the reason column must not carry the key."""
    monkeypatch.setenv("RADRANK_TEST_WRONG_KEY", "sk-wrong-key-ABCDEFGH12345678")
    settings = {"model": "judge-model", "api_base": fake_api, "api_key_env": "RADRANK_TEST_WRONG_KEY",
                "cache_dir": str(tmp_path), "api_max_retries": 0}
    out = metrics.score("mrscore_rubric", pairs.iloc[:2], settings)
    assert out["mrscore_rubric"].isna().all()
    assert out["mrscore_rubric_unparsed_reason"].str.contains("HTTP 401").all()
    assert not out.astype(str).apply(lambda c: c.str.contains("sk-wrong-key")).any().any()
    assert not list(tmp_path.rglob("*.json"))  # failures are not cached


def test_missing_key_fails_fast(pairs, monkeypatch):
    from radrank.errors import ConfigError

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        metrics.score("mrscore_rubric", pairs, {})


# --- reward model ----------------------------------------------------------------------------------------------


def _manual_rewards(llama_dir, lora_dir, head_file, texts):
    """The reward by hand: unmerged peft model, one text at a time, last token → head."""
    import torch
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(llama_dir))
    base = AutoModelForCausalLM.from_pretrained(str(llama_dir), dtype=torch.float32)
    model = PeftModel.from_pretrained(base, str(lora_dir)).eval()
    head = load_file(str(head_file))
    out = []
    with torch.no_grad():
        for t in texts:
            ids = tok(t, return_tensors="pt")
            h = model(**ids, output_hidden_states=True).hidden_states[-1][0, -1]
            out.append(float(h @ head["weight"][0] + head["bias"][0]))
    return out


@pytest.fixture
def reward_settings(llama_dir, lora_dir, head_file, tmp_path):
    return {"model": str(llama_dir), "adapter": str(lora_dir), "head": str(head_file), "device": "cpu",
            "batch_size": 4, "cache_dir": str(tmp_path / "cache")}


def test_reward_model_matches_manual(reward_settings, pairs, llama_dir, lora_dir, head_file):
    from radrank.metrics import mrscore

    out = metrics.score("mrscore", pairs, reward_settings)
    assert list(out.columns) == ["sample_id", *mrscore.METRIC.columns]
    texts = [mrscore.DEFAULT_TEMPLATE.format(reference=r, hypothesis=h) for r, h in
             zip(pairs.reference, pairs.hypothesis)]
    manual = _manual_rewards(llama_dir, lora_dir, head_file, texts)
    assert out["mrscore_reward"].to_numpy() == pytest.approx(manual, abs=1e-4)
    assert out["mrscore"].to_numpy() == pytest.approx(1 / (1 + np.exp(-np.array(manual))), abs=1e-5)
    assert out["mrscore"].between(0, 1).all() and out["mrscore"].nunique() > 2
    assert out.attrs["models"]["adapter"]["merged"] is True


def test_reward_unmerged_batch_one_and_cache(reward_settings, pairs, monkeypatch):
    from radrank.metrics import mrscore

    merged = metrics.score("mrscore", pairs, {**reward_settings, "cache_dir": "off"})
    unmerged = metrics.score("mrscore", pairs, {**reward_settings, "merge_adapter": False, "batch_size": 1,
                                                "cache_dir": "off"})
    assert unmerged["mrscore_reward"].to_numpy() == pytest.approx(merged["mrscore_reward"].to_numpy(), abs=1e-4)
    assert unmerged.attrs["models"]["adapter"]["merged"] is False
    first = metrics.score("mrscore", pairs, reward_settings)
    calls = []
    real = mrscore.RewardModel.rewards_ids
    monkeypatch.setattr(mrscore.RewardModel, "rewards_ids", lambda self, ids: calls.append(ids) or real(self, ids))
    again = metrics.score("mrscore", pairs, reward_settings)
    assert calls == [] and again.equals(first)


def test_reward_without_adapter_and_head_formats(llama_dir, tmp_path, pairs):
    import torch

    from radrank.metrics import mrscore

    torch.save({"score.weight": torch.ones(1, 32) * 0.01, "score.bias": torch.tensor([0.5])}, tmp_path / "h.pt")
    w, b = mrscore.load_head(tmp_path / "h.pt")
    assert w.shape == (1, 32) and float(b[0]) == 0.5
    settings = {"model": str(llama_dir), "head": str(tmp_path / "h.pt"), "device": "cpu", "cache_dir": "off"}
    out = metrics.score("mrscore", pairs, settings)
    assert np.isfinite(out["mrscore_reward"]).all()


def test_reward_missing_weights_fail_before_loading(pairs, llama_dir, head_file, tmp_path, monkeypatch):
    """Each missing part is refused by the load-time check (weights + available) and by the job at resolution,
    naming its config key, before any model is loaded."""
    from radrank.errors import MissingWeightsError
    from radrank.metrics import mrscore
    from radrank.runtime import available, loaders

    def must_not_load(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(loaders, "load_causal_lm", must_not_load)
    (tmp_path / "adapter").mkdir()
    cases = [({}, "model", "not public"),
             ({"model": "someone/mrscore-backbone", "head": str(head_file)}, "model",
              r"metric_settings\.mrscore\.model"),
             ({"model": str(llama_dir)}, "head", r"not public: .*metric_settings\.mrscore\.head"),
             ({"model": str(llama_dir), "head": str(tmp_path / "none.safetensors")}, "head",
              r"metric_settings\.mrscore\.head"),
             ({"model": str(llama_dir), "head": str(tmp_path)}, "head", "reward_head.safetensors does not exist"),
             ({"model": str(llama_dir), "head": str(head_file), "adapter": str(tmp_path / "adapter")}, "adapter",
              "adapter_config.json")]
    for settings, refused, message in cases:
        s = mrscore.METRIC.settings(settings)
        why = {ref.setting: available(ref) for ref in mrscore.METRIC.weights(s)}
        assert why[refused] is not None, (settings, why)
        with pytest.raises(MissingWeightsError, match=message):
            metrics.score("mrscore", pairs, s)


# --- rubric: constrained verdicts -------------------------------------------------------------------------------


def _flags_by_hand(model_dir, prompt: str) -> dict:
    """Each flag the choice a full forward pass makes: log P("1") vs log P("0") after the JSON written so far."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from radrank.metrics import mrscore_rubric as mr

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    lm = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    rendered = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                       add_generation_prompt=True)
    ids = tok(rendered, add_special_tokens=False)["input_ids"]
    flags = {}
    for key in mr.KEYS:
        text = "{" + "".join(f'"{k}": {flags[k]}, ' for k in flags) + f'"{key}": '
        context = ids + tok(text, add_special_tokens=False)["input_ids"]
        scores = []
        for option in ("0", "1"):
            opt = tok(option, add_special_tokens=False)["input_ids"]
            with torch.no_grad():
                logp = torch.log_softmax(lm(torch.tensor([context + opt])).logits[0].float(), -1)
            scores.append(sum(float(logp[len(context) - 1 + t, o]) for t, o in enumerate(opt)))
        flags[key] = int(scores[1] > scores[0])
    return flags


def test_constrained_verdicts_parse_and_equal_the_models_choice(gemma_dir, pairs, tmp_path):
    """verdict: constrained — every pair gets a verdict (a random model never writes JSON), each flag is the
    model's own likelihood choice computed here without the engine, and the verdicts are cached."""
    from radrank.metrics import mrscore_rubric as mr

    settings = {"backend": "local", "model": str(gemma_dir), "verdict": "constrained", "batch_size": 3,
                "cache_dir": str(tmp_path)}
    out = metrics.score("mrscore_rubric", pairs, settings)
    assert (out["mrscore_rubric_unparsed"] == 0).all() and out["mrscore_rubric"].notna().all()
    for i in (0, 4):
        expected = _flags_by_hand(gemma_dir, mr.build_prompt(pairs.loc[i, "reference"], pairs.loc[i, "hypothesis"]))
        got = {k: int(out.loc[i, f"mrscore_rubric_{k}"]) for k in mr.KEYS}
        assert got == expected
        assert out.loc[i, "mrscore_rubric"] == mr.rubric_score(expected)
    assert mr.explanation_of(out.loc[0, "mrscore_rubric_analysis"]) == mr.CONSTRAINED_EXPLANATION
    again = metrics.score("mrscore_rubric", pairs, settings)
    assert again.equals(out)
    with pytest.raises(Exception, match="constrained verdicts need the local backend"):
        metrics.get("mrscore_rubric").settings({"verdict": "constrained", "backend": "vllm", "model": "x"})


def test_training_candidates_on_a_tiny_local_writer(llama_dir, tmp_path):
    """The writer of MRScore's training data on the real local engine: greedy for one candidate per tier,
    seeded sampling for two, every candidate a non-empty report, the same again from the cache."""
    import pandas as pd

    from radrank.mrscore_train import candidates
    from radrank.mrscore_train.config import DEFAULT_TIERS, read_tiers
    from radrank.runtime import Runtime, WeightRef

    refs = pd.DataFrame({"reference_id": ["d:1", "d:2"], "reference": [
        "Findings: Small left pleural effusion. Impression: Left effusion.",
        "Findings: The lungs are clear. Impression: No acute process."]})
    ref = WeightRef("test", "model", str(llama_dir), need="model")
    s = candidates.CandidateSettings.build({"model": str(llama_dir), "max_new_tokens": 6, "candidates_per_tier": 2,
                                            "temperature": 1.0, "cache_dir": str(tmp_path)})
    out, drops = candidates.write_candidates(refs, read_tiers(DEFAULT_TIERS), s, Runtime(), ref=ref)
    assert len(out) + len(drops) == 2 * 3 * 2
    assert (out["candidate"].str.strip() != "").all() and set(drops["stage"]) <= {"write"}
    first = out[out["k"] == 0].set_index("candidate_id")["candidate"]
    second = out[out["k"] == 1].set_index("candidate_id")["candidate"]
    assert len(first) and len(second)
    again, _ = candidates.write_candidates(refs, read_tiers(DEFAULT_TIERS), s, Runtime(), ref=ref)
    assert again.equals(out)

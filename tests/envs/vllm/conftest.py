"""Fixtures of the vllm environment's tests: vLLM's CPU build on tiny random models built here.

Run with that environment's interpreter from the repository root:
``python -m pytest tests/envs/vllm``. Outside it (no vllm) these tests are not collected.

The tiny models come from the judge suite's builders (tests/envs/judge/tiny_judge.py), a
Llama of GREEN's shape and a Gemma-3 text model (the CRIMSON / rubric shape), with
attention heads of 32 dimensions: the smallest head size vLLM's CPU attention kernels
implement. One vLLM engine per model is started for the whole session (as one per job).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import hf_sandbox

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[2] / "src"
JUDGE_TESTS = HERE.parent / "judge"

_NEEDED = ("torch", "transformers", "tokenizers", "vllm", "radeval")
if any(importlib.util.find_spec(m) is None for m in _NEEDED):
    collect_ignore_glob = ["test_*.py"]
else:
    hf_sandbox.isolate(SRC, JUDGE_TESTS, judge_cache=True)
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")  # shared CI machine: no core pinning
    os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")

import pytest  # noqa: E402

HEAD_DIM = 32  # vLLM's CPU attention: head sizes 32, 64, 80, ...


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("tiny-vllm")


@pytest.fixture(scope="session")
def green_dir(tiny_dir):
    import tiny_judge

    return tiny_judge.build_green_like(tiny_dir / "green", hidden=2 * HEAD_DIM, heads=2, intermediate=128)


@pytest.fixture(scope="session")
def gemma_dir(tiny_dir):
    import tiny_judge

    return tiny_judge.build_gemma_like(tiny_dir / "gemma", hidden=2 * HEAD_DIM, heads=2, kv_heads=1,
                                       head_dim=HEAD_DIM, intermediate=128)


def judge_settings(metric_settings: dict, model_dir, backend: str, cache_dir, **extra) -> dict:
    return {**metric_settings, "model": str(model_dir), "backend": backend, "device": "cpu", "dtype": "fp32",
            "cache_dir": str(cache_dir), "max_model_len": 2048, "cpu_kv_cache_gb": 0.25, **extra}  # noqa: E501


@pytest.fixture(scope="session")
def green_pair(green_dir, tmp_path_factory):
    """(hf generator, vllm generator) for the GREEN-shaped model, with GREEN's tokenizer options."""
    from radrank.metrics import green
    from radrank.runtime import Runtime

    cache = tmp_path_factory.mktemp("green-cache")
    hf = green.load_generator(green.METRIC.settings(judge_settings({}, green_dir, "hf", cache, max_new_tokens=12,
                                                                   batch_size=4)), Runtime()).generator
    vl = green.load_generator(green.METRIC.settings(judge_settings({}, green_dir, "vllm", cache, max_new_tokens=12)),
                              Runtime()).generator
    return hf, vl


@pytest.fixture(scope="session")
def gemma_pair(gemma_dir):
    from radrank.metrics.judge import JudgeSettings, model_ref
    from radrank.runtime import Runtime, generators

    s = JudgeSettings.build({"model": str(gemma_dir), "device": "cpu", "dtype": "fp32", "batch_size": 3,
                             "max_new_tokens": 10, "max_total_tokens": 1024, "static_cache": False,
                             "max_model_len": 1024, "cpu_kv_cache_gb": 0.25})
    ref = model_ref("test", "test.model", s)
    hf = generators.load_local_generator(ref, s, Runtime(), add_special_tokens=False).generator
    vl = generators.load_vllm_generator(ref, s, Runtime(), add_special_tokens=False).generator
    return hf, vl


@pytest.fixture(scope="session")
def crimson_dir(tiny_dir):
    """A Gemma-3 text model (the CRIMSON judge's language model; head size 32) with the CRIMSON
    suite's tokenizer, trained on the package's own prompts so that a prompt is ~1-2k tokens."""
    import torch
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    sys.path.insert(0, str(HERE.parent / "crimson"))
    import tiny_crimson

    directory = tiny_dir / "crimson"
    tok = tiny_crimson._tokenizer(None)
    tok.save_pretrained(str(directory))
    eos = [tok.convert_tokens_to_ids("<eos>"), tok.convert_tokens_to_ids("<end_of_turn>")]
    config = Gemma3TextConfig(vocab_size=len(tok), hidden_size=2 * HEAD_DIM, intermediate_size=128,
                              num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, head_dim=HEAD_DIM,
                              sliding_window=64, max_position_embeddings=8192, query_pre_attn_scalar=HEAD_DIM,
                              bos_token_id=tok.bos_token_id, eos_token_id=eos, pad_token_id=tok.pad_token_id,
                              tie_word_embeddings=True)
    torch.manual_seed(5)
    Gemma3ForCausalLM(config).eval().save_pretrained(str(directory))
    return directory


@pytest.fixture(scope="session")
def answering_green_dir(tiny_dir):
    import tiny_green

    return tiny_green.build(tiny_dir / "green-answering")

"""MedGemma generating on vLLM (``backend: vllm``) against the hf recipe, on a tiny random Gemma 3
vision-language model: the same prompts, the same model input (image tokens included) and the same
greedy answers for reports and VQA, one engine per process for both tasks, the per-prompt image
limit, what provenance says, and the missing-weights error.

Each backend runs in a process of its own (medgemma_run.py): vLLM's Transformers modeling backend,
which serves Gemma 3 multimodal where torchvision is absent (vLLM's CPU build here), patches
transformers' Gemma 3 classes for the whole process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "gen-medgemma"))

SETTINGS = {"max_new_tokens": 12, "vqa_max_new_tokens": 24, "max_model_len": 1024, "cpu_kv_cache_gb": 0.25,
            "vllm_max_images": 3}


@pytest.fixture(scope="module")
def medgemma_dir(tmp_path_factory):
    import tiny_vlm

    # Untied output head and a wide initialisation: answers differ per prompt and image.
    return tiny_vlm.build_gemma3(tmp_path_factory.mktemp("tiny-medgemma") / "gemma3", hidden=64, heads=2,
                                 head_dim=32, init_std=0.3, seed=1, tie_embeddings=False)


def _run(model_dir, backend: str, **extra) -> dict:
    proc = subprocess.run([sys.executable, str(HERE / "medgemma_run.py"), str(model_dir), backend,
                           json.dumps({**SETTINGS, **extra})], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


@pytest.fixture(scope="module")
def runs(medgemma_dir):
    return {"hf": _run(medgemma_dir, "hf"), "vllm": _run(medgemma_dir, "vllm", check_limit=True, check_model_len=70)}


def test_same_prompts_same_model_input(runs):
    """The same chat-template text, and vLLM's processor output equals the hf processor's ids (every
    image expanded to its soft tokens; no second BOS)."""
    hf, vl = runs["hf"], runs["vllm"]
    assert vl["rendered"] == hf["rendered"]
    assert vl["prompt_ids"] == hf["prompt_ids"]
    assert len({len(x) for x in hf["prompt_ids"]}) == 4  # 1, 2, 1 and 3 images; with and without indication
    assert all(ids.count(ids[0]) == 1 for ids in vl["prompt_ids"])  # BOS once


def test_greedy_answers_equal_hf(runs):
    hf, vl = runs["hf"], runs["vllm"]
    assert vl["report"] == hf["report"]
    assert vl["vqa"] == hf["vqa"]
    assert len(set(hf["report"])) >= 3 and len(set(hf["vqa"])) >= 3  # answers depend on the input
    assert vl["stats"]["new_tokens"] == hf["stats"]["new_tokens"]
    assert vl["stats"]["batches"] == 1  # the whole call is one vLLM request list


def test_one_engine_for_every_call_of_the_job(runs):
    assert runs["vllm"]["engine_id"] == runs["vllm"]["vqa_engine_id"]


def test_too_many_images_name_the_setting(runs):
    error = runs["vllm"]["limit_error"]
    assert error.startswith("ConfigError") and "4 images" in error and "admits 3" in error
    assert "backbone_settings.medgemma.vllm_max_images" in error


def test_an_answer_cut_by_max_model_len_is_an_error(runs):
    """vLLM would stop the 63-token prompt's answer after 7 of its 12 tokens, where the hf recipe goes on."""
    error = runs["vllm"]["model_len_error"]
    assert error.startswith("ConfigError") and "a prompt of 63 tokens leaves 7 of the 12 new tokens" in error
    assert "backbone_settings.medgemma.max_model_len to at least 75" in error


def test_provenance(runs):
    desc = runs["vllm"]["describe"]
    assert desc["backend"] == "vllm" and desc["vllm"].startswith("vllm")
    used = desc["vllm_settings"]
    assert used["model_impl"] == "transformers"  # no torchvision in the CPU build
    assert used["limit_mm_per_prompt"] == {"image": 3} and used["mm_processor_kwargs"] == {"backend": "pil"}
    assert used["enable_prefix_caching"] and used["dtype"] == "float32" and used["tensor_parallel_size"] == 1
    assert runs["hf"]["describe"]["backend"] == "hf"


def test_missing_weights_fail_before_vllm_starts(tmp_path):
    from radrank import backbones
    from radrank.errors import MissingWeightsError

    with pytest.raises(MissingWeightsError, match=r"backbone 'medgemma'.*backbone_settings\.medgemma\.model"):
        backbones.load("medgemma", {"model": str(tmp_path / "absent"), "backend": "vllm"})

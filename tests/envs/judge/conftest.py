"""Fixtures of the judge environment's tests (engine, green, mrscore, mrscore_rubric).

Run with that environment's interpreter from the repository root:
``python -m pytest tests/envs/judge``. Outside it (no torch / transformers /
peft / radeval) these tests are not collected.

No model is downloaded: the hub is off (HF_HUB_OFFLINE=1), the Hugging Face
cache is an empty temporary folder, and the judge response cache defaults to a
temporary folder, so only the tiny models built here exist.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import hf_sandbox

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[2] / "src"
DATA = HERE / "data"

_NEEDED = ("torch", "transformers", "tokenizers", "peft", "radeval")
if any(importlib.util.find_spec(m) is None for m in _NEEDED):
    collect_ignore_glob = ["test_*.py"]
else:
    hf_sandbox.isolate(SRC, HERE, judge_cache=True)
    for var in ("NO_PROXY", "no_proxy"):  # the fake endpoint on 127.0.0.1 must not go through a proxy
        os.environ[var] = ",".join(x for x in (os.environ.get(var, ""), "127.0.0.1", "localhost") if x)

import pytest  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _few_threads():
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("tiny-judges")


@pytest.fixture(scope="session")
def green_dir(tiny_dir):
    import tiny_judge

    return tiny_judge.build_green_like(tiny_dir / "green")


@pytest.fixture(scope="session")
def gemma_dir(tiny_dir):
    import tiny_judge

    return tiny_judge.build_gemma_like(tiny_dir / "gemma")


@pytest.fixture(scope="session")
def llama_dir(tiny_dir):
    import tiny_judge

    return tiny_judge.build_llama(tiny_dir / "llama", hidden=32)


@pytest.fixture(scope="session")
def lora_dir(tiny_dir, llama_dir):
    import tiny_judge

    return tiny_judge.build_lora_adapter(tiny_dir / "lora", llama_dir)


@pytest.fixture(scope="session")
def head_file(tiny_dir):
    import tiny_judge

    return tiny_judge.build_reward_head(tiny_dir / "head" / "reward_head.safetensors", 32)


@pytest.fixture(scope="session")
def green_fixture():
    import json

    return json.loads((DATA / "green_completions.json").read_text(encoding="utf-8"))


@pytest.fixture
def pairs():
    import pandas as pd

    refs = ["Lungs are clear. No effusion.", "Small left pleural effusion.", "Heart size is normal.",
            "Lungs are clear. No effusion.", "Mild cardiomegaly with bibasilar atelectasis and small effusions.", ""]
    hyps = ["No acute process.", "Left effusion.", "Normal heart size.", "No acute process.",
            "Cardiomegaly.", "No pneumothorax."]
    return pd.DataFrame({"sample_id": [f"s{i}" for i in range(len(refs))], "reference": refs, "hypothesis": hyps})


class ScriptedGenerator:
    """An engine generator that answers from a function of (request, params) and counts calls."""

    kind = "scripted"
    tokenizer = None

    def __init__(self, answer, identity=None):
        self.answer = answer
        self.identity = identity or {"model": "scripted", "revision": "1"}
        self.calls = []
        self.max_new_tokens = 64

    def params(self, attempt=0, *, max_new_tokens=None, temperature=0.0):
        return {"attempt": attempt, "max_new_tokens": max_new_tokens or self.max_new_tokens,
                "temperature": temperature}

    def retry_params(self, first):
        if not first.finished:
            return self.params(1, max_new_tokens=self.max_new_tokens * 2)
        return self.params(1, temperature=0.7)

    def generate(self, requests, *, params=None):
        from radrank.runtime.generators import Generation

        self.calls.append((list(requests), params))
        out = []
        for r in requests:
            a = self.answer(r, params)
            out.append(a if isinstance(a, Generation) else Generation(text=a, new_tokens=len(a.split())))
        return out


@pytest.fixture
def scripted():
    return ScriptedGenerator

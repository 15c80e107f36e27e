"""Fixtures of the train environment's tests (MRScore training: radrank.mrscore_train.trainer).

Run with that environment's interpreter from the repository root:
``.venvs/train/bin/python -m pytest tests/envs/train``. Outside it (no torch / transformers / trl /
peft) these tests are not collected.

No model is downloaded: the hub is off (HF_HUB_OFFLINE=1), the Hugging Face cache is an empty
temporary folder, and the only backbone is the tiny random Mistral built here (tiny_train.py).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import hf_sandbox

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[2] / "src"

_NEEDED = ("torch", "transformers", "tokenizers", "trl", "peft", "datasets", "safetensors")
if any(importlib.util.find_spec(m) is None for m in _NEEDED):
    collect_ignore_glob = ["test_*.py"]
else:
    hf_sandbox.isolate(SRC, HERE, judge_cache=True)

import pytest  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _few_threads():
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def base_dir(tmp_path_factory):
    """A tiny random MistralForCausalLM + fast tokenizer whose chat template ends the user turn with EOS."""
    import tiny_train

    return tiny_train.build_mistral(tmp_path_factory.mktemp("tiny-train") / "mistral")


@pytest.fixture
def settings(base_dir):
    """TrainSettings for the tiny base on the CPU: every step saved and logged, no warm-up."""
    from radrank.mrscore_train.trainer import TrainSettings

    def make(**changes):
        values = {"base_model": str(base_dir), "device": "cpu", "per_device_batch_size": 2,
                  "gradient_accumulation_steps": 1, "save_steps": 1, "logging_steps": 1, "warmup_ratio": 0.0,
                  "max_length": 512}
        return TrainSettings.build({**values, **changes})

    return make


@pytest.fixture(scope="session")
def prompt():
    from radrank.metrics.mrscore import MRScoreSettings

    return MRScoreSettings.build({"max_length": 512, "max_report_words": 60})


@pytest.fixture(scope="session")
def trained(base_dir, prompt, tmp_path_factory):
    """One run shared by the export tests: 3 steps at a high learning rate, so the LoRA weights and the head move."""
    import tiny_train
    from radrank.mrscore_train.trainer import TrainSettings, train

    out = tmp_path_factory.mktemp("trained")
    s = TrainSettings.build({"base_model": str(base_dir), "device": "cpu", "per_device_batch_size": 2,
                             "gradient_accumulation_steps": 1, "max_steps": 3, "save_steps": 3, "logging_steps": 1,
                             "warmup_ratio": 0.0, "learning_rate": 0.05, "max_length": 512})
    summary = train(tiny_train.pairs_frame(6, seed=3), out, s, prompt)
    return {"out": out, "summary": summary, "settings": s}

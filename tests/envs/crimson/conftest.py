"""Tests of the crimson environment (crimson-score 0.2.0, transformers >= 5.3, peft, openai).

Run from the repository root with that environment's python:
``python -m pytest tests/envs/crimson``. Nothing is downloaded: the hub is off, the model is a
tiny random Gemma-3 built here (tiny_crimson.py), and the API backend talks to a fake
OpenAI-compatible server on 127.0.0.1 (../fake_openai.py).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["RADRANK_JUDGE_CACHE"] = "off"  # tests that use the response cache give their own cache_dir

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[2] / "src"
for p in (SRC, HERE.parent):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))


def pytest_configure(config):
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass

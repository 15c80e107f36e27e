"""Tests of the radeval environment (radeval 2.2.1 on transformers 5, numpy < 2; openai for the API metrics).

Run from the repository root with that environment's python:
``python -m pytest tests/envs/radeval``. Nothing is downloaded: the hub is off, the models are
tiny random ones built here (tiny_radeval.py), and the API metrics talk to a fake
OpenAI-compatible server on 127.0.0.1 (../fake_openai.py).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

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

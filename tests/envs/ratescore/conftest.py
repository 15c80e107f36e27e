"""Tests of the ratescore environment (ratescore 0.6.0, medspacy, transformers 5, numpy < 2).

Run from the repository root with that environment's python:
``python -m pytest tests/envs/ratescore``. Nothing is downloaded: the hub is off and the
models are tiny random ones built here (tiny_ratescore.py).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

SRC = Path(__file__).resolve().parents[3] / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))


def pytest_configure(config):
    # Tiny models: one thread avoids thread start-up and contention costs that dominate their run time.
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass

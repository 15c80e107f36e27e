"""Shared by every environment's own test folder (tests/envs/<family>/, run with that family's
pytest from the repository root): the hub is off, and torch uses one thread — tiny models spend
most of their time starting threads otherwise. pyproject's `pythonpath` puts src/ on the path;
this folder is on it too (pytest's rootdir-relative import), so suites share fake_openai.py."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"


def pytest_configure(config):
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(1)

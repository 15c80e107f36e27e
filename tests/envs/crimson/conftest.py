"""Tests of the crimson environment (crimson-score 0.2.0, transformers >= 5.3, peft, openai).

Run from the repository root with that environment's python:
``python -m pytest tests/envs/crimson``. Nothing is downloaded: the hub is off, the model is a
tiny random Gemma-3 built here (tiny_crimson.py), and the API backend talks to a fake
OpenAI-compatible server on 127.0.0.1 (../fake_openai.py).
"""

from __future__ import annotations

import os

os.environ["RADRANK_JUDGE_CACHE"] = "off"  # tests that use the response cache give their own cache_dir

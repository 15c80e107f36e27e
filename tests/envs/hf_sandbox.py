"""A private, offline Hugging Face home for one environment's test folder (tests/envs/<family>/).

Called by a family's conftest before anything imports huggingface_hub: the hub is off, the Hugging
Face cache is an empty temporary folder removed at exit (so only the tiny models the tests build
exist), and, for the judges, the response cache is a temporary folder too. This folder is on
sys.path through tests/envs/conftest.py (pytest's rootdir-relative import), as fake_openai.py is.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile


def _temporary(variable: str, prefix: str) -> None:
    os.environ[variable] = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, os.environ[variable], True)


def isolate(*import_paths, judge_cache: bool = False) -> None:
    """Hub off, a private empty HF_HOME, and ``import_paths`` first on sys.path."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    _temporary("HF_HOME", "radrank-hf-home-")
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_CACHE", "HF_MODULES_CACHE"):
        os.environ.pop(var, None)  # each would point the libraries past HF_HOME
    if judge_cache:
        _temporary("RADRANK_JUDGE_CACHE", "radrank-judge-cache-")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    for p in map(str, import_paths):
        if p not in sys.path:
            sys.path.insert(0, p)

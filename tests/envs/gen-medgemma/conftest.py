"""Fixtures of the generation-backbone tests (environment gen-medgemma: transformers 5, or >= 4.50).

Run with that environment's interpreter from the repository root:
``python -m pytest tests/envs/gen-medgemma``. Outside it (no torch / transformers)
these tests are not collected. The MAIRA-2 tests also run under gen-maira2
(transformers 4.46); the MedGemma ones need Gemma 3 (transformers >= 4.50) and
skip without it.

No model is downloaded: the hub is off (HF_HUB_OFFLINE=1) and the Hugging Face
cache is an empty temporary folder, so only the tiny random models built here
(tiny_vlm.py) exist.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import hf_sandbox

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[2] / "src"

_NEEDED = ("torch", "transformers", "tokenizers", "PIL")
if any(importlib.util.find_spec(m) is None for m in _NEEDED):
    collect_ignore_glob = ["test_*.py"]
else:
    hf_sandbox.isolate(SRC, HERE)
    os.environ.setdefault("OMP_NUM_THREADS", "2")

import pytest  # noqa: E402


def pytest_configure(config):
    try:
        import torch

        torch.set_num_threads(2)
    except ImportError:
        pass


def has_gemma3() -> bool:
    try:
        from transformers import Gemma3ForConditionalGeneration  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("tiny-vlms")


@pytest.fixture(scope="session")
def tiny_gemma3(tiny_dir):
    if not has_gemma3():
        pytest.skip("this transformers has no Gemma 3 (needs >= 4.50)")
    import tiny_vlm

    return tiny_vlm.build_gemma3(tiny_dir / "gemma3")


@pytest.fixture(scope="session")
def tiny_maira(tiny_dir):
    import tiny_vlm

    return tiny_vlm.build_maira2_like(tiny_dir / "maira2-like")


@pytest.fixture(scope="session")
def cxr_images():
    """Four samples: one, two, one and three images of different sizes and modes."""
    import tiny_vlm

    s = tiny_vlm.synthetic_cxr
    return [[s(seed=1)], [s(seed=2, size=(64, 48)), s(seed=3, size=(50, 90))], [s(seed=4, mode="RGB")],
            [s(seed=5), s(seed=6, size=(120, 100)), s(seed=7)]]

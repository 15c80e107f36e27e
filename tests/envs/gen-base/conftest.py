"""Tests of the gen-base environment: dataset adapters (radrank.datasets) and image loading (radrank.images).

Run from the repository root with that environment's interpreter:
``python -m pytest tests/envs/gen-base``. Outside it (no monai / pydicom / pillow)
these tests are not collected. Every image and dataset folder is made by the tests
(tiny_data.py); nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[2] / "src"

_NEEDED = ("monai", "pydicom", "PIL", "numpy", "pandas", "pyarrow")
if any(importlib.util.find_spec(m) is None for m in _NEEDED):
    collect_ignore_glob = ["test_*.py"]
else:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    for p in (str(SRC), str(HERE)):
        if p not in sys.path:
            sys.path.insert(0, p)


def pytest_configure(config):
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass

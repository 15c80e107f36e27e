"""Reference packages of differential tests: under RADRANK_STRICT=1 (CI) a missing one fails the test.

``pytest.importorskip`` would turn a lost package into a skip, and a differential suite of skips
stays green; ``reference(name)`` imports the package, skips outside strict mode, and fails in it.
"""

from __future__ import annotations

import importlib
import os

import pytest


def strict() -> bool:
    return os.environ.get("RADRANK_STRICT", "").strip().lower() in ("1", "true", "yes", "on")


def reference(name: str, reason: str = ""):
    """The module ``name``; when it cannot be imported, a failure under RADRANK_STRICT=1, else a skip."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        why = f"reference package {name!r} cannot be imported ({e}){': ' + reason if reason else ''}"
        if strict():
            pytest.fail(why + " — RADRANK_STRICT=1: a differential test never skips", pytrace=False)
        pytest.skip(why, allow_module_level=True)

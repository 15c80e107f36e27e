"""Tests of the ratescore environment (ratescore 0.6.0, medspacy, transformers 5, numpy < 2).

Run from the repository root with that environment's python:
``python -m pytest tests/envs/ratescore``. Nothing is downloaded: the hub is off, the Hugging Face
cache is an empty temporary folder (../hf_sandbox.py), and the models are tiny random ones built
here (tiny_ratescore.py).
Shared setup (hub off, one torch thread): ../conftest.py.
"""

from __future__ import annotations

from pathlib import Path

import hf_sandbox

HERE = Path(__file__).resolve().parent
hf_sandbox.isolate(HERE.parents[2] / "src", HERE)

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """The tiny NER and eval models, as ratescore settings (tiny_ratescore.build)."""
    import tiny_ratescore

    ner, ev = tiny_ratescore.build(tmp_path_factory.mktemp("ratescore-tiny"))
    return {"bert_model": str(ner), "eval_model": str(ev)}

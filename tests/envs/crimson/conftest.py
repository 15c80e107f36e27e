"""Tests of the crimson environment (crimson-score 0.2.0, transformers >= 5.3, peft, openai).

Run from the repository root with that environment's python:
``python -m pytest tests/envs/crimson``. Nothing is downloaded: the hub is off and the Hugging
Face cache is an empty temporary folder, the models are tiny random Gemma-3s built here
(tiny_crimson.py), and the API backend talks to a fake OpenAI-compatible server on 127.0.0.1
(../fake_openai.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import hf_sandbox

HERE = Path(__file__).resolve().parent

hf_sandbox.isolate(HERE.parents[2] / "src", HERE)
os.environ["RADRANK_JUDGE_CACHE"] = "off"  # tests that use the response cache give their own cache_dir
for var in ("NO_PROXY", "no_proxy"):  # the fake endpoint on 127.0.0.1 must not go through a proxy
    os.environ[var] = ",".join(x for x in (os.environ.get(var, ""), "127.0.0.1", "localhost") if x)

import pytest  # noqa: E402
from _strict import reference  # noqa: E402


@pytest.fixture(autouse=True)
def crimson_package():
    """Every test here compares with crimson-score or runs through it: under RADRANK_STRICT=1 its absence fails."""
    return reference("CRIMSON")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """``tiny_model(answer)``: the directory of a tiny Gemma-3 that answers ``answer`` to every prompt
    (None: random weights, junk answers), built once per session per answer."""
    import tiny_crimson

    built: dict = {}
    root = tmp_path_factory.mktemp("crimson-tiny")

    def model(answer: str | None) -> str:
        if answer not in built:
            built[answer] = str(tiny_crimson.build(root / f"model-{len(built)}", answer=answer))
        return built[answer]

    return model

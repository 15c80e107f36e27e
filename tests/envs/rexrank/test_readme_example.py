"""The "Adding a metric" example of docs/metrics.md is real code: its module, taken from that page as written,
passes the metric contract (tests/contract.py) on a tiny random BERT, registered for these tests only."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

from contract import MetricContract
from radrank import metrics

README = Path(__file__).resolve().parents[3] / "docs" / "metrics.md"  # moved there from README.md
NAME = "embed_cosine"


def example_source() -> str:
    text = README.read_text()
    section = text[text.index("## Adding a metric"):]
    return re.search(r"```python\n(# src/radrank/metrics/embed_cosine\.py\n.*?)```", section, re.S).group(1)


@pytest.fixture(autouse=True, scope="module")
def registered():
    module = types.ModuleType(f"radrank.metrics.{NAME}")
    sys.modules[module.__name__] = module  # before its code runs: dataclasses look their module up
    exec(compile(example_source(), str(README), "exec"), module.__dict__)
    metrics.REGISTRY._entries[NAME] = f"{module.__name__}:METRIC"
    yield module
    metrics.REGISTRY._entries.pop(NAME)
    metrics.REGISTRY._loaded.pop(NAME, None)
    sys.modules.pop(module.__name__)


@pytest.fixture(scope="module")
def tiny_encoder(tiny_dir):
    import tiny_models

    return tiny_models.build_bert(tiny_dir / "bert-encoder", weights=True, max_length=128)


class TestReadmeExample(MetricContract):
    metrics = (NAME,)

    @pytest.fixture
    def contract_settings(self, metric_name, tiny_encoder):
        return {"model": str(tiny_encoder), "device": "cpu"}


def test_identical_reports_score_one(tiny_encoder):
    import pandas as pd

    pairs = pd.DataFrame({"sample_id": ["a", "b"], "reference": ["No effusion.", "Mild edema."],
                          "hypothesis": ["No effusion.", "Large pneumothorax."]})
    out = metrics.score(NAME, pairs, {"model": str(tiny_encoder), "device": "cpu"})
    assert out.loc[0, NAME] == pytest.approx(1.0, abs=1e-6) and out.loc[1, NAME] < 1.0

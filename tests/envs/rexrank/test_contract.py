"""The metric contract (tests/contract.py) for the rexrank family, on tiny random models."""

from __future__ import annotations

import pytest

from contract import MetricContract


class TestRexrankMetrics(MetricContract):
    metrics = ("bertscore", "semb", "chexbert", "radgraph")

    @pytest.fixture
    def contract_settings(self, metric_name, request):
        if metric_name == "bertscore":
            return {"model": str(request.getfixturevalue("tiny_roberta")), "num_layers": 2,
                    "baseline_path": str(request.getfixturevalue("tiny_baseline")), "device": "cpu"}
        if metric_name in ("semb", "chexbert"):
            return dict(request.getfixturevalue("chexbert_settings"))
        # The encoder is left to the model's config.json: the derived weight the job resolves itself.
        return {"model": str(request.getfixturevalue("tiny_radgraph_models")["radgraph"]), "device": "cpu"}

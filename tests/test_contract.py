"""The metric contract (tests/contract.py) for the core family's metrics."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from contract import CASES, MetricContract


class TestCoreMetrics(MetricContract):
    metrics = ("bleu2", "bleu4", "rouge", "radcliq", "vqa")

    @pytest.fixture
    def contract_inputs(self, metric_name):
        """RadCliQ's components come from the rexrank family: fixed per-sample values stand in here (the
        combination itself is checked against CXR-Report-Metric's numbers in tests/test_radcliq.py)."""
        if metric_name != "radcliq":
            return {}
        rng = np.random.default_rng(0)
        ids = CASES["sample_id"]
        return {name: pd.DataFrame({"sample_id": ids, column: rng.uniform(0, 1, len(ids))})
                for name, column in (("radgraph", "radgraph_combined"), ("bertscore", "bertscore"),
                                     ("semb", "semb_score"), ("bleu2", "bleu2"))}

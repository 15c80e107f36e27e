"""The metric contract (tests/contract.py) for the ratescore family, on the tiny random models (tiny_ratescore.py)."""

from __future__ import annotations

import pytest
from _strict import reference
from contract import MetricContract


class TestRaTEScore(MetricContract):
    metrics = ("ratescore",)

    @pytest.fixture
    def contract_settings(self, metric_name, tiny):
        reference("RaTEScore")
        return {**tiny, "device": "cpu"}

    @pytest.fixture
    def speed_variants(self, metric_name):
        # The default batch is the package's 1: compare a batch of several sentences with it.
        return [{"batch_size": 4}]

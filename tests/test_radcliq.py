"""RadCliQ-v0 / v1 against the values of CXR-Report-Metric's fitted models and ReXrank's leaderboard."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from radrank import metrics
from radrank.metrics import radcliq

FEATURE_COLUMNS = ("radgraph_combined", "bertscore", "semb_score", "bleu2")


@pytest.mark.parametrize("fill, v0, v1", [
    (1.0, -0.2421334229, -1.4406902828),
    (0.0, 5.5161608041, 2.4501430833),
    (0.5, 2.6370136906, 0.5047264003),
])
def test_constant_features(fill, v0, v1):
    features = np.full(4, fill)
    assert abs(radcliq.radcliq_v1(features) - v1) <= 1e-9
    assert abs(radcliq.radcliq_v0(features) - v0) <= 1e-9


def test_v1_in_raw_units():
    # 2.4501430833271307 − 1.24521633·radgraph − 1.65084533·bertscore − 0.99477171·semb (+1.4e-11·bleu)
    base = radcliq.radcliq_v1(np.zeros(4))
    assert abs(base - 2.4501430833271307) <= 1e-12
    slopes = [radcliq.radcliq_v1(np.eye(4)[i]) - base for i in range(4)]
    np.testing.assert_allclose(slopes[:3], [-1.24521633, -1.65084533, -0.99477171], rtol=0, atol=1e-8)
    assert abs(slopes[3]) < 1e-10


def test_feature_order():
    assert tuple(c for _, c in radcliq.FEATURES) == FEATURE_COLUMNS
    assert radcliq.METRIC.requires == ("radgraph", "bertscore", "semb", "bleu2")
    assert [leaf.name for leaf in radcliq.METRIC.leaves] == ["radcliq_v0", "radcliq_v1"]
    assert not any(leaf.higher_is_better for leaf in radcliq.METRIC.leaves)


# ReXrank README leaderboard rows: means of (BLEU, BertScore, SembScore, RadGraph) -> 1/RadCliQ-v1.
PUBLISHED = [
    ((0.262, 0.492, 0.496, 0.269), 1.233),
    ((0.248, 0.493, 0.487, 0.265), 1.217),
    ((0.218, 0.461, 0.455, 0.235), 1.06),
    ((0.234, 0.444, 0.439, 0.251), 1.033),
    ((0.15, 0.385, 0.319, 0.174), 0.782),
]


@pytest.mark.parametrize("row, inverse", PUBLISHED)
def test_published_rexrank_rows(row, inverse):
    bleu, bertscore, semb, radgraph = row
    value = radcliq.radcliq_v1(np.array([radgraph, bertscore, semb, bleu]))
    assert abs(1 / value - inverse) <= 0.003
    # The leaderboard's column order would give a clearly wrong number.
    assert abs(1 / radcliq.radcliq_v1(np.array(row)) - inverse) > 0.003


def _components(ids, values):
    """Per-sample frames of the four component metrics (with unrelated extra columns)."""
    radgraph, bertscore, semb, bleu = values.T
    return {
        "radgraph": pd.DataFrame({"sample_id": ids, "radgraph_combined": radgraph, "radgraph_entity": 0.0}),
        "bertscore": pd.DataFrame({"sample_id": ids, "bertscore": bertscore}),
        "semb": pd.DataFrame({"sample_id": ids, "semb_score": semb}),
        "bleu2": pd.DataFrame({"sample_id": ids, "bleu2": bleu}),
    }


def test_score_merges_components_by_sample_id():
    rng = np.random.default_rng(5)
    ids = [f"case{i}" for i in range(12)]
    values = rng.uniform(0, 1, size=(12, 4))
    pairs = pd.DataFrame({"sample_id": ids, "reference": "r", "hypothesis": "h"})
    inputs = _components(ids, values)
    # every component in its own, different order
    inputs = {m: df.sample(frac=1, random_state=k).reset_index(drop=True) for k, (m, df) in enumerate(inputs.items())}
    out = metrics.score("radcliq", pairs, inputs=inputs)
    assert list(out.columns) == ["sample_id", "radcliq_v0", "radcliq_v1"]
    assert out["sample_id"].tolist() == ids
    np.testing.assert_allclose(out["radcliq_v1"], radcliq.radcliq_v1(values), rtol=0, atol=1e-12)
    np.testing.assert_allclose(out["radcliq_v0"], radcliq.radcliq_v0(values), rtol=0, atol=1e-12)
    # row by row, against the raw-unit formula
    manual = 2.4501430833271307 - 1.24521633 * values[:, 0] - 1.65084533 * values[:, 1] - 0.99477171 * values[:, 2]
    np.testing.assert_allclose(out["radcliq_v1"], manual, rtol=0, atol=1e-7)


def test_score_missing_component_sample_gives_nan_and_missing_metric_raises():
    ids = ["a", "b", "c"]
    values = np.full((3, 4), 0.5)
    pairs = pd.DataFrame({"sample_id": ids, "reference": "r", "hypothesis": "h"})
    inputs = _components(ids, values)
    inputs["semb"] = inputs["semb"].iloc[[0, 2]]
    out = metrics.score("radcliq", pairs, inputs=inputs)
    assert np.isnan(out["radcliq_v1"].iloc[1])
    assert out["radcliq_v1"].iloc[[0, 2]].tolist() == pytest.approx([0.5047264003] * 2, abs=1e-9)
    del inputs["bertscore"]
    with pytest.raises(KeyError, match="bertscore"):
        metrics.score("radcliq", pairs, inputs=inputs)


def test_mean_of_per_sample_equals_value_of_mean_features():
    rng = np.random.default_rng(11)
    values = rng.uniform(-0.2, 1, size=(500, 4))
    per_sample = radcliq.radcliq_v1(values)
    assert abs(per_sample.mean() - radcliq.radcliq_v1(values.mean(axis=0))) <= 1e-12
    assert abs(radcliq.radcliq_v0(values).mean() - radcliq.radcliq_v0(values.mean(axis=0))) <= 1e-12

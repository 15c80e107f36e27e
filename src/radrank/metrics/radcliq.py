"""RadCliQ-v0 and RadCliQ-v1 per report (CXR-Report-Metric), lower is better.

Both are a StandardScaler followed by a linear model over the features
[radgraph_combined, bertscore, semb_score, bleu_score] (bleu_score is ReXrank's
BLEU-2). The coefficients below are the fitted values stored in
CXR-Report-Metric's pickles, written out as plain numbers so nothing is
unpickled at run time. v1 is linear, so the mean of per-sample v1 equals v1 of
the mean features.
"""

from __future__ import annotations

import numpy as np

from radrank.metrics.base import BoardColumn, Metric, Resources, mean_leaf

# (metric module, its per-sample column), in the models' feature order.
FEATURES = (
    ("radgraph", "radgraph_combined"),
    ("bertscore", "bertscore"),
    ("semb", "semb_score"),
    ("bleu2", "bleu2"),
)

V1_MEAN = np.array([0.5379231241355762, 0.6175725628125001, 0.7647942121140658, 0.44738335396242174])
V1_SCALE = np.array([0.3028258411486429, 0.22430938459304575, 0.2539439110169773, 0.2989271671041838])
V1_COEF = np.array([-0.37708368261038905, -0.37030009974480316, -0.25261621789593225, 4.315048405024756e-12])
V1_INTERCEPT = 2.466552561323256e-10

V0_MEAN = np.array([0.5398376019082272, 0.6312549595000001, 0.7716797866672277, 0.4607372064809605])
V0_SCALE = np.array([0.3018344440559102, 0.22466950746141123, 0.24750333805236252, 0.30336670936092264])
V0_COEF = np.array([-0.4796252644863446, -0.6762170542369337, -0.46366575161751994, 0.2165861905287535])
V0_INTERCEPT = 1.641666666666666


def _linear(features: np.ndarray, mean, scale, coef, intercept) -> np.ndarray:
    return ((np.asarray(features, dtype="float64") - mean) / scale) @ coef + intercept


def radcliq_v1(features) -> np.ndarray:
    """features: (..., 4) in :data:`FEATURES` order."""
    return _linear(features, V1_MEAN, V1_SCALE, V1_COEF, V1_INTERCEPT)


def radcliq_v0(features) -> np.ndarray:
    return _linear(features, V0_MEAN, V0_SCALE, V0_COEF, V0_INTERCEPT)


class RadCliQ(Metric):
    name = "radcliq"
    description = "RadCliQ-v0 / v1 (CXR-Report-Metric), from RadGraph, BERTScore, SembScore and BLEU-2"
    family = "core"
    columns = ("radcliq_v0", "radcliq_v1")
    leaves = (
        mean_leaf("radcliq_v0", "RadCliQ-v0", higher_is_better=False),
        mean_leaf("radcliq_v1", "RadCliQ-v1", higher_is_better=False),
    )
    # NaN where a component is NaN (a pair one of the four metrics could not score)
    nan_columns = ("radcliq_v0", "radcliq_v1")
    cache_scores = False  # a linear combination of four scores: cheaper than looking the pair up
    default_resources = Resources(mem_mb=1000, runtime_min=5)
    requires = tuple(m for m, _ in FEATURES)
    board = (BoardColumn("1/RadCliQ-v1", "radcliq_v1", 5, reciprocal=True),)

    def score(self, pairs, settings, inputs, runtime):
        """``inputs`` maps each required metric to its per-sample scores (sample_id + columns)."""
        import pandas as pd

        frame = pd.DataFrame({"sample_id": pairs["sample_id"].to_numpy()})
        for metric, column in FEATURES:
            if metric not in inputs:
                raise KeyError(f"radcliq needs the per-sample scores of {metric!r}")
            part = inputs[metric][["sample_id", column]]
            frame = frame.merge(part, on="sample_id", how="left", validate="one_to_one")
        features = frame[[c for _, c in FEATURES]].to_numpy(dtype="float64")
        frame["radcliq_v0"] = radcliq_v0(features)
        frame["radcliq_v1"] = radcliq_v1(features)
        return frame[["sample_id", "radcliq_v0", "radcliq_v1"]]


METRIC = RadCliQ()

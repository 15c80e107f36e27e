"""SembScore (CXR-Report-Metric's ``semb_score``): cosine of CheXbert CLS vectors.

The CLS vector is the last hidden layer's first token of CheXbert's encoder
(no pooler, no head), for the reference and for the hypothesis; texts are
prepared as CXR-Report-Metric's CheXbert ``encode.py`` does (stripped, newlines
to spaces, whitespace runs collapsed, at most 512 tokens). The settings, the
weights and the labeler are those of :mod:`radrank.metrics.chexbert`; when both
metrics run in one process the labeler is loaded once and each text encoded
once.

A zero vector on either side gives 0 (RadEval's convention); upstream's
division would give NaN. It does not happen with real weights.
"""

from __future__ import annotations

import numpy as np

from radrank.metrics.base import BoardColumn, mean_leaf
from radrank.metrics.chexbert import CheXbertLabeled, prepare


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype="float64")
    b = np.asarray(b, dtype="float64")
    dot = np.einsum("nd,nd->n", a, b)
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(norms > 0, dot / np.where(norms > 0, norms, 1.0), 0.0)


def _cosines(labeler, references, hypotheses, batch_size: int) -> np.ndarray:
    refs = [prepare(t) for t in references]
    hyps = [prepare(t) for t in hypotheses]
    if len(refs) != len(hyps):
        raise ValueError(f"{len(refs)} references but {len(hyps)} hypotheses")
    vectors = labeler.cls(refs + hyps, batch_size)
    return cosine(vectors[:len(refs)], vectors[len(refs):])


def score_texts(references, hypotheses, settings=None, runtime=None) -> np.ndarray:
    """SembScore per pair, with the settings (a mapping or CheXbertSettings)."""
    from radrank.runtime import Runtime

    s = METRIC.coerce(settings)
    return _cosines(METRIC.labeler(s, runtime or Runtime()), references, hypotheses, s.batch_size)


class SembScore(CheXbertLabeled):
    name = "semb"
    description = ("SembScore: cosine similarity of CheXbert CLS embeddings of reference and hypothesis, "
                   "mean over reports")
    columns = ("semb_score",)
    leaves = (mean_leaf("semb_score", "SembScore"),)
    board = (BoardColumn("SembScore", "semb_score", 3),)

    def score(self, pairs, s, inputs, runtime):
        import pandas as pd

        resolved = self.resolve(s, runtime)
        lab = self.labeler(s, runtime, resolved)
        values = _cosines(lab, pairs["reference"].tolist(), pairs["hypothesis"].tolist(), s.batch_size)
        out = pd.DataFrame({"sample_id": pairs["sample_id"].to_numpy(), "semb_score": values})
        out.attrs["models"] = {**self.provenance(s, resolved), "device": lab.device}
        return out


METRIC = SembScore()

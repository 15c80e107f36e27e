"""SembScore (CXR-Report-Metric's ``semb_score``): cosine of CheXbert CLS vectors.

The CLS vector is the last hidden layer's first token of CheXbert's encoder
(no pooler, no head), for the reference and for the hypothesis; texts are
prepared as CXR-Report-Metric's CheXbert ``encode.py`` does (stripped, newlines
to spaces, whitespace runs collapsed, at most 512 tokens). The model, its
loading and its settings are those of :mod:`radrank.metrics.chexbert`; when both
metrics run in one process the labeler is loaded once and each text encoded
once.

A zero vector on either side gives 0 (RadEval's convention); upstream's
division would give NaN. It does not happen with real weights.
"""

from __future__ import annotations

import numpy as np

from radrank.metrics import _hf, chexbert
from radrank.metrics.base import MetricSpec, Resources, mean_leaf

SPEC = MetricSpec(
    name="semb",
    description="SembScore: cosine similarity of CheXbert CLS embeddings of reference and hypothesis, "
                "mean over reports",
    env="rexrank",
    columns=("semb_score",),
    leaves=(mean_leaf("semb_score", "SembScore"),),
    resources=Resources(mem_mb=8000, runtime_min=60, threads=4, gpu=1),
    model="StanfordAIMI/RRG_scorers",
    settings=dict(chexbert.DEFAULT_SETTINGS),
    packages=("torch", "transformers", "tokenizers", "huggingface-hub"),
    version="1",
)

NUMBER_SETTINGS = chexbert.NUMBER_SETTINGS


def provenance(settings=None) -> dict:
    """Checkpoint and tokenizer ids, revisions and hashes, and the settings that change numbers."""
    return chexbert.provenance_of({**SPEC.settings, **(settings or {})}, "semb")


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype="float64")
    b = np.asarray(b, dtype="float64")
    dot = np.einsum("nd,nd->n", a, b)
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(norms > 0, dot / np.where(norms > 0, norms, 1.0), 0.0)


def score_texts(references, hypotheses, settings=None) -> np.ndarray:
    s = {**SPEC.settings, **(settings or {})}
    lab = chexbert.labeler(s, "semb")
    refs = [chexbert.prepare(t) for t in references]
    hyps = [chexbert.prepare(t) for t in hypotheses]
    if len(refs) != len(hyps):
        raise ValueError(f"{len(refs)} references but {len(hyps)} hypotheses")
    vectors = lab.cls(refs + hyps, int(s.get("batch_size") or 64))
    return cosine(vectors[:len(refs)], vectors[len(refs):])


def score(pairs, settings, inputs):
    import pandas as pd

    s = {**SPEC.settings, **(settings or {})}
    values = score_texts(pairs["reference"].tolist(), pairs["hypothesis"].tolist(), s)
    out = pd.DataFrame({"sample_id": pairs["sample_id"].to_numpy(), "semb_score": values})
    out.attrs["models"] = {**provenance(s), "device": _hf.device_of(s.get("device"))}
    return out

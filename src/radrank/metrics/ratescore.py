"""RaTEScore per report (PyPI ``ratescore`` 0.6.0, ``from RaTEScore import RaTEScore``; env ``ratescore``).

The package's pipeline, run with its own functions:

1. split each report into sentences with medspacy (``RaTEScore.utils.sentence_split``) and tag
   entities with the NER model (``bert_model``, a DeBERTa token classifier:
   ABNORMALITY, NON-ABNORMALITY, DISEASE, NON-DISEASE, ANATOMY) — ``RaTEScore.score.run_ner``;
2. embed each report's entities by the eval model's first-token vector (``eval_model``,
   BioLORD) — ``RaTEScore.score.process_embedding``;
3. match every entity to its most similar entity on the other side, weighted by the
   type-pair ``affinity_matrix`` ("long", the default, or "short") with a negation penalty
   (``RaTEScore.utils.compute``), in both directions; the score is their F1, 0.5 when either
   report has no entity — what ``RaTEScore.compute_score(candidates, references)`` returns.

Differences from calling ``compute_score`` on the pairs, none of which changes a score the
package computes correctly:

* each distinct text is tagged and embedded once (references repeat once per model). A
  report's entity embeddings are computed in one batch of that report's entities, exactly as
  the package does, so they are bit-identical; NER runs ``batch_size`` sentences per forward
  pass like the package (at the package's default of 1 the logits are bit-identical too;
  larger batches only change float rounding);
* a text with no sentence medspacy keeps (empty, whitespace, or only pieces under 3
  characters) has no entities and scores 0.5, the package's rule for an entity-less report.
  The package itself drops such a text from its sentence list, so every later pair of the
  call is compared with the wrong partner and the call returns fewer scores than pairs.

Models: ``bert_model`` and ``eval_model`` are hub ids (found in the Hugging Face cache) or
local directories, resolved file by file (:func:`radrank.metrics._hf.resolve_encoder`) before
the package loads anything; a missing one raises MissingWeightsError naming its config key. ``device``:
"auto" (the GPU when CUDA is available — the package's ``use_gpu=True`` insists on CUDA),
"cpu", "cuda" or "cuda:N".
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np

from radrank import models
from radrank.metrics.base import MetricSpec, Resources, distinct_texts, mean_leaf
from radrank.provenance import stable_hash

log = logging.getLogger("radrank")

NER_MODEL = "Angelakeke/RaTE-NER-Deberta"
EVAL_MODEL = "FremyCompany/BioLORD-2023-C"
NO_ENTITY_SCORE = 0.5  # the package's score when either report has no entity

SPEC = MetricSpec(
    name="ratescore",
    description="RaTEScore per report (entity-aware, RaTEScore package), mean over reports",
    env="ratescore",
    columns=("ratescore",),
    leaves=(mean_leaf("ratescore", "RaTEScore"),),
    resources=Resources(mem_mb=8000, runtime_min=120, threads=2, gpu=1),
    model=NER_MODEL,
    settings={"bert_model": NER_MODEL, "eval_model": EVAL_MODEL, "affinity_matrix": "long", "batch_size": 1,
              "device": "auto"},
    packages=("ratescore", "torch", "transformers", "medspacy", "spacy"),
)


def _check(settings: dict) -> None:
    matrix = settings["affinity_matrix"]
    if not isinstance(matrix, str) or not matrix:
        raise ValueError(f"metric 'ratescore': affinity_matrix must be 'long', 'short' or a JSON file, not {matrix!r}")
    if matrix.lower() not in ("long", "short") and not Path(os.path.expanduser(matrix)).is_file():
        raise ValueError(f"metric 'ratescore': affinity_matrix {matrix!r} is neither 'long', 'short' nor a file")
    if not isinstance(settings["batch_size"], int) or settings["batch_size"] < 1:
        raise ValueError(f"metric 'ratescore': batch_size must be a positive integer, not {settings['batch_size']!r}")
    device = str(settings["device"]).lower()
    if not (device in ("auto", "cpu", "cuda") or (device.startswith("cuda:") and device[5:].isdigit())):
        raise ValueError(f"metric 'ratescore': device must be auto, cpu, cuda or cuda:N, not {settings['device']!r}")


def _device(setting: str):
    import torch

    setting = str(setting).lower()
    if setting == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if setting.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"metric 'ratescore': device {setting!r} requested but CUDA is not available")
    return torch.device(setting)


def resolve_models(settings: dict) -> dict:
    """{"bert_model": Resolved, "eval_model": Resolved} (radrank.metrics._hf): config, weights and
    tokenizer files of each, found one by one, so a model missing from the cache (or only partly
    there) raises MissingWeightsError naming its config key before anything is loaded."""
    from radrank.metrics import _hf

    out = {}
    for key in ("bert_model", "eval_model"):
        resolved = _hf.resolve_encoder(str(settings[key]), metric="ratescore", setting=key)
        # A DeBERTa-v3 tokenizer may ship only its SentencePiece model, which _hf does not list.
        if not (resolved.directory / "spm.model").is_file() and not (resolved.directory / "tokenizer.json").is_file():
            try:
                resolved.files.append(models.resolve(str(settings[key]), metric="ratescore", setting=key,
                                                     filename="spm.model"))
            except Exception:
                pass
        out[key] = resolved
    return out


def _check_tokenizer_backend(directory: Path, key: str) -> None:
    """transformers 5 reads a SentencePiece-only tokenizer (spm.model, no tokenizer.json) through
    sentencepiece or protobuf; say so plainly instead of failing deep inside the package."""
    import importlib.util

    if (directory / "tokenizer.json").is_file() or not (directory / "spm.model").is_file():
        return
    if importlib.util.find_spec("sentencepiece") or importlib.util.find_spec("google.protobuf"):
        return
    raise RuntimeError(f"metric 'ratescore': {key} {directory} has only a SentencePiece tokenizer (spm.model, no "
                       f"tokenizer.json); transformers needs the 'sentencepiece' (or 'protobuf') package in the "
                       f"ratescore environment to read it")


def _quiet_sentencizer() -> None:
    """PyRuSH (medspacy's sentencizer) logs every token at DEBUG through loguru; keep it out of job logs."""
    try:
        from loguru import logger

        logger.disable("PyRuSH")
    except ImportError:
        pass


def load_scorer(settings: dict):
    """(RaTEScore instance, provenance) for the settings; models resolved before anything loads."""
    _check(settings)
    paths = resolve_models(settings)
    for key, resolved in paths.items():
        _check_tokenizer_backend(resolved.directory, key)
    device = _device(settings["device"])
    if device.type == "cuda" and device.index is not None:
        import torch

        torch.cuda.set_device(device)  # the package's use_gpu=True means the current CUDA device
    _quiet_sentencizer()
    from RaTEScore import RaTEScore

    scorer = RaTEScore(bert_model=str(paths["bert_model"].directory), eval_model=str(paths["eval_model"].directory),
                       batch_size=settings["batch_size"], use_gpu=device.type == "cuda",
                       affinity_matrix=os.path.expanduser(settings["affinity_matrix"]))
    provenance = {key: resolved.provenance() for key, resolved in paths.items()}
    provenance["affinity_matrix"] = {"name": settings["affinity_matrix"],
                                     "hash": stable_hash(scorer.matrix_path)}
    provenance["device"] = str(scorer.device)
    return scorer, provenance


def entities(scorer, texts) -> list[list[tuple[str, str]]]:
    """The package's (entity text, type) list of each text; [] for a text without a kept sentence."""
    from RaTEScore.score import run_ner
    from RaTEScore.utils import sentence_split

    texts = [str(t) for t in texts]
    keep = [i for i, t in enumerate(texts) if sentence_split([t])[0]]
    found = run_ner([texts[i] for i in keep], scorer.idx2label, scorer.tokenizer, scorer.model, scorer.device,
                    scorer.batch_size)
    if len(found) != len(keep):  # cannot happen once empty texts are out; guard the alignment anyway
        raise RuntimeError(f"RaTEScore NER returned {len(found)} reports for {len(keep)} texts")
    out: list = [[] for _ in texts]
    for i, pairs in zip(keep, found):
        out[i] = pairs
    return out


def embed(scorer, entity_lists) -> list:
    """(embeddings, types) per text, each text's entities in one batch as the package embeds them."""
    from RaTEScore.score import process_embedding

    return [process_embedding(pairs, scorer.eval_tokenizer, scorer.eval_model, scorer.device)
            for pairs in entity_lists]


def pair_score(scorer, reference, hypothesis) -> float:
    """RaTEScore of one pair from the (embeddings, types) of the reference and the hypothesis."""
    from RaTEScore.utils import compute

    gt_embeds, gt_types = reference
    pred_embeds, pred_types = hypothesis
    if len(gt_embeds) == 0 or len(pred_embeds) == 0:
        return NO_ENTITY_SCORE
    precision = compute(gt_embeds, pred_embeds, gt_types, pred_types, scorer.affinity_matrix)
    recall = compute(pred_embeds, gt_embeds, pred_types, gt_types, scorer.affinity_matrix)
    if precision + recall == 0:
        return 0.0
    return float(2 * precision * recall / (precision + recall))


def score_texts(scorer, references, hypotheses) -> np.ndarray:
    texts, ref_index, hyp_index = distinct_texts([str(t) for t in references], [str(t) for t in hypotheses])
    log.info("ratescore: %d pairs, %d distinct texts", len(ref_index), len(texts))
    embedded = embed(scorer, entities(scorer, texts))
    return np.array([pair_score(scorer, embedded[r], embedded[h]) for r, h in zip(ref_index, hyp_index)],
                    dtype="float64")


def score(pairs, settings, inputs):
    import pandas as pd

    scorer, provenance = load_scorer(settings)
    values = score_texts(scorer, pairs["reference"].tolist(), pairs["hypothesis"].tolist())
    out = pd.DataFrame({"sample_id": pairs["sample_id"].to_numpy(), "ratescore": values})
    out.attrs["models"] = provenance
    return out

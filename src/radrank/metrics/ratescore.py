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

``batch_size`` (NER sentences per forward pass) is a speed setting. Only the argmax of the NER
logits reaches the score; a batch pads its sentences to the longest, which changes the logits by
float rounding only (as moving to another device does; ``device`` is speed everywhere), so a tag
can change only where two labels tie within rounding. Were it scored, the GPU user who raises it
from the package's 1 would re-score every run for no difference the tests can see
(tests/envs/ratescore: batch 4 equals the package at batch 4 to 1e-6, and the contract's batch 4
equals batch 1).

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
local directories — with an ``affinity_matrix`` file, the metric's ``weights(settings)``, resolved
through the runtime before the package loads anything (a DeBERTa-v3 tokenizer's ``spm.model`` is
hashed into provenance with the rest); a missing one raises MissingWeightsError naming its config
key. The scorer is loaded once per process (``runtime.load``). ``device``: "auto" (the GPU when
CUDA is available — the package's ``use_gpu=True`` insists on CUDA), "cpu", "cuda" or "cuda:N".
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from radrank.devices import DEVICE_DOC, check_device, device_of
from radrank.metrics.base import BoardColumn, Metric, Resources, distinct_texts, mean_leaf
from radrank.provenance import stable_hash
from radrank.runtime import WeightRef
from radrank.settings import Settings, scored, speed

log = logging.getLogger("radrank")

NER_MODEL = "Angelakeke/RaTE-NER-Deberta"
EVAL_MODEL = "FremyCompany/BioLORD-2023-C"
NO_ENTITY_SCORE = 0.5  # the package's score when either report has no entity
BUILTIN_MATRICES = ("long", "short")  # the package's own affinity matrices (its names, case-insensitive)


@dataclass(frozen=True)
class RaTEScoreSettings(Settings):
    bert_model: str = scored(NER_MODEL, "the NER model (a DeBERTa token classifier): a Hugging Face id or a local "
                                        "directory")
    eval_model: str = scored(EVAL_MODEL, "the entity encoder (BioLORD): a Hugging Face id or a local directory")
    affinity_matrix: str = scored("long", "entity-type weights: 'long' or 'short' (the package's), or a JSON file "
                                          "of the same keys")
    batch_size: int = speed(1, "NER sentences per forward pass (the package's default 1; larger batches change "
                               "float rounding only, see the module docstring)", minimum=1)
    device: str = speed("auto", DEVICE_DOC)

    def check(self, where):
        check_device(self.device, f"{where}.device")
        if not self.affinity_matrix or (not _builtin(self.affinity_matrix) and not self.matrix_file().is_file()):
            raise self.fail(where, "affinity_matrix", f"{self.affinity_matrix!r} is neither 'long', 'short' nor an "
                                                      f"existing file")

    def matrix_file(self) -> Path:
        return Path(os.path.expanduser(self.affinity_matrix))


def _builtin(matrix: str) -> bool:
    return matrix.lower() in BUILTIN_MATRICES


def _device(setting: str):
    import torch

    device = torch.device(device_of(setting))
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"metric 'ratescore': device {setting!r} requested but CUDA is not available")
    return device


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


def load_scorer(bert_dir: Path, eval_dir: Path, matrix: str, batch_size: int, device_setting: str):
    """The package's RaTEScore on local model directories; ``matrix``: 'long', 'short' or a JSON file's path."""
    for key, directory in (("bert_model", bert_dir), ("eval_model", eval_dir)):
        _check_tokenizer_backend(directory, key)
    device = _device(device_setting)
    if device.type == "cuda" and device.index is not None:
        import torch

        torch.cuda.set_device(device)  # the package's use_gpu=True means the current CUDA device
    _quiet_sentencizer()
    from RaTEScore import RaTEScore

    return RaTEScore(bert_model=str(bert_dir), eval_model=str(eval_dir), batch_size=batch_size,
                     use_gpu=device.type == "cuda", affinity_matrix=matrix)


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


class RaTEScoreMetric(Metric):
    name = "ratescore"
    description = "RaTEScore per report (entity-aware, RaTEScore package), mean over reports"
    family = "ratescore"
    columns = ("ratescore",)
    leaves = (mean_leaf("ratescore", "RaTEScore"),)
    Settings = RaTEScoreSettings
    default_resources = Resources(mem_mb=8000, runtime_min=120, threads=2, gpu=1)
    packages = ("ratescore", "torch", "transformers", "medspacy", "spacy")
    board = (BoardColumn("RaTEScore", "ratescore", 6),)

    def gpus(self, s) -> int:
        return 0 if s.device == "cpu" else 1

    def weights(self, s):
        refs = [WeightRef(self.owner(), self.key(k), getattr(s, k), need="model") for k in ("bert_model", "eval_model")]
        if not _builtin(s.affinity_matrix):
            refs.append(WeightRef(self.owner(), self.key("affinity_matrix"), str(s.matrix_file()), need="file"))
        return tuple(refs)

    def score(self, pairs, s, inputs, runtime):
        import pandas as pd

        resolved = {ref.setting: runtime.resolve(ref) for ref in self.weights(s)}
        bert, ev = resolved["bert_model"].directory, resolved["eval_model"].directory
        matrix = str(resolved["affinity_matrix"].path) if "affinity_matrix" in resolved else s.affinity_matrix
        device = device_of(s.device)
        # The package's scorer holds its models, matrix, batch size and device: one per combination.
        scorer = runtime.load(("ratescore", str(bert), str(ev), matrix, s.batch_size, device),
                              lambda: load_scorer(bert, ev, matrix, s.batch_size, device))
        values = score_texts(scorer, pairs["reference"].tolist(), pairs["hypothesis"].tolist())
        out = pd.DataFrame({"sample_id": pairs["sample_id"].to_numpy(), "ratescore": values})
        models = {key: r.provenance() for key, r in resolved.items() if key != "affinity_matrix"}
        models["affinity_matrix"] = {"name": s.affinity_matrix, "hash": stable_hash(scorer.matrix_path)}
        models["device"] = str(scorer.device)
        out.attrs["models"] = models
        return out


METRIC = RaTEScoreMetric()

"""RadEval's model-based extras through the ``radeval`` package (2.2.1; env ``radeval``).

Four metrics, each built from the package's own classes exactly as RadEval's adapters build
them (``radeval/metrics/*/adapter.py``), with the model paths resolved here first:

``radeval_bertscore``
    BERTScore on RadEval's ModernBERT (``IAMJB/RadEvalModernBERT``, layer 22, no idf, no
    baseline rescaling): ``radeval.metrics.radevalbertscore.RadEvalBERTScorer`` (the package's
    vendored bert-score). Per sample F1 (the leaf; RadEval's value is the mean), precision and
    recall.
``f1radbert_ct``
    18 CT findings + "No finding" from the multi-label classifier ``IAMJB/RadBERT-CT``
    (sigmoid > 0.5): ``radeval.metrics.f1Radbert_ct.F1RadbertCT``. Per sample both label
    vectors and the per-label true positives; the leaves are RadEval's: accuracy (exact match
    of all 19 labels, a mean) and micro / macro / weighted F1 (corpus leaves from the pooled
    per-label counts, equal to scikit-learn's ``classification_report`` as the package calls it).
``srrbert``
    SRR-BERT (``StanfordAIMI/SRR-BERT-Leaves-with-Statuses``, 163 labels; tokenizer
    ``microsoft/BiomedVLP-CXR-BERT-general``): ``radeval.metrics.SRRBert.srr_bert.SRRBert``.
    Each report is split into sentences by the package's ``srr_bert_parse_sentences`` (NLTK
    punkt), each sentence labelled, labels OR-ed per report. Per sample the package's
    per-sample precision / recall / F1 (``radeval.utils.multilabel_prf_per_sample``) and the
    per-label counts (``srrbert_ref_NNN`` / ``srrbert_hyp_NNN`` / ``srrbert_tp_NNN``, NNN = the
    label's index in the package's ``leaves_with_statuses_mapping.json``); the leaves are
    RadEval's weighted F1 / precision / recall, corpus leaves from those counts.
``temporal``
    Temporal entity F1 (``radeval.metrics.f1temporal``): temporal keywords found by a regex
    and by stanza's radiology NER pipeline. Per sample the package's F1 (1 when neither
    report has a temporal entity, 1e-10 when only the candidate has) and the entity counts;
    the leaf is the mean, as RadEval reports it.

Work-arounds for radeval 2.2.1, none of which touches its files:

* ``import radeval`` runs ``nltk.download("punkt_tab")`` (radeval/utils.py), which hangs on
  the network offline: ``nltk.download`` is replaced by a no-op for the duration of our
  imports, and only the submodules used are imported (never ``radeval.metrics.radgraph``,
  whose ``from RadEval...`` import fails).
* the adapters hard-code hub ids (and SRR-BERT its tokenizer id): the package classes are
  built with the resolved local directories instead — SRR-BERT through a subclass whose
  ``MODEL_CONFIGS`` names the local model, and the tokenizer id mapped to its resolved
  directory while the class is constructed.
* ``f1temporal`` builds its stanza pipeline at import with the default download behaviour:
  the module is imported while ``stanza.Pipeline`` builds the same pipeline from
  ``stanza_dir`` with downloads off, so missing stanza models fail at once with
  MissingWeightsError naming ``metric_settings.temporal.stanza_dir``.
* SRR-BERT needs NLTK's ``punkt_tab`` sentence model, which the package downloads at run
  time: it is looked up on NLTK's data path (plus ``nltk_data`` when set) and its absence
  is a MissingWeightsError naming ``metric_settings.srrbert.nltk_data``.

Every model is a Hugging Face id (found in the cache; downloaded once when the hub is on) or
a local directory, resolved file by file (:func:`radrank.metrics._hf.resolve_encoder`) before
torch is imported; a missing one raises MissingWeightsError naming its config key.
Each distinct text is labelled once (references repeat once per model).
"""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from radrank.errors import MissingWeightsError
from radrank.metrics import _hf
from radrank.metrics.base import Leaf, MetricSpec, Resources, mean_leaf

log = logging.getLogger("radrank")

PACKAGES = ("radeval", "torch", "transformers", "tokenizers", "huggingface-hub", "scikit-learn", "nltk")

# --- shared helpers --------------------------------------------------------------------------------


def _divide(num, den):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)


def prf_from_totals(totals, average: str, which: str = "f1") -> np.ndarray:
    """Precision, recall or F1 from column totals laid out as (support × k, predicted × k, tp × k).

    scikit-learn's ``classification_report(..., zero_division=0)`` semantics: a label's
    precision tp / predicted, recall tp / support, F1 2·tp / (support + predicted), each 0 when
    its denominator is; micro pools the counts, macro averages the labels, weighted averages
    them by support (0 when no label has support).
    """
    totals = np.asarray(totals, dtype="float64")
    k = totals.shape[-1] // 3
    support, predicted, tp = totals[..., :k], totals[..., k:2 * k], totals[..., 2 * k:]
    if average == "micro":
        s, p, t = support.sum(-1), predicted.sum(-1), tp.sum(-1)
        return {"precision": _divide(t, p), "recall": _divide(t, s), "f1": _divide(2 * t, s + p)}[which]
    per_label = {"precision": _divide(tp, predicted), "recall": _divide(tp, support),
                 "f1": _divide(2 * tp, support + predicted)}[which]
    if average == "macro":
        return per_label.mean(-1)
    if average == "weighted":
        return _divide((per_label * support).sum(-1), support.sum(-1))
    raise ValueError(f"unknown average {average!r}")


def _corpus_leaf(name, label, ref_cols, hyp_cols, tp_cols, average, which="f1") -> Leaf:
    return Leaf(name=name, label=label, stats=tuple(ref_cols) + tuple(hyp_cols) + tuple(tp_cols),
                corpus=lambda totals, a=average, w=which: prf_from_totals(totals, a, w))


def _device(setting) -> str:
    return _hf.device_of(setting)


@contextmanager
def _offline_nltk():
    """``nltk.download`` as a no-op while radeval modules are imported (radeval/utils.py calls it
    at import time and would otherwise wait on the network)."""
    import nltk

    real = nltk.download

    def no_download(*args, **kwargs):
        log.debug("radeval: skipped nltk.download%s", args)
        return False

    nltk.download = no_download
    try:
        yield
    finally:
        nltk.download = real


def _import(module: str):
    import importlib
    import sys

    if module in sys.modules:
        return sys.modules[module]
    with _offline_nltk():
        return importlib.import_module(module)


def _texts(pairs):
    refs = [str(t) for t in pairs["reference"].tolist()]
    hyps = [str(t) for t in pairs["hypothesis"].tolist()]
    texts, codes = _hf.distinct(refs + hyps)
    return texts, codes[:len(refs)], codes[len(refs):]


# --- radeval_bertscore ---------------------------------------------------------------------------------

RADEVAL_BERTSCORE = MetricSpec(
    name="radeval_bertscore",
    description="RadEval BERTScore: F1 per report on RadEval's ModernBERT (layer 22, no idf, no rescaling), "
                "radeval package, mean over reports",
    env="radeval",
    columns=("radeval_bertscore", "radeval_bertscore_precision", "radeval_bertscore_recall"),
    leaves=(mean_leaf("radeval_bertscore", "RadEval-BERTScore"),),
    resources=Resources(mem_mb=8000, runtime_min=60, threads=4, gpu=1),
    model="IAMJB/RadEvalModernBERT",
    settings={"model": "IAMJB/RadEvalModernBERT", "num_layers": 22, "batch_size": 64, "device": "auto"},
    packages=PACKAGES,
)


def _score_radeval_bertscore(pairs, s):
    import pandas as pd

    resolved = _hf.resolve_encoder(str(s["model"]), metric="radeval_bertscore", setting="model")
    device = _device(s.get("device"))
    batch = int(s.get("batch_size") or 64)

    def build():
        import torch

        mod = _import("radeval.metrics.radevalbertscore.radevalbertscore")
        return mod.RadEvalBERTScorer(model_type=str(resolved.directory), num_layers=int(s["num_layers"]),
                                     use_fast_tokenizer=True, rescale_with_baseline=False,
                                     device=torch.device(device), batch_size=batch)

    scorer = _hf.cached(("radeval_bertscore", str(resolved.directory), int(s["num_layers"]), device, batch), build)
    refs = [str(t) for t in pairs["reference"].tolist()]
    hyps = [str(t) for t in pairs["hypothesis"].tolist()]
    p, r, f = [], [], []
    progress = _hf.Progress("radeval_bertscore", len(refs), unit="pairs")
    for lo in range(0, len(refs), batch):  # RadEval's chunking (BertScoreBase._score_batched), keeping P and R
        cp, cr, cf = scorer.bert_scorer.score(cands=hyps[lo:lo + batch], refs=refs[lo:lo + batch],
                                              verbose=False, batch_size=batch)
        p.append(cp.numpy())
        r.append(cr.numpy())
        f.append(cf.numpy())
        progress.update(len(cp))
    progress.finish()
    cat = (lambda xs: np.concatenate(xs).astype("float64") if xs else np.zeros(0))
    out = pd.DataFrame({"sample_id": pairs["sample_id"].to_numpy(), "radeval_bertscore": cat(f),
                        "radeval_bertscore_precision": cat(p), "radeval_bertscore_recall": cat(r)})
    out.attrs["models"] = {"model": resolved.provenance(), "num_layers": int(s["num_layers"])}
    return out


# --- f1radbert_ct --------------------------------------------------------------------------------------

RADBERT_CT_LABELS = (
    "Medical material", "Arterial wall calcification", "Cardiomegaly", "Pericardial effusion",
    "Coronary artery wall calcification", "Hiatal hernia", "Lymphadenopathy", "Emphysema", "Atelectasis",
    "Lung nodule", "Lung opacity", "Pulmonary fibrotic sequela", "Pleural effusion", "Mosaic attenuation pattern",
    "Peribronchial thickening", "Consolidation", "Bronchiectasis", "Interlobular septal thickening", "No finding",
)  # F1RadbertCT.LABELS + [NO_FINDING], in the package's order (checked at run time)
_RCT_SLUGS = tuple(label.lower().replace(" ", "_") for label in RADBERT_CT_LABELS)
RCT_REF = tuple(f"f1radbert_ct_ref_{s}" for s in _RCT_SLUGS)
RCT_HYP = tuple(f"f1radbert_ct_hyp_{s}" for s in _RCT_SLUGS)
RCT_TP = tuple(f"f1radbert_ct_tp_{s}" for s in _RCT_SLUGS)

F1RADBERT_CT = MetricSpec(
    name="f1radbert_ct",
    description="F1RadBERT-CT: 18 CT findings + No finding from RadBERT-CT on reference and hypothesis "
                "(radeval package); exact-match accuracy and micro / macro / weighted F1 from pooled label counts",
    env="radeval",
    columns=RCT_REF + RCT_HYP + RCT_TP + ("f1radbert_ct_sample_acc",),
    leaves=(mean_leaf("f1radbert_ct_sample_acc", "F1RadBERT-CT accuracy", name="f1radbert_ct_accuracy"),)
    + tuple(_corpus_leaf(f"f1radbert_ct_{a}_f1", f"F1RadBERT-CT {a} F1", RCT_REF, RCT_HYP, RCT_TP, a)
            for a in ("micro", "macro", "weighted")),
    resources=Resources(mem_mb=8000, runtime_min=60, threads=4, gpu=1),
    model="IAMJB/RadBERT-CT",
    settings={"model": "IAMJB/RadBERT-CT", "threshold": 0.5, "batch_size": 16, "device": "auto"},
    packages=PACKAGES,
)


def _score_f1radbert_ct(pairs, s):
    import pandas as pd

    resolved = _hf.resolve_encoder(str(s["model"]), metric="f1radbert_ct", setting="model")
    device = _device(s.get("device"))

    def build():
        mod = _import("radeval.metrics.f1Radbert_ct.f1Radbert_ct")
        labels = tuple(mod.F1RadbertCT.LABELS) + (mod.F1RadbertCT.NO_FINDING,)
        if labels != RADBERT_CT_LABELS:
            raise RuntimeError(f"radeval's F1RadbertCT labels changed: {labels}")
        return mod.F1RadbertCT(model_id=str(resolved.directory), threshold=float(s["threshold"]), device=device,
                               batch_size=int(s.get("batch_size") or 16))

    scorer = _hf.cached(("f1radbert_ct", str(resolved.directory), float(s["threshold"]), device,
                         int(s.get("batch_size") or 16)), build)
    texts, ref_codes, hyp_codes = _texts(pairs)
    labels = scorer._predict_label_matrix(texts) if texts else np.zeros((0, len(RADBERT_CT_LABELS)), dtype=int)
    ref, hyp = labels[ref_codes].astype("int64"), labels[hyp_codes].astype("int64")
    cols = {}
    for i in range(len(RADBERT_CT_LABELS)):
        cols[RCT_REF[i]], cols[RCT_HYP[i]], cols[RCT_TP[i]] = ref[:, i], hyp[:, i], ref[:, i] & hyp[:, i]
    cols["f1radbert_ct_sample_acc"] = (ref == hyp).all(axis=1).astype("float64")
    out = pd.DataFrame({"sample_id": pairs["sample_id"].to_numpy(), **cols})
    out.attrs["models"] = {"model": resolved.provenance(), "threshold": float(s["threshold"])}
    return out


# --- srrbert ----------------------------------------------------------------------------------------------

SRR_MODEL_TYPE = "leaves_with_statuses"  # RadEval's adapter's choice
SRR_LABELS = 163  # len(leaves_with_statuses_mapping.json) in radeval 2.2.1 (checked at run time)
SRR_REF = tuple(f"srrbert_ref_{i:03d}" for i in range(SRR_LABELS))
SRR_HYP = tuple(f"srrbert_hyp_{i:03d}" for i in range(SRR_LABELS))
SRR_TP = tuple(f"srrbert_tp_{i:03d}" for i in range(SRR_LABELS))
SRR_SAMPLE = ("srrbert_sample_f1", "srrbert_sample_precision", "srrbert_sample_recall")

SRRBERT = MetricSpec(
    name="srrbert",
    description="SRR-BERT (leaves with statuses, 163 labels) on the sentences of reference and hypothesis "
                "(radeval package); weighted F1 / precision / recall from pooled label counts",
    env="radeval",
    columns=SRR_SAMPLE + SRR_REF + SRR_HYP + SRR_TP,
    leaves=tuple(_corpus_leaf(f"srrbert_weighted_{w}", f"SRR-BERT weighted {w}", SRR_REF, SRR_HYP, SRR_TP,
                              "weighted", w) for w in ("f1", "precision", "recall")),
    resources=Resources(mem_mb=8000, runtime_min=60, threads=4, gpu=1),
    model="StanfordAIMI/SRR-BERT-Leaves-with-Statuses",
    settings={"model": "StanfordAIMI/SRR-BERT-Leaves-with-Statuses",
              "tokenizer": "microsoft/BiomedVLP-CXR-BERT-general",
              "nltk_data": None,  # a directory holding tokenizers/punkt_tab (None: NLTK's own data path)
              "batch_size": 64, "device": "auto"},
    packages=PACKAGES,
)


def punkt_available(nltk_data=None) -> bool:
    import nltk

    if nltk_data:
        path = str(Path(os.path.expanduser(str(nltk_data))))
        if path not in nltk.data.path:
            nltk.data.path.insert(0, path)
    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
        return True
    except LookupError:
        return False


def _require_punkt(s, metric="srrbert"):
    if not punkt_available(s.get("nltk_data")):
        raise MissingWeightsError(
            f"metric {metric!r}: NLTK's punkt_tab sentence model is not available (searched "
            f"{s.get('nltk_data') or 'NLTK data path'}). Point config metric_settings.{metric}.nltk_data at a "
            f"directory holding tokenizers/punkt_tab/english, or install it where the network is reachable "
            f"(`python -m nltk.downloader punkt_tab`, or NLTK_DATA).")


def _srr_scorer(model_dir: Path, tokenizer_dir: Path, batch_size: int, device: str):
    mod = _import("radeval.metrics.SRRBert.srr_bert")

    class LocalSRRBert(mod.SRRBert):
        MODEL_CONFIGS = {SRR_MODEL_TYPE: {**mod.SRRBert.MODEL_CONFIGS[SRR_MODEL_TYPE], "model_path": str(model_dir)}}

    real = mod.BertTokenizer

    class LocalTokenizer:  # the package asks for "microsoft/BiomedVLP-CXR-BERT-general" by id
        @staticmethod
        def from_pretrained(_name, *args, **kwargs):
            return real.from_pretrained(str(tokenizer_dir), *args, **kwargs)

    mod.BertTokenizer = LocalTokenizer
    try:
        scorer = LocalSRRBert(model_type=SRR_MODEL_TYPE, batch_size=batch_size)
    finally:
        mod.BertTokenizer = real
    if len(scorer.mapping) != SRR_LABELS:
        raise RuntimeError(f"radeval's SRR-BERT mapping has {len(scorer.mapping)} labels, expected {SRR_LABELS}")
    import torch

    scorer.device = torch.device(device)
    scorer.model.to(scorer.device)
    return scorer


def srr_labels(scorer, texts: list) -> np.ndarray:
    """(n_texts, 163) labels: the package's sentence split, each distinct sentence labelled once,
    OR over a report's sentences (as ``SRRBert.evaluate``)."""
    parse = _import("radeval.metrics.SRRBert.srr_bert").srr_bert_parse_sentences
    sentences = [parse(t) for t in texts]
    distinct = list(dict.fromkeys(x for ss in sentences for x in ss))
    preds = scorer(sentences=distinct)[0] if distinct else np.zeros((0, SRR_LABELS), dtype=int)
    index = {x: i for i, x in enumerate(distinct)}
    out = np.zeros((len(texts), SRR_LABELS), dtype="int64")
    for row, ss in enumerate(sentences):
        if ss:
            out[row] = np.any(preds[[index[x] for x in ss]], axis=0)
    return out


def _score_srrbert(pairs, s):
    import pandas as pd

    model = _hf.resolve_encoder(str(s["model"]), metric="srrbert", setting="model", tokenizer=False)
    tok = _hf.resolve_encoder(str(s["tokenizer"]), metric="srrbert", setting="tokenizer", weights=False)
    _require_punkt(s)
    device = _device(s.get("device"))
    batch = int(s.get("batch_size") or 64)
    scorer = _hf.cached(("srrbert", str(model.directory), str(tok.directory), batch, device),
                        lambda: _srr_scorer(model.directory, tok.directory, batch, device))
    texts, ref_codes, hyp_codes = _texts(pairs)
    labels = srr_labels(scorer, texts)
    ref, hyp = labels[ref_codes], labels[hyp_codes]
    utils = _import("radeval.utils")
    precision, recall, f1 = utils.multilabel_prf_per_sample(ref, hyp) if len(ref) else (np.zeros(0),) * 3
    cols = {"srrbert_sample_f1": np.asarray(f1, dtype="float64"),
            "srrbert_sample_precision": np.asarray(precision, dtype="float64"),
            "srrbert_sample_recall": np.asarray(recall, dtype="float64")}
    for i in range(SRR_LABELS):
        cols[SRR_REF[i]], cols[SRR_HYP[i]], cols[SRR_TP[i]] = ref[:, i], hyp[:, i], ref[:, i] & hyp[:, i]
    out = pd.DataFrame({"sample_id": pairs["sample_id"].to_numpy(), **cols})
    out.attrs["models"] = {"model": model.provenance(), "tokenizer": tok.provenance(), "model_type": SRR_MODEL_TYPE}
    return out


# --- temporal ---------------------------------------------------------------------------------------------

TEMPORAL = MetricSpec(
    name="temporal",
    description="Temporal entity F1 (temporal keywords by regex and stanza's radiology NER; radeval package), "
                "mean over reports",
    env="radeval",
    columns=("temporal", "temporal_ref_entities", "temporal_hyp_entities", "temporal_matched"),
    leaves=(mean_leaf("temporal", "Temporal F1"),),
    resources=Resources(mem_mb=8000, runtime_min=60, threads=2, gpu=0),
    model="stanza en/radiology",
    settings={"stanza_dir": None,  # stanza resources directory (None: $STANZA_RESOURCES_DIR or ~/stanza_resources)
              "device": "cpu"},
    packages=PACKAGES + ("stanza",),
)

_STANZA_PIPELINE = dict(lang="en", package="radiology", processors={"tokenize": "default", "ner": "radiology"})


def stanza_dir(s) -> Path:
    configured = s.get("stanza_dir") or os.environ.get("STANZA_RESOURCES_DIR") or "~/stanza_resources"
    return Path(os.path.expanduser(str(configured)))


def _require_stanza(directory: Path):
    missing = [p for p in (directory / "resources.json", directory / "en") if not p.exists()]
    if missing:
        raise MissingWeightsError(
            f"metric 'temporal': stanza's English radiology models are not available locally ({missing[0]} does "
            f"not exist). Point config metric_settings.temporal.stanza_dir at a stanza resources directory, or "
            f"download them where the network is reachable: python -c \"import stanza; stanza.download('en', "
            f"package='radiology', processors={{'ner': 'radiology'}}, model_dir='DIR')\".")


class _Memo:
    """A stanza pipeline that annotates each distinct text once."""

    def __init__(self, nlp):
        self.nlp, self.docs = nlp, {}

    def __call__(self, text):
        if text not in self.docs:
            self.docs[text] = self.nlp(text)
        return self.docs[text]


def _stanza_factory(directory: Path, device: str):
    """``stanza.Pipeline`` as f1temporal calls it, with the models read from ``directory`` and
    downloads off; a load failure is a MissingWeightsError naming the config key."""
    import stanza
    from stanza.pipeline.core import DownloadMethod

    real = stanza.Pipeline

    def local_pipeline(*args, **kwargs):
        kwargs.update(dir=str(directory), download_method=DownloadMethod.NONE, use_gpu=device != "cpu")
        if device not in ("cpu", "cuda"):
            kwargs["device"] = device
        try:
            return real(*args, **kwargs)
        except Exception as e:
            raise MissingWeightsError(
                f"metric 'temporal': stanza could not load its English radiology pipeline from {directory} "
                f"(config metric_settings.temporal.stanza_dir): {type(e).__name__}: {e}") from None

    return local_pipeline


def _temporal_module(directory: Path, device: str):
    """radeval.metrics.f1temporal.f1temporal with its module-level pipeline built from ``directory``
    without downloads (the module builds it at import time with stanza's download default)."""
    import sys

    import stanza

    name = "radeval.metrics.f1temporal.f1temporal"
    wanted = (str(directory), device)
    factory = _stanza_factory(directory, device)
    mod = sys.modules.get(name)
    if mod is None:
        real = stanza.Pipeline
        stanza.Pipeline = factory
        try:
            mod = _import(name)
        finally:
            stanza.Pipeline = real
    elif getattr(mod, "_radrank_stanza", None) != wanted:  # another directory or device: build it again
        mod.nlp = factory(**_STANZA_PIPELINE, logging_level="ERROR", verbose=False)
    mod._radrank_stanza = wanted
    return mod


def _score_temporal(pairs, s):
    import pandas as pd

    directory = stanza_dir(s)
    _require_stanza(directory)
    mod = _temporal_module(directory, str(s.get("device") or "cpu"))
    if not isinstance(mod.nlp, _Memo):
        mod.nlp = _Memo(mod.nlp)
    refs = [str(t) for t in pairs["reference"].tolist()]
    hyps = [str(t) for t in pairs["hypothesis"].tolist()]
    result = mod.F1Temporal(predictions=hyps, references=refs) if refs else {
        "sample_scores": [], "prediction_entities": [], "reference_entities": []}
    out = pd.DataFrame({
        "sample_id": pairs["sample_id"].to_numpy(),
        "temporal": np.asarray(result["sample_scores"], dtype="float64"),
        "temporal_ref_entities": [len(e) for e in result["reference_entities"]],
        "temporal_hyp_entities": [len(e) for e in result["prediction_entities"]],
        "temporal_matched": [len(r & h) for r, h in zip(result["reference_entities"], result["prediction_entities"])],
    })
    out.attrs["models"] = {"stanza_dir": str(directory), "pipeline": _STANZA_PIPELINE}
    return out


# --- registry ---------------------------------------------------------------------------------------------

SPECS = {spec.name: spec for spec in (RADEVAL_BERTSCORE, F1RADBERT_CT, SRRBERT, TEMPORAL)}
_SCORERS = {"radeval_bertscore": _score_radeval_bertscore, "f1radbert_ct": _score_f1radbert_ct,
            "srrbert": _score_srrbert, "temporal": _score_temporal}


def score(name, pairs, settings, inputs):
    s = {**SPECS[name].settings, **(settings or {})}
    return _SCORERS[name](pairs, s)

"""RadEval's model-based extras through the ``radeval`` package (2.2.1; env ``radeval``).

Four metrics, each one object (:data:`RADEVAL_BERTSCORE`, :data:`F1RADBERT_CT`, :data:`SRRBERT`,
:data:`TEMPORAL`), each built from the package's own classes exactly as RadEval's adapters build
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
  the module is imported while ``stanza.Pipeline`` hands it the pipeline built here from
  ``stanza_dir`` with downloads off.
* SRR-BERT needs NLTK's ``punkt_tab`` sentence model, which the package downloads at run
  time: it is read from ``nltk_data`` when set (checked when the workflow loads), else found
  on NLTK's data path of the job's environment (known only there).

What each metric loads is its ``weights(settings)``: the Hugging Face models (an id found in
the cache, downloaded once when the hub is on, or a local directory), and as ``resource``
references stanza's directory and punkt_tab, each with its own check and remedy. The job
resolves exactly those through the runtime before torch is imported; a missing one raises
MissingWeightsError naming its config key. Scorers are loaded once per process
(``runtime.load``). Each distinct text is labelled once (references repeat once per model).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from radrank.devices import DEVICE_DOC, check_device, device_of
from radrank.metrics import _hf
from radrank.metrics.base import Leaf, Metric, Resources, distinct_texts, mean_leaf
from radrank.runtime import WeightRef
from radrank.settings import Settings, scored, speed

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
    return distinct_texts(refs, hyps)


def _frame(pairs, columns: dict, models: dict):
    import pandas as pd

    out = pd.DataFrame({"sample_id": pairs["sample_id"].to_numpy(), **columns})
    out.attrs["models"] = models
    return out


class RadEvalMetric(Metric):
    """What every radeval metric shares (these four and :mod:`radrank.metrics.radeval_api`'s): the
    family, and the job's resolution of exactly ``weights(s)``."""

    family = "radeval"

    def in_job(self, ref: WeightRef, s) -> WeightRef:
        """The reference the job resolves for the declared ``ref``: ``ref`` itself, unless the declared one
        names no path (``ref.ref`` None: a place known only in the job's environment), which the
        metric then finds under the same key."""
        return ref

    def resolve_all(self, s, runtime) -> dict:
        """setting -> Resolved for every reference of ``weights(s)``, through ``runtime`` (missing ones fail
        here, before torch is imported)."""
        return {ref.setting: runtime.resolve(self.in_job(ref, s)) for ref in self.weights(s)}


@dataclass(frozen=True)
class DeviceSettings(Settings):
    """The device setting of radeval's model metrics (a base: each metric adds its own fields)."""

    device: str = speed("auto", DEVICE_DOC)

    def check(self, where):
        check_device(self.device, f"{where}.device")


class RadEvalModelMetric(RadEvalMetric):
    """A radeval metric that runs models: one GPU unless its device is the CPU."""

    packages = PACKAGES
    default_resources = Resources(mem_mb=8000, runtime_min=60, threads=4, gpu=1)

    def gpus(self, s) -> int:
        return 0 if s.device == "cpu" else 1

    def model_ref(self, s, setting: str = "model", need: str = "model") -> WeightRef:
        return WeightRef(self.owner(), self.key(setting), getattr(s, setting), need=need)

    def weights(self, s):
        """Its model (``model``); a metric that loads more says so."""
        return (self.model_ref(s),)


# --- radeval_bertscore ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RadEvalBERTScoreSettings(DeviceSettings):
    model: str = scored("IAMJB/RadEvalModernBERT", "the encoder (RadEval's ModernBERT): a Hugging Face id or a "
                                                   "local directory")
    num_layers: int = scored(22, "the layer whose output is matched (bert-score's num_layers)", minimum=1)
    batch_size: int = speed(64, "pairs per bert-score call, and texts per forward pass", minimum=1)


class RadEvalBERTScore(RadEvalModelMetric):
    name = "radeval_bertscore"
    description = ("RadEval BERTScore: F1 per report on RadEval's ModernBERT (layer 22, no idf, no rescaling), "
                   "radeval package, mean over reports")
    columns = ("radeval_bertscore", "radeval_bertscore_precision", "radeval_bertscore_recall")
    leaves = (mean_leaf("radeval_bertscore", "RadEval-BERTScore"),)
    Settings = RadEvalBERTScoreSettings

    def score(self, pairs, s, inputs, runtime):
        resolved = self.resolve_all(s, runtime)["model"]
        device = device_of(s.device)

        def build():
            import torch

            mod = _import("radeval.metrics.radevalbertscore.radevalbertscore")
            return mod.RadEvalBERTScorer(model_type=str(resolved.directory), num_layers=s.num_layers,
                                         use_fast_tokenizer=True, rescale_with_baseline=False,
                                         device=torch.device(device), batch_size=s.batch_size)

        # The batch size is passed with every call, so one scorer serves every batch size.
        scorer = runtime.load(("radeval_bertscore", str(resolved.directory), s.num_layers, device), build)
        refs = [str(t) for t in pairs["reference"].tolist()]
        hyps = [str(t) for t in pairs["hypothesis"].tolist()]
        batch = s.batch_size
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
        return _frame(pairs, {"radeval_bertscore": cat(f), "radeval_bertscore_precision": cat(p),
                              "radeval_bertscore_recall": cat(r)},
                      {"model": resolved.provenance(), "num_layers": s.num_layers})


RADEVAL_BERTSCORE = RadEvalBERTScore()

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


@dataclass(frozen=True)
class F1RadBERTCTSettings(DeviceSettings):
    model: str = scored("IAMJB/RadBERT-CT", "the CT findings classifier: a Hugging Face id or a local directory")
    threshold: float = scored(0.5, "a label is present when its sigmoid exceeds this", minimum=0.0, maximum=1.0)
    batch_size: int = speed(16, "reports per forward pass", minimum=1)


class F1RadBERTCT(RadEvalModelMetric):
    name = "f1radbert_ct"
    description = ("F1RadBERT-CT: 18 CT findings + No finding from RadBERT-CT on reference and hypothesis "
                   "(radeval package); exact-match accuracy and micro / macro / weighted F1 from pooled label counts")
    columns = RCT_REF + RCT_HYP + RCT_TP + ("f1radbert_ct_sample_acc",)
    leaves = ((mean_leaf("f1radbert_ct_sample_acc", "F1RadBERT-CT accuracy", name="f1radbert_ct_accuracy"),)
              + tuple(_corpus_leaf(f"f1radbert_ct_{a}_f1", f"F1RadBERT-CT {a} F1", RCT_REF, RCT_HYP, RCT_TP, a)
                      for a in ("micro", "macro", "weighted")))
    Settings = F1RadBERTCTSettings

    def score(self, pairs, s, inputs, runtime):
        resolved = self.resolve_all(s, runtime)["model"]
        device = device_of(s.device)

        def build():
            mod = _import("radeval.metrics.f1Radbert_ct.f1Radbert_ct")
            labels = tuple(mod.F1RadbertCT.LABELS) + (mod.F1RadbertCT.NO_FINDING,)
            if labels != RADBERT_CT_LABELS:
                raise RuntimeError(f"radeval's F1RadbertCT labels changed: {labels}")
            return mod.F1RadbertCT(model_id=str(resolved.directory), threshold=s.threshold, device=device,
                                   batch_size=s.batch_size)

        # The package's scorer holds its threshold and batch size: one scorer per combination.
        scorer = runtime.load(("f1radbert_ct", str(resolved.directory), s.threshold, device, s.batch_size), build)
        texts, ref_codes, hyp_codes = _texts(pairs)
        labels = scorer._predict_label_matrix(texts) if texts else np.zeros((0, len(RADBERT_CT_LABELS)), dtype=int)
        ref, hyp = labels[ref_codes].astype("int64"), labels[hyp_codes].astype("int64")
        cols = {}
        for i in range(len(RADBERT_CT_LABELS)):
            cols[RCT_REF[i]], cols[RCT_HYP[i]], cols[RCT_TP[i]] = ref[:, i], hyp[:, i], ref[:, i] & hyp[:, i]
        cols["f1radbert_ct_sample_acc"] = (ref == hyp).all(axis=1).astype("float64")
        return _frame(pairs, cols, {"model": resolved.provenance(), "threshold": s.threshold})


F1RADBERT_CT = F1RadBERTCT()

# --- srrbert ----------------------------------------------------------------------------------------------

SRR_MODEL_TYPE = "leaves_with_statuses"  # RadEval's adapter's choice
SRR_LABELS = 163  # len(leaves_with_statuses_mapping.json) in radeval 2.2.1 (checked at run time)
SRR_REF = tuple(f"srrbert_ref_{i:03d}" for i in range(SRR_LABELS))
SRR_HYP = tuple(f"srrbert_hyp_{i:03d}" for i in range(SRR_LABELS))
SRR_TP = tuple(f"srrbert_tp_{i:03d}" for i in range(SRR_LABELS))
SRR_SAMPLE = ("srrbert_sample_f1", "srrbert_sample_precision", "srrbert_sample_recall")
PUNKT = Path("tokenizers") / "punkt_tab" / "english"  # what the package's sent_tokenize reads, under an nltk_data root


def punkt_missing(root) -> str | None:
    """Why the nltk_data directory ``root`` cannot give punkt_tab, or None (paths only: the load-time check)."""
    return None if (Path(root) / PUNKT).is_dir() else f"{root} has no {PUNKT}"


def use_nltk_data(root) -> None:
    """Put the nltk_data directory ``root`` first on NLTK's data path, where the package's sentence split looks."""
    import nltk

    root = str(root)
    if root in nltk.data.path:
        nltk.data.path.remove(root)
    nltk.data.path.insert(0, root)


@dataclass(frozen=True)
class SRRBertSettings(DeviceSettings):
    model: str = scored("StanfordAIMI/SRR-BERT-Leaves-with-Statuses", "the SRR-BERT classifier (leaves with "
                                                                      "statuses): a Hugging Face id or a local "
                                                                      "directory")
    tokenizer: str = scored("microsoft/BiomedVLP-CXR-BERT-general", "its BERT tokenizer: a Hugging Face id or a "
                                                                    "local directory")
    nltk_data: str | None = scored(None, "an nltk_data directory holding tokenizers/punkt_tab/english (the "
                                         "sentence model; null: NLTK's own data path in the job's environment)")
    batch_size: int = speed(64, "sentences per forward pass", minimum=1)


class SRRBert(RadEvalModelMetric):
    name = "srrbert"
    description = ("SRR-BERT (leaves with statuses, 163 labels) on the sentences of reference and hypothesis "
                   "(radeval package); weighted F1 / precision / recall from pooled label counts")
    columns = SRR_SAMPLE + SRR_REF + SRR_HYP + SRR_TP
    leaves = tuple(_corpus_leaf(f"srrbert_weighted_{w}", f"SRR-BERT weighted {w}", SRR_REF, SRR_HYP, SRR_TP,
                                "weighted", w) for w in ("f1", "precision", "recall"))
    Settings = SRRBertSettings
    PUNKT_HOW = ("Point config metric_settings.srrbert.nltk_data at a directory holding tokenizers/punkt_tab/english, "
                 "or install it where the network is reachable (`python -m nltk.downloader punkt_tab`, or NLTK_DATA).")

    def weights(self, s):
        # nltk_data null: NLTK's data path depends on the job's interpreter and NLTK_DATA, so the
        # reference names no path here and the job finds it (in_job) under the same key.
        punkt = WeightRef(self.owner(), self.key("nltk_data"),
                          os.path.expanduser(s.nltk_data) if s.nltk_data else None, need="resource",
                          check=punkt_missing, how=self.PUNKT_HOW)
        return self.model_ref(s), self.model_ref(s, "tokenizer", need="tokenizer"), punkt

    def in_job(self, ref, s):
        if ref.setting != "nltk_data" or ref.ref is not None:
            return ref
        import nltk

        roots = [p for p in nltk.data.path if punkt_missing(p) is None]
        if not roots:
            raise dataclasses.replace(ref, ref="punkt_tab").missing(
                f"it is not on NLTK's data path {os.pathsep.join(map(str, nltk.data.path))}")
        return dataclasses.replace(ref, ref=str(roots[0]))

    def score(self, pairs, s, inputs, runtime):
        resolved = self.resolve_all(s, runtime)
        model, tok = resolved["model"], resolved["tokenizer"]
        use_nltk_data(resolved["nltk_data"].path)
        device = device_of(s.device)
        # The package's scorer holds its batch size: one scorer per batch size.
        scorer = runtime.load(("srrbert", str(model.directory), str(tok.directory), s.batch_size, device),
                              lambda: srr_scorer(model.directory, tok.directory, s.batch_size, device))
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
        return _frame(pairs, cols, {"model": model.provenance(), "tokenizer": tok.provenance(),
                                    "nltk_data": str(resolved["nltk_data"].path), "model_type": SRR_MODEL_TYPE})


def srr_scorer(model_dir: Path, tokenizer_dir: Path, batch_size: int, device: str):
    """The package's SRRBert on local directories (its model and tokenizer ids swapped for them)."""
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


SRRBERT = SRRBert()

# --- temporal ---------------------------------------------------------------------------------------------

TEMPORAL_MODULE = "radeval.metrics.f1temporal.f1temporal"
_STANZA_PIPELINE = dict(lang="en", package="radiology", processors={"tokenize": "default", "ner": "radiology"})


def stanza_missing(directory) -> str | None:
    """Why ``directory`` is not a stanza resources directory with English models, or None (paths only)."""
    directory = Path(directory)
    missing = [p for p in (directory / "resources.json", directory / "en") if not p.exists()]
    return f"{missing[0]} does not exist" if missing else None


@dataclass(frozen=True)
class TemporalSettings(DeviceSettings):
    device: str = speed("cpu", "stanza's device: " + DEVICE_DOC)
    stanza_dir: str | None = scored(None, "stanza's resources directory with the English radiology models (null: "
                                          "$STANZA_RESOURCES_DIR, else ~/stanza_resources)")


class _Memo:
    """A stanza pipeline that annotates each distinct text once."""

    def __init__(self, nlp):
        self.nlp, self.docs = nlp, {}

    def __call__(self, text):
        if text not in self.docs:
            self.docs[text] = self.nlp(text)
        return self.docs[text]


class Temporal(RadEvalModelMetric):
    name = "temporal"
    description = ("Temporal entity F1 (temporal keywords by regex and stanza's radiology NER; radeval package), "
                   "mean over reports")
    columns = ("temporal", "temporal_ref_entities", "temporal_hyp_entities", "temporal_matched")
    leaves = (mean_leaf("temporal", "Temporal F1"),)
    Settings = TemporalSettings
    packages = PACKAGES + ("stanza",)
    default_resources = Resources(mem_mb=8000, runtime_min=60, threads=2, gpu=0)
    STANZA_HOW = ("Point config metric_settings.temporal.stanza_dir at a stanza resources directory, or download "
                  "them where the network is reachable: python -c \"import stanza; stanza.download('en', "
                  "package='radiology', processors={'ner': 'radiology'}, model_dir='DIR')\".")

    def weights(self, s):
        configured = s.stanza_dir or os.environ.get("STANZA_RESOURCES_DIR") or "~/stanza_resources"
        return (WeightRef(self.owner(), self.key("stanza_dir"), os.path.expanduser(configured), need="resource",
                          check=stanza_missing, how=self.STANZA_HOW),)

    def score(self, pairs, s, inputs, runtime):
        resolved = self.resolve_all(s, runtime)["stanza_dir"]
        directory = resolved.path
        device = device_of(s.device)
        nlp = runtime.load(("temporal", str(directory), device), lambda: stanza_pipeline(resolved, device))
        mod = _temporal_module(nlp)
        mod.nlp = _Memo(nlp)  # per call: the annotations of this call's texts only
        try:
            refs = [str(t) for t in pairs["reference"].tolist()]
            hyps = [str(t) for t in pairs["hypothesis"].tolist()]
            result = mod.F1Temporal(predictions=hyps, references=refs) if refs else {
                "sample_scores": [], "prediction_entities": [], "reference_entities": []}
        finally:
            mod.nlp = nlp
        return _frame(pairs, {
            "temporal": np.asarray(result["sample_scores"], dtype="float64"),
            "temporal_ref_entities": [len(e) for e in result["reference_entities"]],
            "temporal_hyp_entities": [len(e) for e in result["prediction_entities"]],
            "temporal_matched": [len(r & h) for r, h in zip(result["reference_entities"],
                                                            result["prediction_entities"])],
        }, {"stanza_dir": str(directory), "pipeline": _STANZA_PIPELINE})


def stanza_pipeline(resolved, device: str):
    """``stanza.Pipeline`` as f1temporal builds it, with the models read from the resolved stanza directory and
    downloads off; a load failure is the reference's MissingWeightsError (naming the config key)."""
    import stanza
    from stanza.pipeline.core import DownloadMethod

    kwargs = dict(_STANZA_PIPELINE, logging_level="ERROR", verbose=False, dir=str(resolved.path),
                  download_method=DownloadMethod.NONE, use_gpu=device != "cpu")
    if device not in ("cpu", "cuda"):
        kwargs["device"] = device
    try:
        return stanza.Pipeline(**kwargs)
    except Exception as e:
        raise resolved.ref.missing(f"stanza could not load its English radiology pipeline: {type(e).__name__}: "
                                   f"{e}") from None


def _temporal_module(nlp):
    """radeval.metrics.f1temporal.f1temporal, imported with ``nlp`` as its module-level pipeline (the module
    builds one at import time with stanza's download default)."""
    import sys

    mod = sys.modules.get(TEMPORAL_MODULE)
    if mod is None:
        import stanza

        real = stanza.Pipeline
        stanza.Pipeline = lambda *args, **kwargs: nlp
        try:
            mod = _import(TEMPORAL_MODULE)
        finally:
            stanza.Pipeline = real
    return mod


TEMPORAL = Temporal()

"""F1-CheXbert: CheXpert labels of reference and hypothesis from the CheXbert labeler.

CheXbert is a bert-base-uncased encoder with 14 linear heads on the CLS vector
of the last layer (13 four-way heads — blank, positive, negative, uncertain —
and a two-way "No Finding" head), loaded from upstream's ``chexbert.pth``
(a ``model_state_dict`` saved through DataParallel: keys ``module.bert.…`` and
``module.linear_heads.{i}.…``). The tokenizer and config are bert-base-uncased's.

Labels follow f1chexbert 0.0.2 / RadEval's ``mode="rrg"``: a condition is 1 when
its head says positive or uncertain, else 0 (blank and negative are 0); "No
Finding" is 1 when its head says yes. Texts are prepared as upstream: stripped,
newlines to spaces, whitespace runs collapsed, at most 512 tokens (an empty
report is just [CLS] [SEP]).

Per sample: both label vectors (``chexbert_ref_*``, ``chexbert_hyp_*``), the
per-label true positives (``chexbert_tp_*`` = ref AND hyp), RadEval's per-sample
label accuracies over the 5 and the 14 conditions, and f1chexbert's per-sample
exact match of the 5. The F1 leaves (micro / macro / weighted, over the 5
competition conditions and over all 14) are corpus leaves computed from the
column totals of the ref / hyp / tp columns — support, predicted positives and
true positives per label — so a bootstrap resample recomputes them exactly, and
they equal scikit-learn's ``classification_report`` as f1chexbert calls it.

The settings, the weights (``checkpoint`` — a hub repo, a local directory holding
``checkpoint_file``, or the file itself — and ``tokenizer``) and the labeler are shared
with :mod:`radrank.metrics.semb` (SembScore uses the same CLS vectors): the labeler is
loaded once per process through the runtime's model cache, whichever metric asks
first, and CLS vectors of texts already encoded in the process are reused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

import numpy as np

from radrank.devices import DEVICE_DOC, check_device
from radrank.metrics import _hf
from radrank.metrics.base import Leaf, Metric, Resources, mean_leaf
from radrank.runtime import WeightRef
from radrank.runtime.loaders import frozen, load_tokenizer
from radrank.settings import Settings, scored, speed

CONDITIONS = (
    "Enlarged Cardiomediastinum", "Cardiomegaly", "Lung Opacity", "Lung Lesion", "Edema", "Consolidation",
    "Pneumonia", "Atelectasis", "Pneumothorax", "Pleural Effusion", "Pleural Other", "Fracture",
    "Support Devices", "No Finding",
)
TOP5 = ("Cardiomegaly", "Edema", "Consolidation", "Atelectasis", "Pleural Effusion")
SLUGS = tuple(c.lower().replace(" ", "_") for c in CONDITIONS)
TOP5_INDEX = tuple(CONDITIONS.index(c) for c in TOP5)

REF_COLUMNS = tuple(f"chexbert_ref_{s}" for s in SLUGS)
HYP_COLUMNS = tuple(f"chexbert_hyp_{s}" for s in SLUGS)
TP_COLUMNS = tuple(f"chexbert_tp_{s}" for s in SLUGS)
ACC_COLUMNS = ("chexbert_acc_5", "chexbert_acc_14", "chexbert_exact_5")

MAX_LENGTH = 512
MAX_BATCH_TOKENS = 1 << 15


@dataclass(frozen=True)
class CheXbertSettings(Settings):
    """The settings of the CheXbert labeler, shared by ``chexbert`` and ``semb``."""

    checkpoint: str = scored("StanfordAIMI/RRG_scorers", "CheXbert's checkpoint: a Hugging Face repo or a local "
                                                         "directory holding checkpoint_file, or the local file")
    checkpoint_file: str = scored("chexbert.pth", "the checkpoint's file name inside the repo or directory")
    tokenizer: str = scored("bert-base-uncased", "the tokenizer and config.json of the encoder (Hugging Face id or "
                                                 "local directory)")
    dtype: Literal["fp32", "bf16"] = scored("fp32", "encoder precision (bf16 may flip near-tie labels)")
    batch_size: int = speed(64, "texts per forward pass, at most (also bounded by a token budget)", minimum=1)
    device: str = speed("auto", DEVICE_DOC)

    def check(self, where):
        check_device(self.device, f"{where}.device")


# --- F1 from per-label counts -----------------------------------------------------------------------


def _divide(num, den):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)


def f1_from_totals(totals, average: str) -> np.ndarray:
    """F1 from column totals laid out as (support × k, predicted × k, true positives × k).

    Per label F1 = 2·tp / (support + predicted), 0 when both are 0 (scikit-learn's
    zero_division); micro pools the counts, macro averages labels, weighted
    averages them by support (0 when no label has support).
    """
    totals = np.asarray(totals, dtype="float64")
    k = totals.shape[-1] // 3
    support, predicted, tp = totals[..., :k], totals[..., k:2 * k], totals[..., 2 * k:]
    if average == "micro":
        return _divide(2 * tp.sum(-1), support.sum(-1) + predicted.sum(-1))
    per_label = _divide(2 * tp, support + predicted)
    if average == "macro":
        return per_label.mean(-1)
    if average == "weighted":
        return _divide((per_label * support).sum(-1), support.sum(-1))
    raise ValueError(f"unknown average {average!r}")


def _f1_leaf(labels: tuple, average: str, name: str, label: str) -> Leaf:
    idx = [CONDITIONS.index(c) for c in labels]
    stats = tuple(REF_COLUMNS[i] for i in idx) + tuple(HYP_COLUMNS[i] for i in idx) + tuple(TP_COLUMNS[i] for i in idx)
    return Leaf(name=name, label=label, stats=stats, corpus=lambda totals, a=average: f1_from_totals(totals, a))


LEAVES = tuple(
    _f1_leaf(labels, average, f"f1chexbert_{tag}_{average}_f1", f"F1-CheXbert-{tag} {average}")
    for tag, labels in (("5", TOP5), ("all", CONDITIONS)) for average in ("micro", "macro", "weighted")
) + (mean_leaf("chexbert_exact_5", "F1-CheXbert-5 accuracy", name="f1chexbert_accuracy"),)


# --- the labeler (shared with semb) ------------------------------------------------------------------

_WS = re.compile(r"\s+")


def prepare(text) -> str:
    """Upstream's text preparation: strip, newlines to spaces, whitespace runs to one space, strip."""
    return _WS.sub(" ", str(text).strip().replace("\n", " ")).strip()


def load_state(path) -> dict:
    """The checkpoint's state dict without DataParallel's ``module.`` prefixes."""
    import torch

    raw = torch.load(str(path), map_location="cpu", weights_only=True)
    state = raw.get("model_state_dict", raw) if isinstance(raw, dict) else raw
    if not isinstance(state, dict):
        raise ValueError(f"{path}: not a CheXbert checkpoint (no state dict)")
    return {k.replace("module.", ""): v for k, v in state.items()}


class Labeler:
    """CheXbert's encoder and heads on one device, with a memo of CLS vectors by text."""

    def __init__(self, checkpoint, tokenizer_dir, device: str, dtype):
        import torch
        from transformers import AutoConfig, AutoModel

        state = load_state(checkpoint)
        config = AutoConfig.from_pretrained(str(tokenizer_dir), trust_remote_code=False, local_files_only=True)
        model = AutoModel.from_config(config)
        bert = {k[len("bert."):]: v for k, v in state.items() if k.startswith("bert.")}
        result = model.load_state_dict(bert, strict=False)
        missing = [k for k in result.missing_keys if not k.startswith("pooler.")]
        unexpected = [k for k in result.unexpected_keys
                      if not (k.startswith("pooler.") or k.endswith("position_ids"))]
        if missing or unexpected or not bert:
            raise ValueError(f"{checkpoint}: does not fit the {config.model_type} config of {tokenizer_dir} "
                             f"(missing {missing[:5]}, unexpected {unexpected[:5]})")
        heads = []
        for i in range(14):
            w, b = state.get(f"linear_heads.{i}.weight"), state.get(f"linear_heads.{i}.bias")
            if w is None or b is None:
                raise ValueError(f"{checkpoint}: no linear_heads.{i} (not a CheXbert checkpoint)")
            heads.append((w.float().to(device), b.float().to(device)))
        if [h[0].shape[0] for h in heads] != [4] * 13 + [2]:
            raise ValueError(f"{checkpoint}: heads have {[h[0].shape[0] for h in heads]} classes, "
                             f"expected 13 × 4 and 1 × 2")
        self.model = frozen(model, device, dtype)
        self.heads = heads
        self.tokenizer = load_tokenizer(tokenizer_dir)
        self.device = device
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.memo: dict = {}
        self._torch = torch

    def cls(self, texts: list, batch_size: int = 64) -> np.ndarray:
        """float32 CLS vectors (last layer, token 0) of prepared texts, one row per text."""
        torch = self._torch
        todo = [t for t in dict.fromkeys(texts) if t not in self.memo]
        if todo:
            if len(self.memo) + len(todo) > 500_000:
                self.memo.clear()
            ids = []
            for i in range(0, len(todo), 4096):
                ids.extend(self.tokenizer(todo[i:i + 4096], add_special_tokens=True, truncation=True,
                                          max_length=MAX_LENGTH, return_attention_mask=False,
                                          return_token_type_ids=False)["input_ids"])
            lengths = np.fromiter((len(x) for x in ids), dtype="int64", count=len(ids))
            progress = _hf.Progress("chexbert encoder", len(todo))
            for batch in _hf.length_batches(lengths, batch_size, MAX_BATCH_TOKENS):
                input_ids, mask = _hf.pad_batch([ids[i] for i in batch], self.pad_id)
                with torch.inference_mode():
                    out = self.model(input_ids=torch.from_numpy(input_ids).to(self.device),
                                     attention_mask=torch.from_numpy(mask).to(self.device))
                    vectors = out.last_hidden_state[:, 0].float().cpu().numpy()
                for row, i in enumerate(batch):
                    self.memo[todo[i]] = vectors[row]
                progress.update(len(batch))
            progress.finish()
        return np.stack([self.memo[t] for t in texts]) if texts else np.zeros((0, self.model.config.hidden_size),
                                                                              dtype="float32")

    def head_classes(self, vectors: np.ndarray) -> np.ndarray:
        """(n, 14) argmax class of each head (0 blank, 1 positive, 2 negative, 3 uncertain; No Finding 0/1)."""
        torch = self._torch
        out = np.zeros((len(vectors), 14), dtype="int64")
        for lo in range(0, len(vectors), 65536):
            x = torch.from_numpy(np.ascontiguousarray(vectors[lo:lo + 65536])).to(self.device)
            with torch.inference_mode():
                out[lo:lo + len(x)] = torch.stack([(x @ w.T + b).argmax(dim=1) for w, b in self.heads],
                                                  dim=1).cpu().numpy()
        return out

    def labels(self, texts: list, batch_size: int = 64) -> np.ndarray:
        """(n, 14) int labels, mode rrg: positive or uncertain → 1, else 0."""
        classes = self.head_classes(self.cls(texts, batch_size))
        return ((classes == 1) | (classes == 3)).astype("int64")


class CheXbertLabeled(Metric):
    """What F1-CheXbert and SembScore share: settings, weights, the labeler, provenance."""

    family = "rexrank"
    Settings = CheXbertSettings
    default_resources = Resources(mem_mb=8000, runtime_min=60, threads=4, gpu=1)
    packages = ("torch", "transformers", "tokenizers", "huggingface-hub")

    def weights(self, s):
        return (WeightRef(self.owner(), self.key("checkpoint"), s.checkpoint, need="file",
                          filename=s.checkpoint_file),
                WeightRef(self.owner(), self.key("tokenizer"), s.tokenizer, need="tokenizer"))

    def resolve(self, s, runtime) -> dict:
        """setting -> Resolved of the checkpoint and the tokenizer; a missing one fails here, naming this
        metric's config key, before torch is imported."""
        return {ref.setting: runtime.resolve(ref) for ref in self.weights(s)}

    def labeler(self, s, runtime, resolved: dict | None = None) -> Labeler:
        """The labeler for ``s``, loaded once per process whichever of the two metrics asks first."""
        resolved = resolved or self.resolve(s, runtime)
        checkpoint, tokenizer = resolved["checkpoint"].path, resolved["tokenizer"].directory
        device = _hf.device_of(s.device)
        dtype = _hf.dtype_of(s.dtype)
        key = ("chexbert", str(checkpoint), str(tokenizer), device, str(dtype))
        return runtime.load(key, lambda: Labeler(checkpoint, tokenizer, device, dtype))

    def provenance(self, s, resolved: dict) -> dict:
        """Checkpoint and tokenizer ids, revisions and hashes, and the settings that change numbers."""
        return {"checkpoint": resolved["checkpoint"].provenance(), "tokenizer": resolved["tokenizer"].provenance(),
                "settings": s.identity()}


# --- scoring -------------------------------------------------------------------------------------------


def label_texts(texts, settings=None, runtime=None) -> np.ndarray:
    """(n, 14) labels of ``texts`` (mode rrg) with the settings (a mapping or CheXbertSettings)."""
    from radrank.runtime import Runtime

    s = METRIC.coerce(settings)
    return METRIC.labeler(s, runtime or Runtime()).labels([prepare(t) for t in texts], s.batch_size)


def per_sample(ref_labels: np.ndarray, hyp_labels: np.ndarray) -> dict:
    """The per-sample columns from (n, 14) label matrices."""
    ref = np.asarray(ref_labels, dtype="int64")
    hyp = np.asarray(hyp_labels, dtype="int64")
    cols = {}
    for i in range(14):
        cols[REF_COLUMNS[i]] = ref[:, i]
        cols[HYP_COLUMNS[i]] = hyp[:, i]
        cols[TP_COLUMNS[i]] = ref[:, i] & hyp[:, i]
    top5 = list(TOP5_INDEX)
    equal = ref == hyp
    cols["chexbert_acc_5"] = equal[:, top5].mean(axis=1)
    cols["chexbert_acc_14"] = equal.mean(axis=1)
    cols["chexbert_exact_5"] = equal[:, top5].all(axis=1).astype("float64")
    return cols


class CheXbert(CheXbertLabeled):
    name = "chexbert"
    description = ("F1-CheXbert (CheXbert labels of reference and hypothesis, mode rrg): micro / macro / weighted F1 "
                   "over the 5 competition conditions and all 14, from pooled per-label counts")
    columns = REF_COLUMNS + HYP_COLUMNS + TP_COLUMNS + ACC_COLUMNS
    leaves = LEAVES

    def score(self, pairs, s, inputs, runtime):
        import pandas as pd

        resolved = self.resolve(s, runtime)
        lab = self.labeler(s, runtime, resolved)
        refs = [prepare(t) for t in pairs["reference"].tolist()]
        hyps = [prepare(t) for t in pairs["hypothesis"].tolist()]
        labels = lab.labels(refs + hyps, s.batch_size)
        cols = per_sample(labels[:len(refs)], labels[len(refs):])
        out = pd.DataFrame({"sample_id": pairs["sample_id"].to_numpy(), **cols})
        out.attrs["models"] = {**self.provenance(s, resolved), "device": lab.device}
        return out


METRIC = CheXbert()

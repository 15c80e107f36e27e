"""BERTScore as ReXrank computes it (bert-score 0.3.13 semantics), on a fast batched path.

ReXrank / CXR-Report-Metric call ``BERTScorer(model_type="distilroberta-base",
num_layers=5, lang="en", rescale_with_baseline=True, idf=False)`` after
``re.sub(" +", " ", text)`` on both sides, and report the per-sample F1. This
module computes the same numbers without the library:

* text: runs of the space character collapsed to one (as CXR-Report-Metric;
  newlines and tabs are kept and tokenised, as there), then stripped (as
  bert-score's ``sent_encode``);
* tokens: the model's fast tokenizer with special tokens, truncated to the
  model's maximum input; GPT-2 / RoBERTa byte-level tokenizers get the prefix
  space bert-score ≥ 0.3.13 adds (Tiiiger/bert_score#147); an empty text is
  just the two special tokens;
* embeddings: the output of layer ``num_layers`` (the model cut after that
  layer, as bert-score does), L2-normalised per token, in float32;
* greedy matching over all tokens, special ones included; token weights 1 with
  the CLS and SEP tokens at 0, or with ``idf`` the inverse document frequency
  log((N + 1) / (df + 1)) over the N references of the job (bert-score's
  ``idf_sents`` = the references, duplicates counted, as RadEval's RadCliQ);
* P, R = weighted means of the best matches; F = 2PR / (P + R), NaN → 0; an
  empty candidate or reference gives raw P = R = F = 0;
* rescaling (x − b) / (1 − b) with the baseline row ``num_layers`` of
  bert-score's shipped table for the model (distilroberta-base's is built in
  below) or of ``baseline_path``.

Differences from the library, all below 1e-6 on real text: batches are grouped
by token length (not word count), each distinct text is encoded once per
chunk, and the best match ignores padding (bert-score multiplies similarities
by the padding mask, so a token whose every cosine is negative would get 0
there — contextual embeddings' cosines are positive in practice). Texts longer
than the position embeddings are truncated to fit, where bert-score would fail
when the tokenizer declares no maximum length.

tests/envs/rexrank/test_bertscore.py checks equality with ``bert_score.BERTScorer``
to 1e-6 on a tiny random RoBERTa, with and without idf.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

import numpy as np

from radrank.devices import DEVICE_DOC, check_device
from radrank.metrics import _hf
from radrank.metrics.base import BoardColumn, Metric, Resources, distinct, mean_leaf
from radrank.runtime import WeightRef
from radrank.runtime.loaders import load_encoder, load_tokenizer
from radrank.settings import Settings, scored, speed


@dataclass(frozen=True)
class BERTScoreSettings(Settings):
    model: str = scored("distilroberta-base", "the encoder: a Hugging Face id or a local directory")
    num_layers: int | None = scored(5, "the layer whose output is matched (null: bert-score's default for the "
                                       "model, known for distilroberta-base (5) only: another model needs "
                                       "an integer, checked at load)", minimum=0)
    idf: bool = scored(False, "weight tokens by inverse document frequency over the references (ReXrank / "
                              "CXR-Report-Metric: false; RadEval's RadCliQ: true)")
    rescale_with_baseline: bool = scored(True, "rescale (x - b) / (1 - b) with bert-score's baseline for the layer")
    baseline_path: str | None = scored(None, "a bert-score baseline table (LAYER,P,R,F) for another model "
                                             "(null: bert-score's table for the model)")
    dtype: Literal["fp32", "bf16"] = scored("fp32", "encoder precision (bf16 is faster on a GPU and changes "
                                                    "numbers by ~1e-3)")
    batch_size: int = speed(128, "texts per forward pass, at most (also bounded by a token budget)", minimum=1)
    device: str = speed("auto", DEVICE_DOC)

    def check(self, where):
        check_device(self.device, f"{where}.device")
        if self.num_layers is None and default_layers(self.model) is None:
            raise self.fail(where, "num_layers", f"null means bert-score's default layer for the model, which radrank "
                            f"knows for {', '.join(sorted(DEFAULT_LAYERS))} only, not for model {self.model!r}; set "
                            "the layer whose output is matched (an integer)")


# bert-score 0.3.13, bert_score/rescale_baseline/en/distilroberta-base.tsv: (P, R, F) per layer 0..6.
DISTILROBERTA_BASELINE = (
    (0.42608285, 0.4272089, 0.42462298),
    (0.7367886, 0.7370362, 0.736573),
    (0.79922664, 0.799593, 0.7991632),
    (0.8329021, 0.8333321, 0.83291864),
    (0.8442, 0.84462386, 0.84425896),
    (0.84732, 0.84759504, 0.8473319),
    (0.89334005, 0.8935088, 0.8933471),
)
# Keyed by the last component of the model id or path, so a local copy in a directory
# named distilroberta-base gets the same baseline (provenance records which one was used).
BUILTIN_BASELINES = {"distilroberta-base": DISTILROBERTA_BASELINE}
DEFAULT_LAYERS = {"distilroberta-base": 5}

MAX_BATCH_TOKENS = 1 << 16  # padded tokens per forward pass
# Distinct texts' tokens held at once (float32 embeddings: × hidden × 4 bytes); pairs are scored in
# consecutive chunks within this budget.
CHUNK_TOKENS = {"cpu": 1 << 19, "cuda": 1 << 22}
_SPACES = re.compile(" +")


def prepare(text) -> str:
    """CXR-Report-Metric's ``re.sub(" +", " ", x)``, then bert-score's ``strip()``."""
    return _SPACES.sub(" ", str(text)).strip()


# --- settings, weights, baseline --------------------------------------------------------------------


def default_layers(model: str) -> int | None:
    """bert-score's default layer for ``model`` (by the last component of its id or path), None when unknown."""
    return DEFAULT_LAYERS.get(str(model).rstrip("/").split("/")[-1])


def _num_layers(s: BERTScoreSettings) -> int:
    """The layer matched: ``num_layers``, else the model's default (settings without one are refused at load)."""
    return int(s.num_layers if s.num_layers is not None else default_layers(s.model))


def _read_table(path):
    import csv

    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    header = [h.strip() for h in rows[0]]
    cols = [header.index(c) for c in ("P", "R", "F")]
    return np.array([[float(r[c]) for c in cols] for r in rows[1:] if r], dtype="float32")


def _baseline_table(s: BERTScoreSettings, resolved: dict):
    """(P, R, F) rows per layer as float32, and where they came from (``resolved``: the weights of ``s``,
    of which only the baseline file is read)."""
    from radrank.runtime.weights import file_sha256

    if s.baseline_path:
        path = resolved["baseline_path"].path
        return _read_table(path), {"path": str(path), "sha256": file_sha256(path)}
    name = s.model.rstrip("/").split("/")[-1]
    if name in BUILTIN_BASELINES:
        return np.array(BUILTIN_BASELINES[name], dtype="float32"), {"builtin": f"bert-score 0.3.13 en/{name}.tsv"}
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("bert_score")  # bert-score's shipped table, when the library is installed
    if spec and spec.origin:
        shipped = Path(spec.origin).parent / "rescale_baseline" / "en" / f"{s.model}.tsv"
        if shipped.is_file():
            return _read_table(shipped), {"path": str(shipped), "sha256": file_sha256(shipped)}
    raise ValueError(f"bertscore: no rescaling baseline for model {s.model!r}; set "
                     f"metric_settings.bertscore.baseline_path (bert-score's LAYER,P,R,F table) or "
                     f"rescale_with_baseline: false")


def _resolve(s: BERTScoreSettings, runtime=None, only=None) -> dict:
    """setting -> Resolved for the weights of ``s`` (``only``: those settings); missing ones fail here,
    before torch is imported."""
    from radrank.runtime import Runtime

    runtime = runtime or Runtime()
    return {ref.setting: runtime.resolve(ref) for ref in METRIC.weights(s) if only is None or ref.setting in only}


def baseline(settings, resolved: dict | None = None) -> np.ndarray:
    """The (P, R, F) baseline used to rescale, float32 (bert-score's ``.iloc[num_layers]``)."""
    s = METRIC.coerce(settings)
    table, _ = _baseline_table(s, resolved if resolved is not None else _resolve(s, only=("baseline_path",)))
    n = _num_layers(s)
    if not 0 <= n < len(table):
        raise ValueError(f"bertscore: baseline table has no row for layer {n}")
    return table[n]


def provenance(settings=None, resolved: dict | None = None) -> dict:
    """Model id, revision and weights hash, baseline, and the settings that change numbers."""
    s = METRIC.coerce(settings)
    resolved = resolved if resolved is not None else _resolve(s)
    out = {"model": resolved["model"].provenance(), "settings": s.identity() | {"num_layers": _num_layers(s)}}
    if s.rescale_with_baseline:
        _, source = _baseline_table(s, resolved)
        out["baseline"] = {**source, "values": [float(v) for v in baseline(s, resolved)]}
    return out


# --- model ------------------------------------------------------------------------------------------


def _needs_prefix_space(tokenizer) -> bool:
    """True for GPT-2 / RoBERTa tokenizers, whose text bert-score encodes with add_prefix_space=True."""
    import transformers

    names = ("GPT2Tokenizer", "GPT2TokenizerFast", "RobertaTokenizer", "RobertaTokenizerFast")
    classes = tuple(c for c in (getattr(transformers, n, None) for n in names) if isinstance(c, type))
    if isinstance(tokenizer, classes):
        return True
    slow = getattr(type(tokenizer), "slow_tokenizer_class", None)
    return isinstance(slow, type) and issubclass(slow, classes)


def _cut_layers(model, n: int):
    """Keep the first ``n`` transformer layers (bert-score's get_model)."""
    import torch

    for owner, attr in ((getattr(model, "encoder", None), "layer"), (getattr(model, "transformer", None), "layer"),
                        (model, "layers")):
        layers = getattr(owner, attr, None) if owner is not None else None
        if isinstance(layers, torch.nn.ModuleList):
            if not 0 <= n <= len(layers):
                raise ValueError(f"bertscore: num_layers must be between 0 and {len(layers)}, got {n}")
            setattr(owner, attr, torch.nn.ModuleList(list(layers)[:n]))
            return model
    raise ValueError(f"bertscore: cannot select layers of a {type(model).__name__}")


class _Encoder:
    def __init__(self, directory, num_layers: int, device: str, dtype):
        self.tokenizer = load_tokenizer(directory)
        model = load_encoder(directory, device="cpu", dtype=dtype)
        if hasattr(model, "encoder") and hasattr(model, "decoder"):
            model = model.encoder
        self.model = _cut_layers(model, num_layers).to(device)
        self.device = device
        self.prefix_space = _needs_prefix_space(self.tokenizer)
        self.max_length = _hf.max_input_length(self.tokenizer, model.config)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.special = [i for i in (self.tokenizer.cls_token_id, self.tokenizer.sep_token_id) if i is not None]

    def tokenize(self, texts: list) -> list:
        """Token ids of prepared texts, as bert-score's sent_encode gives them."""
        if self.prefix_space:  # what add_prefix_space=True does to a non-empty, stripped text
            texts = [" " + t if t and not t[0].isspace() else t for t in texts]
        out = []
        for i in range(0, len(texts), 4096):
            enc = self.tokenizer(texts[i:i + 4096], add_special_tokens=True, truncation=True,
                                 max_length=self.max_length, return_attention_mask=False,
                                 return_token_type_ids=False)
            out.extend(enc["input_ids"])
        return out


def _encoder(s: BERTScoreSettings, directory, runtime) -> _Encoder:
    """The cut encoder, loaded once per process per (directory, layers, device, dtype)."""
    device = _hf.device_of(s.device)
    dtype = _hf.dtype_of(s.dtype)
    n = _num_layers(s)
    key = ("bertscore", str(directory), n, device, str(dtype))
    return runtime.load(key, lambda: _Encoder(directory, n, device, dtype))


# --- scoring ------------------------------------------------------------------------------------------


def _token_weights(encoder: _Encoder, ids: list, ref_codes: np.ndarray, idf: bool) -> np.ndarray:
    """Weight of every token id (float32, indexed by id): 1 with CLS/SEP at 0, or idf over the references."""
    vocab = max([len(encoder.tokenizer)] + [max(x) + 1 for x in ids if x])
    if not idf:
        w = np.ones(vocab, dtype="float32")
        w[encoder.special] = 0.0
        return w
    n_docs = len(ref_codes)
    texts, mult = np.unique(ref_codes, return_counts=True)
    df = np.zeros(vocab, dtype="float64")
    for t, m in zip(texts.tolist(), mult.tolist()):
        df[np.unique(np.asarray(ids[t], dtype="int64"))] += m
    return np.array([math.log((n_docs + 1) / (c + 1)) for c in df], dtype="float32")


def _chunks(ref_codes, hyp_codes, lengths, budget: int):
    """Consecutive pair ranges whose distinct texts hold at most ~``budget`` tokens."""
    start, seen, tokens = 0, set(), 0
    for p in range(len(ref_codes)):
        new = [t for t in (int(ref_codes[p]), int(hyp_codes[p])) if t not in seen]
        extra = sum(int(lengths[t]) for t in set(new))
        if tokens + extra > budget and p > start:
            yield start, p
            start, seen, tokens = p, set(), 0
            new = list({int(ref_codes[p]), int(hyp_codes[p])})
            extra = sum(int(lengths[t]) for t in new)
        seen.update(new)
        tokens += extra
    if start < len(ref_codes):
        yield start, len(ref_codes)


def _embed(encoder: _Encoder, ids: list, weights: np.ndarray, batch_size: int, progress):
    """Normalised float32 token embeddings of ``ids`` packed end to end, with each text's offset,
    and the token weights packed the same way."""
    import torch

    lengths = np.fromiter((len(x) for x in ids), dtype="int64", count=len(ids))
    hidden = encoder.model.config.hidden_size
    flat = torch.empty((int(lengths.sum()), hidden), dtype=torch.float32, device=encoder.device)
    flat_w = np.empty(int(lengths.sum()), dtype="float32")
    offsets = np.empty(len(ids), dtype="int64")
    pos = 0
    for batch in _hf.length_batches(lengths, batch_size, MAX_BATCH_TOKENS):
        chunk = [ids[i] for i in batch]
        input_ids, mask = _hf.pad_batch(chunk, encoder.pad_id)
        t_ids = torch.from_numpy(input_ids).to(encoder.device, non_blocking=True)
        t_mask = torch.from_numpy(mask).to(encoder.device, non_blocking=True)
        with torch.inference_mode():
            out = encoder.model(input_ids=t_ids, attention_mask=t_mask)
            states = (out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]).float()
            tokens = states[t_mask.bool()]
            tokens = tokens / torch.norm(tokens, dim=-1, keepdim=True)
        n = tokens.shape[0]
        flat[pos:pos + n] = tokens
        lens = lengths[batch]
        offsets[batch] = pos + np.concatenate([[0], np.cumsum(lens)[:-1]])
        flat_w[pos:pos + n] = weights[np.concatenate([np.asarray(c, dtype="int64") for c in chunk])]
        pos += n
        progress.update(len(batch))
    return flat, torch.from_numpy(flat_w).to(encoder.device), offsets, lengths


def _greedy(flat, flat_w, off_h, len_h, off_r, len_r, device):
    """Raw (P, R, F) float32 per pair from packed embeddings (bert-score's greedy_cos_idf)."""
    import torch

    n = len(off_h)
    out = np.zeros((n, 3), dtype="float32")
    longest = np.maximum(len_h, len_r)
    order = np.argsort(-longest, kind="stable")
    hidden = flat.shape[1]
    sim_budget = 1 << 25 if device != "cpu" else 1 << 23
    emb_budget = 1 << 27 if device != "cpu" else 1 << 25
    i = 0
    while i < n:
        top = int(longest[order[i]])
        size = max(1, min(sim_budget // (top * top), emb_budget // (2 * top * hidden), 4096))
        b = order[i:i + size]
        i += size
        lh, lr = int(len_h[b].max()), int(len_r[b].max())
        t_len_h = torch.from_numpy(len_h[b]).to(device)
        t_len_r = torch.from_numpy(len_r[b]).to(device)
        ar_h = torch.arange(lh, device=device)
        ar_r = torch.arange(lr, device=device)
        m_h = ar_h[None, :] < t_len_h[:, None]
        m_r = ar_r[None, :] < t_len_r[:, None]
        idx_h = torch.where(m_h, torch.from_numpy(off_h[b]).to(device)[:, None] + ar_h[None, :], 0)
        idx_r = torch.where(m_r, torch.from_numpy(off_r[b]).to(device)[:, None] + ar_r[None, :], 0)
        with torch.inference_mode():
            sim = torch.bmm(flat[idx_h], flat[idx_r].transpose(1, 2))  # (B, Lh, Lr)
            best_p = sim.masked_fill(~m_r[:, None, :], float("-inf")).amax(dim=2).masked_fill(~m_h, 0.0)
            best_r = sim.masked_fill(~m_h[:, :, None], float("-inf")).amax(dim=1).masked_fill(~m_r, 0.0)
            w_h = flat_w[idx_h] * m_h
            w_r = flat_w[idx_r] * m_r
            w_h = w_h / w_h.sum(dim=1, keepdim=True)
            w_r = w_r / w_r.sum(dim=1, keepdim=True)
            p = (best_p * w_h).sum(dim=1)
            r = (best_r * w_r).sum(dim=1)
            f = 2 * p * r / (p + r)
            empty = (t_len_h == 2) | (t_len_r == 2)
            p = p.masked_fill(empty, 0.0)
            r = r.masked_fill(empty, 0.0)
            f = f.masked_fill(torch.isnan(f), 0.0)
            out[b] = torch.stack([p, r, f], dim=1).cpu().numpy()
    return out


def score_texts(references, hypotheses, settings=None, idf_references=None, runtime=None,
                resolved: dict | None = None) -> np.ndarray:
    """(n, 3) float64 array of (P, R, F) per pair, rescaled when the settings say so.

    ``idf_references``: the sentences whose document frequencies give idf
    weights (default: ``references``); ``resolved``: the settings' weights, when already resolved.
    """
    from radrank.runtime import Runtime

    s = METRIC.coerce(settings)
    runtime = runtime or Runtime()
    refs = [prepare(t) for t in references]
    hyps = [prepare(t) for t in hypotheses]
    if len(refs) != len(hyps):
        raise ValueError(f"{len(refs)} references but {len(hyps)} hypotheses")
    resolved = resolved or _resolve(s, runtime)  # missing weights fail here, before torch is imported
    if s.rescale_with_baseline:
        base = baseline(s, resolved).astype("float64")  # and a missing baseline before the model is loaded
    encoder = _encoder(s, resolved["model"].directory, runtime)
    idf_refs = refs if idf_references is None else [prepare(t) for t in idf_references]
    texts, codes = distinct(refs + hyps + (idf_refs if idf_references is not None else []))
    ref_codes, hyp_codes = codes[:len(refs)], codes[len(refs):len(refs) + len(hyps)]
    idf_codes = ref_codes if idf_references is None else codes[len(refs) + len(hyps):]
    ids = encoder.tokenize(texts)
    lengths = np.fromiter((len(x) for x in ids), dtype="int64", count=len(ids))
    weights = _token_weights(encoder, ids, idf_codes, s.idf)

    raw = np.zeros((len(refs), 3), dtype="float32")
    budget = CHUNK_TOKENS["cpu" if encoder.device == "cpu" else "cuda"]
    progress = _hf.Progress("bertscore", len(refs), unit="pairs")
    for lo, hi in _chunks(ref_codes, hyp_codes, lengths, budget):
        local, inverse = np.unique(np.concatenate([ref_codes[lo:hi], hyp_codes[lo:hi]]), return_inverse=True)
        sub = _SubProgress(progress, hi - lo, len(local))
        flat, flat_w, offsets, lens = _embed(encoder, [ids[t] for t in local], weights, s.batch_size, sub)
        r_loc, h_loc = inverse[:hi - lo], inverse[hi - lo:]
        raw[lo:hi] = _greedy(flat, flat_w, offsets[h_loc], lens[h_loc], offsets[r_loc], lens[r_loc],
                             encoder.device)
        sub.finish()
        del flat, flat_w
    progress.finish()
    out = raw.astype("float64")
    if s.rescale_with_baseline:
        out = (out - base) / (1 - base)
    return out


class _SubProgress:
    """Counts encoded texts of one chunk as the matching share of its pairs."""

    def __init__(self, parent, pairs: int, texts: int):
        self.parent, self.pairs, self.texts, self.credited, self.seen = parent, pairs, max(texts, 1), 0, 0

    def update(self, n: int):
        self.seen += n
        due = self.pairs * self.seen // self.texts
        self.parent.update(due - self.credited)
        self.credited = due

    def finish(self):
        self.parent.update(self.pairs - self.credited)
        self.credited = self.pairs


class BERTScore(Metric):
    name = "bertscore"
    description = ("BERTScore F1 per report (bert-score semantics: distilroberta-base layer 5, baseline-rescaled, "
                   "no idf), mean over reports")
    family = "rexrank"
    columns = ("bertscore", "bertscore_precision", "bertscore_recall")
    leaves = (mean_leaf("bertscore", "BertScore"),)
    Settings = BERTScoreSettings
    default_resources = Resources(mem_mb=8000, runtime_min=60, threads=4, gpu=1)
    packages = ("torch", "transformers", "tokenizers", "huggingface-hub", "safetensors")
    board = (BoardColumn("BertScore", "bertscore", 2),)

    def needs_corpus(self, s):
        return s.idf  # idf weights come from every reference of the submission, not only the pair's

    def weights(self, s):
        refs = [WeightRef(self.owner(), self.key("model"), s.model, need="model")]
        if s.rescale_with_baseline and s.baseline_path:
            refs.append(WeightRef(self.owner(), self.key("baseline_path"), s.baseline_path, need="file"))
        return tuple(refs)

    def score(self, pairs, s, inputs, runtime):
        """Per-sample BERTScore: bertscore (F1), bertscore_precision, bertscore_recall.

        With ``idf``, the document frequencies come from the references of
        ``inputs["corpus_pairs"]`` when given (the whole, unsharded pairs table),
        else from ``pairs``. ``attrs["models"]`` carries :func:`provenance` and the device.
        """
        import pandas as pd

        corpus = inputs.get("corpus_pairs")
        idf_refs = corpus["reference"].tolist() if corpus is not None and s.idf else None
        resolved = _resolve(s, runtime)
        prf = score_texts(pairs["reference"].tolist(), pairs["hypothesis"].tolist(), s, idf_refs, runtime, resolved)
        out = pd.DataFrame({
            "sample_id": pairs["sample_id"].to_numpy(),
            "bertscore": prf[:, 2],
            "bertscore_precision": prf[:, 0],
            "bertscore_recall": prf[:, 1],
        })
        out.attrs["models"] = {**provenance(s, resolved), "device": _hf.device_of(s.device),
                               "idf_sentences": None if not s.idf else
                               ("corpus_pairs" if idf_refs is not None else "pairs")}
        return out


METRIC = BERTScore()

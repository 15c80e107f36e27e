"""Shared machinery of the transformer-encoder metrics (bertscore, semb, chexbert).

* Weights are resolved file by file through :func:`radrank.models.resolve`
  (``config.json``, then the weight file, then whichever tokenizer files the
  repository has), so a Hugging Face id downloads only what an encoder needs
  and a missing model fails at once with :class:`~radrank.errors.MissingWeightsError`
  naming the config key. A local directory is used as is.
* Models are loaded once per process (:func:`cached`), never with
  ``trust_remote_code``, always from the resolved local files.
* Texts are encoded in length-sorted batches (:func:`length_batches`) bounded
  by a sentence count and a token budget, so padding is small and long texts do
  not blow up memory; :class:`Progress` logs throughput.

torch and transformers are imported inside the functions: importing a metric
module, and failing on missing weights, costs no torch import.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from radrank.devices import device_of, dtype_of  # noqa: F401  (used by the metrics too)
from radrank.errors import MissingWeightsError
from radrank.models import model_provenance, resolve

log = logging.getLogger("radrank")

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
WEIGHT_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
                   "merges.txt", "vocab.txt", "added_tokens.json")


# --- resolution -----------------------------------------------------------------------------------


@dataclass
class Resolved:
    """A model id and the local files it resolved to."""

    model: str
    directory: Path
    weights: list = field(default_factory=list)  # weight files (empty: none needed)
    files: list = field(default_factory=list)  # other files used (config, tokenizer)

    def provenance(self) -> dict:
        """radrank.models.model_provenance of the weights (or of the directory), plus the
        sha256 of the config and tokenizer files."""
        from radrank.provenance import file_sha256

        target = self.weights[0] if len(self.weights) == 1 else self.directory
        prov = _model_provenance(self.model, target)
        if len(self.weights) > 1:  # sharded: hash exactly the shards
            import hashlib

            h = hashlib.sha256()
            for f in sorted(self.weights, key=lambda p: p.name):
                h.update(f.name.encode() + b"\0" + file_sha256(f).encode())
            prov["weights_sha256"] = h.hexdigest()
        prov["files_sha256"] = {f.name: file_sha256(f) for f in sorted(self.files, key=lambda p: p.name)}
        return prov


_PROVENANCE: dict = {}


def _model_provenance(model: str, target) -> dict:
    """radrank.models.model_provenance, hashed once per process per file (size and mtime unchanged)."""
    st = os.stat(target)
    key = (model, str(target), st.st_size, st.st_mtime_ns)
    if key not in _PROVENANCE:
        _PROVENANCE[key] = model_provenance(model, target)
    return dict(_PROVENANCE[key])


def _is_local(model: str) -> bool:
    return Path(os.path.expanduser(model)).exists() or model.startswith(("/", "./", "../", "~"))


def resolve_encoder(model: str, *, metric: str, setting: str, weights: bool = True,
                    tokenizer: bool = True) -> Resolved:
    """Resolve a transformers model (config, weights, tokenizer files) to local files.

    A local directory is returned as is. A Hugging Face id resolves
    ``config.json`` first (a model absent from the cache fails here, at once,
    when the hub is off), then the weights, then the tokenizer files that exist.
    """
    if _is_local(model):
        directory = resolve(model, metric=metric, setting=setting)
        if not directory.is_dir():
            raise MissingWeightsError(
                f"metric {metric!r}: {model!r} (config metric_settings.{metric}.{setting}) is a file; "
                f"expected a directory with config.json and the weights")
        found = [directory / n for n in ("config.json", *TOKENIZER_FILES) if (directory / n).is_file()]
        if not (directory / "config.json").is_file():
            raise MissingWeightsError(
                f"metric {metric!r}: {directory} (config metric_settings.{metric}.{setting}) has no config.json")
        w = [directory / n for n in WEIGHT_FILES if (directory / n).is_file()][:1]
        if weights and not w:
            w = sorted(p for p in directory.iterdir() if p.name.endswith((".safetensors", ".bin")))
            if not w:
                raise MissingWeightsError(
                    f"metric {metric!r}: {directory} (config metric_settings.{metric}.{setting}) has no weight "
                    f"file ({' or '.join(WEIGHT_FILES)})")
        return Resolved(model, directory, w if weights else [], found)

    config = resolve(model, metric=metric, setting=setting, filename="config.json")
    directory = config.parent
    files = [config]
    found_weights: list = []
    if weights:
        last = None
        for name in WEIGHT_FILES:
            try:
                found_weights = [resolve(model, metric=metric, setting=setting, filename=name)]
                break
            except MissingWeightsError as e:
                last = e
        if not found_weights:
            import json

            for name in WEIGHT_INDEXES:
                try:
                    index = resolve(model, metric=metric, setting=setting, filename=name)
                except MissingWeightsError:
                    continue
                shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
                found_weights = [resolve(model, metric=metric, setting=setting, filename=s) for s in shards]
                files.append(index)
                break
        if not found_weights:
            raise last
    if tokenizer:
        for name in TOKENIZER_FILES:
            try:
                files.append(resolve(model, metric=metric, setting=setting, filename=name))
            except MissingWeightsError:
                pass
    return Resolved(model, directory, found_weights, files)


def resolve_file(model: str, filename: str, *, metric: str, setting: str) -> Resolved:
    """Resolve one weight file: a local file, ``filename`` in a local directory, or in a hub repo."""
    path = resolve(model, metric=metric, setting=setting, filename=filename)
    return Resolved(model, path.parent, [path], [])


# --- device, dtype, cache -------------------------------------------------------------------------


_CACHE: dict = {}


def cached(key, factory):
    """``factory()`` once per process per ``key`` (models are loaded once per job)."""
    if key not in _CACHE:
        _CACHE[key] = factory()
    return _CACHE[key]


def clear_cache():
    _CACHE.clear()


def load_tokenizer(directory, **kwargs):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(directory), use_fast=True, trust_remote_code=False,
                                        local_files_only=True, **kwargs)
    if not getattr(tok, "is_fast", False):
        raise RuntimeError(f"{directory}: no fast tokenizer could be built (need tokenizer.json or the "
                           f"vocabulary files of a tokenizer that transformers can convert)")
    return tok


def load_encoder(directory, *, device, dtype):
    """AutoModel from a local directory, in eval mode, on ``device`` in ``dtype``."""
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(directory), trust_remote_code=False, local_files_only=True)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model.to(device=device, dtype=dtype)


def max_input_length(tokenizer, config) -> int:
    """Longest input (special tokens included): the tokenizer's model_max_length, capped by
    what the position embeddings hold (RoBERTa-style models offset positions by pad_token_id + 1)."""
    limit = int(getattr(tokenizer, "model_max_length", 0) or 0)
    positions = getattr(config, "max_position_embeddings", None)
    if positions:
        if getattr(config, "model_type", "") in ("roberta", "xlm-roberta", "camembert", "longformer"):
            positions -= (config.pad_token_id or 0) + 1
        limit = positions if limit <= 0 or limit > positions else limit
    return limit if limit > 0 else 512


# --- batching ---------------------------------------------------------------------------------------


def length_batches(lengths, batch_size: int, max_tokens: int) -> list:
    """Indices into ``lengths`` in batches, longest first: at most ``batch_size`` items and
    about ``max_tokens`` padded tokens per batch (always at least one item)."""
    lengths = np.asarray(lengths, dtype="int64")
    order = np.argsort(-lengths, kind="stable")
    batches, i, n = [], 0, len(order)
    while i < n:
        longest = max(int(lengths[order[i]]), 1)
        size = max(1, min(int(batch_size), int(max_tokens) // longest))
        batches.append(order[i:i + size])
        i += size
    return batches


def pad_batch(ids: list, pad_id: int):
    """(input_ids, attention_mask) int64 numpy arrays, right-padded with ``pad_id``."""
    lengths = np.fromiter((len(x) for x in ids), dtype="int64", count=len(ids))
    width = int(lengths.max()) if len(ids) else 0
    out = np.full((len(ids), width), pad_id, dtype="int64")
    mask = np.arange(width)[None, :] < lengths[:, None]
    out[mask] = np.concatenate([np.asarray(x, dtype="int64") for x in ids]) if len(ids) else []
    return out, mask.astype("int64")


class Progress:
    """Logs ``done/total`` and the rate every ``every`` seconds, and once at the end."""

    def __init__(self, what: str, total: int, unit: str = "texts", every: float = 15.0):
        self.what, self.total, self.unit, self.every = what, total, unit, every
        self.start = self.last = time.perf_counter()
        self.done = 0

    def update(self, n: int):
        self.done += n
        now = time.perf_counter()
        if now - self.last >= self.every:
            self.last = now
            log.info("%s: %d/%d %s (%.0f/s)", self.what, self.done, self.total, self.unit,
                     self.done / max(now - self.start, 1e-9))

    def finish(self):
        elapsed = time.perf_counter() - self.start
        log.info("%s: %d %s in %.1f s (%.0f/s)", self.what, self.done, self.unit, elapsed,
                 self.done / max(elapsed, 1e-9))


def distinct(texts) -> tuple[list, np.ndarray]:
    """(each distinct text once, index of every text in that list)."""
    index: dict = {}
    codes = np.fromiter((index.setdefault(t, len(index)) for t in texts), dtype="int64", count=len(texts))
    return list(index), codes

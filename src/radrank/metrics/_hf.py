"""Shared machinery of the transformer-encoder metrics (bertscore, semb, chexbert, radeval's extras).

Weights are resolved by :mod:`radrank.runtime` (each metric's ``weights(settings)``), models loaded
by :mod:`radrank.runtime.loaders` once per process through the runtime's cache. What is here:
the longest input a model takes, length-sorted batches bounded by a sentence count and a token
budget (so padding is small and long texts do not blow up memory), padding, progress logging
and distinct texts.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from radrank.devices import device_of, dtype_of  # noqa: F401  (the metrics use them from here)

log = logging.getLogger("radrank")


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

"""A response cache for the LLM-judge metrics: one small JSON file per (model, revision, prompt, parameters).

A judge's answer to a prompt depends only on the backend that generated it
(``hf``, ``vllm``, ``openai``: their kernels differ, so their answers may), the
model (id and revision — the hub commit, or the sha256 of the weights of a
local copy; the dtype; the API base of an endpoint), the exact prompt the model sees, and the generation
parameters (greedy or the retry's sampling, the token budget). The sha256 of
those, as canonical JSON, names the entry, so a rerun, a new leaderboard entry
that repeats a (reference, hypothesis) pair, or another dataset never pays
twice for the same answer.

Layout: ``<root>/<key[:2]>/<key>.json``. Each entry is written to a temporary
file in its folder and renamed into place (atomic on POSIX, also on NFS), so
concurrent jobs — several SLURM jobs sharing the cache on a network file
system — never see a half-written entry; when two jobs compute the same entry
the last rename wins and both wrote the same answer. No locks, no database.

Entries hold the answer text and two counters, never the prompt (which
contains the reports) nor an API key. Failed requests (an endpoint that did not
answer) are never cached.

The root is the metric's ``cache_dir`` setting; when that is empty, the
``RADRANK_JUDGE_CACHE`` environment variable; else ``~/.cache/radrank/judge``
(``$XDG_CACHE_HOME/radrank/judge``). ``cache_dir: off`` disables the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from radrank import io as radrank_io

FORMAT = 1  # bump if the meaning of an entry changes
ENV_VAR = "RADRANK_JUDGE_CACHE"
_OFF = ("off", "none", "false", "no", "0", "disabled")


def default_root(name: str = "judge") -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "radrank" / name


def root_of(setting, env_var: str = ENV_VAR, default: str = "judge") -> Path | None:
    """The cache folder for a metric's ``cache_dir`` setting (None: caching off); ``env_var`` and
    ``default`` (the folder under ``~/.cache/radrank``) let radrank.score_cache resolve its own the same way."""
    if setting is False:
        return None
    value = "" if setting is None or setting is True else str(setting).strip()
    if value.lower() in _OFF:
        return None
    if not value:
        value = os.environ.get(env_var, "").strip()
        if value.lower() in _OFF:
            return None
    return Path(os.path.expanduser(value)) if value else default_root(default)


def make_key(identity: dict, request, params: dict, *, backend: str = "hf") -> str:
    """sha256 (hex) of the canonical JSON of (format, backend, model identity, request, parameters).

    ``backend`` is what generated the answer (``hf``: transformers on this machine, ``vllm``,
    ``openai``): the same model and prompt through two backends are two entries, never mixed."""
    blob = json.dumps({"format": FORMAT, "backend": backend, "identity": identity, "request": request,
                       "params": params},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """Per-key JSON files under ``root``; ``ResponseCache(None)`` caches nothing."""

    def __init__(self, root=None):
        self.root = Path(root) if root is not None else None
        self.hits = 0
        self.writes = 0

    @property
    def enabled(self) -> bool:
        return self.root is not None

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        if self.root is None:
            return None
        try:
            with open(self._path(key), encoding="utf-8") as f:
                entry = json.load(f)
        except (OSError, ValueError):
            return None
        if not isinstance(entry, dict) or entry.get("format") != FORMAT or "text" not in entry:
            return None
        self.hits += 1
        return entry

    def put(self, key: str, entry: dict) -> None:
        if self.root is None:
            return
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".part", dir=path.parent)
            try:
                radrank_io.make_ordinary(fd)  # readable by the group like any cache file, not 0600
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump({"format": FORMAT, **entry}, f, ensure_ascii=False, sort_keys=True)
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as e:  # a full or read-only cache never fails the job
            import logging

            logging.getLogger("radrank").warning("judge cache: could not write %s (%s)", path, e)
            return
        self.writes += 1

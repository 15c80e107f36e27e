"""Resolve model weights: a local path or a Hugging Face id, never a silent download loop.

* A local directory or file is used as is.
* A Hugging Face id is looked up in the local Hugging Face cache first. When it
  is not there and the hub is off (``HF_HUB_OFFLINE=1``, as in tests and on
  air-gapped clusters), the job fails at once with a message naming the model,
  the metric and the config key that points at a local copy. When the hub is on,
  one download is attempted with short timeouts; any failure gives the same
  message.
* ``trust_remote_code`` is only ever true for ids on the config allow-list.

Provenance records the model id, the resolved revision (the snapshot's commit
when it came from the hub cache) and a sha256 over the weight files.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from radrank.errors import MissingWeightsError

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pth", ".pt", ".th", ".ckpt", ".gguf", ".npz", ".h5")


def hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _missing(model: str, metric: str, setting: str, why: str) -> MissingWeightsError:
    return MissingWeightsError(
        f"metric {metric!r}: model {model!r} is not available locally ({why}). Point config "
        f"metric_settings.{metric}.{setting} at a local copy (a directory with the weights), or download "
        f"it where the hub is reachable (`huggingface-cli download {model}`) into the Hugging Face cache "
        f"(HF_HOME) that this job uses."
    )


def resolve(model: str, *, metric: str, setting: str = "model", revision: str | None = None,
            filename: str | None = None) -> Path:
    """Return a local path for ``model`` (a directory, or ``filename`` inside the repo)."""
    local = Path(os.path.expanduser(model))
    if local.exists():
        target = local / filename if filename and local.is_dir() else local
        if not target.exists():
            raise _missing(model, metric, setting, f"{target} does not exist")
        return target
    if model.startswith(("/", "./", "../", "~")):
        raise _missing(model, metric, setting, "no such local path")
    try:
        from huggingface_hub import hf_hub_download, snapshot_download
    except ImportError:
        raise _missing(model, metric, setting, "huggingface_hub is not installed in this environment") from None
    fetch = (lambda **kw: hf_hub_download(model, filename, revision=revision, **kw)) if filename else \
        (lambda **kw: snapshot_download(model, revision=revision, **kw))
    try:
        return Path(fetch(local_files_only=True))
    except Exception:
        if hub_offline():
            raise _missing(model, metric, setting, "not in the Hugging Face cache and HF_HUB_OFFLINE=1") from None
    os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", "10")
    os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", "30")
    try:
        return Path(fetch())
    except Exception as e:
        raise _missing(model, metric, setting, f"download failed: {type(e).__name__}: {e}") from None


def weights_digest(path) -> str:
    """sha256 over the weight files under ``path`` (names and contents, in name order)."""
    path = Path(path)
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()
                                                  and p.suffix in WEIGHT_SUFFIXES)
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0")
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def revision_of(path) -> str | None:
    """The hub commit of a path inside a Hugging Face cache snapshot, else None."""
    parts = Path(path).resolve().parts
    if "snapshots" in parts:
        i = parts.index("snapshots")
        if i + 1 < len(parts):
            return parts[i + 1]
    return None


def model_provenance(model: str, path) -> dict:
    return {"id": model, "revision": revision_of(path), "weights_sha256": weights_digest(path),
            "local_path": str(path) if Path(model).exists() else None}


def trust_remote_code(model: str, allow_list) -> bool:
    """True only when ``model`` is on the configured allow-list."""
    return model in set(allow_list or ())

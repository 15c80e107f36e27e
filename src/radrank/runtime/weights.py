"""Model weights: what a metric or backbone will load (:class:`WeightRef`), whether it is here, where it is.

One resolver for every model radrank loads — metric encoders, LLM judges, reward models,
generation backbones:

* :func:`available` — the check the workflow runs when it loads, before any environment is built
  or job started: local paths and the Hugging Face cache's layout only (no torch, no
  huggingface_hub, no network; microseconds per model). ``None`` when the model is there, else why not.
* :func:`resolve` — the same lookup in the job, returning the local files (:class:`Resolved`). A
  model absent from the cache is downloaded once, with short timeouts, only when the hub is on
  (``HF_HUB_OFFLINE`` unset); otherwise, and on any failure, :class:`~radrank.errors.MissingWeightsError`
  names the model, the config key that points at a local copy, and how to download it.
* :func:`provenance` — id, hub revision, sha256 of the weight files and of the config and
  tokenizer files, hashed once per process per file.

Both functions read the same :class:`WeightRef`, which the metric's ``weights(settings)`` returns:
the load-time check and the job can never disagree about what a metric needs.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from radrank import provenance as _provenance_io
from radrank.errors import MissingWeightsError

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pth", ".pt", ".th", ".ckpt", ".gguf", ".npz", ".h5")
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
WEIGHT_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
# Files hashed into provenance beside the weights, when present.
MODEL_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer.model", "tokenizer_config.json",
               "special_tokens_map.json", "vocab.json", "merges.txt", "vocab.txt", "added_tokens.json", "spm.model",
               "chat_template.jinja", "preprocessor_config.json", "processor_config.json")
# What a hub download fetches for each need (the rest of a repository — other frameworks' weights,
# ONNX exports — is never downloaded).
_DOWNLOAD_PATTERNS = {
    "tokenizer": ["*.json", "*.txt", "*.model"],
    "model": ["*.json", "*.txt", "*.model", "*.jinja", "*.safetensors", "*.bin", "*.py"],
    "config": None,
    "dir": None,
}
NEEDS = ("model", "config", "tokenizer", "file", "dir", "resource")
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


@dataclass(frozen=True)
class WeightRef:
    """One thing a metric or backbone loads, named the way the config names it.

    ``need`` says what must be there:

    * ``model`` — a directory with ``config.json`` and its weight files;
    * ``config`` — a directory with ``config.json`` (the loader finds the weights itself);
    * ``tokenizer`` — a directory with ``config.json`` and tokenizer files, no weights needed;
    * ``file`` — one file: the local path itself, or ``filename`` in a local directory or hub repo;
    * ``dir`` — a directory (local, or a hub snapshot) holding ``filename``;
    * ``resource`` — a local path only ``check`` can judge (e.g. stanza's models).

    ``ref`` None: named by another file (e.g. inside a model archive); the job resolves it and
    the load-time check leaves it out. ``ref`` "": a setting left empty, refused by both.
    ``check(path) -> why or None`` replaces the default test of a local path; ``fallback() -> path
    or None`` is tried when a hub id is not in the cache.
    """

    owner: str  # who needs it, for messages: "metric 'bertscore'", "backbone 'medgemma'"
    key: str  # the config key that names it: "metric_settings.bertscore.model"
    ref: str | None  # a Hugging Face id or a local path
    need: str = "model"
    filename: str | None = None
    revision: str | None = None
    check: Callable | None = field(default=None, compare=False)
    fallback: Callable | None = field(default=None, compare=False)
    how: str = ""  # how to supply it, when it is not a Hugging Face model

    def __post_init__(self):
        if self.need not in NEEDS:
            raise ValueError(f"need must be one of {NEEDS}, not {self.need!r}")
        if self.need == "dir" and not self.filename:
            raise ValueError("a 'dir' reference names the file the directory must hold")

    @property
    def setting(self) -> str:
        return self.key.rsplit(".", 1)[-1]

    def missing(self, why: str) -> MissingWeightsError:
        """The one message for a model that is not available, naming it, its config key and the remedy."""
        if self.how:
            remedy = self.how
        elif self.ref and looks_local(self.ref):
            remedy = f"Point config {self.key} at a local copy that holds what is missing."
        else:
            remedy = (f"Point config {self.key} at a local copy (a directory with the weights), or download it "
                      f"where the hub is reachable (`hf download {self.ref}`; older huggingface_hub: "
                      f"`huggingface-cli download {self.ref}`) into the Hugging Face cache (HF_HOME) the jobs use.")
        return MissingWeightsError(f"{self.owner}: model {self.ref!r} is not available locally ({why}). {remedy}")


@dataclass
class Resolved:
    """A reference and the local files it resolved to."""

    ref: WeightRef
    path: Path  # the directory (or, for need "file", the file)
    weights: list = field(default_factory=list)
    files: list = field(default_factory=list)  # config and tokenizer files (hashed into provenance)

    @property
    def directory(self) -> Path:
        return self.path if self.path.is_dir() else self.path.parent

    def provenance(self) -> dict:
        return provenance(self)


# --- where things are ---------------------------------------------------------------------------------


def hub_offline() -> bool:
    return any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on") for v in OFFLINE_VARIABLES)


def hf_cache_dir() -> Path:
    """The Hugging Face hub cache this process would use (huggingface_hub's order of variables)."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return Path(os.path.expanduser(os.environ[var]))
    if os.environ.get("HF_HOME"):
        return Path(os.path.expanduser(os.environ["HF_HOME"])) / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "huggingface" / "hub"


def looks_local(ref: str) -> bool:
    """A path rather than a hub id: it exists, starts like a path, or has more than one slash."""
    return (Path(os.path.expanduser(ref)).exists() or ref.startswith(("/", "./", "../", "~"))
            or ref.count("/") > 1)


def cached_snapshot(repo_id: str, revision: str | None = None) -> Path | None:
    """The snapshot folder of ``repo_id`` in the hub cache (huggingface_hub's layout, read directly)."""
    repo = hf_cache_dir() / ("models--" + repo_id.replace("/", "--"))
    snapshots = repo / "snapshots"
    if not snapshots.is_dir():
        return None
    commits = []
    ref = repo / "refs" / (revision or "main")
    if ref.is_file():
        commits.append(ref.read_text().strip())
    elif revision:
        commits.append(revision)  # a commit hash
    if not revision:
        commits += sorted(p.name for p in snapshots.iterdir())  # any cached snapshot, as local_files_only does
    for commit in commits:
        folder = snapshots / commit
        if folder.is_dir() and any(folder.iterdir()):
            return folder
    return None


def _weight_files(directory: Path) -> list[Path] | None:
    """The weight files of a transformers model directory: the canonical file, the shards an index
    names, else every *.safetensors / *.bin (not training_args.bin); None when there are none."""
    for name in WEIGHT_FILES:
        if (directory / name).is_file():
            return [directory / name]
    for name in WEIGHT_INDEXES:
        index = directory / name
        if index.is_file():
            try:
                shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
            except (ValueError, KeyError, TypeError):
                return None
            files = [directory / s for s in shards]
            return files if all(f.is_file() for f in files) else None
    found = sorted(p for p in directory.iterdir() if p.is_file() and p.name.endswith((".safetensors", ".bin"))
                   and "training_args" not in p.name)
    return found or None


def _judge_directory(ref: WeightRef, directory: Path) -> tuple[str | None, list, list]:
    """(why not usable or None, weight files, other files) of a local directory for ``ref.need``."""
    if not directory.is_dir():
        return f"{directory} is a file; expected a directory", [], []
    if ref.need in ("model", "config", "tokenizer") and not (directory / "config.json").is_file():
        return f"{directory} has no config.json", [], []
    if ref.need == "dir" and not (directory / ref.filename).is_file():
        return f"{directory} has no {ref.filename}", [], []
    files = [directory / n for n in MODEL_FILES if (directory / n).is_file()]
    if ref.need == "model":
        weights = _weight_files(directory)
        if weights is None:
            return f"{directory} has no weight file ({' or '.join(WEIGHT_FILES)}, or shards with an index)", [], []
        return None, weights, files
    if ref.need in ("config", "dir"):
        weights = sorted(p for p in directory.rglob("*") if p.is_file() and p.suffix in WEIGHT_SUFFIXES)
        return None, weights, files
    return None, [], files


def _locate(ref: WeightRef) -> tuple[str | None, Path | None]:
    """(why not, path) without network or heavy imports: the shared core of :func:`available` and :func:`resolve`."""
    local = Path(os.path.expanduser(ref.ref))
    if ref.need == "resource" or local.exists():
        if ref.check is not None:
            return ref.check(local), local
        if not local.exists():
            return f"{local} does not exist", None
        if ref.need == "file":
            target = local / ref.filename if local.is_dir() and ref.filename else local
            return (None, target) if target.is_file() else (f"{target} does not exist", None)
        why, _, _ = _judge_directory(ref, local)
        return why, local
    if looks_local(ref.ref):
        return "no such local path", None
    snapshot = cached_snapshot(ref.ref, ref.revision)
    if snapshot is not None:
        if ref.need == "file":
            target = snapshot / ref.filename
            if target.is_file():
                return None, target
            return f"{ref.filename} of it is not in the Hugging Face cache {hf_cache_dir()}", None
        why, _, _ = _judge_directory(ref, snapshot)
        if why is None:
            return None, snapshot
        return f"the cached snapshot is incomplete: {why}", None
    if ref.fallback is not None:
        path = ref.fallback()
        if path is not None:
            return None, Path(path)
    what = f"{ref.filename} of it is" if ref.need == "file" and ref.filename else "it is"
    revision = f" at revision {ref.revision}" if ref.revision else ""
    return f"{what} not in the Hugging Face cache {hf_cache_dir()}{revision}", None


def available(ref: WeightRef) -> str | None:
    """None when ``ref`` can be loaded from this machine's files, else why not (no network, no imports)."""
    if ref.ref is None:
        return None
    if ref.ref == "":  # a setting left empty: the job could not load it either
        return "no model is configured"
    why, _ = _locate(ref)
    return why


def resolve(ref: WeightRef) -> Resolved:
    """The local files of ``ref``: found as :func:`available` finds them, downloaded once when the hub is
    on and they are not here; :class:`MissingWeightsError` (naming the config key) otherwise."""
    if ref.ref in (None, ""):
        raise ref.missing("no model is configured")
    why, path = _locate(ref)
    if why is not None and path is None and not looks_local(ref.ref) and ref.need != "resource":
        if hub_offline():
            raise ref.missing(why + " and HF_HUB_OFFLINE=1")
        path = _download(ref)
    elif why is not None:
        raise ref.missing(why)
    if ref.need in ("file", "resource"):
        return Resolved(ref, path, [path] if path.is_file() else [], [])
    problem, weights, files = _judge_directory(ref, path)
    if problem:
        raise ref.missing(problem)
    return Resolved(ref, path, weights, files)


def _download(ref: WeightRef) -> Path:
    os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", "10")
    os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", "30")
    try:
        from huggingface_hub import hf_hub_download, snapshot_download
    except ImportError:
        raise ref.missing("huggingface_hub is not installed in this environment") from None
    try:
        if ref.need == "file":
            return Path(hf_hub_download(ref.ref, ref.filename, revision=ref.revision))
        return Path(snapshot_download(ref.ref, revision=ref.revision, allow_patterns=_DOWNLOAD_PATTERNS[ref.need]))
    except Exception as e:  # noqa: BLE001 - every failure becomes the one message
        raise ref.missing(f"download failed: {type(e).__name__}: {e}") from None


# --- provenance ---------------------------------------------------------------------------------------

_HASHES: dict = {}
_HASH_LOCK = threading.Lock()


def file_sha256(path) -> str:
    """sha256 of a file, computed once per process while its size and mtime are unchanged."""
    st = os.stat(path)
    key = (str(Path(path).resolve()), st.st_size, st.st_mtime_ns)
    with _HASH_LOCK:
        if key in _HASHES:
            return _HASHES[key]
    digest = _provenance_io.file_sha256(path)
    with _HASH_LOCK:
        _HASHES[key] = digest
    return digest


def weights_digest(files) -> str:
    """sha256 over weight files (name and content, in name order); a directory stands for its weight files."""
    files = [Path(f) for f in ([files] if isinstance(files, (str, Path)) else files)]
    if len(files) == 1 and files[0].is_dir():
        files = sorted(p for p in files[0].rglob("*") if p.is_file() and p.suffix in WEIGHT_SUFFIXES)
    h = hashlib.sha256()
    for f in sorted(files, key=lambda p: p.name):
        h.update(f.name.encode() + b"\0")
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


_DIGESTS: dict = {}


def forget_hashes() -> None:
    """Forget every file hash of this process (a benchmark measuring what a fresh job pays)."""
    with _HASH_LOCK:
        _HASHES.clear()
        _DIGESTS.clear()


def revision_of(path) -> str | None:
    """The hub commit of a path inside a Hugging Face cache snapshot, else None."""
    parts = Path(os.path.abspath(path)).parts  # a snapshot's files are links into blobs/: do not follow them
    if "snapshots" in parts:
        i = parts.index("snapshots")
        if i + 1 < len(parts):
            return parts[i + 1]
    return None


def fingerprint(resolved: Resolved) -> str:
    """What identifies the bytes a reference resolved to — content, never a path or a date: the hub commit of a
    cached snapshot, else the sha256 of its weights and model files (hashed once per process)."""
    import json

    revision = revision_of(resolved.path)
    if revision:
        return f"{resolved.ref.ref}@{revision}"
    prov = provenance(resolved)
    blob = json.dumps([prov["weights_sha256"], prov["files_sha256"]], sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()


def provenance(resolved: Resolved) -> dict:
    """Id, hub revision, sha256 of the weights (hashed once per process) and of the other files."""
    weights = resolved.weights
    stats = tuple((str(w), os.stat(w).st_size, os.stat(w).st_mtime_ns) for w in weights)
    with _HASH_LOCK:
        digest = _DIGESTS.get(stats)
    if digest is None:
        digest = weights_digest(weights) if weights else hashlib.sha256().hexdigest()
        with _HASH_LOCK:
            _DIGESTS[stats] = digest
    ref = resolved.ref
    local = Path(os.path.expanduser(ref.ref)).exists()
    return {"id": ref.ref, "revision": revision_of(resolved.path) or ref.revision, "weights_sha256": digest,
            "local_path": str(resolved.path) if local else None,
            "files_sha256": {f.name: file_sha256(f) for f in sorted(resolved.files, key=lambda p: p.name)}}

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
from dataclasses import dataclass
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


# --- the workflow's check of every configured model, when the Snakefile loads ---------------------

WEIGHTS_CHECK_ENV = "RADRANK_WEIGHTS_CHECK"  # "off": skip (a dry run or DAG benchmark without weights)


@dataclass(frozen=True)
class WeightSetting:
    """A metric setting that names model weights: a Hugging Face id or a local path."""

    setting: str
    filename: str | None = "config.json"  # a file the repo / directory must hold (None: anything)
    filename_setting: str | None = None  # the setting naming that file instead (e.g. checkpoint_file)
    when: tuple[str, str] | None = None  # (setting, value): only then are weights used (backend)


# What each metric's job resolves (radrank.metrics.<module>): kept beside the resolver, checked against
# the registry by tests/test_weights_check.py. API-only metrics (mammo_green, radfact_ct) and
# `temporal` (stanza resources) load no Hugging Face weights.
METRIC_WEIGHTS: dict[str, tuple[WeightSetting, ...]] = {
    "bertscore": (WeightSetting("model"),),
    "semb": (WeightSetting("checkpoint", filename_setting="checkpoint_file"), WeightSetting("tokenizer")),
    "chexbert": (WeightSetting("checkpoint", filename_setting="checkpoint_file"), WeightSetting("tokenizer")),
    "radgraph": (WeightSetting("model", filename=None), WeightSetting("encoder")),
    "ratescore": (WeightSetting("bert_model"), WeightSetting("eval_model")),
    "green": (WeightSetting("model"),),
    "crimson": (WeightSetting("model", when=("backend", "hf")),),
    "mrscore": (WeightSetting("model"), WeightSetting("adapter", filename=None),
                WeightSetting("head", filename_setting="head_file")),
    "mrscore_rubric": (WeightSetting("model", when=("backend", "local")),),
    "radeval_bertscore": (WeightSetting("model"),),
    "f1radbert_ct": (WeightSetting("model"),),
    "srrbert": (WeightSetting("model"), WeightSetting("tokenizer")),
}


def hf_cache_dir() -> Path:
    """The Hugging Face hub cache this process would use (huggingface_hub's order of variables)."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return Path(os.path.expanduser(os.environ[var]))
    if os.environ.get("HF_HOME"):
        return Path(os.path.expanduser(os.environ["HF_HOME"])) / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "huggingface" / "hub"


def cached_file(repo_id: str, filename: str | None, revision: str | None = None) -> Path | None:
    """The snapshot path of ``filename`` (or the snapshot folder) of ``repo_id`` in the hub cache, if
    present — huggingface_hub's cache layout read directly: no import, no network."""
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
        target = folder / filename if filename else folder
        if (target.is_file() if filename else folder.is_dir() and any(folder.iterdir())):
            return target
    return None


def _radgraph_package_copy(model_type: str) -> bool:
    """The radgraph package's own unpacked model (``user_cache_dir('radgraph')/<version>/<type>``), which
    radrank.metrics.radgraph falls back to for the default repo."""
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return any((p / "config.json").is_file() for p in (Path(xdg) / "radgraph").glob(f"*/{model_type}"))


def _radgraph_local_problem(model: str, model_type: str) -> str | None:
    """The error message when a local radgraph model (archive, unpacked folder, or a folder holding either)
    cannot be used, as the metric itself decides (radrank.metrics.radgraph.locate_model; stdlib only)."""
    from radrank.metrics.radgraph import locate_model

    try:
        locate_model(model, model_type)
    except MissingWeightsError as e:
        return str(e)
    return None


def weight_available(model: str, filename: str | None, revision: str | None = None) -> str | None:
    """None when ``model`` (a local path or a hub id) has ``filename`` locally, else why not."""
    local = Path(os.path.expanduser(model))
    if local.exists():
        if filename and local.is_dir() and not (local / filename).exists():
            return f"{local / filename} does not exist"
        return None
    if model.startswith(("/", "./", "../", "~")) or model.count("/") > 1:
        return "no such local path"
    if cached_file(model, filename, revision) is None:
        what = f"{filename} of it is" if filename else "it is"
        return f"{what} not in the Hugging Face cache {hf_cache_dir()}"
    return None


def missing_weights(metric_settings: dict, generations=()) -> list[str]:
    """One message per configured model that is not available locally.

    ``metric_settings``: metric name -> its settings as configured (the defaults are filled in here);
    ``generations``: (where, backbone name, settings) of each generation entry run by a backbone.
    """
    from radrank import backbones, metrics

    problems = []
    for metric, configured in metric_settings.items():
        settings = {**metrics.get(metric).settings, **(configured or {})}
        for ws in METRIC_WEIGHTS.get(metric, ()):
            model = settings.get(ws.setting)
            if model in (None, "") or (ws.when and settings.get(ws.when[0]) != ws.when[1]):
                continue
            filename = settings.get(ws.filename_setting) if ws.filename_setting else ws.filename
            if metric == "radgraph" and ws.setting == "model":
                filename = f"{settings.get('model_type', 'radgraph')}.tar.gz"
            if metric == "radgraph" and ws.setting == "model" and Path(os.path.expanduser(str(model))).exists():
                # a local archive or folder: the metric's own resolver decides, with its own message
                problem = _radgraph_local_problem(str(model), settings.get("model_type", "radgraph"))
                problems += [problem] if problem else []
                continue
            why = weight_available(str(model), filename, settings.get("revision"))
            if why and metric == "radgraph" and ws.setting == "model" and \
                    _radgraph_package_copy(settings.get("model_type", "radgraph")):
                why = None
            if why:
                problems.append(str(_missing(str(model), metric, ws.setting, why)))
    for where, backbone, configured in generations:
        spec = backbones.get(backbone)
        settings = {**spec.settings, **(configured or {})}
        for setting in spec.weights:
            model = settings.get(setting)
            if not model:
                continue
            why = weight_available(str(model), "config.json", settings.get("revision"))
            if why:
                problems.append(f"{where}: backbone {backbone!r}: model {model!r} is not available locally ({why}). "
                                f"Point its settings.{setting} at a local copy, or download it where the hub is "
                                f"reachable (`huggingface-cli download {model}`) into the Hugging Face cache "
                                f"(HF_HOME) the jobs use.")
    return problems


def check_workflow_weights(plan) -> None:
    """Fail at once, when the workflow loads, if a configured model is not available locally.

    Jobs never download weights: 100 jobs fetching one model at once, or a GPU job finding out after
    a minute of imports that its weights are missing, is what this prevents. Looks only at the local
    paths and the Hugging Face cache (no torch, no network; milliseconds). ``RADRANK_WEIGHTS_CHECK=off``
    skips it (a dry run or a DAG benchmark on a machine without the weights).
    """
    if os.environ.get(WEIGHTS_CHECK_ENV, "").strip().lower() == "off":
        return
    config = plan.config
    settings = {m: config.get("metric_settings", {}).get(m, {}) for m in plan._used_metrics()}
    generations = []
    from radrank import backbones

    for sub in plan.generations():
        gen = sub.generation
        if gen.generator in backbones.names():
            generations.append((f"config 'generation' entry for {gen.model!r} on {gen.dataset!r}",
                                gen.generator, gen.settings))
    problems = missing_weights(settings, generations)
    if problems:
        raise MissingWeightsError(
            f"{len(problems)} model(s) the config needs are not available locally (checked before any job "
            f"starts; {WEIGHTS_CHECK_ENV}=off skips the check, e.g. for a dry run):\n"
            + "\n".join(f"  - {p}" for p in problems))


# --- one allow-list for remote code ---------------------------------------------------------------


def apply_remote_code_allow_list(config: dict, metric_names) -> None:
    """Make the config's top-level ``trust_remote_code`` list the only switch for remote code.

    A per-metric ``metric_settings.<metric>.trust_remote_code`` is refused; every metric whose
    settings take an allow-list (the LLM judges) gets the top-level list, filled into
    ``config["metric_settings"]`` as the schema fills defaults, so the scoring jobs see it in their
    settings (and provenance records it). The backbones take the same list (config ``generation``).
    """
    from radrank import metrics
    from radrank.errors import ConfigError

    allow = list(config.get("trust_remote_code") or [])
    settings = config.setdefault("metric_settings", {})
    for metric, configured in settings.items():
        if isinstance(configured, dict) and "trust_remote_code" in configured:
            raise ConfigError(
                f"config metric_settings.{metric}.trust_remote_code: remote code is allowed in one place only, "
                f"the top-level list `trust_remote_code` (model ids or paths); move "
                f"{configured['trust_remote_code']!r} there")
    for metric in metric_names:
        if "trust_remote_code" in metrics.get(metric).settings:
            settings.setdefault(metric, {})["trust_remote_code"] = allow

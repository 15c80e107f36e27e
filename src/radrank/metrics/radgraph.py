"""RadGraph F1 per report: RadCliQ's ``radgraph_combined`` and the F1RadGraph reward levels.

Annotation comes from the ``radgraph`` package (0.1.18; env ``rexrank``): its
``RadGraph`` annotator turns a report into entities (token span text, label) and
relations between them. Each distinct text (references repeat once per model)
is annotated once. The scores of one (reference, hypothesis) pair are then:

* ``radgraph_entity_f1`` / ``radgraph_relation_f1``: F1 over sets, as
  CXR-Report-Metric computes them for RadCliQ. Entities are the set of
  (tokens, label); relations the set of ((tokens, label), (tokens, label),
  relation type). TP = |ref ∩ hyp|, P = TP/|hyp| (0 when hyp is empty),
  R = TP/|ref| (0 when ref is empty), F1 = 2PR/(P+R) or 0 — so empty vs empty
  is 0, not 1.
* ``radgraph_combined`` = (entity F1 + relation F1) / 2, RadCliQ's feature.
* ``radgraph_simple`` / ``radgraph_partial`` / ``radgraph_complete``: the
  package's own F1RadGraph reward levels (``radgraph.rewards.compute_reward``,
  called as F1RadGraph calls it). RadEval's ``radgraph`` metric reports these
  with ``model_type="radgraph-xl"``; RadCliQ uses the original ``radgraph``
  model. All six columns are computed with whichever ``model_type`` is set.

A text that is empty or only whitespace has no entities (the annotator is not
run on it), so every score of its pair is 0 — what F1RadGraph returns for an
empty report.

Weights. The package downloads ``<model_type>.tar.gz`` from the hub repo
StanfordAIMI/RRG_scorers and unpacks it (config.json, vocabulary/, weights.th);
config.json names a BERT encoder (PubMedBERT for ``radgraph``) whose tokenizer
and config are read from the hub as well (its weights come from weights.th).
Here ``model`` may be that hub id (found in the Hugging Face cache, or in the
radgraph package's own cache from an earlier run), a ``.tar.gz`` file, an
unpacked model directory, or a directory holding ``<model_type>.tar.gz`` or
``<model_type>/``; ``encoder`` (default: the name in config.json) may be a hub
id or a local directory. Both are resolved before anything heavy is loaded and
a missing one raises :class:`~radrank.errors.MissingWeightsError` naming its
config key. The package is then pointed at a staged copy whose config.json
names the resolved encoder, so it never touches the network. An archive is
unpacked for each job into a temporary directory (``TMPDIR``) and removed once
the model is loaded. The model's identity (weights.th sha256, hub revision) and
the encoder's tokenizer files' hashes are returned in ``scores.attrs["models"]``.

tests/envs/rexrank/test_radgraph.py checks the set F1s by hand and, on a tiny
random model of RadGraph's architecture that the package itself loads, that the
reward columns equal ``F1RadGraph(reward_level="all")`` per sample.

``batch_size`` is how many texts go to the annotator per call and ``device``
where it runs (``auto``: the GPU when CUDA is available; ``cpu``, ``cuda``,
``cuda:N``); neither changes the numbers (the package runs one report per forward
pass whatever its batch size). The annotator's cost grows with the square of a
report's length (it scores pairs of candidate spans), so very long texts are slow.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tarfile
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from radrank import models
from radrank.errors import MissingWeightsError
from radrank.metrics.base import MetricSpec, Resources, distinct_texts, mean_leaf
from radrank.provenance import file_sha256

log = logging.getLogger("radrank")

HUB_REPO = "StanfordAIMI/RRG_scorers"
MODEL_TYPES = ("radgraph", "radgraph-xl", "modern-radgraph-xl", "echograph")  # radgraph 0.1.18's MODEL_MAPPING

SPEC = MetricSpec(
    name="radgraph",
    description="RadGraph entity/relation F1 per report (RadCliQ's radgraph_combined) and F1RadGraph rewards",
    env="rexrank",
    columns=("radgraph_combined", "radgraph_entity_f1", "radgraph_relation_f1",
             "radgraph_simple", "radgraph_partial", "radgraph_complete"),
    # The entity and relation F1s are kept per sample (diagnostics); the leaves are the published numbers.
    leaves=(
        mean_leaf("radgraph_combined", "RadGraph"),
        mean_leaf("radgraph_simple", "F1RadGraph simple"),
        mean_leaf("radgraph_partial", "F1RadGraph partial"),
        mean_leaf("radgraph_complete", "F1RadGraph complete"),
    ),
    resources=Resources(mem_mb=8000, runtime_min=120, threads=2, gpu=1),
    model=HUB_REPO,
    settings={"model_type": "radgraph", "model": HUB_REPO, "encoder": None, "batch_size": 64, "device": "auto"},
    packages=("radgraph", "torch", "transformers", "nltk"),
)


# --- F1 over sets (CXR-Report-Metric's compute_f1) --------------------------------------------


def set_f1(reference: set, hypothesis: set) -> float:
    """F1 of two sets: P = TP/|hyp|, R = TP/|ref| (each 0 when its set is empty); 0 when P + R = 0."""
    tp = len(reference & hypothesis)
    precision = tp / len(hypothesis) if hypothesis else 0.0
    recall = tp / len(reference) if reference else 0.0
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def entity_relation_sets(annotation: dict) -> tuple[set, set]:
    """Entities {(tokens, label)} and relations {((tokens, label), (tokens, label), type)} of one report.

    ``annotation`` is one value of the radgraph package's output: ``{"entities": {"1": {"tokens",
    "label", "relations": [[type, "<object key>"], ...]}, ...}}``.
    """
    ents = annotation.get("entities") or {}
    entities = {(e["tokens"], e["label"]) for e in ents.values()}
    relations = set()
    for e in ents.values():
        for rel_type, obj_key in e.get("relations") or ():
            obj = ents[obj_key]
            relations.add(((e["tokens"], e["label"]), (obj["tokens"], obj["label"]), rel_type))
    return entities, relations


def _rewards(hyp_annotation: dict, ref_annotation: dict) -> tuple[float, float, float]:
    """F1RadGraph's (simple, partial, complete) for one pair, from the package's own function."""
    from radgraph.rewards import compute_reward

    return tuple(float(x) for x in compute_reward(hyp_annotation, ref_annotation, "all"))


EMPTY = {"entities": {}}


def score_annotations(ref_annotations, hyp_annotations, rewards: bool = True) -> dict:
    """Per-pair columns from the annotations of references and hypotheses (two equal-length lists).

    ``rewards=False`` skips the F1RadGraph levels (they need the radgraph package) and
    leaves them NaN.
    """
    ref_annotations, hyp_annotations = list(ref_annotations), list(hyp_annotations)
    if len(ref_annotations) != len(hyp_annotations):
        raise ValueError(f"{len(ref_annotations)} reference but {len(hyp_annotations)} hypothesis annotations")
    n = len(ref_annotations)
    cols = {c: np.full(n, np.nan) for c in SPEC.columns}
    sets: dict = {}

    def sets_of(ann):
        key = id(ann)
        if key not in sets:
            sets[key] = (ann, entity_relation_sets(ann))  # keep ann alive so id() stays unique
        return sets[key][1]

    for i, (ref, hyp) in enumerate(zip(ref_annotations, hyp_annotations)):
        ref_ent, ref_rel = sets_of(ref)
        hyp_ent, hyp_rel = sets_of(hyp)
        ent, rel = set_f1(ref_ent, hyp_ent), set_f1(ref_rel, hyp_rel)
        cols["radgraph_entity_f1"][i] = ent
        cols["radgraph_relation_f1"][i] = rel
        cols["radgraph_combined"][i] = (ent + rel) / 2
        if rewards:
            (cols["radgraph_simple"][i], cols["radgraph_partial"][i],
             cols["radgraph_complete"][i]) = _rewards(hyp, ref)
    return cols


# --- weights: locate, stage, load -------------------------------------------------------------


def _missing(model, setting: str, why: str) -> MissingWeightsError:
    return MissingWeightsError(
        f"metric 'radgraph': {setting} {model!r} cannot be used ({why}). Point config "
        f"metric_settings.radgraph.{setting} at a local copy: for 'model', the radgraph package's "
        f"<model_type>.tar.gz (from the hub repo {HUB_REPO}) or its unpacked directory (config.json, "
        f"vocabulary/, weights.th); for 'encoder', a directory with the tokenizer and config.json of the "
        f"BERT model named in that config.json."
    )


def _is_model_dir(path: Path) -> bool:
    return (path / "config.json").is_file() and (path / "weights.th").is_file() and (path / "vocabulary").is_dir()


def _package_cache_dir(model_type: str) -> Path | None:
    """Where the radgraph package itself unpacks ``model_type`` (``user_cache_dir('radgraph')/<version>``)."""
    try:
        from importlib.metadata import version

        from appdirs import user_cache_dir
    except ImportError:
        return None
    try:
        return Path(user_cache_dir("radgraph")) / version("radgraph") / model_type
    except Exception:
        return None


def locate_model(model: str, model_type: str) -> tuple[str, Path]:
    """("dir", unpacked model directory) or ("archive", path of ``<model_type>.tar.gz``)."""
    archive_name = f"{model_type}.tar.gz"
    local = Path(os.path.expanduser(str(model)))
    if local.is_dir():
        for candidate in (local, local / model_type):
            if _is_model_dir(candidate):
                return "dir", candidate
        if (local / archive_name).is_file():
            return "archive", local / archive_name
        raise _missing(model, "model", f"directory without config.json + vocabulary/ + weights.th, "
                                       f"{model_type}/ or {archive_name}")
    if local.is_file():
        if not tarfile.is_tarfile(local):
            raise _missing(model, "model", "not a tar archive")
        return "archive", local
    try:
        return "archive", models.resolve(str(model), metric="radgraph", setting="model", filename=archive_name)
    except MissingWeightsError:
        cached = _package_cache_dir(model_type) if str(model) == HUB_REPO else None
        if cached is not None and _is_model_dir(cached):
            log.info("radgraph: using the radgraph package's own unpacked copy %s", cached)
            return "dir", cached
        raise


def _extract(archive: Path, into: Path) -> Path:
    """Unpack a model archive; return the directory holding config.json."""
    with tarfile.open(archive, "r:*") as tar:
        tar.extractall(into, filter="data")
    if _is_model_dir(into):
        return into
    subdirs = [p for p in into.iterdir() if p.is_dir() and _is_model_dir(p)]
    if len(subdirs) == 1:
        return subdirs[0]
    raise _missing(str(archive), "model", "the archive holds no config.json + vocabulary/ + weights.th")


def _encoder_names(config: dict) -> list[str]:
    names = []
    try:
        names.append(config["dataset_reader"]["token_indexers"]["bert"]["model_name"])
        names.append(config["model"]["embedder"]["token_embedders"]["bert"]["model_name"])
    except (KeyError, TypeError):
        raise _missing("config.json", "model", "config.json does not name the encoder where radgraph 0.1.18 "
                                              "reads it (dataset_reader.token_indexers.bert.model_name)") from None
    return names


def resolve_encoder(name: str):
    """The encoder's tokenizer and config as local files (a directory, or a hub id in the HF cache).

    Only those are read: the encoder's weights come from weights.th, so none are fetched.
    """
    from radrank.metrics import _hf

    return _hf.resolve_encoder(str(name), metric="radgraph", setting="encoder", weights=False)


@contextmanager
def staged_model(settings: dict):
    """Yield (cache_dir, provenance): ``cache_dir/<model_type>/`` is what ``radgraph.RadGraph`` loads.

    The staged config.json names the resolved local encoder; weights.th is linked, the small
    vocabulary copied (the package writes a lock file into it). Everything lives in a temporary
    directory removed on exit (the package has read it all by then).
    """
    model_type = settings["model_type"]
    kind, where = locate_model(settings["model"], model_type)
    encoder = settings.get("encoder")
    resolved = resolve_encoder(encoder) if encoder else None  # before unpacking, when it is known
    with tempfile.TemporaryDirectory(prefix="radrank-radgraph-") as tmp:
        tmp = Path(tmp)
        source = _extract(where, tmp / "unpacked") if kind == "archive" else where
        config = json.loads((source / "config.json").read_text())
        names = _encoder_names(config)
        if resolved is None:
            encoder = names[0]
            resolved = resolve_encoder(encoder)
        encoder_path = resolved.directory
        config["dataset_reader"]["token_indexers"]["bert"]["model_name"] = str(encoder_path)
        config["model"]["embedder"]["token_embedders"]["bert"]["model_name"] = str(encoder_path)
        staged = tmp / "cache" / model_type
        staged.mkdir(parents=True)
        (staged / "config.json").write_text(json.dumps(config))
        shutil.copytree(source / "vocabulary", staged / "vocabulary", ignore=shutil.ignore_patterns(".lock"))
        weights = source / "weights.th"
        try:
            (staged / "weights.th").symlink_to(weights.resolve())
        except OSError:  # a file system without symbolic links
            shutil.copyfile(weights, staged / "weights.th")
        provenance = {
            "model": {"id": str(settings["model"]), "model_type": model_type,
                      "revision": models.revision_of(where),
                      "weights_sha256": models.weights_digest(weights)},
            "encoder": {"id": str(encoder), "config_name": names[0], "revision": models.revision_of(encoder_path),
                        "files_sha256": {f.name: file_sha256(f) for f in sorted(resolved.files)}},
        }
        yield tmp / "cache", provenance


def _cuda_index(device: str) -> int:
    """radgraph.RadGraph's ``cuda`` argument: -1 for the CPU, else the CUDA device index."""
    import torch

    device = str(device or "auto").lower()
    if device == "auto":
        return 0 if torch.cuda.is_available() else -1
    if device == "cpu":
        return -1
    if not torch.cuda.is_available():
        raise RuntimeError(f"metric 'radgraph': device {device!r} requested but CUDA is not available")
    return int(device.split(":", 1)[1]) if ":" in device else 0


def _check(settings: dict) -> None:
    if settings["model_type"] not in MODEL_TYPES:
        raise ValueError(f"metric 'radgraph': model_type must be one of {MODEL_TYPES}, not {settings['model_type']!r}")
    if not isinstance(settings["batch_size"], int) or settings["batch_size"] < 1:
        raise ValueError(f"metric 'radgraph': batch_size must be a positive integer, not {settings['batch_size']!r}")
    device = str(settings["device"] or "auto").lower()
    if not (device in ("auto", "cpu", "cuda") or (device.startswith("cuda:") and device[5:].isdigit())):
        raise ValueError(f"metric 'radgraph': device must be auto, cpu, cuda or cuda:N, not {settings['device']!r}")
    if settings["model_type"] == "echograph":
        log.warning("radgraph 0.1.18 tokenises echograph reports as radgraph-xl ones (its preprocess_reports "
                    "tests `model_type == 'radgraph-xl' or 'modern-radgraph-xl'`, which is always true)")


def load_annotator(settings: dict):
    """(radgraph.RadGraph, provenance) for the settings; MissingWeightsError before any heavy load."""
    _check(settings)
    with staged_model(settings) as (cache_dir, provenance):
        cuda = _cuda_index(settings["device"])
        from radgraph import RadGraph

        annotator = RadGraph(model_type=settings["model_type"], model_cache_dir=str(cache_dir), cuda=cuda,
                             batch_size=settings["batch_size"])
    provenance["device"] = str(annotator.device)
    return annotator, provenance


def annotate(annotator, texts, batch_size: int = 64) -> list[dict]:
    """One annotation per text; empty / whitespace-only texts get no entities without a model call."""
    from radrank.metrics._hf import Progress

    out: list = [EMPTY] * len(texts)
    todo = [i for i, t in enumerate(texts) if str(t).strip()]
    failed = 0
    progress = Progress("radgraph annotation", len(todo))
    for start in range(0, len(todo), batch_size):
        chunk = todo[start:start + batch_size]
        result = annotator([str(texts[i]) for i in chunk])
        for j, i in enumerate(chunk):
            ann = result.get(str(j))
            if ann is None:  # the package printed a traceback and skipped this report
                failed += 1
                ann = EMPTY
            out[i] = ann
        progress.update(len(chunk))
    progress.finish()
    if failed:
        log.warning("radgraph: the annotator failed on %d text(s); they count as having no entities", failed)
    return out


def score(pairs, settings, inputs):
    import pandas as pd

    _check(settings)
    texts, ref_index, hyp_index = distinct_texts(pairs["reference"].astype(str).tolist(),
                                                 pairs["hypothesis"].astype(str).tolist())
    annotator, provenance = load_annotator(settings)
    log.info("radgraph (%s on %s): %d pairs, %d distinct texts", settings["model_type"], provenance["device"],
             len(pairs), len(texts))
    annotations = annotate(annotator, texts, settings["batch_size"])
    cols = score_annotations([annotations[i] for i in ref_index], [annotations[i] for i in hyp_index])
    out = pd.DataFrame({"sample_id": pairs["sample_id"].to_numpy(), **cols})
    out.attrs["models"] = provenance
    return out

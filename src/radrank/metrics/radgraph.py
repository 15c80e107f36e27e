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
Here ``model`` may be that hub id (found in the Hugging Face cache, or, for the
default repo, in the radgraph package's own unpacked copy from an earlier run),
a ``.tar.gz`` file, an unpacked model directory, or a directory holding
``<model_type>.tar.gz`` or ``<model_type>/``; ``encoder`` (default: the name in
config.json) may be a hub id or a local directory. :meth:`RadGraphMetric.weights`
declares both, with the check of a local layout (:func:`locate_model`, standard
library only, so the workflow's load-time check runs it too) and the fallback to
the package's copy; the job resolves both before anything heavy is loaded, and a
missing one raises :class:`~radrank.errors.MissingWeightsError` naming its config
key. The package is then pointed at a staged copy whose config.json names the
resolved encoder, so it never touches the network. An archive is unpacked once per
process into a temporary directory (``TMPDIR``), removed once the model is loaded;
the annotator stays in the runtime's model cache. The model's identity (weights.th
sha256, hub revision) and the encoder's tokenizer files' hashes are returned in
``scores.attrs["models"]``.

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
import sys
import tarfile
import tempfile
import typing
from dataclasses import dataclass
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import Literal

import numpy as np

from radrank.devices import DEVICE_DOC, check_device
from radrank.metrics.base import BoardColumn, Metric, Resources, distinct_texts, mean_leaf
from radrank.runtime import Resolved, WeightRef
from radrank.settings import Settings, scored, speed

log = logging.getLogger("radrank")

HUB_REPO = "StanfordAIMI/RRG_scorers"
ModelType = Literal["radgraph", "radgraph-xl", "modern-radgraph-xl", "echograph"]  # radgraph 0.1.18's MODEL_MAPPING
MODEL_TYPES = typing.get_args(ModelType)
COLUMNS = ("radgraph_combined", "radgraph_entity_f1", "radgraph_relation_f1",
           "radgraph_simple", "radgraph_partial", "radgraph_complete")


@dataclass(frozen=True)
class RadGraphSettings(Settings):
    model_type: ModelType = scored("radgraph", "the RadGraph model (RadCliQ: radgraph; RadEval's F1RadGraph: "
                                               "radgraph-xl)")
    model: str = scored(HUB_REPO, "the hub repo holding <model_type>.tar.gz, the archive itself, its unpacked "
                                  "directory (config.json, vocabulary/, weights.th) or a directory holding "
                                  "<model_type>.tar.gz or <model_type>/")
    encoder: str | None = scored(None, "the BERT encoder's tokenizer and config.json (hub id or local directory; "
                                       "null: the one the model's config.json names)")
    batch_size: int = speed(64, "texts handed to the annotator per call", minimum=1)
    device: str = speed("auto", DEVICE_DOC)

    def check(self, where):
        check_device(self.device, f"{where}.device")


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
    cols = {c: np.full(n, np.nan) for c in COLUMNS}
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


# --- weights: the local layouts, the package's own copy (standard library only: the load-time check) ----


def _is_model_dir(path: Path) -> bool:
    return (path / "config.json").is_file() and (path / "weights.th").is_file() and (path / "vocabulary").is_dir()


def locate_model(path, model_type: str) -> tuple[str | None, str | None, Path | None]:
    """(why not, kind, where) of a local model: kind "dir" (``where`` is an unpacked model directory) or
    "archive" (``where`` is ``<model_type>.tar.gz``); ``path`` is either, or a directory holding either."""
    archive_name = f"{model_type}.tar.gz"
    local = Path(os.path.expanduser(str(path)))
    if local.is_dir():
        for candidate in (local, local / model_type):
            if _is_model_dir(candidate):
                return None, "dir", candidate
        if (local / archive_name).is_file():
            return None, "archive", local / archive_name
        return (f"{local} is a directory without config.json + vocabulary/ + weights.th, {model_type}/ or "
                f"{archive_name}"), None, None
    if local.is_file():
        if not tarfile.is_tarfile(local):
            return f"{local} is not a tar archive", None, None
        return None, "archive", local
    return f"{local} does not exist", None, None


def _local_problem(path, model_type: str) -> str | None:
    """The load-time check of a local ``model``: why it cannot be used, or None."""
    return locate_model(path, model_type)[0]


def package_cache_root() -> Path:
    """``appdirs.user_cache_dir("radgraph")``, where the radgraph package unpacks what it downloads
    (``<root>/<package version>/<model_type>/``), computed without appdirs."""
    home = os.path.expanduser("~")
    if sys.platform == "darwin":
        return Path(home) / "Library" / "Caches" / "radgraph"
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA") or os.path.join(home, "AppData", "Local")) / "radgraph" / \
            "radgraph" / "Cache"
    return Path(os.getenv("XDG_CACHE_HOME", os.path.join(home, ".cache"))) / "radgraph"


def package_copy(model_type: str) -> Path | None:
    """The radgraph package's own unpacked ``model_type`` from an earlier run, if there is one: the installed
    version's first, else any version's (the core environment, which runs the load-time check, has no
    radgraph; every version unpacks the same archive of the hub repo)."""
    root = package_cache_root()
    if not root.is_dir():
        return None
    versions = sorted((p.name for p in root.iterdir() if p.is_dir()), reverse=True)
    try:
        installed = metadata.version("radgraph")
    except metadata.PackageNotFoundError:
        installed = None
    if installed in versions:
        versions.remove(installed)
        versions.insert(0, installed)
    for version in versions:
        if _is_model_dir(root / version / model_type):
            return root / version / model_type
    return None


# --- the model's config, staging, loading --------------------------------------------------------------


def read_config(kind: str, where: Path, ref: WeightRef) -> dict:
    """The model's config.json, read from the directory or from the archive (nothing else is unpacked)."""
    if kind == "dir":
        return json.loads((where / "config.json").read_text())
    with tarfile.open(where, "r:*") as tar:
        for member in tar:
            parts = Path(member.name).parts
            if member.isfile() and parts and parts[-1] == "config.json" and len(parts) <= 2:
                return json.load(tar.extractfile(member))
    raise ref.missing(f"the archive {where} holds no config.json")


def _extract(archive: Path, into: Path, ref: WeightRef) -> Path:
    """Unpack a model archive; return the directory holding config.json."""
    with tarfile.open(archive, "r:*") as tar:
        tar.extractall(into, filter="data")
    if _is_model_dir(into):
        return into
    subdirs = [p for p in into.iterdir() if p.is_dir() and _is_model_dir(p)]
    if len(subdirs) == 1:
        return subdirs[0]
    raise ref.missing(f"the archive {archive} holds no config.json + vocabulary/ + weights.th")


def _encoder_names(config: dict, ref: WeightRef) -> list[str]:
    try:
        return [config["dataset_reader"]["token_indexers"]["bert"]["model_name"],
                config["model"]["embedder"]["token_embedders"]["bert"]["model_name"]]
    except (KeyError, TypeError):
        raise ref.missing("its config.json does not name the encoder where radgraph 0.1.18 reads it "
                          "(dataset_reader.token_indexers.bert.model_name)") from None


def _stage(source: Path, config: dict, encoder_dir: Path, staged: Path) -> None:
    """``staged`` = the model of ``source`` with a config.json naming the local encoder: weights.th linked,
    the small vocabulary copied (the package writes a lock file into it)."""
    config = json.loads(json.dumps(config))
    config["dataset_reader"]["token_indexers"]["bert"]["model_name"] = str(encoder_dir)
    config["model"]["embedder"]["token_embedders"]["bert"]["model_name"] = str(encoder_dir)
    staged.mkdir(parents=True)
    (staged / "config.json").write_text(json.dumps(config))
    shutil.copytree(source / "vocabulary", staged / "vocabulary", ignore=shutil.ignore_patterns(".lock"))
    weights = source / "weights.th"
    try:
        (staged / "weights.th").symlink_to(weights.resolve())
    except OSError:  # a file system without symbolic links
        shutil.copyfile(weights, staged / "weights.th")


def _cuda_index(device: str) -> int:
    """radgraph.RadGraph's ``cuda`` argument: -1 for the CPU, else the CUDA device index."""
    import torch

    device = device.lower()
    if device == "auto":
        return 0 if torch.cuda.is_available() else -1
    if device == "cpu":
        return -1
    if not torch.cuda.is_available():
        raise RuntimeError(f"metric 'radgraph': device {device!r} requested but CUDA is not available")
    return int(device.split(":", 1)[1]) if ":" in device else 0


def _load(model: Resolved, kind: str, where: Path, config: dict, encoder_dir: Path, model_type: str, cuda: int):
    """(radgraph.RadGraph, the model's provenance): staged in a temporary directory, removed once loaded
    (the package has read everything by then)."""
    if model_type == "echograph":
        log.warning("radgraph 0.1.18 tokenises echograph reports as radgraph-xl ones (its preprocess_reports "
                    "tests `model_type == 'radgraph-xl' or 'modern-radgraph-xl'`, which is always true)")
    with tempfile.TemporaryDirectory(prefix="radrank-radgraph-") as tmp:
        tmp = Path(tmp)
        source = _extract(where, tmp / "unpacked", model.ref) if kind == "archive" else where
        _stage(source, config, encoder_dir, tmp / "cache" / model_type)
        # weights.th, not the archive, is hashed: an archive and its unpacked directory are the same model.
        provenance = Resolved(model.ref, model.path, weights=[source / "weights.th"],
                              files=[source / "config.json"]).provenance()
        from radgraph import RadGraph

        annotator = RadGraph(model_type=model_type, model_cache_dir=str(tmp / "cache"), cuda=cuda)
    return annotator, {**provenance, "model_type": model_type}


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


class RadGraphMetric(Metric):
    name = "radgraph"
    description = "RadGraph entity/relation F1 per report (RadCliQ's radgraph_combined) and F1RadGraph rewards"
    family = "rexrank"
    columns = COLUMNS
    # The entity and relation F1s are kept per sample (diagnostics); the leaves are the published numbers.
    leaves = (
        mean_leaf("radgraph_combined", "RadGraph"),
        mean_leaf("radgraph_simple", "F1RadGraph simple"),
        mean_leaf("radgraph_partial", "F1RadGraph partial"),
        mean_leaf("radgraph_complete", "F1RadGraph complete"),
    )
    Settings = RadGraphSettings
    default_resources = Resources(mem_mb=8000, runtime_min=120, threads=2, gpu=1)
    packages = ("radgraph", "torch", "transformers", "nltk")
    board = (BoardColumn("RadGraph", "radgraph_combined", 4),)

    def weights(self, s):
        archive = f"{s.model_type}.tar.gz"
        model = WeightRef(
            self.owner(), self.key("model"), s.model, need="file", filename=archive,
            check=partial(_local_problem, model_type=s.model_type),
            fallback=partial(package_copy, s.model_type) if s.model == HUB_REPO else None,
            how=(f"Point config {self.key('model')} at a local copy: the radgraph package's {archive} (hub repo "
                 f"{HUB_REPO}), its unpacked directory (config.json, vocabulary/, weights.th) or a directory "
                 f"holding either; or download it where the hub is reachable (`hf download {HUB_REPO} {archive}`) "
                 f"into the Hugging Face cache (HF_HOME) the jobs use."))
        return model, self._encoder_ref(s.encoder)

    def _encoder_ref(self, encoder: str | None) -> WeightRef:
        """The encoder's tokenizer and config (its weights come from weights.th); None: named by config.json."""
        how = (f"Point config {self.key('encoder')} at a directory with the tokenizer files and config.json of the "
               f"BERT encoder the model's config.json names, or download it where the hub is reachable "
               f"(`hf download {encoder}`) into the Hugging Face cache (HF_HOME) the jobs use.") if encoder else ""
        return WeightRef(self.owner(), self.key("encoder"), encoder, need="tokenizer", how=how)

    def annotator(self, s, runtime):
        """(radgraph.RadGraph, provenance), loaded once per process per model, encoder and device; missing
        weights fail before anything heavy is loaded."""
        model_ref, encoder_ref = self.weights(s)
        model = runtime.resolve(model_ref)
        why, kind, where = locate_model(model.path, s.model_type)
        if why:
            raise model_ref.missing(why)
        encoder = runtime.resolve(encoder_ref) if encoder_ref.ref else None  # before the archive is read
        if kind == "archive":  # read once per process: reaching config.json may decompress much of the archive
            stat = where.stat()
            config = runtime.load(("radgraph config", str(where), stat.st_size, stat.st_mtime_ns),
                                  lambda: read_config(kind, where, model_ref))
        else:
            config = read_config(kind, where, model_ref)
        config_name = _encoder_names(config, model_ref)[0]
        if encoder is None:
            encoder = runtime.resolve(self._encoder_ref(config_name))
        cuda = _cuda_index(s.device)
        # The configured id is in the key: the cached provenance names it.
        key = ("radgraph", s.model_type, s.model, str(where), str(encoder.directory), cuda)
        annotator, model_provenance = runtime.load(
            key, lambda: _load(model, kind, where, config, encoder.directory, s.model_type, cuda))
        return annotator, {"model": model_provenance,
                           "encoder": {**encoder.provenance(), "config_name": config_name},
                           "device": str(annotator.device)}

    def score(self, pairs, s, inputs, runtime):
        import pandas as pd

        texts, ref_index, hyp_index = distinct_texts(pairs["reference"].astype(str).tolist(),
                                                     pairs["hypothesis"].astype(str).tolist())
        annotator, provenance = self.annotator(s, runtime)
        log.info("radgraph (%s on %s): %d pairs, %d distinct texts", s.model_type, provenance["device"],
                 len(pairs), len(texts))
        annotations = annotate(annotator, texts, s.batch_size)
        cols = score_annotations([annotations[i] for i in ref_index], [annotations[i] for i in hyp_index])
        out = pd.DataFrame({"sample_id": pairs["sample_id"].to_numpy(), **cols})
        out.attrs["models"] = provenance
        return out


METRIC = RadGraphMetric()

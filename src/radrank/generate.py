"""Run a report generator or a VQA answerer over a dataset and write canonical pairs.

The generation job of the workflow (one call per shard) and the Python API
(:mod:`radrank.api`) both run :func:`run_generation`; :func:`generate` adds
sharding, resuming and the pairs / drop files.

Contracts
---------
* report generator: ``generator(imgs, indications=None) -> list[str]``. A
  generator with one parameter, ``generator(imgs)``, is detected by its
  signature and called without indications (asking it for ``use_indication``
  is an error). With ``use_indication`` the second argument is a list holding
  each sample's indication section, or None where the report has none — never
  the report body; without it the second argument is None.
* VQA answerer: ``answerer(imgs, questions) -> list[str]``.
* ``imgs[i]`` is the list of sample i's images (a study can have several), each
  loaded as ``image_format`` says: ``"pil"`` (8-bit RGB PIL images, default),
  ``"array"`` (float32 in [0, 1]), ``"path"`` (not loaded), or any callable
  ``path -> image``. ``max_images`` keeps a study's first images only.
* A callable may be given as an import path ``"package.module:name"``; a class
  found there is instantiated (with ``device=`` when it takes one).
* Both are called through :mod:`radrank.backbones.base`'s ``CheckedGenerator`` /
  ``CheckedAnswerer`` (the project's one implementation of the contract: legacy
  generators, keyword-only ``indications``); the output must be one string per
  sample, and each is stripped.

Pairs
-----
reference = the ``ref_section`` of the report (:mod:`radrank.sections`) or the
VQA answer; hypothesis = the generated text; context = the text given to the
model (the question, or the indication when ``use_indication``), else None;
``study_id`` = the sample's position in the dataset's order, so shards
concatenate in order; ``indication``, ``age``, ``sex``, ``comparison`` from the
dataset. Samples whose reference is empty are not generated for and are listed
as ``empty_reference``; samples without images (``no_image``) or whose images
cannot be read (``image_error``) are listed and skipped. All other policies are
:func:`radrank.ingest.pairs.build_pairs`'s.

Resuming
--------
While a shard runs, each finished batch is appended to a progress file beside
``out_pairs`` (``.<name>.progress.jsonl``), headed by a hash of everything that
decides the output (dataset selection, shard, settings, generator, sample ids).
A rerun of the same shard reuses the answers recorded there and generates only
the rest; a progress file with another header is discarded. Finished outputs
whose provenance carries the same hash are left alone. The pairs and drop files
are written atomically at the end and the progress file removed.
"""

from __future__ import annotations

import importlib
import inspect
import json
import logging
import math
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from radrank import io, provenance
from radrank.errors import ConfigError
from radrank.sections import SECTIONS, parse_section
from radrank.shards import shard_slice
from radrank.text import clean, is_missing

log = logging.getLogger("radrank")

IMAGE_FORMATS = ("pil", "array", "path")


# --- callables -----------------------------------------------------------------------------------------------
def resolve_callable(spec, *, device=None):
    """``spec`` itself when callable, else the object an import path ``"pkg.module:name"`` names
    (a class there is instantiated, with ``device=device`` when its constructor takes ``device``)."""
    if callable(spec) and not isinstance(spec, str):
        return spec
    if not isinstance(spec, str) or ":" not in spec:
        raise ConfigError(f"a generator must be a callable or an import path 'package.module:name'; got {spec!r}")
    module_name, _, attr = spec.partition(":")
    try:
        obj = importlib.import_module(module_name)
    except ImportError as e:
        raise ConfigError(f"cannot import {module_name!r} for {spec!r}: {e}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"{module_name!r} has no attribute {attr!r} (from {spec!r})")
        obj = getattr(obj, part)
    if inspect.isclass(obj):
        try:
            takes_device = "device" in inspect.signature(obj).parameters
        except (TypeError, ValueError):
            takes_device = False
        obj = obj(device=device) if takes_device and device is not None else obj()
    if not callable(obj):
        raise ConfigError(f"{spec!r} is not callable")
    return obj


def callable_name(fn) -> str:
    for owner in (fn, type(fn)):
        name = getattr(owner, "__qualname__", None) or getattr(owner, "__name__", None)
        if name and name != "function":
            return f"{getattr(owner, '__module__', '') or ''}:{name}".lstrip(":")
    return repr(fn)


def checked(fn, task: str):
    """``fn`` behind the project's one call contract (:mod:`radrank.backbones.base`): a generator as
    ``CheckedGenerator`` (a legacy one-argument generator detected by signature), an answerer as
    ``CheckedAnswerer``; both check what comes back (one string per sample)."""
    from radrank.backbones.base import CheckedAnswerer, CheckedGenerator

    if task == "vqa":
        if isinstance(fn, CheckedAnswerer):
            return fn
        try:
            return CheckedAnswerer(fn)
        except TypeError as e:
            raise ConfigError(f"a VQA answerer is called as answerer(imgs, questions): {e}") from None
    return fn if isinstance(fn, CheckedGenerator) else CheckedGenerator(fn)


# --- images --------------------------------------------------------------------------------------------------
def image_loader(image_format):
    if callable(image_format):
        return image_format
    if image_format == "path":
        return Path
    if image_format not in IMAGE_FORMATS:
        raise ConfigError(f"image_format must be one of {', '.join(IMAGE_FORMATS)} or a callable; got {image_format!r}")
    from radrank import images  # needs the gen-base environment (monai, pydicom, pillow)

    return images.load_pil if image_format == "pil" else images.load_array


# --- one sample's texts --------------------------------------------------------------------------------------
def _number(value) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return math.nan
    return out


def sample_record(sample, position: int, *, task: str, ref_section: str, use_indication: bool,
                  indication_section: str) -> dict:
    """The pair fields of one sample (no hypothesis yet) and the text the model is given (``prompt``)."""
    meta = sample.meta or {}
    if task == "vqa":
        # "none" is an answer in VQA, not a missing marker: only None counts as missing here.
        reference = "" if sample.answer is None else str(sample.answer).strip()
        prompt = "" if sample.question is None else str(sample.question)
        indication = clean(sample.indication) or None
    else:
        report = clean(sample.report)
        reference = parse_section(report, ref_section) if report else ""
        if indication_section == "indication":
            indication = clean(sample.indication).strip() or (parse_section(report, "indication") if report else "")
        else:
            indication = parse_section(report, indication_section) if report else ""
        indication = indication or None  # never the report body
        prompt = indication if use_indication else None
    return {
        "sample_id": sample.sample_id, "study_id": position, "reference": reference, "hypothesis": "",
        "context": prompt, "prompt": prompt, "row": sample.where, "images": list(sample.images),
        "indication": indication, "age": _number(meta.get("age")),
        "sex": None if is_missing(meta.get("sex")) else str(meta.get("sex")),
        "comparison": None if is_missing(meta.get("comparison")) else str(meta.get("comparison")),
    }


def _check_settings(task, ref_section, indication_section, use_indication, fn):
    if task not in ("report", "vqa"):
        raise ConfigError(f"task must be 'report' or 'vqa'; got {task!r}")
    for name, value in (("ref_section", ref_section), ("indication_section", indication_section)):
        if value not in SECTIONS:
            raise ConfigError(f"{name} must be one of {', '.join(SECTIONS)}; got {value!r}")
    call = checked(fn, task)
    if task == "report" and use_indication and call.legacy:
        raise ConfigError("use_indication=True needs a generator(imgs, indications); this one takes only images")
    return call


# --- the loop ------------------------------------------------------------------------------------------------
def run_generation(samples, fn, *, task: str = "report", ref_section: str = "findings", use_indication: bool = False,
                   indication_section: str = "indication", batch_size: int = 8, num_workers: int = 4,
                   image_format="pil", max_images: int | None = None, positions=None, done: dict | None = None,
                   on_batch=None):
    """Generate for ``samples``; return ``(records, unmatched)`` for :func:`build_pairs`.

    ``positions`` gives each sample's study_id (default 0, 1, …); ``done`` maps
    sample ids to answers already generated (resuming); ``on_batch(records)`` is
    called with each batch's finished records.
    """
    if batch_size < 1:
        raise ConfigError(f"batch_size must be at least 1; got {batch_size}")
    call = _check_settings(task, ref_section, indication_section, use_indication, fn)
    load = image_loader(image_format)
    done = done or {}
    positions = list(range(len(samples))) if positions is None else list(positions)
    records, unmatched, todo = [], [], []
    for sample, pos in zip(samples, positions):
        rec = sample_record(sample, pos, task=task, ref_section=ref_section, use_indication=use_indication,
                            indication_section=indication_section)
        if max_images is not None:
            rec["images"] = rec["images"][:max_images]
        if not rec["reference"].strip():
            records.append(rec)  # build_pairs lists it as empty_reference; nothing to generate
        elif not rec["images"]:
            unmatched.append(dict(rec, reason="no_image", detail="the dataset lists no image for this sample"))
        elif rec["sample_id"] in done:
            records.append(dict(rec, hypothesis=done[rec["sample_id"]]))
        else:
            todo.append(rec)

    def load_one(rec):
        try:
            return [load(p) for p in rec["images"]], None
        except Exception as e:  # unreadable, missing, unsupported encoding
            return None, f"{type(e).__name__}: {e}"

    chunks = [todo[i: i + batch_size] for i in range(0, len(todo), batch_size)]
    pool = ThreadPoolExecutor(max_workers=num_workers) if num_workers and num_workers > 0 else None

    def submit(chunk):
        return [pool.submit(load_one, r) for r in chunk] if pool else [load_one(r) for r in chunk]

    def result(item):
        return item.result() if pool else item

    try:
        pending = submit(chunks[0]) if chunks else None
        for k, chunk in enumerate(chunks):
            loaded = [result(f) for f in pending]
            pending = submit(chunks[k + 1]) if k + 1 < len(chunks) else None  # load the next batch meanwhile
            batch, imgs = [], []
            for rec, (images, error) in zip(chunk, loaded):
                if error is not None:
                    unmatched.append(dict(rec, reason="image_error", detail=error))
                else:
                    batch.append(rec)
                    imgs.append(images)
            if not batch:
                continue
            texts = [r["prompt"] for r in batch]
            out = call(imgs, texts if task == "vqa" or use_indication else None)  # one string per sample, checked
            finished = [dict(rec, hypothesis=h.strip()) for rec, h in zip(batch, out)]
            records.extend(finished)
            if on_batch is not None:
                on_batch(finished)
            if (k + 1) % 50 == 0 or k + 1 == len(chunks):
                log.info("generated %d of %d batches", k + 1, len(chunks))
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    records.sort(key=lambda r: r["study_id"])
    return records, unmatched


def to_pairs(records, unmatched, *, empty_hypothesis: str = "drop", max_chars: int | None = None):
    """``(pairs, drops)`` from :func:`run_generation`'s output (build_pairs' policies)."""
    from radrank.ingest.pairs import build_pairs

    keep = ("sample_id", "study_id", "reference", "hypothesis", "context", "row", "indication", "age", "sex",
            "comparison")
    recs = [{k: r.get(k) for k in keep} for r in records]
    lost = [{k: r.get(k) for k in keep + ("reason", "detail")} for r in unmatched]
    return build_pairs(recs, lost, empty_hypothesis=empty_hypothesis, max_chars=max_chars)


# --- the shard job -------------------------------------------------------------------------------------------
def select_samples(adapter, *, max_samples: int | None = None, shard=(0, 1)):
    """``(samples, positions)`` of one shard: the first ``max_samples`` of the dataset, cut into contiguous shards."""
    samples = adapter.samples()
    if max_samples is not None:
        samples = samples[: max(0, int(max_samples))]
    index, count = shard
    cut = shard_slice(len(samples), int(index), int(count))
    return samples[cut], list(range(len(samples)))[cut]


def _progress_path(out_pairs) -> Path:
    p = Path(out_pairs)
    return p.parent / f".{p.name}.progress.jsonl"


def _read_progress(path: Path, identity: str) -> dict:
    if not path.is_file():
        return {}
    done = {}
    with open(path, encoding="utf-8") as f:
        header = f.readline()
        try:
            if json.loads(header).get("identity") != identity:
                return {}
        except (json.JSONDecodeError, AttributeError):
            return {}
        for line in f:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:  # a line cut short when the job was killed
                break
            done[rec["sample_id"]] = rec["hypothesis"]
    return done


def generate(adapter, generator, *, shard=(0, 1), out_pairs, out_drops, task: str | None = None,
             ref_section: str = "findings", use_indication: bool = False, indication_section: str = "indication",
             batch_size: int = 8, num_workers: int = 4, image_format="pil", max_images: int | None = None,
             max_samples: int | None = None, empty_hypothesis: str = "score", max_chars: int | None = None,
             device: str | None = None, model: str | None = None, generator_settings: dict | None = None):
    """Generate one shard of ``adapter`` (an adapter, or ``(name, root)``) and write its pairs and drop file.

    ``shard=(i, k)`` is shard i of k (contiguous, by dataset order, after
    ``max_samples``). ``generator_settings`` (from the workflow: a backbone's
    settings without device, batch size and placement, those of the job's
    identity) are part of the shard's identity: answers kept for resuming an
    interrupted job are reused only by a job with the same settings (e.g. never
    across the hf and vllm backends). Returns ``(pairs, drops)``.
    """
    from radrank.datasets import make_adapter

    adapter = make_adapter(adapter)
    task = task or adapter.task
    fn = resolve_callable(generator, device=device)
    samples, positions = select_samples(adapter, max_samples=max_samples, shard=shard)
    report = task == "report"
    settings = {"task": task, "ref_section": ref_section if report else None, "use_indication": use_indication,
                "indication_section": indication_section if report else None,
                "image_format": image_format if isinstance(image_format, str) else callable_name(image_format),
                "max_images": max_images, "max_samples": max_samples, "empty_hypothesis": empty_hypothesis,
                "max_report_chars": max_chars, "generator_settings": dict(generator_settings or {})}
    identity = provenance.stable_hash({"dataset": adapter.describe(), "shard": list(shard), "settings": settings,
                                       "generator": callable_name(fn), "model": model,
                                       "samples": [s.sample_id for s in samples]})
    out_pairs, out_drops = Path(out_pairs), Path(out_drops)
    if out_pairs.is_file() and out_drops.is_file() and io.read_provenance(out_pairs).get("identity") == identity:
        log.info("shard %s of %s already generated (%s)", shard[0], shard[1], out_pairs)
        return io.read_parquet(out_pairs), io.read_text_table(out_drops)

    progress = _progress_path(out_pairs)
    done = _read_progress(progress, identity)
    if done:
        log.info("resuming shard %s of %s: %d answers already generated", shard[0], shard[1], len(done))
        handle = open(progress, "a", encoding="utf-8")
    else:
        progress.parent.mkdir(parents=True, exist_ok=True)
        handle = open(progress, "w", encoding="utf-8")
        handle.write(json.dumps({"identity": identity}) + "\n")
        handle.flush()

    def on_batch(finished):
        for r in finished:
            handle.write(json.dumps({"sample_id": r["sample_id"], "hypothesis": r["hypothesis"]}) + "\n")
        handle.flush()
        os.fsync(handle.fileno())

    try:
        records, unmatched = run_generation(
            samples, fn, task=task, ref_section=ref_section, use_indication=use_indication,
            indication_section=indication_section, batch_size=batch_size, num_workers=num_workers,
            image_format=image_format, max_images=max_images, positions=positions, done=done, on_batch=on_batch)
    finally:
        handle.close()
    pairs, drops = to_pairs(records, unmatched, empty_hypothesis=empty_hypothesis, max_chars=max_chars)
    prov = provenance.record(
        "pairs", dataset=adapter.name, split=adapter.split, model=model or callable_name(fn), format="generated",
        sources=adapter.describe(), ref_section=settings["ref_section"], empty_hypothesis=empty_hypothesis,
        max_report_chars=max_chars, n_pairs=len(pairs), n_listed=len(drops), identity=identity,
        shard={"index": int(shard[0]), "count": int(shard[1])}, generation=settings, generator=callable_name(fn),
        generator_description=_description(fn),
    )
    log.info("%s shard %s of %s: %d samples, %d pairs, %d listed in the drop file", adapter.name, shard[0], shard[1],
             len(samples), len(pairs), len(drops))
    io.write_csv(drops, out_drops)
    io.write_parquet(pairs, out_pairs, prov)
    progress.unlink(missing_ok=True)
    return pairs, drops


def _description(fn) -> dict | None:
    """What a backbone says about itself (backend, package versions, settings); None for a user's callable."""
    describe = getattr(fn, "describe", None)
    return describe() if callable(describe) else None


def merge(*, pair_paths, drop_paths, out_pairs, out_drops):
    """Concatenate generated shards (in shard order) into one pairs file and one drop file."""
    import pandas as pd

    from radrank.errors import InputError

    parts = [io.read_parquet(p) for p in pair_paths]
    # An all-dropped shard's empty columns have no string type; leave them out so the types stay the shards'.
    pairs = pd.concat([p for p in parts if len(p)] or parts[:1], ignore_index=True)
    drops = pd.concat([io.read_text_table(p) for p in drop_paths], ignore_index=True)
    if pairs["sample_id"].duplicated().any():
        raise InputError(pair_paths[0], "shards overlap: a sample id appears in more than one shard",
                         field="sample_id")
    if not pairs["study_id"].is_monotonic_increasing:
        pairs = pairs.sort_values("study_id", kind="stable").reset_index(drop=True)
    prov = io.read_provenance(pair_paths[0])
    prov.update(n_pairs=len(pairs), n_listed=len(drops), shard={"count": len(pair_paths), "merged": True})
    prov.pop("identity", None)
    if pairs.empty:
        raise InputError(pair_paths[0], f"no scorable pair in {len(pair_paths)} shards ({len(drops)} listed)")
    io.write_csv(drops, out_drops)
    io.write_parquet(pairs, out_pairs, prov)
    return pairs, drops

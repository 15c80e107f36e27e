"""What a generation backbone declares, the two call contracts, and the machinery recipes share.

A backbone module defines ``SPEC`` (a :class:`BackboneSpec`) and
``load(settings, trust_remote_code_allow_list=(), task="report")`` returning

* for ``task="report"`` a *generator*: ``generator(imgs, indications=None) -> list[str]``;
* for ``task="vqa"`` (backbones whose ``SPEC.tasks`` has it) an *answerer*:
  ``answerer(imgs, questions) -> list[str]``;

where ``imgs`` is a list with one entry per sample, each entry a list of that
sample's images (PIL images; a backbone whose ``SPEC.inputs`` is ``"paths"``
also takes image file paths, see :mod:`radrank.backbones.chexagent2`), and
``indications`` is None or a list of one indication text (or None) per sample.
The indication is the only text of the reference a generator ever sees — the
caller passes :func:`radrank.datasets.base.indication_of` of the report (never the
report body), and a backbone puts it in its prompt only when its ``use_indication``
setting is on.

User-supplied generators follow the same contract; older one-argument
generators (``generator(imgs)``) are still accepted: :func:`accepts_indications`
tells them apart by signature and :func:`as_generator` wraps either kind into
the two-argument form, checking what comes back.

Rules every recipe follows (and the tests check on tiny random models):

* weights are resolved *before* torch or transformers is imported, through the one
  resolver (:func:`radrank.runtime.resolve`, :func:`resolve_models`): a model that
  is neither a local path nor in the Hugging Face cache fails at once with
  :class:`~radrank.errors.MissingWeightsError` naming the config key
  (``backbone_settings.<backbone>.<setting>``) that points at a local copy; what
  is resolved is what :func:`weight_refs` declares, so the workflow's load-time
  check (:func:`radrank.backbones.weights`) and the job never disagree;
* ``trust_remote_code`` is passed as True only for backbones whose checkpoints
  need it, and only when the configured model (the id or path, as written in the
  config) is on the config allow-list (:func:`radrank.runtime.allows_remote_code`);
  otherwise loading stops with :class:`~radrank.errors.ConfigError`;
* one device per job: the model is moved whole to ``device`` (``"auto"``: the first
  visible CUDA device, i.e. the one SLURM's ``--gpus=1`` exposes, else the CPU),
  never spread with ``device_map="auto"``;
* batched greedy decoding (``do_sample=False``, one beam), prompts left-padded,
  at most ``batch_size`` samples per ``generate`` call, outputs in input order.
"""

from __future__ import annotations

import inspect
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from radrank.devices import DTYPES, check_device, device_of, dtype_of
from radrank.errors import ConfigError
from radrank.metrics.base import Resources
from radrank.runtime import Resolved, Runtime, WeightRef, allows_remote_code
from radrank.text import clean, normalize_whitespace

log = logging.getLogger("radrank")

TASKS = ("report", "vqa")
CONFIG_KEY = "backbone_settings"  # config mapping of per-backbone settings: backbone_settings.<name>.<setting>
ALLOW_LIST_KEY = "trust_remote_code"  # config list of model ids / paths allowed to run their own code

class BackboneUnavailable(RuntimeError):
    """A backbone's own software is not installed in this environment."""


@dataclass(frozen=True)
class BackboneSpec:
    name: str
    description: str
    env: str  # environment family (envs/requirements/<env>.in)
    model: str  # default model id (Hugging Face id)
    settings: dict = field(default_factory=dict)  # defaults; every key a user may set
    resources: Resources = field(default_factory=lambda: Resources(mem_mb=32000, runtime_min=240, threads=4,
                                                                   gpu=1))
    tasks: tuple[str, ...] = ("report",)  # "report" (generator) and/or "vqa" (answerer)
    inputs: str = "pil"  # what each sample's image list holds: "pil" images, or "paths" (file paths or PIL)
    remote_code: bool = False  # the checkpoint runs its own code (needs the trust_remote_code allow-list)
    weights: tuple[str, ...] = ("model",)  # settings that name model weights to resolve
    packages: tuple[str, ...] = ("torch", "transformers")  # distributions whose versions provenance records
    version: str = "1"  # bump when our recipe changes outputs
    status: str = "implemented"
    notes: str = ""
    vllm: bool = False  # vLLM implements the architecture: `backend: vllm` serves it (radrank.backbones.vllm_recipe)
    vllm_note: str = ""  # when it does not: why (the refusal names it)
    # check(merged settings, where): the backbone's own rules across settings, raising a ConfigError that names
    # <where>.<key>; run with the generic checks when the workflow loads
    check: Callable[[dict, str], None] | None = field(default=None, compare=False)


# --- settings -------------------------------------------------------------------------------------

BACKENDS = ("hf", "vllm")
MODEL_IMPLS = ("auto", "vllm", "transformers")
DEFAULT_SAMPLES_PER_CALL = 8  # a generation job's samples per generator call when nothing else says

# The vLLM engine's settings of a backbone vLLM can serve (SPEC.vllm), with defaults for image prompts; the
# judges' are radrank.runtime.generators.VLLMSettings. Only backend vllm reads them (radrank.backbones.vllm_recipe).
VLLM_GENERATION_SETTINGS = {
    "backend": "hf",  # hf (transformers generate) or vllm
    "max_model_len": 8192,  # prompt (instruction + every image's tokens) + answer, per sequence
    "gpu_memory_utilization": 0.9,  # share of each GPU vLLM may take (weights + KV cache)
    "tensor_parallel_size": 1,  # GPUs per engine (the SLURM job requests this many)
    "max_num_seqs": 256,  # sequences decoded together (continuous batching)
    "enforce_eager": "auto",  # auto: CUDA graphs on CUDA, eager on the CPU
    "cpu_kv_cache_gb": 4.0,  # CPU build only: KV cache size
    "model_impl": "auto",  # auto, vllm (vLLM's own model code) or transformers (vLLM's Transformers backend)
    "vllm_max_images": 16,  # images per prompt vLLM admits when max_images is not set
}

# Settings that change only speed, memory or placement, never a generated report (as the judges' speed settings,
# radrank.metrics.judge.JudgeSettings / VLLMSettings): a generation job's identity leaves them out, so changing one
# reruns no shard.
SPEED_SETTINGS = ("device", "batch_size", "gpu_memory_utilization", "tensor_parallel_size", "max_num_seqs",
                  "enforce_eager", "cpu_kv_cache_gb")

POSITIVE_INTS = ("batch_size", "max_new_tokens", "vqa_max_new_tokens")
NULLABLE_POSITIVE_INTS = ("max_images", "tensor_parallel_size", "max_num_seqs", "vllm_max_images", "max_model_len")
AUTO_OR_BOOL = ("enforce_eager",)


def _named(where: str | None, key: str) -> str:
    return f"{where}.{key}" if where else key


def backend_of(settings: dict, where: str | None = None) -> str:
    """The generation backend a backbone's settings ask for (``hf`` when unset)."""
    backend = str(settings.get("backend") or "hf").lower()
    if backend not in BACKENDS:
        raise ConfigError(f"{_named(where, 'backend')} must be one of {list(BACKENDS)}, "
                          f"not {settings.get('backend')!r}")
    return backend


def uses_vllm(settings: dict | None) -> bool:
    return backend_of(settings or {}) == "vllm"


def gpus_of(settings: dict | None, default: int) -> int:
    """GPUs a generation job requests: ``tensor_parallel_size`` on vLLM, else the backbone's ``default``."""
    if uses_vllm(settings):
        return max(1, int((settings or {}).get("tensor_parallel_size") or 1))
    return default


def model_impl_of_value(setting, where: str | None = None) -> str:
    value = str(setting or "auto").lower()
    if value not in MODEL_IMPLS:
        raise ConfigError(f"{_named(where, 'model_impl')} must be one of {list(MODEL_IMPLS)}, not {setting!r}")
    return value


def _check_value(where: str, key: str, default, value) -> None:
    """ConfigError naming ``<where>.<key>`` unless ``value`` has the kind of the setting's default."""
    name = f"{where}.{key}"
    if key in POSITIVE_INTS or key in NULLABLE_POSITIVE_INTS:
        nullable = key in NULLABLE_POSITIVE_INTS
        if (value is None and nullable) or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
            return
        raise ConfigError(f"{name} must be a positive integer{' or null' if nullable else ''}, not {value!r}")
    if key in AUTO_OR_BOOL:
        ok, kind = value == "auto" or isinstance(value, bool), "auto, true or false"
    elif isinstance(default, bool):
        ok, kind = isinstance(value, bool), "true or false"
    elif isinstance(default, (int, float)):
        ok, kind = isinstance(value, (int, float)) and not isinstance(value, bool), "a number"
    elif isinstance(default, str):
        ok, kind = isinstance(value, str), "a string"
    elif isinstance(default, (list, tuple)):
        ok, kind = isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value), "a list of strings"
    else:  # default None: an optional text (revision, image_dir, impression_prompt)
        ok, kind = value is None or isinstance(value, str), "a string or null"
    if not ok:
        raise ConfigError(f"{name} must be {kind}, not {value!r}")


def merge_settings(spec: BackboneSpec, settings: dict | None, where: str | None = None) -> dict:
    """``spec.settings`` updated with ``settings``, checked: an unknown key, a value of the wrong kind or a
    backend the backbone lacks is a :class:`ConfigError` naming ``<where>.<key>`` (``where`` defaults to
    ``backbone_settings.<backbone>``)."""
    where = where or f"{CONFIG_KEY}.{spec.name}"
    settings = dict(settings or {})
    if not spec.vllm and "backend" in settings:
        if backend_of(settings, where) == "vllm":
            why = spec.vllm_note or "vLLM has no implementation of its architecture"
            raise ConfigError(f"backbone {spec.name!r} cannot run on vLLM: {why}. Remove {where}.backend (or set it "
                              f"to hf)")
        settings.pop("backend")  # hf: the only backend of this backbone
    unknown = sorted(set(settings) - set(spec.settings))
    if unknown:
        raise ConfigError(f"backbone {spec.name!r} has no setting(s) {unknown} "
                          f"({', '.join(f'{where}.{k}' for k in unknown)}); known: {sorted(spec.settings)}")
    merged = {**spec.settings, **settings}
    for key, value in settings.items():
        _check_value(where, key, spec.settings[key], value)
    for key in spec.weights:
        if not merged.get(key):
            raise ConfigError(f"{where}.{key} is empty")
    check_device(merged["device"], f"{where}.device")
    if str(merged["dtype"]).lower() not in ("auto", *DTYPES):
        raise ConfigError(f"{where}.dtype must be auto, fp32, bf16 or fp16, not {merged['dtype']!r}")
    if spec.vllm:
        backend_of(merged, where)
        model_impl_of_value(merged.get("model_impl"), where)
    if spec.check is not None:
        spec.check(merged, where)
    return merged


def config_key(backbone: str, setting: str) -> str:
    return f"{CONFIG_KEY}.{backbone}.{setting}"


def check_task(spec: BackboneSpec, task: str) -> None:
    if task not in spec.tasks:
        raise ConfigError(f"backbone {spec.name!r} does not support task {task!r} (it supports: "
                          f"{', '.join(spec.tasks)})")


def prepare(spec: BackboneSpec, settings: dict | None, task: str) -> dict:
    """What every backbone's ``load`` does first: its settings merged and checked, and the task checked."""
    merged = merge_settings(spec, settings)
    check_task(spec, task)
    return merged


def samples_per_call(spec: BackboneSpec, settings: dict | None, batch_size: int | None) -> int:
    """A generation job's samples per generator call: ``batch_size``, else 8 — or, on vLLM, enough samples
    to fill its continuous batch (``max_num_seqs``), since vLLM schedules them itself."""
    if batch_size is not None:
        return int(batch_size)
    if spec.vllm and uses_vllm(settings):
        return int((settings or {}).get("max_num_seqs") or VLLM_GENERATION_SETTINGS["max_num_seqs"])
    return DEFAULT_SAMPLES_PER_CALL


# --- weights and remote code ----------------------------------------------------------------------


def weight_refs(spec: BackboneSpec, settings: dict | None, owner: str, key_prefix: str) -> tuple[WeightRef, ...]:
    """The models loading ``spec`` with ``settings`` resolves: for each setting of ``spec.weights`` a directory
    with config.json (the loaders find the weight files in it), named ``<key_prefix>.<setting>``; the hub
    ``revision`` setting applies to ``model``."""
    merged = {**spec.settings, **(settings or {})}
    return tuple(WeightRef(owner, f"{key_prefix}.{setting}", merged[setting], need="config",
                           revision=merged.get("revision") if setting == "model" else None)
                 for setting in spec.weights)


def resolve_models(spec: BackboneSpec, settings: dict, runtime: Runtime | None = None) -> dict[str, Resolved]:
    """Setting -> local files of every model :func:`weight_refs` names (``backbone_settings.<backbone>.<setting>``
    in the messages), resolved before torch or transformers is imported: a model that is neither a local
    directory nor in the Hugging Face cache fails at once with :class:`~radrank.errors.MissingWeightsError`."""
    runtime = runtime if runtime is not None else Runtime()
    refs = weight_refs(spec, settings, f"backbone {spec.name!r}", f"{CONFIG_KEY}.{spec.name}")
    return {ref.setting: runtime.resolve(ref) for ref in refs}


def remote_code_allowed(spec: BackboneSpec, model: str, allow_list) -> bool:
    """True when ``spec`` needs remote code and ``model`` is allowed to run it; ConfigError when it is not."""
    if not spec.remote_code:
        return False
    if not allows_remote_code(model, allow_list):
        raise ConfigError(
            f"backbone {spec.name!r}: model {model!r} runs code shipped with its checkpoint "
            f"(trust_remote_code). Review that code, then allow it by adding {model!r} to the config list "
            f"`{ALLOW_LIST_KEY}` (the id or path exactly as written in {config_key(spec.name, 'model')}).")
    return True


def identity(spec: BackboneSpec, settings: dict | None, allow_list=()) -> dict:
    """What a generation job's outputs depend on besides the dataset and the job's own fields: the backbone, its
    recipe version, its settings without :data:`SPEED_SETTINGS`, and — for a backbone that runs its checkpoint's
    code — whether *its* model is on the ``trust_remote_code`` allow-list (a yes/no, never the list: adding an
    unrelated id reruns nothing)."""
    merged = {**spec.settings, **(settings or {})}
    out = {"backbone": spec.name, "version": spec.version,
           "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in sorted(merged.items())
                        if k not in SPEED_SETTINGS}}
    if spec.remote_code:
        out["trust_remote_code"] = allows_remote_code(merged.get("model"), allow_list)
    return out


# --- torch helpers (imported lazily) ---------------------------------------------------------------


def transformers_major() -> int:
    import transformers

    return int(transformers.__version__.split(".")[0])


def dtype_kwargs(dtype) -> dict:
    """``from_pretrained``'s dtype keyword (``dtype`` from transformers 4.56, ``torch_dtype`` before)."""
    import transformers

    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return {"dtype": dtype} if (major, minor) >= (4, 56) else {"torch_dtype": dtype}


def greedy_config(model, max_new_tokens: int, pad_token_id=None, eos_token_id=None):
    """A copy of the model's generation config set to greedy decoding (sampling knobs cleared)."""
    import copy

    config = copy.deepcopy(model.generation_config)
    config.do_sample = False
    config.num_beams = 1
    config.max_new_tokens = int(max_new_tokens)
    config.max_length = None
    for knob in ("temperature", "top_p", "top_k", "min_p", "typical_p"):
        if hasattr(config, knob):
            setattr(config, knob, None)
    if eos_token_id is not None:
        config.eos_token_id = eos_token_id
    if pad_token_id is not None:
        config.pad_token_id = pad_token_id
    elif config.pad_token_id is None:
        eos = config.eos_token_id
        config.pad_token_id = eos[0] if isinstance(eos, (list, tuple)) and eos else eos
    config.use_cache = True
    return config


def left_pad(sequences, pad_id: int):
    """(input_ids, attention_mask) int64 tensors of token-id lists, left-padded with ``pad_id``."""
    import torch

    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), int(pad_id), dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for i, s in enumerate(sequences):
        if len(s):
            ids[i, width - len(s):] = torch.as_tensor(list(s), dtype=torch.long)
            mask[i, width - len(s):] = 1
    return ids, mask


def count_new_tokens(new_ids, pad_id, eos_ids) -> int:
    """Generated tokens in ``new_ids`` (batch, steps): up to and including each row's first EOS."""
    import torch

    eos = torch.as_tensor(sorted(set(eos_ids if isinstance(eos_ids, (list, tuple, set)) else
                                     [eos_ids] if eos_ids is not None else [])), dtype=new_ids.dtype)
    total = 0
    for row in new_ids.cpu():
        hit = torch.nonzero(torch.isin(row, eos)).flatten() if len(eos) else torch.tensor([])
        total += int(hit[0]) + 1 if len(hit) else len(row)
    return total


# --- prompts ----------------------------------------------------------------------------------------


def indication_text(value) -> str | None:
    """An indication as one line of text, or None when it is missing (None, NaN, blank, "nan", "___")."""
    if value is None:
        return None
    text = normalize_whitespace(clean(value))
    return text or None


def fill(template: str, **values) -> str:
    """``template`` with ``{name}`` fields filled; braces in the values are kept as they are."""
    out = template
    for name, value in values.items():
        out = out.replace("{" + name + "}", "" if value is None else str(value))
    return out


# --- image files (backbones that read images from paths) -----------------------------------------


class ImageFiles:
    """Image file paths for a backbone that opens images itself (``SPEC.inputs == "paths"``).

    :meth:`path_of` takes a PIL image (saved as PNG), a path to a raster image
    (used as is, absolute) or a path to a DICOM file (windowed and converted with
    :func:`radrank.images.load_pil`, saved as PNG). PNGs go to a private
    temporary folder removed by :meth:`cleanup` (the recipes call it after
    every batch).
    """

    def __init__(self, directory=None, prefix: str = "radrank-img-"):
        import tempfile

        self.parent = directory
        self.prefix = prefix
        self.directory = None
        self.count = 0
        self._tempfile = tempfile

    def _new(self) -> Path:
        if self.directory is None:
            if self.parent is not None:
                Path(self.parent).mkdir(parents=True, exist_ok=True)
            self.directory = Path(self._tempfile.mkdtemp(prefix=self.prefix, dir=self.parent))
        self.count += 1
        return self.directory / f"{self.count:06d}.png"

    def path_of(self, item) -> str:
        if isinstance(item, (str, os.PathLike)):
            from radrank.images import is_dicom

            path = Path(item)
            if not path.is_file():
                raise FileNotFoundError(f"image {path} does not exist")
            if not is_dicom(path):
                return str(path.resolve())
            from radrank.images import load_pil

            item = load_pil(path)
        if not hasattr(item, "save"):
            raise TypeError(f"an image must be a PIL image or a file path, not {type(item).__name__}")
        target = self._new()
        item.save(target, format="PNG")
        return str(target)

    def cleanup(self):
        import shutil

        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None


# --- the contracts ----------------------------------------------------------------------------------


def _check_imgs(imgs, n_texts: int | None, what: str):
    if isinstance(imgs, (str, bytes)) or not hasattr(imgs, "__len__"):
        raise TypeError(f"imgs must be a list with one list of images per sample, not {type(imgs).__name__}")
    imgs = list(imgs)
    for i, sample in enumerate(imgs):
        if isinstance(sample, (str, bytes, os.PathLike)) or not isinstance(sample, (list, tuple)):
            raise TypeError(f"imgs[{i}] must be a list of that sample's images, not {type(sample).__name__}")
        if len(sample) == 0:
            raise ValueError(f"imgs[{i}] has no image")
    if n_texts is not None and n_texts != len(imgs):
        raise ValueError(f"{len(imgs)} samples of images but {n_texts} {what}")
    return imgs


def check_outputs(outputs, n: int, who: str = "generator") -> list[str]:
    """``outputs`` as a list of ``n`` strings, or a TypeError / ValueError saying what is wrong."""
    if isinstance(outputs, (str, bytes)) or not isinstance(outputs, (list, tuple)):
        raise TypeError(f"{who} must return a list of strings, not {type(outputs).__name__}")
    outputs = list(outputs)
    if len(outputs) != n:
        raise ValueError(f"{who} returned {len(outputs)} texts for {n} samples")
    bad = [i for i, o in enumerate(outputs) if not isinstance(o, str)]
    if bad:
        raise TypeError(f"{who} returned non-string output(s) at {bad[:5]} "
                        f"(first: {type(outputs[bad[0]]).__name__})")
    bad = [i for i, o in enumerate(outputs) if not _encodable(o)]
    if bad:  # half of a surrogate pair is not text: no parquet or CSV file can store it
        first = next(c for c in outputs[bad[0]] if "\ud800" <= c <= "\udfff")
        raise ValueError(f"{who} returned text holding a lone UTF-16 surrogate at {bad[:5]} (first: "
                         f"\\u{ord(first):04x} at character {outputs[bad[0]].index(first)}): half of a surrogate "
                         "pair is not text, and no file can store it; return whole characters (decode bytes "
                         "with errors='replace')")
    return outputs


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _signature(fn):
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        call = getattr(fn, "__call__", None)
        return inspect.signature(call) if call is not None and call is not fn else None


def accepts_indications(fn) -> bool:
    """True when ``fn`` follows the two-argument contract ``fn(imgs, indications=None)``.

    A generator takes indications when its signature has a second positional
    parameter, ``*args``, or a parameter named ``indications`` (``**kwargs`` alone
    counts too: it is called with ``indications=`` then). A one-argument generator
    ``fn(imgs)`` is the legacy form. Callables whose signature cannot be read are
    taken as legacy.
    """
    sig = _signature(fn)
    if sig is None:
        return False
    params = list(sig.parameters.values())
    if any(p.kind is p.VAR_POSITIONAL for p in params) or "indications" in sig.parameters:
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) >= 2:
        return True
    return any(p.kind is p.VAR_KEYWORD for p in params)


def _keyword_only_indications(fn) -> bool:
    sig = _signature(fn)
    if sig is None:
        return False
    p = sig.parameters.get("indications")
    if p is not None:
        return p.kind is p.KEYWORD_ONLY
    params = list(sig.parameters.values())
    positional = [q for q in params if q.kind in (q.POSITIONAL_ONLY, q.POSITIONAL_OR_KEYWORD)]
    return (len(positional) < 2 and not any(q.kind is q.VAR_POSITIONAL for q in params)
            and any(q.kind is q.VAR_KEYWORD for q in params))


class CheckedGenerator:
    """Any generator (two-argument or legacy one-argument) behind the two-argument contract.

    Validates the call (one image list per sample, as many indications as
    samples) and the outputs (one string per sample). A legacy generator never
    sees the indications; ``legacy`` says which kind was wrapped.
    """

    def __init__(self, fn):
        self.fn = fn
        self.legacy = not accepts_indications(fn)
        self._keyword = not self.legacy and _keyword_only_indications(fn)

    def __call__(self, imgs, indications=None) -> list[str]:
        imgs = _check_imgs(imgs, None if indications is None else len(list(indications)), "indications")
        if indications is not None:
            indications = list(indications)
        if self.legacy:
            out = self.fn(imgs)
        elif self._keyword:
            out = self.fn(imgs, indications=indications)
        else:
            out = self.fn(imgs, indications)
        return check_outputs(out, len(imgs), "generator")

    def __getattr__(self, name):  # provenance, last_prompts, ... of the wrapped generator
        if name == "fn":
            raise AttributeError(name)
        return getattr(self.fn, name)


class CheckedAnswerer:
    """Any answerer ``fn(imgs, questions)`` with the call and its outputs validated."""

    def __init__(self, fn):
        sig = _signature(fn)
        if sig is not None:
            params = list(sig.parameters.values())
            positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
            if len(positional) < 2 and not any(p.kind is p.VAR_POSITIONAL for p in params):
                raise TypeError("an answerer takes (imgs, questions); this callable takes fewer arguments")
        self.fn = fn

    def __call__(self, imgs, questions) -> list[str]:
        if questions is None:
            raise ValueError("an answerer needs one question per sample")
        questions = list(questions)
        imgs = _check_imgs(imgs, len(questions), "questions")
        return check_outputs(self.fn(imgs, questions), len(imgs), "answerer")

    def __getattr__(self, name):
        if name == "fn":
            raise AttributeError(name)
        return getattr(self.fn, name)


def as_generator(fn) -> CheckedGenerator:
    """``fn`` (two-argument or legacy one-argument generator) as a checked two-argument generator."""
    return fn if isinstance(fn, CheckedGenerator) else CheckedGenerator(fn)


def as_answerer(fn) -> CheckedAnswerer:
    return fn if isinstance(fn, CheckedAnswerer) else CheckedAnswerer(fn)


# --- recipes ------------------------------------------------------------------------------------------


class Recipe:
    """Shared driver of the backbones' generators and answerers.

    Subclasses implement :meth:`_generate` (one batch of ``(images, prompt)``
    items -> texts) and :meth:`report_prompt` / :meth:`vqa_prompt`. :meth:`run`
    validates the call, builds every sample's prompt, runs batches of at most
    ``batch_size`` samples and returns the texts in input order. Backbones hand
    out :class:`Generator` (``task="report"``) or :class:`Answerer` (``"vqa"``)
    objects around a recipe (:meth:`callable`).
    ``last_prompts`` keeps the prompts of the latest call (what the model was
    asked), ``rendered`` the model-ready text of each sample (chat template
    applied; several calls' texts joined by a blank line), in input order,
    ``stats`` the call's counts and timings. ``resolved`` maps each weights setting
    (``SPEC.weights``) to its :class:`~radrank.runtime.Resolved` files (:func:`resolve_models`);
    ``model_path`` is the ``model`` setting's directory.
    """

    def __init__(self, spec: BackboneSpec, settings: dict, task: str, *, resolved: dict | None = None,
                 device="cpu"):
        check_task(spec, task)
        self.spec, self.settings, self.task = spec, settings, task
        self.resolved: dict[str, Resolved] = dict(resolved or {})
        self.model_path = self.resolved["model"].directory if "model" in self.resolved else None
        self.device = device
        self.last_prompts: list = []
        self.rendered: list = []
        self.stats: dict = {}

    # -- what subclasses provide
    def report_prompt(self, indication: str | None):
        raise NotImplementedError

    def vqa_prompt(self, question: str):
        raise NotImplementedError

    def _generate(self, batch) -> list[str]:
        raise NotImplementedError

    def context_of(self, value):
        """What a sample's prompt is built from: its indication text when ``use_indication`` is on
        (a mapping's ``"indication"`` entry), else None."""
        if not self.settings.get("use_indication"):
            return None
        if isinstance(value, dict):
            value = value.get("indication")
        return indication_text(value)

    def note(self, position: int, text: str):
        """Record the model-ready text of the batch's ``position``-th sample (joined when several)."""
        i = self._chunk[position]
        self.rendered[i] = text if self.rendered[i] is None else self.rendered[i] + "\n\n" + text

    def batch_order(self, items) -> list:
        """The order samples are batched in (a permutation; outputs are returned in input order)."""
        return range(len(items))

    def prepare_images(self, images: list) -> list:
        """A sample's images as the model takes them (default: the first ``max_images``)."""
        limit = self.settings.get("max_images")
        return list(images)[:limit] if limit else list(images)

    def batch_size(self) -> int:
        """Samples per :meth:`_generate` call (the ``batch_size`` setting)."""
        return int(self.settings["batch_size"])

    def callable(self):
        """The contract object of this recipe's task: a :class:`Generator` or an :class:`Answerer`."""
        return Answerer(self) if self.task == "vqa" else Generator(self)

    # -- the contract
    def run(self, imgs, texts=None) -> list[str]:
        if self.task == "vqa":
            if texts is None:
                raise ValueError("an answerer needs one question per sample")
            texts = list(texts)
            imgs = _check_imgs(imgs, len(texts), "questions")
            prompts = [self.vqa_prompt(normalize_whitespace(clean(q))) for q in texts]
        else:
            texts = None if texts is None else list(texts)
            imgs = _check_imgs(imgs, None if texts is None else len(texts), "indications")
            prompts = [self.report_prompt(self.context_of(t)) for t in (texts or [None] * len(imgs))]
        items = [(self.prepare_images(im), p) for im, p in zip(imgs, prompts)]
        self.last_prompts = prompts
        self.rendered = [None] * len(items)
        size = self.batch_size()
        start = time.perf_counter()
        self.stats = {"samples": len(items), "images": sum(len(i[0]) for i in items), "batches": 0,
                      "new_tokens": 0}
        order = list(self.batch_order(items))
        if sorted(order) != list(range(len(items))):
            raise RuntimeError(f"backbone {self.spec.name!r}: batch_order is not a permutation")
        out: list = [None] * len(items)
        for lo in range(0, len(items), size):
            chunk = order[lo:lo + size]
            self._chunk = chunk
            texts = self._generate([items[i] for i in chunk])
            if len(texts) != len(chunk):
                raise RuntimeError(f"backbone {self.spec.name!r} returned {len(texts)} texts for a batch of "
                                   f"{len(chunk)}")
            for i, text in zip(chunk, texts):
                out[i] = text
            self.stats["batches"] += 1
        self.stats["seconds"] = time.perf_counter() - start
        return check_outputs(out, len(items), f"backbone {self.spec.name!r}")

    def generate_new_tokens(self, enc: dict):
        """Generate from a processor batch already on the device (pixel values cast to the model's
        dtype here), greedily; count the new tokens; return them (the prompt cut off)."""
        import torch

        if "pixel_values" in enc:
            enc["pixel_values"] = enc["pixel_values"].to(self.dtype)
        width = enc["input_ids"].shape[1]
        with torch.inference_mode():
            out = self.model.generate(**enc, generation_config=self.generation_config)
        new = out[:, width:]
        self.stats["new_tokens"] += count_new_tokens(new, self.generation_config.pad_token_id,
                                                     self.generation_config.eos_token_id)
        return new

    def describe(self) -> dict:
        """Backbone, recipe version, task, settings, device, backend and package versions (cheap: the
        generation job records it with the pairs)."""
        from importlib import metadata

        versions = {}
        for name in self.spec.packages:
            try:
                versions[name] = metadata.version(name)
            except metadata.PackageNotFoundError:
                versions[name] = None
        return {"backbone": self.spec.name, "version": self.spec.version, "task": self.task,
                "settings": dict(self.settings), "device": str(self.device), "backend": "hf", "packages": versions}

    def provenance(self) -> dict:
        """:meth:`describe` and, under each weights setting (``model``, ...), that model's id, hub revision and
        sha256 of its files (the weights are read once per process)."""
        prov = self.describe()
        for setting, resolved in self.resolved.items():
            prov[setting] = resolved.provenance()
        return prov


class _Bound:
    """A contract object around a :class:`Recipe`; the recipe's attributes (``settings``, ``last_prompts``,
    ``stats``, ``provenance()``, ``model``, ``processor`` ...) are reachable on it."""

    kind = ""

    def __init__(self, recipe: Recipe):
        self.recipe = recipe

    def __getattr__(self, name):
        if name == "recipe":
            raise AttributeError(name)
        return getattr(self.recipe, name)

    def __repr__(self):
        return f"<radrank {self.kind} {self.recipe.spec.name} ({self.recipe.settings.get('model')})>"


class Generator(_Bound):
    """``generator(imgs, indications=None) -> list[str]`` around a :class:`Recipe`."""

    kind = "generator"

    def __call__(self, imgs, indications=None) -> list[str]:
        return self.recipe.run(imgs, indications)


class Answerer(_Bound):
    """``answerer(imgs, questions) -> list[str]`` around a :class:`Recipe`."""

    kind = "answerer"

    def __call__(self, imgs, questions) -> list[str]:
        return self.recipe.run(imgs, questions)


def placement(spec: BackboneSpec, settings: dict) -> tuple:
    """(device, torch dtype) of a backbone's job from its ``device`` and ``dtype`` settings, logged."""
    device = device_of(settings["device"])
    dtype = dtype_of(settings["dtype"], device)
    log_device(spec.name, device)
    return device, dtype


def log_device(name: str, device: str):
    """Log the device a job uses and how many CUDA devices it can see (one expected)."""
    import torch

    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    log.info("backbone %s: device %s (%d CUDA device(s) visible, CUDA_VISIBLE_DEVICES=%s)", name, device,
             visible, os.environ.get("CUDA_VISIBLE_DEVICES"))
    if visible > 1 and str(device).startswith("cuda"):
        log.warning("backbone %s: %d CUDA devices are visible; this job uses only %s (one device per job)",
                    name, visible, device if ":" in str(device) else "cuda:0")

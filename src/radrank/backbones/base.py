"""The backbone contract: one object per generation backbone, the two call contracts, and what recipes share.

A backbone is an instance of a :class:`Backbone` subclass, in one module (``BACKBONE``), registered by
name in :mod:`radrank.backbones`. It declares, as class attributes, ``name``, ``description``,
``family`` (its environment: ``envs/requirements/<family>.in``), ``tasks``, ``inputs``,
``remote_code``, ``weight_settings``, ``packages``, ``version``, ``default_resources``, and
``Settings`` — a frozen, typed :class:`BackboneSettings` subclass (:mod:`radrank.settings`): every
setting, its default, its type, and whether it changes the reports (``scored``) or only where and
how fast they are made (``speed``: device, batch size, vLLM placement). A backbone vLLM can serve has
:class:`VLLMBackboneSettings` (``backend`` and vLLM's engine settings, defined once in
:class:`radrank.runtime.generators.VLLMSettings` for the judges and the backbones). For a Settings
instance ``s`` it answers :meth:`Backbone.env`, :meth:`~Backbone.gpus`, :meth:`~Backbone.resources`,
:meth:`~Backbone.samples_per_call`, :meth:`~Backbone.weights` (exactly what loading resolves),
:meth:`~Backbone.identity` (what a generation job's rerun depends on) and :meth:`~Backbone.load`,
which returns

* for ``task="report"`` a *generator*: ``generator(imgs, indications=None) -> list[str]``;
* for ``task="vqa"`` (backbones whose ``tasks`` has it) an *answerer*:
  ``answerer(imgs, questions) -> list[str]``;

where ``imgs`` is a list with one entry per sample, each entry a list of that
sample's images (PIL images; a backbone whose ``inputs`` is ``"paths"``
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
  resolver (:func:`radrank.runtime.resolve`, :meth:`Backbone.resolve`): a model that
  is neither a local path nor in the Hugging Face cache fails at once with
  :class:`~radrank.errors.MissingWeightsError` naming the config key
  (``backbone_settings.<backbone>.<setting>``) that points at a local copy; what
  is resolved is what :meth:`Backbone.weights` declares, so the workflow's load-time
  check and the job never disagree;
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

import dataclasses
import inspect
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from radrank.devices import DEVICE_DOC, check_device, device_of, dtype_of
from radrank.errors import ConfigError
from radrank.metrics.base import Resources
from radrank.runtime import Resolved, Runtime, WeightRef, allows_remote_code
from radrank.runtime.generators import VLLMSettings
from radrank.runtime.loaders import VLLM_FAMILY
from radrank.settings import Settings as SettingsBase
from radrank.settings import field_specs, scored, speed
from radrank.text import clean, normalize_whitespace

log = logging.getLogger("radrank")

TASKS = ("report", "vqa")
CONFIG_KEY = "backbone_settings"  # config mapping of per-backbone settings: backbone_settings.<name>.<setting>
ALLOW_LIST_KEY = "trust_remote_code"  # config list of model ids / paths allowed to run their own code
DEFAULT_SAMPLES_PER_CALL = 8  # a generation job's samples per generator call when nothing else says
DTYPE_DOC = "model precision: auto (bf16 on CUDA, fp32 on the CPU), fp32, bf16 or fp16"


class BackboneUnavailable(RuntimeError):
    """A backbone's own software is not installed in this environment."""


# --- settings -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BackboneSettings(SettingsBase):
    """What every backbone is told; each backbone's ``Settings`` subclass sets its defaults and adds its own.
    ``scored`` settings change the reports (a generation job's identity holds them); ``speed`` ones only where
    and how fast (device, batching, vLLM placement)."""

    model: str = scored("", "the model: a Hugging Face id or a local directory")
    revision: str | None = scored(None, "hub revision (commit / tag) of model when it is an id (null: the cached "
                                        "/ newest snapshot)")
    dtype: Literal["auto", "fp32", "bf16", "fp16", "float32", "bfloat16", "float16"] = scored("auto", DTYPE_DOC)
    max_new_tokens: int = scored(300, "new tokens of a report at most (greedy decoding)", minimum=1)
    use_indication: bool = scored(False, "put the sample's indication into the prompt")
    max_images: int | None = scored(None, "images per sample (null: all, in the dataset's order)", minimum=1)
    device: str = speed("auto", DEVICE_DOC)
    batch_size: int = speed(8, "samples per generate call", minimum=1)

    def check(self, where):
        check_device(self.device, f"{where}.device")


@dataclass(frozen=True)
class VLLMBackboneSettings(BackboneSettings, VLLMSettings):
    """The settings of a backbone vLLM can serve: ``backend``, and vLLM's engine settings (the judges' too,
    :class:`radrank.runtime.generators.VLLMSettings`) with defaults for image prompts. Only backend vllm reads
    the engine settings (:mod:`radrank.backbones.vllm_recipe`)."""

    backend: Literal["hf", "vllm"] = scored("hf", "hf: transformers generate; vllm: vLLM's offline engine "
                                                  "(environment vllm) on the same prompts")
    max_model_len: int | None = scored(8192, "vllm: prompt (instruction + every image's tokens) + answer tokens "
                                             "per sequence (null: the model's)", minimum=1)
    cpu_kv_cache_gb: float = speed(4.0, "vllm CPU build only: KV cache size in GB", minimum=0.01)
    model_impl: Literal["auto", "vllm", "transformers"] = scored(
        "auto", "vllm: auto, vllm (vLLM's own model code) or transformers (vLLM's Transformers backend)")
    vllm_max_images: int = scored(16, "vllm: images per prompt the engine admits when max_images is not set",
                                  minimum=1)


# --- the backbone contract ------------------------------------------------------------------------------


class Backbone:
    """Base class of every generation backbone (see the module docstring)."""

    name: ClassVar[str]
    description: ClassVar[str]
    family: ClassVar[str]  # its environment: envs/requirements/<family>.in
    Settings: ClassVar[type[BackboneSettings]] = BackboneSettings
    tasks: ClassVar[tuple[str, ...]] = ("report",)  # "report" (generator) and/or "vqa" (answerer)
    inputs: ClassVar[str] = "pil"  # what each sample's image list holds: "pil" images, or "paths" (or PIL)
    remote_code: ClassVar[bool] = False  # the checkpoint runs its own code (needs the trust_remote_code allow-list)
    weight_settings: ClassVar[tuple[str, ...]] = ("model",)  # settings that name model weights to resolve
    packages: ClassVar[tuple[str, ...]] = ("torch", "transformers")  # distributions provenance records
    version: ClassVar[str] = "1"  # bumped when the recipe changes outputs
    status: ClassVar[str] = "implemented"
    default_resources: ClassVar[Resources] = Resources(mem_mb=32000, runtime_min=240, threads=4, gpu=1)
    vllm_note: ClassVar[str] = ""  # when vLLM cannot serve it: why (the refusal names it)

    def __repr__(self):
        return f"<backbone {self.name}>"

    @property
    def vllm(self) -> bool:
        """vLLM implements the architecture: ``backend: vllm`` serves it (its Settings have the vLLM settings)."""
        return issubclass(self.Settings, VLLMBackboneSettings)

    @property
    def model(self) -> str:
        """The default model (Hugging Face id)."""
        return field_specs(self.Settings)["model"].default

    def owner(self) -> str:
        return f"backbone {self.name!r}"

    def key(self, setting: str) -> str:
        return f"{CONFIG_KEY}.{self.name}.{setting}"

    # -- settings
    def settings(self, values: dict | None = None, where: str | None = None) -> BackboneSettings:
        """Typed settings from a config mapping over the defaults; a :class:`ConfigError` naming ``<where>.<key>``
        (``where`` defaults to ``backbone_settings.<backbone>``) for an unknown key, a value of the wrong kind, an
        empty model or a backend the backbone lacks."""
        where = where or f"{CONFIG_KEY}.{self.name}"
        values = dict(values or {})
        if not self.vllm and "backend" in values:
            backend = values.pop("backend")  # hf: the only backend of this backbone
            if backend == "vllm":
                why = self.vllm_note or "vLLM has no implementation of its architecture"
                raise ConfigError(f"backbone {self.name!r} cannot run on vLLM: {why}. Remove {where}.backend (or "
                                  "set it to hf)")
            if backend != "hf":
                raise SettingsBase.fail(where, "backend", f"{backend!r} is not allowed; backbone {self.name!r} runs on "
                                                      "'hf' only")
        s = self.Settings.build(values, where=where)
        for key in self.weight_settings:
            if not getattr(s, key):
                raise SettingsBase.fail(where, key, "is empty; name a Hugging Face id or a local directory")
        return s

    def coerce(self, settings) -> BackboneSettings:
        """``settings`` as this backbone's Settings (a mapping is checked into them; None: the defaults)."""
        return settings if isinstance(settings, self.Settings) else self.settings(settings or {})

    def uses_vllm(self, s: BackboneSettings) -> bool:
        return self.vllm and s.backend == "vllm"

    # -- where and how it runs
    def env(self, s: BackboneSettings) -> str:
        """The environment family a generation job runs in: the backbone's, or the vllm family on vLLM."""
        return VLLM_FAMILY if self.uses_vllm(self.coerce(s)) else self.family

    def resources(self, s: BackboneSettings) -> Resources:
        """What a generation job needs: on vLLM ``tensor_parallel_size`` GPUs, else the backbone's."""
        s = self.coerce(s)
        if self.uses_vllm(s):
            return dataclasses.replace(self.default_resources, gpu=s.tensor_parallel_size)
        return self.default_resources

    def gpus(self, s: BackboneSettings) -> int:
        return self.resources(s).gpu

    def samples_per_call(self, s: BackboneSettings, batch_size: int | None) -> int:
        """A generation job's samples per generator call: ``batch_size``, else 8 — or, on vLLM, enough samples
        to fill its continuous batch (``max_num_seqs``), since vLLM schedules them itself."""
        if batch_size is not None:
            return int(batch_size)
        s = self.coerce(s)
        return int(s.max_num_seqs) if self.uses_vllm(s) else DEFAULT_SAMPLES_PER_CALL

    # -- weights, remote code, identity
    def weights(self, s: BackboneSettings, owner: str | None = None, key: str | None = None) -> tuple[WeightRef, ...]:
        """The models :meth:`load` resolves with ``s``: for each of :attr:`weight_settings` a directory with
        config.json (the loaders find the weight files in it), owned by ``owner`` (default: the backbone) and
        named ``<key>.<setting>`` (``key`` default: ``backbone_settings.<backbone>``; a generation entry's is
        e.g. ``generation[0].settings``); the hub ``revision`` setting applies to ``model``. What the workflow's
        load-time check (:func:`radrank.runtime.available`) is given."""
        s = self.coerce(s)
        owner, key = owner or self.owner(), key or f"{CONFIG_KEY}.{self.name}"
        return tuple(WeightRef(owner, f"{key}.{setting}", getattr(s, setting), need="config",
                               revision=s.revision if setting == "model" else None)
                     for setting in self.weight_settings)

    def resolve(self, s: BackboneSettings, runtime: Runtime | None = None) -> dict[str, Resolved]:
        """Setting -> local files of every model :meth:`weights` names (``backbone_settings.<backbone>.<setting>``
        in the messages), resolved before torch or transformers is imported: a model that is neither a local
        directory nor in the Hugging Face cache fails at once with :class:`~radrank.errors.MissingWeightsError`."""
        runtime = runtime if runtime is not None else Runtime()
        return {ref.setting: runtime.resolve(ref) for ref in self.weights(s)}

    def remote_code_allowed(self, model: str, allow_list) -> bool:
        """True when the backbone needs remote code and ``model`` may run it; ConfigError when it may not."""
        if not self.remote_code:
            return False
        if not allows_remote_code(model, allow_list):
            raise ConfigError(
                f"backbone {self.name!r}: model {model!r} runs code shipped with its checkpoint "
                f"(trust_remote_code). Review that code, then allow it by adding {model!r} to the config list "
                f"`{ALLOW_LIST_KEY}` (the id or path exactly as written in {self.key('model')}).")
        return True

    def identity(self, s: BackboneSettings, allow_list=()) -> dict:
        """What a generation job's outputs depend on besides the dataset and the job's own fields: the backbone, its
        recipe version, its scored settings (never device, batch size or vLLM placement) and — for a backbone that
        runs its checkpoint's code — whether *its* model is on the ``trust_remote_code`` allow-list (a yes/no,
        never the list: adding an unrelated id reruns nothing)."""
        s = self.coerce(s)
        out = {"backbone": self.name, "version": self.version, "settings": dict(sorted(s.identity().items()))}
        if self.remote_code:
            out["trust_remote_code"] = allows_remote_code(s.model, allow_list)
        return out

    # -- generation
    def check_task(self, task: str) -> None:
        if task not in self.tasks:
            raise ConfigError(f"backbone {self.name!r} does not support task {task!r} (it supports: "
                              f"{', '.join(self.tasks)})")

    def prepare(self, settings, task: str, runtime: Runtime | None = None) -> tuple[BackboneSettings, dict]:
        """What every :meth:`load` does first: the settings checked into the backbone's Settings, the task checked,
        the weights resolved (:meth:`resolve`, before torch is imported)."""
        s = self.coerce(settings)
        self.check_task(task)
        return s, self.resolve(s, runtime)

    def load(self, settings=None, allow_list=(), task: str = "report", runtime: Runtime | None = None):
        """A generator (``task="report"``) or an answerer (``task="vqa"``) with ``settings`` (its Settings or a
        mapping); ``allow_list``: the config's ``trust_remote_code`` list; ``runtime`` records what is resolved."""
        raise NotImplementedError


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
    """Image file paths for a backbone that opens images itself (``Backbone.inputs == "paths"``).

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
    (:attr:`Backbone.weight_settings`) to its :class:`~radrank.runtime.Resolved` files (:meth:`Backbone.resolve`);
    ``model_path`` is the ``model`` setting's directory.
    """

    def __init__(self, backbone: Backbone, settings: BackboneSettings, task: str, *, resolved: dict | None = None,
                 device="cpu"):
        backbone.check_task(task)
        self.backbone, self.settings, self.task = backbone, backbone.coerce(settings), task
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
        if not self.settings.use_indication:
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
        limit = self.settings.max_images
        return list(images)[:limit] if limit else list(images)

    def batch_size(self) -> int:
        """Samples per :meth:`_generate` call (the ``batch_size`` setting)."""
        return int(self.settings.batch_size)

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
            raise RuntimeError(f"backbone {self.backbone.name!r}: batch_order is not a permutation")
        out: list = [None] * len(items)
        for lo in range(0, len(items), size):
            chunk = order[lo:lo + size]
            self._chunk = chunk
            texts = self._generate([items[i] for i in chunk])
            if len(texts) != len(chunk):
                raise RuntimeError(f"backbone {self.backbone.name!r} returned {len(texts)} texts for a batch of "
                                   f"{len(chunk)}")
            for i, text in zip(chunk, texts):
                out[i] = text
            self.stats["batches"] += 1
        self.stats["seconds"] = time.perf_counter() - start
        return check_outputs(out, len(items), f"backbone {self.backbone.name!r}")

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
        for name in self.backbone.packages:
            try:
                versions[name] = metadata.version(name)
            except metadata.PackageNotFoundError:
                versions[name] = None
        return {"backbone": self.backbone.name, "version": self.backbone.version, "task": self.task,
                "settings": self.settings.as_dict(), "device": str(self.device), "backend": "hf", "packages": versions}

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
        return f"<radrank {self.kind} {self.recipe.backbone.name} ({self.recipe.settings.model})>"


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


def placement(backbone: Backbone, settings: BackboneSettings) -> tuple:
    """(device, torch dtype) of a backbone's job from its ``device`` and ``dtype`` settings, logged."""
    device = device_of(settings.device)
    dtype = dtype_of(settings.dtype, device)
    log_device(backbone.name, device)
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

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

* weights are resolved *before* torch or transformers is imported: a model that
  is neither a local path nor in the Hugging Face cache fails at once with
  :class:`~radrank.errors.MissingWeightsError` naming the config key
  (``backbone_settings.<backbone>.<setting>``) that points at a local copy;
* ``trust_remote_code`` is passed as True only for backbones whose checkpoints
  need it, and only when the configured model (the id or path, as written in the
  config) is on the config allow-list (:func:`radrank.models.trust_remote_code`);
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
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from radrank.devices import device_of, dtype_of  # noqa: F401  (used by the recipes too)
from radrank.errors import ConfigError, MissingWeightsError
from radrank.metrics.base import Resources
from radrank.text import clean, normalize_whitespace

log = logging.getLogger("radrank")

TASKS = ("report", "vqa")
CONFIG_KEY = "backbone_settings"  # config mapping of per-backbone settings: backbone_settings.<name>.<setting>
ALLOW_LIST_KEY = "trust_remote_code"  # config list of model ids / paths allowed to run their own code

# Settings every backbone has (defaults per backbone in its SPEC.settings).
COMMON_SETTINGS = ("model", "revision", "dtype", "device", "batch_size", "max_new_tokens", "use_indication",
                   "max_images")


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


# --- settings -------------------------------------------------------------------------------------


def merge_settings(spec: BackboneSpec, settings: dict | None) -> dict:
    """``spec.settings`` updated with ``settings``; unknown keys are a :class:`ConfigError`."""
    settings = dict(settings or {})
    if not spec.vllm and "backend" in settings:
        from radrank.backbones.vllm_recipe import backend_of

        if backend_of(settings) == "vllm":
            why = spec.vllm_note or "vLLM has no implementation of its architecture"
            raise ConfigError(f"backbone {spec.name!r} cannot run on vLLM: {why}. Remove "
                              f"{CONFIG_KEY}.{spec.name}.backend (or set it to hf)")
        settings.pop("backend")  # hf: the only backend of this backbone
    unknown = sorted(set(settings) - set(spec.settings))
    if unknown:
        raise ConfigError(f"backbone {spec.name!r} has no setting(s) {unknown} ({CONFIG_KEY}.{spec.name}); "
                          f"known: {sorted(spec.settings)}")
    merged = {**spec.settings, **settings}
    for key in ("batch_size", "max_new_tokens"):
        value = merged.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"{CONFIG_KEY}.{spec.name}.{key} must be a positive integer, not {value!r}")
    if merged.get("max_images") is not None and (not isinstance(merged["max_images"], int)
                                                 or merged["max_images"] < 1):
        raise ConfigError(f"{CONFIG_KEY}.{spec.name}.max_images must be a positive integer or null")
    if not merged.get("model"):
        raise ConfigError(f"{CONFIG_KEY}.{spec.name}.model is empty")
    if spec.vllm:
        from radrank.backbones.vllm_recipe import check_settings

        check_settings(spec.name, merged)
    return merged


def config_key(backbone: str, setting: str) -> str:
    return f"{CONFIG_KEY}.{backbone}.{setting}"


# --- weights and remote code ----------------------------------------------------------------------

_WHY = re.compile(r"is not available locally \((.*)\)\. Point config", re.S)


def resolve_weights(backbone: str, model: str, *, setting: str = "model", revision: str | None = None) -> Path:
    """A local directory for ``model`` (a local path, or a Hugging Face id in the cache).

    Fails at once, without importing torch, with a :class:`MissingWeightsError`
    naming ``backbone_settings.<backbone>.<setting>``. A hub download is tried
    only when the hub is on (``HF_HUB_OFFLINE`` unset), with short timeouts
    (:func:`radrank.models.resolve`).
    """
    from radrank.models import resolve

    key = config_key(backbone, setting)
    try:
        path = resolve(model, metric=backbone, setting=setting, revision=revision)
    except MissingWeightsError as e:
        m = _WHY.search(str(e))
        why = m.group(1) if m else str(e)
        raise MissingWeightsError(
            f"backbone {backbone!r}: model {model!r} is not available locally ({why}). Point config {key} at a "
            f"local copy (a directory with the weights), or download it where the hub is reachable "
            f"(`huggingface-cli download {model}`) into the Hugging Face cache (HF_HOME) this job uses."
        ) from None
    if not path.is_dir():
        raise MissingWeightsError(f"backbone {backbone!r}: {model!r} (config {key}) is a file; expected a "
                                  f"directory with config.json and the weights")
    if not (path / "config.json").is_file():
        raise MissingWeightsError(f"backbone {backbone!r}: {path} (config {key}) has no config.json; expected a "
                                  f"model directory (a Hugging Face snapshot or save_pretrained output)")
    return path


def remote_code_allowed(spec: BackboneSpec, model: str, allow_list) -> bool:
    """True when ``spec`` needs remote code and ``model`` is allowed to run it; ConfigError when it is not."""
    from radrank.models import trust_remote_code

    if not spec.remote_code:
        return False
    if not trust_remote_code(model, allow_list):
        raise ConfigError(
            f"backbone {spec.name!r}: model {model!r} runs code shipped with its checkpoint "
            f"(trust_remote_code). Review that code, then allow it by adding {model!r} to the config list "
            f"`{ALLOW_LIST_KEY}` (the id or path exactly as written in {config_key(spec.name, 'model')}).")
    return True


def model_provenance(model: str, path, revision: str | None = None) -> dict:
    """radrank.models.model_provenance (sha256 over the weight files: reads them all, once)."""
    from radrank.models import model_provenance as _prov

    prov = _prov(model, path)
    if revision and not prov.get("revision"):
        prov["revision"] = revision
    return prov


# --- torch helpers (imported lazily) ---------------------------------------------------------------


def transformers_major() -> int:
    import transformers

    return int(transformers.__version__.split(".")[0])


def dtype_kwargs(dtype) -> dict:
    """``from_pretrained``'s dtype keyword (``dtype`` from transformers 4.56, ``torch_dtype`` before)."""
    import transformers

    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return {"dtype": dtype} if (major, minor) >= (4, 56) else {"torch_dtype": dtype}


def place(model, device: str, dtype):
    """``model`` in eval mode, whole on one ``device``, in ``dtype``, without gradients."""
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model.to(device=device, dtype=dtype)


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
    return outputs


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
    ``stats`` the call's counts and timings.
    """

    def __init__(self, spec: BackboneSpec, settings: dict, task: str, *, model_path=None, device="cpu"):
        if task not in spec.tasks:
            raise ConfigError(f"backbone {spec.name!r} does not support task {task!r} (it supports: "
                              f"{', '.join(spec.tasks)})")
        self.spec, self.settings, self.task = spec, settings, task
        self.model_path, self.device = model_path, device
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
        """:meth:`describe` and the model's id / revision / sha256 of its weights (reads them all)."""
        prov = self.describe()
        if self.model_path is not None:
            prov["model"] = model_provenance(self.settings["model"], self.model_path, self.settings.get("revision"))
        return prov


class Generator:
    """``generator(imgs, indications=None) -> list[str]`` around a :class:`Recipe`.

    Attributes of the recipe (``settings``, ``last_prompts``, ``stats``,
    ``provenance()``, ``model``, ``processor`` ...) are reachable on it.
    """

    def __init__(self, recipe: Recipe):
        self.recipe = recipe

    def __call__(self, imgs, indications=None) -> list[str]:
        return self.recipe.run(imgs, indications)

    def __getattr__(self, name):
        if name == "recipe":
            raise AttributeError(name)
        return getattr(self.recipe, name)

    def __repr__(self):
        return f"<radrank generator {self.recipe.spec.name} ({self.recipe.settings.get('model')})>"


class Answerer:
    """``answerer(imgs, questions) -> list[str]`` around a :class:`Recipe`."""

    def __init__(self, recipe: Recipe):
        self.recipe = recipe

    def __call__(self, imgs, questions) -> list[str]:
        return self.recipe.run(imgs, questions)

    def __getattr__(self, name):
        if name == "recipe":
            raise AttributeError(name)
        return getattr(self.recipe, name)

    def __repr__(self):
        return f"<radrank answerer {self.recipe.spec.name} ({self.recipe.settings.get('model')})>"


def log_device(name: str, device: str):
    """Log the device a job uses and how many CUDA devices it can see (one expected)."""
    import torch

    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    log.info("backbone %s: device %s (%d CUDA device(s) visible, CUDA_VISIBLE_DEVICES=%s)", name, device,
             visible, os.environ.get("CUDA_VISIBLE_DEVICES"))
    if visible > 1 and str(device).startswith("cuda"):
        log.warning("backbone %s: %d CUDA devices are visible; this job uses only %s (one device per job)",
                    name, visible, device if ":" in str(device) else "cuda:0")

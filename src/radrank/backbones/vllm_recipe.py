"""Generation backbones served by vLLM (``backbone_settings.<backbone>.backend: vllm``).

A backbone whose architecture vLLM implements (``Backbone.vllm``: MedGemma, i.e.
Gemma 3 multimodal) can generate with vLLM's offline engine instead of
transformers' ``generate``: continuous batching over the whole call, paged
attention, prefix caching (every prompt starts with the same chat turn and
instruction), CUDA graphs and tensor parallelism. The contracts stay those of
:mod:`radrank.backbones.base` — one answer per sample, in input order, greedy —
and the recipe's prompts are the hf recipe's own: the same chat template renders
the same text, the same processor (same image-processor backend) turns the text
and images into the model's input, and the answer is decoded by the same
tokenizer. The tests check that vLLM's greedy token ids equal transformers'
on tiny random Gemma 3 models.

* **One engine per job**, started when the backbone loads and reused for every
  batch (:func:`radrank.runtime.loaders.start_vllm`); ``tensor_parallel_size`` GPUs
  per engine (the SLURM job requests that many).
* **Model implementation** (``model_impl``): ``auto`` serves vLLM's own
  implementation of the architecture when its image-processing dependency
  (torchvision) is installed — the CUDA build installs it — and otherwise
  vLLM's Transformers modeling backend (transformers' model code on vLLM's
  attention, KV cache and scheduler), which is what runs on the CPU build
  here. ``vllm`` / ``transformers`` force one. Provenance records which ran.
* **Images per prompt**: vLLM sizes its encoder cache for at most
  ``max_images`` (else ``vllm_max_images``) images per prompt; a sample with
  more images fails with a message naming the setting.
* Settings besides the backbone's own: :class:`radrank.backbones.base.VLLMBackboneSettings`
  (vLLM's engine settings as the judges have them, :class:`radrank.runtime.generators.VLLMSettings`,
  with defaults for image prompts), checked with the backbone's settings when the workflow
  loads; the engine arguments come from :func:`radrank.runtime.generators.vllm_engine_args`, as
  the judges' do.

vllm is imported only when a backbone loads with ``backend: vllm``, in the
``vllm`` environment family.
"""

from __future__ import annotations

import importlib.util
import logging

from radrank.backbones.base import Recipe, check_outputs
from radrank.errors import ConfigError
from radrank.runtime.generators import vllm_engine_args
from radrank.runtime.loaders import start_vllm, vllm_version

log = logging.getLogger("radrank")

def model_impl_of(value: str) -> tuple[str, str]:
    """(vLLM's ``model_impl``, why) for the ``model_impl`` setting (auto, vllm or transformers)."""
    # vLLM's own multimodal model files import transformers' torchvision image processors; without
    # torchvision (vLLM's CPU build as locked here) the Transformers backend serves the same weights.
    has_torchvision = importlib.util.find_spec("torchvision") is not None
    if value == "vllm" and not has_torchvision:
        raise ConfigError("model_impl vllm needs torchvision (vLLM's own multimodal model code imports it), which "
                          "this environment lacks (the CPU build leaves it out): use model_impl auto or transformers")
    if value != "auto":
        return value, "set in the backbone's settings"
    if not has_torchvision:
        return "transformers", "torchvision is not installed (vLLM's own multimodal code imports it)"
    return "vllm", "vLLM's own implementation"


def engine_args(path, settings, *, images_per_prompt: int, processor_kwargs: dict | None = None) -> dict:
    """Keyword arguments of ``vllm.LLM`` for a backbone's model directory and settings
    (:class:`~radrank.backbones.base.VLLMBackboneSettings`)."""
    args = vllm_engine_args(path, settings, cuda_dtype="bf16", dtype_setting=settings.dtype)
    impl, why = model_impl_of(settings.model_impl)
    # vLLM tokenises text prompts and runs the checkpoint's processor on the images itself: it needs the
    # tokenizer (the judges hand it token ids instead). The processor is loaded with the hf recipe's
    # image-processor options (mm_processor_kwargs reach AutoProcessor.from_pretrained).
    args.update(skip_tokenizer_init=False, limit_mm_per_prompt={"image": int(images_per_prompt)},
                model_impl=impl)
    if processor_kwargs:
        args["mm_processor_kwargs"] = dict(processor_kwargs)
    log.info("vLLM model implementation: %s (%s)", impl, why)
    return args


class VLLMRecipe(Recipe):
    """A backbone recipe that generates with a vLLM engine.

    Subclasses provide the prompts (:meth:`report_prompt`, :meth:`vqa_prompt`)
    and :meth:`render` (a prompt and an image count -> the model-ready text, the
    hf recipe's chat template) and :meth:`images_of` (a sample's images as the
    processor takes them). One :meth:`_generate` call hands the whole call's
    samples to vLLM, which schedules them itself (``max_num_seqs`` at a time).
    """

    def __init__(self, backbone, settings, task, *, llm, tokenizer, resolved: dict, engine_args: dict,
                 max_new_tokens: int, eos_token_ids, repetition_penalty=None):
        device = "cpu" if engine_args.get("kv_cache_memory_bytes") else "cuda"
        super().__init__(backbone, settings, task, resolved=resolved, device=device)
        self.llm, self.tokenizer, self.engine_args = llm, tokenizer, engine_args
        self.max_new_tokens = int(max_new_tokens)
        self.eos_ids = [int(x) for x in eos_token_ids]
        self.repetition_penalty = repetition_penalty if repetition_penalty not in (None, 1, 1.0) else None
        self.images_per_prompt = int(engine_args["limit_mm_per_prompt"]["image"])
        self.prompt_token_ids: list = []
        self.ignore_eos = False

    def render(self, prompt: str, n_images: int) -> str:
        raise NotImplementedError

    def images_of(self, images: list) -> list:
        return list(images)

    def batch_size(self) -> int:
        return 1 << 30  # the whole call in one vLLM request list: vLLM batches continuously

    def sampling_params(self):
        from vllm import SamplingParams

        kw = dict(n=1, temperature=0.0, max_tokens=self.max_new_tokens, stop_token_ids=list(self.eos_ids),
                  detokenize=False)
        if self.ignore_eos:  # benchmarks: every answer at full length
            kw.update(ignore_eos=True, stop_token_ids=[])
        if self.repetition_penalty:
            kw["repetition_penalty"] = float(self.repetition_penalty)
        return SamplingParams(**kw)

    def _generate(self, batch):
        requests = []
        for j, (images, prompt) in enumerate(batch):
            if len(images) > self.images_per_prompt:  # (with max_images set, samples are cut to it)
                raise ConfigError(f"backbone {self.backbone.name!r} on vLLM: a sample has {len(images)} images but the "
                                  f"engine admits {self.images_per_prompt} per prompt; raise "
                                  f"backbone_settings.{self.backbone.name}.vllm_max_images (or set max_images to cut "
                                  f"samples)")
            text = self.render(prompt, len(images))
            self.note(j, text)
            requests.append({"prompt": text, "multi_modal_data": {"image": self.images_of(images)}})
        # The chat template already starts with the BOS token: the processor must not add another
        # (the hf recipe calls it with add_special_tokens=False too).
        outs = self.llm.generate(requests, self.sampling_params(), use_tqdm=False,
                                 tokenization_kwargs={"add_special_tokens": False})
        self.prompt_token_ids = [list(o.prompt_token_ids or []) for o in outs]  # what the model was given
        eos = set(self.eos_ids)
        texts = []
        for o in outs:
            ids = list(o.outputs[0].token_ids)
            if o.outputs[0].finish_reason == "length" and len(ids) < self.max_new_tokens:
                # vLLM stops an answer silently where prompt + answer reach max_model_len; the hf
                # recipe would have gone on, so the two backends would differ.
                raise ConfigError(f"backbone {self.backbone.name!r} on vLLM: a prompt of {len(o.prompt_token_ids)} "
                                  f"tokens leaves {len(ids)} of the {self.max_new_tokens} new tokens asked for "
                                  f"within max_model_len {self.engine_args.get('max_model_len')}; raise "
                                  f"backbone_settings.{self.backbone.name}.max_model_len to at least "
                                  f"{len(o.prompt_token_ids) + self.max_new_tokens}")
            cut = next((k for k, t in enumerate(ids) if t in eos), None)
            ids = ids if cut is None else ids[:cut]
            self.stats["new_tokens"] += len(ids) + (cut is not None)
            texts.append(self.tokenizer.decode(ids, skip_special_tokens=True).strip())
        return check_outputs(texts, len(batch), f"backbone {self.backbone.name!r} on vLLM")

    def describe(self) -> dict:
        prov = super().describe()
        keys = ("dtype", "max_model_len", "gpu_memory_utilization", "tensor_parallel_size", "max_num_seqs",
                "enforce_eager", "enable_prefix_caching", "kv_cache_memory_bytes", "model_impl",
                "limit_mm_per_prompt", "mm_processor_kwargs", "seed")
        prov.update(backend="vllm", vllm=vllm_version(),
                    vllm_settings={k: self.engine_args[k] for k in keys if k in self.engine_args})
        return prov


def load_engine(backbone, settings, path, *, processor_kwargs: dict | None = None):
    """(vllm.LLM, its engine arguments) for a backbone's resolved model directory, started once per job."""
    images = settings.max_images or settings.vllm_max_images
    args = engine_args(path, settings, images_per_prompt=int(images), processor_kwargs=processor_kwargs)
    tp = int(args.get("tensor_parallel_size", 1))
    log.info("backbone %s: %s on vLLM (%s, %s, tensor parallel %d)", backbone.name, settings.model,
             vllm_version(), args["dtype"], tp)
    return start_vllm(args), args

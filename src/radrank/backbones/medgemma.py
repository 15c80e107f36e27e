"""MedGemma (``google/medgemma-4b-it``): report generation and VQA. Environment ``gen-medgemma``.

Gemma 3 vision-language model: ``Gemma3ForConditionalGeneration`` with the
checkpoint's ``AutoProcessor`` (SigLIP image processor, 896 px, 256 image tokens
per image) and its chat template. No remote code (transformers >= 4.50 has the
classes). The protocol follows the MedGemma technical report's evaluation:

* one user turn, **no system prompt**: the instruction text, then the sample's
  images (``{"type": "image"}`` entries; the chat template puts the image tokens
  there), then the generation prompt of the model turn;
* greedy decoding (``do_sample=False``, one beam), ``max_new_tokens`` 300 for
  reports, ``vqa_max_new_tokens`` 64 for answers;
* report prompt: ``report_prompt``; with ``use_indication`` on and an indication
  present, ``report_prompt_with_indication`` (``{indication}`` filled in);
* VQA prompt: ``vqa_prompt`` with ``{question}`` filled in.

The prompt texts are settings; the defaults are radrank's own wording of those
instructions (the report's exact prompt tables are not reproduced here —
set ``report_prompt`` / ``vqa_prompt`` to them to replicate the paper's numbers).

Batching: every prompt is rendered with the processor's chat template (it adds
``<bos>``, so the processor is called with ``add_special_tokens=False``), the
batch is tokenised left-padded, ``pixel_values`` cast to the model dtype, and
the new tokens after the (common) prompt length decoded with special tokens
skipped. Images go through the processor's PIL backend by default
(``processor_backend``), so results do not depend on whether torchvision is
installed.

``backend: vllm`` serves the same checkpoint with vLLM (environment ``vllm``,
:mod:`radrank.backbones.vllm_recipe`): the same chat-template text, the same
processor options and greedy decoding, every sample of a call in one vLLM
request list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from radrank.backbones.base import (Backbone, Recipe, VLLMBackboneSettings, dtype_kwargs, fill, greedy_config,
                                    placement, transformers_major)
from radrank.backbones.vllm_recipe import VLLMRecipe, load_engine
from radrank.metrics.base import Resources
from radrank.runtime.loaders import frozen, generation_config_of
from radrank.settings import scored


@dataclass(frozen=True)
class MedGemmaSettings(VLLMBackboneSettings):
    model: str = scored("google/medgemma-4b-it", "the model: a Hugging Face id or a local directory")
    vqa_max_new_tokens: int = scored(64, "new tokens of a VQA answer at most", minimum=1)
    report_prompt: str = scored("Write the findings section of the radiology report for this chest X-ray.",
                                "the report instruction")
    report_prompt_with_indication: str = scored(
        "Clinical indication: {indication}\nWrite the findings section of the radiology report for this chest X-ray.",
        "the report instruction when use_indication is on and the sample has one ({indication} filled in)")
    vqa_prompt: str = scored("{question}\nAnswer the question about the image concisely.",
                             "the VQA instruction ({question} filled in)")
    processor_backend: Literal["pil", "torchvision", "auto"] = scored(
        "pil", "transformers 5 image-processor backend: pil (portable), torchvision, or auto (transformers' choice)")


class MedGemmaBackbone(Backbone):
    name = "medgemma"
    description = "MedGemma 4B instruction-tuned (Gemma 3 VLM): findings/report generation and VQA"
    family = "gen-medgemma"
    Settings = MedGemmaSettings
    default_resources = Resources(mem_mb=32000, runtime_min=240, threads=4, gpu=1)
    tasks = ("report", "vqa")
    inputs = "pil"
    packages = ("torch", "transformers", "accelerate")
    version = "1"

    def load(self, settings=None, allow_list=(), task: str = "report", runtime=None):
        """A MedGemma generator (``task="report"``) or answerer (``task="vqa"``); never runs remote code."""
        s, resolved = self.prepare(settings, task, runtime)
        path = resolved["model"].directory
        if self.uses_vllm(s):
            processor = load_processor(path, s.processor_backend)
            llm, args = load_engine(self, s, path, processor_kwargs=processor_kwargs(s.processor_backend))
            return MedGemmaVLLM(s, task, llm=llm, processor=processor, resolved=resolved, engine_args=args).callable()
        from transformers import Gemma3ForConditionalGeneration

        device, dtype = placement(self, s)
        processor = load_processor(path, s.processor_backend)
        model = Gemma3ForConditionalGeneration.from_pretrained(str(path), local_files_only=True,
                                                               trust_remote_code=False, **dtype_kwargs(dtype))
        model = frozen(model, device, dtype)
        return MedGemma(s, task, model=model, processor=processor, resolved=resolved, device=device,
                        dtype=dtype).callable()


BACKBONE = MedGemmaBackbone()


def max_new_tokens_of(settings: MedGemmaSettings, task: str) -> int:
    return int(settings.vqa_max_new_tokens if task == "vqa" else settings.max_new_tokens)


def rgb(images) -> list:
    return [im.convert("RGB") if getattr(im, "mode", "RGB") != "RGB" else im for im in images]


class MedGemmaPrompts:
    """MedGemma's prompts and chat-template rendering, shared by the hf and vllm recipes."""

    def report_prompt(self, indication):
        if indication:
            return fill(self.settings.report_prompt_with_indication, indication=indication)
        return self.settings.report_prompt

    def vqa_prompt(self, question):
        return fill(self.settings.vqa_prompt, question=question)

    def messages(self, prompt: str, n_images: int) -> list:
        """One user turn (no system turn): the instruction, then one image entry per image."""
        content = [{"type": "text", "text": prompt}] + [{"type": "image"} for _ in range(n_images)]
        return [{"role": "user", "content": content}]

    def render(self, prompt: str, n_images: int) -> str:
        return self.processor.apply_chat_template(self.messages(prompt, n_images), add_generation_prompt=True,
                                                  tokenize=False)


class MedGemma(MedGemmaPrompts, Recipe):
    def __init__(self, settings, task, *, model, processor, resolved, device, dtype):
        super().__init__(BACKBONE, settings, task, resolved=resolved, device=device)
        self.model, self.processor, self.dtype = model, processor, dtype
        tok = processor.tokenizer
        tok.padding_side = "left"
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        self.max_new_tokens = max_new_tokens_of(self.settings, task)
        self.generation_config = greedy_config(model, self.max_new_tokens, pad_token_id=tok.pad_token_id)

    def _generate(self, batch):
        texts = [self.render(prompt, len(images)) for images, prompt in batch]
        for j, text in enumerate(texts):
            self.note(j, text)
        images = [rgb(imgs) for imgs, _ in batch]
        enc = self.processor(text=texts, images=images, return_tensors="pt", padding=True,
                             add_special_tokens=False)
        enc = {k: v.to(self.device) for k, v in enc.items()}
        new = self.generate_new_tokens(enc)
        return [t.strip() for t in self.processor.batch_decode(new, skip_special_tokens=True)]


class MedGemmaVLLM(MedGemmaPrompts, VLLMRecipe):
    """MedGemma on vLLM: the hf recipe's prompts and processor, vLLM's engine."""

    def __init__(self, settings, task, *, llm, processor, resolved, engine_args: dict):
        settings = BACKBONE.coerce(settings)
        gen = generation_config_of(resolved["model"].directory)
        eos = gen.get("eos_token_id")
        eos = list(eos) if isinstance(eos, (list, tuple)) else [eos] if eos is not None else []
        tok = processor.tokenizer
        if tok.eos_token_id is not None and tok.eos_token_id not in eos:
            eos.append(tok.eos_token_id)
        super().__init__(BACKBONE, settings, task, llm=llm, tokenizer=tok, resolved=resolved,
                         engine_args=engine_args, max_new_tokens=max_new_tokens_of(settings, task),
                         eos_token_ids=eos, repetition_penalty=gen.get("repetition_penalty"))
        self.processor = processor

    def images_of(self, images):
        return rgb(images)


def processor_kwargs(backend: str = "pil") -> dict:
    """``AutoProcessor.from_pretrained`` keywords choosing the image-processor backend."""
    if transformers_major() >= 5:
        return {"backend": backend} if backend and backend != "auto" else {}
    return {"use_fast": backend == "torchvision"}


def load_processor(path, backend: str = "pil"):
    from transformers import AutoProcessor

    kwargs = {"local_files_only": True, **processor_kwargs(backend)}
    try:
        return AutoProcessor.from_pretrained(str(path), **kwargs)
    except TypeError:  # a transformers without the backend / use_fast keyword
        kwargs.pop("backend", None)
        kwargs.pop("use_fast", None)
        return AutoProcessor.from_pretrained(str(path), **kwargs)


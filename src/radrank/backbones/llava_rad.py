"""LLaVA-Rad (``microsoft/llava-rad``): findings generation. Environment ``gen-llavarad``.

LLaVA-Rad is a LoRA (plus a trained projector and the BiomedCLIP-CXR vision
tower) on ``lmsys/vicuna-7b-v1.5``. It runs through its own ``llava`` package
(github.com/microsoft/LLaVA-Rad, transformers 4.31; not on PyPI), imported only
when the backbone is loaded: without it, loading stops with
:class:`~radrank.backbones.base.BackboneUnavailable` saying how to install it.
No ``trust_remote_code`` is involved (the package is installed code).

Weights: ``model`` (the LLaVA-Rad repository: adapter, ``non_lora_trainables.bin``,
config) and ``model_base`` (Vicuna) are resolved to local directories first
(missing ones fail at once with the config key). The package's builder merges
the LoRA into the base and builds the vision tower named in the LLaVA-Rad
config; that tower's checkpoint is fetched by the package itself (open_clip),
so for offline use it must already be in the Hugging Face cache.

Protocol (LLaVA-Rad's evaluation): one frontal image (the sample's first),
the ``<image>`` token then a newline then the instruction, in the ``conv_mode``
conversation template (``"v1"``, Vicuna); instruction ``report_prompt``, or
``report_prompt_with_indication`` with the reason for exam when
``use_indication`` is on (default on: LLaVA-Rad was trained with it); greedy,
one beam, 256 new tokens; the model in fp16 as the builder loads it. The
instruction texts are settings in radrank's own wording.

Batching: the package splices image features in at its image token itself and
does not take padded batches everywhere, so prompts are not padded: samples are
ordered by prompt token length (stable) before batching, as upstream groups them,
and each ``generate`` call gets prompts of one length (a batch that straddles two
lengths is split). Without indications every prompt has the same length, so
batches are full. Outputs come back in input order.
"""

from __future__ import annotations

import importlib.util

from dataclasses import dataclass
from typing import Literal

from radrank.backbones.base import (Backbone, BackboneSettings, BackboneUnavailable, Recipe, count_new_tokens, fill,
                                    greedy_config, placement)
from radrank.errors import ConfigError
from radrank.metrics.base import Resources
from radrank.settings import scored


@dataclass(frozen=True)
class LlavaRadSettings(BackboneSettings):
    model: str = scored("microsoft/llava-rad", "the LLaVA-Rad repository (adapter, projector, config): a Hugging "
                                               "Face id or a local directory")
    model_base: str = scored("lmsys/vicuna-7b-v1.5", "the base model the LoRA is merged into: a Hugging Face id or "
                                                     "a local directory")
    dtype: Literal["auto", "fp32", "bf16", "fp16", "float32", "bfloat16", "float16"] = scored(
        "fp16", "model precision (the llava builder loads fp16)")
    max_new_tokens: int = scored(256, "new tokens of a report at most (greedy decoding)", minimum=1)
    use_indication: bool = scored(True, "put the sample's indication into the prompt (LLaVA-Rad was trained "
                                        "with it)")
    max_images: int | None = scored(1, "images per sample (LLaVA-Rad reads the first, frontal)", minimum=1)
    conv_mode: str = scored("v1", "the llava package's conversation template")
    report_prompt: str = scored("Describe the findings of this chest X-ray.", "the instruction")
    report_prompt_with_indication: str = scored(
        "Describe the findings of this chest X-ray. Indication: {indication}",
        "the instruction when use_indication is on and the sample has one ({indication} filled in)")


class LlavaRadBackbone(Backbone):
    name = "llava_rad"
    description = "LLaVA-Rad (BiomedCLIP-CXR + Vicuna-7B LoRA): findings from a frontal image and the indication"
    family = "gen-llavarad"
    Settings = LlavaRadSettings
    default_resources = Resources(mem_mb=40000, runtime_min=360, threads=4, gpu=1)
    tasks = ("report",)
    inputs = "pil"
    weight_settings = ("model", "model_base")
    packages = ("torch", "transformers", "llava", "peft", "open_clip_torch")
    version = "1"
    vllm_note = ("LLaVA-Rad loads through its own llava package (a BiomedCLIP image encoder on Vicuna), not as a "
                 "checkpoint vLLM can serve")

    def load(self, settings=None, allow_list=(), task: str = "report", runtime=None):
        """A LLaVA-Rad generator (needs LLaVA-Rad's ``llava`` package in the environment)."""
        s = self.coerce(settings)
        self.check_task(task)
        llava = llava_modules()  # before the weights: without its package, say how to install it
        resolved = self.resolve(s, runtime)
        path, base = resolved["model"].directory, resolved["model_base"].directory
        from llava.model.builder import load_pretrained_model

        device, dtype = placement(self, s)
        # model_name must contain "llavarad" for the builder to take the LoRA path; one device, no
        # device_map="auto".
        tokenizer, model, image_processor, _ = load_pretrained_model(str(path), str(base), "llavarad",
                                                                     device_map={"": device}, device=device)
        model = model.to(device=device, dtype=dtype).eval()
        return LlavaRad(s, model=model, tokenizer=tokenizer, image_processor=image_processor, llava=llava,
                        resolved=resolved, device=device, dtype=dtype).callable()


BACKBONE = LlavaRadBackbone()

INSTALL_HINT = ("LLaVA-Rad runs through its own `llava` package, which is not installed in this environment. "
                "Install it into the gen-llavarad environment: `pip install --no-deps "
                "git+https://github.com/microsoft/LLaVA-Rad` (its dependencies are pinned in "
                "envs/requirements/gen-llavarad.in).")


def llava_modules():
    """The parts of the ``llava`` package the recipe uses (imported here, lazily)."""
    if importlib.util.find_spec("llava") is None:
        raise BackboneUnavailable(INSTALL_HINT)
    try:
        from llava.constants import DEFAULT_IM_END_TOKEN, DEFAULT_IM_START_TOKEN, DEFAULT_IMAGE_TOKEN, \
            IMAGE_TOKEN_INDEX
        from llava.conversation import conv_templates
        from llava.mm_utils import tokenizer_image_token
    except ImportError as e:
        raise BackboneUnavailable(f"the installed `llava` package is not LLaVA-Rad's ({e}). {INSTALL_HINT}") from e
    return {"IMAGE_TOKEN_INDEX": IMAGE_TOKEN_INDEX, "DEFAULT_IMAGE_TOKEN": DEFAULT_IMAGE_TOKEN,
            "DEFAULT_IM_START_TOKEN": DEFAULT_IM_START_TOKEN, "DEFAULT_IM_END_TOKEN": DEFAULT_IM_END_TOKEN,
            "conv_templates": conv_templates, "tokenizer_image_token": tokenizer_image_token}


class LlavaRad(Recipe):
    def __init__(self, settings, *, model, tokenizer, image_processor, llava, resolved, device, dtype):
        super().__init__(BACKBONE, settings, "report", resolved=resolved, device=device)
        if self.settings.conv_mode not in llava["conv_templates"]:
            raise ConfigError(f"backbone_settings.llava_rad.conv_mode {self.settings.conv_mode!r} is not a template of "
                              f"the llava package ({sorted(llava['conv_templates'])})")
        self.model, self.tokenizer, self.image_processor = model, tokenizer, image_processor
        self.llava, self.dtype = llava, dtype
        pad = getattr(tokenizer, "pad_token_id", None)
        eos = getattr(tokenizer, "eos_token_id", None)
        self.pad_id = pad if pad is not None else (eos if eos is not None else 0)
        self.generation_config = greedy_config(model, self.settings.max_new_tokens, pad_token_id=self.pad_id)

    def report_prompt(self, indication):
        if indication:
            return fill(self.settings.report_prompt_with_indication, indication=indication)
        return self.settings.report_prompt

    def render(self, instruction: str) -> str:
        L = self.llava
        image = L["DEFAULT_IMAGE_TOKEN"]
        if getattr(self.model.config, "mm_use_im_start_end", False):
            image = L["DEFAULT_IM_START_TOKEN"] + image + L["DEFAULT_IM_END_TOKEN"]
        conv = L["conv_templates"][self.settings.conv_mode].copy()
        conv.append_message(conv.roles[0], image + "\n" + instruction)
        conv.append_message(conv.roles[1], None)
        return conv.get_prompt()

    def stop_string(self) -> str | None:
        conv = self.llava["conv_templates"][self.settings.conv_mode]
        return getattr(conv, "sep2", None) or getattr(conv, "sep", None)

    def prepare_images(self, images):
        return [im.convert("RGB") for im in list(images)[:1]]

    def batch_order(self, items):
        """Samples ordered by prompt token length (stable), so batches hold equal lengths."""
        lengths = [int(self._encode(self.render(p)).shape[-1]) for _, p in items]
        return sorted(range(len(items)), key=lambda i: lengths[i])

    def _encode(self, prompt: str):
        ids = self.llava["tokenizer_image_token"](prompt, self.tokenizer, self.llava["IMAGE_TOKEN_INDEX"],
                                                  return_tensors="pt")
        return ids

    def _generate(self, batch):
        import torch

        prompts = [self.render(p) for _, p in batch]
        for j, prompt in enumerate(prompts):
            self.note(j, prompt)
        encoded = [self._encode(p) for p in prompts]
        pixels = [self.image_processor.preprocess(images[0], return_tensors="pt")["pixel_values"][0]
                  for images, _ in batch]
        out_text: list = [None] * len(batch)
        groups: dict = {}
        for i, ids in enumerate(encoded):
            groups.setdefault(int(ids.shape[-1]), []).append(i)
        stop = self.stop_string()
        for length, members in groups.items():
            ids = torch.stack([encoded[i] for i in members]).to(self.device)
            images = torch.stack([pixels[i] for i in members]).to(self.device, self.dtype)
            with torch.inference_mode():
                out = self.model.generate(ids, images=images, generation_config=self.generation_config)
            out = out.cpu()
            # Older llava generate() returns prompt + new tokens; newer returns only the new ones.
            if out.shape[1] >= length and torch.equal(out[:, :length], ids.cpu()):
                out = out[:, length:]
            self.stats["new_tokens"] += count_new_tokens(out, self.pad_id, self.generation_config.eos_token_id)
            for i, row in zip(members, out):
                text = self.tokenizer.decode(row.tolist(), skip_special_tokens=True).strip()
                if stop and text.endswith(stop):
                    text = text[: -len(stop)].strip()
                out_text[i] = text
        return out_text


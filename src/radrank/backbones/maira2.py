"""MAIRA-2 (``microsoft/maira-2``): findings generation. Environment ``gen-maira2``.

MAIRA-2 (RAD-DINO-MAIRA-2 image encoder + Vicuna-7B, a LLaVA-style model) ships
its own model and processor classes, so it loads only with ``trust_remote_code``
— allowed only when the configured model is on the config allow-list
``trust_remote_code``. Its model card pins transformers 4.46.

Protocol (model card, non-grounded reporting):

* inputs: the current frontal image (the sample's first image), the current
  lateral image (the second, when present and ``use_lateral`` is on), no prior
  study; the INDICATION / TECHNIQUE / COMPARISON slots of MAIRA-2's own prompt
  (built by its processor's ``format_reporting_input``, so the prompt text is the
  checkpoint's, not radrank's). INDICATION gets the sample's indication when
  ``use_indication`` is on; TECHNIQUE and COMPARISON stay empty (the processor
  writes its missing-section marker) unless the caller passes a mapping per
  sample instead of a string: ``{"indication": ..., "technique": ...,
  "comparison": ...}``. Never the report body;
* findings only (``get_grounding=False``), greedy decoding, 300 new tokens;
* the decoded text goes through the processor's
  ``convert_output_to_plaintext_or_grounded_sequence``; grounded phrases (not
  expected without grounding) are joined into plain text.

Batching: the formatted prompts of a batch go through the processor together,
left-padded; the images are flattened in sample order (frontal, lateral, ...),
which is how the processor assigns them to the ``<image>`` slots.
"""

from __future__ import annotations

from dataclasses import dataclass

from radrank.backbones.base import (Backbone, BackboneSettings, Recipe, dtype_kwargs, greedy_config, indication_text,
                                    placement)
from radrank.errors import ConfigError
from radrank.metrics.base import Resources
from radrank.runtime.loaders import frozen
from radrank.settings import scored


@dataclass(frozen=True)
class Maira2Settings(BackboneSettings):
    model: str = scored("microsoft/maira-2", "the model: a Hugging Face id or a local directory")
    use_indication: bool = scored(True, "put the sample's indication into MAIRA-2's INDICATION slot")
    max_images: int | None = scored(2, "images per sample (frontal + lateral)", minimum=1)
    use_lateral: bool = scored(True, "the sample's second image is the current lateral view")


class Maira2Backbone(Backbone):
    name = "maira2"
    description = "MAIRA-2 (RAD-DINO + Vicuna-7B): findings from frontal (+ lateral) image and indication"
    family = "gen-maira2"
    Settings = Maira2Settings
    default_resources = Resources(mem_mb=40000, runtime_min=360, threads=4, gpu=1)
    tasks = ("report",)
    inputs = "pil"
    remote_code = True
    packages = ("torch", "transformers")
    version = "1"
    vllm_note = ("MAIRA-2 is a LLaVA variant with a RAD-DINO (DINOv2) image encoder and its own model and processor "
                 "code (trust_remote_code); vLLM implements neither")

    def load(self, settings=None, allow_list=(), task: str = "report", runtime=None):
        """A MAIRA-2 generator. Needs the model on the ``trust_remote_code`` allow-list."""
        s, resolved = self.prepare(settings, task, runtime)
        path = resolved["model"].directory
        trust = self.remote_code_allowed(s.model, allow_list)
        from transformers import AutoModelForCausalLM, AutoProcessor

        device, dtype = placement(self, s)
        processor = AutoProcessor.from_pretrained(str(path), trust_remote_code=trust, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(str(path), trust_remote_code=trust, local_files_only=True,
                                                     **dtype_kwargs(dtype))
        model = frozen(model, device, dtype)
        return Maira2(s, model=model, processor=processor, resolved=resolved, device=device, dtype=dtype).callable()


BACKBONE = Maira2Backbone()

SLOTS = ("indication", "technique", "comparison")


class Maira2(Recipe):
    def __init__(self, settings, *, model, processor, resolved, device, dtype):
        super().__init__(BACKBONE, settings, "report", resolved=resolved, device=device)
        for method in ("format_reporting_input",):
            if not hasattr(processor, method):
                raise ConfigError(
                    f"backbone 'maira2': the processor of {self.settings.model!r} ({type(processor).__name__}) has no "
                    f"{method}(); is this a MAIRA-2 checkpoint (with its processing_maira2.py)?")
        self.model, self.processor, self.dtype = model, processor, dtype
        tok = processor.tokenizer
        tok.padding_side = "left"
        if tok.pad_token_id is None:
            tok.pad_token = tok.unk_token or tok.eos_token
        self.generation_config = greedy_config(model, self.settings.max_new_tokens, pad_token_id=tok.pad_token_id)

    def context_of(self, value):
        """The sample's INDICATION / TECHNIQUE / COMPARISON slots (a mapping, or the indication text)."""
        fields = dict(value) if isinstance(value, dict) else {"indication": value}
        unknown = sorted(set(fields) - set(SLOTS))
        if unknown:
            raise ValueError(f"backbone 'maira2': unknown context field(s) {unknown}; known: {list(SLOTS)}")
        slots = {k: indication_text(fields.get(k)) for k in SLOTS}
        if not self.settings.use_indication:
            slots["indication"] = None
        return slots

    def report_prompt(self, slots):  # MAIRA-2's processor writes the prompt text from the slots
        return slots

    def prepare_images(self, images):
        images = [im.convert("RGB") if getattr(im, "mode", "RGB") not in ("RGB", "L") else im for im in images]
        return images[:2] if self.settings.use_lateral else images[:1]

    def format(self, images, slots) -> tuple:
        return self.processor.format_reporting_input(
            current_frontal=images[0], current_lateral=images[1] if len(images) > 1 else None, prior_frontal=None,
            indication=slots.get("indication"), technique=slots.get("technique"),
            comparison=slots.get("comparison"), prior_report=None, get_grounding=False)

    def _generate(self, batch):
        texts, flat = [], []
        for images, slots in batch:
            text, imgs = self.format(images, slots)
            texts.append(text)
            flat.extend(imgs)
        for j, text in enumerate(texts):
            self.note(j, text)
        enc = self.processor(text=texts, images=flat, return_tensors="pt", padding=True)
        enc = {k: v.to(self.device) for k, v in enc.items() if k != "token_type_ids"}  # LLaVA takes none
        new = self.generate_new_tokens(enc)
        results = []
        for row in new:
            text = self.processor.decode(row, skip_special_tokens=True).lstrip()
            convert = getattr(self.processor, "convert_output_to_plaintext_or_grounded_sequence", None)
            value = convert(text) if convert is not None else text
            if not isinstance(value, str):  # grounded: [(phrase, boxes), ...]
                value = " ".join(str(p[0] if isinstance(p, (tuple, list)) else p).strip() for p in value)
            results.append(value.strip())
        return results


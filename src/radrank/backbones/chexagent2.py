"""CheXagent-2 (``StanfordAIMI/CheXagent-2-3b``): findings generation and VQA. Environment ``gen-chexagent``.

CheXagent-2 ships its own model and tokenizer code (``trust_remote_code``,
allowed only through the config allow-list ``trust_remote_code``); its model card
reports transformers 4.40.

**It reads images from file paths.** The tokenizer's ``from_list_format`` puts
each image's *path* into the prompt and the model's vision code opens the file
itself. So this backbone's ``inputs`` is ``"paths"``: the generation job
should hand it the samples' image paths (``radrank.images.load(path, "path")``).
It also accepts PIL images and DICOM paths: those are written as PNG files to a
private temporary folder (DICOM windowed by :mod:`radrank.images`), removed after
each batch (:class:`~radrank.backbones.base.ImageFiles`). Raster paths are passed
as they are (absolute).

Protocol (model card / Stanford AIMI demo): a system turn (``system_prompt``)
and a human turn with the images then the instruction; greedy decoding, one
beam, ``max_new_tokens`` 512. Two report recipes (``recipe``):

* ``"regions"`` (default, as in the official demo): one call per anatomical
  region (``regions``: airway, breathing, cardiac, diaphragm, everything else),
  each asking for a description of that region (``region_prompt``); the region
  texts joined with spaces are the findings;
* ``"single"``: one call with ``report_prompt``.

With ``use_indication`` on, ``indication_prefix`` (``{indication}`` filled in) is
put before every instruction. VQA: ``vqa_prompt`` with ``{question}``. The prompt
texts are settings in radrank's own wording. An optional ``impression_prompt``
(with ``{findings}``) adds a text-only call and returns
``"FINDINGS: ...\\n\\nIMPRESSION: ..."``.

Batching: every prompt is tokenised with the tokenizer's chat template,
left-padded (pad id: the tokenizer's, else EOS) with an attention mask.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from radrank.backbones.base import (Backbone, BackboneSettings, ImageFiles, Recipe, count_new_tokens, dtype_kwargs,
                                    fill, greedy_config, left_pad, placement)
from radrank.metrics.base import Resources
from radrank.runtime.loaders import frozen
from radrank.settings import scored

REGIONS = ("Airway", "Breathing", "Cardiac", "Diaphragm",
           "Everything else (mediastinum, bones, soft tissues, lines, tubes and devices)")


@dataclass(frozen=True)
class CheXagent2Settings(BackboneSettings):
    model: str = scored("StanfordAIMI/CheXagent-2-3b", "the model: a Hugging Face id or a local directory")
    max_new_tokens: int = scored(512, "new tokens of each report call at most (greedy decoding)", minimum=1)
    vqa_max_new_tokens: int = scored(64, "new tokens of a VQA answer at most", minimum=1)
    recipe: Literal["regions", "single"] = scored("regions", "regions: one call per anatomical region, the texts "
                                                             "joined; single: one call with report_prompt")
    regions: tuple[str, ...] = scored(REGIONS, "the regions the regions recipe asks about, in order")
    region_prompt: str = scored("Describe this chest X-ray in detail with respect to: {region}.",
                                "the regions recipe's instruction ({region} filled in)")
    report_prompt: str = scored("Write the findings section of the radiology report for this chest X-ray.",
                                "the single recipe's instruction")
    indication_prefix: str = scored("Indication: {indication}\n", "put before every instruction when use_indication "
                                                                   "is on ({indication} filled in)")
    impression_prompt: str | None = scored(None, "a text-only call for an impression ({findings} filled in; null: "
                                                 "findings only), e.g. 'Summarise these findings as an impression: "
                                                 "{findings}'")
    vqa_prompt: str = scored("{question}", "the VQA instruction ({question} filled in)")
    system_prompt: str = scored("You are a helpful assistant.", "the system turn")
    image_dir: str | None = scored(None, "where PNGs of PIL / DICOM inputs are written (null: the system temporary "
                                         "folder)")

    def check(self, where):
        super().check(where)
        if self.recipe == "regions" and not self.regions:
            raise self.fail(where, "regions", "is empty (the regions recipe asks about each region)")


class CheXagent2Backbone(Backbone):
    name = "chexagent2"
    description = "CheXagent-2 3B (Stanford AIMI): findings by anatomical region, and VQA; reads image files"
    family = "gen-chexagent"
    Settings = CheXagent2Settings
    default_resources = Resources(mem_mb=24000, runtime_min=360, threads=4, gpu=1)
    tasks = ("report", "vqa")
    inputs = "paths"
    remote_code = True
    packages = ("torch", "transformers")
    version = "1"
    vllm_note = ("CheXagent-2 runs model code shipped with its checkpoint (trust_remote_code), which vLLM does "
                 "not implement")

    def load(self, settings=None, allow_list=(), task: str = "report", runtime=None):
        """A CheXagent-2 generator or answerer. Needs the model on the ``trust_remote_code`` allow-list."""
        s, resolved = self.prepare(settings, task, runtime)
        path = resolved["model"].directory
        trust = self.remote_code_allowed(s.model, allow_list)
        device, dtype = placement(self, s)
        tokenizer, model = _load_components(path, trust, device, dtype)
        return CheXagent2(s, task, model=model, tokenizer=tokenizer, resolved=resolved, device=device,
                          dtype=dtype).callable()


BACKBONE = CheXagent2Backbone()


class CheXagent2(Recipe):
    def __init__(self, settings, task, *, model, tokenizer, device, dtype, resolved=None):
        super().__init__(BACKBONE, settings, task, resolved=resolved, device=device)
        self.model, self.tokenizer, self.dtype = model, tokenizer, dtype
        pad = tokenizer.pad_token_id if getattr(tokenizer, "pad_token_id", None) is not None else \
            getattr(tokenizer, "eos_token_id", None)
        self.pad_id = 0 if pad is None else int(pad)
        n = self.settings.vqa_max_new_tokens if task == "vqa" else self.settings.max_new_tokens
        self.generation_config = greedy_config(model, n, pad_token_id=self.pad_id)
        self.files = ImageFiles(self.settings.image_dir, prefix="radrank-chexagent-")

    # -- prompts: a list of instructions per sample (one per region in the "regions" recipe)
    def _prefix(self, indication):
        return fill(self.settings.indication_prefix, indication=indication) if indication else ""

    def report_prompt(self, indication):
        prefix = self._prefix(indication)
        if self.settings.recipe == "single":
            return [prefix + self.settings.report_prompt]
        return [prefix + fill(self.settings.region_prompt, region=r) for r in self.settings.regions]

    def vqa_prompt(self, question):
        return [fill(self.settings.vqa_prompt, question=question)]

    def query(self, paths, instruction, position: int) -> list:
        """Token ids of one chat (the batch's ``position``-th sample): system turn, then the images (by path)
        and the instruction."""
        items = [{"image": p} for p in paths] + [{"text": instruction}]
        query = self.tokenizer.from_list_format(items) if paths else instruction
        conv = [{"from": "system", "value": self.settings.system_prompt}, {"from": "human", "value": query}]
        self.note(position, query)
        ids = self.tokenizer.apply_chat_template(conv, add_generation_prompt=True)
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        if isinstance(ids, dict):
            ids = ids["input_ids"]
        if ids and isinstance(ids[0], (list, tuple)):
            ids = ids[0]
        return list(ids)

    def _run_queries(self, queries) -> list[str]:
        import torch

        ids, mask = left_pad(queries, self.pad_id)
        ids, mask = ids.to(self.device), mask.to(self.device)
        with torch.inference_mode():
            out = self.model.generate(input_ids=ids, attention_mask=mask, generation_config=self.generation_config)
        new = out[:, ids.shape[1]:]
        self.stats["new_tokens"] += count_new_tokens(new, self.pad_id, self.generation_config.eos_token_id)
        return [self.tokenizer.decode(row.tolist(), skip_special_tokens=True).strip() for row in new]

    def _generate(self, batch):
        try:
            paths = [[self.files.path_of(im) for im in images] for images, _ in batch]
            n_steps = len(batch[0][1])
            parts = [[] for _ in batch]
            for step in range(n_steps):
                texts = self._run_queries([self.query(p, prompts[step], j)
                                           for j, (p, (_, prompts)) in enumerate(zip(paths, batch))])
                for i, t in enumerate(texts):
                    parts[i].append(t)
        finally:
            self.files.cleanup()
        findings = [" ".join(t for t in p if t).strip() for p in parts]
        if self.task == "vqa" or not self.settings.impression_prompt:
            return findings
        impressions = self._run_queries([self.query([], fill(self.settings.impression_prompt, findings=f), j)
                                         for j, f in enumerate(findings)])
        return [f"FINDINGS: {f}\n\nIMPRESSION: {i}" for f, i in zip(findings, impressions)]


def _load_components(path, trust: bool, device: str, dtype):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path), trust_remote_code=trust, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(str(path), trust_remote_code=trust, local_files_only=True,
                                                 **dtype_kwargs(dtype))
    return tokenizer, frozen(model, device, dtype)


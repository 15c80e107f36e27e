"""MRScore (Liu et al. 2024) as a reward model: LLM backbone + LoRA adapter + linear head + sigmoid.

The paper scores a report with a reward model: a causal LM backbone
(Mistral-7B-Instruct there) with a LoRA adapter, whose final hidden state at the
last token goes through a linear head to one number, squashed by a sigmoid. It
was trained on (accepted, rejected) report pairs written for the same reference
with the margin loss −log σ(r_w − r_l − m). The paper's trained weights are not
public, so every part is a setting and a user plugs in their own checkpoint:

* ``model`` — the backbone: a Hugging Face id or a local directory
  (``AutoModelForCausalLM``; ``trust_remote_code`` only for ids on the allow-list, in the
  workflow the config's top-level ``trust_remote_code`` list);
* ``adapter`` — a LoRA adapter directory as ``peft``'s ``save_pretrained`` writes it
  (``adapter_config.json`` + ``adapter_model.safetensors``), or a hub id; None for a
  backbone that already contains the fine-tuning. With ``merge_adapter`` (default)
  the LoRA weights are merged into the backbone once, so scoring costs one plain
  forward pass;
* ``head`` — the linear head: a ``.safetensors`` / ``.pt`` / ``.bin`` file (or a
  directory / hub repo holding ``head_file``) with ``weight`` of shape (1, hidden)
  and ``bias`` of shape (1,); a common prefix (``score.``, ``v_head.``,
  ``reward_head.``, ``head.``, ``summary.``) is stripped, so TRL's value head and
  transformers' ``…ForSequenceClassification`` ``score`` layer load as they are;
* ``prompt_template`` — how a (reference, hypothesis) pair is shown to the model
  (``{reference}``, ``{hypothesis}``), each report cut to ``max_report_words``
  words; with ``chat_template`` the text is the user turn of the tokenizer's
  chat template (when it has one). These must match how the checkpoint was
  trained.

A model radrank trained (target ``mrscore_train``, :mod:`radrank.mrscore_train`) is one folder:
``model: results/mrscore/<name>/model`` is enough — its ``mrscore.json`` names the base model, the
adapter, the head and the prompt settings it was trained with, which fill those settings (one set beside
it is refused; ``trained`` records the folder and the sha256 of its adapter and head, so retraining
re-scores).

To plug in a checkpoint trained elsewhere: save the adapter with
``peft_model.save_pretrained(dir)``, the head with
``safetensors.torch.save_file({"weight": W, "bias": b}, "reward_head.safetensors")``
(W: (1, hidden), b: (1,)), and set ``metric_settings.mrscore.{model, adapter, head,
prompt_template}``. A checkpoint stored as one ``.pth`` state dict (e.g. a LoRA on
Llama-3-8B-Instruct) must first be split into those two files.

The reward is read at the last token of the (right-padded) input — the usual
reward-model convention; the per-pair numbers are ``mrscore`` = sigmoid(reward)
in (0, 1) and ``mrscore_reward`` = the raw head output. Pairs are batched by
length (OOM halves the batch, see :mod:`radrank.runtime.generators`) and each reward is
cached per (backbone, adapter, head, exact input).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from radrank.devices import DEVICE_DOC, check_device, device_of, dtype_of
from radrank.errors import MissingWeightsError
from radrank.metrics.base import Metric, Resources, mean_leaf
from radrank.runtime import WeightRef, allows_remote_code
from radrank.settings import Settings, remote_code, scored, speed

log = logging.getLogger("radrank")

DEFAULT_TEMPLATE = (
    "Assess the quality of a candidate chest X-ray report against the reference report written by a "
    "radiologist.\n\nReference report:\n{reference}\n\nCandidate report:\n{hypothesis}"
)
HEAD_PREFIXES = ("score.", "v_head.", "reward_head.", "head.", "summary.", "value_head.", "linear.")


@dataclass(frozen=True)
class MRScoreSettings(Settings):
    """A reward model is not a generative judge: no token budget, retry or vLLM engine, so not JudgeSettings."""

    model: str | None = scored(None, "the backbone: a Hugging Face id or a local directory (the paper: "
                                     "Mistral-7B-Instruct); MRScore's trained weights are not public")
    revision: str | None = scored(None, "hub revision of the backbone (null: the cached / newest snapshot)")
    adapter: str | None = scored(None, "a LoRA adapter directory (peft save_pretrained) or hub id; null: none")
    head: str | None = scored(None, "the linear head: a file, or a directory / hub repo holding head_file")
    head_file: str = scored("reward_head.safetensors", "the head's file name inside a head directory or repo")
    merge_adapter: bool = scored(True, "merge the LoRA weights into the backbone once (faster; the same numbers "
                                       "up to rounding)")
    prompt_template: str = scored(DEFAULT_TEMPLATE, "how a pair is shown to the model ({reference}, {hypothesis})")
    chat_template: bool = scored(True, "the text is the user turn of the tokenizer's chat template, when it has one")
    max_report_words: int | None = scored(300, "each report is cut to its first words (null: whole reports)",
                                          minimum=1)
    max_length: int = scored(2048, "tokens per input (longer inputs are cut at the end)", minimum=2)
    trust_remote_code: tuple[str, ...] = remote_code("model")
    dtype: Literal["auto", "fp32", "bf16", "fp16"] = scored("auto", "backbone precision (auto: bf16 on CUDA, fp32 on "
                                                                   "the CPU)")
    batch_size: int = speed(32, "inputs per forward pass (halved on out-of-memory; the CPU also caps tokens)",
                            minimum=1)
    device: str = speed("auto", DEVICE_DOC)
    cache_dir: str | None = speed(None, "reward cache folder (null: $RADRANK_JUDGE_CACHE or ~/.cache/radrank/judge; "
                                        "off: no cache)")
    trained: str | None = scored(None, "set by radrank when model names a folder it trained: the folder and the "
                                       "sha256 of its adapter and head (never set it yourself)")

    def check(self, where):
        check_device(self.device, f"{where}.device")
        problem = template_problem(self.prompt_template, TEMPLATE_FIELDS)
        if problem:
            raise self.fail(where, "prompt_template", problem)


TEMPLATE_FIELDS = ("reference", "hypothesis")  # what prompt_template may name: it is .format()-ed with these


def template_problem(template: str, allowed) -> str | None:
    """Why ``template`` is not a format string naming only ``allowed`` fields (``{reference}``), plainly — no
    attribute or index access (``{reference.__class__}``), no positional ``{}``, no field inside a format spec:
    found at load, not when the scoring job formats it. None when it is one."""
    import string

    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as e:
        return f"is not a valid template ({e}); write a literal brace as {{{{ or }}}}"
    for _, name, spec, _ in parts:
        if name is None:
            continue
        if name not in allowed:
            plain = name.replace(".", "[").split("[", 1)[0]
            what = ("an attribute or index of a field" if plain in allowed and plain != name
                    else "a positional field {}" if not name else "an unknown field")
            return (f"{{{name}}} is {what}; a template names only {', '.join(f'{{{a}}}' for a in allowed)}, "
                    "plainly (write a literal brace as {{ or }})")
        if spec and "{" in spec:
            return f"{{{name}:{spec}}} has a field inside its format spec; a template names fields plainly"
    return None


TRAINED_FORMAT = "radrank-mrscore-1"
TRAINED_FILE = "mrscore.json"
DEMO_MARKER = "RADRANK_DEMO.json"  # beside each of make mrscore-demo's tiny random models (radrank.mrscore_train.demo)
PROMPT_FIELDS = ("prompt_template", "chat_template", "max_report_words", "max_length")


def prompt_of(s) -> dict:
    """The settings that decide what the reward model sees (a trained folder records them)."""
    return {k: getattr(s, k) for k in PROMPT_FIELDS}
# What a trained folder fixes: set beside it, they would describe another model.
FIXED_BY_TRAINED = ("revision", "adapter", "head", "head_file", "trained")


def trained_settings(s: MRScoreSettings, given: dict, where: str) -> MRScoreSettings:
    """``s`` with a radrank-trained folder (``model`` holding mrscore.json, as ``mrscore_train`` writes it)
    resolved into its base model, adapter, head and prompt settings; ``s`` itself otherwise. A setting the
    folder fixes, or a prompt setting that differs from the one it was trained with, is refused."""
    import json

    from radrank.errors import ConfigError
    from radrank.runtime.weights import file_sha256

    if "trained" in given:
        raise ConfigError(f"config {where}.trained: radrank sets it; name the trained folder in {where}.model")
    folder = Path(s.model) if s.model else None
    if folder is None or not (folder / TRAINED_FILE).is_file():
        return s
    try:
        meta = json.loads((folder / TRAINED_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ConfigError(f"config {where}.model: {folder / TRAINED_FILE} is unreadable ({e})") from None
    if not isinstance(meta, dict) or meta.get("format") != TRAINED_FORMAT:
        raise ConfigError(f"config {where}.model: {folder / TRAINED_FILE} is not a {TRAINED_FORMAT} file")
    for key in FIXED_BY_TRAINED:
        if key in given:
            raise ConfigError(f"config {where}.{key}: {folder} is a model radrank trained, which names its own base "
                              "model, adapter and head; remove the setting")
    prompt = {k: meta["prompt"][k] for k in PROMPT_FIELDS}
    for key, value in prompt.items():
        if key in given and given[key] != value:
            raise ConfigError(f"config {where}.{key}: {folder} was trained with {key} = {value!r}; scoring with "
                              "another would not be this model (remove the setting)")
    adapter, head = folder / meta["adapter"], folder / meta["head"]
    files = [adapter / "adapter_config.json", adapter / "adapter_model.safetensors", head]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise ConfigError(f"config {where}.model: the trained folder {folder} is incomplete: {', '.join(missing)}")
    digest = hashlib.sha256("".join(file_sha256(f) for f in files).encode()).hexdigest()
    return s.replace(where=where, model=meta["base_model"], revision=meta.get("base_revision"), adapter=str(adapter),
                     head=str(head), trained=f"{folder}@{digest}", **prompt)


NOT_PUBLIC = ("MRScore's trained reward model is not public: set config metric_settings.mrscore.model (the "
              "backbone), metric_settings.mrscore.adapter (a peft LoRA directory, or null) and "
              "metric_settings.mrscore.head (the linear head file) to your checkpoint — see the docstring of "
              "radrank/metrics/mrscore.py for the expected files")


def load_head(path):
    """(weight (1, hidden) float32, bias (1,) float32) from a safetensors or torch file."""
    import torch

    path = Path(path)
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        state = load_file(str(path))
    else:
        state = torch.load(str(path), map_location="cpu", weights_only=True)
        if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
            state = state["state_dict"]
    if not isinstance(state, dict):
        raise MissingWeightsError(f"metric 'mrscore': {path} is not a state dict with weight and bias")
    names = {}
    for k, v in state.items():
        short = k
        for prefix in HEAD_PREFIXES:
            if short.startswith(prefix):
                short = short[len(prefix):]
                break
        names[short] = v
    if "weight" not in names:
        raise MissingWeightsError(f"metric 'mrscore': {path} has no head weight (keys: {sorted(state)[:8]})")
    w = names["weight"].float().reshape(1, -1)
    b = names.get("bias")
    b = torch.zeros(1) if b is None else b.float().reshape(1)
    return w, b


class RewardModel:
    """Backbone (+ merged LoRA) → last-token hidden state → linear head; batched, OOM-halving."""

    def __init__(self, lm, tokenizer, head_weight, head_bias, *, device, batch_size, max_length, identity: dict,
                 max_batch_tokens=None):
        self.lm = lm
        self.decoder = lm.get_decoder() if hasattr(lm, "get_decoder") else lm
        self.tokenizer = tokenizer
        self.device = device
        self.head_weight = head_weight.to(device)
        self.head_bias = head_bias.to(device)
        if self.head_weight.shape[1] != lm.config.get_text_config().hidden_size:
            raise MissingWeightsError(f"metric 'mrscore': the head expects hidden size {self.head_weight.shape[1]} "
                                      f"but the backbone has {lm.config.get_text_config().hidden_size}")
        self.batch_size = int(batch_size)
        self.max_length = int(max_length)
        self.max_batch_tokens = max_batch_tokens if max_batch_tokens is not None else (
            None if str(device).startswith("cuda") else 1 << 15)
        pad = tokenizer.pad_token_id if tokenizer is not None else None
        if pad is None:
            pad = tokenizer.eos_token_id if tokenizer is not None and tokenizer.eos_token_id is not None else 0
        self.pad_id = int(pad)
        self.identity = identity

    def rewards_ids(self, ids: list[list[int]]) -> list[float]:
        from radrank.runtime.generators import length_batches_oom

        return length_batches_oom([len(x) for x in ids], self, lambda rows: self._batch([ids[i] for i in rows]),
                                  max_batch_tokens=self.max_batch_tokens, what="mrscore")

    def _batch(self, batch: list[list[int]]) -> list[float]:
        import torch

        width = max(max(len(x) for x in batch), 1)
        input_ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for r, x in enumerate(batch):  # right padding: positions are the natural ones
            input_ids[r, :len(x)] = torch.tensor(x, dtype=torch.long)
            mask[r, :len(x)] = 1
        last = (mask.sum(1) - 1).clamp(min=0)
        with torch.inference_mode():
            hidden = self.decoder(input_ids=input_ids.to(self.device), attention_mask=mask.to(self.device),
                                  use_cache=False).last_hidden_state
            h = hidden[torch.arange(len(batch), device=hidden.device), last.to(hidden.device)].float()
            r = h @ self.head_weight.T + self.head_bias
        return r[:, 0].tolist()


def load_reward_model(s: MRScoreSettings, resolved: dict, runtime) -> tuple[RewardModel, dict]:
    """The reward model of ``s`` from its resolved weights (``resolved``: setting -> Resolved), loaded once per
    process (``runtime.load``), and its provenance."""
    from radrank.runtime.loaders import load_causal_lm
    from radrank.runtime.weights import file_sha256

    backbone = resolved["model"].directory
    adapter = resolved["adapter"].directory if "adapter" in resolved else None
    head = resolved["head"].path
    allowed = allows_remote_code(s.model, s.trust_remote_code)
    device = device_of(s.device)
    dtype = dtype_of(s.dtype, device, "bf16")

    def load():
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(backbone), trust_remote_code=allowed, local_files_only=True)
        lm = load_causal_lm(backbone, device="cpu", dtype=dtype, trust_remote_code=allowed)
        if adapter is not None:
            from peft import PeftModel

            lm = PeftModel.from_pretrained(lm, str(adapter), is_trainable=False)
            # merged: one plain forward pass; unmerged: the base model with the LoRA layers in place
            lm = lm.merge_and_unload() if s.merge_adapter else lm.get_base_model()
        return lm.to(device).eval(), tokenizer, *load_head(head)

    lm, tokenizer, w, b = runtime.load(("mrscore", str(backbone), str(adapter), s.merge_adapter, str(head), device,
                                        str(dtype), allowed), load)
    prov = {"backbone": resolved["model"].provenance(), "device": device, "dtype": str(dtype).replace("torch.", ""),
            "trust_remote_code": allowed}
    if adapter is not None:
        prov["adapter"] = {**resolved["adapter"].provenance(),
                           "config_sha256": file_sha256(adapter / "adapter_config.json"), "merged": s.merge_adapter}
    prov["head"] = {"path": str(head), "sha256": file_sha256(head), "shape": list(w.shape)}
    identity = {"kind": "reward", "backbone": s.model,
                "revision": prov["backbone"].get("revision") or prov["backbone"].get("weights_sha256"),
                "adapter": (prov.get("adapter") or {}).get("weights_sha256"), "head": prov["head"]["sha256"],
                "dtype": prov["dtype"]}
    rm = RewardModel(lm, tokenizer, w, b, device=device, batch_size=s.batch_size, max_length=s.max_length,
                     identity=identity)
    log.info("mrscore: backbone %s%s on %s (%s)", s.model, " + LoRA" if adapter is not None else "", device,
             prov["dtype"])
    return rm, prov


# --- inputs ----------------------------------------------------------------------------------------------------


def _cut(text, words: int | None) -> str:
    return " ".join(str(text).split()[:int(words)]) if words else str(text)


def uses_chat_template(tokenizer, s: MRScoreSettings) -> bool:
    return bool(s.chat_template and getattr(tokenizer, "chat_template", None))


def build_inputs(tokenizer, references, hypotheses, s: MRScoreSettings) -> list[str]:
    n = s.max_report_words
    texts = [s.prompt_template.format(reference=_cut(r, n), hypothesis=_cut(h, n))
             for r, h in zip(references, hypotheses)]
    if uses_chat_template(tokenizer, s):
        texts = [tokenizer.apply_chat_template([{"role": "user", "content": t}], tokenize=False,
                                               add_generation_prompt=False) for t in texts]
    return texts


def encode(tokenizer, texts, s: MRScoreSettings, templated: bool) -> list[list[int]]:
    enc = tokenizer(list(texts), add_special_tokens=not templated, truncation=True, max_length=s.max_length)
    return [list(x) for x in enc["input_ids"]]


class MRScore(Metric):
    name = "mrscore"
    description = ("MRScore reward model (LLM backbone + LoRA + linear head, sigmoid) per report, mean over reports; "
                   "weights are user-supplied")
    family = "judge"
    columns = ("mrscore", "mrscore_reward")
    leaves = (mean_leaf("mrscore", "MRScore"),)
    Settings = MRScoreSettings
    packages = ("torch", "transformers", "tokenizers", "peft", "huggingface-hub", "safetensors")
    status = "needs-weights"
    default_resources = Resources(mem_mb=32000, runtime_min=120, threads=4, gpu=1)

    def settings(self, values=None, *, allow_remote_code=(), where=None):
        """The typed settings; ``model`` naming a folder radrank trained (``mrscore_train``) fills the backbone,
        adapter, head and prompt from it."""
        where = where or f"metric_settings.{self.name}"
        s = super().settings(values, allow_remote_code=allow_remote_code, where=where)
        return trained_settings(s, dict(values or {}), where)

    def weights(self, s):
        """Backbone, adapter (when set) and head; an unset backbone or head is refused at load, saying what to
        supply."""
        refs = [WeightRef(self.owner(), self.key("model"), s.model or "", need="model", revision=s.revision,
                          how="" if s.model else NOT_PUBLIC)]
        if s.adapter:
            refs.append(WeightRef(self.owner(), self.key("adapter"), s.adapter, need="dir",
                                  filename="adapter_config.json"))
        refs.append(WeightRef(self.owner(), self.key("head"), s.head or "", need="file", filename=s.head_file,
                              how="" if s.head else NOT_PUBLIC))
        return tuple(refs)

    def score(self, pairs, s, inputs, runtime):
        """sigmoid(reward) and the reward per pair, on the reward model ``runtime`` supplies for "mrscore" (tests,
        benchmarks) or the one of ``s``; each reward cached per (model identity, exact input)."""
        import pandas as pd

        from radrank.judge_cache import make_key
        from radrank.metrics.judge import cache_for

        reward_model, prov = runtime.supply(self.name), {}
        if reward_model is None:
            resolved = {ref.setting: runtime.resolve(ref) for ref in self.weights(s)}  # all found before torch
            reward_model, prov = load_reward_model(s, resolved, runtime)
            if s.model and (Path(s.model) / DEMO_MARKER).is_file():  # make mrscore-demo's base: the page says so
                prov = {**prov, "demo": True}
        tok = reward_model.tokenizer
        texts = build_inputs(tok, pairs["reference"].astype(str).tolist(), pairs["hypothesis"].astype(str).tolist(),
                             s)
        templated = uses_chat_template(tok, s)
        cache = cache_for(s)
        distinct: dict = {}
        index = [distinct.setdefault(t, len(distinct)) for t in texts]
        unique = list(distinct)
        params = {"max_length": s.max_length, "templated": templated}
        keys = [make_key(reward_model.identity, t, params) for t in unique]
        rewards: list = [None] * len(unique)
        todo = []
        for i, k in enumerate(keys):
            e = cache.get(k)
            if e is not None and e.get("reward") is not None:
                rewards[i] = float(e["reward"])
            else:
                todo.append(i)
        if todo:
            values = reward_model.rewards_ids(encode(tok, [unique[i] for i in todo], s, templated))
            for i, v in zip(todo, values):
                rewards[i] = float(v)
                cache.put(keys[i], {"text": "", "reward": float(v)})
        log.info("mrscore: %d pairs (%d distinct inputs), %d rewards from the cache", len(texts), len(unique),
                 len(unique) - len(todo))
        r = np.array([rewards[i] for i in index], dtype="float64")
        out = pd.DataFrame({"sample_id": pairs["sample_id"].to_numpy(), "mrscore": 1.0 / (1.0 + np.exp(-r)),
                            "mrscore_reward": r})
        out.attrs["models"] = prov
        return out


METRIC = MRScore()

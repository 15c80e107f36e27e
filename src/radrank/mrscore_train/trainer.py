"""MRScore's training stage: a LoRA reward model trained with TRL's ``RewardTrainer`` on (chosen, rejected, margin).

The model is the paper's (Liu et al. 2024, recovered from its parameter counts): a causal LM backbone loaded as a
1-output sequence classifier (``AutoModelForSequenceClassification``, ``num_labels=1``: the backbone's decoder plus a
bias-free linear ``score`` head), LoRA r = 16 on ``q_proj`` and ``v_proj`` (``peft``, task ``SEQ_CLS``, so the head
is trained and saved with the adapter), and the margin loss of Eq. 2, −mean log σ(r_chosen − r_rejected − m), which
is what ``RewardTrainer.compute_loss`` computes when the dataset has a ``margin`` column (trl 1.16,
``trl/trainer/reward_trainer.py``, ``compute_loss``).

Training sees token for token what the ``mrscore`` metric sees at inference:

* the inputs are made by the metric's own functions (:func:`build_texts`: :func:`radrank.metrics.mrscore.build_inputs`
  then :func:`radrank.metrics.mrscore.encode`) and handed to TRL already tokenised (``chosen_ids`` /
  ``rejected_ids``), so TRL neither tokenises nor appends an EOS (it does both only to text columns);
* TRL's length filter is off (``max_length=None``): a pair longer than ``max_length`` is never dropped silently —
  it stops the run, naming how many and the longest (``too_long: error``), or is dropped, counted and listed in
  ``train_state.json`` (``too_long: drop``);
* the reward is read at the last real token, as the metric reads it from the attention mask. A sequence
  classifier finds that token as the last one that is not ``pad_token_id``; the usual ``pad = eos`` moves it when a
  text ends with EOS (many chat templates close the user turn with it). The pad token is therefore one that occurs
  in no input (:func:`choose_pad_id`), so both poolings are the same position.

:func:`export_checkpoint` turns one checkpoint into the folder the metric loads (``mrscore.json``, ``adapter/``,
``reward_head.safetensors``). ``python -m radrank.mrscore_train.trainer`` is the entry point a job runs, also under
``torchrun`` / ``accelerate launch`` (:func:`launch_command`; only rank 0 writes the summary files).

torch, transformers, trl and peft are imported inside the functions: this module imports in the core environment.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import logging
import math
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Literal

from radrank.devices import DEVICE_DOC, check_device
from radrank.errors import ConfigError, InputError
from radrank.metrics.mrscore import TRAINED_FILE, TRAINED_FORMAT, prompt_of
from radrank.settings import Settings, remote_code, scored, speed

logger = logging.getLogger("radrank")

FORMAT = TRAINED_FORMAT  # the exported model folder, as the metric reads it
STATE_FORMAT = "radrank-mrscore-train-1"
WHERE = "mrscore_training.train"  # the config section of TrainSettings (messages name its keys)
OWNER = "MRScore training"
CHECKPOINTS = "checkpoints"
STATE_FILE = "train_state.json"
RUN_FILE = "train_run.json"  # what a run was started with: a resume must match it
ADAPTER_DIR = "adapter"
HEAD_FILE = "reward_head.safetensors"
PAIR_COLUMNS = ("pair_id", "reference_id", "reference", "chosen", "rejected", "score_chosen", "score_rejected",
                "margin")
NEEDED_COLUMNS = ("pair_id", "reference", "chosen", "rejected", "margin")
# Settings a resumed run may change: how long it trains and when it saves (the rest must match the checkpoints').
RESUMABLE = ("epochs", "max_steps", "save_steps")
VERSIONED = ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "safetensors", "tokenizers")
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


@dataclass(frozen=True)
class TrainSettings(Settings):
    """How the reward model is trained (config ``mrscore_training.train``). The paper gives the backbone and, through
    its parameter counts, LoRA r = 16 on q/v with a bias-free head; every other value here is radrank's choice."""

    base_model: str = scored("mistralai/Mistral-7B-Instruct-v0.2", "the backbone: a Hugging Face id or a local "
                                                                  "directory (the paper: Mistral-7B-Instruct)")
    base_revision: str | None = scored(None, "hub revision of the backbone (null: the cached / newest snapshot)")
    trust_remote_code: tuple[str, ...] = remote_code("base_model")
    lora_r: int = scored(16, "LoRA rank (the paper's parameter counts are r = 16)", minimum=1)
    lora_alpha: int = scored(32, "LoRA alpha (scale alpha / r; not given by the paper, 2·r is the common choice)",
                             minimum=1)
    lora_dropout: float = scored(0.05, "dropout on the LoRA input (the backbone's own dropout is switched off, as "
                                       "TRL does for reward models)", minimum=0.0, maximum=0.9)
    target_modules: tuple[str, ...] = scored(("q_proj", "v_proj"), "modules that get LoRA (the paper's counts: q_proj "
                                                                   "and v_proj)")
    learning_rate: float = scored(1e-4, "peak AdamW learning rate (TRL's default for LoRA reward models; the paper "
                                        "gives none)", minimum=0.0)
    lr_scheduler: Literal["linear", "cosine", "constant", "constant_with_warmup"] = scored(
        "linear", "learning-rate schedule after the warm-up (Trainer's default: linear decay to 0)")
    epochs: int = scored(2, "passes over the training pairs", minimum=1)
    max_steps: int | None = scored(None, "stop after this many optimizer steps (null: the epochs decide)", minimum=1)
    per_device_batch_size: int = scored(4, "pairs per forward pass and process (each pair is two sequences)",
                                        minimum=1)
    gradient_accumulation_steps: int = scored(4, "forward passes per optimizer step, for one process: the effective "
                                                 "batch is per_device_batch_size x this (16 pairs); with N processes "
                                                 "each accumulates this / N, so the batch stays the same", minimum=1)
    max_length: int = scored(1024, "longest input in tokens (chosen or rejected, prompt included); see too_long",
                             minimum=2)
    too_long: Literal["error", "drop"] = scored("error", "a pair longer than max_length (or than the prompt's "
                                                         "max_length, where the metric would cut it): error stops the "
                                                         "run naming them; drop leaves them out, counted and listed "
                                                         "in train_state.json")
    warmup_ratio: float = scored(0.03, "share of the optimizer steps spent warming the learning rate up from 0",
                                 minimum=0.0, maximum=0.99)
    weight_decay: float = scored(0.0, "AdamW weight decay", minimum=0.0)
    max_grad_norm: float = scored(1.0, "gradient clipping norm (Trainer's default)", minimum=0.0)
    center_rewards_coefficient: float | None = scored(None, "adds c·mean((r_chosen + r_rejected)^2) to the loss "
                                                            "(TRL's option; 0.01 is its suggestion; null: off)",
                                                      minimum=0.0)
    seed: int = scored(0, "seed of the head's initialisation, the LoRA initialisation and the data order", minimum=0)
    dtype: Literal["auto", "bf16", "fp16", "fp32"] = scored("auto", "backbone precision and mixed-precision mode "
                                                                    "(auto: bf16 on CUDA, fp32 on the CPU); the "
                                                                    "trained parameters stay fp32")
    save_steps: int = scored(100, "save a checkpoint every this many optimizer steps (and at the end); every "
                                  "checkpoint is a candidate of the selection stage", minimum=1)
    eval_steps: int | None = speed(None, "evaluate on the validation pairs every this many steps (null: at every "
                                         "save)", minimum=1)
    logging_steps: int = speed(10, "log the loss, accuracy and rewards every this many steps", minimum=1)
    save_total_limit: int | None = speed(None, "keep at most this many checkpoints, the newest (null: all)",
                                         minimum=1)
    gradient_checkpointing: Literal["auto", True, False] = speed("auto", "recompute activations in the backward "
                                                                         "pass (less memory, ~30 % slower; auto: on "
                                                                         "CUDA, off on the CPU)")
    gpus: int = speed(1, "processes, one GPU each (data parallel, torchrun); the effective batch does not change",
                      minimum=1)
    device: str = speed("auto", DEVICE_DOC)

    def check(self, where):
        check_device(self.device, f"{where}.device")
        if not self.target_modules:
            raise self.fail(where, "target_modules", "name at least one module (the paper: q_proj, v_proj)")
        if self.gradient_accumulation_steps % self.gpus:
            raise self.fail(where, "gpus", f"{self.gpus} processes cannot share gradient_accumulation_steps "
                                           f"{self.gradient_accumulation_steps} evenly; make it a multiple of gpus")
        if self.gpus > 1 and str(self.device).lower().startswith("cuda:"):
            raise self.fail(where, "device", f"{self.device!r} pins one GPU; {self.gpus} processes need device auto "
                                             "or cuda")


# --- inputs: the metric's own functions -----------------------------------------------------------------------


def build_texts(tokenizer, references, hypotheses, prompt) -> list[list[int]]:
    """Token ids of each (reference, hypothesis) exactly as the ``mrscore`` metric builds them at inference:
    :func:`radrank.metrics.mrscore.build_inputs` then :func:`radrank.metrics.mrscore.encode` (``prompt``: a
    :class:`~radrank.metrics.mrscore.MRScoreSettings`; inputs longer than its ``max_length`` are cut, as the metric
    cuts them)."""
    from radrank.metrics import mrscore

    texts = mrscore.build_inputs(tokenizer, list(references), list(hypotheses), prompt)
    return mrscore.encode(tokenizer, texts, prompt, templated=mrscore.uses_chat_template(tokenizer, prompt))


def _uncut_lengths(tokenizer, references, hypotheses, prompt) -> list[int]:
    """Token counts of the same inputs before the metric's cut at ``prompt.max_length``."""
    return [len(x) for x in build_texts(tokenizer, references, hypotheses, prompt.replace(max_length=1 << 30))]


def choose_pad_id(tokenizer, sequences, vocab_size: int | None = None) -> int:
    """A pad token id that occurs in none of ``sequences``: the tokenizer's pad, its unk, another special token, else
    the highest unused id — so a sequence classifier's "last token that is not pad" is the last real token."""
    used = set()
    for seq in sequences:
        used.update(seq)
    limit = min(len(tokenizer), vocab_size) if vocab_size else len(tokenizer)
    candidates = [tokenizer.pad_token_id, tokenizer.unk_token_id, *getattr(tokenizer, "all_special_ids", [])]
    candidates += range(limit - 1, -1, -1)
    for tid in candidates:
        if tid is None or not 0 <= int(tid) < limit or int(tid) in used:
            continue
        token = tokenizer.convert_ids_to_tokens(int(tid))
        if token is not None and tokenizer.convert_tokens_to_ids(token) == int(tid):
            return int(tid)
    raise ConfigError(f"{OWNER}: every one of the tokenizer's {limit} ids occurs in the inputs; no pad token can be "
                      "told apart from the text")


def _frame_source(frame, default: str) -> str:
    return str(getattr(frame, "attrs", {}).get("path") or default)


def _check_frame(frame, what: str):
    source = _frame_source(frame, f"<{what} pairs>")
    missing = [c for c in NEEDED_COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(source, f"the {what} pairs lack column(s) {missing}; expected {list(PAIR_COLUMNS)}")
    for col in ("reference", "chosen", "rejected"):
        bad = frame[col].isna() | ~frame[col].map(lambda v: isinstance(v, str))
        if bad.any():
            row = int(bad.to_numpy().nonzero()[0][0])
            raise InputError(source, "not a text", field=col, row=row)
    import numpy as np

    margins = frame["margin"].to_numpy(dtype="float64")
    if not np.isfinite(margins).all():
        row = int((~np.isfinite(margins)).nonzero()[0][0])
        raise InputError(source, "the margin is not a finite number", field="margin", row=row)


@dataclass
class PreparedPairs:
    """Tokenised pairs for TRL and what was left out."""

    chosen_ids: list
    rejected_ids: list
    margins: list
    pair_ids: list
    dropped: list = field(default_factory=list)  # [{"pair_id", "tokens"}] over the limit (too_long: drop)
    longest: int = 0

    def __len__(self):
        return len(self.chosen_ids)

    def digest(self) -> str:
        blob = json.dumps([self.chosen_ids, self.rejected_ids, self.margins], separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()


def prepare_pairs(tokenizer, frame, settings: TrainSettings, prompt, *, what: str = "training",
                  where: str = WHERE) -> PreparedPairs:
    """The pairs of ``frame`` as the metric's token ids (:func:`build_texts`), over-long pairs refused or dropped
    (``settings.too_long``), never silently."""
    _check_frame(frame, what)
    refs = frame["reference"].tolist()
    chosen = build_texts(tokenizer, refs, frame["chosen"].tolist(), prompt)
    rejected = build_texts(tokenizer, refs, frame["rejected"].tolist(), prompt)
    full_c = _uncut_lengths(tokenizer, refs, frame["chosen"].tolist(), prompt)
    full_r = _uncut_lengths(tokenizer, refs, frame["rejected"].tolist(), prompt)
    limit = min(int(settings.max_length), int(prompt.max_length))
    ids = [str(x) for x in frame["pair_id"].tolist()]
    lengths = [max(a, b) for a, b in zip(full_c, full_r)]
    over = [i for i, n in enumerate(lengths) if n > limit]
    longest = max(lengths, default=0)
    if over and settings.too_long == "error":
        worst = max(over, key=lambda i: lengths[i])
        names = ", ".join(f"{ids[i]} ({lengths[i]})" for i in sorted(over, key=lambda i: -lengths[i])[:5])
        raise ConfigError(
            f"config {where}.max_length: {len(over)} of {len(ids)} {what} pairs are longer than {limit} tokens "
            f"(chosen or rejected, prompt included; the longest: pair {ids[worst]}, {lengths[worst]} tokens; "
            f"{names}). TRL would drop them silently and the metric would cut them at prompt.max_length "
            f"({prompt.max_length}). Raise {where}.max_length (and mrscore_training.prompt.max_length), lower "
            f"mrscore_training.prompt.max_report_words, or set {where}.too_long: drop to leave them out (listed in "
            f"{STATE_FILE})")
    skipped = set(over)
    keep = [i for i in range(len(ids)) if i not in skipped]
    dropped = [{"pair_id": ids[i], "tokens": lengths[i]} for i in over]
    if dropped:
        logger.warning("%s: %d of %d %s pairs are longer than %d tokens and are left out (too_long: drop; the "
                       "longest %d tokens)", OWNER, len(dropped), len(ids), what, limit, longest)
    margins = frame["margin"].to_numpy(dtype="float64").tolist()
    return PreparedPairs([chosen[i] for i in keep], [rejected[i] for i in keep], [float(margins[i]) for i in keep],
                         [ids[i] for i in keep], dropped, longest)


# --- the model --------------------------------------------------------------------------------------------------

_MODULE_SHAPES = {  # name -> (in, out) in terms of the text config
    "q_proj": lambda c: (c["hidden"], c["heads"] * c["head_dim"]),
    "k_proj": lambda c: (c["hidden"], c["kv_heads"] * c["head_dim"]),
    "v_proj": lambda c: (c["hidden"], c["kv_heads"] * c["head_dim"]),
    "o_proj": lambda c: (c["heads"] * c["head_dim"], c["hidden"]),
    "gate_proj": lambda c: (c["hidden"], c["intermediate"]),
    "up_proj": lambda c: (c["hidden"], c["intermediate"]),
    "down_proj": lambda c: (c["intermediate"], c["hidden"]),
}


def _shape_of(config) -> dict:
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    hidden = int(text.hidden_size)
    heads = int(text.num_attention_heads)
    head_dim = getattr(text, "head_dim", None) or hidden // heads
    kv = getattr(text, "num_key_value_heads", None) or heads
    return {"hidden": hidden, "heads": heads, "head_dim": int(head_dim), "kv_heads": int(kv),
            "layers": int(text.num_hidden_layers), "intermediate": getattr(text, "intermediate_size", None)}


def lora_trainable_parameters(config, r: int = 16, target_modules=("q_proj", "v_proj")) -> int:
    """Trainable parameters of LoRA rank ``r`` on ``target_modules`` of every layer plus a bias-free 1-output score
    head, from a transformers config alone: layers · r · Σ(in + out) + hidden. Mistral-7B, r 16, q/v: 6,819,840."""
    c = _shape_of(config)
    per_layer = 0
    for name in target_modules:
        if name not in _MODULE_SHAPES:
            raise ValueError(f"no shape rule for module {name!r}; known: {', '.join(_MODULE_SHAPES)}")
        if name in ("gate_proj", "up_proj", "down_proj") and not c["intermediate"]:
            raise ValueError(f"{name}: the config has no intermediate_size")
        fan_in, fan_out = _MODULE_SHAPES[name](c)
        per_layer += fan_in + fan_out
    return c["layers"] * int(r) * per_layer + c["hidden"]


def _lora_config(settings: TrainSettings, task_type: str = "SEQ_CLS"):
    from peft import LoraConfig

    return LoraConfig(task_type=task_type, r=int(settings.lora_r), lora_alpha=int(settings.lora_alpha),
                      lora_dropout=float(settings.lora_dropout), target_modules=list(settings.target_modules),
                      bias="none")


def _check_head(model, where: str = WHERE):
    import torch

    head = getattr(model, "score", None)
    hidden = model.config.get_text_config().hidden_size
    if not isinstance(head, torch.nn.Linear) or head.out_features != 1 or head.bias is not None \
            or head.in_features != hidden:
        raise ConfigError(f"config {where}.base_model: {type(model).__name__} has no bias-free 1-output linear "
                          f"`score` head on the hidden state ({head!r}); MRScore's reward head is (1, hidden) "
                          "without bias — use a decoder backbone whose sequence classifier has one (Llama, Mistral, "
                          "Gemma, Qwen, Phi)")
    return head


def build_model(directory, settings: TrainSettings, *, dtype, trust_remote_code: bool = False, where: str = WHERE):
    """The sequence classifier (num_labels 1) of ``directory`` with LoRA (:func:`add_lora`). Returns the peft model."""
    from transformers import AutoModelForSequenceClassification, set_seed

    try:  # TRL's own scope that silences the expected "score.weight missing / lm_head unexpected" report
        from trl.trainer.reward_trainer import suppress_seqcls_warning
    except ImportError:  # pragma: no cover - another trl
        from contextlib import nullcontext as suppress_seqcls_warning

    set_seed(int(settings.seed))  # the head's random initialisation
    with suppress_seqcls_warning():
        model = AutoModelForSequenceClassification.from_pretrained(
            str(directory), num_labels=1, dtype=dtype, trust_remote_code=trust_remote_code, local_files_only=True)
    return add_lora(model, settings, where)


def add_lora(model, settings: TrainSettings, where: str = WHERE):
    """``model`` (a 1-output sequence classifier with a bias-free ``score`` head, checked) with the backbone's dropout
    off, LoRA of ``settings`` (peft, SEQ_CLS: the head is trained and saved too), and every trained parameter in fp32
    (the frozen backbone keeps its dtype)."""
    import torch
    from peft import get_peft_model

    _check_head(model, where)
    # The backbone's dropout off (TRL's disable_dropout, done before LoRA so that lora_dropout stays in effect).
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    try:
        peft_model = get_peft_model(model, _lora_config(settings))
    except ValueError as e:
        raise ConfigError(f"config {where}.target_modules: {e}") from None
    for p in peft_model.parameters():
        if p.requires_grad and p.dtype != torch.float32:
            p.data = p.data.float()
    return peft_model


def parameter_counts(model) -> tuple[int, int]:
    """(trainable, total) parameters, each tensor counted once."""
    seen, trainable, total = set(), 0, 0
    for p in model.parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        total += p.numel()
        trainable += p.numel() if p.requires_grad else 0
    return trainable, total


# --- runs, checkpoints --------------------------------------------------------------------------------------------


def checkpoints(folder) -> list[tuple[int, Path]]:
    """``(step, path)`` of every complete checkpoint in ``folder`` (trainer state and adapter weights), by step."""
    found = []
    folder = Path(folder)
    if not folder.is_dir():
        return found
    for p in folder.iterdir():
        m = _CHECKPOINT.match(p.name)
        if not (m and p.is_dir() and (p / "adapter_model.safetensors").is_file()
                and (p / "adapter_config.json").is_file() and (p / "trainer_state.json").is_file()):
            continue
        try:
            json.loads((p / "trainer_state.json").read_text(encoding="utf-8"))
        except ValueError:
            continue
        found.append((int(m.group(1)), p))
    return sorted(found)


def last_checkpoint(folder) -> Path | None:
    found = checkpoints(folder)
    return found[-1][1] if found else None


def _rank() -> int:
    return int(os.environ.get("RANK", "0"))


def _world() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def _write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
    tmp.write_text(json.dumps(obj, indent=1, sort_keys=True, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _run_identity(settings: TrainSettings, prompt, data: str, validation: str | None) -> dict:
    ident = {k: v for k, v in settings.identity().items() if k not in RESUMABLE}
    return {"settings": ident, "prompt": prompt_of(prompt), "train_data_sha256": data,
            "validation_data_sha256": validation}


def _check_resume(out_dir: Path, identity: dict, resume: Path | None) -> None:
    path = out_dir / RUN_FILE
    if resume is None or not path.is_file():
        if resume is not None:
            logger.warning("%s: %s has checkpoints but no %s; resuming without checking they belong to this run",
                           OWNER, out_dir, RUN_FILE)
        return
    before = json.loads(path.read_text(encoding="utf-8"))
    if before == identity:
        return
    changed = []
    for part in identity:
        a, b = before.get(part), identity[part]
        if isinstance(a, dict) and isinstance(b, dict):
            changed += [f"{part}.{k}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
        elif a != b:
            changed.append(part)
    raise ConfigError(f"{OWNER}: {out_dir} holds checkpoints of another run (changed: {', '.join(changed)}); only "
                      f"{', '.join(RESUMABLE)} may change when a run is resumed. Use another output folder, or remove "
                      f"{out_dir / CHECKPOINTS} to start over")


def _versions() -> dict:
    from radrank.provenance import package_versions

    return package_versions(VERSIONED)


def _device(settings: TrainSettings, where: str):
    """("cpu" | "cuda", dtype name) for this process."""
    import torch

    setting = str(settings.device).lower()
    if setting == "cpu":
        device = "cpu"
    elif setting == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    else:
        if not torch.cuda.is_available():
            raise ConfigError(f"config {where}.device: {settings.device!r} but no CUDA device is visible")
        if setting.startswith("cuda:") and _world() == 1:
            torch.cuda.set_device(int(setting[5:]))
        device = "cuda"
    dtype = settings.dtype
    if dtype == "auto":
        dtype = "bf16" if device == "cuda" else "fp32"
    if dtype == "fp16" and device == "cpu":
        raise ConfigError(f"config {where}.dtype: fp16 mixed precision needs a GPU; use fp32 or bf16 on the CPU")
    return device, dtype


@dataclass
class Prepared:
    """What :func:`prepare_trainer` built: the RewardTrainer and what the run records."""

    trainer: object
    tokenizer: object
    pad_id: int
    train: PreparedPairs
    validation: PreparedPairs | None
    resume: Path | None
    info: dict


def _log_callback(say):
    from transformers import TrainerCallback

    class LogCallback(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if state.is_world_process_zero and logs:
                shown = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in logs.items())
                say(f"step {state.global_step}/{state.max_steps}: {shown}")

    return LogCallback()


def _checkpointing_on(settings: TrainSettings, device: str) -> bool:
    return device == "cuda" if settings.gradient_checkpointing == "auto" else bool(settings.gradient_checkpointing)


def reward_config(settings: TrainSettings, output_dir, *, device: str, dtype: str, world: int = 1,
                  validation: bool = False):
    """TRL's RewardConfig for ``settings`` (``device`` "cpu" | "cuda", ``dtype`` "fp32" | "bf16" | "fp16", ``world``
    processes): the training :func:`train` runs, also what the GPU benchmark times."""
    from trl import RewardConfig

    checkpointing = _checkpointing_on(settings, device)
    args = RewardConfig(
        output_dir=str(output_dir),
        per_device_train_batch_size=int(settings.per_device_batch_size),
        per_device_eval_batch_size=int(settings.per_device_batch_size),
        gradient_accumulation_steps=int(settings.gradient_accumulation_steps) // world,
        learning_rate=float(settings.learning_rate),
        lr_scheduler_type=settings.lr_scheduler,
        num_train_epochs=float(settings.epochs),
        max_steps=int(settings.max_steps) if settings.max_steps else -1,
        warmup_steps=float(settings.warmup_ratio),  # < 1: a share of the steps (transformers 5's warmup_ratio)
        weight_decay=float(settings.weight_decay),
        max_grad_norm=float(settings.max_grad_norm),
        center_rewards_coefficient=settings.center_rewards_coefficient,
        seed=int(settings.seed),
        bf16=dtype == "bf16",
        fp16=dtype == "fp16",
        use_cpu=device == "cpu",
        max_length=None,  # TRL's silent filter off: over-long pairs were handled by prepare_pairs
        disable_dropout=False,  # done in add_lora, before LoRA, so lora_dropout is kept
        remove_unused_columns=True,  # keeps chosen_ids, rejected_ids and margin (RewardTrainer's signature columns)
        save_strategy="steps",
        save_steps=int(settings.save_steps),
        save_total_limit=settings.save_total_limit,
        eval_strategy="steps" if validation else "no",
        eval_steps=int(settings.eval_steps or settings.save_steps) if validation else None,
        logging_steps=int(settings.logging_steps),
        logging_first_step=True,
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
        ddp_find_unused_parameters=False if world > 1 else None,
        **_checkpointing_args(RewardConfig, checkpointing),
    )
    if world == 1 and device == "cuda" and args.n_gpu > 1:
        args._n_gpu = 1  # one process trains on one GPU (TRL refuses nn.DataParallel); several: torchrun
    return args


def _checkpointing_args(config_class, on: bool) -> dict:
    """Gradient checkpointing options under this transformers' name for them (5.x renamed gradient_checkpointing
    to activation_checkpointing and warns on the old name)."""
    import dataclasses

    names = {f.name for f in dataclasses.fields(config_class)}
    prefix = "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"
    return {prefix: on, f"{prefix}_kwargs": {"use_reentrant": False} if on else None}


def prepare_trainer(pairs, out_dir, settings: TrainSettings, prompt, *, validation=None,
                    log: Callable[[str], None] | None = None, where: str = WHERE) -> Prepared:
    """Resolve the backbone (a missing one fails here, before anything else), tokenise the pairs, build the LoRA
    sequence classifier and TRL's RewardTrainer. :func:`train` runs it."""
    from radrank.runtime import WeightRef, allows_remote_code, resolve

    say = log or logger.info
    out_dir = Path(out_dir)
    ref = WeightRef(OWNER, f"{where}.base_model", settings.base_model, need="model", revision=settings.base_revision)
    resolved = resolve(ref)  # MissingWeightsError naming the model and how to supply it, before torch is touched
    allowed = allows_remote_code(settings.base_model, settings.trust_remote_code)
    world = _world()
    if settings.gradient_accumulation_steps % world:
        raise ConfigError(f"config {where}.gradient_accumulation_steps: {settings.gradient_accumulation_steps} "
                          f"cannot be shared by {world} processes; make it a multiple of {world}")
    if world == 1 and settings.gpus > 1:
        raise ConfigError(f"config {where}.gpus: {settings.gpus} GPUs need {settings.gpus} processes; run "
                          f"{' '.join(launch_command(settings.gpus, ['...']))}")
    if world > 1 and world != settings.gpus:
        logger.warning("%s: launched with %d processes but gpus is %d", OWNER, world, settings.gpus)

    import torch
    from transformers import AutoTokenizer
    from trl import RewardTrainer

    device, dtype = _device(settings, where)
    torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]

    # The tokenizer exactly as the metric loads it (radrank.metrics.mrscore.load_reward_model).
    tokenizer = AutoTokenizer.from_pretrained(str(resolved.directory), trust_remote_code=allowed,
                                              local_files_only=True)
    train_pairs = prepare_pairs(tokenizer, pairs, settings, prompt, what="training", where=where)
    if not len(train_pairs):
        raise InputError(_frame_source(pairs, "<training pairs>"), "no training pair is left to train on")
    val_pairs = None
    if validation is not None and len(validation):
        val_pairs = prepare_pairs(tokenizer, validation, settings, prompt, what="validation", where=where)
        if not len(val_pairs):
            val_pairs = None

    model = build_model(resolved.directory, settings, dtype=torch_dtype, trust_remote_code=allowed, where=where)
    vocab = model.get_input_embeddings().num_embeddings
    every = train_pairs.chosen_ids + train_pairs.rejected_ids
    if val_pairs is not None:
        every += val_pairs.chosen_ids + val_pairs.rejected_ids
    pad_id = choose_pad_id(tokenizer, every, vocab)
    if tokenizer.pad_token_id is not None and tokenizer.pad_token_id != pad_id:
        say(f"the tokenizer's pad token {tokenizer.pad_token!r} occurs in the inputs: padding with "
            f"{tokenizer.convert_ids_to_tokens(pad_id)!r} (id {pad_id}) instead")
    # TRL takes the tokenizer's pad token and sets config.pad_token_id from it (reward_trainer.py, "Pad token").
    tokenizer.pad_token = tokenizer.convert_ids_to_tokens(pad_id)
    assert tokenizer.pad_token_id == pad_id, (tokenizer.pad_token, pad_id)
    model.config.get_text_config().pad_token_id = pad_id

    ckpt_dir = out_dir / CHECKPOINTS
    resume = last_checkpoint(ckpt_dir)
    identity = _run_identity(settings, prompt, train_pairs.digest(), val_pairs.digest() if val_pairs else None)
    _check_resume(out_dir, identity, resume)
    if _rank() == 0:
        _write_json(out_dir / RUN_FILE, identity)

    from datasets import Dataset

    def dataset(p: PreparedPairs):
        return Dataset.from_dict({"chosen_ids": p.chosen_ids, "rejected_ids": p.rejected_ids, "margin": p.margins})

    args = reward_config(settings, ckpt_dir, device=device, dtype=dtype, world=world,
                         validation=val_pairs is not None)
    checkpointing = _checkpointing_on(settings, device)
    trainer = RewardTrainer(model=model, args=args, train_dataset=dataset(train_pairs),
                            eval_dataset=dataset(val_pairs) if val_pairs is not None else None,
                            processing_class=tokenizer, callbacks=[_log_callback(say)])
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # disable_tqdm adds it; the log callback says the same through `log`
    if model.config.get_text_config().pad_token_id != pad_id:  # TRL must have kept our pad token
        raise RuntimeError(f"RewardTrainer set pad_token_id {model.config.get_text_config().pad_token_id}, "
                           f"not {pad_id}")
    trainable, total = parameter_counts(trainer.model)
    try:
        expected = lora_trainable_parameters(model.config, settings.lora_r, settings.target_modules)
    except ValueError:
        expected = None
    if expected is not None and expected != trainable:
        logger.warning("%s: %d trainable parameters, the LoRA formula gives %d", OWNER, trainable, expected)
    info = {"resolved": resolved, "device": device, "dtype": dtype, "world_size": world,
            "trainable_parameters": trainable, "total_parameters": total, "expected_trainable_parameters": expected,
            "gradient_checkpointing": bool(checkpointing), "identity": identity}
    return Prepared(trainer, tokenizer, pad_id, train_pairs, val_pairs, resume, info)


def train(pairs, out_dir, settings: TrainSettings, prompt, *, validation=None,
          log: Callable[[str], None] | None = None, where: str = WHERE) -> dict:
    """Train the reward model on ``pairs`` (a DataFrame with :data:`PAIR_COLUMNS`; ``validation`` the same, or None)
    into ``out_dir/checkpoints/checkpoint-N``, resuming from the last complete checkpoint there. Rank 0 writes
    ``out_dir/train_state.json``. Returns a small summary."""
    say = log or logger.info
    start = time.perf_counter()
    out_dir = Path(out_dir)
    prep = prepare_trainer(pairs, out_dir, settings, prompt, validation=validation, log=say, where=where)
    trainer = prep.trainer
    if prep.resume is not None:
        say(f"resuming from {prep.resume} (step {_CHECKPOINT.match(prep.resume.name).group(1)})")
    say(f"training {settings.base_model}: {len(prep.train)} pairs"
        + (f", {len(prep.validation)} validation pairs" if prep.validation else "")
        + f", {prep.info['trainable_parameters']:,} of {prep.info['total_parameters']:,} parameters trainable, "
          f"{prep.info['device']} {prep.info['dtype']}, {prep.info['world_size']} process(es)")
    result = trainer.train(resume_from_checkpoint=str(prep.resume) if prep.resume is not None else None)
    evaluation = trainer.evaluate() if prep.validation is not None else None
    state = trainer.state
    final = Path(trainer.args.output_dir) / f"checkpoint-{state.global_step}"
    resumed_step = int(_CHECKPOINT.match(prep.resume.name).group(1)) if prep.resume is not None else None
    summary = {"global_step": int(state.global_step), "epoch": state.epoch,
               "resumed_from": str(prep.resume) if prep.resume is not None else None, "resumed_step": resumed_step,
               "final_checkpoint": str(final) if final.is_dir() else None,
               "train_pairs": len(prep.train), "validation_pairs": len(prep.validation) if prep.validation else 0,
               "dropped_too_long": len(prep.train.dropped) + (len(prep.validation.dropped) if prep.validation else 0),
               "trainable_parameters": prep.info["trainable_parameters"],
               "total_parameters": prep.info["total_parameters"],
               "train_loss": float(result.training_loss) if result.training_loss is not None else None,
               "eval": evaluation, "state": str(out_dir / STATE_FILE)}
    if trainer.is_world_process_zero():
        from radrank.runtime import provenance

        record = {"format": STATE_FORMAT, **summary, "log_history": state.log_history,
                  "expected_trainable_parameters": prep.info["expected_trainable_parameters"],
                  "base_model": provenance(prep.info["resolved"]), "pad_token_id": prep.pad_id,
                  "device": prep.info["device"], "dtype": prep.info["dtype"], "world_size": prep.info["world_size"],
                  "gradient_checkpointing": prep.info["gradient_checkpointing"],
                  "settings": settings.as_dict(), "prompt": prompt_of(prompt),
                  "data": {"train_sha256": prep.info["identity"]["train_data_sha256"],
                           "validation_sha256": prep.info["identity"]["validation_data_sha256"],
                           "longest_tokens": max(prep.train.longest,
                                                 prep.validation.longest if prep.validation else 0),
                           "dropped_too_long": {"train": prep.train.dropped,
                                                "validation": prep.validation.dropped if prep.validation else []}},
                  "versions": _versions(), "seconds": round(time.perf_counter() - start, 2)}
        _write_json(out_dir / STATE_FILE, record)
    say(f"trained to step {state.global_step}" + (f" (resumed at {resumed_step})" if resumed_step is not None else "")
        + (f"; train loss {summary['train_loss']:.4f}" if summary["train_loss"] is not None else "")
        + (f"; eval loss {evaluation.get('eval_loss', math.nan):.4f}" if evaluation else ""))
    return summary


# --- export: the folder the metric loads ----------------------------------------------------------------------


def _module_paths(base_dir, trust_remote_code: bool = False) -> tuple[str, str, object]:
    """(backbone path in the sequence classifier, decoder path in the causal LM, the causal LM on the meta device)
    of the model in ``base_dir``, built from its config without weights."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification

    config = AutoConfig.from_pretrained(str(base_dir), trust_remote_code=trust_remote_code, local_files_only=True)
    seq_config = copy.deepcopy(config)
    seq_config.num_labels = 1
    with torch.device("meta"):
        lm = AutoModelForCausalLM.from_config(config, trust_remote_code=trust_remote_code)
        seq = AutoModelForSequenceClassification.from_config(seq_config, trust_remote_code=trust_remote_code)
    decoder = lm.get_decoder() if hasattr(lm, "get_decoder") else lm.base_model
    lm_path = next(name for name, module in lm.named_modules() if module is decoder)
    seq_path = next(name for name, module in seq.named_modules() if module is seq.base_model)
    return seq_path, lm_path, lm


def export_checkpoint(checkpoint_dir, out_dir, *, base_model: str, base_revision: str | None, prompt,
                      extra: dict | None = None, trust_remote_code: tuple = (), verify: bool = True) -> Path:
    """One training checkpoint → the MRScore model folder the ``mrscore`` metric loads:

    * ``adapter/adapter_config.json`` + ``adapter/adapter_model.safetensors`` — the LoRA weights only, as a
      ``CAUSAL_LM`` adapter of ``base_model`` (``modules_to_save`` null, keys of the causal LM's modules), loadable
      with ``peft.PeftModel.from_pretrained(AutoModelForCausalLM of the base, out_dir/"adapter")``;
    * ``reward_head.safetensors`` — ``weight`` float32 (1, hidden) from the trained score head, ``bias`` float32
      zeros (1,);
    * ``mrscore.json`` — ``{"format": "radrank-mrscore-1", "base_model", "base_revision", "prompt": {the four
      prompt settings}, "adapter": "adapter", "head": "reward_head.safetensors", **extra}``.

    With ``verify`` the adapter is loaded with peft into the base causal LM built on the meta device (its config
    only, no weights) and every LoRA parameter must be matched by the file and vice versa."""
    import torch
    from safetensors.torch import load_file, save_file

    from radrank.runtime import WeightRef, allows_remote_code, resolve

    checkpoint_dir, out_dir = Path(checkpoint_dir), Path(out_dir)
    extra = dict(extra or {})
    reserved = {"format", "base_model", "base_revision", "prompt", "adapter", "head"}
    if reserved & set(extra):
        raise ValueError(f"extra may not set {sorted(reserved & set(extra))}")
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        if not (checkpoint_dir / name).is_file():
            raise InputError(checkpoint_dir, f"not a PEFT checkpoint: no {name}")
    allowed = allows_remote_code(base_model, trust_remote_code)
    base = resolve(WeightRef(OWNER, f"{WHERE}.base_model", base_model, need="config", revision=base_revision))
    seq_path, lm_path, meta_lm = _module_paths(base.directory, allowed)

    config = json.loads((checkpoint_dir / "adapter_config.json").read_text(encoding="utf-8"))
    if config.get("peft_type") != "LORA":
        raise InputError(checkpoint_dir / "adapter_config.json", f"peft_type {config.get('peft_type')!r}, not LORA")
    state = load_file(str(checkpoint_dir / "adapter_model.safetensors"))
    seq_prefix = f"base_model.model.{seq_path}."
    lm_prefix = f"base_model.model.{lm_path}."
    lora, head = {}, None
    for key, value in state.items():
        if re.search(r"(^|\.)score\.weight$", key):
            head = value
        elif re.search(r"(^|\.)score\.bias$", key):
            raise InputError(checkpoint_dir, "the score head has a bias; MRScore's head is bias-free")
        elif ".lora_" in key:
            if not key.startswith(seq_prefix):
                raise InputError(checkpoint_dir, f"adapter key {key!r} is outside the backbone {seq_path!r}")
            lora[lm_prefix + key[len(seq_prefix):]] = value.contiguous()
        else:
            raise InputError(checkpoint_dir, f"adapter key {key!r} is neither LoRA nor the score head")
    if head is None:
        raise InputError(checkpoint_dir, "no trained score head (score.weight) in adapter_model.safetensors")
    if not lora:
        raise InputError(checkpoint_dir, "no LoRA weights in adapter_model.safetensors")
    hidden = meta_lm.config.get_text_config().hidden_size
    weight = head.detach().to(torch.float32).reshape(1, -1).contiguous()
    if weight.shape[1] != hidden:
        raise InputError(checkpoint_dir, f"the score head has {weight.shape[1]} inputs, the base model's hidden size "
                                         f"is {hidden}")

    adapter_dir = out_dir / ADAPTER_DIR
    adapter_dir.mkdir(parents=True, exist_ok=True)
    config.update({"task_type": "CAUSAL_LM", "modules_to_save": None, "base_model_name_or_path": base_model,
                   "revision": base_revision, "inference_mode": True})
    (adapter_dir / "adapter_config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n",
                                                     encoding="utf-8")
    save_file(lora, str(adapter_dir / "adapter_model.safetensors"), metadata={"format": "pt"})
    save_file({"weight": weight, "bias": torch.zeros(1, dtype=torch.float32)}, str(out_dir / HEAD_FILE))
    meta = {"format": FORMAT, "base_model": base_model, "base_revision": base_revision,
            "prompt": prompt_of(prompt), "adapter": ADAPTER_DIR, "head": HEAD_FILE,
            **extra}
    _write_json(out_dir / TRAINED_FILE, meta)
    if verify:
        verify_adapter(adapter_dir, meta_lm)
    return out_dir


def verify_adapter(adapter_dir, lm) -> None:
    """Load ``adapter_dir`` with peft into ``lm`` (a causal LM, e.g. on the meta device) and require that the file's
    keys and the adapter's LoRA parameters are the same set."""
    import warnings

    from peft import PeftModel
    from peft.utils import get_peft_model_state_dict
    from safetensors import safe_open

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # copying into meta tensors is a no-op, which torch warns about
        model = PeftModel.from_pretrained(lm, str(adapter_dir), is_trainable=False)
    expected = set(get_peft_model_state_dict(model).keys())
    with safe_open(str(Path(adapter_dir) / "adapter_model.safetensors"), "pt") as fh:
        stored = set(fh.keys())
    if expected != stored:
        raise RuntimeError(f"{adapter_dir}: the exported adapter does not fit the base causal LM (unmatched file "
                           f"keys {sorted(stored - expected)[:4]}, LoRA parameters without a key "
                           f"{sorted(expected - stored)[:4]})")
    if model.peft_config["default"].task_type != "CAUSAL_LM" or model.peft_config["default"].modules_to_save:
        raise RuntimeError(f"{adapter_dir}: not a plain CAUSAL_LM adapter")


# --- launching -------------------------------------------------------------------------------------------------


def launch_command(gpus: int, args, python: str | None = None) -> list[str]:
    """The command a job runs: this module in one process, or under torchrun with ``gpus`` processes (one node)."""
    python = python or sys.executable
    module = ["-m", "radrank.mrscore_train.trainer", *map(str, args)]
    if int(gpus) <= 1:
        return [python, *module]
    return [python, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={int(gpus)}", *module]


def _read_pairs(path):
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise InputError(path, "no such file")
    frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path, keep_default_na=False)
    frame.attrs["path"] = str(path)
    return frame


def _read_mapping(path, what: str) -> dict:
    if path is None:
        return {}
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(path, f"cannot read the {what} JSON: {e}") from None
    if not isinstance(value, dict):
        raise InputError(path, f"the {what} JSON must be a mapping of setting names to values")
    return value


def main(argv=None) -> int:
    from radrank.errors import RadrankError
    from radrank.metrics.mrscore import MRScoreSettings

    parser = argparse.ArgumentParser(prog="python -m radrank.mrscore_train.trainer",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", required=True, help="training pairs (parquet or CSV with the pair columns)")
    parser.add_argument("--validation", help="validation pairs (same columns)")
    parser.add_argument("--out", required=True, help="output folder (checkpoints/, train_state.json)")
    parser.add_argument("--settings", help="TrainSettings as a JSON mapping")
    parser.add_argument("--prompt", help="the metric's prompt settings as a JSON mapping")
    parser.add_argument("--export", help="also export the final checkpoint to this MRScore model folder (rank 0)")
    ns = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if _rank() == 0 else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(message)s")
    try:
        settings = TrainSettings.build(_read_mapping(ns.settings, "settings"), where=WHERE)
        prompt = MRScoreSettings.build(_read_mapping(ns.prompt, "prompt"), where="mrscore_training.prompt")
        validation = _read_pairs(ns.validation) if ns.validation else None
        summary = train(_read_pairs(ns.pairs), ns.out, settings, prompt, validation=validation)
        if ns.export and _rank() == 0:
            if not summary["final_checkpoint"]:
                raise RuntimeError("training saved no final checkpoint to export")
            export_checkpoint(summary["final_checkpoint"], ns.export, base_model=settings.base_model,
                              base_revision=settings.base_revision, prompt=prompt,
                              trust_remote_code=settings.trust_remote_code,
                              extra={"training": {"checkpoint": Path(summary["final_checkpoint"]).name,
                                                  "step": summary["global_step"]}})
    except RadrankError as e:
        logger.error("%s", e)
        _leave_process_group()
        return 2
    _leave_process_group()
    if _rank() == 0:
        print(json.dumps({k: v for k, v in summary.items() if k != "eval"} | {"eval": summary["eval"]}, default=str))
    return 0


def _leave_process_group() -> None:
    """Under torchrun, wait for rank 0's export and close the process group before the interpreter exits: a rank
    that exits with it open can abort in gloo's threads ("terminate called without an active exception"), which
    torchrun reports as the whole job failing."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())

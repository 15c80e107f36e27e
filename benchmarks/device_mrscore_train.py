"""MRScore training on one GPU: LoRA reward-model training speed, reward inference speed, peak memory.

One prepared script for the GPU machine (random-init weights of the real shape, no download, no tokenizer
files, HF_HUB_OFFLINE=1). It builds Mistral-7B-Instruct-v0.2's shape (hidden 4096, intermediate 14336, 32
layers, 32 heads, 8 KV heads, vocab 32000) as a 1-output sequence classifier in bf16 on CUDA, puts the
trainer's own LoRA on it (:func:`radrank.mrscore_train.trainer.add_lora`: r 16 on q_proj / v_proj, SEQ_CLS,
backbone dropout off, trained parameters fp32), and feeds synthetic token-id pairs of realistic length
(``--length`` tokens, default 600, each sequence between ``(1 - --jitter)·length`` and ``length``):

1. **training** — ``--loop trl`` (default when trl imports): TRL's ``RewardTrainer`` with the trainer's exact
   ``RewardConfig`` (:func:`radrank.mrscore_train.trainer.reward_config`: per-device batch ``--batch`` pairs,
   accumulation ``--accum``, gradient checkpointing on CUDA, bf16 mixed precision, margin loss); ``--loop manual``
   (the fallback where trl / datasets are not installed): the same loss −mean log σ(r_c − r_r − m) in a plain
   AdamW loop with the same batch, accumulation, autocast and checkpointing. ``--warmup-steps`` optimizer steps
   are run untimed, then ``--steps`` are timed: optimizer steps/s, pairs/s, real (attention-mask) tokens/s;
2. **reward inference** — the LoRA merged into the backbone (as the metric merges it), then
   :class:`radrank.metrics.mrscore.RewardModel` — the metric's own batched forward (length-sorted batches of
   ``--reward-batch``, OOM halving, reward at the last token) — over ``--reward-pairs`` inputs: pairs/s;
3. peak GPU memory of each part (``torch.cuda.max_memory_allocated``).

    python benchmarks/device_mrscore_train.py                   # the H200, < 8 minutes
    python benchmarks/device_mrscore_train.py --length 900 --batch 8 --accum 2
    python benchmarks/device_mrscore_train.py --tiny --device cpu   # smoke test (< 1 min), train env

Prints one JSON line of figures at the end (and progress lines before it) and writes it to ``--json``
(default ``$OUT/device_mrscore_train.json`` when $OUT is set) after every part, so a run cut short still
reports what it measured. ``--budget-s`` (default 420) bounds the run: training stops timing when its share
(2/3 of what is left after building the model) is spent and says how many steps it timed.

The GPU machine has torch and transformers but possibly neither peft, accelerate, trl nor datasets: carry the
wheels (device README); ``--loop manual`` needs peft and accelerate only.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

START = time.perf_counter()
RESULTS: dict = {"benchmark": "device_mrscore_train", "parts": {}}


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - START:7.1f} s] {msg}", file=sys.stderr, flush=True)


def save(path) -> None:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(RESULTS, indent=1, default=str))


def sync(device) -> None:
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def free() -> None:
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def peak_gb(device) -> float | None:
    import torch

    if str(device).startswith("cuda"):
        return round(torch.cuda.max_memory_allocated() / 2**30, 2)
    return None


def reset_peak(device) -> None:
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()


# --- model, tokenizer, data -------------------------------------------------------------------------------------


def mistral_config(tiny: bool):
    from transformers import MistralConfig

    if tiny:
        config = MistralConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                               sliding_window=None, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
    else:  # mistralai/Mistral-7B-Instruct-v0.2's config.json
        config = MistralConfig(vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                               num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                               max_position_embeddings=32768, rms_norm_eps=1e-5, rope_theta=1e6, sliding_window=None,
                               bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
    config.num_labels = 1
    config.pad_token_id = config.vocab_size - 1  # never drawn in the synthetic ids: pooling = the last real token
    return config


def word_tokenizer(vocab_size: int):
    """A tokenizer whose vocabulary is the model's ids ("t0" … "tN"): TRL needs one for its pad token."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({f"t{i}": i for i in range(vocab_size)}, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="t0", bos_token="t1", eos_token="t2",
                                   pad_token=f"t{vocab_size - 1}")


def synthetic_pairs(n: int, length: int, jitter: float, vocab_size: int, seed: int = 0) -> dict:
    import numpy as np

    rng = np.random.default_rng(seed)
    low = max(2, int(round(length * (1 - jitter))))

    def seq():
        return rng.integers(3, vocab_size - 1, size=int(rng.integers(low, length + 1))).tolist()

    return {"chosen_ids": [seq() for _ in range(n)], "rejected_ids": [seq() for _ in range(n)],
            "margin": rng.uniform(0.0, 1.0, size=n).round(3).tolist()}


def build_classifier(config, device: str, dtype):
    import torch
    from transformers import MistralForSequenceClassification

    torch.manual_seed(0)
    with torch.device(device):
        model = MistralForSequenceClassification._from_config(config, dtype=dtype)
    return model


def train_settings(ns, device: str, dtype: str, steps: int):
    from radrank.mrscore_train.trainer import TrainSettings

    return TrainSettings.build({"base_model": "random-init", "device": "cuda" if device.startswith("cuda") else "cpu",
                                "dtype": dtype, "per_device_batch_size": ns.batch, "gradient_accumulation_steps":
                                    ns.accum, "max_steps": steps, "max_length": max(2, ns.length),
                                "gradient_checkpointing": {"auto": "auto", "true": True, "false": False}[
                                    ns.checkpointing], "logging_steps": 10**6, "save_steps": 10**6,
                                "warmup_ratio": 0.0})


# --- training ---------------------------------------------------------------------------------------------------


def figures(marks, warm: int, batch: int, accum: int) -> dict:
    """Rates over the timed steps: marks are (step, seconds, real tokens so far) after each optimizer step."""
    timed = [m for m in marks if m[0] >= warm]
    if len(timed) < 2:
        return {"timed_steps": 0}
    (s0, t0, k0), (s1, t1, k1) = timed[0], timed[-1]
    dt = t1 - t0
    return {"timed_steps": s1 - s0, "seconds": round(dt, 3), "steps_per_s": round((s1 - s0) / dt, 4),
            "pairs_per_s": round((s1 - s0) * batch * accum / dt, 3), "tokens_per_s": round((k1 - k0) / dt, 1),
            "step_s": round(dt / (s1 - s0), 3)}


def train_trl(model, settings, data, tokenizer, device, warm, budget_s, out_dir):
    from datasets import Dataset
    from transformers import TrainerCallback
    from transformers.trainer_utils import SaveStrategy
    from trl import RewardTrainer

    from radrank.mrscore_train.trainer import reward_config

    dtype = "bf16" if settings.dtype == "bf16" else ("fp16" if settings.dtype == "fp16" else "fp32")
    args = reward_config(settings, out_dir, device="cuda" if device.startswith("cuda") else "cpu", dtype=dtype)
    args.save_strategy = SaveStrategy.NO  # nothing to keep: random weights
    marks, holder = [], {}

    class Timer(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            sync(device)
            now = time.perf_counter()
            marks.append((state.global_step, now, getattr(holder["trainer"], "_total_train_tokens", 0)))
            if state.global_step == 1:
                log(f"first optimizer step done ({now - holder['start']:.1f} s after train() began)")
            if state.global_step > warm and now - holder["start"] > budget_s:
                log(f"training budget {budget_s:.0f} s spent at step {state.global_step}")
                control.should_training_stop = True

    trainer = RewardTrainer(model=model, args=args, train_dataset=Dataset.from_dict(data), processing_class=tokenizer,
                            callbacks=[Timer()])
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    holder["trainer"] = trainer
    holder["start"] = time.perf_counter()
    marks.append((0, holder["start"], 0))
    trainer.train()
    model = trainer.model
    del trainer
    return model, marks


def train_manual(model, settings, data, pad_id, device, warm, budget_s):
    """The same loss, batch, accumulation, precision and checkpointing without TRL."""
    import torch

    cuda = device.startswith("cuda")
    checkpointing = cuda if settings.gradient_checkpointing == "auto" else bool(settings.gradient_checkpointing)
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=settings.learning_rate, weight_decay=settings.weight_decay)
    b, a = settings.per_device_batch_size, settings.gradient_accumulation_steps
    n = len(data["margin"])
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if cuda and settings.dtype in ("auto", "bf16") else None
    marks, tokens, start, row = [(0, time.perf_counter(), 0)], 0, time.perf_counter(), 0
    for step in range(1, settings.max_steps + 1):
        for _ in range(a):
            idx = [(row + i) % n for i in range(b)]
            row += b
            seqs = [data["chosen_ids"][i] for i in idx] + [data["rejected_ids"][i] for i in idx]
            width = max(len(s) for s in seqs)
            ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
            mask = torch.zeros((len(seqs), width), dtype=torch.long)
            for r, s in enumerate(seqs):
                ids[r, :len(s)] = torch.tensor(s)
                mask[r, :len(s)] = 1
            margin = torch.tensor([data["margin"][i] for i in idx], dtype=torch.float32, device=device)
            ids, mask = ids.to(device), mask.to(device)
            tokens += int(mask.sum())
            if autocast is not None:
                with autocast:
                    logits = model(input_ids=ids, attention_mask=mask, use_cache=False).logits[:, 0]
            else:
                logits = model(input_ids=ids, attention_mask=mask, use_cache=False).logits[:, 0]
            rc, rr = torch.chunk(logits.float(), 2)
            loss = -torch.nn.functional.logsigmoid(rc - rr - margin).mean() / a
            loss.backward()
        torch.nn.utils.clip_grad_norm_(params, settings.max_grad_norm)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync(device)
        now = time.perf_counter()
        marks.append((step, now, tokens))
        if step == 1:
            log(f"first optimizer step done ({now - start:.1f} s)")
        if step > warm and now - start > budget_s:
            log(f"training budget {budget_s:.0f} s spent at step {step}")
            break
    del opt
    return model, marks


# --- reward inference ------------------------------------------------------------------------------------------


def reward_inference(peft_model, device, n: int, batch: int, length: int, jitter: float, vocab: int) -> dict:
    import torch

    from radrank.metrics.mrscore import RewardModel

    merged = peft_model.merge_and_unload().eval()  # as the metric merges the adapter
    for p in merged.parameters():
        p.requires_grad_(False)
    disable = getattr(merged, "activation_checkpointing_disable", None) or getattr(
        merged, "gradient_checkpointing_disable", None)
    if disable is not None:
        disable()
    head = merged.score.weight.detach().float().reshape(1, -1)
    rm = RewardModel(merged, None, head, torch.zeros(1), device=device, batch_size=batch, max_length=length + 8,
                     identity={})
    ids = synthetic_pairs(n, length, jitter, vocab, seed=1)["chosen_ids"]
    rm.rewards_ids(ids[:batch])  # warm-up (kernels, allocator), untimed
    sync(device)
    reset_peak(device)
    t = time.perf_counter()
    rewards = rm.rewards_ids(ids)
    sync(device)
    dt = time.perf_counter() - t
    import math

    assert len(rewards) == n and all(math.isfinite(r) for r in rewards)
    return {"pairs": n, "batch": batch, "seconds": round(dt, 3), "pairs_per_s": round(n / dt, 2),
            "tokens_per_s": round(sum(map(len, ids)) / dt, 1), "peak_gb": peak_gb(device)}


# --- main --------------------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    parser.add_argument("--tiny", action="store_true", help="a tiny Mistral and short inputs (CPU smoke test)")
    parser.add_argument("--loop", choices=("auto", "trl", "manual"), default="auto")
    parser.add_argument("--length", type=int, help="tokens per sequence at most (default 600; tiny 48)")
    parser.add_argument("--jitter", type=float, default=0.15, help="sequences are (1 - jitter)·length to length long")
    parser.add_argument("--batch", type=int, default=4, help="pairs per forward pass (per_device_batch_size)")
    parser.add_argument("--accum", type=int, default=4, help="gradient_accumulation_steps")
    parser.add_argument("--steps", type=int, help="timed optimizer steps (default 12; tiny 3)")
    parser.add_argument("--warmup-steps", type=int, default=2, help="untimed optimizer steps first")
    parser.add_argument("--checkpointing", choices=("auto", "true", "false"), default="auto")
    parser.add_argument("--dtype", default="auto", choices=("auto", "bf16", "fp32"))
    parser.add_argument("--reward-pairs", type=int, help="inputs scored by the reward model (default 512; tiny 16)")
    parser.add_argument("--reward-batch", type=int, default=32, help="the metric's batch_size")
    parser.add_argument("--budget-s", type=float, default=420.0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads on the CPU")
    parser.add_argument("--json", default=os.path.join(os.environ["OUT"], "device_mrscore_train.json")
                        if os.environ.get("OUT") else None)
    ns = parser.parse_args(argv)
    ns.length = ns.length or (48 if ns.tiny else 600)
    ns.steps = ns.steps or (3 if ns.tiny else 12)
    ns.reward_pairs = ns.reward_pairs or (16 if ns.tiny else 512)
    if ns.tiny:
        ns.warmup_steps = min(ns.warmup_steps, 1)

    import torch

    from radrank.devices import device_of

    device = device_of(ns.device)
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.set_device(device)
    else:
        torch.set_num_threads(ns.threads)
    dtype = ns.dtype if ns.dtype != "auto" else ("bf16" if cuda else "fp32")
    loop = ns.loop
    if loop == "auto":
        try:
            import datasets  # noqa: F401
            import trl  # noqa: F401

            loop = "trl"
        except ImportError as e:
            log(f"trl loop unavailable ({e}); timing the manual loop")
            loop = "manual"
    from importlib import metadata

    versions = {}
    for name in ("torch", "transformers", "peft", "trl", "accelerate", "datasets"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    RESULTS.update({"device": device, "gpu": torch.cuda.get_device_name(device) if cuda else None,
                    "shape": "tiny-mistral" if ns.tiny else "mistral-7b-instruct-v0.2", "dtype": dtype, "loop": loop,
                    "length": ns.length, "jitter": ns.jitter, "batch": ns.batch, "accum": ns.accum,
                    "checkpointing": ns.checkpointing, "versions": versions})
    config = mistral_config(ns.tiny)
    torch_dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
    status = 0
    try:
        from radrank.mrscore_train.trainer import add_lora, lora_trainable_parameters, parameter_counts

        t = time.perf_counter()
        reset_peak(device)
        model = build_classifier(config, device, torch_dtype)
        total_steps = ns.warmup_steps + ns.steps
        settings = train_settings(ns, device, dtype, total_steps)
        model = add_lora(model, settings, where="benchmark")
        sync(device)
        trainable, total = parameter_counts(model)
        RESULTS["parts"]["build"] = {"seconds": round(time.perf_counter() - t, 1), "trainable_parameters": trainable,
                                     "expected_trainable_parameters": lora_trainable_parameters(config),
                                     "total_parameters": total, "peak_gb": peak_gb(device)}
        log(f"built {RESULTS['shape']} + LoRA in {RESULTS['parts']['build']['seconds']} s: {trainable:,} of "
            f"{total:,} parameters trainable")
        save(ns.json)

        pairs_needed = total_steps * ns.batch * ns.accum
        data = synthetic_pairs(pairs_needed, ns.length, ns.jitter, config.vocab_size)
        budget = max(30.0, (ns.budget_s - (time.perf_counter() - START)) * 2 / 3)
        reset_peak(device)
        t = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="mrscore-train-bench-") as tmp:
            if loop == "trl":
                model, marks = train_trl(model, settings, data, word_tokenizer(config.vocab_size), device,
                                         ns.warmup_steps, budget, tmp)
            else:
                model, marks = train_manual(model, settings, data, config.pad_token_id, device, ns.warmup_steps,
                                            budget)
        train_part = {"loop": "trl RewardTrainer" if loop == "trl" else "manual (same loss)",
                      "seconds_total": round(time.perf_counter() - t, 1), "steps_run": marks[-1][0],
                      "warmup_steps": ns.warmup_steps, "pairs_per_step": ns.batch * ns.accum,
                      **figures(marks, ns.warmup_steps, ns.batch, ns.accum), "peak_gb": peak_gb(device)}
        RESULTS["parts"]["train"] = train_part
        log(f"training: {json.dumps(train_part)}")
        save(ns.json)

        free()
        reset_peak(device)
        RESULTS["parts"]["reward"] = reward_inference(model, device, ns.reward_pairs, ns.reward_batch, ns.length,
                                                      ns.jitter, config.vocab_size)
        log(f"reward inference: {json.dumps(RESULTS['parts']['reward'])}")
    except Exception as e:  # noqa: BLE001 - report what was measured, then the error
        traceback.print_exc()
        RESULTS["error"] = f"{type(e).__name__}: {e}"
        status = 1
    RESULTS["seconds"] = round(time.perf_counter() - START, 1)
    save(ns.json)
    print(json.dumps(RESULTS, default=str), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())

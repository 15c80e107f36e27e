"""Throughput of radrank's BERTScore and SembScore on real model shapes (random weights).

One prepared script for the GPU machine (torch 2.11 + transformers 5.x there, no
internet, no bert-score): it builds random-weight models of the real shapes with
locally trained tokenizers —

* distilroberta-base: RoBERTa, 6 layers, hidden 768, 12 heads, intermediate 3072
  (byte-level BPE); the directory is named ``distilroberta-base`` so radrank uses
  its defaults (layer 5, bert-score's built-in baseline);
* CheXbert: bert-base-uncased shape, 12 layers (WordPiece, uncased) + 14 heads,
  saved as upstream's ``chexbert.pth``;

— scores synthetic 20-90-word report pairs (tests/synthetic.py) through
radrank's real ``bertscore`` and ``semb`` code, and prints pairs/s in fp32 and
bf16, and the largest |bf16 − fp32|. When ``bert_score`` is importable (and
``--library`` is not ``off``) it also times the library as ReXrank calls it
(batch 256) and prints the largest |library − radrank| (expected < 1e-5).

    python benchmarks/device_bertscore.py                   # 20,000 pairs, GPU if present
    python benchmarks/device_bertscore.py --n 200 --device cpu   # smoke test

Results go to stdout and, as JSON, to --json (default $OUT/device_bertscore.json
when $OUT is set).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT / "src", ROOT / "tests", ROOT / "tests" / "envs" / "rexrank"):
    sys.path.insert(0, str(p))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")


def log(msg: str):
    print(msg, flush=True)


def build_models(workdir: Path, seed: int = 0) -> dict:
    import synthetic
    import tiny_models

    train = tiny_models.corpus(3000, seed=seed) + list(synthetic.FINDINGS) + list(synthetic.IMPRESSIONS)
    t = time.perf_counter()
    roberta = tiny_models.build_roberta(workdir / "distilroberta-base", hidden=768, layers=6, heads=12,
                                        intermediate=3072, vocab_size=1000, max_length=512, seed=seed,
                                        shift=5.0, texts=train)
    bert = tiny_models.build_bert(workdir / "bert-base-uncased", hidden=768, layers=12, heads=12,
                                  intermediate=3072, vocab_size=1000, max_length=512, seed=seed,
                                  initializer_range=0.05, texts=train)
    ckpt = tiny_models.build_chexbert_checkpoint(workdir / "rrg" / "chexbert.pth", bert, seed=seed,
                                                 texts=train[:64])
    log(f"built models in {time.perf_counter() - t:.1f} s: {roberta}, {bert}, {ckpt}")
    return {"roberta": roberta, "bert": bert, "checkpoint": ckpt}


def _sync(device: str):
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_metric(metric, pairs, settings, warm: int) -> dict:
    """Cold call on ``warm`` pairs (loads the model), then the timed call on all pairs."""
    from radrank import metrics
    from radrank.metrics import _hf
    from radrank.runtime import Runtime

    device = _hf.device_of(settings.device)
    t = time.perf_counter()
    metrics.score(metric.name, pairs.iloc[:warm].reset_index(drop=True), settings)
    _sync(device)
    cold = time.perf_counter() - t
    if hasattr(metric, "labeler"):  # SembScore would reuse the warm-up's CLS vectors
        metric.labeler(settings, Runtime()).memo.clear()
    t = time.perf_counter()
    out = metrics.score(metric.name, pairs, settings)
    _sync(device)
    elapsed = time.perf_counter() - t
    rate = len(pairs) / elapsed
    col = out.columns[1]
    log(f"{metric.name:<10} {settings.dtype:<5} batch {settings.batch_size}: {len(pairs)} pairs "
        f"in {elapsed:.2f} s = {rate:,.0f} pairs/s (cold start on {warm} pairs: {cold:.1f} s); "
        f"{col} mean {out[col].mean():.4f}, range [{out[col].min():.4f}, {out[col].max():.4f}]")
    return {"metric": metric.name, "dtype": settings.dtype, "batch_size": settings.batch_size,
            "pairs": len(pairs), "seconds": elapsed, "pairs_per_s": rate, "cold_seconds": cold, "scores": out}


def run_library(pairs, model_dir: Path, workdir: Path, device: str, ours) -> dict | None:
    try:
        import bert_score
    except ImportError:
        log("bert_score: not importable, library comparison skipped")
        return None
    import numpy as np

    from radrank.metrics import bertscore

    import tiny_models

    base = tiny_models.write_baseline(workdir / "distilroberta-base.tsv", bertscore.DISTILROBERTA_BASELINE)
    refs = [re.sub(r" +", " ", t) for t in pairs["reference"]]
    hyps = [re.sub(r" +", " ", t) for t in pairs["hypothesis"]]
    try:
        t = time.perf_counter()
        scorer = bert_score.BERTScorer(model_type=str(model_dir), num_layers=5, lang="en", batch_size=256,
                                       rescale_with_baseline=True, baseline_path=str(base), device=device)
        load = time.perf_counter() - t
        t = time.perf_counter()
        p, r, f = scorer.score(hyps, refs, batch_size=256)
        _sync(device)
        elapsed = time.perf_counter() - t
    except Exception as e:  # e.g. bert-score 0.3.13 against transformers 5
        log(f"bert_score library failed: {type(e).__name__}: {e}")
        return {"error": f"{type(e).__name__}: {e}"}
    lib = np.column_stack([p.numpy(), r.numpy(), f.numpy()])
    mine = ours[["bertscore_precision", "bertscore_recall", "bertscore"]].to_numpy()
    diff = float(np.nanmax(np.abs(lib - mine)))
    rate = len(pairs) / elapsed
    log(f"bert_score library {bert_score.__version__}: {len(pairs)} pairs in {elapsed:.2f} s = {rate:,.0f} pairs/s "
        f"(load {load:.1f} s); max |library - radrank| = {diff:.3g}")
    return {"pairs_per_s": rate, "seconds": elapsed, "max_abs_diff_vs_radrank": diff}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20000, help="number of pairs (default 20000)")
    parser.add_argument("--device", default="auto", help="auto, cuda, cuda:0 or cpu")
    parser.add_argument("--batch-sizes", default=None,
                        help="bertscore batch sizes to time in fp32 (default 128,512 on GPU, 128 on CPU)")
    parser.add_argument("--semb-batch-size", type=int, default=256)
    parser.add_argument("--dtypes", default="fp32,bf16")
    parser.add_argument("--library", choices=("auto", "off"), default="auto")
    parser.add_argument("--skip-semb", action="store_true")
    parser.add_argument("--workdir", default=None, help="where the models are built (default: a temp dir)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)

    import numpy as np
    import torch
    import transformers

    import synthetic
    from radrank.metrics import _hf, bertscore, semb
    from radrank.runtime import Runtime, clear_models

    device = _hf.device_of(args.device)
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, device {device}"
        + (f" ({torch.cuda.get_device_name(0)})" if device.startswith("cuda") else f" ({torch.get_num_threads()} "
                                                                                   f"threads)"))
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32
    torch.backends.cudnn.allow_tf32 = False
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="radrank-bench-"))
    models = build_models(workdir)
    pairs = synthetic.pairs_table(args.n)[["sample_id", "reference", "hypothesis"]]
    words = pairs["reference"].str.split().str.len().tolist() + pairs["hypothesis"].str.split().str.len().tolist()
    log(f"{len(pairs)} pairs, {pairs['reference'].nunique() + pairs['hypothesis'].nunique()} distinct texts, "
        f"{np.mean(words):.1f} words per report (min {min(words)}, max {max(words)})")
    warm = min(256, max(16, len(pairs) // 10))
    if args.batch_sizes is None:
        args.batch_sizes = "128,512" if device.startswith("cuda") else "128"
    dtypes = [d for d in args.dtypes.split(",") if d]
    results = {"device": device, "torch": torch.__version__, "transformers": transformers.__version__,
               "n_pairs": len(pairs), "runs": []}

    bs_settings = bertscore.METRIC.settings({"model": str(models["roberta"]), "device": device})
    runtime = Runtime()
    model_ref = bertscore.METRIC.weights(bs_settings)[0]
    enc = bertscore._encoder(bs_settings, runtime.resolve(model_ref).directory, runtime)
    lengths = [len(x) for x in enc.tokenize([bertscore.prepare(t) for t in pairs["reference"].tolist()[:2000]])]
    log(f"bertscore tokens per reference (first 2000): mean {np.mean(lengths):.1f}, max {max(lengths)}")
    by_dtype = {}
    for dtype in dtypes:
        sizes = [int(b) for b in args.batch_sizes.split(",")] if dtype == "fp32" else [max(
            int(b) for b in args.batch_sizes.split(","))]
        for bs in sizes:
            r = time_metric(bertscore.METRIC, pairs, bs_settings.replace(dtype=dtype, batch_size=bs), warm)
            by_dtype.setdefault(dtype, r["scores"])
            results["runs"].append({k: v for k, v in r.items() if k != "scores"})
        clear_models()
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    if "fp32" in by_dtype and "bf16" in by_dtype:
        cols = ["bertscore", "bertscore_precision", "bertscore_recall"]
        dev = float(np.abs(by_dtype["bf16"][cols].to_numpy() - by_dtype["fp32"][cols].to_numpy()).max())
        mean_dev = float(abs(by_dtype["bf16"]["bertscore"].mean() - by_dtype["fp32"]["bertscore"].mean()))
        log(f"bertscore bf16 vs fp32: max |diff| per pair {dev:.3g}, |diff| of the mean {mean_dev:.3g}")
        results["bertscore_bf16_vs_fp32_max_abs"] = dev
        results["bertscore_bf16_vs_fp32_mean_abs"] = mean_dev
    if args.library != "off" and "fp32" in by_dtype:
        results["library"] = run_library(pairs, models["roberta"], workdir, device, by_dtype["fp32"])

    if not args.skip_semb:
        cx = semb.METRIC.settings({"checkpoint": str(models["checkpoint"]), "tokenizer": str(models["bert"]),
                                   "device": device, "batch_size": args.semb_batch_size})
        semb_by_dtype = {}
        for dtype in dtypes:
            r = time_metric(semb.METRIC, pairs, cx.replace(dtype=dtype), warm)
            semb_by_dtype[dtype] = r["scores"]
            results["runs"].append({k: v for k, v in r.items() if k != "scores"})
            clear_models()
        if "fp32" in semb_by_dtype and "bf16" in semb_by_dtype:
            dev = float(np.abs(semb_by_dtype["bf16"]["semb_score"] - semb_by_dtype["fp32"]["semb_score"]).max())
            log(f"semb bf16 vs fp32: max |diff| per pair {dev:.3g}")
            results["semb_bf16_vs_fp32_max_abs"] = dev

    target = [r for r in results["runs"] if r["metric"] == "bertscore" and r["dtype"] == "fp32"]
    if target:
        best = max(r["pairs_per_s"] for r in target)
        log(f"bertscore fp32 best: {best:,.0f} pairs/s (target >= 2,000 on the GPU)")
    out = args.json or (str(Path(os.environ["OUT"]) / "device_bertscore.json") if os.environ.get("OUT") else None)
    if out:
        Path(out).write_text(json.dumps(results, indent=1, default=str))
        log(f"wrote {out}")
    return results


if __name__ == "__main__":
    main()

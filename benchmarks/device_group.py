"""Group scoring on one GPU: pairs/s of each model metric through one group job vs one job per submission.

One prepared script for the GPU machine (random-init weights of the real shapes, no download,
HF_HUB_OFFLINE=1). For each model metric it can build in this environment it makes a synthetic
leaderboard group — G models × N cases sharing the references, one template model writing the same
normal report for every case, and a share of hypotheses that copy another model's (``--templates``,
``--duplicate-share``; G × N per metric with ``--sizes``) — and measures, in the same run:

* **group job** — :func:`radrank.scoring.score_group` over the whole group, with a fresh score cache:
  one model load, each distinct pair scored once;
* **per-submission path** (today's) — for each model, what a job of its own does: a fresh job state
  (``radrank.runtime.clear_models()``, the weights' hash memo and torch.compile's graphs forgotten, as a new
  process has them), then ``radrank.metrics.score`` on that model's pairs;
* the model-load seconds of each (``Runtime.load`` factories, timed) and their share of the job seconds;
* group pairs/s ÷ per-submission pairs/s (pairs: the group's rows, what both paths deliver);
* that both give the same scores (largest |difference|, rows that differ);
* what every job pays besides: the sha256 of the weights for its provenance (inside the job seconds), and a
  new process's start (python, torch, transformers, the device; measured once, apart) — the "+start" ratio
  counts one start per job;
* **a model added** to the scored group: the group job again with the warm cache, one more model in it
  (only its new pairs are scored), when the part's time allows.

Before the timed jobs, each metric scores one model's pairs once (untimed warm-up), so both paths find the
CUDA context, the kernels for their batch shapes and the compile caches on disk as a job on a used node
does. Metrics and shapes:

* bertscore — distilroberta-base (RoBERTa 6 × 768), fp32, built by ``device_bertscore.build_models``;
* semb, chexbert — CheXbert (bert-base-uncased shape, 12 × 768), fp32, from the same builder;
* green — Llama-2-7B (GREEN-radllama2-7b's config, ``device_judge.llama_config``), bf16, engine hf, with the
  tokenizer of ``tests/envs/judge/tiny_judge.build_green_like`` (needs ``radeval``: GREEN's prompt and parser);
* crimson — Gemma-3 4B text (``device_judge.gemma_config``), bf16, engine hf, with the tokenizer of
  ``tests/envs/crimson/tiny_crimson.build`` (needs ``crimson-score``).

The judges answer random weights with junk, so every answer runs to ``--new-tokens`` and is asked again once
with twice the budget (GREEN's and CRIMSON's retry), in both paths alike; the judge response cache is off.
``--judge-static false`` (default): dynamic KV cache, no compile — the production default on CUDA (static
cache, compiled decoding) adds a compile to every job, i.e. more per-job cost than measured here
(``--judge-static auto`` measures it; it needs a larger ``--budget-s``).

``--budget-s`` (default 420) bounds the run: each part gets a share of what is left (``WEIGHTS``); the
per-submission path stops timing models when its share is spent (its pairs/s is then over the models timed,
and the table says how many) and the added-model step runs only when it fits.

    python benchmarks/device_group.py                        # the H200: every metric this environment has
    python benchmarks/device_group.py --metrics bertscore,semb,chexbert --sizes bertscore=20x1000
    python benchmarks/device_group.py --device cpu --tiny --metrics bertscore,semb,chexbert  # smoke (rexrank env)
    python benchmarks/device_group.py --device cpu --tiny --metrics green                    # smoke (judge env)
    python benchmarks/device_group.py --device cpu --tiny --metrics crimson                  # smoke (crimson env)

``--metrics auto`` (default) takes every metric whose packages import here (green: radeval; crimson:
crimson-score) and says why it left out the others. The GPU machine's python has torch and transformers
but neither radeval nor crimson-score: carry their wheels (device README) — ``radeval`` with ``datasets``,
``dill`` and ``multiprocess`` for green (only its GREEN module is imported), ``crimson-score`` alone for
crimson — or run the encoders only.

Prints one summary table and writes JSON to ``--out`` (default ``$OUT/device_group.json`` when $OUT is set)
after every part, so a run cut short still reports what it measured.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import logging
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT / "benchmarks", ROOT / "src", ROOT / "tests", *(ROOT / "tests" / "envs" / e for e in
                                                                 ("rexrank", "judge", "crimson"))):
    sys.path.insert(0, str(p))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import device_bertscore  # noqa: E402  (the encoders of the real shapes)
import device_judge as dj  # noqa: E402  (the judges' configs, building on the device, sync, free)

from radrank.runtime import Runtime  # noqa: E402  (no torch import)

log = dj.log
RESULTS: dict = {"parts": {}}
ORDER = ("bertscore", "semb", "chexbert", "green", "crimson")
# shares of the time budget (bertscore's includes building the encoders)
WEIGHTS = {"bertscore": 1.5, "semb": 1.0, "chexbert": 1.0, "green": 4.0, "crimson": 2.5}
SIZES = {"bertscore": (10, 1000), "semb": (10, 1000), "chexbert": (10, 1000), "green": (3, 32), "crimson": (3, 16)}
TINY_SIZES = {"bertscore": (4, 40), "semb": (4, 40), "chexbert": (4, 40), "green": (3, 4), "crimson": (3, 3)}
TEMPLATES = ("No acute cardiopulmonary process.",
             "The lungs are clear without focal consolidation. No pleural effusion or pneumothorax is seen. "
             "Impression: No acute cardiopulmonary process.")
INDICATIONS = ("Shortness of breath.", "Fever and cough.", "Chest pain.", "Line placement.", None)
JUDGE_DIRS = {"green": "GREEN-radllama2-7b", "crimson": "medgemma-4b-it-crimson"}  # GBs each: removed after use


# --- the group ------------------------------------------------------------------------------------------------


def leaderboard_group(models: int, cases: int, templates: int, duplicate_share: float, seed: int = 0) -> dict:
    """{model: pairs} for ``models`` models (the last ``templates`` of them template models) on the same
    ``cases`` cases, plus one more writer held out as ``"newcomer"`` (the model added later). Each writer's
    hypothesis copies the first writer's for a ``duplicate_share`` of the cases (a common answer)."""
    import numpy as np

    import synthetic

    if not 0 <= templates < models:
        raise SystemExit(f"--templates {templates}: a group of {models} models needs at least one writer")
    writers = models - templates + 1  # + the newcomer
    boards = list(synthetic.leaderboard(cases * writers, writers, seed).values())
    rng = np.random.default_rng(seed)
    context = {"age": rng.integers(20, 96, size=cases).astype("float64"),
               "indication": [INDICATIONS[i] for i in rng.integers(0, len(INDICATIONS), size=cases)]}
    first = boards[0]
    for frame in boards[1:]:
        copied = rng.random(cases) < duplicate_share
        frame.loc[copied, "hypothesis"] = first.loc[copied, "hypothesis"]
    group = {f"model_{i + 1:02d}": frame.assign(**context) for i, frame in enumerate(boards[:-1])}
    for t in range(templates):
        group[f"template_{t + 1}"] = first.assign(hypothesis=TEMPLATES[t % len(TEMPLATES)], **context)
    group["newcomer"] = boards[-1].assign(**context)
    return group


# --- timing -------------------------------------------------------------------------------------------------


class TimedRuntime(Runtime):
    """A Runtime that times the model loads it makes (a model the process holds already costs nothing)."""

    def __init__(self, device: str):
        super().__init__()
        self.device = device
        self.load_s, self.loads = 0.0, 0

    def load(self, key, factory):
        def timed():
            start = time.perf_counter()
            made = factory()
            dj.sync(self.device)
            self.load_s += time.perf_counter() - start
            self.loads += 1
            return made

        return super().load(key, timed)


def fresh_job_state():
    """What a new job process starts without: the loaded models, the weights' hash memo (every job hashes
    the weights it records in its provenance), torch.compile's graphs, cached GPU memory."""
    import torch

    from radrank.runtime import clear_models, weights

    clear_models()
    weights.forget_hashes()
    torch._dynamo.reset()  # noqa: SLF001
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def weights_hash_seconds(metric, settings) -> float:
    """Seconds a job spends hashing the metric's weights for its provenance (once per process, so once per
    per-submission job and once per group job), from a fresh job state."""
    from radrank.runtime import provenance, resolve

    fresh_job_state()
    start = time.perf_counter()
    for ref in metric.weights(settings):
        provenance(resolve(ref))
    return time.perf_counter() - start


def process_start_seconds(device: str) -> float:
    """Seconds a new job process takes to import torch and transformers and open the device: what every
    per-submission job pays besides what is measured in this process (and a group job pays once)."""
    import subprocess

    code = ("import torch, transformers; x = torch.zeros(1, device=%r); "
            "torch.cuda.synchronize() if x.is_cuda else None" % device)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - start


def job(device: str, run: Callable, fresh: bool = True):
    """``run(runtime)`` in a fresh job state (``fresh``; else in the state it finds): (its result, job seconds,
    load seconds, loads)."""
    if fresh:
        fresh_job_state()
    runtime = TimedRuntime(device)
    dj.sync(device)
    start = time.perf_counter()
    out = run(runtime)
    dj.sync(device)
    return out, time.perf_counter() - start, runtime.load_s, runtime.loads


def rate(rows: int, seconds: float) -> float | None:
    return round(rows / seconds, 3) if seconds > 0 else None


def share(part: float, whole: float) -> float | None:
    return round(part / whole, 3) if whole > 0 else None


def disagreement(metric, got, expected) -> dict:
    """Largest |difference| of the numeric columns and rows that differ anywhere (NaN equals NaN)."""
    import numpy as np
    import pandas as pd

    numeric = [c for c in metric.columns if pd.api.types.is_numeric_dtype(expected[c])]
    a, b = got[numeric].to_numpy("float64"), expected[numeric].to_numpy("float64")
    one_nan = np.isnan(a) ^ np.isnan(b)
    diff = np.where(np.isnan(a) & np.isnan(b), 0.0, np.abs(a - b))
    differs = (np.nan_to_num(diff, nan=0.0) > 1e-6).any(axis=1) | one_nan.any(axis=1)
    for c in (c for c in metric.columns if c not in numeric):
        differs |= (got[c].fillna("").astype(str).to_numpy() != expected[c].fillna("").astype(str).to_numpy())
    return {"max_abs_diff": float(np.nanmax(np.where(one_nan, np.inf, diff))) if diff.size else 0.0,
            "rows_differing": int(differs.sum()), "rows": len(expected)}


# --- the metrics ----------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Part:
    name: str
    shape: str
    available: Callable[[], str | None]  # None, or why this environment cannot run it
    build: Callable  # (workdir, args, device) -> the metric's settings (a mapping)
    prompt_tokens: Callable | None = None  # (settings, pairs) -> token counts of the prompts the judge sees


def _needs(*modules) -> str | None:
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    return f"not importable here: {', '.join(missing)}" if missing else None


def _green_available() -> str | None:
    reason = _needs("torch", "transformers", "radeval")
    if reason:
        return reason
    try:
        from radrank.metrics import green

        green.upstream()  # GREEN's prompt, template and parser from radeval
    except Exception as e:  # noqa: BLE001 - any failure to import it means green cannot run here
        return f"radeval's GREEN module does not import: {type(e).__name__}: {str(e)[:160]}"
    return None


_ENCODER_DIRS: dict = {}


def _encoder_dirs(workdir: Path, tiny: bool) -> dict:
    """The encoders' directories, built once for the three encoder metrics."""
    if not _ENCODER_DIRS:
        if tiny:
            import tiny_models

            roberta = tiny_models.build_roberta(workdir / "distilroberta-base", layers=6, max_length=512, shift=5.0)
            bert = tiny_models.build_bert(workdir / "bert-base-uncased", initializer_range=0.05)
            _ENCODER_DIRS.update(roberta=roberta, bert=bert, checkpoint=tiny_models.build_chexbert_checkpoint(
                workdir / "rrg" / "chexbert.pth", bert))
        else:
            _ENCODER_DIRS.update(device_bertscore.build_models(workdir))
    return _ENCODER_DIRS


def build_bertscore(workdir, args, device) -> dict:
    return {"model": str(_encoder_dirs(workdir, args.tiny)["roberta"]), "device": device}


def build_chexbert(workdir, args, device) -> dict:
    dirs = _encoder_dirs(workdir, args.tiny)
    return {"checkpoint": str(dirs["checkpoint"]), "tokenizer": str(dirs["bert"]), "device": device}


def _replace_weights(directory: Path, cls, config, vocab: int, device, dtype) -> None:
    """Put a random-weight ``cls(config)`` (built on ``device``) in place of the tiny model a test builder saved
    beside its tokenizer; the vocabulary covers the tokenizer's ``vocab`` ids."""
    config.vocab_size = max(config.vocab_size, vocab)
    for old in (*directory.glob("model*.safetensors"), directory / "model.safetensors.index.json",
                directory / "config.json"):
        old.unlink(missing_ok=True)
    model = dj.build(cls, config, device, dtype)
    start = time.perf_counter()
    model.save_pretrained(str(directory))
    log(f"saved {directory.name} ({sum(f.stat().st_size for f in directory.glob('*.safetensors')) / 2**30:.1f} GiB) "
        f"in {time.perf_counter() - start:.1f} s")
    del model
    dj.free()


def _judge_dtype(args, device: str):
    import torch

    return {"bf16": torch.bfloat16, "fp16": torch.float16}[args.judge_dtype] if device.startswith("cuda") \
        else torch.float32


def _judge_settings(args, device: str, cases: int, directory: Path) -> dict:
    cuda = device.startswith("cuda")
    return {"model": str(directory), "device": device, "dtype": args.judge_dtype if cuda else "auto",
            "batch_size": args.judge_batch or cases, "max_new_tokens": args.new_tokens, "cache_dir": "off",
            "static_cache": {"auto": "auto", "true": True, "false": False}[args.judge_static]}


def build_green(workdir, args, device) -> dict:
    from transformers import LlamaForCausalLM

    import tiny_judge

    directory = tiny_judge.build_green_like(workdir / JUDGE_DIRS["green"])  # tokenizer as the real repository's
    vocab = json.loads((directory / "config.json").read_text())["vocab_size"]
    _replace_weights(directory, LlamaForCausalLM, dj.llama_config(args.tiny), vocab, device, _judge_dtype(args, device))
    return _judge_settings(args, device, args.sizes["green"][1], directory)


def build_crimson(workdir, args, device) -> dict:
    from transformers import Gemma3ForCausalLM

    import tiny_crimson

    # the directory's name makes CRIMSON's prompt the fine-tuned model's (no guideline blocks), as in production
    directory = tiny_crimson.build(workdir / JUDGE_DIRS["crimson"])
    text = json.loads((directory / "config.json").read_text())["text_config"]
    config = dj.gemma_config(args.tiny)
    config.bos_token_id, config.eos_token_id, config.pad_token_id = (text["bos_token_id"], text["eos_token_id"],
                                                                     text["pad_token_id"])
    _replace_weights(directory, Gemma3ForCausalLM, config, text["vocab_size"], device, _judge_dtype(args, device))
    return _judge_settings(args, device, args.sizes["crimson"][1], directory)


def green_prompt_tokens(settings, pairs) -> list[int]:
    from radrank.metrics import green

    tok = green.load_tokenizer(settings.model, False)
    texts = [green.render(tok, green.prompt_text(r, h)) for r, h in zip(pairs["reference"], pairs["hypothesis"])]
    return [len(x) for x in tok(texts, add_special_tokens=True)["input_ids"]]


def crimson_prompt_tokens(settings, pairs) -> list[int]:
    from radrank.metrics import crimson
    from radrank.runtime.loaders import load_tokenizer

    tok = load_tokenizer(settings.model)
    texts = [crimson.render(tok, p) for p in crimson.build_prompts(pairs, settings)]
    return [len(x) for x in tok(texts, add_special_tokens=False)["input_ids"]]


PARTS = {
    "bertscore": Part("bertscore", "distilroberta-base (RoBERTa 6 x 768), fp32",
                      lambda: _needs("torch", "transformers"), build_bertscore),
    "semb": Part("semb", "CheXbert (bert-base 12 x 768), fp32", lambda: _needs("torch", "transformers"),
                 build_chexbert),
    "chexbert": Part("chexbert", "CheXbert (bert-base 12 x 768), fp32", lambda: _needs("torch", "transformers"),
                     build_chexbert),
    "green": Part("green", "Llama-2-7B (GREEN-radllama2-7b), engine hf", _green_available, build_green,
                  green_prompt_tokens),
    "crimson": Part("crimson", "Gemma-3 4B text (medgemma-4b-it-crimson), engine hf",
                    lambda: _needs("torch", "transformers", "CRIMSON"), build_crimson, crimson_prompt_tokens),
}
TINY_SHAPE = "tiny random (smoke test)"


# --- one metric -----------------------------------------------------------------------------------------------


def run_part(part: Part, args, device: str, workdir: Path, deadline: float) -> dict:
    """Build the metric's model, warm up, then time the group job, the per-submission path and a model added."""
    import numpy as np

    from radrank import metrics
    from radrank.score_cache import ScoreCache
    from radrank.scoring import score_group

    metric = metrics.get(part.name)
    models, cases = args.sizes[part.name]
    group = leaderboard_group(models, cases, args.templates, args.duplicate_share, seed=args.seed)
    newcomer = group.pop("newcomer")
    first = next(iter(group.values()))
    res = {"shape": TINY_SHAPE if args.tiny else part.shape, "models": models, "cases": cases,
           "rows": sum(map(len, group.values()))}
    RESULTS["parts"][part.name] = res

    start = time.perf_counter()
    settings = metric.settings(part.build(workdir, args, device))
    res["build_s"] = round(time.perf_counter() - start, 1)
    res["settings"] = dataclasses.asdict(settings)
    if part.prompt_tokens is not None:
        lengths = part.prompt_tokens(settings, first)
        res["prompt_tokens"] = {"mean": round(float(np.mean(lengths)), 1), "max": int(max(lengths))}
        log(f"{part.name}: prompts of {res['prompt_tokens']['mean']:.0f} tokens on average "
            f"(max {res['prompt_tokens']['max']}), answers of {settings.max_new_tokens} new tokens then a retry")

    res["weights_hash_s"] = round(weights_hash_seconds(metric, settings), 2)
    # The warm-up scores the first model's pairs (the timed jobs' batch shapes: kernels picked, caches on disk
    # filled), so neither path pays for coming first; it keeps the state just made (the weights' hash known).
    _, seconds, load_s, _ = job(device, lambda rt: metrics.score(part.name, first, settings, runtime=rt), fresh=False)
    res["warmup"] = {"pairs": len(first), "seconds": round(seconds, 2), "load_s": round(load_s, 2)}
    log(f"{part.name}: warm-up on {len(first)} pairs {seconds:.1f} s (load {load_s:.1f} s)")

    cache = ScoreCache(workdir / f"score-cache-{part.name}")
    grouped, seconds, load_s, loads = job(device, lambda rt: score_group(part.name, settings, group, cache=cache,
                                                                          runtime=rt))
    res["distinct"] = grouped.counts["distinct"]
    res["group"] = {"job_s": round(seconds, 2), "load_s": round(load_s, 2), "loads": loads,
                    "pairs_per_s": rate(res["rows"], seconds), "distinct_per_s": rate(res["distinct"], seconds),
                    "load_share": share(load_s, seconds), "counts": grouped.counts}
    log(f"{part.name}: group job, {len(group)} models x {cases} cases = {res['rows']} pairs ({res['distinct']} "
        f"distinct): {seconds:.1f} s = {res['group']['pairs_per_s']} pairs/s, load {load_s:.1f} s "
        f"({_percent(res['group']['load_share'])})")
    save(args.out)

    per_submission(part.name, metric, settings, group, grouped, device, deadline, res)
    save(args.out)

    per_job = res["per_submission"]["job_s"] / res["per_submission"]["models_timed"]
    if time.perf_counter() + 1.5 * per_job > deadline:
        res["add_model"] = {"skipped": "time budget"}
        log(f"{part.name}: added-model step skipped (time budget)")
        return res
    grown = {**group, "newcomer": newcomer}
    added, seconds, load_s, loads = job(device, lambda rt: score_group(part.name, settings, grown, cache=cache,
                                                                        runtime=rt))
    res["add_model"] = {"job_s": round(seconds, 2), "load_s": round(load_s, 2), "loads": loads,
                        "counts": added.counts, "per_submission_job_s": round(per_job, 2)}
    log(f"{part.name}: one model added to the cached group: {added.counts['scored']} of {added.counts['distinct']} "
        f"distinct pairs scored ({added.counts['cached']} cached) in {seconds:.1f} s, load {load_s:.1f} s "
        f"(a per-submission job: {per_job:.1f} s)")
    return res


def per_submission(name: str, metric, settings, group: dict, grouped, device: str, deadline: float, res: dict):
    """Today's path: one fresh job per model (until ``deadline``), its scores checked against the group job's;
    fills ``res`` with the path's figures, the ratios to the group job and the agreement."""
    from radrank import metrics

    jobs, diffs = [], []
    for i, (model, pairs) in enumerate(group.items()):
        if jobs and time.perf_counter() + sum(j["job_s"] for j in jobs) / len(jobs) > deadline:
            log(f"{name}: per-submission path stopped after {len(jobs)} of {len(group)} models (time budget)")
            break
        alone, seconds, load_s, loads = job(device, lambda rt: metrics.score(name, pairs, settings, runtime=rt))
        jobs.append({"model": model, "rows": len(pairs), "job_s": round(seconds, 2), "load_s": round(load_s, 2),
                     "loads": loads})
        diffs.append(disagreement(metric, grouped.by_model[model], alone))
        log(f"{name}: per-submission job {i + 1}/{len(group)} ({model}, {len(pairs)} pairs): {seconds:.1f} s, "
            f"load {load_s:.1f} s")
    rows, job_s, load_s = (sum(j[k] for j in jobs) for k in ("rows", "job_s", "load_s"))
    start_s = RESULTS["process_start_s"]
    path = res["per_submission"] = {
        "models_timed": len(jobs), "rows": rows, "job_s": round(job_s, 2), "load_s": round(load_s, 2),
        "loads": sum(j["loads"] for j in jobs), "pairs_per_s": rate(rows, job_s), "load_share": share(load_s, job_s),
        "pairs_per_s_with_start": rate(rows, job_s + len(jobs) * start_s), "jobs": jobs}
    group_job = res["group"]
    group_job["pairs_per_s_with_start"] = rate(res["rows"], group_job["job_s"] + start_s)  # one start, one job
    res["group_over_per_submission"] = round(group_job["pairs_per_s"] / path["pairs_per_s"], 2)
    res["group_over_per_submission_with_start"] = round(group_job["pairs_per_s_with_start"]
                                                        / path["pairs_per_s_with_start"], 2)
    res["agreement"] = {"max_abs_diff": max(d["max_abs_diff"] for d in diffs),
                        **{k: sum(d[k] for d in diffs) for k in ("rows_differing", "rows")}}
    log(f"{name}: per-submission path {path['pairs_per_s']} pairs/s over {len(jobs)} models, load {load_s:.1f} of "
        f"{job_s:.1f} s; group / per-submission = {res['group_over_per_submission']} "
        f"({res['group_over_per_submission_with_start']} with a process start per job); group vs alone: max |diff| "
        f"{res['agreement']['max_abs_diff']:.3g}, {res['agreement']['rows_differing']} of "
        f"{res['agreement']['rows']} rows differ")


# --- the run --------------------------------------------------------------------------------------------------


def save(path):
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(RESULTS, indent=1, default=str))


def _percent(x) -> str:
    return f"{100 * x:.0f} %" if x is not None else "-"


def _rate(x) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def table(parts: dict) -> str:
    """The summary: one row per metric (a skipped or failed one says why)."""
    head = ("metric", "G x N", "distinct/rows", "group p/s", "per-sub p/s", "group/per-sub", "+start",
            "group load/job", "per-sub load/job", "hash/job", "timed", "max |diff|", "one model added")
    rows = [head]
    for name, r in parts.items():
        if "per_submission" not in r:
            rows.append((name, *["-"] * (len(head) - 2), (r.get("skipped") or r.get("error", "?"))[:80]))
            continue
        g, p, add = r["group"], r["per_submission"], r.get("add_model", {})
        rows.append((name, f"{r['models']} x {r['cases']}", f"{r['distinct']}/{r['rows']}", _rate(g["pairs_per_s"]),
                     _rate(p["pairs_per_s"]), f"{r.get('group_over_per_submission', '-')}x",
                     f"{r.get('group_over_per_submission_with_start', '-')}x",
                     f"{g['load_s']:.1f}/{g['job_s']:.1f} s ({_percent(g['load_share'])})",
                     f"{p['load_s']:.1f}/{p['job_s']:.1f} s ({_percent(p['load_share'])})",
                     f"{r['weights_hash_s']:.1f} s",
                     f"{p['models_timed']}/{r['models']}", f"{r['agreement']['max_abs_diff']:.2g}",
                     f"{add['counts']['scored']} pairs, {add['job_s']:.1f} s" if "counts" in add
                     else add.get("skipped", "-")))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(head))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)


def parse_sizes(text: str, tiny: bool) -> dict:
    sizes = dict(TINY_SIZES if tiny else SIZES)
    for item in filter(None, (text or "").split(",")):
        name, _, gxn = item.partition("=")
        g, _, n = gxn.lower().partition("x")
        if name not in sizes or not g.isdigit() or not n.isdigit():
            raise SystemExit(f"--sizes {item!r}: write METRIC=GxN, e.g. bertscore=20x1000 "
                             f"(metrics: {', '.join(sizes)})")
        sizes[name] = (int(g), int(n))
    return sizes


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="auto", help="auto (cuda when there is one), cuda, cuda:N or cpu")
    ap.add_argument("--tiny", action="store_true", help="tiny random shapes and groups (CPU smoke test)")
    ap.add_argument("--metrics", default="auto", help=f"comma list of {', '.join(ORDER)}, or auto: those this "
                                                      f"environment can run")
    ap.add_argument("--sizes", default="", help="METRIC=GxN,... models x cases per group (defaults: "
                                                + ", ".join(f"{k}={g}x{n}" for k, (g, n) in SIZES.items()) + ")")
    ap.add_argument("--templates", type=int, default=1, help="template models in each group (one fixed report)")
    ap.add_argument("--duplicate-share", type=float, default=0.05,
                    help="share of each model's hypotheses that copy the first model's")
    ap.add_argument("--new-tokens", type=int, default=None, help="judges' max_new_tokens (16; tiny 8)")
    ap.add_argument("--judge-batch", type=int, default=0, help="judges' batch_size (0: the group's cases, so a "
                                                               "per-submission job is one full batch)")
    ap.add_argument("--judge-dtype", choices=("bf16", "fp16"), default="bf16", help="judges' dtype on CUDA")
    ap.add_argument("--judge-static", choices=("false", "auto", "true"), default="false",
                    help="judges' static_cache (auto: static and compiled on CUDA, the production default)")
    ap.add_argument("--budget-s", type=float, default=420.0, help="seconds for the whole run (see the docstring)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", default=None, help="where models and caches are built (default: a temp dir, "
                                                    "removed at the end)")
    ap.add_argument("--out", default=None, help="JSON results (default $OUT/device_group.json when $OUT is set)")
    ap.add_argument("--verbose", action="store_true", help="radrank's INFO log (progress of every job)")
    args = ap.parse_args(argv)
    args.sizes = parse_sizes(args.sizes, args.tiny)
    args.new_tokens = args.new_tokens or (8 if args.tiny else 16)
    if args.out is None and os.environ.get("OUT"):
        args.out = os.path.join(os.environ["OUT"], "device_group.json")
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    budget_end = time.perf_counter() + args.budget_s

    import torch
    import transformers

    from radrank.devices import device_of

    if not args.verbose:
        transformers.utils.logging.disable_progress_bar()  # a bar per load and save would bury the figures

    device = device_of(args.device)
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32, as in the jobs
        torch.backends.cudnn.allow_tf32 = False
    RESULTS.update(device=device, gpu=torch.cuda.get_device_name(0) if device.startswith("cuda") else None,
                   torch=torch.__version__, transformers=transformers.__version__,
                   args={k: v for k, v in vars(args).items()})
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, device {device} {RESULTS['gpu'] or ''}")

    wanted = ORDER if args.metrics == "auto" else tuple(m.strip() for m in args.metrics.split(",") if m.strip())
    unknown = [m for m in wanted if m not in PARTS]
    if unknown:
        raise SystemExit(f"--metrics: unknown {unknown}; choose from {', '.join(ORDER)}")
    todo = []
    for name in wanted:
        reason = PARTS[name].available()
        if reason:
            RESULTS["parts"][name] = {"skipped": reason}
            log(f"{name}: skipped ({reason})")
        else:
            todo.append(name)

    RESULTS["process_start_s"] = round(process_start_seconds(device), 2)
    log(f"a job process's start (python, torch, transformers, {device}): {RESULTS['process_start_s']:.1f} s")
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="radrank-group-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        for i, name in enumerate(todo):
            left = budget_end - time.perf_counter()
            if left <= 0:
                RESULTS["parts"][name] = {"skipped": "time budget spent"}
                log(f"{name}: skipped (time budget spent)")
                continue
            weight = WEIGHTS[name] / sum(WEIGHTS[n] for n in todo[i:])
            log(f"--- {name}: {left * weight:.0f} s of the {left:.0f} s left")
            try:
                run_part(PARTS[name], args, device, workdir, time.perf_counter() + left * weight)
            except Exception as e:  # noqa: BLE001 - one metric failing leaves the others' figures
                RESULTS["parts"].setdefault(name, {})["error"] = f"{type(e).__name__}: {e}"
                RESULTS["parts"][name]["trace"] = traceback.format_exc()[-2000:]
                log(f"{name} failed: {traceback.format_exc()}")
            finally:
                fresh_job_state()
                if name in JUDGE_DIRS:
                    shutil.rmtree(workdir / JUDGE_DIRS[name], ignore_errors=True)
            save(args.out)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    RESULTS["total_s"] = round(time.perf_counter() - dj.START, 1)
    save(args.out)
    print("\nGroup job vs per-submission path, same run. p/s: the group's pairs per job second; +start: the ratio "
          f"with a process start per job ({RESULTS['process_start_s']:.1f} s, measured apart); load: model-load s / "
          "job s; hash/job: the weights' sha256 every job computes (inside job s)")
    print(table({name: RESULTS["parts"][name] for name in ORDER if name in RESULTS["parts"]}))
    log(f"done in {RESULTS['total_s']} s" + (f"; wrote {args.out}" if args.out else ""))
    return RESULTS


if __name__ == "__main__":
    main()

"""MRScore's seven-criterion rubric, asked of an LLM judge (a local model on our engine, or an endpoint).

The MRScore paper (Liu et al. 2024) grades a generated report against the
reference on seven error criteria, each with a weight; S_i = 1 when the report
makes an error of criterion i, and

    score = 100 − Σ_i S_i · W_i,   W = 30, 20, 20, 10, 10, 5, 5 (Σ = 100)

for impression consistency, the organ named in the impression, the description
of lesions, clinical history / comparison, completeness, grammar and medical
terminology. The paper's own grading prompt is not public; the prompt below is
radrank's (:data:`PROMPT_VERSION` names it in the cache key and provenance). It
asks for one JSON object with a 0/1 flag per criterion and a short explanation.

Parser: the last JSON object in the answer (code fences allowed) that has all
seven keys; each flag must be 0/1 (also true/false, "yes"/"no", "0"/"1").
Anything else does not parse: the pair is asked again once (see
:mod:`radrank.engine`), then gets NaN with the reason in
``mrscore_rubric_unparsed_reason`` and counts in the ``mrscore_rubric_unparsed``
leaf.

Backends (``backend``):

* ``openai`` — any OpenAI-compatible chat-completions endpoint (``api_base``,
  ``model``); the key is read from the environment variable named by
  ``api_key_env`` (default ``OPENAI_API_KEY``), never from the config, and is
  never written to outputs, logs, the cache or provenance. Temperature 0 and a
  fixed seed; ``api_concurrency`` requests at a time.
* ``local`` — a local instruction-tuned causal LM (``model``: a Hugging Face id
  or directory) on the shared engine: the prompt is the user turn of the
  model's chat template, greedy, batched, static KV cache on CUDA.
* ``vllm`` — the same local model and prompt served by vLLM (env ``vllm``).

Columns: ``mrscore_rubric`` (0–100), ``mrscore_rubric_<criterion>`` (error
flags, 1 = error), ``mrscore_rubric_analysis`` (the raw answer),
``mrscore_rubric_unparsed`` (1.0 / 0.0) and ``mrscore_rubric_unparsed_reason``.
"""

from __future__ import annotations

import json
import logging
import re

import numpy as np

from radrank.engine import VLLM_SETTINGS
from radrank.metrics.base import Leaf, MetricSpec, Resources, mean_leaf

log = logging.getLogger("radrank")

PROMPT_VERSION = "radrank-mrscore-rubric-1"

# (key, weight, title, what counts as an error) — the paper's criteria and weights; radrank's wording.
CRITERIA = (
    ("impression_consistency", 30, "Impression consistency",
     "the candidate's overall conclusion (impression) disagrees with the reference's conclusion, or reaches a "
     "different diagnosis"),
    ("impression_organ", 20, "Organ in the impression",
     "the candidate's conclusion concerns the wrong organ or anatomical site, or leaves out the organ or site "
     "that the reference's conclusion is about"),
    ("lesion_description", 20, "Description of lesions",
     "an abnormality is described wrongly: wrong location, side, size, number, extent or severity, an "
     "abnormality invented, or one reported as absent when the reference reports it"),
    ("clinical_history", 10, "Clinical history and comparison",
     "the candidate misstates the clinical history or the comparison with prior studies that the reference "
     "reports (e.g. calls a new finding unchanged, or invents a comparison)"),
    ("completeness", 10, "Completeness",
     "the candidate leaves out clinically relevant findings, positive or pertinent negative, that the reference "
     "reports"),
    ("grammar", 5, "Grammar",
     "the candidate has grammatical or spelling errors, or sentences that are hard to understand"),
    ("terminology", 5, "Medical terminology",
     "the candidate uses incorrect, informal or non-standard medical terms"),
)
KEYS = tuple(k for k, *_ in CRITERIA)
WEIGHTS = {k: w for k, w, *_ in CRITERIA}
COLUMNS = ("mrscore_rubric", *(f"mrscore_rubric_{k}" for k in KEYS), "mrscore_rubric_analysis",
           "mrscore_rubric_unparsed", "mrscore_rubric_unparsed_reason")

SPEC = MetricSpec(
    name="mrscore_rubric",
    description="MRScore's seven-criterion rubric (weights 30/20/20/10/10/5/5; 100 − Σ errors × weights) asked of an "
                "LLM judge (local model or OpenAI-compatible endpoint), mean over parsed reports",
    env="judge",
    columns=COLUMNS,
    leaves=(mean_leaf("mrscore_rubric", "MRScore rubric"),
            Leaf(name="mrscore_rubric_unparsed", label="MRScore rubric unparsed", higher_is_better=False,
                 stats=("mrscore_rubric_unparsed",), corpus=lambda t: t[..., 0])),
    resources=Resources(mem_mb=32000, runtime_min=240, threads=4, gpu=1),
    model="gpt-4o-2024-08-06",
    settings={
        "backend": "openai",  # openai (any OpenAI-compatible endpoint) | local (transformers engine) | vllm
        "model": "gpt-4o-2024-08-06",  # endpoint model name, or (local) Hugging Face id / directory
        "revision": None,  # local only
        "api_base": "https://api.openai.com/v1",
        "api_key_env": "OPENAI_API_KEY",  # name of the environment variable holding the key
        "api_concurrency": 4,
        "api_timeout": 120,
        "api_max_retries": 3,
        "max_report_words": 300,
        "max_new_tokens": 512,
        "max_total_tokens": 4096,  # local only: prompt + answer
        "trust_remote_code": [],  # local only: allow-list; the workflow fills it from the top-level config list
        "batch_size": 64,  # local only
        "device": "auto",  # local only
        "dtype": "auto",  # local only: bf16 on CUDA, fp32 on the CPU
        "static_cache": "auto",  # local only
        "retry_temperature": 0.7,
        "seed": 0,
        "cache_dir": None,  # response cache (see radrank.judge_cache); "off" disables
        **VLLM_SETTINGS,  # backend vllm only (see radrank.engine.VLLM_SETTINGS)
    },
    packages=("torch", "transformers", "tokenizers", "huggingface-hub", "safetensors"),
    version="1",
)


# --- prompt -----------------------------------------------------------------------------------------------------


def _cut(text, words) -> str:
    return " ".join(str(text).split()[:int(words)]) if words else str(text).strip()


def build_prompt(reference: str, hypothesis: str, max_report_words: int | None = 300) -> str:
    criteria = "\n".join(f"{i}. {key} ({title}, weight {w}): 1 if {what}; otherwise 0."
                         for i, (key, w, title, what) in enumerate(CRITERIA, 1))
    example = json.dumps({k: 0 for k in KEYS} | {"explanation": "..."})
    return (
        "You are an experienced radiologist reviewing a radiology report written by a trainee. Compare the "
        "CANDIDATE report with the REFERENCE report, which is correct and complete. Judge clinical content, "
        "not wording: a finding stated in different words is not an error.\n\n"
        f"REFERENCE report:\n{_cut(reference, max_report_words)}\n\n"
        f"CANDIDATE report:\n{_cut(hypothesis, max_report_words)}\n\n"
        "For each criterion below, answer 1 if the candidate makes that kind of error at least once, "
        "otherwise 0.\n"
        f"{criteria}\n\n"
        "Answer with one JSON object and nothing else, with exactly these keys and 0 or 1 for each criterion, "
        f"plus a one-sentence explanation, for example:\n{example}"
    )


# --- parsing ----------------------------------------------------------------------------------------------------

_FENCE = re.compile(r"```(?:json|JSON)?")
_TRUE = {"1", "true", "yes", "y", "error"}
_FALSE = {"0", "false", "no", "n", "none", "no error"}


def _flag(value):
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)) and value in (0, 1):
        return int(value)
    if isinstance(value, str):
        v = value.strip().lower()
        if v in _TRUE:
            return 1
        if v in _FALSE:
            return 0
    return None


def _objects(text: str):
    decoder = json.JSONDecoder()
    text = _FENCE.sub("", text)
    pos = text.find("{")
    while pos != -1:
        try:
            obj, end = decoder.raw_decode(text, pos)
        except ValueError:
            pos = text.find("{", pos + 1)
            continue
        if isinstance(obj, dict):
            yield obj
        pos = text.find("{", end)


def parse(text: str) -> dict:
    """Flags per criterion and the score; ParseError when no usable JSON object is found."""
    from radrank.engine import ParseError

    candidates = list(_objects(text or ""))
    if not candidates:
        raise ParseError("no JSON object in the answer")
    problems = []
    for obj in reversed(candidates):
        lowered = {str(k).strip().lower(): v for k, v in obj.items()}
        missing = [k for k in KEYS if k not in lowered]
        if missing:
            problems.append(f"missing keys {missing}")
            continue
        flags = {k: _flag(lowered[k]) for k in KEYS}
        bad = [k for k, v in flags.items() if v is None]
        if bad:
            problems.append(f"values not 0/1 for {bad}")
            continue
        return {"flags": flags, "score": rubric_score(flags)}
    raise ParseError("JSON answer unusable: " + problems[0])


def rubric_score(flags: dict) -> float:
    """100 − Σ S_i · W_i."""
    return float(100 - sum(WEIGHTS[k] * int(flags[k]) for k in KEYS))


# --- backends ---------------------------------------------------------------------------------------------------


def make_generator(settings):
    """(generator, provenance, how to turn a prompt into a request)."""
    from radrank import engine
    from radrank.errors import ConfigError

    backend = str(settings.get("backend") or "openai").lower()
    if backend in ("openai", "api"):
        gen = engine.OpenAIGenerator(
            model=settings.get("model"), api_base=settings.get("api_base"), api_key_env=settings.get("api_key_env"),
            max_new_tokens=int(settings["max_new_tokens"]), concurrency=int(settings.get("api_concurrency") or 4),
            timeout=float(settings.get("api_timeout") or 120), max_retries=int(settings.get("api_max_retries") or 0),
            retry_temperature=float(settings.get("retry_temperature", 0.7)), seed=int(settings.get("seed", 0)),
            metric="mrscore_rubric")
        prov = {"backend": "openai", "model": gen.model, "api_base": gen.api_base,
                "api_key_env": settings.get("api_key_env")}
        return gen, prov, lambda p: [{"role": "user", "content": p}]
    if backend in ("local", "vllm"):
        if not settings.get("model"):
            raise ConfigError("metric 'mrscore_rubric': set metric_settings.mrscore_rubric.model to a local model")
        load = engine.load_vllm_generator if backend == "vllm" else engine.load_local_generator
        loaded = load(str(settings["model"]), metric="mrscore_rubric", settings=settings, cuda_dtype="bf16",
                      add_special_tokens=False)
        gen = loaded.generator
        return gen, {"backend": backend, **loaded.provenance}, local_renderer(gen)
    raise ConfigError(f"metric 'mrscore_rubric': unknown backend {backend!r} (use openai, local or vllm)")


def local_renderer(generator):
    tok = generator.tokenizer
    if getattr(tok, "chat_template", None):
        generator.add_special_tokens = False  # the template writes BOS itself
        return lambda p: tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                                 add_generation_prompt=True)
    generator.add_special_tokens = True
    return lambda p: p


def score(pairs, settings, inputs, generator=None):
    """Rubric scores per pair. ``generator`` (tests): an engine generator to use instead of making one."""
    import pandas as pd

    from radrank import engine

    if generator is None:
        generator, prov, to_request = make_generator(settings)
    else:
        prov = {"backend": getattr(generator, "kind", "custom")}
        to_request = local_renderer(generator) if getattr(generator, "tokenizer", None) is not None else (
            lambda p: [{"role": "user", "content": p}])
    prov["prompt"] = PROMPT_VERSION
    words = settings.get("max_report_words")
    requests = [to_request(build_prompt(r, h, words))
                for r, h in zip(pairs["reference"].astype(str), pairs["hypothesis"].astype(str))]
    judgements = engine.judge(generator, requests, parse, cache=engine.cache_for(settings), what="mrscore_rubric")
    n = len(judgements)
    cols = {"mrscore_rubric": np.full(n, np.nan), **{f"mrscore_rubric_{k}": np.full(n, np.nan) for k in KEYS},
            "mrscore_rubric_unparsed": np.zeros(n)}
    reasons, analysis = [], []
    for i, j in enumerate(judgements):
        analysis.append(j.text or "")
        if j.parsed:
            cols["mrscore_rubric"][i] = j.value["score"]
            for k in KEYS:
                cols[f"mrscore_rubric_{k}"][i] = j.value["flags"][k]
            reasons.append("")
        else:
            cols["mrscore_rubric_unparsed"][i] = 1.0
            reasons.append(j.reason or "unparsed")
    cols["mrscore_rubric_analysis"] = analysis
    cols["mrscore_rubric_unparsed_reason"] = reasons
    out = pd.DataFrame({"sample_id": pairs["sample_id"].to_numpy(), **{c: cols[c] for c in COLUMNS}})
    unparsed = int(np.sum(cols["mrscore_rubric_unparsed"]))
    if unparsed:
        log.warning("mrscore_rubric: %d of %d pairs have no score (answer unparsable after one retry); see "
                    "mrscore_rubric_unparsed_reason", unparsed, n)
    out.attrs["models"] = prov
    return out

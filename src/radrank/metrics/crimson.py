"""CRIMSON per report (PyPI ``crimson-score`` 0.2.0, ``from CRIMSON import CRIMSONScore``; env ``crimson``).

An LLM judge lists the clinically relevant findings of the reference and of the candidate,
weights each by clinical significance (urgent 1, actionable 0.5, not actionable 0.25,
benign/expected 0, unknown 0.25), matches them, and names false findings, missing findings
and attribute errors (location, severity, descriptor, measurement, certainty, unspecific,
overinterpretation, temporal; significant 0.5, negligible 0). The score is
``CRIMSONScore._calculate_crimson`` of that evaluation: (correct − weighted false findings) /
weighted reference findings, squashed to −x/(1+x) below zero, so it lies in (−1, 1].

Everything CRIMSON-specific comes from the installed package:

* the prompt: ``CRIMSON.prompt_parts.build_prompt`` with the patient context built from the
  pairs' ``age`` and ``indication`` columns (``{"age": "82", "indication": "..."}``, missing
  values left out, no context block when both are missing; ``patient_context: false`` drops it);
* the chat messages: the package's system message and the prompt, exactly as its hf backend
  sends them (captured from ``CRIMSONScore._chat_completion_batch`` with a recording pipeline,
  so no prompt text is copied here); the OpenAI backend is the package's own
  ``CRIMSONScore(api="openai")._chat_completion`` (its system message, temperature 0, seed 42,
  JSON response format);
* the JSON repair: ``CRIMSON.utils.parse_json_response`` (orphan keys, bad escapes, unescaped
  quotes, smart quotes), after stripping Markdown code fences and text around the outermost
  ``{...}``, which the package does not do;
* the formula: ``CRIMSONScore._calculate_crimson``.

What this module adds:

* ``include_guidelines: auto`` reproduces the package's rule — the fine-tuned MedGemma model
  was trained without the significance examples and guideline blocks, so they are left out
  for it — also when ``model`` is a local copy (a path containing ``medgemma-4b-it-crimson``;
  set ``include_guidelines: false`` for a copy under another name). The package decides by
  comparing the model *name* with its default id, so a local directory would silently get
  the other prompt.
* hf generation through radrank's shared judge engine (:mod:`radrank.engine`): the chat
  template applied to the package's messages and tokenised exactly as the package's
  text-generation pipeline does, greedy decoding from the model's generation_config, one
  device (``device``; the package would spread the model with ``device_map="auto"``), dtype
  ``auto`` = bf16 on CUDA like the package (fp32 on the CPU), length-sorted batches with a
  static KV cache on CUDA, halving the batch on out-of-memory, a response cache
  (``cache_dir``), and one retry of an unusable answer (a larger budget when it was cut at
  ``max_new_tokens``, else sampled at ``retry_temperature`` with a fixed seed; ``retry:
  false`` keeps the package's single answer). ``hf_engine: false`` runs the package's own
  pipeline instead (``CRIMSONScore(api="hf")``, batched with ``_chat_completion_batch``), with
  ``greedy: true`` forcing greedy decoding over a sampling ``generation_config.json`` and
  ``max_new_tokens`` replacing the package's 8192-token limit.
* each distinct prompt is generated once.
* a response that cannot be parsed or scored gives NaN in every column with the reason in
  ``crimson_reason`` (``empty_response``, ``unparsed_json``, ``not_an_object``,
  ``invalid_evaluation: ...``, ``api_error: ...``; with the engine's retry, ``first answer: ...;
  retry: ...``); the job goes on and the mean leaf skips
  it (when every API request fails — a wrong endpoint, model or key — the job fails instead).
  The raw model text is kept in ``crimson_response`` for audit.
* the OpenAI backend reads its key from the environment variable named by ``api_key_env``
  (never from the config), talks to ``base_url`` when set (any OpenAI-compatible server),
  runs ``concurrency`` requests at a time, and never writes the key anywhere: it is not a
  setting, not logged, and scrubbed from error texts.

Weights (hf backend): ``model`` is a Hugging Face id (found in the cache, or downloaded once
when the hub is on) or a local directory, resolved by :func:`radrank.models.resolve` before
torch is imported; a missing one raises MissingWeightsError naming
``metric_settings.crimson.model``. ``trust_remote_code`` is only for ids on its allow-list (in the
workflow: the config's top-level ``trust_remote_code`` list, the only switch).
Leave ``max_total_tokens`` unset (or well above the prompt's length): the engine cuts prompts
longer than it from the right, which would drop the end of CRIMSON's prompt.
"""

from __future__ import annotations

import logging
import math
import os
import re

import numpy as np

from radrank.engine import VLLM_SETTINGS
from radrank.errors import ConfigError, MissingWeightsError
from radrank.metrics.base import MetricSpec, Resources, mean_leaf

log = logging.getLogger("radrank")

DEFAULT_MODEL = "rajpurkarlab/medgemma-4b-it-crimson"
DEFAULT_API_MODEL = "gpt-5.2"  # the package's default for api="openai"
BACKENDS = ("hf", "vllm", "openai")

ERROR_KEYS = ("false_findings", "missing_findings", "attribute_errors", "location_errors", "severity_errors",
              "descriptor_errors", "measurement_errors", "certainty_errors", "unspecific_errors",
              "overinterpretation_errors", "temporal_errors")
WEIGHTED_KEYS = ("false_findings", "missing_findings", "attribute_errors")
NUMBER_COLUMNS = (("crimson",) + tuple(f"crimson_{k}" for k in ERROR_KEYS)
                  + tuple(f"crimson_weighted_{k}" for k in WEIGHTED_KEYS) + ("crimson_n_g", "crimson_correct"))
COLUMNS = NUMBER_COLUMNS + ("crimson_reason", "crimson_response")

SPEC = MetricSpec(
    name="crimson",
    description="CRIMSON per report (LLM judge of clinically weighted false / missing findings and attribute "
                "errors, crimson-score package; patient context from age and indication), mean over reports",
    env="crimson",
    columns=COLUMNS,
    leaves=(mean_leaf("crimson", "CRIMSON"),),
    resources=Resources(mem_mb=32000, runtime_min=720, threads=4, gpu=1),
    model=DEFAULT_MODEL,
    settings={
        "backend": "hf",  # hf: a local model (radrank's judge engine or the package's pipeline); vllm: the same
        # local model on vLLM (env vllm, radrank's judge loop); openai: an API
        "model": DEFAULT_MODEL,  # hf: Hugging Face id or local directory
        "api_model": DEFAULT_API_MODEL,  # openai: the model name sent to the API
        "base_url": None,  # openai: an OpenAI-compatible endpoint (None: the client's default)
        "api_key_env": "OPENAI_API_KEY",  # openai: the environment variable holding the key
        "patient_context": True,  # age and indication from the pairs into the prompt
        "include_guidelines": "auto",  # auto | true | false (auto: false for the MedGemma-CRIMSON model)
        "hf_engine": True,  # hf: radrank's judge engine (False: the package's own pipeline)
        "revision": None,  # hf: hub revision (None: the cached / newest snapshot)
        "trust_remote_code": [],  # hf: allow-list; the workflow fills it from the top-level config list
        "device": "auto",  # hf engine: auto = cuda:0 when available, else cpu
        "dtype": "auto",  # hf engine: auto = bf16 on CUDA (the package's), fp32 on the CPU
        "static_cache": "auto",  # hf engine: static KV cache + compiled decoding on CUDA
        "max_new_tokens": 2048,  # hf: first answer's budget (None with hf_engine false: the package's 8192)
        "max_total_tokens": None,  # hf engine: cap on prompt + answer (None: none; the engine cuts longer prompts
        # from the right, which would drop the end of CRIMSON's prompt, so leave it unset or well above the prompt)
        "retry": True,  # hf engine: ask once more when an answer is unusable
        "retry_temperature": 0.7,  # hf engine: the retry of an uncut unusable answer samples at this temperature
        "seed": 0,
        "cache_dir": None,  # hf engine: response cache (None: $RADRANK_JUDGE_CACHE or ~/.cache/radrank/judge)
        "greedy": True,  # hf_engine false: force greedy decoding over the model's generation_config
        "batch_size": 8,  # hf: prompts per generate call (halved on out-of-memory by the engine)
        "concurrency": 4,  # openai: requests in flight
        "request_timeout": 300,  # openai: seconds per request
        "max_retries": 2,  # openai: client retries per request
        **VLLM_SETTINGS,  # backend vllm only (see radrank.engine.VLLM_SETTINGS)
        # vllm: the prompt (up to ~4k tokens with the guidelines) + max_new_tokens, not Gemma-3's 128k context
        "max_model_len": 8192,
    },
    packages=("crimson-score", "torch", "transformers", "accelerate", "peft", "openai"),
    version="1",
)

# Settings that change numbers (the others only change speed).
NUMBER_SETTINGS = ("backend", "model", "revision", "api_model", "base_url", "patient_context", "include_guidelines",
                   "hf_engine", "dtype", "greedy", "max_new_tokens", "max_total_tokens", "retry", "retry_temperature",
                   "seed")


# --- prompts --------------------------------------------------------------------------------------


def _is_missing(value) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    try:
        import pandas as pd

        if value is pd.NA:
            return True
    except ImportError:  # pragma: no cover
        pass
    return isinstance(value, str) and value.strip().lower() in ("", "nan", "none", "null")


def patient_context(age=None, indication=None) -> dict | None:
    """The package's ``patient_context`` dict from a pair's age and indication (None when both are missing).

    Age is written without a trailing ``.0`` (``82.0`` → ``"82"``), as in CRIMSON's RadJudge cases.
    """
    ctx = {}
    if not _is_missing(age):
        try:
            a = float(age)
            ctx["age"] = str(int(a)) if a.is_integer() else str(a)
        except (TypeError, ValueError):
            ctx["age"] = str(age).strip()
    if not _is_missing(indication):
        ctx["indication"] = str(indication).strip()
    return ctx or None


def uses_guidelines(settings: dict) -> bool:
    """Whether the prompt carries the significance examples and guideline blocks."""
    value = settings.get("include_guidelines", "auto")
    if isinstance(value, bool):
        return value
    if str(value).lower() in ("true", "yes", "1"):
        return True
    if str(value).lower() in ("false", "no", "0"):
        return False
    if str(value).lower() != "auto":
        raise ConfigError(f"metric_settings.crimson.include_guidelines must be auto, true or false, got {value!r}")
    if settings.get("backend") == "openai":
        return True
    model = str(settings.get("model") or "")
    return not (model == DEFAULT_MODEL or "medgemma-4b-it-crimson" in model.lower())


def build_prompts(pairs, settings: dict) -> list[str]:
    """One prompt per pair, through ``CRIMSON.prompt_parts.build_prompt``."""
    from CRIMSON.prompt_parts import build_prompt

    guidelines = uses_guidelines(settings)
    with_context = bool(settings.get("patient_context", True))
    n = len(pairs)
    ages = pairs["age"].tolist() if "age" in pairs.columns else [None] * n
    indications = pairs["indication"].tolist() if "indication" in pairs.columns else [None] * n
    prompts = []
    for ref, hyp, age, ind in zip(pairs["reference"].tolist(), pairs["hypothesis"].tolist(), ages, indications):
        ctx = patient_context(age, ind) if with_context else None
        prompts.append(build_prompt(str(ref), str(hyp), patient_context=ctx,
                                    include_significance_examples=guidelines,
                                    include_attribute_guidelines=guidelines,
                                    include_context_guidelines=guidelines))
    return prompts


# --- parsing and scoring ---------------------------------------------------------------------------

_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\r?\n?(.*?)```", re.DOTALL)
_OPEN_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\r?\n?(.*)\Z", re.DOTALL)


def extract_json_text(text: str) -> str:
    """The JSON object inside a model response: Markdown code fences (closed or not) and text
    before the first ``{`` / after the last ``}`` removed."""
    t = (text or "").strip()
    m = _FENCE.search(t)
    if m:
        t = m.group(1).strip()
    else:
        m = _OPEN_FENCE.search(t)  # a fence the model never closed (cut off by the token limit)
        if m:
            t = m.group(1).strip()
    start, end = t.find("{"), t.rfind("}")
    if start > 0 or (end != -1 and end < len(t) - 1):
        if start != -1 and end > start:
            t = t[start:end + 1]
        elif start > 0:
            t = t[start:]
    return t


def parse_response(text):
    """(evaluation dict, "") or (None, reason) for one model response.

    Uses the package's ``parse_json_response`` (its repairs) on the raw text, then on the text
    with code fences and surrounding prose removed.
    """
    from CRIMSON.utils import parse_json_response

    if text is None or not str(text).strip():
        return None, "empty_response"
    parsed = None
    for candidate in dict.fromkeys((str(text), extract_json_text(text))):
        try:
            parsed = parse_json_response(candidate)
            break
        except (ValueError, RecursionError):
            continue
    if parsed is None:
        return None, "unparsed_json"
    if not isinstance(parsed, dict):
        return None, "not_an_object"
    return parsed, ""


def calculate(evaluation: dict) -> dict:
    """``CRIMSONScore._calculate_crimson`` (the package's formula; it does not use ``self``)."""
    from CRIMSON.generate_score import CRIMSONScore

    return CRIMSONScore._calculate_crimson(None, evaluation)


def score_response(text) -> dict:
    """The per-sample columns (without sample_id) for one response."""
    row = {c: np.nan for c in NUMBER_COLUMNS}
    row["crimson_response"] = "" if text is None else str(text)
    evaluation, reason = parse_response(text)
    if evaluation is not None:
        try:
            result = calculate(evaluation)
            values = {"crimson": result["crimson_score"],
                      **{f"crimson_{k}": result["error_counts"][k] for k in ERROR_KEYS},
                      **{f"crimson_weighted_{k}": result["weighted_error_counts"][k] for k in WEIGHTED_KEYS},
                      "crimson_n_g": result["metrics"]["N_G"], "crimson_correct": result["metrics"]["correct"]}
            row.update({k: float(v) for k, v in values.items()})
        except Exception as e:  # a structurally wrong evaluation (missing ids, wrong types)
            row = {c: np.nan for c in NUMBER_COLUMNS} | {"crimson_response": row["crimson_response"]}
            reason = f"invalid_evaluation: {type(e).__name__}: {str(e)[:200]}"
    row["crimson_reason"] = reason
    return row


# --- backends -----------------------------------------------------------------------------------------


def _check(settings: dict) -> None:
    backend = settings.get("backend")
    if backend not in BACKENDS:
        raise ConfigError(f"metric_settings.crimson.backend must be one of {BACKENDS}, got {backend!r}")
    for key in ("batch_size", "concurrency"):
        if int(settings.get(key) or 0) < 1:
            raise ConfigError(f"metric_settings.crimson.{key} must be a positive integer")
    uses_guidelines(settings)


def resolve_model(settings: dict):
    """Local directory of the hf model (MissingWeightsError, naming the config key, when absent)."""
    from radrank.models import resolve

    model = str(settings.get("model") or DEFAULT_MODEL)
    if not os.path.exists(os.path.expanduser(model)) and not model.startswith(("/", "./", "../", "~")):
        resolve(model, metric="crimson", setting="model", revision=settings.get("revision"),
                filename="config.json")  # a model absent from the cache fails here, before any download
    path = resolve(model, metric="crimson", setting="model", revision=settings.get("revision"))
    if not path.is_dir():
        raise MissingWeightsError(f"metric 'crimson': {model!r} (config metric_settings.crimson.model) is a file; "
                                  f"expected a model directory")
    if not (path / "config.json").is_file():
        raise MissingWeightsError(f"metric 'crimson': {path} (config metric_settings.crimson.model) has no "
                                  f"config.json; expected a transformers model directory")
    return path


_SCORERS: dict = {}


def _hf_scorer(path, settings: dict):
    key = ("hf", str(path))
    if key not in _SCORERS:
        from CRIMSON import CRIMSONScore

        _SCORERS[key] = CRIMSONScore(api="hf", model_name=str(path))
    scorer = _SCORERS[key]
    generation = scorer.pipe.model.generation_config
    if scorer._has_generation_config:
        if settings.get("greedy", True):
            generation.do_sample = False
            for name in ("temperature", "top_p", "top_k"):
                if hasattr(generation, name):
                    setattr(generation, name, None)
        if settings.get("max_new_tokens"):
            generation.max_new_tokens = int(settings["max_new_tokens"])
            generation.max_length = None
    elif settings.get("max_new_tokens"):  # the package passes do_sample=False and this limit itself
        scorer.DEFAULT_MAX_NEW_TOKENS = int(settings["max_new_tokens"])
    return scorer


def generation_settings(scorer) -> dict:
    """What the hf backend generates with (for provenance)."""
    if scorer._has_generation_config:
        g = scorer.pipe.model.generation_config
        return {"source": "generation_config.json", "do_sample": bool(g.do_sample),
                "max_new_tokens": g.max_new_tokens, "max_length": g.max_length,
                "temperature": getattr(g, "temperature", None), "top_p": getattr(g, "top_p", None),
                "top_k": getattr(g, "top_k", None)}
    return {"source": "crimson-score defaults", "do_sample": False, "max_new_tokens": scorer.DEFAULT_MAX_NEW_TOKENS}


def generate_hf(prompts: list[str], settings: dict):
    """Responses for ``prompts`` from the package's own hf pipeline (``hf_engine: false``);
    returns (responses, provenance)."""
    from radrank.models import model_provenance

    path = resolve_model(settings)  # fails before torch is imported
    scorer = _hf_scorer(path, settings)
    batch = int(settings.get("batch_size") or 8)
    order = sorted(range(len(prompts)), key=lambda i: -len(prompts[i]))
    responses: list = [None] * len(prompts)
    step = batch * 4
    for lo in range(0, len(order), step):
        idx = order[lo:lo + step]
        out = scorer._chat_completion_batch([prompts[i] for i in idx], batch_size=batch)
        for i, text in zip(idx, out):
            responses[i] = text
        log.info("crimson: %d/%d prompts generated", min(lo + step, len(order)), len(order))
    prov = model_provenance(str(settings.get("model") or DEFAULT_MODEL), path)
    prov["generation"] = {"runner": "crimson-score pipeline (device_map auto, bf16)", **generation_settings(scorer)}
    return responses, prov


# --- hf through radrank's judge engine --------------------------------------------------------------------


class _Recorder:
    """Stands in for the package's transformers pipeline and records the chat it is given."""

    def __init__(self):
        from types import SimpleNamespace

        self.model = SimpleNamespace(generation_config=None)
        self.seen: list = []

    def __call__(self, messages_batch, **kwargs):
        self.seen.extend(messages_batch)
        return [[{"generated_text": [*m, {"role": "assistant", "content": ""}]}] for m in messages_batch]


def package_messages(prompt: str) -> list[dict]:
    """The chat crimson-score's hf backend sends for ``prompt``: its system message, then the prompt."""
    from CRIMSON import CRIMSONScore

    scorer = CRIMSONScore.__new__(CRIMSONScore)  # no model: only the message construction runs
    scorer.api, scorer._has_generation_config, scorer.pipe = "hf", True, _Recorder()
    scorer._chat_completion_batch([prompt], batch_size=1)
    (messages,) = scorer.pipe.seen
    if messages[-1] != {"role": "user", "content": prompt}:
        raise RuntimeError("crimson-score's hf backend no longer sends the prompt as the last user message")
    return [dict(m) for m in messages]


def render(tokenizer, prompt: str) -> str:
    return tokenizer.apply_chat_template(package_messages(prompt), tokenize=False, add_generation_prompt=True)


def match_pipeline_tokens(generator, prompt: str) -> None:
    """Tokenise rendered prompts as the package's pipeline does (``apply_chat_template`` with
    tokenize=True): with or without the tokenizer's own special tokens, whichever reproduces it."""
    tok = generator.tokenizer
    expected = tok.apply_chat_template(package_messages(prompt), add_generation_prompt=True, tokenize=True,
                                       return_dict=True)["input_ids"]
    text = render(tok, prompt)
    for flag in (False, True):
        if list(tok(text, add_special_tokens=flag)["input_ids"]) == list(expected):
            generator.add_special_tokens = flag
            return
    raise RuntimeError("crimson: the rendered chat does not tokenise to the pipeline's input ids")


def _engine_parse(text):
    from radrank.engine import ParseError

    row = score_response(text)
    if row["crimson_reason"]:
        raise ParseError(row["crimson_reason"])
    return row


def load_generator(settings: dict):
    from radrank import engine

    model = str(settings.get("model") or DEFAULT_MODEL)
    key = ("engine", settings.get("backend"), model, str(settings.get("revision")), str(settings.get("device")),
           str(settings.get("dtype")), str(settings.get("static_cache")), int(settings.get("batch_size") or 8))
    if key not in _SCORERS:
        loaded = engine.load_generator(model, metric="crimson", settings=settings, cuda_dtype="bf16")
        match_pipeline_tokens(loaded.generator, "x")
        _SCORERS[key] = loaded
    loaded = _SCORERS[key]
    gen = loaded.generator
    gen.max_new_tokens = int(settings.get("max_new_tokens") or 2048)
    gen.max_total_tokens = int(settings["max_total_tokens"]) if settings.get("max_total_tokens") else None
    gen.retry_temperature = float(settings.get("retry_temperature", 0.7))
    gen.seed = int(settings.get("seed", 0))
    return loaded


def judge_hf_engine(prompts: list[str], settings: dict, generator=None):
    """Rows (per prompt) and provenance, through :func:`radrank.engine.judge`."""
    from radrank import engine

    prov = {}
    if generator is None:
        loaded = load_generator(settings)
        generator, prov = loaded.generator, dict(loaded.provenance)
    requests = [render(generator.tokenizer, p) for p in prompts]
    judgements = engine.judge(generator, requests, _engine_parse, cache=engine.cache_for(settings),
                              retry=bool(settings.get("retry", True)), what="crimson")
    rows = []
    for j in judgements:
        if j.parsed:
            rows.append(j.value)
        else:
            row = {c: np.nan for c in NUMBER_COLUMNS}
            row.update(crimson_reason=j.reason or "unparsed", crimson_response=j.text or "")
            rows.append(row)
    prov["generation"] = {"runner": f"radrank.engine ({getattr(generator, 'backend', 'hf')})", "greedy": True, "max_new_tokens": generator.max_new_tokens,
                          "max_total_tokens": generator.max_total_tokens, "retry": bool(settings.get("retry", True)),
                          "retry_temperature": generator.retry_temperature, "seed": generator.seed,
                          "add_special_tokens": generator.add_special_tokens}
    return rows, prov


def api_key(settings: dict) -> str:
    name = str(settings.get("api_key_env") or "OPENAI_API_KEY")
    key = os.environ.get(name)
    if not key:
        raise ConfigError(f"metric 'crimson' (backend openai): the environment variable {name} "
                          f"(metric_settings.crimson.api_key_env) is not set; put the API key there")
    return key


def scrub(text, secret: str | None) -> str:
    text = str(text)
    return text.replace(secret, "***") if secret else text


def _openai_scorer(settings: dict, key: str):
    """``CRIMSONScore(api="openai")`` talking to ``base_url`` with our own client (timeouts, retries)."""
    from CRIMSON import CRIMSONScore
    from openai import OpenAI

    model = str(settings.get("api_model") or DEFAULT_API_MODEL)
    # The package builds OpenAI(api_key=os.environ["OPENAI_API_KEY"]) itself, which fails when that
    # variable is unset: give it the key for the construction only, then swap in our client.
    previous = os.environ.get("OPENAI_API_KEY")
    os.environ["OPENAI_API_KEY"] = key
    try:
        scorer = CRIMSONScore(api="openai", model_name=model)
    finally:
        if previous is None:
            os.environ.pop("OPENAI_API_KEY", None)
        else:
            os.environ["OPENAI_API_KEY"] = previous
    scorer.client = OpenAI(api_key=key, base_url=settings.get("base_url") or None,
                           timeout=float(settings.get("request_timeout") or 300),
                           max_retries=int(settings.get("max_retries") or 0))
    return scorer


def generate_openai(prompts: list[str], settings: dict):
    """Responses (None where the request failed) and per-prompt error reasons; returns
    (responses, reasons, provenance)."""
    from concurrent.futures import ThreadPoolExecutor

    key = api_key(settings)
    scorer = _openai_scorer(settings, key)
    responses: list = [None] * len(prompts)
    reasons: list = [""] * len(prompts)

    def one(i):
        try:
            responses[i] = scorer._chat_completion(prompts[i])
        except Exception as e:
            reasons[i] = f"api_error: {type(e).__name__}: {scrub(e, key)[:300]}"

    with ThreadPoolExecutor(max_workers=int(settings.get("concurrency") or 1)) as pool:
        list(pool.map(one, range(len(prompts))))
    failed = sum(1 for r in reasons if r)
    if prompts and failed == len(prompts):  # a wrong endpoint, model or key: fail rather than write NaN
        raise RuntimeError(f"metric 'crimson': all {failed} API requests failed, e.g. {reasons[0]}; check "
                           f"metric_settings.crimson.base_url, .api_model and the key in .api_key_env")
    if failed:
        log.warning("crimson: %d/%d API requests failed, e.g. %s", failed, len(prompts),
                    next(r for r in reasons if r))
    prov = {"id": scorer.model_name, "api": "openai-compatible",
            "base_url": settings.get("base_url") or None, "api_key_env": settings.get("api_key_env")}
    return responses, reasons, prov


# --- scoring ---------------------------------------------------------------------------------------------


def score(pairs, settings, inputs):
    import pandas as pd

    s = {**SPEC.settings, **(settings or {})}
    _check(s)
    if s["backend"] in ("hf", "vllm"):
        resolve_model(s)  # a missing model fails before the prompts are built
    prompts = build_prompts(pairs, s)
    distinct = list(dict.fromkeys(prompts))
    log.info("crimson: %d pairs, %d distinct prompts, backend %s, guidelines %s", len(prompts), len(distinct),
             s["backend"], uses_guidelines(s))
    if s["backend"] == "vllm" or (s["backend"] == "hf" and s.get("hf_engine", True)):
        judged, model_prov = judge_hf_engine(distinct, s)
        rows = dict(zip(distinct, judged))
    else:
        if s["backend"] == "hf":
            responses, model_prov = generate_hf(distinct, s)
            api_reasons = [""] * len(distinct)
        else:
            responses, api_reasons, model_prov = generate_openai(distinct, s)
        rows = {}
        for prompt, text, api_reason in zip(distinct, responses, api_reasons):
            row = score_response(text)
            if api_reason:
                row["crimson_reason"] = api_reason
            rows[prompt] = row
    out = pd.DataFrame([rows[p] for p in prompts], columns=list(COLUMNS))
    out.insert(0, "sample_id", pairs["sample_id"].to_numpy())
    for c in NUMBER_COLUMNS:
        out[c] = out[c].astype("float64")
    failed = out["crimson_reason"].ne("")
    if failed.any():
        log.warning("crimson: %d/%d samples not scored (NaN): %s", int(failed.sum()), len(out),
                    out.loc[failed, "crimson_reason"].str.split(":").str[0].value_counts().to_dict())
    out.attrs["models"] = {"crimson": model_prov, "backend": s["backend"], "include_guidelines": uses_guidelines(s),
                           "patient_context": bool(s["patient_context"])}
    return out

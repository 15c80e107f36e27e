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
  false`` keeps the package's single answer). ``backend: vllm`` serves the same model with
  vLLM through the same engine loop. ``hf_engine: false`` runs the package's own pipeline
  instead (``CRIMSONScore(api="hf")``, batched with ``_chat_completion_batch``), with
  ``greedy: true`` forcing greedy decoding over a sampling ``generation_config.json`` and
  ``max_new_tokens`` replacing the package's limit (null keeps it).
* each distinct prompt is generated once.
* a response that cannot be parsed or scored gives NaN in every number column with the reason in
  ``crimson_reason`` (``empty_response``, ``unparsed_json``, ``not_an_object``,
  ``invalid_evaluation: ...``, ``api_error: ...``; with the engine's retry, ``first answer: ...;
  retry: ...``); the job goes on and the mean leaf skips
  it (when every API request fails — a wrong endpoint, model or key — the job fails instead).
  The raw model text is kept in ``crimson_response`` for audit (and the report's drill-down,
  :meth:`CRIMSON.explain`).
* the OpenAI backend reads its key from the environment variable named by ``api_key_env``
  (never from the config), talks to ``base_url`` when set (any OpenAI-compatible server),
  runs ``concurrency`` requests at a time, and never writes the key anywhere: it is not a
  setting, not logged, and scrubbed from error texts.

Weights (backends hf and vllm alike): ``model`` is a Hugging Face id (found in the cache, or
downloaded once when the hub is on) or a local directory; :meth:`CRIMSON.weights` declares it,
so the workflow's load-time check refuses a missing one before any environment is built, and
the job resolves the same reference through the runtime before torch is imported (a
MissingWeightsError naming ``metric_settings.crimson.model``). The openai backend loads no
weights. ``trust_remote_code`` is only for ids on its allow-list (the config's top-level
``trust_remote_code`` list, the only switch). Leave ``max_total_tokens`` unset (or well above
the prompt's length): the engine cuts prompts longer than it from the right, which would drop
the end of CRIMSON's prompt.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import os
import re
from dataclasses import dataclass
from typing import Literal

import numpy as np

from radrank.judge_failures import failure_columns, failure_kind
from radrank.metrics.base import Explanation, Resources, judge_failures, mean_leaf
from radrank.metrics.judge import JudgeMetric, JudgeSettings, cache_for, model_ref
from radrank.settings import scored, speed

log = logging.getLogger("radrank")

DEFAULT_MODEL = "rajpurkarlab/medgemma-4b-it-crimson"
DEFAULT_API_MODEL = "gpt-5.2"  # the package's default for api="openai"

ERROR_KEYS = ("false_findings", "missing_findings", "attribute_errors", "location_errors", "severity_errors",
              "descriptor_errors", "measurement_errors", "certainty_errors", "unspecific_errors",
              "overinterpretation_errors", "temporal_errors")
WEIGHTED_KEYS = ("false_findings", "missing_findings", "attribute_errors")
NUMBER_COLUMNS = (("crimson",) + tuple(f"crimson_{k}" for k in ERROR_KEYS)
                  + tuple(f"crimson_weighted_{k}" for k in WEIGHTED_KEYS) + ("crimson_n_g", "crimson_correct"))
COLUMNS = NUMBER_COLUMNS + ("crimson_reason", "crimson_response", *failure_columns("crimson"))


@dataclass(frozen=True)
class CRIMSONSettings(JudgeSettings):
    """``metric_settings.crimson`` (the judge engine's settings, CRIMSON's defaults, and its backends and prompt)."""

    model: str = scored(DEFAULT_MODEL, "hf / vllm: the judge model, a Hugging Face id or a local directory")
    max_new_tokens: int | None = scored(2048, "hf / vllm: the first answer's token budget (null, with hf_engine "
                                              "false only: the model's generation_config, else the package's "
                                              "8192)", minimum=1)
    # The prompt (up to ~4k tokens with the guidelines) + max_new_tokens, not Gemma-3's 128k context.
    max_model_len: int | None = scored(8192, "vllm: prompt + answer tokens per sequence (null: max_total_tokens "
                                             "+ 1, else the model's); an answer that reaches it is cut", minimum=1)
    backend: Literal["hf", "vllm", "openai"] = scored("hf", "hf: the local model (radrank's judge engine, or the "
                                                            "package's pipeline); vllm: the same model on vLLM "
                                                            "(env vllm); openai: an OpenAI-compatible API")
    api_model: str = scored(DEFAULT_API_MODEL, "openai: the model name sent to the API")
    base_url: str | None = scored(None, "openai: an OpenAI-compatible endpoint (null: the client's default)",
                                  secret_url=True)
    api_key_env: str = speed("OPENAI_API_KEY", "openai: the environment variable holding the API key (the key "
                                               "itself is never a setting)")
    patient_context: bool = scored(True, "age and indication from the pairs into the prompt")
    include_guidelines: Literal["auto"] | bool = scored("auto", "the significance examples and guideline blocks "
                                                                "in the prompt (auto: left out for the "
                                                                "MedGemma-CRIMSON model, which was trained "
                                                                "without them)")
    hf_engine: bool = scored(True, "hf: radrank's judge engine (false: the package's own pipeline)")
    greedy: bool = scored(True, "hf_engine false: force greedy decoding over the model's generation_config")
    retry: bool = scored(True, "hf / vllm engine: ask once more when an answer is unusable")
    concurrency: int = speed(4, "openai: requests in flight", minimum=1)
    request_timeout: float = speed(300.0, "openai: seconds per request", minimum=1.0)
    max_retries: int = speed(2, "openai: the client's retries of a failed request", minimum=0)

    def check(self, where):
        super().check(where)
        if self.max_new_tokens is None and (self.backend != "hf" or self.hf_engine):
            raise self.fail(where, "max_new_tokens", "null (the model's own limit) is for backend hf with hf_engine "
                                                     "false only; give a number of tokens")
        if self.backend != "openai" and not self.model.strip():
            raise self.fail(where, "model", f"backend {self.backend} needs a model: a Hugging Face id or a local "
                                            f"directory")
        if self.backend == "openai" and not self.api_model.strip():
            raise self.fail(where, "api_model", "backend openai needs the model name the API serves")


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


def uses_guidelines(s: CRIMSONSettings) -> bool:
    """Whether the prompt carries the significance examples and guideline blocks."""
    if isinstance(s.include_guidelines, bool):
        return s.include_guidelines
    if s.backend == "openai":
        return True
    return not (s.model == DEFAULT_MODEL or "medgemma-4b-it-crimson" in s.model.lower())


def build_prompts(pairs, s: CRIMSONSettings) -> list[str]:
    """One prompt per pair, through ``CRIMSON.prompt_parts.build_prompt``."""
    from CRIMSON.prompt_parts import build_prompt

    guidelines = uses_guidelines(s)
    n = len(pairs)
    ages = pairs["age"].tolist() if "age" in pairs.columns else [None] * n
    indications = pairs["indication"].tolist() if "indication" in pairs.columns else [None] * n
    prompts = []
    for ref, hyp, age, ind in zip(pairs["reference"].tolist(), pairs["hypothesis"].tolist(), ages, indications):
        ctx = patient_context(age, ind) if s.patient_context else None
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


def _unscored(reason: str, text) -> dict:
    """The row of a response that gives no score: NaN numbers, the reason and the raw text."""
    return {**{c: np.nan for c in NUMBER_COLUMNS}, "crimson_reason": reason,
            "crimson_response": "" if text is None else str(text)}


def score_response(text) -> dict:
    """The per-sample columns (without sample_id) for one response."""
    evaluation, reason = parse_response(text)
    if evaluation is None:
        return _unscored(reason, text)
    try:
        result = calculate(evaluation)
        values = {"crimson": result["crimson_score"],
                  **{f"crimson_{k}": result["error_counts"][k] for k in ERROR_KEYS},
                  **{f"crimson_weighted_{k}": result["weighted_error_counts"][k] for k in WEIGHTED_KEYS},
                  "crimson_n_g": result["metrics"]["N_G"], "crimson_correct": result["metrics"]["correct"]}
        numbers = {k: float(v) for k, v in values.items()}
    except Exception as e:  # a structurally wrong evaluation (missing ids, wrong types)
        return _unscored(f"invalid_evaluation: {type(e).__name__}: {str(e)[:200]}", text)
    return {**numbers, "crimson_reason": "", "crimson_response": "" if text is None else str(text)}


def crimson_errors(response: str):
    """(false findings, missing findings, attribute errors) as readable strings from a CRIMSON answer,
    or None when the answer is not the JSON object the judge was asked for."""
    try:
        data = json.loads(extract_json_text(response))
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None

    def findings(key):
        items = data.get(key) or []
        return {str(f.get("id")): f for f in items if isinstance(f, dict)}

    ref, pred = findings("reference_findings"), findings("predicted_findings")
    errors = data.get("errors") if isinstance(data.get("errors"), dict) else {}

    def describe(table, fid):
        f = table.get(str(fid), {})
        sig = f.get("clinical_significance")
        return f"{f.get('finding', fid)}" + (f" ({sig})" if sig else "")

    false = [describe(pred, fid) for fid in errors.get("false_findings") or []]
    missing = [describe(ref, fid) for fid in errors.get("missing_findings") or []]
    attribute = []
    for e in errors.get("attribute_errors") or []:
        if isinstance(e, dict):
            kinds = ", ".join(map(str, e.get("error_types") or []))
            attribute.append(f"{describe(pred, e.get('pred_id'))}: {kinds}"
                             + (f" ({e['severity']})" if e.get("severity") else ""))
        else:
            attribute.append(str(e))
    return false, missing, attribute


def _text(value) -> str:
    """A cell as text: "" for a missing one (None, NaN)."""
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


# --- hf: the package's own pipeline (hf_engine: false) ---------------------------------------------------


def _package_pipeline(directory):
    """``CRIMSONScore(api="hf")`` on ``directory`` and a copy of its model's generation_config as loaded."""
    from CRIMSON import CRIMSONScore

    scorer = CRIMSONScore(api="hf", model_name=str(directory))
    return scorer, copy.deepcopy(scorer.pipe.model.generation_config)


def _configure_pipeline(scorer, loaded_config, s: CRIMSONSettings) -> None:
    """Set what the package generates with for these settings, from the generation_config as loaded (the
    scorer is shared by every call in the process, so no call's settings leak into the next)."""
    if scorer._has_generation_config:  # the package passes the model's generation_config to the pipeline
        generation = copy.deepcopy(loaded_config)
        if s.greedy:
            generation.do_sample = False
            for name in ("temperature", "top_p", "top_k"):
                if hasattr(generation, name):
                    setattr(generation, name, None)
        if s.max_new_tokens is not None:
            generation.max_new_tokens = s.max_new_tokens
            generation.max_length = None
        scorer.pipe.model.generation_config = generation
    else:  # the package passes do_sample=False and this limit itself
        scorer.DEFAULT_MAX_NEW_TOKENS = s.max_new_tokens or type(scorer).DEFAULT_MAX_NEW_TOKENS


def generation_settings(scorer) -> dict:
    """What the package's pipeline generates with (for provenance)."""
    if scorer._has_generation_config:
        g = scorer.pipe.model.generation_config
        return {"source": "generation_config.json", "do_sample": bool(g.do_sample),
                "max_new_tokens": g.max_new_tokens, "max_length": g.max_length,
                "temperature": getattr(g, "temperature", None), "top_p": getattr(g, "top_p", None),
                "top_k": getattr(g, "top_k", None)}
    return {"source": "crimson-score defaults", "do_sample": False, "max_new_tokens": scorer.DEFAULT_MAX_NEW_TOKENS}


def generate_package(prompts: list[str], s: CRIMSONSettings, runtime):
    """Responses for ``prompts`` from the package's own hf pipeline, loaded once per process;
    returns (responses, provenance)."""
    resolved = runtime.resolve(METRIC.weights(s)[0])  # a missing model fails here, before torch is imported
    scorer, loaded_config = runtime.load(("crimson-pipeline", str(resolved.directory)),
                                         lambda: _package_pipeline(resolved.directory))
    _configure_pipeline(scorer, loaded_config, s)
    order = sorted(range(len(prompts)), key=lambda i: -len(prompts[i]))
    responses: list = [None] * len(prompts)
    step = s.batch_size * 4
    for lo in range(0, len(order), step):
        idx = order[lo:lo + step]
        out = scorer._chat_completion_batch([prompts[i] for i in idx], batch_size=s.batch_size)
        for i, text in zip(idx, out):
            responses[i] = text
        log.info("crimson: %d/%d prompts generated", min(lo + step, len(order)), len(order))
    prov = {"model": resolved.provenance(),
            "generation": {"runner": "crimson-score pipeline (device_map auto, bf16)", **generation_settings(scorer)}}
    return responses, prov


# --- hf and vllm through radrank's judge engine -----------------------------------------------------------


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


def load_generator(s: CRIMSONSettings, runtime):
    """The engine's generator for ``s.backend`` (hf or vllm), tokenising as the package's pipeline does."""
    from radrank.runtime import generators

    loaded = generators.load_generator(METRIC.weights(s)[0], s, runtime, cuda_dtype="bf16")
    match_pipeline_tokens(loaded.generator, "x")
    return loaded


def judge_engine(prompts: list[str], s: CRIMSONSettings, runtime):
    """Rows (per prompt) and provenance, through :func:`radrank.engine.judge`."""
    from radrank import engine

    loaded = load_generator(s, runtime)
    generator, prov = loaded.generator, dict(loaded.provenance)
    requests = [render(generator.tokenizer, p) for p in prompts]
    judgements = engine.judge(generator, requests, _engine_parse, cache=cache_for(s), retry=s.retry,
                              what="crimson")
    rows = [{**(j.value if j.parsed else _unscored(j.reason or "unparsed", j.text)), "crimson_attempts": j.attempts}
            for j in judgements]
    prov["generation"] = {"runner": f"radrank.engine ({generator.backend})", "greedy": True,
                          "max_new_tokens": generator.max_new_tokens, "max_total_tokens": generator.max_total_tokens,
                          "retry": s.retry, "retry_temperature": generator.retry_temperature,
                          "seed": generator.seed, "add_special_tokens": generator.add_special_tokens}
    return rows, prov


# --- openai ------------------------------------------------------------------------------------------------


def _openai_scorer(s: CRIMSONSettings, key: str):
    """``CRIMSONScore(api="openai")`` talking to ``base_url`` with our own client (timeouts, retries)."""
    from CRIMSON import CRIMSONScore
    from openai import OpenAI

    # The package builds OpenAI(api_key=os.environ["OPENAI_API_KEY"]) itself, which fails when that
    # variable is unset: give it the key for the construction only, then swap in our client.
    previous = os.environ.get("OPENAI_API_KEY")
    os.environ["OPENAI_API_KEY"] = key
    try:
        scorer = CRIMSONScore(api="openai", model_name=s.api_model)
    finally:
        if previous is None:
            os.environ.pop("OPENAI_API_KEY", None)
        else:
            os.environ["OPENAI_API_KEY"] = previous
    scorer.client = OpenAI(api_key=key, base_url=s.base_url or None, timeout=s.request_timeout,
                           max_retries=s.max_retries)
    return scorer


def generate_openai(prompts: list[str], s: CRIMSONSettings):
    """Responses (None where the request failed) and per-prompt error reasons; returns
    (responses, reasons, provenance)."""
    from concurrent.futures import ThreadPoolExecutor

    from radrank.runtime import api_key, scrub

    key = api_key(f"{METRIC.owner()} (backend openai)", METRIC.key("api_key_env"), s.api_key_env)
    scorer = _openai_scorer(s, key)
    responses: list = [None] * len(prompts)
    reasons: list = [""] * len(prompts)

    def one(i):
        try:
            responses[i] = scorer._chat_completion(prompts[i])
        except Exception as e:
            reasons[i] = f"api_error: {type(e).__name__}: {scrub(e, key)[:300]}"

    with ThreadPoolExecutor(max_workers=s.concurrency) as pool:
        list(pool.map(one, range(len(prompts))))
    failed = sum(1 for r in reasons if r)
    if prompts and failed == len(prompts):  # a wrong endpoint, model or key: fail rather than write NaN
        raise RuntimeError(f"{METRIC.owner()}: all {failed} API requests failed, e.g. {reasons[0]}; check "
                           f"{METRIC.key('base_url')}, .api_model and the key in .api_key_env")
    if failed:
        log.warning("crimson: %d/%d API requests failed, e.g. %s", failed, len(prompts),
                    next(r for r in reasons if r))
    prov = {"id": scorer.model_name, "api": "openai-compatible",
            "base_url": scrub(s.base_url) if s.base_url else None, "api_key_env": s.api_key_env}
    return responses, reasons, prov


# --- the metric ----------------------------------------------------------------------------------------------


class CRIMSON(JudgeMetric):
    name = "crimson"
    description = ("CRIMSON per report (LLM judge of clinically weighted false / missing findings and attribute "
                   "errors, crimson-score package; patient context from age and indication), mean over reports")
    family = "crimson"
    columns = COLUMNS
    leaves = (mean_leaf("crimson", "CRIMSON"),)
    Settings = CRIMSONSettings
    nan_columns = NUMBER_COLUMNS  # an answer that cannot be parsed or scored
    reason_column = "crimson_reason"
    failures = judge_failures("crimson", "CRIMSON", leaf="crimson", worst=-1.0, best=1.0)  # its range is (−1, 1]
    packages = ("crimson-score", "torch", "transformers", "accelerate", "peft", "openai")
    version = "2"  # 2: the per-pair failure kind and attempts columns
    default_resources = Resources(mem_mb=32000, runtime_min=720, threads=4, gpu=1)
    explained_by = ("crimson_response", "crimson_reason")
    reads = ("reference", "hypothesis", "age", "indication")  # the patient context of the prompt

    def weights(self, s):
        if s.backend == "openai":
            return ()
        return (model_ref(self.owner(), self.key("model"), s),)

    def explain(self, row) -> Explanation | None:
        """False, missing and attribute errors of the judge's answer, or why it gave no score."""
        response = _text(row.get("crimson_response"))
        if not response:
            return None
        reason = _text(row.get("crimson_reason"))
        found = None if reason else crimson_errors(response)
        common = dict(label="CRIMSON", details_title="judge's answer", details=response)
        if found is None:
            return Explanation(failure=f"not scored ({reason or 'unparsed'})", **common)
        titles = ("false findings", "missing findings", "attribute errors")
        return Explanation(summary=tuple(f"{title}: " + ("; ".join(items) if items else "none")
                                         for title, items in zip(titles, found)), **common)

    def score(self, pairs, s, inputs, runtime):
        import pandas as pd

        prompts = build_prompts(pairs, s)
        distinct = list(dict.fromkeys(prompts))
        if s.backend == "openai":
            responses, api_reasons, model_prov = generate_openai(distinct, s)
            judged = [_unscored(why, None) if why else score_response(text)
                      for text, why in zip(responses, api_reasons)]
        elif s.backend == "hf" and not s.hf_engine:
            responses, model_prov = generate_package(distinct, s, runtime)
            judged = [score_response(text) for text in responses]
        else:
            judged, model_prov = judge_engine(distinct, s, runtime)
        rows = dict(zip(distinct, judged))
        log.info("crimson: %d pairs, %d distinct prompts, backend %s, guidelines %s", len(prompts), len(distinct),
                 s.backend, uses_guidelines(s))
        out = pd.DataFrame([rows[p] for p in prompts], columns=list(COLUMNS))
        out.insert(0, "sample_id", pairs["sample_id"].to_numpy())
        for c in NUMBER_COLUMNS:
            out[c] = out[c].astype("float64")
        # the package's own pipeline and the API path ask once; the engine's loop may ask twice
        out["crimson_attempts"] = out["crimson_attempts"].fillna(1).astype("int64")
        out["crimson_failure"] = [failure_kind(r, t) for r, t in zip(out["crimson_reason"], out["crimson_response"])]
        failed = out["crimson_reason"].ne("")
        if failed.any():
            log.warning("crimson: %d/%d samples not scored (NaN): %s", int(failed.sum()), len(out),
                        out.loc[failed, "crimson_reason"].str.split(":").str[0].value_counts().to_dict())
        out.attrs["models"] = {"crimson": model_prov, "backend": s.backend, "include_guidelines": uses_guidelines(s),
                               "patient_context": s.patient_context}
        return out


METRIC = CRIMSON()

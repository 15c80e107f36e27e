"""RadEval's LLM-judge metrics through the ``radeval`` package (2.2.1; env ``radeval``), on any
OpenAI-compatible chat-completions API.

``mammo_green``
    MammoGREEN (``radeval.metrics.green_score.mammo_green.MammoGREEN``): the judge counts matched
    findings and six kinds of clinically significant error (false finding, missing finding,
    mischaracterization, location / laterality, BI-RADS, breast density) in a mammography
    report; score = matched / (matched + Σ significant errors), 0 when both are 0
    (``mammo_green_score``). Per sample the score and the counts; the leaf is the mean, as
    RadEval reports it.
``radfact_ct``
    RadFact-CT (``radeval.metrics.radfact_ct.radfact_ct.RadFactCT``, a port of microsoft/RadFact):
    both reports split into phrases, each phrase checked for entailment by the other report;
    per sample logical precision (entailed candidate phrases / candidate phrases), recall, F1
    (NaN when neither report has a phrase). Leaves as RadEval aggregates them: precision and
    recall are means over the samples where they are defined, F1 is the harmonic mean of those
    two means (a corpus leaf). RadEval prints them ×100; radrank keeps 0–1.

The package's classes do the work — prompts, request payloads, response parsing (with their
retries on unparseable answers), score formulas — and radrank adds:

* the endpoint: neither class takes a base URL, so after construction their OpenAI clients are
  replaced by ours with ``base_url`` (None: the client's default), ``request_timeout`` and
  ``max_retries``; any OpenAI-compatible server works (a local vLLM, Azure-style gateways,
  Gemini's OpenAI-compatible endpoint);
* the key: read from the environment variable named by ``api_key_env``, never from the config;
  it is not logged, not recorded in provenance and scrubbed from error texts;
* failures: a sample whose requests fail or whose answer never parses gets NaN with the reason
  in ``<metric>_reason``; the job goes on — unless every request failed (a wrong endpoint, model
  or key), which fails the job. Each distinct (reference, hypothesis) pair is judged once;
  ``concurrency`` requests run at a time;
* radeval 2.2.1 work-arounds: ``mammo_green.py`` is loaded from its file without running
  ``radeval/metrics/green_score/__init__.py``, which imports GREEN's torch / datasets stack and
  switches multiprocessing to "spawn"; ``import radeval``'s NLTK download is skipped (see
  :mod:`radrank.metrics.radeval_extras`); the radeval 2.2.1 wheel (and sdist) lack RadFact-CT's
  prompt files (``radeval/metrics/radfact_ct/prompts/ct/*``), so ``radfact_ct`` needs
  ``prompts_dir``: a directory with those six files from the RadEval repository of the same
  version (missing files fail at once with MissingWeightsError naming the key).

The radeval environment needs the ``openai`` package (radeval's ``api`` extra) for these two.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
from pathlib import Path

import numpy as np

from radrank.errors import ConfigError, MissingWeightsError
from radrank.metrics.base import Leaf, MetricSpec, Resources, mean_leaf
from radrank.metrics.radeval_extras import _import

log = logging.getLogger("radrank")

PACKAGES = ("radeval", "openai", "pydantic", "pyyaml")
API_SETTINGS = {
    "model": "gpt-4o-mini",  # RadEval's adapters' default judge
    "base_url": None,  # an OpenAI-compatible endpoint (None: the OpenAI client's default)
    "api_key_env": "OPENAI_API_KEY",  # the environment variable holding the key
    "temperature": 0.0,
    "concurrency": 8,  # requests in flight
    "request_timeout": 120,  # seconds per request
    "max_retries": 2,  # client retries per request (radeval retries rate limits and timeouts itself)
}
ATTEMPTS = 3  # MammoGREEN's _evaluate_one_async: 1 + max_retries=2 tries per sample

# --- mammo_green -------------------------------------------------------------------------------------------

MAMMO_ERRORS = ("false_finding", "missing_finding", "mischaracterization", "wrong_location_laterality",
                "incorrect_birads", "incorrect_breast_density")  # MammoGREEN's SIGNIFICANT_ERROR_KEYS
MAMMO_NUMBERS = (("mammo_green", "mammo_green_matched_findings")
                 + tuple(f"mammo_green_{k}" for k in MAMMO_ERRORS) + ("mammo_green_insignificant_errors",))

MAMMO_GREEN = MetricSpec(
    name="mammo_green",
    description="MammoGREEN per report (LLM judge of matched findings and six significant error kinds in "
                "mammography reports; radeval package, OpenAI-compatible API), mean over reports",
    env="radeval",
    columns=MAMMO_NUMBERS + ("mammo_green_reason",),
    leaves=(mean_leaf("mammo_green", "MammoGREEN"),),
    resources=Resources(mem_mb=2000, runtime_min=240, threads=2, gpu=0),
    model="gpt-4o-mini",
    settings={**API_SETTINGS, "max_output_tokens": 8192},
    packages=PACKAGES,
)

# --- radfact_ct ---------------------------------------------------------------------------------------------

RADFACT_PROMPT_FILES = ("report_to_phrases_system.txt", "report_to_phrases_examples.json",
                        "negative_filtering_system.txt", "negative_filtering_examples.json",
                        "nli_system.txt", "nli_examples.json")
RADFACT_STATS = ("radfact_ct_p0", "radfact_ct_p_n", "radfact_ct_r0", "radfact_ct_r_n")


def _radfact_f1(totals):
    totals = np.asarray(totals, dtype="float64")
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(totals[..., 1] > 0, totals[..., 0] / totals[..., 1], np.nan)
        r = np.where(totals[..., 3] > 0, totals[..., 2] / totals[..., 3], np.nan)
        return np.where(p + r > 0, 2 * p * r / (p + r), np.where(np.isnan(p + r), np.nan, 0.0))


RADFACT_CT = MetricSpec(
    name="radfact_ct",
    description="RadFact-CT logical precision / recall / F1 (phrases of each report entailed by the other, "
                "LLM judge; radeval package, OpenAI-compatible API)",
    env="radeval",
    columns=("radfact_ct_precision", "radfact_ct_recall", "radfact_ct_f1", "radfact_ct_hyp_phrases",
             "radfact_ct_ref_phrases", "radfact_ct_hyp_entailed", "radfact_ct_ref_entailed") + RADFACT_STATS
    + ("radfact_ct_reason",),
    leaves=(mean_leaf("radfact_ct_precision", "RadFact-CT precision"),
            mean_leaf("radfact_ct_recall", "RadFact-CT recall"),
            Leaf(name="radfact_ct_f1", label="RadFact-CT F1", stats=RADFACT_STATS, corpus=_radfact_f1)),
    resources=Resources(mem_mb=2000, runtime_min=480, threads=2, gpu=0),
    model="gpt-4o-mini",
    settings={**API_SETTINGS, "filter_negatives": False,
              "prompts_dir": None},  # RadFact-CT's prompt files (None: the package's, absent in radeval 2.2.1)
    packages=PACKAGES,
)

SPECS = {"mammo_green": MAMMO_GREEN, "radfact_ct": RADFACT_CT}

# --- shared ----------------------------------------------------------------------------------------------


def api_key(metric: str, settings: dict) -> str:
    name = str(settings.get("api_key_env") or "OPENAI_API_KEY")
    key = os.environ.get(name)
    if not key:
        raise ConfigError(f"metric {metric!r}: the environment variable {name} (metric_settings.{metric}.api_key_env) "
                          f"is not set; put the API key there")
    return key


def scrub(text, secret: str) -> str:
    text = str(text)
    return text.replace(secret, "***") if secret else text


def _reason(e: BaseException, key: str) -> str:
    return f"api_error: {type(e).__name__}: {scrub(e, key)[:300]}"


def _clients(settings: dict, key: str):
    from openai import AsyncOpenAI

    return AsyncOpenAI(api_key=key, base_url=settings.get("base_url") or None,
                       timeout=float(settings.get("request_timeout") or 120),
                       max_retries=int(settings.get("max_retries") or 0))


def _sync_client(settings: dict, key: str):
    from openai import OpenAI

    return OpenAI(api_key=key, base_url=settings.get("base_url") or None,
                  timeout=float(settings.get("request_timeout") or 120),
                  max_retries=int(settings.get("max_retries") or 0))


def _distinct_pairs(pairs):
    refs = [str(t) for t in pairs["reference"].tolist()]
    hyps = [str(t) for t in pairs["hypothesis"].tolist()]
    keys = list(zip(refs, hyps))
    return keys, list(dict.fromkeys(keys))


def _load_file_module(name: str):
    """Import radeval submodule ``name`` (``a.b.c.d``) from its file, without running the
    ``__init__`` of its package ``a.b.c`` (relative imports still resolve)."""
    import importlib.util
    import sys

    if name in sys.modules:
        return sys.modules[name]
    package, _, leaf = name.rpartition(".")
    grandparent, _, sub = package.rpartition(".")
    base = _import(grandparent)
    path = Path(base.__path__[0]) / sub / f"{leaf}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _provenance(settings: dict) -> dict:
    return {"judge": {"id": settings.get("model"), "api": "openai-compatible",
                      "base_url": settings.get("base_url") or None, "api_key_env": settings.get("api_key_env")}}


# --- mammo_green ---------------------------------------------------------------------------------------------


def _score_mammo_green(pairs, s):
    import pandas as pd

    key = api_key("mammo_green", s)
    mod = _load_file_module("radeval.metrics.green_score.mammo_green")
    scorer = mod.MammoGREEN(model_name=str(s["model"]), provider="openai", openai_api_key=key,
                            temperature=float(s["temperature"]), max_output_tokens=int(s["max_output_tokens"]),
                            max_concurrent=int(s["concurrency"]))
    scorer._openai_client = _sync_client(s, key)
    keys, distinct = _distinct_pairs(pairs)
    results: dict = {}

    async def judge(pair):
        # The package's _evaluate_one_async (build, call, parse with its schema check; 3 tries),
        # step by step so that the reason of a failure is kept.
        ref, hyp = pair
        request = scorer._build_request(ref, hyp)
        reason = ""
        for _ in range(ATTEMPTS):
            try:
                raw = await scorer._chat_completion_async(request)
            except Exception as e:
                reason = _reason(e, key)
                continue
            try:
                results[pair] = (scorer._parse_response(raw), "")
                return
            except Exception as e:
                reason = f"unparsed: {type(e).__name__}: {scrub(e, key)[:300]}"
        results[pair] = (None, reason)

    async def main():
        scorer._openai_async_client = _clients(s, key)
        try:
            sem = asyncio.Semaphore(max(1, int(s["concurrency"])))

            async def one(pair):
                async with sem:
                    await judge(pair)

            await asyncio.gather(*(one(p) for p in distinct))
        finally:
            await scorer._openai_async_client.close()

    asyncio.run(main())
    _fail_if_endpoint_dead("mammo_green", [results[p][1] for p in distinct])
    rows = []
    for pair in keys:
        data, reason = results[pair]
        row = {c: np.nan for c in MAMMO_NUMBERS}
        if data is not None:
            mg = mod.MammoGreenOutput(**data)  # validated counts, as the package's _aggregate uses them
            errors = mg.significant_errors
            row.update({"mammo_green": mod.mammo_green_score(mg.matched_findings, errors),
                        "mammo_green_matched_findings": mg.matched_findings,
                        "mammo_green_insignificant_errors": mg.insignificant_errors,
                        **{f"mammo_green_{k}": errors[k] for k in MAMMO_ERRORS}})
        row["mammo_green_reason"] = reason
        rows.append(row)
    out = pd.DataFrame(rows, columns=list(MAMMO_GREEN.columns))
    for c in MAMMO_NUMBERS:
        out[c] = out[c].astype("float64")
    out.insert(0, "sample_id", pairs["sample_id"].to_numpy())
    _log_failures("mammo_green", out["mammo_green_reason"])
    out.attrs["models"] = _provenance(s)
    return out


def _fail_if_endpoint_dead(metric: str, reasons: list) -> None:
    """Every request failed: a wrong endpoint, model name or key, not bad answers — fail the job
    rather than write a column of NaN."""
    if reasons and all(r.startswith("api_error") for r in reasons):
        raise RuntimeError(f"metric {metric!r}: all {len(reasons)} API requests failed, e.g. {reasons[0]}; check "
                           f"metric_settings.{metric}.base_url, .model and the key in .api_key_env")


def _log_failures(metric: str, reasons) -> None:
    failed = reasons.ne("")
    if failed.any():
        log.warning("%s: %d/%d samples not scored (NaN), e.g. %s", metric, int(failed.sum()), len(reasons),
                    reasons[failed].iloc[0])


# --- radfact_ct ----------------------------------------------------------------------------------------------


def radfact_prompts_dir(module, settings: dict) -> Path:
    configured = settings.get("prompts_dir")
    directory = Path(os.path.expanduser(str(configured))) if configured else Path(module._PROMPTS_DIR)
    needed = RADFACT_PROMPT_FILES if settings.get("filter_negatives") else tuple(
        f for f in RADFACT_PROMPT_FILES if not f.startswith("negative_filtering"))
    missing = [f for f in needed if not (directory / f).is_file()]
    if missing:
        raise MissingWeightsError(
            f"metric 'radfact_ct': RadFact-CT's prompt files are not available in {directory} (missing "
            f"{', '.join(missing)}; the radeval 2.2.1 distribution does not ship them). Point config "
            f"metric_settings.radfact_ct.prompts_dir at a directory holding {', '.join(RADFACT_PROMPT_FILES)} "
            f"(radeval/metrics/radfact_ct/prompts/ct in the RadEval repository of the installed version).")
    return directory


def _score_radfact_ct(pairs, s):
    key = api_key("radfact_ct", s)
    mod = _import("radeval.metrics.radfact_ct.radfact_ct")
    directory = radfact_prompts_dir(mod, s)
    package_dir = mod._PROMPTS_DIR
    mod._PROMPTS_DIR = directory  # read by the package's prompt loaders at call time; restored below
    try:
        return _radfact_ct(pairs, s, mod, key, directory)
    finally:
        mod._PROMPTS_DIR = package_dir


def _radfact_ct(pairs, s, mod, key, directory):
    import pandas as pd

    scorer = mod.RadFactCT(model_name=str(s["model"]), openai_api_key=key, temperature=float(s["temperature"]),
                           filter_negatives=bool(s["filter_negatives"]), max_concurrent=int(s["concurrency"]))
    scorer.client = scorer._openai_client = _sync_client(s, key)
    keys, distinct = _distinct_pairs(pairs)
    results: dict = {}

    async def main():
        aclient = _clients(s, key)
        sem = asyncio.Semaphore(max(1, int(s["concurrency"])))

        async def one(pair):
            ref, hyp = pair
            async with sem:
                try:
                    results[pair] = (await scorer.score_pair_async(aclient, hyp, ref), "")
                except Exception as e:
                    results[pair] = (None, _reason(e, key))

        try:
            await asyncio.gather(*(one(p) for p in distinct))
        finally:
            await aclient.close()

    asyncio.run(main())
    _fail_if_endpoint_dead("radfact_ct", [results[p][1] for p in distinct])
    rows = []
    for pair in keys:
        r, reason = results[pair]
        row = {c: np.nan for c in RADFACT_CT.columns[:7]}
        if r is not None:
            row.update({
                "radfact_ct_precision": r["logical_precision"], "radfact_ct_recall": r["logical_recall"],
                "radfact_ct_f1": r["logical_f1"], "radfact_ct_hyp_phrases": len(r["hyp_phrases"]),
                "radfact_ct_ref_phrases": len(r["ref_phrases"]),
                "radfact_ct_hyp_entailed": sum(e["status"] == "entailment" for e in r["hyp_evidenced"]),
                "radfact_ct_ref_entailed": sum(e["status"] == "entailment" for e in r["ref_evidenced"])})
            if not r["hyp_phrases"] and not r["ref_phrases"]:
                reason = "no_phrases"
        p, rc = row["radfact_ct_precision"], row["radfact_ct_recall"]
        row.update({"radfact_ct_p0": 0.0 if _nan(p) else p, "radfact_ct_p_n": 0.0 if _nan(p) else 1.0,
                    "radfact_ct_r0": 0.0 if _nan(rc) else rc, "radfact_ct_r_n": 0.0 if _nan(rc) else 1.0,
                    "radfact_ct_reason": reason})
        rows.append(row)
    out = pd.DataFrame(rows, columns=list(RADFACT_CT.columns))
    for c in RADFACT_CT.columns[:-1]:
        out[c] = out[c].astype("float64")
    out.insert(0, "sample_id", pairs["sample_id"].to_numpy())
    _log_failures("radfact_ct", out["radfact_ct_reason"][out["radfact_ct_reason"] != "no_phrases"])
    out.attrs["models"] = {**_provenance(s), "prompts_dir": str(directory),
                           "filter_negatives": bool(s["filter_negatives"])}
    return out


def _nan(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


_SCORERS = {"mammo_green": _score_mammo_green, "radfact_ct": _score_radfact_ct}


def score(name, pairs, settings, inputs):
    s = {**SPECS[name].settings, **(settings or {})}
    return _SCORERS[name](pairs, s)

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
  version (checked when the workflow loads; a missing file fails with MissingWeightsError
  naming the key).

Each metric is one object (:data:`MAMMO_GREEN`, :data:`RADFACT_CT`) with typed settings: the judge
model, endpoint, temperature and prompts change scores; the key's variable, concurrency, timeout
and retries of requests do not (they are not in the identity). Neither needs a GPU.

The radeval environment needs the ``openai`` package (radeval's ``api`` extra) for these two.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from radrank.judge_failures import failure_columns, failure_kind
from radrank.metrics.base import Leaf, Resources, judge_failures, mean_leaf
from radrank.metrics.radeval_extras import RadEvalMetric, _import
from radrank.runtime import WeightRef, api_key, scrub
from radrank.settings import Settings, scored, speed

log = logging.getLogger("radrank")

PACKAGES = ("radeval", "openai", "pydantic", "pyyaml")
ATTEMPTS = 3  # MammoGREEN's _evaluate_one_async: 1 + max_retries=2 tries per sample


@dataclass(frozen=True)
class APISettings(Settings):
    """The judge and its endpoint (a base: each metric adds its own fields)."""

    model: str = scored("gpt-4o-mini", "the judge model as the endpoint names it (RadEval's adapters' default)")
    base_url: str | None = scored(None, "an OpenAI-compatible endpoint (null: the OpenAI client's default); which "
                                        "server answers decides the scores", secret_url=True)
    temperature: float = scored(0.0, "the judge's sampling temperature", minimum=0.0)
    api_key_env: str = speed("OPENAI_API_KEY", "the environment variable holding the API key (the key itself is "
                                               "never in the config); not in the identity")
    concurrency: int = speed(8, "requests in flight", minimum=1)
    request_timeout: float = speed(120.0, "seconds per request", minimum=0.1)
    max_retries: int = speed(2, "client retries per request (radeval retries rate limits and timeouts itself)",
                             minimum=0)


class RadEvalAPIMetric(RadEvalMetric):
    """What the two judges share: the key, the clients, failure handling, provenance."""

    packages = PACKAGES

    def gpus(self, s) -> int:
        return 0

    def api_key(self, s) -> str:
        return api_key(self.owner(), self.key("api_key_env"), s.api_key_env)

    def reason(self, e: BaseException, key: str) -> str:
        return f"api_error: {type(e).__name__}: {scrub(e, key)[:300]}"

    def fail_if_endpoint_dead(self, reasons: list) -> None:
        """Every request failed: a wrong endpoint, model name or key, not bad answers — fail the job
        rather than write a column of NaN."""
        if reasons and all(r.startswith("api_error") for r in reasons):
            raise RuntimeError(f"metric {self.name!r}: all {len(reasons)} API requests failed, e.g. {reasons[0]}; "
                               f"check {self.key('base_url')}, .model and the key in .api_key_env")

    def log_failures(self, reasons) -> None:
        failed = reasons.ne("") & ~reasons.str.startswith("no_")  # "no_*phrases": undefined, not failed
        if failed.any():
            log.warning("%s: %d/%d samples not scored (NaN), e.g. %s", self.name, int(failed.sum()), len(reasons),
                        reasons[failed].iloc[0])

    def judge_all(self, pairs, judge, s: APISettings, key: str, on_client=None) -> list:
        """(value, reason, attempts) per pair, in order: ``await judge((reference, hypothesis), client)`` once per
        distinct pair, ``s.concurrency`` at a time on one async client (``on_client(client)`` first, for a scorer
        that holds its client); every request failing fails the job."""
        keys = list(zip(map(str, pairs["reference"]), map(str, pairs["hypothesis"])))
        distinct = list(dict.fromkeys(keys))
        results: dict = {}

        async def main():
            client = _async_client(s, key)
            if on_client is not None:
                on_client(client)
            sem = asyncio.Semaphore(s.concurrency)

            async def one(pair):
                async with sem:
                    results[pair] = await judge(pair, client)

            try:
                await asyncio.gather(*(one(p) for p in distinct))
            finally:
                await client.close()

        asyncio.run(main())
        self.fail_if_endpoint_dead([results[p][1] for p in distinct])
        return [results[pair] for pair in keys]

    def provenance(self, s) -> dict:
        return {"judge": {"id": s.model, "api": "openai-compatible",
                          "base_url": scrub(s.base_url) if s.base_url else None, "api_key_env": s.api_key_env}}

    def frame(self, pairs, rows: list):
        """Rows (one per pair) as the metric's frame: sample_id first, every column but the reason float64."""
        import pandas as pd

        kind_column, attempts_column = self.failures.kind_column, self.failures.attempts_column
        out = pd.DataFrame(rows, columns=list(self.columns))
        for c in self.columns:
            if c not in (self.reason_column, kind_column, attempts_column):
                out[c] = out[c].astype("float64")
        out[attempts_column] = out[attempts_column].astype("int64")
        # "no_*phrases": a fraction undefined for the pair, not a failed answer
        out[kind_column] = ["" if r.startswith("no_") else failure_kind(r, None) for r in out[self.reason_column]]
        out.insert(0, "sample_id", pairs["sample_id"].to_numpy())
        self.log_failures(out[self.reason_column])
        return out


def _async_client(s: APISettings, key: str):
    from openai import AsyncOpenAI

    return AsyncOpenAI(api_key=key, base_url=s.base_url, timeout=s.request_timeout, max_retries=s.max_retries)


def _sync_client(s: APISettings, key: str):
    from openai import OpenAI

    return OpenAI(api_key=key, base_url=s.base_url, timeout=s.request_timeout, max_retries=s.max_retries)


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


# --- mammo_green -------------------------------------------------------------------------------------------

MAMMO_ERRORS = ("false_finding", "missing_finding", "mischaracterization", "wrong_location_laterality",
                "incorrect_birads", "incorrect_breast_density")  # MammoGREEN's SIGNIFICANT_ERROR_KEYS
MAMMO_NUMBERS = (("mammo_green", "mammo_green_matched_findings")
                 + tuple(f"mammo_green_{k}" for k in MAMMO_ERRORS) + ("mammo_green_insignificant_errors",))


@dataclass(frozen=True)
class MammoGREENSettings(APISettings):
    max_output_tokens: int = scored(8192, "the judge's answer budget (max_completion_tokens)", minimum=1)


class MammoGREEN(RadEvalAPIMetric):
    name = "mammo_green"
    description = ("MammoGREEN per report (LLM judge of matched findings and six significant error kinds in "
                   "mammography reports; radeval package, OpenAI-compatible API), mean over reports")
    columns = MAMMO_NUMBERS + ("mammo_green_reason", *failure_columns("mammo_green"))
    nan_columns = MAMMO_NUMBERS
    reason_column = "mammo_green_reason"
    version = "2"  # 2: the per-pair failure kind and attempts columns
    failures = judge_failures("mammo_green", "MammoGREEN", leaf="mammo_green", worst=0.0, best=1.0)
    leaves = (mean_leaf("mammo_green", "MammoGREEN"),)
    Settings = MammoGREENSettings
    default_resources = Resources(mem_mb=2000, runtime_min=240, threads=2, gpu=0)

    def score(self, pairs, s, inputs, runtime):
        key = self.api_key(s)
        mod = _load_file_module("radeval.metrics.green_score.mammo_green")
        scorer = mod.MammoGREEN(model_name=s.model, provider="openai", openai_api_key=key,
                                temperature=s.temperature, max_output_tokens=s.max_output_tokens,
                                max_concurrent=s.concurrency)
        scorer._openai_client = _sync_client(s, key)

        async def judge(pair, client):
            # The package's _evaluate_one_async (build, call, parse with its schema check; 3 tries),
            # step by step so that the reason of a failure is kept.
            ref, hyp = pair
            request = scorer._build_request(ref, hyp)
            reason = ""
            for attempt in range(1, ATTEMPTS + 1):
                try:
                    raw = await scorer._chat_completion_async(request)
                except Exception as e:
                    reason = self.reason(e, key)
                    continue
                try:
                    return scorer._parse_response(raw), "", attempt
                except Exception as e:
                    reason = f"unparsed: {type(e).__name__}: {scrub(e, key)[:300]}"
            return None, reason, ATTEMPTS

        rows = []
        for data, reason, attempts in self.judge_all(pairs, judge, s, key,
                                                     on_client=lambda c: setattr(scorer, "_openai_async_client", c)):
            row = dict.fromkeys(self.nan_columns, np.nan)
            row["mammo_green_attempts"] = attempts
            if data is not None:
                mg = mod.MammoGreenOutput(**data)  # validated counts, as the package's _aggregate uses them
                errors = mg.significant_errors
                row.update({"mammo_green": mod.mammo_green_score(mg.matched_findings, errors),
                            "mammo_green_matched_findings": mg.matched_findings,
                            "mammo_green_insignificant_errors": mg.insignificant_errors,
                            **{f"mammo_green_{k}": errors[k] for k in MAMMO_ERRORS}})
            row["mammo_green_reason"] = reason
            rows.append(row)
        out = self.frame(pairs, rows)
        out.attrs["models"] = self.provenance(s)
        return out


MAMMO_GREEN = MammoGREEN()

# --- radfact_ct ---------------------------------------------------------------------------------------------

RADFACT_PROMPT_FILES = ("report_to_phrases_system.txt", "report_to_phrases_examples.json",
                        "negative_filtering_system.txt", "negative_filtering_examples.json",
                        "nli_system.txt", "nli_examples.json")
RADFACT_STATS = ("radfact_ct_p0", "radfact_ct_p_n", "radfact_ct_r0", "radfact_ct_r_n")
RADFACT_VALUES = ("radfact_ct_precision", "radfact_ct_recall", "radfact_ct_f1", "radfact_ct_hyp_phrases",
                  "radfact_ct_ref_phrases", "radfact_ct_hyp_entailed", "radfact_ct_ref_entailed")


def _radfact_f1(totals):
    totals = np.asarray(totals, dtype="float64")
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(totals[..., 1] > 0, totals[..., 0] / totals[..., 1], np.nan)
        r = np.where(totals[..., 3] > 0, totals[..., 2] / totals[..., 3], np.nan)
        return np.where(p + r > 0, 2 * p * r / (p + r), np.where(np.isnan(p + r), np.nan, 0.0))


def radfact_prompts_missing(directory, needed: tuple) -> str | None:
    """Why ``directory`` cannot give RadFact-CT's prompt files ``needed``, or None (paths only)."""
    missing = [f for f in needed if not (Path(directory) / f).is_file()]
    if missing:
        return f"{directory} lacks {', '.join(missing)}; the radeval 2.2.1 distribution does not ship them"
    return None


@dataclass(frozen=True)
class RadFactCTSettings(APISettings):
    filter_negatives: bool = scored(False, "drop phrases about absent or normal findings before the NLI step")
    prompts_dir: str | None = scored(None, "a directory with RadFact-CT's six prompt files (null: the package's "
                                           "own, absent from the radeval 2.2.1 distribution)")


class RadFactCT(RadEvalAPIMetric):
    name = "radfact_ct"
    description = ("RadFact-CT logical precision / recall / F1 (phrases of each report entailed by the other, "
                   "LLM judge; radeval package, OpenAI-compatible API)")
    columns = RADFACT_VALUES + RADFACT_STATS + ("radfact_ct_reason", *failure_columns("radfact_ct"))
    nan_columns = RADFACT_VALUES
    reason_column = "radfact_ct_reason"
    version = "2"  # 2: the per-pair failure kind and attempts columns
    failures = judge_failures("radfact_ct", "RadFact-CT", leaf="radfact_ct_precision", worst=0.0, best=1.0)
    leaves = (mean_leaf("radfact_ct_precision", "RadFact-CT precision"),
              mean_leaf("radfact_ct_recall", "RadFact-CT recall"),
              Leaf(name="radfact_ct_f1", label="RadFact-CT F1", stats=RADFACT_STATS, corpus=_radfact_f1))
    Settings = RadFactCTSettings
    default_resources = Resources(mem_mb=2000, runtime_min=480, threads=2, gpu=0)
    PROMPTS_HOW = (f"Point config metric_settings.radfact_ct.prompts_dir at a directory holding "
                   f"{', '.join(RADFACT_PROMPT_FILES)} (radeval/metrics/radfact_ct/prompts/ct in the RadEval "
                   f"repository of the installed version).")

    def weights(self, s):
        # prompts_dir null: the package's own folder, which only the job's environment knows (in_job).
        needed = RADFACT_PROMPT_FILES if s.filter_negatives else tuple(
            f for f in RADFACT_PROMPT_FILES if not f.startswith("negative_filtering"))
        return (WeightRef(self.owner(), self.key("prompts_dir"), s.prompts_dir, need="resource",
                          check=functools.partial(radfact_prompts_missing, needed=needed), how=self.PROMPTS_HOW),)

    def in_job(self, ref, s):
        if ref.ref is not None:
            return ref
        return dataclasses.replace(ref, ref=str(_import("radeval.metrics.radfact_ct.radfact_ct")._PROMPTS_DIR))

    def score(self, pairs, s, inputs, runtime):
        from radrank.runtime.weights import file_sha256

        key = self.api_key(s)
        resolved = self.resolve_all(s, runtime)["prompts_dir"]
        directory = resolved.path
        mod = _import("radeval.metrics.radfact_ct.radfact_ct")
        package_dir = mod._PROMPTS_DIR
        mod._PROMPTS_DIR = directory  # read by the package's prompt loaders at call time; restored below
        try:
            out = self._score(pairs, s, mod, key)
        finally:
            mod._PROMPTS_DIR = package_dir
        out.attrs["models"] = {**self.provenance(s), "prompts_dir": str(directory),
                               "prompts_sha256": {f: file_sha256(directory / f) for f in RADFACT_PROMPT_FILES
                                                  if (directory / f).is_file()},
                               "filter_negatives": s.filter_negatives}
        return out

    def _score(self, pairs, s, mod, key):
        scorer = mod.RadFactCT(model_name=s.model, openai_api_key=key, temperature=s.temperature,
                               filter_negatives=s.filter_negatives, max_concurrent=s.concurrency)
        scorer.client = scorer._openai_client = _sync_client(s, key)

        async def judge(pair, client):
            ref, hyp = pair
            try:  # one request: the package retries rate limits and timeouts itself
                return await scorer.score_pair_async(client, hyp, ref), "", 1
            except Exception as e:
                return None, self.reason(e, key), 1

        rows = []
        for r, reason, attempts in self.judge_all(pairs, judge, s, key):
            row = dict.fromkeys(self.nan_columns, np.nan)
            row["radfact_ct_attempts"] = attempts
            if r is not None:
                row.update({
                    "radfact_ct_precision": r["logical_precision"], "radfact_ct_recall": r["logical_recall"],
                    "radfact_ct_f1": r["logical_f1"], "radfact_ct_hyp_phrases": len(r["hyp_phrases"]),
                    "radfact_ct_ref_phrases": len(r["ref_phrases"]),
                    "radfact_ct_hyp_entailed": sum(e["status"] == "entailment" for e in r["hyp_evidenced"]),
                    "radfact_ct_ref_entailed": sum(e["status"] == "entailment" for e in r["ref_evidenced"])})
            p, rc = row["radfact_ct_precision"], row["radfact_ct_recall"]
            if r is not None and (_nan(p) or _nan(rc)):  # a side without phrases: its fraction is undefined
                reason = ("no_phrases" if _nan(p) and _nan(rc) else
                          "no_hypothesis_phrases" if _nan(p) else "no_reference_phrases")
            row.update({"radfact_ct_p0": 0.0 if _nan(p) else p, "radfact_ct_p_n": 0.0 if _nan(p) else 1.0,
                        "radfact_ct_r0": 0.0 if _nan(rc) else rc, "radfact_ct_r_n": 0.0 if _nan(rc) else 1.0,
                        "radfact_ct_reason": reason})
            rows.append(row)
        return self.frame(pairs, rows)


def _nan(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


RADFACT_CT = RadFactCT()

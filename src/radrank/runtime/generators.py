"""The generators every LLM judge runs on (GREEN, the MRScore rubric judge, CRIMSON), and their vLLM settings.

A judge needs from a model: many prompts in, one answer each, the same answer
every time, as fast as the device allows. :func:`radrank.engine.judge` (the judge
loop: response cache, parsing, one retry) drives any of the generators here.

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
* **Retry parameters.** Each generator says what the judge loop's one retry of
  an unparsable answer asks for (:meth:`LocalGenerator.retry_params`): twice the
  token budget (up to ``max_total_tokens``) when the answer was cut at the
  limit, else sampling at ``retry_temperature`` with a fixed seed.

Three backends: :class:`LocalGenerator` (``hf``: a transformers causal LM on
this machine), :class:`VLLMGenerator` (``vllm``: the same model directory served
by vLLM's offline engine — continuous batching, paged attention, prefix caching,
CUDA graphs, tensor parallelism — on the same token ids, see its docstring) and
:class:`OpenAIGenerator` (an OpenAI-compatible chat-completions endpoint; the key
is read from an environment variable and never written anywhere). Each has a
``backend`` the response cache key includes, so answers of different backends
never mix. :class:`VLLMSettings` are vLLM's engine settings, the one definition
the judges' settings (:class:`radrank.metrics.judge.JudgeSettings`) and the
generation backbones' (:mod:`radrank.backbones`) both build on. torch,
transformers and vllm are imported inside the functions, so importing this
module is cheap.
"""

from __future__ import annotations

import copy
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Literal

from radrank.devices import device_of, dtype_of
from radrank.errors import ConfigError
from radrank.runtime import WeightRef, allows_remote_code, api_key
from radrank.runtime.loaders import (generation_config_of, load_causal_lm, start_vllm, vllm_args, vllm_on_cpu,
                                     vllm_version)
from radrank.settings import Settings, scored, speed

log = logging.getLogger("radrank")

CPU_MAX_BATCH_TOKENS = 1 << 14  # padded (prompt + answer) tokens per batch on the CPU


@dataclass
class Generation:
    """One answer: its text, how many tokens it has, whether it ended by itself."""

    text: str
    new_tokens: int = 0
    finished: bool = True  # False: cut at the token limit
    error: str | None = None  # the request failed (endpoint error); never cached
    refused: str | None = None  # the endpoint flagged the answer as a refusal (why: its finish reason or message)



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

    Credentials in ``api_base`` (``https://user:pw@host/v1?token=…``) are used
    and never shown: the query goes with every request as written, a user name
    and password are sent as HTTP Basic authentication (in place of the Bearer
    key, as the OpenAI client does with such a URL); ``api_base``, ``repr``, the
    identity (cache key, provenance) and every message carry the URL without them
    (:func:`radrank.provenance.redact_url`), and they are masked in every log
    record of the process (:func:`radrank.provenance.protect_url`). Requests go
    through an opener of the generator's own at HTTP debug level 0, so a process
    that turned on urllib's or http.client's request printing (which writes the
    request line and headers to stdout) does not print these.
    """

    kind = "openai"
    backend = "openai"

    def __init__(self, *, model: str, api_base: str, api_key_env: str = "OPENAI_API_KEY",
                 max_new_tokens: int = 512, concurrency: int = 4, timeout: float = 120.0, max_retries: int = 3,
                 backoff: float = 1.0, retry_temperature: float = 0.7, seed: int = 0, metric: str = "judge"):
        import base64
        import urllib.request
        from urllib.parse import unquote, urlsplit, urlunsplit

        from radrank import provenance

        if not model:
            raise ConfigError(f"metric {metric!r}: set metric_settings.{metric}.model to the endpoint's model name")
        if not api_base:
            raise ConfigError(f"metric {metric!r}: set metric_settings.{metric}.api_base")
        provenance.protect_url(api_base)
        try:
            parts = urlsplit(api_base)
        except ValueError as e:
            raise ConfigError(f"metric {metric!r}: metric_settings.{metric}.api_base is not a URL ({e})") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"metric {metric!r}: metric_settings.{metric}.api_base must be an http(s) URL, not "
                              f"{provenance.redact_url(api_base)!r}")
        key = api_key(f"metric {metric!r}", f"metric_settings.{metric}.api_key_env", api_key_env)
        provenance.protect_secret(key)
        self.__secrets = (key, *provenance.url_secrets(api_base))
        userinfo, _, host = parts.netloc.rpartition("@")
        auth = f"Bearer {key}"
        if userinfo:  # to the Authorization header: urllib cannot send a URL's user name and password
            user, _, password = userinfo.partition(":")
            auth = "Basic " + base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode("ascii")
        self.__auth = auth
        # the query stays on the request, after the path: {base path}/chat/completions?{query}
        self.__url = urlunsplit((parts.scheme, host, parts.path.rstrip("/") + "/chat/completions", parts.query, ""))
        self.__opener = urllib.request.build_opener(urllib.request.HTTPHandler(debuglevel=0),
                                                    urllib.request.HTTPSHandler(debuglevel=0))
        self.model = model
        self.api_base = provenance.redact_url(api_base.rstrip("/"))  # what is shown
        self.max_new_tokens = int(max_new_tokens)
        self.concurrency = max(1, int(concurrency))
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.backoff = float(backoff)
        self.retry_temperature = float(retry_temperature)
        self.seed = int(seed)
        # the answers depend on the endpoint, not on the credentials that reach it
        self.identity = {"backend": "openai", "model": model,
                         "api_base": provenance.redact_url(api_base.rstrip("/"), mask=None)}
        self.stats = {"generated": 0, "failed": 0, "seconds": 0.0}

    def __repr__(self):
        return f"OpenAIGenerator(model={self.model!r}, api_base={self.api_base!r})"

    def _mask(self, text: str) -> str:
        from radrank.provenance import redact_text

        return redact_text(text, *self.__secrets)

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
            req = urllib.request.Request(self.__url, data=body, method="POST",
                                         headers={"Content-Type": "application/json", "Authorization": self.__auth})
            try:
                with self.__opener.open(req, timeout=self.timeout) as resp:
                    data = json.loads(resp.read().decode("utf-8"))
                choice = data["choices"][0]
                message = choice.get("message") or {}
                text = message.get("content") or ""
                usage = data.get("usage") or {}
                finish = choice.get("finish_reason")
                # a refusal the endpoint says is one: its own message (structured outputs) or its content filter
                refused = (f"refusal message {str(message['refusal'])[:200]!r}" if message.get("refusal")
                           else "finish_reason content_filter" if finish == "content_filter" else None)
                return Generation(text=text or str(message.get("refusal") or ""),
                                  new_tokens=int(usage.get("completion_tokens") or 0), finished=finish != "length",
                                  refused=refused)
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


# --- vLLM's engine settings (judges and backbones) -------------------------------------------------------


@dataclass(frozen=True)
class VLLMSettings(Settings):
    """vLLM's engine settings: every judge metric's settings include them
    (:class:`radrank.metrics.judge.JudgeSettings`), and so do those of every backbone vLLM can serve (with
    defaults for image prompts)."""

    max_model_len: int | None = scored(None, "vllm: prompt + answer tokens per sequence (null: max_total_tokens "
                                             "+ 1, else the model's); an answer that reaches it is cut", minimum=1)
    gpu_memory_utilization: float = speed(0.9, "vllm: share of each GPU's memory vLLM may take (weights + KV "
                                               "cache)", minimum=0.01, maximum=1.0)
    tensor_parallel_size: int = speed(1, "vllm: GPUs per engine (the SLURM job requests this many)", minimum=1)
    max_num_seqs: int = speed(256, "vllm: sequences decoded together (continuous batching)", minimum=1)
    enforce_eager: Literal["auto"] | bool = speed("auto", "vllm: auto = CUDA graphs and torch.compile on CUDA, "
                                                         "eager on the CPU (fast start)")
    cpu_kv_cache_gb: float = speed(1.0, "vllm CPU build only: KV cache size in GB", minimum=0.01)


@dataclass
class LoadedLocal:
    generator: LocalGenerator
    provenance: dict = field(default_factory=dict)



def load_local_generator(ref: WeightRef, s, runtime, *, tokenizer_loader: Callable | None = None,
                         cuda_dtype: str = "bf16", add_special_tokens: bool = True) -> LoadedLocal:
    """Resolve ``ref``, load the model once per process (``runtime.load``) and wrap it as configured by ``s``.

    ``tokenizer_loader(directory, trust_remote_code)`` overrides how the tokenizer is built (GREEN needs
    upstream's tokenizer options).
    """
    resolved = runtime.resolve(ref)
    allowed = allows_remote_code(ref.ref, s.trust_remote_code)
    device = device_of(s.device)
    dtype = dtype_of(s.dtype, device, cuda_dtype)
    directory = resolved.directory

    def load():
        tokenizer = _load_tokenizer(directory, allowed, tokenizer_loader)
        return load_causal_lm(directory, device=device, dtype=dtype, trust_remote_code=allowed), tokenizer

    lm, tokenizer = runtime.load(("causal-lm", str(directory), device, str(dtype), allowed,
                                  _loader_name(tokenizer_loader)), load)
    identity = resolved.provenance()
    gen = LocalGenerator(
        lm, tokenizer, device=device,
        identity={"model": ref.ref, "revision": identity.get("revision") or identity.get("weights_sha256")},
        batch_size=s.batch_size, max_new_tokens=s.max_new_tokens, max_total_tokens=s.max_total_tokens,
        static_cache=s.static_cache, add_special_tokens=add_special_tokens, retry_temperature=s.retry_temperature,
        seed=s.seed)
    prov = {"model": identity, "device": device, "dtype": gen.identity["dtype"], "static_cache": gen.static,
            "trust_remote_code": allowed, "tokenizer_class": type(tokenizer).__name__}
    log.info("%s: %s on %s (%s), batch size %d, static cache %s", ref.owner, ref.ref, device, gen.identity["dtype"],
             gen.batch_size, gen.static)
    return LoadedLocal(gen, prov)


# --- vLLM -----------------------------------------------------------------------------------------------


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


def vllm_engine_args(directory, s: VLLMSettings, *, cuda_dtype: str = "bf16", max_total_tokens=None,
                     seed: int = 0, dtype_setting="auto") -> dict:
    """Keyword arguments of ``vllm.LLM`` for a model directory and a metric's settings (:class:`VLLMSettings`)."""
    # The hf engine lets a prompt cut to max_total_tokens still get one new token: room for it here too.
    max_len = s.max_model_len or (int(max_total_tokens) + 1 if max_total_tokens else None)
    return vllm_args(directory, dtype=dtype_setting, cuda_dtype=cuda_dtype, seed=seed, max_model_len=max_len,
                     gpu_memory_utilization=s.gpu_memory_utilization, tensor_parallel_size=s.tensor_parallel_size,
                     max_num_seqs=s.max_num_seqs, enforce_eager=s.enforce_eager, cpu_kv_cache_gb=s.cpu_kv_cache_gb)


def load_vllm_generator(ref: WeightRef, s, runtime, *, tokenizer_loader: Callable | None = None,
                        cuda_dtype: str = "bf16", add_special_tokens: bool = True) -> LoadedLocal:
    """Resolve a local judge model and serve it with vLLM, configured by a metric's settings.

    Same resolution, tokenizer and missing-weights error as :func:`load_local_generator`;
    the model's own code never runs under vLLM (trust_remote_code stays off: only
    architectures vLLM implements are served).
    """
    resolved = runtime.resolve(ref)
    directory = resolved.directory
    allowed = allows_remote_code(ref.ref, s.trust_remote_code)
    tokenizer = runtime.load(("tokenizer", str(directory), allowed, _loader_name(tokenizer_loader)),
                             lambda: _load_tokenizer(directory, allowed, tokenizer_loader))
    identity = resolved.provenance()
    args = vllm_engine_args(directory, s, cuda_dtype=cuda_dtype, max_total_tokens=s.max_total_tokens, seed=s.seed,
                            dtype_setting=s.dtype)
    gen_cfg = generation_config_of(directory)
    eos = []
    for v in (gen_cfg.get("eos_token_id"), getattr(tokenizer, "eos_token_id", None)):
        for x in (v if isinstance(v, (list, tuple)) else [v]):
            if x is not None and int(x) not in eos:
                eos.append(int(x))
    llm = start_vllm(args)
    gen = VLLMGenerator(
        llm, tokenizer, eos_token_ids=eos,
        identity={"model": ref.ref, "revision": identity.get("revision") or identity.get("weights_sha256"),
                  "dtype": args["dtype"]},
        max_new_tokens=s.max_new_tokens, max_total_tokens=s.max_total_tokens, add_special_tokens=add_special_tokens,
        repetition_penalty=gen_cfg.get("repetition_penalty"), retry_temperature=s.retry_temperature, seed=s.seed)
    settings_used = {k: args.get(k) for k in ("dtype", "max_model_len", "gpu_memory_utilization",
                                              "tensor_parallel_size", "max_num_seqs", "enforce_eager",
                                              "enable_prefix_caching", "kv_cache_memory_bytes", "seed")
                     if k in args}
    prov = {"model": identity, "backend": "vllm", "vllm": vllm_version(),
            "device": "cpu" if vllm_on_cpu() else "cuda", "dtype": args["dtype"], "vllm_settings": settings_used,
            "trust_remote_code": allowed, "tokenizer_class": type(tokenizer).__name__}
    log.info("%s: %s on vLLM (%s, %s, tensor parallel %d)", ref.owner, ref.ref, prov["vllm"], args["dtype"],
             args["tensor_parallel_size"])
    return LoadedLocal(gen, prov)


def _loader_name(tokenizer_loader: Callable | None) -> str | None:
    """What names a tokenizer loader in the model cache's key (two metrics' loaders may share a name)."""
    if tokenizer_loader is None:
        return None
    return f"{tokenizer_loader.__module__}.{tokenizer_loader.__qualname__}"


def _load_tokenizer(directory, allowed: bool, tokenizer_loader: Callable | None):
    if tokenizer_loader is not None:
        return tokenizer_loader(directory, allowed)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(directory), trust_remote_code=allowed, local_files_only=True,
                                         padding_side="left")


def load_generator(ref: WeightRef, s, runtime, **kw) -> LoadedLocal:
    """The local generator the metric's ``backend`` setting asks for: ``vllm``, else the hf engine."""
    load = load_vllm_generator if s.backend == "vllm" else load_local_generator
    return load(ref, s, runtime, **kw)

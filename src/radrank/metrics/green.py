"""GREEN (Ostmeier et al. 2024) on the shared judge engine: StanfordAIMI/GREEN-radllama2-7b.

The judge model was fine-tuned on one exact prompt and chat template, so both
come from the installed ``radeval`` package (2.2.1, which ships GREEN; the
``green-score`` package cannot be installed on Python 3.11), as does the
parser — nothing of them is rewritten here:

* prompt: ``radeval.metrics.green_score.utils.make_prompt(reference, hypothesis)``
  (each report cut to its first 300 whitespace tokens);
* chat template: the template ``radeval``'s ``GREEN`` sets on its tokenizer, read
  from that module's source (``ast``, without running it) — a human turn with
  the prompt, an empty assistant turn, then the generation prompt;
* tokenizer options as upstream: ``add_eos_token=True``, left padding, the pad
  token = EOS. The model repository's own tokenizer is custom code
  (``CheXagentTokenizer``, a copy of Llama's sentencepiece tokenizer); it runs
  only when the model id is on the ``trust_remote_code`` allow-list (in the workflow:
  the config's top-level list, the only switch), else
  transformers' own Llama tokenizer reads the same files (``legacy`` and BOS as
  the repository's tokenizer_config says, by default as the custom class does:
  legacy sentencepiece behaviour, BOS added; EOS added as upstream asks);
* answer: the generated tokens decoded without special tokens, then
  ``clean_responses``; counts from ``GREEN.parse_error_counts`` and the score
  from ``GREEN.compute_green`` (a ``GREEN`` built without a model):
  matched / (matched + Σ clinically significant errors (a)–(f)), and 0 when
  matched = 0 — upstream's rule exactly; insignificant errors do not count.

Generation (:mod:`radrank.engine`; ``backend: hf``, or ``backend: vllm`` in the vllm env on
the same token ids): greedy, fp16 on CUDA (upstream), at most
``max_total_tokens`` = 2048 tokens of prompt + answer (upstream's
``max_length``), answers of up to ``max_new_tokens`` first; an answer cut at
that limit is asked again with the rest of the 2048-token budget. Batched,
static KV cache and compiled on CUDA, cached per (model, revision, prompt).

One deliberate difference: upstream scores an answer that has none of GREEN's
sections as 0 (every count defaults to 0). Here an answer parses only when it
has all three sections ([Clinically Significant Errors], [Clinically
Insignificant Errors], [Matched Findings]); one that does not is asked again
once, then gets no score (NaN: left out of the mean) with the reason in
``green_unparsed_reason``, and the ``green_unparsed`` leaf counts such pairs.

Columns: ``green`` (score), ``green_matched``, ``green_sig_a`` … ``green_sig_f``
and their sum ``green_significant``, ``green_insig_a`` … ``green_insig_f`` and
``green_insignificant``, ``green_analysis`` (the cleaned answer),
``green_unparsed`` (1.0 / 0.0) and ``green_unparsed_reason``.

tests/envs/judge/test_green.py checks the parser on the five stored completions
of GREEN's (and RadEval's) tests → [0, 1/6, 1/3, 0.5, 0.25], and the whole
metric on a tiny random GREEN-shaped Llama.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import logging
import math
import sys
import types
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from radrank import engine
from radrank.judge_failures import failure_columns
from radrank.metrics.base import BoardColumn, Explanation, Resources, count_leaf, judge_failures, mean_leaf
from radrank.metrics.judge import JudgeMetric, JudgeSettings, cache_for, model_ref
from radrank.runtime import generators
from radrank.settings import scored, speed

log = logging.getLogger("radrank")

CATEGORIES = ("Clinically Significant Errors", "Clinically Insignificant Errors", "Matched Findings")
LETTERS = "abcdef"
GREEN_ERRORS = {  # GREEN's clinically significant error categories (a)–(f), as the report names them
    "a": "false finding", "b": "missing finding", "c": "wrong location", "d": "wrong severity",
    "e": "comparison not in the reference", "f": "comparison omitted",
}
COUNT_COLUMNS = ("green_matched", *(f"green_sig_{c}" for c in LETTERS), "green_significant",
                 *(f"green_insig_{c}" for c in LETTERS), "green_insignificant")
COLUMNS = ("green", *COUNT_COLUMNS, "green_analysis", "green_unparsed", "green_unparsed_reason",
           *failure_columns("green"))


@dataclass(frozen=True)
class GREENSettings(JudgeSettings):
    backend: Literal["hf", "vllm"] = scored("hf", "hf: radrank's transformers engine; vllm: vLLM's offline engine "
                                                  "(environment vllm) on the same token ids")
    model: str = scored("StanfordAIMI/GREEN-radllama2-7b", "the GREEN judge: a Hugging Face id or a local directory")
    max_new_tokens: int = scored(768, "the first answer's token budget; an answer cut there is asked again with "
                                      "the rest of max_total_tokens", minimum=1)
    max_total_tokens: int | None = scored(2048, "prompt + answer tokens at most (upstream's max_length)", minimum=2)
    batch_size: int = speed(128, "hf: rows per generate call on CUDA (halved on out-of-memory; the CPU also caps "
                                 "padded tokens)", minimum=1)


# --- radeval's GREEN pieces -------------------------------------------------------------------------------


class Upstream(types.SimpleNamespace):
    """make_prompt, clean_responses, parser (radeval GREEN without a model), chat_template, version."""


def _import_quietly(name: str):
    """Import ``name`` (a radeval submodule) without running radeval's package __init__ files.

    ``import radeval`` imports every metric and tries an nltk download; the GREEN
    module needs none of that. Missing parent packages are stood in for by empty
    packages (real ``__path__``) while importing, then removed, so a later
    ``import radeval`` works normally. Importing the GREEN module sets
    multiprocessing's start method to "spawn" and silences transformers' logger:
    both are put back.
    """
    import logging as std_logging
    import multiprocessing as mp

    spec = importlib.util.find_spec("radeval")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the radeval package (2.2.1) is not installed in this environment (env 'judge')")
    root = Path(list(spec.submodule_search_locations)[0])
    parts = name.split(".")
    stubs = []
    for i in range(1, len(parts)):
        pkg = ".".join(parts[:i])
        if pkg not in sys.modules:
            mod = types.ModuleType(pkg)
            mod.__path__ = [str(root.joinpath(*parts[1:i]))]
            sys.modules[pkg] = mod
            stubs.append(pkg)
    start_method = mp.get_start_method(allow_none=True)
    tf_logger = std_logging.getLogger("transformers")
    tf_level = tf_logger.level
    try:
        return importlib.import_module(name)
    finally:
        for pkg in stubs:
            sys.modules.pop(pkg, None)
        if mp.get_start_method(allow_none=True) != start_method:
            mp.set_start_method(start_method, force=True)
        tf_logger.setLevel(tf_level)


def _chat_template_from_source(path: str) -> str:
    """The literal string assigned to ``chat_template`` in GREEN.__init__ of radeval's module (not executed)."""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "chat_template"
                                                for t in node.targets):
            try:
                found.append(ast.literal_eval(node.value))
            except ValueError:
                continue
    found = [f for f in found if isinstance(f, str)]
    if not found or len(set(found)) != 1:
        raise RuntimeError(f"could not read GREEN's chat template from {path} "
                           f"({len(set(found))} distinct literal templates found)")
    return found[0]


@lru_cache(maxsize=1)
def upstream() -> Upstream:
    from importlib import metadata

    utils = _import_quietly("radeval.metrics.green_score.utils")
    green = _import_quietly("radeval.metrics.green_score.green")
    parser = green.GREEN(model_name=None, cpu=True)
    if tuple(parser.categories) != CATEGORIES:
        raise RuntimeError(f"radeval's GREEN categories changed: {parser.categories}")
    return Upstream(make_prompt=utils.make_prompt, clean_responses=utils.clean_responses, parser=parser,
                    chat_template=_chat_template_from_source(green.__file__), version=metadata.version("radeval"))


# --- prompts and parsing ------------------------------------------------------------------------------------


def prompt_text(reference: str, hypothesis: str) -> str:
    """upstream's make_prompt (reference first, each cut to 300 words)."""
    return upstream().make_prompt(str(reference), str(hypothesis))


def chat_messages(prompt: str) -> list[dict]:
    """upstream's conversation: the prompt as a human turn, then an empty assistant turn."""
    return [{"from": "human", "value": prompt}, {"from": "gpt", "value": ""}]


def parse(text: str) -> dict:
    """GREEN's counts and score from an answer (raw or already cleaned); ParseError when a section is missing."""
    up = upstream()
    cleaned = up.clean_responses(text)
    p = up.parser
    sig_total, sig = p.parse_error_counts(cleaned, CATEGORIES[0], for_reward=True)
    insig_total, insig = p.parse_error_counts(cleaned, CATEGORIES[1], for_reward=True)
    matched, _ = p.parse_error_counts(cleaned, CATEGORIES[2], for_reward=True)
    missing = [c for c, v in zip(CATEGORIES, (sig_total, insig_total, matched)) if v is None]
    if missing:
        raise engine.ParseError("no " + ", ".join(f"[{c}]" for c in missing) + " section")
    score = p.compute_green(cleaned)
    if score is None:
        raise engine.ParseError("GREEN's parser returned no score")
    return {"score": float(score), "matched": int(matched), "sig": [int(x) for x in sig],
            "insig": [int(x) for x in insig], "analysis": cleaned}


def values_of(v: dict) -> dict:
    """The score columns of a parsed answer (:func:`parse`)."""
    return {"green": v["score"], "green_matched": v["matched"],
            **{f"green_sig_{c}": x for c, x in zip(LETTERS, v["sig"])}, "green_significant": sum(v["sig"]),
            **{f"green_insig_{c}": x for c, x in zip(LETTERS, v["insig"])}, "green_insignificant": sum(v["insig"])}


# --- model ----------------------------------------------------------------------------------------------------


def load_tokenizer(directory, trust_remote_code: bool):
    """The tokenizer with upstream's options and chat template (see the module docstring)."""
    from transformers import AutoTokenizer

    opts = dict(add_eos_token=True, padding_side="left", local_files_only=True)
    try:
        tok = AutoTokenizer.from_pretrained(str(directory), trust_remote_code=trust_remote_code, use_fast=True,
                                            **opts)
    except (ValueError, OSError, ImportError, AttributeError) as e:
        if trust_remote_code:
            raise
        import transformers

        cls = getattr(transformers, "LlamaTokenizerFast", None) or transformers.LlamaTokenizer
        log.info("green: the repository's tokenizer needs its own code (%s); not on the trust_remote_code "
                 "allow-list, so %s reads the same files", str(e).splitlines()[0][:120], cls.__name__)
        import json

        cfg_path = Path(directory) / "tokenizer_config.json"
        cfg = json.loads(cfg_path.read_text(encoding="utf-8")) if cfg_path.is_file() else {}
        # the custom class's defaults: legacy sentencepiece behaviour unless the config says otherwise, BOS added
        legacy = cfg.get("legacy") if cfg.get("legacy") is not None else True
        add_bos = cfg.get("add_bos_token") if cfg.get("add_bos_token") is not None else True
        tok = cls.from_pretrained(str(directory), add_bos_token=add_bos, legacy=legacy, **opts)
    tok.chat_template = upstream().chat_template
    tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    # Upstream also sets clean_up_tokenization_spaces=True, which transformers 5 ignores for BPE tokenizers.
    return tok


def render(tokenizer, prompt: str) -> str:
    return tokenizer.apply_chat_template(chat_messages(prompt), tokenize=False, add_generation_prompt=True)


def load_generator(s: GREENSettings, runtime) -> generators.LoadedLocal:
    """GREEN's judge on the backend of ``s``, with upstream's tokenizer options; fp16 on CUDA as upstream."""
    return generators.load_generator(METRIC.weights(s)[0], s, runtime, tokenizer_loader=load_tokenizer,
                                     cuda_dtype="fp16")


def _text(value) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def _number(value) -> float | None:
    """A finite number, or None (missing, NaN, not a number)."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _count(value) -> str:
    """A count as the report shows it: an integer, or – when there is none."""
    x = _number(value)
    return "–" if x is None else f"{x:.0f}"


class GREEN(JudgeMetric):
    name = "green"
    description = ("GREEN score per report (StanfordAIMI/GREEN-radllama2-7b; radeval's prompt, template and parser), "
                   "mean over parsed reports")
    family = "judge"
    columns = COLUMNS
    leaves = (mean_leaf("green", "GREEN"), count_leaf("green_unparsed", "GREEN unparsed"))
    Settings = GREENSettings
    nan_columns = ("green", *COUNT_COLUMNS)  # an answer without GREEN's three sections, after one retry
    reason_column = "green_unparsed_reason"
    version = "2"  # 2: the per-pair failure kind and attempts columns
    failures = judge_failures("green", "GREEN", leaf="green", worst=0.0, best=1.0)  # matched / (matched + errors)
    packages = ("torch", "transformers", "tokenizers", "radeval", "huggingface-hub", "safetensors")
    default_resources = Resources(mem_mb=32000, runtime_min=240, threads=4, gpu=1)
    board = (BoardColumn("GREEN", "green", 7),)
    explained_by = ("green_analysis", "green_matched", "green_significant", "green_insignificant",
                    *(f"green_sig_{c}" for c in LETTERS), "green_unparsed_reason")

    def weights(self, s):
        return (model_ref(self.owner(), self.key("model"), s),)

    def explain(self, row) -> Explanation | None:
        """The counts the judge's answer gave (with the significant errors by kind), or why it gave none."""
        analysis, reason = _text(row.get("green_analysis")), _text(row.get("green_unparsed_reason"))
        if not analysis and not reason:
            return None
        shown = dict(label="GREEN", details_title="judge's analysis", details=analysis)
        if reason:
            return Explanation(failure=f"not parsed ({reason})", **shown)
        kinds = []
        for letter, kind in GREEN_ERRORS.items():
            n = _number(row.get(f"green_sig_{letter}"))
            if n:
                kinds.append(f"{kind} {int(n)}")
        errors = f" ({', '.join(kinds)})" if kinds else ""
        summary = (f"matched findings {_count(row.get('green_matched'))}; clinically significant errors "
                   f"{_count(row.get('green_significant'))}{errors}; insignificant "
                   f"{_count(row.get('green_insignificant'))}")
        return Explanation(summary=(summary,), **shown)

    def score(self, pairs, s, inputs, runtime):
        """GREEN per pair, on the generator ``runtime`` supplies for "green" (tests, benchmarks) or GREEN's model."""
        prov = {"radeval": upstream().version}
        generator = runtime.supply(self.name)
        if generator is None:
            loaded = load_generator(s, runtime)
            generator, prov = loaded.generator, {**prov, **loaded.provenance}
        prompts = [prompt_text(r, h) for r, h in zip(pairs["reference"].astype(str), pairs["hypothesis"].astype(str))]
        local = getattr(generator, "kind", "local") in ("local", "vllm")
        if local and getattr(generator, "tokenizer", None) is not None:
            requests = [render(generator.tokenizer, p) for p in prompts]
        else:
            requests = [[{"role": "user", "content": p}] for p in prompts]
        judgements = engine.judge(generator, requests, parse, cache=cache_for(s), what=self.name)
        out = engine.judgement_frame(self.name, pairs, judgements, values_of, ("green", *COUNT_COLUMNS),
                                     analysis=upstream().clean_responses)
        out.attrs["models"] = prov
        return out


METRIC = GREEN()

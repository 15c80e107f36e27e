"""The judge loop shared by every LLM-judge metric (GREEN, the MRScore rubric judge, CRIMSON).

A judge metric hands :func:`judge` a generator (:mod:`radrank.runtime.generators`: a local transformers
model, vLLM, or an OpenAI-compatible endpoint), its requests and a parser; every distinct request is
answered once and the job finishes even when some answers are unusable.

* **Unparsable answers.** :func:`judge` parses every answer with the metric's
  parser. An answer that does not parse is asked again once — with twice the
  token budget (up to ``max_total_tokens``) when it was cut at the limit, else
  sampled at ``retry_temperature`` with a fixed seed — and if that does not
  parse either the pair gets no value and the reason, and the job goes on.
* **Cached.** Every answer is stored in a :class:`~radrank.judge_cache.ResponseCache`
  keyed by (model identity, exact prompt, generation parameters, backend), so a
  rerun or a new leaderboard entry never pays twice for a pair, and answers of
  different backends never mix.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Callable

from radrank.judge_cache import ResponseCache, make_key
from radrank.judge_failures import REFUSED_MARK, TRUNCATED_MARK, failure_columns, failure_kind
from radrank.runtime.generators import Generation

log = logging.getLogger("radrank")


class ParseError(ValueError):
    """An answer that the metric's parser cannot use; the message is the reason."""



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



# --- the judge loop: cache, parse, one retry -------------------------------------------------------------


def _cache_entry(g: Generation) -> dict:
    entry = {"text": g.text, "new_tokens": g.new_tokens, "finished": g.finished}
    return {**entry, "refused": g.refused} if g.refused else entry


def _from_entry(e: dict) -> Generation:
    return Generation(text=e["text"], new_tokens=int(e.get("new_tokens", 0)), finished=bool(e.get("finished", True)),
                      refused=e.get("refused") or None)


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
        if g.refused:
            reason += f" ({REFUSED_MARK}: {g.refused})"
        if not g.finished:
            reason += f" (answer {TRUNCATED_MARK} after {g.new_tokens} tokens)"
        return None, reason


def judge(generator, requests: list, parse: Callable[[str], object], *, cache: ResponseCache | None = None,
          retry: bool = True, what: str = "judge", params: dict | None = None) -> list[Judgement]:
    """Answer and parse every request; each distinct request is answered once (cached across runs).

    ``parse(text)`` returns the parsed value or raises :class:`ParseError`. An
    answer that does not parse is asked again once (:meth:`retry_params`);
    the judgement then carries the second answer, or both reasons. ``params``: the first attempt's
    generation parameters (default: the generator's greedy ``params(0)``).
    """
    cache = cache or ResponseCache(None)
    start = time.perf_counter()
    distinct: dict = {}
    index = [distinct.setdefault(json.dumps(_request_json(r), sort_keys=True), len(distinct)) for r in requests]
    reqs = [None] * len(distinct)
    for r, i in zip(requests, index):
        reqs[i] = r
    first_params = params or generator.params(0)
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


def judgement_frame(name: str, pairs, judgements: list[Judgement], values: Callable[[object], dict],
                    value_columns: tuple, analysis: Callable[[str], str] | None = None):
    """The per-sample scores of judge metric ``name``: ``sample_id``, the ``value_columns`` from ``values(parsed
    answer)`` (NaN where the answer did not parse), ``<name>_analysis`` (the answer, through ``analysis``),
    ``<name>_unparsed`` (1.0 / 0.0), ``<name>_unparsed_reason`` ("" where it parsed), ``<name>_failure`` (its
    kind, :func:`radrank.judge_failures.failure_kind`) and ``<name>_attempts`` (answers asked)."""
    import numpy as np
    import pandas as pd

    n = len(judgements)
    cols = {c: np.full(n, np.nan) for c in value_columns}
    unparsed = np.zeros(n)
    texts, reasons = [], []
    for i, j in enumerate(judgements):
        texts.append((analysis(j.text) if analysis else j.text) if j.text else "")
        if j.parsed:
            for column, value in values(j.value).items():
                cols[column][i] = value
            reasons.append("")
        else:
            unparsed[i] = 1.0
            reasons.append(j.reason or "unparsed")
    if unparsed.any():
        log.warning("%s: %d of %d pairs have no score (answer unparsable after one retry); see %s_unparsed_reason",
                    name, int(unparsed.sum()), n, name)
    kind_column, attempts_column = failure_columns(name)
    return pd.DataFrame({"sample_id": pairs["sample_id"].to_numpy(), **cols, f"{name}_analysis": texts,
                         f"{name}_unparsed": unparsed, f"{name}_unparsed_reason": reasons,
                         kind_column: [failure_kind(j.reason, j.text) for j in judgements],
                         attempts_column: np.array([j.attempts for j in judgements], dtype="int64")})

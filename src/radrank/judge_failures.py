"""What kind of failure a judge's answer that gave no score was.

Every LLM-judge metric (GREEN, CRIMSON, the MRScore rubric judge, RadEval's judges) writes, per pair,
``<name>_failure`` — one of :data:`FAILURE_KINDS`, or "" when the answer was scored — and
``<name>_attempts``, how many answers were asked for the pair (2: the first did not parse and it was asked
again). The statistics stage counts them per model and tests whether the ranking depends on how failures are
scored (:mod:`radrank.stats.failures`).

The kinds are disjoint; a pair asked twice is classed by its last answer:

* ``error`` — the request failed (the endpoint did not answer; never cached, asked again next run);
* ``empty`` — the answer was empty or whitespace;
* ``truncated`` — the answer was cut at the token limit and did not parse;
* ``refusal`` — the endpoint flagged a refusal (``finish_reason`` ``content_filter``, a ``refusal`` message),
  or the answer opens like one ("I'm sorry, …", "I cannot …", "As an AI …") and did not parse;
* ``unparsed`` — any other answer the metric could not use.
"""

from __future__ import annotations

import re

FAILURE_KINDS = ("unparsed", "refusal", "truncated", "empty", "error")

# Markers the judge loop (radrank.engine) and the metrics put in a reason; the classifier reads them back.
TRUNCATED_MARK = "cut at the token limit"
REFUSED_MARK = "the endpoint refused"
RETRY_SEPARATOR = "; retry: "
_ERROR_MARKS = ("request failed", "api_error")

# An answer that opens with one of these and does not parse is a refusal: the judge declined the task.
_REFUSAL = re.compile(
    r"^\W*(?:i\s*(?:'|’)?\s*m\s+sorry|i\s+am\s+sorry|sorry\b|i\s+(?:cannot|can\s*not|can(?:'|’)t|won(?:'|’)t|"
    r"will\s+not|am\s+(?:not\s+able|unable)|(?:'|’)m\s+(?:not\s+able|unable)|apologi[sz]e)|as\s+an\s+ai\b|"
    r"unfortunately,?\s+i\s+(?:cannot|can(?:'|’)t|am\s+unable))",
    re.IGNORECASE)


def looks_like_refusal(text) -> bool:
    """True when ``text`` opens like a refusal (only asked of an answer that did not parse)."""
    return bool(_REFUSAL.match(str(text or "")[:200]))


def failure_kind(reason, text) -> str:
    """The kind (:data:`FAILURE_KINDS`) of a pair's failure from its reason and the judge's answer; "" when the
    reason is empty (the answer was scored); ``text`` None: the answer is not known (only the reason classes it).
    A reason of the judge loop's retry ("first answer: …; retry: …") is classed by the retry."""
    reason = "" if reason is None else str(reason)
    if not reason:
        return ""
    last = reason.rsplit(RETRY_SEPARATOR, 1)[-1]
    if any(mark in last for mark in _ERROR_MARKS):
        return "error"
    if REFUSED_MARK in last:
        return "refusal"
    if (text is not None and not str(text).strip()) or last.startswith("empty_response"):
        return "empty"
    if TRUNCATED_MARK in last:
        return "truncated"
    if looks_like_refusal(text):
        return "refusal"
    return "unparsed"


def failure_columns(name: str) -> tuple[str, str]:
    """The per-pair columns of judge metric ``name``: (failure kind, answers asked)."""
    return f"{name}_failure", f"{name}_attempts"

"""Tiered candidates: an instruction LLM writes reports of a given quality, the rubric judge grades them.

**Writing.** For each reference and each tier (e.g. 0–40, 40–70, 70–100) the writer is asked, in
radrank's own words (:data:`WRITER_VERSION` names the prompt in the provenance), for a report of the
same study that would lose between ``100 − high`` and ``100 − low`` rubric points: the prompt lists the
rubric's criteria and weights, so the errors it makes are the kinds the grader counts. With
``candidates_per_tier`` K > 1 candidate k is sampled at ``temperature`` with seed ``seed + k``; with
K = 1 the answer is greedy. The answer is the report: a code fence or a leading "Report:" label is taken
off; an empty answer is asked again once (the judge engine's retry), then listed as dropped.

**Grading.** Every candidate goes through the ``mrscore_rubric`` judge (:mod:`radrank.metrics.
mrscore_rubric`) against its reference. The total is recomputed here from the seven 0/1 flags
(:func:`radrank.metrics.mrscore_rubric.rubric_score`) — never read from the model's text — and the
judge's explanation is kept. A candidate whose verdict does not parse, or whose total falls outside the
tier it was written for, is listed as dropped with the reason.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Literal

import numpy as np

from radrank import engine
from radrank.metrics import mrscore_rubric as rubric
from radrank.metrics.judge import cache_for
from radrank.settings import scored, speed

log = logging.getLogger("radrank")

WRITER_VERSION = "radrank-mrscore-writer-1"
CANDIDATE_COLUMNS = ("candidate_id", "reference_id", "tier", "tier_low", "tier_high", "k", "candidate")
GRADED_COLUMNS = (*CANDIDATE_COLUMNS, "score", *rubric.FLAG_COLUMNS, "explanation")
DROP_COLUMNS = ("candidate_id", "reference_id", "tier", "stage", "reason", "text")
DEFAULT_WRITER = "Qwen/Qwen2.5-7B-Instruct"  # Apache-2.0, instruction-tuned, fits one GPU in bf16


@dataclass(frozen=True)
class CandidateSettings(rubric.BackendSettings):
    """The writer: the judge engines' backend settings with an open instruction model by default."""

    backend: Literal["openai", "local", "vllm"] = scored(
        "local", "openai: an OpenAI-compatible chat-completions endpoint; local: radrank's transformers engine; "
                 "vllm: vLLM's offline engine (environment vllm)")
    model: str = scored(DEFAULT_WRITER, "the writer: openai: the endpoint's model name; local, vllm: a Hugging Face "
                                        "id or a local directory (default: an Apache-2.0 instruction model)")
    max_new_tokens: int = scored(384, "tokens per candidate report", minimum=1)
    candidates_per_tier: int = scored(1, "candidates written per reference and tier (the paper: 1)", minimum=1)
    temperature: float = scored(0.0, "0: greedy (one candidate per tier); > 0: candidate k sampled with seed "
                                     "seed + k", minimum=0.0)
    max_report_words: int | None = scored(300, "the reference is cut to its first words in the prompt (null: "
                                               "whole)", minimum=1)
    batch_size: int = speed(16, "local: rows per generate call (halved on out-of-memory)", minimum=1)


# --- the writer's prompt -------------------------------------------------------------------------------------


def writer_prompt(reference: str, low: float, high: float, max_report_words: int | None = 300) -> str:
    lost_low, lost_high = 100 - high, 100 - low
    criteria = "\n".join(f"- {title} (loses {w} points): {what}" for _, w, title, what in rubric.CRITERIA)
    if lost_low <= 0:
        aim = f"at most {lost_high:g} points in total: a report a careful radiologist could sign, with at most " \
              "small slips"
    elif lost_high >= 100:
        aim = f"at least {lost_low:g} points in total: a poor report with several serious errors"
    else:
        aim = f"between {lost_low:g} and {lost_high:g} points in total: a report with some real errors"
    reference = " ".join(str(reference).split()[:max_report_words]) if max_report_words else str(reference)
    return (
        "You are preparing practice material for radiology residents. Below is a chest X-ray report written by "
        "an attending radiologist. Write a different report of the same study, as a resident might, whose "
        f"quality lands in the range {low:g} to {high:g} out of 100 on this grading scheme: a report starts at "
        "100 and loses a criterion's points when it makes that kind of error at least once.\n"
        f"{criteria}\n\n"
        f"Your report should lose {aim}. Choose the errors yourself and do not say which ones you made.\n\n"
        f"Attending's report:\n{reference}\n\n"
        "Write only the new report, with a Findings section and an Impression section, and nothing else."
    )


_FENCE = re.compile(r"^```[A-Za-z]*\s*|\s*```$")
_LABEL = re.compile(r"^\s*(?:new |resident'?s? )?report\s*:\s*", re.IGNORECASE)


def parse_candidate(text: str) -> str:
    """The report in the writer's answer; ParseError when there is none."""
    body = _FENCE.sub("", (text or "").strip()).strip()
    body = _LABEL.sub("", body).strip()
    if not body:
        raise engine.ParseError("empty answer")
    return body


def write_candidates(references, tiers, s: CandidateSettings, runtime, *, ref=None, supplied=None):
    """``(candidates, drops)``: K candidates per reference and tier, in reference, tier, k order."""
    import pandas as pd

    generator, prov, to_request = rubric.make_generator(s, runtime, ref, supplied, what="mrscore_training.candidates")
    jobs = [(r.reference_id, t, k, to_request(writer_prompt(r.reference, t.low, t.high, s.max_report_words)))
            for r in references.itertuples() for t in tiers for k in range(s.candidates_per_tier)]
    judgements = [None] * len(jobs)
    cache = cache_for(s)
    for k in range(s.candidates_per_tier):  # one call per k: its own sampling seed
        idx = [i for i, job in enumerate(jobs) if job[2] == k]
        params = generator.params(0, temperature=s.temperature)
        if s.temperature > 0:
            params["seed"] = int(s.seed) + k
        for i, j in zip(idx, engine.judge(generator, [jobs[i][3] for i in idx], parse_candidate, cache=cache,
                                          what=f"mrscore_training.candidates (k={k})", params=params)):
            judgements[i] = j
    rows, drops = [], []
    for (rid, tier, k, _), j in zip(jobs, judgements):
        cid = f"{rid}|{tier.name}|{k}"
        if j.parsed:
            rows.append({"candidate_id": cid, "reference_id": rid, "tier": tier.name, "tier_low": tier.low,
                         "tier_high": tier.high, "k": k, "candidate": j.value})
        else:
            drops.append({"candidate_id": cid, "reference_id": rid, "tier": tier.name, "stage": "write",
                          "reason": j.reason, "text": j.text or ""})
    out = pd.DataFrame(rows, columns=list(CANDIDATE_COLUMNS))
    out.attrs["models"] = {**prov, "prompt": WRITER_VERSION}
    log.info("mrscore_training: %d candidates written for %d references × %d tiers × %d, %d dropped",
             len(out), len(references), len(tiers), s.candidates_per_tier, len(drops))
    return out, pd.DataFrame(drops, columns=list(DROP_COLUMNS))


def grade_candidates(candidates, references, tiers, s, runtime):
    """``(graded, drops)``: each candidate's rubric flags, total (recomputed from the flags) and explanation;
    unparsed verdicts and candidates outside their tier are dropped with the reason."""
    import pandas as pd

    from radrank import metrics

    text_of = dict(zip(references["reference_id"], references["reference"]))
    pairs = pd.DataFrame({"sample_id": candidates["candidate_id"].to_numpy(),
                          "reference": [text_of[r] for r in candidates["reference_id"]],
                          "hypothesis": candidates["candidate"].to_numpy()})
    scored_pairs = metrics.score("mrscore_rubric", pairs, s, runtime=runtime)
    last = {t.name: i == len(tiers) - 1 for i, t in enumerate(tiers)}
    rows, drops = [], []
    for cand, verdict in zip(candidates.to_dict("records"), scored_pairs.to_dict("records")):
        base = {"candidate_id": cand["candidate_id"], "reference_id": cand["reference_id"], "tier": cand["tier"]}
        if verdict["mrscore_rubric_unparsed"]:
            drops.append({**base, "stage": "grade", "reason": verdict["mrscore_rubric_unparsed_reason"],
                          "text": verdict["mrscore_rubric_analysis"]})
            continue
        flags = {k: int(verdict[f"mrscore_rubric_{k}"]) for k in rubric.KEYS}
        total = rubric.rubric_score(flags)
        tier = next(t for t in tiers if t.name == cand["tier"])
        if not tier.holds(total, last[tier.name]):
            drops.append({**base, "stage": "grade", "reason": f"graded {total:g}, outside its tier {tier.name}",
                          "text": verdict["mrscore_rubric_analysis"]})
            continue
        rows.append({**cand, "score": total, **{f"mrscore_rubric_{k}": v for k, v in flags.items()},
                     "explanation": rubric.explanation_of(verdict["mrscore_rubric_analysis"])})
    graded = pd.DataFrame(rows, columns=list(GRADED_COLUMNS))
    graded.attrs["models"] = scored_pairs.attrs.get("models", {})
    for tier in tiers:  # an empty tier is said, not left to be noticed in the pairs
        if not (graded["tier"] == tier.name).any():
            log.warning("mrscore_training: tier %s kept no candidate (%d written; every one is listed in the drop "
                        "table with why)", tier.name, int((candidates["tier"] == tier.name).sum()))
    counts = pd.Series([d["reason"].split(",")[0] if d["reason"].startswith("graded") else "unparsed"
                        for d in drops], dtype=object).value_counts().to_dict() if drops else {}
    log.info("mrscore_training: %d of %d candidates kept after grading (dropped: %s); mean score per tier %s",
             len(graded), len(candidates), counts or "none",
             {t: round(float(np.mean(v)), 1) for t, v in graded.groupby("tier")["score"]} if len(graded) else {})
    return graded, pd.DataFrame(drops, columns=list(DROP_COLUMNS))

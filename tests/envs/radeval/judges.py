"""The fake judges of radeval's API metrics: answers by simple rules on the reports' sentences, so every
expected number is known (test_radeval_api.py, test_contract.py), and RadFact-CT's prompt files.

``mammo_responder`` and ``radfact_responder`` are ``FakeOpenAI`` responders (../fake_openai.py).
"""

from __future__ import annotations

import json
import math
import re

from fake_openai import user_text

KEY = "sk-radrank-test-0b1c2d3e4f5a6b7c8d9e"
KEY_ENV = "RADRANK_TEST_JUDGE_KEY"


def sentences(text: str) -> list[str]:
    return [s.strip().rstrip(".").lower() for s in re.split(r"\.\s+|\.$", text.strip()) if s.strip().rstrip(".")]


# --- MammoGREEN ----------------------------------------------------------------------------------------------


def mammo_counts(ref: str, hyp: str) -> dict:
    r, h = set(sentences(ref)), set(sentences(hyp))
    return {"matched_findings": len(r & h),
            "significant_errors": {"false_finding": len(h - r), "missing_finding": len(r - h),
                                   "mischaracterization": 0, "wrong_location_laterality": 0,
                                   "incorrect_birads": 0, "incorrect_breast_density": 0},
            "insignificant_errors": 1}


def mammo_responder(body):
    """Counts from the sentences; reference "REJECT": HTTP 400; "BADSCHEMA": a key missing; "FENCE…": fenced JSON
    with a trailing comma."""
    m = re.match(r"REFERENCE_REPORT:\n(.*)\n\nGENERATED_REPORT:\n(.*)\Z", user_text(body), re.DOTALL)
    ref, hyp = m.group(1), m.group(2)
    if ref == "REJECT":
        return (400, "request rejected by the test server")
    counts = mammo_counts(ref, hyp)
    if ref == "BADSCHEMA":
        del counts["significant_errors"]["incorrect_birads"]
    text = json.dumps(counts, indent=1)
    if ref.startswith("FENCE"):
        return "Here you go:\n```json\n" + text[:-1] + ",\n}\n```"  # fenced, with a trailing comma
    return text


# --- RadFact-CT -------------------------------------------------------------------------------------------------


def write_prompts(d):
    """Prompt files of RadFact-CT's layout in folder ``d``, with placeholder texts written here; returns ``d``."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "report_to_phrases_system.txt").write_text("TEST PHRASES SYSTEM: split the report into findings.")
    (d / "report_to_phrases_examples.json").write_text(json.dumps([{
        "findings_text": "Example finding one. Example finding two.",
        "parsed_report": {"sentence_list": [{"orig": "Example finding one.", "new": ["example finding one"]},
                                            {"orig": "Example finding two.", "new": ["example finding two"]}]}}]))
    (d / "negative_filtering_system.txt").write_text("TEST NEGATIVE SYSTEM: drop negative findings.")
    (d / "negative_filtering_examples.json").write_text(json.dumps([{
        "input": ["no example", "an example"], "output": {"phrases": ["an example"]}}]))
    (d / "nli_system.txt").write_text("TEST NLI SYSTEM: is the hypothesis entailed by the reference?")
    (d / "nli_examples.json").write_text(json.dumps([{
        "input": {"phrases_A": ["example a"], "phrases_B": ["example a", "example b"]},
        "output": {"phrases_A_evidenced": [{"phrase": "example a", "status": "entailment", "evidence": ["example a"]}],
                   "phrases_B_evidenced": [{"phrase": "example a", "status": "entailment", "evidence": ["example a"]},
                                           {"phrase": "example b", "status": "neutral", "evidence": []}]}}]))
    return d


def radfact_responder(body):
    """Phrases = sentences (text "REJECT": HTTP 400); negatives = phrases starting "no "; a phrase is entailed
    when the other report's text contains it."""
    import yaml

    system = body["messages"][0]["content"]
    text = user_text(body)
    if system.startswith("TEST PHRASES SYSTEM"):
        if text == "REJECT":
            return (400, "request rejected by the test server")
        return json.dumps({"sentence_list": [{"orig": s, "new": [s]} for s in sentences(text)]})
    if system.startswith("TEST NEGATIVE SYSTEM"):
        return json.dumps({"phrases": [p for p in json.loads(text) if not p.startswith("no ")]})
    if system.startswith("TEST NLI SYSTEM"):
        q = yaml.safe_load(text)
        ok = q["hypothesis"] in q["reference"]
        return yaml.dump({"phrase": q["hypothesis"], "status": "entailment" if ok else "not_entailment",
                          "evidence": [q["hypothesis"]] if ok else []}, sort_keys=False)
    return (400, "unexpected prompt")


def radfact_expected(ref, hyp, filter_negatives=False):
    r, h = sentences(ref), sentences(hyp)
    if filter_negatives:
        r, h = [x for x in r if not x.startswith("no ")], [x for x in h if not x.startswith("no ")]
    if not r and not h:
        return math.nan, math.nan
    p = sum(x in r for x in h) / len(h) if h else math.nan
    rc = sum(x in h for x in r) / len(r) if r else math.nan
    return p, rc

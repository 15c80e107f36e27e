"""ReXrank submission JSON, read as ReXrank-metric's json_to_csv reads it.

* study_id is the entry's position in the file (0, 1, 2, ...); case_id is its key.
* findings split: reference = "Findings: " + section_findings, or "" when the
  findings are missing.
* reports split: reference = the entry's ``report`` when present and not
  missing, else "Findings: {f}" and "Impression: {i}" (each only when present)
  joined by one space.
* hypothesis = ``model_prediction`` (required in every entry; null counts as an
  empty prediction).

"Missing" follows :func:`radrank.text.is_missing` (null, NaN, "nan", "None",
"null", blank). A text field holding anything but a string or a number (a list,
an object, true/false) is an error, and so is a key repeated in one JSON object.
"""

from __future__ import annotations

import json

from radrank.errors import InputError
from radrank.ingest.detect import decode_utf8, read_bytes
from radrank.text import clean

SPLITS = ("findings", "reports")
_TEXT_FIELDS = ("model_prediction", "section_findings", "section_impression", "report", "context")


def _duplicate_key_hook(found: list):
    """An object_pairs_hook that records ``(object, key)`` for every repeated key."""

    def hook(pairs):
        out: dict = {}
        for key, value in pairs:
            if key in out:
                found.append((out, key))
            out[key] = value
        return out

    return hook


def _check_duplicates(path, data, found: list) -> None:
    if not found:
        return
    for obj, key in found:  # a repeated case id is the worst: report it first
        if obj is data:
            raise InputError(path, "the same case id appears twice in one JSON object", row=key)
    obj, key = found[0]
    for case_id, entry in data.items():
        if entry is obj:
            raise InputError(path, "the same field appears twice in one entry", field=key, row=case_id)
    raise InputError(path, f"key {key!r} appears twice in one JSON object")


def load(path) -> dict:
    text = decode_utf8(path, read_bytes(path))
    found: list = []
    try:
        data = json.loads(text, object_pairs_hook=_duplicate_key_hook(found))
    except json.JSONDecodeError as e:
        raise InputError(path, f"is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    if not isinstance(data, dict):
        raise InputError(path, f"top level must be a JSON object keyed by case id, found {type(data).__name__}")
    _check_duplicates(path, data, found)
    if not data:
        raise InputError(path, "JSON object has no entries")
    return data


def reference_for(entry: dict, split: str) -> str:
    findings = clean(entry.get("section_findings")).strip()
    if split == "findings":
        return f"Findings: {findings}" if findings else ""
    report = clean(entry.get("report")).strip()
    if report:
        return report
    impression = clean(entry.get("section_impression")).strip()
    parts = []
    if findings:
        parts.append(f"Findings: {findings}")
    if impression:
        parts.append(f"Impression: {impression}")
    return " ".join(parts)


def read(path, split: str) -> list[dict]:
    """Return one record per entry: sample_id, study_id, reference, hypothesis, context, row."""
    if split not in SPLITS:
        raise InputError(path, f"unknown split {split!r} for a ReXrank submission; choose one of {SPLITS}")
    data = load(path)
    records = []
    for position, (case_id, entry) in enumerate(data.items()):
        if not isinstance(entry, dict):
            raise InputError(path, f"entry must be a JSON object, found {type(entry).__name__}", row=case_id)
        if "model_prediction" not in entry:
            raise InputError(path, "required field is missing", field="model_prediction", row=case_id)
        for field in _TEXT_FIELDS:
            value = entry.get(field)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (str, int, float))):
                raise InputError(path, f"must be text, found {type(value).__name__}", field=field, row=case_id)
        records.append(
            {
                "sample_id": str(case_id),
                "study_id": position,
                "reference": reference_for(entry, split),
                "hypothesis": clean(entry.get("model_prediction")),
                "context": clean(entry.get("context")) or None,
                "row": case_id,
            }
        )
    return records

"""ReXrank submission JSON, read as ReXrank-metric's json_to_csv reads it.

* study_id is the entry's position in the file (0, 1, 2, ...); case_id is its key.
* findings split: reference = "Findings: " + section_findings exactly as written
  (no whitespace is stripped), or "" when the findings are missing.
* reports split: reference = the entry's ``report`` when present and not
  missing, else "Findings: {f}" and "Impression: {i}" (each only when present)
  joined by one space.
* hypothesis = ``model_prediction`` (required in every entry; null counts as an
  empty prediction).

"Missing" follows :func:`radrank.text.is_missing` (null, NaN, "nan", "None",
"null", blank); ReXrank's own files write NaN for an absent section. A text field
holding anything else that is not a string — a number, a list, an object,
true/false — is an error: a number is never a report, and scoring its digits
would hide a broken export. So is ``Infinity`` in a text field (not JSON, and
no report), an empty case id, a key repeated in one JSON object, nesting deeper
than :data:`MAX_DEPTH` (a submission's entries hold flat text fields), and a case id or
text field holding a lone UTF-16 surrogate (``"\\ud800"`` without its pair: not text, and
no file can store it).

Missing values, two modes (config ``rexrank_missing_section``):

* ``drop`` (default): a missing section is missing — a findings reference without findings is empty, and
  the case is dropped and listed (reason ``empty_reference``); a missing prediction is empty
  (``empty_hypothesis``).
* ``literal``: the pairs ReXrank's pipeline scores, string for string. It converts the JSON to CSV with
  ReXrank-metric's ``json_to_csv`` and reads the CSV back with ``pandas.read_csv`` (defaults) before
  scoring, so two steps decide a pair:

  1. json_to_csv writes a cell. Its emptiness test is Python truthiness: a float NaN is truthy and
     prints "nan" ("Findings: nan"); ``null``, "" and an absent key are falsy, so the findings
     reference is an empty cell; any string is written as it is ("None", blanks). The prediction
     cell is ``model_prediction`` as it is (null and NaN: an empty cell).
  2. pandas reads a cell back as NaN when it equals one of :data:`PANDAS_NA_STRINGS` exactly (the
     empty cell, "nan", "None", "NA", "null", ...; not " nan", not blanks), and the metrics take
     ``str`` of it: "nan". Every other cell comes back unchanged.

  So every case is kept, reference and prediction as pandas hands them on (docs/inputs.md lists each
  form); a pair that differs from the drop mode's because of a missing value is listed in the drop
  file (reasons ``missing_section_literal``, ``empty_hypothesis_literal``; action
  ``scored_literally``), never silently. An absent ``model_prediction`` stays an error (ReXrank's
  script fails on it too: no pair to reproduce).
"""

from __future__ import annotations

import json
import math

from radrank.errors import InputError
from radrank.ingest.detect import decode_utf8, read_bytes
from radrank.text import clean, is_missing

SPLITS = ("findings", "reports")
MISSING_SECTION_MODES = ("drop", "literal")
_TEXT_FIELDS = ("model_prediction", "section_findings", "section_impression", "report", "context")
MAX_DEPTH = 64  # where an unreadable nesting is reported; real entries nest 3 levels


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


class _NonFinite(str):
    """``Infinity`` / ``-Infinity`` in the file: kept as a marker so that the entry and field that
    hold it can be named (NaN stays NaN: ReXrank's "missing")."""


def _parse_constant(constant: str):
    return math.nan if constant == "NaN" else _NonFinite(constant)


def _deep_point(text: str, limit: int) -> tuple[int, str | None, str | None]:
    """(offset, case id, field) where brackets first nest deeper than ``limit``, skipping strings;
    (-1, None, None) if they never do. Used only to locate a nesting the parser could not read."""
    depth, in_string, escaped, start, key_depth, last = 0, False, False, 0, 0, ""
    keys: dict = {1: None, 2: None}
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
                if key_depth:
                    keys[key_depth] = text[start + 1:i]
                    if key_depth == 1:
                        keys[2] = None
                last = '"'
            continue
        if ch.isspace():
            continue
        if ch == '"':
            in_string, start = True, i
            key_depth = depth if depth in (1, 2) and last in ("{", ",") else 0
        last = ch
        if ch in "[{":
            depth += 1
            if depth > limit:
                return i, keys[1], keys[2]
        elif ch in "]}":
            depth -= 1
    return -1, None, None


def load(path) -> dict:
    text = decode_utf8(path, read_bytes(path))
    found: list = []
    try:
        data = json.loads(text, object_pairs_hook=_duplicate_key_hook(found), parse_constant=_parse_constant)
    except json.JSONDecodeError as e:
        raise InputError(path, f"is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except RecursionError:
        offset, case, field = _deep_point(text, MAX_DEPTH)
        line = text.count("\n", 0, max(offset, 0)) + 1
        raise InputError(path, f"JSON nests deeper than {MAX_DEPTH} levels (line {line}); an entry holds flat "
                         "text fields (model_prediction, section_findings, ...)", row=case, field=field) from None
    if not isinstance(data, dict):
        raise InputError(path, f"top level must be a JSON object keyed by case id, found {type(data).__name__}")
    _check_duplicates(path, data, found)
    if not data:
        raise InputError(path, "JSON object has no entries")
    return data


# pandas.read_csv's default na_values (pandas >= 2.0, which added "None"): a cell equal to one of these is
# read back as NaN, which ReXrank's metrics turn into the text "nan" (str of it). tests/test_ingest.py
# checks the set against pandas itself.
PANDAS_NA_STRINGS = frozenset({"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
                               "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"})


def _cell(value) -> str:
    """A JSON value as json_to_csv writes it into a CSV cell: null is an empty cell, anything else ``str``."""
    return "" if value is None else str(value)


def _read_back(cell: str) -> str:
    """A CSV cell as pandas.read_csv hands it to ReXrank's metrics: "nan" for a default NA string."""
    return "nan" if cell in PANDAS_NA_STRINGS else cell


def _section(value) -> str:
    """A section as json_to_csv writes it: "" when falsy (null, "", absent), else ``str`` of it (NaN: "nan")."""
    return str(value) if value else ""


def _missing(value) -> bool:
    """A value the literal mode must list when it shapes a pair: missing in radrank's sense, or a pandas NA."""
    return is_missing(value) or (isinstance(value, str) and value in PANDAS_NA_STRINGS)


def _form(entry: dict, field: str) -> str:
    if field not in entry:
        return f"{field} is absent"
    value = entry[field]
    if value is None:
        return f"{field} is null"
    if isinstance(value, float):
        return f"{field} is NaN"
    return f"{field} is {value[:40]!r}"


def reference_for(entry: dict, split: str, missing_section: str = "drop") -> str:
    # Texts are used as written, surrounding whitespace and newlines included, as json_to_csv
    # does: ReXrank's BLEU-2 splits on single spaces, so "Findings: \nThe lungs" and
    # "Findings: The lungs" tokenise differently (61 of CheXpert-Plus's 62 findings have such
    # whitespace). Only the emptiness test looks at the stripped text (radrank.text.is_missing),
    # or, in the literal mode, at the value's truthiness as json_to_csv's does (module docstring).
    literal = missing_section == "literal"
    text = _section if literal else clean
    findings = text(entry.get("section_findings"))
    if split == "findings":
        reference = f"Findings: {findings}" if findings else ""
    else:
        reference = text(entry.get("report"))
        if not reference:
            impression = text(entry.get("section_impression"))
            parts = []
            if findings:
                parts.append(f"Findings: {findings}")
            if impression:
                parts.append(f"Impression: {impression}")
            reference = " ".join(parts)
    return _read_back(reference) if literal else reference


def _literal_notes(entry: dict, split: str, reference: str, hypothesis: str | None) -> list:
    """(reason, detail) for each text of a literal-mode record that a missing value made differ from the drop
    mode's: listed in the drop file with action ``scored_literally``."""
    notes = []
    if reference != reference_for(entry, split):
        fields = ["section_findings"] if split == "findings" else ["report"] * ("report" in entry) + (
            [] if _section(entry.get("report")) else ["section_findings", "section_impression"])
        forms = "; ".join(_form(entry, f) for f in fields if _missing(entry.get(f)))
        notes.append(("missing_section_literal", f"{forms}: scored against the reference {reference[:80]!r}, as "
                      "ReXrank's json_to_csv + pandas.read_csv give it (rexrank_missing_section: literal)"))
    if hypothesis is not None and hypothesis != clean(entry.get("model_prediction")):
        notes.append(("empty_hypothesis_literal", f"{_form(entry, 'model_prediction')}: scored as the prediction "
                      f"{hypothesis[:80]!r}, as ReXrank's json_to_csv + pandas.read_csv give it "
                      "(rexrank_missing_section: literal)"))
    return notes


def _surrogate(text: str) -> str | None:
    """Why ``text`` is not writable text when it holds a lone UTF-16 surrogate (JSON's ``"\\ud800"`` escape
    without its pair), else None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return (f"holds a lone UTF-16 surrogate \\u{ord(text[e.start]):04x} at character {e.start}: half of an "
                "escaped pair (\\ud83d\\ude00 is one character), so not text; write the character itself, or "
                "its whole pair")
    return None


def _printable(text: str) -> str:
    """``text`` with lone surrogates escaped, for messages."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def read(path, split: str, missing_section: str = "drop", *, predictions: bool = True) -> list[dict]:
    """Return one record per entry: sample_id, study_id, reference, reference_field, hypothesis, context, row.
    ``predictions=False`` reads a ground-truth file (a dataset's canonical references): entries need no
    ``model_prediction`` and the records have no hypothesis."""
    if split not in SPLITS:
        raise InputError(path, f"unknown split {split!r} for a ReXrank submission; choose one of {SPLITS}")
    if missing_section not in MISSING_SECTION_MODES:
        raise ValueError(f"missing_section must be one of {MISSING_SECTION_MODES}, got {missing_section!r}")
    data = load(path)
    records = []
    for position, (case_id, entry) in enumerate(data.items()):
        bad = _surrogate(case_id)
        if bad:
            raise InputError(path, f"the case id (the key of entry {position}, counted from 0) {bad}",
                             field="case_id", row=_printable(case_id))
        if not case_id.strip():
            raise InputError(path, f"case id (the key of entry {position}, counted from 0) is empty",
                             row=repr(case_id))
        if not isinstance(entry, dict):
            raise InputError(path, f"entry must be a JSON object, found {type(entry).__name__}", row=case_id)
        if predictions and "model_prediction" not in entry:
            raise InputError(path, "required field is missing", field="model_prediction", row=case_id)
        for field in _TEXT_FIELDS:
            value = entry.get(field)
            if isinstance(value, _NonFinite):
                raise InputError(path, f"{value} is not text: write the report as a string, or null when it is "
                                 "missing", field=field, row=case_id)
            if isinstance(value, str):
                bad = _surrogate(value)
                if bad:
                    raise InputError(path, bad, field=field, row=case_id)
                continue
            if value is None or (isinstance(value, float) and math.isnan(value)):
                continue  # missing (null / NaN)
            found = f"a number ({value!r})" if isinstance(value, (int, float)) and not isinstance(value, bool) \
                else type(value).__name__
            raise InputError(path, f"must be text, found {found}", field=field, row=case_id)
        record = {
            "sample_id": str(case_id),
            "study_id": position,
            "reference": reference_for(entry, split, missing_section),
            "reference_field": reference_field(entry, split),
            "hypothesis": clean(entry.get("model_prediction")),
            "context": clean(entry.get("context")) or None,
            "row": case_id,
        }
        if missing_section == "literal":
            # every case is scored as the pipeline scores it (pairs.build_pairs keeps it as it is)
            hypothesis = _read_back(_cell(entry.get("model_prediction"))) if predictions else None
            if predictions:
                record["hypothesis"] = hypothesis
            record.update(literal=True, notes=_literal_notes(entry, split, record["reference"], hypothesis))
        records.append(record)
    return records


def reference_field(entry: dict, split: str) -> str:
    """The field(s) an entry's reference for ``split`` is made of, for messages."""
    if split == "reports" and not is_missing(entry.get("report")):
        return "report"
    return "section_findings" if split == "findings" else "section_findings/section_impression"

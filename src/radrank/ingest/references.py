"""A dataset's references are checked, never taken on a submission's word.

Submissions are written by the people ranked, and most formats carry their own references (a ReXrank
JSON's ``section_findings``, a parquet file's ``reference``): a model that copies its predictions into
them would score perfectly. So:

* **Canonical references.** A dataset may name its reference file (config ``references.files.<dataset>``):
  a ReXrank JSON (entries need no ``model_prediction``) or a ground-truth CSV (``study_id``, ``report``,
  optionally ``case_id``). Its reference for each case is made by the same rule as a submission's (the
  split's ReXrank rule, or the section parser with ``ref_section``), and every submission's reference is
  compared with it exactly, case by case (:func:`check_records`). A different reference, or a case the
  canonical file does not have, is an error naming the dataset, the case, the field and both files; with
  ``references.on_mismatch: drop`` the case is dropped from that submission and listed in its drop file
  (reasons ``reference_mismatch``, ``unknown_case``) instead — never silently.
* **Without one**, the references different submissions give for the same case must agree
  (:func:`check_group`, one job per dataset × split after every submission is read). A disagreement is
  always an error: with no canonical file nothing says which submission is right, so the message says how
  to name one.
* **Case ids are compared exactly**; two ids that differ only in whitespace, letter case, invisible format
  characters (zero-width space, BOM, bidi controls: Unicode category Cf) or Unicode normalisation (NFKC: NFC vs
  NFD, full-width digits, NBSP) are an error naming both and where each was found
  (:func:`check_near_duplicates`) — scoring them as two cases, or as one, would both be a guess.

The dataset's case set (:mod:`radrank.ingest.casesets`) is the canonical file's cases with a reference for the
split, or without one the cases more than half of the submissions have: what every model is scored and ranked on.
"""

from __future__ import annotations

import unicodedata

from radrank.errors import ConfigError, InputError
from radrank.ingest import casesets

MISMATCH_POLICIES = ("error", "drop")
SHOWN_CHARS = 80  # of each text in a mismatch message
CONTEXT_CHARS = 30  # either side of the first difference of two texts in a mismatch message


def id_key(case_id: str) -> str:
    """The key under which near-duplicate case ids collide: NFKC (full-width forms, NBSP as a space), format
    characters (Unicode category Cf: zero-width space and joiners, BOM, bidi controls) and whitespace removed,
    case folded."""
    text = unicodedata.normalize("NFKC", case_id)
    return "".join(ch for ch in text if unicodedata.category(ch) != "Cf" and not ch.isspace()).casefold()


def _shown(text: str) -> str:
    text = text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…"
    return repr(text.encode("utf-8", "backslashreplace").decode("utf-8"))


def _how_they_differ(a: str, b: str) -> str:
    where = _first_difference(a, b)
    if " ".join(a.split()) == " ".join(b.split()):
        return f" (they differ only in whitespace, which changes the tokens BLEU and ROUGE count; {where})"
    if unicodedata.normalize("NFKC", a) == unicodedata.normalize("NFKC", b):
        return f" (they differ only in Unicode normalisation; {where})"
    return f" ({where})"


def _first_difference(a: str, b: str) -> str:
    """Where two different texts first part: the position, both lengths and the text around it in each (the
    excerpts of :func:`_shown` are the texts' starts, identical when the texts differ near their end)."""
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    start = max(0, at - CONTEXT_CHARS)

    def around(text: str) -> str:
        part = text[start:at + CONTEXT_CHARS]
        shown = repr(part.encode("utf-8", "backslashreplace").decode("utf-8"))
        return ("…" if start else "") + shown + ("…" if at + CONTEXT_CHARS < len(text) else "")

    return (f"first difference at character {at + 1}, lengths {len(a)} and {len(b)}: {around(a)} against "
            f"{around(b)}")


def read_canonical(path, split: str, *, ref_section: str, missing_section: str = "drop") -> dict:
    """{sample_id: (reference, row, field)} of a dataset's canonical reference file for ``split``."""
    from radrank.ingest import rexrank, tables
    from radrank.ingest.detect import detect_format

    fmt = detect_format(path)
    if fmt == "rexrank_json":
        records = rexrank.read(path, split, missing_section, predictions=False)
    elif fmt == "csv":
        records = tables.read_ground_truth(path, ref_section)
    else:
        raise InputError(path, "a dataset's canonical references are a ReXrank JSON or a ground-truth CSV "
                         f"(study_id, report[, case_id]); this file is {fmt}", field="references.files")
    out = {r["sample_id"]: (r["reference"], r["row"], r["reference_field"]) for r in records}
    check_near_duplicates({case: (path, f"row {row}") for case, (_, row, _) in out.items()})
    return out


def check_near_duplicates(where: dict) -> None:
    """``where``: {case id: (file, where in it)}. An :class:`InputError` naming the first two ids that are the
    same case id but for whitespace or Unicode normalisation, and where each was found."""
    seen: dict = {}
    for case in sorted(where):
        key = id_key(case)
        if key in seen:
            other = seen[key]
            raise InputError(where[case][0], f"case ids {_shown(other)} ({', '.join(map(str, where[other]))}) and "
                             f"{_shown(case)} ({', '.join(map(str, where[case]))}) differ only in whitespace, letter case, "
                             "invisible format characters or Unicode normalisation: "
                             "ids are compared exactly, so they would be two cases (or, in another file, none in "
                             "common); write each case id one way", field="case_id", row=_shown(case))
        seen[key] = case


def check_records(records: list, canonical: dict, *, dataset: str, split: str, path, canonical_path,
                  on_mismatch: str = "error", source=None) -> tuple[list, list]:
    """A submission's records (before the empty-text policies) checked against the canonical references:
    ``(records kept, records dropped)`` — the dropped ones carry ``reason``, ``row`` and ``detail`` for the
    drop file. ``source``: the file the records' references came from (a CSV submission's ground truth),
    ``path`` by default. An :class:`InputError` for the first mismatch when ``on_mismatch`` is "error"."""
    if on_mismatch not in MISMATCH_POLICIES:
        raise ConfigError(f"references.on_mismatch must be one of {MISMATCH_POLICIES}, got {on_mismatch!r}")
    source = source or path
    by_key = {id_key(c): c for c in canonical}
    kept, dropped = [], []
    for rec in records:
        case = rec["sample_id"]
        field = rec.get("reference_field", "reference")
        if case not in canonical:
            near = by_key.get(id_key(case))
            why = (f"dataset {dataset}: case {_shown(case)} is not among the dataset's canonical references "
                   f"({canonical_path})" + (f"; that file has {_shown(near)}, which differs only in whitespace, "
                                            "letter case, invisible format characters or Unicode normalisation "
                                            "(ids are compared exactly)" if near else ""))
            reason = "unknown_case"
        else:
            truth, truth_row, truth_field = canonical[case]
            if rec["reference"] == truth:
                kept.append(rec)
                continue
            why = (f"dataset {dataset}, split {split}: the reference of case {_shown(case)} differs from the "
                   f"canonical one: {source} (field {field}) has {_shown(rec['reference'])}, {canonical_path} "
                   f"(row {truth_row}, field {truth_field}) has {_shown(truth)}"
                   + _how_they_differ(rec["reference"], truth))
            reason = "reference_mismatch"
        if on_mismatch == "error":
            raise InputError(source, why + "; a submission is scored against the dataset's references, never its "
                             "own (references.on_mismatch: drop lists such cases instead)", field=field,
                             row=rec.get("row", case))
        dropped.append(dict(rec, reason=reason, detail=why))
    return kept, dropped


def check_group(pairs: dict, *, dataset: str, split: str, canonical: dict | None = None, canonical_path=None):
    """The dataset's cases for one split from every submission's pairs (``pairs``: {model: (DataFrame with
    sample_id and reference, its source file)}), after checking that submissions agree on each case's
    reference (without ``canonical``) and that no two case ids are near-duplicates (the union's: an id variant
    is an error, not a case outside the set). Returns the case set (:func:`radrank.ingest.casesets.case_set`)."""
    first: dict = {}  # case -> (model, reference) of the first submission, in model order, that has it
    where: dict = {}
    # a submission whose ids and references are those of one checked before, row for row, adds no case and
    # disagrees with none
    same = casesets.distinct_tables({m: table for m, (table, _) in sorted(pairs.items())}, ("sample_id", "reference"))
    for model, (table, source) in sorted(pairs.items()):
        if same[model] != model:
            continue
        for case, reference in zip(*casesets.object_columns(table, "sample_id", "reference")):
            if case not in first:
                first[case] = (model, reference)
                where[case] = (source, f"model {model}")
                continue
            other, other_reference = first[case]
            if canonical is None and reference != other_reference:
                raise InputError(source, f"dataset {dataset}, split {split}: case {_shown(case)} has a different "
                                 f"reference in two submissions: model {model} gives {_shown(reference)}, model "
                                 f"{other} ({where[case][0]}) gives {_shown(other_reference)}"
                                 + _how_they_differ(reference, other_reference)
                                 + f"; one of them is not the dataset's: name the dataset's reference file "
                                 f"(references.files.{dataset}: a ReXrank JSON or ground-truth CSV) to check "
                                 "every submission against it", field="reference", row=_shown(case))
    if canonical is not None:
        # a blank reference is a case without one, unless a submission scored it (ReXrank's literal mode scores
        # a whitespace-only report as it is)
        where.update({c: (canonical_path, f"row {row}") for c, (reference, row, _) in canonical.items()
                      if (reference.strip() or c in first) and c not in where})
        extra = sorted(set(first) - set(canonical))
        if extra:  # the ingest check lets none through: a pairs file that did not pass it
            raise InputError(where[extra[0]][0], f"case {_shown(extra[0])} is not among the canonical "
                             f"references ({canonical_path}); rerun its ingest job", row=_shown(extra[0]))
    check_near_duplicates(where)
    return casesets.case_set({m: table for m, (table, _) in pairs.items()}, canonical)

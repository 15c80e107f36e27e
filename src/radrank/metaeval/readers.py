"""Readers: each human-judged set's own files → :class:`~radrank.metaeval.items.ItemSet`.

* :func:`read_radpref` — RadPref (CRIMSON): ``preference_data.json`` and one
  ``radiologist_annotations/user_<k>.json`` per radiologist; ratings 1–5, higher is better.
* :func:`read_radjudge` — RadJudge (CRIMSON): ``ranking_cases.json``, categories of cases with an
  expected order of their candidates.
* :func:`read_rexval` — ReXVal (PhysioNet, credentialed): ``50_samples_gt_and_candidates.csv`` and
  ``6_valid_raters_per_rater_error_categories.csv`` (columns in :data:`REXVAL_CANDIDATE_COLUMNS` and
  :data:`REXVAL_RATING_COLUMNS`); errors per candidate, lower is better.
* :func:`read_user` — a user's own ratings: one CSV/TSV row per candidate report (columns in
  :data:`USER_REQUIRED` plus one column per rater).

Every problem is an :class:`~radrank.errors.InputError` naming the file, the field and the row (the
case id for JSON, the 1-based line for CSV): a missing column or key, a rating that is not a number,
an annotation for a case that does not exist or a case with no annotation, a candidate named in a
relation that the case lacks, a duplicate id, an empty reference.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from radrank.context import CONTEXT_COLUMNS
from radrank.errors import InputError
from radrank.metaeval.items import ItemSet, Target, format_relations, parse_relations
from radrank.text import clean, is_missing

RADPREF_FIELDS = ("id", "ground_truth_report", "C1_report", "C2_report")
RADPREF_CANDIDATES = ("C1", "C2")
RADPREF_RATING = (1, 5)
REXVAL_CANDIDATES_FILE = "50_samples_gt_and_candidates.csv"
REXVAL_RATINGS_FILE = "6_valid_raters_per_rater_error_categories.csv"
# The four candidates are the reports a metric retrieved as closest to the ground truth (ReXVal's design).
REXVAL_CANDIDATE_COLUMNS = ("study_id", "gt_report", "radgraph", "bertscore", "s_emb", "bleu")
REXVAL_RATING_COLUMNS = ("study_number", "candidate_type", "rater_index", "error_category",
                         "clinically_significant", "num_errors")
USER_REQUIRED = ("case_id", "candidate", "reference", "hypothesis")
_TRUE, _FALSE = {"true", "1", "yes", "y", "t"}, {"false", "0", "no", "n", "f"}
_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([YMWD]?)\s*$", re.IGNORECASE)
_AGE_UNIT_YEARS = {"": 1.0, "Y": 1.0, "M": 1 / 12, "W": 7 / 365.25, "D": 1 / 365.25}


def _load_json(path):
    from radrank.ingest.detect import decode_utf8, read_bytes

    text = decode_utf8(path, read_bytes(path))
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(path, f"is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}") from None


def _number(value, *, path, field, row) -> float:
    """A finite number from a JSON number or a numeric string; anything else is an error."""
    if isinstance(value, bool) or value is None:
        raise InputError(path, f"is not a number: {value!r}", field=field, row=row)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InputError(path, f"is not a number: {value!r}", field=field, row=row) from None
    if not math.isfinite(number):
        raise InputError(path, f"is not a finite number: {value!r}", field=field, row=row)
    return number


def age_years(value, *, path, field, row) -> float:
    """Age in years from ``"72"``, ``72``, ``"072Y"``, ``"019M"``, ``"3W"``, ``"003D"``; NaN when missing."""
    if is_missing(value):
        return math.nan
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    match = _AGE.match(str(value))
    if not match:
        raise InputError(path, f"age {value!r} is not a number of years (or DICOM '072Y', '019M', '003D')",
                         field=field, row=row)
    return float(match.group(1)) * _AGE_UNIT_YEARS[match.group(2).upper()]


def _text(value, *, path, field, row, required=False) -> str:
    if value is not None and not isinstance(value, str):
        raise InputError(path, f"must be text, got {type(value).__name__}", field=field, row=row)
    text = clean(value)
    if required and not text.strip():
        raise InputError(path, "is empty (a candidate cannot be judged against an empty reference)",
                         field=field, row=row)
    return text


def _record(case: str, position: int, candidate: str, reference: str, hypothesis: str, context: dict) -> dict:
    return {"sample_id": f"{case}:{candidate}", "study_id": position, "reference": reference,
            "hypothesis": hypothesis, "context": None, **{k: context.get(k) for k in CONTEXT_COLUMNS}}


def _items_frame(rows, extra_columns=()):
    import pandas as pd

    from radrank.metaeval.items import ITEM_COLUMNS

    return pd.DataFrame(rows, columns=[*ITEM_COLUMNS, *extra_columns])


# --- RadPref -------------------------------------------------------------------------------------


def read_radpref(data_path, rater_paths, name: str = "radpref") -> ItemSet:
    """RadPref: 100 studies, a reference and two candidates each, rated 1–5 by each radiologist.

    Rater names are the annotation files' stems (``user_1`` ...). Reference: ``ground_truth_report``;
    candidates: ``C1_report``, ``C2_report``; context: ``PatientAge`` (DICOM age such as ``072Y``),
    ``PatientSex``, ``Indication``, ``Comparison`` (a leading ``Comparison:`` label removed).
    """
    cases = _load_json(data_path)
    if not isinstance(cases, list) or not cases:
        raise InputError(data_path, "must be a non-empty JSON list of cases")
    records, ids = [], {}
    for position, case in enumerate(cases):
        if not isinstance(case, dict):
            raise InputError(data_path, f"entry is a {type(case).__name__}, expected an object", row=position)
        for key in RADPREF_FIELDS:
            if key not in case:
                raise InputError(data_path, "required key is missing", field=key, row=case.get("id", position))
        case_id = _text(case["id"], path=data_path, field="id", row=position, required=True)
        if case_id in ids:
            raise InputError(data_path, f"duplicate case id (also entry {ids[case_id]})", field="id", row=position)
        ids[case_id] = position
        reference = _text(case["ground_truth_report"], path=data_path, field="ground_truth_report", row=case_id,
                          required=True)
        comparison = _text(case.get("Comparison"), path=data_path, field="Comparison", row=case_id)
        context = {
            "age": age_years(case.get("PatientAge"), path=data_path, field="PatientAge", row=case_id),
            "sex": _text(case.get("PatientSex"), path=data_path, field="PatientSex", row=case_id) or None,
            "indication": _text(case.get("Indication"), path=data_path, field="Indication", row=case_id) or None,
            "comparison": re.sub(r"^\s*comparison\s*:\s*", "", comparison, flags=re.IGNORECASE) or None,
        }
        for cand in RADPREF_CANDIDATES:
            hypothesis = _text(case[f"{cand}_report"], path=data_path, field=f"{cand}_report", row=case_id)
            records.append(_record(case_id, position, cand, reference, hypothesis, context))

    if not rater_paths:
        raise InputError(data_path, "no radiologist annotation file was given")
    raters = [Path(p).stem for p in rater_paths]
    if len(set(raters)) != len(raters):
        raise InputError(rater_paths[0], f"two annotation files have the same name: {raters}")
    ratings = {}  # (case id, candidate) -> {rater: rating}
    for rater, path in zip(raters, rater_paths):
        doc = _load_json(path)
        annotations = doc.get("annotations") if isinstance(doc, dict) else None
        if not isinstance(annotations, dict):
            raise InputError(path, "must be an object with an 'annotations' object keyed by case id",
                             field="annotations")
        for case_id in annotations:
            if case_id not in ids:
                raise InputError(path, f"annotation for a case id that is not in {data_path}",
                                 field="annotations", row=case_id)
        for case_id in ids:
            if case_id not in annotations:
                raise InputError(path, f"case {case_id!r} of {data_path} has no annotation", field="annotations",
                                 row=case_id)
            for cand in RADPREF_CANDIDATES:
                entry = annotations[case_id].get(cand) if isinstance(annotations[case_id], dict) else None
                field = f"annotations.{cand}.rating"
                if not isinstance(entry, dict) or "rating" not in entry:
                    raise InputError(path, "rating is missing", field=field, row=case_id)
                value = _number(entry["rating"], path=path, field=field, row=case_id)
                low, high = RADPREF_RATING
                if not low <= value <= high:
                    raise InputError(path, f"rating {value:g} is outside {low}-{high}", field=field, row=case_id)
                ratings.setdefault((case_id, cand), {})[rater] = value

    target = Target("rating", "radiologists' overall rating (1-5)", tuple(raters), higher_is_better=True)
    rows = []
    for rec in records:
        case_id, cand = rec["sample_id"].rsplit(":", 1)
        rows.append([rec["sample_id"], case_id, cand, None,
                     *(ratings[case_id, cand][r] for r in raters)])
    return ItemSet(name=name, kind="ratings", records=records, items=_items_frame(rows, target.columns),
                   targets=(target,), headline="pairwise_agreement",
                   description="RadPref (CRIMSON): two candidates per study rated 1-5 by "
                               f"{len(raters)} radiologists")


# --- RadJudge ------------------------------------------------------------------------------------


def read_radjudge(path, name: str = "radjudge") -> ItemSet:
    """RadJudge: categories of hand-built cases, each a reference, candidates and an expected order.

    Candidates may carry their own patient context (``{"age": ..., "indication": ...}``): two
    candidates with the same text and different patients are expected to score differently.
    """
    categories = _load_json(path)
    if not isinstance(categories, list) or not categories:
        raise InputError(path, "must be a non-empty JSON list of categories")
    records, rows, seen = [], [], {}
    for c_index, category in enumerate(categories):
        if not isinstance(category, dict) or "category" not in category or not isinstance(category.get("tests"), list):
            raise InputError(path, "a category must be an object with 'category' and a list 'tests'",
                             field="category", row=c_index)
        cat_name = _text(category["category"], path=path, field="category", row=c_index, required=True)
        for test in category["tests"]:
            for key in ("id", "ground_truth", "candidates", "expected_ranking"):
                if not isinstance(test, dict) or key not in test:
                    raise InputError(path, f"required key is missing in a case of category {cat_name!r}",
                                     field=key, row=test.get("id") if isinstance(test, dict) else None)
            case_id = str(test["id"]).strip()
            if not case_id or case_id in seen:
                raise InputError(path, "case id is empty or repeated", field="id", row=case_id)
            seen[case_id] = len(seen)
            reference = _text(test["ground_truth"], path=path, field="ground_truth", row=case_id, required=True)
            candidates = test["candidates"]
            if not isinstance(candidates, dict) or len(candidates) < 2:
                raise InputError(path, "needs an object of at least two candidates", field="candidates",
                                 row=case_id)
            relations = parse_relations(test["expected_ranking"], candidates, path=path, row=case_id)
            for cand, info in candidates.items():
                field = f"candidates.{cand}"
                if not isinstance(info, dict) or "text" not in info:
                    raise InputError(path, "a candidate must be an object with 'text'", field=field, row=case_id)
                ctx = info.get("context") or {}
                if not isinstance(ctx, dict):
                    raise InputError(path, "context must be an object", field=f"{field}.context", row=case_id)
                ctx = {str(k).lower(): v for k, v in ctx.items()}
                context = {
                    "age": age_years(ctx.get("age"), path=path, field=f"{field}.context.age", row=case_id),
                    **{k: _text(ctx.get(k), path=path, field=f"{field}.context.{k}", row=case_id) or None
                       for k in ("sex", "indication", "comparison")},
                }
                hypothesis = _text(info["text"], path=path, field=f"{field}.text", row=case_id)
                records.append(_record(case_id, seen[case_id], cand, reference, hypothesis, context))
                rows.append([f"{case_id}:{cand}", case_id, cand, cat_name, format_relations(relations)])
    return ItemSet(name=name, kind="ranking", records=records, items=_items_frame(rows, ["expected_ranking"]),
                   headline="pass_rate",
                   description="RadJudge (CRIMSON): hand-built cases with an expected order of their candidates")


# --- ReXVal --------------------------------------------------------------------------------------


def _bool(value: str, *, path, field, row) -> bool:
    v = value.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise InputError(path, f"is not true/false: {value!r}", field=field, row=row)


def read_rexval(folder, name: str = "rexval") -> ItemSet:
    """ReXVal: 50 MIMIC-CXR studies × 4 candidates, six radiologists' error counts per category.

    ``50_samples_gt_and_candidates.csv``: ``study_id``, ``gt_report`` and one column per candidate
    (``radgraph``, ``bertscore``, ``s_emb``, ``bleu``). ``6_valid_raters_per_rater_error_categories.csv``:
    one row per (study, candidate, rater, error category, significance) with ``study_number`` (the
    study's 0-based row in the first file), ``candidate_type`` (a candidate column name),
    ``rater_index``, ``error_category``, ``clinically_significant`` (true/false) and ``num_errors``.
    A rater's count for a candidate is the sum of their rows (0 when they have none); the targets are
    total errors and clinically significant errors per rater (lower is better).
    """
    from radrank.ingest.tables import read_csv_rows

    folder = Path(folder)
    cand_path, rating_path = folder / REXVAL_CANDIDATES_FILE, folder / REXVAL_RATINGS_FILE
    studies = read_csv_rows(cand_path, REXVAL_CANDIDATE_COLUMNS)
    candidates = REXVAL_CANDIDATE_COLUMNS[2:]
    records, case_ids = [], []
    for position, (line, row) in enumerate(studies):
        case_id = row["study_id"].strip()
        if not case_id or case_id in case_ids:
            raise InputError(cand_path, "study_id is empty or repeated", field="study_id", row=line)
        case_ids.append(case_id)
        reference = _text(row["gt_report"], path=cand_path, field="gt_report", row=line, required=True)
        for cand in candidates:
            records.append(_record(case_id, position, cand, reference, clean(row[cand]), {}))

    counts: dict = {}  # (study position, candidate, rater) -> [total, significant]
    raters: list = []
    for line, row in read_csv_rows(rating_path, REXVAL_RATING_COLUMNS):
        number = _number(row["study_number"], path=rating_path, field="study_number", row=line)
        if not number.is_integer() or not 0 <= number < len(case_ids):
            raise InputError(rating_path, f"study_number {row['study_number']!r} is not a row of {cand_path} "
                             f"(0-based, {len(case_ids)} studies)", field="study_number", row=line)
        cand = row["candidate_type"].strip()
        if cand not in candidates:
            raise InputError(rating_path, f"candidate_type {cand!r} is not a candidate column of {cand_path} "
                             f"{list(candidates)}", field="candidate_type", row=line)
        rater = row["rater_index"].strip()
        if not rater:
            raise InputError(rating_path, "rater_index is empty", field="rater_index", row=line)
        if rater not in raters:
            raters.append(rater)
        errors = _number(row["num_errors"], path=rating_path, field="num_errors", row=line)
        if errors < 0:
            raise InputError(rating_path, f"num_errors {errors:g} is negative", field="num_errors", row=line)
        significant = _bool(row["clinically_significant"], path=rating_path, field="clinically_significant",
                            row=line)
        total = counts.setdefault((int(number), cand, rater), [0.0, 0.0])
        total[0] += errors
        total[1] += errors if significant else 0.0
    raters = sorted(raters, key=lambda r: (len(r), r))
    names = [f"rater_{r}" for r in raters]
    targets = (Target("total_errors", "errors per report (all)", tuple(names), higher_is_better=False),
               Target("significant_errors", "clinically significant errors per report", tuple(names),
                      higher_is_better=False))
    rows = []
    for rec in records:
        position, cand = rec["study_id"], rec["sample_id"].rsplit(":", 1)[1]
        per_rater = [counts.get((position, cand, r), [0.0, 0.0]) for r in raters]
        rows.append([rec["sample_id"], case_ids[position], cand, None,
                     *(c[0] for c in per_rater), *(c[1] for c in per_rater)])
    columns = [*targets[0].columns, *targets[1].columns]
    return ItemSet(name=name, kind="ratings", records=records, items=_items_frame(rows, columns), targets=targets,
                   headline="kendall_tau_b_total_errors", fitted_metrics=("radcliq",),
                   fitted_note="fitted on ReXVal: not held-out",
                   description=f"ReXVal (PhysioNet): {len(case_ids)} studies x {len(candidates)} candidates, "
                               f"error counts by {len(raters)} radiologists")


# --- a user's own ratings ------------------------------------------------------------------------


def read_user(path, name: str, raters, higher_is_better: bool = True) -> ItemSet:
    """A user's ratings: one row per candidate report.

    Columns: ``case_id``, ``candidate``, ``reference``, ``hypothesis``, one column per rater (named in
    the config, numbers; ``higher_is_better`` says which way is good), and optionally ``category``,
    ``age``, ``sex``, ``indication``, ``comparison``. Candidates of one case share its reference.
    """
    from radrank.ingest.tables import read_csv_rows

    raters = list(raters)
    if not raters:
        raise InputError(path, f"set {name!r} names no rater column (config metaeval.user[].raters)")
    rows_in = read_csv_rows(path, (*USER_REQUIRED, *raters))
    records, rows, positions, references, seen = [], [], {}, {}, {}
    target = Target("rating", "raters' rating" + ("" if higher_is_better else " (lower is better)"),
                    tuple(raters), higher_is_better=bool(higher_is_better))
    for line, row in rows_in:
        case_id, cand = row["case_id"].strip(), row["candidate"].strip()
        for field, value in (("case_id", case_id), ("candidate", cand)):
            if not value:
                raise InputError(path, "is empty", field=field, row=line)
        if (case_id, cand) in seen:
            raise InputError(path, f"candidate {cand!r} of case {case_id!r} is listed twice (also line "
                             f"{seen[case_id, cand]})", field="candidate", row=line)
        seen[case_id, cand] = line
        reference = _text(row["reference"], path=path, field="reference", row=line, required=True)
        first = references.setdefault(case_id, (reference, line))
        if first[0] != reference:
            raise InputError(path, f"case {case_id!r} has a different reference on line {first[1]}; the "
                             "candidates of one case are judged against one reference", field="reference", row=line)
        position = positions.setdefault(case_id, len(positions))
        context = {
            "age": age_years(row.get("age"), path=path, field="age", row=line),
            **{k: clean(row.get(k)) or None for k in ("sex", "indication", "comparison")},
        }
        records.append(_record(case_id, position, cand, reference, clean(row["hypothesis"]), context))
        values = [_number(row[r], path=path, field=r, row=line) for r in raters]
        rows.append([f"{case_id}:{cand}", case_id, cand, clean(row.get("category")) or None, *values])
    order = sorted(range(len(records)), key=lambda i: records[i]["study_id"])  # cases together, file order within
    return ItemSet(name=name, kind="ratings", records=[records[i] for i in order],
                   items=_items_frame([rows[i] for i in order], target.columns), targets=(target,),
                   headline="kendall_tau_b",
                   description=f"{name}: {len(positions)} cases, {len(records)} candidates rated by {len(raters)} "
                               "rater(s)")

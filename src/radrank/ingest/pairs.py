"""Canonical pairs and the drop file.

A pair is (sample_id, study_id, reference, hypothesis, context, age, sex,
indication, comparison). Policies:

* empty reference → dropped (reason ``empty_reference``): nothing to score against;
* empty or absent hypothesis → ``empty_hypothesis`` policy: ``score`` keeps the
  pair with hypothesis "" (leaderboard default: a model gains nothing by staying
  silent) or ``drop`` removes it (RadHarmony's behaviour); listed either way;
* a prediction without a reference → dropped (``missing_reference``);
* text over ``max_chars`` characters → cut to ``max_chars`` and listed
  (``too_long``, action ``truncated``);
* a ReXrank record read in the literal mode (``literal``) is scored as ReXrank's pipeline scores it,
  blank texts included; each of its ``notes`` (a missing value that shaped the pair) is listed with
  action ``scored_literally``.

Every row of the drop file says what happened: ``action`` is ``dropped``,
``scored_as_empty``, ``scored_literally`` or ``truncated``.

A ``reference_path`` given with a submission that holds its own references (a ReXrank JSON,
parquet pairs) is an error (:func:`check_reference_path`), not a file ignored without a word.
"""

from __future__ import annotations

import math

from radrank.context import CONTEXT_COLUMNS, parse_context
from radrank.errors import ConfigError, InputError
from radrank.ingest import references, rexrank, tables
from radrank.ingest.detect import detect_format

PAIRS_COLUMNS = ("sample_id", "study_id", "reference", "hypothesis", "context") + CONTEXT_COLUMNS
DROPS_COLUMNS = ("sample_id", "study_id", "reason", "action", "row", "detail")
EMPTY_HYPOTHESIS_POLICIES = ("score", "drop")


def _drop(record: dict, reason: str, action: str, detail: str = "") -> dict:
    return {
        "sample_id": record["sample_id"],
        "study_id": record.get("study_id", -1),
        "reason": reason,
        "action": action,
        "row": str(record.get("row", "")),
        "detail": detail or record.get("detail", ""),
    }


def _is_na(value) -> bool:
    import pandas as pd

    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def build_pairs(records, unmatched=(), *, empty_hypothesis: str = "drop", max_chars: int | None = None):
    """Apply the policies above; return ``(pairs, drops)`` DataFrames."""
    import pandas as pd

    if empty_hypothesis not in EMPTY_HYPOTHESIS_POLICIES:
        raise ConfigError(f"empty_hypothesis must be one of {EMPTY_HYPOTHESIS_POLICIES}, got {empty_hypothesis!r}")
    pairs, drops = [], []
    silent_action = "scored_as_empty" if empty_hypothesis == "score" else "dropped"

    for rec in unmatched:
        if rec["reason"] == "missing_prediction" and rec["reference"].strip():
            drops.append(_drop(rec, "missing_prediction", silent_action))
            if empty_hypothesis == "score":
                records = list(records) + [dict(rec, hypothesis="", context=None)]
        else:
            drops.append(_drop(rec, rec["reason"], "dropped"))

    for rec in records:
        literal = rec.get("literal", False)  # ReXrank's literal mode: scored as its pipeline scores it
        for reason, detail in rec.get("notes", ()):
            drops.append(_drop(rec, reason, "scored_literally", detail))
        if not literal and not rec["reference"].strip():
            drops.append(_drop(rec, "empty_reference", "dropped", "reference text is empty after section selection"))
            continue
        hyp = rec["hypothesis"]
        if not literal and not hyp.strip():
            if rec.get("reason") != "missing_prediction":  # already listed above
                drops.append(_drop(rec, "empty_hypothesis", silent_action))
            if empty_hypothesis == "drop":
                continue
            hyp = ""
        row = {"sample_id": rec["sample_id"], "study_id": rec["study_id"], "reference": rec["reference"],
               "hypothesis": hyp, "context": rec.get("context")}
        if max_chars is not None:
            for col in ("reference", "hypothesis"):
                if len(row[col]) > max_chars:
                    drops.append(_drop(rec, "too_long", "truncated",
                                       f"{col} had {len(row[col])} characters; cut to {max_chars}"))
                    row[col] = row[col][:max_chars]
        ctx = parse_context(row["context"])
        for col in CONTEXT_COLUMNS:  # explicit columns (parquet input) win over the context string
            value = rec.get(col)
            ctx[col] = value if value is not None and not (isinstance(value, float) and math.isnan(value)) else ctx[col]
        row.update(ctx)
        pairs.append(row)

    pairs_df = pd.DataFrame(pairs, columns=list(PAIRS_COLUMNS))
    pairs_df = pairs_df.sort_values("study_id", kind="stable").reset_index(drop=True)
    pairs_df["study_id"] = pairs_df["study_id"].astype("int64")
    pairs_df["age"] = pairs_df["age"].astype("float64")
    for col in ("context", "sex", "indication", "comparison"):
        # Missing is None, as parse_context returns it (pandas would otherwise
        # turn None into NaN in a column that also holds strings).
        pairs_df[col] = pd.Series([None if _is_na(v) else v for v in pairs_df[col]], dtype="object")
    drops_df = pd.DataFrame(drops, columns=list(DROPS_COLUMNS))
    drops_df = drops_df.sort_values(["study_id", "reason"], kind="stable").reset_index(drop=True)
    return pairs_df, drops_df


def check_reference_path(path, fmt: str, reference_path, **where) -> None:
    """A ground truth given with a submission that holds its own references (a ReXrank JSON, parquet pairs) would
    be ignored: an :class:`InputError` naming the submission and ``reference_path`` (``where``: its sheet row)."""
    if reference_path and fmt != "csv":
        kind = {"rexrank_json": "ReXrank JSON submission", "parquet": "parquet pairs file"}[fmt]
        raise InputError(path, f"is a {kind}, which holds its own references: the reference_path "
                         f"{reference_path} given with it would be ignored; leave reference_path empty (it is the "
                         "ground truth of a CSV submission)", field="reference_path", **where)


def ingest_submission(path, split: str, *, reference_path=None, ref_section: str | None = None,
                      empty_hypothesis: str = "drop", max_chars: int | None = None, missing_section: str = "drop",
                      canonical: dict | None = None, canonical_path=None, dataset: str = "",
                      on_mismatch: str = "error"):
    """Read one submission for one split and return ``(pairs, drops, fmt)``. ``canonical``: the dataset's
    references (:func:`radrank.ingest.references.read_canonical`, read from ``canonical_path``), which the
    submission's references are checked against (:func:`radrank.ingest.references.check_records`)."""
    fmt = detect_format(path)
    check_reference_path(path, fmt, reference_path)
    unmatched: list = []
    if fmt == "rexrank_json":
        records = rexrank.read(path, split, missing_section)
    elif fmt == "csv":
        if reference_path is None:
            raise ConfigError(f"{path}: a CSV submission needs a ground-truth CSV (reference_path in the sheet)")
        records, unmatched = tables.read_csv_pair(path, reference_path, ref_section or "full")
    else:
        records = tables.read_parquet_pairs(path, ref_section)
    if canonical is not None:
        # a missing prediction scored as empty is scored against its reference too: checked with the rest
        scored = records + [u for u in unmatched if u["reason"] == "missing_prediction"]
        kept, mismatched = references.check_records(
            scored, canonical, dataset=dataset, split=split, path=path, canonical_path=canonical_path,
            on_mismatch=on_mismatch, source=reference_path if fmt == "csv" else path)
        keep = {id(r) for r in kept}
        records = [r for r in records if id(r) in keep]
        unmatched = [u for u in unmatched if u["reason"] != "missing_prediction" or id(u) in keep] + mismatched
    pairs, drops = build_pairs(records, unmatched, empty_hypothesis=empty_hypothesis, max_chars=max_chars)
    return pairs, drops, fmt

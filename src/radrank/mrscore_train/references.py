"""Reference reports for MRScore training: findings and impression of each ground-truth report.

The rubric's two heaviest criteria (50 of 100 points) check the impression, so a reference needs both
sections. Sources:

* a ReXrank JSON (a submission's file of the run, or any other): ``section_findings`` and
  ``section_impression`` of each entry, else its ``report`` split into sections
  (:func:`radrank.sections.split_sections`); the id is the entry's key;
* a CSV / TSV: an id column (``reference_id``, ``case_id`` or ``study_id``, the first present) and either
  ``findings`` and ``impression`` columns or a ``report`` column split into sections.

A reference without findings or without an impression is listed in the drop table with the file, the
row and the reason, and not used; an id repeated in one source is an error. Ids are ``<source>:<id>``
so that two sources never collide. The text a reference shows the writer, the judge and the reward
model is ``Findings: … Impression: …``.
"""

from __future__ import annotations

from pathlib import Path

from radrank.errors import InputError
from radrank.text import clean, normalize_whitespace

ID_COLUMNS = ("reference_id", "case_id", "study_id")
COLUMNS = ("reference_id", "source", "row", "findings", "impression", "reference")
DROP_COLUMNS = ("source", "row", "reference_id", "reason")


def reference_text(findings: str, impression: str) -> str:
    return f"Findings: {findings} Impression: {impression}"


def _sections_of(report: str) -> tuple[str, str]:
    from radrank.sections import split_sections

    parts, has_headers = split_sections(report)
    if not has_headers:
        return "", ""  # one unlabelled body: which part is the impression is unknown
    return parts.get("findings", ""), parts.get("impression", "")


def _text(value) -> str:
    return normalize_whitespace(clean(value))


def _json_rows(path):
    from radrank.ingest import rexrank

    for case_id, entry in rexrank.load(path).items():
        if not isinstance(entry, dict):
            raise InputError(path, f"entry must be a JSON object, found {type(entry).__name__}", row=case_id)
        for field in ("section_findings", "section_impression", "report"):
            value = entry.get(field)
            if value is not None and not isinstance(value, (str, float)):
                raise InputError(path, f"must be text, found {type(value).__name__}", field=field, row=case_id)
        findings, impression = _text(entry.get("section_findings")), _text(entry.get("section_impression"))
        if not (findings and impression) and _text(entry.get("report")):
            f2, i2 = _sections_of(str(entry["report"]))
            findings, impression = findings or f2, impression or i2
        yield str(case_id), str(case_id), findings, impression


def _table_rows(path):
    if Path(path).suffix.lower() == ".parquet":
        from radrank.ingest.tables import read_parquet_table

        frame = read_parquet_table(path)
        rows = [(i + 2, {k: ("" if v is None else str(v)) for k, v in r.items()})
                for i, r in enumerate(frame.to_dict("records"))]
        columns = list(frame.columns)
    else:
        from radrank.ingest.tables import read_csv_rows

        rows = read_csv_rows(path, ())
        columns = list(rows[0][1]) if rows else []
    id_column = next((c for c in ID_COLUMNS if c in columns), None)
    if id_column is None:
        raise InputError(path, f"no id column: name one of {', '.join(ID_COLUMNS)}")
    split = "findings" not in columns or "impression" not in columns
    if split and "report" not in columns:
        raise InputError(path, "needs columns findings and impression, or a report column with FINDINGS: and "
                         "IMPRESSION: sections")
    for line, row in rows:
        rid = (row.get(id_column) or "").strip()
        if not rid:
            raise InputError(path, "id is empty", field=id_column, row=line)
        if split:
            findings, impression = _sections_of(row.get("report") or "")
        else:
            findings, impression = _text(row.get("findings")), _text(row.get("impression"))
        yield line, rid, findings, impression


def read_references(sources: list[tuple[str, str]]):
    """``(references, drops)`` DataFrames from ``sources`` (label, path), in source and row order."""
    import pandas as pd

    records, drops = [], []
    for label, path in sources:
        rows = _json_rows(path) if str(path).lower().endswith(".json") else _table_rows(path)
        seen: dict = {}
        for row, rid, findings, impression in rows:
            if rid in seen:
                raise InputError(path, f"reference id {rid!r} appears twice (also row {seen[rid]})", row=row)
            seen[rid] = row
            reference_id = f"{label}:{rid}"
            missing = [name for name, text in (("findings", findings), ("impression", impression)) if not text]
            if missing:
                drops.append({"source": str(path), "row": str(row), "reference_id": reference_id,
                              "reason": f"no {' and no '.join(missing)}: a training reference needs findings and "
                                        "an impression (the rubric checks the impression)"})
                continue
            records.append({"reference_id": reference_id, "source": str(path), "row": str(row),
                            "findings": findings, "impression": impression,
                            "reference": reference_text(findings, impression)})
    return pd.DataFrame(records, columns=list(COLUMNS)), pd.DataFrame(drops, columns=list(DROP_COLUMNS))


def sample(references, max_references: int | None, seed: int):
    """At most ``max_references`` of them, a seeded sample kept in source order."""
    import numpy as np

    if max_references is None or len(references) <= max_references:
        return references.reset_index(drop=True)
    keep = np.sort(np.random.default_rng(seed).choice(len(references), size=max_references, replace=False))
    return references.iloc[keep].reset_index(drop=True)

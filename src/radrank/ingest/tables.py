"""CSV report pairs and canonical parquet pairs.

CSV (ReXrank's gt/pred layout): two files with columns ``study_id``, ``report``
and optionally ``case_id``, joined on study_id. The sample id is the case_id of
the ground truth when that column exists, else the study_id. Ids present on one
side only are returned as unmatched records, so the caller can list them in the
drop file. The reference goes through the section parser (``ref_section``);
the prediction is taken as written. A file whose header line has more tabs
than commas is read as tab-separated. Row numbers (in errors and in the drop
file) are 1-based lines of the file, the header being line 1.

Parquet: columns ``sample_id``, ``reference``, ``hypothesis`` and optionally
``context``, ``age``, ``sex``, ``indication``, ``comparison``.

Errors naming the file, the column and the row (files are written by the people ranked):
a column named twice in a header (which copy would count?); in a CSV pair whose
files both have ``case_id``, a prediction whose case_id differs from the ground
truth's for the same study_id (it would be scored against another case's report:
an error, not a drop); in parquet, a ``sample_id`` that is neither text nor an
integer (a list or an object would become its repr), a ``context`` that is not
text, an ``age`` that is not a finite number of years from 0 to
:data:`radrank.context.MAX_AGE`, and text that is not valid UTF-8.
"""

from __future__ import annotations

import csv
import io
import math
import numbers

from radrank.context import MAX_AGE, plausible_age
from radrank.errors import InputError
from radrank.ingest.detect import decode_utf8, read_bytes
from radrank.sections import parse_section
from radrank.text import clean, is_missing

CSV_REQUIRED = ("study_id", "report")
PARQUET_REQUIRED = ("sample_id", "reference", "hypothesis")
PARQUET_OPTIONAL = ("context", "age", "sex", "indication", "comparison")
SHOWN_HEADER_CHARS = 200  # of a header in a "columns: ..." message (a wrong file's first line may be anything)
_LINE = object()  # key of a row's line number; never a column name


def _read_csv_rows(path, required=CSV_REQUIRED) -> list[dict]:
    text = decode_utf8(path, read_bytes(path))
    # Judge the delimiter by the header line only: report text is full of commas.
    header_line = text.lstrip("\r\n").splitlines()[0] if text.strip() else ""
    delimiter = "\t" if header_line.count("\t") > header_line.count(",") else ","
    if csv.field_size_limit() < len(text):  # one field may hold a very long report; max_chars applies later
        csv.field_size_limit(len(text) + 1)
    # strict: a quote that is opened and never closed is an error, not a field that swallows every
    # later line of the file into one report.
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    ended = [0]  # line where the last complete record ended
    try:
        return _collect_rows(path, reader, ended, required)
    except csv.Error as e:
        start = ended[0] + 1
        lines = text.split("\n")  # the csv module's line count: \n ends a line
        line = lines[start - 1].rstrip("\r") if start <= len(lines) else ""
        field = _quoted_field(line, reader.fieldnames or [], delimiter)
        if "unexpected end of data" in str(e):
            why = ("a quoted field opened in this record is never closed: an unclosed quote (\") would swallow "
                   "every later line into one report; close it, or write a quote inside a quoted field as two "
                   "(\"\")")
        else:
            why = (f"malformed quoting ({e}): a quote opened in this record closes on a later line, or a quote "
                   "inside a quoted field is not written as two (\"\")")
        raise InputError(path, f"is not a readable CSV: {why}", row=start, field=field) from None


def shown_columns(header) -> str:
    """A header for a message: its columns joined, cut to :data:`SHOWN_HEADER_CHARS` characters (a file that is not
    the table it should be, e.g. a link to /proc/self/environ, would otherwise be printed whole)."""
    text = ", ".join(map(str, header))
    if len(text) <= SHOWN_HEADER_CHARS:
        return text
    return f"{text[:SHOWN_HEADER_CHARS]}… ({len(text) - SHOWN_HEADER_CHARS:,} more characters)"


def _quoted_field(line: str, header: list, delimiter: str) -> str | None:
    """The column whose value opens a quote on ``line`` (the start of a badly quoted record), if known."""
    for pos, ch in enumerate(line):
        if ch == '"' and (pos == 0 or line[pos - 1] == delimiter):
            try:
                index = len(next(csv.reader([line[:pos] + "x"], delimiter=delimiter))) - 1
            except (csv.Error, StopIteration):
                return None
            return header[index].strip() if index < len(header) else None
    return None


def _collect_rows(path, reader: csv.DictReader, ended: list, required=CSV_REQUIRED) -> list[dict]:
    if reader.fieldnames is None:
        raise InputError(path, "CSV has no header row")
    ended[0] = reader.line_num
    header = [h.strip() for h in reader.fieldnames]
    seen: dict = {}
    for index, col in enumerate(header, start=1):
        if col and col in seen:  # DictReader would keep the last copy's values without a word
            raise InputError(path, f"column appears twice in the header (columns {seen[col]} and {index}); "
                             "which copy would count? Name each column once", field=col, row=reader.line_num)
        seen[col] = index
    for col in required:
        if col not in header:
            raise InputError(path, f"required column is missing (columns: {shown_columns(header)})", field=col)
    rows = []
    for row in reader:
        # The row number is the 1-based line of the file where the record starts
        # (the header is line 1; a quoted field may span several lines).
        values = [v for v in row.values() if isinstance(v, str)] + list(row.get(None) or [])
        line = reader.line_num - sum(v.count("\n") for v in values)
        ended[0] = reader.line_num
        if None in row:
            raise InputError(path, "row has more fields than the header", row=line)
        rows.append({k.strip(): v for k, v in row.items()} | {_LINE: line})
    if not rows:
        raise InputError(path, "CSV has a header but no rows")
    return rows


def csv_header(path) -> list[str] | None:
    """The columns of a CSV's header line, judged from its first :data:`radrank.ingest.detect.SNIFF_BYTES` as
    :func:`read_csv_rows` judges them (the delimiter by the header line); None when they cannot be told (the
    file's reader then says why, naming the row)."""
    from radrank.ingest.detect import SNIFF_BYTES, FileProblem, read_regular

    try:
        text = read_regular(path, head=SNIFF_BYTES).decode("utf-8-sig", errors="replace")
    except FileProblem:
        return None
    line = next((x for x in text.splitlines() if x.strip()), None)
    if line is None:
        return None
    delimiter = "\t" if line.count("\t") > line.count(",") else ","
    try:
        return [c.strip() for c in next(csv.reader([line], delimiter=delimiter))]
    except (csv.Error, StopIteration):
        return None


def read_csv_rows(path, required) -> list[tuple[int, dict]]:
    """``(line, row)`` for every record of a CSV (or tab-separated) file that has the ``required``
    columns; values are strings as written, the line is 1-based with the header on line 1."""
    return [(row.pop(_LINE), row) for row in _read_csv_rows(path, required)]


def _index_by(path, rows: list[dict], key: str) -> dict[str, tuple[int, dict]]:
    out: dict[str, tuple[int, dict]] = {}
    for row in rows:
        i = row[_LINE]
        value = (row.get(key) or "").strip()
        if not value:
            raise InputError(path, "id is empty", field=key, row=i)
        if value in out:
            raise InputError(path, f"duplicate id {value!r} (also in row {out[value][0]})", field=key, row=i)
        out[value] = (i, row)
    return out


def _csv_sample_id(study: str, row: dict) -> str:
    """A CSV row's sample id: its case_id when it has one, else its study_id."""
    case = (row.get("case_id") or "").strip()
    return case or study


def read_ground_truth(path, ref_section: str) -> list[dict]:
    """A ground-truth CSV alone (a dataset's canonical references): one record per row with sample_id,
    study_id (the row's position), reference (its ``report`` through the section parser), reference_field
    and row; ids checked as :func:`read_csv_pair` checks them."""
    rows = _read_csv_rows(path)
    by_study = _index_by(path, rows, "study_id")
    if "case_id" in rows[0]:
        _index_by(path, rows, "case_id")
    return [{"sample_id": _csv_sample_id(study, row), "study_id": position, "row": row_no,
             "reference_field": "report", "reference": parse_section(clean(row["report"]), ref_section)}
            for position, (study, (row_no, row)) in enumerate(by_study.items())]


def read_csv_pair(pred_path, ref_path, ref_section: str) -> tuple[list[dict], list[dict]]:
    """Return (matched records, unmatched records) for a prediction/ground-truth CSV pair."""
    preds = _read_csv_rows(pred_path)
    refs = _read_csv_rows(ref_path)
    pred_by_study = _index_by(pred_path, preds, "study_id")
    ref_by_study = _index_by(ref_path, refs, "study_id")
    for path, rows in ((pred_path, preds), (ref_path, refs)):
        if "case_id" in rows[0]:
            _index_by(path, rows, "case_id")  # duplicate case ids are an error too
    if "case_id" in preds[0] and "case_id" in refs[0]:
        # Both files name each study's case: a prediction whose case differs from the ground truth's for the
        # same study_id belongs to another case (an export joined on the wrong key), never scored against it.
        for study, (row_no, pred_row) in pred_by_study.items():
            if study in ref_by_study:
                ref_row_no, ref_row = ref_by_study[study]
                ours, theirs = pred_row["case_id"].strip(), ref_row["case_id"].strip()
                if ours != theirs:
                    raise InputError(pred_path, f"case_id {ours!r} of study_id {study} differs from the ground "
                                     f"truth's {theirs!r} ({ref_path}, row {ref_row_no}): the prediction would be "
                                     "scored against another case's report; fix the ids", field="case_id",
                                     row=row_no)
    common = [s for s in ref_by_study if s in pred_by_study]
    if not common:
        raise InputError(
            pred_path,
            f"no study_id in common with the ground truth {ref_path} "
            f"(predictions: {len(pred_by_study)} ids, ground truth: {len(ref_by_study)} ids)",
            field="study_id",
        )

    matched, unmatched = [], []
    for position, (study, (row_no, ref_row)) in enumerate(ref_by_study.items()):
        reference = parse_section(clean(ref_row["report"]), ref_section)
        if study in pred_by_study:
            _, pred_row = pred_by_study[study]
            matched.append(
                {
                    "sample_id": _csv_sample_id(study, ref_row),
                    "study_id": position,
                    "reference": reference,
                    "reference_field": "report",
                    "hypothesis": clean(pred_row["report"]),
                    "context": None,
                    "row": row_no,
                }
            )
        else:
            unmatched.append({"sample_id": _csv_sample_id(study, ref_row), "reason": "missing_prediction",
                              "study_id": position, "reference": reference, "row": row_no,
                              "detail": f"study_id {study} is in the ground truth only"})
    for study, (row_no, pred_row) in pred_by_study.items():
        if study not in ref_by_study:
            unmatched.append({"sample_id": _csv_sample_id(study, pred_row), "reason": "missing_reference",
                              "row": row_no, "detail": f"study_id {study} is in the predictions only"})
    return matched, unmatched


def read_parquet_table(path):
    """The parquet file as a DataFrame, read from its bytes (:func:`read_bytes`: a regular file only); a repeated
    column, or a text value that is not UTF-8, is an error naming the column (and the row)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = read_bytes(path)
    try:
        parquet = pq.ParquetFile(pa.BufferReader(data))
        names = parquet.schema_arrow.names
    except Exception as e:  # pyarrow raises several types for corrupt files
        raise InputError(path, f"cannot be read as parquet: {_one_line(e)}") from None
    seen: dict = {}
    for index, name in enumerate(names, start=1):
        if name in seen:
            raise InputError(path, f"column appears twice (columns {seen[name]} and {index}); which copy would "
                             "count? Name each column once", field=name)
        seen[name] = index
    try:
        table = parquet.read()
    except Exception as e:
        raise InputError(path, f"cannot be read as parquet: {_one_line(e)}") from None
    for name, column in zip(table.column_names, table.columns):
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            try:
                column.validate(full=True)
            except pa.ArrowInvalid:
                binary = pa.large_binary() if pa.types.is_large_string(column.type) else pa.binary()
                for row, value in enumerate(column.cast(binary).to_pylist()):
                    try:
                        value is None or value.decode("utf-8")
                    except UnicodeDecodeError as e:
                        raise InputError(path, f"text is not valid UTF-8 (byte 0x{value[e.start]:02x} at offset "
                                         f"{e.start}); write the file with valid UTF-8 strings", field=name,
                                         row=row) from None
    try:
        return table.to_pandas()
    except Exception as e:
        raise InputError(path, f"cannot be read as parquet: {_one_line(e)}") from None


def _one_line(error: Exception, limit: int = 300) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= limit else text[:limit] + " ..."


def _sample_id(path, value, row: int) -> str:
    """A parquet sample id: text or an integer (a list, an object, a float or bytes would become its repr)."""
    if is_missing(value):
        raise InputError(path, "sample id is empty", field="sample_id", row=row)
    if isinstance(value, str):
        return value
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return str(int(value))
    found = _kind(value)
    if isinstance(value, numbers.Number):
        found = f"{found} {value!r}"
    raise InputError(path, f"sample id must be text or an integer, found {found}", field="sample_id", row=row)


def _kind(value) -> str:
    """What a parquet value is, in the file's terms (a list column reaches pandas as a numpy array)."""
    import numpy as np

    return "list" if isinstance(value, (np.ndarray, list)) else type(value).__name__


def read_parquet_pairs(path, ref_section: str | None) -> list[dict]:
    df = read_parquet_table(path)
    for col in PARQUET_REQUIRED:
        if col not in df.columns:
            raise InputError(path, f"required column is missing (columns: {shown_columns(df.columns)})",
                             field=col)
    if df.empty:
        raise InputError(path, "parquet file has no rows")
    seen: dict[str, int] = {}
    records = []
    columns = list(df.columns)
    for i, values in enumerate(df.itertuples(index=False, name=None), start=0):
        row = dict(zip(columns, values))
        sid = _sample_id(path, row["sample_id"], i)
        if sid in seen:
            raise InputError(path, f"duplicate sample id {sid!r} (also in row {seen[sid]})", field="sample_id", row=i)
        seen[sid] = i
        for col in ("reference", "hypothesis", "context"):
            value = row.get(col)
            if not is_missing(value) and not isinstance(value, str):
                raise InputError(path, f"must be text, found {_kind(value)}", field=col, row=i)
        reference = clean(row["reference"])
        record = {
            "sample_id": sid,
            "study_id": i,
            "reference": parse_section(reference, ref_section) if ref_section else reference,
            "reference_field": "reference",
            "hypothesis": clean(row["hypothesis"]),
            "context": clean(row.get("context")) or None,
            "row": i,
        }
        for col in PARQUET_OPTIONAL[1:]:
            if col in row:
                record[col] = _context_value(path, col, row[col], i)
        records.append(record)
    return records


def _context_value(path, column: str, value, row: int):
    """A parquet context column's value: ``age`` a number (numeric text allowed), the others text;
    missing stays missing (None / NaN)."""
    import pandas as pd

    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    if column == "age":
        if isinstance(value, bool):
            raise InputError(path, f"must be a number of years, found {value!r}", field=column, row=row)
        if isinstance(value, str):
            if is_missing(value):
                return None
            try:
                age = float(value)
            except ValueError:
                raise InputError(path, f"must be a number of years, found {value!r}", field=column,
                                 row=row) from None
            return _age(path, age, value, row)
        if not isinstance(value, numbers.Real):  # a list, an array, bytes: never an age
            raise InputError(path, f"must be a number of years, found {type(value).__name__} {value!r}",
                             field=column, row=row)
        return _age(path, float(value), float(value), row)
    if not isinstance(value, str):
        raise InputError(path, f"must be text, found {type(value).__name__}", field=column, row=row)
    return None if is_missing(value) else value


def _age(path, age: float, value, row: int) -> float | None:
    """An age in years within [0, MAX_AGE]; NaN (written as a number) is missing, anything else an error."""
    if math.isnan(age):
        return None
    if not plausible_age(age):
        raise InputError(path, f"must be an age in years from 0 to {MAX_AGE}, found {value!r}", field="age",
                         row=row)
    return age

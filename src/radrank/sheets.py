"""Sheets people write: the submissions sheet and the models sheet (TSV or CSV), read strictly.

Blank lines and ``#`` comments are skipped; a row with more cells than the header (a stray tab or
comma) is an error naming the row, its line and the extra cells.
"""

from __future__ import annotations

import re
from pathlib import Path

from radrank.errors import ConfigError

NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.+-]*"
_NAME_RE = re.compile(rf"^{NAME_PATTERN}$")


def is_name(value: str) -> bool:
    """A model or dataset name: letters, digits and ``_ . + -``, not starting with a punctuation mark."""
    return bool(_NAME_RE.match(value))
SHEET_COLUMNS = ("model", "dataset", "path")
SHEET_OPTIONAL = ("reference_path", "split")
MODEL_COLUMNS = ("model", "name", "date", "institution", "url")


def read_sheet(path, required, optional=()):
    """Read a TSV/CSV sheet as stripped strings; blank cells become "".

    Blank lines and lines starting with ``#`` are skipped. A row with more cells than the header
    (a stray tab or comma) is an error naming the row, its line and the extra cells; empty cells
    after the last column are ignored.
    """
    import csv

    import pandas as pd

    path = Path(path)
    if not path.exists():
        raise ConfigError(f"sheet {path} does not exist")
    sep = "\t" if path.suffix.lower() in (".tsv", ".tab") else ","
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"sheet {path} cannot be read: {e}") from None
    lines = [(n, line) for n, line in enumerate(text.split("\n"), start=1)
             if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        raise ConfigError(f"sheet {path} is empty: it needs a header line {list(required)}")
    try:
        cells = [[c.strip() for c in row] for row in csv.reader((line for _, line in lines), delimiter=sep,
                                                                  strict=True)]
    except csv.Error as e:
        raise ConfigError(f"sheet {path} cannot be read: {e}") from None
    header, body = cells[0], cells[1:]
    what = "tab" if sep == "\t" else "comma"
    rows = []
    for i, ((line_no, _), row) in enumerate(zip(lines[1:], body), start=1):
        extra = row[len(header):]
        if any(extra):
            raise ConfigError(
                f"sheet {path}, row {i} (line {line_no}): {len(row)} cells but the header has {len(header)} "
                f"columns ({', '.join(header)}); extra {extra[:3]} — a stray {what}? Cells are separated by "
                f"one {what}; leave a cell empty, never skip it")
        rows.append(row[:len(header)] + [""] * (len(header) - len(row)))
    df = pd.DataFrame(rows, columns=header, dtype=object)
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise ConfigError(f"sheet {path} lacks column(s) {missing}; it has {list(df.columns)}")
    unknown = [c for c in df.columns if c not in (*required, *optional)]
    if unknown:
        raise ConfigError(f"sheet {path} has unknown column(s) {unknown}; allowed: {[*required, *optional]}")
    for col in optional:
        if col not in df.columns:
            df[col] = ""
    return df


def read_models_sheet(path) -> dict:
    """model -> its row of the models sheet (name, date, institution, url)."""
    sheet = read_sheet(path, ("model",), MODEL_COLUMNS[1:])
    return {row["model"]: row for row in sheet.to_dict("records")}

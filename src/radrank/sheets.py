"""Sheets people write: the submissions sheet and the models sheet (TSV or CSV), read strictly.

Lines end at ``\n``, ``\r\n`` or a lone ``\r``; blank lines and ``#`` comments are skipped; a row with more cells than the header (a stray tab or
comma) is an error naming the row, its line and the extra cells. Each line is one row: a quote that
opens a cell and is not closed on the same line (a cell spanning lines, a quoted newline) is an error
naming the line, never a cell that swallows the next line. A column named twice in the header is an
error (which copy would count?). A sheet is read like every file people write
(:func:`radrank.ingest.detect.read_regular`): a regular file only, as UTF-8.

Files a sheet names (:func:`resolve_sheet_path`): an absolute path is used as written; a relative one is read
from the sheet's own folder (``../example/x.json`` in ``config/submissions.tsv`` is ``example/x.json`` of the
project), as people expect of a file that names other files — not from the folder Snakemake runs in.

Model and dataset names (:func:`is_name`): letters, digits and ``_ . + -``, not starting with a
punctuation mark, at most :data:`MAX_NAME_LENGTH` characters (they become file names, e.g.
``results/scores/{dataset}/{split}/{metric}/{model}.parquet`` and the jobs' log files).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from radrank.errors import ConfigError

MAX_NAME_LENGTH = 100
NAME_PATTERN = rf"[A-Za-z0-9][A-Za-z0-9_.+-]{{0,{MAX_NAME_LENGTH - 1}}}"
_NAME_RE = re.compile(NAME_PATTERN)


def is_name(value) -> bool:
    """A model or dataset name: letters, digits and ``_ . + -``, not starting with a punctuation mark,
    at most :data:`MAX_NAME_LENGTH` characters."""
    return isinstance(value, str) and bool(_NAME_RE.fullmatch(value))


def name_problem(value) -> str | None:
    """Why ``value`` is not a name (:func:`is_name`), in words; None when it is one."""
    if is_name(value):
        return None
    if not isinstance(value, str):
        return f"must be text, found {type(value).__name__}"
    if len(value) > MAX_NAME_LENGTH:
        return (f"is {len(value)} characters long; a name has at most {MAX_NAME_LENGTH} (it becomes part of "
                "file names)")
    shown = value.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
    return f"{shown!r} must match {NAME_PATTERN} (letters, digits and _ . + -; no spaces or slashes)"


def resolve_sheet_path(cell: str, sheet, base_dir=".") -> str:
    """The file a sheet cell names, as the workflow uses it. ``sheet``: the sheet's path as the config gives it
    (relative to ``base_dir``, the project folder, or absolute). An absolute cell is returned as written; a
    relative one is read from the sheet's own folder and returned relative to ``base_dir`` when it lies inside
    it (``config/submissions.tsv`` naming ``../example/x.json`` gives ``example/x.json``: the same paths in the
    jobs and their provenance as before), else as an absolute path. An empty cell stays empty."""
    if not cell or os.path.isabs(cell):
        return cell
    base = os.path.realpath(base_dir)
    folder = os.path.realpath(os.path.join(base, os.path.dirname(os.fspath(sheet))))
    full = os.path.normpath(os.path.join(folder, cell))
    if full == base or full.startswith(base.rstrip(os.sep) + os.sep):
        return os.path.relpath(full, base)
    return full


def shown_sheet_path(cell: str, resolved: str, base_dir=".") -> str:
    """A sheet cell in a message: as written, and for a relative one the absolute path it was read as."""
    if os.path.isabs(cell):
        return cell
    return f"{cell} (read from the sheet's folder as {os.path.join(os.path.realpath(base_dir), resolved)})"


SHEET_COLUMNS = ("model", "dataset", "path")
SHEET_OPTIONAL = ("reference_path", "split")
MODEL_COLUMNS = ("model", "name", "date", "institution", "url")


def _sheet_text(path: Path) -> str:
    from radrank.ingest.detect import FileProblem, bom_hint, read_regular

    try:
        data = read_regular(path)
    except FileProblem as e:
        raise ConfigError(f"sheet {path} {str(e).removeprefix('file ')}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise ConfigError(f"sheet {path} cannot be read: it is not valid UTF-8 (byte 0x{data[e.start]:02x} on "
                          f"line {line}){bom_hint(data)}; re-encode it as UTF-8") from None


def _split_line(path, line: str, sep: str, where: str, header: list | None) -> list[str]:
    import csv

    try:
        rows = list(csv.reader([line], delimiter=sep, strict=True))
    except csv.Error as e:
        column = ""
        if header is not None:  # the column of the cell that opens the quote
            for pos, ch in enumerate(line):
                if ch == '"' and (pos == 0 or line[pos - 1] == sep):
                    index = line[:pos].count(sep)  # a quote opening a cell after only plain cells
                    if index < len(header):
                        column = f" in column {header[index]!r}"
                    break
        if "unexpected end of data" in str(e):
            why = (f"a quote (\") opened{column} is not closed on this line; a cell cannot span lines (a "
                   "quoted newline): close the quote, or remove it")
        else:
            why = (f"malformed quoting{column} ({e}): a quoted cell must end at its closing quote; write a quote "
                   "inside a quoted cell as two (\"\")")
        raise ConfigError(f"sheet {path}, {where}: {why}") from None
    return [c.strip() for c in rows[0]] if rows else []


def _read_rows(path, required, optional=()) -> tuple[list[str], list[tuple[int, dict]]]:
    """(header, [(line, row)]) of a sheet; see :func:`read_sheet`."""
    path = Path(path)
    sep = "\t" if path.suffix.lower() in (".tsv", ".tab") else ","
    text = _sheet_text(path)
    # a line ends at \n, \r\n or a lone \r (old Mac files, some spreadsheet exports)
    lines = [(n, line) for n, line in enumerate(re.split(r"\r\n?|\n", text), start=1)
             if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        raise ConfigError(f"sheet {path} is empty: it needs a header line {list(required)}")
    header_line, header_text = lines[0]
    header = _split_line(path, header_text, sep, f"line {header_line} (the header)", None)
    seen: dict = {}
    for index, column in enumerate(header, start=1):
        if column and column in seen:
            raise ConfigError(f"sheet {path}, line {header_line} (the header): column {column!r} appears twice "
                              f"(columns {seen[column]} and {index}); which copy would count? Name it once")
        seen[column] = index
    missing = [c for c in required if c not in header]
    if missing:
        raise ConfigError(f"sheet {path} lacks column(s) {missing}; it has {header}")
    unknown = [c for c in header if c not in (*required, *optional)]
    if unknown:
        raise ConfigError(f"sheet {path} has unknown column(s) {unknown}; allowed: {[*required, *optional]}")
    what = "tab" if sep == "\t" else "comma"
    rows = []
    for i, (line_no, line) in enumerate(lines[1:], start=1):
        row = _split_line(path, line, sep, f"row {i} (line {line_no})", header)
        extra = row[len(header):]
        if any(extra):
            raise ConfigError(
                f"sheet {path}, row {i} (line {line_no}): {len(row)} cells but the header has {len(header)} "
                f"columns ({', '.join(header)}); extra {extra[:3]} — a stray {what}? Cells are separated by "
                f"one {what}; leave a cell empty, never skip it")
        cells = row[:len(header)] + [""] * (len(header) - len(row))
        rows.append((line_no, dict(zip(header, cells)) | {c: "" for c in optional if c not in header}))
    return header, rows


def read_sheet(path, required, optional=()):
    """Read a TSV/CSV sheet as stripped strings; blank cells become "".

    Blank lines and lines starting with ``#`` are skipped. A row with more cells than the header
    (a stray tab or comma) is an error naming the row, its line and the extra cells; empty cells
    after the last column are ignored. The DataFrame's ``attrs["lines"]`` holds each row's line.
    """
    import pandas as pd

    header, rows = _read_rows(path, required, optional)
    columns = header + [c for c in optional if c not in header]
    df = pd.DataFrame([row for _, row in rows], columns=columns, dtype=object)
    df.attrs["lines"] = [line for line, _ in rows]
    return df


def read_models_sheet(path) -> dict:
    """model -> its row of the models sheet (name, date, institution, url); a model listed twice is an error
    naming both lines."""
    _, rows = _read_rows(path, ("model",), MODEL_COLUMNS[1:])
    out: dict = {}
    lines: dict = {}
    for line, row in rows:
        model = row["model"]
        if not model:
            raise ConfigError(f"sheet {path}, line {line}: column 'model' is empty")
        if model in out:
            raise ConfigError(f"sheet {path}, line {line}: model {model!r} is listed twice (also on line "
                              f"{lines[model]}); which row describes it? Keep one")
        out[model], lines[model] = row, line
    return out

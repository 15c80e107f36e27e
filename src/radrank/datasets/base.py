"""What every dataset adapter yields, and the rules all adapters share.

An adapter reads one dataset's own files (CSV, JSON, XML, parquet, text
reports) under a *root* folder and yields :class:`Sample` rows in a fixed,
documented order:

* ``sample_id`` — unique within the dataset, stable across runs;
* ``images`` — absolute paths of the sample's images (one study may have several);
* a report-generation sample carries ``report``: the reference report text with
  its section headers (``FINDINGS:``, ``IMPRESSION:``, ``INDICATION:`` …), from
  which :func:`radrank.sections.parse_section` takes the section that is scored
  and, when asked, the indication handed to the model;
* a VQA sample carries ``question``, ``answer`` and ``answer_type`` (``"closed"``,
  ``"open"`` or ``None`` when the dataset does not say);
* ``indication`` — when the dataset has one (a structured field, or the
  indication section of the report); ``None`` otherwise, never the report body;
* ``split`` — the dataset's own split name (``None`` when it has none);
* ``source`` and ``row`` — the dataset file and row the sample comes from, for
  errors and drop files.

Paths: every path written in a dataset file is taken relative to the folder the
adapter resolves it against, and must stay under the dataset root (or under an
image root the user gave). An absolute path, a ``..`` that climbs out, or a
symbolic link that points out is rejected with :class:`~radrank.errors.InputError`
naming the file, the field and the row. Nothing in a dataset file can make the
adapter read outside the folders the user named.

Adapters never open images: they only resolve paths (``radrank.images`` loads
them), so listing a dataset is cheap and needs neither MONAI nor pydicom.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Iterator

from radrank.errors import ConfigError, InputError
from radrank.sections import parse_section
from radrank.text import clean, is_missing, normalize_whitespace

TASKS = ("report", "vqa")


@dataclass
class Sample:
    sample_id: str
    images: tuple = ()
    split: str | None = None
    report: str | None = None
    indication: str | None = None
    question: str | None = None
    answer: str | None = None
    answer_type: str | None = None
    study_id: str | None = None  # the dataset's own study (or image) id
    meta: dict = field(default_factory=dict)  # age, sex, comparison, views, question_type, ...
    source: str = ""  # the dataset file the sample was read from
    row: object = None  # its row there (1-based CSV line, JSON key or position, XML file name)

    @property
    def where(self) -> str:
        """``file:row`` for drop files and messages."""
        name = Path(self.source).name if self.source else ""
        return f"{name}:{self.row}" if self.row is not None else name

    def as_dict(self) -> dict:
        return {
            "sample_id": self.sample_id, "images": [str(p) for p in self.images], "split": self.split,
            "report": self.report, "indication": self.indication, "question": self.question,
            "answer": self.answer, "answer_type": self.answer_type, "study_id": self.study_id,
            "meta": dict(self.meta), "source": self.source, "row": self.row,
        }


def compose_report(sections) -> str | None:
    """A report text with one ``HEADER:`` line per non-missing section, or None when all are missing.

    ``sections`` is a sequence of ``(header, text)``; the headers are ones
    :mod:`radrank.sections` recognises (INDICATION, COMPARISON, FINDINGS, IMPRESSION).
    """
    parts = [f"{header}: {normalize_whitespace(clean(text))}" for header, text in sections if not is_missing(text)
             and normalize_whitespace(clean(text))]
    return "\n".join(parts) if parts else None


def indication_of(report: str | None) -> str | None:
    """The indication section of a report, or None (never the report body)."""
    if not report:
        return None
    return parse_section(report, "indication") or None


def resolve_path(value, *, root: Path, base: Path | None = None, file, field: str, row,
                 roots: tuple[Path, ...] | None = None) -> Path:
    """``value`` (a path written in dataset file ``file``) resolved under ``base`` (default ``root``).

    Raises :class:`InputError` (file, field, row) when the value is empty, absolute,
    or ends up outside every allowed root once ``..`` and symbolic links are
    resolved. ``roots`` defaults to ``(root,)``.
    """
    if is_missing(value):
        raise InputError(file, "path is empty", field=field, row=row)
    text = str(value).strip()
    if "\x00" in text:
        raise InputError(file, "path contains a NUL character", field=field, row=row)
    if PurePosixPath(text).is_absolute() or PureWindowsPath(text).is_absolute() or PureWindowsPath(text).drive:
        raise InputError(file, f"path {text!r} is absolute; dataset paths must be relative to the dataset root",
                         field=field, row=row)
    allowed = tuple(Path(r).resolve() for r in (roots or (root,)))
    candidate = Path(os.path.normpath(Path(base or root).resolve() / text.replace("\\", "/")))
    real = candidate.resolve()  # follows every symbolic link that exists
    for r in allowed:
        if _within(candidate, r) and _within(real, r):
            return real
    where = " or ".join(str(r) for r in allowed)
    how = "through a symbolic link " if any(_within(candidate, r) for r in allowed) else ""
    raise InputError(file, f"path {text!r} leads {how}outside the dataset root {where}", field=field, row=row)


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def check_inside(path: Path, *, root: Path, file, field: str, row) -> Path:
    """``path`` (built by the adapter from ids) resolved; it must stay under ``root``."""
    real = Path(path).resolve()
    if not (_within(Path(os.path.normpath(path)), root.resolve()) and _within(real, root.resolve())):
        raise InputError(file, f"path {str(path)!r} leads outside the dataset root {root}", field=field, row=row)
    return real


def _open_text(path: Path):
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8-sig", newline="")
    return open(path, encoding="utf-8-sig", newline="")


def read_csv(path) -> Iterator[tuple[int, dict]]:
    """``(line, row)`` for each record of a CSV (``.csv`` or ``.csv.gz``); ``line`` is the
    1-based line where the record starts (the header is line 1). Values are strings,
    keys stripped."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "file does not exist")
    csv.field_size_limit(1 << 30)
    with _open_text(path) as f:
        reader = csv.DictReader(f)
        if reader.fieldnames is None:
            raise InputError(path, "CSV has no header row")
        end = reader.line_num
        try:
            for row in reader:
                start, end = end + 1, reader.line_num
                if None in row:
                    raise InputError(path, "row has more fields than the header", row=start)
                yield start, {k.strip(): ("" if v is None else v) for k, v in row.items()}
        except csv.Error as e:
            raise InputError(path, f"is not a readable CSV near line {reader.line_num}: {e}") from None


def csv_columns(path) -> list[str]:
    path = Path(path)
    with _open_text(path) as f:
        header = next(csv.reader(f), None)
    return [h.strip() for h in header or []]


def require_columns(path, columns, required) -> None:
    for col in required:
        if col not in columns:
            raise InputError(path, f"required column is missing (columns: {', '.join(columns)})", field=col)


def read_json(path):
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "file does not exist")
    try:
        with _open_text(path) as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise InputError(path, f"is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except UnicodeDecodeError as e:
        raise InputError(path, f"is not valid UTF-8: {e.reason} at byte {e.start}") from None


def text_or_none(value) -> str | None:
    """Whitespace-normalised text, or None when missing."""
    if is_missing(value):
        return None
    out = normalize_whitespace(str(value))
    return out or None


def number_or_nan(value) -> float:
    try:
        out = float(str(value).strip().rstrip("Yy"))  # ReXGradient writes ages as "067Y"
    except (TypeError, ValueError):
        return float("nan")
    return out


class DatasetAdapter:
    """Base of the dataset adapters. Subclasses set ``name`` and ``task`` and implement :meth:`_samples`.

    ``root`` is the dataset folder; ``split`` keeps only the samples of one split
    (a name, or a list of names; None keeps all).
    """

    name = "dataset"
    task = "report"
    splits: tuple[str, ...] = ()  # the split names the dataset defines (documentation; empty: none)

    def __init__(self, root, *, split=None):
        self.root = Path(root).expanduser()
        if not self.root.is_dir():
            raise ConfigError(f"dataset {self.name}: root {self.root} is not a folder")
        self.root = self.root.resolve()
        if split is None or isinstance(split, str):
            self.split = split
        else:
            self.split = tuple(split)
        self._cache: list[Sample] | None = None

    # -- contract -------------------------------------------------------------------------------------
    def _samples(self) -> Iterator[Sample]:
        raise NotImplementedError

    def samples(self) -> list[Sample]:
        """Every sample of the selected split(s), in the adapter's fixed order; sample ids checked unique."""
        if self._cache is None:
            out, seen = [], {}
            for s in self._samples():
                if not self._split_selected(s.split):
                    continue
                if s.sample_id in seen:
                    raise InputError(s.source or self.root,
                                     f"duplicate sample id {s.sample_id!r} (also at {seen[s.sample_id]})",
                                     field="sample_id", row=s.row)
                seen[s.sample_id] = s.where
                out.append(s)
            self._cache = out
        return list(self._cache)

    def __iter__(self):
        return iter(self.samples())

    def __len__(self) -> int:
        return len(self.samples())

    def describe(self) -> dict:
        """What identifies this selection of the dataset (recorded in provenance)."""
        return {"dataset": self.name, "task": self.task, "root": str(self.root), "split": self.split,
                **self._options()}

    def _options(self) -> dict:
        return {}

    # -- helpers --------------------------------------------------------------------------------------
    def _split_selected(self, split) -> bool:
        if self.split is None:
            return True
        wanted = (self.split,) if isinstance(self.split, str) else self.split
        return split in wanted

    def resolve(self, value, *, file, field: str, row, base: Path | None = None, roots=None) -> Path:
        return resolve_path(value, root=self.root, base=base, file=file, field=field, row=row, roots=roots)

    def find(self, *candidates, required: bool = True, what: str = "file") -> Path | None:
        """The first of ``candidates`` (paths relative to the root, globs allowed) that exists."""
        for c in candidates:
            if c is None:
                continue
            if any(ch in str(c) for ch in "*?["):
                hits = sorted(self.root.glob(str(c)))
                if hits:
                    return check_inside(hits[0], root=self.root, file=self.root, field=what, row=None)
                continue
            p = self.root / c
            if p.exists():
                return check_inside(p, root=self.root, file=self.root, field=what, row=None)
        if required:
            raise ConfigError(f"dataset {self.name}: no {what} under {self.root} "
                              f"(looked for {', '.join(str(c) for c in candidates if c is not None)})")
        return None

    def subdir(self, value, what: str) -> Path:
        """A folder option (relative to the root) resolved; it must stay under the root."""
        return resolve_path(value, root=self.root, file=self.root, field=what, row=None)

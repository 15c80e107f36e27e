"""ReXGradient-160K: per-split metadata with report sections inline and image path lists.

Metadata files (``metadata`` option: a file or glob relative to the root;
default ``metadata/*_metadata_view_position.json``, else
``metadata/*_metadata.csv``, else the same names at the root):

* JSON: an object keyed by study (or a list of objects with ``id``), each
  entry with ``ImagePath`` (list), ``ImageViewPosition`` (list), ``Indication``,
  ``Comparison``, ``Findings``, ``Impression``, ``PatientID``,
  ``StudyInstanceUid``, ``PatientSex``, ``PatientAge`` (``"067Y"``);
* CSV: the same fields as columns, one row per study; ``ImagePath`` holds a
  JSON / Python list, or paths separated by ``;``; the study id is ``id``, else
  ``StudyInstanceUid``.

Image paths are relative to the metadata file's folder (the release writes
``../deid_png/…`` from ``metadata/``) and must stay under the root. The split is
the file name's prefix (``test_metadata….json`` → ``test``). One sample per
study, ``sample_id`` = the study key; the report text is composed from the four
sections with their headers; the indication is ``Indication``.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

from radrank.datasets.base import (DatasetAdapter, Sample, check_inside, compose_report, csv_columns, number_or_nan,
                                   read_csv, read_json, text_or_none)
from radrank.errors import ConfigError, InputError
from radrank.text import is_missing

_DEFAULT_GLOBS = ("metadata/*_metadata_view_position.json", "metadata/*_metadata.csv", "*_metadata_view_position.json",
                  "*_metadata.csv")


def _split_of(path: Path) -> str | None:
    name = path.name
    return name.split("_metadata")[0] if "_metadata" in name else None


def _path_list(value, *, file, row) -> list:
    if value is None or (not isinstance(value, (list, tuple)) and is_missing(value)):
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    text = str(value).strip()
    if text.startswith("["):
        for parse in (json.loads, ast.literal_eval):
            try:
                got = parse(text)
            except (ValueError, SyntaxError):
                continue
            if isinstance(got, list):
                return got
        raise InputError(file, "is not a list of paths", field="ImagePath", row=row)
    return [p.strip() for p in text.replace("|", ";").split(";") if p.strip()]


class ReXGradient(DatasetAdapter):
    name = "rexgradient"
    task = "report"
    splits = ("train", "valid", "test")

    def __init__(self, root, *, split=None, metadata: str | None = None):
        super().__init__(root, split=split)
        patterns = (metadata,) if metadata else _DEFAULT_GLOBS
        files: list[Path] = []
        for pattern in patterns:
            if any(ch in pattern for ch in "*?["):
                hits = [check_inside(h, root=self.root, file=self.root, field="metadata", row=None)
                        for h in sorted(self.root.glob(pattern)) if h.is_file()]
            else:
                hits = [self.subdir(pattern, "metadata")]
            if hits:
                files = hits
                break
        if not files:
            raise ConfigError(f"dataset rexgradient: no metadata file under {self.root} (looked for "
                              f"{', '.join(patterns)})")
        self.metadata_files = files

    def _options(self) -> dict:
        return {"metadata": [str(p) for p in self.metadata_files]}

    def _samples(self):
        for path in self.metadata_files:
            split = _split_of(path)
            if not self._split_selected(split):
                continue
            if path.suffix == ".json":
                data = read_json(path)
                if isinstance(data, dict):
                    entries = list(data.items())
                elif isinstance(data, list):
                    entries = [(e.get("id") if isinstance(e, dict) else None, e) for e in data]
                else:
                    raise InputError(path, "expected a JSON object keyed by study, or a list of studies")
                for position, (key, entry) in enumerate(entries):
                    row = key if key is not None else position
                    if not isinstance(entry, dict):
                        raise InputError(path, "study entry is not an object", row=row)
                    key = key if key is not None else entry.get("StudyInstanceUid")
                    if is_missing(key):
                        raise InputError(path, "study has no id", field="id", row=row)
                    yield self._sample(str(key), entry, split, file=path, row=row)
            else:
                cols = csv_columns(path)
                id_col = next((c for c in ("id", "StudyInstanceUid") if c in cols), None)
                if id_col is None:
                    raise InputError(path, f"needs an 'id' or 'StudyInstanceUid' column (columns: {', '.join(cols)})",
                                     field="id")
                for line, entry in read_csv(path):
                    if is_missing(entry[id_col]):
                        raise InputError(path, "study id is empty", field=id_col, row=line)
                    yield self._sample(entry[id_col].strip(), entry, split, file=path, row=line)

    def _sample(self, key: str, e: dict, split, *, file: Path, row) -> Sample:
        images = tuple(self.resolve(p, base=file.parent, file=file, field="ImagePath", row=row)
                       for p in _path_list(e.get("ImagePath"), file=file, row=row))
        views = e.get("ImageViewPosition")
        if views is not None and not isinstance(views, list):
            views = _path_list(views, file=file, row=row)
        indication = text_or_none(e.get("Indication"))
        report = compose_report((("INDICATION", indication), ("COMPARISON", e.get("Comparison")),
                                 ("FINDINGS", e.get("Findings")), ("IMPRESSION", e.get("Impression"))))
        return Sample(
            sample_id=key, images=images, split=split, report=report, indication=indication,
            study_id=text_or_none(e.get("StudyInstanceUid")) or key,
            meta={"age": number_or_nan(e.get("PatientAge")), "sex": text_or_none(e.get("PatientSex")),
                  "comparison": text_or_none(e.get("Comparison")), "patient_id": text_or_none(e.get("PatientID")),
                  "views": views},
            source=str(file), row=row,
        )

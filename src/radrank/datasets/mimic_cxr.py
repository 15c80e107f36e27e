"""MIMIC-CXR (PhysioNet): DICOM (or MIMIC-CXR-JPG) images and free-text reports.

Layout under the root (PhysioNet's own)::

    files/p10/p10000032/s50414267/<dicom_id>.dcm     images (image_ext=".jpg" for MIMIC-CXR-JPG)
    files/p10/p10000032/s50414267.txt                the study's report (mimic-cxr-reports)
    mimic-cxr-2.0.0-split.csv[.gz]                   dicom_id, study_id, subject_id, split (optional)
    mimic-cxr-2.0.0-metadata.csv[.gz]                dicom_id, ViewPosition (optional)

Reports may instead come from a CSV (``reports_csv``, relative to the root)
with a ``study_id`` column (``50414267`` or ``s50414267``) and a ``report`` or
``text`` column.

One sample per study, ``sample_id`` = ``s<study_id>``. With the split file the
studies and their images are the file's (ordered by subject, study, then
frontal views first and dicom id); without it the ``files`` tree is walked
(sorted) and ``split`` is None. Ids are checked to be plain ids (digits, or
letters, digits, ``-`` ``_`` ``.`` for dicom ids) before any path is built from
them. The indication is the report's INDICATION / HISTORY / REASON FOR EXAM
section (:mod:`radrank.sections`); a study without a report has ``report`` None
and is listed as ``empty_reference`` when pairs are built.
"""

from __future__ import annotations

import re
from pathlib import Path

from radrank.datasets.base import (DatasetAdapter, Sample, check_inside, csv_columns, indication_of, read_csv,
                                   require_columns)
from radrank.errors import InputError

_DIGITS = re.compile(r"^\d+$")
_DICOM_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_FRONTAL = ("PA", "AP", "AP AXIAL", "PA LLD", "AP LLD", "AP RLD", "PA RLD")


def _study_digits(value: str) -> str:
    v = str(value).strip()
    return v[1:] if v[:1] in ("s", "S") else v


class MimicCXR(DatasetAdapter):
    name = "mimic_cxr"
    task = "report"
    splits = ("train", "validate", "test")

    def __init__(self, root, *, split=None, files_dir: str = "files", image_ext: str = ".dcm",
                 reports_csv: str | None = None, split_csv: str | None = "auto", metadata_csv: str | None = "auto"):
        super().__init__(root, split=split)
        self.files_dir = self.subdir(files_dir, "files_dir")
        self.image_ext = image_ext if image_ext.startswith(".") else "." + image_ext
        self.reports_csv = self.subdir(reports_csv, "reports_csv") if reports_csv else None
        self.split_csv = (self.find("mimic-cxr-2.0.0-split.csv", "mimic-cxr-2.0.0-split.csv.gz", required=False)
                          if split_csv == "auto" else self.subdir(split_csv, "split_csv") if split_csv else None)
        self.metadata_csv = (self.find("mimic-cxr-2.0.0-metadata.csv", "mimic-cxr-2.0.0-metadata.csv.gz",
                                       required=False)
                             if metadata_csv == "auto" else self.subdir(metadata_csv, "metadata_csv")
                             if metadata_csv else None)

    def _options(self) -> dict:
        return {"image_ext": self.image_ext, "reports_csv": str(self.reports_csv) if self.reports_csv else None,
                "split_csv": str(self.split_csv) if self.split_csv else None}

    # -- reports ---------------------------------------------------------------------------------------
    def _reports_from_csv(self) -> dict[str, tuple[str, int]]:
        path = self.reports_csv
        cols = csv_columns(path)
        require_columns(path, cols, ("study_id",))
        text_col = next((c for c in ("report", "text") if c in cols), None)
        if text_col is None:
            raise InputError(path, f"needs a 'report' or 'text' column (columns: {', '.join(cols)})", field="report")
        out = {}
        for line, row in read_csv(path):
            sid = _study_digits(row["study_id"])
            if not _DIGITS.fullmatch(sid):
                raise InputError(path, f"study id {row['study_id']!r} is not a MIMIC study id", field="study_id",
                                 row=line)
            if sid in out:
                raise InputError(path, f"duplicate study id {sid} (also in row {out[sid][1]})", field="study_id",
                                 row=line)
            out[sid] = (row[text_col], line)
        return out

    def _report(self, subject: str, study: str, csv_reports) -> tuple[str | None, str]:
        if csv_reports is not None:
            got = csv_reports.get(study)
            return (got[0] if got else None), str(self.reports_csv)
        path = check_inside(self.files_dir / f"p{subject[:2]}" / f"p{subject}" / f"s{study}.txt",
                            root=self.root, file=self.files_dir, field="report", row=f"s{study}")
        if not path.is_file():
            return None, str(path)
        return path.read_text(encoding="utf-8", errors="replace"), str(path)

    # -- samples ---------------------------------------------------------------------------------------
    def _views(self) -> dict[str, str]:
        if self.metadata_csv is None:
            return {}
        cols = csv_columns(self.metadata_csv)
        if "dicom_id" not in cols or "ViewPosition" not in cols:
            return {}
        return {row["dicom_id"].strip(): row["ViewPosition"].strip() for _, row in read_csv(self.metadata_csv)}

    def _image(self, subject: str, study: str, dicom_id: str, *, file, row) -> Path:
        return check_inside(self.files_dir / f"p{subject[:2]}" / f"p{subject}" / f"s{study}" /
                            f"{dicom_id}{self.image_ext}", root=self.root, file=file, field="dicom_id", row=row)

    def _samples(self):
        csv_reports = self._reports_from_csv() if self.reports_csv else None
        if self.split_csv is not None:
            yield from self._from_split_file(csv_reports)
        else:
            yield from self._from_tree(csv_reports)

    def _from_split_file(self, csv_reports):
        path = self.split_csv
        require_columns(path, csv_columns(path), ("dicom_id", "study_id", "subject_id", "split"))
        views = self._views()
        studies: dict[str, dict] = {}
        for line, row in read_csv(path):
            subject, study, dicom = row["subject_id"].strip(), _study_digits(row["study_id"]), row["dicom_id"].strip()
            for value, fld in ((subject, "subject_id"), (study, "study_id")):
                if not _DIGITS.fullmatch(value):
                    raise InputError(path, f"{value!r} is not a MIMIC id (digits)", field=fld, row=line)
            if not _DICOM_ID.fullmatch(dicom) or ".." in dicom:
                raise InputError(path, f"{dicom!r} is not a dicom id", field="dicom_id", row=line)
            entry = studies.setdefault(study, {"subject": subject, "split": row["split"].strip(), "line": line,
                                               "dicoms": []})
            if entry["subject"] != subject:
                raise InputError(path, f"study {study} listed under subjects {entry['subject']} and {subject}",
                                 field="subject_id", row=line)
            entry["dicoms"].append((dicom, line))
        order = sorted(studies, key=lambda s: (int(studies[s]["subject"]), int(s)))
        for study in order:
            e = studies[study]
            dicoms = sorted(e["dicoms"], key=lambda d: (views.get(d[0], "") not in _FRONTAL, d[0]))
            if not self._split_selected(e["split"]):
                continue
            images = tuple(self._image(e["subject"], study, d, file=path, row=line) for d, line in dicoms)
            report, source = self._report(e["subject"], study, csv_reports)
            yield Sample(
                sample_id=f"s{study}", images=images, split=e["split"], report=report,
                indication=indication_of(report), study_id=study,
                meta={"subject_id": e["subject"], "views": [views.get(d, None) for d, _ in dicoms]},
                source=str(path), row=e["line"],
            )

    def _from_tree(self, csv_reports):
        if not self.files_dir.is_dir():
            raise InputError(self.files_dir, "image folder does not exist (and there is no split file)")
        for group in sorted(p for p in self.files_dir.glob("p[0-9]*") if p.is_dir()):
            for subject_dir in sorted(p for p in group.glob("p[0-9]*") if p.is_dir()):
                subject = subject_dir.name[1:]
                for study_dir in sorted(p for p in subject_dir.glob("s[0-9]*") if p.is_dir()):
                    study = study_dir.name[1:]
                    if not (_DIGITS.fullmatch(subject) and _DIGITS.fullmatch(study)):
                        continue
                    images = tuple(check_inside(p, root=self.root, file=study_dir, field="image", row=p.name)
                                   for p in sorted(study_dir.glob(f"*{self.image_ext}")))
                    report, source = self._report(subject, study, csv_reports)
                    yield Sample(
                        sample_id=f"s{study}", images=images, split=None, report=report,
                        indication=indication_of(report), study_id=study, meta={"subject_id": subject},
                        source=source, row=f"s{study}",
                    )

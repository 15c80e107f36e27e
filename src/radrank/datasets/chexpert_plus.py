"""CheXpert-Plus (Stanford AIMI): one CSV row per image, report sections as columns.

The CSV (``csv`` option; default the first ``df_chexpert_plus*.csv[.gz]`` under
the root) has ``path_to_image`` (``train/patient42142/study5/view1_frontal.jpg``),
``split``, ``section_findings``, ``section_impression``,
``section_clinical_history``, ``section_history``, ``section_comparison``,
``age``, ``sex`` … Many section cells are empty or ``nan``: a missing section
is left out of the report text.

Images are ``path_to_image`` under ``image_dir`` (default the root);
``image_ext=".png"`` swaps the suffix (the PNG release keeps the CSV's ``.jpg``
names). One sample per study (the folder of ``path_to_image``), ``sample_id``
= that folder (``train/patient42142/study5``), images in CSV order, studies in
order of first appearance. The report text is composed from the section columns
with their headers; the indication is ``section_clinical_history``, else
``section_history``.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from radrank.datasets.base import (DatasetAdapter, Sample, compose_report, csv_columns, number_or_nan, read_csv,
                                   require_columns, text_or_none)
from radrank.errors import InputError
from radrank.text import is_missing


class CheXpertPlus(DatasetAdapter):
    name = "chexpert_plus"
    task = "report"
    splits = ("train", "valid")

    def __init__(self, root, *, split=None, csv: str | None = None, image_dir: str = ".",
                 image_ext: str | None = None):
        super().__init__(root, split=split)
        self.csv = self.subdir(csv, "csv") if csv else self.find("df_chexpert_plus*.csv", "df_chexpert_plus*.csv.gz",
                                                                   what="CheXpert-Plus CSV")
        self.image_dir = self.subdir(image_dir, "image_dir")
        self.image_ext = None if not image_ext else image_ext if image_ext.startswith(".") else "." + image_ext

    def _options(self) -> dict:
        return {"csv": str(self.csv), "image_dir": str(self.image_dir), "image_ext": self.image_ext}

    def _samples(self):
        path = self.csv
        require_columns(path, csv_columns(path), ("path_to_image", "section_findings", "section_impression"))
        studies: dict[str, dict] = {}
        for line, row in read_csv(path):
            rel = row["path_to_image"].strip()
            if is_missing(rel):
                raise InputError(path, "path is empty", field="path_to_image", row=line)
            written = rel.replace("\\", "/")
            if self.image_ext:
                written = str(PurePosixPath(written).with_suffix(self.image_ext))
            image = self.resolve(written, base=self.image_dir, file=path, field="path_to_image", row=line)
            study = str(PurePosixPath(rel.replace("\\", "/")).parent)
            entry = studies.get(study)
            if entry is None:
                entry = studies[study] = {"row": row, "line": line, "images": []}
            elif all(is_missing(entry["row"].get(c)) for c in ("section_findings", "section_impression")):
                entry["row"], entry["line"] = row, line  # keep the first row that has report text
            entry["images"].append(image)
        for study, entry in studies.items():
            row = entry["row"]
            indication = text_or_none(row.get("section_clinical_history")) or text_or_none(row.get("section_history"))
            report = compose_report((
                ("INDICATION", indication),
                ("COMPARISON", row.get("section_comparison")),
                ("FINDINGS", row.get("section_findings")),
                ("IMPRESSION", row.get("section_impression")),
            ))
            yield Sample(
                sample_id=study, images=tuple(entry["images"]), split=text_or_none(row.get("split")),
                report=report, indication=indication, study_id=study,
                meta={"age": number_or_nan(row.get("age")), "sex": text_or_none(row.get("sex")),
                      "comparison": text_or_none(row.get("section_comparison")),
                      "patient_id": text_or_none(row.get("deid_patient_id"))},
                source=str(path), row=entry["line"],
            )

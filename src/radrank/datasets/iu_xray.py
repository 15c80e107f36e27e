"""IU-Xray (Indiana University chest X-rays, OpenI).

Two published forms are read; the adapter picks the one present under the root
(``form="kaggle"`` or ``"openi"`` forces one):

* Kaggle CSV pair: ``indiana_reports.csv`` (uid, indication, comparison,
  findings, impression, …) and ``indiana_projections.csv`` (uid, filename,
  projection); images under ``images/images_normalized`` (or ``image_dir``).
* OpenI XML: one ``ecgen-radiology/<n>.xml`` per report (``reports_dir``), with
  ``AbstractText`` elements labelled INDICATION / COMPARISON / FINDINGS /
  IMPRESSION and one ``parentImage id="CXR1_1_IM-0001-3001"`` per image; images
  ``NLMCXR_png/<id>.png`` (``image_dir``, ``image_ext``).

One sample per report, ``sample_id`` = ``CXR<uid>`` in both forms (so they
agree), frontal views first (Kaggle's ``projection``; XML order otherwise).
The report text is composed from the labelled sections with their headers, so
:mod:`radrank.sections` takes findings / impression / indication from it. IU-Xray
has no official split: ``split`` is None.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree

from radrank.datasets.base import (DatasetAdapter, Sample, compose_report, csv_columns, read_csv, require_columns,
                                   text_or_none)
from radrank.errors import ConfigError, InputError

_SECTIONS = (("INDICATION", "indication"), ("COMPARISON", "comparison"), ("FINDINGS", "findings"),
             ("IMPRESSION", "impression"))


def _parse_xml(path):
    try:
        from defusedxml.ElementTree import parse  # refuses entity expansion, if installed
    except ImportError:  # the stdlib parser never fetches external entities
        parse = ElementTree.parse
    try:
        return parse(path).getroot()
    except ElementTree.ParseError as e:
        raise InputError(path, f"is not well-formed XML: {e}") from None


class IUXray(DatasetAdapter):
    name = "iu_xray"
    task = "report"

    def __init__(self, root, *, split=None, form: str = "auto", image_dir: str | None = None,
                 reports_dir: str = "ecgen-radiology", image_ext: str = ".png"):
        super().__init__(root, split=split)
        if form == "auto":
            if (self.root / "indiana_reports.csv").is_file():
                form = "kaggle"
            elif (self.root / reports_dir).is_dir():
                form = "openi"
            else:
                raise ConfigError(f"dataset iu_xray: neither indiana_reports.csv nor {reports_dir}/ under {self.root}")
        if form not in ("kaggle", "openi"):
            raise ConfigError(f"dataset iu_xray: form must be 'kaggle', 'openi' or 'auto', got {form!r}")
        self.form = form
        if image_dir is None:
            candidates = (("images/images_normalized", "images_normalized", "images") if form == "kaggle"
                          else ("NLMCXR_png", "images"))
            image_dir = next((c for c in candidates if (self.root / c).is_dir()), candidates[0])
        self.image_dir = self.subdir(image_dir, "image_dir")
        self.reports_dir = reports_dir
        self.image_ext = image_ext if image_ext.startswith(".") else "." + image_ext

    def _options(self) -> dict:
        return {"form": self.form, "image_dir": str(self.image_dir)}

    def _samples(self):
        yield from (self._kaggle() if self.form == "kaggle" else self._openi())

    # -- Kaggle CSV pair ------------------------------------------------------------------------------
    def _kaggle(self):
        reports_path = self.root / "indiana_reports.csv"
        proj_path = self.root / "indiana_projections.csv"
        require_columns(reports_path, csv_columns(reports_path), ("uid", "findings", "impression"))
        require_columns(proj_path, csv_columns(proj_path), ("uid", "filename"))
        images: dict[str, list] = {}
        for line, row in read_csv(proj_path):
            uid = row["uid"].strip()
            path = self.resolve(row["filename"], base=self.image_dir, file=proj_path, field="filename", row=line)
            frontal = row.get("projection", "").strip().lower() == "frontal"
            images.setdefault(uid, []).append((not frontal, line, path))
        seen = set()
        for line, row in read_csv(reports_path):
            uid = row["uid"].strip()
            if not uid:
                raise InputError(reports_path, "uid is empty", field="uid", row=line)
            if uid in seen:
                raise InputError(reports_path, f"duplicate uid {uid!r}", field="uid", row=line)
            seen.add(uid)
            report = compose_report((header, row.get(col)) for header, col in _SECTIONS)
            yield Sample(
                sample_id=uid if uid.upper().startswith("CXR") else f"CXR{uid}",
                images=tuple(p for _, _, p in sorted(images.get(uid, []), key=lambda t: t[:2])),
                report=report, indication=text_or_none(row.get("indication")), study_id=uid,
                meta={"comparison": text_or_none(row.get("comparison"))},
                source=str(reports_path), row=line,
            )

    # -- OpenI XML ------------------------------------------------------------------------------------
    def _openi(self):
        folder = self.subdir(self.reports_dir, "reports_dir")

        def number(p):
            m = re.match(r"(\d+)", p.stem)
            return (int(m.group(1)) if m else float("inf"), p.name)

        for path in sorted(folder.glob("*.xml"), key=number):
            root = _parse_xml(path)
            uid_el = root.find(".//uId")
            uid = (uid_el.get("id") if uid_el is not None else None) or f"CXR{path.stem}"
            texts = {}
            for el in root.iter("AbstractText"):
                label = (el.get("Label") or "").strip().upper()
                texts[label] = "".join(el.itertext())
            report = compose_report((header, texts.get(header)) for header, _ in _SECTIONS)
            images = []
            for i, img in enumerate(root.iter("parentImage")):
                image_id = img.get("id")
                if not image_id:
                    raise InputError(path, "parentImage has no id", field="parentImage", row=i)
                images.append(self.resolve(image_id + self.image_ext, base=self.image_dir, file=path,
                                           field="parentImage", row=i))
            yield Sample(
                sample_id=uid, images=tuple(images), report=report,
                indication=text_or_none(texts.get("INDICATION")), study_id=uid,
                meta={"comparison": text_or_none(texts.get("COMPARISON"))},
                source=str(path), row=None,
            )

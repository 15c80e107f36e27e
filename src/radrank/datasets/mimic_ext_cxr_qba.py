"""MIMIC-Ext-CXR-QBA (PhysioNet): question–answer pairs over MIMIC-CXR studies.

Read from the release's own files under the root:

* ``metadata_dir`` (default ``metadata``; e.g. ``exports/A_frontal/metadata/q1M``):
  ``question_metadata.parquet`` (``patient_id``, ``study_id``, ``question_id``,
  ``question.question_type``, optionally ``split``) and
  ``question_image_metadata.parquet`` (``patient_id``, ``study_id``,
  ``question_id``, ``image_id``); the ids may be columns or the index;
* the question and answer texts: ``qa.zip`` or a ``qa/`` folder (``qa``
  option) holding ``qa/<p[:3]>/<patient>/<study>.qa.json`` = ``{"questions":
  [{"question_id", "question", "answers": [{"text": …}, …]}, …]}``; the answer
  is the answers' texts joined by one space;
* images are MIMIC-CXR's: ``<image_root>/<p[:3]>/<patient>/<study>/<image_id><image_ext>``.
  ``image_root`` (MIMIC-CXR's ``files`` folder) is a second root the user names,
  default ``<root>/files``; image paths must stay under it.

One sample per question, every image the question refers to (sorted by image
id), ``sample_id`` = ``<study>/<question_id>``, samples ordered by patient,
study and question id. Ids are checked to be plain ids (``p123``, ``s456``,
letters, digits, ``-`` ``_`` ``.``) before any path is built from them. A
question whose text is not in the QA files has an empty answer and is listed as
``empty_reference`` when pairs are built.
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

from radrank.datasets.base import DatasetAdapter, Sample, check_inside, text_or_none
from radrank.datasets.vqa_rad import answer_text
from radrank.errors import ConfigError, InputError

_PATIENT = re.compile(r"^p\d+$")
_STUDY = re.compile(r"^s\d+$")
_PLAIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_KEYS = ("patient_id", "study_id", "question_id")


def _read_parquet(path: Path):
    import pandas as pd

    if not path.is_file():
        raise InputError(path, "file does not exist")
    try:
        df = pd.read_parquet(path)
    except Exception as e:  # pyarrow raises several types for corrupt files
        raise InputError(path, f"cannot be read as parquet: {e}") from None
    if any(k in (df.index.names or []) for k in _KEYS):
        df = df.reset_index()
    for col in _KEYS:
        if col not in df.columns:
            raise InputError(path, f"required column is missing (columns: {', '.join(map(str, df.columns))})",
                             field=col)
    return df


class MimicExtCXRQBA(DatasetAdapter):
    name = "mimic_ext_cxr_qba"
    task = "vqa"

    def __init__(self, root, *, split=None, metadata_dir: str = "metadata", qa: str | None = None,
                 image_root: str | Path | None = None, image_ext: str = ".dcm"):
        super().__init__(root, split=split)
        self.metadata_dir = self.subdir(metadata_dir, "metadata_dir")
        if qa is None:
            qa = next((c for c in ("qa.zip", "qa") if (self.root / c).exists()), None)
            if qa is None:
                raise ConfigError(f"dataset mimic_ext_cxr_qba: neither qa.zip nor qa/ under {self.root}")
        self.qa = self.subdir(qa, "qa")
        # The image root is the user's own setting (another dataset's folder), not a path from a data file.
        self.image_root = (Path(image_root).expanduser().resolve() if image_root is not None
                           else self.subdir("files", "image_root"))
        self.image_ext = image_ext if image_ext.startswith(".") else "." + image_ext

    def _options(self) -> dict:
        return {"metadata_dir": str(self.metadata_dir), "qa": str(self.qa), "image_root": str(self.image_root),
                "image_ext": self.image_ext}

    def _check_ids(self, path, row_no, patient, study, question):
        for value, pattern, fld in ((patient, _PATIENT, "patient_id"), (study, _STUDY, "study_id"),
                                    (question, _PLAIN, "question_id")):
            if not pattern.fullmatch(value) or ".." in value:
                raise InputError(path, f"{value!r} is not a valid {fld}", field=fld, row=row_no)

    def _qa_texts(self, studies) -> dict:
        """(patient, study, question_id) -> (question, answer) for the given studies."""
        out = {}
        archive = zipfile.ZipFile(self.qa) if self.qa.is_file() else None
        try:
            for patient, study in studies:
                member = f"qa/{patient[:3]}/{patient}/{study}.qa.json"
                if archive is not None:
                    try:
                        raw = archive.read(member)
                    except KeyError:
                        continue
                    where = f"{self.qa}!{member}"
                else:
                    p = check_inside(self.qa.parent / member if self.qa.name == "qa" else self.qa / member,
                                     root=self.root, file=self.qa, field="qa", row=member)
                    if not p.is_file():
                        continue
                    raw, where = p.read_bytes(), str(p)
                try:
                    doc = json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError) as e:
                    raise InputError(where, f"is not valid JSON: {e}") from None
                for i, q in enumerate(doc.get("questions", []) if isinstance(doc, dict) else []):
                    if not isinstance(q, dict):
                        raise InputError(where, "question is not an object", field="questions", row=i)
                    answers = q.get("answers") or []
                    if isinstance(answers, dict):
                        answers = [answers]
                    answer = " ".join(answer_text(a.get("text")) for a in answers if isinstance(a, dict)).strip()
                    out[(patient, study, str(q.get("question_id")))] = (answer_text(q.get("question")), answer)
        finally:
            if archive is not None:
                archive.close()
        return out

    def _samples(self):
        q_path = self.metadata_dir / "question_metadata.parquet"
        qi_path = self.metadata_dir / "question_image_metadata.parquet"
        questions = _read_parquet(q_path)
        images = _read_parquet(qi_path)
        if "image_id" not in images.columns:
            raise InputError(qi_path, "required column is missing", field="image_id")
        by_question: dict[tuple, list] = {}
        for i, (patient, study, question, image) in enumerate(
                images[list(_KEYS) + ["image_id"]].astype(str).itertuples(index=False)):
            self._check_ids(qi_path, i, patient, study, question)
            if not _PLAIN.fullmatch(image) or ".." in image:
                raise InputError(qi_path, f"{image!r} is not a valid image_id", field="image_id", row=i)
            by_question.setdefault((patient, study, question), []).append((image, i))
        rows = []
        has_split = "split" in questions.columns
        qtype_col = next((c for c in ("question.question_type", "question_type") if c in questions.columns), None)
        for i, rec in enumerate(questions.to_dict("records")):
            key = tuple(str(rec[k]) for k in _KEYS)
            self._check_ids(q_path, i, *key)
            split = text_or_none(rec.get("split")) if has_split else None
            if not self._split_selected(split):
                continue
            rows.append((key, i, split, text_or_none(rec.get(qtype_col)) if qtype_col else None))
        rows.sort(key=lambda r: (int(r[0][0][1:]), int(r[0][1][1:]), r[0][2]))
        texts = self._qa_texts(dict.fromkeys((k[0], k[1]) for k, *_ in rows))
        for (patient, study, question_id), i, split, qtype in rows:
            paths = tuple(
                check_inside(self.image_root / patient[:3] / patient / study / f"{image}{self.image_ext}",
                             root=self.image_root, file=qi_path, field="image_id", row=row)
                for image, row in sorted(by_question.get((patient, study, question_id), [])))
            question, answer = texts.get((patient, study, question_id), ("", ""))
            yield Sample(
                sample_id=f"{study}/{question_id}", images=paths, split=split, question=question, answer=answer,
                answer_type=None, study_id=study,
                meta={"patient_id": patient, "question_type": qtype}, source=str(q_path), row=i,
            )

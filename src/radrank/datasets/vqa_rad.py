"""VQA-RAD (Lau et al. 2018): one JSON list of question records.

The JSON (``json`` option; default ``VQA_RAD Dataset Public.json``, else the only
``*.json`` at the root) holds records with ``qid``, ``image_name``, ``question``,
``answer`` (text or a number), ``answer_type`` (``CLOSED`` / ``OPEN``),
``question_type``, ``phrase_type`` and ``image_organ``. Images are
``image_name`` under ``image_dir`` (default ``VQA_RAD Image Folder``, else
``images``, else the root).

The test split is the 451 questions whose ``phrase_type`` is ``test_freeform``
or ``test_para``: those have ``split="test"``, every other question
``split="train"``. ``sample_id`` is the ``qid`` (a repeated qid gets ``#2``,
``#3`` … in file order). ``answer_type`` is ``closed`` / ``open`` from the
record; the ``vqa`` metric's closed subset is nevertheless MedGemma's (reference
exactly yes / no) unless the evaluator is told otherwise.
"""

from __future__ import annotations

import math

from radrank.datasets.base import DatasetAdapter, Sample, read_json, text_or_none
from radrank.errors import ConfigError, InputError
from radrank.text import is_missing


def answer_text(value) -> str:
    """A question or answer as text. Numbers are written as the dataset would (``3``, not ``3.0``); only
    a null or NaN is missing — "none" and "null" are answers here, not missing markers."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def answer_type_of(value) -> str | None:
    t = str(value or "").strip().lower()
    return t if t in ("closed", "open") else None


def unique_ids(ids):
    """Each id as is, a repeat as ``id#2``, ``id#3`` … (file order)."""
    counts: dict = {}
    out = []
    for i in ids:
        counts[i] = counts.get(i, 0) + 1
        out.append(i if counts[i] == 1 else f"{i}#{counts[i]}")
    return out


class VQARAD(DatasetAdapter):
    name = "vqa_rad"
    task = "vqa"
    splits = ("train", "test")

    def __init__(self, root, *, split=None, json: str | None = None, image_dir: str | None = None):
        super().__init__(root, split=split)
        if json:
            self.json = self.subdir(json, "json")
        else:
            default = self.root / "VQA_RAD Dataset Public.json"
            found = [default] if default.is_file() else sorted(self.root.glob("*.json"))
            if len(found) != 1:
                raise ConfigError(f"dataset vqa_rad: expected 'VQA_RAD Dataset Public.json' or one *.json under "
                                  f"{self.root}, found {len(found)}; name it with the json option")
            self.json = self.subdir(found[0].name, "json")
        if image_dir is None:
            image_dir = next((c for c in ("VQA_RAD Image Folder", "images") if (self.root / c).is_dir()), ".")
        self.image_dir = self.subdir(image_dir, "image_dir")

    def _options(self) -> dict:
        return {"json": str(self.json), "image_dir": str(self.image_dir)}

    def _samples(self):
        path = self.json
        data = read_json(path)
        if not isinstance(data, list):
            raise InputError(path, "expected a JSON list of question records")
        ids = []
        for i, rec in enumerate(data):
            if not isinstance(rec, dict):
                raise InputError(path, "record is not an object", row=i)
            if is_missing(rec.get("qid")):
                raise InputError(path, "question id is missing", field="qid", row=i)
            ids.append(str(rec["qid"]).strip())
        for i, (rec, sid) in enumerate(zip(data, unique_ids(ids))):
            phrase = str(rec.get("phrase_type") or "").strip().lower()
            image = self.resolve(rec.get("image_name"), base=self.image_dir, file=path, field="image_name", row=i)
            yield Sample(
                sample_id=sid, images=(image,), split="test" if phrase.startswith("test") else "train",
                question=answer_text(rec.get("question")), answer=answer_text(rec.get("answer")),
                answer_type=answer_type_of(rec.get("answer_type")), study_id=text_or_none(rec.get("image_name")),
                meta={"question_type": text_or_none(rec.get("question_type")), "phrase_type": phrase or None,
                      "image_organ": text_or_none(rec.get("image_organ"))},
                source=str(path), row=i,
            )

"""SLAKE (Liu et al. 2021), English questions only.

Layout (Slake1.0): ``train.json``, ``validate.json``, ``test.json`` at the root
(``split`` chooses which are read; all three by default), images
``imgs/<img_name>`` (``image_dir``). Each file is a JSON list of records with
``qid``, ``img_name`` (``xmlab102/source.jpg``), ``question``, ``answer``,
``answer_type`` (``CLOSED`` / ``OPEN``), ``q_lang`` (``en`` / ``zh``),
``content_type``, ``modality``, ``location``.

Only records with ``q_lang == "en"`` are kept. ``sample_id`` is
``<split>-<qid>`` (qids are not promised unique across files); ``split`` is the
file's name.
"""

from __future__ import annotations

from radrank.datasets.base import DatasetAdapter, Sample, read_json, text_or_none
from radrank.datasets.vqa_rad import answer_text, answer_type_of
from radrank.errors import ConfigError, InputError
from radrank.text import is_missing

FILES = {"train": "train.json", "validate": "validate.json", "test": "test.json"}


class SLAKE(DatasetAdapter):
    name = "slake"
    task = "vqa"
    splits = tuple(FILES)

    def __init__(self, root, *, split=None, image_dir: str = "imgs"):
        super().__init__(root, split=split)
        self.image_dir = self.subdir(image_dir, "image_dir")
        wanted = FILES if split is None else [s for s in FILES if self._split_selected(s)]
        if split is not None and not wanted:
            raise ConfigError(f"dataset slake: unknown split {split!r}; SLAKE has {', '.join(FILES)}")
        self.files = {s: self.root / FILES[s] for s in wanted if (self.root / FILES[s]).is_file()}
        if not self.files:
            raise ConfigError(f"dataset slake: none of {', '.join(FILES[s] for s in wanted)} under {self.root}")

    def _options(self) -> dict:
        return {"files": sorted(self.files), "image_dir": str(self.image_dir)}

    def _samples(self):
        for split, path in self.files.items():
            path = self.subdir(path.name, "json")
            data = read_json(path)
            if not isinstance(data, list):
                raise InputError(path, "expected a JSON list of question records")
            for i, rec in enumerate(data):
                if not isinstance(rec, dict):
                    raise InputError(path, "record is not an object", row=i)
                if str(rec.get("q_lang", "")).strip().lower() != "en":
                    continue
                if is_missing(rec.get("qid")):
                    raise InputError(path, "question id is missing", field="qid", row=i)
                image = self.resolve(rec.get("img_name"), base=self.image_dir, file=path, field="img_name", row=i)
                yield Sample(
                    sample_id=f"{split}-{str(rec['qid']).strip()}", images=(image,), split=split,
                    question=answer_text(rec.get("question")), answer=answer_text(rec.get("answer")),
                    answer_type=answer_type_of(rec.get("answer_type")), study_id=text_or_none(rec.get("img_id")),
                    meta={"content_type": text_or_none(rec.get("content_type")),
                          "modality": text_or_none(rec.get("modality")),
                          "location": text_or_none(rec.get("location"))},
                    source=str(path), row=i,
                )

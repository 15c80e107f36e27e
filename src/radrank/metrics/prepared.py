"""A group's references, prepared once per lexical metric and kept between runs.

A lexical metric's work on a pair is half its reference's: tokens, token ids, k-gram ids and counts
(:class:`radrank.metrics.base.ReferenceGrams`). Within one scoring job each distinct reference is prepared once;
but a new submission's job scored the new model's 10,000 pairs with their 10,000 references prepared again, though
the group's references (its case set) had not changed: on this host the references were half to two thirds of the
lexical metrics' CPU on a new model's pairs.

:class:`PreparedReferences` holds a group's reference texts (the case set's, which every model's pairs share) and
gives each metric its preparation of them (:meth:`PreparedReferences.prepared`): made once per process, and kept in
the group's folder (the workflow gives ``.snakemake/radrank/references/<dataset>-<split>/``), one pickle per metric,
under a key: the sha256 of the metric's name, the code that prepared it (every radrank module and the versions of
the metric's packages: :func:`radrank.provenance.code_digest`) and every reference text, in order. A file whose key
is another — other references, other code, another metric's, truncated, unreadable — is never served: the
preparation is made again and the file replaced. The folder is the workflow's own state, beside Snakemake's: the
pickles are this code's (as :class:`radrank.report.reuse.DrillDownMemo`'s are); a submission cannot write there.

A pair whose reference is not among the group's (none in the workflow, whose scoring jobs align every model's pairs
to the case set) is scored with its chunk's references prepared on the spot (:func:`radrank.metrics.base.
references_of`): the values are the same either way (tests/test_lexical.py).
"""

from __future__ import annotations

import hashlib
import logging
import pickle
from pathlib import Path

log = logging.getLogger("radrank")

LAYOUT = "1"  # what a file holds: a change makes every preparation again


class PreparedReferences:
    """The reference texts of one group and, per metric, their preparation (see the module docstring).

    ``texts``: the group's references (repeats are kept once); ``folder``: where the preparations are kept between
    runs (None: in this process only); ``packages``: per metric name, the packages whose versions the key names."""

    def __init__(self, texts, folder=None, packages: dict | None = None):
        texts = texts.tolist() if hasattr(texts, "tolist") else texts  # a pandas column: not element by element
        self.texts = list(dict.fromkeys(str(t) for t in texts))
        self.folder = None if folder is None else Path(folder)
        self.packages = dict(packages or {})
        self._made: dict = {}
        self.served = []  # the metrics whose preparation came from the folder
        self.made = []  # the metrics whose preparation was made here

    def key(self, name: str) -> str:
        from radrank.provenance import code_digest

        h = hashlib.sha256(f"{LAYOUT}\0{name}\0{code_digest(tuple(self.packages.get(name, ())))}\0".encode())
        for text in self.texts:
            h.update(text.encode("utf-8", "surrogatepass") + b"\0")
        return h.hexdigest()

    def prepared(self, name: str, build) -> tuple:
        """(``build(texts)``, {text: its position}) for metric ``name``: from this process, else from the folder
        when its key is this one, else built (and kept in the folder)."""
        if name in self._made:
            return self._made[name]
        key = self.key(name)
        value = self._read(name, key)
        if value is None:
            value = build(self.texts)
            self._write(name, key, value)
            self.made.append(name)
        else:
            self.served.append(name)
        self._made[name] = (value, {text: i for i, text in enumerate(self.texts)})
        return self._made[name]

    def _path(self, name: str) -> Path:
        return self.folder / f"{name}.pickle"

    def _read(self, name: str, key: str):
        if self.folder is None:
            return None
        try:
            with open(self._path(name), "rb") as f:
                stored = pickle.load(f)
        except FileNotFoundError:
            return None
        except Exception as e:  # noqa: BLE001 (truncated, garbled: made again, never fatal)
            log.warning("%s: unreadable (%s); the references are prepared again", self._path(name), e)
            return None
        if not isinstance(stored, dict) or stored.get("key") != key:
            return None
        return stored.get("value")

    def _write(self, name: str, key: str, value) -> None:
        if self.folder is None:
            return
        from radrank import io

        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with io.atomic_path(self._path(name)) as tmp:
                with open(tmp, "wb") as f:
                    pickle.dump({"key": key, "value": value}, f, protocol=pickle.HIGHEST_PROTOCOL)
        except OSError as e:  # a read-only or full disk costs the next run this preparation, nothing else
            log.warning("%s: not written (%s)", self._path(name), e)

"""A report's group pages that are still right, kept instead of built again.

The report job covers every dataset × split, and a group's page costs seconds at leaderboard scale (its figures
and tables over every model). A submission to one dataset changes that dataset's groups and no other; a model
that fixes one file, or a new dataset, likewise. The pages and the figures folder are ``update()`` outputs
(Snakemake leaves them in place, and restores them if the job fails), and a group's page and figures are kept
when its *reuse key* equals the key recorded when they were written. The key is a sha256 over everything a page
is built from (:func:`radrank.report.build_group`):

* the bytes of every file the group reads — its leaderboard, ranks, summary and comparisons; per model its pairs,
  drop list and score files — and their paths and order (the page links the drop lists; the model order is the
  leaderboard's);
* the options every page shares: the drill-down size, the level, the link base, the contents (every group's
  title: a new group rebuilds every page), whether the index has a meta-evaluation section, the config hash;
* the code that renders it: the bytes of every module of the radrank package, the versions of the packages it
  reads and draws with.

A page that is built again still takes, per model, its drill-down rows (the model's worst and best cases with
their texts, values and explanations: a read of its whole pairs file) from :class:`DrillDownMemo` when that
model's pairs and score files, the drill-down's size, the rank column and the code are those they were chosen
from: a model's choice depends on its own files alone, so a new submission reads its own texts, not every
model's.

So a page is kept only where building it again would write the same bytes; a changed submission, score, case set
or ranking rebuilds it, whatever its mtime says (content, not dates: a file rewritten with other bytes and its
date set back still changes the key). What the index needs from a kept group (its part of report.md, its
overview row and section at a glance, provenance rows, appendix facts) was stored beside the key when the page was
built (a pickle per group, read only when its key matches: the same code wrote it; results/ is written by the
maintainers alone, as every rule's output there is read by the next as it is: docs/bad-input.md, "Who may write
what"). A group about to be rebuilt leaves the keys file first, so a job that dies half-way never leaves a key
beside a page written from something else.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
from pathlib import Path

KEYS_FILE = ".content-keys.json"  # in the figures folder: per page, the key it was built from
STATE_DIR = ".pages"  # in the figures folder: per page, what the index needs of it (GroupPage without its html)
DRILL_DOWN_DIR = ".drill-down"  # in the figures folder: per model's files, its drill-down rows (DrillDownMemo)
LAYOUT = "1"  # what a key covers and how the state is stored: a change rebuilds every page once
PACKAGES = ("numpy", "pandas", "pyarrow", "pillow")  # whose versions can change what a page shows
_BOOKKEEPING = {KEYS_FILE, STATE_DIR, DRILL_DOWN_DIR}
_KEEP = _BOOKKEEPING | {".snakemake_timestamp"}


def is_bookkeeping(relative_path) -> bool:
    """Whether a path under the report's folder is this module's bookkeeping (keys, stored index parts and
    drill-down rows, which name the files and folders the pages were built from), not part of the report."""
    return bool(_BOOKKEEPING & set(Path(relative_path).parts))


def code_digest() -> str:
    """sha256 of every module of the radrank package and of the versions of :data:`PACKAGES`."""
    from radrank.provenance import code_digest as digest

    return digest(PACKAGES)


def group_files(entry: dict) -> list:
    """Every file ``entry`` (a group as :func:`radrank.report.load_group` takes it) reads, in a fixed order."""
    from radrank.report.data import GROUP_FILES, MODEL_FILES

    files = [entry[kind] for kind in GROUP_FILES]
    for model in entry["models"].values():
        files += [model[kind] for kind in MODEL_FILES] + list(model["scores"].values())
    return [str(f) for f in files]


def group_key(entry: dict, options: dict, digests: dict | None = None) -> str:
    """The reuse key of one group's page (see the module docstring); ``digests``: path -> sha256 of the files
    already hashed."""
    from radrank.provenance import file_sha256

    digests = {} if digests is None else digests
    h = hashlib.sha256(json.dumps({"layout": LAYOUT, "code": code_digest(), "options": options, "entry": entry},
                                  sort_keys=True, default=str).encode())
    for path in group_files(entry):
        h.update((digests.get(path) or file_sha256(path)).encode())
    return h.hexdigest()


def drill_down_keys(entry: dict, n_cases: int, digests: dict) -> dict:
    """model -> the key of its drill-down rows in ``entry``'s group: a sha256 over the code, the drill-down's size,
    the metrics in order and the bytes of the model's pairs and score files (``digests``: path -> sha256)."""
    base = json.dumps({"layout": LAYOUT, "code": code_digest(), "cases": n_cases}, sort_keys=True)
    keys = {}
    for model, files in entry["models"].items():
        h = hashlib.sha256(base.encode())
        h.update(json.dumps(list(files["scores"])).encode())
        for path in (files["pairs"], *files["scores"].values()):
            h.update(digests[str(path)].encode())
        keys[model] = h.hexdigest()
    return keys


class DrillDownMemo:
    """A group's drill-down rows per model (:func:`radrank.report.data.load_group`), one pickle per
    :func:`drill_down_keys` key in the figures folder's :data:`DRILL_DOWN_DIR`, with the rank column they were
    chosen on (a pickle written by this code: its digest is in the key; results/ is the maintainers' alone)."""

    def __init__(self, folder, keys: dict):
        self.dir = Path(folder)
        self.keys = keys
        self.hits = 0

    @staticmethod
    def _column(rank_column) -> tuple | None:
        return None if rank_column is None else (rank_column.column, rank_column.label,
                                                 rank_column.higher_is_better, rank_column.leaf)

    def get(self, model: str, rank_column):
        """(rows, pairs provenance or None) stored for the model's files and this rank column, else None."""
        try:
            with open(self.dir / f"{self.keys[model]}.pickle", "rb") as f:
                stored = pickle.load(f)
        except Exception:  # absent, truncated: chosen again
            return None
        if not isinstance(stored, dict) or stored.get("rank_column") != self._column(rank_column):
            return None
        self.hits += 1
        return stored["rows"], stored["pairs_provenance"]

    def put(self, model: str, rank_column, rows: list, pairs_provenance) -> None:
        from radrank import io

        self.dir.mkdir(parents=True, exist_ok=True)
        with io.atomic_path(self.dir / f"{self.keys[model]}.pickle") as tmp:
            with open(tmp, "wb") as f:
                pickle.dump({"rank_column": self._column(rank_column), "rows": rows,
                             "pairs_provenance": pairs_provenance}, f, protocol=pickle.HIGHEST_PROTOCOL)


class PageReuse:
    """Which pages of one report job are kept (:meth:`kept`), and the bookkeeping of those it builds."""

    def __init__(self, layout: list, options: dict, pages: list, figures_dir, digest=None):
        """``digest``: path -> the sha256 of the file's bytes (a remembering :class:`radrank.digests.FileDigests`;
        default: each file read)."""
        from radrank.provenance import file_sha256

        digest = digest or file_sha256
        self.dir = Path(figures_dir)
        self.pages = [str(p) for p in pages]
        self.entries = {os.path.basename(p): entry for p, entry in zip(self.pages, layout)}
        self.digests = {path: digest(path) for entry in layout for path in group_files(entry)}
        self.keys = {name: group_key(entry, options, self.digests) for name, entry in self.entries.items()}
        self.drill_down = {name: drill_down_keys(entry, options["cases"], self.digests)
                           for name, entry in self.entries.items()}
        self.recorded = self._recorded()

    def drill_down_memo(self, page) -> DrillDownMemo:
        """The drill-down memo of a page's group (page: its path or file name)."""
        return DrillDownMemo(self.dir / DRILL_DOWN_DIR, self.drill_down[os.path.basename(str(page))])

    def _recorded(self) -> dict:
        try:
            data = json.loads((self.dir / KEYS_FILE).read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _state_path(self, name: str) -> Path:
        return self.dir / STATE_DIR / f"{name}.pickle"

    def kept(self) -> dict:
        """Page file name -> its stored :class:`radrank.report.GroupPage` (without html and figures), for each page
        still right: its key recorded and equal, its page, figures folder and state present and readable."""
        out = {}
        for path in self.pages:
            name = os.path.basename(path)
            entry = self.entries[name]
            if self.recorded.get(name) != self.keys[name] or not Path(path).is_file():
                continue
            if not (self.dir / entry["dataset"] / entry["split"]).is_dir():
                continue
            try:
                with open(self._state_path(name), "rb") as f:
                    page = pickle.load(f)  # written by this code: its digest is in the key
            except Exception:  # absent, truncated: built again
                continue
            if getattr(page, "page", None) == name:
                out[name] = page
        return out

    def prepare(self, kept: dict) -> None:
        """Before any page is written: the figures folder holds only the kept groups' figures and state (a rebuilt
        group's old figures, a group no longer in the report and the index's own figures are removed), and the
        keys file only the kept pages' keys."""
        keep_dirs = {(e["dataset"], e["split"]) for name, e in self.entries.items() if name in kept}
        self.dir.mkdir(parents=True, exist_ok=True)
        for child in self.dir.iterdir():
            if child.name in _KEEP:
                continue
            if child.is_dir():
                for split_dir in child.iterdir():
                    if (child.name, split_dir.name) not in keep_dirs:
                        _remove(split_dir)
                if not any(child.iterdir()):
                    child.rmdir()
            else:
                child.unlink()
        state = self.dir / STATE_DIR
        if state.is_dir():
            for path in state.iterdir():
                if path.name.removesuffix(".pickle") not in kept:
                    path.unlink()
        rows = self.dir / DRILL_DOWN_DIR  # only the rows of the models now in the report
        wanted = {f"{key}.pickle" for keys in self.drill_down.values() for key in keys.values()}
        if rows.is_dir():
            for path in rows.iterdir():
                if path.name not in wanted:
                    _remove(path)
        self._write_keys({name: self.keys[name] for name in kept})

    def built(self, page) -> None:
        """Record a page just written (its html and figures on disk): its index state now, its key at the end."""
        state = self._state_path(page.page)
        state.parent.mkdir(parents=True, exist_ok=True)
        from radrank import io

        # its job-log line aside: it says what this build read, not what the page is
        stored = page.__class__(**{**page.__dict__, "html": "", "figures": {}, "log": ""})
        with io.atomic_path(state) as tmp:
            with open(tmp, "wb") as f:
                pickle.dump(stored, f, protocol=pickle.HIGHEST_PROTOCOL)

    def finish(self, kept: dict) -> None:
        """Every page written: the kept ones newer than their inputs (else Snakemake would plan the job again), and
        every page's key recorded."""
        for path in self.pages:
            if os.path.basename(path) in kept:
                os.utime(path)
        self._write_keys(self.keys)

    def _write_keys(self, keys: dict) -> None:
        from radrank import io

        io.write_text(json.dumps(keys, indent=1, sort_keys=True), str(self.dir / KEYS_FILE))


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()

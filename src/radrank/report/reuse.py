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
LAYOUT = "1"  # what a key covers and how the state is stored: a change rebuilds every page once
PACKAGES = ("matplotlib", "numpy", "pandas", "pyarrow", "scipy", "pillow")
_KEEP = {KEYS_FILE, STATE_DIR, ".snakemake_timestamp"}


def is_bookkeeping(relative_path) -> bool:
    """Whether a path under the report's folder is this module's bookkeeping (keys and stored index parts, which
    name the files and folders the pages were built from), not part of the report."""
    return bool({KEYS_FILE, STATE_DIR} & set(Path(relative_path).parts))


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


def group_key(entry: dict, options: dict) -> str:
    """The reuse key of one group's page (see the module docstring)."""
    from radrank.provenance import file_sha256

    h = hashlib.sha256(json.dumps({"layout": LAYOUT, "code": code_digest(), "options": options, "entry": entry},
                                  sort_keys=True, default=str).encode())
    for path in group_files(entry):
        h.update(file_sha256(path).encode())
    return h.hexdigest()


class PageReuse:
    """Which pages of one report job are kept (:meth:`kept`), and the bookkeeping of those it builds."""

    def __init__(self, layout: list, options: dict, pages: list, figures_dir):
        self.dir = Path(figures_dir)
        self.pages = [str(p) for p in pages]
        self.entries = {os.path.basename(p): entry for p, entry in zip(self.pages, layout)}
        self.keys = {name: group_key(entry, options) for name, entry in self.entries.items()}
        self.recorded = self._recorded()

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
        self._write_keys({name: self.keys[name] for name in kept})

    def built(self, page) -> None:
        """Record a page just written (its html and figures on disk): its index state now, its key at the end."""
        state = self._state_path(page.page)
        state.parent.mkdir(parents=True, exist_ok=True)
        from radrank import io

        stored = page.__class__(**{**page.__dict__, "html": "", "figures": {}})
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

"""Snakemake's input checksums, read once per file version instead of once per output of the job.

When a job finishes, Snakemake records, for every output file, the sha256 of every input file no larger than
``--max-checksum-file-size`` (``PersistenceBase.finished``); outside the DAG build its IO cache is off, so each
of those is a fresh read of the file. A leaderboard's scoring job has one input and one output per model: at
100 models its six jobs read 61,000 files to record 600 outputs, most of a new submission's cost outside its
jobs (snakemake/snakemake#4240, open). The checksums themselves are needed: a rewritten input whose bytes are
unchanged must not rerun what depends on it.

:func:`memoise` keeps each local file's checksum under its stat identity (device, inode, size, mtime in ns):
a file rewritten gets a new identity and is read again, so a checksum is never served for other bytes than
the ones it was computed from. The DAG build's comparison (which names the algorithm) and the record written
when the job ends share one entry. While one job's records are written, an input asked for again (once per
output) is answered without another ``stat``: its inputs are finished files no job of the run writes (at 100
models, 76,000 calls → 1,000 stats). Storage-plugin files, forced checksums and an algorithm given as a callable
go to Snakemake unchanged.

With a ``store`` (the workflow's ``.snakemake/radrank/checksums.json``), the checksums of one run are the next run's
too: each is stored under the file's stat identity with its ctime (which an edit moves, even one whose mtime is set
back, and no ordinary tool can set back), and :func:`save` keeps what this run asked for. A new submission's run
hashed every unchanged pairs and drop file again (400 files at 100 models, 0.1 CPU-s of Snakemake's process).
"""

from __future__ import annotations

import contextvars
import json
import os
import tempfile

_MARK = "_radrank_memoised"
# path, threshold, algorithm -> checksum, while one job's records are written (PersistenceBase.finished)
_WITHIN_RECORDS: contextvars.ContextVar = contextvars.ContextVar("radrank_checksums_within_records", default=None)
# the checksums remembered across runs: the store's path, what it held at start, what this run asked for
_STORE: dict = {"path": None, "known": {}, "used": {}}


def unpatched(module: str, class_name: str, method: str, mark: str):
    """(the class, its method) of Snakemake's to patch: (class, None) where it is patched already (its function
    carries ``mark``), None where this Snakemake has no such method (then nothing is to change)."""
    import importlib

    try:
        cls = getattr(importlib.import_module(module), class_name)
    except (ImportError, AttributeError):
        return None
    original = getattr(cls, method, None)
    if original is None:
        return None
    return cls, (None if getattr(original, mark, False) else original)


def patch(module: str, class_name: str, method: str, mark: str, make) -> bool:
    """Replace Snakemake's ``method`` of ``class_name`` by ``make(the original)`` (idempotent: a method carrying
    ``mark`` is left as it is). False where this Snakemake has no such method (then nothing is changed)."""
    found = unpatched(module, class_name, method, mark)
    if found is None:
        return False
    cls, original = found
    if original is not None:
        replacement = make(original)
        replacement.__doc__ = original.__doc__
        setattr(replacement, mark, True)
        setattr(cls, method, replacement)
    return True


def _stamp(st) -> list:
    """What names a version of a file: its stat identity and its ctime (an edit moves the ctime, even one whose
    mtime is set back; no ordinary tool sets it back)."""
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _load(store) -> dict:
    if not store:
        return {}
    try:
        with open(store) as f:
            known = json.load(f)
    except (OSError, ValueError):  # none yet, or cut short: hashed again
        return {}
    return known if isinstance(known, dict) else {}


def save() -> None:
    """Write the store (atomically; none given: nothing): the checksums it held and those this run computed, of
    the files still as they were when hashed (a file gone or changed leaves it). An ``atexit`` handler of the
    Snakefile. A run that hashed nothing (a no-op rerun, a cluster job's step) leaves the file as it is, without a
    stat of its entries: an entry whose file changed since is never served (its stamp differs)."""
    path = _STORE["path"]
    if not path or not _STORE["used"]:
        return
    kept = {}
    for key, entry in {**_STORE["known"], **_STORE["used"]}.items():
        try:
            st = os.stat(key.split(":", 2)[2])
        except (OSError, IndexError):
            continue
        if isinstance(entry, list) and entry[:5] == _stamp(st):
            kept[key] = entry
    if kept == _STORE["known"]:
        return
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".checksums.", dir=folder)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(kept, f)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _STORE["known"] = kept


def memoise(store: str | None = None) -> bool:
    """Memoise ``snakemake.io._IOFile.checksum`` in this process (idempotent); ``store``: a JSON file that keeps
    them for the next run (:func:`save` writes it). False where this Snakemake has no such method (then nothing is
    changed: checksums are as slow as they were, never wrong)."""
    _STORE.update(path=store, known=_load(store), used={})

    def make(original):
        memo: dict = {}

        async def checksum(self, threshold=None, force=False, algorithm=None):
            named = "sha256" if algorithm is None else algorithm  # Snakemake's default, by name
            within = _WITHIN_RECORDS.get()
            asked = (self.file, threshold, named)
            if within is not None and not force and asked in within:  # only what passed the checks below is there
                return within[asked]
            if force or not isinstance(named, str) or self.is_storage:
                return await original(self, threshold, force, algorithm)
            try:
                st = os.stat(self.file)
            except OSError:
                return await original(self, threshold, force, algorithm)
            # the stat identity names the bytes wherever the path points (a hard link shares them)
            key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, threshold, named)
            try:
                value = memo[key]
            except KeyError:
                stored, stamp = f"{threshold}:{named}:{self.file}", _stamp(st)
                # an earlier run's checksum of this very version of the file (ctime included), else the file read
                entry = _STORE["known"].get(stored)
                value = entry[5] if isinstance(entry, list) and len(entry) == 6 and entry[:5] == stamp else None
                if value is None:
                    value = await original(self, threshold, force, algorithm)
                memo[key] = value
                if value is not None:
                    _STORE["used"][stored] = [*stamp, value]
            if within is not None:
                within[asked] = value
            return value

        return checksum

    if not patch("snakemake.io", "_IOFile", "checksum", _MARK, make):
        return False
    _within_records_of_a_job()
    return True


def _within_records_of_a_job() -> None:
    """``PersistenceBase.finished`` with a memo of its own: one per job, dropped when its records are written."""

    def make(original):
        async def finished(self, job, *args, **kwargs):
            token = _WITHIN_RECORDS.set({})
            try:
                return await original(self, job, *args, **kwargs)
            finally:
                _WITHIN_RECORDS.reset(token)

        return finished

    patch("snakemake.persistence", "PersistenceBase", "finished", _MARK, make)

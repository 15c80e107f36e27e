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
"""

from __future__ import annotations

import contextvars
import os

_MARK = "_radrank_memoised"
# path, threshold, algorithm -> checksum, while one job's records are written (PersistenceBase.finished)
_WITHIN_RECORDS: contextvars.ContextVar = contextvars.ContextVar("radrank_checksums_within_records", default=None)


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


def memoise() -> bool:
    """Memoise ``snakemake.io._IOFile.checksum`` in this process (idempotent). False where this Snakemake
    has no such method (then nothing is changed: checksums are as slow as they were, never wrong)."""

    def make(original):
        memo: dict = {}

        async def checksum(self, threshold=None, force=False, algorithm=None):
            named = "sha256" if algorithm is None else algorithm  # Snakemake's default, by name
            if force or not isinstance(named, str) or self.is_storage:
                return await original(self, threshold, force, algorithm)
            within = _WITHIN_RECORDS.get()
            asked = (self.file, threshold, named)
            if within is not None and asked in within:
                return within[asked]
            try:
                st = os.stat(self.file)
            except OSError:
                return await original(self, threshold, force, algorithm)
            # the stat identity names the bytes wherever the path points (a hard link shares them)
            key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, threshold, named)
            try:
                value = memo[key]
            except KeyError:
                value = memo[key] = await original(self, threshold, force, algorithm)
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

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
when the job ends share one entry. Storage-plugin files, forced checksums and an algorithm given as a callable go
to Snakemake unchanged.
"""

from __future__ import annotations

import os

_MARK = "_radrank_memoised"


def memoise() -> bool:
    """Memoise ``snakemake.io._IOFile.checksum`` in this process (idempotent). False where this Snakemake
    has no such method (then nothing is changed: checksums are as slow as they were, never wrong)."""
    try:
        from snakemake.io import _IOFile
    except ImportError:
        return False
    original = getattr(_IOFile, "checksum", None)
    if original is None:
        return False
    if getattr(original, _MARK, False):
        return True
    memo: dict = {}

    async def checksum(self, threshold=None, force=False, algorithm=None):
        named = "sha256" if algorithm is None else algorithm  # Snakemake's default, by name
        if force or not isinstance(named, str) or self.is_storage:
            return await original(self, threshold, force, algorithm)
        try:
            st = os.stat(self.file)
        except OSError:
            return await original(self, threshold, force, algorithm)
        key = (os.path.abspath(self.file), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, threshold, named)
        try:
            return memo[key]
        except KeyError:
            value = memo[key] = await original(self, threshold, force, algorithm)
            return value

    checksum.__doc__ = original.__doc__
    setattr(checksum, _MARK, True)
    _IOFile.checksum = checksum
    return True

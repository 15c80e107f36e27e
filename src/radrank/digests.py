"""Content digests of the files people write (submissions, references, sheets), for rerun decisions.

Snakemake decides whether a job's input changed by its modification time, and checksums files only
up to 1 MB, so touching a MIMIC- or ReXGradient-sized submission (a copy, a checkout, a sync) would
rerun its model's whole chain. The workflow therefore puts the sha256 of every file it reads from
outside the workflow into its jobs' params, and the profiles leave the mtime trigger out: a job
reruns when a file's content changes, never when it is only touched.

Hashing 100 models' submissions on every DAG build would cost seconds, so each digest is remembered by
(path, size, mtime, inode, ctime) in a small JSON file: only new and touched files are read again. The
ctime is what makes the memo trustworthy: an edit of the same size whose mtime is set back (``touch -r``,
``os.utime``) still moves the ctime, which no ordinary tool can set back.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from radrank.provenance import file_sha256


class FileDigests:
    """sha256 of files, remembered in ``memo`` (a JSON file; None: nothing remembered)."""

    def __init__(self, memo: str | Path | None = None):
        self.memo = Path(memo) if memo else None
        self._known: dict = {}
        if self.memo is not None and self.memo.is_file():
            try:
                self._known = json.loads(self.memo.read_text())
            except (OSError, ValueError):  # a memo cut short or unreadable: hash again
                self._known = {}
        self._changed = False

    def __call__(self, path) -> str:
        path = os.path.abspath(path)
        st = os.stat(path)
        stamp = [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns]
        known = self._known.get(path)
        if known and known[:4] == stamp and len(known) == 5:  # a memo of the 3-field stamp: hash again
            return known[4]
        digest = file_sha256(path)
        self._known[path] = [*stamp, digest]
        self._changed = True
        return digest

    def save(self) -> None:
        """Write the memo atomically (concurrent DAG builds: the last complete write wins)."""
        if self.memo is None or not self._changed:
            return
        self.memo.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".digests.", dir=self.memo.parent)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(self._known, f)
            os.replace(tmp, self.memo)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self._changed = False

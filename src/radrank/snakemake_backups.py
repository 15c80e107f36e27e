"""Snakemake's backups of ``update()`` outputs as hard links, not copies.

Before a job whose outputs are flagged ``update()`` runs, Snakemake copies each existing one to
``.snakemake/backups`` (``FileBackupMixin.backup_output``), to put it back should the job fail. This workflow
flags the outputs it keeps across runs: every model's score file, each group's model folders and replicate memo,
the report's pages and figures. So a new submission copied every model's files before its jobs could keep them:
at 20 models × 10,000 cases some 300 files (25 MB), at 100 models five times that, in Snakemake's own process.

:func:`link_backups` makes the backup a hard link of each file instead (a folder: a tree of links), which costs a
directory entry, not the bytes. It holds the bytes as they were because no job of this workflow writes a file in
place: every output is written to a temporary file renamed over the old one (:func:`radrank.io.atomic_path`), which
leaves the old file — the backup — as it was, and a file removed loses only its own name. What Snakemake does with
a backup when the job fails is unchanged (9.27 does not restore a failed ``run:`` job's outputs from it, links or
copies alike: it removes them, as any failed job's). Where a link cannot be made (another file system, one without
hard links) the backup is Snakemake's copy, as before.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from radrank.snakemake_checksums import patch

_MARK = "_radrank_linked_backup"


def link_backups() -> bool:
    """Hard-link Snakemake's backups of ``update()`` outputs in this process (idempotent). False where this
    Snakemake has no such method (then nothing is changed: backups are copies, as slow as they were)."""

    def make(original):
        def backup_output(self, path: Path) -> None:
            backup_path = self._get_backup_path(path)
            try:
                link_copy(Path(path), backup_path)
            except OSError:
                _remove(backup_path)  # what a link that failed half-way left
                original(self, path)

        return backup_output

    return patch("snakemake.persistence", "FileBackupMixin", "backup_output", _MARK, make)


def link_copy(path: Path, backup_path: Path) -> None:
    """``backup_path`` as a hard link of the file ``path``, or a tree of hard links of the folder ``path`` (as
    Snakemake's copy: a file backup replaces an old one, a folder backup needs the place free)."""
    backup_path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir():
        shutil.copytree(path, backup_path, copy_function=os.link)
    else:
        backup_path.unlink(missing_ok=True)
        os.link(path, backup_path)


def _remove(path: Path) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    except OSError:
        pass

"""Snakemake's backups of update() outputs with radrank.snakemake_backups: each file's backup is a hard link (the
same inode, no bytes copied; Snakemake alone copies) that still holds the old bytes after the job has written its
outputs as radrank's jobs do, and a run ends as it does with Snakemake's copies, whether the job succeeds or fails.
Where no link can be made, the backup is Snakemake's copy."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# One job with an update() file and an update() folder, like the scoring job's score files and the bootstrap's
# model folders. It records the inodes of its outputs and of their backups, then writes as radrank's jobs do
# (a new file renamed over the old: radrank.io), removes one file of the folder, and fails when FAIL=1.
SNAKEFILE = textwrap.dedent(f"""
    import json, os, sys
    sys.path.insert(0, {str(SRC)!r})
    from radrank import io, snakemake_backups

    if os.environ.get("LINK") == "1":
        snakemake_backups.link_backups()

    rule all:
        input: "out/kept.txt", "out/folder"

    rule job:
        input: "in.txt"
        output: kept=update("out/kept.txt"), folder=update(directory("out/folder"))
        run:
            backups = ".snakemake/backups/out"
            json.dump({{name: [os.stat(os.path.join(where, name)).st_ino for where in ("out", backups)]
                       for name in ("kept.txt", "folder/a.txt")}}, open("inodes.json", "w"))
            io.write_text("new " + open(input[0]).read(), output.kept)
            os.makedirs(output.folder, exist_ok=True)
            io.write_text("new a", os.path.join(output.folder, "a.txt"))
            if os.path.exists(os.path.join(output.folder, "b.txt")):
                os.remove(os.path.join(output.folder, "b.txt"))
            json.dump({{name: open(os.path.join(backups, name)).read() for name in ("kept.txt", "folder/a.txt",
                                                                               "folder/b.txt")}},
                      open("backups.json", "w"))
            if os.environ.get("FAIL") == "1":
                raise RuntimeError("the job fails after writing")
""")


def _run(work: Path, link: bool, fail: bool):
    env = {**os.environ, "LINK": "1" if link else "0", "FAIL": "1" if fail else "0"}
    return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "-s", "Snakefile", "--forceall"],
                          cwd=work, env=env, capture_output=True, text=True)


def _workflow(tmp_path: Path) -> Path:
    tmp_path.mkdir(parents=True)
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    (tmp_path / "in.txt").write_text("input")
    (tmp_path / "out/folder").mkdir(parents=True)
    (tmp_path / "out/kept.txt").write_text("old kept")
    (tmp_path / "out/folder/a.txt").write_text("old a")
    (tmp_path / "out/folder/b.txt").write_text("old b")
    return tmp_path


def _state(work: Path) -> dict:
    """Every file under out/ and .snakemake/backups/ with its text."""
    return {str(p.relative_to(work)): p.read_text() for where in ("out", ".snakemake/backups")
            for p in sorted((work / where).rglob("*")) if p.is_file()}


@pytest.mark.parametrize("fail", [False, True])
def test_a_backup_is_a_link_that_keeps_the_old_bytes_and_a_run_ends_as_with_copies(tmp_path, fail):
    ends = {}
    for link in (True, False):
        work = _workflow(tmp_path / f"link-{link}")
        done = _run(work, link=link, fail=fail)
        assert (done.returncode != 0) is fail, done.stderr[-2000:]
        inodes = json.loads((work / "inodes.json").read_text())
        for name, (output, backup) in inodes.items():
            assert (output == backup) is link, name  # a link shares the inode; Snakemake's copy does not
        # after the job replaced one file and removed another, the backups still hold what was there before it
        assert json.loads((work / "backups.json").read_text()) == {
            "kept.txt": "old kept", "folder/a.txt": "old a", "folder/b.txt": "old b"}
        ends[link] = _state(work)
    assert ends[True] == ends[False]
    if not fail:
        assert ends[True] == {"out/kept.txt": "new input", "out/folder/a.txt": "new a",
                              "out/folder/.snakemake_timestamp": ""}  # Snakemake's mark on a directory output


def test_where_no_link_can_be_made_the_backup_is_a_copy(tmp_path, monkeypatch):
    from snakemake.persistence import FileBackupMixin

    from radrank import snakemake_backups

    monkeypatch.setattr(FileBackupMixin, "backup_output", FileBackupMixin.backup_output)  # undone after the test
    assert snakemake_backups.link_backups() and snakemake_backups.link_backups()  # idempotent
    assert getattr(FileBackupMixin.backup_output, snakemake_backups._MARK)

    def no_link(src, dst, **kwargs):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", no_link)
    (tmp_path / "out/folder").mkdir(parents=True)
    (tmp_path / "out/kept.txt").write_text("kept")
    (tmp_path / "out/folder/a.txt").write_text("a")

    class Persistence(FileBackupMixin):
        _backup_path = tmp_path / "backups"

    for name in ("out/kept.txt", "out/folder"):
        Persistence().backup_output(tmp_path / name)
        backup = Persistence()._get_backup_path(tmp_path / name)
        source = tmp_path / name
        pairs = [(source, backup)] if source.is_file() else [(source / "a.txt", backup / "a.txt")]
        for src, dst in pairs:
            assert dst.read_text() == src.read_text()
            assert os.stat(dst).st_ino != os.stat(src).st_ino  # a copy

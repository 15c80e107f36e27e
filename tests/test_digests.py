"""The digest memo (radrank.digests.FileDigests): a file's sha256 is reused only while nothing about it moved."""

from __future__ import annotations

import hashlib
import os

from radrank.digests import FileDigests


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_same_size_edit_with_its_mtime_set_back_is_hashed_again(tmp_path):
    sub, memo = tmp_path / "model.json", tmp_path / "memo" / "digests.json"
    sub.write_bytes(b'{"c1": {"model_prediction": "No effusion."}}')
    digests = FileDigests(memo)
    first = digests(sub)
    assert first == sha256(sub)
    digests.save()
    before = os.stat(sub)
    sub.write_bytes(b'{"c1": {"model_prediction": "Ni effusion."}}')  # same size, in place (same inode)
    os.utime(sub, ns=(before.st_atime_ns, before.st_mtime_ns))  # `touch -r`: the mtime restored
    after = os.stat(sub)
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)
    again = FileDigests(memo)  # the next DAG build reads the memo
    assert again(sub) == sha256(sub) != first
    again.save()
    assert FileDigests(memo)(sub) == sha256(sub)


def test_an_unchanged_file_is_not_read_again_and_an_old_memo_is_hashed_again(tmp_path, monkeypatch):
    sub, memo = tmp_path / "model.json", tmp_path / "digests.json"
    sub.write_text("{}")
    digests = FileDigests(memo)
    digests(sub)
    digests.save()
    reads = []
    import radrank.digests as module

    real = module.file_sha256
    monkeypatch.setattr(module, "file_sha256", lambda path: reads.append(path) or real(path))
    assert FileDigests(memo)(sub) == sha256(sub) and reads == []  # remembered
    st = os.stat(sub)
    memo.write_text('{"%s": [%d, %d, %d, "%s"]}' % (sub, st.st_size, st.st_mtime_ns, st.st_ino, "0" * 64))
    assert FileDigests(memo)(sub) == sha256(sub) and reads == [str(sub)]  # a memo without the ctime: hashed

"""Snakemake's input checksums with radrank.snakemake_checksums: a job of N inputs and N outputs reads each input
once to record them (Snakemake alone reads each N times), the recorded checksums are the files' sha256 (hashlib,
the reference), a rewritten input is read again, and an input rewritten with the same bytes still reruns nothing
downstream (the checksums are kept, not dropped)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
N = 12

# A group job like a leaderboard's scoring job (one input and one output per model), and one job downstream of
# one of its outputs. Every content read for a checksum is counted (hashlib.file_digest, Snakemake's reader).
SNAKEFILE = textwrap.dedent(f"""
    import hashlib, json, os, sys
    sys.path.insert(0, {str(SRC)!r})
    from radrank import snakemake_checksums

    if os.environ.get("MEMOISE") == "1":
        snakemake_checksums.memoise(store=os.environ.get("STORE") or None)
        import atexit
        atexit.register(snakemake_checksums.save)
    READS = []
    _file_digest = hashlib.file_digest
    def _counting(f, *a, **k):
        READS.append(os.path.relpath(f.name))
        return _file_digest(f, *a, **k)
    hashlib.file_digest = _counting

    onsuccess:
        with open("reads.json", "w") as out:
            json.dump(READS, out)

    rule all:
        input: expand("out/{{i}}.txt", i=range({N})), "down/0.txt"

    rule group:
        input: expand("in/{{i}}.txt", i=range({N}))
        output: expand("out/{{i}}.txt", i=range({N}))
        run:
            for src, dst in zip(input, output):
                with open(dst, "w") as f:
                    f.write(open(src).read().upper())

    rule down:
        input: "out/0.txt"
        output: "down/0.txt"
        run:
            with open(output[0], "w") as f:
                f.write(open(input[0]).read()[::-1])
""")


def _run(work: Path, memoise: bool, *args, store: str = "") -> tuple[list, str]:
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "all", *args], cwd=work,
                          capture_output=True, text=True,
                          env={**os.environ, "MEMOISE": "1" if memoise else "0", "STORE": store})
    assert proc.returncode == 0, proc.stderr[-3000:]
    reads = json.loads((work / "reads.json").read_text())
    return reads, proc.stderr


def _workdir(tmp_path: Path) -> Path:
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    (tmp_path / "in").mkdir()
    for i in range(N):
        (tmp_path / "in" / f"{i}.txt").write_text(f"model {i} " * (i + 1))
    return tmp_path


def _recorded(work: Path, output: str) -> dict:
    """The input checksums Snakemake recorded for ``output`` (its metadata record, whatever its file name)."""
    for record in (work / ".snakemake" / "metadata").iterdir():
        data = json.loads(record.read_text())
        if data.get("rule") and data.get("input_checksums") is not None and output in _record_outputs(record):
            return data["input_checksums"]
    raise AssertionError(f"no metadata record for {output}")


def _record_outputs(record: Path) -> set:
    import base64

    try:
        return {base64.b64decode(record.name).decode()}
    except Exception:
        return set()


@pytest.mark.parametrize("memoise", [False, True])
def test_a_group_job_reads_each_input_once_to_record_it(tmp_path, memoise):
    work = _workdir(tmp_path)
    reads, _ = _run(work, memoise)
    group_reads = [r for r in reads if r.startswith("in/")]
    if memoise:
        assert sorted(group_reads) == sorted(f"in/{i}.txt" for i in range(N))  # each once
    else:  # Snakemake alone: each input once per output (what radrank's memo exists for)
        assert len(group_reads) == N * N
    for i in (0, N - 1):  # what is recorded is the reference sha256 of the bytes, with the memo or without
        recorded = _recorded(work, f"out/{i}.txt")
        for j in range(N):
            digest = hashlib.sha256((work / "in" / f"{j}.txt").read_bytes()).hexdigest()
            assert recorded[f"in/{j}.txt"] == f"sha256:{digest}"


def test_a_rewritten_input_is_read_again_and_same_bytes_rerun_nothing(tmp_path):
    work = _workdir(tmp_path)
    _run(work, True)
    down_before = (work / "down/0.txt").stat().st_mtime_ns
    # out/0.txt rewritten with its own bytes (newer than down/0.txt): its recorded checksum says unchanged
    os.utime(work / "out/0.txt", ns=(down_before + 10**9, down_before + 10**9))
    reads, err = _run(work, True)
    assert "Nothing to be done" in err, err[-2000:]
    assert (work / "down/0.txt").stat().st_mtime_ns == down_before
    # in/3.txt rewritten with other bytes of the same size: read again, the group job reruns, down/0.txt with it
    path = work / "in/3.txt"
    old = path.read_bytes()
    path.write_bytes(old.replace(b"model", b"MODEL"))
    reads, err = _run(work, True)
    assert "rule group" in err
    recorded = _recorded(work, "out/5.txt")
    assert recorded["in/3.txt"] == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    assert reads.count("in/3.txt") == 1


def test_the_store_serves_the_next_run_until_a_file_changes(tmp_path):
    """With a store, the next run's records take the checksums of unchanged inputs from it (no input read), and an
    input rewritten with other bytes of the same size, its mtime set back, is read again and recorded as it is now
    (its ctime moved); what is recorded is always the reference sha256 of the bytes."""
    work = _workdir(tmp_path)
    store = ".snakemake/radrank/checksums.json"
    reads, _ = _run(work, True, store=store)
    assert sorted(r for r in reads if r.startswith("in/")) == sorted(f"in/{i}.txt" for i in range(N))
    assert len(json.loads((work / store).read_text())) >= N
    reads, _ = _run(work, True, "--forcerun", "group", store=store)
    assert not [r for r in reads if r.startswith("in/")]  # every record written from the store
    path = work / "in/3.txt"
    before = path.stat()
    path.write_bytes(path.read_bytes().replace(b"model", b"MODEL"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # the date set back: the ctime still moved
    reads, _ = _run(work, True, "--forcerun", "group", store=store)
    assert [r for r in reads if r.startswith("in/")] == ["in/3.txt"]
    for j in range(N):
        digest = hashlib.sha256((work / "in" / f"{j}.txt").read_bytes()).hexdigest()
        assert _recorded(work, "out/5.txt")[f"in/{j}.txt"] == f"sha256:{digest}"

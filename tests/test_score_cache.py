"""The per-pair score cache (radrank.score_cache): digests, exact round trips, many writers at once, reads that
survive a concurrent prune, bounds, and `radrank cache info|prune`."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from radrank import cli
from radrank import io as radrank_io
from radrank import score_cache as sc

REPO = Path(__file__).resolve().parents[1]
KEY = {"metric": "bertscore", "identity": {"version": 1, "settings": {"idf": False}}, "weights": "f" * 16}
PAIRS = pd.DataFrame({"reference": ["No effusion.", "a|b", "a", None, "", "nan", "Clear lungs."],
                      "hypothesis": ["No effusion.", "c", "b|c", "", None, "nan", "Clear lungs!"]})


@pytest.fixture(autouse=True)
def fresh_memo():
    """Each test reads the cache as a new process would (the memo is per process, keyed by pack list)."""
    for memo in (sc._INDEXES, sc._PACKS, sc._WARNED, sc._FILTERS):
        memo.clear()
    yield
    for memo in (sc._INDEXES, sc._PACKS, sc._WARNED, sc._FILTERS):
        memo.clear()


def scores_of(digests) -> pd.DataFrame:
    """Scores that are a function of the digest, so any copy of an entry can be checked exactly."""
    digests = np.asarray(digests)
    values = np.array([int(d[:8], 16) / 2**32 for d in digests])
    return pd.DataFrame({"digest": digests, "precision": values, "recall": values / 2,
                         "f1": np.where(values < 0.1, np.nan, values / 3),
                         "explanation": pd.Series([None if v < 0.2 else d * 4 for d, v in zip(digests, values)],
                                                  dtype=object)})


def digests_of(n: int, start: int = 0) -> np.ndarray:
    frame = pd.DataFrame({"reference": [f"reference {i}" for i in range(start, start + n)],
                          "hypothesis": [f"hypothesis {i % 97}" for i in range(start, start + n)]})
    return sc.pair_digests(frame, ("reference", "hypothesis"))


# --- digests --------------------------------------------------------------------------------------


def encoded(tag: str, payload: bytes) -> bytes:
    return tag.encode() + struct.pack(">Q", len(payload)) + payload


def test_digest_is_the_documented_encoding():
    frame = pd.DataFrame({"reference": ["Clear.", None], "age": [65.0, np.nan], "n": [3, 4], "flag": [True, False]})
    header = b"radrank-pair-digest/1\n" + b"".join(encoded("s", c.encode()) for c in frame.columns)
    rows = [encoded("s", b"Clear.") + encoded("f", struct.pack(">d", 65.0)) + encoded("i", b"3") + encoded("b", b"\1"),
            encoded("n", b"") + encoded("n", b"") + encoded("i", b"4") + encoded("b", b"\0")]
    expected = [hashlib.sha256(header + row).hexdigest()[:32] for row in rows]
    assert sc.pair_digests(frame, frame.columns).tolist() == expected


def test_digests_are_the_same_in_another_process():
    here = sc.pair_digests(PAIRS, ("reference", "hypothesis"))
    code = ("import json, sys, pandas as pd; from radrank.score_cache import pair_digests; "
            "frame = pd.DataFrame(json.loads(sys.stdin.read())); "
            "print(json.dumps(pair_digests(frame, ('reference', 'hypothesis')).tolist()))")
    out = subprocess.run([sys.executable, "-c", code], input=json.dumps(PAIRS.to_dict("list")), capture_output=True,
                         text=True, check=True, env={**os.environ, "PYTHONPATH": str(REPO / "src"),
                                                     "PYTHONHASHSEED": "12345"})
    assert json.loads(out.stdout) == here.tolist()
    assert all(len(d) == 32 and int(d, 16) >= 0 for d in here)


def test_digests_are_unambiguous():
    d = sc.pair_digests(PAIRS, ("reference", "hypothesis"))
    assert len(set(d)) == len(d)  # ("a|b", "c") vs ("a", "b|c"); None vs "" vs "nan"
    assert d[0] == sc.pair_digests(PAIRS.iloc[[0]], ("reference", "hypothesis"))[0]  # the same pair, the same digest
    assert sc.pair_digests(PAIRS, ("hypothesis", "reference"))[1] != d[1]  # the columns are part of it
    ages = pd.DataFrame({"age": pd.Series([65, 65.0, "65", None, "None", "", True, 1], dtype=object)})
    assert len(set(sc.pair_digests(ages, ["age"]))) == len(ages)  # the type is part of the value


def test_a_tables_digest_is_one_sha256_over_its_rows_encodings():
    """radrank.score_cache.rows_digest (a case set's, in radrank.score_reuse): the documented encoding of every row,
    one after another, after the header; any change of a value, of the order or of a value's boundary changes it."""
    frame = pd.DataFrame({"sample_id": ["c1", "c2"], "reference": ["Clear.", None]})
    header = b"rows\n" + b"radrank-pair-digest/1\n" + b"".join(encoded("s", c.encode()) for c in frame.columns)
    rows = encoded("s", b"c1") + encoded("s", b"Clear.") + encoded("s", b"c2") + encoded("n", b"")
    assert sc.rows_digest(frame, frame.columns) == hashlib.sha256(header + rows).hexdigest()
    variants = [frame, frame.iloc[::-1], frame.iloc[:1], frame.iloc[:0],
                frame.assign(reference=["Clear. ", None]),
                frame.assign(sample_id=["c1C", "c2"], reference=["lear.", None]),  # a boundary moved
                frame.assign(reference=["Clear.", ""])]
    assert len({sc.rows_digest(v, ["sample_id", "reference"]) for v in variants}) == len(variants)
    as_objects = frame.astype(object)
    assert sc.rows_digest(as_objects, ["sample_id", "reference"]) == sc.rows_digest(frame, ["sample_id", "reference"])


def test_vectorised_columns_digest_like_their_values_one_by_one():
    """Each dtype has its vectorised path; an object column of the same values (the per-element path) agrees."""
    frame = pd.DataFrame({"text": pd.Series(["x", None, "ü", ""], dtype="str"), "ints": [1, -2, 10**12, 0],
                          "floats": [0.5, np.nan, -0.0, 1e300], "flags": [True, False, True, False],
                          "nullable": pd.Series([1, None, 3, 4], dtype="Int64"),
                          "category": pd.Series(["a", "b", None, "a"], dtype="category")})
    for column in frame.columns:
        as_objects = pd.DataFrame({column: pd.Series(frame[column].tolist(), dtype=object)})
        assert (sc.pair_digests(frame, [column]) == sc.pair_digests(as_objects, [column])).all(), column
    with pytest.raises(TypeError, match="when"):
        sc.pair_digests(pd.DataFrame({"when": pd.to_datetime(["2020-01-01"])}), ["when"])


# --- round trip -----------------------------------------------------------------------------------


def mixed_frame(n: int = 50) -> pd.DataFrame:
    digests = digests_of(n)
    rng = np.random.default_rng(0)
    values = rng.random(n)
    values[::7] = np.nan
    return pd.DataFrame({"digest": digests, "f1": values, "count": np.arange(n, dtype=np.int64),
                         "parsed": values > 0.5, "label": pd.Series([None if i % 5 == 0 else f"l{i}" for i in range(n)],
                                                                     dtype="str"),
                         "explanation": pd.Series([None if i % 3 == 0 else f"because {i}" for i in range(n)],
                                                  dtype=object)})


def test_lookup_returns_what_was_stored_with_its_dtypes(tmp_path):
    ns = sc.ScoreCache(tmp_path).namespace(KEY)
    frame = mixed_frame()
    assert ns.store(frame.iloc[:30], {"model": "first"}) is not None
    ns.store(frame.iloc[20:], {"model": "second"})
    wanted = list(frame.digest[::-2]) + ["0" * 32, frame.digest[1]]  # an unknown digest, a repeated one
    got = ns.lookup(wanted)
    expected = frame.set_index("digest").loc[list(dict.fromkeys(d for d in wanted if d != "0" * 32))].reset_index()
    pd.testing.assert_frame_equal(got, expected, check_exact=True)
    missing = got.explanation[got.explanation.isna()]
    assert len(missing) and all(v is None for v in missing) and got.explanation.dtype == object  # None, object stay
    assert ns.meta() == {"model": "first"}  # the oldest pack's
    empty = ns.lookup(["0" * 32])  # no pack's digest filter holds it: no pack is read, so no stored column is known
    assert empty.empty and list(empty.columns) == ["digest"]


def test_a_few_digests_asked_of_a_large_namespace_come_back_in_order_from_their_oldest_copy(tmp_path):
    ns = sc.ScoreCache(tmp_path).namespace(KEY)
    every = digests_of(4000)
    ns.store(scores_of(every[:3000]), {})
    newer = scores_of(every[2000:]).assign(precision=-1.0)  # a later copy of 1000 of them: never the one served
    ns.store(newer, {})
    wanted = [every[3500], "0" * 32, every[10], every[2500], every[10], every[3999]]
    got = ns.lookup(wanted)
    assert got.digest.tolist() == [every[3500], every[10], every[2500], every[3999]]
    assert got.precision.tolist()[0] == -1.0 and (got.precision.to_numpy()[1:3] >= 0).all()
    assert got.precision.tolist()[3] == -1.0


def test_a_score_file_from_cached_rows_is_byte_identical(tmp_path):
    ns = sc.ScoreCache(tmp_path / "cache").namespace(KEY)
    fresh = mixed_frame()
    ns.store(fresh, {"model": "m"})
    radrank_io.write_parquet(fresh, tmp_path / "fresh.parquet", {"model": "m"})
    radrank_io.write_parquet(ns.lookup(fresh.digest), tmp_path / "cached.parquet", {"model": "m"})
    assert (tmp_path / "fresh.parquet").read_bytes() == (tmp_path / "cached.parquet").read_bytes()


def test_namespaces_are_separate_and_keys_must_be_json(tmp_path):
    cache = sc.ScoreCache(tmp_path)
    frame = scores_of(digests_of(5))
    cache.namespace(KEY).store(frame, {})
    assert cache.namespace({**KEY, "weights": "0" * 16}).lookup(frame.digest).empty
    assert cache.namespace(json.loads(json.dumps(KEY))).id == cache.namespace(KEY).id
    with pytest.raises(ValueError, match="JSON"):
        cache.namespace({"weights": Path("x")})


def test_a_pack_of_other_columns_or_types_is_not_served(tmp_path, caplog):
    ns = sc.ScoreCache(tmp_path).namespace(KEY, columns=("f1",))
    ns.store(pd.DataFrame({"digest": ["a" * 32], "f1": [0.5]}), {})
    ns.store(pd.DataFrame({"digest": ["b" * 32], "f1": ["0.5"]}), {})  # the metric's output changed, same identity
    ns.store(pd.DataFrame({"digest": ["c" * 32], "f2": [0.5]}), {})
    got = ns.lookup(["a" * 32, "b" * 32, "c" * 32])
    assert got.digest.tolist() == ["a" * 32] and got.f1.tolist() == [0.5]
    assert [reason.split(" ")[0:2] for _, reason in ns.skipped] == [["holds", "column"], ["holds", "columns"]]
    assert "column types that do not fit" in caplog.text and "holds columns ['f2'], not ['f1']" in caplog.text


def test_a_cache_that_cannot_be_written_never_fails_the_job(tmp_path, caplog):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    ns = sc.ScoreCache(blocked).namespace(KEY)
    frame = scores_of(digests_of(3))
    assert ns.store(frame, {}) is None and "could not write" in caplog.text
    assert ns.lookup(frame.digest).empty


# --- integrity: a pack is served only when it is the one that was written ------------------------


def real_pack(tmp_path, secret=b""):
    """A namespace holding one pack of 20 entries; (namespace, its frame, the pack's path)."""
    ns = sc.ScoreCache(tmp_path, secret=secret).namespace(KEY, columns=("precision", "recall", "f1", "explanation"))
    frame = scores_of(digests_of(20))
    path = ns.store(frame, {"model": "real"})
    return ns, frame, path


def poisoned_bytes(path: Path) -> bytes:
    """The pack's table with every score set to 1.0, written as a well-formed parquet file with its metadata."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    for name in ("precision", "recall", "f1"):
        table = table.set_column(table.schema.get_field_index(name), name, pa.array(np.ones(table.num_rows)))
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def forged_name(folder: Path, data: bytes, secret: bytes = b"", created: int = 1) -> Path:
    """A valid pack name for ``data`` under ``secret``: what a forger running radrank's own code computes."""
    stem = f"pack-{created:020d}-{'0' * 12}"
    return folder / f"{stem}-{sc._checksum(secret, folder.name, stem, [data])}.parquet"


def attack(kind: str, path: Path, tmp_path: Path) -> Path:
    """Damage or poison the namespace of ``path`` one way; the path of the pack that should not be served."""
    folder = path.parent
    if kind == "overwritten":  # every score 1.0, written over the real pack under its name
        path.write_bytes(poisoned_bytes(path))
        return path
    if kind == "older_name":  # a poisoned copy named older than the real pack (the oldest copy wins a duplicate)
        target = folder / f"pack-{1:020d}-{'0' * 12}-{path.name.split('-')[3]}"
        target.write_bytes(poisoned_bytes(path))
        return target
    if kind == "renamed":  # the real bytes under an older name: the checksum binds the name too
        target = folder / f"pack-{1:020d}-{'0' * 12}-{path.name.split('-')[3]}"
        target.write_bytes(path.read_bytes())
        path.unlink()
        return target
    if kind == "unchecked_name":  # a pack of the layout without checksums
        target = folder / f"pack-{1:020d}-{'0' * 12}.parquet"
        target.write_bytes(poisoned_bytes(path))
        return target
    if kind == "foreign":  # a well-formed pack of another namespace (another metric's scores) copied in
        other = sc.ScoreCache(tmp_path).namespace({**KEY, "metric": "other"})
        stored = other.store(scores_of(digests_of(20)).assign(precision=1.0, recall=1.0, f1=1.0), {})
        target = folder / stored.name.replace(stored.name.split("-")[1], f"{1:020d}")
        target.write_bytes(stored.read_bytes())
        return target
    if kind == "truncated":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif kind == "random":
        path.write_bytes(np.random.default_rng(0).bytes(path.stat().st_size))
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "folder":
        path.unlink()
        path.mkdir()
        (path / "x").write_text("x")
    elif kind == "symlink":
        outside = tmp_path / "outside.parquet"
        outside.write_bytes(poisoned_bytes(path))
        path.unlink()
        path.symlink_to(outside)
    elif kind == "fifo":
        path.unlink()
        os.mkfifo(path)
    else:
        raise ValueError(kind)
    return path


ATTACKS = ("overwritten", "older_name", "renamed", "unchecked_name", "foreign", "truncated", "random", "empty",
           "folder", "symlink", "fifo")


@pytest.mark.parametrize("kind", ATTACKS)
def test_a_damaged_or_foreign_pack_is_skipped_named_and_never_served(tmp_path, caplog, kind):
    ns, frame, path = real_pack(tmp_path)
    bad = attack(kind, path, tmp_path)
    sc._PACKS.clear(), sc._INDEXES.clear()  # a later job, in another process
    got = ns.lookup(frame.digest)  # never raises
    assert not len(got) or (got[["precision", "recall"]] != 1.0).all().all()  # not one poisoned score served
    if kind in ("older_name", "unchecked_name", "foreign"):  # the real pack is still there and answers
        pd.testing.assert_frame_equal(got, frame, check_exact=True)
    else:  # the real pack is gone or damaged: every pair is a miss, scored again
        assert got.empty
    assert [p for p, _ in ns.skipped] == [bad]
    assert str(bad) in caplog.text and "it is not served, its pairs are scored again" in caplog.text
    assert ns.meta() in ({"model": "real"}, None)  # provenance never comes from the bad pack
    # the job scores the misses and stores them: the next lookup serves the fresh pack, the bad one still skipped
    ns.store(frame[~frame.digest.isin(got.digest)], {"model": "rescored"})
    pd.testing.assert_frame_equal(ns.lookup(frame.digest).sort_values("digest").reset_index(drop=True),
                                  frame.sort_values("digest").reset_index(drop=True), check_exact=True)


def test_a_pack_edited_in_place_after_it_was_indexed_is_not_served(tmp_path, caplog):
    ns, frame, path = real_pack(tmp_path)
    pd.testing.assert_frame_equal(ns.lookup(frame.digest), frame)  # indexed and memoised in this process
    data = poisoned_bytes(path)
    with open(path, "r+b") as f:  # same inode, the mtime set back: only ctime and the bytes tell
        st = os.stat(path)
        f.write(data)
        f.truncate()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert ns.lookup(frame.digest).empty and str(path) in caplog.text


def test_with_a_secret_a_forger_without_it_writes_nothing_the_cache_serves(tmp_path, caplog):
    secret = b"s" * 32
    ns, frame, path = real_pack(tmp_path, secret)
    data = poisoned_bytes(path)
    forged = forged_name(path.parent, data)  # the checksum anyone can compute from radrank's code
    forged.write_bytes(data)
    pd.testing.assert_frame_equal(ns.lookup(frame.digest), frame, check_exact=True)  # the real pack answers
    assert [p for p, _ in ns.skipped] == [forged] and "written without this cache's secret_file" in caplog.text
    keyless = sc.ScoreCache(tmp_path).namespace(KEY, columns=ns.columns)  # no secret: the forgery is served
    sc._INDEXES.clear()
    assert (keyless.lookup(frame.digest).precision == 1.0).all()  # the limit docs/bad-input.md states
    assert len(keyless.skipped) == 1 and keyless.skipped[0][0] == path  # and the real pack fails without the key


def test_the_secret_file_is_checked(tmp_path, monkeypatch):
    from radrank.errors import ConfigError

    monkeypatch.delenv(sc.SECRET_ENV_VAR, raising=False)
    secret = tmp_path / "secret"
    secret.write_bytes(b"  " + b"k" * 20 + b"\n")
    for mode, ok in ((0o600, True), (0o640, True), (0o644, False), (0o660, False), (0o606, False)):
        secret.chmod(mode)
        config = {"score_cache": {"dir": str(tmp_path / "c"), "secret_file": str(secret)}}
        if ok:
            assert sc.ScoreCache.from_config(config).secret == b"k" * 20
        else:
            with pytest.raises(ConfigError, match=r"score_cache.secret_file: .* has mode .*chmod 600"):
                sc.ScoreCache.from_config(config)
    secret.chmod(0o600)
    secret.write_bytes(b"short")
    with pytest.raises(ConfigError, match="holds 5 bytes, fewer than 16"):
        sc.ScoreCache.from_config({"score_cache": {"secret_file": str(secret)}})
    with pytest.raises(ConfigError, match="No such file"):
        sc.ScoreCache.from_config({"score_cache": {"secret_file": str(tmp_path / "none")}})
    monkeypatch.setenv(sc.SECRET_ENV_VAR, str(tmp_path / "none"))
    with pytest.raises(ConfigError, match=r"\$RADRANK_SCORE_CACHE_SECRET_FILE"):
        sc.ScoreCache.from_config({})
    assert sc.ScoreCache.from_config({"score_cache": {"dir": "off"}}).secret == b""  # no cache, nothing to key


def test_prune_removes_damaged_packs_only_when_asked_and_never_everything_on_a_wrong_secret(tmp_path, caplog):
    ns, frame, path = real_pack(tmp_path)
    bad = attack("truncated", ns.store(scores_of(digests_of(5, 100)), {}), tmp_path)
    folder = attack("folder", ns.store(scores_of(digests_of(5, 200)), {}), tmp_path)
    assert sc.prune(tmp_path).damaged == [] and bad.exists()
    result = sc.prune(tmp_path, damaged=True, dry_run=True)
    assert [p.path for p, _ in result.damaged] == [bad] and bad.exists()
    assert [p for p, _ in result.kept_damaged] == [folder]
    result = sc.prune(tmp_path, damaged=True)
    assert not bad.exists() and folder.is_dir() and path.exists()
    (folder / "x").unlink(), folder.rmdir()
    with pytest.raises(sc.ScoreCacheError, match="every one of its 1 packs fails its checksum"):
        sc.prune(tmp_path, damaged=True, secret=b"w" * 20)
    assert path.exists()


def test_compaction_writes_checked_packs_and_leaves_damaged_ones_alone(tmp_path):
    ns = sc.ScoreCache(tmp_path, secret=b"k" * 16).namespace(KEY)
    blocks = [digests_of(30, 30 * i) for i in range(4)]
    packs = [ns.store(scores_of(b), {"pack": i}) for i, b in enumerate(blocks)]
    attack("random", packs[2], tmp_path)
    result = sc.prune(tmp_path, compact_min_packs=2, secret=b"k" * 16)
    [(inputs, output)] = result.compacted
    assert packs[2] not in inputs and packs[2].exists() and sc.PACK_NAME.fullmatch(output.name)
    sc._INDEXES.clear(), sc._PACKS.clear()
    every = np.concatenate([blocks[0], blocks[1], blocks[3]])
    # the damaged pack's digest filter admits block 2's digests: it is read for them, and not served
    pd.testing.assert_frame_equal(ns.lookup(np.concatenate([every, blocks[2]])), scores_of(every), check_exact=True)
    assert [p for p, _ in ns.skipped] == [packs[2]] and ns.meta() == {"pack": 0}


# --- digest filters -------------------------------------------------------------------------------


def test_digest_prefixes_are_the_first_16_hex_digits_as_an_integer():
    digests = list(digests_of(500)) + ["f" * 32, "0" * 32]
    assert sc.digest_prefixes(digests).tolist() == [int(d[:16], 16) for d in digests]  # Python's own parse
    # anything that is not 16 lowercase hex digits maps to 0: it only ever makes a pack a candidate
    assert sc.digest_prefixes(["", "abc", "G" * 32, "ÄÖ" * 16, "F" * 32]).tolist() == [0] * 5


def counting_reads(monkeypatch) -> list:
    """The packs whose bytes are read (and checked) from now on."""
    read = []
    original = sc._read_checked

    def spy(path, secret):
        read.append(Path(path))
        return original(path, secret)

    monkeypatch.setattr(sc, "_read_checked", spy)
    return read


def test_a_lookup_reads_only_the_packs_whose_filter_holds_a_digest_it_asks_for(tmp_path, monkeypatch):
    ns = sc.ScoreCache(tmp_path).namespace(KEY)
    blocks = [digests_of(300, 1000 * i) for i in range(3)]
    packs = [ns.store(scores_of(b), {"pack": i}) for i, b in enumerate(blocks)]
    assert all(sc.filter_path(p).is_file() for p in packs)  # written with each pack
    read = counting_reads(monkeypatch)
    new = digests_of(50, 50_000)  # a new model's pairs: in no pack
    assert ns.lookup(new).empty and read == []
    wanted = [*new, blocks[1][7], blocks[1][8]]
    got = ns.lookup(wanted)
    pd.testing.assert_frame_equal(got, scores_of([blocks[1][7], blocks[1][8]]), check_exact=True)
    assert read == [packs[1]] and ns.answered_meta == {"pack": 1}


@pytest.mark.parametrize("damage", ["removed", "garbage", "truncated", "fifo", "symlink", "emptied", "stale",
                                    "claims_everything"])
def test_a_damaged_missing_or_forged_filter_never_serves_a_wrong_row(tmp_path, monkeypatch, damage):
    """A filter only decides which packs are read; a pack read is checked as always. So a filter can cost a
    miss (the pair is scored again), never a row the pack does not hold or that is not the pack's."""
    ns = sc.ScoreCache(tmp_path).namespace(KEY)
    held = digests_of(200)
    pack = ns.store(scores_of(held), {})
    path = sc.filter_path(pack)
    other = digests_of(200, 10_000)
    if damage == "removed":
        path.unlink()
    elif damage == "garbage":
        path.write_bytes(b"not a filter" * 10)
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:-3])
    elif damage == "fifo":  # read without blocking, and ignored
        path.unlink()
        os.mkfifo(path)
    elif damage == "symlink":  # a link to a filter that admits nothing: never followed
        empty = tmp_path / "empty.filter"
        empty.write_bytes(sc.FILTER_MAGIC + struct.pack("<Q", 0))
        path.unlink()
        path.symlink_to(empty)
    elif damage == "emptied":  # a well-formed filter of no digests: the pack is not read, its pairs are misses
        path.write_bytes(sc.FILTER_MAGIC + struct.pack("<Q", 0))
    elif damage == "stale":  # the filter of other digests, as if the pack were replaced under its name
        sc._write_filter(pack, pd.array(other, dtype="str"))
    elif damage == "claims_everything":  # the filter admits digests the pack does not hold
        sc._write_filter(pack, pd.array(np.concatenate([held, other]), dtype="str"))
    sc._FILTERS.clear()
    got = ns.lookup(np.concatenate([held[:20], other[:20]]))
    if damage == "emptied":
        assert got.empty  # misses only: the job scores those pairs again
    elif damage == "stale":  # it admits the other digests asked for: the pack is read, and gives what it holds
        pd.testing.assert_frame_equal(got, scores_of(held[:20]), check_exact=True)
        assert ns.lookup(held[:20]).empty  # asked only for what it holds, the stale filter costs misses
    else:
        pd.testing.assert_frame_equal(got, scores_of(held[:20]), check_exact=True)
    if damage in ("removed", "garbage", "truncated", "fifo", "symlink"):  # the reader wrote the pack a filter again
        sc._FILTERS.clear()
        assert sc._read_filter(pack) is not None and sc._may_hold(pack, sc.sorted_prefixes(held[:1]))


def test_a_cheap_metrics_lookup_leaves_a_large_pack_holding_few_of_its_pairs_unread(tmp_path, monkeypatch):
    """seconds_per_pair: a pack whose filter holds too few of the pairs asked for to pay for reading it is not read
    (its pairs are misses, counted in left_unread); one holding enough is read, and so is every pack for a lookup
    without a cost, and a pack this process has read already."""
    ns = sc.ScoreCache(tmp_path).namespace(KEY)
    every = digests_of(3000)
    large = ns.store(scores_of(every[:2000]), {"run": "full"})
    small = ns.store(scores_of(every[2000:2100]), {"run": "new"})
    reads = []
    original = sc._read_checked
    monkeypatch.setattr(sc, "_read_checked", lambda path, secret: reads.append(path.name) or original(path, secret))
    few = np.concatenate([every[:5], every[2000:2100], every[2900:]])  # 5 in the large pack, 100 in the small one
    per_byte = sc.PACK_READ_S_PER_BYTE
    cost = large.stat().st_size * per_byte / 50  # the large pack pays from 50 of its pairs on
    assert 100 * cost >= small.stat().st_size * per_byte  # the small one pays for its 100
    got = ns.lookup(few, seconds_per_pair=cost)
    pd.testing.assert_frame_equal(got, scores_of(every[2000:2100]), check_exact=True)
    assert reads == [small.name] and ns.left_unread == {large.name: 5}
    many = np.concatenate([every[:60], every[2900:]])
    assert sorted(ns.lookup(many, seconds_per_pair=cost).digest) == sorted(every[:60])  # 60 pay for the read
    assert reads[1:] == [large.name] and ns.left_unread == {}
    sc._PACKS.clear(), sc._INDEXES.clear()
    reads.clear()
    pd.testing.assert_frame_equal(ns.lookup(few), scores_of(np.concatenate([every[:5], every[2000:2100]])),
                                  check_exact=True)  # no cost given: both read
    assert sorted(reads) == sorted([large.name, small.name]) and ns.left_unread == {}
    reads.clear()
    assert len(ns.lookup(few, seconds_per_pair=cost)) == 105 and reads == []  # read already in this process


def test_a_poisoned_pack_with_a_filter_of_its_own_is_read_and_not_served(tmp_path, caplog):
    ns = sc.ScoreCache(tmp_path).namespace(KEY)
    held = digests_of(100)
    real = ns.store(scores_of(held), {"model": "real"})
    poisoned = attack("older_name", real, tmp_path)
    sc._write_filter(poisoned, pd.array(held, dtype="str"))  # the forger gives it a filter that admits every pair
    got = ns.lookup(held)
    pd.testing.assert_frame_equal(got, scores_of(held), check_exact=True)
    assert [p for p, _ in ns.skipped] == [poisoned]


def test_prune_and_compaction_remove_filters_with_their_packs(tmp_path):
    cache = sc.ScoreCache(tmp_path)
    ns = cache.namespace(KEY)
    packs = [ns.store(scores_of(digests_of(40, 100 * i)), {"pack": i}) for i in range(4)]
    result = sc.prune(tmp_path, compact_min_packs=2)
    [(inputs, output)] = result.compacted
    assert sorted(inputs) == sorted(packs) and sc.filter_path(output).is_file()
    assert not any(sc.filter_path(p).exists() for p in packs)
    every = np.concatenate([digests_of(40, 100 * i) for i in range(4)])
    assert sorted(sc._read_filter(output).tolist()) == sorted(set(sc.digest_prefixes(every).tolist()))
    orphan = sc.filter_path(output.with_name(output.name.replace(output.name.split("-")[2], "0" * 12)))
    orphan.write_bytes(sc.filter_path(output).read_bytes())  # a filter whose pack is gone
    sc.prune(tmp_path, compact=False)
    assert not orphan.exists() and sc.filter_path(output).exists()
    sc.prune(tmp_path, max_bytes=0)
    assert not ns.dir.exists()  # the last pack went with its filter, and so did the namespace


def test_a_job_whose_filters_are_forged_scores_the_same_numbers(tmp_path):
    """The score files a group job writes do not depend on what the filters say: a forged empty filter only makes
    the job score the pairs it would have taken from the cache."""
    from radrank import scoring

    pairs = {f"m{i}": pd.DataFrame({"sample_id": [f"s{j}" for j in range(30)],
                                    "reference": [f"Finding {j % 7}." for j in range(30)],
                                    "hypothesis": [f"Finding {(j + i) % 5}." for j in range(30)]}) for i in range(3)}
    cache = sc.ScoreCache(tmp_path)
    first = scoring.score_group("bleu2", {}, pairs, cache=cache)
    for pack in Path(tmp_path).rglob("pack-*.parquet"):
        sc.filter_path(pack).write_bytes(sc.FILTER_MAGIC + struct.pack("<Q", 0))
    sc._FILTERS.clear()
    again = scoring.score_group("bleu2", {}, pairs, cache=cache)
    assert again.counts["cached"] == 0 and again.counts["scored"] == first.counts["distinct"]
    for model in pairs:
        pd.testing.assert_frame_equal(again.by_model[model], first.by_model[model], check_exact=True)
    sc._FILTERS.clear()
    third = scoring.score_group("bleu2", {}, pairs, cache=cache)  # the new pack's filter is whole: all cached
    assert third.counts["cached"] == first.counts["distinct"]
    for model in pairs:
        pd.testing.assert_frame_equal(third.by_model[model], first.by_model[model], check_exact=True)


# --- concurrency ----------------------------------------------------------------------------------

WRITERS = 6


def store_concurrently(root: str, worker: int, barrier) -> None:
    """Each writer stores the shared block, a block overlapping its neighbour's, and its own, at once."""
    ns = sc.ScoreCache(root).namespace(KEY)
    shared, overlapping, own = digests_of(300), digests_of(200, 1000 + 100 * worker), digests_of(50, 5000 + 50 * worker)
    barrier.wait()
    for block in (shared, overlapping, own):
        assert ns.store(scores_of(block), {"worker": worker}) is not None
        found = ns.lookup(block)
        pd.testing.assert_frame_equal(found, scores_of(block), check_exact=True)


def test_many_processes_storing_the_same_and_overlapping_entries_lose_nothing(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(WRITERS)
    procs = [ctx.Process(target=store_concurrently, args=(str(tmp_path), w, barrier)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * WRITERS
    ns = sc.ScoreCache(tmp_path).namespace(KEY)
    every = np.concatenate([digests_of(300), digests_of(100 * WRITERS + 100, 1000), digests_of(50 * WRITERS, 5000)])
    pd.testing.assert_frame_equal(ns.lookup(every), scores_of(every), check_exact=True)
    assert len(ns.packs()) == 3 * WRITERS
    assert not [f for f in ns.dir.iterdir() if f.name.endswith(".part")]
    [space] = sc.info(tmp_path)
    assert space.entries == len(every) and space.key == KEY
    assert ns.meta() in [{"worker": w} for w in range(WRITERS)]


def read_while_compacting(root: str, rounds: int, barrier) -> None:
    """Every lookup finds every entry stored before it started, while packs are merged and removed."""
    ns = sc.ScoreCache(root).namespace(KEY)
    base = digests_of(400)
    expected = scores_of(base)
    barrier.wait()
    for _ in range(rounds):
        pd.testing.assert_frame_equal(ns.lookup(base), expected, check_exact=True)


def compact_while_reading(root: str, rounds: int, barrier) -> None:
    ns = sc.ScoreCache(root).namespace(KEY)
    barrier.wait()
    for r in range(rounds):
        ns.store(scores_of(digests_of(20, 10_000 + 20 * r)), {})
        sc.prune(root, compact_min_packs=2)


def test_lookups_survive_a_concurrent_compaction(tmp_path):
    ns = sc.ScoreCache(tmp_path).namespace(KEY)
    for i in range(8):
        ns.store(scores_of(digests_of(50, 50 * i)), {"pack": i})
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(4)
    procs = [ctx.Process(target=read_while_compacting, args=(str(tmp_path), 40, barrier)) for _ in range(3)]
    procs.append(ctx.Process(target=compact_while_reading, args=(str(tmp_path), 15, barrier)))
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    assert len(ns.packs()) < 8 and ns.meta() == {"pack": 0}  # merged; the oldest input's meta kept


def test_a_pack_removed_after_listing_is_read_again_from_a_new_listing(tmp_path, monkeypatch):
    ns = sc.ScoreCache(tmp_path).namespace(KEY)
    block = digests_of(60)
    ns.store(scores_of(block[:40]), {"model": "old"})
    ns.store(scores_of(block[20:]), {"model": "new"})
    stale = sc._list_packs(ns.dir)
    pd.testing.assert_frame_equal(ns.lookup(block), scores_of(block))  # the index of the two packs is memoised
    result = sc.prune(tmp_path, compact_min_packs=2)
    assert [len(inputs) for inputs, _ in result.compacted] == [2] and len(ns.packs()) == 1
    listings = []
    real = sc._list_packs

    def listing(folder):  # the first listing is the one taken before the compaction
        listings.append(folder)
        return list(stale) if len(listings) == 1 else real(folder)

    monkeypatch.setattr(sc, "_list_packs", listing)
    pd.testing.assert_frame_equal(ns.lookup(block), scores_of(block), check_exact=True)
    assert len(listings) == 2
    listings.clear()
    assert ns.meta() == {"model": "old"} and len(listings) == 2
    monkeypatch.setattr(sc, "_list_packs", lambda folder: list(stale))  # never a good listing: fail, never partial
    with pytest.raises(sc.ScoreCacheError, match="vanishing"):
        ns.lookup(block)


# --- bounds ---------------------------------------------------------------------------------------


def aged(path: Path, days: float) -> None:
    t = time.time() - days * 86_400
    os.utime(path, (t, t))


def test_prune_by_size_removes_the_least_recently_used_first(tmp_path):
    cache = sc.ScoreCache(tmp_path)
    spaces = [cache.namespace({**KEY, "weights": str(i)}) for i in range(3)]
    packs = [ns.store(scores_of(digests_of(200, 1000 * i)), {}) for i, ns in enumerate(spaces)]
    for days, pack in zip((3, 2, 1), packs):
        aged(pack, days)
    spaces[0].lookup(digests_of(5))  # a hit: the oldest pack is now the most recently used
    sizes = [p.stat().st_size + sc.filter_path(p).stat().st_size for p in packs]  # a pack counts with its filter
    dry = sc.prune(tmp_path, max_bytes=sizes[0] + sizes[2], dry_run=True)
    assert [p.path for p in dry.removed] == [packs[1]] and all(p.exists() for p in packs)
    result = sc.prune(tmp_path, max_bytes=sizes[0] + sizes[2])
    assert [p.path for p in result.removed] == [packs[1]] and result.bytes_after == sizes[0] + sizes[2]
    assert [p.exists() for p in packs] == [True, False, True]
    assert not spaces[1].dir.exists()  # a namespace left without packs goes too
    assert not spaces[1].lookup(digests_of(5, 1000)).shape[0]
    sc.prune(tmp_path, max_bytes=sizes[0])
    assert [p.exists() for p in packs] == [True, False, False]


def test_prune_by_age_and_stale_temporary_files(tmp_path):
    ns = sc.ScoreCache(tmp_path).namespace(KEY)
    old, recent = ns.store(scores_of(digests_of(10)), {}), ns.store(scores_of(digests_of(10, 10)), {})
    aged(old, 10)
    aged(recent, 1)
    killed, writing = ns.dir / ".pack-killed.part", ns.dir / ".pack-writing.part"
    killed.write_bytes(b"half")
    writing.write_bytes(b"half")
    aged(killed, 2)
    result = sc.prune(tmp_path, older_than_days=5)
    assert [p.path for p in result.removed] == [old] and result.stale_temporaries == [killed]
    assert not old.exists() and recent.exists() and not killed.exists() and writing.exists()
    assert ns.lookup(digests_of(20)).digest.tolist() == digests_of(10, 10).tolist()


def test_compaction_merges_small_packs_into_one_keeping_entries_meta_and_last_use(tmp_path):
    ns = sc.ScoreCache(tmp_path).namespace(KEY)
    every = digests_of(90)
    packs = [ns.store(scores_of(every[10 * i: 10 * i + 20]), {"pack": i}) for i in range(sc.COMPACT_MIN_PACKS)]
    for i, pack in enumerate(packs):
        aged(pack, 10 - i)
    last_used = packs[-1].stat().st_mtime
    assert sc.prune(tmp_path, compact_min_packs=sc.COMPACT_MIN_PACKS + 1).compacted == []  # too few small packs
    result = sc.prune(tmp_path)
    [(inputs, output)] = result.compacted
    assert inputs == packs and ns.packs() == [output.name] and result.bytes_after < result.bytes_before
    assert output.stat().st_mtime == last_used  # the latest use of its inputs
    assert output.name.split("-")[1] == packs[0].name.split("-")[1] and ns.meta() == {"pack": 0}  # the oldest's
    pd.testing.assert_frame_equal(ns.lookup(every), scores_of(every), check_exact=True)
    [space] = sc.info(tmp_path)
    assert space.entries == len(every) and len(space.packs) == 1


def test_compaction_merges_a_new_submissions_small_packs_among_themselves_not_into_the_full_runs_pack(
        tmp_path, monkeypatch):
    """Size tiers: the full run's large pack is left as it is (the same file), while the small packs of later
    runs are merged once their tier holds COMPACT_MIN_PACKS; a tier short of that is left alone."""
    ns = sc.ScoreCache(tmp_path).namespace(KEY)
    every = digests_of(2000 + 10 * sc.COMPACT_MIN_PACKS)
    large = ns.store(scores_of(every[:2000]), {"run": "full"})
    small = [ns.store(scores_of(every[2000 + 10 * i: 2010 + 10 * i]), {"run": i}) for i in range(sc.COMPACT_MIN_PACKS)]
    sizes = {p.path: p.bytes for p in sc._pack_infos(ns.dir)}
    # tiers of this test's sizes: every small pack under the first bound, the large one at least 4 tiers up
    monkeypatch.setattr(sc, "COMPACT_TIER_BYTES", max(sizes[p] for p in small) + 1)
    monkeypatch.setattr(sc, "COMPACT_TIER_FACTOR", 2)
    assert sc._tier(sizes[large]) >= 3 and {sc._tier(sizes[p]) for p in small} == {0}
    before = large.read_bytes()
    assert sc.prune(tmp_path, compact_min_packs=sc.COMPACT_MIN_PACKS + 1).compacted == []  # a tier short of the count
    [(inputs, output)] = sc.prune(tmp_path).compacted
    assert inputs == small and sorted(ns.packs()) == sorted([large.name, output.name])
    assert large.read_bytes() == before  # not rewritten
    pd.testing.assert_frame_equal(ns.lookup(every), scores_of(every), check_exact=True)
    # without tiers (one tier for every small pack) the large pack would have been merged too: the test can fail
    monkeypatch.setattr(sc, "COMPACT_TIER_BYTES", sc.COMPACT_SMALL_BYTES)
    for i in range(sc.COMPACT_MIN_PACKS - 2):
        ns.store(scores_of(digests_of(5, 10_000 + 5 * i)), {"run": "more"})
    [(inputs, output)] = sc.prune(tmp_path).compacted
    assert large in inputs and ns.packs() == [output.name]


def test_off_disables_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(sc.ENV_VAR, raising=False)
    assert sc.root_from_config({}) == sc.root_from_config({"score_cache": {"dir": ""}}) == \
        tmp_path / "xdg" / "radrank" / "scores"
    monkeypatch.setenv(sc.ENV_VAR, str(tmp_path / "env"))
    assert sc.root_from_config({"score_cache": {"dir": ""}}) == tmp_path / "env"
    assert sc.root_from_config({"score_cache": {"dir": str(tmp_path / "set")}}) == tmp_path / "set"
    assert sc.root_from_config({"score_cache": {"dir": "off"}}) is None
    monkeypatch.setenv(sc.ENV_VAR, "off")
    assert sc.root_from_config({}) is None
    ns = sc.ScoreCache.from_config({}).namespace(KEY)
    frame = scores_of(digests_of(3))
    assert ns.store(frame, {}) is None and ns.lookup(frame.digest).empty and ns.meta() is None
    assert not any(tmp_path.rglob("*.parquet"))


def test_hit_records_give_the_last_runs_rate_and_prune_keeps_the_last_runs(tmp_path, monkeypatch):
    ns = sc.ScoreCache(tmp_path).namespace(KEY)
    for run in range(sc.HIT_RUNS_KEPT + 2):
        monkeypatch.setenv(sc.RUN_ENV_VAR, f"20260101T0000{run:02d}Z-1")
        ns.record_hits(asked=100, served=10 * run)
        ns.record_hits(asked=50, served=50)  # a second job of the same run
    ns.store(scores_of(digests_of(3)), {})
    [space] = sc.info(tmp_path)
    last = sc.HIT_RUNS_KEPT + 1
    assert space.last_run == {"run": f"20260101T0000{last:02d}Z-1", "asked": 150, "served": 10 * last + 50}
    sc.prune(tmp_path)
    runs = {p.name.rsplit("-", 1)[0] for p in (ns.dir / sc.HITS).glob("*.json")}
    assert len(runs) == sc.HIT_RUNS_KEPT and f"20260101T000000Z-1" not in runs
    monkeypatch.setenv(sc.RUN_ENV_VAR, "../../etc")  # not an id: this process's own
    assert sc.run_id() != "../../etc" and "/" not in sc.run_id()


def test_keeping_the_bound_never_fails_a_run(tmp_path, caplog):
    caplog.set_level("INFO", logger="radrank")
    root = tmp_path / "cache"
    ns = sc.ScoreCache(root).namespace(KEY)
    for i in range(3):
        ns.store(scores_of(digests_of(200, 200 * i)), {})
    result = sc.keep_bounded({"score_cache": {"dir": str(root), "max_gb": 0}})
    assert len(result.removed) == 3 and ns.packs() == [] and "3 pack(s) removed" in caplog.text
    assert sc.keep_bounded({"score_cache": {"dir": str(tmp_path / "never-made")}}) is None
    assert sc.keep_bounded({"score_cache": {"dir": "off"}}) is None
    ns.store(scores_of(digests_of(5)), {})
    secret = tmp_path / "secret"
    secret.write_text("x" * 20)
    secret.chmod(0o644)  # refused: a warning, not a failed run
    assert sc.keep_bounded({"score_cache": {"dir": str(root), "secret_file": str(secret)}}) is None
    assert "not bounded" in caplog.text and len(ns.packs()) == 1


# --- the command ----------------------------------------------------------------------------------


def checkout(tmp_path: Path, cache_dir: str | None) -> Path:
    """The files `radrank cache` reads: a Snakefile (the checkout's mark) and config/config.yaml."""
    (tmp_path / "config").mkdir(parents=True)
    (tmp_path / "Snakefile").write_text("")
    config = {"submissions": "config/submissions.tsv"}
    if cache_dir is not None:
        config["score_cache"] = {"dir": cache_dir}
    (tmp_path / "config" / "config.yaml").write_text(json.dumps(config))
    return tmp_path


def test_cache_info_and_prune_commands(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # main() changes into the checkout; this puts the test back
    root = tmp_path / "shared-cache"
    wd = checkout(tmp_path / "wd", str(root))
    ns = sc.ScoreCache(root).namespace(KEY)
    ns.store(scores_of(digests_of(100)), {})
    ns.store(scores_of(digests_of(100, 50)), {})
    assert cli.main(["-C", str(wd), "cache", "info"]) == 0
    out = capsys.readouterr().out
    assert f"Score cache: {root}" in out
    row = next(line for line in out.splitlines() if ns.id[:12] in line).split()
    assert row[1:4] == ["bertscore", "150", "2"]
    assert "1 namespace(s), 150 entries" in out and row[-1] == "-"  # no lookup recorded yet
    monkeypatch.setenv(sc.RUN_ENV_VAR, "20261203T120000Z-7")
    ns.record_hits(asked=200, served=150)
    assert cli.main(["-C", str(wd), "cache", "info"]) == 0
    assert "150 of 200 pairs (75 %), run 20261203T120000Z-7" in capsys.readouterr().out
    assert cli.main(["-C", str(wd), "cache", "prune", "--max-gb", "0", "--dry-run"]) == 0
    assert "would remove 2 pack(s)" in capsys.readouterr().out and len(ns.packs()) == 2
    assert cli.main(["-C", str(wd), "cache", "prune", "--max-gb", "0"]) == 0
    assert "remove 2 pack(s)" in capsys.readouterr().out and ns.packs() == []
    assert cli.main(["-C", str(wd), "cache", "info"]) == 0
    assert "empty" in capsys.readouterr().out
    good = ns.store(scores_of(digests_of(10)), {})
    bad = attack("truncated", ns.store(scores_of(digests_of(10, 10)), {}), tmp_path)
    assert cli.main(["-C", str(wd), "cache", "info"]) == 0
    out = capsys.readouterr().out
    assert next(line for line in out.splitlines() if ns.id[:12] in line).split()[1:5] == ["bertscore", "10", "2", "1"]
    assert f"not served: {bad} does not match the checksum in its name" in out
    assert cli.main(["-C", str(wd), "cache", "prune", "--damaged"]) == 0
    assert f"remove {bad}: it does not match" in capsys.readouterr().out and not bad.exists() and good.exists()
    assert cli.main(["-C", str(wd), "cache", "info", "--max-gb", "1"]) == 2
    assert "options of `radrank cache prune`" in capsys.readouterr().err


def test_cache_command_without_a_configured_dir_reads_the_environment(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    wd = checkout(tmp_path / "wd", None)
    monkeypatch.setenv(sc.ENV_VAR, str(tmp_path / "env-cache"))
    assert cli.main(["-C", str(wd), "cache", "info"]) == 0
    assert f"Score cache: {tmp_path / 'env-cache'}\n  empty" in capsys.readouterr().out
    monkeypatch.setenv(sc.ENV_VAR, "off")
    assert cli.main(["-C", str(wd), "cache", "prune"]) == 0
    assert "score cache is off" in capsys.readouterr().out

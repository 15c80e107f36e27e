"""A content-addressed cache of per-pair scores: a pair scored once by a model metric is never scored again.

A model metric's score of a pair depends only on the pair's content (reference, hypothesis and, for the
metrics that read it, the context: age, indication ...) and on what the metric is: its name, its identity
(version and scoring settings) and the weights it loads. The scoring job therefore asks the cache first:

* :func:`pair_digests` names each pair by the sha256 of an unambiguous encoding of its columns;
* a :class:`Namespace` holds the scores of one metric identity (``ScoreCache(root).namespace(key)``,
  ``key`` a JSON-able dict: the metric, its identity, a fingerprint of its weights), keyed by digest.

Layout: ``<root>/v2/<namespace id>/`` holds ``key.json`` (the key, for people and ``radrank cache info``),
``last-used`` (an empty marker whose mtime is the namespace's last lookup or store) and immutable *packs*
``pack-<creation time, ns>-<random>-<checksum>.parquet``: the digests and score columns of one store (or of one
compaction of several packs). A pack is written to a temporary ``.pack-*.part`` file in its folder,
fsynced, and renamed into place under a name nobody else uses: on POSIX and NFS a reader sees a whole
pack or none, and many cluster jobs storing the same or different entries at once never lose or tear one.
No file is ever modified, no locks. Two jobs that score the same pair both store it; a lookup takes any
one of the copies (they are equal by construction: same identity, same weights, same pair). On NFS a pack
another node just stored may be listed a little later (the client's folder cache): a miss, never a wrong row.

Packs are checked, never trusted. The checksum in a pack's name is the HMAC-SHA256 of the format, the
namespace id, the name's stem and the file's bytes, keyed by the cache's secret (``score_cache.secret_file``;
empty without one). A reader hashes the bytes it parses and serves a pack only when they match, its format is
this one, the key in its metadata is its folder's, and its columns are the metric's. Any other pack (truncated,
random bytes, edited, renamed to an older name to win a duplicate, copied from another namespace, a folder or a
symbolic link named like a pack, written without the secret) is skipped with a warning naming it: its pairs are
misses, scored again — never served, never fatal. Without a secret the checksum stops accidents and hand edits,
not a forger who runs this code; with one, only holders of the secret write packs the cache serves
(docs/bad-input.md, "Who may write what").

A pack keeps, in its parquet metadata, the ``meta`` of the job that computed its rows (the model's
provenance) and the pandas dtype of every column, so a lookup returns the dtypes that were stored
(float64 stays float64, NaN stays NaN, ``str`` and ``object`` strings stay what they were) and a score
file built from cached rows is the one built from fresh rows. :meth:`Namespace.meta` is the meta of the
namespace's *oldest* pack (the smallest name); compaction keeps the oldest input's name prefix and meta.

Prune and compaction delete packs that a concurrent lookup may have listed: a read that finds a listed
pack gone lists the folder again and starts over (compaction renames its merged pack into place before it
deletes the inputs), so a lookup never fails for it and never returns part of what is stored.

Each pack has a *digest filter* beside it, ``<pack name without .parquet>.filter``: the sorted distinct 64-bit
prefixes of its digests (8 bytes an entry), written with the pack (and by the first reader of a pack without one).
A lookup reads the filters first and reads, checks and decodes only the packs whose filter holds a prefix it asks
for: a new model's pairs, mostly new, no longer cost a read of every pack of the namespace. A filter is only a
filter: a pack it admits is read and checked as always, so a damaged, stale or forged filter can cost a miss (the
pair is scored again), never serve a wrong row; one that does not parse is ignored and the pack read. For a metric
that scores a pair for less than it costs to read a pack (``Metric.seconds_per_pair``: the lexical metrics), a
lookup also leaves unread a pack whose filter holds too few of the pairs asked for to pay for reading it
(``PACK_READ_S_PER_BYTE``); those pairs are scored, the numbers the pack holds (a pack this process has read
already is always read).

"Last used" is cheap and safe under concurrency: a lookup touches (utime) the namespace's marker and the
packs it took rows from; ``prune`` removes the packs unused for longest first (their mtime: the last store
or lookup hit), and compacts many small packs of about one size into a few (a size tier at a time: a
small pack is never merged into a much larger one, so a run's compaction costs about what its stores wrote).

The root is ``score_cache.dir`` in the config; when that is empty, the ``RADRANK_SCORE_CACHE`` environment
variable; else ``~/.cache/radrank/scores`` (``$XDG_CACHE_HOME/radrank/scores``). ``off`` disables the cache.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import stat
import struct
import tempfile
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from radrank import io as radrank_io
from radrank import judge_cache
from radrank.errors import RadrankError

DIGEST_FORMAT = 1  # bump if the encoding of a pair digest changes (every cached score is then a miss)
FORMAT = 2  # bump if the meaning of a pack changes (2: packs carry checksums)
LAYOUT = f"v{FORMAT}"
ENV_VAR = "RADRANK_SCORE_CACHE"
DIGEST_CHARS = 32  # hex characters of sha256 kept: 128 bits
META_KEY = b"radrank_score_cache"
ROW_GROUP_ROWS = 65_536  # a lookup reads only the row groups of a pack that hold its hits
READ_TRIES = 20  # listings a read tries while prune/compaction remove the packs it listed
COMPACT_MIN_PACKS = 8  # a size tier of a namespace is compacted when it holds this many small packs
COMPACT_SMALL_BYTES = 32 << 20  # packs below this size are merged ...
COMPACT_TARGET_BYTES = 128 << 20  # ... into packs of about this size (bounded memory while merging)
# the size tiers: under 1 MiB, then each up to 4x the one below; a pack is merged with packs of its own tier only
COMPACT_TIER_BYTES = 1 << 20
COMPACT_TIER_FACTOR = 4
FILTER_SUFFIX = ".filter"  # a pack's digest filter: <pack stem>.filter beside <pack stem>.parquet
FILTER_MAGIC = b"radrank-digest-filter-1\n"
STALE_TEMP_S = 86_400  # a temporary file this old belongs to a job that was killed mid-write
# what reading a pack costs (its bytes read and checked, its digests decoded), per byte: 4-13 ns on the 2-core host
# of docs/benchmarks.md for packs of 2.6-50 MB; a lookup for a metric cheaper than that (Metric.seconds_per_pair)
# leaves a pack that holds too few of its pairs unread
PACK_READ_S_PER_BYTE = 6e-9

log = logging.getLogger("radrank")


class ScoreCacheError(RadrankError):
    """The cache cannot answer (its packs disagree, or kept vanishing while being read)."""


def root_of(setting) -> Path | None:
    """The cache folder for the ``score_cache.dir`` setting (None: caching off): the setting, else
    ``$RADRANK_SCORE_CACHE``, else ``$XDG_CACHE_HOME/radrank/scores``; ``off`` disables it."""
    return judge_cache.root_of(setting, env_var=ENV_VAR, default="scores")


def root_from_config(config: dict) -> Path | None:
    """The cache folder of a workflow config (``score_cache.dir``, then the defaults of :func:`root_of`)."""
    return root_of((config.get("score_cache") or {}).get("dir"))


# --- pair digests ---------------------------------------------------------------------------------
#
# Each value is encoded as a tag byte, its payload's length (8 bytes, big-endian) and the payload:
#   n  missing (None, NaN, pd.NA, NaT)     -- empty payload
#   s  str: UTF-8                          y  bytes: as they are
#   i  integer: ASCII decimal              f  float: IEEE 754 binary64, big-endian
#   b  bool: one byte 0 or 1
# A row is the concatenation of its columns' encodings, after a header naming the format and the columns.
# Types stay distinct (65, 65.0 and "65" may be formatted differently in a prompt); None, "" and "nan" too.

TAG_MISSING, TAG_STR, TAG_BYTES, TAG_INT, TAG_FLOAT, TAG_BOOL = (ord(c) for c in "nsyifb")


def _encode_value(value) -> tuple[int, bytes]:
    """(tag, payload) of one value: the per-element path, for object columns of mixed types."""
    if value is None or value is pd.NA or value is pd.NaT:
        return TAG_MISSING, b""
    if isinstance(value, str):
        return TAG_STR, value.encode("utf-8")
    if isinstance(value, bytes):
        return TAG_BYTES, value
    if isinstance(value, (bool, np.bool_)):
        return TAG_BOOL, b"\x01" if value else b"\x00"
    if isinstance(value, (int, np.integer)):
        return TAG_INT, str(int(value)).encode("ascii")
    if isinstance(value, (float, np.floating)):
        return (TAG_MISSING, b"") if np.isnan(value) else (TAG_FLOAT, struct.pack(">d", float(value)))
    raise TypeError(f"cannot digest a value of type {type(value).__name__}: {value!r}")


def _fixed_width(values: np.ndarray, valid: np.ndarray, width: int):
    """A large_binary array of the ``width``-byte rows of ``values`` where ``valid``, empty elsewhere."""
    import pyarrow as pa

    lengths = np.where(valid, width, 0).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    data = np.ascontiguousarray(values[valid]).tobytes()
    return pa.Array.from_buffers(pa.large_binary(), len(values), [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _arrow(series: pd.Series, target=None):
    """The column as one pyarrow array (NaN as null; an arrow-backed column may come in chunks)."""
    import pyarrow as pa

    array = pa.array(series, type=target, from_pandas=True)
    return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array


def _encode_column(series: pd.Series):
    """(tags uint8 array, payload large_binary array without nulls) of one column, vectorised by dtype."""
    import pyarrow as pa
    import pyarrow.compute as pc

    dtype = series.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        series, dtype = series.astype(object), np.dtype(object)
    missing = series.isna().to_numpy()

    def tags_if(tag: int) -> np.ndarray:
        return np.where(missing, TAG_MISSING, tag).astype(np.uint8)

    if pd.api.types.is_bool_dtype(dtype):
        bits = series.fillna(False).to_numpy(dtype=np.uint8) if missing.any() else series.to_numpy(dtype=np.uint8)
        return tags_if(TAG_BOOL), _fixed_width(bits, ~missing, 1)
    if pd.api.types.is_float_dtype(dtype):
        values = series.to_numpy(dtype=np.float64, na_value=np.nan).astype(">f8")
        return tags_if(TAG_FLOAT), _fixed_width(values, ~missing, 8)
    if pd.api.types.is_integer_dtype(dtype):
        decimal = pc.cast(_arrow(series), pa.large_string())
        return tags_if(TAG_INT), pc.fill_null(decimal, "").cast(pa.large_binary())
    kind = pd.api.types.infer_dtype(series, skipna=True) if dtype == object else None
    if pd.api.types.is_string_dtype(dtype) and kind in (None, "string", "bytes", "empty"):
        target = pa.large_binary() if kind == "bytes" else pa.large_string()
        payload = pc.fill_null(_arrow(series, target), "").cast(pa.large_binary())
        return tags_if(TAG_BYTES if kind == "bytes" else TAG_STR), payload
    if dtype != object:
        raise TypeError(f"cannot digest column {series.name!r} of dtype {dtype}")
    try:
        encoded = [_encode_value(v) for v in series.to_numpy(dtype=object)]
    except TypeError as e:
        raise TypeError(f"column {series.name!r}: {e}") from None
    tags = np.fromiter((t for t, _ in encoded), dtype=np.uint8, count=len(encoded))
    return tags, pa.array([p for _, p in encoded], type=pa.large_binary())


def _with_headers(tags: np.ndarray, payload):
    """The column's encoding: tag byte + 8-byte big-endian payload length, then the payload, per row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(tags)
    head = np.empty((n, 9), dtype=np.uint8)
    head[:, 0] = tags
    head[:, 1:] = pc.binary_length(payload).to_numpy().astype(">u8").view(np.uint8).reshape(n, 8)
    offsets = np.arange(0, 9 * (n + 1), 9, dtype=np.int64)
    headers = pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(head)])
    return [headers, payload]


def _header(columns) -> bytes:
    parts = [f"radrank-pair-digest/{DIGEST_FORMAT}\n".encode()]
    for name in columns:
        tag, payload = _encode_value(str(name))
        parts.append(bytes([tag]) + struct.pack(">Q", len(payload)) + payload)
    return b"".join(parts)


def _encoded_rows(frame: pd.DataFrame, columns: list) -> tuple:
    """(each row's start and end in ``data``, ``data``): the rows' encodings (above), one after another."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(frame)
    parts = []
    for name in columns:
        parts += _with_headers(*_encode_column(frame[name]))
    rows = pc.binary_join_element_wise(*parts, pa.scalar(b"", pa.large_binary()))
    offsets = np.frombuffer(rows.buffers()[1], dtype=np.int64, count=n + 1, offset=rows.offset * 8)
    return offsets, memoryview(rows.buffers()[2])


def rows_digest(frame: pd.DataFrame, columns) -> str:
    """One sha256 (hex) over every row of ``frame`` over ``columns``, in order: the rows' encodings one after
    another (each value's own length is in its encoding, so no two tables share one), in one pass."""
    columns = list(columns)
    h = hashlib.sha256(b"rows\n" + _header(columns))
    if len(frame):
        offsets, data = _encoded_rows(frame, columns)
        h.update(data[int(offsets[0]):int(offsets[-1])])
    return h.hexdigest()


def pair_digests(frame: pd.DataFrame, columns) -> np.ndarray:
    """One content digest per row of ``frame`` over ``columns`` (in that order): 32 hex characters of the
    sha256 of the rows' encoding (above), the same in every process and on every machine."""
    columns = list(columns)
    n = len(frame)
    if n == 0:
        return np.array([], dtype=f"<U{DIGEST_CHARS}")
    offsets, data = _encoded_rows(frame, columns)
    offsets = offsets.tolist()
    base = hashlib.sha256(_header(columns))
    out = []
    for start, end in zip(offsets[:-1], offsets[1:]):
        h = base.copy()
        h.update(data[start:end])
        out.append(h.hexdigest()[:DIGEST_CHARS])
    return np.array(out, dtype=f"<U{DIGEST_CHARS}")


# --- packs ----------------------------------------------------------------------------------------
#
# A pack's name carries its checksum: pack-<created, ns>-<random>-<check>.parquet, ``check`` the HMAC-SHA256
# (key: the cache's secret, empty without one) of the format, the namespace id, the name's stem and the file's
# bytes. A reader hashes the bytes it parses, so a pack edited, truncated, renamed (older, to win a duplicate),
# copied from another namespace or written without the secret is never served.

PACK_NAME = re.compile(r"pack-(\d{20})-([0-9a-f]{12})-([0-9a-f]{32})\.parquet")
MAX_PACK_BYTES = 2 << 30  # a pack is read whole to be checked: a bigger file is not one radrank wrote


class BadPack(Exception):
    """A pack the cache does not serve; the message says why, as a predicate ("is a directory", ...)."""


def _is_pack(name: str) -> bool:
    """Listed as a pack (checked when read): what a name that is not a valid pack name is must be said, not
    ignored."""
    return name.startswith("pack-") and name.endswith(".parquet")


def _created_ns(name: str) -> int:
    match = PACK_NAME.fullmatch(name)
    return int(match.group(1)) if match else 0


def _list_packs(folder: Path) -> list[str]:
    """The namespace's pack names, oldest first (the name starts with the creation time)."""
    try:
        return sorted(e.name for e in os.scandir(folder) if _is_pack(e.name))
    except FileNotFoundError:
        return []


def _canonical_key(key) -> str:
    return json.dumps({"format": FORMAT, "key": key}, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def namespace_id(key) -> str:
    """The folder name of a namespace key: the sha256 of its canonical JSON."""
    try:
        canonical = _canonical_key(key)
    except (TypeError, ValueError) as e:
        raise ValueError(f"a score cache namespace key must be JSON-able: {e}") from None
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:DIGEST_CHARS]


def _checksum(secret: bytes, namespace: str, stem: str, chunks) -> str:
    mac = hmac.new(secret, f"radrank-score-pack/{FORMAT}\n{namespace}\n{stem}\n".encode(), hashlib.sha256)
    for chunk in chunks:
        mac.update(chunk)
    return mac.hexdigest()[:DIGEST_CHARS]


def _block(schema) -> dict:
    """The cache's metadata of a pack: format, key, meta, created, rows, dtypes."""
    return json.loads((schema.metadata or {})[META_KEY])


def _vanished(error: OSError, folder: Path, names) -> bool:
    """Whether a read failed because a pack it listed was removed meanwhile (ESTALE: on NFS, a removed file
    that was already open)."""
    return (isinstance(error, FileNotFoundError) or error.errno == errno.ESTALE
            or any(not os.path.lexists(folder / name) for name in names))


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # not every file system syncs folders; the rename is what makes the pack appear whole
        pass
    finally:
        os.close(fd)


def _write_pack(folder: Path, table, created_ns: int, secret: bytes) -> Path:
    """Write ``table`` as a new pack in ``folder`` (its namespace): in memory, checksummed, then a temporary
    file, fsync, rename to its unused name."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", row_group_size=ROW_GROUP_ROWS, use_dictionary=False)
    data = memoryview(sink.getvalue())
    stem = f"pack-{created_ns:020d}-{secrets.token_hex(6)}"
    path = folder / f"{stem}-{_checksum(secret, folder.name, stem, [data])}.parquet"
    fd, tmp = tempfile.mkstemp(prefix=".pack-", suffix=".part", dir=folder)
    try:
        radrank_io.make_ordinary(fd)  # readable by the group like any cache file, not 0600
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_folder(folder)
    _write_filter(path, table.column("digest"))
    return path


def filter_path(pack: Path) -> Path:
    """The digest filter of the pack at ``pack``."""
    return pack.with_name(pack.name[: -len(".parquet")] + FILTER_SUFFIX)


_HEX_VALUE = np.full(256, 255, dtype=np.uint8)
_HEX_VALUE[np.frombuffer(b"0123456789abcdef", dtype=np.uint8)] = np.arange(16, dtype=np.uint8)


def digest_prefixes(digests) -> np.ndarray:
    """uint64 of each digest's first 16 hex characters (a pyarrow string array or a sequence of str); a digest
    that is not lowercase hex of at least 16 characters (none that :func:`pair_digests` writes) maps to 0, which
    only makes its pack a candidate. Vectorised over the Arrow buffers: a million digests in milliseconds."""
    import pyarrow as pa

    if isinstance(digests, pa.ChunkedArray):
        digests = digests.combine_chunks()
    array = (digests if isinstance(digests, pa.Array) else pa.array(list(digests), type=pa.string())).cast(pa.string())
    n = len(array)
    out = np.zeros(n, dtype=np.uint64)
    if n == 0 or array.buffers()[2] is None:
        return out
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int32, count=n + 1, offset=array.offset * 4)
    data = np.frombuffer(array.buffers()[2], dtype=np.uint8)
    lengths = np.diff(offsets)
    if array.null_count == 0 and (lengths == DIGEST_CHARS).all():  # every pair digest: fixed-width records
        rows = slice(None)
        heads = data[offsets[0]: offsets[0] + n * DIGEST_CHARS].reshape(n, DIGEST_CHARS)[:, :16]
    else:
        rows = np.flatnonzero(lengths >= 16)
        heads = data[offsets[:-1][rows, None] + np.arange(16)]
    nibbles = _HEX_VALUE[heads]
    octets = (nibbles[:, 0::2] << 4) | nibbles[:, 1::2]
    values = np.ascontiguousarray(octets).view(">u8").ravel().astype(np.uint64)
    values[(nibbles == 255).any(axis=1)] = 0
    out[rows] = values
    return out


def sorted_prefixes(digests) -> np.ndarray:
    """The distinct :func:`digest_prefixes` of ``digests``, sorted (a sort and a comparison: numpy 2.4's
    ``np.unique`` hashes first and took 30x as long on a million)."""
    ordered = np.sort(digest_prefixes(digests))
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))] if len(ordered) else ordered


def _write_filter(pack: Path, digests) -> None:
    """Write ``pack``'s digest filter (best effort: a filter that is missing only means the pack is read)."""
    prefixes = sorted_prefixes(digests)
    body = FILTER_MAGIC + struct.pack("<Q", len(prefixes)) + prefixes.astype("<u8").tobytes()
    target = filter_path(pack)
    try:
        fd, tmp = tempfile.mkstemp(prefix=".filter-", suffix=".part", dir=pack.parent)
    except OSError:
        return
    try:
        radrank_io.make_ordinary(fd)
        with os.fdopen(fd, "wb") as f:
            f.write(body)
        os.replace(tmp, target)
    except OSError:
        Path(tmp).unlink(missing_ok=True)


_FILTERS: dict[Path, tuple] = {}  # filter path -> (identity, sorted prefixes): read once per process while unchanged


def _read_filter(pack: Path) -> np.ndarray | None:
    """The sorted prefixes of ``pack``'s filter; None when it has none or one that does not parse."""
    path = filter_path(pack)
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        _FILTERS.pop(path, None)
        return None
    memo = _FILTERS.get(path)
    if memo is not None and memo[0] == _identity(st):
        return memo[1]
    head = len(FILTER_MAGIC) + 8
    if not stat.S_ISREG(st.st_mode) or not head <= st.st_size <= MAX_PACK_BYTES or (st.st_size - head) % 8:
        return None
    try:  # as a pack is opened: never through a link, never blocking on a FIFO put there since the stat
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            data = f.read(st.st_size + 1)
    except OSError:
        return None
    if data[: len(FILTER_MAGIC)] != FILTER_MAGIC or len(data) != st.st_size:
        return None
    (count,) = struct.unpack_from("<Q", data, len(FILTER_MAGIC))
    if count * 8 != len(data) - head:
        return None
    prefixes = np.frombuffer(data, dtype="<u8", offset=head).astype(np.uint64, copy=False)
    _FILTERS[path] = (_identity(st), prefixes)
    return prefixes


def _held(pack: Path, asked: np.ndarray) -> int | None:
    """How many of the ``asked`` prefixes (sorted, distinct) the pack's filter holds; None without a usable filter."""
    prefixes = _read_filter(pack)
    if prefixes is None:
        return None
    if not len(prefixes) or not len(asked):
        return 0
    at = np.minimum(np.searchsorted(prefixes, asked), len(prefixes) - 1)
    return int(np.count_nonzero(prefixes[at] == asked))


def _may_hold(pack: Path, asked: np.ndarray) -> bool:
    """Whether the pack may hold one of the ``asked`` prefixes (sorted, distinct): True without a usable filter."""
    held = _held(pack, asked)
    return held is None or held > 0


def _identity(st) -> tuple:
    """What changes when a file is replaced or written in place (ctime cannot be set back)."""
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _read_checked(path: Path, secret: bytes):
    """(the bytes of the pack at ``path``, the stat of the file they were read from), the bytes matching the
    checksum in its name; BadPack when they do not, or it is a symbolic link, not a regular file (a folder, a
    FIFO: opened without blocking) or over MAX_PACK_BYTES."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise BadPack("is a symbolic link (radrank writes packs as regular files)") from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_PACK_BYTES:
        os.close(fd)
        if st.st_size > MAX_PACK_BYTES:
            raise BadPack(f"is {st.st_size:,d} bytes, over the {MAX_PACK_BYTES:,d} of any pack radrank writes")
        raise BadPack("is a directory" if stat.S_ISDIR(st.st_mode) else "is not a regular file")
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_PACK_BYTES + 1)
    match = PACK_NAME.fullmatch(path.name)
    if match is None:
        raise BadPack("has a name without a checksum (a pack is pack-<time>-<random>-<checksum>.parquet)")
    stem = path.name[: -len(f"-{match.group(3)}.parquet")]
    if not hmac.compare_digest(_checksum(secret, path.parent.name, stem, [data]), match.group(3)):
        raise BadPack("does not match the checksum in its name: damaged, edited, renamed, copied from another "
                      "namespace" + (", or written without this cache's secret_file" if secret else ""))
    return data, st


@dataclass
class _Pack:
    """A pack whose bytes matched its checksum when this process read them."""

    path: Path
    identity: tuple  # _identity of the file that was checked
    digests: object  # pyarrow string array, the pack's digest column
    schema: object  # the pack's arrow schema, with its metadata
    block: dict


_PACKS: dict[tuple, _Pack] = {}  # (path, secret) -> the pack as checked: read once per process while unchanged
_WARNED: set = set()  # (path, reason) said once per process


def _read_pack(path: Path, secret: bytes) -> _Pack:
    """The pack at ``path``, checked (memoised while the file is unchanged); BadPack when it is not served."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    memo = _PACKS.get((path, secret))
    if memo is not None:
        try:
            if _identity(os.stat(path, follow_symlinks=False)) == memo.identity:
                return memo
        except FileNotFoundError:
            _PACKS.pop((path, secret), None)
            raise
    data, st = _read_checked(path, secret)
    try:
        with pq.ParquetFile(pa.BufferReader(data)) as pf:
            schema = pf.schema_arrow
            block = _block(schema)
            column = pf.read(columns=["digest"]).column(0)
            digests = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    except (pa.ArrowException, OSError, KeyError, ValueError, TypeError) as e:
        raise BadPack(f"is not a pack this radrank reads ({type(e).__name__}: {e})") from None
    if not isinstance(block, dict) or block.get("format") != FORMAT:
        raise BadPack(f"is of cache format {block.get('format') if isinstance(block, dict) else '?'}, "
                      f"this radrank reads {FORMAT}")
    try:
        foreign = namespace_id(block.get("key")) != path.parent.name
    except ValueError:
        foreign = True
    if foreign or schema.names[:1] != ["digest"] or not pa.types.is_string(schema.field("digest").type):
        raise BadPack("was written for another namespace (its key is not this folder's)" if foreign
                      else "has no digest column first")
    _PACKS[(path, secret)] = pack = _Pack(path, _identity(st), digests, schema, block)
    if _read_filter(path) is None:  # a pack from before filters (or whose filter was lost): the next reader skips it
        _write_filter(path, digests)
    return pack


def _warn(path: Path, reason: str) -> None:
    if (path, reason) not in _WARNED:
        _WARNED.add((path, reason))
        log.warning("score cache: pack %s %s; it is not served, its pairs are scored again "
                    "(`radrank cache prune --damaged` removes such packs)", path, reason)


def _unify(schema, pack_schema):
    """The namespace's arrow schema with one more pack (all-null columns take the others' type); BadPack when the
    pack's column types do not fit the packs before it."""
    import pyarrow as pa

    if schema is None:
        return pack_schema.remove_metadata()
    try:
        return pa.unify_schemas([schema, pack_schema.remove_metadata()], promote_options="default")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise BadPack(f"holds column types that do not fit the namespace's older packs ({e}): the metric's output "
                      "changed without a change of its identity") from None


def _touch(path: Path) -> None:
    """Set ``path``'s mtime to now (its "last used"); best effort: a pack pruned meanwhile, a read-only cache."""
    try:
        os.utime(path)
    except OSError:
        pass


@dataclass
class _Index:
    """Where each digest of a namespace is: the first (oldest) served pack holding it and its row there."""

    listing: tuple  # the pack names listed
    columns: tuple | None  # the score columns asked for (None: the oldest served pack's)
    used: tuple  # _Pack of the packs served, oldest first
    skipped: tuple  # (path, reason) of the packs not served
    schema: object  # unified arrow schema, no metadata
    pandas_meta: bytes | None  # the oldest served pack's pandas metadata
    dtypes: dict  # the oldest served pack's pandas dtypes, by column

    @property
    def size(self) -> int:
        """Digests over the served packs, duplicates counted."""
        return sum(len(p.digests) for p in self.used)

    # the packs' digests joined, and where each came from: built only when asked for (a lookup of a few digests
    # probes each pack's own array: joining a million digests cost more than the lookup)
    @cached_property
    def digests(self):
        """pyarrow string array over the served packs, in pack order (duplicates allowed)."""
        import pyarrow as pa

        return pa.concat_arrays([p.digests for p in self.used]) if self.used else pa.array([], pa.string())

    @cached_property
    def pack_of(self) -> np.ndarray:
        return np.repeat(np.arange(len(self.used), dtype=np.int32), [len(p.digests) for p in self.used])

    @cached_property
    def row_of(self) -> np.ndarray:
        return (np.concatenate([np.arange(len(p.digests), dtype=np.int64) for p in self.used]) if self.used
                else np.array([], dtype=np.int64))

    @property
    def entries(self) -> int:
        import pyarrow.compute as pc

        return pc.count_distinct(self.digests).as_py() if len(self.digests) else 0

    @property
    def meta(self) -> dict | None:
        return self.used[0].block.get("meta") if self.used else None


_INDEXES: dict[Path, _Index] = {}  # namespace folder -> index of its latest listing in this process


def _index(folder: Path, listing: tuple, secret: bytes, columns: tuple | None = None) -> _Index:
    """The index of the packs listed that are served: each checked, of the columns asked for (or the oldest's),
    of types that fit; the others skipped with a warning (memoised by listing)."""
    memo = _INDEXES.get(folder)
    if memo is not None and memo.listing == listing and memo.columns == columns:
        return memo
    used, skipped, schema = [], [], None
    for name in listing:
        path = folder / name
        try:
            pack = _read_pack(path, secret)
            names = ["digest", *columns] if columns is not None else used[0].schema.names if used else None
            if names is not None and pack.schema.names != names:
                raise BadPack(f"holds columns {pack.schema.names[1:]}, not {names[1:]}: the metric's output "
                              "changed without a change of its identity")
            schema = _unify(schema, pack.schema)
        except BadPack as e:
            skipped.append((path, str(e)))
            _warn(path, str(e))
            continue
        used.append(pack)
    for key in [k for k in _PACKS if k[0].parent == folder and k[0].name not in listing]:
        _PACKS.pop(key, None)  # pruned or compacted away
    first = used[0].schema if used else None
    index = _Index(listing=listing, columns=columns, used=tuple(used), skipped=tuple(skipped),
                   schema=schema, pandas_meta=(first.metadata or {}).get(b"pandas") if first else None,
                   dtypes=_block(first).get("dtypes", {}) if first else {})
    _INDEXES[folder] = index
    return index


def _read_rows(pack: _Pack, rows: np.ndarray, schema, secret: bytes):
    """Rows ``rows`` of a pack, reading only the row groups that hold them, cast to ``schema``. The file is read
    by path while it is the file that was checked (its stat the same before and after: any write or rename
    changes its ctime); else its bytes are checked again and read from memory."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def read(source):
        with pq.ParquetFile(source) as pf:
            sizes = [pf.metadata.row_group(i).num_rows for i in range(pf.metadata.num_row_groups)]
            starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
            group_of = np.searchsorted(starts, rows, side="right") - 1
            groups = np.unique(group_of)
            offset_in_read = np.concatenate([[0], np.cumsum(starts[groups + 1] - starts[groups])[:-1]]).astype(np.int64)
            local = rows - starts[group_of] + offset_in_read[np.searchsorted(groups, group_of)]
            return pf.read_row_groups(groups.tolist()).take(local)

    def unchanged() -> bool:
        return _identity(os.stat(pack.path, follow_symlinks=False)) == pack.identity

    table = read(str(pack.path)) if unchanged() else None
    if table is None or not unchanged():
        data, _ = _read_checked(pack.path, secret)  # the same bytes (the checksum says so): the index still holds
        table = read(pa.BufferReader(data))
    return table.replace_schema_metadata(None).cast(schema)


def _to_pandas(table, index: _Index) -> pd.DataFrame:
    """The rows as the DataFrame that was stored: pandas' own metadata, and ``object`` strings kept object
    (pyarrow gives pandas >= 3 its ``str`` dtype for them)."""
    if index.pandas_meta is not None:
        table = table.replace_schema_metadata({b"pandas": index.pandas_meta})
    frame = table.to_pandas()
    for name, dtype in index.dtypes.items():
        if dtype == "object" and name in frame.columns and frame[name].dtype != object:
            frame[name] = pd.Series(table.column(name).to_numpy(zero_copy_only=False), dtype=object, index=frame.index)
    return frame


# --- the cache ------------------------------------------------------------------------------------


def _no_rows() -> pd.DataFrame:
    """A lookup's answer where nothing is stored: the digest column only (the stored columns are unknown)."""
    return pd.DataFrame({"digest": pd.Series([], dtype=object)})


class Namespace:
    """The scores of one metric identity, by pair digest (see the module's docstring). ``columns``: the score
    columns the metric writes (packs of other columns are not served); ``secret``: the cache's secret."""

    def __init__(self, root: Path | None, key: dict, *, columns=None, secret: bytes = b""):
        self.key = key
        self.id = namespace_id(key)
        self.dir = Path(root) / LAYOUT / self.id if root is not None else None
        self.columns = tuple(columns) if columns is not None else None
        self.secret = secret
        self.skipped: tuple = ()  # (path, reason) of the packs the last lookup did not serve
        self.left_unread: dict = {}  # pack name -> the asked pairs it holds, of the packs the last lookup left unread
        self.answered_meta: dict | None = None  # the ``meta`` of the oldest pack that gave the last lookup rows

    @property
    def enabled(self) -> bool:
        return self.dir is not None

    def packs(self) -> list[str]:
        return _list_packs(self.dir) if self.enabled else []

    def _read(self, read, keep=None):
        """``read(index)`` over the index of a fresh listing (of the packs ``keep(path)`` admits, when given),
        listed again whenever a listed pack vanished meanwhile."""
        for _ in range(READ_TRIES):
            listing = tuple(self.packs())
            if keep is not None:
                listing = tuple(name for name in listing if keep(self.dir / name))
            try:
                index = _index(self.dir, listing, self.secret, self.columns)
                self.skipped = index.skipped
                return read(index)
            except OSError as e:
                if not _vanished(e, self.dir, listing):
                    raise
        raise ScoreCacheError(f"score cache {self.dir}: packs kept vanishing while being read ({READ_TRIES} "
                              "listings); is a prune or compaction looping?")

    def lookup(self, digests, *, seconds_per_pair: float | None = None) -> pd.DataFrame:
        """Column ``digest`` plus the stored columns for the digests present, each once, in the order of
        their first occurrence in ``digests``; the dtypes they were stored with (the digest column alone when no
        pack's digest filter holds any of them: no pack is read). Only packs that pass their checks answer
        (:attr:`skipped` names the others among those read).

        ``seconds_per_pair``: what scoring a pair costs the metric
        (:attr:`radrank.metrics.base.Metric.seconds_per_pair`). A pack whose filter holds too few of the pairs asked
        for to pay for reading it (PACK_READ_S_PER_BYTE) is left unread, and its pairs count as misses
        (:attr:`left_unread`): a new submission's lexical scoring found a hundred of its 10,000 pairs in a
        leaderboard's packs of a million, and read 25-50 MB for them. A pack this process has read already is always
        read (its digests are in memory)."""
        wanted = pd.unique(np.asarray(digests, dtype=object))
        self.answered_meta = None
        self.left_unread = {}
        if not self.enabled or not self.dir.is_dir():
            return _no_rows()
        _touch(self.dir / "last-used")
        asked = sorted_prefixes(wanted)
        keep = (lambda path: _may_hold(path, asked)) if seconds_per_pair is None else \
            (lambda path: self._worth_reading(path, asked, seconds_per_pair))
        return self._read(lambda index: self._lookup(index, wanted), keep=keep)

    def _worth_reading(self, pack: Path, asked: np.ndarray, seconds_per_pair: float) -> bool:
        """Whether a lookup at ``seconds_per_pair`` reads the pack (see :meth:`lookup`); one it leaves unread is
        noted in :attr:`left_unread`."""
        held = _held(pack, asked)
        if held == 0:
            return False
        try:
            st = os.stat(pack, follow_symlinks=False)
        except FileNotFoundError:  # gone since the listing: the read lists again
            return True
        memo = _PACKS.get((pack, self.secret))
        if held is None or (memo is not None and memo.identity == _identity(st)):
            return True
        worth = held * seconds_per_pair >= st.st_size * PACK_READ_S_PER_BYTE
        if worth:
            self.left_unread.pop(pack.name, None)
        else:
            self.left_unread[pack.name] = held
        return worth

    def _lookup(self, index: _Index, wanted: np.ndarray) -> pd.DataFrame:
        import pyarrow as pa
        import pyarrow.compute as pc

        if not index.used:
            return _no_rows()
        asked = pa.array(wanted, type=pa.string())
        if len(asked) * 4 < index.size:  # a hash table of the few asked, probed by the many stored, pack by pack
            found = []  # (pack, rows, slots) in pack order, rows ascending: the order of the digests joined
            for k, pack in enumerate(index.used):
                rows = np.flatnonzero(pc.is_in(pack.digests, value_set=asked).to_numpy(zero_copy_only=False))
                if len(rows):
                    slots = pc.index_in(pack.digests.take(rows), value_set=asked).to_numpy()
                    found.append((np.full(len(rows), k, dtype=np.int32), rows, slots))
            packs, rows, slots = ([np.concatenate(part) for part in zip(*found)] if found else
                                  (np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.int64)))
            _, first = np.unique(slots, return_index=True)  # the oldest copy of each (found in pack, row order)
            pack_of, row_of = packs[first], rows[first]  # in the order wanted (np.unique sorts the slots)
        else:
            where = pc.fill_null(pc.index_in(asked, value_set=index.digests), -1).to_numpy()
            hits = where[where >= 0]  # in the order wanted
            pack_of, row_of = index.pack_of[hits], index.row_of[hits]
        tables, order, answered = [], [], []
        for pack in np.unique(pack_of):
            picked = np.flatnonzero(pack_of == pack)
            try:
                tables.append(_read_rows(index.used[pack], row_of[picked], index.schema, self.secret))
            except BadPack as e:  # changed since it was indexed: its rows are misses
                _warn(index.used[pack].path, str(e))
                _INDEXES.pop(self.dir, None)
                continue
            order.append(picked)
            answered.append(index.used[pack])
        self.answered_meta = answered[0].block.get("meta") if answered else None
        if not tables:
            return _to_pandas(index.schema.empty_table(), index)
        table = pa.concat_tables(tables).take(np.argsort(np.concatenate(order), kind="stable"))
        for pack in answered:
            _touch(pack.path)  # "last used" of the packs that answered; our own touch is no change to re-check
            try:
                pack.identity = _identity(os.stat(pack.path, follow_symlinks=False))
            except OSError:
                pass
        return _to_pandas(table, index)

    def store(self, frame: pd.DataFrame, meta: dict) -> Path | None:
        """Store ``frame`` (``digest`` plus score columns) as a new pack with ``meta`` (the provenance of the
        job that computed it); a digest repeated in ``frame`` is stored once. Returns the pack (None when the
        cache is off, ``frame`` is empty, or the cache could not be written: a full or read-only cache never
        fails the job)."""
        import pyarrow as pa

        if not self.enabled or frame.empty:
            return None
        if "digest" not in frame.columns:
            raise ValueError("a score cache frame needs a 'digest' column")
        frame = frame[["digest", *[c for c in frame.columns if c != "digest"]]]
        frame = frame.drop_duplicates(subset="digest", keep="first").reset_index(drop=True)
        table = pa.Table.from_pandas(frame, preserve_index=False)
        table = table.set_column(0, "digest", table.column("digest").cast(pa.string()))
        created = time.time_ns()
        block = {"format": FORMAT, "key": self.key, "meta": meta, "rows": len(frame),
                 "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(created / 1e9)),
                 "dtypes": {str(c): str(frame[c].dtype) for c in frame.columns}}
        table = table.replace_schema_metadata({**{k: v for k, v in (table.schema.metadata or {}).items()
                                                   if k == b"pandas"},
                                               META_KEY: json.dumps(block, sort_keys=True, default=str).encode()})
        for _ in range(3):  # a prune may remove the (empty) namespace folder between mkdir and the write
            try:
                self._ensure_folder()
                path = _write_pack(self.dir, table, created, self.secret)
                self._ensure_folder()  # a prune emptied the namespace meanwhile: its key file again
                _touch(self.dir / "last-used")
                return path
            except FileNotFoundError:
                continue
            except OSError as e:
                log.warning("score cache: could not write to %s (%s)", self.dir, e)
                return None
        log.warning("score cache: could not write to %s (its folder kept vanishing)", self.dir)
        return None

    def _ensure_folder(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        key_file = self.dir / "key.json"
        if not key_file.exists():
            fd, tmp = tempfile.mkstemp(prefix=".key-", suffix=".part", dir=self.dir)
            try:
                radrank_io.make_ordinary(fd)
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump({"format": FORMAT, "key": self.key}, f, sort_keys=True, indent=1)
                os.replace(tmp, key_file)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        marker = self.dir / "last-used"
        if not marker.exists():
            marker.touch()

    def record_hits(self, asked: int, served: int) -> None:
        """Keep what one lookup of this run found (``radrank cache info`` shows the last run's hit rate): a small
        file per job, written atomically; best effort, like a store."""
        if not self.enabled or asked == 0:
            return
        record = {"run": run_id(), "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "asked": int(asked),
                  "served": int(served), "skipped_packs": len(self.skipped)}
        try:
            folder = self.dir / HITS
            folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".hits-", suffix=".part", dir=folder)
            try:
                radrank_io.make_ordinary(fd)
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump(record, f)
                os.replace(tmp, folder / f"{record['run']}-{secrets.token_hex(4)}.json")
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as e:
            log.warning("score cache: could not record hits in %s (%s)", self.dir, e)

    def meta(self) -> dict | None:
        """The ``meta`` stored with the namespace's oldest served pack (None without one): what a job that found
        every pair cached records as its provenance."""
        if not self.enabled:
            return None
        return self._read(lambda index: index.meta)


# --- runs -------------------------------------------------------------------------------------------

RUN_ENV_VAR = "RADRANK_RUN_ID"  # set by the workflow when a run starts (its jobs, local or on SLURM, inherit it)
HITS = "hits"  # a namespace's folder of hit records, one per lookup: <run id>-<random>.json
HIT_RUNS_KEPT = 10  # prune keeps the records of a namespace's last runs


def new_run_id() -> str:
    """A run's id: its start time (sortable) and the process."""
    return f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}"


def run_id() -> str:
    """The id of the run this process works for: $RADRANK_RUN_ID, else this process's own."""
    global _PROCESS_RUN
    value = os.environ.get(RUN_ENV_VAR, "").strip()
    if value and re.fullmatch(r"[0-9A-Za-z_.-]{1,64}", value):
        return value
    _PROCESS_RUN = _PROCESS_RUN or new_run_id()
    return _PROCESS_RUN


_PROCESS_RUN = None


def _hit_records(folder: Path) -> list:
    out = []
    try:
        entries = list(os.scandir(folder / HITS))
    except (FileNotFoundError, NotADirectoryError):
        return out
    for entry in entries:
        if entry.name.endswith(".json"):
            try:
                record = json.loads(Path(entry.path).read_text(encoding="utf-8"))
                out.append((Path(entry.path), str(record["run"]), int(record["asked"]), int(record["served"])))
            except (OSError, ValueError, KeyError, TypeError):
                continue  # a record being pruned, or not one radrank wrote: not a hit rate
    return out


def last_run_hits(folder: Path) -> dict | None:
    """{run, asked, served} summed over the lookups of the namespace's latest run (None without records)."""
    records = _hit_records(folder)
    if not records:
        return None
    last = max(run for _, run, _, _ in records)
    mine = [r for r in records if r[1] == last]
    return {"run": last, "asked": sum(r[2] for r in mine), "served": sum(r[3] for r in mine)}


def _old_hit_records(folder: Path) -> list[Path]:
    """The records of the namespace's runs before its last HIT_RUNS_KEPT."""
    records = _hit_records(folder)
    kept = set(sorted({run for _, run, _, _ in records})[-HIT_RUNS_KEPT:])
    return [path for path, run, _, _ in records if run not in kept]


# --- the bound, kept at the end of every run -------------------------------------------------------


def keep_bounded(config: dict) -> "PruneResult | None":
    """At the end of a run: the cache of ``config`` pruned to ``score_cache.max_gb`` and ``max_age_days`` (least
    recently used packs first) and its small packs compacted, so lookups stay flat in the number of stores.
    Never fails the run: a problem is a warning (the run's outputs are complete either way)."""
    section = config.get("score_cache") or {}
    try:
        store = ScoreCache.from_config(config)
    except RadrankError as e:
        log.warning("score cache: not bounded (%s)", e)
        return None
    if not store.enabled or not (store.root / LAYOUT).is_dir():
        return None
    max_gb, days = section.get("max_gb"), section.get("max_age_days")
    try:
        result = prune(store.root, max_bytes=None if max_gb is None else int(max_gb * 1e9), older_than_days=days,
                       secret=store.secret)
    except (OSError, ScoreCacheError) as e:
        log.warning("score cache %s: not bounded (%s)", store.root, e)
        return None
    merged = sum(len(inputs) for inputs, _ in result.compacted)
    if result.removed or merged:
        log.info("score cache %s: %.1f MB -> %.1f MB (max_gb %s, max_age_days %s): %d pack(s) removed, %d small "
                 "pack(s) compacted into %d", store.root, result.bytes_before / 1e6, result.bytes_after / 1e6,
                 max_gb, days, len(result.removed), merged, len(result.compacted))
    return result


# --- the secret -----------------------------------------------------------------------------------

SECRET_ENV_VAR = "RADRANK_SCORE_CACHE_SECRET_FILE"
SECRET_MIN_BYTES = 16
SECRET_MAX_BYTES = 4096


def read_secret(path, where: str = "score_cache.secret_file") -> bytes:
    """The secret in file ``path`` (surrounding whitespace stripped); ConfigError when it is missing, not a
    regular file, readable or writable by every user, writable by the group, or shorter than 16 bytes."""
    from radrank.errors import ConfigError

    path = Path(os.path.expanduser(str(path)))
    try:
        st = os.stat(path)
    except OSError as e:
        raise ConfigError(f"{where}: {path}: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"{where}: {path} is not a regular file")
    if st.st_mode & 0o027:
        raise ConfigError(f"{where}: {path} has mode {stat.filemode(st.st_mode)}: anyone who can read it can write "
                          f"packs the cache serves; `chmod 600 {path}` (or 640 for a group of maintainers)")
    with open(path, "rb") as f:
        data = f.read(SECRET_MAX_BYTES + 1)
    if len(data) > SECRET_MAX_BYTES:
        raise ConfigError(f"{where}: {path} holds more than {SECRET_MAX_BYTES} bytes; is it the right file?")
    data = data.strip()
    if len(data) < SECRET_MIN_BYTES:
        raise ConfigError(f"{where}: {path} holds {len(data)} bytes, fewer than {SECRET_MIN_BYTES}; write random "
                          f"bytes into it, e.g. `head -c 32 /dev/urandom | base64 > {path}`")
    return data


def secret_from_config(config: dict) -> bytes:
    """The secret of a workflow config (``score_cache.secret_file``, else ``$RADRANK_SCORE_CACHE_SECRET_FILE``);
    empty without one."""
    setting = str((config.get("score_cache") or {}).get("secret_file") or "").strip()
    if setting:
        return read_secret(setting)
    env = os.environ.get(SECRET_ENV_VAR, "").strip()
    return read_secret(env, f"${SECRET_ENV_VAR}") if env else b""


class ScoreCache:
    """The cache under ``root``; ``ScoreCache(None)`` caches nothing (its namespaces find and keep nothing).
    ``secret``: the key of the packs' checksums (empty: a plain keyed hash anyone can compute)."""

    def __init__(self, root=None, secret: bytes = b""):
        self.root = Path(root) if root is not None else None
        self.secret = secret

    @classmethod
    def from_config(cls, config: dict) -> "ScoreCache":
        root = root_from_config(config)
        return cls(root, secret_from_config(config) if root is not None else b"")

    @property
    def enabled(self) -> bool:
        return self.root is not None

    def namespace(self, key: dict, columns=None) -> Namespace:
        return Namespace(self.root, key, columns=columns, secret=self.secret)


# --- info and prune -------------------------------------------------------------------------------


@dataclass(frozen=True)
class PackInfo:
    path: Path
    bytes: int  # the pack's and its digest filter's
    last_used: float  # mtime: written, or last gave rows to a lookup


@dataclass(frozen=True)
class NamespaceInfo:
    id: str
    path: Path
    key: dict | None  # the namespace's key; None when key.json is unreadable (a prune racing a store)
    entries: int  # distinct digests in the packs served
    packs: tuple  # PackInfo, oldest first
    bytes: int
    last_used: float | None  # the latest of the marker and the packs
    skipped: tuple = ()  # (path, reason) of the packs not served
    last_run: dict | None = None  # {run, asked, served} of the namespace's latest run's lookups

    @property
    def metric(self) -> str:
        """The key's ``metric`` (what ``radrank cache info`` shows), "?" when it has none."""
        return str(self.key.get("metric", "?")) if isinstance(self.key, dict) else "?"


def _namespace_folders(root: Path) -> list[Path]:
    try:
        return sorted(Path(e.path) for e in os.scandir(Path(root) / LAYOUT) if e.is_dir(follow_symlinks=False))
    except FileNotFoundError:
        return []


def _pack_infos(folder: Path) -> tuple:
    out = []
    for name in _list_packs(folder):
        try:
            st = os.stat(folder / name, follow_symlinks=False)
        except FileNotFoundError:
            continue
        try:
            filter_bytes = os.stat(filter_path(folder / name), follow_symlinks=False).st_size
        except OSError:
            filter_bytes = 0
        out.append(PackInfo(folder / name, st.st_size + filter_bytes, st.st_mtime))
    return tuple(out)


def _mtime(path: Path) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def _namespace_info(folder: Path, secret: bytes = b"", *, check: bool = True) -> NamespaceInfo:
    """A namespace's packs; with ``check``, each pack's bytes checked: entries and skipped packs counted."""
    try:
        key = json.loads((folder / "key.json").read_text(encoding="utf-8"))["key"]
    except (OSError, ValueError, KeyError, TypeError):
        key = None
    index, packs = None, ()
    for _ in range(READ_TRIES):
        packs = _pack_infos(folder)
        names = tuple(p.path.name for p in packs)
        try:
            index = _index(folder, names, secret) if names and check else None
            break
        except OSError as e:
            if not _vanished(e, folder, names):
                raise
    stamps = [t for t in [_mtime(folder / "last-used"), *(p.last_used for p in packs)] if t is not None]
    return NamespaceInfo(id=folder.name, path=folder, key=key, entries=index.entries if index else 0, packs=packs,
                         bytes=sum(p.bytes for p in packs), last_used=max(stamps) if stamps else None,
                         skipped=index.skipped if index else (), last_run=last_run_hits(folder) if check else None)


def info(root, secret: bytes = b"") -> list[NamespaceInfo]:
    """Every namespace under ``root``: entries, packs, bytes, last used, the packs it would not serve (most
    recently used first)."""
    found = [_namespace_info(folder, secret) for folder in _namespace_folders(root)]
    return sorted(found, key=lambda n: -(n.last_used or 0))


@dataclass
class PruneResult:
    dry_run: bool
    removed: list = field(default_factory=list)  # PackInfo of the packs removed (or that would be)
    damaged: list = field(default_factory=list)  # (PackInfo, reason) of the unserved packs removed (--damaged)
    kept_damaged: list = field(default_factory=list)  # (path, reason): unserved, not removed (folders; no --damaged)
    compacted: list = field(default_factory=list)  # (inputs: list[Path], output: Path | None) per merge
    stale_temporaries: list = field(default_factory=list)
    bytes_before: int = 0
    bytes_after: int = 0

    @property
    def removed_bytes(self) -> int:
        return sum(p.bytes for p in self.removed) + sum(p.bytes for p, _ in self.damaged)


def _damaged(spaces: list, secret: bytes) -> list:
    """(PackInfo, reason) of every pack that fails its own checks: its name, bytes, format or namespace (not the
    column checks, which depend on the metric version asking)."""
    out = []
    for ns in spaces:
        for p in ns.packs:
            try:
                _read_pack(p.path, secret)
            except BadPack as e:
                out.append((p, str(e)))
            except FileNotFoundError:
                continue
    return out


def prune(root, max_bytes: int | None = None, older_than_days: float | None = None, dry_run: bool = False, *,
          compact: bool = True, compact_min_packs: int = COMPACT_MIN_PACKS, damaged: bool = False,
          secret: bytes = b"") -> PruneResult:
    """Bound the cache under ``root``: with ``damaged``, remove the packs that fail their checks (never folders;
    refused when every pack fails its checksum: a wrong secret); remove the packs unused for ``older_than_days``,
    then the least recently used packs until at most ``max_bytes`` remain; then (``compact``) merge the small
    served packs of every size tier of a namespace holding ``compact_min_packs`` or more into a few
    (:func:`_compact`). Namespaces left without packs are removed, and so are temporary files of jobs killed
    mid-write. ``dry_run``: say what would be done, do nothing."""
    now = time.time()
    result = PruneResult(dry_run=dry_run)
    spaces = [_namespace_info(folder, secret, check=False) for folder in _namespace_folders(root)]
    packs = sorted((p for ns in spaces for p in ns.packs), key=lambda p: (p.last_used, p.path.name))
    result.bytes_before = total = sum(p.bytes for p in packs)
    if damaged:
        bad = _damaged(spaces, secret)
        if bad and len(bad) == len(packs) and all("checksum" in reason for _, reason in bad):
            raise ScoreCacheError(f"score cache {root}: every one of its {len(packs)} packs fails its checksum; "
                                  "is score_cache.secret_file the secret they were written with? Nothing removed")
        result.kept_damaged = [(p.path, r) for p, r in bad if os.path.isdir(p.path) and not os.path.islink(p.path)]
        result.damaged = [(p, r) for p, r in bad if (p.path, r) not in result.kept_damaged]
        gone = {p.path for p, _ in result.damaged}
        packs = [p for p in packs if p.path not in gone]
        total -= sum(p.bytes for p, _ in result.damaged)
    cutoff = now - older_than_days * 86_400 if older_than_days is not None else None
    doomed = [p for p in packs if cutoff is not None and p.last_used < cutoff]  # a prefix: packs is LRU first
    total -= sum(p.bytes for p in doomed)
    if max_bytes is not None:
        for p in packs[len(doomed):]:
            if total <= max_bytes:
                break
            doomed.append(p)
            total -= p.bytes
    result.removed = doomed
    for ns in spaces:
        result.stale_temporaries += _stale_temporaries(ns.path, now) + _stale_temporaries(ns.path / HITS, now)
    if not dry_run:
        old_records = [path for ns in spaces for path in _old_hit_records(ns.path)]
        for path in [*(p.path for p in doomed), *(p.path for p, _ in result.damaged)]:
            _remove_pack(path)
        orphans = [path for ns in spaces for path in _orphan_filters(ns.path)]
        for path in [*result.stale_temporaries, *old_records, *orphans]:
            path.unlink(missing_ok=True)
    gone = {p.path for p in doomed} | {p.path for p, _ in result.damaged}
    for ns in spaces:
        left = [p for p in ns.packs if p.path not in gone]
        if not left and not dry_run:
            _remove_namespace(ns.path)
        elif compact:
            result.compacted += _compact(ns.path, left, compact_min_packs, dry_run, secret)
    result.bytes_after = sum(p.bytes for ns in spaces for p in _pack_infos(ns.path)) if not dry_run else total
    return result


def _stale_temporaries(folder: Path, now: float) -> list[Path]:
    out = []
    try:
        for entry in os.scandir(folder):
            if entry.name.endswith(".part") and now - entry.stat().st_mtime > STALE_TEMP_S:
                out.append(Path(entry.path))
    except (FileNotFoundError, NotADirectoryError):  # the namespace went away meanwhile (another prune)
        pass
    return out


def _remove_pack(path: Path) -> None:
    """Remove a pack and its digest filter (the pack first: a filter alone only ever costs a miss)."""
    path.unlink(missing_ok=True)
    filter_path(path).unlink(missing_ok=True)


def _orphan_filters(folder: Path) -> list[Path]:
    """The digest filters in ``folder`` whose pack is gone (a pack removed by hand, or as a reader wrote its filter)."""
    try:
        names = {e.name for e in os.scandir(folder)}
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [folder / name for name in names if name.startswith("pack-") and name.endswith(FILTER_SUFFIX)
            and name[: -len(FILTER_SUFFIX)] + ".parquet" not in names]


def _remove_namespace(folder: Path) -> None:
    """Remove a namespace without packs; a store racing it recreates what it needs (see Namespace.store)."""
    if _list_packs(folder):
        return
    for path, *_ in _hit_records(folder):
        path.unlink(missing_ok=True)
    try:
        (folder / HITS).rmdir()
    except OSError:
        pass
    for path in _orphan_filters(folder):
        path.unlink(missing_ok=True)
    for name in ("key.json", "last-used"):
        (folder / name).unlink(missing_ok=True)
    try:
        folder.rmdir()
    except OSError:  # a store is writing a pack into it right now
        pass


def _tier(size: int) -> int:
    """A pack's size tier: 0 under COMPACT_TIER_BYTES, each next one up to COMPACT_TIER_FACTOR times larger."""
    tier, bound = 0, COMPACT_TIER_BYTES
    while size >= bound:
        tier, bound = tier + 1, bound * COMPACT_TIER_FACTOR
    return tier


def _compact(folder: Path, packs: list, min_packs: int, dry_run: bool, secret: bytes) -> list:
    """Merge the small packs of a namespace, tier by tier (:func:`_tier`): a tier holding ``min_packs`` or more is
    merged, oldest first, into packs of about COMPACT_TARGET_BYTES. A small pack is never merged into a much larger
    one: a new submission's pack of 10,000 pairs waits for seven more of its size instead of rewriting the million
    pairs of the full run's pack with it (each stored pair is rewritten about once per tier, not once per
    ``min_packs`` stores), and the packs a lookup may read stay fewer than ``min_packs`` per tier. The merged pack
    keeps the oldest input's creation time and meta, and the latest "last used"; it is renamed into place before
    the inputs are removed, so a concurrent lookup always finds every entry. A pack that is not served is never
    merged (nor removed here)."""
    small = [p for p in packs if p.bytes < COMPACT_SMALL_BYTES and PACK_NAME.fullmatch(p.path.name)]
    tiers: dict = {}
    for p in small:  # oldest first, as listed
        tiers.setdefault(_tier(p.bytes), []).append(p)
    done = []
    for tier in sorted(tiers):
        if len(tiers[tier]) < min_packs:
            continue
        batches, batch, size = [], [], 0
        for p in tiers[tier]:
            batch.append(p)
            size += p.bytes
            if size >= COMPACT_TARGET_BYTES:
                batches.append(batch)
                batch, size = [], 0
        batches.append(batch)
        for batch in (b for b in batches if len(b) >= 2):
            inputs, output = ([p.path for p in batch], None) if dry_run else _merge(folder, batch, secret)
            done.append((inputs, output))
    return done


def _read_whole(path: Path, secret: bytes):
    """A pack's whole table, its bytes checked."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    data, _ = _read_checked(path, secret)
    try:
        return pq.read_table(pa.BufferReader(data))
    except (pa.ArrowException, OSError) as e:
        raise BadPack(f"is not a pack this radrank reads ({type(e).__name__}: {e})") from None


def _merge(folder: Path, batch: list, secret: bytes) -> tuple:
    """(the packs merged, the merged pack or None): the packs of ``batch`` that pass their checks, merged."""
    import pyarrow as pa
    import pyarrow.compute as pc

    tables, schema = [], None
    for p in batch:
        try:
            table = _read_whole(p.path, secret)
            if tables and table.schema.names != tables[0][1].schema.names:
                raise BadPack("holds other columns than the packs merged with it")
            unified = _unify(schema, table.schema)
        except FileNotFoundError:  # another prune merged it already
            continue
        except BadPack as e:
            _warn(p.path, str(e))
            continue
        tables.append((p, table))
        schema = unified
    if len(tables) < 2:
        return [p.path for p, _ in tables], None
    first = tables[0][1].schema
    merged = pa.concat_tables([t.replace_schema_metadata(None).cast(schema) for _, t in tables])
    digests = merged.column("digest")
    first_rows = pc.index_in(pc.unique(digests), value_set=digests).to_numpy()
    merged = merged.take(np.sort(first_rows))
    block = {**_block(first), "rows": merged.num_rows, "compacted_from": len(tables)}
    merged = merged.replace_schema_metadata({**{k: v for k, v in (first.metadata or {}).items() if k == b"pandas"},
                                             META_KEY: json.dumps(block, sort_keys=True, default=str).encode()})
    output = _write_pack(folder, merged, _created_ns(tables[0][0].path.name), secret)
    last_used = max(p.last_used for p, _ in tables)
    os.utime(output, (last_used, last_used))
    for p, _ in tables:
        _remove_pack(p.path)
    return [p.path for p, _ in tables], output

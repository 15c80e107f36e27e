"""Detect a submission's format from its content, and read the files people write strictly.

:func:`read_regular` is the one place a file people write is opened — submissions, references, the
submissions and models sheets, the meta-evaluation ratings: every reader goes through it (directly,
or through :func:`read_bytes`). It reads regular files only: a FIFO, a character or block device
(``/dev/zero``, ``/dev/stdin``), a socket or a directory is refused before anything is read (a pipe
would block forever, a device never end), and so is a file over :data:`MAX_FILE_BYTES` and a file under
``/proc``, ``/sys`` or ``/dev`` once links are followed (``/proc/self/environ`` is a "regular file of size 0"
that holds the process environment). A path that cannot be followed says why: it does not exist, it is a
symlink whose target does not exist, or a symlink loop. A file is read in bounded chunks (at most what it
holds, plus one byte to see it grow), never with a buffer of the size cap: a process whose address space is
capped (``ulimit -v``) reads small files as before.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from radrank.errors import InputError

FORMATS = ("rexrank_json", "csv", "parquet")
MAX_FILE_BYTES = 2 * 1024**3  # 2 GiB: 20x a 100,000-study submission; read whole into memory
SNIFF_BYTES = 64 * 1024  # what format sniffing reads of a file
READ_CHUNK = 16 * 1024**2  # what one read asks for beyond a file's stated size (a file that grows, /proc-like sizes)
SYSTEM_FOLDERS = ("/proc", "/sys", "/dev")  # kernel and device files: never data people write
# byte-order marks of the encodings a "not valid UTF-8" file most often is (UTF-32 first: its LE mark starts
# with UTF-16's)
BOMS = ((b"\xff\xfe\x00\x00", "UTF-32 LE"), (b"\x00\x00\xfe\xff", "UTF-32 BE"), (b"\xff\xfe", "UTF-16 LE"),
        (b"\xfe\xff", "UTF-16 BE"))


class FileProblem(Exception):
    """Why a path is not a readable regular file; ``str()`` is the reason, e.g. "is a FIFO (named pipe) ..."."""


_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _kind_problem(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a directory, expected a file"
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    return (f"is {kind}, not a regular file: radrank reads only regular files (a pipe could block forever, a "
            "device never end); write the data to a file")


def _stat_problem(path: Path, e: OSError) -> str:
    if e.errno == errno.ELOOP:
        return "is a symlink loop (following its links comes back to it); point the link at a file"
    if e.errno == errno.ENOENT:
        if os.path.islink(path):
            return f"is a symlink to {os.readlink(path)}, which does not exist"
        return "file does not exist"
    if e.errno == errno.ENOTDIR:
        return "file does not exist (a folder on its path is a file)"
    if e.errno == errno.ENAMETOOLONG:
        return "cannot be opened: its name is too long"
    if e.errno == errno.EACCES:
        return "cannot be read: permission denied"
    return f"cannot be read: {e.strerror or e}"


def file_problem(path, *, limit: int | None = None) -> str | None:
    """Why ``path`` cannot be read as a regular file (see the module docstring), or None when it can.
    Looks only (``stat``): nothing is opened. ``limit``: the size cap (None: :data:`MAX_FILE_BYTES`)."""
    path = Path(path)
    limit = MAX_FILE_BYTES if limit is None else limit
    try:
        st = os.stat(path)
    except OSError as e:
        return _stat_problem(path, e)
    return (_kind_problem(st.st_mode) or _system_problem(path) or _size_problem(st.st_size, limit)
            or _future_problem(path, st.st_mtime))


FUTURE_SKEW_S = 300  # a clock a few minutes ahead (NFS servers, VMs) is not a future file


def _future_problem(path: Path, mtime: float) -> str | None:
    """A modification time in the future (a submitter's tar archive keeps its own): Snakemake would fail every job
    that reads the file, on every run, with "older modification time than input" until it is touched."""
    import time

    if mtime <= time.time() + FUTURE_SKEW_S:
        return None
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(mtime))
    return (f"has a modification time in the future ({when}): Snakemake would fail every job that reads it; "
            f"`touch {path}` sets it to now")


def _system_problem(path: Path) -> str | None:
    real = os.path.realpath(path)
    folder = next((f for f in SYSTEM_FOLDERS if real == f or real.startswith(f + os.sep)), None)
    if folder is None:
        return None
    target = "" if real == os.path.abspath(path) else f" (it resolves to {real})"
    return (f"is under {folder}{target}, a kernel or device file, not data: radrank reads no file under "
            f"{', '.join(SYSTEM_FOLDERS)}; copy the data to a file")


def _size_problem(size: int, limit: int) -> str | None:
    if size > limit:
        return (f"is {size:,} bytes, over the limit of {limit:,} bytes that radrank reads "
                "(radrank.ingest.detect.MAX_FILE_BYTES)")
    return None


def read_regular(path, *, limit: int | None = None, head: int | None = None) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (None: :data:`MAX_FILE_BYTES`; only its first
    ``head`` bytes when given); :class:`FileProblem` says why not. The file is opened without blocking and
    checked again once open, so a path swapped for a FIFO after the first check cannot block either."""
    path = Path(path)
    limit = MAX_FILE_BYTES if limit is None else limit
    problem = file_problem(path, limit=limit)
    if problem:
        raise FileProblem(problem)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise FileProblem(_stat_problem(path, e)) from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        problem = _kind_problem(st.st_mode) or _size_problem(st.st_size, limit)
        if problem:
            raise FileProblem(problem)
        cap = head if head is not None else limit + 1  # one byte over the limit tells a file that grew
        try:
            data = _read_at_most(f, cap, st.st_size + 1)
        except OSError as e:
            raise FileProblem(f"cannot be read: {e.strerror or e}") from None
    if head is None and len(data) > limit:  # it grew while being read
        raise FileProblem(_size_problem(len(data), limit))
    return data


def _read_at_most(f, cap: int, first: int) -> bytes:
    """At most ``cap`` bytes of ``f``: first what its stat says it holds (+ 1), then :data:`READ_CHUNK` at a time.
    A buffered ``read(n)`` allocates ``n`` bytes up front, so asking for the cap would reserve it for any file."""
    chunks, total, want = [], 0, first
    while total < cap:
        chunk = f.read(min(want, cap - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        want = READ_CHUNK
    return b"".join(chunks)


def read_bytes(path) -> bytes:
    """A submission's (or reference's, or ratings file's) bytes; an :class:`InputError` naming the file when
    it is not a non-empty regular file."""
    try:
        data = read_regular(path)
    except FileProblem as e:
        raise InputError(path, str(e)) from None
    if not data.strip():
        raise InputError(path, "file is empty")
    return data


def decode_utf8(path, data: bytes) -> str:
    """Decode ``data`` as UTF-8 (a BOM is allowed) or name the first bad byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise InputError(
            path,
            f"is not valid UTF-8: byte 0x{data[e.start]:02x} at offset {e.start} (line {line}){bom_hint(data)}; "
            "re-encode the file as UTF-8",
        ) from None


def bom_hint(data: bytes) -> str:
    """For a message about bytes that are not UTF-8: what their byte-order mark says they are, or ""."""
    name = next((name for bom, name in BOMS if data.startswith(bom)), None)
    return f" (it starts with a {name} byte-order mark: the file is {name.split()[0]})" if name else ""


def _format_of(path, data: bytes) -> str:
    if data[:4] == b"PAR1":
        return "parquet"
    head = data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    if head in (b"{", b"["):
        return "rexrank_json"
    suffix = Path(path).suffix.lower()
    if suffix in (".csv", ".tsv", ".txt"):
        return "csv"
    if suffix == ".json":
        return "rexrank_json"  # let the JSON reader report what is wrong
    raise InputError(path, "cannot tell the format: expected a ReXrank JSON object, a CSV or a parquet file")


def detect_format(path) -> str:
    """Return one of :data:`FORMATS`, judged by magic bytes, then by content."""
    return _format_of(path, read_bytes(path))


def sniff_format(path) -> str:
    """:func:`detect_format` from the file's first :data:`SNIFF_BYTES` only (the workflow's load-time checks):
    the format, or an :class:`InputError`."""
    try:
        data = read_regular(path, head=SNIFF_BYTES)
    except FileProblem as e:
        raise InputError(path, str(e)) from None
    if not data.strip():
        if len(data) < SNIFF_BYTES:
            raise InputError(path, "file is empty")
        return detect_format(path)  # 64 KiB of whitespace: judge the whole file
    return _format_of(path, data)

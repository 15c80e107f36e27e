"""Detect a submission's format from its content, and read text strictly."""

from __future__ import annotations

from pathlib import Path

from radrank.errors import InputError

FORMATS = ("rexrank_json", "csv", "parquet")


def read_bytes(path) -> bytes:
    path = Path(path)
    if not path.exists():
        raise InputError(path, "file does not exist")
    if path.is_dir():
        raise InputError(path, "is a directory, expected a file")
    data = path.read_bytes()
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
            f"is not valid UTF-8: byte 0x{data[e.start]:02x} at offset {e.start} (line {line}); "
            "re-encode the file as UTF-8",
        ) from None


def detect_format(path) -> str:
    """Return one of :data:`FORMATS`, judged by magic bytes, then by content."""
    data = read_bytes(path)
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

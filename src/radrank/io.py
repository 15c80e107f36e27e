"""Table I/O between stages: parquet with provenance in its metadata, CSV for people.

Every write goes to a temporary file in the target folder and is renamed into
place only when complete, so an interrupted job never leaves a file that looks
finished. The file gets the mode any other tool would give it (0666 less the
umask), not the 0600 of a temporary file.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path

PROVENANCE_KEY = b"radrank"


_UMASK_LOCK = threading.Lock()


def file_mode() -> int:
    """The mode open() gives a new file here: 0o666 less the process umask."""
    with _UMASK_LOCK:  # reading the umask means setting it; no other thread may see the 0
        mask = os.umask(0o022)
        os.umask(mask)
    return 0o666 & ~mask


def make_ordinary(fd_or_path) -> None:
    """Give a mkstemp file (always 0600) the mode an ordinary new file would have."""
    if isinstance(fd_or_path, int):
        os.fchmod(fd_or_path, file_mode())
    else:
        os.chmod(fd_or_path, file_mode())


@contextmanager
def atomic_path(path):
    """Yield a temporary path beside ``path``; rename it onto ``path`` on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # A job killed mid-write (SIGKILL skips every cleanup) leaves its temporary
    # file behind; the rerun of that job removes it. Only one job writes a path.
    for stale in path.parent.glob(f".{path.name}.*.part"):
        stale.unlink(missing_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        make_ordinary(fd)
    finally:
        os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_parquet(df, path, provenance: dict | None = None) -> None:
    """Write ``df`` (without its index) with ``provenance`` stored as JSON metadata."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df, preserve_index=False)
    meta = dict(table.schema.metadata or {})
    # pandas' own metadata records the library version; drop it so outputs do not
    # change when only the pandas version does (provenance records versions).
    meta.pop(b"pandas", None)
    if provenance is not None:
        meta[PROVENANCE_KEY] = json.dumps(provenance, sort_keys=True, default=str).encode()
    table = table.replace_schema_metadata(meta)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")


def read_parquet(path, columns=None):
    """Return the table in ``path`` (only ``columns``, when given) as a DataFrame."""
    import pandas as pd

    return pd.read_parquet(path, columns=list(columns) if columns is not None else None)


def read_provenance(path) -> dict:
    import pyarrow.parquet as pq

    meta = pq.read_schema(path).metadata or {}
    raw = meta.get(PROVENANCE_KEY)
    return json.loads(raw) if raw else {}


def write_csv(df, path, **kwargs) -> None:
    kwargs.setdefault("index", False)
    with atomic_path(path) as tmp:
        df.to_csv(tmp, **kwargs)


def write_text(text: str, path) -> None:
    with atomic_path(path) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")

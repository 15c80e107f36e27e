"""Table I/O between stages: parquet with provenance in its metadata, CSV for people.

Every write goes to a temporary file in the target folder and is renamed into
place only when complete, so an interrupted job never leaves a file that looks
finished. The file gets the mode any other tool would give it (0666 less the
umask), not the 0600 of a temporary file.

CSV files are opened in spreadsheets, and their texts (display names, institutions,
case ids, drop details) come from the people being ranked. :func:`write_csv` writes
every text cell that a spreadsheet would take for a formula — one starting with
``=``, ``+``, ``-``, ``@``, a tab or a carriage return (OWASP's CSV injection list)
— with a leading apostrophe, so it shows as text and never runs (``=HYPERLINK(…)``
→ ``'=HYPERLINK(…)``). Numbers stay numbers: numeric columns are written as they
are, and a text cell that is a plain decimal number (``-0.5``, ``+3``, ``-1e-3``) is
not touched. A carriage return inside a text is written as a newline, so that the cell is
quoted and no reader starts a new row inside it. :func:`read_csv` reads such a file back
without the apostrophes (a text that itself began with ``'`` and a formula character loses
that apostrophe).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import threading
from contextlib import contextmanager
from functools import lru_cache
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


_POOL_CHOSEN = False


def use_job_memory_pool() -> str | None:
    """Make jemalloc pyarrow's default allocator in this process, unless ARROW_DEFAULT_MEMORY_POOL says
    otherwise; returns the backend now in use (None: pyarrow not installed).

    pyarrow's default, mimalloc, commits its arenas eagerly and asks for transparent huge pages; where the kernel
    grants those on request (``transparent_hugepage`` = madvise, as on Debian and Ubuntu) each first touch of a
    2 MiB page is cleared, and may wait for compaction, in the kernel. A job that decodes a score-cache pack
    (a million digests) then spends 0.4–2 s of system time, varying run to run, where jemalloc spends 0.3
    (benchmarks/arrow_pool.py). The numbers do not depend on the allocator. Once per process; jobs that share one
    call it concurrently, which is harmless (the choice is a pointer swap, made the same way each time).
    """
    global _POOL_CHOSEN
    try:
        import pyarrow as pa
    except ImportError:
        return None
    if not _POOL_CHOSEN:
        _POOL_CHOSEN = True
        if not os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
            try:
                pa.set_memory_pool(pa.jemalloc_memory_pool())
            except NotImplementedError:  # a pyarrow built without jemalloc (Windows): its default stays
                pass
    return pa.default_memory_pool().backend_name


# The per-sample score files' codec. A new submission's statistics jobs and report pages read every model's score
# files again (1,200 files of 10,000 rows at 100 models): LZ4 reads them in 0.63x zstd's CPU, for files 1.2-1.3x
# the size (benchmarks/score_files.py: 0.37 against 0.58 ms, 250 against 203 kB a file).
SCORE_COMPRESSION = "lz4"


def write_parquet(df, path, provenance: dict | None = None, *, compression: str = "zstd") -> None:
    """Write ``df`` (without its index) with ``provenance`` stored as JSON metadata; ``compression``: the parquet
    codec (zstd: the smallest files; :data:`SCORE_COMPRESSION` for the per-sample score files)."""
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
        pq.write_table(table, tmp, compression=compression)


def read_table(path, columns=None, *, use_pandas_metadata: bool = False, shared: "SharedColumn | None" = None):
    """The pyarrow Table in ``path`` (only ``columns``, when given), its metadata kept. The file's bytes are read
    in one call and parsed from memory on this thread: for the small files a job reads one per model (score
    files, pairs files) that is 0.66 ms a 10,000-row score file against 0.8–1.1 through a file object, which pyarrow
    reads footer and column chunks from in many small calls. ``shared``: a column the job reads in file after file
    (:class:`SharedColumn`), decoded once per distinct encoding."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    with open(path, "rb") as f:
        data = f.read()
    with pq.ParquetFile(pa.BufferReader(data)) as parsed:
        table = shared.read(parsed, data, columns, use_pandas_metadata) if shared is not None else None
        if table is not None:
            return table
        return parsed.read(columns=list(columns) if columns is not None else None, use_threads=False,
                           use_pandas_metadata=use_pandas_metadata)


class SharedColumn:
    """One column that many files a job reads hold the same (every model's score files: the group's case ids, in
    the case set's order), decoded once: a file's column is taken from an earlier file's decoded values when the
    bytes it is stored as — its column chunk, every page — are the same bytes, compressed with the same codec, of
    the same type and number of values; else it is decoded and kept. Same bytes decode to the same values, so a
    table read so equals one read whole (tests/test_io.py). Decoding 10,000 case ids was nine tenths of reading a
    score file: a statistics job reads 303 of them at 100 models, and the report's page as many."""

    def __init__(self, name: str = "sample_id"):
        self.name = name
        self._decoded: dict = {}
        self.decoded = self.served = 0

    def read(self, parsed, data: bytes, columns, use_pandas_metadata: bool):
        """The table (as ``parsed.read`` gives it) with this column served or decoded; None where the file is not
        one row group holding the column as a single leaf (the caller reads it whole)."""
        import hashlib

        schema = parsed.schema_arrow
        wanted = list(columns) if columns is not None else list(schema.names)
        meta = parsed.metadata
        if self.name not in wanted or meta.num_row_groups != 1 or schema.get_field_index(self.name) < 0:
            return None
        leaves = [meta.schema.column(i).path for i in range(meta.num_columns)]
        if leaves.count(self.name) != 1:
            return None
        chunk = meta.row_group(0).column(leaves.index(self.name))
        start = chunk.data_page_offset
        if chunk.has_dictionary_page and 0 < chunk.dictionary_page_offset < start:
            start = chunk.dictionary_page_offset
        end = start + chunk.total_compressed_size
        if start <= 0 or end > len(data):
            return None
        field = schema.field(self.name)
        key = (hashlib.sha256(memoryview(data)[start:end]).digest(), chunk.compression, chunk.physical_type,
               str(field.type), chunk.num_values, meta.num_rows)
        values = self._decoded.get(key)
        if values is None:
            values = self._decoded[key] = parsed.read(columns=[self.name], use_threads=False).column(0)
            self.decoded += 1
        else:
            self.served += 1
        rest = [c for c in wanted if c != self.name]
        table = parsed.read(columns=rest, use_threads=False, use_pandas_metadata=use_pandas_metadata)
        return table.add_column(wanted.index(self.name), field, values)


def read_parquet(path, columns=None):
    """Return the table in ``path`` (only ``columns``, when given) as a DataFrame: the frame pandas.read_parquet
    gives, from one file read directly (pandas goes through pyarrow's dataset discovery: twice the CPU for the
    small files a job reads one per model; tests/test_io.py compares the two)."""
    return read_table(path, columns, use_pandas_metadata=True).to_pandas()


def read_provenance(path) -> dict:
    import pyarrow.parquet as pq

    # the footer alone, as pq.read_schema reads it, at a tenth of its cost (no dataset discovery): statistics jobs
    # read it from every score file of every model
    with pq.ParquetFile(path) as f:
        return provenance_of(f.schema_arrow)


def provenance_of(schema) -> dict:
    """The provenance record :func:`write_parquet` stored in a pyarrow schema's metadata ({} when none)."""
    raw = (schema.metadata or {}).get(PROVENANCE_KEY)
    return json.loads(raw) if raw else {}


FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
TEXT_MARK = "'"
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def spreadsheet_text(value):
    """``value`` as a spreadsheet shows it as text: a string that would start a formula gets a leading
    apostrophe; a plain number, anything not a string, and any other string are returned unchanged."""
    if isinstance(value, str) and value[:1] in FORMULA_PREFIXES and not _PLAIN_NUMBER.fullmatch(value):
        return TEXT_MARK + value
    return value


def plain_text(value):
    """The inverse of :func:`spreadsheet_text`: the apostrophe it added removed."""
    if isinstance(value, str) and value[:1] == TEXT_MARK and spreadsheet_text(value[1:]) == value:
        return value[1:]
    return value


def _is_text(values) -> bool:
    import pandas as pd

    dtype = values.dtype
    return dtype == object or isinstance(dtype, (pd.StringDtype, pd.CategoricalDtype))


def _cell(value):
    # A carriage return that is not part of CRLF is not quoted by the csv module (only the line terminator,
    # "\n", is), and readers end the row there: the rest of the text would start a row of its own, its
    # first cell unchecked. Line breaks are written as "\n", which is quoted.
    if isinstance(value, str) and "\r" in value:
        value = value.replace("\r\n", "\n").replace("\r", "\n")
    return spreadsheet_text(value)


def _safe_column(column):
    """A text column's cells through :func:`_cell`, each distinct string once (a comparisons table names 101
    models in 25,000 rows); a column holding anything but strings and missing values cell by cell (``True`` and
    ``1`` are one key to a hash table)."""
    import numpy as np
    import pandas as pd

    values = column.astype(object)
    if pd.api.types.infer_dtype(values, skipna=True) != "string":
        return values.map(_cell)
    codes, distinct = pd.factorize(values)
    if len(distinct) * 2 > len(values):  # mostly distinct: one pass is cheaper
        return values.map(_cell)
    safe = np.array([_cell(v) for v in distinct] + [None], dtype=object)
    cells = safe[codes]  # -1 (missing) picks the None: put the value that was there back
    missing = codes < 0
    cells[missing] = values.to_numpy()[missing]
    return pd.Series(cells, index=values.index, name=values.name)  # the dtype map would infer


def spreadsheet_safe(df):
    """A copy of ``df`` whose text cells, column names and index are :func:`spreadsheet_text` (line breaks
    written as ``\n``); numeric columns are untouched (``df`` itself is not changed)."""
    out = df.copy()
    for i in range(out.shape[1]):
        column = out.iloc[:, i]
        if _is_text(column):
            out.isetitem(i, _safe_column(column))
    out.columns = [_cell(c) for c in out.columns]
    if _is_text(out.index):
        out.index = out.index.map(_cell)
    return out


def write_csv(df, path, **kwargs) -> None:
    """``df`` as CSV (no index unless asked), every text cell spreadsheet-safe (see the module docstring)."""
    kwargs.setdefault("index", False)
    safe = spreadsheet_safe(df)
    with atomic_path(path) as tmp:
        safe.to_csv(tmp, **kwargs)


def read_csv(path, **kwargs):
    """A CSV written by :func:`write_csv`, as a DataFrame with the apostrophes it added removed
    (``kwargs`` go to :func:`pandas.read_csv`)."""
    import pandas as pd

    df = pd.read_csv(path, **kwargs)
    for i in range(df.shape[1]):
        column = df.iloc[:, i]
        if _is_text(column):
            df.isetitem(i, column.map(plain_text))
    df.columns = [plain_text(c) for c in df.columns]
    return df


def read_text_table(path):
    """A CSV written by :func:`write_csv` whose every cell is text (a drop list), as :func:`read_csv` with
    ``dtype=str, keep_default_na=False`` reads it — the apostrophes removed, so a case id such as ``=x`` matches its
    pairs — with the csv module: a job reads one per model, and pandas' parser costs ten times more on small files."""
    import csv

    import pandas as pd

    with open(path, newline="", encoding="utf-8") as f:
        rows = [row for row in csv.reader(f) if row]  # pandas skips blank lines
    if not rows:
        raise ValueError(f"{path}: no header row")
    header = [plain_text(h) for h in rows[0]]
    body = [[plain_text(v) for v in r] for r in rows[1:]]
    for number, row in enumerate(body, start=1):
        if len(row) != len(header):
            raise ValueError(f"{path}: row {number} after the header has {len(row)} fields, the header "
                             f"{len(header)}")
    return pd.DataFrame(body, columns=header, dtype=str) if body else _empty_text_table(tuple(header)).copy(deep=False)


@lru_cache(maxsize=16)
def _empty_text_table(header: tuple):
    """The empty table of ``header``'s text columns (a leaderboard's drop files are mostly empty: a job reads one
    per model, and building the frame cost more than reading the file); handed out as shallow copies, which pandas'
    copy-on-write keeps from changing it."""
    import pandas as pd

    return pd.DataFrame({h: pd.Series([], dtype=str) for h in header})


def write_text(text: str, path) -> None:
    with atomic_path(path) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")

"""radrank.io's parquet readers against pandas' and pyarrow's own: the same frames and the same provenance."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from radrank import io


def _frames():
    n = 12
    plain = pd.DataFrame({
        "sample_id": [f"s{i}" for i in range(n)],
        "reference": [None if i % 5 == 0 else f"ref {i}" for i in range(n)],
        "score": np.where(np.arange(n) % 4 == 0, np.nan, np.linspace(0, 1, n)),
        "count": np.arange(n, dtype="int64"),
        "nullable": pd.array([None if i % 3 == 0 else i for i in range(n)], dtype="Int64"),
        "flag": np.arange(n) % 2 == 0,
        "kind": pd.Categorical(["a", "b", "c"] * (n // 3)),
        "when": pd.date_range("2026-01-01", periods=n, freq="h"),
    })
    indexed = plain.set_index("sample_id")  # an index pandas stores in the file's metadata
    ranged = plain.iloc[3:]  # a RangeIndex that does not start at 0
    return {"plain": plain, "indexed": indexed, "ranged": ranged}


@pytest.mark.parametrize("name", sorted(_frames()))
@pytest.mark.parametrize("columns", [None, ["score", "reference"], ["count"]])
def test_read_parquet_is_pandas_read_parquet(tmp_path, name, columns):
    frame = _frames()[name]
    path = tmp_path / f"{name}.parquet"
    frame.to_parquet(path)
    pd.testing.assert_frame_equal(io.read_parquet(path, columns), pd.read_parquet(path, columns=columns),
                                  check_exact=True)


def test_files_radrank_writes_read_back_as_pandas_reads_them_with_their_provenance(tmp_path):
    frame = _frames()["plain"]
    path = tmp_path / "pairs.parquet"
    record = {"stage": "pairs", "models": ["m1"], "n": 12}
    io.write_parquet(frame, path, record)
    pd.testing.assert_frame_equal(io.read_parquet(path), pd.read_parquet(path), check_exact=True)
    assert io.read_provenance(path) == io.provenance_of(pq.read_schema(path)) == record
    frame.to_parquet(tmp_path / "none.parquet")
    assert io.read_provenance(tmp_path / "none.parquet") == {}


def test_a_text_table_reads_as_read_csv_reads_it(tmp_path):
    """read_text_table (drop lists, one per model) against io.read_csv with pandas' parser: the same frame, the
    apostrophes write_csv added removed (a case id "=x" or "@x" is itself again), quotes and line breaks kept."""
    frame = pd.DataFrame({"sample_id": ["=x", "@a1", "-b", "+1", "'quoted", "plain", "7"],
                          "reason": ["missing_prediction", "a, comma", 'say "no"', "two\nlines", "", "ü é", "x"],
                          "detail": ["", " padded ", "=SUM(A1)", "-", "\ttab", "\r\nlf", "null"]})
    path = tmp_path / "drops.csv"
    io.write_csv(frame, path)
    got = io.read_text_table(path)
    pd.testing.assert_frame_equal(got, io.read_csv(path, dtype=str, keep_default_na=False), check_exact=True)
    assert list(got["sample_id"]) == list(frame["sample_id"])
    header_only = tmp_path / "empty.csv"
    io.write_csv(frame.iloc[:0], header_only)
    pd.testing.assert_frame_equal(io.read_text_table(header_only), io.read_csv(header_only, dtype=str,
                                                                               keep_default_na=False),
                                  check_exact=True, check_index_type=False)
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("sample_id,reason\na,b,c\n")
    with pytest.raises(ValueError, match="row 1 after the header has 3 fields, the header 2"):
        io.read_text_table(ragged)


def test_spreadsheet_safe_maps_each_distinct_text_once_and_gives_every_cell_what_the_cell_rule_gives():
    """spreadsheet_safe's columns of repeated strings (a comparisons table's model names) go through io._cell once
    per distinct value: every cell must be what _cell makes of it, missing values (None, NaN, pd.NA) and
    non-strings (True beside 1) left as they were."""
    import numpy as np

    names = ["=model", "@m", "plain", "-1", "a\rb", "+x", "ok"]
    frame = pd.DataFrame({
        "model_a": [names[i % len(names)] for i in range(200)],
        "with_missing": [None if i % 7 == 0 else np.nan if i % 11 == 0 else names[i % 3] for i in range(200)],
        "na": pd.Series([pd.NA if i % 5 == 0 else names[i % 4] for i in range(200)], dtype=object),
        "mixed": [True if i % 2 else 1 for i in range(200)],
        "distinct": [f"=d{i}" for i in range(200)],
        "string_dtype": pd.Series([names[i % 2] for i in range(200)], dtype="string"),
        "number": np.arange(200.0),
    })
    safe = io.spreadsheet_safe(frame)
    for name in frame.columns:
        if name == "number":
            pd.testing.assert_series_equal(safe[name], frame[name])
            continue
        want = [io._cell(v) for v in frame[name].astype(object)]
        got = safe[name].tolist()
        assert len(got) == len(want)
        for g, w in zip(got, want):  # a missing value stays missing (pandas may write pd.NA as NaN)
            assert (pd.isna(g) and pd.isna(w)) if pd.isna(w) else (type(g) is type(w) and g == w), (name, g, w)
    assert safe.loc[0, "model_a"] == "'=model" and safe.loc[4, "model_a"] == "a\nb"
    assert safe["mixed"].map(type).tolist() == frame["mixed"].map(type).tolist()  # True stays True, 1 stays 1
    cell_by_cell = frame.copy()  # the CSV written is the one a map of every cell gives
    for name in frame.columns.drop("number"):
        cell_by_cell[name] = frame[name].astype(object).map(io._cell)
    assert safe.to_csv(index=False) == cell_by_cell.to_csv(index=False)


def test_a_shared_column_is_decoded_once_per_encoding_and_reads_as_the_whole_file(tmp_path):
    """io.SharedColumn: files whose sample_id column is stored as the same bytes get the values decoded from the
    first; a file whose ids differ in one case, or are stored otherwise (another codec, another type), is decoded
    itself; every table equals pyarrow's read of the file (its columns, their order, types and metadata)."""
    import pyarrow as pa

    ids = [f"case{i:05d}" for i in range(2000)]
    altered = list(ids)
    altered[1234] = "case99999"  # one id changed: a file that must not be read with the others' ids
    files = []
    for n, (sample_ids, codec, kind) in enumerate([(ids, "zstd", pa.large_string()), (ids, "zstd", pa.large_string()),
                                                   (altered, "zstd", pa.large_string()),
                                                   (ids, "snappy", pa.large_string()), (ids, "zstd", pa.string()),
                                                   (ids, "zstd", pa.large_string())]):
        table = pa.table({"score": np.arange(len(sample_ids), dtype="float64") * (n + 1),
                          "sample_id": pa.array(sample_ids, type=kind)}).replace_schema_metadata({"k": str(n)})
        path = tmp_path / f"m{n}.parquet"
        pq.write_table(table, path, compression=codec)
        files.append(path)
    shared = io.SharedColumn("sample_id")
    for columns in (None, ["sample_id", "score"], ["score", "sample_id"]):
        for path in files:
            expected = pq.read_table(path, columns=columns)
            got = io.read_table(path, columns, shared=shared)
            assert got.equals(expected, check_metadata=True) and got.schema == expected.schema, (path, columns)
    # decoded: the ids (1), the altered ids, the snappy copy, the string-typed copy — each once; the rest served
    assert shared.decoded == 4 and shared.served == 3 * len(files) - 4
    assert io.read_table(files[2], shared=shared).column("sample_id").to_pylist()[1234] == "case99999"
    # a read without the column, or with a filter-free subset lacking it, is the plain read
    assert io.read_table(files[0], ["score"], shared=shared).equals(pq.read_table(files[0], columns=["score"]))


def test_an_empty_text_table_read_twice_is_two_tables(tmp_path):
    """read_text_table hands out the empty table of a header as a shallow copy of one kept table: what a caller
    changes in its copy never reaches the next reader's."""
    path = tmp_path / "m.drops.csv"
    io.write_csv(pd.DataFrame(columns=["sample_id", "reason"]), path)
    first = io.read_text_table(path)
    first.loc[0] = ["=case1", "empty"]
    first["reason"] = first["reason"].str.upper()
    second = io.read_text_table(path)
    assert second.empty and list(second.columns) == ["sample_id", "reason"]
    pd.testing.assert_frame_equal(second, pd.read_csv(path, dtype=str, keep_default_na=False))

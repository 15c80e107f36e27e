"""radrank.ingest.casesets.is_in: the same answer as pandas' isin, for every column type the jobs read."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from radrank.ingest.casesets import is_in

IDS = ["c1", "c2", "c3", "c10", "é"]


@pytest.mark.parametrize("column_dtype", ["str", object, pd.ArrowDtype(pa.large_string()), pd.ArrowDtype(pa.string())])
@pytest.mark.parametrize("values_dtype", ["str", object, pd.ArrowDtype(pa.string())])
@pytest.mark.parametrize("values", [["c2", "é", "zz"], [], IDS])
def test_is_in_answers_as_pandas_isin(column_dtype, values_dtype, values):
    column = pd.Series(IDS, dtype=column_dtype)
    wanted = pd.Series(values, dtype=values_dtype)
    got = is_in(column, wanted)
    assert isinstance(got, np.ndarray) and got.dtype == bool
    np.testing.assert_array_equal(got, column.astype(object).isin(set(values)).to_numpy())


def test_is_in_takes_an_empty_column_of_no_type():
    # a submission whose every case was dropped: its pairs frame has columns of Arrow's null type
    empty = pd.DataFrame({"sample_id": pa.array([], type=pa.null())})["sample_id"]
    assert is_in(empty, pd.Series(IDS, dtype="str")).tolist() == []
    assert is_in(pd.Series(IDS, dtype="str"), empty).tolist() == [False] * len(IDS)


# --- references_digest: what lets the case-set job read each distinct set of references once ---------------

from radrank.ingest.casesets import references_digest  # noqa: E402


def _pairs(ids, refs, dtype="str"):
    return pd.DataFrame({"sample_id": pd.Series(ids, dtype=dtype), "reference": pd.Series(refs, dtype=dtype),
                         "hypothesis": ["h"] * len(ids)})


@pytest.mark.parametrize("dtype", ["str", object, pd.ArrowDtype(pa.large_string()), pd.ArrowDtype(pa.string())])
def test_references_digest_is_the_values_not_their_type_nor_the_hypotheses(dtype):
    base = references_digest(_pairs(["a", "b", "é"], ["x", "y z", ""]))
    frame = _pairs(["a", "b", "é"], ["x", "y z", ""], dtype)
    frame["hypothesis"] = ["other", "answers", "here"]
    assert references_digest(frame) == base
    assert references_digest(frame.iloc[1:]) == references_digest(_pairs(["b", "é"], ["y z", ""]))  # a slice


@pytest.mark.parametrize("ids, refs", [
    (["a", "b", "é"], ["x", "y z", "."]),  # one reference changed
    (["a", "b", "e"], ["x", "y z", ""]),  # one id changed
    (["b", "a", "é"], ["y z", "x", ""]),  # rows in another order
    (["a", "b"], ["x", "y z"]),  # a row fewer
    (["a", "b", "é"], ["xy", " z", ""]),  # the same bytes cut at another place
    (["a", "b", "é"], ["x", "y z", "\u200b"]),  # an invisible character
])
def test_references_digest_changes_with_any_id_or_reference(ids, refs):
    assert references_digest(_pairs(ids, refs)) != references_digest(_pairs(["a", "b", "é"], ["x", "y z", ""]))


def test_references_digest_is_none_for_a_missing_or_non_text_value():
    assert references_digest(_pairs(["a", "b"], ["x", None], object)) is None
    assert references_digest(pd.DataFrame({"sample_id": [1, 2], "reference": ["x", "y"]})) is None
    assert references_digest(_pairs([], [])) == references_digest(_pairs([], [], object))

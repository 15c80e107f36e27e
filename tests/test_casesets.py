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

"""ReXrank patient-context parser: radrank.context.parse_context."""

from __future__ import annotations

import math

import pytest

from radrank.context import CONTEXT_COLUMNS, parse_context


def assert_context(got: dict, age, sex, indication, comparison):
    assert set(got) == set(CONTEXT_COLUMNS)
    if age is None:
        assert math.isnan(got["age"])
    else:
        assert got["age"] == age
    assert (got["sex"], got["indication"], got["comparison"]) == (sex, indication, comparison)


def test_columns():
    assert CONTEXT_COLUMNS == ("age", "sex", "indication", "comparison")


def test_rexrank_example_with_nan_indication_and_none_comparison():
    # "nan" runs straight into "Comparison" with no separator, as ReXrank writes it.
    got = parse_context("Age:82.0.Gender:F.Indication:nanComparison: None.")
    assert_context(got, 82.0, "F", None, None)
    assert isinstance(got["age"], float)


def test_indication_with_periods_is_kept_whole():
    got = parse_context(
        "Age:67.0.Gender:M.Indication: Fever. Cough for 3 days. r/o PNA.Comparison: Chest radiograph from ___."
    )
    assert_context(got, 67.0, "M", "Fever. Cough for 3 days. r/o PNA", "Chest radiograph from ___")


def test_indication_running_into_comparison_without_separator():
    got = parse_context("Age:45.0.Gender:F.Indication:Shortness of breathComparison: None.")
    assert_context(got, 45.0, "F", "Shortness of breath", None)
    got = parse_context("Age:45.0.Gender:F.Indication:s/p fall x2Comparison: Prior of ___.")
    assert_context(got, 45.0, "F", "s/p fall x2", "Prior of ___")


def test_indication_with_colon_and_key_like_word_inside():
    # "Dosage:" ends in "age:" but is not the Age key; "note:" is free text
    got = parse_context("Age:50.Gender:M.Indication: Dosage: 5 mg, note: on steroids.Comparison: None.")
    assert_context(got, 50.0, "M", "Dosage: 5 mg, note: on steroids", None)


@pytest.mark.parametrize("value", [None, math.nan, float("nan"), "", "   ", "nan", "None", "null", "NaN"])
def test_missing_context(value):
    assert_context(parse_context(value), None, None, None, None)


def test_all_values_missing():
    assert_context(parse_context("Age:nan.Gender:nan.Indication:nanComparison:nan"), None, None, None, None)
    assert_context(parse_context("Age:None.Gender:None.Indication:NoneComparison: None."), None, None, None, None)


def test_keys_in_another_order():
    got = parse_context("Comparison: Radiograph of ___.Indication: Chest pain.Gender:M.Age:70")
    assert_context(got, 70.0, "M", "Chest pain", "Radiograph of ___")


def test_sex_key_and_lower_case_keys():
    assert_context(parse_context("age: 45. sex: f. indication: trauma."), 45.0, "f", "trauma", None)
    assert_context(parse_context("Sex:M.Age:30.0."), 30.0, "M", None, None)


def test_unparseable_age_is_nan_and_other_fields_are_kept():
    got = parse_context("Age:___.Gender:F.Indication: Cough.Comparison: None.")
    assert_context(got, None, "F", "Cough", None)


def test_text_without_keys_gives_nothing():
    assert_context(parse_context("The patient is coughing."), None, None, None, None)


def test_only_some_keys():
    assert_context(parse_context("Indication: Follow-up of nodule."), None, None, "Follow-up of nodule", None)

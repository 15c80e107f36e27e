"""Ingest: submissions (ReXrank JSON, gt/pred CSV, parquet pairs) → pairs and drop file.

All reports and ids here are fictional.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from radrank.errors import ConfigError, InputError
from radrank.ingest import DROPS_COLUMNS, PAIRS_COLUMNS, build_pairs, detect_format, ingest_submission

MISSING = [None, math.nan, "nan", "NaN", "None", "null", "", "   ", "\n\t"]


def records(df: pd.DataFrame) -> list[dict]:
    return df.to_dict("records")


def drops_as_tuples(drops: pd.DataFrame) -> list[tuple]:
    return [(r["sample_id"], r["reason"], r["action"]) for r in records(drops)]


# =============================================================================================
# ReXrank JSON
# =============================================================================================


def test_rexrank_findings_split(ingest_write, ingest_submission_entries):
    path = ingest_write("sub.json", ingest_submission_entries)
    pairs, drops, fmt = ingest_submission(path, "findings", empty_hypothesis="score")
    assert fmt == "rexrank_json"
    assert list(pairs.columns) == list(PAIRS_COLUMNS)
    assert list(drops.columns) == list(DROPS_COLUMNS)
    assert pairs[["sample_id", "study_id", "reference", "hypothesis"]].to_dict("records") == [
        {"sample_id": "case-a", "study_id": 0, "reference": "Findings: Lungs are clear. Heart size is normal.",
         "hypothesis": "The lungs are clear. No effusion."},
        {"sample_id": "case-b", "study_id": 1, "reference": "Findings: Small left pleural effusion.",
         "hypothesis": "Small left effusion."},
    ]
    # case-c has no findings: nothing to score against in the findings split
    assert records(drops) == [
        {"sample_id": "case-c", "study_id": 2, "reason": "empty_reference", "action": "dropped", "row": "case-c",
         "detail": "reference text is empty after section selection"},
    ]


def test_rexrank_reports_split(ingest_write, ingest_submission_entries):
    path = ingest_write("sub.json", ingest_submission_entries)
    pairs, drops, _ = ingest_submission(path, "reports", empty_hypothesis="score")
    assert pairs[["sample_id", "study_id", "reference"]].to_dict("records") == [
        # no `report`: "Findings: {f}" and "Impression: {i}" joined by one space
        {"sample_id": "case-a", "study_id": 0,
         "reference": "Findings: Lungs are clear. Heart size is normal. Impression: No acute cardiopulmonary process."},
        # `report` present: taken as written
        {"sample_id": "case-b", "study_id": 1,
         "reference": "FINDINGS: Small left pleural effusion. IMPRESSION: Left effusion, new since prior."},
        # findings missing: impression only
        {"sample_id": "case-c", "study_id": 2, "reference": "Impression: Stable cardiomegaly."},
    ]
    assert pairs["hypothesis"].tolist() == ["The lungs are clear. No effusion.", "Small left effusion.",
                                            "Cardiomegaly."]
    assert drops.empty


def test_rexrank_reports_split_findings_only(ingest_write):
    path = ingest_write("sub.json", {"x": {"model_prediction": "p", "section_findings": "Clear.",
                                           "section_impression": "None"}})
    pairs, _, _ = ingest_submission(path, "reports")
    assert pairs["reference"].tolist() == ["Findings: Clear."]


@pytest.mark.parametrize("report", MISSING)
def test_rexrank_missing_report_falls_back_to_sections(ingest_write, report):
    path = ingest_write("sub.json", {"x": {"model_prediction": "p", "section_findings": "Clear.",
                                           "section_impression": "Normal.", "report": report}})
    pairs, _, _ = ingest_submission(path, "reports")
    assert pairs["reference"].tolist() == ["Findings: Clear. Impression: Normal."]


def test_rexrank_report_is_ignored_in_findings_split(ingest_write):
    path = ingest_write("sub.json", {"x": {"model_prediction": "p", "section_findings": "Clear.",
                                           "report": "FINDINGS: Something else."}})
    pairs, _, _ = ingest_submission(path, "findings")
    assert pairs["reference"].tolist() == ["Findings: Clear."]


def test_rexrank_study_id_is_position_and_sample_id_is_key(ingest_write):
    entries = {key: {"model_prediction": f"pred {key}", "section_findings": f"finding {key}"}
               for key in ["z9", "a1", "m5", "0"]}
    entries["a1"]["section_findings"] = None  # dropped, but positions do not shift
    pairs, drops, _ = ingest_submission(ingest_write("sub.json", entries), "findings")
    assert pairs[["sample_id", "study_id"]].values.tolist() == [["z9", 0], ["m5", 2], ["0", 3]]
    assert pairs["reference"].tolist() == ["Findings: finding z9", "Findings: finding m5", "Findings: finding 0"]
    assert drops_as_tuples(drops) == [("a1", "empty_reference", "dropped")]
    assert drops["study_id"].tolist() == [1]


@pytest.mark.parametrize("value", MISSING)
def test_rexrank_missing_findings_is_empty_reference(ingest_write, value):
    path = ingest_write("sub.json", {"ok": {"model_prediction": "p", "section_findings": "Clear."},
                                     "bad": {"model_prediction": "p", "section_findings": value,
                                             "section_impression": value}})
    for split in ("findings", "reports"):
        pairs, drops, _ = ingest_submission(path, split, empty_hypothesis="score")
        assert pairs["sample_id"].tolist() == ["ok"]
        assert records(drops) == [{"sample_id": "bad", "study_id": 1, "reason": "empty_reference",
                                   "action": "dropped", "row": "bad",
                                   "detail": "reference text is empty after section selection"}]


@pytest.mark.parametrize("value", MISSING)
def test_rexrank_empty_hypothesis_scored(ingest_write, value):
    path = ingest_write("sub.json", {"ok": {"model_prediction": "Clear.", "section_findings": "Clear."},
                                     "silent": {"model_prediction": value, "section_findings": "Effusion."}})
    pairs, drops, _ = ingest_submission(path, "findings", empty_hypothesis="score")
    assert pairs[["sample_id", "reference", "hypothesis"]].values.tolist() == [
        ["ok", "Findings: Clear.", "Clear."],
        ["silent", "Findings: Effusion.", ""],
    ]
    assert records(drops) == [{"sample_id": "silent", "study_id": 1, "reason": "empty_hypothesis",
                               "action": "scored_as_empty", "row": "silent", "detail": ""}]


@pytest.mark.parametrize("value", MISSING)
def test_rexrank_empty_hypothesis_dropped(ingest_write, value):
    path = ingest_write("sub.json", {"ok": {"model_prediction": "Clear.", "section_findings": "Clear."},
                                     "silent": {"model_prediction": value, "section_findings": "Effusion."}})
    pairs, drops, _ = ingest_submission(path, "findings", empty_hypothesis="drop")
    assert pairs["sample_id"].tolist() == ["ok"]
    assert records(drops) == [{"sample_id": "silent", "study_id": 1, "reason": "empty_hypothesis",
                               "action": "dropped", "row": "silent", "detail": ""}]


def test_rexrank_empty_reference_and_empty_hypothesis_listed_once(ingest_write):
    path = ingest_write("sub.json", {"ok": {"model_prediction": "x", "section_findings": "y"},
                                     "both": {"model_prediction": None, "section_findings": None}})
    for policy in ("score", "drop"):
        pairs, drops, _ = ingest_submission(path, "findings", empty_hypothesis=policy)
        assert pairs["sample_id"].tolist() == ["ok"]
        assert drops_as_tuples(drops) == [("both", "empty_reference", "dropped")]


def test_rexrank_context_parsed_onto_pairs(ingest_write, ingest_submission_entries):
    pairs, _, _ = ingest_submission(ingest_write("sub.json", ingest_submission_entries), "reports")
    got = pairs[["sample_id", "context", "age", "sex", "indication", "comparison"]].to_dict("records")
    assert got[0] == {"sample_id": "case-a", "context": "Age:71.0.Gender:M.Indication:nanComparison: None.",
                      "age": 71.0, "sex": "M", "indication": None, "comparison": None}
    assert got[1] == {"sample_id": "case-b",
                      "context": "Age:58.0.Gender:F.Indication: Dyspnea. Evaluate for effusion."
                                 "Comparison: Radiograph of ___.",
                      "age": 58.0, "sex": "F", "indication": "Dyspnea. Evaluate for effusion",
                      "comparison": "Radiograph of ___"}
    assert got[2]["context"] is None and got[2]["sex"] is None and got[2]["indication"] is None
    assert math.isnan(got[2]["age"])
    assert pairs["age"].dtype == "float64"
    assert pairs["study_id"].dtype == "int64"


def test_rexrank_extra_fields_are_ignored(ingest_write):
    path = ingest_write("sub.json", {"x": {"model_prediction": "p", "section_findings": "f",
                                           "image_path": ["a.jpg", "b.jpg"], "key_image_path": "a.jpg",
                                           "dataset_extra": {"nested": [1, 2]}}})
    pairs, drops, _ = ingest_submission(path, "findings")
    assert pairs[["sample_id", "reference", "hypothesis"]].values.tolist() == [["x", "Findings: f", "p"]]
    assert drops.empty


def test_rexrank_utf8_bom_and_non_ascii_text(ingest_write):
    text = '{"x": {"model_prediction": "Épanchement pleural — léger", "section_findings": "Pleural effusion ≥ 1 cm"}}'
    path = ingest_write("sub.json", b"\xef\xbb\xbf" + text.encode("utf-8"))
    pairs, _, _ = ingest_submission(path, "findings")
    assert pairs["hypothesis"].tolist() == ["Épanchement pleural — léger"]
    assert pairs["reference"].tolist() == ["Findings: Pleural effusion ≥ 1 cm"]


def test_detect_format(ingest_write, tmp_path):
    assert detect_format(ingest_write("a.json", {"x": {"model_prediction": "p"}})) == "rexrank_json"
    assert detect_format(ingest_write("a.txt", '\n  {"x": {}}')) == "rexrank_json"  # judged by content
    assert detect_format(ingest_write("a.csv", "study_id,report\n1,x\n")) == "csv"
    assert detect_format(ingest_write("a.tsv", "study_id\treport\n1\tx\n")) == "csv"
    pd.DataFrame({"sample_id": ["a"], "reference": ["r"], "hypothesis": ["h"]}).to_parquet(tmp_path / "p.bin")
    assert detect_format(tmp_path / "p.bin") == "parquet"  # magic bytes, whatever the suffix


# =============================================================================================
# CSV gt/pred pairs
# =============================================================================================

GT_CSV = (
    "study_id,case_id,report\n"
    '10,c10,"FINDINGS: Lungs clear. IMPRESSION: Normal chest."\n'
    '11,c11,"FINAL REPORT\nINDICATION: Cough.\nFINDINGS: Small effusion.\nIMPRESSION: Effusion."\n'
    '12,c12,"IMPRESSION: Stable cardiomegaly."\n'
    '13,c13,"FINDINGS: Clear. IMPRESSION: Normal."\n'
)
PRED_CSV = (
    "study_id,case_id,report\n"
    "11,c11,Left effusion.\n"
    '10,c10,"Lungs are clear, heart normal."\n'
    "13,c13,\n"
    "99,c99,An orphan prediction.\n"
)


def test_csv_pair_joined_on_study_id_with_drops(ingest_write):
    gt = ingest_write("gt.csv", GT_CSV)
    pred = ingest_write("pred.csv", PRED_CSV)
    pairs, drops, fmt = ingest_submission(pred, "findings", reference_path=gt, ref_section="findings",
                                          empty_hypothesis="drop")
    assert fmt == "csv"
    assert pairs[["sample_id", "study_id", "reference", "hypothesis"]].values.tolist() == [
        ["c10", 0, "Lungs clear.", "Lungs are clear, heart normal."],
        ["c11", 1, "Small effusion.", "Left effusion."],
    ]
    assert pairs["context"].tolist() == [None, None]
    assert records(drops) == [
        {"sample_id": "c99", "study_id": -1, "reason": "missing_reference", "action": "dropped", "row": "5",
         "detail": "study_id 99 is in the predictions only"},
        {"sample_id": "c12", "study_id": 2, "reason": "missing_prediction", "action": "dropped", "row": "7",
         "detail": "study_id 12 is in the ground truth only"},
        {"sample_id": "c13", "study_id": 3, "reason": "empty_hypothesis", "action": "dropped", "row": "8",
         "detail": ""},
    ]


def test_csv_pair_score_policy_keeps_missing_predictions(ingest_write):
    gt = ingest_write("gt.csv", GT_CSV)
    pred = ingest_write("pred.csv", PRED_CSV)
    pairs, drops, _ = ingest_submission(pred, "reports", reference_path=gt, ref_section="impression",
                                        empty_hypothesis="score")
    assert pairs[["sample_id", "study_id", "reference", "hypothesis"]].values.tolist() == [
        ["c10", 0, "Normal chest.", "Lungs are clear, heart normal."],
        ["c11", 1, "Effusion.", "Left effusion."],
        ["c12", 2, "Stable cardiomegaly.", ""],
        ["c13", 3, "Normal.", ""],
    ]
    assert drops_as_tuples(drops) == [
        ("c99", "missing_reference", "dropped"),
        ("c12", "missing_prediction", "scored_as_empty"),
        ("c13", "empty_hypothesis", "scored_as_empty"),
    ]


@pytest.mark.parametrize("policy", ["score", "drop"])
def test_csv_pair_no_id_is_silently_lost(ingest_write, policy):
    gt = ingest_write("gt.csv", GT_CSV)
    pred = ingest_write("pred.csv", PRED_CSV)
    pairs, drops, _ = ingest_submission(pred, "reports", reference_path=gt, empty_hypothesis=policy)
    seen = set(pairs["sample_id"]) | set(drops["sample_id"])
    assert seen == {"c10", "c11", "c12", "c13", "c99"}


def test_csv_default_ref_section_is_full(ingest_write):
    gt = ingest_write("gt.csv", GT_CSV)
    pred = ingest_write("pred.csv", PRED_CSV)
    pairs, _, _ = ingest_submission(pred, "reports", reference_path=gt)
    assert pairs["reference"].tolist()[:2] == [
        "FINDINGS: Lungs clear. IMPRESSION: Normal chest.",
        "FINAL REPORT INDICATION: Cough. FINDINGS: Small effusion. IMPRESSION: Effusion.",
    ]


def test_csv_without_case_id_uses_study_id(ingest_write):
    gt = ingest_write("gt.csv", "study_id,report\n 7 ,Lungs clear.\n8,Effusion.\n")
    pred = ingest_write("pred.csv", "report,study_id\nNormal.,7\nNo change.,9\n")
    pairs, drops, _ = ingest_submission(pred, "reports", reference_path=gt, empty_hypothesis="drop")
    assert pairs[["sample_id", "reference", "hypothesis"]].values.tolist() == [["7", "Lungs clear.", "Normal."]]
    assert drops_as_tuples(drops) == [("9", "missing_reference", "dropped"), ("8", "missing_prediction", "dropped")]


def test_csv_missing_prediction_with_empty_reference_is_dropped(ingest_write):
    gt = ingest_write("gt.csv", "study_id,report\n1,Clear.\n2,\n")
    pred = ingest_write("pred.csv", "study_id,report\n1,Clear.\n")
    pairs, drops, _ = ingest_submission(pred, "reports", reference_path=gt, empty_hypothesis="score")
    assert pairs["sample_id"].tolist() == ["1"]
    assert drops_as_tuples(drops) == [("2", "missing_prediction", "dropped")]


def test_tsv_with_commas_in_reports(ingest_write):
    report = "Lungs clear, no effusion, no pneumothorax, heart normal, mediastinum normal, bones intact."
    gt = ingest_write("gt.tsv", f"study_id\treport\n1\t{report}\n2\tCardiomegaly, stable.\n")
    pred = ingest_write("pred.tsv", "study_id\treport\n1\tNormal, clear.\n2\tLarge heart, stable.\n")
    pairs, drops, fmt = ingest_submission(pred, "reports", reference_path=gt)
    assert fmt == "csv"
    assert pairs[["reference", "hypothesis"]].values.tolist() == [[report, "Normal, clear."],
                                                                 ["Cardiomegaly, stable.", "Large heart, stable."]]
    assert drops.empty


def test_csv_row_in_drops_is_file_line_of_record_start(ingest_write):
    # the quoted field of study 1 spans three lines; study 2 starts on line 5, after a blank line 6
    gt = ingest_write("gt.csv", 'study_id,report\n1,"FINDINGS: a.\nmore.\nIMPRESSION: b."\n2,\n\n3,Clear.\n')
    pred = ingest_write("pred.csv", "study_id,report\n1,x\n3,y\n")
    _, drops, _ = ingest_submission(pred, "reports", reference_path=gt, empty_hypothesis="score")
    assert records(drops) == [{"sample_id": "2", "study_id": 1, "reason": "missing_prediction", "action": "dropped",
                               "row": "5", "detail": "study_id 2 is in the ground truth only"}]


# =============================================================================================
# parquet pairs
# =============================================================================================


def test_parquet_pairs(tmp_path):
    path = tmp_path / "pairs.parquet"
    pd.DataFrame({
        "sample_id": ["s1", "s2", "s3"],
        "reference": ["FINDINGS: Clear. IMPRESSION: Normal.", "IMPRESSION: Effusion.", None],
        "hypothesis": ["Normal.", None, "x"],
        "context": ["Age:60.0.Gender:M.Indication: Cough.Comparison: None.", None, None],
    }).to_parquet(path)
    pairs, drops, fmt = ingest_submission(path, "reports", ref_section="impression", empty_hypothesis="score")
    assert fmt == "parquet"
    assert records(pairs)[0] == {"sample_id": "s1", "study_id": 0, "reference": "Normal.", "hypothesis": "Normal.",
                                 "context": "Age:60.0.Gender:M.Indication: Cough.Comparison: None.", "age": 60.0,
                                 "sex": "M", "indication": "Cough", "comparison": None}
    second = records(pairs)[1]
    assert (second["sample_id"], second["reference"], second["hypothesis"], second["context"], second["sex"]) == (
        "s2", "Effusion.", "", None, None)
    assert drops_as_tuples(drops) == [("s2", "empty_hypothesis", "scored_as_empty"),
                                      ("s3", "empty_reference", "dropped")]
    assert drops["row"].tolist() == ["1", "2"]


def test_parquet_without_ref_section_takes_reference_as_written(tmp_path):
    path = tmp_path / "pairs.parquet"
    pd.DataFrame({"sample_id": [1, 2], "reference": ["FINDINGS: a.  IMPRESSION: b.", "c"],
                  "hypothesis": ["h1", "h2"]}).to_parquet(path)
    pairs, _, _ = ingest_submission(path, "reports")
    assert pairs[["sample_id", "reference"]].values.tolist() == [["1", "FINDINGS: a.  IMPRESSION: b."], ["2", "c"]]


def test_parquet_explicit_context_columns_win_over_context_string(tmp_path):
    path = tmp_path / "pairs.parquet"
    pd.DataFrame({
        "sample_id": ["s1", "s2"], "reference": ["r1", "r2"], "hypothesis": ["h1", "h2"],
        "context": ["Age:60.0.Gender:M.Indication: Cough.Comparison: None.",
                    "Age:61.0.Gender:F.Indication: Fever.Comparison: None."],
        "age": [75.0, math.nan], "sex": ["F", None], "indication": [None, "Trauma"],
    }).to_parquet(path)
    pairs, _, _ = ingest_submission(path, "reports")
    got = pairs[["age", "sex", "indication", "comparison"]].to_dict("records")
    assert got == [{"age": 75.0, "sex": "F", "indication": "Cough", "comparison": None},
                   {"age": 61.0, "sex": "F", "indication": "Trauma", "comparison": None}]


# =============================================================================================
# build_pairs policies and size limits
# =============================================================================================


def test_build_pairs_rejects_unknown_policy():
    with pytest.raises(ConfigError, match="empty_hypothesis must be one of"):
        build_pairs([], empty_hypothesis="ignore")


def test_build_pairs_empty_input_gives_typed_empty_tables():
    pairs, drops = build_pairs([])
    assert list(pairs.columns) == list(PAIRS_COLUMNS) and pairs.empty
    assert list(drops.columns) == list(DROPS_COLUMNS) and drops.empty
    assert pairs["study_id"].dtype == "int64"


def test_max_chars_truncates_and_lists(ingest_write):
    path = ingest_write("sub.json", {"short": {"model_prediction": "ok", "section_findings": "ok"},
                                     "long": {"model_prediction": "h" * 30, "section_findings": "r" * 30}})
    pairs, drops, _ = ingest_submission(path, "findings", max_chars=20)
    assert pairs["reference"].tolist() == ["Findings: ok", "Findings: " + "r" * 10]
    assert pairs["hypothesis"].tolist() == ["ok", "h" * 20]
    assert records(drops) == [
        {"sample_id": "long", "study_id": 1, "reason": "too_long", "action": "truncated", "row": "long",
         "detail": "reference had 40 characters; cut to 20"},
        {"sample_id": "long", "study_id": 1, "reason": "too_long", "action": "truncated", "row": "long",
         "detail": "hypothesis had 30 characters; cut to 20"},
    ]


def test_text_of_exactly_max_chars_is_not_truncated(ingest_write):
    path = ingest_write("sub.json", {"x": {"model_prediction": "h" * 20, "section_findings": "r" * 10}})
    pairs, drops, _ = ingest_submission(path, "findings", max_chars=20)
    assert pairs["hypothesis"].tolist() == ["h" * 20]
    assert drops.empty


def test_report_of_200000_characters(ingest_write):
    long_text = ("The lungs are clear. No pleural effusion. " * 4800)[:200_000]
    assert len(long_text) == 200_000
    path = ingest_write("sub.json", {"big": {"model_prediction": long_text, "section_findings": long_text},
                                     "small": {"model_prediction": "Clear.", "section_findings": "Clear."}})
    pairs, drops, _ = ingest_submission(path, "findings", max_chars=100_000, empty_hypothesis="score")
    assert pairs["reference"].str.len().tolist() == [100_000, 16]
    assert pairs["hypothesis"].str.len().tolist() == [100_000, 6]
    assert pairs["hypothesis"][0] == long_text[:100_000]
    assert drops_as_tuples(drops) == [("big", "too_long", "truncated")] * 2
    assert drops["detail"].tolist() == ["reference had 200010 characters; cut to 100000",
                                        "hypothesis had 200000 characters; cut to 100000"]

    pairs, drops, _ = ingest_submission(path, "findings", max_chars=None, empty_hypothesis="score")
    assert pairs["hypothesis"][0] == long_text
    assert pairs["reference"][0] == "Findings: " + long_text
    assert drops.empty  # speed at this size: benchmarks/ingest.py


def test_csv_report_of_200000_characters_through_section_parser(ingest_write):
    body = ("Findings: clear lungs. Impression: normal. " * 4700)[:200_000]
    gt = ingest_write("gt.csv", f'study_id,report\n1,"{body}"\n')
    pred = ingest_write("pred.csv", f'study_id,report\n1,"{body}"\n')
    pairs, drops, _ = ingest_submission(pred, "reports", reference_path=gt, ref_section="findings",
                                        max_chars=100_000)
    assert pairs["reference"].tolist() == ["clear lungs."]
    assert len(pairs["hypothesis"][0]) == 100_000
    assert drops_as_tuples(drops) == [("1", "too_long", "truncated")]


# =============================================================================================
# bad input: every error names the file, and the field and row where they apply
# =============================================================================================


def raises_input_error(path, *fragments, split="findings", **kwargs) -> InputError:
    with pytest.raises(InputError) as info:
        ingest_submission(path, split, **kwargs)
    message = str(info.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return info.value


def test_malformed_json_names_line_and_column(ingest_write):
    path = ingest_write("sub.json", '{\n  "a": {"model_prediction": "x",}\n}')
    err = raises_input_error(path, "is not valid JSON", "line 2 column 33")
    assert err.path == str(path)


def test_truncated_json(ingest_write):
    path = ingest_write("sub.json", '{"a": {"model_prediction": "x"')
    raises_input_error(path, "is not valid JSON", "line 1 column 31")


def test_missing_model_prediction_names_field_and_case(ingest_write):
    path = ingest_write("sub.json", {"a": {"model_prediction": "x"}, "case-77": {"section_findings": "y"}})
    err = raises_input_error(path, "row case-77", "field 'model_prediction'", "required field is missing")
    assert (err.field, err.row) == ("model_prediction", "case-77")


@pytest.mark.parametrize("entry,kind", [("just text", "str"), (["x"], "list"), (3, "int"), (None, "NoneType")])
def test_non_object_entry(ingest_write, entry, kind):
    path = ingest_write("sub.json", {"a": {"model_prediction": "x"}, "b": entry})
    err = raises_input_error(path, "row b", f"entry must be a JSON object, found {kind}")
    assert err.row == "b"


def test_duplicate_case_id(ingest_write):
    path = ingest_write("sub.json", '{"a": {"model_prediction": "x"}, "b": {"model_prediction": "y"}, '
                                    '"a": {"model_prediction": "z"}}')
    err = raises_input_error(path, "row a", "the same case id appears twice")
    assert err.row == "a"


def test_duplicate_field_inside_entry_is_not_called_a_case_id(ingest_write):
    path = ingest_write("sub.json", '{"a": {"model_prediction": "x"}, '
                                    '"b": {"model_prediction": "y", "model_prediction": "z"}}')
    err = raises_input_error(path, "row b", "field 'model_prediction'", "appears twice in one entry")
    assert "case id" not in str(err)


@pytest.mark.parametrize(
    "value,kind",
    [(["a report"], "list"), ({"text": "a report"}, "dict"), (True, "bool")],
)
@pytest.mark.parametrize("field", ["model_prediction", "section_findings", "section_impression", "report",
                                   "context"])
def test_wrong_typed_text_field(ingest_write, field, value, kind):
    entry = {"model_prediction": "x", "section_findings": "y"}
    entry[field] = value
    path = ingest_write("sub.json", {"a": {"model_prediction": "x", "section_findings": "y"}, "b": entry})
    err = raises_input_error(path, "row b", f"field '{field}'", f"must be text, found {kind}")
    assert (err.field, err.row) == (field, "b")


def test_top_level_array(ingest_write):
    path = ingest_write("sub.json", [{"model_prediction": "x"}])
    raises_input_error(path, "top level must be a JSON object keyed by case id, found list")


def test_top_level_scalar_in_json_file(ingest_write):
    path = ingest_write("sub.json", '"just a string"')
    raises_input_error(path, "top level must be a JSON object keyed by case id, found str")


def test_empty_json_object(ingest_write):
    raises_input_error(ingest_write("sub.json", "{}"), "JSON object has no entries")


@pytest.mark.parametrize("content", [b"", b"   \n\t\n"])
@pytest.mark.parametrize("name", ["sub.json", "pred.csv", "pairs.parquet"])
def test_empty_file(ingest_write, name, content):
    raises_input_error(ingest_write(name, content), "file is empty")


def test_path_that_does_not_exist(tmp_path):
    raises_input_error(tmp_path / "nowhere" / "sub.json", "file does not exist")


def test_directory_instead_of_file(tmp_path):
    raises_input_error(tmp_path, "is a directory")


def test_missing_reference_csv(ingest_write, tmp_path):
    pred = ingest_write("pred.csv", "study_id,report\n1,x\n")
    missing = tmp_path / "gt.csv"
    with pytest.raises(InputError, match="file does not exist") as info:
        ingest_submission(pred, "reports", reference_path=missing)
    assert str(missing) in str(info.value)


def test_unknown_format(ingest_write):
    raises_input_error(ingest_write("sub.dat", "hello"), "cannot tell the format")


def test_non_utf8_json_names_offset_and_line(ingest_write):
    path = ingest_write("sub.json", '{"a": {\n"model_prediction": "caf\u00e9"}}'.encode("latin-1"))
    raises_input_error(path, "is not valid UTF-8", "byte 0xe9 at offset 32", "(line 2)")


def test_non_utf8_csv_names_offset_and_line(ingest_write):
    gt = ingest_write("gt.csv", "study_id,report\n1,Clear.\n2,Clear.\n")
    pred = ingest_write("pred.csv", "study_id,report\n1,ok\n2,caf\u00e9\n".encode("cp1252"))
    raises_input_error(pred, "is not valid UTF-8", "byte 0xe9 at offset 26", "(line 3)", reference_path=gt)


def test_non_utf8_reference_csv_names_the_reference_file(ingest_write):
    gt = ingest_write("gt.csv", "study_id,report\n1,na\u00efve\n".encode("latin-1"))
    pred = ingest_write("pred.csv", "study_id,report\n1,ok\n")
    with pytest.raises(InputError, match="is not valid UTF-8") as info:
        ingest_submission(pred, "reports", reference_path=gt)
    assert info.value.path == str(gt)


def test_duplicate_study_id_in_csv_names_the_rows(ingest_write):
    gt = ingest_write("gt.csv", "study_id,report\n1,a\n2,b\n")
    pred = ingest_write("pred.csv", "study_id,report\n1,a\n2,b\n1,c\n")
    err = raises_input_error(pred, "row 4", "field 'study_id'", "duplicate id '1' (also in row 2)",
                             reference_path=gt)
    assert (err.field, err.row) == ("study_id", 4)


def test_duplicate_study_id_in_ground_truth(ingest_write):
    gt = ingest_write("gt.csv", "study_id,report\n1,a\n 1 ,b\n")
    pred = ingest_write("pred.csv", "study_id,report\n1,a\n")
    with pytest.raises(InputError, match="duplicate id '1'") as info:
        ingest_submission(pred, "reports", reference_path=gt)
    assert (info.value.path, info.value.row, info.value.field) == (str(gt), 3, "study_id")


def test_duplicate_case_id_in_csv(ingest_write):
    gt = ingest_write("gt.csv", "study_id,case_id,report\n1,k,a\n2,k,b\n")
    pred = ingest_write("pred.csv", "study_id,report\n1,a\n2,b\n")
    with pytest.raises(InputError) as info:
        ingest_submission(pred, "reports", reference_path=gt)
    assert str(info.value) == f"file {gt}, row 3, field 'case_id': duplicate id 'k' (also in row 2)"


def test_empty_study_id_in_csv(ingest_write):
    gt = ingest_write("gt.csv", "study_id,report\n1,a\n")
    pred = ingest_write("pred.csv", "study_id,report\n1,a\n ,b\n")
    raises_input_error(pred, "row 3", "field 'study_id'", "id is empty", reference_path=gt)


def test_csv_study_ids_do_not_overlap(ingest_write):
    gt = ingest_write("gt.csv", "study_id,report\n1,a\n2,b\n")
    pred = ingest_write("pred.csv", "study_id,report\n7,a\n8,b\n9,c\n")
    raises_input_error(pred, "field 'study_id'", f"no study_id in common with the ground truth {gt}",
                       "predictions: 3 ids, ground truth: 2 ids", reference_path=gt)


def test_csv_missing_column(ingest_write):
    gt = ingest_write("gt.csv", "study_id,report\n1,a\n")
    pred = ingest_write("pred.csv", "id,text\n1,a\n")
    raises_input_error(pred, "field 'study_id'", "required column is missing (columns: id, text)",
                       reference_path=gt)


def test_csv_header_only(ingest_write):
    gt = ingest_write("gt.csv", "study_id,report\n1,a\n")
    pred = ingest_write("pred.csv", "study_id,report\n")
    raises_input_error(pred, "CSV has a header but no rows", reference_path=gt)


def test_csv_row_with_too_many_fields(ingest_write):
    gt = ingest_write("gt.csv", "study_id,report\n1,a\n2,b\n")
    pred = ingest_write("pred.csv", "study_id,report\n1,a\n2,lungs clear, no effusion\n")
    raises_input_error(pred, "row 3", "row has more fields than the header", reference_path=gt)


def test_csv_submission_without_ground_truth_is_a_config_error(ingest_write):
    pred = ingest_write("pred.csv", "study_id,report\n1,a\n")
    with pytest.raises(ConfigError, match="needs a ground-truth CSV") as info:
        ingest_submission(pred, "reports")
    assert str(pred) in str(info.value)


def test_parquet_missing_required_column(tmp_path):
    path = tmp_path / "pairs.parquet"
    pd.DataFrame({"sample_id": ["a"], "reference": ["r"]}).to_parquet(path)
    err = raises_input_error(path, "field 'hypothesis'", "required column is missing (columns: sample_id, reference)")
    assert err.field == "hypothesis"


def test_parquet_wrong_typed_value(tmp_path):
    path = tmp_path / "pairs.parquet"
    pd.DataFrame({"sample_id": ["a", "b"], "reference": ["r", "r"], "hypothesis": [1.5, 2.5]}).to_parquet(path)
    err = raises_input_error(path, "row 0", "field 'hypothesis'", "must be text, found float")
    assert err.row == 0


def test_parquet_duplicate_sample_id(tmp_path):
    path = tmp_path / "pairs.parquet"
    pd.DataFrame({"sample_id": ["a", "b", "a"], "reference": ["r"] * 3, "hypothesis": ["h"] * 3}).to_parquet(path)
    raises_input_error(path, "row 2", "field 'sample_id'", "duplicate sample id 'a' (also in row 0)")


def test_parquet_empty_sample_id(tmp_path):
    path = tmp_path / "pairs.parquet"
    pd.DataFrame({"sample_id": ["a", None], "reference": ["r"] * 2, "hypothesis": ["h"] * 2}).to_parquet(path)
    raises_input_error(path, "row 1", "field 'sample_id'", "sample id is empty")


def test_parquet_without_rows(tmp_path):
    path = tmp_path / "pairs.parquet"
    pd.DataFrame({"sample_id": pd.Series([], dtype=str), "reference": pd.Series([], dtype=str),
                  "hypothesis": pd.Series([], dtype=str)}).to_parquet(path)
    raises_input_error(path, "parquet file has no rows")


def test_corrupt_parquet(ingest_write):
    raises_input_error(ingest_write("pairs.parquet", b"PAR1 this is not really parquet"), "cannot be read as parquet")


def test_unknown_split_for_rexrank(ingest_write):
    path = ingest_write("sub.json", {"a": {"model_prediction": "x"}})
    raises_input_error(path, "unknown split 'impression'", split="impression")


# =============================================================================================
# Fidelity: texts as ReXrank's json_to_csv passes them on
# =============================================================================================


def test_rexrank_findings_keep_their_whitespace(ingest_write):
    # CheXpert-Plus writes section_findings with surrounding newlines; json_to_csv keeps them, and
    # ReXrank's BLEU-2 (split on single spaces) sees "\nthe" as a token of its own.
    entries = {"a": {"model_prediction": "The lungs are clear.", "section_findings": "\nThe lungs are clear.\n",
                     "section_impression": " Normal. "},
               "b": {"model_prediction": "x", "section_findings": "  \n ", "section_impression": "\nStable.\n"}}
    path = ingest_write("sub.json", entries)
    findings, drops, _ = ingest_submission(path, "findings")
    assert findings["reference"].tolist() == ["Findings: \nThe lungs are clear.\n"]
    assert drops_as_tuples(drops) == [("b", "empty_reference", "dropped")]  # blank is still missing
    reports, _, _ = ingest_submission(path, "reports")
    assert reports["reference"].tolist() == ["Findings: \nThe lungs are clear.\n Impression:  Normal. ",
                                             "Impression: \nStable.\n"]


def test_rexrank_report_is_taken_verbatim(ingest_write):
    report = "Findings: None. Impression: 1. SINGLE VIEW OF CHEST.\n2. NO PNEUMOTHORAX. "
    path = ingest_write("sub.json", {"a": {"model_prediction": "x", "report": report}})
    pairs, _, _ = ingest_submission(path, "reports")
    assert pairs["reference"].tolist() == [report]


def test_whitespace_kept_changes_bleu2_as_in_rexrank(ingest_write):
    from radrank.metrics import bleu2

    hyp = "the lungs are clear . no effusion ."
    path = ingest_write("sub.json", {"a": {"model_prediction": hyp,
                                           "section_findings": "\nThe lungs are clear. No effusion.\n"}})
    pairs, _, _ = ingest_submission(path, "findings")
    kept = bleu2.score_texts(pairs["reference"], pairs["hypothesis"])[0]
    stripped = bleu2.score_texts(["Findings: The lungs are clear. No effusion."], [hyp])[0]
    assert kept != pytest.approx(stripped)  # "\nthe" is not "the": the score ReXrank publishes


# =============================================================================================
# Robustness: each bad input is one error naming file, field and row
# =============================================================================================


def test_deeply_nested_json_names_case_and_field(ingest_write):
    deep = "[" * 100_000 + "]" * 100_000
    path = ingest_write("sub.json", '{"a": {"model_prediction": "x"},\n "b": {"model_prediction": "y", '
                                    f'"extra": {deep}}}}}')
    err = raises_input_error(path, "row b", "field 'extra'", "JSON nests deeper than 64 levels (line 2)")
    assert (err.row, err.field) == ("b", "extra")


def test_moderately_nested_unused_field_is_ignored(ingest_write):
    path = ingest_write("sub.json", '{"a": {"model_prediction": "x", "section_findings": "y", '
                                    '"extra": ' + "[" * 200 + "]" * 200 + '}}')
    pairs, _, _ = ingest_submission(path, "findings")
    assert pairs["sample_id"].tolist() == ["a"]


@pytest.mark.parametrize("constant", ["Infinity", "-Infinity"])
@pytest.mark.parametrize("field", ["model_prediction", "section_findings", "report"])
def test_json_infinity_in_a_text_field_is_an_error(ingest_write, constant, field):
    entry = {"model_prediction": '"x"', "section_findings": '"y"', field: constant}
    body = ", ".join(f'"{k}": {v}' for k, v in entry.items())
    path = ingest_write("sub.json", '{"a": {"model_prediction": "x"}, "b": {' + body + "}}")
    err = raises_input_error(path, "row b", f"field '{field}'", f"{constant} is not text")
    assert (err.row, err.field) == ("b", field)


def test_json_nan_is_missing_as_in_rexrank_files(ingest_write):
    path = ingest_write("sub.json", '{"a": {"model_prediction": "x", "section_findings": NaN}, '
                                    '"b": {"model_prediction": NaN, "section_findings": "y"}}')
    pairs, drops, _ = ingest_submission(path, "findings", empty_hypothesis="score")
    assert pairs[["sample_id", "hypothesis"]].values.tolist() == [["b", ""]]
    assert drops_as_tuples(drops) == [("a", "empty_reference", "dropped"), ("b", "empty_hypothesis",
                                                                            "scored_as_empty")]


@pytest.mark.parametrize("value", [5, 0, 2.5, -1])
@pytest.mark.parametrize("field", ["model_prediction", "section_findings", "section_impression", "report"])
def test_numeric_text_field_is_an_error(ingest_write, field, value):
    entry = {"model_prediction": "x", "section_findings": "y", field: value}
    path = ingest_write("sub.json", {"a": {"model_prediction": "x"}, "b": entry})
    err = raises_input_error(path, "row b", f"field '{field}'", f"must be text, found a number ({value!r})")
    assert (err.row, err.field) == ("b", field)


@pytest.mark.parametrize("key", ["", "  "])
def test_empty_case_id_is_an_error(ingest_write, key):
    path = ingest_write("sub.json", {"a": {"model_prediction": "x", "section_findings": "y"},
                                     key: {"model_prediction": "x", "section_findings": "y"}})
    raises_input_error(path, f"row {key!r}", "case id (the key of entry 1, counted from 0) is empty")


def test_csv_unclosed_quote_is_an_error_not_one_long_report(ingest_write):
    gt = ingest_write("gt.csv", "study_id,report\n1,a\n2,b\n3,c\n4,d\n")
    pred = ingest_write("pred.csv", 'study_id,report\n1,ok\n2,"Findings: clear\n3,Findings: effusion\n4,ok\n')
    err = raises_input_error(pred, "row 3", "field 'report'", "quoted field opened in this record is never closed",
                             reference_path=gt)
    assert (err.row, err.field) == (3, "report")


def test_csv_quote_closed_on_a_later_line_is_an_error(ingest_write):
    gt = ingest_write("gt.csv", "study_id,report\n1,a\n2,b\n3,c\n")
    pred = ingest_write("pred.csv", 'study_id,report\n1,"ok\n2,"Findings: effusion"\n3,ok\n')
    raises_input_error(pred, "row 2", "field 'report'", "malformed quoting", reference_path=gt)


def test_csv_multiline_quoted_report_still_reads(ingest_write):
    gt = ingest_write("gt.csv", 'study_id,report\n1,"Findings: a\nsecond line, with ""quotes"""\n2,b\n')
    pred = ingest_write("pred.csv", "study_id,report\n1,x\n2,y\n")
    pairs, _, _ = ingest_submission(pred, "findings", reference_path=gt, ref_section="full")
    assert pairs["reference"].tolist() == ['Findings: a second line, with "quotes"', "b"]


@pytest.mark.parametrize("age", ["old", "82 years", True])
def test_parquet_age_that_is_not_a_number(tmp_path, age):
    path = tmp_path / "pairs.parquet"
    pd.DataFrame({"sample_id": ["a", "b"], "reference": ["r", "r"], "hypothesis": ["h", "h"],
                  "age": ["71", age] if isinstance(age, str) else [False, age]}).to_parquet(path)
    row = 1 if isinstance(age, str) else 0
    err = raises_input_error(path, f"row {row}", "field 'age'", "must be a number of years")
    assert (err.row, err.field) == (row, "age")


def test_parquet_age_as_number_or_numeric_text(tmp_path):
    path = tmp_path / "pairs.parquet"
    pd.DataFrame({"sample_id": ["a", "b", "c"], "reference": ["r"] * 3, "hypothesis": ["h"] * 3,
                  "age": ["71", None, "nan"], "sex": ["F", None, "M"]}).to_parquet(path)
    pairs, _, _ = ingest_submission(path, "findings")
    assert pairs["age"].tolist()[0] == 71.0 and pairs["age"].isna().tolist() == [False, True, True]
    assert pairs["sex"].tolist() == ["F", None, "M"]


def test_parquet_sex_that_is_not_text(tmp_path):
    path = tmp_path / "pairs.parquet"
    pd.DataFrame({"sample_id": ["a"], "reference": ["r"], "hypothesis": ["h"], "sex": [1]}).to_parquet(path)
    raises_input_error(path, "row 0", "field 'sex'", "must be text, found int")


def test_csv_quote_inside_an_unquoted_field_is_text(ingest_write):
    gt = ingest_write("gt.csv", 'study_id,report\n1,Nodule 2" in size\n2,He said "stable" here\n')
    pred = ingest_write("pred.csv", "study_id,report\n1,x\n2,y\n")
    pairs, _, _ = ingest_submission(pred, "findings", reference_path=gt, ref_section="full")
    assert pairs["reference"].tolist() == ['Nodule 2" in size', 'He said "stable" here']


# =============================================================================================
# rexrank_missing_section: literal — the pairs of ReXrank's pipeline, every missing-value form
# =============================================================================================

# Each form a missing text takes in real exports. ABSENT: the key is not written.
ABSENT = object()
LITERAL_FORMS = [ABSENT, None, "", math.nan, "None", "nan", "NaN", "NA", "null", "NULL", "N/A", "   ", "\n",
                 " nan"]


def _json_value(value) -> str:
    import json

    return "NaN" if isinstance(value, float) else json.dumps(value)


def _write_entries(path, data: dict) -> str:
    """A ReXrank JSON, NaN written as ReXrank's files write it; ABSENT values left out."""
    body = ",\n".join(
        f'"{case}": {{' + ", ".join(f'"{k}": {_json_value(v)}' for k, v in entry.items() if v is not ABSENT) + "}"
        for case, entry in data.items())
    path.write_text("{\n" + body + "\n}\n", encoding="utf-8")
    return str(path)


def _every_form(tmp_path) -> str:
    base = {"section_findings": "Lungs clear.", "section_impression": "No acute disease.",
            "model_prediction": "No effusion."}
    data = {}
    for i, form in enumerate(LITERAL_FORMS):
        data[f"findings-{i}"] = dict(base, section_findings=form)
        data[f"impression-{i}"] = dict(base, section_impression=form)
        data[f"both-{i}"] = dict(base, section_findings=form, section_impression=form)
        data[f"report-{i}"] = dict(base, report=form)
        data[f"report-none-{i}"] = dict(base, report=form, section_findings=None, section_impression=form)
        if form is not ABSENT:  # an absent model_prediction is an error (below)
            data[f"prediction-{i}"] = dict(base, model_prediction=form)
            data[f"all-{i}"] = dict(section_findings=form, section_impression=form, report=form,
                                    model_prediction=form)
    return _write_entries(tmp_path / "every_form.json", data)


def reference_pipeline(path, split: str, writer: str = "csv") -> dict:
    """ReXrank's two steps, written here independently of radrank: json_to_csv builds a ground-truth and a
    prediction CSV (the section rule with Python truthiness; study_id = position), and the scorer reads them
    back with pandas.read_csv's defaults and takes str of each cell (CXR-Report-Metric's prep_reports).
    ``writer``: "csv" (the csv module) or "pandas" (DataFrame.to_csv, as ReXrank's split_json writes).
    Returns {case id: (reference, hypothesis)}."""
    import csv
    import io
    import json

    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    gt_rows, pred_rows = [], []
    for position, (case, entry) in enumerate(data.items()):
        findings, impression = entry.get("section_findings"), entry.get("section_impression")
        if split == "findings":
            reference = f"Findings: {findings}" if findings else ""
        elif entry.get("report"):
            reference = entry["report"]
        else:
            reference = " ".join(([f"Findings: {findings}"] if findings else [])
                                 + ([f"Impression: {impression}"] if impression else []))
        gt_rows.append([position, reference])
        pred_rows.append([position, entry["model_prediction"]])

    def round_trip(rows):
        if writer == "csv":
            buffer = io.StringIO(newline="")
            out = csv.writer(buffer)
            out.writerow(["study_id", "report"])
            out.writerows(rows)
            text = buffer.getvalue()
        else:
            text = pd.DataFrame(rows, columns=["study_id", "report"]).to_csv(index=False)
        table = pd.read_csv(io.StringIO(text))
        return dict(zip(table["study_id"], (str(cell) for cell in table["report"])))

    gt, pred = round_trip(gt_rows), round_trip(pred_rows)
    return {case: (gt[position], pred[position]) for position, case in enumerate(data)}


@pytest.mark.parametrize("split", ["findings", "reports"])
def test_literal_mode_gives_the_reference_pipelines_pairs_for_every_missing_form(tmp_path, split):
    path = _every_form(tmp_path)
    expected = reference_pipeline(path, split)
    assert reference_pipeline(path, split, writer="pandas") == expected  # the CSV writer makes no difference
    pairs, drops, _ = ingest_submission(path, split, missing_section="literal")
    got = {r["sample_id"]: (r["reference"], r["hypothesis"]) for r in records(pairs)}
    assert list(got) == list(expected)  # every case kept, in the file's order
    for case in expected:
        assert got[case] == expected[case], case
    assert set(drops["action"]) == {"scored_literally"}


def test_literal_mode_pairs_for_each_form_as_docs_list_them(tmp_path):
    # The table in docs/inputs.md, case by case (findings split; prediction "No effusion." unless named).
    path = _every_form(tmp_path)
    pairs, _, _ = ingest_submission(path, "findings", missing_section="literal")
    ref = dict(zip(pairs["sample_id"], pairs["reference"]))
    hyp = dict(zip(pairs["sample_id"], pairs["hypothesis"]))
    findings = [ref[f"findings-{i}"] for i in range(len(LITERAL_FORMS))]
    assert findings == ["nan", "nan", "nan", "Findings: nan", "Findings: None", "Findings: nan", "Findings: NaN",
                        "Findings: NA", "Findings: null", "Findings: NULL", "Findings: N/A", "Findings:    ",
                        "Findings: \n", "Findings:  nan"]
    predictions = [hyp[f"prediction-{i}"] for i in range(1, len(LITERAL_FORMS))]
    assert predictions == ["nan"] * 10 + ["   ", "\n", " nan"]


def test_literal_mode_lists_every_pair_a_missing_value_shaped(tmp_path):
    from radrank.ingest import rexrank

    path = _every_form(tmp_path)
    for split in ("findings", "reports"):
        pairs, drops, _ = ingest_submission(path, split, missing_section="literal")
        as_dropped = {r["sample_id"]: r for r in rexrank.read(path, split)}  # the default mode's texts
        listed = {(r["sample_id"], r["reason"]) for r in records(drops)}
        for pair in records(pairs):
            case, usual = pair["sample_id"], as_dropped[pair["sample_id"]]
            assert ((case, "missing_section_literal") in listed) == (pair["reference"] != usual["reference"]), case
            assert ((case, "empty_hypothesis_literal") in listed) == (pair["hypothesis"] != usual["hypothesis"]), \
                case
        assert len(listed) == len(drops)  # nothing else listed, nothing twice
    _, drops, _ = ingest_submission(path, "findings", missing_section="literal")
    row = drops[(drops["sample_id"] == "findings-3") & (drops["reason"] == "missing_section_literal")].iloc[0]
    assert row["action"] == "scored_literally"
    assert row["detail"].startswith("section_findings is NaN: scored against the reference 'Findings: nan'")


def test_literal_mode_bleu2_of_a_missing_prediction_is_the_pipelines(tmp_path):
    # Reference "Findings: nan" (NaN findings) vs prediction "None": pandas reads "None" back as NaN, so the
    # pipeline scores "Findings: nan" against "nan" — one matching unigram: fast-bleu gives
    # exp(1 - 2/1) * sqrt(1/1 * 0.1/1) (brevity penalty, smoothed bigram), not 0.
    from radrank.metrics import bleu2

    path = _write_entries(tmp_path / "sub.json", {"a": {"section_findings": math.nan, "model_prediction": "None"}})
    expected = reference_pipeline(path, "findings")
    pairs, _, _ = ingest_submission(path, "findings", missing_section="literal")
    got = list(zip(pairs["reference"], pairs["hypothesis"]))
    assert got == [expected["a"]] == [("Findings: nan", "nan")]
    value = bleu2.score_texts(*zip(*got))[0]
    assert value == bleu2.score_texts(*zip(*expected.values()))[0]
    assert value == pytest.approx(math.exp(-1) * math.sqrt(0.1), abs=1e-12)
    assert round(value, 4) == 0.1163


def test_literal_mode_still_requires_model_prediction(ingest_write):
    # ReXrank's script fails on an entry without one too: there is no pair to reproduce.
    path = ingest_write("sub.json", {"a": {"section_findings": "x"}})
    raises_input_error(path, "required field is missing", "field 'model_prediction'", missing_section="literal")


def test_pandas_na_strings_are_pandas_defaults():
    # The literal mode's read-back rule against pandas itself: each string read back as NaN, nothing else.
    import csv
    import io

    from radrank.ingest.rexrank import PANDAS_NA_STRINGS

    probes = sorted(PANDAS_NA_STRINGS) + [" nan", "nan ", "NONE", "none", "Nan", "na", "   ", "\t", "-", "N.A."]
    buffer = io.StringIO(newline="")
    out = csv.writer(buffer)
    out.writerow(["study_id", "report"])
    out.writerows(enumerate(probes))
    read = pd.read_csv(io.StringIO(buffer.getvalue()))["report"]
    assert {p for p, cell in zip(probes, read) if pd.isna(cell)} == PANDAS_NA_STRINGS

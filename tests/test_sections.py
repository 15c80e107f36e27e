"""Section parser: radrank.sections.parse_section / split_sections.

Every report here is fictional and written for these tests.
"""

from __future__ import annotations


import pytest

from radrank.sections import SECTIONS, parse_section, split_sections

ONE_LINE = "Findings: lungs are clear. Impression: no acute process."

MIMIC_STYLE = """                                 FINAL REPORT
 EXAMINATION:  CHEST (PA AND LAT)

 INDICATION:  ___M with fever and productive cough, eval for infiltrate.

 COMPARISON:  Radiograph from ___.

 FINDINGS:

 Heart size is normal.  The lungs are clear without focal
 consolidation.
 No pleural effusion or pneumothorax.

 IMPRESSION:

 No acute cardiopulmonary process.
"""

MIMIC_VIEW_HEADER = """                                 FINAL REPORT
 HISTORY:  Chest pain, rule out pneumonia.

 PA AND LATERAL VIEWS OF THE CHEST:  Mild cardiomegaly.  Lungs are clear.

 CONCLUSION:  Mild cardiomegaly without acute process.
"""


def sections_of(text: str) -> dict:
    return {s: parse_section(text, s) for s in SECTIONS}


# -- the five sections ------------------------------------------------------------------------


def test_one_line_report_is_split_at_inline_header():
    assert sections_of(ONE_LINE) == {
        "findings": "lungs are clear.",
        "impression": "no acute process.",
        "both": "lungs are clear. no acute process.",
        "full": ONE_LINE,
        "indication": "",
    }


def test_one_line_report_with_indication_and_comparison():
    text = ("Indication: Cough for two weeks. Comparison: None. Findings: Heart normal; lungs clear. "
            "Impression: Normal chest.")
    assert sections_of(text) == {
        "findings": "Heart normal; lungs clear.",
        "impression": "Normal chest.",
        "both": "Heart normal; lungs clear. Normal chest.",
        "full": text,
        "indication": "Cough for two weeks.",
    }


@pytest.mark.parametrize(
    "text",
    [
        "Findings: clear.Impression: normal.",  # no space after the period
        "Findings: clear.;Impression: normal.",
        "Findings:clear.\tImpression:normal.",
        "FINDINGS: clear. IMPRESSION: normal.",
        "FINDINGS : clear. IMPRESSION : normal.",  # blank before the colon
    ],
)
def test_inline_header_after_punctuation_or_whitespace(text):
    assert parse_section(text, "impression") == "normal."
    assert parse_section(text, "findings").startswith("clear.")


def test_mimic_style_report_with_final_report_preamble():
    assert sections_of(MIMIC_STYLE) == {
        "findings": "Heart size is normal. The lungs are clear without focal consolidation. "
                    "No pleural effusion or pneumothorax.",
        "impression": "No acute cardiopulmonary process.",
        "both": "Heart size is normal. The lungs are clear without focal consolidation. "
                "No pleural effusion or pneumothorax. No acute cardiopulmonary process.",
        "full": "FINAL REPORT EXAMINATION: CHEST (PA AND LAT) INDICATION: ___M with fever and productive cough, "
                "eval for infiltrate. COMPARISON: Radiograph from ___. FINDINGS: Heart size is normal. The lungs "
                "are clear without focal consolidation. No pleural effusion or pneumothorax. IMPRESSION: No "
                "acute cardiopulmonary process.",
        "indication": "___M with fever and productive cough, eval for infiltrate.",
    }


def test_split_sections_keeps_preamble_and_other_sections():
    parts, has_headers = split_sections(MIMIC_STYLE)
    assert has_headers is True
    assert parts["preamble"] == "FINAL REPORT"
    assert parts["technique"] == "CHEST (PA AND LAT)"
    assert parts["comparison"] == "Radiograph from ___."
    assert split_sections("No headers at all.") == ({}, False)


def test_crlf_line_endings():
    text = "FINDINGS:\r\n  Lungs clear.\r\n\r\nIMPRESSION:\r\n  Normal.\r\n"
    assert parse_section(text, "findings") == "Lungs clear."
    assert parse_section(text, "impression") == "Normal."


def test_full_is_whitespace_normalised():
    assert parse_section("  Lungs\n\n clear.\t No   effusion.  ", "full") == "Lungs clear. No effusion."


def test_both_with_one_section_present_is_that_section():
    assert parse_section("IMPRESSION:  No change.", "both") == "No change."
    assert parse_section("FINDINGS:  Lungs clear.", "both") == "Lungs clear."


def test_unknown_section_is_rejected():
    with pytest.raises(ValueError, match="unknown section 'conclusion'"):
        parse_section(ONE_LINE, "conclusion")


# -- header variants (MIMIC-CXR conventions) -----------------------------------------------


@pytest.mark.parametrize(
    "header",
    ["IMPRESSION", "Impression", "IMPRESSIONS", "CONCLUSION", "CONCLUSIONS", "Conclusion",
     "FINDINGS AND IMPRESSION", "Findings and impression", "FINDINGS/IMPRESSION", "SUMMARY"],
)
def test_impression_variants(header):
    text = f"INDICATION: Fall.\n{header}: Rib fracture on the right."
    assert parse_section(text, "impression") == "Rib fracture on the right."
    # no findings section: findings falls back to the impression
    assert parse_section(text, "findings") == "Rib fracture on the right."
    assert parse_section(text, "indication") == "Fall."


def test_findings_and_impression_is_not_read_as_findings():
    text = "FINDINGS: Heart normal.\nFINDINGS AND IMPRESSION: No interval change."
    assert parse_section(text, "findings") == "Heart normal."
    assert parse_section(text, "impression") == "No interval change."


@pytest.mark.parametrize(
    "header",
    ["INDICATION", "Indication", "INDICATIONS", "CLINICAL INDICATION", "CLINICAL HISTORY", "HISTORY",
     "History", "REASON FOR EXAM", "REASON FOR EXAMINATION", "Reason for examination", "CLINICAL INFORMATION"],
)
def test_indication_variants(header):
    text = f"{header}: Shortness of breath. Evaluate.\nFINDINGS: Lungs clear.\nIMPRESSION: Normal."
    assert parse_section(text, "indication") == "Shortness of breath. Evaluate."
    assert parse_section(text, "findings") == "Lungs clear."
    assert parse_section(text, "impression") == "Normal."


@pytest.mark.parametrize(
    "view",
    ["PA AND LATERAL VIEWS OF THE CHEST", "PA AND LATERAL", "FRONTAL AND LATERAL VIEWS OF THE CHEST",
     "AP PORTABLE", "PORTABLE AP CHEST", "SINGLE FRONTAL VIEW OF THE CHEST", "PA AND  LATERAL  VIEWS OF THE CHEST"],
)
def test_upper_case_view_header_opens_findings(view):
    text = f"REASON FOR EXAMINATION: Trauma.\n{view}:  No fracture.  Lungs clear.\nIMPRESSION:  Negative."
    assert parse_section(text, "findings") == "No fracture. Lungs clear."
    assert parse_section(text, "impression") == "Negative."
    assert parse_section(text, "indication") == "Trauma."


def test_mimic_view_header_history_and_conclusion():
    assert sections_of(MIMIC_VIEW_HEADER) == {
        "findings": "Mild cardiomegaly. Lungs are clear.",
        "impression": "Mild cardiomegaly without acute process.",
        "both": "Mild cardiomegaly. Lungs are clear. Mild cardiomegaly without acute process.",
        "full": "FINAL REPORT HISTORY: Chest pain, rule out pneumonia. PA AND LATERAL VIEWS OF THE CHEST: "
                "Mild cardiomegaly. Lungs are clear. CONCLUSION: Mild cardiomegaly without acute process.",
        "indication": "Chest pain, rule out pneumonia.",
    }


def test_lower_case_view_description_is_not_a_header():
    text = "pa and lateral views of the chest: lungs clear."
    assert split_sections(text) == ({}, False)
    assert parse_section(text, "findings") == text


# -- repeated sections -----------------------------------------------------------------------


def test_repeated_section_last_occurrence_wins():
    text = "Findings: first look. Impression: early read. Findings: final look. Impression: final read."
    assert parse_section(text, "findings") == "final look."
    assert parse_section(text, "impression") == "final read."
    assert parse_section(text, "both") == "final look. final read."


def test_repeated_section_via_alias_last_wins():
    text = "IMPRESSION: Preliminary.\nADDENDUM: Reviewed.\nCONCLUSION: Final conclusion."
    assert parse_section(text, "impression") == "Final conclusion."


def test_repeated_indication_last_wins():
    text = "HISTORY: Old history.\nFINDINGS: Clear.\nCLINICAL HISTORY: New history."
    assert parse_section(text, "indication") == "New history."
    assert parse_section(text, "findings") == "Clear."


# -- fallbacks ---------------------------------------------------------------------------------


def test_findings_falls_back_to_impression():
    text = "INDICATION: Cough.\nIMPRESSION: No pneumonia."
    assert parse_section(text, "findings") == "No pneumonia."
    assert parse_section(text, "both") == "No pneumonia."


def test_impression_falls_back_to_findings():
    text = "INDICATION: Cough.\nFINDINGS: Lungs clear."
    assert parse_section(text, "impression") == "Lungs clear."


def test_empty_section_falls_back():
    text = "FINDINGS: Lungs clear.\nIMPRESSION:\n"
    assert parse_section(text, "impression") == "Lungs clear."
    assert parse_section(text, "both") == "Lungs clear."


def test_indication_never_falls_back():
    text = "FINDINGS: Lungs clear.\nIMPRESSION: Normal."
    assert parse_section(text, "indication") == ""
    assert parse_section("Lungs are clear. No effusion.", "indication") == ""


def test_headers_without_findings_or_impression_give_empty():
    text = "INDICATION: Cough.\nCOMPARISON: None."
    assert parse_section(text, "findings") == ""
    assert parse_section(text, "impression") == ""
    assert parse_section(text, "both") == ""
    assert parse_section(text, "indication") == "Cough."


# -- texts without headers, and colons that are not headers -----------------------------------


def test_text_without_headers_is_one_body():
    text = "The lungs are clear.\nNo pleural effusion.\n\nHeart size is normal."
    body = "The lungs are clear. No pleural effusion. Heart size is normal."
    assert sections_of(text) == {"findings": body, "impression": body, "both": body, "full": body,
                                 "indication": ""}


@pytest.mark.parametrize("section", SECTIONS)
def test_empty_text(section):
    assert parse_section("", section) == ""
    assert parse_section("  \n\t ", section) == ""


def test_lower_case_header_mid_sentence_is_not_split():
    text = "Lungs are clear in a patient with no history: of smoking. No effusion."
    assert split_sections(text) == ({}, False)
    assert parse_section(text, "findings") == text
    assert parse_section(text, "indication") == ""


def test_lower_case_header_mid_sentence_inside_a_section_stays_in_it():
    text = "FINDINGS: Lungs clear, no prior history: of effusion; impression: none seen.\nIMPRESSION: Normal."
    assert parse_section(text, "findings") == "Lungs clear, no prior history: of effusion; impression: none seen."
    assert parse_section(text, "impression") == "Normal."
    assert parse_section(text, "indication") == ""


def test_lower_case_header_at_line_start_is_a_header():
    text = "findings: lungs clear.\n  impression: normal.\nhistory: cough."
    assert parse_section(text, "findings") == "lungs clear."
    assert parse_section(text, "impression") == "normal."
    assert parse_section(text, "indication") == "cough."


def test_header_glued_to_a_word_is_not_a_header():
    text = "Comment xImpression: not a header."
    assert split_sections(text) == ({}, False)


def test_header_word_without_colon_is_not_a_header():
    text = "FINDINGS Lungs clear. IMPRESSION normal."
    assert split_sections(text) == ({}, False)
    assert parse_section(text, "impression") == text


def test_section_name_inside_section_text_without_colon_is_kept():
    text = "Impression: Findings consistent with early pneumonia."
    assert parse_section(text, "impression") == "Findings consistent with early pneumonia."
    assert parse_section(text, "findings") == "Findings consistent with early pneumonia."


# -- size --------------------------------------------------------------------------------------


def test_long_one_line_text_with_many_headers():
    text = "Findings: clear lungs. " * 9000 + "Impression: normal."  # ~207,000 characters (speed: benchmarks/ingest.py)
    assert parse_section(text, "findings") == "clear lungs."
    assert parse_section(text, "impression") == "normal."


def test_long_text_without_headers_is_returned_whole():
    text = "The lungs are clear. " * 10000
    assert parse_section(text, "findings") == text.strip()
    assert len(parse_section(text, "full")) == 209_999


def test_generic_headers_inside_a_line_do_not_split():
    text = "Findings: Lungs clear. Note: heart enlarged. Study: limited. Impression: No acute process."
    assert parse_section(text, "findings") == "Lungs clear. Note: heart enlarged. Study: limited."
    assert parse_section(text, "impression") == "No acute process."


def test_view_header_opens_findings_only_at_line_start():
    text = "FINDINGS: Lungs clear. AP: portable. IMPRESSION: Normal."
    assert parse_section(text, "findings") == "Lungs clear. AP: portable."
    assert parse_section("AP:\nPortable view, lungs clear.\nIMPRESSION: Normal.", "findings") == \
        "Portable view, lungs clear."


# -- placeholder sections (ReXrank exports write "Findings: None." for an absent section) ---------


@pytest.mark.parametrize("placeholder", ["None.", "None", "none", "N/A", "n/a.", "NA", "nan", "null", "Nil.",
                                         "Not applicable.", "-", "  None .  "])
def test_placeholder_section_is_missing_and_falls_back(placeholder):
    text = f"Findings: {placeholder} Impression: 1. Stable bilateral chest tubes. 2. No pneumothorax."
    assert parse_section(text, "findings") == "1. Stable bilateral chest tubes. 2. No pneumothorax."
    assert parse_section(text, "impression") == "1. Stable bilateral chest tubes. 2. No pneumothorax."
    assert parse_section(text, "both") == "1. Stable bilateral chest tubes. 2. No pneumothorax."
    assert "findings" not in split_sections(text)[0]
    assert parse_section(f"Findings: Lungs clear. Impression: {placeholder}", "impression") == "Lungs clear."


def test_placeholder_in_every_section_leaves_nothing():
    assert parse_section("Findings: None. Impression: N/A", "findings") == ""
    assert parse_section("Indication: None.", "indication") == ""


def test_placeholder_never_replaces_a_real_occurrence():
    assert parse_section("Impression: Small effusion. Findings: clear. Impression: None.", "impression") == \
        "Small effusion."


def test_words_that_only_start_like_a_placeholder_are_text():
    assert parse_section("Findings: None of the lines has moved. Impression: Stable.", "findings") == \
        "None of the lines has moved."
    assert parse_section("Findings: No. Impression: x", "findings") == "No."


def test_full_keeps_placeholders_as_written():
    assert parse_section("Findings: None. Impression: Stable.", "full") == "Findings: None. Impression: Stable."

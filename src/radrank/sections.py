"""Report section parser: findings, impression, both, full, indication.

Rules (documented in the README, tested in tests/test_sections.py):

* A header is a known section name followed by a colon. It may start a line or
  stand inside a line ("Findings: ... Impression: ..."), as long as it starts
  the text, follows whitespace or sentence punctuation, and is written in upper
  case or with a capital first letter. Inside a line only the main section
  names count (findings, impression, conclusion, indication, history, reason
  for exam, comparison, technique); generic ones (Note, Study, Report, view
  descriptions) and lower-case headers count only at the start of a line, so
  prose such as "no history: ..." or "Note: ..." is not split.
* Header variants follow the MIMIC-CXR conventions: CONCLUSION and FINDINGS AND
  IMPRESSION are the impression; CLINICAL HISTORY, HISTORY, REASON FOR EXAM[INATION]
  and CLINICAL INDICATION are the indication; view descriptions written in upper
  case ("PA AND LATERAL VIEWS OF THE CHEST:") open the findings.
* When a section occurs more than once, the last occurrence wins.
* A section whose whole text is a placeholder — None, N/A, NA, nan, null, nil,
  "not applicable", "not available", "-" (any case, with or without a final
  period) — is missing: "Findings: None. Impression: ..." has no findings, so
  findings falls back to the impression. ReXrank's exports write such
  placeholders for absent sections.
* findings falls back to impression; impression falls back to findings; both
  joins the two with one space; indication never falls back ("" when absent).
  A text with no header at all is one unlabelled body: findings, impression
  and both return it whole. full is the whole text, whitespace-normalised.
* Every returned section is whitespace-normalised.
"""

from __future__ import annotations

import re
from functools import lru_cache

from radrank.text import normalize_whitespace

SECTIONS = ("findings", "impression", "both", "full", "indication")

_ALIASES: dict[str, tuple[str, ...]] = {
    "findings": ("FINDINGS", "FINDING", "REPORT"),
    "impression": (
        "IMPRESSION", "IMPRESSIONS", "CONCLUSION", "CONCLUSIONS",
        "FINDINGS AND IMPRESSION", "FINDINGS/IMPRESSION", "FINDINGS AND IMPRESSIONS",
        "IMPRESSION AND RECOMMENDATION", "SUMMARY",
    ),
    "indication": (
        "INDICATION", "INDICATIONS", "CLINICAL INDICATION", "CLINICAL HISTORY", "HISTORY",
        "REASON FOR EXAM", "REASON FOR EXAMINATION", "REASON FOR STUDY", "CLINICAL INFORMATION",
    ),
    "comparison": ("COMPARISON", "COMPARISONS", "PRIOR", "PRIORS"),
    "technique": ("TECHNIQUE", "EXAMINATION", "EXAM", "PROCEDURE", "STUDY"),
    "other": ("NOTIFICATION", "RECOMMENDATION", "RECOMMENDATIONS", "ADDENDUM", "WET READ", "NOTE"),
}

# View descriptions MIMIC uses in place of FINDINGS; only recognised in upper case.
_VIEW_HEADERS = (
    "PA AND LATERAL", "PA AND LATERAL VIEWS OF THE CHEST", "PA AND LATERAL CHEST RADIOGRAPHS",
    "FRONTAL AND LATERAL VIEWS OF THE CHEST", "FRONTAL AND LATERAL CHEST RADIOGRAPHS",
    "CHEST PA AND LATERAL", "AP", "PA", "AP PORTABLE", "PORTABLE AP", "PORTABLE AP CHEST",
    "AP CHEST", "AP UPRIGHT", "SUPINE AP", "UPRIGHT AP", "PORTABLE CHEST", "SINGLE FRONTAL VIEW OF THE CHEST",
)

# A section text that only says the section is absent (compared lower-cased, whitespace
# collapsed, without final periods).
_PLACEHOLDERS = frozenset({"", "none", "n/a", "na", "nan", "null", "nil", "not applicable",
                           "not available", "-", "--"})

_CANONICAL = {alias: section for section, aliases in _ALIASES.items() for alias in aliases}
_VIEW_SET = frozenset(_VIEW_HEADERS)
# Headers recognised inside a line ("... clear. Impression: ..."). Generic words
# such as Note, Study or Report, and view descriptions, only open a section at
# the start of a line, so ordinary prose is not split.
_INLINE = frozenset({
    "FINDINGS", "FINDING", "IMPRESSION", "IMPRESSIONS", "CONCLUSION", "CONCLUSIONS", "FINDINGS AND IMPRESSION",
    "FINDINGS/IMPRESSION", "FINDINGS AND IMPRESSIONS", "IMPRESSION AND RECOMMENDATION", "INDICATION",
    "INDICATIONS", "CLINICAL INDICATION", "CLINICAL HISTORY", "HISTORY", "REASON FOR EXAM",
    "REASON FOR EXAMINATION", "COMPARISON", "COMPARISONS", "TECHNIQUE",
})


def _alternation(names) -> str:
    ordered = sorted(set(names), key=len, reverse=True)  # longest first
    return "|".join(re.escape(n).replace(r"\ ", r"\s+") for n in ordered)


_HEADER_RE = re.compile(
    r"(?P<name>" + _alternation(list(_CANONICAL) + list(_VIEW_HEADERS)) + r")[ \t]*:",
    re.IGNORECASE,
)


def _header_allowed(text: str, match: re.Match) -> bool:
    start = match.start()
    name = match.group("name")
    key = normalize_whitespace(name).upper()
    upper = name.isupper()
    if key in _VIEW_SET and not upper:
        return False
    if start == 0:
        return True
    prev = text[start - 1]
    # At the start of a line: only blanks between the previous line break and
    # the header. Walk back over the blanks only, so a long one-line text with
    # many headers stays linear.
    i = start - 1
    while i >= 0 and text[i] not in "\n\r" and text[i].isspace():
        i -= 1
    if i < 0 or text[i] in "\n\r":
        return True
    if key not in _INLINE or not (prev.isspace() or prev in ".;:"):
        return False
    # Inside a line: upper case, or a capital first letter.
    return upper or name[0].isupper()


def split_sections(text: str) -> tuple[dict[str, str], bool]:
    """Split a report into canonical sections (last occurrence wins).

    Returns ``(sections, has_headers)``; text before the first header is kept
    under ``"preamble"``.
    """
    headers = [m for m in _HEADER_RE.finditer(text) if _header_allowed(text, m)]
    if not headers:
        return {}, False
    sections: dict[str, str] = {}
    preamble = normalize_whitespace(text[: headers[0].start()])
    if preamble:
        sections["preamble"] = preamble
    for i, m in enumerate(headers):
        end = headers[i + 1].start() if i + 1 < len(headers) else len(text)
        key = normalize_whitespace(m.group("name")).upper()
        canonical = "findings" if key in _VIEW_SET else _CANONICAL[key]
        body = normalize_whitespace(text[m.end(): end])
        if not is_placeholder(body):  # a placeholder never replaces a real occurrence
            sections[canonical] = body
    return sections, True


def is_placeholder(section_text: str) -> bool:
    """True when a section's text only says it is absent ("None.", "N/A", "nan", "-", ...)."""
    return normalize_whitespace(section_text).rstrip(".").strip().lower() in _PLACEHOLDERS


@lru_cache(maxsize=65536)
def parse_section(text: str, section: str) -> str:
    """Return ``section`` of ``text`` following the rules in the module docstring."""
    if section not in SECTIONS:
        raise ValueError(f"unknown section {section!r}; choose one of {', '.join(SECTIONS)}")
    if section == "full":
        return normalize_whitespace(text)
    parts, has_headers = split_sections(text)
    if section == "indication":
        return parts.get("indication", "")
    if not has_headers:
        return normalize_whitespace(text)
    findings = parts.get("findings", "")
    impression = parts.get("impression", "")
    if section == "findings":
        return findings or impression
    if section == "impression":
        return impression or findings
    return " ".join(p for p in (findings, impression) if p)

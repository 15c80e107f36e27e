"""Small text rules shared by ingest and metrics."""

from __future__ import annotations

import math
import re

# Values that mean "no text". ReXrank's json_to_csv passes pandas NaN through
# str(), and exports of other tools write "None" or "null"; none of these is a
# report. Comparison is on the stripped, lower-cased value.
MISSING_MARKERS = frozenset({"", "nan", "none", "null"})

_WS = re.compile(r"\s+")


def is_missing(value) -> bool:
    """True for None, float NaN and strings that are blank or a missing marker."""
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, str):
        return value.strip().lower() in MISSING_MARKERS
    return False


def clean(value) -> str:
    """The text of a value, or "" when it is missing (see :func:`is_missing`)."""
    return "" if is_missing(value) else str(value)


def normalize_whitespace(text: str) -> str:
    """Collapse every run of whitespace (newlines included) to one space and strip."""
    return _WS.sub(" ", text).strip()

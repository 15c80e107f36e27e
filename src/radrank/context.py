"""Parse ReXrank's patient-context string into age, sex, indication and comparison.

ReXrank writes e.g. ``"Age:82.0.Gender:F.Indication:nanComparison: None."``:
keys run together, values may be ``nan``/``None``, and the period after a value
doubles as the separator. Values are matched between known keys, so the order of
keys does not matter and free text inside the indication is kept whole.

An age that is not a number, or not a finite one from 0 to :data:`MAX_AGE` years (``Age:-5``,
``Age:inf``, ``Age:1e9``), is missing (NaN), as an unreadable one always was: the context string is
free text, and an implausible age never becomes a stratum. (A parquet ``age`` column is a field of its
own: a value outside that range is an error there, :mod:`radrank.ingest.tables`.)
"""

from __future__ import annotations

import math
import re

from radrank.text import is_missing

_KEYS = {"age": "age", "gender": "sex", "sex": "sex", "indication": "indication", "comparison": "comparison"}
# A key is recognised in any case when it does not follow a letter, and in its
# capitalised form anywhere: ReXrank writes "Indication:{text}Comparison: ..."
# with no separator, so "nanComparison:" or "coughComparison:" holds a key.
_KEY_RE = re.compile(
    r"(?:(?<![A-Za-z])(?i:(age|gender|sex|indication|comparison))|(Age|Gender|Sex|Indication|Comparison))\s*:"
)

CONTEXT_COLUMNS = ("age", "sex", "indication", "comparison")
MAX_AGE = 150  # years; a plausible age is finite and within [0, MAX_AGE]


def plausible_age(age: float) -> bool:
    return math.isfinite(age) and 0 <= age <= MAX_AGE


def parse_context(context) -> dict:
    """Return ``{"age": float|nan, "sex": str|None, "indication": str|None, "comparison": str|None}``."""
    out = {"age": math.nan, "sex": None, "indication": None, "comparison": None}
    if is_missing(context):
        return out
    text = str(context)
    matches = list(_KEY_RE.finditer(text))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        raw = text[m.end(): end].strip()
        # The value's own trailing period is the separator before the next key.
        value = raw[:-1].strip() if raw.endswith(".") else raw
        key = _KEYS[(m.group(1) or m.group(2)).lower()]
        if is_missing(value):
            continue
        if key == "age":
            try:
                age = float(value)
            except ValueError:
                age = math.nan
            out["age"] = age if plausible_age(age) else math.nan
        else:
            out[key] = value
    return out

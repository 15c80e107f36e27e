"""One declared case set per dataset × split: every model is scored and ranked on the same cases.

Submissions are written by the people ranked, so no single submission may decide which cases count:

* **With a canonical reference file** (config ``references.files.<dataset>``) the set is that file's cases with
  a reference for the split. A submitted case outside it never reaches the pairs (an error, or with
  ``references.on_mismatch: drop`` a listed drop: :mod:`radrank.ingest.references`).
* **Without one** the set is the cases **more than half** of the group's submissions have a scorable pair for
  (:func:`quorum`). A case only its own author has (invented, or an id variant) is outside the set — listed for
  that model (status ``outside``), never a new case for everyone else; a case one submission omits stays in the
  set as long as more than half have it. With fewer than three submissions one submitter can still move the set
  (with two, the set is the cases both have), and the leaderboard says so: name a canonical file.

A case of the set that a model has no answer for — absent from its file, dropped from it (a reference mismatch
under ``on_mismatch: drop``, an empty answer under ``empty_hypothesis: drop``, an unreadable image), or a CSV
row without a prediction — counts against that model the same way on every route: it is scored as an empty
report (:func:`align`, ReXrank's practice for a missing CSV prediction), and the accounting
(:func:`account`) lists it with the reason. The leaderboard's ``missing_cases`` policy then either ranks the
model with those empty reports (``score_as_empty``, the default) or does not rank it (``not_ranked``); either
way every ranked model rests on exactly the set's cases.
"""

from __future__ import annotations

from collections import Counter

MISSING_POLICIES = ("score_as_empty", "not_ranked")
CASES_COLUMNS = ("sample_id", "reference", "n_submissions")
ACCOUNT_COLUMNS = ("model", "sample_id", "status", "reason", "detail")
MISSING, OUTSIDE = "missing", "outside"  # accounting statuses
NOT_SUBMITTED = "not_submitted"


def object_columns(table, *columns) -> list:
    """The ``columns`` of a DataFrame as arrays of Python objects, each converted at once: the per-case loops here
    iterate them (an Arrow-backed column read element by element costs ~10x the CPU)."""
    return [table[column].to_numpy(dtype=object) for column in columns]


REFERENCES_DIGEST = "references_sha256"  # in a pairs file's provenance: :func:`references_digest` of its rows


def references_digest(table) -> str | None:
    """sha256 of a pairs table's ``sample_id`` and ``reference`` columns, row for row (each value's UTF-8 bytes and
    length); None when either column holds a missing or non-text value. Ingest records it in the pairs file it
    writes, so that the case-set job reads each distinct set of references once, not once per submission: a
    leaderboard's submissions carry the dataset's references."""
    import hashlib

    import numpy as np
    import pyarrow as pa

    h = hashlib.sha256(b"radrank pairs references 1")
    for column in ("sample_id", "reference"):
        try:
            array = pa.array(table[column], type=pa.large_string())
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            return None
        if array.null_count:
            return None
        _, offsets, data = array.buffers()
        ends = np.frombuffer(offsets, dtype=np.int64)[array.offset:array.offset + len(array) + 1]
        h.update(len(array).to_bytes(8, "little"))
        h.update((ends - ends[0]).tobytes())
        h.update(b"" if data is None else memoryview(data)[ends[0]:ends[-1]])
    return h.hexdigest()


def distinct_tables(tables: dict, columns: tuple) -> dict:
    """{name: the first name, in ``tables``' order, whose ``columns`` equal its own row for row (itself if none)}:
    the submissions of a leaderboard carry the dataset's references, so most repeat one read before, and the
    per-case loops here read each distinct table once (a comparison of Arrow columns is one C loop)."""
    first: dict = {}
    for name, table in tables.items():
        first[name] = next((seen for seen in dict.fromkeys(first.values())
                            if table is tables[seen] or all(table[c].equals(tables[seen][c]) for c in columns)),
                           name)
    return first


def _counted(ids_by_table: dict, same: dict) -> Counter:
    """How many tables hold each id, from each distinct table's ids times the tables that repeat it."""
    counts: Counter = Counter()
    for name, times in Counter(same.values()).items():
        counts.update({case: n * times for case, n in Counter(ids_by_table[name]).items()})
    return counts


def is_in(column, values):
    """``column.isin(values)`` as a boolean array, computed by Arrow: pandas' isin of an Arrow-backed string column
    makes a Python object of every value (~100x the CPU at 10,000 cases)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    column, values = pa.array(column), pa.array(values)
    if pa.types.is_null(column.type):  # an empty frame's column: no type of its own
        column = column.cast(values.type)
    values = values.cast(column.type)  # string / large_string / null: the same ids
    return pc.is_in(column, value_set=values).to_numpy(zero_copy_only=False)


def quorum(n_submissions: int) -> int:
    """How many submissions must have a case for it to enter the set without a canonical file: more than half."""
    return n_submissions // 2 + 1


def describe(n_cases: int, *, canonical_path=None, n_submissions: int = 0) -> str:
    """The leaderboard's ``Case set`` sentence: how many cases, and by which rule."""
    if canonical_path is not None:
        return f"{n_cases} cases: the canonical references {canonical_path}"
    need = quorum(n_submissions)
    text = (f"{n_cases} cases: those at least {need} of the {n_submissions} submissions have (no canonical "
            "reference file)")
    if n_submissions < 3:
        text += "; with fewer than 3 submissions one submitter can change the set: name references.files"
    return text


def case_set(pairs: dict, canonical: dict | None = None):
    """The set's cases (:data:`CASES_COLUMNS`, sorted by id) from every model's pairs (``pairs``: {model: DataFrame
    with sample_id and reference}) — checked beforehand (:func:`radrank.ingest.references.check_group`) — and the
    canonical references ({sample_id: (reference, row, field)}), if named."""
    import pandas as pd

    same = distinct_tables(pairs, ("sample_id", "reference"))
    columns = {name: object_columns(pairs[name], "sample_id", "reference") for name in dict.fromkeys(same.values())}
    counts = _counted({name: ids for name, (ids, _) in columns.items()}, same)
    reference: dict = {}
    for ids, texts in columns.values():  # in the tables' order: a case's reference is the first table's
        for case, text in zip(ids, texts):
            reference.setdefault(case, text)
    if canonical is not None:
        # a blank reference is no case, unless a submission scored it (ReXrank's literal mode scores it as it is)
        ids = sorted(c for c, (text, _, _) in canonical.items() if text.strip() or c in counts)
        reference = {c: canonical[c][0] for c in ids}
    else:
        need = quorum(len(pairs))
        ids = sorted(c for c, n in counts.items() if n >= need)
    return pd.DataFrame({"sample_id": pd.Series(ids, dtype="object"),
                         "reference": pd.Series([reference[c] for c in ids], dtype="object"),
                         "n_submissions": pd.Series([counts.get(c, 0) for c in ids], dtype="int64")},
                        columns=list(CASES_COLUMNS))


def account(pairs: dict, drops: dict, cases, *, canonical: bool) -> "object":
    """Per model, every case of the set it has no answer for (status ``missing``, with the reason its drop file
    gives, else ``not_submitted``) and every case it submitted outside the set (status ``outside``): a DataFrame of
    :data:`ACCOUNT_COLUMNS`. ``pairs``: {model: DataFrame with sample_id}; ``drops``: {model: its drop file}.
    A CSV row without a prediction is in the pairs (scored as empty at ingest) and still counts as missing."""
    import pandas as pd

    (in_set,) = object_columns(cases, "sample_id")
    members = set(in_set)
    same = distinct_tables(pairs, ("sample_id",))
    ids = {name: object_columns(pairs[name], "sample_id")[0] for name in dict.fromkeys(same.values())}
    owned = {name: set(own_ids) for name, own_ids in ids.items()}
    counts = _counted(ids, same)
    need = quorum(len(pairs))
    rows = []
    for model in sorted(pairs):
        own = owned[same[model]]
        listed = drops.get(model)
        reasons: dict = {}  # case -> the first reason its drop file gives
        if listed is not None:
            for case, reason, detail in zip(listed["sample_id"], listed["reason"], listed["detail"]):
                reasons.setdefault(str(case), (reason, detail))
        unanswered = {case for case, (reason, _) in reasons.items() if reason == "missing_prediction"}
        for case in in_set if unanswered or not members <= own else ():  # a model with every case lacks none
            if case not in own or case in unanswered:
                reason, detail = reasons.get(case, (NOT_SUBMITTED, "the submission has no entry for this case"))
                rows.append((model, case, MISSING, reason, detail))
        if not canonical:
            rows += [(model, case, OUTSIDE, "outside_case_set",
                      f"{counts[case]} of the {len(pairs)} submissions have this case; the set holds the cases at "
                      f"least {need} have") for case in sorted(own - members)]
    return pd.DataFrame(rows, columns=list(ACCOUNT_COLUMNS))


def align(pairs, cases):
    """A model's pairs as they are scored: only the set's cases, and each case of the set it has no pair for added
    with an empty hypothesis (its reference from the set; no patient context: the model gave no answer). The
    model's own pairs keep their order; the added ones follow in the set's order."""
    import numpy as np
    import pandas as pd

    own = pairs[is_in(pairs["sample_id"], cases["sample_id"])]
    lacking = cases[~is_in(cases["sample_id"], own["sample_id"])]
    if lacking.empty:
        return own.reset_index(drop=True)
    added = {}
    for column in pairs.columns:
        if column in ("sample_id", "reference"):  # the set's own dtype (a model with no pair has no dtype to give)
            added[column] = lacking[column].reset_index(drop=True)
        elif column == "hypothesis":
            added[column] = pd.Series([""] * len(lacking), dtype=cases["reference"].dtype)
        else:  # context: none (age is a float column, the rest text)
            added[column] = np.full(len(lacking), np.nan if pairs[column].dtype.kind == "f" else None,
                                    dtype=pairs[column].dtype if pairs[column].dtype.kind == "f" else object)
    filled = pd.DataFrame(added, columns=list(pairs.columns))
    return pd.concat([own, filled], ignore_index=True) if len(own) else filled

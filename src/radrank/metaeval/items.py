"""What a human-judged set is once read: candidate reports to score, and the judgements about them.

Every set becomes an :class:`ItemSet`:

* ``records`` — one pair per candidate report (``sample_id`` = ``<case>:<candidate>``, the case's
  reference, the candidate as hypothesis, patient context where the set has it), turned into the
  canonical pairs table by :func:`radrank.ingest.pairs.build_pairs` and scored like any submission;
* ``items`` — one row per candidate: ``sample_id``, ``case``, ``candidate``, ``category`` (None where
  the set has no categories), one column ``<target>.<rater>`` per rater of each judgement target, and
  for ranking sets ``expected_ranking`` (the case's relations, e.g. ``"C1 > C2; C2 > C3"``);
* ``targets`` — what the raters judged (e.g. RadPref's 1–5 ``rating``, ReXVal's ``total_errors``),
  which raters, and whether higher is better;
* ``headline`` — the one measure per set the report plots; ``fitted_metrics`` — metrics whose
  parameters were fitted on this very set, so their agreement there is not held-out.

The items table is written as parquet with the rest (targets, headline, ...) in its provenance
metadata under ``"metaeval"``, so the agreement job needs nothing but that file and the scores.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

ITEM_COLUMNS = ("sample_id", "case", "candidate", "category")


@dataclass(frozen=True)
class Target:
    name: str  # e.g. "rating", "total_errors"
    label: str  # for people, e.g. "radiologists' 1-5 rating"
    raters: tuple[str, ...]
    higher_is_better: bool

    def column(self, rater: str) -> str:
        return f"{self.name}.{rater}"

    @property
    def columns(self) -> list[str]:
        return [self.column(r) for r in self.raters]


@dataclass
class ItemSet:
    name: str
    kind: str  # "ratings" (raters judged each candidate) or "ranking" (an expected order per case)
    records: list  # pair records for build_pairs
    items: "object"  # DataFrame, see the module docstring
    targets: tuple = ()  # Target, ratings sets only
    headline: str = ""
    fitted_metrics: tuple = ()
    fitted_note: str = ""
    description: str = field(default="")

    def meta(self) -> dict:
        return {"set": self.name, "kind": self.kind, "targets": [asdict(t) for t in self.targets],
                "headline": self.headline, "fitted_metrics": list(self.fitted_metrics),
                "fitted_note": self.fitted_note, "description": self.description}


def from_meta(meta: dict, items) -> ItemSet:
    """The :class:`ItemSet` (without pair records) stored with an items table."""
    targets = tuple(Target(t["name"], t["label"], tuple(t["raters"]), bool(t["higher_is_better"]))
                    for t in meta["targets"])
    return ItemSet(name=meta["set"], kind=meta["kind"], records=[], items=items, targets=targets,
                   headline=meta["headline"], fitted_metrics=tuple(meta["fitted_metrics"]),
                   fitted_note=meta["fitted_note"], description=meta.get("description", ""))


# --- RadJudge-style expected rankings ------------------------------------------------------------


def parse_relations(expected, candidates, *, path, row) -> list[tuple[str, str, str]]:
    """``[(a, op, b), ...]`` from ``"C1 > C2"``, ``"C1 = C2"`` or a list of such strings.

    ``op`` is ``">"`` (a should score better than b) or ``"="`` (a and b should score alike).
    Every candidate named must be one of ``candidates``.
    """
    from radrank.errors import InputError

    parts = [expected] if isinstance(expected, str) else expected
    if not isinstance(parts, list) or not parts:
        raise InputError(path, f"expected_ranking must be a string or a list of strings, got {expected!r}",
                         field="expected_ranking", row=row)
    relations = []
    for part in parts:
        for chunk in str(part).split(";"):
            chunk = chunk.strip()
            op = ">" if " > " in chunk else "=" if " = " in chunk else None
            sides = [s.strip() for s in chunk.split(f" {op} ")] if op else []
            if len(sides) != 2 or not all(sides):
                raise InputError(path, f"cannot read relation {chunk!r}: write 'C1 > C2' or 'C1 = C2'",
                                 field="expected_ranking", row=row)
            unknown = [s for s in sides if s not in candidates]
            if unknown:
                raise InputError(path, f"relation {chunk!r} names {unknown}, which is not among the case's "
                                 f"candidates {sorted(candidates)}", field="expected_ranking", row=row)
            relations.append((sides[0], op, sides[1]))
    return relations


def format_relations(relations) -> str:
    return "; ".join(f"{a} {op} {b}" for a, op, b in relations)

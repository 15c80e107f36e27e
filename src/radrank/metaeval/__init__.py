"""Meta-evaluation: how far each metric of the run agrees with radiologists.

A human-judged set is scored as one more dataset × split of pairs: dataset ``metaeval-<set>``,
split ``metaeval``, model ``candidates`` (one pair per candidate report), through the same
scoring rules, environments and models as the leaderboard. The agreement job then compares the
per-sample scores with the judgements (:mod:`radrank.metaeval.agreement`).

Sets (config ``metaeval``):

* ``radpref``, ``radjudge`` — bundled in ``resources/metaeval/`` (MIT, from the CRIMSON
  repository; see the README there);
* ``rexval`` — the credentialed PhysioNet files, read from the folder ``metaeval.rexval.dir``;
* user sets — ``metaeval.user``: ``{name, path, raters, higher_is_better}``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from radrank.errors import ConfigError

DATASET_PREFIX = "metaeval-"
SPLIT = "metaeval"
MODEL = "candidates"
BUNDLED = ("radpref", "radjudge")
RESOURCES = "resources/metaeval"
RADPREF_DATA = f"{RESOURCES}/radpref/preference_data.json"
RADPREF_RATERS = tuple(f"{RESOURCES}/radpref/radiologist_annotations/user_{k}.json" for k in (1, 2, 3))
RADJUDGE_DATA = f"{RESOURCES}/radjudge/ranking_cases.json"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")


@dataclass(frozen=True)
class SetSource:
    """Where a set comes from: ``files`` (role -> path or list of paths) and reader options."""

    name: str
    reader: str  # radpref | radjudge | rexval | user
    files: dict
    options: dict = field(default_factory=dict)


def dataset_name(set_name: str) -> str:
    return f"{DATASET_PREFIX}{set_name}"


def sets_from_config(config: dict) -> dict[str, SetSource]:
    """Every configured set, by name, in the order: bundled sets, rexval, user sets."""
    from radrank.metaeval.readers import REXVAL_CANDIDATES_FILE, REXVAL_RATINGS_FILE

    section = config.get("metaeval") or {}
    sources: dict[str, SetSource] = {}
    for name in section.get("sets", []):
        if name == "radpref":
            sources[name] = SetSource(name, "radpref", {"data": RADPREF_DATA, "raters": list(RADPREF_RATERS)})
        elif name == "radjudge":
            sources[name] = SetSource(name, "radjudge", {"data": RADJUDGE_DATA})
        else:
            raise ConfigError(f"config metaeval.sets names {name!r}; bundled sets are {list(BUNDLED)} "
                              "(ReXVal: metaeval.rexval; your own ratings: metaeval.user)")
    rexval = section.get("rexval")
    if rexval:
        folder = str(rexval["dir"]).rstrip("/")
        sources["rexval"] = SetSource("rexval", "rexval", {"candidates": f"{folder}/{REXVAL_CANDIDATES_FILE}",
                                                           "ratings": f"{folder}/{REXVAL_RATINGS_FILE}"},
                                      {"dir": folder})
    for i, entry in enumerate(section.get("user", [])):
        name = entry["name"]
        if not _NAME_RE.fullmatch(name):
            raise ConfigError(f"config metaeval.user[{i}]: name {name!r} must be letters, digits, _ . + - only")
        if name in sources or name in BUNDLED or name == "rexval":
            raise ConfigError(f"config metaeval.user[{i}]: set name {name!r} is already taken")
        sources[name] = SetSource(name, "user", {"data": entry["path"]},
                                  {"raters": list(entry["raters"]),
                                   "higher_is_better": bool(entry.get("higher_is_better", True))})
    return sources


def read_set(name: str, reader: str, files: dict, options: dict):
    """The :class:`~radrank.metaeval.items.ItemSet` of one set, read from its files."""
    from radrank.metaeval import readers

    if reader == "radpref":
        return readers.read_radpref(files["data"], list(files["raters"]), name=name)
    if reader == "radjudge":
        return readers.read_radjudge(files["data"], name=name)
    if reader == "rexval":
        return readers.read_rexval(options["dir"], name=name)
    if reader == "user":
        return readers.read_user(files["data"], name, options["raters"], options["higher_is_better"])
    raise ConfigError(f"unknown meta-evaluation reader {reader!r}")


def pairs_table(item_set):
    """The canonical pairs table of a set's candidates (radrank.ingest.pairs schema), nothing dropped."""
    from radrank.ingest.pairs import build_pairs

    pairs, drops = build_pairs(item_set.records, empty_hypothesis="score", max_chars=None)
    if len(pairs) != len(item_set.records):  # readers reject empty references, the only thing dropped
        raise RuntimeError(f"set {item_set.name}: {len(item_set.records) - len(pairs)} candidates were dropped: "
                           f"{drops.to_dict('records')}")
    if not pairs["sample_id"].equals(item_set.items["sample_id"]):
        raise RuntimeError(f"set {item_set.name}: pairs and items are not in the same order")
    return pairs

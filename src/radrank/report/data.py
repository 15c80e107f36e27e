"""What the report shows for one dataset × split, read from the workflow's files.

Only what is shown is read: per score file the per-sample value columns (all
rows), then for the drill-down cases only their rows of the pairs and of the
judges' explanation columns (parquet column selection and row filters), and the
provenance from each file's metadata, which the reads above return anyway.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from radrank import io, metrics

CONTEXT_COLUMNS = ("context", "age", "sex", "indication", "comparison")


@dataclass(frozen=True)
class SampleColumn:
    """A per-sample value: the column of a mean leaf, or a metric's own per-sample score (e.g. sentence
    BLEU-4 beside the corpus BLEU-4 leaf)."""

    column: str
    label: str
    higher_is_better: bool
    leaf: str | None  # the leaf whose mean it is; None for a metric's per-sample score of a corpus leaf


def sample_columns(metric_name: str) -> list[SampleColumn]:
    """The per-sample values of one metric: every mean leaf's column; for a metric with no mean
    leaf, its first declared column when no corpus leaf sums it (BLEU-4's ``bleu4_sentence``)."""
    spec = metrics.get(metric_name)
    out = [SampleColumn(leaf.column, leaf.label, leaf.higher_is_better, leaf.name)
           for leaf in spec.leaves if leaf.is_mean]
    if not out and spec.columns:
        summed = {c for leaf in spec.leaves for c in leaf.stats}
        first = spec.columns[0]
        quality = [leaf for leaf in spec.leaves if not leaf.is_count]
        if first not in summed and quality:
            out.append(SampleColumn(first, f"{quality[0].label} (per sample)", quality[0].higher_is_better, None))
    return out


@dataclass
class Group:
    """Everything the report shows for one dataset × split."""

    dataset: str
    split: str
    board: "object"  # the leaderboard CSV, best first
    summary: "object"  # statistics summary (unrounded estimates and intervals)
    comparisons: "object"  # every pair × leaf
    ranks: "object"  # rank distribution: model, metric, rank, probability
    values: "object"  # per-sample values: model, sample_id, one column per SampleColumn
    columns: list  # SampleColumn, in metric order
    leaves: list  # radrank Leaf objects computed for this group, in metric order
    metric_names: list  # the metrics scored for this group
    cases: "object"  # drill-down rows (see :func:`select_cases`)
    drops: dict  # model -> drop list DataFrame
    drop_paths: dict  # model -> path of its drop list, as the workflow wrote it
    provenance: dict = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.dataset}/{self.split}"

    @property
    def order(self) -> list:
        return list(self.board["model"])

    @property
    def names(self) -> dict:
        """Display names, control characters shown as symbols (they also label the figures); computed once per
        leaderboard frame (the sections ask for them per row)."""
        from radrank.report.page import visible

        board, names = self.__dict__.get("_names", (None, None))
        if board is not self.board:
            names = dict(zip(self.board["model"], (visible(n) for n in self.board["Model Name"].astype(str))))
            self.__dict__["_names"] = (self.board, names)
        return names

    @property
    def rank_leaf(self) -> str:
        return str(self.board["rank_metric"].iloc[0])

    @property
    def rank_pairs(self) -> dict:
        """The rank leaf's comparisons keyed both ways (:func:`radrank.stats.ranks.pair_table`), built once per
        comparisons frame and leaf (a page asked for them four times: 5,050 pairs at 100 models)."""
        from radrank.stats import ranks

        held = self.__dict__.get("_rank_pairs", (None, None, None))
        leaf = self.rank_leaf
        if held[0] is not self.comparisons or held[1] != leaf:
            held = (self.comparisons, leaf, ranks.pair_table(self.comparisons, leaf))
            self.__dict__["_rank_pairs"] = held
        return held[2]

    def leaf(self, name):
        return next(leaf for leaf in self.leaves if leaf.name == name)

    def rank_column(self) -> SampleColumn | None:
        """The per-sample value the drill-down sorts by: the rank leaf's, else its metric's per-sample score."""
        for col in self.columns:
            if col.leaf == self.rank_leaf:
                return col
        owner = next((name for name in self.metric_names
                      if any(leaf.name == self.rank_leaf for leaf in metrics.get(name).leaves)), None)
        if owner is not None:
            return next(iter(sample_columns(owner)), None)
        return None


def _read(path, columns=None, filters=None):
    table, meta = _read_arrow(path, columns, filters)
    return table.to_pandas(), meta


def _read_arrow(path, columns=None, filters=None, shared=None):
    """(pyarrow Table, provenance) of one parquet file; single-threaded (the files are small and many); ``shared``: a
    :class:`radrank.io.SharedColumn` (without ``filters``)."""
    import pyarrow.parquet as pq

    from radrank.io import PROVENANCE_KEY, read_table

    if filters is None:
        table = read_table(path, columns, shared=shared)
    else:
        table = pq.read_table(path, columns=columns, filters=filters, use_threads=False)
    raw = (table.schema.metadata or {}).get(PROVENANCE_KEY)
    return table, (json.loads(raw) if raw else {})


def _floats(column) -> np.ndarray:
    """A pyarrow column as float64, nulls as NaN."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False)


def _per_sample_values(models: dict, metric_names: list):
    """(long DataFrame model, sample_id, columns…; SampleColumns; score provenance per (model, metric)).

    Read with pyarrow column by column and assembled once (a DataFrame per file costs more than the read)."""
    import pandas as pd
    import pyarrow as pa

    from radrank.io import SharedColumn

    shared = SharedColumn("sample_id")  # every model's score files hold the case set's ids: decoded once
    cols = [c for name in metric_names for c in sample_columns(name)]
    owned = {name: [c.column for c in cols if c.column in set(metrics.get(name).columns)] for name in metric_names}
    ids, values, counts, prov = [], {c.column: [] for c in cols}, [], {}
    for model, entry in models.items():
        first = None
        for name in metric_names:
            table, meta = _read_arrow(entry["scores"][name], ["sample_id", *owned[name]], shared=shared)
            prov[model, name] = meta
            sample_ids = table.column("sample_id")
            if first is None:
                first = sample_ids
            elif not sample_ids.equals(first):
                raise ValueError(f"{entry['scores'][name]}: sample ids differ from the model's other score files")
            for c in owned[name]:
                values[c].append(_floats(table.column(c)))
        n = 0 if first is None else len(first)
        if first is not None:
            ids.append(first)
        counts.append(n)
    if not counts:
        return pd.DataFrame(columns=["model", "sample_id"]), cols, prov
    if all(pa.types.is_string(i.type) or pa.types.is_large_string(i.type) for i in ids):
        # text ids stay Arrow strings end to end: a Python object per id, converted back to Arrow, cost 5x
        sample_ids = pa.chunked_array([c for i in ids for c in i.cast(pa.large_string()).chunks],
                                      type=pa.large_string()).to_pandas()
    else:
        sample_ids = np.concatenate([np.asarray(i.to_pylist(), dtype=object) for i in ids] or [np.zeros(0, object)])
    # the model names as Arrow strings decoded from their codes: an object array of a million names converted
    # to pandas' string column cost three times as much (the same column: tests/test_report.py)
    codes = pa.array(np.repeat(np.arange(len(models), dtype=np.int32), counts))
    names = pa.DictionaryArray.from_arrays(codes, pa.array(list(models), pa.large_string()))
    frame = {"model": names.cast(pa.large_string()).to_pandas(), "sample_id": sample_ids}
    for c in cols:
        frame[c.column] = np.concatenate(values[c.column]) if values[c.column] else np.full(sum(counts), np.nan)
    return pd.DataFrame(frame), cols, prov


CASE_KEYS = ["model", "kind", "position", "sample_id"]

_ROWS: list = [None, None]  # the last frame grouped (a weak reference: it is not kept alive) and its groups


def rows_by_model(values) -> dict:
    """{model: positions of its rows in ``values``}, in order of first appearance; grouped once per frame (a page
    asked for it five times, each a hash of a million model names at 100 models x 10,000 cases). The frame must
    not be changed in place while it is asked about (the report's are not)."""
    import weakref

    held, groups = _ROWS
    if held is None or held() is not values:
        groups = values.groupby("model", sort=False).indices
        _ROWS[:] = [weakref.ref(values), groups]
    return groups


def select_cases(values, rank_column: SampleColumn | None, n: int, models=None):
    """The ``n`` worst and ``n`` best scored samples of each model (of ``models``, when given) on ``rank_column``.

    Samples without a finite value are left out; ties are broken by sample id, so the choice is
    reproducible (a model's choice depends on its own values alone). Returns model, kind ("worst" / "best"),
    position (1 = worst or best), sample_id.
    """
    import pandas as pd

    out = []
    if rank_column is None or n == 0:
        return pd.DataFrame(columns=CASE_KEYS)
    rows = {m: at for m, at in rows_by_model(values).items() if models is None or m in models}
    taken = np.concatenate(list(rows.values())) if rows else np.zeros(0, dtype="int64")
    ids = np.empty(len(values), dtype=object)
    ids[taken] = values["sample_id"].take(taken).to_numpy(dtype=object)  # only the chosen models' ids
    id_rank = np.zeros(len(values), dtype="int64")
    # a sample id's place among the sorted ids of the models chosen for: ties broken by it (within one model the
    # same order whichever other models' ids are ranked with it)
    id_rank[taken] = pd.factorize(ids[taken], sort=True)[0]
    value = values[rank_column.column].to_numpy("float64")
    worst_first = value if rank_column.higher_is_better else -value  # negation is exact: the same ties
    for model, at in sorted(rows.items()):
        at = at[np.isfinite(value[at])]
        ordered = ids[at[np.lexsort((id_rank[at], worst_first[at]))]]  # a model's ids are distinct
        worst = list(ordered[:n])
        best = list(ordered[n:][::-1][:n])
        out += [(model, "worst", i + 1, s) for i, s in enumerate(worst)]
        out += [(model, "best", i + 1, s) for i, s in enumerate(best)]
    return pd.DataFrame(out, columns=CASE_KEYS)


def _case_details(cases, values, models: dict, metric_names: list):
    """({model: its chosen cases' rows, each with the texts, every per-sample value and the judges'
    explanations}, {model: its pairs file's provenance, for the models read}).

    Per model its pairs' text columns and its judges' explanation columns are read whole (a few
    thousand rows; a filtered read costs more) and the chosen rows taken by position."""
    import pyarrow.parquet as pq

    if cases.empty:
        return {}, {}
    pairs_prov = {}
    value_columns = [c for c in values.columns if c not in ("model", "sample_id")]
    at = rows_by_model(values)  # the chosen models' rows only are taken
    records = {}
    for model, chosen in cases.groupby("model", sort=True):
        ids = list(chosen["sample_id"])
        path = models[model]["pairs"]
        present = set(pq.read_schema(path).names)
        text_cols = ["reference", "hypothesis", *[c for c in CONTEXT_COLUMNS if c in present]]
        texts, meta = _read_arrow(path, ["sample_id", *text_cols])
        pairs_prov[model] = meta
        taken = [_taken(texts, ids, text_cols)]
        for name in metric_names:
            explanation = list(metrics.get(name).explained_by)  # the columns its explain() reads
            if explanation:
                extra, _ = _read_arrow(models[model]["scores"][name], ["sample_id", *explanation])
                taken.append(_taken(extra, ids, explanation))
        rows = values.iloc[at[model]]
        position = dict(zip(rows["sample_id"].to_numpy(dtype=object), range(len(rows))))
        own = {c: rows[c].to_numpy() for c in value_columns}
        records[model] = []
        for i, (kind, pos, sid) in enumerate(zip(chosen["kind"], chosen["position"], chosen["sample_id"])):
            record = {"model": model, "kind": kind, "position": pos, "sample_id": sid}
            for part in taken:
                record.update({c: v[i] for c, v in part.items()})
            j = position[sid]
            record.update({c: own[c][j] for c in value_columns})
            records[model].append(record)
    return records, pairs_prov


def _taken(table, ids: list, columns: list) -> dict:
    """{column: [its value for each of ``ids``]} from a pyarrow table with a sample_id column (None when absent)."""
    import pyarrow as pa

    index = {sid: i for i, sid in enumerate(table.column("sample_id").to_pylist())}
    rows = pa.array([index.get(sid) for sid in ids], type=pa.int64())  # null where absent: take() gives None
    # only the chosen rows become Python objects (a column of report texts whole costs ~10x at 10,000 cases)
    return {c: table.column(c).take(rows).to_pylist() for c in columns}


def _pairs_provenance(models: dict, already: dict) -> dict:
    from radrank.io import read_provenance

    return {m: already.get(m) or read_provenance(entry["pairs"]) for m, entry in models.items()}


GROUP_FILES = ("leaderboard", "ranks", "summary", "comparisons")  # a group's own files, as load_group reads them
MODEL_FILES = ("pairs", "drops")  # and per model these, besides its score files (one per metric)


def load_group(entry: dict, *, cases: int = 5, drill_down=None) -> Group:
    """Read one dataset × split from the paths in ``entry`` (the workflow's report layout:
    dataset, split, leaderboard, ranks, summary, comparisons, and per model its pairs, drops and
    one score file per metric). ``drill_down``: a :class:`radrank.report.reuse.DrillDownMemo`, which serves
    the drill-down rows of a model whose files it has seen (and stores the others')."""
    import pandas as pd

    # io.read_csv: the texts as written, without the apostrophe that keeps a spreadsheet from running them
    board = io.read_csv(entry["leaderboard"], keep_default_na=True)
    summary, stats_prov = _read(entry["summary"])
    comparisons, _ = _read(entry["comparisons"])
    ranks, _ = _read(entry["ranks"])
    models = entry["models"]
    metric_names = list(next(iter(models.values()))["scores"]) if models else []
    values, columns, score_prov = _per_sample_values(models, metric_names)
    leaves = [leaf for name in metric_names for leaf in metrics.get(name).leaves]
    drops = {m: io.read_text_table(e["drops"]) for m, e in models.items()}
    group = Group(dataset=entry["dataset"], split=entry["split"], board=board, summary=summary,
                  comparisons=comparisons, ranks=ranks, values=values, columns=columns, leaves=leaves,
                  metric_names=metric_names,
                  cases=None, drops=drops, drop_paths={m: e["drops"] for m, e in models.items()},
                  provenance={"statistics": stats_prov, "scores": score_prov})
    rank_column = group.rank_column()
    served = {}  # model -> (its drill-down rows, its pairs' provenance or None), from the memo
    if drill_down is not None:
        served = {m: hit for m in models if (hit := drill_down.get(m, rank_column)) is not None}
    todo = {m: e for m, e in models.items() if m not in served}
    chosen = select_cases(values, rank_column, cases, models=set(todo) if served else None)
    details, pairs_prov = _case_details(chosen, values, todo, metric_names)
    if drill_down is not None:
        for model in todo:
            drill_down.put(model, rank_column, details.get(model, []), pairs_prov.get(model))
    details.update({m: rows for m, (rows, _) in served.items()})
    pairs_prov.update({m: prov for m, (_, prov) in served.items() if prov is not None})
    rows = [row for model in sorted(details) for row in details[model]]
    group.cases = pd.DataFrame.from_records(rows) if rows else pd.DataFrame(columns=CASE_KEYS)
    group.provenance["pairs"] = _pairs_provenance(models, pairs_prov)
    return group

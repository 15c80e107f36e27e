"""The reporting appendix: what a paper's methods need from this run, arranged under the topics of
TRIPOD-LLM (Gallifant et al., Nat Med 2025) and the CLAIM 2024 update (Tejani et al., Radiol Artif Intell
2024) that an evaluation run can answer, the rest listed as for the authors.

Everything comes from the files the report already reads: the leaderboards, the statistics' provenance, the
pairs' and score files' provenance, the drop lists and the per-sample values (:class:`radrank.report.Group`).
A group's part (:func:`group_facts`) is gathered where the group is loaded — in the process that builds its
page — and the whole (:func:`gather`) on the index; :func:`html` and :func:`markdown` render it (every text
escaped: names, paths and settings may come from the people being ranked). Topics are named, not numbered:
the checklists' numbering differs between versions.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, replace

import numpy as np

from radrank import metrics
from radrank.report.data import Group, rows_by_model, sample_columns
from radrank.report.page import MISSING, Table, count, esc, is_missing, md_text, percent, slug

APPENDIX = "appendix.md"  # the Markdown appendix, beside report.html (the index links it by name)
INTERVAL = "percentile bootstrap interval"
MULTIPLICITY = "Holm's step-down correction over all pairs of a leaderboard (family-wise error ≤ 1 − level)"
# keys of a score file's settings or models record that name a judge's or reward model's prompt
PROMPT_KEYS = ("prompt", "prompt_version", "prompt_sha256", "prompts_sha256", "prompt_template", "chat_template")
LONG_SETTING = 120  # a setting longer than this (a prompt template) is shown as its sha256


# --- facts ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelCases:
    """One model's cases in one dataset × split."""

    model: str
    name: str
    pairs: int | None  # rows of its pairs file (its provenance's n_pairs)
    scored: int | None  # cases its numbers rest on (the leaderboard's n)
    coverage: float | None  # share of the case set it answered
    dropped: int  # drop-list actions
    scored_as_empty: int
    truncated: int
    source_sha256: str | None


@dataclass(frozen=True)
class GroupData:
    dataset: str
    split: str
    case_set: int | None  # cases every ranked model is scored on (the statistics' n_cases)
    dataset_cases: int | None
    rank_cases: int | None  # cases common to every ranked model (rank intervals)
    case_set_rule: str
    models: tuple  # ModelCases, in leaderboard order
    policies: tuple  # (label, value): how missing cases and empty answers were handled


@dataclass(frozen=True)
class MetricRecord:
    """One metric as its score files record it (one record per distinct version, settings, models, environment)."""

    metric: str
    version: str
    settings: tuple  # (name, value shown), the settings that change scores
    weights: tuple  # "id @ revision" of each model or endpoint it ran
    prompt: tuple  # (what, value): the prompt's name or digest, as recorded
    judge: bool  # an LLM judge: its answers may fail to parse (radrank.metrics.base.Metric.reason_column)
    env: str
    lock_key: str
    python: str
    packages: tuple  # (package, version)
    devices: tuple
    groups: tuple  # "dataset/split" it scored


@dataclass(frozen=True)
class Failure:
    """Cases a metric left unscored for one model of one dataset × split: the hook for judge-failure accounting
    (more kinds of failure go in ``counts``)."""

    dataset: str
    split: str
    metric: str
    model: str
    name: str
    cases: int  # cases with a row in the score file
    unscored: int | None  # of those, without a value (None: the metric has no per-sample value)
    counts: tuple  # (count leaf label, count), e.g. ("GREEN unparsed", 3)
    policy: str = ""  # an LLM judge: its ranks with failures excluded / worst / best when a policy flips them


@dataclass(frozen=True)
class GroupFacts:
    """What one dataset × split contributes to the appendix."""

    data: GroupData
    metrics: tuple  # MetricRecord, one per (metric, provenance) in this group
    failures: tuple  # Failure
    statistics: tuple  # (label, value) as its statistics file records them
    radrank: str | None
    joint_ranks: bool  # the leaderboard has simultaneous rank sets and tiers


@dataclass(frozen=True)
class Item:
    """One topic of the checklists: its name in each, and what the run answers (nothing: for the authors)."""

    topic: str
    tripod_llm: str
    claim: str
    entries: tuple = ()  # (label, text)
    tables: tuple = ()  # (caption, header, rows of texts)
    for_authors: bool = False


@dataclass(frozen=True)
class Appendix:
    data: tuple  # GroupData
    metrics: tuple  # MetricRecord, merged over groups
    statistics: tuple  # (label, value)
    failures: tuple  # Failure
    software: tuple  # (label, value)
    items: tuple  # Item, answered first, then those for the authors


def _int(x) -> int | None:
    try:
        return None if is_missing(x) else int(float(x))
    except (TypeError, ValueError):
        return None


def _float(x) -> float | None:
    try:
        return None if is_missing(x) else float(x)
    except (TypeError, ValueError):
        return None


def _text(x) -> str:
    return "" if is_missing(x) else str(x)


def _shown(value) -> str:
    if isinstance(value, str):
        return value if len(value) <= LONG_SETTING else f"sha256 {_sha256(value)} ({len(value)} characters)"
    if value is None:
        return "null"
    return json.dumps(value, sort_keys=True, default=str)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _walk(obj, path=()):
    """(path of keys, value) of every value in nested mappings and lists."""
    if isinstance(obj, dict):
        for k, v in sorted(obj.items(), key=lambda kv: str(kv[0])):
            yield from _walk(v, (*path, str(k)))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _walk(v, (*path, str(i)))
    else:
        yield path, obj


def _records(obj):
    """Every mapping in ``obj`` (nested), itself first."""
    if isinstance(obj, dict):
        yield obj
        for v in obj.values():
            yield from _records(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _records(v)


def weights_of(models) -> tuple:
    """Each model a metric ran, as ``id @ revision`` (a hub commit), else with its weights' sha256, else marked
    an endpoint: from the ``models`` record of its score files (radrank.runtime.weights.provenance, the engine's
    identities, an API judge's id)."""
    out = []
    for rec in _records(models or {}):
        ref = rec.get("id") if isinstance(rec.get("id"), str) else rec.get("model")
        if not isinstance(ref, str) or not ({"revision", "weights_sha256", "api"} & set(rec)):
            continue
        if rec.get("revision"):
            out.append(f"{ref} @ {rec['revision']}")
        elif rec.get("weights_sha256"):
            out.append(f"{ref} (weights sha256 {rec['weights_sha256']})")
        elif rec.get("api"):
            out.append(f"{ref} ({rec['api']} endpoint; no revision recorded)")
        else:
            out.append(f"{ref} (no revision recorded)")
    return tuple(dict.fromkeys(out))


def prompt_of(settings, models) -> tuple:
    """(what, value) for each prompt a metric's score files name: a version or package name and a digest as
    recorded, and for a prompt template recorded whole (or any long text) its sha256."""
    out = []
    for source in (settings or {}, models or {}):
        for path, value in _walk(source):
            if value is None or not any(p in PROMPT_KEYS for p in path):
                continue
            what = ".".join(path)
            if isinstance(value, str) and (path[-1] == "prompt_template" or len(value) > LONG_SETTING):
                out.append((f"{what} sha256", _sha256(value)))
            else:
                out.append((what, _shown(value)))
    return tuple(dict.fromkeys(out))


def _devices(models) -> tuple:
    return tuple(dict.fromkeys(str(v) for path, v in _walk(models or {}) if path and path[-1] == "device" and v))


def _metric_record(metric: str, p: dict, where: str) -> MetricRecord:
    env = p.get("environment") or {}
    settings = p.get("settings") or {}
    models = p.get("models") or {}
    return MetricRecord(
        metric=metric, version=_text(p.get("metric_version")) or MISSING,
        settings=tuple((k, _shown(v)) for k, v in sorted(settings.items())),
        weights=weights_of(models), prompt=prompt_of(settings, models),
        judge=metrics.get(metric).reason_column is not None if metric in metrics.names() else False,
        env=_text(env.get("env")) or MISSING, lock_key=_text(env.get("lock_key")) or MISSING,
        python=_text(env.get("python")) or MISSING,
        packages=tuple((k, _text(v) or MISSING) for k, v in sorted((env.get("packages") or {}).items())),
        devices=_devices(models), groups=(where,))


class _BoardValues:
    """A leaderboard's value of (model, column): its first row of the model, found once per board (a mask over the
    board for each value cost half a millisecond: 0.2 CPU-s a page at 100 models)."""

    def __init__(self, board):
        self.board = board
        self.rows: dict = {}
        for i, model in enumerate(board["model"] if board is not None else ()):
            self.rows.setdefault(model, i)

    def __call__(self, model, column):
        i = self.rows.get(model)
        if i is None or column not in self.board.columns:
            return None
        return self.board[column].iat[i]


def _judge_failures(board, value, accounting, model: str) -> tuple[tuple, str]:
    """An LLM judge's failure kinds and retries of ``model`` from the leaderboard's columns
    (:mod:`radrank.stats.failures`; ``value``: the board's :class:`_BoardValues`), and the sentence of a failure
    policy that flips its rank ("" if none)."""
    from radrank.leaderboard import FAILURE_COLUMNS

    if accounting is None or board is None:
        return (), ""
    kinds = [k for k in FAILURE_COLUMNS if k not in ("judged", "failed", "failed share")]
    counts = tuple((f"{accounting.label} {k}", _int(value(model, f"{accounting.label} {k}")))
                   for k in kinds if f"{accounting.label} {k}" in board.columns)
    flips = _text(value(model, "Failure policy")) if "Failure policy" in board.columns else ""
    policy = "; ".join(p for p in flips.split("; ") if p.startswith(f"{accounting.label} rank "))
    return counts, policy


def failures_of(group: Group) -> tuple:
    """Per (metric, model): the cases its score file holds, how many have no value of the metric's first
    per-sample column, and its count leaves' estimates (e.g. GREEN unparsed) from the statistics summary. The
    hook for judge-failure accounting: more kinds of failure go in :attr:`Failure.counts`."""
    out = []
    at = rows_by_model(group.values)  # each model's rows (no frame per model)
    none = np.zeros(0, dtype="int64")
    names = group.names
    estimates = dict(zip(zip(group.summary["model"], group.summary["metric"]), group.summary["estimate"]))
    board_value = _BoardValues(group.board)
    for metric in group.metric_names:
        columns = sample_columns(metric)
        first = columns[0].column if columns else None
        missing = (~np.isfinite(group.values[first].to_numpy(dtype="float64"))
                   if first is not None and first in group.values.columns else None)
        count_leaves = [leaf for leaf in metrics.get(metric).leaves if leaf.is_count]
        for model in group.order:
            rows = at.get(model, none)
            unscored = None if missing is None else int(missing[rows].sum())
            counts = tuple((leaf.label, _int(estimates[model, leaf.name])) for leaf in count_leaves
                           if (model, leaf.name) in estimates)
            judge, policy = _judge_failures(group.board, board_value, metrics.get(metric).failures, model)
            judge = tuple(c for c in judge if c[0] not in {label for label, _ in counts})  # a count leaf already
            out.append(Failure(dataset=group.dataset, split=group.split, metric=metric, model=model,
                               name=names[model], cases=len(rows), unscored=unscored, counts=counts + judge,
                               policy=policy))
    return tuple(out)


def group_facts(group: Group) -> GroupFacts:
    """The appendix's facts of one loaded dataset × split (:func:`radrank.report.load_group`)."""
    import pandas as pd

    board, names = group.board, group.names
    value = _BoardValues(board)
    stats = group.provenance.get("statistics") or {}
    pairs = group.provenance.get("pairs") or {}
    models = []
    for model in group.order:
        drops = group.drops.get(model)
        actions = drops["action"].value_counts() if drops is not None and len(drops) else {}
        p = pairs.get(model) or {}
        models.append(ModelCases(
            model=model, name=names[model], pairs=_int(p.get("n_pairs")), scored=_int(value(model, "n")),
            coverage=_float(value(model, "Coverage")), dropped=int(actions.get("dropped", 0)),
            scored_as_empty=int(actions.get("scored_as_empty", 0)), truncated=int(actions.get("truncated", 0)),
            source_sha256=_text((p.get("sources") or {}).get("sha256")) or None))
    first = pairs.get(group.order[0]) if group.order else None
    policies = [("Cases a model has no answer for", _text(stats.get("missing_cases")) or MISSING),
                ("Least coverage to be ranked", percent(stats.get("min_coverage")))]
    for key, label in (("empty_hypothesis", "Empty answers"), ("ref_section", "Reference section scored"),
                       ("max_report_chars", "Longest report kept")):
        if first and not is_missing(first.get(key)):
            policies.append((label, _shown(first.get(key))))
    case_set_rule = _text(value(group.order[0], "Case set")) if group.order else ""
    data = GroupData(dataset=group.dataset, split=group.split, case_set=_int(stats.get("n_cases")),
                     dataset_cases=_int(stats.get("n_dataset_cases")), rank_cases=_int(stats.get("n_rank_cases")),
                     case_set_rule=case_set_rule, models=tuple(models), policies=tuple(policies))
    records = {}
    for (model, metric), p in sorted(group.provenance.get("scores", {}).items()):
        rec = _metric_record(metric, p if isinstance(p, dict) else {}, group.key)
        records.setdefault(rec, None)
    statistics = tuple((k, stats.get(k)) for k in ("n_bootstrap", "seed", "level", "method", "min_common_cases"))
    tiers = "Tier" in board.columns and bool(pd.to_numeric(board["Tier"], errors="coerce").notna().any())
    return GroupFacts(data=data, metrics=tuple(records), failures=failures_of(group), statistics=statistics,
                      radrank=_text(stats.get("radrank")) or None, joint_ranks=tiers)


# --- the appendix --------------------------------------------------------------------------------------------


def _merged(records) -> tuple:
    """One record per distinct (metric, provenance), with every dataset × split it scored, in metric order."""
    merged = {}
    for rec in records:
        groups = merged.setdefault(replace(rec, groups=()), [])
        groups.extend(g for g in rec.groups if g not in groups)
    return tuple(replace(rec, groups=tuple(groups)) for rec, groups in
                 sorted(merged.items(), key=lambda kv: (kv[0].metric, kv[0].version, kv[0].settings, kv[0].weights)))


def _one(values, what: str) -> str:
    """The value every group records, or each group's when they differ."""
    shown = list(dict.fromkeys(MISSING if is_missing(v) else str(v) for v in values))
    return shown[0] if len(shown) == 1 else f"differs by {what}: " + "; ".join(shown)


def gather(facts: list, *, bootstrap: dict, empty_hypothesis: str, config_hash: str | None = None) -> Appendix:
    """The appendix of a run from its groups' facts (:func:`group_facts`, in page order) and the config's
    bootstrap settings (``n``, ``seed``, ``level``)."""
    data = tuple(f.data for f in facts)
    records = _merged([r for f in facts for r in f.metrics])
    failures = tuple(x for f in facts for x in f.failures)
    recorded = {k: [dict(f.statistics).get(k) for f in facts] for k in ("n_bootstrap", "seed", "level", "method",
                                                                         "min_common_cases")}
    level = float(bootstrap["level"])
    statistics = [
        ("Resamples", str(bootstrap["n"])), ("Seed", str(bootstrap["seed"])), ("Level", f"{level:g}"),
        ("Interval", f"{level:.0%} {INTERVAL} of each estimate; rank intervals from each model's rank on every "
                     "resample"),
        ("Method", _one(recorded["method"], "dataset × split") if facts else MISSING),
        ("Resampling unit", "the case: every model and metric of a dataset × split on the same resamples (paired)"),
        ("Multiple comparisons", MULTIPLICITY),
        ("Least cases for a rank interval or comparison", _one(recorded["min_common_cases"], "dataset × split")
         if facts else MISSING),
    ]
    if any(f.joint_ranks for f in facts):
        statistics.append(("Simultaneous rank sets", "every model's rank set holds jointly at the level (max-t over "
                                                     "the same resamples; radrank.stats.ranks); tiers group the "
                                                     "models no simultaneous comparison separates"))
    for key, label in (("n_bootstrap", "Resamples"), ("seed", "Seed")):
        files = {str(v) for v in recorded[key] if not is_missing(v)}
        if files and files != {str(bootstrap["n" if key == "n_bootstrap" else "seed"])}:
            statistics.append((f"{label} in the statistics files", _one(recorded[key], "dataset × split")))
    environments = {}
    for rec in records:
        environments.setdefault((rec.env, rec.lock_key, rec.python), {}).update(dict(rec.packages))
    software = [("radrank", _one([f.radrank for f in facts], "dataset × split") if facts else MISSING),
                ("Config hash (the settings that decide the numbers)", config_hash or MISSING)]
    for (env, key, python), packages in sorted(environments.items()):
        software.append((f"Environment {env}", f"lock key {key}; Python {python}; "
                         + ", ".join(f"{k} {v}" for k, v in sorted(packages.items()))))
    devices = sorted({d for rec in records for d in rec.devices})
    software.append(("Devices recorded by the metrics", ", ".join(devices) if devices else
                     "none (no metric recorded a device)"))
    appendix = Appendix(data=data, metrics=records, statistics=tuple(statistics), failures=failures,
                        software=tuple(software), items=())
    return replace(appendix, items=_items(appendix, empty_hypothesis))


def _data_tables(a: Appendix) -> tuple:
    rows = [[f"{g.dataset} / {g.split}", str(len(g.models)), count(g.dataset_cases), count(g.case_set),
             count(g.rank_cases), g.case_set_rule or MISSING] for g in a.data]
    return (("Datasets and splits", ["Dataset / split", "Models", "Dataset cases", "Case set", "Common cases",
                                     "Case set rule"], rows),)


def _flow_table(a: Appendix) -> tuple:
    rows = [[f"{g.dataset} / {g.split}", m.name, count(m.pairs), str(m.dropped), str(m.scored_as_empty),
             str(m.truncated), count(m.scored), percent(m.coverage) if m.coverage is not None else MISSING]
            for g in a.data for m in g.models]
    return (("Cases per model", ["Dataset / split", "Model", "Pairs", "Dropped", "Scored as empty", "Truncated",
                                 "Cases scored", "Coverage"], rows),)


def _models_table(a: Appendix) -> tuple:
    rows = [[f"{g.dataset} / {g.split}", m.name, m.model, m.source_sha256 or MISSING] for g in a.data
            for m in g.models]
    return (("Models evaluated", ["Dataset / split", "Model", "Model id", "Submission sha256"], rows),)


def _metrics_table(a: Appendix) -> tuple:
    rows = [[r.metric, r.version, "; ".join(r.weights) or "none (no model weights)",
             "; ".join(f"{k}: {v}" for k, v in r.settings) or "none", r.env, ", ".join(r.groups)]
            for r in a.metrics]
    return (("Metrics", ["Metric", "Version", "Models and revisions", "Settings that change scores", "Environment",
                         "Scored"], rows),)


def _prompt_table(a: Appendix) -> tuple:
    rows = []
    for r in a.metrics:
        if not (r.judge or r.prompt):
            continue
        shown = "; ".join(f"{k}: {v}" for k, v in r.prompt) if r.prompt else (
            "no prompt digest recorded: the prompt is the one of this metric version and its packages ("
            + ", ".join(f"{k} {v}" for k, v in r.packages) + ")")
        rows.append([r.metric, r.version, shown])
    return (("Judge and reward-model prompts", ["Metric", "Version", "Prompt"], rows),) if rows else ()


def _failure_table(a: Appendix) -> tuple:
    rows = [[f"{x.dataset} / {x.split}", x.metric, x.name, str(x.cases), count(x.unscored),
             "; ".join(f"{label} {count(n)}" for label, n in x.counts if (n or 0) > 0) or MISSING,
             x.policy or MISSING]
            for x in a.failures if (x.unscored or 0) > 0 or any((n or 0) > 0 for _, n in x.counts)]
    return (("Unscored cases", ["Dataset / split", "Metric", "Model", "Cases", "Unscored", "Counted failures",
                                "Failure policy"], rows),)


# (topic, TRIPOD-LLM topic, CLAIM 2024 topic; — where neither names it): what the authors must write themselves
FOR_AUTHORS = (
    ("Title and abstract", "Title; Abstract", "Title; Abstract"),
    ("Background and objectives", "Background; Objectives",
     "Scientific and clinical background; Study objectives and hypotheses"),
    ("Study design and setting", "Data (study design, setting, dates)", "Study design; Study goal"),
    ("Eligibility of cases", "Participants (eligibility)", "Eligibility criteria"),
    ("Reference standard", "Annotation (the reference reports and who wrote them)",
     "Reference standard (definition, rationale, source, annotators)"),
    ("De-identification", "Data (privacy)", "De-identification methods"),
    ("How the sample size was chosen", "Sample size", "Intended sample size and how it was determined"),
    ("Demographic and clinical characteristics of the cases", "Participants",
     "Demographic and clinical characteristics of cases"),
    ("Human evaluation of the outputs", "Annotation (human oversight)",
     "Measurement of inter- and intrarater variability"),
    ("Fairness and subgroup performance", "Fairness", "Robustness or sensitivity analysis"),
    ("Hardware", "Analytical methods (compute)", MISSING),
    ("Interpretation, limitations and implications", "Interpretation; Limitations",
     "Study limitations; Implications for practice"),
    ("Registration, protocol, funding and conflicts of interest", "Open science (funding, conflicts of interest, "
     "protocol, registration)", "Registration; Study protocol; Sources of funding"),
    ("Data and code availability", "Open science (data and code sharing)", MISSING),
)


def _items(a: Appendix, empty_hypothesis: str) -> tuple:
    policies = {}
    for g in a.data:
        for label, value in g.policies:
            policies.setdefault(label, []).append(value)
    missing = tuple((label, _one(values, "dataset × split")) for label, values in policies.items())
    if "Empty answers" not in policies:  # as the config says, where the pairs' provenance does not
        missing += (("Empty answers", empty_hypothesis),)
    prompts = _prompt_table(a)
    answered = (
        Item("Data sources, splits and sample size", "Data; Sample size", "Data sources; Selection of data subsets",
             tables=_data_tables(a)),
        Item("Flow of cases and missing data", "Data (missing data)",
             "How missing data were handled; Flow of participants or cases", entries=missing, tables=_flow_table(a)),
        Item("Models evaluated", "Analytical methods (LLM name and version)", "Detailed description of model",
             tables=_models_table(a)),
        Item("Evaluation metrics and their implementation", "Analytical methods (evaluation)",
             "Metrics of model performance", tables=_metrics_table(a)),
        Item("Judge prompts", "Prompting", "Detailed description of model (the judges)", tables=prompts,
             entries=() if prompts else (("Prompts", "no metric of this run prompts a model"),)),
        Item("Statistical methods and uncertainty", "Analytical methods (statistics)",
             "Statistical measures of significance and uncertainty", entries=a.statistics),
        Item("Failures", "Performance (failures)", "Failure analysis",
             entries=(("Every other (metric, model)", "scored every case it has a row for"),),
             tables=_failure_table(a)),
        Item("Software and hardware", "Open science (code); Compute", "Software libraries, frameworks and packages",
             entries=a.software),
    )
    return answered + tuple(Item(topic, tripod, claim, for_authors=True) for topic, tripod, claim in FOR_AUTHORS)


# --- rendering -----------------------------------------------------------------------------------------------

CITATIONS = ("TRIPOD-LLM: Gallifant et al., Nat Med 2025; CLAIM 2024: Tejani et al., Radiol Artif Intell 2024. "
             "Topics are named, not numbered: check the item numbers against the checklist version you report to.")
INTRO = ("What this run can answer of the reporting checklists, from the files it wrote; the items it cannot "
         "answer are listed at the end, for the authors.")


_NUMBER = re.compile(r"^(?:[0-9][0-9.,]*%?|\u2014)$")  # a count, share or — : right-aligned as the page's numbers


def _anchor(item: Item) -> str:
    return slug("appendix", item.topic)


def toc(a: Appendix) -> list:
    """(anchor, title, sub-entries) of the index's contents."""
    return [("appendix", "Reporting appendix",
             [(_anchor(i), i.topic) for i in a.items if not i.for_authors] + [("appendix-for-authors",
                                                                               "For the authors")])]


def html(a: Appendix, markdown_name: str = APPENDIX) -> str:
    """The index page's section (escaped)."""
    parts = [f"<section id=\"appendix\"><h2>Reporting appendix</h2><p>{esc(INTRO)} The same in Markdown, to paste "
             f"into a paper: <a href=\"{esc(markdown_name)}\">{esc(markdown_name)}</a>.</p>"
             f"<p class=\"note\">{esc(CITATIONS)}</p>"]
    for item in a.items:
        if item.for_authors:
            continue
        parts.append(f"<h3 id=\"{_anchor(item)}\">{esc(item.topic)}</h3><p class=\"muted\">TRIPOD-LLM: "
                     f"{esc(item.tripod_llm)} · CLAIM 2024: {esc(item.claim)}</p>")
        if item.entries:
            parts.append(Table(["Entry", "This run"], [[k, v] for k, v in item.entries], sortable=False,
                               text_columns=(0, 1)).html())
        for caption, header, rows in item.tables:
            if rows:
                text = [i for i in range(len(header)) if not all(_NUMBER.match(r[i]) for r in rows)]
                parts.append(f"<p>{esc(caption)}</p>" + Table(header, rows, text_columns=text).html())
    authors = [[i.topic, i.tripod_llm, i.claim] for i in a.items if i.for_authors]
    parts.append("<h3 id=\"appendix-for-authors\">For the authors</h3><p>What no evaluation run can know: these "
                 "items are for the authors to write.</p>"
                 + Table(["Item", "TRIPOD-LLM", "CLAIM 2024"], authors, text_columns=(0, 1, 2)).html())
    return "".join(parts) + "</section>"


def markdown(a: Appendix) -> str:
    """The appendix as a Markdown file (escaped), one section per item."""
    lines = ["# Reporting appendix", "", md_text(INTRO), "", md_text(CITATIONS), ""]
    for item in a.items:
        if item.for_authors:
            continue
        lines += [f"## {md_text(item.topic)}", "",
                  f"TRIPOD-LLM: {md_text(item.tripod_llm)}; CLAIM 2024: {md_text(item.claim)}", ""]
        lines += [f"- **{md_text(k)}**: {md_text(v)}" for k, v in item.entries]
        if item.entries:
            lines.append("")
        for caption, header, rows in item.tables:
            if rows:
                lines += [f"{md_text(caption)}:", "", Table(header, rows).markdown(), ""]
    lines += ["## For the authors", "", "What no evaluation run can know: these items are for the authors to write.",
              "", Table(["Item", "TRIPOD-LLM", "CLAIM 2024", "Answer"],
                        [[i.topic, i.tripod_llm, i.claim, "for the authors"] for i in a.items if i.for_authors]
                        ).markdown(), ""]
    return "\n".join(lines).rstrip() + "\n"

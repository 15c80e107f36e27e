"""The workflow's plan: which jobs exist, what each one depends on, checked once when the workflow loads.

Built once from the validated config when the Snakefile loads (:meth:`Plan.load`). Everything a
rule or input function asks is answered here, from this one reading of the config:

* the submissions (sheet and ``generation`` entries) — so building the DAG never parses a submission.
  Every file the sheet names (a relative path is read from the sheet's own folder,
  :func:`radrank.sheets.resolve_sheet_path`) must be a regular file (:func:`radrank.ingest.detect.file_problem`: a FIFO,
  a device, a symlink loop or a file over the size cap is a ConfigError naming the sheet row); the
  first bytes of a row's submission are looked at only when the row has a ``reference_path``, which
  a ReXrank JSON or parquet submission (holding its own references) may not have. Model and dataset
  names are checked by :func:`radrank.sheets.name_problem` (at most 100 characters);
* the models sheet (config ``models``), read and checked (:func:`radrank.sheets.read_models_sheet`);
* the leaderboards' rank leaves (:meth:`Plan.check_ranking`, in :meth:`Plan.load`): each a leaf of a
  registered metric, and every leaderboard's ``rank_by`` or ``fallback_rank_by`` computed;
* every metric's typed settings, built once (:func:`radrank.metrics.configured`): an unknown key or
  an ill-typed value is a ConfigError naming ``metric_settings.<metric>.<key>`` before any job
  starts; a rule's identity (:meth:`Plan.identity_of`) holds only the settings that change scores;
* what every metric and backbone will load (:meth:`Plan.weight_refs`): checked on this machine's
  files before any environment is built or job started (:meth:`Plan.check_weights`);
* the job objects (:mod:`radrank.jobs`) each rule runs, with exactly what its outputs depend on.

The Plan never changes the config it is given.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from radrank import jobs, metaeval, metrics, score_cache
from radrank.digests import FileDigests
from radrank.errors import ConfigError, InputError, MissingWeightsError
from radrank.sheets import (NAME_PATTERN, SHEET_COLUMNS, SHEET_OPTIONAL, name_problem, read_models_sheet, read_sheet,
                            resolve_sheet_path, shown_sheet_path)

RESULTS = "results"  # every output of the workflow is under it
GENERATED = "results/generated/{dataset}/{split}/{model}"  # + ".parquet" / ".drops.csv"
GENERIC_GENERATOR_ENV = "gen-base"  # where a user's own callable runs
SCORE_MB_PER_MODEL = 20  # memory a scoring job adds per model of its group
WEIGHTS_CHECK_ENV = "RADRANK_WEIGHTS_CHECK"  # "off": skip (a dry run or DAG benchmark without weights)
VQA_SPLIT = "vqa"

__all__ = ["GENERATED", "NAME_PATTERN", "Generation", "Plan", "ScoreRule", "Submission"]


def metric_closure(requested, key: str) -> list[str]:
    """Requested metrics, checked: unknown names and missing requirements are errors naming config ``key``."""
    known = metrics.names()
    unknown = [m for m in requested if m not in known]
    if unknown:
        raise ConfigError(f"unknown metric(s) {unknown} in config '{key}'; known metrics: {known}")
    for name in requested:
        missing = [r for r in metrics.get(name).requires if r not in requested]
        if missing:
            raise ConfigError(f"metric {name!r} is computed from {list(metrics.get(name).requires)}; "
                              f"add {missing} to config '{key}' (or remove {name!r})")
    return list(requested)


@dataclass(frozen=True)
class Generation:
    """One model run over an image dataset (config ``generation``), with defaults filled in."""

    model: str
    dataset: str
    adapter: str
    root: str
    generator: str
    where: str  # the config entry, for messages
    settings_key: str  # where its settings are in the config, e.g. generation[0].settings
    adapter_options: dict = field(default_factory=dict)
    settings: object = field(default_factory=dict)  # as configured; a backbone's typed Settings once read
    splits: tuple = ("findings",)
    use_indication: bool = False
    image_format: str = "pil"
    max_images: int | None = None
    batch_size: int | None = None  # samples per generator call (None: the backbone decides)
    max_samples: int | None = None
    shards: int = 1

    @property
    def backbone(self) -> bool:
        """Run by one of radrank's backbones (else a user's callable, ``package.module:callable``)."""
        from radrank import backbones

        return self.generator in backbones.names()

    @property
    def env(self) -> str:
        from radrank import backbones

        return backbones.get(self.generator).env(self.settings) if self.backbone else GENERIC_GENERATOR_ENV

    @property
    def gpus(self) -> int:
        from radrank import backbones

        return backbones.get(self.generator).gpus(self.settings) if self.backbone else 0

    @property
    def samples_per_call(self) -> int:
        return jobs.samples_per_call(self.generator, self.settings, self.batch_size)

    def weights(self) -> tuple:
        from radrank import backbones

        if not self.backbone:
            return ()
        return backbones.get(self.generator).weights(self.settings, f"{self.where}: backbone {self.generator!r}",
                                                     key=self.settings_key)


@dataclass(frozen=True)
class ScoreRule:
    """One scoring rule: metric ``metric`` over every model of one dataset × split."""

    name: str
    metric: str
    dataset: str
    split: str
    models: tuple


@dataclass(frozen=True)
class Submission:
    model: str
    dataset: str
    path: str
    reference_path: str
    splits: tuple[str, ...]
    sheet_row: int | None
    generation: Generation | None = None


class Plan:
    def __init__(self, config: dict, base_dir: str | Path = ".", digest_memo: str | Path | None = None):
        self.config = copy.deepcopy(config)
        self.base_dir = Path(base_dir)
        # content digests of the files people write, in the jobs' params: content, not mtime, reruns a job
        self.digests = FileDigests(digest_memo)
        self.submissions: dict = {}  # (dataset, model) -> Submission
        self.warnings: list = []  # what the run should say when it loads (rules/common.smk prints them)
        self.metric_names = metric_closure(self.config["metrics"], "metrics")  # findings and reports splits
        self.vqa_metric_names = metric_closure(self.config.get("vqa_metrics", ["vqa"]), "vqa_metrics")
        for key in ("metric_settings", "shards"):
            for name in self.config.get(key) or {}:
                if name not in self.all_metric_names():
                    raise ConfigError(f"config '{key}' names {name!r}, which is not among the configured metrics")
        # Every metric's settings, built once: the single place defaults are merged and values checked.
        self.settings = {name: metrics.configured(name, self.config) for name in self.all_metric_names()}
        for name in self.config.get("shards") or {}:
            if metrics.get(name).requires:
                raise ConfigError(f"config 'shards' names {name!r}: it combines other metrics' scores model by "
                                  "model (one cheap job per dataset × split); shard the metrics it reads instead")
        self.metaeval_sets = metaeval.sets_from_config(self.config)
        score_cache.ScoreCache.from_config(self.config)  # its secret file, checked once here, not in every job
        self._read_sheet()
        self._read_generation()
        if not self.submissions:
            raise ConfigError(f"nothing to score: sheet {self.config['submissions']} lists no submissions and "
                              "config 'generation' is empty")
        self.models_sheet = self._read_models_sheet()
        self.canonical_references = self._read_references()
        from radrank.mrscore_train.config import TrainingConfig

        # MRScore training (target mrscore_train), checked with the rest: None without the section.
        self.mrscore = TrainingConfig.from_config(self.config, datasets={d for d, _ in self.submissions})

    @classmethod
    def from_config(cls, config: dict, base_dir: str | Path = ".") -> "Plan":
        return cls(config, base_dir)

    @classmethod
    def load(cls, config: dict, base_dir: str | Path = ".", digest_memo: str | Path | None = None) -> "Plan":
        """The plan of a run: built, its leaderboards' rank leaves checked (:meth:`check_ranking`), and every model
        it needs checked on this machine (:meth:`check_weights`)."""
        plan = cls(config, base_dir, digest_memo)
        plan.check_ranking()
        plan.check_weights()
        return plan

    def digest(self, path) -> str:
        """The sha256 of a file people write (radrank.digests): what reruns a job when it changes."""
        return self.digests(self.base_dir / path)

    # --- reading the config ----------------------------------------------------------------------
    def _read_sheet(self):
        from radrank.ingest.detect import file_problem, sniff_format
        from radrank.ingest.pairs import check_reference_path

        config = self.config
        sheet = read_sheet(self.base_dir / config["submissions"], SHEET_COLUMNS, SHEET_OPTIONAL)
        splits = tuple(config["splits"])
        for i, (row, line) in enumerate(zip(sheet.to_dict("records"), sheet.attrs["lines"]), start=1):
            # the data row and the file's line (what an editor shows: they differ after '#' or blank lines)
            where = f"sheet {config['submissions']}, row {i} (line {line})"
            for col in ("model", "dataset"):
                problem = name_problem(row[col])
                if problem:
                    raise ConfigError(f"{where}: {col} {problem}")
            if not row["path"]:
                raise ConfigError(f"{where}: path is empty")
            # relative paths are read from the sheet's own folder (radrank.sheets.resolve_sheet_path)
            cells = {col: row[col] for col in ("path", "reference_path")}
            row.update({col: resolve_sheet_path(cell, config["submissions"], self.base_dir)
                        for col, cell in cells.items()})
            for col in ("path", "reference_path"):
                # a regular file only: a FIFO or a device would block or never end when it is hashed or read
                problem = row[col] and (file_problem(self.base_dir / row[col])
                                        or self._output_problem(row[col]))
                if problem:
                    shown = shown_sheet_path(cells[col], row[col], self.base_dir)
                    raise ConfigError(f"{where}: {col} {shown} {problem.removeprefix('file ')}")
            if row["reference_path"]:  # a ground truth given with a file that holds its own would be ignored
                try:
                    path = self.base_dir / row["path"]
                    check_reference_path(row["path"], sniff_format(path), row["reference_path"])
                except InputError as e:
                    raise ConfigError(f"{where}: {e}") from None
            row_splits = splits
            if row["split"]:
                row_splits = tuple(s.strip() for s in row["split"].split(",") if s.strip())
                bad = [s for s in row_splits if s not in splits]
                if bad:
                    raise ConfigError(f"{where}: split(s) {bad} are not among config 'splits' {list(splits)}")
            self._add(Submission(row["model"], row["dataset"], row["path"], row["reference_path"], row_splits, i),
                      where)

    def _output_problem(self, path) -> str | None:
        """Why a file people name is refused as an input although readable: it lies in this run's own outputs
        (a leaderboard CSV as a submission would make the run depend on itself; Snakemake reports a cyclic
        dependency and plans anyway)."""
        results = os.path.realpath(self.base_dir / RESULTS)
        real = os.path.realpath(self.base_dir / path)
        if real == results or real.startswith(results + os.sep):
            return (f"is inside {RESULTS}/, this workflow's own outputs: a run's output as its input would make "
                    "the run depend on itself; copy the file out of results/ first")
        return None

    def _read_models_sheet(self) -> dict | None:
        """config ``models``, read and checked when the workflow loads (a missing sheet, a stray quote or a model
        listed twice is found here, with its line, not in every leaderboard job after the scoring)."""
        path = self.config.get("models")
        if not path:
            return None
        try:
            return read_models_sheet(self.base_dir / path)
        except ConfigError as e:
            raise ConfigError(f"config 'models': {e}") from None

    def _read_references(self) -> dict:
        """config ``references.files``: {dataset: its canonical reference file}, checked when the workflow loads —
        each a dataset of this run (a misspelt name would check nothing), a regular file, a ReXrank JSON or a
        CSV."""
        from radrank.ingest.detect import file_problem, sniff_format

        files = dict((self.config.get("references") or {}).get("files") or {})  # the schema's default: none
        datasets = {d for d, _ in self.submissions}
        for dataset in sorted(set(files) - datasets):
            # said, not refused: one config may serve sheets of some of its datasets (a partial rebuild)
            self.warnings.append(f"config 'references.files.{dataset}': no submission of this run is of dataset "
                                 f"{dataset!r} (datasets: {sorted(datasets)}), so nothing is checked against "
                                 f"{files.pop(dataset)}; a misspelt name checks nothing")
        for dataset, path in files.items():
            where = f"config 'references.files.{dataset}'"
            problem = file_problem(self.base_dir / path) or self._output_problem(path)
            if problem:
                raise ConfigError(f"{where}: {path} {problem.removeprefix('file ')}")
            try:
                fmt = sniff_format(self.base_dir / path)
            except InputError as e:
                raise ConfigError(f"{where}: {e}") from None
            if fmt not in ("rexrank_json", "csv"):
                raise ConfigError(f"{where}: {path} is {fmt}; a dataset's references are a ReXrank JSON or a "
                                  "ground-truth CSV (study_id, report[, case_id])")
            self._check_comparable(dataset, path, fmt, where)
        return files

    def _check_comparable(self, dataset: str, canonical: str, fmt: str, where: str) -> None:
        """A canonical file and a sheet submission of its dataset whose references or case ids are built by
        different rules can never match: every case would be blamed on the submission, so it is said here, once.
        A ReXrank JSON's findings reference is "Findings: " + section_findings (ReXrank's rule), a CSV's or a
        parquet file's reference goes through the section parser; a CSV names its cases by case_id when its
        ground truth has that column, else by study_id."""
        from radrank.ingest.detect import sniff_format
        from radrank.ingest.tables import csv_header

        subs = sorted((s for s in self.submissions.values() if s.dataset == dataset and s.generation is None),
                      key=lambda s: s.sheet_row)
        rules = ("A ReXrank JSON canonical file serves ReXrank JSON submissions, a ground-truth CSV serves CSV "
                 "and parquet submissions")
        header = csv_header(self.base_dir / canonical) if fmt == "csv" else None
        for sub in subs:
            row = f"sheet {self.config['submissions']}, row {sub.sheet_row} (model {sub.model!r})"
            try:
                sub_fmt = sniff_format(self.base_dir / sub.path)
            except InputError:
                continue  # its ingest job names what is wrong with it
            if (fmt == "rexrank_json") != (sub_fmt == "rexrank_json"):
                kinds = {"rexrank_json": "a ReXrank JSON", "csv": "a ground-truth CSV", "parquet": "parquet pairs"}
                raise ConfigError(
                    f"{where}: the canonical file {canonical} is {kinds[fmt]} and the submission {sub.path} of "
                    f"{row} is {kinds[sub_fmt].replace('ground-truth ', '')}: these formats cannot be compared — "
                    "a ReXrank JSON's findings reference is 'Findings: ' + section_findings (ReXrank's rule), a "
                    "CSV's or parquet file's goes through the section parser, so every case would differ. "
                    f"{rules}: name a canonical file of the submissions' format")
            if fmt == "csv" and sub_fmt == "csv" and sub.reference_path:
                ours, theirs = header, csv_header(self.base_dir / sub.reference_path)
                if ours is None or theirs is None or ("case_id" in ours) == ("case_id" in theirs):
                    continue
                named = {True: "has a case_id column, so its cases are named by case_id",
                         False: "has no case_id column, so its cases are named by study_id"}
                raise ConfigError(
                    f"{where}: the canonical file {canonical} {named['case_id' in ours]}, while the ground truth "
                    f"{sub.reference_path} of {row} {named['case_id' in theirs]}: no case could be found in the "
                    "other. Give both files a case_id column, or neither")

    def check_ranking(self):
        """config ``leaderboard``'s rank leaves, checked when the workflow loads (:meth:`load`): each names a leaf of
        a registered metric, and every leaderboard of this run has its rank leaf or its fallback computed (else
        every leaderboard job would fail after the scoring)."""
        known = {leaf.name for name in metrics.names() for leaf in metrics.leaves(name)}
        board = self.config["leaderboard"]
        for key in ("rank_by", "fallback_rank_by", "vqa_rank_by"):
            if board[key] not in known:
                raise ConfigError(f"config 'leaderboard.{key}' names {board[key]!r}, which is no metric's leaf; "
                                  f"leaves: {sorted(known)}")
        for split in sorted({s for _, s in self.groups()}):
            rank_by, fallback = self.ranking(split)
            computed = [leaf.name for leaf in self.leaves(split)]
            if rank_by not in computed and fallback not in computed:
                keys = ("leaderboard.vqa_rank_by",) if split == VQA_SPLIT else ("leaderboard.rank_by",
                                                                                   "leaderboard.fallback_rank_by")
                named = sorted({rank_by, fallback})
                raise ConfigError(f"config {' and '.join(repr(k) for k in keys)}: the {split} leaderboards cannot be "
                                  f"ranked: {' and '.join(map(repr, named))} {'is' if len(named) == 1 else 'are'} "
                                  f"not computed (metrics {self.metrics_for_split(split)} compute {computed}); "
                                  "name a computed leaf, or add its metric")

    def _read_generation(self):
        from radrank import backbones, datasets

        for i, entry in enumerate(self.config.get("generation", [])):
            where = f"config 'generation' entry {i} ({entry.get('model')!r} on {entry.get('dataset')!r})"
            values = {k: (tuple(v) if k == "splits" else v) for k, v in entry.items()}
            gen = Generation(**values, where=where, settings_key=f"generation[{i}].settings")
            for value, what in ((gen.model, "model"), (gen.dataset, "dataset")):
                problem = name_problem(value)
                if problem:
                    raise ConfigError(f"{where}: {what} {problem}")
            if gen.adapter not in datasets.names():
                raise ConfigError(f"{where}: unknown adapter {gen.adapter!r}; known: {datasets.names()}")
            if not gen.backbone and ":" not in gen.generator:
                raise ConfigError(f"{where}: generator {gen.generator!r} is neither a backbone "
                                  f"({backbones.names()}) nor an import path package.module:callable")
            if gen.backbone:  # a wrong setting (or a backend the backbone lacks) fails here, not in the job
                try:
                    merged = backbones.get(gen.generator).settings(gen.settings, gen.settings_key)
                except ConfigError as e:  # "config generation[0].settings.x: …" under the entry's own name
                    raise ConfigError(f"{where}: {str(e).removeprefix('config ')}") from None
                gen = dataclasses.replace(gen, settings=merged)
            if not (self.base_dir / gen.root).is_dir():
                raise ConfigError(f"{where}: root {gen.root} is not a folder")
            path = GENERATED.format(dataset=gen.dataset, split="{split}", model=gen.model) + ".parquet"
            self._add(Submission(gen.model, gen.dataset, path, "", gen.splits, None, gen), where)
        envs = {}
        for sub in self.generations():
            other = envs.setdefault(sub.model, sub.generation.env)
            if other != sub.generation.env:
                raise ConfigError(f"config 'generation': model {sub.model!r} is generated in two environments "
                                  f"({other}, {sub.generation.env}); give the runs different model names")

    def _add(self, sub: Submission, where: str):
        key = (sub.dataset, sub.model)
        if key in self.submissions:
            raise ConfigError(f"{where}: model {sub.model!r} is listed twice for dataset {sub.dataset!r}")
        self.submissions[key] = sub

    # --- what the run holds -----------------------------------------------------------------------
    def submission(self, dataset: str, model: str) -> Submission:
        return self.submissions[dataset, model]

    def generations(self) -> list[Submission]:
        return [s for s in self.submissions.values() if s.generation is not None]

    def generation_of(self, dataset: str, model: str) -> Generation:
        return self.submission(dataset, model).generation

    def generation_envs(self) -> list[str]:
        return sorted({s.generation.env for s in self.generations()})

    def generated_models(self, env: str) -> list[str]:
        return sorted({s.model for s in self.generations() if s.generation.env == env})

    def entries(self):
        """Every (dataset, split, model), sorted."""
        return sorted((d, s, m) for (d, m), sub in self.submissions.items() for s in sub.splits)

    def groups(self):
        """Every (dataset, split) with at least one model, sorted."""
        return sorted({(d, s) for d, s, _ in self.entries()})

    def models_for(self, dataset: str, split: str) -> list[str]:
        return sorted(m for d, s, m in self.entries() if (d, s) == (dataset, split))

    def metrics_for_split(self, split: str) -> list[str]:
        return self.vqa_metric_names if split == VQA_SPLIT else self.metric_names

    def all_metric_names(self) -> list[str]:
        return list(dict.fromkeys(self.metric_names + self.vqa_metric_names))

    def leaves(self, split: str = "findings"):
        return [leaf for name in self.metrics_for_split(split) for leaf in metrics.leaves(name)]

    def scored_splits(self) -> list[str]:
        """Every split that pairs are scored on: the submissions' splits, plus the meta-evaluation
        sets' split when config ``metaeval`` names any set (those pairs go through the same rules)."""
        splits = {s for _, s, _ in self.entries()}
        if self.metaeval_sets:
            splits.add(metaeval.SPLIT)
        return sorted(splits)

    def used_metrics(self) -> list[str]:
        """The configured metrics that score at least one split of this run."""
        used = self.scored_splits()
        return [m for m in self.all_metric_names() if any(m in self.metrics_for_split(s) for s in used)]

    # --- per-metric facts: every rule and input function asks these, from the settings built once ----
    def metric(self, name: str):
        return metrics.get(name)

    def settings_of(self, name: str):
        """The metric's typed settings (defaults filled, checked when the plan was built)."""
        return self.settings[name]

    def env_of(self, name: str) -> str:
        """The environment family a metric is scored in (e.g. the vllm family for ``backend: vllm``)."""
        return self.metric(name).env(self.settings[name])

    def gpus_of(self, name: str) -> int:
        return self.metric(name).gpus(self.settings[name])

    def resources_of(self, name: str):
        return self.metric(name).resources(self.settings[name])

    def identity_of(self, name: str) -> dict:
        """What a metric's scores depend on besides the pairs: its version and the settings that change
        scores. A scoring rule's params: a change of a speed-only setting re-scores nothing."""
        return self.metric(name).identity(self.settings[name])

    def shards(self, name: str) -> int:
        return int((self.config.get("shards") or {}).get(name, 1))

    def in_process(self, name: str) -> bool:
        """Scored in Snakemake's own process (the core family: no interpreter start-up per job); else by a rule
        script in the metric's environment."""
        return self.env_of(name) == "core"

    def score_groups(self, name: str) -> list[tuple[str, str, tuple]]:
        """(dataset, split, models) of every group metric ``name`` scores: each dataset × split whose split it
        applies to, and each meta-evaluation set (scored with the run's metrics as one more group)."""
        groups = [(d, s, tuple(self.models_for(d, s))) for d, s in self.groups() if name in self.metrics_for_split(s)]
        if name in self.metric_names:
            groups += [(metaeval.dataset_name(set_name), metaeval.SPLIT, (metaeval.MODEL,))
                       for set_name in self.metaeval_sets]
        return groups

    def score_rules(self) -> list["ScoreRule"]:
        """One scoring rule per (used metric, group) — a job that loads the metric's model once for the whole
        group — with names that are unique Python identifiers."""
        rules, taken = [], set()
        for name in self.used_metrics():
            for dataset, split, models in self.score_groups(name):
                base = "score_" + "_".join("".join(c if c.isalnum() else "_" for c in part)
                                           for part in (name, dataset, split))
                rule_name, n = base, 1
                while rule_name in taken:
                    n += 1
                    rule_name = f"{base}_{n}"
                taken.add(rule_name)
                rules.append(ScoreRule(rule_name, name, dataset, split, models))
        return rules

    def envs(self) -> list[str]:
        return sorted({self.env_of(m) for m in self.used_metrics()})

    # --- models this run loads ----------------------------------------------------------------------
    def weight_refs(self) -> list:
        """Every :class:`~radrank.runtime.WeightRef` the run's jobs will resolve: each used metric's
        ``weights(settings)`` and each backbone's, the same calls the jobs make."""
        refs = [ref for name in self.used_metrics() for ref in self.metric(name).weights(self.settings[name])]
        refs += self.mrscore.weight_refs() if self.mrscore else []
        return refs + [ref for sub in self.generations() for ref in sub.generation.weights()]

    def check_weights(self) -> None:
        """Fail at once, when the workflow loads, if a model the run needs is not available locally.

        Jobs never download weights: 100 jobs fetching one model at once, or a GPU job finding out after
        a minute of imports that its weights are missing, is what this prevents. Local paths and the
        Hugging Face cache only (no torch, no network; milliseconds); ``RADRANK_WEIGHTS_CHECK=off`` skips it
        (a dry run or a DAG benchmark on a machine without the weights).
        """
        from radrank.runtime import available

        if os.environ.get(WEIGHTS_CHECK_ENV, "").strip().lower() == "off":
            return
        problems = []
        for ref in dict.fromkeys(self.weight_refs()):
            why = available(ref)
            if why:
                problems.append(str(ref.missing(why)))
        if problems:
            raise MissingWeightsError(
                f"{len(problems)} model(s) the config needs are not available locally (checked before any job "
                f"starts; {WEIGHTS_CHECK_ENV}=off skips the check, e.g. for a dry run):\n"
                + "\n".join(f"  - {p}" for p in problems))

    # --- the jobs -----------------------------------------------------------------------------------
    def ingest_job(self, dataset: str, split: str, model: str) -> jobs.Ingest:
        sub = self.submission(dataset, model)
        generated = sub.generation is not None
        return jobs.Ingest(
            dataset=dataset, split=split, model=model,
            # a generated submission is the workflow's own output: its job decides when it changes
            sources_sha256={} if generated else {"submission": self.digest(sub.path),
                                                 **({"reference": self.digest(sub.reference_path)}
                                                    if sub.reference_path else {})},
            # generated references were cut to their section by the generation job
            ref_section=None if generated else self.config["ref_section"].get(split, "full"),
            empty_hypothesis=self.config["empty_hypothesis"], max_chars=self.config["max_report_chars"],
            **self._reference_check(dataset, split))

    def _reference_check(self, dataset: str, split: str) -> dict:
        """The canonical-reference settings an ingest or cases job of ``dataset`` × ``split`` is planned with."""
        canonical = self.canonical_references.get(dataset)
        return {"missing_section": self.config["rexrank_missing_section"],
                "canonical_ref_section": self.config["ref_section"].get(split, "full"),
                "on_mismatch": self.config["references"]["on_mismatch"],
                "canonical_sha256": self.digest(canonical) if canonical else None}

    def cases_job(self, dataset: str, split: str) -> jobs.Cases:
        check = self._reference_check(dataset, split)
        return jobs.Cases(dataset=dataset, split=split, models=tuple(self.models_for(dataset, split)),
                          missing_section=check["missing_section"], ref_section=check["canonical_ref_section"],
                          canonical_sha256=check["canonical_sha256"])

    def score_mem_mb(self, rule: "ScoreRule") -> int:
        """A scoring job holds every model's pairs of its group at once: the metric's memory, plus an allowance
        per model (a 10,000-study test set's pairs take ~10 MB in memory; benchmarks/memory.py)."""
        return self.resources_of(rule.metric).mem_mb + SCORE_MB_PER_MODEL * len(rule.models)

    def score_job(self, rule: "ScoreRule", shard: str | None = None) -> jobs.ScoreGroup:
        return jobs.ScoreGroup(metric=rule.metric, identity=self.identity_of(rule.metric), dataset=rule.dataset,
                               split=rule.split, models=rule.models,
                               shard=None if shard is None else parse_shard(shard))

    def collect_job(self, rule: "ScoreRule") -> jobs.CollectShards:
        return jobs.CollectShards(metric=rule.metric, identity=self.identity_of(rule.metric), models=rule.models)

    def bootstrap_job(self, dataset: str, split: str) -> jobs.Bootstrap:
        boot = self.config["bootstrap"]
        board = self.config["leaderboard"]
        rank_by, fallback = self.ranking(split)
        return jobs.Bootstrap(dataset=dataset, split=split, models=tuple(self.models_for(dataset, split)),
                              metrics=tuple(self.metrics_for_split(split)), n=boot["n"], seed=boot["seed"],
                              level=boot["level"], rank_by=rank_by, fallback_rank_by=fallback,
                              min_coverage=board["min_coverage"], min_common_cases=board["min_common_cases"],
                              missing_cases=board["missing_cases"], judge_failures=board["judge_failures"])

    def ranking(self, split: str) -> tuple[str, str]:
        """(rank_by, fallback_rank_by) of a split's leaderboard: the vqa split has its own leaf."""
        board = self.config["leaderboard"]
        if split == VQA_SPLIT:
            return board["vqa_rank_by"], board["vqa_rank_by"]
        return board["rank_by"], board["fallback_rank_by"]

    def leaderboard_job(self, dataset: str, split: str) -> jobs.Leaderboard:
        rank_by, fallback = self.ranking(split)
        sheet = self.config.get("models")
        return jobs.Leaderboard(dataset=dataset, split=split, models=tuple(self.models_for(dataset, split)),
                                models_sheet_sha256=self.digest(sheet) if sheet else None,
                                rank_by=rank_by, fallback_rank_by=fallback,
                                decimals=self.config["leaderboard"]["decimals"],
                                level=self.config["bootstrap"]["level"],
                                min_common_cases=self.config["leaderboard"]["min_common_cases"],
                                columns=self.config["leaderboard"]["columns"])

    def report_groups(self) -> tuple:
        """((dataset, split, models, metrics), ...): what the report shows, in page order."""
        return tuple((d, s, tuple(self.models_for(d, s)), tuple(self.metrics_for_split(s))) for d, s in self.groups())

    def report_job(self) -> jobs.Report:
        from radrank import provenance

        boot = self.config["bootstrap"]
        return jobs.Report(groups=self.report_groups(),
                           bootstrap={"n": boot["n"], "seed": boot["seed"], "level": boot["level"]},
                           empty_hypothesis=self.config["empty_hypothesis"], cases=self.config["report"]["cases"],
                           metaeval_sets=tuple(self.metaeval_sets),
                           # shown in the provenance section: the report is the one output that describes the run
                           config_hash=provenance.stable_hash(self.identity()))

    def identity(self) -> dict:
        """The config as far as it decides the run's numbers: every metric's settings reduced to the ones that
        change scores and every generation entry's generator to its identity (a new batch size or device is the
        same run); the ``trust_remote_code`` list only as the yes/no each of those holds for its own model."""
        # where cached scores are kept, or the image an environment runs in, changes no number
        where = {"score_cache", "trust_remote_code", "containers"}
        allow = tuple(self.config.get("trust_remote_code") or ())
        generation = []
        for sub in self.generations():
            gen = sub.generation
            entry = {k: v for k, v in dataclasses.asdict(gen).items() if k not in ("settings", "batch_size", "where",
                                                                                 "settings_key")}
            generation.append({**entry, "generator": jobs.generation_identity(gen.generator, gen.settings, allow)})
        return {**{k: v for k, v in self.config.items() if k not in where},
                "metric_settings": {m: self.identity_of(m) for m in self.all_metric_names()},
                "generation": generation}

    def report_mem_mb(self) -> int:
        """The report holds one group's per-sample values at a time in each of its processes: grows with (model,
        group) entries. Measured (benchmarks/report_scale.py, 2 processes): ~330 MB at 100 models × 8 groups,
        ~275 MB at 20 × 8; declared with headroom for longer judge answers."""
        return 1000 + sum(len(self.models_for(d, s)) for d, s in self.groups())

    def bootstrap_mem_mb(self, dataset: str, split: str) -> int:
        """Linear in models × leaves (radrank.stats.bootstrap holds no per-pair copies)."""
        from radrank.stats.bootstrap import memory_mb

        return memory_mb(len(self.models_for(dataset, split)), len(self.leaves(split)), self.config["bootstrap"]["n"])

    def generation_job(self, dataset: str, split: str, model: str, shard: str) -> jobs.Generate:
        gen = self.generation_of(dataset, model)
        vqa = split == VQA_SPLIT
        allow = tuple(self.config["trust_remote_code"])
        return jobs.Generate(
            dataset=gen.dataset, model=gen.model, adapter=gen.adapter, root=gen.root,
            adapter_options=dict(gen.adapter_options), generator=gen.generator,
            identity=jobs.generation_identity(gen.generator, gen.settings, allow), task="vqa" if vqa else "report",
            ref_section="findings" if vqa else self.config["ref_section"].get(split, "findings"),
            use_indication=gen.use_indication, image_format=gen.image_format, max_images=gen.max_images,
            max_samples=gen.max_samples, empty_hypothesis=self.config["empty_hypothesis"],
            max_chars=self.config["max_report_chars"], shard=parse_shard(shard),
            # not params (never a rerun trigger): the job reads them from the config again (Generate.from_params)
            settings=gen.settings, trust_remote_code=allow, batch_size=gen.samples_per_call)

    # --- MRScore training ----------------------------------------------------------------------------
    def mrscore_sources(self) -> list[str]:
        """The file of each configured reference source: a path as given, or a dataset's references — its
        first submission's reference file, else the submission itself (a ReXrank JSON holds its references)."""
        files = []
        for i, src in enumerate(self.mrscore.sources):
            if src.path is not None:
                if not (self.base_dir / src.path).is_file():
                    raise ConfigError(f"config mrscore_training.references[{i}]: file {src.path} does not exist")
                files.append(src.path)
                continue
            subs = sorted((s for (d, _), s in self.submissions.items() if d == src.dataset and s.generation is None),
                          key=lambda s: (s.sheet_row or 0, s.model))
            if not subs:
                raise ConfigError(f"config mrscore_training.references[{i}]: dataset {src.dataset!r} has only "
                                  "generated submissions; name its reference file with {path: ...}")
            files.append(subs[0].reference_path or subs[0].path)
        return files

    def mrscore_targets(self) -> list[str]:
        """What target mrscore_train builds; a ConfigError when the config has no mrscore_training section."""
        from radrank.mrscore_train.config import folder

        if self.mrscore is None:
            raise ConfigError("target mrscore_train needs the config section mrscore_training (docs/mrscore-training.md: \"Training "
                              "MRScore\"; make mrscore-demo runs a complete one)")
        return [f"{folder(self.mrscore.name)}/{f}" for f in ("model/mrscore.json", "model/MODEL_CARD.md",
                                                             "selection.csv")]

    def mrscore_envs(self) -> list[str]:
        m = self.mrscore
        return sorted({m.env_of(p) for p in ("candidates", "rubric", "train")}) if m else []

    def mrscore_job(self, stage: str) -> dict:
        """The params of a training stage's job (:mod:`radrank.mrscore_jobs`)."""
        m = self.mrscore
        params = {"name": m.name, "identity": m.identity(stage)}
        if stage in ("references", "demo"):
            labels = [src.label for src in m.sources]
            params["labels"] = labels
            if stage == "references":
                params["sources_sha256"] = {f: self.digest(f) for f in self.mrscore_sources()}
        if stage == "train":
            params["gpus"] = m.gpus_of("train")
        return params

    def metaeval_pairs_job(self, set_name: str) -> jobs.MetaevalPairs:
        source = self.metaeval_sets[set_name]
        lists = tuple(k for k, v in source.files.items() if isinstance(v, list))
        paths = [p for v in source.files.values() for p in (v if isinstance(v, list) else [v])]
        return jobs.MetaevalPairs(set_name=source.name, reader=source.reader, options=dict(source.options),
                                  files=tuple(k for k in source.files if k not in lists), file_lists=lists,
                                  files_sha256={str(p): self.digest(p) for p in paths if (self.base_dir / p).is_file()})

    def metaeval_agreement_job(self, set_name: str) -> jobs.MetaevalAgreement:
        m = self.config["metaeval"]
        return jobs.MetaevalAgreement(set_name=set_name, metric_names=tuple(self.metric_names),
                                      n_boot=m["n_bootstrap"], seed=m["seed"], level=m["level"],
                                      tie_tolerance=m["tie_tolerance"])


SCHEMA = Path(__file__).resolve().parents[2] / "schemas" / "config.schema.yaml"


def validate_config(config: dict, source: str = "config", memo: str | Path | None = None) -> dict:
    """``config`` checked against schemas/config.schema.yaml and defaulted in place (Snakemake's ``validate``);
    a ConfigError says where (``source``, the key path) and what is wrong. A whole number written as a float
    where the schema wants an integer (``n: 1.0e+3``, which JSON Schema counts as an integer) becomes an int.

    ``memo``: a JSON file remembering the last config that passed, by a digest of its values, the schema and the
    code that checks it (:func:`_validation_key`): the same config again is defaulted from it without loading
    the schema validator (a third of a no-op rerun's DAG build). Only configs of plain JSON values use it."""
    # before the schema: jsonschema formats the whole offending value into its error (an alias bomb would hang
    # there), and NaN passes every minimum and maximum
    size = expanded_size(config, _value_children)
    if size is None or size > MAX_CONFIG_VALUES:
        raise ConfigError(f"{source} {_too_big(size)}")
    _check_finite(config, source)
    key = _validation_key(config) if memo is not None else None
    if key is not None:
        try:
            known = json.loads(Path(memo).read_text())
        except (OSError, ValueError):  # none yet, or cut short: validate
            known = None
        if isinstance(known, dict) and known.get("key") == key and isinstance(known.get("config"), dict):
            config.clear()
            config.update(known["config"])
            return config
    _validate_against_schema(config, source)
    if key is not None:
        _write_memo(Path(memo), {"key": key, "config": config})
    return config


def _validate_against_schema(config: dict, source: str) -> None:
    from snakemake.utils import validate

    try:
        validate(config, str(SCHEMA))
    except Exception as e:  # snakemake's WorkflowError carries jsonschema's message and where it failed
        lines = str(e).splitlines()
        what = next((x.split(": ", 1)[1] for x in lines if x.startswith("ValidationError: ")), lines[0])
        at = next((x.rstrip(":").split("instance", 1)[1] for x in lines if x.startswith("On instance")), "")
        raise ConfigError(f"{source} is invalid{' at ' + at if at else ''}: {_cut(what)}") from None
    _integers(config, _schema())


def _plain_json(value) -> bool:
    """Whether ``value`` is made of JSON's own types only (str keys), so that JSON gives it back unchanged."""
    if isinstance(value, dict):
        return all(type(k) is str and _plain_json(v) for k, v in value.items())
    if type(value) is list:
        return all(_plain_json(v) for v in value)
    return value is None or type(value) in (str, int, float, bool)


def _validation_key(config: dict) -> str | None:
    """What decides :func:`validate_config`'s result: the config's values, the schema, this module's code and
    the versions of the validator's packages; None for a config JSON would not give back (a YAML date, a
    number as a key): it is validated every time."""
    import hashlib
    from importlib import metadata

    if not _plain_json(config):
        return None
    h = hashlib.sha256(json.dumps(config, sort_keys=True, allow_nan=False).encode())
    for path in (SCHEMA, Path(__file__)):
        h.update(path.read_bytes())
    for package in ("snakemake", "jsonschema", "referencing"):
        try:
            h.update(f"{package}=={metadata.version(package)}".encode())
        except metadata.PackageNotFoundError:
            h.update(f"{package} absent".encode())
    return h.hexdigest()


def _write_memo(path: Path, value: dict) -> None:
    """``value`` as JSON at ``path``, atomically (concurrent loads: the last complete write wins); a memo that
    cannot be written is only a slower next load."""
    import tempfile

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError:
        return
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(value, f)
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError):
        Path(tmp).unlink(missing_ok=True)


MAX_CONFIG_VALUES = 1_000_000  # values of a config once its YAML aliases are written out (a config has hundreds)
SHOWN_VALUE_CHARS = 300  # of a schema error's message (it holds the offending value's repr)


def _cut(text: str) -> str:
    if len(text) <= SHOWN_VALUE_CHARS:
        return text
    return f"{text[:SHOWN_VALUE_CHARS]}… ({len(text) - SHOWN_VALUE_CHARS:,} more characters)"


def expanded_size(root, children) -> int | None:
    """How many values ``root`` stands for with every shared value counted each time it appears (a YAML alias
    written out), without writing anything out: each distinct value is visited once. None when a value contains
    itself (a recursive alias). ``children(value)``: the values directly inside it."""
    sizes: dict = {}
    active: set = set()  # on the current path from root
    stack = [(root, False)]
    while stack:
        value, done = stack.pop()
        key = id(value)
        if done:
            active.discard(key)
            sizes[key] = 1 + sum(sizes[id(c)] for c in children(value))
        elif key not in sizes:
            if key in active:
                return None
            active.add(key)
            stack.append((value, True))
            stack.extend((c, False) for c in children(value) if id(c) not in sizes)
    return sizes[id(root)]


def _value_children(value):
    if isinstance(value, dict):
        return [*value.keys(), *value.values()]
    return value if isinstance(value, (list, tuple)) else ()


def _node_children(node):
    import yaml

    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return node.value if isinstance(node, yaml.SequenceNode) else ()


def _too_big(size: int | None) -> str:
    if size is None:
        return "holds a value that contains itself (a recursive YAML alias); write the values out"
    return (f"stands for {size:,} values once its YAML aliases (*name) are written out, over the limit of "
            f"{MAX_CONFIG_VALUES:,} (radrank.workflow.MAX_CONFIG_VALUES): an alias bomb (\"billion laughs\")? "
            "a config has hundreds of values")


def _check_finite(value, source: str, trail: str = "") -> None:
    """A ConfigError naming the key of the first NaN or infinity in the config (YAML ``.nan``, ``.inf``; JSON
    ``NaN``): JSON Schema's bounds are comparisons, all false for NaN, so ``level: .nan`` would pass them."""
    import math

    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{source}: key {trail or '(the whole config)'!r} is {value}; a number in the config must "
                          "be finite (NaN and infinity pass every bound of the schema)")
    if isinstance(value, dict):
        for key, item in value.items():
            _check_finite(item, source, f"{trail}.{key}" if trail else str(key))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_finite(item, source, f"{trail}[{i}]")


@functools.lru_cache(maxsize=1)
def _schema() -> dict:
    import yaml

    return yaml.safe_load(SCHEMA.read_text())


def _integers(value, spec: dict):
    """Turn the integral floats of integer-typed keys into ints, in place (a float count would fail in a job)."""
    if not isinstance(spec, dict):
        return value
    types = spec.get("type")
    types = types if isinstance(types, list) else [types]
    if "integer" in types and "number" not in types and isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        props = spec.get("properties") or {}
        extra = spec.get("additionalProperties")
        for key in list(value):
            sub = props.get(key, extra if isinstance(extra, dict) else None)
            if sub is not None:
                value[key] = _integers(value[key], sub)
    elif isinstance(value, list) and isinstance(spec.get("items"), dict):
        value[:] = [_integers(v, spec["items"]) for v in value]
    return value


def load_config_file(path) -> dict:
    """One config file (YAML, or JSON as Snakemake also reads it) as a dict, read strictly: a key written twice in
    one mapping is a ConfigError naming the file, both lines and the key's path (a YAML loader keeps the last
    copy without a word, so one of two settings would be ignored); so is a file that is not a mapping, and a YAML
    file whose aliases expand to more than :data:`MAX_CONFIG_VALUES` values (an alias bomb, refused from the
    composed node graph before anything is expanded) or that holds a recursive alias."""
    import json

    import yaml

    from radrank.ingest.detect import FileProblem, bom_hint, read_regular

    try:
        data = read_regular(path)
    except FileProblem as e:
        raise ConfigError(f"config file {path} {str(e).removeprefix('file ')}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise ConfigError(f"config file {path} is not valid UTF-8 (byte 0x{data[e.start]:02x} on line {line})"
                          f"{bom_hint(data)}") from None
    try:
        config = json.loads(text, object_pairs_hook=_json_pairs(path))
    except ValueError:  # not JSON: YAML (JSON's own duplicate keys raise a ConfigError, not a ValueError)
        try:
            config = yaml.load(text, Loader=_strict_loader(path))
        except yaml.YAMLError as e:
            raise ConfigError(f"config file {path} is not valid YAML: {' '.join(str(e).split())}") from None
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise ConfigError(f"config file {path} must hold a mapping of keys (key: value), found "
                          f"{type(config).__name__}")
    return config


def _json_pairs(path):
    def hook(pairs):
        out: dict = {}
        for key, value in pairs:
            if key in out:
                raise ConfigError(f"config file {path}: key {key!r} appears twice in one object; which value "
                                  "should count? Write it once")
            out[key] = value
        return out

    return hook


def _strict_loader(path):
    """A yaml.SafeLoader that refuses a key written twice in one mapping (merge keys ``<<`` may still be
    overridden, as YAML intends)."""
    import yaml

    class StrictLoader(yaml.SafeLoader):
        def __init__(self, stream):
            super().__init__(stream)
            self._radrank_aliases: dict = {}  # anchor -> (line of its first alias, its node)

        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):  # where each alias is, for the message of an alias bomb
                event = self.peek_event()
                if event.anchor in self.anchors:
                    self._radrank_aliases.setdefault(event.anchor, (event.start_mark.line + 1,
                                                                    self.anchors[event.anchor]))
            return super().compose_node(parent, index)

        def construct_document(self, node):
            self._radrank_root = node  # where _key_path starts
            # the node graph shares an alias's node, so this counts the expanded values without expanding them
            size = expanded_size(node, _node_children)
            if size is None or size > MAX_CONFIG_VALUES:
                raise ConfigError(f"config file {path}{_biggest_alias(self, size)} {_too_big(size)}")
            return super().construct_document(node)

    def construct_mapping(loader, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = loader.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the base constructor says so
                break
            line = key_node.start_mark.line + 1
            if first is not None:
                raise ConfigError(f"config file {path}, line {line}: key {_key_path(loader, node, key)!r} is "
                                  f"written twice in one mapping (also on line {first}); YAML would keep the "
                                  "last silently: write it once")
            seen[key] = line
        return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)

    StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    return StrictLoader


def _biggest_alias(loader, size) -> str:
    """", line N (alias *a8, standing for M values)" for the alias that stands for the most values."""
    sized = [(expanded_size(node, _node_children) or 0, line, anchor)
             for anchor, (line, node) in loader._radrank_aliases.items()]
    if not sized or size is None:
        return ""
    count, line, anchor = max(sized)
    return f", line {line} (alias *{anchor}, standing for {count:,} values)"


def _key_path(loader, node, key) -> str:
    """``key`` with the keys of the mappings above it (``bootstrap.n``, ``generation[0].model``), found from the
    document's root."""
    import yaml

    def walk(at, trail):
        if at is node:
            return trail
        if isinstance(at, yaml.MappingNode):
            for k, v in at.value:
                found = walk(v, trail + [str(k.value) if isinstance(k, yaml.ScalarNode) else "?"])
                if found is not None:
                    return found
        elif isinstance(at, yaml.SequenceNode):
            for i, v in enumerate(at.value):
                found = walk(v, trail[:-1] + [f"{trail[-1]}[{i}]"] if trail else [f"[{i}]"])
                if found is not None:
                    return found
        return None

    root = getattr(loader, "_radrank_root", None)
    trail = walk(root, []) if root is not None else None
    return ".".join([*(trail or []), str(key)])


def check_config_files(paths) -> None:
    """Read each config file Snakemake loaded (``workflow.configfiles``) strictly (:func:`load_config_file`):
    Snakemake's own loader keeps the last of two copies of a key without a word."""
    for path in dict.fromkeys(map(str, paths)):
        load_config_file(path)


def read_config(files) -> dict:
    """The config of these YAML files (later ones win, key by key), validated and defaulted as the Snakefile does;
    each file read strictly (:func:`load_config_file`: a key written twice is an error)."""
    config: dict = {}
    for path in files:
        if not Path(path).is_file():
            raise ConfigError(f"config file {path} does not exist")
        config.update(load_config_file(path))
    return validate_config(config, f"config {', '.join(map(str, files))}")


def preflight(files) -> list[str]:
    """What a run of these config files needs before anything is built: the plan is built (every setting
    checked), every model it loads looked for (:meth:`Plan.check_weights`); returns its environment families."""
    plan = Plan.load(read_config(files))
    return sorted(set(plan.envs()) | set(plan.generation_envs()) | set(plan.mrscore_envs()))


def parse_shard(shard: str) -> tuple[int, int]:
    """(index, count) of a shard wildcard such as "2-of-8" (0-based index)."""
    index, count = shard.split("-of-")
    return int(index), int(count)

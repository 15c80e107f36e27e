"""The workflow's plan: which (dataset, split, model) jobs exist and what they read.

Built once from the validated config when the Snakefile loads; the rules'
input functions (rules/common.smk) only look things up here, so building the
DAG never opens a submission file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from radrank import metrics
from radrank.errors import ConfigError
from radrank.models import apply_remote_code_allow_list

NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.+-]*"
_NAME_RE = re.compile(rf"^{NAME_PATTERN}$")
SHEET_COLUMNS = ("model", "dataset", "path")
SHEET_OPTIONAL = ("reference_path", "split")
MODEL_COLUMNS = ("model", "name", "date", "institution", "url")


def read_sheet(path, required, optional=()):
    """Read a TSV/CSV sheet as stripped strings; blank cells become "".

    Blank lines and lines starting with ``#`` are skipped. A row with more cells than the header
    (a stray tab or comma) is an error naming the row, its line and the extra cells; empty cells
    after the last column are ignored.
    """
    import csv

    import pandas as pd

    path = Path(path)
    if not path.exists():
        raise ConfigError(f"sheet {path} does not exist")
    sep = "\t" if path.suffix.lower() in (".tsv", ".tab") else ","
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"sheet {path} cannot be read: {e}") from None
    lines = [(n, line) for n, line in enumerate(text.split("\n"), start=1)
             if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        raise ConfigError(f"sheet {path} is empty: it needs a header line {list(required)}")
    try:
        cells = [[c.strip() for c in row] for row in csv.reader((line for _, line in lines), delimiter=sep,
                                                                  strict=True)]
    except csv.Error as e:
        raise ConfigError(f"sheet {path} cannot be read: {e}") from None
    header, body = cells[0], cells[1:]
    what = "tab" if sep == "\t" else "comma"
    rows = []
    for i, ((line_no, _), row) in enumerate(zip(lines[1:], body), start=1):
        extra = row[len(header):]
        if any(extra):
            raise ConfigError(
                f"sheet {path}, row {i} (line {line_no}): {len(row)} cells but the header has {len(header)} "
                f"columns ({', '.join(header)}); extra {extra[:3]} — a stray {what}? Cells are separated by "
                f"one {what}; leave a cell empty, never skip it")
        rows.append(row[:len(header)] + [""] * (len(header) - len(row)))
    df = pd.DataFrame(rows, columns=header, dtype=object)
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise ConfigError(f"sheet {path} lacks column(s) {missing}; it has {list(df.columns)}")
    unknown = [c for c in df.columns if c not in (*required, *optional)]
    if unknown:
        raise ConfigError(f"sheet {path} has unknown column(s) {unknown}; allowed: {[*required, *optional]}")
    for col in optional:
        if col not in df.columns:
            df[col] = ""
    return df


def metric_closure(requested) -> list[str]:
    """Requested metrics plus nothing else, checked: unknown names and missing requirements are errors."""
    known = metrics.names()
    unknown = [m for m in requested if m not in known]
    if unknown:
        raise ConfigError(f"unknown metric(s) {unknown} in config 'metrics'; known metrics: {known}")
    for name in requested:
        missing = [r for r in metrics.get(name).requires if r not in requested]
        if missing:
            raise ConfigError(f"metric {name!r} is computed from {list(metrics.get(name).requires)}; "
                              f"add {missing} to config 'metrics' (or remove {name!r})")
    return list(requested)


GENERATED = "results/generated/{dataset}/{split}/{model}"  # + ".parquet" / ".drops.csv"
GENERIC_GENERATOR_ENV = "gen-base"  # where a user's own callable runs


@dataclass
class Generation:
    """One model run over an image dataset (config ``generation``), with defaults filled in."""

    model: str
    dataset: str
    adapter: str
    root: str
    generator: str
    adapter_options: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    splits: tuple = ("findings",)
    use_indication: bool = False
    image_format: str = "pil"
    max_images: int | None = None
    batch_size: int | None = None  # samples per generator call (None: 8, on vLLM its max_num_seqs)
    max_samples: int | None = None
    shards: int = 1

    @property
    def samples_per_call(self) -> int:
        """The generator's batch: ``batch_size``, else 8 — or, on vLLM, enough samples to fill its
        continuous batch (``max_num_seqs``, 256 by default), since vLLM schedules them itself."""
        if self.batch_size is not None:
            return int(self.batch_size)
        from radrank.backbones.vllm_recipe import VLLM_GENERATION_SETTINGS, uses_vllm

        if uses_vllm(self.settings):
            return int(self.settings.get("max_num_seqs") or VLLM_GENERATION_SETTINGS["max_num_seqs"])
        return 8

    @property
    def env(self) -> str:
        """The generation job's environment family: the backbone's, the vllm family with ``backend: vllm``,
        or gen-base for a user's callable."""
        from radrank import backbones
        from radrank.backbones.vllm_recipe import uses_vllm

        if self.generator not in backbones.names():
            return GENERIC_GENERATOR_ENV
        return metrics.VLLM_ENV if uses_vllm(self.settings) else backbones.get(self.generator).env

    @property
    def gpus(self) -> int:
        from radrank import backbones
        from radrank.backbones.vllm_recipe import gpus_of

        if self.generator not in backbones.names():
            return 0
        return gpus_of(self.settings, backbones.get(self.generator).resources.gpu)


@dataclass
class Submission:
    model: str
    dataset: str
    path: str
    reference_path: str
    splits: tuple[str, ...]
    sheet_row: int | None
    generation: Generation | None = None


@dataclass
class Plan:
    config: dict
    submissions: dict = field(default_factory=dict)  # (dataset, model) -> Submission
    metric_names: list = field(default_factory=list)  # findings and reports splits
    vqa_metric_names: list = field(default_factory=list)  # vqa split

    @classmethod
    def from_config(cls, config: dict, base_dir: str | Path = ".") -> "Plan":
        plan = cls(config=config)
        plan.metric_names = metric_closure(config["metrics"])
        plan.vqa_metric_names = metric_closure(config.get("vqa_metrics", ["vqa"]))
        for key in ("metric_settings", "shards"):
            for name in config.get(key, {}):
                if name not in plan.all_metric_names():
                    raise ConfigError(f"config '{key}' names {name!r}, which is not among the configured metrics")
        apply_remote_code_allow_list(config, plan.all_metric_names())  # the top-level list is the only switch
        plan._read_sheet(base_dir)
        plan._read_generation(base_dir)
        if not plan.submissions:
            raise ConfigError(f"nothing to score: sheet {config['submissions']} lists no submissions and config "
                              "'generation' is empty")
        return plan

    def _read_sheet(self, base_dir):
        config = self.config
        sheet = read_sheet(config["submissions"], SHEET_COLUMNS, SHEET_OPTIONAL)
        splits = tuple(config["splits"])
        for i, row in enumerate(sheet.to_dict("records"), start=1):
            where = f"sheet {config['submissions']}, row {i}"
            for col in ("model", "dataset"):
                if not _NAME_RE.match(row[col]):
                    raise ConfigError(f"{where}: {col} {row[col]!r} must match {NAME_PATTERN} (no spaces or slashes)")
            if not row["path"]:
                raise ConfigError(f"{where}: path is empty")
            for col in ("path", "reference_path"):
                if row[col] and not (Path(base_dir) / row[col]).exists():
                    raise ConfigError(f"{where}: {col} {row[col]} does not exist")
            row_splits = splits
            if row["split"]:
                row_splits = tuple(s.strip() for s in row["split"].split(",") if s.strip())
                bad = [s for s in row_splits if s not in splits]
                if bad:
                    raise ConfigError(f"{where}: split(s) {bad} are not among config 'splits' {list(splits)}")
            self._add(Submission(row["model"], row["dataset"], row["path"], row["reference_path"], row_splits, i),
                      where)

    def _read_generation(self, base_dir):
        from radrank import backbones, datasets

        for i, entry in enumerate(self.config.get("generation", [])):
            where = f"config 'generation' entry {i} ({entry.get('model')!r})"
            gen = Generation(**{k: (tuple(v) if k == "splits" else v) for k, v in entry.items()})
            for value, what in ((gen.model, "model"), (gen.dataset, "dataset")):
                if not _NAME_RE.match(value):
                    raise ConfigError(f"{where}: {what} {value!r} must match {NAME_PATTERN}")
            if gen.adapter not in datasets.names():
                raise ConfigError(f"{where}: unknown adapter {gen.adapter!r}; known: {datasets.names()}")
            if gen.generator not in backbones.names() and ":" not in gen.generator:
                raise ConfigError(f"{where}: generator {gen.generator!r} is neither a backbone "
                                  f"({backbones.names()}) nor an import path package.module:callable")
            if gen.generator in backbones.names():
                from radrank.backbones.base import merge_settings

                try:  # a wrong setting (or a backend the backbone lacks) fails here, not in the job
                    merge_settings(backbones.get(gen.generator), gen.settings)
                except ConfigError as e:
                    raise ConfigError(f"{where}: {e}") from None
            if not (Path(base_dir) / gen.root).is_dir():
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

    # --- lookups used by input functions -------------------------------------------------
    def submission(self, dataset: str, model: str) -> Submission:
        return self.submissions[dataset, model]

    def generations(self) -> list[Submission]:
        return [s for s in self.submissions.values() if s.generation is not None]

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
        return self.vqa_metric_names if split == "vqa" else self.metric_names

    def all_metric_names(self) -> list[str]:
        return list(dict.fromkeys(self.metric_names + self.vqa_metric_names))

    def leaves(self, split: str = "findings"):
        return [leaf for name in self.metrics_for_split(split) for leaf in metrics.get(name).leaves]

    def shards(self, metric: str) -> int:
        return int(self.config.get("shards", {}).get(metric, 1))

    def scored_splits(self) -> list[str]:
        """Every split that pairs are scored on: the submissions' splits, plus the meta-evaluation
        sets' split when config ``metaeval`` names any set (those pairs go through the same rules)."""
        from radrank import metaeval

        splits = {s for _, s, _ in self.entries()}
        if metaeval.sets_from_config(self.config):
            splits.add(metaeval.SPLIT)
        return sorted(splits)

    def _used_metrics(self) -> list[str]:
        used = self.scored_splits()
        return [m for m in self.all_metric_names()
                if any(m in self.metrics_for_split(split) for split in used)]

    # --- per-metric facts: every rule and input function asks these, never the registry directly,
    # so that a metric's settings (e.g. a served model instead of a local one) can change them.
    def env_of(self, metric: str) -> str:
        """The environment family a metric is scored in (the vllm family for ``backend: vllm``)."""
        return metrics.env_for(metric, self.settings_of(metric))

    def gpus_of(self, metric: str) -> int:
        """GPUs one scoring job of ``metric`` asks for (``tensor_parallel_size`` for ``backend: vllm``)."""
        return metrics.gpus_for(metric, self.settings_of(metric))

    def resources_of(self, metric: str):
        """The metric's declared :class:`~radrank.metrics.base.Resources` (memory, runtime, threads)."""
        return metrics.get(metric).resources

    def settings_of(self, metric: str) -> dict:
        """The metric's settings from config ``metric_settings`` (defaults not filled in)."""
        return dict(self.config.get("metric_settings", {}).get(metric, {}))

    def identity_of(self, metric: str) -> dict:
        """What a metric's scores depend on besides its inputs: its version and its settings with defaults
        (which name its model). The scoring rules' params, so that only a change here re-scores."""
        spec = metrics.get(metric)
        return {"version": spec.version, "model": spec.model, "settings": {**spec.settings, **self.settings_of(metric)}}

    def batched(self, metric: str) -> bool:
        """Scored together with the other cheap metrics of a (dataset, split, model) in one job: a CPU metric
        without model, without required scores and without shards, whose job would be mostly start-up."""
        spec = metrics.get(metric)
        return (self.gpus_of(metric) == 0 and spec.model is None and "model" not in spec.settings
                and not spec.requires and self.shards(metric) == 1)

    def batches(self, env: str) -> list[tuple[str, tuple, tuple]]:
        """(rule suffix, splits, metrics) of each batched scoring rule of ``env``: the splits scored with
        the same batched metrics share a rule, suffixed "_vqa" when it serves only the vqa split."""
        by_metrics: dict = {}
        for split in self.scored_splits():
            batch = tuple(self.batched_metrics(split, env))
            if batch:
                by_metrics.setdefault(batch, []).append(split)
        out = [("_vqa" if splits == ["vqa"] else "", tuple(splits), batch) for batch, splits in by_metrics.items()]
        if len({suffix for suffix, _, _ in out}) < len(out):  # more kinds of split than today: name them all
            out = [("_" + "_".join(splits), splits, batch) for _, splits, batch in out]  # splits: a tuple here
        return out

    def batched_metrics(self, split: str, env: str | None = None) -> list[str]:
        """The metrics of ``split`` (of ``env``, if given) scored in its batch job."""
        return [m for m in self.metrics_for_split(split) if self.batched(m) and env in (None, self.env_of(m))]

    def metrics_one_by_one(self) -> list[str]:
        """The used metrics that are not batched: each scored in its own jobs (one rule per metric)."""
        return [m for m in self._used_metrics() if not self.batched(m)]

    def envs(self) -> list[str]:
        return sorted({self.env_of(m) for m in self._used_metrics()})

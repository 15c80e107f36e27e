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

NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.+-]*"
_NAME_RE = re.compile(rf"^{NAME_PATTERN}$")
SHEET_COLUMNS = ("model", "dataset", "path")
SHEET_OPTIONAL = ("reference_path", "split")
MODEL_COLUMNS = ("model", "name", "date", "institution", "url")


def read_sheet(path, required, optional=()):
    """Read a TSV/CSV sheet as strings; blank cells become ""."""
    import pandas as pd

    path = Path(path)
    if not path.exists():
        raise ConfigError(f"sheet {path} does not exist")
    sep = "\t" if path.suffix.lower() in (".tsv", ".tab") else ","
    try:
        df = pd.read_csv(path, sep=sep, dtype=str, keep_default_na=False, comment="#")
    except Exception as e:
        raise ConfigError(f"sheet {path} cannot be read: {e}") from None
    df.columns = [c.strip() for c in df.columns]
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise ConfigError(f"sheet {path} lacks column(s) {missing}; it has {list(df.columns)}")
    unknown = [c for c in df.columns if c not in (*required, *optional)]
    if unknown:
        raise ConfigError(f"sheet {path} has unknown column(s) {unknown}; allowed: {[*required, *optional]}")
    for col in optional:
        if col not in df.columns:
            df[col] = ""
    return df.apply(lambda s: s.str.strip())


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


@dataclass
class Submission:
    model: str
    dataset: str
    path: str
    reference_path: str
    splits: tuple[str, ...]
    sheet_row: int


@dataclass
class Plan:
    config: dict
    submissions: dict = field(default_factory=dict)  # (dataset, model) -> Submission
    metric_names: list = field(default_factory=list)

    @classmethod
    def from_config(cls, config: dict, base_dir: str | Path = ".") -> "Plan":
        plan = cls(config=config)
        plan.metric_names = metric_closure(config["metrics"])
        for key in ("metric_settings", "shards"):
            for name in config.get(key, {}):
                if name not in plan.metric_names:
                    raise ConfigError(f"config '{key}' names {name!r}, which is not in 'metrics'")
        sheet = read_sheet(config["submissions"], SHEET_COLUMNS, SHEET_OPTIONAL)
        if sheet.empty:
            raise ConfigError(f"sheet {config['submissions']} lists no submissions")
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
            key = (row["dataset"], row["model"])
            if key in plan.submissions:
                raise ConfigError(f"{where}: model {row['model']!r} is listed twice for dataset {row['dataset']!r}")
            plan.submissions[key] = Submission(row["model"], row["dataset"], row["path"], row["reference_path"],
                                               row_splits, i)
        return plan

    # --- lookups used by input functions -------------------------------------------------
    def submission(self, dataset: str, model: str) -> Submission:
        return self.submissions[dataset, model]

    def entries(self):
        """Every (dataset, split, model), sorted."""
        return sorted((d, s, m) for (d, m), sub in self.submissions.items() for s in sub.splits)

    def groups(self):
        """Every (dataset, split) with at least one model, sorted."""
        return sorted({(d, s) for d, s, _ in self.entries()})

    def models_for(self, dataset: str, split: str) -> list[str]:
        return sorted(m for d, s, m in self.entries() if (d, s) == (dataset, split))

    def leaves(self):
        return [leaf for name in self.metric_names for leaf in metrics.get(name).leaves]

    def shards(self, metric: str) -> int:
        return int(self.config.get("shards", {}).get(metric, 1))

    def metrics_for_env(self, env: str, sharded: bool | None = None) -> list[str]:
        """Metrics of ``env``; ``sharded`` selects those scored in one job (False) or several (True)."""
        return [m for m in self.metric_names if metrics.get(m).env == env
                and (sharded is None or (self.shards(m) > 1) == sharded)]

    def envs(self) -> list[str]:
        return sorted({metrics.get(m).env for m in self.metric_names})

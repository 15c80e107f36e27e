import sys
from pathlib import Path

from snakemake.utils import validate

# Rule scripts and input functions import the package from this checkout, so the
# workflow and its library can never be of different versions.
sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from radrank import metrics, provenance
from radrank.workflow import NAME_PATTERN, Plan


validate(config, "../schemas/config.schema.yaml")
PLAN = Plan.from_config(config)
CONFIG_HASH = provenance.stable_hash(config)


wildcard_constraints:
    dataset=NAME_PATTERN,
    model=NAME_PATTERN,
    split="findings|reports",
    metric="|".join(metrics.names()),
    shard=r"\d+-of-\d+",


# --- paths -------------------------------------------------------------------------------
PAIRS = "results/pairs/{dataset}/{split}/{model}.parquet"
DROPS = "results/pairs/{dataset}/{split}/{model}.drops.csv"
SCORES = "results/scores/{dataset}/{split}/{model}/{metric}.parquet"
SCORE_SHARD = "results/scores/{dataset}/{split}/{model}/{metric}.shards/{shard}.parquet"
STATS = "results/stats/{dataset}/{split}"
SUMMARY = "results/summary/{dataset}/{split}/{model}"
LEADERBOARD = "results/leaderboard/{dataset}_{split}.csv"


# --- input functions ---------------------------------------------------------------------
def submission_files(wildcards):
    sub = PLAN.submission(wildcards.dataset, wildcards.model)
    files = {"submission": sub.path}
    if sub.reference_path:
        files["reference"] = sub.reference_path
    return files


def ingest_job(wildcards):
    sub = PLAN.submission(wildcards.dataset, wildcards.model)
    return {
        "dataset": wildcards.dataset,
        "model": wildcards.model,
        "split": wildcards.split,
        "path": sub.path,
        "reference_path": sub.reference_path,
        "ref_section": config["ref_section"].get(wildcards.split, "full"),
        "empty_hypothesis": config["empty_hypothesis"],
        "max_chars": config["max_report_chars"],
    }


def score_inputs(wildcards):
    files = {"pairs": PAIRS.format(**wildcards)}
    for required in metrics.get(wildcards.metric).requires:
        files[required] = SCORES.format(**{**wildcards, "metric": required})
    return files


def shard_of(wildcards):
    """(index, count) of a shard wildcard such as "2-of-8" (0-based index)."""
    index, count = wildcards.shard.split("-of-")
    return [int(index), int(count)]


def shard_files(wildcards):
    count = PLAN.shards(wildcards.metric)
    return [SCORE_SHARD.format(**wildcards, shard=f"{i}-of-{count}") for i in range(count)]


def metric_settings(wildcards):
    return config["metric_settings"].get(wildcards.metric, {})


def metric_mem_mb(wildcards, attempt):
    return metrics.get(wildcards.metric).resources.mem_mb * attempt


def metric_runtime(wildcards, attempt):
    return metrics.get(wildcards.metric).resources.runtime_min * attempt


def metric_gpus(wildcards):
    return metrics.get(wildcards.metric).resources.gpu


def metric_threads(wildcards):
    return metrics.get(wildcards.metric).resources.threads


def score_paths_by_model(wildcards):
    return {
        model: [
            SCORES.format(dataset=wildcards.dataset, split=wildcards.split, model=model, metric=metric)
            for metric in PLAN.metric_names
        ]
        for model in PLAN.models_for(wildcards.dataset, wildcards.split)
    }


def stats_inputs(wildcards):
    return [p for paths in score_paths_by_model(wildcards).values() for p in paths]


def drops_by_model(wildcards):
    return {
        model: DROPS.format(dataset=wildcards.dataset, split=wildcards.split, model=model)
        for model in PLAN.models_for(wildcards.dataset, wildcards.split)
    }


def leaderboard_inputs(wildcards):
    files = {
        "summary": f"{STATS}/summary.parquet".format(**wildcards),
        "drops": list(drops_by_model(wildcards).values()),
    }
    if config["models"]:
        files["models_sheet"] = config["models"]
    return files


def report_inputs(wildcards):
    groups = PLAN.groups()
    return {
        "leaderboards": [LEADERBOARD.format(dataset=d, split=s) for d, s in groups],
        "comparisons": [f"{STATS}/comparisons.parquet".format(dataset=d, split=s) for d, s in groups],
    }


def all_targets():
    targets = [LEADERBOARD.format(dataset=d, split=s) for d, s in PLAN.groups()]
    targets += [f"{SUMMARY}/results_summary.csv".format(dataset=d, split=s, model=m) for d, s, m in PLAN.entries()]
    targets += ["results/report/report.md", "results/report/report.html"]
    return targets

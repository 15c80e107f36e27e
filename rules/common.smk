import sys
from pathlib import Path

from snakemake.utils import validate

# Rule scripts and input functions import the package from this checkout, so the
# workflow and its library can never be of different versions.
sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from radrank import metrics, provenance
from radrank.workflow import GENERATED, NAME_PATTERN, Plan


validate(config, "../schemas/config.schema.yaml")
PLAN = Plan.from_config(config)
CONFIG_HASH = provenance.stable_hash(config)


wildcard_constraints:
    dataset=NAME_PATTERN,
    model=NAME_PATTERN,
    split="findings|reports|vqa",
    metric="|".join(metrics.names()),
    shard=r"\d+-of-\d+",


# --- paths -------------------------------------------------------------------------------
PAIRS = "results/pairs/{dataset}/{split}/{model}.parquet"
DROPS = "results/pairs/{dataset}/{split}/{model}.drops.csv"
SCORES = "results/scores/{dataset}/{split}/{model}/{metric}.parquet"
SCORE_SHARD = "results/scores/{dataset}/{split}/{model}/{metric}.shards/{shard}.parquet"
STATS = "results/stats/{dataset}/{split}"
SUMMARIES = "results/summary/{dataset}/{split}"  # + /{model}/results.csv, ... (written by the bootstrap job)
LEADERBOARD = "results/leaderboard/{dataset}_{split}.csv"
GENERATED_SHARD = f"{GENERATED}.shards/{{shard}}"  # + ".parquet" / ".drops.csv"


# --- input functions ---------------------------------------------------------------------
def submission_files(wildcards):
    sub = PLAN.submission(wildcards.dataset, wildcards.model)
    if sub.generation is not None:
        generated = GENERATED.format(**wildcards)
        return {"submission": f"{generated}.parquet", "generated_drops": f"{generated}.drops.csv"}
    files = {"submission": sub.path}
    if sub.reference_path:
        files["reference"] = sub.reference_path
    return files


def ingest_job(wildcards):
    sub = PLAN.submission(wildcards.dataset, wildcards.model)
    generated = sub.generation is not None
    return {
        "dataset": wildcards.dataset,
        "model": wildcards.model,
        "split": wildcards.split,
        "path": submission_files(wildcards)["submission"],
        "reference_path": sub.reference_path,
        "generated_drops": submission_files(wildcards)["generated_drops"] if generated else None,
        # generated references were cut to their section by the generation job
        "ref_section": None if generated else config["ref_section"].get(wildcards.split, "full"),
        "empty_hypothesis": config["empty_hypothesis"],
        "max_chars": config["max_report_chars"],
    }


# Scoring reads a PAIRS file, whatever wrote it (ingest, generation, meta-evaluation sets), and never
# looks up the submission. Per-metric facts come from the Plan (env_of, gpus_of, identity_of, ...).
def required_scores(metric):
    """The SCORES files a metric reads besides the pairs (e.g. RadCliQ's components), by metric name."""
    return {required: SCORES.replace("{metric}", required) for required in metrics.get(metric).requires}


class PerAttempt:
    """A resource that grows with the attempt: ``base`` × attempt (the SLURM profile retries failed jobs)."""

    def __init__(self, base):
        self.base = base

    def __call__(self, wildcards, attempt):
        return self.base * attempt


def shard_of(wildcards):
    """(index, count) of a shard wildcard such as "2-of-8" (0-based index)."""
    index, count = wildcards.shard.split("-of-")
    return [int(index), int(count)]


def shard_files(wildcards):
    count = PLAN.shards(wildcards.metric)
    return [SCORE_SHARD.format(**wildcards, shard=f"{i}-of-{count}") for i in range(count)]


def batch_outputs(metric_names):
    """One SCORES file per metric, named by the metric."""
    return {m: SCORES.replace("{metric}", m) for m in metric_names}


def score_paths_by_model(wildcards):
    return {
        model: [
            SCORES.format(dataset=wildcards.dataset, split=wildcards.split, model=model, metric=metric)
            for metric in PLAN.metrics_for_split(wildcards.split)
        ]
        for model in PLAN.models_for(wildcards.dataset, wildcards.split)
    }


def pairs_by_model(wildcards):
    return {
        model: PAIRS.format(dataset=wildcards.dataset, split=wildcards.split, model=model)
        for model in PLAN.models_for(wildcards.dataset, wildcards.split)
    }


def stats_inputs(wildcards):
    return {
        "scores": [p for paths in score_paths_by_model(wildcards).values() for p in paths],
        "pairs": list(pairs_by_model(wildcards).values()),
        "drops": list(drops_by_model(wildcards).values()),
    }


def bootstrap_mem_mb(wildcards, attempt):
    """Linear in models × leaves (radrank.stats.bootstrap holds no per-pair copies); see README "Statistics"."""
    from radrank.stats.bootstrap import memory_mb

    n_models = len(PLAN.models_for(wildcards.dataset, wildcards.split))
    return memory_mb(n_models, len(PLAN.leaves(wildcards.split)), config["bootstrap"]["n"]) * attempt


def split_metrics(wildcards):
    return PLAN.metrics_for_split(wildcards.split)


def ranking(wildcards):
    board = dict(config["leaderboard"])
    if wildcards.split == "vqa":
        board["rank_by"] = board["fallback_rank_by"] = board["vqa_rank_by"]
    return board


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
    targets += [SUMMARIES.format(dataset=d, split=s) for d, s in PLAN.groups()]
    targets += ["results/report/report.md", "results/report/report.html"]
    return targets


# --- generation (config `generation`) ------------------------------------------------------
def generation_of(wildcards):
    return PLAN.submission(wildcards.dataset, wildcards.model).generation


def generation_job(wildcards):
    gen = generation_of(wildcards)
    vqa = wildcards.split == "vqa"
    return {
        "model": gen.model,
        "adapter": gen.adapter,
        "root": gen.root,
        "adapter_options": gen.adapter_options,
        "generator": gen.generator,
        "settings": gen.settings,
        "trust_remote_code": config["trust_remote_code"],
        "task": "vqa" if vqa else "report",
        "ref_section": "findings" if vqa else config["ref_section"].get(wildcards.split, "findings"),
        "use_indication": gen.use_indication,
        "image_format": gen.image_format,
        "max_images": gen.max_images,
        "batch_size": gen.batch_size,
        "max_samples": gen.max_samples,
        "empty_hypothesis": config["empty_hypothesis"],
        "max_chars": config["max_report_chars"],
        "shard": shard_of(wildcards),
        "config_hash": CONFIG_HASH,
    }


def generation_gpus(wildcards):
    return generation_of(wildcards).gpus


def generated_shards(wildcards):
    count = generation_of(wildcards).shards
    shards = [GENERATED_SHARD.format(**wildcards, shard=f"{i}-of-{count}") for i in range(count)]
    return {"pairs": [f"{s}.parquet" for s in shards], "drops": [f"{s}.drops.csv" for s in shards]}

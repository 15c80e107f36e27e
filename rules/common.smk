import sys
from pathlib import Path

from snakemake.utils import validate

# Rule scripts and input functions import the package from this checkout, so the
# workflow and its library can never be of different versions.
sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from radrank import metaeval, metrics, provenance, rule_calls
from radrank.models import check_workflow_weights
from radrank.workflow import GENERATED, NAME_PATTERN, Plan


validate(config, "../schemas/config.schema.yaml")
PLAN = Plan.from_config(config)
check_workflow_weights(PLAN)  # a missing model fails here, in seconds, not a minute into a job
METAEVAL_SETS = metaeval.sets_from_config(config)


wildcard_constraints:
    dataset=NAME_PATTERN,
    model=NAME_PATTERN,
    split="findings|reports|vqa|metaeval",
    metaeval_set=NAME_PATTERN,
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
RANKS = f"{STATS}/ranks.parquet"
GENERATED_SHARD = f"{GENERATED}.shards/{{shard}}"  # + ".parquet" / ".drops.csv"
METAEVAL = "results/metaeval/{metaeval_set}"
# A meta-evaluation set is scored as dataset metaeval-<set>, split metaeval, model candidates.
METAEVAL_PAIRS = PAIRS.format(dataset=f"{metaeval.DATASET_PREFIX}{{metaeval_set}}", split=metaeval.SPLIT,
                              model=metaeval.MODEL)


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
        "replicates": f"{STATS}/replicates.parquet".format(**wildcards),
        "comparisons": f"{STATS}/comparisons.parquet".format(**wildcards),
        "drops": list(drops_by_model(wildcards).values()),
    }
    if config["models"]:
        files["models_sheet"] = config["models"]
    return files


def report_layout(wildcards):
    """Every file the report reads, per dataset × split and model (score files: one per metric)."""
    layout = []
    for dataset, split in PLAN.groups():
        group = {"dataset": dataset, "split": split}
        stats = STATS.format(**group)
        models = {}
        for model in PLAN.models_for(dataset, split):
            entry = {**group, "model": model}
            models[model] = {
                "pairs": PAIRS.format(**entry),
                "drops": DROPS.format(**entry),
                "scores": {m: SCORES.format(**entry, metric=m) for m in PLAN.metrics_for_split(split)},
            }
        layout.append({**group, "leaderboard": LEADERBOARD.format(**group), "ranks": RANKS.format(**group),
                       "summary": f"{stats}/summary.parquet", "comparisons": f"{stats}/comparisons.parquet",
                       "models": models})
    return layout


def report_mem_mb(wildcards, attempt):
    """The report holds every model's per-sample values of every group: grows with (model, group) entries."""
    entries = sum(len(PLAN.models_for(d, s)) for d, s in PLAN.groups())
    return (1000 + 4 * entries) * attempt


def report_inputs(wildcards):
    files = []
    for group in report_layout(wildcards):
        files += [group[k] for k in ("leaderboard", "ranks", "summary", "comparisons")]
        for entry in group["models"].values():
            files += [entry["pairs"], entry["drops"], *entry["scores"].values()]
    files += metaeval_agreement_files(wildcards)
    return files


def all_targets():
    targets = [LEADERBOARD.format(dataset=d, split=s) for d, s in PLAN.groups()]
    targets += [SUMMARIES.format(dataset=d, split=s) for d, s in PLAN.groups()]
    targets += ["results/report/report.md", "results/report/report.html"]
    return targets + metaeval_targets()


# --- meta-evaluation (config `metaeval`) ---------------------------------------------------
def metaeval_targets():
    outputs = ("agreement.csv", "metric_comparisons.csv", "scores.parquet")
    return [f"{METAEVAL}/{name}".format(metaeval_set=s) for s in METAEVAL_SETS for name in outputs]


def metaeval_agreement_files(wildcards):
    """The agreement table of every meta-evaluation set (the report's "Can these metrics be trusted?")."""
    return [f"{METAEVAL}/agreement.csv".format(metaeval_set=s) for s in METAEVAL_SETS]


def metaeval_files(wildcards):
    return METAEVAL_SETS[wildcards.metaeval_set].files


def metaeval_pairs_job(wildcards):
    source = METAEVAL_SETS[wildcards.metaeval_set]
    return {"set_name": source.name, "reader": source.reader, "files": source.files, "options": source.options}


def metaeval_agreement_inputs(wildcards):
    dataset = metaeval.dataset_name(wildcards.metaeval_set)
    return {
        "item_table": f"{METAEVAL}/items.parquet".format(**wildcards),
        "scores": [SCORES.format(dataset=dataset, split=metaeval.SPLIT, model=metaeval.MODEL, metric=m)
                   for m in PLAN.metric_names],
    }


def metaeval_agreement_job(wildcards):
    settings = config["metaeval"]
    return {"metric_names": PLAN.metric_names, "n_boot": settings["n_bootstrap"], "seed": settings["seed"],
            "level": settings["level"], "tie_tolerance": settings["tie_tolerance"]}


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
        "batch_size": gen.samples_per_call,
        "max_samples": gen.max_samples,
        "empty_hypothesis": config["empty_hypothesis"],
        "max_chars": config["max_report_chars"],
        "shard": shard_of(wildcards),
    }


def generation_gpus(wildcards):
    return generation_of(wildcards).gpus


def generated_shards(wildcards):
    count = generation_of(wildcards).shards
    shards = [GENERATED_SHARD.format(**wildcards, shard=f"{i}-of-{count}") for i in range(count)]
    return {"pairs": [f"{s}.parquet" for s in shards], "drops": [f"{s}.drops.csv" for s in shards]}

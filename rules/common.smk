import atexit
import os
import sys
from pathlib import Path
from types import SimpleNamespace

# Rule scripts and input functions import the package from this checkout, so the
# workflow and its library can never be of different versions.
sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from radrank import jobs, metaeval, metrics, mrscore_jobs, scheduler_timers, score_cache, snakemake_checksums, workers
from radrank import snakemake_backups, snakemake_exit
from radrank import garbage_collector
from radrank.mrscore_train import config as mrscore_config
from radrank.errors import RadrankError
from radrank.workflow import GENERATED, NAME_PATTERN, Plan, check_config_files, validate_config

# this process's DAG and bookkeeping walked by the garbage collector less often (radrank.garbage_collector)
garbage_collector.tune()

try:
    # The config files Snakemake loaded (the Snakefile's configfile and any --configfile), read again strictly:
    # Snakemake's loader keeps the last of two copies of a key without a word.
    check_config_files(workflow.configfiles)
    # The config checked against its schema (and defaulted), every setting checked and every model looked
    # for, once, before any job starts.
    PLAN = Plan.load(
        validate_config(config, memo=".snakemake/radrank/config.json"), digest_memo=".snakemake/radrank/digests.json"
    )
except RadrankError as e:
    sys.exit(f"radrank: {e}")  # the one clear message, without a traceback
for warning in PLAN.warnings:
    print(f"radrank: warning: {warning}", file=sys.stderr)
# each input's checksum read once per file version, not once per output of its job, nor again in the next run
# while the file is unchanged (radrank.snakemake_checksums)
snakemake_checksums.memoise(store=".snakemake/radrank/checksums.json")
atexit.register(snakemake_checksums.save)
# the update() outputs' backups before a job are hard links, not copies of every model's files (radrank.snakemake_backups)
snakemake_backups.link_backups()
# one scheduler wake-up timer waiting at a time, not one more chain per finished job (radrank.scheduler_timers)
scheduler_timers.one_pending_reevaluation()
# the process ends without its interpreter's teardown of every module and object (radrank.snakemake_exit)
snakemake_exit.install()
atexit.register(PLAN.digests.save)  # the files hashed for this DAG are not read again until they change
# one id for the run's jobs (they inherit it, on SLURM too): `radrank cache info` shows the last run's hit rates
os.environ.setdefault(score_cache.RUN_ENV_VAR, score_cache.new_run_id())
# the jobs' worker processes' server starts importing now, while Snakemake reads on and builds the DAG
workers.prestart(workflow)


wildcard_constraints:
    dataset=NAME_PATTERN,
    model=NAME_PATTERN,
    split="findings|reports|vqa|metaeval",
    metaeval_set=NAME_PATTERN,
    metric="|".join(metrics.names()),
    shard=r"\d+-of-\d+",


# --- paths -------------------------------------------------------------------------------------------
PAIRS = "results/pairs/{dataset}/{split}/{model}.parquet"
DROPS = "results/pairs/{dataset}/{split}/{model}.drops.csv"
CASES = "results/cases/{dataset}/{split}.parquet"  # the dataset's case set, once its submissions agree (rule cases)
ACCOUNTING = "results/cases/{dataset}/{split}.accounting"  # + .parquet / .csv: per model, what it lacks of the set
# a metric's score files of one group: one folder, the scoring job's one output (a job with an output per model
# cost Snakemake a record and an incomplete-marker file per model, most of a new submission's cost outside its jobs)
SCORE_DIR = "results/scores/{dataset}/{split}/{metric}"
SCORES = f"{SCORE_DIR}/{{model}}.parquet"  # one model's, in its metric's folder (jobs.model_score_paths)
SCORE_SHARD = "results/scores/{dataset}/{split}/.shards/{metric}/{shard}.parquet"  # a group's slice of its pairs
STATS = "results/stats/{dataset}/{split}"
SUMMARIES = "results/summary/{dataset}/{split}"  # + /{model}/results.csv, ... (written by the bootstrap job)
LEADERBOARD = "results/leaderboard/{dataset}_{split}.csv"
RANKS = f"{STATS}/ranks.parquet"
REPORT = "results/report"
GENERATED_SHARD = f"{GENERATED}.shards/{{shard}}"  # + ".parquet" / ".drops.csv"
METAEVAL = "results/metaeval/{metaeval_set}"
# A meta-evaluation set is scored as dataset metaeval-<set>, split metaeval, model candidates.
METAEVAL_PAIRS = PAIRS.format(
    dataset=f"{metaeval.DATASET_PREFIX}{{metaeval_set}}", split=metaeval.SPLIT, model=metaeval.MODEL
)
METAEVAL_OUTPUTS = ("agreement.csv", "metric_comparisons.csv", "scores.parquet")
# MRScore training (config mrscore_training): every stage's output under one folder of the run's name
MRSCORE = mrscore_config.folder(PLAN.mrscore.name) if PLAN.mrscore else None


def family_image(family):
    """The Apptainer image a family's rules run in (config `containers`, `{family}` filled in: one built from
    envs/containers/<family>.def); None when unset, so no rule has an image and every route is as without."""
    template = config.get("containers")
    return template.format(family=family) if template else None


class PerAttempt:
    """A resource that grows with the attempt: ``base`` × attempt (the SLURM profile retries failed jobs)."""

    def __init__(self, base):
        self.base = base

    def __call__(self, wildcards, attempt):
        return (self.base(wildcards) if callable(self.base) else self.base) * attempt


# --- input functions (the Plan answers; these only lay its answers out as paths) -----------------------
def submission_files(w):
    sub = PLAN.submission(w.dataset, w.model)
    if sub.generation is not None:
        generated = GENERATED.format(**w)
        return {"submission": f"{generated}.parquet", "generated_drops": f"{generated}.drops.csv"}
    return {
        "submission": sub.path,
        **({"reference": sub.reference_path} if sub.reference_path else {}),
        **canonical_file(w),
    }


def canonical_file(w):
    """The dataset's canonical references (config references.files), if it names them."""
    path = PLAN.canonical_references.get(w.dataset)
    return {"canonical": path} if path else {}


def group_score_files(r):
    """A scoring rule's files (workflow.ScoreRule): its input (every model's pairs and the score folders of the
    metrics it reads), its metric's score folder, and its shards' files."""
    group = {"dataset": r.dataset, "split": r.split}

    def per_model(template, **more):
        return [template.format(**group, model=m, **more) for m in r.models]

    count = PLAN.shards(r.metric)
    shard = SCORE_SHARD.format(**group, metric=r.metric, shard="{shard}")
    # a group's cases are checked (rule cases) before any of its pairs is scored
    checked = {} if r.split == metaeval.SPLIT else {"cases": CASES.format(**group)}
    return {
        "input": {
            "pairs": per_model(PAIRS),
            **checked,
            **{req: SCORE_DIR.format(**group, metric=req) for req in metrics.get(r.metric).requires},
        },
        "score_dir": SCORE_DIR.format(**group, metric=r.metric),
        "shard": shard,
        "shards": [shard.format(shard=f"{i}-of-{count}") for i in range(count)],
    }


def each_model(template, w, **fixed):
    return [template.format(**w, model=m, **fixed) for m in PLAN.models_for(w.dataset, w.split)]


def group_score_dirs(w):
    return [SCORE_DIR.format(**w, metric=x) for x in PLAN.metrics_for_split(w.split)]


def report_inputs(w):
    """The report's files by name (jobs.Report.inputs): per group its leaderboard, ranks and statistics, and per
    model its pairs, drops and score files; the meta-evaluation sets' agreement tables."""
    layout = []
    for dataset, split, models, metric_names in PLAN.report_groups():
        g = {"dataset": dataset, "split": split}
        layout.append(
            {
                "leaderboard": LEADERBOARD.format(**g),
                "ranks": RANKS.format(**g),
                "summary": f"{STATS}/summary.parquet".format(**g),
                "comparisons": f"{STATS}/comparisons.parquet".format(**g),
                "models": {
                    m: {
                        "pairs": PAIRS.format(**g, model=m),
                        "drops": DROPS.format(**g, model=m),
                        "scores": {x: SCORES.format(**g, model=m, metric=x) for x in metric_names},
                    }
                    for m in models
                },
            }
        )
    return jobs.Report.inputs(layout, [f"{METAEVAL}/agreement.csv".format(metaeval_set=s) for s in PLAN.metaeval_sets])


def report_pages():
    """The file names of the group pages beside report.html, in page order (jobs.Report.page_name)."""
    return [jobs.Report.page_name(dataset, split) for dataset, split, *_ in PLAN.report_groups()]


def threaded(params, threads):
    """A job's params with the threads Snakemake gave it (``processes``): how many build at once, no identity."""
    return SimpleNamespace(job={**params.job, "processes": threads})


def metaeval_score_dirs(w):
    return [
        SCORE_DIR.format(dataset=metaeval.dataset_name(w.metaeval_set), split=metaeval.SPLIT, metric=m)
        for m in PLAN.metric_names
    ]


def generated_shards(w):
    shards = [
        GENERATED_SHARD.format(**w, shard=f"{i}-of-{PLAN.generation_of(w.dataset, w.model).shards}")
        for i in range(PLAN.generation_of(w.dataset, w.model).shards)
    ]
    return {"pairs": [f"{s}.parquet" for s in shards], "drops": [f"{s}.drops.csv" for s in shards]}


def demo_model_files(*names):
    """The built demo models (their config.json) a training stage loads; none without demo_models."""
    if not PLAN.mrscore.demo_models:
        return {}
    return {m: f"{mrscore_config.demo_dir(PLAN.mrscore.name)}/{m}/config.json" for m in names}


def all_targets():
    targets = [LEADERBOARD.format(dataset=d, split=s) for d, s in PLAN.groups()]
    targets += [SUMMARIES.format(dataset=d, split=s) for d, s in PLAN.groups()]
    targets += [f"{REPORT}/report.md", f"{REPORT}/report.html"]
    return targets + metaeval_targets()


def metaeval_targets():
    return [f"{METAEVAL}/{name}".format(metaeval_set=s) for s in PLAN.metaeval_sets for name in METAEVAL_OUTPUTS]

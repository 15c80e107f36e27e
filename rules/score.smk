# Scoring rules, generated from the Plan (src/radrank/workflow.py), which answers every question about a
# metric from its settings built once: environment, GPUs, resources, identity. Every rule reads a PAIRS
# file, whatever wrote it (ingest, generation, meta-evaluation sets).
#
# * The cheap core-family metrics of one (dataset, split, model) are scored in ONE job, in Snakemake's
#   own process (score_core_batch, one SCORES file each): their own work is a fraction of a job's start-up.
# * Every other metric has its own rule, score_<metric> (one job per dataset, split, model), and with
#   config `shards` score_<metric>_shard (one job per slice) plus merge_shards.
# Rules are per metric so that a metric's params, threads and GPUs are fixed when the workflow loads, and
# the params hold only the metric's identity (version and the settings that change scores): a change to a
# speed-only setting (batch_size, device), the bootstrap or the leaderboard re-scores nothing.
for suffix, batch_splits, batch_metrics in PLAN.batches():

    rule:
        name:
            f"score_core_batch{suffix}"
        input:
            pairs=PAIRS,
        output:
            **{m: SCORES.replace("{metric}", m) for m in batch_metrics},
        log:
            f"logs/score/{{dataset}}/{{split}}/{{model}}/batch{suffix}.log",
        wildcard_constraints:
            split="|".join(batch_splits),
        params:
            job=PLAN.batch_job(batch_metrics).params(),
        threads: max(PLAN.resources_of(m).threads for m in batch_metrics)
        resources:
            # the metrics run one after another: the largest one's memory, the sum of their runtimes
            mem_mb=PerAttempt(max(PLAN.resources_of(m).mem_mb for m in batch_metrics)),
            runtime=PerAttempt(sum(PLAN.resources_of(m).runtime_min for m in batch_metrics)),
            gpu=0,
        run:
            jobs.run_in_process(jobs.ScoreBatch, rule, params, input, output, log, config)


for metric_name in PLAN.metrics_one_by_one():
    env_name = PLAN.env_of(metric_name)
    needs = PLAN.resources_of(metric_name)
    sharded = PLAN.shards(metric_name) > 1

    rule:
        name:
            f"score_{metric_name}" + ("_shard" if sharded else "")
        input:
            pairs=PAIRS,
            **required_scores(metric_name),
        output:
            scores=(SCORE_SHARD if sharded else SCORES).replace("{metric}", metric_name),
        log:
            f"logs/score/{{dataset}}/{{split}}/{{model}}/{metric_name}" + (".{shard}" if sharded else "") + ".log",
        params:
            job=(lambda w, m=metric_name: PLAN.score_job(m, w.shard).params()) if sharded
            else PLAN.score_job(metric_name).params(),
        threads: needs.threads
        resources:
            mem_mb=PerAttempt(needs.mem_mb),
            runtime=PerAttempt(needs.runtime_min),
            gpu=PLAN.gpus_of(metric_name),
        conda:
            f"../envs/{env_name}.yaml"
        envmodules:
            f"radrank/{env_name}",
        script:
            "../scripts/score.py"


if any(PLAN.shards(m) > 1 for m in PLAN.metric_names):

    rule merge_shards:
        """Join a metric's shards, in order, into its per-sample score file."""
        input:
            pairs=PAIRS,
            shards=shard_files,
        output:
            scores=SCORES,
        log:
            "logs/score/{dataset}/{split}/{model}/{metric}.merge.log",
        wildcard_constraints:
            metric="|".join(m for m in PLAN.metric_names if PLAN.shards(m) > 1),
        params:
            job=jobs.MergeShards().params(),
        resources:
            mem_mb=2000,
            runtime=10,
        run:
            jobs.run_in_process(jobs.MergeShards, rule, params, input, output, log, config)

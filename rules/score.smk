# Scoring rules are generated from the Plan (src/radrank/workflow.py), which reads each metric's
# environment, GPUs, resources and identity (version, model, settings) through env_of, gpus_of,
# resources_of and identity_of. Every rule reads a PAIRS file, whatever wrote it.
#
# * The cheap CPU metrics of one (dataset, split, model) are scored in ONE job per environment
#   (score_<env>_batch), one SCORES file each: their own work is a fraction of a job's start-up.
# * Every other metric has its own rule, score_<metric> (one job per dataset, split, model), and
#   with config `shards` score_<metric>_shard (one job per slice) plus merge_shards.
# Rules are per metric rather than per environment so that a metric's params, threads and GPUs
# are fixed when the workflow loads (no per-job function calls while the DAG is built), and the
# params hold only what changes the metric's scores: a change to the bootstrap or leaderboard
# settings re-scores nothing.
for env_name in PLAN.envs():
    for suffix, batch_splits, batch_metrics in PLAN.batches(env_name):
        # The core environment's batch runs in Snakemake's own process (see rule_calls); the other
        # environments' in their own.
        if env_name == "core":

            rule:
                name:
                    f"score_{env_name}_batch{suffix}"
                input:
                    pairs=PAIRS,
                output:
                    **batch_outputs(batch_metrics),
                log:
                    f"logs/score/{{dataset}}/{{split}}/{{model}}/batch{suffix}.log",
                wildcard_constraints:
                    split="|".join(batch_splits),
                params:
                    identities={m: PLAN.identity_of(m) for m in batch_metrics},
                threads: max(PLAN.resources_of(m).threads for m in batch_metrics)
                resources:
                    # the metrics run one after another: the largest one's memory, the sum of their runtimes
                    mem_mb=PerAttempt(max(PLAN.resources_of(m).mem_mb for m in batch_metrics)),
                    runtime=PerAttempt(sum(PLAN.resources_of(m).runtime_min for m in batch_metrics)),
                    gpu=0,
                run:
                    rule_calls.score_batch(rule, input, output, params, wildcards, log)

        else:

            rule:
                name:
                    f"score_{env_name}_batch{suffix}"
                input:
                    pairs=PAIRS,
                output:
                    **batch_outputs(batch_metrics),
                log:
                    f"logs/score/{{dataset}}/{{split}}/{{model}}/batch{suffix}.log",
                wildcard_constraints:
                    split="|".join(batch_splits),
                params:
                    identities={m: PLAN.identity_of(m) for m in batch_metrics},
                threads: max(PLAN.resources_of(m).threads for m in batch_metrics)
                resources:
                    # the metrics run one after another: the largest one's memory, the sum of their runtimes
                    mem_mb=PerAttempt(max(PLAN.resources_of(m).mem_mb for m in batch_metrics)),
                    runtime=PerAttempt(sum(PLAN.resources_of(m).runtime_min for m in batch_metrics)),
                    gpu=0,
                conda:
                    f"../envs/{env_name}.yaml"
                envmodules: f"radrank/{env_name}"
                script:
                    "../scripts/score_batch.py"


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
            (SCORE_SHARD if sharded else SCORES).replace("{metric}", metric_name),
        log:
            f"logs/score/{{dataset}}/{{split}}/{{model}}/{metric_name}" + (".{shard}" if sharded else "") + ".log",
        params:
            metric=metric_name,
            identity=PLAN.identity_of(metric_name),
            shard=shard_of if sharded else None,
        threads: needs.threads
        resources:
            mem_mb=PerAttempt(needs.mem_mb),
            runtime=PerAttempt(needs.runtime_min),
            gpu=PLAN.gpus_of(metric_name),
        conda:
            f"../envs/{env_name}.yaml"
        envmodules: f"radrank/{env_name}"
        script:
            "../scripts/score.py"


if any(PLAN.shards(m) > 1 for m in PLAN.metric_names):

    rule merge_shards:
        """Join a metric's shards, in order, into its per-sample score file."""
        input:
            pairs=PAIRS,
            shards=shard_files,
        output:
            SCORES,
        log:
            "logs/score/{dataset}/{split}/{model}/{metric}.merge.log",
        wildcard_constraints:
            metric="|".join(m for m in PLAN.metric_names if PLAN.shards(m) > 1),
        resources:
            mem_mb=2000,
            runtime=10,
        run:
            rule_calls.merge_shards(rule, input, output, params, wildcards, log)

# Scoring rules are generated per environment family: each metric's module in
# src/radrank/metrics declares its environment and resources (read through the
# Plan: env_of, gpus_of, resources_of, identity_of). Cheap CPU metrics of one
# (dataset, split, model) are scored together in one batch job (one SCORES file
# each), since their own work is a fraction of a job's start-up; every model
# metric keeps its own job. A metric scored in several shards (config `shards`)
# runs one job per slice of the pairs and a merge job joins the slices in order.
# Params hold only what changes a metric's scores (Plan.identity_of), so a
# change to the bootstrap or leaderboard settings re-scores nothing.
for env_name in PLAN.envs():
    whole = PLAN.metrics_for_env(env_name, sharded=False)
    sharded = PLAN.metrics_for_env(env_name, sharded=True)

    for suffix, batch_splits, batch_metrics in PLAN.batches(env_name):

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
                identities=batch_identities,
            threads: batch_threads
            resources:
                mem_mb=batch_mem_mb,
                runtime=batch_runtime,
                gpu=0,
            conda:
                f"../envs/{env_name}.yaml"
            envmodules: f"radrank/{env_name}"
            script:
                "../scripts/score_batch.py"

    if whole:

        rule:
            name:
                f"score_{env_name}"
            input:
                unpack(score_inputs),
            output:
                SCORES,
            log:
                "logs/score/{dataset}/{split}/{model}/{metric}.log",
            wildcard_constraints:
                metric="|".join(whole),
            params:
                identity=metric_identity,
                shard=None,
            threads: metric_threads
            resources:
                mem_mb=metric_mem_mb,
                runtime=metric_runtime,
                gpu=metric_gpus,
            conda:
                f"../envs/{env_name}.yaml"
            envmodules: f"radrank/{env_name}"
            script:
                "../scripts/score.py"

    if sharded:

        rule:
            name:
                f"score_{env_name}_shard"
            input:
                unpack(score_inputs),
            output:
                SCORE_SHARD,
            log:
                "logs/score/{dataset}/{split}/{model}/{metric}.{shard}.log",
            wildcard_constraints:
                metric="|".join(sharded),
            params:
                identity=metric_identity,
                shard=shard_of,
            threads: metric_threads
            resources:
                mem_mb=metric_mem_mb,
                runtime=metric_runtime,
                gpu=metric_gpus,
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
        conda:
            "../envs/core.yaml"
        envmodules: "radrank/core"
        resources:
            mem_mb=2000,
            runtime=10,
        script:
            "../scripts/merge_shards.py"

# Scoring rules are generated per environment family: each metric's module in
# src/radrank/metrics declares its environment and resources. A metric scored
# in several shards (config `shards`) runs one job per slice of the pairs and a
# merge job joins the slices in order.
for env_name in PLAN.envs():
    whole = PLAN.metrics_for_env(env_name, sharded=False)
    sharded = PLAN.metrics_for_env(env_name, sharded=True)

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
                settings=metric_settings,
                shard=None,
                config_hash=CONFIG_HASH,
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
                settings=metric_settings,
                shard=shard_of,
                config_hash=CONFIG_HASH,
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

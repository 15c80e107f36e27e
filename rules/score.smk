# One scoring rule per environment family; each metric's module in
# src/radrank/metrics declares its environment and resources.
for env_name in PLAN.envs():

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
            metric="|".join(PLAN.metrics_for_env(env_name)),
        params:
            settings=metric_settings,
            config_hash=CONFIG_HASH,
        threads: metric_threads
        resources:
            mem_mb=metric_mem_mb,
            runtime=metric_runtime,
            gpu=metric_gpus,
        conda:
            f"../envs/{env_name}.yaml"
        script:
            "../scripts/score.py"

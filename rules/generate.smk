# Generation (config `generation`): a model run over an image dataset writes pairs
# with the same schema as an ingested submission, one job per shard, in the
# generator's environment; the ingest rule then treats them like any submission.
for env_name in PLAN.generation_envs():

    rule:
        name:
            f"generate_{env_name.replace('-', '_')}"
        output:
            pairs=f"{GENERATED_SHARD}.parquet",
            drops=f"{GENERATED_SHARD}.drops.csv",
        log:
            "logs/generate/{dataset}/{split}/{model}.{shard}.log",
        wildcard_constraints:
            model="|".join(PLAN.generated_models(env_name)),
        conda:
            f"../envs/{env_name}.yaml"
        containerized:
            family_image(env_name)
        envmodules:
            f"radrank/{env_name}",
        resources:
            gpu=lambda w: PLAN.generation_of(w.dataset, w.model).gpus,
            mem_mb=16000,
            runtime=240,
        params:
            job=lambda w: PLAN.generation_job(w.dataset, w.split, w.model, w.shard).params(),
        script:
            "../scripts/generate.py"


if PLAN.generations():

    rule merge_generated:
        """Join a generated model's shards, in dataset order."""
        input:
            unpack(generated_shards),
        output:
            pairs=f"{GENERATED}.parquet",
            drops=f"{GENERATED}.drops.csv",
        log:
            "logs/generate/{dataset}/{split}/{model}.merge.log",
        resources:
            mem_mb=2000,
            runtime=10,
        params:
            job=jobs.MergeGenerated().params(),
        run:
            workers.run_in_process(jobs.MergeGenerated, rule, params, input, output, log, config, workflow)

# MRScore training (config `mrscore_training`, target `mrscore_train`; radrank.mrscore_train): references →
# tiered candidates → rubric grades → preference pairs → LoRA reward model → the checkpoint that agrees best
# with radiologists, with its model card. Every output is under results/mrscore/<name>/; what a stage drops
# is listed there with the reason. Each job's params hold its stage's identity only.


if PLAN.mrscore is None:

    rule mrscore_train:
        """Target: train MRScore; without the config section, one line saying so (docs/mrscore-training.md)."""
        input:
            lambda w: PLAN.mrscore_targets(),


if PLAN.mrscore is not None:

    rule mrscore_references:
        """Reference reports with findings and impression; the unusable ones listed."""
        input:
            sources=PLAN.mrscore_sources(),
        output:
            references=f"{MRSCORE}/references.parquet",
            drops=f"{MRSCORE}/references.drops.csv",
        log:
            "logs/mrscore/references.log",
        resources:
            mem_mb=2000,
            runtime=10,
        params:
            job=PLAN.mrscore_job("references"),
        run:
            workers.run_in_process(mrscore_jobs.References, rule, params, input, output, log, config, workflow)

    if PLAN.mrscore.demo_models:

        rule mrscore_demo_models:
            """make mrscore-demo: tiny random writer, judge and base models (nothing downloaded)."""
            input:
                sources=PLAN.mrscore_sources(),
            output:
                **demo_model_files(*mrscore_config.DEMO_MODELS),
            log:
                "logs/mrscore/demo_models.log",
            conda:
                "../envs/train.yaml"
            containerized:
                family_image("train")
            envmodules:
                "radrank/train",
            resources:
                mem_mb=2000,
                runtime=10,
            params:
                job=PLAN.mrscore_job("demo"),
                stage="demo",
            script:
                "../scripts/mrscore.py"

    rule mrscore_candidates:
        """An instruction LLM writes candidates per reference and quality tier."""
        input:
            **demo_model_files("writer"),
            references=f"{MRSCORE}/references.parquet",
        output:
            candidates=f"{MRSCORE}/candidates.parquet",
            drops=f"{MRSCORE}/candidates.drops.csv",
        log:
            "logs/mrscore/candidates.log",
        conda:
            f"../envs/{PLAN.mrscore.env_of('candidates')}.yaml"
        containerized:
            family_image(PLAN.mrscore.env_of("candidates"))
        envmodules:
            f"radrank/{PLAN.mrscore.env_of('candidates')}",
        threads: 4
        resources:
            mem_mb=32000,
            runtime=240,
            gpu=PLAN.mrscore.gpus_of("candidates"),
        params:
            job=PLAN.mrscore_job("candidates"),
            stage="candidates",
        script:
            "../scripts/mrscore.py"

    rule mrscore_grade:
        """The MRScore rubric judge grades every candidate; unparsed and out-of-tier ones are listed."""
        input:
            **demo_model_files("judge"),
            references=f"{MRSCORE}/references.parquet",
            candidates=f"{MRSCORE}/candidates.parquet",
            write_drops=f"{MRSCORE}/candidates.drops.csv",
        output:
            graded=f"{MRSCORE}/graded.parquet",
            dropped=f"{MRSCORE}/dropped.csv",
        log:
            "logs/mrscore/grade.log",
        conda:
            f"../envs/{PLAN.mrscore.env_of('rubric')}.yaml"
        containerized:
            family_image(PLAN.mrscore.env_of("rubric"))
        envmodules:
            f"radrank/{PLAN.mrscore.env_of('rubric')}",
        threads: 4
        resources:
            mem_mb=32000,
            runtime=240,
            gpu=PLAN.mrscore.gpus_of("rubric"),
        params:
            job=PLAN.mrscore_job("rubric"),
            stage="rubric",
        script:
            "../scripts/mrscore.py"

    rule mrscore_pairs:
        """Every within-reference (better, worse) pair with its margin; train / validation split by reference."""
        input:
            references=f"{MRSCORE}/references.parquet",
            graded=f"{MRSCORE}/graded.parquet",
        output:
            pairs=f"{MRSCORE}/pairs.parquet",
        log:
            "logs/mrscore/pairs.log",
        resources:
            mem_mb=2000,
            runtime=10,
        params:
            job=PLAN.mrscore_job("pairs"),
        run:
            workers.run_in_process(mrscore_jobs.Pairs, rule, params, input, output, log, config, workflow)

    rule mrscore_train_model:
        """TRL RewardTrainer + PEFT LoRA on the pairs (accelerate launch on the job's GPUs when more than one);
        a killed run resumes from its last checkpoint."""
        input:
            **demo_model_files("base"),
            pairs=f"{MRSCORE}/pairs.parquet",
        output:
            state=f"{MRSCORE}/train/train_state.json",
        log:
            "logs/mrscore/train.log",
        conda:
            "../envs/train.yaml"
        containerized:
            family_image("train")
        envmodules:
            "radrank/train",
        threads: 8
        resources:
            mem_mb=64000,
            runtime=720,
            gpu=PLAN.mrscore.gpus_of("train"),
        params:
            job=PLAN.mrscore_job("train"),
            stage="train",
        script:
            "../scripts/mrscore.py"

    rule mrscore_select:
        """Every checkpoint through the mrscore metric: validation accuracy, agreement with radiologists; the
        best by Kendall's tau is kept as model/ with its card."""
        input:
            state=f"{MRSCORE}/train/train_state.json",
            pairs=f"{MRSCORE}/pairs.parquet",
            references=f"{MRSCORE}/references.parquet",
            reference_drops=f"{MRSCORE}/references.drops.csv",
            candidates=f"{MRSCORE}/candidates.parquet",
            graded=f"{MRSCORE}/graded.parquet",
            dropped=f"{MRSCORE}/dropped.csv",
            human_data=metaeval.RADPREF_DATA,
            human_raters=list(metaeval.RADPREF_RATERS),
        output:
            selection=f"{MRSCORE}/selection.csv",
            model=f"{MRSCORE}/model/mrscore.json",
            card=f"{MRSCORE}/model/MODEL_CARD.md",
        log:
            "logs/mrscore/select.log",
        conda:
            "../envs/train.yaml"
        containerized:
            family_image("train")
        envmodules:
            "radrank/train",
        threads: 4
        resources:
            mem_mb=32000,
            runtime=120,
            gpu=PLAN.mrscore.gpus_of("select"),
        params:
            job=PLAN.mrscore_job("select"),
            stage="select",
        script:
            "../scripts/mrscore.py"

    rule mrscore_train:
        """Target: train MRScore (`snakemake --cores 2 mrscore_train`); the model is results/mrscore/<name>/model."""
        input:
            PLAN.mrscore_targets(),

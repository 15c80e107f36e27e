rule bootstrap:
    """Exact paired bootstrap for every model of one dataset × split (one shared resample matrix),
    and every model's RadHarmony-style result files (written here, so adding a model reruns one job
    per group instead of every model's summary)."""
    input:
        score_dirs=group_score_dirs,
        drops=lambda w: each_model(DROPS, w),
        cases=CASES,
        accounting=f"{ACCOUNTING}.parquet",
    output:
        replicates=f"{STATS}/replicates.parquet",
        coverage=f"{STATS}/coverage.parquet",
        rank_replicates=f"{STATS}/rank_replicates.parquet",
        summary=f"{STATS}/summary.parquet",
        comparisons=f"{STATS}/comparisons.parquet",
        comparisons_csv=f"{STATS}/comparisons.csv",
        failures=f"{STATS}/failures.parquet",
        # update(): a model's folder whose numbers are unchanged is left as it is (radrank.summaries)
        model_files=update(directory(SUMMARIES)),
        # update(): a model whose statistics are unchanged is not resampled (radrank.stats.bootstrap.ReplicateMemo)
        replicate_memo=update(directory(f"{STATS}/replicate-memo")),
    log:
        "logs/stats/{dataset}/{split}.log",
    resources:
        mem_mb=PerAttempt(lambda w: PLAN.bootstrap_mem_mb(w.dataset, w.split)),
        runtime=30,
    params:
        job=lambda w: PLAN.bootstrap_job(w.dataset, w.split).params(),
    run:
        workers.run_in_process(jobs.Bootstrap, rule, params, input, output, log, config, workflow)

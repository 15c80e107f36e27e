rule bootstrap:
    """Exact paired bootstrap for every model of one dataset × split (one shared resample matrix),
    and every model's RadHarmony-style result files (written here, so adding a model reruns one job
    per group instead of every model's summary)."""
    input:
        unpack(stats_inputs),
    output:
        replicates=f"{STATS}/replicates.parquet",
        summary=f"{STATS}/summary.parquet",
        comparisons=f"{STATS}/comparisons.parquet",
        comparisons_csv=f"{STATS}/comparisons.csv",
        model_files=directory(SUMMARIES),
    log:
        "logs/stats/{dataset}/{split}.log",
    params:
        score_paths=score_paths_by_model,
        pairs=pairs_by_model,
        drops=drops_by_model,
        metrics=split_metrics,
        bootstrap=config["bootstrap"],
    resources:
        mem_mb=bootstrap_mem_mb,
        runtime=30,
    run:
        rule_calls.bootstrap(rule, input, output, params, wildcards, log)

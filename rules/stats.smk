rule bootstrap:
    """Exact paired bootstrap for every model of one dataset × split (one shared resample matrix)."""
    input:
        stats_inputs,
    output:
        replicates=f"{STATS}/replicates.parquet",
        summary=f"{STATS}/summary.parquet",
        comparisons=f"{STATS}/comparisons.parquet",
        comparisons_csv=f"{STATS}/comparisons.csv",
    log:
        "logs/stats/{dataset}/{split}.log",
    params:
        score_paths=score_paths_by_model,
        metrics=split_metrics,
        bootstrap=config["bootstrap"],
        config_hash=CONFIG_HASH,
    conda:
        "../envs/core.yaml"
    envmodules: "radrank/core"
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../scripts/bootstrap.py"


rule model_summary:
    """RadHarmony-style result files for one model."""
    input:
        replicates=f"{STATS}/replicates.parquet",
        summary=f"{STATS}/summary.parquet",
        pairs=PAIRS,
        drops=DROPS,
    output:
        results=f"{SUMMARY}/results.csv",
        summary=f"{SUMMARY}/results_summary.csv",
        generations=f"{SUMMARY}/generations.csv",
        drops=f"{SUMMARY}/drops.csv",
    log:
        "logs/summary/{dataset}/{split}/{model}.log",
    conda:
        "../envs/core.yaml"
    envmodules: "radrank/core"
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../scripts/model_summary.py"

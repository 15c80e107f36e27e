rule leaderboard:
    """One leaderboard per dataset × split, ranked by RadCliQ-v1 (or the configured fallback), with the
    rank distribution over the shared bootstrap resamples."""
    input:
        **({"models_sheet": config["models"]} if config["models"] else {}),
        summary=f"{STATS}/summary.parquet",
        rank_replicates=f"{STATS}/rank_replicates.parquet",
        coverage=f"{STATS}/coverage.parquet",
        comparisons=f"{STATS}/comparisons.parquet",
        failures=f"{STATS}/failures.parquet",
        drops=lambda w: each_model(DROPS, w),
    output:
        board=report(
            LEADERBOARD,
            caption="../report/leaderboard.rst",
            category="Leaderboards",
            subcategory="{dataset}",
            labels={"dataset": "{dataset}", "split": "{split}"},
        ),
        ranks=RANKS,
    log:
        "logs/leaderboard/{dataset}_{split}.log",
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        job=lambda w: PLAN.leaderboard_job(w.dataset, w.split).params(),
    run:
        workers.run_in_process(jobs.Leaderboard, rule, params, input, output, log, config, workflow)

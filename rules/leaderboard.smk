rule leaderboard:
    """One leaderboard per dataset × split, ranked by RadCliQ-v1 (or the configured fallback), with the
    rank distribution over the shared bootstrap resamples."""
    input:
        unpack(leaderboard_inputs),
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
    params:
        drops=drops_by_model,
        models_sheet=config["models"],
        ranking=ranking,
        level=config["bootstrap"]["level"],
    resources:
        mem_mb=1000,
        runtime=5,
    run:
        rule_calls.leaderboard(rule, input, output, params, wildcards, log)

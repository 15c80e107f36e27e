rule leaderboard:
    """One leaderboard per dataset × split, ranked by RadCliQ-v1 (or the configured fallback)."""
    input:
        unpack(leaderboard_inputs),
    output:
        LEADERBOARD,
    log:
        "logs/leaderboard/{dataset}_{split}.log",
    params:
        drops=drops_by_model,
        models_sheet=config["models"],
        ranking=ranking,
    conda:
        "../envs/core.yaml"
    envmodules: "radrank/core"
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../scripts/leaderboard.py"

rule report:
    """The readable report over every leaderboard."""
    input:
        unpack(report_inputs),
    output:
        markdown="results/report/report.md",
        html="results/report/report.html",
    log:
        "logs/report.log",
    params:
        groups=PLAN.groups(),
        config=config,
    conda:
        "../envs/core.yaml"
    envmodules: "radrank/core"
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../scripts/report.py"

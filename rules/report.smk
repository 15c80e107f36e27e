rule report:
    """The report people open first (plots, rank uncertainty, drill-down to the cases) over every leaderboard."""
    input:
        unpack(report_inputs),
    output:
        markdown=f"{REPORT}/report.md",
        html=report(
            f"{REPORT}/report.html",
            caption="../report/report.rst",
            category="Report",
        ),
        figures=report(
            directory(f"{REPORT}/figures"),
            patterns=["{dataset}/{split}/{figure}.svg"],
            caption="../report/figure.rst",
            category="Figures",
            subcategory="{dataset} {split}",
            labels={"dataset": "{dataset}", "split": "{split}", "figure": "{figure}"},
        ),
    log:
        "logs/report.log",
    params:
        job=PLAN.report_job().params(),
    resources:
        mem_mb=PerAttempt(PLAN.report_mem_mb()),
        runtime=30,
    run:
        workers.run_in_process(jobs.Report, rule, params, input, output, log, config, workflow)

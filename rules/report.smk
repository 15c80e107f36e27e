rule report:
    """The report people open first (plots, rank uncertainty, drill-down to the cases) over every leaderboard."""
    input:
        report_inputs,
    output:
        markdown="results/report/report.md",
        html=report(
            "results/report/report.html",
            caption="../report/report.rst",
            category="Report",
        ),
        figures=report(
            directory("results/report/figures"),
            patterns=["{dataset}/{split}/{figure}.svg"],
            caption="../report/figure.rst",
            category="Figures",
            subcategory="{dataset} {split}",
            labels={"dataset": "{dataset}", "split": "{split}", "figure": "{figure}"},
        ),
    log:
        "logs/report.log",
    params:
        layout=report_layout,
        bootstrap=config["bootstrap"],
        empty_hypothesis=config["empty_hypothesis"],
        cases=config["report"]["cases"],
        metaeval=metaeval_agreement_files,
        # shown in the provenance section: the report is the one output that describes the whole run
        config_hash=provenance.stable_hash(config),
    resources:
        mem_mb=report_mem_mb,
        runtime=30,
    run:
        rule_calls.report(rule, input, output, params, wildcards, log)

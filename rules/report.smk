rule report:
    """The report people open first (plots, rank uncertainty, drill-down to the cases) over every leaderboard:
    an index page and one page per dataset × split (the groups are known when the DAG is built)."""
    input:
        unpack(report_inputs),
    output:
        markdown=f"{REPORT}/report.md",
        appendix=f"{REPORT}/appendix.md",
        html=report(
            f"{REPORT}/report.html",
            caption="../report/report.rst",
            category="Report",
        ),
        # update(): a group page whose inputs, options and code are unchanged is kept with its figures, not built
        # again (radrank.report.reuse)
        pages=[
            update(
                report(
                    f"{REPORT}/{page}",
                    caption="../report/page.rst",
                    category="Report",
                    subcategory="Dataset × split pages",
                )
            )
            for page in report_pages()
        ],
        figures=update(
            report(
                directory(f"{REPORT}/figures"),
                patterns=["{dataset}/{split}/{figure}.svg"],
                caption="../report/figure.rst",
                category="Figures",
                subcategory="{dataset} {split}",
                labels={"dataset": "{dataset}", "split": "{split}", "figure": "{figure}"},
            )
        ),
    log:
        "logs/report.log",
    # the groups' pages are built two at a time, each in a process of its own (Snakemake gives fewer threads
    # when it has fewer cores); the number is no param: the pages are the same however many build them
    threads: 2
    resources:
        mem_mb=PerAttempt(PLAN.report_mem_mb()),
        runtime=30,
    params:
        job=PLAN.report_job().params(),
    run:
        workers.run_in_process(jobs.Report, rule, threaded(params, threads), input, output, log, config, workflow)

rule ingest:
    """Read one submission for one split into canonical pairs plus its drop file."""
    input:
        unpack(submission_files),
    output:
        pairs=PAIRS,
        drops=DROPS,
    log:
        "logs/ingest/{dataset}/{split}/{model}.log",
    wildcard_constraints:
        split="findings|reports|vqa",  # metaeval pairs come from rule metaeval_pairs
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        job=lambda w: PLAN.ingest_job(w.dataset, w.split, w.model).params(),
    run:
        workers.run_in_process(jobs.Ingest, rule, params, input, output, log, config, workflow)


rule cases:
    """A dataset × split's case set, once every submission's references agree (with each other, or with the
    dataset's canonical references) and no two case ids are near-duplicates, and per model what it lacks of
    the set; every scoring job waits for it and scores every model on the set's cases."""
    input:
        unpack(lambda w: {"pairs": each_model(PAIRS, w), "drops": each_model(DROPS, w), **canonical_file(w)}),
    output:
        cases=CASES,
        accounting=f"{ACCOUNTING}.parquet",
        accounting_csv=f"{ACCOUNTING}.csv",
    log:
        "logs/cases/{dataset}/{split}.log",
    wildcard_constraints:
        split="findings|reports|vqa",
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        job=lambda w: PLAN.cases_job(w.dataset, w.split).params(),
    run:
        workers.run_in_process(jobs.Cases, rule, params, input, output, log, config, workflow)

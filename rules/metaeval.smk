# Meta-evaluation (config `metaeval`): each human-judged set becomes the pairs of dataset
# metaeval-<set>, split metaeval, model candidates; the scoring rules (rules/score.smk) score
# them with the run's metrics, and the agreement rule compares those scores with the judgements.


rule metaeval_pairs:
    """Read one human-judged set into canonical pairs and its item table (judgements, categories)."""
    input:
        unpack(lambda w: PLAN.metaeval_sets[w.metaeval_set].files),
    output:
        pairs=METAEVAL_PAIRS,
        item_table=f"{METAEVAL}/items.parquet",
    log:
        "logs/metaeval/{metaeval_set}/pairs.log",
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        job=lambda w: PLAN.metaeval_pairs_job(w.metaeval_set).params(),
    run:
        workers.run_in_process(jobs.MetaevalPairs, rule, params, input, output, log, config, workflow)


rule metaeval_agreement:
    """Agreement of every metric leaf with the set's judgements, bootstrap intervals, metric comparisons."""
    input:
        item_table=f"{METAEVAL}/items.parquet",
        score_dirs=metaeval_score_dirs,
    output:
        scores=f"{METAEVAL}/scores.parquet",
        agreement=f"{METAEVAL}/agreement.csv",
        comparisons=f"{METAEVAL}/metric_comparisons.csv",
    log:
        "logs/metaeval/{metaeval_set}/agreement.log",
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        job=lambda w: PLAN.metaeval_agreement_job(w.metaeval_set).params(),
    run:
        workers.run_in_process(jobs.MetaevalAgreement, rule, params, input, output, log, config, workflow)


rule metaeval:
    """Target: meta-evaluation of every configured set (`snakemake --cores 2 metaeval`)."""
    input:
        metaeval_targets(),

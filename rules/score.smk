# Scoring: one job per metric × dataset × split, across every model of the group (radrank.scoring): the
# job reads every model's pairs, scores each distinct pair once — loading the metric's model once — takes
# pairs scored before from the score cache, and writes every model's score file in the metric's folder of the
# group (keeping those whose inputs are unchanged: radrank.score_reuse). The rules are generated
# from the Plan, which answers every question about a metric from its settings built once (environment,
# GPUs, resources, identity); their params hold only the metric's identity, so a speed-only setting, the
# bootstrap or the leaderboard re-scores nothing, and removing a metric re-scores no other.
#
# * Core-family metrics (lexical, RadCliQ) run in Snakemake's own process; every other metric in its
#   family's environment (a rule script). Snakemake cannot switch a rule between a `run` and a `script`
#   block, so there are two rule definitions: every value they hold is computed once above them, and they
#   differ in their last directives (how the job runs) alone.
# * With config `shards`, one job per slice of the group's distinct pairs (score_..._shard; a model metric's
#   on as many GPUs) and a collect job that writes every model's score file.
for score_rule in PLAN.score_rules():
    metric_name = score_rule.metric
    needs = PLAN.resources_of(metric_name)
    files = group_score_files(score_rule)
    sharded = PLAN.shards(metric_name) > 1
    in_process = PLAN.in_process(metric_name)
    env_name = PLAN.env_of(metric_name)
    rule_name = f"{score_rule.name}_shard" if sharded else score_rule.name
    # one folder of every model's score file; update(): a model's file whose inputs are unchanged is kept, not
    # rescored (radrank.score_reuse); Snakemake restores the folder if the job fails
    outputs = {"shard": files["shard"]} if sharded else {"score_dir": update(directory(files["score_dir"]))}
    shard_part = ".{shard}" if sharded else ""
    log_name = f"logs/score/{score_rule.dataset}/{score_rule.split}/{metric_name}{shard_part}.log"
    job = (
        (lambda w, r=score_rule: PLAN.score_job(r, w.shard).params())
        if sharded
        else PLAN.score_job(score_rule).params()
    )
    # Where jobs wait for cores, scoring goes first, the longest (the metric's runtime estimate) first: a bootstrap
    # started while scoring jobs wait would leave the last group's bootstrap, then the report, alone on one core
    # at the end (the bootstrap and the other rules have priority 0).
    scoring_first = max(int(needs.runtime_min), 1)
    needed = {
        "mem_mb": PerAttempt(PLAN.score_mem_mb(score_rule)),
        "runtime": PerAttempt(needs.runtime_min),
        "gpu": 0 if in_process else PLAN.gpus_of(metric_name),
    }

    if in_process:

        rule:
            name:
                rule_name
            input:
                **files["input"],
            output:
                **outputs,
            log:
                log_name,
            priority: scoring_first
            threads: needs.threads
            resources:
                **needed,
            params:
                job=job,
            run:
                workers.run_in_process(jobs.ScoreGroup, rule, params, input, output, log, config, workflow)

    else:

        rule:
            name:
                rule_name
            input:
                **files["input"],
            output:
                **outputs,
            log:
                log_name,
            priority: scoring_first
            conda:
                f"../envs/{env_name}.yaml"
            containerized:
                family_image(env_name)
            envmodules:
                f"radrank/{env_name}",
            threads: needs.threads
            resources:
                **needed,
            params:
                job=job,
            script:
                "../scripts/score.py"

    if sharded:

        rule:
            name:
                f"{score_rule.name}_collect"
            input:
                **{k: v for k, v in files["input"].items() if k in ("pairs", "cases")},
                shards=files["shards"],
            output:
                score_dir=directory(files["score_dir"]),
            log:
                f"logs/score/{score_rule.dataset}/{score_rule.split}/{metric_name}.collect.log",
            priority: scoring_first
            resources:
                mem_mb=4000,
                runtime=10,
            params:
                job=PLAN.collect_job(score_rule).params(),
            run:
                workers.run_in_process(jobs.CollectShards, rule, params, input, output, log, config, workflow)

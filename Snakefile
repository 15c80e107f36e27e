# radrank: submissions → pairs → per-sample scores → bootstrap statistics → leaderboards → report.
# Configuration: config/config.yaml (validated against schemas/config.schema.yaml).

from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/generate.smk"
include: "rules/ingest.smk"
include: "rules/score.smk"
include: "rules/stats.smk"
include: "rules/leaderboard.smk"
include: "rules/report.smk"
include: "rules/metaeval.smk"
include: "rules/mrscore.smk"


onstart:
    # SIGTERM, Ctrl-C and SIGHUP stop the run within seconds, whatever a job is doing (radrank.workers)
    workers.stop_on_signals(workflow)


onsuccess:
    # the score cache keeps its bound (score_cache.max_gb, max_age_days) and its lookups flat (compaction)
    score_cache.keep_bounded(config)
    # the run ends now, not when the scheduler's last timer would wake it (radrank.scheduler_timers)
    scheduler_timers.cancel_scheduler_timers()


onerror:
    scheduler_timers.cancel_scheduler_timers()


rule all:
    default_target: True
    input:
        all_targets(),

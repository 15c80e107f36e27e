"""What the ``run:`` block of each core-environment rule calls: the job's Snakemake objects → one
function in radrank.jobs, run by :func:`radrank.jobs.run_logged`.

These rules run inside Snakemake's own process (one thread per job with the local executor's
``--force-use-threads``, set in profiles/default and profiles/venv; on SLURM in the job's Snakemake
process), so a job pays no interpreter start-up and no imports after the first job. That process's
environment must therefore be the core environment (or one with radrank's core dependencies).
Every function has the same arguments, the names a ``run:`` block sees.
"""

from __future__ import annotations

from pathlib import Path

from radrank import jobs


def _run(job, rule, log, **kwargs):
    jobs.run_logged(job, rule=rule, log_path=log[0] if log else None, **kwargs)


def ingest(rule, input, output, params, wildcards, log):
    _run(jobs.ingest, rule, log, **params.job, out_pairs=output.pairs, out_drops=output.drops)


def score_batch(rule, input, output, params, wildcards, log):
    identities = params.identities  # metric -> version, model, settings; outputs are named by metric
    _run(jobs.score_batch, rule, log, pairs_path=input.pairs,
         settings={metric: identity["settings"] for metric, identity in identities.items()},
         outs={metric: output[metric] for metric in identities})


def merge_shards(rule, input, output, params, wildcards, log):
    _run(jobs.merge_shards, rule, log, pairs_path=input.pairs, shard_paths=list(input.shards), out=output[0])


def bootstrap(rule, input, output, params, wildcards, log):
    boot = params.bootstrap
    _run(jobs.bootstrap, rule, log, dataset=wildcards.dataset, split=wildcards.split,
         score_paths=params.score_paths, pairs_paths=params.pairs, drops_paths=params.drops,
         metric_names=params.metrics, n_boot=boot["n"], seed=boot["seed"], level=boot["level"],
         out_replicates=output.replicates, out_summary=output.summary, out_comparisons=output.comparisons,
         out_comparisons_csv=output.comparisons_csv, out_model_files=output.model_files)


def leaderboard(rule, input, output, params, wildcards, log):
    ranking = params.ranking
    _run(jobs.leaderboard, rule, log, dataset=wildcards.dataset, split=wildcards.split,
         summary_path=input.summary, replicates_path=input.replicates, comparisons_path=input.comparisons,
         drops_paths=params.drops, models_sheet=params.models_sheet, rank_by=ranking["rank_by"],
         fallback_rank_by=ranking["fallback_rank_by"], decimals=ranking["decimals"], level=params.level,
         out=output.board, out_ranks=output.ranks)


def report(rule, input, output, params, wildcards, log):
    _run(jobs.report, rule, log, layout=params.layout, bootstrap=params.bootstrap,
         empty_hypothesis=params.empty_hypothesis, cases=params.cases, out_markdown=output.markdown,
         out_html=output.html, out_figures=output.figures, config_hash=params.config_hash,
         metaeval_paths={Path(p).parent.name: p for p in params.metaeval})  # set -> agreement.csv


def metaeval_pairs(rule, input, output, params, wildcards, log):
    _run(jobs.metaeval_pairs, rule, log, **params.job, out_pairs=output.pairs, out_items=output.item_table)


def metaeval_agreement(rule, input, output, params, wildcards, log):
    _run(jobs.metaeval_agreement, rule, log, set_name=wildcards.metaeval_set, items_path=input.item_table,
         score_paths=list(input.scores), **params.job, out_scores=output.scores, out_agreement=output.agreement,
         out_comparisons=output.comparisons)


def merge_generated(rule, input, output, params, wildcards, log):
    _run(jobs.merge_generated, rule, log, pair_paths=input.pairs, drop_paths=input.drops,
         out_pairs=output.pairs, out_drops=output.drops)

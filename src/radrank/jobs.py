"""One function per workflow stage; the rules only call these.

Each function reads its inputs, computes, and writes its outputs atomically with
provenance, so a job either leaves complete outputs or none. The rules of the core
environment call them in Snakemake's own process (``run:``, through radrank.rule_calls,
one thread per job); the others through a thin script in scripts/ in their own environment.
"""

from __future__ import annotations

import logging
import threading
from contextlib import contextmanager

from radrank import io, metrics, provenance
from radrank.errors import InputError

log = logging.getLogger("radrank")


FORMAT = "%(levelname)s %(name)s: %(message)s"


class JobFailed(Exception):
    """A job failed; the message is the one line its log ends with."""


class _ThreadRouter(logging.Handler):
    """One root handler that hands each record to the handlers of the job running in the record's thread.

    Jobs sharing a process register and unregister their handlers here instead of adding them to
    the root logger: a handler removed from the root's list while another thread walks that list
    makes the walk skip the next handler, and a concurrent job lost a line that way.
    """

    def __init__(self):
        super().__init__()
        self.jobs: dict[int, list] = {}

    def emit(self, record):
        for handler in self.jobs.get(record.thread, ()):
            if record.levelno >= handler.level:
                handler.handle(record)


_ROUTER = _ThreadRouter()
_ROUTER_LOCK = threading.Lock()


@contextmanager
def job_log(log_path=None, *, this_thread_only=False):
    """Log records to the job's log file (if any) and stderr while the job runs.

    ``this_thread_only``: the job shares its process with other jobs (Snakemake's ``run:``
    jobs run in threads of one process), so the job's handlers take only the records logged
    by this thread (through one shared root handler, :class:`_ThreadRouter`), and the
    process-wide logging setup is left as it is, apart from radrank's loggers logging INFO.
    Otherwise the process is the job's: every record of the process, INFO and up, as
    ``logging.basicConfig`` would.
    """
    import sys

    handlers = [logging.StreamHandler(sys.stderr)]
    if log_path:
        handlers.append(logging.FileHandler(log_path, mode="w"))
    for handler in handlers:
        handler.setFormatter(logging.Formatter(FORMAT))
    root = logging.getLogger()
    if not this_thread_only:
        root.setLevel(logging.INFO)
        for handler in handlers:
            root.addHandler(handler)
        try:
            yield
        finally:
            for handler in handlers:
                root.removeHandler(handler)
                handler.close()
        return
    thread = threading.get_ident()
    log.setLevel(logging.INFO)
    with _ROUTER_LOCK:
        _ROUTER.jobs[thread] = handlers
        if len(_ROUTER.jobs) == 1:  # the first job of the process now: route through the root logger
            root.addHandler(_ROUTER)
    try:
        yield
    finally:
        with _ROUTER_LOCK:
            del _ROUTER.jobs[thread]
            if not _ROUTER.jobs:  # no job left whose records could be skipped
                root.removeHandler(_ROUTER)
        for handler in handlers:
            handler.close()


def run_logged(job, *, rule, log_path=None, this_thread_only=True, **kwargs):
    """Run ``job(**kwargs)`` for one Snakemake job with :func:`job_log`; a failure is logged (radrank's
    own errors as their one clear line, anything else with its traceback) and raised as :class:`JobFailed`
    with that line, so Snakemake marks the job failed and shows the line."""
    from radrank.errors import RadrankError

    with job_log(log_path, this_thread_only=this_thread_only):
        try:
            job(**kwargs)
        except RadrankError as e:
            log.error("%s", e)
            raise JobFailed(str(e)) from None
        except Exception as e:
            log.exception("rule %s failed", rule)
            where = f" (traceback in {log_path})" if log_path else ""
            raise JobFailed(f"rule {rule} failed: {type(e).__name__}: {e}{where}") from e


def ingest(*, path, split, reference_path, ref_section, empty_hypothesis, max_chars, out_pairs, out_drops,
           dataset, model, generated_drops=None):
    import pandas as pd

    from radrank.ingest import ingest_submission

    pairs, drops, fmt = ingest_submission(path, split, reference_path=reference_path or None,
                                          ref_section=ref_section, empty_hypothesis=empty_hypothesis,
                                          max_chars=max_chars)
    if generated_drops:  # what the generation job listed (no image, unreadable image, ...) stays listed
        listed = pd.read_csv(generated_drops, dtype=str, keep_default_na=False)
        drops = pd.concat([listed, drops.astype(str)], ignore_index=True) if len(listed) else drops
        fmt = "generated"
    sources = {"path": str(path), "sha256": provenance.file_sha256(path)}
    if reference_path:
        sources["reference_path"] = str(reference_path)
        sources["reference_sha256"] = provenance.file_sha256(reference_path)
    prov = provenance.record("pairs", dataset=dataset, split=split, model=model, format=fmt, sources=sources,
                             ref_section=ref_section if fmt != "rexrank_json" else None,
                             empty_hypothesis=empty_hypothesis, max_report_chars=max_chars,
                             n_pairs=len(pairs), n_listed=len(drops))
    log.info("%s/%s/%s: %d pairs from %s (%s); %d listed in the drop file",
             dataset, split, model, len(pairs), path, fmt, len(drops))
    if pairs.empty:
        raise InputError(path, f"no scorable pair for split {split!r} "
                         f"({len(drops)} listed, e.g. {drops['reason'].value_counts().to_dict()})")
    io.write_csv(drops, out_drops)
    io.write_parquet(pairs, out_pairs, prov)


def shard_slice(n: int, index: int, count: int) -> slice:
    """Rows of shard ``index`` of ``count``: contiguous, sizes differ by at most one."""
    if not 0 <= index < count:
        raise ValueError(f"shard {index} of {count} does not exist")
    return slice(index * n // count, (index + 1) * n // count)


def _scored(metric, pairs, pairs_identity, settings: dict, required: dict, shard=None):
    """Per-sample scores of one metric and their provenance: what the job used (metric version, model,
    settings with defaults, environment, pairs, required scores), nothing from the rest of the config."""
    import pandas as pd

    spec = metrics.get(metric)
    inputs = {name: pd.read_parquet(p) for name, p in required.items()}
    if shard is not None:
        # Corpus-level settings (BERTScore's idf over the references) must see every pair.
        inputs["corpus_pairs"] = pairs
        pairs = pairs.iloc[shard_slice(len(pairs), *shard)].reset_index(drop=True)
    scores = metrics.score(metric, pairs, settings, inputs)
    if len(scores) != len(pairs) or not scores["sample_id"].equals(pairs["sample_id"]):
        raise RuntimeError(f"metric {metric!r} returned rows that do not match the pairs")
    models_used = scores.attrs.pop("models", None)
    prov = provenance.record(
        "scores", metric=metric, metric_version=spec.version, model=spec.model, models=models_used,
        settings={**spec.settings, **settings},
        environment=provenance.environment(spec.packages), pairs=pairs_identity,
        inputs={name: io.read_provenance(p).get("metric_version") for name, p in required.items()},
        shard=None if shard is None else {"index": shard[0], "count": shard[1]},
    )
    return scores, prov


def score(*, metric, pairs_path, required: dict, settings: dict, out, shard=None):
    """One metric on one pairs file (or one shard of it)."""
    pairs = io.read_parquet(pairs_path)
    scores, prov = _scored(metric, pairs, provenance.read_pairs_identity(pairs_path), settings, required, shard)
    log.info("%s: %d samples scored from %s%s", metric, len(scores), pairs_path,
             "" if shard is None else f" (shard {shard[0]} of {shard[1]})")
    io.write_parquet(scores, out, prov)


def score_batch(*, pairs_path, settings: dict, outs: dict):
    """Several metrics on one pairs file, read once: ``settings`` and ``outs`` map metric -> its settings
    and its SCORES path. Every file is written only after every metric has scored, so a failed job
    leaves none of them."""
    import time

    pairs = io.read_parquet(pairs_path)
    identity = provenance.read_pairs_identity(pairs_path)
    results = {}
    for metric in outs:
        start = time.process_time()
        results[metric] = _scored(metric, pairs, identity, settings.get(metric, {}), {})
        log.info("%s: %d samples scored from %s (%.2f s CPU)", metric, len(pairs), pairs_path,
                 time.process_time() - start)
    for metric, out in outs.items():
        scores, prov = results[metric]
        io.write_parquet(scores, out, prov)


def merge_shards(*, pairs_path, shard_paths, out):
    """Concatenate shards in order; the result must cover the pairs exactly, in order."""
    import pandas as pd

    parts = [pd.read_parquet(p) for p in shard_paths]
    merged = pd.concat(parts, ignore_index=True)
    pairs = io.read_parquet(pairs_path)
    if not merged["sample_id"].equals(pairs["sample_id"]):
        raise RuntimeError(f"shards {shard_paths} do not cover the pairs of {pairs_path} in order")
    prov = io.read_provenance(shard_paths[0])
    prov["shard"] = {"count": len(shard_paths), "merged": True}
    log.info("merged %d shards, %d samples", len(parts), len(merged))
    io.write_parquet(merged, out, prov)


def _merge_scores(score_paths: list) -> "object":
    import pandas as pd

    merged = None
    for p in score_paths:
        df = pd.read_parquet(p)
        merged = df if merged is None else merged.merge(df, on="sample_id", how="outer", validate="one_to_one")
    return merged


def bootstrap(*, dataset, split, score_paths: dict, pairs_paths: dict, drops_paths: dict, metric_names, n_boot,
              seed, level, out_replicates, out_summary, out_comparisons, out_comparisons_csv, out_model_files):
    """Statistics of one dataset × split; ``score_paths``, ``pairs_paths`` and ``drops_paths`` map model -> its
    per-metric score files, its pairs file and its drop file. Also writes every model's RadHarmony-style files
    under ``out_model_files``/<model>/."""
    from pathlib import Path

    from radrank.stats import bootstrap as run_bootstrap

    leaves = [leaf for name in metric_names for leaf in metrics.get(name).leaves]
    scores = {model: _merge_scores(paths) for model, paths in score_paths.items()}
    result = run_bootstrap(scores, leaves, n_boot=n_boot, seed=seed, level=level)
    prov = provenance.record(
        "statistics", dataset=dataset, split=split, models=sorted(scores), metrics=list(metric_names),
        n_bootstrap=n_boot, seed=seed, level=level, n_cases=len(result.cases),
        score_provenance={m: [io.read_provenance(p).get("metric") for p in paths] for m, paths in score_paths.items()},
        method="exact paired bootstrap over case ids from per-sample sufficient statistics (radrank.stats.bootstrap)",
    )
    log.info("%s/%s: %d models, %d cases, %d resamples", dataset, split, len(scores), len(result.cases), n_boot)
    io.write_parquet(result.comparisons, out_comparisons, prov)
    io.write_csv(result.comparisons, out_comparisons_csv)
    io.write_parquet(result.summary, out_summary, prov)
    io.write_parquet(result.replicates, out_replicates, prov)
    write_model_summaries(result.replicates, result.summary, pairs_paths, drops_paths, Path(out_model_files))


def results_table(replicates, label: str = "report"):
    """RadHarmony's results layout from one model's bootstrap replicates (model, metric, bootstrap, value):
    one row per bootstrap (-1 = point estimate) with columns label, fold, seed, bootstrap, then one per leaf."""
    wide = replicates.pivot(index="bootstrap", columns="metric", values="value").sort_index()
    order = list(dict.fromkeys(replicates["metric"]))
    wide = wide[order].reset_index()
    wide.insert(0, "label", label)
    wide.insert(1, "fold", -1)
    wide.insert(2, "seed", -1)
    return wide[["label", "fold", "seed", "bootstrap", *order]]


def write_model_files(*, results, summary, generations, drops, out_results, out_summary, out_generations, out_drops):
    """Write one model's RadHarmony-style files (the workflow's bootstrap job and the Python API share this)."""
    io.write_csv(drops, out_drops)
    io.write_csv(generations, out_generations)
    io.write_csv(summary, out_summary)
    io.write_csv(results, out_results)


def write_model_summaries(replicates, summary, pairs_paths: dict, drops_paths: dict, out_dir):
    """RadHarmony-style files of every model (results, results_summary, generations, drops) under
    ``out_dir``/<model>/, from the bootstrap's replicates and summary."""
    import pandas as pd

    reps_by_model = dict(tuple(replicates.groupby("model", sort=False)))
    summary_by_model = dict(tuple(summary.groupby("model", sort=False)))
    for model, pairs_path in pairs_paths.items():
        folder = out_dir / model
        pairs = pd.read_parquet(pairs_path, columns=["sample_id", "reference", "hypothesis"])
        write_model_files(results=results_table(reps_by_model[model]),
                          summary=summary_by_model[model].drop(columns=["model"]), generations=pairs,
                          drops=pd.read_csv(drops_paths[model], dtype=str, keep_default_na=False),
                          out_results=folder / "results.csv", out_summary=folder / "results_summary.csv",
                          out_generations=folder / "generations.csv", out_drops=folder / "drops.csv")


def leaderboard(*, dataset, split, summary_path, replicates_path, comparisons_path, drops_paths: dict, models_sheet,
                rank_by, fallback_rank_by, decimals, level, out, out_ranks):
    """The leaderboard CSV and the rank distribution it rests on (results/stats/.../ranks.parquet)."""
    import pandas as pd

    from radrank.leaderboard import build_leaderboard, rank_leaf_of, rank_uncertainty, read_model_metadata

    summary = pd.read_parquet(summary_path)
    rank_leaf, _ = rank_leaf_of(list(dict.fromkeys(summary["metric"])), rank_by, fallback_rank_by)
    # only the rank leaf's resamples: the file holds every leaf's
    replicates = pd.read_parquet(replicates_path, filters=[("metric", "==", rank_leaf)])
    comparisons = pd.read_parquet(comparisons_path, filters=[("metric", "==", rank_leaf)])
    rank_summary, distribution, tied = rank_uncertainty(summary, replicates, comparisons, rank_by=rank_by,
                                                        fallback_rank_by=fallback_rank_by, level=level)
    drops = {m: pd.read_csv(p, dtype=str, keep_default_na=False) for m, p in drops_paths.items()}
    meta = read_model_metadata(models_sheet) if models_sheet else None
    table = build_leaderboard(summary, drops, meta, rank_by=rank_by, fallback_rank_by=fallback_rank_by,
                              decimals=decimals, rank_summary=rank_summary, tied=tied)
    first = table.iloc[0]
    log.info("%s/%s leaderboard: %d models, %s; rank 1: %s (P(rank=1) = %s, rank interval %s)", dataset, split,
             len(table), first["Ranked by"], first["Model Name"], first["P(rank=1)"], first["Rank CI"])
    prov = provenance.record("ranks", dataset=dataset, split=split, metric=rank_leaf, level=level,
                             n_bootstrap=int(rank_summary["n_bootstrap"].iloc[0]) if len(rank_summary) else 0,
                             method="competition ranks of the models on every shared bootstrap resample "
                                    "(radrank.stats.ranks)")
    io.write_parquet(distribution, out_ranks, prov)
    io.write_csv(table, out)


def report(*, layout: list, bootstrap: dict, empty_hypothesis: str, cases: int, out_markdown, out_html,
           out_figures, metaeval_paths: dict | None = None, config_hash: str | None = None):
    """The report page, its Markdown summary and its figures as SVG files (the same SVG the page inlines).

    ``layout``: per dataset × split the files it reads (rules/common.smk, ``report_layout``);
    ``metaeval_paths``: optional {set name: agreement CSV} for the meta-evaluation section.
    """
    import os

    import pandas as pd

    from radrank.report import load_group, render_report

    groups = []
    for entry in layout:
        group = load_group(entry, cases=cases)
        names = group.names
        log.info("%s/%s: %d models (%s), %d per-sample rows, %d drill-down cases", group.dataset, group.split,
                 len(group.order), ", ".join(names[m] for m in group.order), len(group.values), len(group.cases))
        groups.append(group)
    metaeval = {name: pd.read_csv(path) for name, path in (metaeval_paths or {}).items()}
    markdown, html, figures = render_report(groups, bootstrap=bootstrap, empty_hypothesis=empty_hypothesis,
                                            cases=cases, metaeval=metaeval or None,
                                            link_base=os.path.dirname(str(out_html)), config_hash=config_hash)
    os.makedirs(out_figures, exist_ok=True)  # a directory output, complete once the page is written
    for name, svg in sorted(figures.items()):
        io.write_text(svg, os.path.join(str(out_figures), name))
    log.info("report: %d figures, %.1f kB of HTML", len(figures), len(html.encode()) / 1000)
    io.write_text(html, out_html)
    io.write_text(markdown, out_markdown)


def run_rule(snakemake, job, **kwargs):
    """Run ``job(**kwargs)`` for a rule script (a process of its own): :func:`run_logged`, and a failure
    exits non-zero after its line is logged."""
    import sys

    try:
        run_logged(job, rule=snakemake.rule, log_path=snakemake.log[0] if snakemake.log else None,
                   this_thread_only=False, **kwargs)
    except JobFailed:
        sys.exit(1)


def generate_shard(*, model, adapter, root, adapter_options, generator, settings, trust_remote_code, task, shard,
                   out_pairs, out_drops, **options):
    """One shard of a generation run: a backbone (radrank.backbones) or a user's callable over a dataset."""
    from radrank import backbones, generate
    from radrank.datasets import make_adapter

    if generator in backbones.names():
        fn = backbones.load(generator, settings, trust_remote_code, task=task)
    else:
        fn = generator  # "package.module:callable", resolved by the generation job
    generate.generate(make_adapter(adapter, root, **adapter_options), fn, shard=tuple(shard), out_pairs=out_pairs,
                      out_drops=out_drops, task=task, model=model, generator_settings=settings, **options)


def merge_generated(*, pair_paths, drop_paths, out_pairs, out_drops):
    from radrank import generate

    generate.merge(pair_paths=list(pair_paths), drop_paths=list(drop_paths), out_pairs=out_pairs,
                   out_drops=out_drops)


def metaeval_pairs(*, set_name, reader, files: dict, options: dict, out_pairs, out_items):
    """A human-judged set → canonical pairs (scored like any submission) and its item table."""
    from radrank import metaeval

    item_set = metaeval.read_set(set_name, reader, files, options)
    pairs = metaeval.pairs_table(item_set)
    paths = [p for value in files.values() for p in (value if isinstance(value, list) else [value])]
    sources = {str(p): provenance.file_sha256(p) for p in paths}
    prov = provenance.record("pairs", dataset=metaeval.dataset_name(set_name), split=metaeval.SPLIT,
                             model=metaeval.MODEL, format=f"metaeval-{reader}", sources=sources,
                             ref_section=None, empty_hypothesis="score", max_report_chars=None, n_pairs=len(pairs))
    log.info("meta-evaluation set %s: %d candidates in %d cases (%s)", set_name, len(pairs),
             item_set.items["case"].nunique(), item_set.description)
    io.write_parquet(item_set.items, out_items, {**prov, "stage": "metaeval_items", "metaeval": item_set.meta()})
    io.write_parquet(pairs, out_pairs, prov)


def metaeval_agreement(*, set_name, items_path, score_paths: list, metric_names, n_boot, seed, level, tie_tolerance,
                       out_scores, out_agreement, out_comparisons):
    """Per-item scores, agreement per metric leaf with its interval, and paired metric comparisons."""
    from radrank.metaeval import agreement
    from radrank.metaeval.items import from_meta

    prov = io.read_provenance(items_path)
    item_set = from_meta(prov["metaeval"], io.read_parquet(items_path))
    leaves = [leaf for name in metric_names for leaf in metrics.get(name).leaves]
    metric_of_leaf = {leaf.name: name for name in metric_names for leaf in metrics.get(name).leaves}
    per_item, table, comparisons = agreement.evaluate(
        item_set, _merge_scores(score_paths), leaves, n_boot=n_boot, seed=seed, level=level,
        tie_tolerance=tie_tolerance, metric_of_leaf=metric_of_leaf)
    skipped = table.loc[table["measure"] == "not_applicable", "metric"].tolist()
    if skipped:
        log.info("%s: %s are corpus statistics with no value per report; listed as not_applicable", set_name,
                 ", ".join(skipped))
    if item_set.fitted_metrics:
        log.info("%s: %s %s", set_name, ", ".join(item_set.fitted_metrics), item_set.fitted_note)
    out_prov = provenance.record(
        "metaeval", set=set_name, metrics=list(metric_names), n_bootstrap=n_boot, seed=seed, level=level,
        tie_tolerance=tie_tolerance, items=prov.get("sources"),
        score_provenance=[io.read_provenance(p).get("metric") for p in score_paths],
        method="radrank.metaeval.agreement: bootstrap over cases with radrank.stats.bootstrap's draws")
    headline = table[table["headline"]]
    for row in headline.itertuples():
        log.info("%s %s %s: %.3f [%.3f, %.3f] (n=%d)", set_name, row.measure, row.metric, row.estimate,
                 row.ci_lower, row.ci_upper, row.n)
    io.write_csv(comparisons, out_comparisons)
    io.write_csv(table, out_agreement)
    io.write_parquet(per_item, out_scores, out_prov)

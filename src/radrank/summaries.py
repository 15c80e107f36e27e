"""Per-model result files in RadHarmony's layout: results, results_summary, generations and drops.

The Python API's ``save_results`` writes all four, as RadHarmony's does. The workflow's bootstrap job
writes every model's results, results_summary and drops, but not generations.csv: that would be the
model's canonical pairs, ``results/pairs/{dataset}/{split}/{model}.parquet``, again (the same rows and
columns) as CSV text — nine tenths of the folder's bytes, 137 MB of 148 at 100 models × 2,347 cases,
rewritten whenever a model is added (benchmarks/bootstrap.py --files).
"""

from __future__ import annotations

from pathlib import Path

from radrank import io


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


def write_model_files(*, results, summary, drops, out_results, out_summary, out_drops, generations=None,
                      out_generations=None):
    """Write one model's RadHarmony-style files (the workflow's bootstrap job and the Python API share this);
    generations.csv only where ``generations`` (its pairs) are given."""
    io.write_csv(drops, out_drops)
    if generations is not None:
        io.write_csv(generations, out_generations)
    io.write_csv(summary, out_summary)
    io.write_csv(results, out_results)


def write_model_summaries(replicates, summary, drops_paths: dict, out_dir):
    """RadHarmony-style files of every model (results, results_summary, drops) under ``out_dir``/<model>/,
    from the bootstrap's replicates and summary."""
    import pandas as pd

    reps_by_model = dict(tuple(replicates.groupby("model", sort=False)))
    summary_by_model = dict(tuple(summary.groupby("model", sort=False)))
    for model, drops_path in drops_paths.items():
        folder = Path(out_dir) / model
        write_model_files(results=results_table(reps_by_model[model]),
                          summary=summary_by_model[model].drop(columns=["model"]),
                          drops=pd.read_csv(drops_path, dtype=str, keep_default_na=False),
                          out_results=folder / "results.csv", out_summary=folder / "results_summary.csv",
                          out_drops=folder / "drops.csv")

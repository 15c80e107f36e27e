"""Per-model result files in RadHarmony's layout: results, results_summary, generations and drops.

Written for every model by the workflow's bootstrap job and by the Python API's ``save_results``.
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
        folder = Path(out_dir) / model
        pairs = pd.read_parquet(pairs_path, columns=["sample_id", "reference", "hypothesis"])
        write_model_files(results=results_table(reps_by_model[model]),
                          summary=summary_by_model[model].drop(columns=["model"]), generations=pairs,
                          drops=pd.read_csv(drops_paths[model], dtype=str, keep_default_na=False),
                          out_results=folder / "results.csv", out_summary=folder / "results_summary.csv",
                          out_generations=folder / "generations.csv", out_drops=folder / "drops.csv")

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


KEYS_FILE = ".content-keys.json"  # in the group's folder: per model, what its files were written from
FILES = ("results.csv", "results_summary.csv", "drops.csv")
LAYOUT = "2"  # the files' layout and their keys' form: a change of either rewrites every folder once


def write_model_summaries(replicates, summary, drops_paths: dict, out_dir):
    """RadHarmony-style files of every model (results, results_summary, drops) under ``out_dir``/<model>/,
    from the bootstrap's replicates and summary.

    A folder whose files were written from what they would be written from now — the model's replicates, its
    summary rows and its drops file, by their digest in ``out_dir``/.content-keys.json — is left as it is (the
    bootstrap job's folder is an ``update()`` output: adding a model to a group of 100 writes one folder, not
    101; a model's numbers do not change when another joins); a model no longer in the group loses its folder.
    The models about to be rewritten leave the keys file first, so a job that dies half-way never leaves a key
    beside files written from something else."""
    import hashlib
    import json
    import shutil

    import pandas as pd

    out_dir = Path(out_dir)
    keys_path = out_dir / KEYS_FILE
    try:
        recorded = json.loads(keys_path.read_text()) if keys_path.is_file() else {}
    except ValueError:
        recorded = {}
    recorded = recorded if isinstance(recorded, dict) else {}
    for stale in (out_dir.iterdir() if out_dir.is_dir() else ()):
        if stale.is_dir() and stale.name not in drops_paths:
            shutil.rmtree(stale)
    # each model's rows by position, and the columns' values hashed once for every model (a row's hash is the same
    # in the whole frame as in its model's: hashed per model, the keys cost 6x the CPU at 100 models)
    reps_at = replicates.groupby("model", sort=False).indices
    summary_at = summary.groupby("model", sort=False).indices
    columns = [c for c in summary.columns if c != "model"]
    row_hashes = pd.util.hash_pandas_object(summary[columns], index=False).to_numpy()
    # each row's metric as a code into the distinct names (one factorize: 510,000 names as Python strings, then a
    # list of them per model, cost 0.06 CPU-s at 100 models); names and codes say the same as the names row by row
    metric_codes, distinct_names = pd.factorize(replicates["metric"])
    metric_codes, distinct_names = metric_codes.astype("int64"), [str(name) for name in distinct_names]
    values = replicates[["bootstrap", "value"]].to_numpy("float64")
    keys, todo = {}, []
    for model, drops_path in drops_paths.items():
        at = reps_at[model]
        key = hashlib.sha256()
        for part in (LAYOUT, distinct_names, columns):
            key.update(repr(part).encode())
        key.update(metric_codes[at].tobytes())
        key.update(row_hashes[summary_at[model]].tobytes())
        key.update(values[at].tobytes())
        key.update(Path(drops_path).read_bytes())
        keys[model] = key.hexdigest()
        if recorded.get(model) != keys[model] or not all((out_dir / model / name).is_file() for name in FILES):
            todo.append((model, replicates.iloc[at], summary.iloc[summary_at[model]][columns], drops_path))
    if todo or set(recorded) != set(keys):
        out_dir.mkdir(parents=True, exist_ok=True)
        io.write_text(json.dumps({m: k for m, k in keys.items() if m not in {t[0] for t in todo}}, indent=1,
                                 sort_keys=True), keys_path)
    for model, reps, rows, drops_path in todo:
        write_model_files(results=results_table(reps), summary=rows,
                          drops=io.read_text_table(drops_path),
                          **dict(zip(("out_results", "out_summary", "out_drops"),
                                     (out_dir / model / name for name in FILES))))
    if todo:
        io.write_text(json.dumps(keys, indent=1, sort_keys=True), keys_path)

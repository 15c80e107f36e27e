"""The bootstrap job's per-model RadHarmony files (radrank.summaries.write_model_summaries): a model's folder is
rewritten when what it is written from changes — its replicates' values or metrics, its summary rows, its drop
list — and only then; a model no longer in the group loses its folder."""

from __future__ import annotations

import numpy as np
import pandas as pd

from radrank import summaries
from radrank.summaries import write_model_summaries


def _inputs(tmp_path, models=("a", "b"), n_boot=4):
    rng = np.random.default_rng(0)
    reps, rows, drops = [], [], {}
    for m in models:
        for metric in ("bleu2", "rougeL"):
            for k in range(-1, n_boot):
                reps.append({"model": m, "metric": metric, "bootstrap": k, "value": float(rng.random())})
            rows.append({"model": m, "metric": metric, "estimate": float(rng.random()), "ci_lower": 0.1,
                         "ci_upper": 0.9})
        path = tmp_path / f"{m}.drops.csv"
        path.write_text("sample_id,reason,action\n")
        drops[m] = str(path)
    return pd.DataFrame(reps), pd.DataFrame(rows), drops


def test_a_folder_is_rewritten_exactly_when_its_inputs_change(tmp_path, monkeypatch):
    written = []
    real = summaries.write_model_files

    def spy(**files):
        written.append(files["out_results"].parent.name)
        return real(**files)

    monkeypatch.setattr(summaries, "write_model_files", spy)
    reps, summary, drops = _inputs(tmp_path)
    out = tmp_path / "summary"
    write_model_summaries(reps, summary, drops, out)
    assert written == ["a", "b"]
    assert {p.relative_to(out).as_posix() for p in out.glob("*/*.csv")} == {
        f"{m}/{f}" for m in "ab" for f in ("results.csv", "results_summary.csv", "drops.csv")}
    written.clear()
    write_model_summaries(reps, summary, drops, out)
    assert written == []  # nothing changed: nothing written

    changed = reps.copy()
    changed.loc[(changed["model"] == "a") & (changed["bootstrap"] == 2), "value"] += 1.0
    write_model_summaries(changed, summary, drops, out)
    assert written == ["a"]

    # b's rows with their metrics swapped (the same values, the same distinct names): b is rewritten
    written.clear()
    relabelled = changed.copy()
    at_b = relabelled["model"] == "b"
    relabelled.loc[at_b, "metric"] = relabelled.loc[at_b, "metric"].map({"bleu2": "rougeL", "rougeL": "bleu2"})
    write_model_summaries(relabelled, summary, drops, out)
    assert written == ["b"]
    results = pd.read_csv(out / "b/results.csv")
    assert list(results.columns[4:]) == ["rougeL", "bleu2"]

    only_a = relabelled[relabelled["model"] == "a"]
    write_model_summaries(only_a, summary[summary["model"] == "a"], {"a": drops["a"]}, out)
    assert not (out / "b").exists() and (out / "a/results.csv").is_file()

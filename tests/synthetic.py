"""Seeded synthetic chest X-ray report pairs and workflow outputs, shared by the tests and the benchmarks.

Reports are 20-90 words built from radiology-like sentences. A leaderboard is
simulated: each case has one reference report, and every "model" writes its own
hypothesis for it (a noisy edit of the reference: sentences dropped, replaced,
reordered, words substituted or negated), so the same reference text recurs once
per model, as in ReXrank's per-model pair tables.
"""

from __future__ import annotations

import random

FINDINGS = [
    "The lungs are clear without focal consolidation.",
    "No pleural effusion or pneumothorax is seen.",
    "The cardiomediastinal silhouette is within normal limits.",
    "Heart size is mildly enlarged.",
    "There is mild pulmonary vascular congestion.",
    "Small bilateral pleural effusions with bibasilar atelectasis.",
    "Patchy opacity in the right lower lobe may reflect pneumonia.",
    "Left basilar opacity likely represents atelectasis.",
    "Endotracheal tube terminates 4 cm above the carina.",
    "Nasogastric tube courses below the diaphragm, tip not visualized.",
    "Right internal jugular central venous catheter ends in the mid SVC.",
    "Median sternotomy wires and mediastinal clips are intact.",
    "There is moderate cardiomegaly, unchanged from the prior study.",
    "No acute osseous abnormality is identified.",
    "Degenerative changes are noted in the thoracic spine.",
    "Hilar contours are normal.",
    "Interval improvement of the left lower lobe consolidation.",
    "Mild interstitial edema has slightly worsened.",
    "Calcified granuloma in the left upper lobe is stable.",
    "A left-sided pacemaker with leads in the right atrium and ventricle.",
    "Aortic knob calcification is present.",
    "Lung volumes are low, with crowding of the bronchovascular markings.",
    "Subsegmental atelectasis at the right base.",
    "There is a small left apical pneumothorax.",
    "Hyperinflation of the lungs consistent with emphysema.",
    "Elevation of the right hemidiaphragm is again seen.",
    "Free air beneath the diaphragm is not seen.",
    "Multiple rib fractures on the left are healing.",
]

IMPRESSIONS = [
    "No acute cardiopulmonary process.",
    "Findings concerning for pneumonia in the right lower lobe.",
    "Mild pulmonary edema.",
    "Stable cardiomegaly without acute process.",
    "Support devices in standard position.",
    "Small bilateral effusions, slightly increased.",
    "Resolving left lower lobe pneumonia.",
    "Small left pneumothorax; recommend follow-up radiograph.",
    "No radiographic evidence of acute disease.",
]

SUBSTITUTES = {
    "mild": ["moderate", "minimal", "severe"],
    "small": ["moderate", "large", "trace"],
    "left": ["right", "bilateral"],
    "right": ["left", "bilateral"],
    "clear": ["hyperinflated", "well expanded"],
    "stable": ["unchanged", "increased", "decreased"],
    "normal": ["enlarged", "unremarkable"],
    "pneumonia": ["aspiration", "infection"],
    "atelectasis": ["scarring", "consolidation"],
    "effusion": ["effusions", "thickening"],
    "lower": ["upper", "middle"],
    "is": ["appears", "remains"],
}

FILLERS = ["Again,", "Comparison is made to prior.", "As before,", "PA and lateral views.", "Portable AP view."]


def _report(rng: random.Random) -> str:
    while True:
        sentences = rng.sample(FINDINGS, rng.randint(3, 8))
        text = "Findings: " + " ".join(sentences) + " Impression: " + rng.choice(IMPRESSIONS)
        if 20 <= len(text.split()) <= 90:
            return text


def _edit(reference: str, rng: random.Random, quality: float) -> str:
    """A model's hypothesis for ``reference``; higher ``quality`` keeps more of it."""
    body, _, impression = reference.partition(" Impression: ")
    sentences = [s + "." for s in body.removeprefix("Findings: ").split(". ") if s]
    sentences = [s.replace("..", ".") for s in sentences]
    kept = [s for s in sentences if rng.random() < quality] or sentences[:1]
    for _ in range(rng.randint(0, 3)):
        kept.insert(rng.randint(0, len(kept)), rng.choice(FINDINGS))
    if rng.random() < 0.3:
        rng.shuffle(kept)
    words = " ".join(kept).split()
    for i, w in enumerate(words):
        alternatives = SUBSTITUTES.get(w.lower())
        if alternatives and rng.random() > quality:
            words[i] = rng.choice(alternatives)
    if rng.random() < 0.2:
        words[:0] = rng.choice(FILLERS).split()
    impression = impression if rng.random() < quality else rng.choice(IMPRESSIONS)
    words = " ".join(words).split() + ["Impression:"] + impression.split()
    while len(words) < 20:  # keep every report at 20-90 words
        words[:0] = rng.choice(FINDINGS).split()
    words = words[-90:] if rng.random() < 0.5 else words[:90]
    text = " ".join(words)
    if rng.random() < 0.05:
        text = text.replace(". ", ".\n")  # some reports keep their line breaks
    return text


def leaderboard(n_pairs: int, n_models: int = 4, seed: int = 0) -> dict:
    """{model: DataFrame(sample_id, reference, hypothesis)}, about ``n_pairs`` pairs in all.

    Every model answers the same ``ceil(n_pairs / n_models)`` cases, so each
    reference text appears once per model.
    """
    import pandas as pd

    rng = random.Random(seed)
    n_cases = -(-n_pairs // n_models)
    references = [_report(rng) for _ in range(n_cases)]
    qualities = [0.85 - 0.15 * m for m in range(n_models)]
    out = {}
    for m in range(n_models):
        hyps = [_edit(r, rng, qualities[m]) for r in references]
        out[f"model_{m + 1}"] = pd.DataFrame({
            "sample_id": [f"case{i:05d}" for i in range(n_cases)],
            "reference": references,
            "hypothesis": hyps,
        })
    return out


def pairs_table(n_pairs: int, n_models: int = 4, seed: int = 0):
    """All models' pairs in one frame (model, sample_id, reference, hypothesis), exactly ``n_pairs`` rows."""
    import pandas as pd

    boards = leaderboard(n_pairs, n_models, seed)
    frame = pd.concat([df.assign(model=m) for m, df in boards.items()], ignore_index=True)
    frame = frame.iloc[:n_pairs].reset_index(drop=True)
    frame["sample_id"] = frame["model"] + "/" + frame["sample_id"]
    return frame[["model", "sample_id", "reference", "hypothesis"]]


# --- synthetic workflow outputs (the report's inputs) ------------------------------------------------

JUDGE_ANALYSIS = ("[Explanation]: The candidate report {verb} the reference's main findings.\n"
                  "[Clinically Significant Errors]:\n(a) False report of a finding in the candidate: {a}.\n"
                  "(b) Missing a finding present in the reference: {b}.\n"
                  "[Clinically Insignificant Errors]:\n(a) False report of a finding in the candidate: 0.\n"
                  "[Matched Findings]:\n{m}. {findings}")


def _score_columns(metric: str, quality, rng, pairs):
    """Per-sample columns of ``metric`` (radrank.metrics SPEC.columns) from a latent quality in [0, 1]."""
    import json

    import numpy as np

    from radrank import metrics

    n = len(quality)

    def noisy(scale=0.08, lo=0.0, hi=1.0):
        return np.clip(quality + rng.normal(0, scale, n), lo, hi)

    spec = metrics.get(metric)
    cols = {}
    if metric == "bleu4":
        test = rng.integers(20, 90, n)
        cols["bleu4_sentence"] = noisy(0.1) ** 1.5
        for k in range(1, 5):
            guess = np.maximum(test - k + 1, 0)
            cols[f"bleu4_correct_{k}"] = rng.binomial(guess, np.clip(quality, 0.01, 0.99) ** k)
            cols[f"bleu4_guess_{k}"] = guess
        cols["bleu4_testlen"], cols["bleu4_reflen"] = test, rng.integers(20, 90, n)
    elif metric == "radcliq":
        cols["radcliq_v0"] = 3.0 - 3.0 * noisy(0.1) + rng.normal(0, 0.05, n)
        cols["radcliq_v1"] = 1.5 - 2.5 * noisy(0.1) + rng.normal(0, 0.05, n)
    elif metric == "green":
        matched = rng.binomial(5, np.clip(quality, 0.01, 0.99))
        sig = {c: rng.binomial(1, np.clip(0.6 - quality, 0.02, 0.9) / 3) for c in "abcdef"}
        significant = sum(sig.values())
        unparsed = rng.random(n) < 0.01
        score = np.where(matched > 0, matched / np.maximum(matched + significant, 1), 0.0)
        cols["green"] = np.where(unparsed, np.nan, score)
        cols["green_matched"] = matched
        for c in "abcdef":
            cols[f"green_sig_{c}"] = sig[c]
        cols["green_significant"] = significant
        for c in "abcdef":
            cols[f"green_insig_{c}"] = np.zeros(n)
        cols["green_insignificant"] = np.zeros(n)
        findings = [" ".join(h.split(".")[0:1]) for h in pairs["hypothesis"]]
        cols["green_analysis"] = [JUDGE_ANALYSIS.format(verb="matches" if q > 0.5 else "misses", a=sig["a"][i],
                                                        b=sig["b"][i], m=matched[i], findings=findings[i])
                                  for i, q in enumerate(quality)]
        cols["green_unparsed"] = unparsed.astype("float64")
        cols["green_unparsed_reason"] = np.where(unparsed, "no [Matched Findings] section", "")
        cols["green_failure"] = np.where(unparsed, "unparsed", "")
        cols["green_attempts"] = np.where(unparsed, 2, 1)
    elif metric == "crimson":
        responses, values = [], []
        for i, q in enumerate(quality):
            false = [] if q > 0.5 else ["P2"]
            missing = [] if q > 0.3 else ["R2"]
            responses.append(json.dumps({
                "reference_findings": [{"id": "R1", "finding": "right pleural effusion",
                                        "clinical_significance": "actionable_not_urgent"},
                                       {"id": "R2", "finding": "left basilar atelectasis",
                                        "clinical_significance": "not_actionable"}],
                "predicted_findings": [{"id": "P1", "finding": "right pleural effusion",
                                        "clinical_significance": "actionable_not_urgent"},
                                       {"id": "P2", "finding": "pneumothorax", "clinical_significance": "urgent"}],
                "matched_findings": [{"ref_id": "R1", "pred_id": "P1"}],
                "errors": {"false_findings": false, "missing_findings": missing,
                           "attribute_errors": [{"pred_id": "P1", "error_types": ["severity"],
                                                 "severity": "significant"}] if q < 0.6 else []}}))
            values.append(float(np.clip(q - 0.3 * len(false), -0.9, 1)))
        for c in spec.columns:
            cols[c] = np.zeros(n)
        cols["crimson"] = np.asarray(values)
        cols["crimson_reason"] = [""] * n
        cols["crimson_response"] = responses
        cols["crimson_failure"] = [""] * n
        cols["crimson_attempts"] = np.ones(n, dtype="int64")
    else:
        for c in spec.columns:
            cols[c] = noisy()
        if spec.failures is not None:  # a judge's failure kind is a word, its attempts a count
            cols[spec.failures.kind_column] = [""] * n
            cols[spec.failures.attempts_column] = np.ones(n, dtype="int64")
    return {c: cols[c] for c in spec.columns}


def write_workflow_outputs(root, *, n_models: int = 4, n_cases: int = 200, splits=("findings",),
                           dataset: str = "synthetic", metric_names=("bleu2", "bleu4", "rouge", "radcliq"),
                           n_boot: int = 200, seed: int = 0, level: float = 0.95):
    """Write what the workflow writes before the report — pairs, drop lists, per-sample score files,
    statistics, rank distributions and leaderboards — for a synthetic leaderboard under ``root``, and
    return the report layout (:meth:`radrank.jobs.Report.layout`) with paths under ``root``.

    Scores are drawn from a latent per-(model, case) quality (model m is better than model m+1 on
    average), not computed by the metrics; statistics and leaderboards are computed by radrank's own
    jobs. Every third model drops one case (scored as empty, as the workflow does) and scores one empty
    hypothesis.
    """
    import numpy as np
    import pandas as pd

    from radrank import io, jobs, metrics, provenance

    root = __import__("pathlib").Path(root)
    rng_text = random.Random(seed)
    rng = np.random.default_rng(seed)
    models = [f"model_{m + 1:03d}" for m in range(n_models)]
    sheet = root / "models.tsv"
    sheet.parent.mkdir(parents=True, exist_ok=True)
    sheet.write_text("model\tname\tdate\tinstitution\turl\n" + "".join(
        f"{m}\tSynthetic model {i + 1}\t2026-01-{i % 28 + 1:02d}\tLab {i % 3}\thttps://example.org/{m}\n"
        for i, m in enumerate(models)))
    layout = []
    for split in splits:
        references = [_report(rng_text) for _ in range(n_cases)]
        ids = [f"case{i:05d}" for i in range(n_cases)]
        difficulty = rng.normal(0, 0.12, n_cases)
        group = {"dataset": dataset, "split": split}
        stats = root / f"results/stats/{dataset}/{split}"
        entries, score_paths = {}, {}
        for mi, model in enumerate(models):
            quality_level = 0.7 - 0.15 * mi / max(n_models - 1, 1)
            keep = np.ones(n_cases, dtype=bool)
            drops = []
            if mi % 3 == 0:
                keep[mi % n_cases] = False
                drops.append({"sample_id": ids[mi % n_cases], "study_id": str(mi % n_cases),
                              "reason": "empty_reference", "action": "dropped", "row": ids[mi % n_cases],
                              "detail": "reference text is empty after section selection"})
            hyps = [_edit(r, rng_text, quality_level + 0.1) for r in references]
            if mi % 3 == 0:
                j = (mi + 1) % n_cases
                hyps[j] = ""
                drops.append({"sample_id": ids[j], "study_id": str(j), "reason": "empty_hypothesis",
                              "action": "scored_as_empty", "row": ids[j], "detail": "hypothesis is empty"})
            every_case = pd.DataFrame({
                "sample_id": ids, "study_id": np.arange(n_cases), "reference": references, "hypothesis": hyps,
                "context": [f"Age:{40 + i % 50}.0.Gender:{'MF'[i % 2]}.Indication:Cough.Comparison: None."
                            for i in range(n_cases)],
                "age": [40.0 + i % 50 for i in range(n_cases)], "sex": ["MF"[i % 2] for i in range(n_cases)],
                "indication": ["Cough"] * n_cases, "comparison": [None] * n_cases,
            })
            pairs = every_case[keep].reset_index(drop=True)
            # scores cover the case set, as the scoring jobs align them: a dropped case scores as an empty report
            quality = np.clip(quality_level + difficulty + rng.normal(0, 0.15, n_cases), 0, 1)
            quality[~keep] = 0.0
            entry = {**group, "model": model}
            pairs_path = root / f"results/pairs/{dataset}/{split}/{model}.parquet"
            drops_path = root / f"results/pairs/{dataset}/{split}/{model}.drops.csv"
            io.write_parquet(pairs, pairs_path, provenance.record(
                "pairs", **entry, format="synthetic", sources={"path": f"synthetic/{model}.json", "sha256": "0" * 64},
                n_pairs=len(pairs)))
            io.write_csv(pd.DataFrame(drops, columns=["sample_id", "study_id", "reason", "action", "row", "detail"]),
                         drops_path)
            scores = {}
            for name in metric_names:
                metric = metrics.get(name)
                identity = metric.identity(metric.settings())
                frame = pd.DataFrame({"sample_id": every_case["sample_id"],
                                      **_score_columns(name, quality, rng, every_case)})
                path = root / f"results/scores/{dataset}/{split}/{name}/{model}.parquet"
                io.write_parquet(frame, path, provenance.record(
                    "scores", metric=name, metric_version=identity["version"], settings=identity["settings"],
                    environment=provenance.environment(metric.packages)))
                scores[name] = str(path)
            entries[model] = {"pairs": str(pairs_path), "drops": str(drops_path), "scores": scores}
            score_paths[model] = list(scores.values())
        files = jobs.Files
        cases = root / f"results/cases/{dataset}/{split}.parquet"
        accounting = root / f"results/cases/{dataset}/{split}.accounting"
        jobs.Cases(dataset=dataset, split=split, models=tuple(models), missing_section="drop",
                   ref_section="full").run(files(pairs=[entries[m]["pairs"] for m in models],
                                                 drops=[entries[m]["drops"] for m in models]),
                                           files(cases=cases, accounting=f"{accounting}.parquet",
                                                 accounting_csv=f"{accounting}.csv"))
        jobs.Bootstrap(dataset=dataset, split=split, models=tuple(models), metrics=tuple(metric_names), n=n_boot,
                       seed=seed, level=level).run(
            files(scores=[p for m in models for p in score_paths[m]], drops=[entries[m]["drops"] for m in models],
                  cases=str(cases), accounting=f"{accounting}.parquet"),
            files(**stats_outputs(stats), model_files=root / f"results/summary/{dataset}/{split}"))
        board = root / f"results/leaderboard/{dataset}_{split}.csv"
        jobs.Leaderboard(dataset=dataset, split=split, models=tuple(models), rank_by="radcliq_v1",
                         fallback_rank_by="bleu2", decimals=3, level=level).run(
            files(summary=stats / "summary.parquet", rank_replicates=stats / "rank_replicates.parquet",
                  coverage=stats / "coverage.parquet", comparisons=stats / "comparisons.parquet",
                  failures=stats / "failures.parquet", drops=[entries[m]["drops"] for m in models],
                  models_sheet=str(sheet)),
            files(board=board, ranks=stats / "ranks.parquet"))
        layout.append({**group, "leaderboard": str(board), "ranks": str(stats / "ranks.parquet"), "cases": str(cases), "accounting": f"{accounting}.parquet",
                       "summary": str(stats / "summary.parquet"), "comparisons": str(stats / "comparisons.parquet"),
                       "models": entries})
    return layout


def stats_outputs(stats: Path) -> dict:
    """The statistics job's files in folder ``stats`` (rules/stats.smk), but for its per-model folder."""
    return {"replicates": stats / "replicates.parquet", "summary": stats / "summary.parquet",
            "comparisons": stats / "comparisons.parquet", "comparisons_csv": stats / "comparisons.csv",
            "coverage": stats / "coverage.parquet", "rank_replicates": stats / "rank_replicates.parquet",
            "failures": stats / "failures.parquet"}

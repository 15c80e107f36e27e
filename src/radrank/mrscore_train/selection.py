"""Checkpoint selection and the model card.

Every checkpoint the trainer saved is exported into the folder format the ``mrscore`` metric loads
(:func:`radrank.mrscore_train.trainer.export_checkpoint`) and scored **through the metric itself**, so
what is measured is what a leaderboard will run:

* validation pairwise accuracy — the share of held-out pairs whose chosen candidate gets the higher
  reward (a tie counts as wrong);
* agreement with radiologists on the human set (RadPref: the meta-evaluation reader and
  :func:`radrank.metaeval.agreement.evaluate`, bootstrap over cases): Kendall's τ-b with the mean rating
  and its interval, pairwise agreement, and Spearman's ρ (point estimate).

The checkpoint with the highest τ-b is kept (ties: the higher validation accuracy, then the earlier
step) and copied to ``model/`` with ``MODEL_CARD.md``.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
from pathlib import Path

import numpy as np

log = logging.getLogger("radrank")

def _reward_settings(model_dir, selection):
    from radrank import metrics

    return metrics.get("mrscore").settings({"model": str(model_dir), "batch_size": selection.batch_size})


def validation_accuracy(pairs, settings, runtime) -> tuple[float, int]:
    """Share of ``pairs`` whose chosen candidate gets the strictly higher reward, and how many pairs."""
    import pandas as pd

    from radrank import metrics

    if pairs.empty:
        return math.nan, 0
    frame = pd.DataFrame({
        "sample_id": [f"{p}|chosen" for p in pairs["pair_id"]] + [f"{p}|rejected" for p in pairs["pair_id"]],
        "reference": list(pairs["reference"]) * 2,
        "hypothesis": list(pairs["chosen"]) + list(pairs["rejected"])})
    rewards = metrics.score("mrscore", frame, settings, runtime=runtime)["mrscore_reward"].to_numpy()
    n = len(pairs)
    return float(np.mean(rewards[:n] > rewards[n:])), n


def human_agreement(item_set, settings, selection, runtime) -> dict:
    """τ-b (with interval), pairwise agreement and Spearman's ρ of MRScore with the set's mean rating."""
    from scipy.stats import spearmanr

    from radrank import metaeval, metrics
    from radrank.metaeval import agreement

    pairs = metaeval.pairs_table(item_set)
    scores = metrics.score("mrscore", pairs, settings, runtime=runtime)
    per_item, table, _ = agreement.evaluate(item_set, scores, metrics.leaves("mrscore"), n_boot=selection.n_boot,
                                            seed=selection.seed, level=selection.level)
    rows = table[(table["metric"] == "mrscore") & (table["group"] == "all")].set_index("measure")
    target = item_set.targets[0]
    rho = spearmanr(per_item["mrscore"], per_item[target.name]).statistic
    tau = rows.loc["kendall_tau_b"]
    return {"kendall_tau_b": float(tau["estimate"]), "kendall_tau_b_lower": float(tau["ci_lower"]),
            "kendall_tau_b_upper": float(tau["ci_upper"]),
            "pairwise_agreement": float(rows.loc["pairwise_agreement", "estimate"])
            if "pairwise_agreement" in rows.index else math.nan,
            "spearman": float(rho), "human_items": int(tau["n"]), "human_ceiling": float(tau["human_ceiling"])}


def select(train_dir, export_root, pairs, item_set, cfg, runtime=None):
    """Score every checkpoint; returns ``(selection table, best export folder)``."""
    import pandas as pd

    from radrank.mrscore_train.trainer import checkpoints, export_checkpoint
    from radrank.runtime import Runtime

    runtime = runtime or Runtime()
    found = checkpoints(Path(train_dir) / "checkpoints")
    if not found:
        raise RuntimeError(f"no checkpoint under {Path(train_dir) / 'checkpoints'}: the training job saved none")
    validation = pairs[pairs["split"] == "validation"].reset_index(drop=True)
    rows, exports = [], {}
    for step, path in found:
        out = Path(export_root) / path.name
        if out.exists():
            shutil.rmtree(out)
        export_checkpoint(path, out, base_model=cfg.train.base_model, base_revision=cfg.train.base_revision,
                          prompt=cfg.prompt, trust_remote_code=cfg.train.trust_remote_code,
                          extra={"training": {"name": cfg.name, "checkpoint": path.name, "step": step}})
        settings = _reward_settings(out, cfg.selection)
        accuracy, n_val = validation_accuracy(validation, settings, runtime)
        rows.append({"checkpoint": path.name, "step": step, "validation_pairs": n_val,
                     "validation_accuracy": accuracy, **human_agreement(item_set, settings, cfg.selection, runtime)})
        exports[path.name] = out
        log.info("mrscore_training: %s: validation accuracy %.3f (%d pairs), Kendall tau-b %.3f [%.3f, %.3f] on %s",
                 path.name, accuracy, n_val, rows[-1]["kendall_tau_b"], rows[-1]["kendall_tau_b_lower"],
                 rows[-1]["kendall_tau_b_upper"], item_set.name)
    table = pd.DataFrame(rows)

    def key(r):
        tau = r["kendall_tau_b"] if np.isfinite(r["kendall_tau_b"]) else -np.inf
        acc = r["validation_accuracy"] if np.isfinite(r["validation_accuracy"]) else -np.inf
        return (tau, acc, -r["step"])

    best = max(rows, key=key)["checkpoint"]
    table["selected"] = table["checkpoint"] == best
    return table, exports[best]


def _fmt(x, digits=3) -> str:
    return "n/a" if x is None or (isinstance(x, float) and not np.isfinite(x)) else f"{x:.{digits}f}"


def model_card(cfg, *, selection, state: dict, counts: dict, models: dict, item_set_description: str) -> str:
    """The Markdown card of the kept model: what it was trained on, how, and how well it agrees."""
    from radrank.metrics.mrscore import prompt_of

    best = selection[selection["selected"]].iloc[0]
    trainable, total = state.get("trainable_parameters"), state.get("total_parameters")
    share = f" ({100 * trainable / total:.3f} % of {total:,})" if trainable and total else ""
    lines = [
        f"# MRScore reward model `{cfg.name}`",
        "",
        "A reward model trained by radrank with the method of MRScore (Liu et al. 2024, arXiv 2404.17778): "
        "tiered candidates graded with the seven-criterion rubric, preference pairs with margins, a LoRA "
        "reward model; MRScore = sigmoid(reward). These are not the paper's weights (never released)."
        + (" **Demo run: tiny random models, meaningless numbers.**" if cfg.demo_models else ""),
        "",
        "## Use",
        "",
        "```yaml",
        "metrics: [..., mrscore]",
        "metric_settings:",
        f"  mrscore: {{model: {state.get('model_dir', 'results/mrscore/' + cfg.name + '/model')}}}",
        "```",
        "",
        "## Agreement",
        "",
        f"Selected: `{best['checkpoint']}` (step {int(best['step'])}), the highest Kendall τ-b of "
        f"{len(selection)} checkpoints on {item_set_description}.",
        "",
        f"* Kendall τ-b with the mean radiologist rating: **{_fmt(best['kendall_tau_b'])}** "
        f"[{_fmt(best['kendall_tau_b_lower'])}, {_fmt(best['kendall_tau_b_upper'])}] "
        f"({int(cfg.selection.level * 100)} % bootstrap over cases, {cfg.selection.n_boot} resamples; "
        f"{int(best['human_items'])} reports)",
        f"* Spearman ρ: {_fmt(best['spearman'])}; pairwise agreement: {_fmt(best['pairwise_agreement'])}",
        f"* Validation pairwise accuracy: {_fmt(best['validation_accuracy'])} "
        f"({int(best['validation_pairs'])} held-out pairs)",
        "* The paper (Mistral-7B, its own 100 rated reports): τ 0.250, ρ 0.304.",
        "",
        "| checkpoint | step | val. accuracy | τ-b | τ-b interval | Spearman ρ | selected |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in selection.to_dict("records"):
        lines.append(f"| {r['checkpoint']} | {r['step']} | {_fmt(r['validation_accuracy'])} | "
                     f"{_fmt(r['kendall_tau_b'])} | [{_fmt(r['kendall_tau_b_lower'])}, "
                     f"{_fmt(r['kendall_tau_b_upper'])}] | {_fmt(r['spearman'])} | {'yes' if r['selected'] else ''} |")
    lines += [
        "",
        "## Data",
        "",
        f"* References: {counts['references']} used ({counts['references_dropped']} listed as unusable, "
        f"{counts.get('references_available', counts['references'])} available) from "
        f"{', '.join(s.label for s in cfg.sources)}",
        f"* Candidates: {counts['written']} written for tiers {', '.join(t.name for t in cfg.tiers)} "
        f"(× {cfg.candidates.candidates_per_tier} per tier); {counts['dropped_write']} dropped while writing, "
        f"{counts['dropped_grade']} while grading ({counts['dropped_unparsed']} unparsed verdicts, "
        f"{counts['dropped_tier']} outside their tier); {counts['kept']} kept",
        "",
        "| tier | written | kept | mean score kept |",
        "|---|---|---|---|",
        *(f"| {t} | {n} | {k} | {_fmt(m, 1)} |" for t, n, k, m in counts.get("tiers", ())),
        "",
        f"* Pairs: {counts['pairs_train']} train, {counts['pairs_validation']} validation (split by reference; "
        f"δ = {cfg.pairs.min_gap:g}, margin = gap / {cfg.pairs.margin_scale:g})",
        "",
        "## Training",
        "",
        f"* Base model: `{cfg.train.base_model}`" + (f" at `{cfg.train.base_revision}`" if cfg.train.base_revision
                                                    else ""),
        f"* Trainable parameters: {trainable:,}{share}" if trainable else "* Trainable parameters: n/a",
        f"* Steps: {state.get('global_step', 'n/a')}",
        "",
        "## Settings",
        "",
        "```json",
        json.dumps({"tiers": [[t.low, t.high] for t in cfg.tiers], "candidates": cfg.candidates.identity(),
                    "rubric": cfg.rubric.identity(), "pairs": cfg.pairs.identity(), "train": cfg.train.identity(),
                    "prompt": prompt_of(cfg.prompt),
                    "selection": cfg.selection.identity()}, indent=1, default=str),
        "```",
        "",
        "## Provenance",
        "",
        "```json",
        json.dumps({**models, "versions": state.get("versions", {})}, indent=1, default=str),
        "```",
        "",
    ]
    return "\n".join(lines)

"""Exact paired bootstrap over case ids.

For one dataset × split, the cases are the sorted union of the sample ids of
every model. One seeded matrix of resample indices (``n_boot`` × ``n_cases``,
numpy's PCG64 with the configured seed) is drawn once and shared by every model
and metric, so all models are resampled on the same cases (a paired bootstrap).
A resample is held as counts per case (how often each case was drawn), and each
leaf is its value at the count-weighted totals of its per-sample sufficient
statistics (:mod:`radrank.metrics.base`) — the same number the metric would give
on the resampled pairs, without re-running it.

Missing cases: a case a model has no pair for (dropped, or absent from its
submission) contributes nothing to that model's totals, so the model's value on
a resample is its value on the drawn cases it has. A comparison between two
models uses only the cases both have (each model's totals restricted to them),
so the difference is paired case by case. ``n`` and ``n_common`` report how many
cases each number rests on.

Outputs per (model, leaf): the point estimate on all cases, the mean and
standard deviation (ddof=1) of the replicates, and the percentile interval at
``level``. Per pair of models: the difference (a − b), its percentile interval,
and a two-sided bootstrap p-value, 2·min(P*(Δ ≤ 0), P*(Δ ≥ 0)) capped at 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np

CHUNK = 256  # resamples generated and reduced at a time: bounds memory for large n


def _chunks(n_boot: int):
    for start in range(0, n_boot, CHUNK):
        yield start, min(CHUNK, n_boot - start)


def resample_indices(n_cases: int, n_boot: int, seed: int) -> np.ndarray:
    """The (n_boot, n_cases) index matrix; row b is resample b."""
    rng = np.random.Generator(np.random.PCG64(seed))
    return np.concatenate([rng.integers(0, n_cases, size=(size, n_cases)) for _, size in _chunks(n_boot)]) \
        if n_boot else np.empty((0, n_cases), dtype="int64")


def _counts_from_indices(idx: np.ndarray, n_cases: int) -> np.ndarray:
    rows = idx.shape[0]
    flat = (idx + (np.arange(rows)[:, None] * n_cases)).ravel()
    return np.bincount(flat, minlength=rows * n_cases).reshape(rows, n_cases).astype("float64")


def resample_counts(n_cases: int, n_boot: int, seed: int):
    """Yield count matrices (chunk, n_cases), in order, for the same draws as :func:`resample_indices`."""
    rng = np.random.Generator(np.random.PCG64(seed))
    for _, size in _chunks(n_boot):
        yield _counts_from_indices(rng.integers(0, n_cases, size=(size, n_cases)), n_cases)


@dataclass
class BootstrapResult:
    cases: list  # the case ids, in resample-matrix order
    replicates: "object"  # DataFrame: model, metric, bootstrap (-1 = point estimate), value
    summary: "object"  # DataFrame: model, metric, estimate, mean, std, ci_lower, ci_upper, n, ...
    comparisons: "object"  # DataFrame: model_a, model_b, metric, delta, ci_lower, ci_upper, p_value, n_common


def _stats_matrix(scores, leaf, case_pos: np.ndarray, n_cases: int) -> np.ndarray:
    per_sample = leaf.statistics(scores)
    full = np.zeros((n_cases, per_sample.shape[1]))
    full[case_pos] = per_sample
    return full


def _interval(values: np.ndarray, level: float):
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return np.nan, np.nan
    alpha = (1 - level) / 2
    lo, hi = np.quantile(finite, [alpha, 1 - alpha])
    return float(lo), float(hi)


def _p_value(deltas: np.ndarray) -> float:
    finite = deltas[np.isfinite(deltas)]
    if finite.size == 0:
        return np.nan
    return float(min(1.0, 2 * min(np.mean(finite <= 0), np.mean(finite >= 0))))


def bootstrap(scores_by_model: dict, leaves, *, n_boot: int = 1000, seed: int = 0, level: float = 0.95,
              compare: bool = True) -> BootstrapResult:
    """Point estimates, replicates, intervals and paired comparisons.

    ``scores_by_model`` maps a model name to its per-sample scores: a DataFrame
    with ``sample_id`` and the columns every leaf in ``leaves`` reads.
    """
    import pandas as pd

    models = sorted(scores_by_model)
    cases = sorted(set().union(*(set(scores_by_model[m]["sample_id"]) for m in models))) if models else []
    n_cases = len(cases)
    pos = {c: i for i, c in enumerate(cases)}
    present = {}
    stats = {}  # (model, leaf name) -> (n_cases, k)
    for m in models:
        df = scores_by_model[m]
        if df["sample_id"].duplicated().any():
            raise ValueError(f"model {m!r}: duplicate sample ids in per-sample scores")
        case_pos = df["sample_id"].map(pos).to_numpy()
        mask = np.zeros(n_cases, dtype=bool)
        mask[case_pos] = True
        present[m] = mask
        for leaf in leaves:
            stats[m, leaf.name] = _stats_matrix(df, leaf, case_pos, n_cases)

    # All models' statistics side by side: one matrix product per chunk of resamples.
    keys = list(stats)
    widths = [stats[k].shape[1] for k in keys]
    big = np.concatenate([stats[k] for k in keys], axis=1) if keys else np.zeros((n_cases, 0))
    offsets = np.cumsum([0] + widths)
    leaf_by_name = {leaf.name: leaf for leaf in leaves}

    def values_at(totals_all: np.ndarray) -> dict:
        return {k: leaf_by_name[k[1]].value(totals_all[:, offsets[i]: offsets[i + 1]]) for i, k in enumerate(keys)}

    point = values_at(big.sum(axis=0, keepdims=True))
    reps = {k: np.empty(n_boot) for k in keys}
    pairs = list(combinations(models, 2)) if compare else []
    # Pairs whose case sets differ need their own restricted statistics.
    restricted = {}
    for a, b in pairs:
        if not np.array_equal(present[a], present[b]):
            common = present[a] & present[b]
            for leaf in leaves:
                for m in (a, b):
                    restricted[(a, b), m, leaf.name] = stats[m, leaf.name] * common[:, None]
    r_keys = list(restricted)
    r_big = np.concatenate([restricted[k] for k in r_keys], axis=1) if r_keys else None
    r_offsets = np.cumsum([0] + [restricted[k].shape[1] for k in r_keys])
    r_reps = {k: np.empty(n_boot) for k in r_keys}
    r_point = {}
    if r_keys:
        tot = r_big.sum(axis=0, keepdims=True)
        for i, k in enumerate(r_keys):
            r_point[k] = leaf_by_name[k[2]].value(tot[:, r_offsets[i]: r_offsets[i + 1]])[0]

    start = 0
    for counts in resample_counts(n_cases, n_boot, seed):
        rows = slice(start, start + counts.shape[0])
        for k, v in values_at(counts @ big).items():
            reps[k][rows] = v
        if r_keys:
            tot = counts @ r_big
            for i, k in enumerate(r_keys):
                r_reps[k][rows] = leaf_by_name[k[2]].value(tot[:, r_offsets[i]: r_offsets[i + 1]])
        start += counts.shape[0]

    rep_rows, summary_rows = [], []
    for (m, name) in keys:
        est = float(point[m, name][0])
        rep_rows.append((m, name, -1, est))
        rep_rows.extend((m, name, b, float(v)) for b, v in enumerate(reps[m, name]))
        lo, hi = _interval(reps[m, name], level) if n_boot else (np.nan, np.nan)
        finite = reps[m, name][np.isfinite(reps[m, name])]
        summary_rows.append({
            "model": m, "metric": name, "label": leaf_by_name[name].label,
            "higher_is_better": leaf_by_name[name].higher_is_better, "estimate": est,
            "mean": float(finite.mean()) if finite.size else np.nan,
            "std": float(finite.std(ddof=1)) if finite.size > 1 else np.nan,
            "ci_lower": lo, "ci_upper": hi,
            "n": int(present[m].sum()), "n_bootstrap": n_boot, "level": level, "seed": seed,
        })

    comparison_rows = []
    for a, b in pairs:
        for leaf in leaves:
            key_a, key_b = ((a, b), a, leaf.name), ((a, b), b, leaf.name)
            if key_a in restricted:
                delta_point = r_point[key_a] - r_point[key_b]
                deltas = r_reps[key_a] - r_reps[key_b]
            else:
                delta_point = point[a, leaf.name][0] - point[b, leaf.name][0]
                deltas = reps[a, leaf.name] - reps[b, leaf.name]
            lo, hi = _interval(deltas, level) if n_boot else (np.nan, np.nan)
            comparison_rows.append({
                "model_a": a, "model_b": b, "metric": leaf.name, "delta": float(delta_point),
                "ci_lower": lo, "ci_upper": hi, "p_value": _p_value(deltas) if n_boot else np.nan,
                "n_common": int((present[a] & present[b]).sum()),
                "higher_is_better": leaf.higher_is_better,
            })

    replicates = pd.DataFrame(rep_rows, columns=["model", "metric", "bootstrap", "value"])
    summary = pd.DataFrame(summary_rows, columns=["model", "metric", "label", "higher_is_better", "estimate", "mean", "std", "ci_lower",
                                                  "ci_upper", "n", "n_bootstrap", "level", "seed"])
    comparisons = pd.DataFrame(comparison_rows, columns=["model_a", "model_b", "metric", "delta", "ci_lower",
                                                         "ci_upper", "p_value", "n_common", "higher_is_better"])
    return BootstrapResult(cases=cases, replicates=replicates, summary=summary, comparisons=comparisons)

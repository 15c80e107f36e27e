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

Memory is linear in the number of models: the resample counts are held once
(2 bytes a count up to 65,535 cases), each model's statistics once, and the
comparisons on common cases are made one common case set at a time, each pair
reduced to its row at once (no per-pair copies of statistics or replicates).

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


def _all_counts(n_cases: int, n_boot: int, seed: int) -> np.ndarray:
    """Every resample's counts, (n_boot, n_cases), in the smallest unsigned type holding them exactly
    (a count is at most n_cases): 2 bytes per entry up to 65,535 cases instead of 8."""
    dtype = np.min_scalar_type(max(n_cases, 1))
    out = np.empty((n_boot, n_cases), dtype=dtype)
    for (start, size), chunk in zip(_chunks(n_boot), resample_counts(n_cases, n_boot, seed)):
        out[start: start + size] = chunk
    return out


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


def percentile_interval(values: np.ndarray, level: float):
    """The percentile interval of the finite replicates at ``level``; (NaN, NaN) when none is finite."""
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return np.nan, np.nan
    alpha = (1 - level) / 2
    lo, hi = np.quantile(finite, [alpha, 1 - alpha])
    return float(lo), float(hi)


def bootstrap_p_value(deltas: np.ndarray) -> float:
    """Two-sided bootstrap p-value of a difference, 2·min(P*(Δ ≤ 0), P*(Δ ≥ 0)), capped at 1."""
    finite = deltas[np.isfinite(deltas)]
    if finite.size == 0:
        return np.nan
    return float(min(1.0, 2 * min(np.mean(finite <= 0), np.mean(finite >= 0))))


def _replicate_values(model_stats: dict, leaves, offsets, counts: np.ndarray, n_boot: int, mask=None):
    """Point estimates and bootstrap replicates of every leaf of every model in ``model_stats``
    (model -> its leaves' statistics side by side, (n_cases, Σk)), restricted to the cases in ``mask``
    if given: ({(model, leaf name): point}, {(model, leaf name): (n_boot,) replicates}).

    One matrix product per model and chunk of resamples, each of the same shape, so a model's numbers
    never depend on which other models are scored with it (not even in the last bit).
    """
    mats = {m: (S if mask is None else S * mask[:, None]) for m, S in model_stats.items()}
    point, reps = {}, {}
    for m, S in mats.items():
        totals = S.sum(axis=0, keepdims=True)
        for i, leaf in enumerate(leaves):
            point[m, leaf.name] = leaf.value(totals[:, offsets[i]: offsets[i + 1]])[0]
            reps[m, leaf.name] = np.empty(n_boot)
    for start, size in _chunks(n_boot):
        chunk = counts[start: start + size].astype("float64")
        for m, S in mats.items():
            totals = chunk @ S
            for i, leaf in enumerate(leaves):
                reps[m, leaf.name][start: start + size] = leaf.value(totals[:, offsets[i]: offsets[i + 1]])
    return point, reps


def _comparison(delta_point, deltas: np.ndarray, n_boot: int, level: float) -> dict:
    lo, hi = percentile_interval(deltas, level) if n_boot else (np.nan, np.nan)
    return {"delta": float(delta_point), "ci_lower": lo, "ci_upper": hi,
            "p_value": bootstrap_p_value(deltas) if n_boot else np.nan}


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
    model_stats = {}  # model -> (n_cases, Σk): its leaves' statistics side by side, zero where it has no pair
    for m in models:
        df = scores_by_model[m]
        if df["sample_id"].duplicated().any():
            raise ValueError(f"model {m!r}: duplicate sample ids in per-sample scores")
        case_pos = df["sample_id"].map(pos).to_numpy()
        mask = np.zeros(n_cases, dtype=bool)
        mask[case_pos] = True
        present[m] = mask
        parts = [_stats_matrix(df, leaf, case_pos, n_cases) for leaf in leaves]
        model_stats[m] = np.concatenate(parts, axis=1) if parts else np.zeros((n_cases, 0))
    offsets = np.cumsum([0] + [2 if leaf.is_mean else len(leaf.stats) for leaf in leaves])  # leaf columns
    leaf_by_name = {leaf.name: leaf for leaf in leaves}
    counts = _all_counts(n_cases, n_boot, seed)
    keys = [(m, leaf.name) for m in models for leaf in leaves]
    point, reps = _replicate_values(model_stats, leaves, offsets, counts, n_boot)

    pairs = list(combinations(models, 2)) if compare else []
    compared = {}  # (a, b, leaf name) -> delta, ci_lower, ci_upper, p_value
    # Pairs whose case sets differ are compared on their common cases: grouped by that
    # set, each group's models' statistics are masked to it once, and each pair is reduced
    # to its row before the next group.
    by_common: dict = {}
    for a, b in pairs:
        if not np.array_equal(present[a], present[b]):
            common = present[a] & present[b]
            by_common.setdefault(common.tobytes(), (common, []))[1].append((a, b))
    for common, group in by_common.values():
        involved = {m: model_stats[m] for m in sorted({m for pair in group for m in pair})}
        r_point, r_reps = _replicate_values(involved, leaves, offsets, counts, n_boot, mask=common)
        for a, b in group:
            for leaf in leaves:
                compared[a, b, leaf.name] = _comparison(r_point[a, leaf.name] - r_point[b, leaf.name],
                                                        r_reps[a, leaf.name] - r_reps[b, leaf.name], n_boot, level)
        del r_reps

    summary_rows = []
    for (m, name) in keys:
        est = float(point[m, name])
        lo, hi = percentile_interval(reps[m, name], level) if n_boot else (np.nan, np.nan)
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
        n_common = int((present[a] & present[b]).sum())
        for leaf in leaves:
            row = compared.get((a, b, leaf.name))
            if row is None:
                row = _comparison(point[a, leaf.name] - point[b, leaf.name],
                                  reps[a, leaf.name] - reps[b, leaf.name], n_boot, level)
            comparison_rows.append({"model_a": a, "model_b": b, "metric": leaf.name, **row, "n_common": n_common,
                                    "higher_is_better": leaf.higher_is_better})

    # Replicates in long form, built from arrays (one row per model, leaf and resample; -1 = point estimate).
    per_key = n_boot + 1
    replicates = pd.DataFrame({
        "model": np.repeat(np.array([m for m, _ in keys], dtype=object), per_key),
        "metric": np.repeat(np.array([name for _, name in keys], dtype=object), per_key),
        "bootstrap": np.tile(np.arange(-1, n_boot, dtype="int64"), len(keys)),
        "value": np.concatenate([np.concatenate([[float(point[k])], reps[k]]) for k in keys])
        if keys else np.zeros(0),
    })
    summary = pd.DataFrame(summary_rows, columns=["model", "metric", "label", "higher_is_better", "estimate", "mean",
                                                  "std", "ci_lower", "ci_upper", "n", "n_bootstrap", "level", "seed"])
    comparisons = pd.DataFrame(comparison_rows, columns=["model_a", "model_b", "metric", "delta", "ci_lower",
                                                         "ci_upper", "p_value", "n_common", "higher_is_better"])
    return BootstrapResult(cases=cases, replicates=replicates, summary=summary, comparisons=comparisons)


# Memory to declare for a bootstrap job (statistics, replicates and every file written from them). Measured by
# benchmarks/memory.py at 2,347 cases, 5 leaves, 1,000 resamples: 190 MB at 10 models, 325 MB at 100 (0.3 MB per
# model × leaf); declared with ~3x headroom for larger case sets: a fixed part plus 1 MB per model × leaf × 1000
# resamples.
BASE_MB = 500
MB_PER_MODEL_LEAF = 1.0


def memory_mb(n_models: int, n_leaves: int, n_boot: int) -> int:
    """Memory to declare for one bootstrap job (first attempt): linear in models × leaves × resamples."""
    return int(BASE_MB + MB_PER_MODEL_LEAF * n_models * n_leaves * max(n_boot, 1) / 1000)

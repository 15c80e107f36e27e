"""Rank uncertainty from the shared bootstrap resamples, ties between neighbours, Holm's correction.

Every model of a dataset × split is resampled on the same cases (one shared
resample matrix, :mod:`radrank.stats.bootstrap`), so resample b gives one value per
model for the rank leaf, and ranking those values gives each model's rank on that
resample. Over the resamples this is each model's rank distribution, from which:

* ``P(rank=k)``: the share of resamples on which the model has rank k;
* the rank interval at ``level``: the (α/2, 1 − α/2) quantiles of its resampled
  ranks (α = 1 − level), taken as observed ranks (``inverted_cdf``: the smallest
  rank whose cumulative share reaches the quantile), so both ends are ranks that
  occur;
* ``P(rank=1)``.

The point rank is the rank of the point estimates on the same cases as the resamples (every ranked model of a
leaderboard rests on the dataset's case set), and the interval is widened, where it must be, to hold it: a
percentile interval of resampled ranks can miss the observed rank when a leaf is not a plain mean (corpus BLEU)
or the resampled ranks are skewed, and an interval that excludes the rank it qualifies says nothing coherent. So
``rank_lower ≤ rank ≤ rank_upper`` always.

Ranks are competition ranks ("min": tied values share the best rank) and a model
whose value is not finite on a resample ranks after every finite one — the same
rule as the leaderboard's point ranking.

"Tied with": for a model, walking up and down the leaderboard from it, the models
whose paired difference from it on the rank leaf is not significant at ``level``
(two-sided paired bootstrap p ≥ 1 − level, as in the comparisons table); the walk
stops at the first model that differs significantly. Every model listed was
compared with this model directly, so the relation is not chained through a third
model.

The all-pairs comparison matrix uses Holm's step-down correction over the
``m = n(n − 1)/2`` pairs of one dataset × split (family-wise error rate ≤ 1 − level).

Simultaneous rank sets (``Rank set``) hold for all models at once at ``level``, where each marginal interval
holds for its own model: from simultaneous confidence intervals for every pairwise difference of the rank leaf,
with the max-t critical value over the same bootstrap resamples (the studentised maximum over all pairs of
``|Δ*_jk − Δ_jk| / se_jk``, se_jk the resamples' standard deviation of Δ*_jk; Mogstad, Romano, Shaikh and
Wilhelm's joint confidence sets for ranks, as R's csranks computes them). Model k's set is
``[1 + #{j better than k}, K − #{j worse than k}]``, "better" meaning the whole simultaneous interval of the
difference is on that side of 0. A pair whose difference is the same on every resample (se 0) is separated when
that difference is not 0. The set is then widened to hold the marginal interval (which holds the point rank),
so ``Rank set low ≤ Rank CI low ≤ Rank ≤ Rank CI high ≤ Rank set high``; widening only adds coverage.

Tiers: walking the models best first, a tier starts at the first model not yet in one and takes every later model
its simultaneous interval does not separate from that first model; the next tier starts at the first model that
is separated. Every model of a tier is thus inseparable from the tier's best, and each tier's best is separated
from the previous tier's.
"""

from __future__ import annotations

import numpy as np


def competition_ranks(values: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """Ranks (1 = best) of ``values`` along axis 0: shape (n_models, ...) -> same shape, int.

    Ties share the best rank ("min"); NaN or infinite values rank after every finite one
    (and share the rank after the last finite one). scipy.stats.rankdata(method="min") gives the same
    (tests/test_ranks.py); written with numpy because importing scipy.stats costs more CPU (1.2 s) than the
    leaderboard job that needs it.
    """
    values = np.asarray(values, dtype="float64")
    key = -values if higher_is_better else values.copy()
    key[~np.isfinite(values)] = np.inf
    n = key.shape[0]
    if n == 0:
        return key.astype("int64")
    flat = key.reshape(n, -1)
    order = np.argsort(flat, axis=0, kind="stable")
    ordered = np.take_along_axis(flat, order, axis=0)
    # in sorted order, each value's rank is 1 + the position where its run of equal values starts
    starts = np.zeros(ordered.shape, dtype="int64")
    starts[1:] = np.where(ordered[1:] != ordered[:-1], np.arange(1, n, dtype="int64")[:, None], 0)
    out = np.empty(flat.shape, dtype="int64")
    np.put_along_axis(out, order, np.maximum.accumulate(starts, axis=0) + 1, axis=0)
    return out.reshape(key.shape)


def kendall_tau_b(x, y) -> float:
    """Kendall's τ-b of two equally long arrays of finite values; NaN with fewer than two values or when either is
    constant. scipy.stats.kendalltau's statistic (tests/test_ranks.py), in O(n log n) numpy: importing scipy.stats
    costs more CPU (1.2 s) than the report job that needs it.

    As scipy does, the pairs are ordered by (x, y), and the discordant pairs are the strict inversions of y in that
    order (:func:`_inversions`).
    """
    x, y = np.asarray(x, dtype="float64").ravel(), np.asarray(y, dtype="float64").ravel()
    if x.shape != y.shape:
        raise ValueError(f"Kendall's tau of arrays of {x.size} and {y.size} values")
    n = x.size
    if n < 2:
        return float("nan")
    by_y = np.argsort(y)
    y_sorted = y[by_y]
    y_new = np.ones(n, dtype=bool)
    y_new[1:] = y_sorted[1:] != y_sorted[:-1]
    y_rank = np.empty(n, dtype="int64")
    y_rank[by_y] = np.cumsum(y_new) - 1  # dense ranks
    by_x = np.argsort(x[by_y], kind="stable")  # by x, then y
    order = by_y[by_x]
    x_sorted, y_rank = x[order], y_rank[order]
    x_new = np.ones(n, dtype=bool)
    x_new[1:] = x_sorted[1:] != x_sorted[:-1]
    both_new = x_new.copy()
    both_new[1:] |= y_rank[1:] != y_rank[:-1]
    pairs = n * (n - 1) // 2
    x_ties, y_ties, both_ties = _run_pairs(x_new), _run_pairs(y_new), _run_pairs(both_new)
    if x_ties == pairs or y_ties == pairs:
        return float("nan")
    concordant_minus_discordant = pairs - x_ties - y_ties + both_ties - 2 * _inversions(y_rank)
    return float(concordant_minus_discordant / np.sqrt(pairs - x_ties) / np.sqrt(pairs - y_ties))


def _run_pairs(run_starts: np.ndarray) -> int:
    """Pairs inside the runs of equal values of a sorted array, given where each run starts."""
    lengths = np.diff(np.append(np.flatnonzero(run_starts), run_starts.size))
    return int((lengths * (lengths - 1) // 2).sum())


_BASE = 16  # the blocks whose inversions are counted by comparing every pair


def _inversions(values: np.ndarray) -> int:
    """Pairs i < j with values[i] > values[j] (non-negative ints), by a bottom-up merge: blocks of :data:`_BASE`
    compare every pair; then, width after width, each value of a block's right half counts the larger values of
    its (sorted) left half, and the two halves are merged."""
    n = values.size
    size = max(_BASE, 1 << int(np.ceil(np.log2(max(n, 2)))))
    top = int(values.max()) + 1
    merged = np.full(size, top, dtype="int64")  # padding after the end: larger than all, so never an inversion
    merged[:n] = values
    blocks = merged.reshape(-1, _BASE)
    upper = np.triu(np.ones((_BASE, _BASE), dtype=bool), 1)
    total = 0
    for lo in range(0, len(blocks), 1 << 14):  # bounded work memory
        part = blocks[lo: lo + (1 << 14)]
        total += int(np.count_nonzero((part[:, :, None] > part[:, None, :]) & upper))
    merged = np.sort(blocks, axis=1).ravel()
    width = _BASE
    while width < size:
        halves = merged.reshape(-1, 2, width)
        # keeps each block's keys apart, its padding (top) included: no key reaches the next block's
        offset = np.arange(len(halves), dtype="int64")[:, None] * (top + 1)
        left = (halves[:, 0, :] + offset).ravel()
        not_greater = np.searchsorted(left, halves[:, 1, :] + offset, side="right")
        total += int((width * np.arange(1, len(halves) + 1, dtype="int64")[:, None] - not_greater).sum())
        merged = np.sort(halves.reshape(-1, 2 * width), axis=1, kind="stable").ravel()  # two sorted runs: a merge
        width *= 2
    return total


def tied_pairs(values) -> int:
    """How many pairs of ``values`` are equal."""
    counts = np.unique(np.asarray(values), return_counts=True)[1].astype("int64")
    return int((counts * (counts - 1) // 2).sum())


def replicate_matrix(replicates, metric: str, models: list):
    """(point values (n_models,), resampled values (n_models, n_boot)) of one leaf, in ``models`` order.

    ``replicates`` is the statistics stage's long table: model, metric, bootstrap (-1 = point
    estimate), value.
    """
    rows = replicates[replicates["metric"] == metric]
    wide = rows.pivot(index="model", columns="bootstrap", values="value")
    missing = sorted(set(models) - set(wide.index))
    if missing:
        raise ValueError(f"no replicates of {metric!r} for model(s) {missing}")
    wide = wide.loc[list(models)].sort_index(axis=1)
    point = wide[-1].to_numpy(dtype="float64")
    boots = wide.drop(columns=[-1]).to_numpy(dtype="float64")
    return point, boots


def rank_distribution(ranks: np.ndarray) -> np.ndarray:
    """P(rank = k) per model: (n_models, n_boot) ranks -> (n_models, n_models) shares, column k-1 = rank k."""
    n_models, n_boot = ranks.shape
    out = np.zeros((n_models, n_models))
    if n_boot == 0:
        return np.full((n_models, n_models), np.nan)
    for k in range(1, n_models + 1):
        out[:, k - 1] = (ranks == k).mean(axis=1)
    return out


def rank_interval(ranks: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Per model the (α/2, 1 − α/2) quantiles of its resampled ranks, as observed ranks."""
    if ranks.shape[1] == 0:
        nan = np.full(ranks.shape[0], np.nan)
        return nan, nan
    alpha = (1 - level) / 2
    lo = np.quantile(ranks, alpha, axis=1, method="inverted_cdf")
    hi = np.quantile(ranks, 1 - alpha, axis=1, method="inverted_cdf")
    return lo.astype("int64"), hi.astype("int64")


PAIR_BLOCK = 512  # pairs whose differences on every resample are held at once


def simultaneous_differences(point: np.ndarray, boots: np.ndarray, higher_is_better: bool, level: float):
    """The simultaneous intervals of every pairwise difference at ``level`` (max-t over the resamples): (j, k,
    difference j − k signed so that > 0 means j is better, half-width, se, critical value) for each pair j < k of
    models whose point and resampled values are finite."""
    n = len(point)
    finite = np.isfinite(point) & np.isfinite(boots).all(axis=1) if boots.shape[1] else np.zeros(n, dtype=bool)
    sign = 1.0 if higher_is_better else -1.0
    j, k = np.triu_indices(n, 1)
    keep = finite[j] & finite[k]
    j, k = j[keep], k[keep]
    delta = sign * (point[j] - point[k])
    se = np.zeros(len(j))
    t_max = np.zeros(boots.shape[1])  # per resample, the largest |t| over the pairs (each >= 0)
    # a block of pairs at a time, in place: the (pairs, n_boot) differences and their |t| never all held at once
    # (5,050 pairs x 1,000 resamples at 101 models: 40 MB per temporary); every value as computed whole
    for start in range(0, len(j), PAIR_BLOCK):
        jb, kb = j[start: start + PAIR_BLOCK], k[start: start + PAIR_BLOCK]
        resampled = boots[jb] - boots[kb]  # (block, n_boot)
        if sign < 0:
            np.negative(resampled, out=resampled)
        if boots.shape[1] > 1:
            se[start: start + len(jb)] = resampled.std(axis=1, ddof=1)
        block_se = se[start: start + len(jb)]
        resampled -= delta[start: start + len(jb), None]
        np.abs(resampled, out=resampled)
        spread = block_se > 0
        resampled[spread] /= block_se[spread, None]
        resampled[~spread] = 0.0
        np.maximum(t_max, resampled.max(axis=0, initial=0.0), out=t_max)
    critical = float(np.quantile(t_max, level)) if len(j) else np.nan
    return j, k, delta, critical * se, se, critical


def simultaneous_separation(point: np.ndarray, boots: np.ndarray, higher_is_better: bool, level: float):
    """(better, critical): ``better[j, k]`` is True when model j is better than model k by the simultaneous
    interval of their difference (see the module docstring); a model with a non-finite value is separated from
    none."""
    n = len(point)
    better = np.zeros((n, n), dtype=bool)
    if n < 2:
        return better, np.nan
    j, k, delta, half, se, critical = simultaneous_differences(point, boots, higher_is_better, level)
    flat = se == 0  # the same difference on every resample: separated unless it is 0
    j_better = np.where(flat, delta > 0, delta - half > 0)
    k_better = np.where(flat, delta < 0, delta + half < 0)
    better[j[j_better], k[j_better]] = True
    better[k[k_better], j[k_better]] = True
    return better, critical


def rank_sets_and_tiers(point: np.ndarray, boots: np.ndarray, higher_is_better: bool, level: float, order: list):
    """(set lower, set upper, tier, critical) per model: the simultaneous rank sets before widening, and the tiers
    along ``order`` (model indices, best first); see the module docstring."""
    n = len(point)
    better, critical = simultaneous_separation(point, boots, higher_is_better, level)
    lower = 1 + better.sum(axis=0)  # the models better than k
    upper = n - better.sum(axis=1)  # less the models k is better than
    separated = better | better.T
    tier = np.zeros(n, dtype="int64")
    current, leader = 0, None
    for index in order:
        if leader is None or separated[leader, index]:
            current, leader = current + 1, index
        tier[index] = current
    return lower.astype("int64"), upper.astype("int64"), tier, critical


def rank_uncertainty(replicates, metric: str, models: list, higher_is_better: bool, level: float):
    """Rank summary and rank distribution of ``models`` on leaf ``metric``.

    Returns (summary, distribution): summary has one row per model (in ``models`` order) with
    ``rank`` (on the point estimates), ``rank_lower``, ``rank_upper``, ``p_rank1``, ``rank_mean``;
    distribution is long: model, rank, probability (every rank 1…n for every model).
    """
    import pandas as pd

    point, boots = replicate_matrix(replicates, metric, models)
    point_rank = competition_ranks(point, higher_is_better)
    ranks = competition_ranks(boots, higher_is_better)
    dist = rank_distribution(ranks)
    lo, hi = rank_interval(ranks, level)
    if boots.shape[1]:  # the interval always holds the model's own rank (see the module docstring)
        lo, hi = np.minimum(lo, point_rank), np.maximum(hi, point_rank)
    order = sorted(range(len(models)), key=lambda i: (point_rank[i], models[i]))
    if boots.shape[1]:
        set_lo, set_hi, tier, critical = rank_sets_and_tiers(point, boots, higher_is_better, level, order)
        set_lo, set_hi = np.minimum(set_lo, lo), np.maximum(set_hi, hi)  # ⊇ the marginal interval
    else:
        set_lo = set_hi = tier = np.full(len(models), np.nan)
        critical = np.nan
    summary = pd.DataFrame({
        "model": list(models), "metric": metric, "rank": point_rank, "rank_lower": lo, "rank_upper": hi,
        "p_rank1": dist[:, 0] if len(models) else [], "rank_mean": ranks.mean(axis=1) if boots.shape[1] else np.nan,
        "set_lower": set_lo, "set_upper": set_hi, "tier": tier, "max_t": critical,
        "n_bootstrap": boots.shape[1], "level": level,
    })
    n = len(models)
    distribution = pd.DataFrame({
        "model": np.repeat(list(models), n), "metric": metric,
        "rank": np.tile(np.arange(1, n + 1), n), "probability": dist.ravel(),
    })
    return summary, distribution


def pair_table(comparisons, metric: str):
    """The comparisons of one leaf keyed both ways: {(a, b): (delta a − b, ci_lower, ci_upper, p, n_common)}."""
    rows = comparisons[comparisons["metric"] == metric]
    out = {}
    # column by column as Python values (what itertuples gives, without building a tuple per row: 5,050 pairs a
    # leaf at 100 models)
    columns = [rows[c].tolist() for c in ("model_a", "model_b", "delta", "ci_lower", "ci_upper", "p_value", "n_common")]
    for a, b, delta, lower, upper, p, n_common in zip(*columns):
        out[a, b] = (delta, lower, upper, p, n_common)
        out[b, a] = (-delta, -upper, -lower, p, n_common)
    return out


def tied_with(order: list, comparisons, metric: str, level: float) -> dict:
    """{model: [models tied with it]} for ``order`` (best first); see the module docstring."""
    pairs = pair_table(comparisons, metric)
    alpha = 1 - level

    def not_distinct(a, b) -> bool:
        if (a, b) not in pairs:
            raise ValueError(f"no comparison of {a!r} and {b!r} on {metric!r}")
        p = pairs[a, b][3]
        return not (np.isfinite(p) and p < alpha)

    tied = {}
    for i, model in enumerate(order):
        above, below = [], []
        for j in range(i - 1, -1, -1):
            if not not_distinct(model, order[j]):
                break
            above.append(order[j])
        for j in range(i + 1, len(order)):
            if not not_distinct(model, order[j]):
                break
            below.append(order[j])
        tied[model] = above[::-1] + below
    return tied


def holm(p_values) -> np.ndarray:
    """Holm's step-down adjusted p-values; NaN stays NaN and does not count towards m."""
    p = np.asarray(p_values, dtype="float64")
    out = np.full(p.shape, np.nan)
    finite = np.flatnonzero(np.isfinite(p))
    m = finite.size
    if m == 0:
        return out
    order = finite[np.argsort(p[finite], kind="stable")]
    adjusted = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(adjusted)
    return out

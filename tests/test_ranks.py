"""Rank uncertainty against a naive computation on explicit resamples; ties, Holm's correction; competition ranks
and Kendall's τ-b against scipy.stats (the reference: its absence fails under RADRANK_STRICT=1)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from radrank import metrics
from radrank.stats import bootstrap, resample_indices
from radrank.stats.ranks import competition_ranks, holm, kendall_tau_b, rank_uncertainty, tied_pairs, tied_with

from _strict import reference

N_BOOT, SEED, LEVEL = 300, 11, 0.9


def scores_for(n_cases=40, seed=0):
    """Four models on overlapping case sets; 'c' and 'd' are close, 'd' misses three cases."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(0, 1, n_cases)
    out = {}
    for model, shift in (("a", 0.25), ("b", 0.1), ("c", 0.0), ("d", 0.005)):
        values = np.clip(base + shift + rng.normal(0, 0.15, n_cases), 0, 1)
        frame = pd.DataFrame({"sample_id": [f"s{i:03d}" for i in range(n_cases)], "bleu2": values})
        out[model] = frame.iloc[3:].reset_index(drop=True) if model == "d" else frame
    return out


def naive_ranks(scores: dict, n_boot: int, seed: int, higher_is_better=True):
    """Every model's rank on every resample, recomputed from the drawn cases themselves."""
    models = sorted(scores)
    cases = sorted(set().union(*(set(df["sample_id"]) for df in scores.values())))
    idx = resample_indices(len(cases), n_boot, seed)
    by_model = {m: dict(zip(df["sample_id"], df["bleu2"])) for m, df in scores.items()}
    ranks = {m: [] for m in models}
    for row in idx:
        drawn = [cases[i] for i in row]
        value = {}
        for m in models:
            vals = [by_model[m][c] for c in drawn if c in by_model[m]]
            value[m] = sum(vals) / len(vals)
        for m in models:
            better = sum(1 for o in models if (value[o] > value[m] if higher_is_better else value[o] < value[m]))
            ranks[m].append(better + 1)
    return ranks


def naive_quantile(sorted_values: list, q: float):
    """The smallest value whose empirical cumulative share reaches q."""
    k = max(1, math.ceil(q * len(sorted_values) - 1e-9))
    return sorted_values[k - 1]


def test_rank_intervals_equal_a_naive_computation_on_explicit_resamples():
    scores = scores_for()
    result = bootstrap(scores, metrics.leaves("bleu2"), n_boot=N_BOOT, seed=SEED, level=LEVEL)
    models = sorted(scores)
    summary, distribution = rank_uncertainty(result.replicates, "bleu2", models, True, LEVEL)
    naive = naive_ranks(scores, N_BOOT, SEED)
    alpha = (1 - LEVEL) / 2
    summary = summary.set_index("model")
    for m in models:
        r = sorted(naive[m])
        assert summary.loc[m, "rank_lower"] == naive_quantile(r, alpha)
        assert summary.loc[m, "rank_upper"] == naive_quantile(r, 1 - alpha)
        assert summary.loc[m, "p_rank1"] == pytest.approx(r.count(1) / N_BOOT, abs=1e-12)
        for k in range(1, len(models) + 1):
            p = distribution[(distribution["model"] == m) & (distribution["rank"] == k)]["probability"].item()
            assert p == pytest.approx(r.count(k) / N_BOOT, abs=1e-12)
    # the close pair really is uncertain, the clear leader is not: the test exercises both cases
    assert summary.loc["a", "rank_lower"] == summary.loc["a", "rank_upper"] == 1
    assert summary.loc["c", "rank_lower"] < summary.loc["c", "rank_upper"]
    assert distribution.groupby("model")["probability"].sum().to_numpy() == pytest.approx(1.0)


def test_lower_is_better_ranks_ascending():
    scores = scores_for(seed=3)
    result = bootstrap(scores, metrics.leaves("bleu2"), n_boot=100, seed=SEED, level=LEVEL)
    models = sorted(scores)
    summary, _ = rank_uncertainty(result.replicates, "bleu2", models, False, LEVEL)
    naive = naive_ranks(scores, 100, SEED, higher_is_better=False)
    for m, row in summary.set_index("model").iterrows():
        assert row["p_rank1"] == pytest.approx(naive[m].count(1) / 100)
    assert summary.set_index("model").loc["a", "rank"] == 4  # the best under "higher" is last under "lower"


def test_competition_ranks_ties_and_missing_values():
    values = np.array([[0.5, np.nan], [0.7, 0.2], [0.5, 0.2], [np.nan, np.inf]])
    assert competition_ranks(values, True).tolist() == [[2, 3], [1, 1], [2, 1], [4, 3]]
    assert competition_ranks(values, False).tolist() == [[1, 3], [3, 1], [1, 1], [4, 3]]


def test_competition_ranks_equal_scipys_min_ranks():
    rankdata = reference("scipy.stats").rankdata
    rng = np.random.default_rng(3)
    for trial in range(400):
        shape = (int(rng.integers(1, 12)), *map(int, rng.integers(1, 5, int(rng.integers(0, 3)))))
        values = rng.integers(0, 4, shape).astype(float) if trial % 2 else rng.normal(size=shape)
        for share, special in ((0.1, np.nan), (0.05, np.inf), (0.05, -np.inf)):
            values[rng.random(shape) < share] = special
        for higher in (True, False):
            key = -values if higher else values.copy()
            key[~np.isfinite(values)] = np.inf  # after every finite value, tied
            expected = rankdata(key, method="min", axis=0).astype("int64")
            assert competition_ranks(values, higher).tolist() == expected.tolist(), (values, higher)
    assert competition_ranks(np.zeros((0, 3)), True).shape == (0, 3)


def test_kendall_tau_b_equals_scipys():
    kendalltau = reference("scipy.stats").kendalltau
    rng = np.random.default_rng(5)
    checked = 0
    for trial in range(600):
        # short and long arrays; few distinct values (ties in x, in y and in both) and continuous ones
        n = int(rng.integers(2, 40)) if trial % 20 else int(rng.integers(1000, 3000))
        levels = int(rng.integers(1, 6))
        x = rng.integers(0, levels, n).astype(float) if trial % 3 == 0 else rng.normal(size=n)
        y = (rng.integers(0, levels, n).astype(float) if trial % 2 == 0
             else x * rng.choice([1, -1]) + rng.normal(size=n) * rng.random())
        expected = kendalltau(x, y).statistic
        got = kendall_tau_b(x, y)
        if np.isnan(expected):  # a constant side
            assert np.isnan(got), (x, y)
            continue
        assert got == pytest.approx(expected, abs=1e-12), (x, y)
        checked += 1
    assert checked > 400
    assert np.isnan(kendall_tau_b([1.0], [2.0])) and np.isnan(kendall_tau_b([], []))
    assert kendall_tau_b([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    with pytest.raises(ValueError):
        kendall_tau_b([1, 2], [1, 2, 3])


def test_tied_pairs_counts_equal_pairs():
    values = np.array([3, 1, 3, 3, 2, 1])
    assert tied_pairs(values) == sum(values[i] == values[j] for i in range(6) for j in range(i + 1, 6)) == 4


def test_holm_matches_its_definition():
    p = np.array([0.01, 0.04, 0.03, 0.005, np.nan])
    # sorted: 0.005, 0.01, 0.03, 0.04 with m = 4 -> 0.02, 0.03, 0.06, 0.06 (monotone), NaN stays NaN
    adjusted = holm(p)
    assert adjusted[:4] == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert np.isnan(adjusted[4])
    assert holm([0.5, 0.9]).tolist() == [1.0, 1.0]


def comparisons(rows):
    return pd.DataFrame([{"model_a": a, "model_b": b, "metric": "m", "delta": 0.1, "ci_lower": 0.0,
                          "ci_upper": 0.2, "p_value": p, "n_common": 10} for a, b, p in rows])


def test_tied_with_walks_from_each_model_and_stops_at_the_first_significant_difference():
    # order a, b, c, d; a~b, b~c, a differs from c, c~d, b differs from d
    comp = comparisons([("a", "b", 0.4), ("a", "c", 0.01), ("a", "d", 0.001), ("b", "c", 0.2), ("b", "d", 0.03),
                        ("c", "d", 0.5)])
    tied = tied_with(["a", "b", "c", "d"], comp, "m", level=0.95)
    assert tied == {"a": ["b"], "b": ["a", "c"], "c": ["b", "d"], "d": ["c"]}
    with pytest.raises(ValueError, match="no comparison"):
        tied_with(["a", "b", "x"], comp, "m", level=0.95)


# --- simultaneous rank sets and tiers ----------------------------------------------------------------------


def naive_sets_and_tiers(point, boots, higher_is_better, level, order):
    """The definition, pair by pair in plain Python: the max-t value over every resample, each pair's simultaneous
    interval, the sets before widening, the tiers by their leaders."""
    n, b = boots.shape
    sign = 1 if higher_is_better else -1
    pairs = [(j, k) for j in range(n) for k in range(j + 1, n)]
    se = {p: float(np.std([sign * (boots[p[0], r] - boots[p[1], r]) for r in range(b)], ddof=1)) for p in pairs}
    delta = {p: sign * (point[p[0]] - point[p[1]]) for p in pairs}
    t_max = []
    for r in range(b):
        t_max.append(max((abs(sign * (boots[j, r] - boots[k, r]) - delta[j, k]) / se[j, k] if se[j, k] > 0 else 0.0)
                         for j, k in pairs))
    c = float(np.quantile(t_max, level))
    better = [[False] * n for _ in range(n)]
    for j, k in pairs:
        if se[j, k] == 0:
            better[j][k], better[k][j] = delta[j, k] > 0, delta[j, k] < 0
        else:
            better[j][k] = delta[j, k] - c * se[j, k] > 0
            better[k][j] = delta[j, k] + c * se[j, k] < 0
    lower = [1 + sum(better[j][k] for j in range(n)) for k in range(n)]
    upper = [n - sum(better[k][j] for j in range(n)) for k in range(n)]
    tier, current, leader = [0] * n, 0, None
    for i in order:
        if leader is None or better[leader][i] or better[i][leader]:
            current, leader = current + 1, i
        tier[i] = current
    return lower, upper, tier, c


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("higher_is_better", [True, False])
def test_rank_sets_and_tiers_equal_an_independent_recompute(seed, higher_is_better):
    from radrank.stats.ranks import rank_sets_and_tiers

    rng = np.random.default_rng(seed)
    n, b = 6, 120
    point = np.array([0.5, 0.52, 0.6, 0.61, 0.8, 0.52])
    boots = point[:, None] + rng.normal(0, 0.03, (n, b)) + rng.normal(0, 0.02, b)  # correlated, as paired resamples
    boots[5] = boots[1] + 0.0  # model 5 equals model 1 on every resample: se 0, difference 0 — never separated
    order = sorted(range(n), key=lambda i: (-point[i] if higher_is_better else point[i], i))
    lo, hi, tier, c = rank_sets_and_tiers(point, boots, higher_is_better, 0.95, order)
    n_lo, n_hi, n_tier, n_c = naive_sets_and_tiers(point, boots, higher_is_better, 0.95, order)
    assert lo.tolist() == n_lo and hi.tolist() == n_hi and tier.tolist() == n_tier and c == pytest.approx(n_c)
    assert tier[1] == tier[5]


def test_simultaneous_sets_hold_the_marginal_intervals_and_the_point_rank():
    rng = np.random.default_rng(3)
    for trial in range(20):
        n_models, n_cases = int(rng.integers(2, 8)), int(rng.integers(15, 60))
        scores = {f"m{i}": pd.DataFrame({"sample_id": range(n_cases),
                                         "bleu2": np.clip(rng.uniform(0, 1, n_cases) * rng.uniform(0.2, 1), 0, 1)})
                  for i in range(n_models)}
        result = bootstrap(scores, metrics.leaves("bleu2"), n_boot=150, seed=trial, level=0.95)
        summary, _ = rank_uncertainty(result.replicates, "bleu2", sorted(scores), True, 0.95)
        assert (summary["set_lower"] <= summary["rank_lower"]).all() and (summary["rank_upper"] <= summary["set_upper"]).all()
        assert ((summary["set_lower"] <= summary["rank"]) & (summary["rank"] <= summary["set_upper"])).all()
        assert summary["tier"].min() == 1 and (summary.sort_values("rank")["tier"].diff().dropna() >= 0).all()


def test_the_simultaneous_intervals_cover_every_difference_at_once_near_the_level():
    """Simulated leaderboards with known true means: the share on which the simultaneous intervals of all 15
    differences hold at once is near 95 % (max-t's promise), and the rank sets built on them hold every true rank
    at least as often; the marginal rank intervals, each at 95 %, hold jointly no more often than the sets."""
    from radrank.stats.ranks import rank_interval, rank_sets_and_tiers, simultaneous_differences

    rng = np.random.default_rng(20261203)
    means = np.array([0.30, 0.34, 0.40, 0.41, 0.50, 0.62])  # close pairs and clear gaps
    true_rank = competition_ranks(means, True)
    n_cases, n_boot, reps = 120, 300, 300
    differences = sets = marginal = 0
    for _ in range(reps):
        case = rng.normal(0, 0.15, n_cases)  # a case's difficulty, shared by every model: paired data
        data = means[:, None] + case[None, :] + rng.normal(0, 0.08, (len(means), n_cases))
        idx = rng.integers(0, n_cases, (n_boot, n_cases))
        point, boots = data.mean(axis=1), data[:, idx].mean(axis=2)
        j, k, delta, half, _, _ = simultaneous_differences(point, boots, True, 0.95)
        differences += bool((np.abs(delta - (means[j] - means[k])) <= half).all())
        order = sorted(range(len(means)), key=lambda i: -point[i])
        lo, hi, _, _ = rank_sets_and_tiers(point, boots, True, 0.95, order)
        r_lo, r_hi = rank_interval(competition_ranks(boots, True), 0.95)
        sets += bool(((lo <= true_rank) & (true_rank <= hi)).all())
        marginal += bool(((r_lo <= true_rank) & (true_rank <= r_hi)).all())
    assert 0.90 <= differences / reps <= 0.99, differences / reps
    assert sets >= differences and marginal <= sets


@pytest.mark.parametrize("block", [1, 3, 512])
@pytest.mark.parametrize("higher_is_better", [True, False])
def test_the_simultaneous_intervals_a_block_of_pairs_at_a_time_are_the_max_t_of_their_definition(
        monkeypatch, block, higher_is_better):
    """Computed a block of pairs at a time, in place, every number equals the max-t definition computed on the
    whole (pairs, resamples) matrix here: a flat model, a pair with a constant difference and non-finite values
    included."""
    from radrank.stats import ranks

    monkeypatch.setattr(ranks, "PAIR_BLOCK", block)
    rng = np.random.default_rng(7)
    point = rng.random(12)
    boots = point[:, None] + 0.05 * rng.standard_normal((12, 200))
    boots[3] = point[3]  # flat: se 0 against nothing else flat
    boots[5] = boots[4]  # the same resampled values, different point estimates: se 0
    point[8], boots[9, 17] = np.nan, np.inf  # not compared
    j, k, delta, half, se, critical = ranks.simultaneous_differences(point, boots, higher_is_better, 0.9)

    sign = 1.0 if higher_is_better else -1.0
    pairs = [(a, b) for a in range(12) for b in range(a + 1, 12) if {a, b}.isdisjoint({8, 9})]
    assert list(zip(j.tolist(), k.tolist())) == pairs
    want_j, want_k = np.array(pairs).T
    want_delta = sign * (point[want_j] - point[want_k])
    diffs = sign * (boots[want_j] - boots[want_k])
    want_se = diffs.std(axis=1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(want_se[:, None] > 0, np.abs(diffs - want_delta[:, None]) / want_se[:, None], 0.0)
    want_critical = np.quantile(t.max(axis=0), 0.9)
    np.testing.assert_array_equal(delta, want_delta)
    np.testing.assert_array_equal(se, want_se)
    assert critical == want_critical and np.array_equal(half, want_critical * want_se)
    assert (se == 0).sum() == 1  # models 4 and 5

"""The exact bootstrap against the naive one: draw the same resamples, rebuild the
resampled pairs, and recompute each metric with its reference library.

Library per-pair values (fast-bleu BLEU-2, rouge-score F-measures) are memoised by
(reference, hypothesis): a pair scores the same every time it is drawn, so this
only saves time; BLEU-4 is recomputed as a BleuScorer corpus on every resample.
"""

from __future__ import annotations

import importlib
import random
from functools import lru_cache

import numpy as np
import pandas as pd
import pytest

from _strict import reference

from radrank import metrics
from radrank.metrics import bleu2
from radrank.stats.bootstrap import bootstrap, resample_counts, resample_indices

fast_bleu = reference("fast_bleu")
bleu_scorer = reference("pycocoevalcap.bleu.bleu_scorer")
rouge_scorer = reference("rouge_score.rouge_scorer")

N_CASES, N_BOOT, SEED = 40, 30, 7
LEXICAL = ("bleu2", "bleu4", "rouge")

_SENTENCES = [
    "No acute cardiopulmonary process.", "The lungs are clear.", "Heart size is normal.",
    "Small bilateral pleural effusions.", "Mild pulmonary edema.", "No pneumothorax.",
    "Right lower lobe opacity may reflect pneumonia.", "Left basilar atelectasis.",
    "Endotracheal tube 4 cm above the carina.", "Stable moderate cardiomegaly.",
]


def _leaderboard():
    """Three models on N_CASES cases; model C misses a quarter of them."""
    rng = random.Random(3)
    cases = [f"c{i:02d}" for i in range(N_CASES)]
    refs = [" ".join(rng.sample(_SENTENCES, rng.randint(1, 4))) for _ in cases]

    def hyp(ref, quality):
        kept = [s + "." for s in ref.split(". ") if rng.random() < quality]
        kept += rng.sample(_SENTENCES, rng.randint(0, 2))
        return " ".join(kept).replace("..", ".")

    out = {}
    for name, quality in (("A", 0.9), ("B", 0.6), ("C", 0.75)):
        keep = [i for i in range(N_CASES) if name != "C" or i % 4 != 1]
        out[name] = pd.DataFrame({
            "sample_id": [cases[i] for i in keep],
            "reference": [refs[i] for i in keep],
            "hypothesis": [hyp(refs[i], quality) for i in keep],
        })
    return out


PAIRS = _leaderboard()


@lru_cache(maxsize=None)
def _lib_bleu2(reference, hypothesis):
    return fast_bleu.BLEU([bleu2.tokens(reference)], {"bigram": (1 / 2, 1 / 2)}).get_score(
        [bleu2.tokens(hypothesis)])["bigram"][0]


_ROUGE = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)


@lru_cache(maxsize=None)
def _lib_rouge(reference, hypothesis):
    s = _ROUGE.score(reference, hypothesis)
    return {k: s[k].fmeasure for k in ("rouge1", "rouge2", "rougeL")}


def _lib_value(leaf_name, pairs):
    """The leaf recomputed with the reference library on a list of (reference, hypothesis) pairs."""
    if not pairs:
        return np.nan
    if leaf_name == "bleu2":
        return float(np.mean([_lib_bleu2(r, h) for r, h in pairs]))
    if leaf_name == "bleu4":
        scorer = bleu_scorer.BleuScorer(n=4)
        for r, h in pairs:
            scorer += (h, [r])
        return scorer.compute_score(option="closest")[0][3]
    return float(np.mean([_lib_rouge(r, h)[leaf_name] for r, h in pairs]))


def _scores(pairs_by_model, names=LEXICAL):
    out = {}
    for model, pairs in pairs_by_model.items():
        frame = pairs[["sample_id"]]
        for name in names:
            frame = frame.merge(metrics.score(name, pairs), on="sample_id")
        out[model] = frame
    return out


def _leaves(names=LEXICAL):
    return [leaf for name in names for leaf in metrics.leaves(name)]


@pytest.fixture(scope="module")
def result():
    return bootstrap(_scores(PAIRS), _leaves(), n_boot=N_BOOT, seed=SEED)


def _replicates(res, model, leaf):
    reps = res.replicates[(res.replicates.model == model) & (res.replicates.metric == leaf)]
    return reps.sort_values("bootstrap")["value"].to_numpy()  # index 0 = point estimate (-1)


def _naive(model, leaf, restrict_to=None):
    """Point estimate and replicates recomputed from the resampled pairs, as a naive bootstrap would."""
    cases = sorted(set().union(*(set(df["sample_id"]) for df in PAIRS.values())))
    by_case = {s: (r, h) for s, r, h in PAIRS[model][["sample_id", "reference", "hypothesis"]].itertuples(index=False)}
    allowed = set(by_case) if restrict_to is None else set(by_case) & set(restrict_to)
    idx = resample_indices(len(cases), N_BOOT, SEED)
    point = _lib_value(leaf, [by_case[c] for c in cases if c in allowed])
    reps = [_lib_value(leaf, [by_case[cases[i]] for i in row if cases[i] in allowed]) for row in idx]
    return point, np.array(reps)


def test_cases_and_shapes(result):
    assert result.cases == sorted(PAIRS["A"]["sample_id"])
    leaves = [leaf.name for leaf in _leaves()]
    assert leaves == ["bleu2", "bleu4", "rouge1", "rouge2", "rougeL"]
    assert len(result.replicates) == 3 * len(leaves) * (N_BOOT + 1)
    summary = result.summary.set_index(["model", "metric"])
    assert summary.loc[("A", "bleu2"), "n"] == N_CASES and summary.loc[("C", "bleu2"), "n"] == N_CASES - 10


@pytest.mark.parametrize("leaf", ["bleu2", "bleu4", "rouge1", "rouge2", "rougeL"])
@pytest.mark.parametrize("model", ["A", "B", "C"])
def test_replicates_equal_library_recompute(result, model, leaf):
    ours = _replicates(result, model, leaf)
    point, reps = _naive(model, leaf)
    assert abs(ours[0] - point) <= 1e-9
    np.testing.assert_allclose(ours[1:], reps, rtol=0, atol=1e-9)
    assert np.unique(reps).size > N_BOOT // 2  # the resamples really differ


def test_summary_is_computed_from_replicates(result):
    row = result.summary.set_index(["model", "metric"]).loc[("B", "rougeL")]
    reps = _replicates(result, "B", "rougeL")[1:]
    assert row["estimate"] == _replicates(result, "B", "rougeL")[0]
    assert row["mean"] == pytest.approx(reps.mean(), abs=1e-15)
    assert row["std"] == pytest.approx(reps.std(ddof=1), abs=1e-15)
    assert (row["ci_lower"], row["ci_upper"]) == pytest.approx(tuple(np.quantile(reps, [0.025, 0.975])), abs=1e-12)


def test_paired_deltas_are_differences_of_replicates(result):
    comp = result.comparisons.set_index(["model_a", "model_b", "metric"])
    for leaf in ("bleu2", "bleu4", "rougeL"):
        row = comp.loc[("A", "B", leaf)]
        a, b = _replicates(result, "A", leaf), _replicates(result, "B", leaf)
        deltas = a[1:] - b[1:]
        assert row["delta"] == pytest.approx(a[0] - b[0], abs=1e-15)
        assert (row["ci_lower"], row["ci_upper"]) == pytest.approx(tuple(np.quantile(deltas, [0.025, 0.975])),
                                                                   abs=1e-12)
        p = min(1.0, 2 * min(np.mean(deltas <= 0), np.mean(deltas >= 0)))
        assert row["p_value"] == p
        assert row["n_common"] == N_CASES


@pytest.mark.parametrize("leaf", ["bleu2", "bleu4", "rouge1"])
def test_comparison_with_missing_cases_uses_common_cases(result, leaf):
    comp = result.comparisons.set_index(["model_a", "model_b", "metric"]).loc[("A", "C", leaf)]
    common = set(PAIRS["C"]["sample_id"])
    assert comp["n_common"] == N_CASES - 10
    point_a, reps_a = _naive("A", leaf, restrict_to=common)
    point_c, reps_c = _naive("C", leaf, restrict_to=common)
    deltas = reps_a - reps_c
    assert abs(comp["delta"] - (point_a - point_c)) <= 1e-9
    lo, hi = np.quantile(deltas, [0.025, 0.975])
    assert abs(comp["ci_lower"] - lo) <= 1e-9 and abs(comp["ci_upper"] - hi) <= 1e-9
    assert comp["p_value"] == min(1.0, 2 * min(np.mean(deltas <= 0), np.mean(deltas >= 0)))
    # ...which is not the difference of the unrestricted replicates
    assert abs(comp["delta"] - (_replicates(result, "A", leaf)[0] - _replicates(result, "C", leaf)[0])) > 1e-6


def _brute_force_deltas(scores, leaf, a, b, n_boot=N_BOOT, seed=SEED):
    """(n_common, leaf a − leaf b: [0] on all common cases, [1:] per resample), each leaf summed case by case
    over the common cases drawn (resample_indices), as a naive bootstrap restricted to them would."""
    cases = sorted(set().union(*(set(df["sample_id"]) for df in scores.values())))
    idx = resample_indices(len(cases), n_boot, seed)
    common = set(scores[a]["sample_id"]) & set(scores[b]["sample_id"])

    def values(model):
        stats = leaf.statistics(scores[model])
        by_case = dict(zip(scores[model]["sample_id"], stats))
        drawn = [[by_case[cases[i]] for i in rows if cases[i] in common] for rows in [range(len(cases)), *idx]]
        return np.array([leaf.value(np.sum(np.reshape(d, (-1, stats.shape[1])), axis=0)) for d in drawn])

    return len(common), values(a) - values(b)


def test_comparisons_on_several_differing_case_sets_equal_a_brute_force_recompute():
    """Five models, four case sets (C and E share one, D's overlaps C's partly): every comparison is the
    pair's leaf on its common cases, resample by resample, summed case by case from the drawn indices."""
    pairs = dict(PAIRS)
    pairs["D"] = PAIRS["A"][PAIRS["A"]["sample_id"].str[1:].astype(int) % 5 != 2].reset_index(drop=True)
    pairs["E"] = PAIRS["B"][PAIRS["B"]["sample_id"].isin(PAIRS["C"]["sample_id"])].reset_index(drop=True)
    scores = _scores(pairs)
    leaves = _leaves()
    res = bootstrap(scores, leaves, n_boot=N_BOOT, seed=SEED)
    comps = res.comparisons.set_index(["model_a", "model_b", "metric"])
    assert len(comps) == 10 * len(leaves)
    for (a, b, name), row in comps.iterrows():
        n_common, deltas = _brute_force_deltas(scores, next(leaf for leaf in leaves if leaf.name == name), a, b)
        assert row["n_common"] == n_common
        assert abs(row["delta"] - deltas[0]) <= 1e-12, (a, b, name)
        lo, hi = np.quantile(deltas[1:], [0.025, 0.975])
        assert abs(row["ci_lower"] - lo) <= 1e-12 and abs(row["ci_upper"] - hi) <= 1e-12, (a, b, name)
        assert row["p_value"] == min(1.0, 2 * min(np.mean(deltas[1:] <= 0), np.mean(deltas[1:] >= 0))), (a, b, name)
    # the pairs of equal case sets (A-B, C-E) are the differences of the models' own replicates
    for a, b in (("A", "B"), ("C", "E")):
        assert comps.loc[(a, b, "bleu4"), "delta"] == \
            _replicates(res, a, "bleu4")[0] - _replicates(res, b, "bleu4")[0]


def _subset(scores, keep):
    """``scores`` on the cases whose number satisfies ``keep``."""
    return scores[[keep(int(s[1:])) for s in scores["sample_id"]]].reset_index(drop=True)


def _many_case_sets():
    """Eleven models: A, B, C and eight on case sets of their own — four each missing its own (overlapping)
    cases, two disjoint (no common case), one with a single case, and A on fewer cases (A's statistics)."""
    base = _scores(PAIRS)
    scores = dict(base)
    for k in range(4):
        scores[f"B-{k}"] = _subset(base["B"], lambda i, k=k: i % 9 != k and i % 11 != k + 1)
    scores["A-odd"] = _subset(base["A"], lambda i: i % 2 == 1)
    scores["B-even"] = _subset(base["B"], lambda i: i % 2 == 0)
    scores["B-one"] = _subset(base["B"], lambda i: i == 5)
    scores["A-part"] = _subset(base["A"], lambda i: i % 7 != 3)
    return scores


def test_comparisons_on_many_distinct_case_sets_equal_a_brute_force_recompute():
    """Every comparison among models with many distinct missing patterns — pairs that both miss cases,
    disjoint pairs (NaN where a leaf has no case), a single common case (resamples that miss it are left
    out of the interval) — is the brute-force recomputation on the pair's common cases."""
    scores = _many_case_sets()
    leaves = _leaves()
    res = bootstrap(scores, leaves, n_boot=N_BOOT, seed=SEED)
    comps = res.comparisons.set_index(["model_a", "model_b", "metric"])
    assert len(comps) == 55 * len(leaves)
    assert comps.loc[("A-odd", "B-even", "bleu2"), "n_common"] == 0
    assert (comps.loc[("A", "B-one"), "n_common"] == 1).all()
    for (a, b, name), row in comps.iterrows():
        n_common, deltas = _brute_force_deltas(scores, next(leaf for leaf in leaves if leaf.name == name), a, b)
        assert row["n_common"] == n_common, (a, b, name)
        np.testing.assert_allclose(row["delta"], deltas[0], rtol=0, atol=1e-12, err_msg=str((a, b, name)))
        finite = deltas[1:][np.isfinite(deltas[1:])]
        if finite.size:
            lo, hi = np.quantile(finite, [0.025, 0.975])
            assert abs(row["ci_lower"] - lo) <= 1e-12 and abs(row["ci_upper"] - hi) <= 1e-12, (a, b, name)
            assert row["p_value"] == min(1.0, 2 * min(np.mean(finite <= 0), np.mean(finite >= 0))), (a, b, name)
        else:
            assert np.isnan([row["ci_lower"], row["ci_upper"], row["p_value"]]).all(), (a, b, name)
    # the disjoint pair: a mean over no case is NaN
    assert np.isnan(comps.loc[("A-odd", "B-even", "bleu2"), "delta"])
    # a single common case: some resamples draw it, some do not
    assert 0 < np.isnan(_brute_force_deltas(scores, _leaves(("bleu2",))[0], "A", "B-one")[1]).sum() < N_BOOT


def test_comparison_on_common_cases_depends_only_on_them():
    """A model and the same model on fewer cases differ by exactly 0 on every resample; and a comparison
    is the same, to the last bit, whichever other models (with other case sets and value ranges) are
    bootstrapped with the pair."""
    scores = _many_case_sets()
    leaves = _leaves()
    res = bootstrap(scores, leaves, n_boot=N_BOOT, seed=SEED)
    comps = res.comparisons.set_index(["model_a", "model_b"])
    same = comps.loc[("A", "A-part")]
    assert (same["delta"] == 0).all() and (same["ci_lower"] == 0).all() and (same["ci_upper"] == 0).all()
    assert (same["p_value"] == 1).all() and (same["n_common"] == N_CASES - 6).all()

    wide = scores["B-2"].copy()  # values far below the others': more limbs for every statistic
    wide[["bleu2", "rouge1", "rouge2", "rougeL"]] *= 1e-12
    alone = bootstrap({m: scores[m] for m in ("A", "B-0", "B-1")}, leaves, n_boot=N_BOOT, seed=SEED)
    crowded = bootstrap({**scores, "B-2": wide}, leaves, n_boot=N_BOOT, seed=SEED)
    for pair in (("A", "B-0"), ("B-0", "B-1")):
        rows = [r.comparisons.set_index(["model_a", "model_b"]).loc[pair].reset_index(drop=True)
                for r in (alone, crowded)]
        pd.testing.assert_frame_equal(*rows, check_exact=True)


def test_comparisons_on_common_cases_multiply_only_the_cases_one_side_lacks(monkeypatch):
    """The cost of many distinct case sets: no product runs over a pair's common cases, only over the cases
    one model lacks, for every model that model limits at once (plus one per pair where both lack cases)."""
    module = importlib.import_module("radrank.stats.bootstrap")  # (radrank.stats.bootstrap is also the function)
    calls, original = [], module._CommonCaseReplicates.on_cases_outside

    def recorded(self, models, lacking):
        calls.append((len(models), int(lacking.sum())))
        return original(self, models, lacking)

    monkeypatch.setattr(module._CommonCaseReplicates, "on_cases_outside", recorded)
    scores = _many_case_sets()
    bootstrap(scores, _leaves(), n_boot=N_BOOT, seed=SEED)
    lacking = {m: N_CASES - len(df) for m, df in scores.items() if len(df) < N_CASES}
    assert max(n for _, n in calls) <= max(lacking.values())
    assert len(calls) <= len(lacking) + len(lacking) * (len(lacking) - 1) // 2
    assert max(n for n, _ in calls) >= len(scores) - len(lacking)  # the models with every case, at least


def test_comparisons_without_resamples_on_common_cases():
    res = bootstrap({m: _many_case_sets()[m] for m in ("A", "B-0")}, _leaves(), n_boot=0, seed=SEED)
    assert np.isfinite(res.comparisons["delta"]).all()
    assert res.comparisons[["ci_lower", "ci_upper", "p_value"]].isna().all().all()


def test_fixed_point_sums_are_exact():
    """Limbs hold every value exactly, and count-weighted sums of limbs (float64 products) are the exact
    sums of the values, whatever their magnitudes and signs, turned into the nearest float or next to it."""
    from fractions import Fraction

    from radrank.stats.bootstrap import _all_counts, _FixedPoint

    rng = np.random.default_rng(5)
    n = 60
    columns = [rng.random(n), rng.integers(0, 50, n).astype(float),
               rng.normal(0, 3, n) * 10.0 ** rng.integers(-12, 3, n),  # both signs, 14 decades
               np.zeros(n), np.where(rng.random(n) < 0.5, 0.0, rng.random(n) * 1e-9), rng.random(n) * 1e6]
    stats = [np.column_stack(columns), np.column_stack(columns)[::-1] * 0.5]  # two "models"
    fixed = _FixedPoint(stats, n)
    counts = np.vstack([_all_counts(n, 25, 3), np.ones((1, n), dtype="uint8")]).astype("float64")
    for S in stats:
        limbs = fixed.limbs(S)
        assert (limbs == np.trunc(limbs)).all() and (np.abs(limbs) < 2.0 ** fixed.bits).all()
        scale = [Fraction(float(s)) for s in fixed.scale[:, 0]]
        for i in range(n):
            for j in range(S.shape[1]):
                held = sum(Fraction(float(v)) * scale[r] for r, v in enumerate(limbs[i]) if fixed.column[r] == j)
                assert held == Fraction(float(S[i, j]))
        sums = limbs.T @ counts.T  # (limbs, resamples)
        totals = fixed.totals(sums)
        for b in range(counts.shape[0]):
            for j in range(S.shape[1]):
                exact = sum(Fraction(int(c)) * Fraction(float(v)) for c, v in zip(counts[b], S[:, j]))
                held = sum(Fraction(float(sums[r, b])) * scale[r] for r in np.flatnonzero(fixed.column == j))
                assert held == exact
                assert abs(Fraction(float(totals[j, b])) - exact) <= abs(exact) * Fraction(2) ** -52
    n_limbs = _FixedPoint(stats[:1], n).n_limbs
    assert n_limbs[1] == n_limbs[3] == 1 and n_limbs[2] >= 3  # a count, zeros: one limb; 14 decades: more


def test_seed_determines_output():
    scores = _scores({m: PAIRS[m] for m in ("A", "B")}, names=("bleu2",))
    leaves = _leaves(("bleu2",))
    one = bootstrap(scores, leaves, n_boot=N_BOOT, seed=1)
    again = bootstrap(scores, leaves, n_boot=N_BOOT, seed=1)
    other = bootstrap(scores, leaves, n_boot=N_BOOT, seed=2)
    pd.testing.assert_frame_equal(one.replicates, again.replicates)
    pd.testing.assert_frame_equal(one.summary, again.summary)
    pd.testing.assert_frame_equal(one.comparisons, again.comparisons)
    a1 = one.replicates.query("bootstrap >= 0")["value"].to_numpy()
    a2 = other.replicates.query("bootstrap >= 0")["value"].to_numpy()
    assert not np.allclose(a1, a2)
    # point estimates do not depend on the seed
    assert one.replicates.query("bootstrap == -1")["value"].tolist() == \
        other.replicates.query("bootstrap == -1")["value"].tolist()


def test_resample_counts_match_indices():
    idx = resample_indices(13, 600, 4)  # more than one chunk of 256
    counts = np.concatenate(list(resample_counts(13, 600, 4)))
    assert idx.shape == (600, 13) and counts.shape == (600, 13)
    for row, c in zip(idx, counts):
        assert np.bincount(row, minlength=13).tolist() == c.tolist()


@pytest.mark.parametrize("cells", [13, 3 * 13, 7 * 13 + 5, 1 << 17])
def test_resample_counts_are_the_indices_counts_however_the_draws_are_blocked(monkeypatch, cells):
    """The counts are drawn and counted a few rows at a time (COUNT_BLOCK_CELLS draws): every blocking, one row to
    every row at once, counts the very resamples of resample_indices, and _all_counts (the job's matrix, in the
    smallest type) is the same numbers."""
    module = importlib.import_module("radrank.stats.bootstrap")
    monkeypatch.setattr(module, "COUNT_BLOCK_CELLS", cells)
    idx = resample_indices(13, 600, 4)
    expected = np.stack([np.bincount(row, minlength=13) for row in idx])
    assert np.array_equal(np.concatenate(list(resample_counts(13, 600, 4))), expected)
    every = module._all_counts(13, 600, 4)
    assert every.dtype == np.uint8 and np.array_equal(every, expected)


def test_nan_values_are_excluded_from_mean_leaves():
    values = np.array([0.2, np.nan, 0.6, 0.9, np.nan, 0.1, 0.4, 0.8])
    ids = [f"s{i}" for i in range(len(values))]
    scores = {"M": pd.DataFrame({"sample_id": ids, "bleu2": values})}
    res = bootstrap(scores, _leaves(("bleu2",)), n_boot=50, seed=3)
    reps = _replicates(res, "M", "bleu2")
    assert reps[0] == pytest.approx(np.nanmean(values), abs=1e-15)
    idx = resample_indices(len(values), 50, 3)
    for b, row in enumerate(idx):
        drawn = values[row]
        want = np.nanmean(drawn) if np.isfinite(drawn).any() else np.nan
        np.testing.assert_allclose(reps[b + 1], want, rtol=0, atol=1e-12)
    assert np.isfinite(reps).all()


def test_identical_model_has_p_value_one():
    scores = _scores({"A": PAIRS["A"]})
    scores["A copy"] = scores["A"].copy()
    res = bootstrap(scores, _leaves(), n_boot=N_BOOT, seed=SEED)
    assert len(res.comparisons) == 5
    assert res.comparisons["p_value"].tolist() == [1.0] * 5
    assert res.comparisons["delta"].tolist() == [0.0] * 5
    assert res.comparisons["ci_lower"].tolist() == [0.0] * 5 and res.comparisons["ci_upper"].tolist() == [0.0] * 5


def test_level_changes_interval_width():
    scores = _scores({"A": PAIRS["A"], "B": PAIRS["B"]}, names=("bleu2", "bleu4"))
    wide = bootstrap(scores, _leaves(("bleu2", "bleu4")), n_boot=200, seed=SEED, level=0.95)
    narrow = bootstrap(scores, _leaves(("bleu2", "bleu4")), n_boot=200, seed=SEED, level=0.5)
    w = wide.summary.set_index(["model", "metric"])
    n = narrow.summary.set_index(["model", "metric"])
    assert ((w.ci_upper - w.ci_lower) > (n.ci_upper - n.ci_lower)).all()
    # same replicates, only the quantiles move
    assert (w["mean"] == n["mean"]).all() and (n["level"] == 0.5).all()
    reps = _replicates(narrow, "A", "bleu4")[1:]
    assert (n.loc[("A", "bleu4"), "ci_lower"], n.loc[("A", "bleu4"), "ci_upper"]) == \
        pytest.approx(tuple(np.quantile(reps, [0.25, 0.75])), abs=1e-12)
    wc = wide.comparisons.set_index("metric")
    nc = narrow.comparisons.set_index("metric")
    assert ((wc.ci_upper - wc.ci_lower) > (nc.ci_upper - nc.ci_lower)).all()


def _reference_merge(paths):
    """What a model's per-sample frame is by pandas alone: each score file read with pandas.read_parquet, joined
    outer on sample_id (which puts the rows in sample_id order)."""
    merged = pd.read_parquet(paths[0])
    for p in paths[1:]:
        merged = merged.merge(pd.read_parquet(p), on="sample_id", how="outer", validate="one_to_one")
    return merged


@pytest.mark.parametrize("order", ["pairs", "sorted"])
def test_a_models_score_files_merge_as_pandas_joins_them(tmp_path, order):
    """merge_scores (the statistics jobs' reader: one conversion to pandas per model) gives the frame pandas' own
    read and join give, aligned files or not, their ids in the pairs' order or sorted already (then not sorted
    again); the provenance it collects is each file's, as read_provenance reads it."""
    import pyarrow.parquet as pq

    from radrank import io
    from radrank.jobs import merge_scores

    rng = np.random.default_rng(3)
    ids = [f"s{i:03d}" for i in (rng.permutation(50) if order == "pairs" else range(50))]
    first = pd.DataFrame({"sample_id": ids, "bleu2": rng.random(50)})
    second = pd.DataFrame({"sample_id": ids, "bleu4_correct_1": rng.integers(0, 9, 50),
                           "green_explanation": [None if i % 7 == 0 else f"text {i}" for i in range(50)],
                           "green": np.where(np.arange(50) % 5 == 0, np.nan, rng.random(50))})
    paths = [tmp_path / "bleu2.parquet", tmp_path / "green.parquet"]
    for i, (frame, path) in enumerate(zip((first, second), paths)):
        io.write_parquet(frame, path, {"metric": {"name": path.stem, "n": i}})
    merged, collected = merge_scores(paths)
    pd.testing.assert_frame_equal(merged, _reference_merge(paths), check_exact=True)
    assert list(merged["sample_id"]) == sorted(ids)
    assert collected == [io.provenance_of(pq.read_schema(p)) for p in paths] == [
        {"metric": {"name": "bleu2", "n": 0}}, {"metric": {"name": "green", "n": 1}}]
    # another order in one file, a case missing from another: the outer join, as pandas makes it
    io.write_parquet(second.iloc[::-1].iloc[3:], paths[1], {"metric": {"name": "green"}})
    pd.testing.assert_frame_equal(merge_scores(paths)[0], _reference_merge(paths), check_exact=True)
    assert merge_scores(paths)[0].shape == (50, 5)
    # one file alone: as it is
    pd.testing.assert_frame_equal(merge_scores(paths[:1])[0], _reference_merge(paths[:1]), check_exact=True)


def _same_numbers(a, b):
    """Every frame of two bootstrap results equal to the last bit (DataFrame.equals: no tolerance)."""
    assert a.cases == b.cases and a.common_cases == b.common_cases
    for name in ("replicates", "summary", "comparisons", "common_replicates"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None and y is None) or x.equals(y), name


def test_the_replicate_memo_serves_unchanged_models_and_a_worse_resubmission_is_resampled(tmp_path):
    """A model's point estimates and replicates are served from the memo only while its statistics, the resamples
    and the leaves are those they were computed from. The leader, A, resubmits empty-ish reports under its name:
    the memo must not serve its old numbers (it would stay first); it is resampled, every number equals a bootstrap
    without memo, and it drops below B."""
    from radrank.stats.bootstrap import ReplicateMemo

    scores, leaves, folder = _scores(PAIRS), _leaves(), tmp_path / "memo"
    kwargs = dict(n_boot=N_BOOT, seed=SEED, common_to=["A", "B"], common_leaves=["bleu2"])
    memo = ReplicateMemo(folder)
    _same_numbers(bootstrap(scores, leaves, memo=memo, **kwargs), bootstrap(scores, leaves, **kwargs))
    assert (memo.hits, memo.stored) == (0, 3) and len(list(folder.glob("*.npy"))) == 3
    memo = ReplicateMemo(folder)
    _same_numbers(bootstrap(scores, leaves, memo=memo, **kwargs), bootstrap(scores, leaves, **kwargs))
    assert (memo.hits, memo.stored) == (3, 0)

    worse = {**scores, "A": _scores({"A": PAIRS["A"].assign(hypothesis="No.")})["A"]}
    memo = ReplicateMemo(folder)
    served = bootstrap(worse, leaves, memo=memo, **kwargs)
    assert (memo.hits, memo.stored) == (2, 1)
    _same_numbers(served, bootstrap(worse, leaves, **kwargs))
    estimate = served.summary.set_index(["model", "metric"])["estimate"]
    assert estimate["A", "bleu2"] < estimate["B", "bleu2"] < bootstrap(scores, leaves, **kwargs).summary.set_index(
        ["model", "metric"])["estimate"]["A", "bleu2"]
    memo.prune()  # A's old entry goes: one file per model
    assert len(list(folder.glob("*.npy"))) == 3

    # other resamples (seed, number) or other leaves: nothing is served
    for other in (dict(kwargs, seed=SEED + 1), dict(kwargs, n_boot=N_BOOT + 1)):
        memo = ReplicateMemo(folder)
        _same_numbers(bootstrap(worse, leaves, memo=memo, **other), bootstrap(worse, leaves, **other))
        assert memo.hits == 0
    memo = ReplicateMemo(folder)
    bootstrap(worse, _leaves(("bleu2", "rouge")), memo=memo, **kwargs)
    assert memo.hits == 0


def test_a_damaged_memo_entry_is_resampled_and_stray_files_go(tmp_path):
    from radrank.stats.bootstrap import ReplicateMemo

    scores, leaves, folder = _scores(PAIRS), _leaves(), tmp_path / "memo"
    memo = ReplicateMemo(folder)
    bootstrap(scores, leaves, n_boot=N_BOOT, seed=SEED, memo=memo)
    memo.prune()
    entries = sorted(folder.glob("*.npy"))
    entries[0].write_bytes(entries[0].read_bytes()[:100])  # cut short
    np.save(entries[1], np.zeros((2, 2)))  # an array of another shape
    (folder / "stray.txt").write_text("x")
    memo = ReplicateMemo(folder)
    _same_numbers(bootstrap(scores, leaves, n_boot=N_BOOT, seed=SEED, memo=memo),
                  bootstrap(scores, leaves, n_boot=N_BOOT, seed=SEED))
    assert (memo.hits, memo.stored) == (1, 2)
    memo.prune()
    assert sorted(p.name for p in folder.iterdir()) == sorted([p.name for p in entries] + ["comparisons.npz"])


def test_when_the_memo_serves_every_model_of_one_case_set_no_resample_is_drawn(tmp_path, monkeypatch):
    """The resample counts are drawn only when something needs them: with every model served and no pair on
    differing case sets, not at all."""
    from radrank.stats.bootstrap import ReplicateMemo

    module = importlib.import_module("radrank.stats.bootstrap")
    scores, leaves = {m: s for m, s in _scores(PAIRS).items() if m != "C"}, _leaves()  # A and B: the same cases
    want = bootstrap(scores, leaves, n_boot=N_BOOT, seed=SEED, common_to=["A", "B"], memo=ReplicateMemo(tmp_path))

    def drawn(*args):
        raise AssertionError("resample counts drawn")

    monkeypatch.setattr(module, "_all_counts", drawn)
    memo = ReplicateMemo(tmp_path)
    _same_numbers(bootstrap(scores, leaves, n_boot=N_BOOT, seed=SEED, common_to=["A", "B"], memo=memo), want)
    assert memo.hits == 2


def test_the_memo_serves_the_comparisons_of_unchanged_pairs_only(tmp_path):
    """Four models, three with the same cases (A, B, D: 3 pairs compared on all cases; C lacks some). A rerun
    serves those 3 pairs; when D resubmits, only its 2 pairs are computed again; another level, a damaged file:
    none served. Every frame equals a bootstrap without memo each time."""
    from radrank.stats.bootstrap import ReplicateMemo

    rng = random.Random(5)
    shuffled = PAIRS["A"].assign(hypothesis=rng.sample(list(PAIRS["A"]["hypothesis"]), len(PAIRS["A"])))
    scores, leaves, folder = {**_scores(PAIRS), "D": _scores({"D": shuffled})["D"]}, _leaves(), tmp_path / "memo"
    kwargs = dict(n_boot=N_BOOT, seed=SEED)

    def run(scores, **more):
        memo = ReplicateMemo(folder)
        result = bootstrap(scores, leaves, memo=memo, **kwargs, **more)
        _same_numbers(result, bootstrap(scores, leaves, **kwargs, **more))
        memo.prune()
        return memo

    assert run(scores).pairs_served == 0
    assert run(scores).pairs_served == 3
    resubmitted = {**scores, "D": _scores({"D": PAIRS["B"].assign(hypothesis="No acute process.")})["D"]}
    assert run(resubmitted).pairs_served == 1  # (A, B)
    assert run(resubmitted, level=0.9).pairs_served == 0
    assert run(resubmitted, level=0.9).pairs_served == 3
    (folder / "comparisons.npz").write_bytes(b"PK\x03\x04 cut short")
    assert run(resubmitted, level=0.9).pairs_served == 0


def test_a_score_file_on_other_cases_than_the_set_is_refused_whatever_comes_before_it():
    """The statistics job's check that every model's scores cover exactly the case set: a model after others whose
    ids were found right (and skipped when equal to them) is still checked."""
    from radrank.jobs import check_case_set

    cases = pd.Series(["c1", "c2", "c3"], dtype="str")
    full = pd.DataFrame({"sample_id": pd.Series(["c1", "c2", "c3"], dtype="str")})
    check_case_set({"a": full, "b": full.copy(), "c": full.astype(object)}, cases)
    with pytest.raises(RuntimeError, match="model 'b'.* cover 2 cases, 0 outside .* and 1 of it missing"):
        check_case_set({"a": full, "b": full.iloc[:2]}, cases)
    other = pd.DataFrame({"sample_id": pd.Series(["c1", "c2", "x"], dtype="str")})
    with pytest.raises(RuntimeError, match="model 'c'.* 1 outside"):
        check_case_set({"a": full, "b": full.copy(), "c": other}, cases)

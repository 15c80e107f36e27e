"""Agreement between each metric leaf and the human judgements of a set, with bootstrap intervals.

Every metric is oriented first so that higher means better (a lower-is-better leaf such as
RadCliQ is negated), and so is every judgement (an error count is negated), so a positive
correlation and a high rate always mean "agrees with the radiologists".

Measures (the ``measure`` column of agreement.csv; ``_<target>`` is appended for targets other
than ``rating``, e.g. ReXVal's ``kendall_tau_b_total_errors``):

* ``pairwise_agreement`` — over every pair of candidates of the same case whose mean human
  judgements differ (pairs the raters tie on are left out): the share where the metric prefers
  the candidate the raters prefer. A metric tie counts as a disagreement; ``n_ties`` says how many
  there were. ``n`` = pairs compared.
* ``kendall_tau_b`` — Kendall's τ-b between the metric and the mean judgement over all candidates
  (``group`` ``all``), and with each rater's own judgement (``group`` ``rater:<name>``). ``n`` =
  candidates; ``n_ties`` = candidate pairs the metric ties.
* ``pass_rate`` — ranking sets: the share of cases whose every expected relation holds (``a > b``:
  the metric scores a strictly better, so a tie fails; ``a = b``: the scores differ by less than
  ``tie_tolerance`` in the leaf's own units, as in CRIMSON's RadJudge suite), over all cases and per
  category. ``n`` = cases; ``n_ties`` = cases failed by a tie on an ``a > b`` relation.
* ``not_applicable`` — a corpus leaf (e.g. corpus BLEU-4, CheXbert F1) has no value per report, so
  it cannot be compared report by report; it is listed with no estimate rather than left out.

``human_ceiling`` is the raters' agreement with each other, measured the same way: τ-b of each
rater with the mean of the other raters (leave one rater out), averaged over raters for the
``all`` row and that rater's own for a ``rater:`` row; for pairwise agreement, the share of pairs
where a rater prefers the candidate the other raters' mean prefers (rater ties count against),
averaged over raters. It needs two or more raters (NaN otherwise, and for ranking sets).

Intervals: percentile bootstrap over cases (all candidates of a drawn case come along), with the
resample draws of :mod:`radrank.stats.bootstrap` (seeded), the same draws for every metric, so
the paired comparison between two metrics (metric_comparisons.csv) is paired resample by resample:
difference a − b, its interval, and the two-sided p-value 2·min(P*(Δ ≤ 0), P*(Δ ≥ 0)). A candidate
a metric could not score (NaN) is left out of that metric's numbers; ``n`` shows what remains.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from radrank.stats.bootstrap import bootstrap_p_value, percentile_interval, resample_counts, resample_indices
from radrank.stats.ranks import kendall_tau_b, tied_pairs

AGREEMENT_COLUMNS = ("set", "metric", "label", "measure", "group", "estimate", "ci_lower", "ci_upper", "n",
                     "n_ties", "human_ceiling", "headline")
COMPARISON_COLUMNS = ("set", "measure", "group", "metric_a", "label_a", "metric_b", "label_b", "delta",
                      "ci_lower", "ci_upper", "p_value", "n_a", "n_b", "n_bootstrap", "level", "seed")


class _Resampler:
    """The cases of a set, and the seeded resamples of them shared by every metric."""

    def __init__(self, case_of_item: np.ndarray, n_boot: int, seed: int):
        self.n_cases = int(case_of_item.max()) + 1 if case_of_item.size else 0
        self.case_of_item = case_of_item
        self.n_boot = n_boot
        self.items_of_case = [np.flatnonzero(case_of_item == c) for c in range(self.n_cases)]
        self.counts = (np.concatenate(list(resample_counts(self.n_cases, n_boot, seed)))
                       if n_boot else np.zeros((0, self.n_cases)))
        self._indices = resample_indices(self.n_cases, n_boot, seed) if n_boot else None
        self._expanded = None

    def item_draws(self) -> list[np.ndarray]:
        """Per resample, the item positions of the drawn cases (with repeats)."""
        if self._expanded is None:
            self._expanded = [np.concatenate([self.items_of_case[c] for c in row]) for row in self._indices] \
                if self.n_boot else []
        return self._expanded

    def ratio(self, numerator_per_case: np.ndarray, denominator_per_case: np.ndarray):
        """Point estimate and replicates of Σ numerator / Σ denominator over cases."""
        with np.errstate(invalid="ignore", divide="ignore"):
            den = denominator_per_case.sum()
            point = numerator_per_case.sum() / den if den > 0 else np.nan
            reps = (self.counts @ numerator_per_case) / (self.counts @ denominator_per_case)
        return float(point), np.where(np.isfinite(reps), reps, np.nan)

    def tau(self, x: np.ndarray, y: np.ndarray, valid: np.ndarray):
        point = kendall_tau_b(x[valid], y[valid])
        reps = np.array([kendall_tau_b(x[idx], y[idx]) for idx in (d[valid[d]] for d in self.item_draws())])
        return point, reps


def _row(set_name, leaf_name, label, measure, group, point, reps, n, n_ties, ceiling, headline, level):
    lo, hi = percentile_interval(reps, level) if reps is not None and len(reps) else (np.nan, np.nan)
    return {"set": set_name, "metric": leaf_name, "label": label, "measure": measure, "group": group,
            "estimate": point, "ci_lower": lo, "ci_upper": hi, "n": int(n), "n_ties": n_ties,
            "human_ceiling": ceiling, "headline": headline}


def _within_case_pairs(case_of_item: np.ndarray):
    """(i, j) item positions of every pair of candidates of the same case, i < j."""
    left, right = [], []
    for case in np.unique(case_of_item):
        members = np.flatnonzero(case_of_item == case)
        for i, j in combinations(members, 2):
            left.append(i)
            right.append(j)
    return np.array(left, dtype="int64"), np.array(right, dtype="int64")


def _measure_name(base: str, target) -> str:
    return base if target.name == "rating" else f"{base}_{target.name}"


def _ratings_measures(item_set, resampler, case_of_item, leaves_values, set_name, level):
    """Rows and replicates for a ratings set (RadPref, ReXVal, user sets)."""
    items = item_set.items
    rows, reps_by_key = [], {}
    left, right = _within_case_pairs(case_of_item)
    for target in item_set.targets:
        sign = 1.0 if target.higher_is_better else -1.0
        per_rater = {r: sign * items[target.column(r)].to_numpy(dtype="float64") for r in target.raters}
        human = np.mean(np.column_stack(list(per_rater.values())), axis=1)
        many = len(target.raters) >= 2
        others = {r: np.mean(np.column_stack([v for q, v in per_rater.items() if q != r]), axis=1)
                  for r in target.raters} if many else {}
        loro_tau = {r: kendall_tau_b(per_rater[r], others[r]) for r in others}
        ceiling_tau = float(np.nanmean(list(loro_tau.values()))) if loro_tau else np.nan

        pair_sign = np.sign(human[left] - human[right])
        compared = pair_sign != 0
        ceiling_pairs = np.nan
        if many and left.size:
            rates = []
            for r in target.raters:
                o = np.sign(others[r][left] - others[r][right])
                keep = o != 0
                if keep.any():
                    rates.append(np.mean(np.sign(per_rater[r][left] - per_rater[r][right])[keep] == o[keep]))
            ceiling_pairs = float(np.mean(rates)) if rates else np.nan

        pairwise = _measure_name("pairwise_agreement", target)
        tau = _measure_name("kendall_tau_b", target)
        for leaf_name, (label, values) in leaves_values.items():
            valid = np.isfinite(values)
            if compared.any():
                ok = compared & valid[left] & valid[right]
                metric_sign = np.sign(values[left] - values[right])
                agree = (metric_sign == pair_sign) & ok
                ties = (metric_sign == 0) & ok
                pair_case = case_of_item[left]
                num = np.bincount(pair_case, weights=agree, minlength=resampler.n_cases)
                den = np.bincount(pair_case, weights=ok, minlength=resampler.n_cases)
                point, reps = resampler.ratio(num, den)
                reps_by_key[leaf_name, pairwise, "all"] = (point, reps, int(ok.sum()))
                rows.append(_row(set_name, leaf_name, label, pairwise, "all", point, reps, ok.sum(),
                                 int(ties.sum()), ceiling_pairs, item_set.headline == pairwise, level))
            point, reps = resampler.tau(values, human, valid)
            reps_by_key[leaf_name, tau, "all"] = (point, reps, int(valid.sum()))
            rows.append(_row(set_name, leaf_name, label, tau, "all", point, reps, valid.sum(),
                             tied_pairs(values[valid]), ceiling_tau, item_set.headline == tau, level))
            if many:
                for r in target.raters:
                    point, reps = resampler.tau(values, per_rater[r], valid)
                    rows.append(_row(set_name, leaf_name, label, tau, f"rater:{r}", point, reps, valid.sum(),
                                     tied_pairs(values[valid]), loro_tau[r], False, level))
    return rows, reps_by_key


def _ranking_measures(item_set, resampler, case_of_item, leaves_values, set_name, level, tie_tolerance):
    """Rows and replicates for a ranking set (RadJudge)."""
    from radrank.metaeval.items import parse_relations

    items = item_set.items
    n_cases = resampler.n_cases
    first = np.array([resampler.items_of_case[c][0] for c in range(n_cases)])
    categories = items["category"].to_numpy()[first]
    relations = []
    for c in range(n_cases):
        members = resampler.items_of_case[c]
        position = {items["candidate"].iat[i]: i for i in members}
        parsed = parse_relations(items["expected_ranking"].iat[members[0]], position, path="items table",
                                 row=items["case"].iat[members[0]])
        relations.append([(position[a], op, position[b]) for a, op, b in parsed])
    groups = ["all"] + list(dict.fromkeys(g for g in categories if g is not None))
    rows, reps_by_key = [], {}
    for leaf_name, (label, values, raw) in leaves_values.items():
        passed, tied, valid = np.zeros(n_cases), np.zeros(n_cases), np.zeros(n_cases)
        for c, rels in enumerate(relations):
            if not np.isfinite(values[resampler.items_of_case[c]]).all():
                continue
            valid[c] = 1
            ok = True
            for a, op, b in rels:
                if op == ">":
                    ok &= bool(values[a] > values[b])
                    tied[c] = max(tied[c], float(values[a] == values[b]))
                else:
                    ok &= bool(abs(raw[a] - raw[b]) < tie_tolerance)
            passed[c] = float(ok)
        for group in groups:
            mask = valid if group == "all" else valid * (categories == group)
            point, reps = resampler.ratio(passed * mask, mask)
            if group == "all":
                reps_by_key[leaf_name, "pass_rate", group] = (point, reps, int(mask.sum()))
            rows.append(_row(set_name, leaf_name, label, "pass_rate", group, point, reps, mask.sum(),
                             int((tied * mask).sum()), np.nan, group == "all", level))
    return rows, reps_by_key


def evaluate(item_set, scores, leaves, *, n_boot: int = 1000, seed: int = 0, level: float = 0.95,
             tie_tolerance: float = 0.01, metric_of_leaf: dict | None = None):
    """Agreement of every leaf with the set's judgements.

    ``scores``: DataFrame with ``sample_id`` and each leaf's per-sample columns (the merged score
    files). ``leaves``: :class:`~radrank.metrics.base.Leaf` objects. Returns ``(per_item, agreement,
    comparisons)`` DataFrames (see the module docstring for the measures).
    """
    import pandas as pd

    items = item_set.items.reset_index(drop=True)
    merged = items[["sample_id"]].merge(scores, on="sample_id", how="left", validate="one_to_one")
    missing = set(items["sample_id"]) - set(scores["sample_id"])
    if missing:
        raise ValueError(f"set {item_set.name}: {len(missing)} candidates have no score, e.g. {sorted(missing)[:3]}")
    case_codes, _ = pd.factorize(items["case"])
    case_of_item = case_codes.astype("int64")
    resampler = _Resampler(case_of_item, n_boot, seed)
    metric_of_leaf = metric_of_leaf or {}

    def label_of(leaf):
        fitted = metric_of_leaf.get(leaf.name) in item_set.fitted_metrics
        return f"{leaf.label} ({item_set.fitted_note})" if fitted and item_set.fitted_note else leaf.label

    per_item = items.copy()
    for target in item_set.targets:
        per_item[target.name] = items[target.columns].mean(axis=1)
    applicable, not_applicable = {}, []
    for leaf in leaves:
        if not leaf.is_mean:
            not_applicable.append(leaf)
            continue
        raw = merged[leaf.column].to_numpy(dtype="float64")
        oriented = raw if leaf.higher_is_better else -raw
        applicable[leaf.name] = (label_of(leaf), oriented, raw)
        if leaf.name in per_item.columns:
            raise ValueError(f"leaf {leaf.name!r} has the name of an item column")
        per_item[leaf.name] = raw

    if item_set.kind == "ranking":
        rows, reps = _ranking_measures(item_set, resampler, case_of_item, applicable, item_set.name, level,
                                       tie_tolerance)
    else:
        rows, reps = _ratings_measures(item_set, resampler, case_of_item,
                                       {k: (lab, v) for k, (lab, v, _) in applicable.items()}, item_set.name, level)
    for leaf in not_applicable:
        rows.append({"set": item_set.name, "metric": leaf.name, "label": label_of(leaf), "measure": "not_applicable",
                     "group": "all", "estimate": np.nan, "ci_lower": np.nan, "ci_upper": np.nan, "n": len(items),
                     "n_ties": None, "human_ceiling": np.nan, "headline": False})
    agreement = pd.DataFrame(rows, columns=list(AGREEMENT_COLUMNS))
    agreement["n_ties"] = agreement["n_ties"].astype("Int64")
    agreement["headline"] = agreement["headline"].astype(bool)

    comparisons = []
    labels = {name: lab for name, (lab, *_) in applicable.items()}
    measures = list(dict.fromkeys((m, g) for _, m, g in reps))
    for measure, group in measures:
        for a, b in combinations(list(applicable), 2):
            point_a, reps_a, n_a = reps[a, measure, group]
            point_b, reps_b, n_b = reps[b, measure, group]
            deltas = reps_a - reps_b
            lo, hi = percentile_interval(deltas, level) if n_boot else (np.nan, np.nan)
            comparisons.append({"set": item_set.name, "measure": measure, "group": group, "metric_a": a,
                                "label_a": labels[a], "metric_b": b, "label_b": labels[b],
                                "delta": point_a - point_b, "ci_lower": lo, "ci_upper": hi,
                                "p_value": bootstrap_p_value(deltas) if n_boot else np.nan, "n_a": n_a, "n_b": n_b,
                                "n_bootstrap": n_boot, "level": level, "seed": seed})
    return per_item, agreement, pd.DataFrame(comparisons, columns=list(COMPARISON_COLUMNS))
